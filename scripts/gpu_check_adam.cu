/* Compare the CUDA Adam kernel (src/backend/cuda/adam.cu, -ftz=true) with
 * the CPU update under FTZ/DAZ on random data: STEPS steps, the last half
 * with zero gradients so the moments pass through the subnormal range.
 * Prints the largest differences; exit 0 if p, m and v agree to 1 ulp-ish
 * (2e-6 relative) and no moment is subnormal on either side.
 *   ntkd_gpu_check_adam [N] [STEPS] */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "base/cpuinit.h"
#include "backend/cuda/mlp_gpu.h"
#include "base/rng.h"
#include "train/train.h"
}

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); return 2; } } while (0)

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
  int steps = argc > 2 ? atoi(argv[2]) : 2000;
  struct ntk_adam h = {0.001, 0.9, 0.999, 1e-8};
  float *cpu = (float *)calloc(5 * n, sizeof(float)), *back = (float *)malloc(3 * n * sizeof(float));
  float *p = cpu, *m = cpu + n, *v = cpu + 2 * n, *g = cpu + 3 * n, *zero = cpu + 4 * n;
  uint64_t s = 1;
  for (size_t i = 0; i < n; i++) p[i] = (float)((double)(ntk_splitmix64(&s) >> 40) / (1 << 24) - 0.5);
  float *d;
  CK(cudaMalloc(&d, 5 * n * sizeof(float)));
  CK(cudaMemcpy(d, cpu, 5 * n * sizeof(float), cudaMemcpyHostToDevice));
  ntk_cpu_flush_denormals(1);
  for (int t = 1; t <= steps; t++) {
    int live = t <= steps / 2;
    if (live) {
      for (size_t i = 0; i < n; i++) g[i] = (float)(((double)(ntk_splitmix64(&s) >> 40) / (1 << 24) - 0.5) * 1e-2);
      CK(cudaMemcpy(d + 3 * n, g, n * sizeof(float), cudaMemcpyHostToDevice));
    }
    ntk_adam_update(&h, (uint64_t)t, 1.0f, p, m, v, live ? g : zero, n);
    CK((cudaError_t)ntk_adam_update_cuda(&h, (uint64_t)t, 1.0f, d, d + n, d + 2 * n, live ? d + 3 * n : d + 4 * n, n));
  }
  CK(cudaMemcpy(back, d, 3 * n * sizeof(float), cudaMemcpyDeviceToHost));
  double worst[3] = {0, 0, 0};
  size_t sub = 0;
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < n; i++) {
      double a = cpu[k * n + i], b = back[k * n + i], r = fabs(a - b) / (fabs(a) > 1e-30 ? fabs(a) : 1e-30);
      if (a != b && r > worst[k]) worst[k] = r;
      sub += k && (fpclassify(a) == FP_SUBNORMAL || fpclassify(b) == FP_SUBNORMAL);
    }
  printf("Adam CPU vs CUDA, %zu parameters, %d steps (last %d with zero gradients):\n", n, steps, steps - steps / 2);
  printf("  max relative difference: p %.3g, m %.3g, v %.3g; subnormal moments: %zu\n", worst[0], worst[1], worst[2], sub);
  int ok = worst[0] <= 2e-6 && worst[1] <= 2e-6 && worst[2] <= 2e-6 && sub == 0;
  printf("  %s\n", ok ? "OK" : "MISMATCH");
  cudaFree(d);
  free(cpu);
  free(back);
  return ok ? 0 : 1;
}
