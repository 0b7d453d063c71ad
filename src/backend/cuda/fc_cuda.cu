/* Fully-connected NNGP/NTK tiles on a GPU (see fc_cuda.h): the tile's input
 * covariance X_r X_c^T / d from one cuBLAS gemm (a diagonal tile: one syrk,
 * half the flops), then one kernel that runs every layer map on each entry
 * in registers (a diagonal tile: on j <= i only, mirrored), with the
 * per-sample variances computed once on the host (ntk_fc_create) and copied
 * to the device. The maps are the CPU's own (src/kernels/kernel_maps.h,
 * NTK_HD). Everything of a tile (gemm or syrk, kernel, copies back) is
 * queued on the context's own stream, in that order, and the host waits
 * for the stream once, at the end: the copies are DMA when the host buffers
 * are pinned (ntk_fc_gpu_host_alloc, the engine's tile buffers), and the
 * host never touches a buffer whose copy has not completed.
 * Device memory comes from plain cudaMalloc calls: the data and variances
 * at creation, two tile buffers sized by the largest tile seen; all freed
 * by ntk_fc_gpu_free. The development machine has no GPU:
 * scripts/gpu_check.sh compares it with the CPU backend on one. */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cublas_dl.h"
#include "backend/cuda/cuda_try.h"
#include "backend/cuda/fc_cuda.h"

extern "C" {
#include "kernels/kernel_maps.h"
}
#include "kernels/fc_entry.h"

struct ntk_fc_gpu {
  int device, elem;
  size_t n, d, nl;
  struct ntk_cublas cb;
  cublasHandle_t h;
  cudaStream_t stream; /* every tile's work, in order */
  void *x, *var;        /* device: n x d data, (nl + 1) x n variances */
  size_t *twin;         /* device: ntk_fc_twins, or NULL when every row differs (and none negates another) */
  struct ntk_fc_entry_layer *layers; /* device: nl layers */
  void *g, *t;          /* device: tile buffers of cap elements each */
  size_t cap;
};


/* The per-entry layer walk of fc_entry.h, one overload per precision. */
static __device__ inline void entry(const struct ntk_fc_entry_layer *L, size_t nl, const float *var, size_t n,
                                    size_t i, size_t j, int self, float *g, float *t) {
  ntk_fc_entry_f(L, nl, var, n, i, j, self, g, t);
}
static __device__ inline void entry(const struct ntk_fc_entry_layer *L, size_t nl, const double *var, size_t n,
                                    size_t i, size_t j, int self, double *g, double *t) {
  ntk_fc_entry_d(L, nl, var, n, i, j, self, g, t);
}

/* Entries of a tile's layer kernel: all of them, or on a diagonal tile
 * the lower triangle j <= i only. */
static __host__ __device__ size_t kernel_entries(size_t rows, size_t cols, int diag) {
  return diag ? rows * (rows + 1) / 2 : rows * cols;
}

/* Every layer on every entry of a tile: fc_entry.h's walk (src/kernels/fc.c's
 * operations in its order, residual blocks and standard parameterisation
 * included; a sample paired with itself is its variance). On a diagonal
 * tile the grid runs over the lower triangle j <= i only
 * (entry k is row i, column k - i(i+1)/2), which is all the syrk filled;
 * each value is mirrored, so the tile is exactly symmetric. Two samples
 * with equal rows (tw, ntk_fc_twins) take the variance as their input
 * covariance, a sample and its negation minus the variance, as
 * src/kernels/fc.c's equal_rows_tile. */
template <typename T>
__global__ static void layers_kernel(T *g, T *t, size_t rows, size_t cols, size_t r0, size_t c0, int diag,
                                     const struct ntk_fc_entry_layer *L, size_t nl, const T *var, size_t n,
                                     const size_t *tw) {
  size_t total = kernel_entries(rows, cols, diag);
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x) {
    size_t i, j;
    if (diag) {
      i = (size_t)((sqrt(8.0 * (double)k + 1.0) - 1.0) / 2.0); /* exact after the two corrections */
      while (i * (i + 1) / 2 > k) i--;
      while ((i + 1) * (i + 2) / 2 <= k) i++;
      j = k - i * (i + 1) / 2;
    } else {
      i = k / cols;
      j = k % cols;
    }
    size_t at = i * cols + j;
    int self = diag && i == j;
    int rel = self ? 1 : tw ? ntk_twin_relation(tw[r0 + i], tw[c0 + j]) : 0;
    T gv = rel > 0 ? var[r0 + i] : rel < 0 ? -var[r0 + i] : g[at], tv = 0;
    entry(L, nl, var, n, r0 + i, c0 + j, self, &gv, &tv);
    g[at] = gv;
    if (t) t[at] = tv;
    if (diag && j < i) {
      g[j * cols + i] = gv;
      if (t) t[j * cols + i] = tv;
    }
  }
}

