/* CNN kernels under CUDA: the kernel bodies of src/kernels/cnn_dev_impl.h
 * as __global__ functions, 256 threads per block, and the executor that
 * src/backend/cuda/cnn_gpu.c drives (device memory from plain cudaMalloc calls,
 * sized by the tile; every call checked, with CUDA's own message).
 * Compiled with --fmad=false like fc_cuda.cu: the maps then round as the
 * CPU's, so a pair with itself keeps its exact angle of 0.
 * The development machine has no GPU: tests/test_cnn_gpu.c runs the same
 * kernel bodies in the host emulation, and test_backend and
 * scripts/gpu_check.sh run these on a GPU (docs/GPU.md, "Measured"). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_try.h"

extern "C" {
#include "backend/cuda/cnn_gpu.h"
#include "kernels/kernel_maps.h"
}

#define DEV __device__
#define BLK_SYNC(B) __syncthreads()
#define EACH_PRECISION_FILE "kernels/cnn_dev_impl.h"
#include "kernels/each_precision.h"

#define NTK_CUDA_THREADS 256

#define BLK {blockIdx.x, blockIdx.y, gridDim.x, threadIdx.x, blockDim.x, NULL}

/* The kernels, per precision: k_diag_f, k_slice_f, ..., k_slice3_f<WT, CAP>
 * and the _d ones. */
#define EACH_PRECISION_FILE "backend/cuda/cnn_cuda_impl.h"
#include "kernels/each_precision.h"

typedef void (*kernel_fn)(struct ntk_dev_args);

/* SLICE3's variant: 0 to 3 (the NTK, the capture), plus 4 for the kernels
 * held to 64 registers, 4 blocks a multiprocessor (k_slice3_b4). */
static int slice3_variant(const struct ntk_dev_args *a, int b4) {
  return (a->with_t ? 1 : 0) + (a->capture ? 2 : 0) + (b4 ? 4 : 0);
}

static kernel_fn pick(int kernel, int elem, const struct ntk_dev_args *a, int b4) {
  static const kernel_fn f[NTK_K_COUNT] = {k_diag_f, k_slice_f, k_input_full_f, k_conv_full_f, k_pool_full_f,
                                           k_readout_f, NULL, k_branch_full_f, k_diag_any_f, k_slice_any_f};
  static const kernel_fn d[NTK_K_COUNT] = {k_diag_d, k_slice_d, k_input_full_d, k_conv_full_d, k_pool_full_d,
                                           k_readout_d, NULL, k_branch_full_d, k_diag_any_d, k_slice_any_d};
  static const kernel_fn f3[8] = {k_slice3_f<0, 0>,    k_slice3_f<1, 0>,    k_slice3_f<0, 1>,    k_slice3_f<1, 1>,
                                  k_slice3_b4_f<0, 0>, k_slice3_b4_f<1, 0>, k_slice3_b4_f<0, 1>, k_slice3_b4_f<1, 1>};
  static const kernel_fn d3[8] = {k_slice3_d<0, 0>,    k_slice3_d<1, 0>,    k_slice3_d<0, 1>,    k_slice3_d<1, 1>,
                                  k_slice3_b4_d<0, 0>, k_slice3_b4_d<1, 0>, k_slice3_b4_d<0, 1>, k_slice3_b4_d<1, 1>};
  if (kernel < 0 || kernel >= NTK_K_COUNT) return NULL;
  if (kernel == NTK_K_SLICE3) {
    int v = slice3_variant(a, b4);
    return elem == 4 ? f3[v] : d3[v];
  }
  return elem == 4 ? f[kernel] : d[kernel];
}

struct cuda_exec {
  int device;
  int sync_each;                     /* NTKD_GPU_SYNC: wait for each kernel, so a fault names it */
  int slice3_b4;                     /* SLICE3 held to 64 registers (k_slice3_b4) */
  size_t smem_set[NTK_K_COUNT][2][8]; /* dynamic shared memory opted in, per kernel, precision and variant */
};

static const char *const kernel_names[NTK_K_COUNT] = {"DIAG kernel", "SLICE kernel", "INPUT_FULL kernel",
                                                      "CONV_FULL kernel", "POOL_FULL kernel", "READOUT kernel",
                                                      "SLICE3 kernel", "BRANCH_FULL kernel", "DIAG (any map) kernel",
                                                      "SLICE (any map) kernel"};

