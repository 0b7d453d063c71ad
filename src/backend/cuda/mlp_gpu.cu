/* The MLP's forward and backward pass and Adam on a GPU, for GPU ranks of
 * a training job (issue 6, item 5). The same arithmetic as src/backend/cpu/mlp.c
 * and adam.c: sgemm from cuBLAS, the rest in small kernels. cuBLAS is
 * loaded with dlopen when a GPU rank starts, so ntkd never needs CUDA's
 * libraries to run on a machine without a GPU. Parameters and Adam's m, v
 * live on the device; after each update they are copied back so the host
 * copy (snapshots, checksums, validation) stays the truth. Not run on the
 * development machine (no GPU): scripts/gpu_check.sh compares it with the
 * CPU path. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include "backend/cuda/cublas_dl.h"
#include "backend/cuda/cuda_try.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "backend/cuda/mlp_gpu.h"
}


struct ntk_mlp_gpu {
  struct ntk_mlp m;
  size_t max_batch;
  struct ntk_cublas cb;        /* cuBLAS, loaded with dlopen */
  cublasHandle_t h;
  float *p, *mo, *v, *g;      /* device: parameters, Adam moments, gradient */
  float *x, *acts, *d1, *d2;  /* device: batch, activations, two gradient buffers */
  int32_t *y;
  double *loss;               /* device: per-sample loss */
  int *hit;                   /* device: per-sample correct prediction */
  double *loss_h;
  int *hit_h;
};


extern "C" int ntk_cuda_count(char *why, size_t cap); /* src/backend/cuda/device.cu */

extern "C" int ntk_mlp_gpu_devices(void) {
  char why[256];
  return ntk_cuda_count(why, sizeof why);
}

__global__ static void rows_from_bias(float *out, const float *bias, size_t b, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < b * n; i += (size_t)gridDim.x * blockDim.x)
    out[i] = bias[i % n];
}

__global__ static void relu_inplace(float *a, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    a[i] = a[i] > 0.0f ? a[i] : 0.0f;
}

/* dz *= (a > 0): the ReLU's derivative at the layer's output a. */
__global__ static void relu_backward(float *dz, const float *a, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dz[i] = a[i] > 0.0f ? dz[i] : 0.0f;
}

/* One thread per sample: as ntk_softmax_xent, in double where it is. */
__global__ static void softmax_xent(const float *z, const int32_t *y, size_t b, size_t k, float *dz, double *loss,
                                    int *hit) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= b) return;
  const float *zi = z + i * k;
  size_t arg = 0;
  for (size_t c = 1; c < k; c++)
    if (zi[c] > zi[arg]) arg = c;
  hit[i] = arg == (size_t)y[i];
  double mx = zi[arg], sum = 0;
  for (size_t c = 0; c < k; c++) sum += exp((double)zi[c] - mx);
  loss[i] = log(sum) + mx - (double)zi[y[i]];
  if (dz) {
    for (size_t c = 0; c < k; c++) dz[i * k + c] = (float)(exp((double)zi[c] - mx) / sum);
    dz[i * k + y[i]] -= 1.0f;
  }
}

/* db[j] = sum over the batch of dz[i][j], one thread per column, rows in order. */
__global__ static void column_sums(const float *dz, size_t b, size_t n, float *db) {
  size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (j >= n) return;
  float s = 0;
  for (size_t i = 0; i < b; i++) s = __fadd_rn(s, dz[i * n + j]);
  db[j] = s;
}


