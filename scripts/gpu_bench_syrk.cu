/* The floor for a fully-connected kernel job on a GPU: one cublasSsyrk of
 * the whole N x d data (N^2 d flops), timed with CUDA events after a
 * warm-up. scripts/gpu_check.sh compares ntkd's FC job with it.
 *   ntkd_gpu_bench_syrk N D   -> prints "syrk N D SECONDS GFLOPS" */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(call)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {                                                      \
      fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));                 \
      return 1;                                                                   \
    }                                                                             \
  } while (0)
#define CB(call)                                                                  \
  do {                                                                            \
    cublasStatus_t s_ = (call);                                                   \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                            \
      fprintf(stderr, "%s: cuBLAS status %d\n", #call, (int)s_);                  \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

__global__ static void fill(float *x, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s N D\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[1]), d = atoi(argv[2]);
  float *x, *c, alpha = 1.0f / (float)d, beta = 0.0f;
  CK(cudaMalloc(&x, (size_t)n * d * sizeof *x));
  CK(cudaMalloc(&c, (size_t)n * n * sizeof *c));
  fill<<<1024, 256>>>(x, (size_t)n * d);
  CK(cudaGetLastError());
  cublasHandle_t h;
  CB(cublasCreate(&h));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CB(cublasSsyrk(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, n, d, &alpha, x, d, &beta, c, n)); /* warm-up */
  CK(cudaEventRecord(a));
  CB(cublasSsyrk(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, n, d, &alpha, x, d, &beta, c, n));
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  printf("syrk %d %d %.6f %.1f\n", n, d, ms / 1e3, (double)n * n * d / (ms / 1e3) / 1e9);
  cublasDestroy(h);
  cudaFree(x);
  cudaFree(c);
  return 0;
}