static int cu_alloc(void *ctx, void **p, size_t bytes, char *err, size_t cap) {
  *p = NULL;
  CUDA_TRY(cudaSetDevice(((struct cuda_exec *)ctx)->device));
  CUDA_TRY(cudaMalloc(p, bytes ? bytes : 1));
  return 0;
}

static void cu_release(void *ctx, void *p) {
  (void)ctx;
  if (p) cudaFree(p);
}

static int cu_put(void *ctx, void *dev, const void *host, size_t bytes, char *err, size_t cap) {
  CUDA_TRY(cudaSetDevice(((struct cuda_exec *)ctx)->device));
  CUDA_TRY(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
  return 0;
}

/* Waits for the kernels before it; a fault in one surfaces here, named
 * after this copy (NTKD_GPU_SYNC=1 makes each launch wait and name its
 * kernel instead). */
static int cu_get(void *ctx, void *host, const void *dev, size_t bytes, char *err, size_t cap) {
  CUDA_TRY(cudaSetDevice(((struct cuda_exec *)ctx)->device));
  CUDA_TRY(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
  return 0;
}

static int cu_zero(void *ctx, void *dev, size_t bytes, char *err, size_t cap) {
  CUDA_TRY(cudaSetDevice(((struct cuda_exec *)ctx)->device));
  CUDA_TRY(cudaMemset(dev, 0, bytes));
  return 0;
}

static int cu_launch(void *ctx, int kernel, int elem, unsigned gx, unsigned gy, size_t smem,
                     const struct ntk_dev_args *a, char *err, size_t cap) {
  struct cuda_exec *c = (struct cuda_exec *)ctx;
  int b4 = c->slice3_b4;
  kernel_fn fn = pick(kernel, elem, a, b4);
  if (!fn) return ntk_cuda_fail(err, cap, "cnn kernel launch", "unknown kernel");
  CUDA_TRY(cudaSetDevice(c->device));
  int variant = kernel == NTK_K_SLICE3 ? slice3_variant(a, b4) : 0;
  size_t *set = &c->smem_set[kernel][elem == 8][variant];
  if (smem > 48 * 1024 && smem > *set) { /* above the default: opt in (up to the device's optin limit) */
    CUDA_TRY(cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    *set = smem;
  }
  fn<<<dim3(gx, gy), NTK_CUDA_THREADS, smem>>>(*a);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess && c->sync_each) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return ntk_cuda_fail(err, cap, kernel_names[kernel], cudaGetErrorString(e));
  return 0;
}

extern "C" int ntk_gpu_exec_cuda(struct ntk_gpu_exec *ex, int device, char *err, size_t cap) {
  memset(ex, 0, sizeof *ex);
  int optin = 0;
  size_t free_b = 0, total_b = 0;
  CUDA_TRY(cudaSetDevice(device));
  CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
  struct cuda_exec *c = (struct cuda_exec *)calloc(1, sizeof *c);
  if (!c) return ntk_cuda_fail(err, cap, "ntk_gpu_exec_cuda", "out of memory");
  c->device = device;
  c->sync_each = getenv("NTKD_GPU_SYNC") && atoi(getenv("NTKD_GPU_SYNC")) > 0;
  /* SLICE3's blocks per multiprocessor: 4 (64 registers), measured
   * faster in both precisions (docs/GPU.md); NTKD_GPU_SLICE3_BLOCKS=3
   * runs the 80-register kernels (for comparisons). */
  const char *sb = getenv("NTKD_GPU_SLICE3_BLOCKS");
  c->slice3_b4 = !(sb && atoi(sb) == 3);
  ex->ctx = c;
  ex->name = "cuda";
  ex->threads = NTK_CUDA_THREADS;
  ex->smem_max = (size_t)optin;
  /* The free memory, from which cnn_gpu.c sizes the job-wide image and
   * variance cache and the batches; a tile's batch buffers at most 16 GiB
   * (a larger batch gains nothing once the grid fills the device). */
  size_t top = (size_t)16 << 30;
  ex->mem_free = free_b;
  ex->mem_budget = free_b < top ? free_b : top;
  ex->alloc = cu_alloc;
  ex->release = cu_release;
  ex->put = cu_put;
  ex->get = cu_get;
  ex->zero = cu_zero;
  ex->launch = cu_launch;
  return 0;
}

extern "C" void ntk_gpu_exec_cuda_free(struct ntk_gpu_exec *ex) {
  if (!ex) return;
  free(ex->ctx);
  ex->ctx = NULL;
}