extern "C" int ntk_mlp_gpu_create(const struct ntk_mlp *m, size_t max_batch, int device, const float *state,
                                  ntk_mlp_gpu_t **out, char *err, size_t cap) {
  *out = NULL;
  ntk_mlp_gpu_t *G = (ntk_mlp_gpu_t *)calloc(1, sizeof *G);
  if (!G) return ntk_cuda_fail(err, cap, "ntk_mlp_gpu_create", "out of memory");
  *out = G;
  G->m = *m;
  G->max_batch = max_batch;
  if (ntk_cublas_load(&G->cb, err, cap)) return 1;
  CUDA_TRY(cudaSetDevice(device));
  BLAS_TRY(G->cb.create(&G->h));
  /* Plain float32 gemms, as on the CPU: no TF32 or emulation, whatever the
   * environment asks for (as src/backend/cuda/fc_cuda.cu). An old cuBLAS
   * without cublasSetMathMode has no TF32 to turn off. */
  if (G->cb.set_math_mode) BLAS_TRY(G->cb.set_math_mode(G->h, CUBLAS_PEDANTIC_MATH));
  size_t np = m->nparams, acts = 0, widest = 0;
  for (size_t l = 1; l < m->nsizes; l++) {
    acts += max_batch * m->sizes[l];
    widest = m->sizes[l] > widest ? m->sizes[l] : widest;
  }
  widest = widest > m->sizes[0] ? widest : m->sizes[0];
  CUDA_TRY(cudaMalloc(&G->p, np * sizeof(float)));
  CUDA_TRY(cudaMalloc(&G->mo, np * sizeof(float)));
  CUDA_TRY(cudaMalloc(&G->v, np * sizeof(float)));
  CUDA_TRY(cudaMalloc(&G->g, np * sizeof(float)));
  CUDA_TRY(cudaMalloc(&G->x, max_batch * m->sizes[0] * sizeof(float)));
  CUDA_TRY(cudaMalloc(&G->acts, acts * sizeof(float)));
  CUDA_TRY(cudaMalloc(&G->d1, max_batch * widest * sizeof(float)));
  CUDA_TRY(cudaMalloc(&G->d2, max_batch * widest * sizeof(float)));
  CUDA_TRY(cudaMalloc(&G->y, max_batch * sizeof(int32_t)));
  CUDA_TRY(cudaMalloc(&G->loss, max_batch * sizeof(double)));
  CUDA_TRY(cudaMalloc(&G->hit, max_batch * sizeof(int)));
  G->loss_h = (double *)malloc(max_batch * sizeof(double));
  G->hit_h = (int *)malloc(max_batch * sizeof(int));
  if (!G->loss_h || !G->hit_h) return ntk_cuda_fail(err, cap, "ntk_mlp_gpu_create", "out of memory");
  CUDA_TRY(cudaMemcpy(G->p, state, np * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_TRY(cudaMemcpy(G->mo, state + np, np * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_TRY(cudaMemcpy(G->v, state + 2 * np, np * sizeof(float), cudaMemcpyHostToDevice));
  return 0;
}

extern "C" void ntk_mlp_gpu_free(ntk_mlp_gpu_t *G) {
  if (!G) return;
  if (G->h && G->cb.destroy) G->cb.destroy(G->h);
  cudaFree(G->p);
  cudaFree(G->mo);
  cudaFree(G->v);
  cudaFree(G->g);
  cudaFree(G->x);
  cudaFree(G->acts);
  cudaFree(G->d1);
  cudaFree(G->d2);
  cudaFree(G->y);
  cudaFree(G->loss);
  cudaFree(G->hit);
  free(G->loss_h);
  free(G->hit_h);
  if (G->cb.lib) dlclose(G->cb.lib);
  free(G);
}

/* Row-major C (r x c) = A (r x k) . B (k x c) is column-major C^T = B^T A^T:
 * cuBLAS sees every matrix transposed, so operands swap places. */
extern "C" int ntk_mlp_gpu_grad(ntk_mlp_gpu_t *G, const float *x, const int32_t *y, size_t b, float *grad,
                                double *loss, size_t *correct, char *err, size_t cap) {
  const struct ntk_mlp *m = &G->m;
  size_t L = m->nsizes - 1, np = m->nparams;
  const float one = 1.0f, zero = 0.0f;
  *loss = 0;
  if (b == 0) {
    memset(grad, 0, np * sizeof(float));
    return 0;
  }
  if (b > G->max_batch) return ntk_cuda_fail(err, cap, "ntk_mlp_gpu_grad", "batch larger than planned");
  CUDA_TRY(cudaMemcpy(G->x, x, b * m->sizes[0] * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_TRY(cudaMemcpy(G->y, y, b * sizeof(int32_t), cudaMemcpyHostToDevice));
  CUDA_TRY(cudaMemset(G->g, 0, np * sizeof(float)));
  /* Forward: layer l's output at acts + off[l]. */
  size_t off[NTK_TRAIN_MAX_LAYERS];
  const float *in = G->x;
  for (size_t l = 0, o = 0; l < L; l++) {
    int ni = (int)m->sizes[l], no = (int)m->sizes[l + 1];
    off[l] = o;
    float *out = G->acts + o;
    rows_from_bias<<<ntk_cuda_blocks(b * no), 256>>>(out, G->p + m->b_off[l], b, (size_t)no);
    BLAS_TRY(G->cb.sgemm(G->h, CUBLAS_OP_N, CUBLAS_OP_N, no, (int)b, ni, &one, G->p + m->w_off[l], no, in, ni, &one,
                      out, no));
    if (l + 1 < L) relu_inplace<<<ntk_cuda_blocks(b * no), 256>>>(out, b * (size_t)no);
    in = out;
    o += b * (size_t)no;
  }
  size_t k = m->sizes[L];
  float *dz = G->d1, *da = G->d2;
  softmax_xent<<<ntk_cuda_blocks(b), 256>>>(G->acts + off[L - 1], G->y, b, k, dz, G->loss, G->hit);
  CUDA_TRY(cudaGetLastError());
  /* Backward. */
  for (size_t l = L; l-- > 0;) {
    int ni = (int)m->sizes[l], no = (int)m->sizes[l + 1];
    const float *a_in = l ? G->acts + off[l - 1] : G->x;
    /* dW (ni x no) = a_in^T (ni x b) . dz (b x no) */
    BLAS_TRY(G->cb.sgemm(G->h, CUBLAS_OP_N, CUBLAS_OP_T, no, ni, (int)b, &one, dz, no, a_in, ni, &zero,
                      G->g + m->w_off[l], no));
    column_sums<<<ntk_cuda_blocks((size_t)no), 256>>>(dz, b, (size_t)no, G->g + m->b_off[l]);
    if (l == 0) break;
    /* da (b x ni) = dz (b x no) . W^T (no x ni), then the ReLU below. */
    BLAS_TRY(G->cb.sgemm(G->h, CUBLAS_OP_T, CUBLAS_OP_N, ni, (int)b, no, &one, G->p + m->w_off[l], no, dz, no, &zero, da,
                      ni));
    relu_backward<<<ntk_cuda_blocks(b * (size_t)ni), 256>>>(da, G->acts + off[l - 1], b * (size_t)ni);
    float *t = dz;
    dz = da;
    da = t;
  }
  CUDA_TRY(cudaGetLastError());
  CUDA_TRY(cudaMemcpy(grad, G->g, np * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_TRY(cudaMemcpy(G->loss_h, G->loss, b * sizeof(double), cudaMemcpyDeviceToHost));
  CUDA_TRY(cudaMemcpy(G->hit_h, G->hit, b * sizeof(int), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < b; i++) {
    *loss += G->loss_h[i];
    *correct += (size_t)G->hit_h[i];
  }
  return 0;
}

/* Adam with the reduced gradient on the device, then p, m, v back to the
 * host's state block (p, m, v: nparams floats each). */
extern "C" int ntk_mlp_gpu_adam(ntk_mlp_gpu_t *G, const struct ntk_adam *h, uint64_t t, float gscale,
                                const float *g, float *state, char *err, size_t cap) {
  size_t np = G->m.nparams;
  CUDA_TRY(cudaMemcpy(G->g, g, np * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_TRY((cudaError_t)ntk_adam_update_cuda(h, t, gscale, G->p, G->mo, G->v, G->g, np));
  CUDA_TRY(cudaMemcpy(state, G->p, np * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_TRY(cudaMemcpy(state + np, G->mo, np * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_TRY(cudaMemcpy(state + 2 * np, G->v, np * sizeof(float), cudaMemcpyDeviceToHost));
  return 0;
}
