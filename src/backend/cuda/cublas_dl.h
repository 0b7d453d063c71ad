/* cuBLAS loaded with dlopen when a GPU rank starts, so that ntkd never
 * needs CUDA's libraries on a machine without a GPU (the CUDA runtime is
 * linked statically). Shared by the GPU tile backend and GPU training.
 * CUDA translation units only. */
#ifndef NTKD_CUBLAS_DL_H
#define NTKD_CUBLAS_DL_H

#include <cublas_v2.h> /* types only: cuBLAS itself is loaded with dlopen */
#include <cuda_runtime.h>
#include <stddef.h>

struct ntk_cublas {
  void *lib;
  cublasStatus_t (*create)(cublasHandle_t *);
  cublasStatus_t (*destroy)(cublasHandle_t);
  cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *,
                          const float *, int, const float *, int, const float *, float *, int);
  cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t); /* NULL if absent */
  cublasStatus_t (*dgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const double *,
                          const double *, int, const double *, int, const double *, double *, int);
  /* C = alpha op(A) op(A)^T + beta C on one triangle (diagonal tiles, the benchmark's floor). */
  cublasStatus_t (*ssyrk)(cublasHandle_t, cublasFillMode_t, cublasOperation_t, int, int, const float *, const float *,
                          int, const float *, float *, int);
  cublasStatus_t (*dsyrk)(cublasHandle_t, cublasFillMode_t, cublasOperation_t, int, int, const double *,
                          const double *, int, const double *, double *, int);
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*get_version)(cublasHandle_t, int *);
};

/* Load libcublas and its entry points: first the soname of the CUDA major
 * version this binary's runtime carries (a cuBLAS of a newer major loads
 * but fails cublasCreate on a driver too old for it), then the others,
 * newest first. 0 on success;
 * otherwise 1 with every failed dlopen's message (one per soname tried) or
 * the missing symbol in err. */
int ntk_cublas_load(struct ntk_cublas *b, char *err, size_t cap);

/* cuBLAS's name for a status code ("CUBLAS_STATUS_ALLOC_FAILED", ...). */
const char *ntk_cublas_status_name(cublasStatus_t s);

#endif