extern "C" void ntk_fc_gpu_free(ntk_fc_gpu_t *G) {
  if (!G) return;
  cudaSetDevice(G->device);
  cudaFree(G->x);
  cudaFree(G->var);
  cudaFree(G->twin);
  cudaFree(G->layers);
  cudaFree(G->g);
  cudaFree(G->t);
  if (G->h && G->cb.destroy) G->cb.destroy(G->h);
  if (G->stream) cudaStreamDestroy(G->stream);
  if (G->cb.lib) dlclose(G->cb.lib);
  free(G);
}

extern "C" int ntk_fc_gpu_create(int device, const struct ntk_fc_entry_layer *layers, size_t nl, size_t n, size_t d,
                                 int elem, const void *x, const void *var, const size_t *twin, ntk_fc_gpu_t **out,
                                 char *err, size_t cap) {
  *out = NULL;
  ntk_fc_gpu_t *G = (ntk_fc_gpu_t *)calloc(1, sizeof *G);
  if (!G) return ntk_cuda_fail(err, cap, "ntk_fc_gpu_create", "out of memory");
  G->device = device;
  G->elem = elem;
  G->n = n;
  G->d = d;
  G->nl = nl;
  /* From here on, failures leave G to the caller-facing cleanup below. */
  int rc = 0;
  do {
    if ((rc = ntk_cublas_load(&G->cb, err, cap))) break;
    cudaError_t e;
    const char *what = NULL;
    if ((e = cudaSetDevice(device)) != cudaSuccess) what = "cudaSetDevice";
    else if ((e = cudaMalloc(&G->x, n * d * (size_t)elem + 1)) != cudaSuccess) what = "cudaMalloc(data)";
    else if ((e = cudaMalloc(&G->var, (nl + 1) * n * (size_t)elem)) != cudaSuccess) what = "cudaMalloc(variances)";
    else if ((e = cudaMalloc((void **)&G->layers, (nl ? nl : 1) * sizeof *layers)) != cudaSuccess)
      what = "cudaMalloc(layers)";
    else if ((e = cudaMemcpy(G->x, x, n * d * (size_t)elem, cudaMemcpyHostToDevice)) != cudaSuccess)
      what = "cudaMemcpy(data)";
    else if ((e = cudaMemcpy(G->var, var, (nl + 1) * n * (size_t)elem, cudaMemcpyHostToDevice)) != cudaSuccess)
      what = "cudaMemcpy(variances)";
    else if ((e = cudaMemcpy(G->layers, layers, nl * sizeof *layers, cudaMemcpyHostToDevice)) != cudaSuccess)
      what = "cudaMemcpy(layers)";
    else if (twin && (e = cudaMalloc((void **)&G->twin, n * sizeof *twin)) != cudaSuccess)
      what = "cudaMalloc(twins)";
    else if (twin && (e = cudaMemcpy(G->twin, twin, n * sizeof *twin, cudaMemcpyHostToDevice)) != cudaSuccess)
      what = "cudaMemcpy(twins)";
    if (what) {
      rc = ntk_cuda_fail(err, cap, what, cudaGetErrorString(e));
      break;
    }
    cublasStatus_t s = G->cb.create(&G->h);
    if (s != CUBLAS_STATUS_SUCCESS) {
      rc = ntk_cuda_fail(err, cap, "cublasCreate", ntk_cublas_status_name(s));
      break;
    }
    /* Plain float32/float64 arithmetic: no TF32 or emulation, whatever the
     * environment asks for. */
    if (G->cb.set_math_mode && (s = G->cb.set_math_mode(G->h, CUBLAS_PEDANTIC_MATH)) != CUBLAS_STATUS_SUCCESS) {
      rc = ntk_cuda_fail(err, cap, "cublasSetMathMode", ntk_cublas_status_name(s));
      break;
    }
    /* A blocking stream (ordered after the legacy default stream, which
     * the copies above used), and cuBLAS on it. The copies above are
     * complete before the first tile: the device is synchronised here. */
    if ((e = cudaStreamCreate(&G->stream)) != cudaSuccess) {
      rc = ntk_cuda_fail(err, cap, "cudaStreamCreate", cudaGetErrorString(e));
      break;
    }
    if ((s = G->cb.set_stream(G->h, G->stream)) != CUBLAS_STATUS_SUCCESS) {
      rc = ntk_cuda_fail(err, cap, "cublasSetStream", ntk_cublas_status_name(s));
      break;
    }
    if ((e = cudaDeviceSynchronize()) != cudaSuccess)
      rc = ntk_cuda_fail(err, cap, "cudaDeviceSynchronize", cudaGetErrorString(e));
  } while (0);
  if (rc) {
    ntk_fc_gpu_free(G);
    return rc;
  }
  *out = G;
  return 0;
}


