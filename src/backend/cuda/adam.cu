/* Adam's update on the GPU, the same arithmetic as src/backend/cpu/adam.c. This
 * file is compiled with -ftz=true (CMakeLists.txt): subnormal m and v
 * flush to zero as with FTZ/DAZ on the CPU. Not --use_fast_math, which
 * would also approximate the division and sqrt and move the result away
 * from the CPU path's. The cuBLAS training path is not written yet;
 * scripts/gpu_check.sh compares this kernel with the CPU update. */
#include <cuda_runtime.h>
#include <math.h>

extern "C" {
#include "backend/cuda/mlp_gpu.h"
}

__global__ static void adam_kernel(size_t n, float lr, float a1, float a2, float eps, float gscale, float *p,
                                   float *m, float *v, const float *g) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    /* Explicit roundings (__f*_rn) so nvcc does not contract into FMAs that
     * the CPU build (-ffp-contract=off) does not use either. */
    float gi = __fmul_rn(g[i], gscale);
    float mi = __fadd_rn(m[i], __fmul_rn(a1, __fsub_rn(gi, m[i])));
    float vi = __fadd_rn(v[i], __fmul_rn(a2, __fsub_rn(__fmul_rn(gi, gi), v[i])));
    m[i] = mi;
    v[i] = vi;
    p[i] = __fsub_rn(p[i], __fdiv_rn(__fmul_rn(lr, mi), __fadd_rn(__fsqrt_rn(vi), eps)));
  }
}

extern "C" int ntk_adam_update_cuda(const struct ntk_adam *h, uint64_t t, float gscale, float *p, float *m,
                                    float *v, const float *g, size_t n) {
  /* Step size on the host in double, exactly as the CPU path computes it. */
  double fix1 = 1.0 - pow(h->beta1, (double)t), fix2 = 1.0 - pow(h->beta2, (double)t);
  float lr = (float)(h->alpha * sqrt(fix2) / fix1);
  int threads = 256;
  size_t want = (n + threads - 1) / threads;
  int blocks = want > 65535 ? 65535 : (int)(want ? want : 1);
  adam_kernel<<<blocks, threads>>>(n, lr, (float)(1.0 - h->beta1), (float)(1.0 - h->beta2), (float)h->eps, gscale,
                                   p, m, v, g);
  return (int)cudaGetLastError();
}
