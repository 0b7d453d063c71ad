/* Error checking (and the grid size of grid-stride loops) for CUDA translation units whose functions report
 * failures as (return 1, message in `err` of `cap` bytes): every CUDA
 * runtime and cuBLAS call goes through CUDA_TRY / BLAS_TRY, and the
 * message names the call and gives the library's own text. */
#ifndef NTKD_CUDA_TRY_H
#define NTKD_CUDA_TRY_H

#include <cuda_runtime.h>
#include <stdio.h>

#include "backend/cuda/cublas_dl.h"

static inline int ntk_cuda_fail(char *err, size_t cap, const char *what, const char *why) {
  snprintf(err, cap, "%s: %s", what, why);
  return 1;
}

#define CUDA_TRY(call)                                                                        \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) return ntk_cuda_fail(err, cap, #call, cudaGetErrorString(e_));     \
  } while (0)
#define BLAS_TRY(call)                                                                        \
  do {                                                                                        \
    cublasStatus_t s_ = (call);                                                               \
    if (s_ != CUBLAS_STATUS_SUCCESS) return ntk_cuda_fail(err, cap, #call, ntk_cublas_status_name(s_)); \
  } while (0)

/* Blocks of 256 threads for a grid-stride loop over n items (capped at
 * 65535 blocks, at least 1). */
static inline unsigned ntk_cuda_blocks(size_t n) {
  size_t b = (n + 255) / 256;
  return (unsigned)(b > 65535 ? 65535 : (b ? b : 1));
}

#endif