extern "C" void *ntk_fc_gpu_host_alloc(int device, size_t bytes) {
  void *p = NULL;
  if (cudaSetDevice(device) != cudaSuccess || cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
    cudaGetLastError(); /* not sticky: clear it for the next call */
    return NULL;
  }
  return p;
}

extern "C" void ntk_fc_gpu_host_free(void *p) {
  if (p) cudaFreeHost(p);
}

extern "C" int ntk_fc_gpu_tile(ntk_fc_gpu_t *G, const struct ntk_tile *tl, void *nngp, void *ntk, char *err,
                               size_t cap) {
  size_t rows = tl->rows, cols = tl->cols, count = rows * cols, es = (size_t)G->elem;
  CUDA_TRY(cudaSetDevice(G->device));
  if (count > G->cap) { /* sized by the tile: grows once, to the largest */
    void *og = G->g, *ot = G->t;
    G->g = G->t = NULL; /* never freed twice, whatever fails below */
    G->cap = 0;
    /* The previous tile's work is complete (the stream was waited for at
     * its end), and cudaFree waits for the device anyway. */
    CUDA_TRY(cudaFree(og));
    CUDA_TRY(cudaFree(ot));
    CUDA_TRY(cudaMalloc(&G->g, count * es));
    CUDA_TRY(cudaMalloc(&G->t, count * es));
    G->cap = count;
  }
  int diag = tl->bi == tl->bj; /* then r0 == c0 and rows == cols */
  unsigned blocks = ntk_cuda_blocks(kernel_entries(rows, cols, diag));
  cudaStream_t st = G->stream;
  /* Row-major G (rows x cols) = X_r X_c^T / d is column-major G^T = X_c X_r^T
   * (ld cols). On a diagonal tile that is X_r^T X_r with the samples as the
   * columns of a d x rows column-major matrix: syrk fills one triangle,
   * column-major upper (r <= c), which is the row-major lower (j <= i) the
   * kernel reads. */
  if (es == 4) {
    float alpha = (float)(1.0 / (double)G->d), beta = 0.0f;
    const float *x = (const float *)G->x;
    if (diag)
      BLAS_TRY(G->cb.ssyrk(G->h, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_T, (int)rows, (int)G->d, &alpha, x + tl->r0 * G->d,
                           (int)G->d, &beta, (float *)G->g, (int)cols));
    else
      BLAS_TRY(G->cb.sgemm(G->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)cols, (int)rows, (int)G->d, &alpha, x + tl->c0 * G->d,
                           (int)G->d, x + tl->r0 * G->d, (int)G->d, &beta, (float *)G->g, (int)cols));
    layers_kernel<float><<<blocks, 256, 0, st>>>((float *)G->g, ntk ? (float *)G->t : NULL, rows, cols, tl->r0,
                                                 tl->c0, diag, G->layers, G->nl, (const float *)G->var, G->n,
                                                 G->twin);
  } else {
    double alpha = 1.0 / (double)G->d, beta = 0.0;
    const double *x = (const double *)G->x;
    if (diag)
      BLAS_TRY(G->cb.dsyrk(G->h, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_T, (int)rows, (int)G->d, &alpha, x + tl->r0 * G->d,
                           (int)G->d, &beta, (double *)G->g, (int)cols));
    else
      BLAS_TRY(G->cb.dgemm(G->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)cols, (int)rows, (int)G->d, &alpha, x + tl->c0 * G->d,
                           (int)G->d, x + tl->r0 * G->d, (int)G->d, &beta, (double *)G->g, (int)cols));
    layers_kernel<double><<<blocks, 256, 0, st>>>((double *)G->g, ntk ? (double *)G->t : NULL, rows, cols, tl->r0,
                                                  tl->c0, diag, G->layers, G->nl, (const double *)G->var, G->n,
                                                  G->twin);
  }
  CUDA_TRY(cudaGetLastError());
  /* Same stream: after the kernel. Into pinned buffers these are DMA
   * transfers that return at once; into pageable ones the runtime stages
   * them (still correct, slower). */
  CUDA_TRY(cudaMemcpyAsync(nngp, G->g, count * es, cudaMemcpyDeviceToHost, st));
  if (ntk) CUDA_TRY(cudaMemcpyAsync(ntk, G->t, count * es, cudaMemcpyDeviceToHost, st));
  /* The caller reads (and later reuses) the buffers when this returns:
   * wait for everything queued above. */
  CUDA_TRY(cudaStreamSynchronize(st));
  return 0;
}
