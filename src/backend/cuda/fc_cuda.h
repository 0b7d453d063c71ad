/* Fully-connected NNGP/NTK tiles on a GPU: cuBLAS for the input covariance
 * of the tile, one CUDA kernel for all layer maps (the same scalar maps as
 * the CPU, src/kernels/kernel_maps.h). C interface of fc_cuda.cu; only
 * compiled and used with NTKD_HAVE_CUDA. Every call returns 0, or 1 with
 * the failing call and CUDA's or cuBLAS's own message in err. */
#ifndef NTKD_FC_CUDA_H
#define NTKD_FC_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "base/tiling.h"

struct ntk_fc_entry_layer; /* src/kernels/fc_entry.h */
typedef struct ntk_fc_gpu ntk_fc_gpu_t;

/* On GPU `device`: copies the nl layers (ntk_fc_entry_layers), the n x d
 * data, the (nl + 1) x n per-sample variances (elements of `elem`
 * bytes, as ntk_fc_create made them) and the n twins (ntk_fc_twins; NULL
 * when every row differs). Tile buffers are allocated by the first tile,
 * sized by it. */
int ntk_fc_gpu_create(int device, const struct ntk_fc_entry_layer *layers, size_t nl, size_t n, size_t d, int elem,
                      const void *x, const void *var, const size_t *twin, ntk_fc_gpu_t **out, char *err, size_t cap);

/* Tile t into host buffers nngp and (unless NULL) ntk, rows x cols
 * row-major; returns once both are filled (the buffers may be pinned, from
 * ntk_fc_gpu_host_alloc, or not). Diagonal entries of diagonal tiles are
 * the variances and diagonal tiles are exactly symmetric, as on the CPU
 * (a diagonal tile is computed on its lower triangle: syrk, then the
 * layer maps on j <= i, mirrored). */
int ntk_fc_gpu_tile(ntk_fc_gpu_t *g, const struct ntk_tile *t, void *nngp, void *ntk, char *err, size_t cap);

/* Pinned (page-locked) host memory on `device` for tile buffers, so that
 * the copies back are DMA: NULL on failure (the caller falls back to
 * malloc). ntk_fc_gpu_host_free accepts NULL. */
void *ntk_fc_gpu_host_alloc(int device, size_t bytes);
void ntk_fc_gpu_host_free(void *p);

/* Frees every device allocation; accepts NULL. */
void ntk_fc_gpu_free(ntk_fc_gpu_t *g);

#ifdef __cplusplus
}
#endif

#endif
