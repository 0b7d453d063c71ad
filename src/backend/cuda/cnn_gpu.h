/* CNN tiles on a GPU: the order of kernel launches, the batching of a
 * tile's pairs and the device buffers, written once over an executor that
 * is either CUDA (src/backend/cuda/cnn_cuda.cu) or a host emulation that
 * runs the same kernel bodies with threads and barriers (for the tests,
 * where there is no GPU). MPI-free, no I/O. */
#ifndef NTKD_CNN_GPU_H
#define NTKD_CNN_GPU_H

#include <stddef.h>

#include "kernels/cnn_dev.h"
#include "base/tiling.h"

/* Where the kernels run. Every call returns 0, or 1 with the failing call
 * and the library's own message in err. */
struct ntk_gpu_exec {
  void *ctx;
  const char *name;     /* "cuda", "host emulation" */
  unsigned threads;     /* per block */
  size_t smem_max;      /* bytes of shared memory a block may have */
  size_t mem_budget;    /* bytes the batch buffers of a tile may take at most */
  size_t mem_free;      /* bytes free on the device at start-up (0: unknown, taken as 2 mem_budget) */
  int (*alloc)(void *ctx, void **p, size_t bytes, char *err, size_t cap);
  void (*release)(void *ctx, void *p); /* accepts NULL */
  int (*put)(void *ctx, void *dev, const void *host, size_t bytes, char *err, size_t cap);
  int (*get)(void *ctx, void *host, const void *dev, size_t bytes, char *err, size_t cap);
  int (*zero)(void *ctx, void *dev, size_t bytes, char *err, size_t cap);
  /* Kernel NTK_K_* on a gx x gy grid with `smem` bytes of shared memory per
   * block; elem: 4 or 8. May return before the kernel ends. */
  int (*launch)(void *ctx, int kernel, int elem, unsigned gx, unsigned gy, size_t smem, const struct ntk_dev_args *a,
                char *err, size_t cap);
};

/* The host emulation with `threads` threads per block (1: plain loops). */
void ntk_gpu_exec_host(struct ntk_gpu_exec *ex, unsigned threads);
/* The host emulation's SLICE3 strips since the last call, per layer, by
 * path (for the tests): n[0] the fast path in one slice, n[1] the fast
 * path across the row between two slices, n[2] cell by cell. */
void ntk_gpu_host_slice3_paths(unsigned long n[3]);

/* The CUDA executor on GPU `device` (src/backend/cuda/cnn_cuda.cu, only in
 * builds with NTKD_HAVE_CUDA); free it after the ntk_cnn_gpu_t using it. */
int ntk_gpu_exec_cuda(struct ntk_gpu_exec *ex, int device, char *err, size_t cap);
void ntk_gpu_exec_cuda_free(struct ntk_gpu_exec *ex);

typedef struct ntk_cnn_gpu ntk_cnn_gpu_t;

/* Plan `arch` on `data` (float32 or float64) for `ex`. NTK_ECONFIG when
 * the network is not one the kernels compute or a block would need more
 * shared memory than the device gives (the message says how much). */
ntk_status ntk_cnn_gpu_create(const struct ntk_gpu_exec *ex, const struct ntk_arch *arch,
                              const struct ntk_dataset *data, ntk_cnn_gpu_t **out);

/* Fill tile t (rows x cols, row-major, host buffers; ntk may be NULL).
 * Each image's variances are computed on the device, for the tile's images.
 * Diagonal tiles are exactly symmetric. */
ntk_status ntk_cnn_gpu_tile(ntk_cnn_gpu_t *g, const struct ntk_tile *t, void *nngp, void *ntk);

void ntk_cnn_gpu_free(ntk_cnn_gpu_t *g); /* accepts NULL; frees every device buffer */

#endif
