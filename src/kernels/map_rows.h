/* The vectorised loop of every nonlinearity (src/kernels/map_rows.c), for
 * the engines that apply a map to many entries at once: the FC tiles, the
 * batched CNN kernels and the pair-by-pair CNN paths. Pure; no I/O. */
#ifndef NTKD_MAP_ROWS_H
#define NTKD_MAP_ROWS_H

#include <stddef.h>

#include "kernels/kernel_maps.h"

/* Map m on rows x cols entries g[i * cols + j] and, unless t is NULL,
 * multiply t[i * cols + j] by the map's tdot. Row i pairs variance
 * qa[i] (and its ntk_rsqrt ra[i]) with qb[i * qb_row + j] (rb alike):
 * qb_row = 0 for one set of column variances (an FC tile), the lane
 * stride for the batched CNN kernels. Every entry gets the bits of
 * ntk_mapf / ntk_map on the same inputs, whichever CPU clone runs. */
void ntk_map_rows_f(const struct ntk_map *restrict m, float *restrict g, float *restrict t, size_t rows, size_t cols,
                    const float *restrict qa, const float *restrict ra, const float *restrict qb,
                    const float *restrict rb, size_t qb_row);
void ntk_map_rows_d(const struct ntk_map *restrict m, double *restrict g, double *restrict t, size_t rows,
                    size_t cols, const double *restrict qa, const double *restrict ra, const double *restrict qb,
                    const double *restrict rb, size_t qb_row);

/* Map m on n entries g[k], each with its own pair of variances: qa[k]
 * with qb[k] (ra, rb their ntk_rsqrt); t as above. The pair-by-pair CNN
 * paths. The bits of ntk_mapf / ntk_map, whichever CPU clone runs. */
void ntk_map_pairs_f(const struct ntk_map *restrict m, float *restrict g, float *restrict t, size_t n,
                     const float *restrict qa, const float *restrict ra, const float *restrict qb,
                     const float *restrict rb);
void ntk_map_pairs_d(const struct ntk_map *restrict m, double *restrict g, double *restrict t, size_t n,
                     const double *restrict qa, const double *restrict ra, const double *restrict qb,
                     const double *restrict rb);

#endif
