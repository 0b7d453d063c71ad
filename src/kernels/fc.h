/* Fully-connected kernels on the CPU: the input covariance of a tile from
 * BLAS, then the layer maps applied pointwise. MPI-free, no I/O. */
#ifndef NTKD_FC_H
#define NTKD_FC_H

#include <stddef.h>

#include "kernels/arch.h"
#include "kernels/dataset.h"
#include "base/status.h"
#include "base/stop.h"
#include "base/tiling.h"

/* Rows of the fixed blocks in which the input covariance is computed. Every
 * entry comes from the same BLAS call shape wherever its tile lies, which
 * is what makes the matrix bit-identical for any tile size. Tiles whose
 * edge is a multiple of it waste no work. */
#define NTK_GRAM_BLOCK 512

typedef struct ntk_fc ntk_fc_t;

/* Whether `arch` computes on `data` as a fully-connected network (and its
 * widths agree): what ntk_fc_create refuses, without its per-sample work.
 * NTK_ECONFIG with the reason. Pure. */
ntk_status ntk_fc_check(const struct ntk_arch *arch, const struct ntk_dataset *data);

/* Per-sample variances before every layer, computed once: O(N * layers).
 * `arch`, `data` and `stop` (may be NULL) must outlive the plan; the
 * plan and its tiles poll stop's flags (per layer; per block of the input
 * covariance and per band of rows of each layer in a tile) and count a
 * tile's finished entries into it. NTK_EINTERRUPTED when a flag is seen.
 * Rank-local. */
ntk_status ntk_fc_create(const struct ntk_arch *arch, const struct ntk_dataset *data, const struct ntk_stop *stop,
                         ntk_fc_t **out);
void ntk_fc_free(ntk_fc_t *fc);

/* Compute tile t: nngp (and ntk unless NULL), rows x cols, row-major, in the
 * data's precision. Diagonal tiles are exactly symmetric. NTK_EINTERRUPTED
 * (the values then garbage) when the plan's stop flag is seen. */
ntk_status ntk_fc_tile(ntk_fc_t *fc, const struct ntk_tile *t, void *nngp, void *ntk);

/* All of them: (arch->n + 1) x n values in the data's precision, row l
 * before layer l (a GPU backend copies them to the device). */
const void *ntk_fc_variances(const ntk_fc_t *fc);

/* Per sample, the first sample whose input row is equal to its own as
 * values, or is its negation (itself if none); NULL when every row differs
 * and none is another's negation. A negation has NTK_TWIN_NEGATED set
 * (ntk_twin_relation, kernels/fc_entry.h, compares two). An equal pair's
 * input covariance is the sample's variance, as on the diagonal, a negated
 * pair's its negation (the GPU backend copies them to the device). */
const size_t *ntk_fc_twins(const ntk_fc_t *fc);

/* The top bit of a twin: the row is the negation of the twin's. */
#define NTK_TWIN_NEGATED ((size_t)1 << (sizeof(size_t) * 8 - 1))

/* The same from the data alone: *out the n twins (the caller frees them),
 * or NULL when every row differs. The job identity asks it. */
ntk_status ntk_fc_data_twins(const struct ntk_dataset *ds, size_t **out);

/* Per-sample variance of sample i before layer l (l = arch->n: the output). */
double ntk_fc_variance(const ntk_fc_t *fc, size_t l, size_t i);

#endif
