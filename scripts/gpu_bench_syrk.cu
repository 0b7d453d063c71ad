/* Floors measured on the GPU, for scripts/gpu_check.sh:
 *   ntkd_gpu_bench_syrk versions -> the driver, the runtime this binary
 *     carries and the cuBLAS it loads, one "key value" line each, and a
 *     plain sentence when the driver is older than the runtime needs; exit
 *     0 when the runtime can use the driver, 1 when not (no GPU, too old).
 *   ntkd_gpu_bench_syrk N D   -> "syrk N D SECONDS GFLOPS": one cublasSsyrk
 *     of the whole N x d data (N^2 d flops), timed with CUDA events after a
 *     warm-up; ntkd's FC job is compared with it.
 *   ntkd_gpu_bench_syrk peak  -> "peak GFLOPS": float32 FMAs in registers
 *     (8 independent chains per thread, every SM full), the fp32 peak the
 *     CNN kernels are measured against.
 * cuBLAS is loaded with dlopen (src/backend/cuda/cublas_dl.cu) as in ntkd, and the
 * runtime is linked statically: this binary starts without any CUDA
 * library and says which one is missing. */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cublas_dl.h"

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
      fprintf(stderr, "%s: %s\n", #call, ntk_cublas_status_name(s_));              \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

__global__ static void fill(float *x, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
}

/* 8 independent FMA chains per thread: 16 flops per step. */
__global__ static void fma_chains(float *out, int steps) {
  float a = 1.0f + threadIdx.x * 1e-7f, b = 0.999999f, c = 1e-7f;
  float x0 = a, x1 = a + 1, x2 = a + 2, x3 = a + 3, x4 = a + 4, x5 = a + 5, x6 = a + 6, x7 = a + 7;
  for (int i = 0; i < steps; i++) {
    x0 = x0 * b + c;
    x1 = x1 * b + c;
    x2 = x2 * b + c;
    x3 = x3 * b + c;
    x4 = x4 * b + c;
    x5 = x5 * b + c;
    x6 = x6 * b + c;
    x7 = x7 * b + c;
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}

static int peak(void) {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int blocks = sms * 8, threads = 256, steps = 1 << 16;
  float *out;
  CK(cudaMalloc(&out, (size_t)blocks * threads * sizeof *out));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  fma_chains<<<blocks, threads>>>(out, 1024); /* warm-up */
  CK(cudaEventRecord(a));
  fma_chains<<<blocks, threads>>>(out, steps);
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  CK(cudaGetLastError());
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  printf("peak %.1f\n", 16.0 * steps * (double)blocks * threads / (ms / 1e3) / 1e9);
  cudaFree(out);
  return 0;
}

/* CUDA's version numbers are 1000 major + 10 minor. */
static void ver(char *buf, size_t cap, int v) { snprintf(buf, cap, "%d.%d", v / 1000, v % 1000 / 10); }

static int versions(void) {
  int drv = 0, rt = 0, n = 0;
  char a[16], b[16];
  cudaError_t ed = cudaDriverGetVersion(&drv), er = cudaRuntimeGetVersion(&rt);
  ver(a, sizeof a, rt);
  printf("runtime %d %s%s%s\n", rt, a, er ? " error: " : "", er ? cudaGetErrorString(er) : "");
  ver(b, sizeof b, drv);
  if (ed != cudaSuccess || drv == 0)
    printf("driver 0 none (%s)\n", ed ? cudaGetErrorString(ed) : "no libcuda.so.1: no NVIDIA driver loaded");
  else
    printf("driver %d %s\n", drv, b);
  cudaError_t ec = cudaGetDeviceCount(&n);
  printf("devices %d%s%s\n", ec ? 0 : n, ec ? " error: " : "", ec ? cudaGetErrorString(ec) : "");
  int ok = ec == cudaSuccess && n > 0;
  if (drv && drv / 1000 < rt / 1000)
    printf("MISMATCH: the driver supports CUDA %s, this build's runtime is CUDA %s: insufficient driver; build "
           "with the CUDA 12 toolchain (scripts/gpu_bundle.sh) or update the driver\n", b, a);
  else if (drv && drv < rt)
    printf("note: the driver supports CUDA %s, this build's runtime is CUDA %s: a newer minor version of the "
           "same major, which CUDA's minor version compatibility runs\n", b, a);
  struct ntk_cublas cb;
  char err[2048];
  if (ntk_cublas_load(&cb, err, sizeof err)) {
    printf("cublas none (%s)\n", err);
    return ok ? 0 : 1;
  }
  Dl_info info;
  const char *path = dladdr((void *)cb.create, &info) && info.dli_fname ? info.dli_fname : "?";
  cublasHandle_t h;
  int cv = 0;
  if (!ok) {
    printf("cublas loaded %s (no handle without a device: version unknown)\n", path);
    return 1;
  }
  cublasStatus_t cs = cb.create(&h);
  if (cs != CUBLAS_STATUS_SUCCESS) {
    /* A cuBLAS of a newer CUDA than the driver loads and fails here. */
    printf("cublas loaded %s, but cublasCreate failed: %s\n", path, ntk_cublas_status_name(cs));
    return 1;
  }
  cb.get_version(h, &cv);
  cb.destroy(h);
  printf("cublas %d %d.%d.%d %s\n", cv, cv / 10000, cv / 100 % 100, cv % 100, path);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "versions")) return versions();
  if (argc == 2 && !strcmp(argv[1], "peak")) return peak();
  if (argc != 3) {
    fprintf(stderr, "usage: %s versions | peak | N D\n", argv[0]);
    return 2;
  }
  struct ntk_cublas cb;
  char err[2048];
  if (ntk_cublas_load(&cb, err, sizeof err)) {
    fprintf(stderr, "cuBLAS: %s\n", err);
    return 1;
  }
  int n = atoi(argv[1]), d = atoi(argv[2]);
  float *x, *c, alpha = 1.0f / (float)d, beta = 0.0f;
  CK(cudaMalloc(&x, (size_t)n * d * sizeof *x));
  CK(cudaMalloc(&c, (size_t)n * n * sizeof *c));
  fill<<<1024, 256>>>(x, (size_t)n * d);
  CK(cudaGetLastError());
  cublasHandle_t h;
  CB(cb.create(&h));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CB(cb.ssyrk(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, n, d, &alpha, x, d, &beta, c, n)); /* warm-up */
  CK(cudaEventRecord(a));
  CB(cb.ssyrk(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, n, d, &alpha, x, d, &beta, c, n));
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  printf("syrk %d %d %.6f %.1f\n", n, d, ms / 1e3, (double)n * n * d / (ms / 1e3) / 1e9);
  cb.destroy(h);
  cudaFree(x);
  cudaFree(c);
  return 0;
}
