/* Compare the GPU training step (src/backend/cuda/mlp_gpu.cu: cuBLAS sgemm
 * and kernels) with the CPU path (src/backend/cpu/mlp.c) on random data: the
 * gradient of one batch of a 784-1000-1000-10 MLP, then ten Adam steps.
 * Exit 0 if the gradients agree within 1e-4 relative to their largest
 * entry (summation order differs between cuBLAS and OpenBLAS) and the
 * parameters after the steps within 1e-5.
 *   ntkd_gpu_check_train [BATCH] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/cpuinit.h"
#include "backend/cuda/mlp_gpu.h"
#include "base/rng.h"
#include "train/train.h"

static double max_abs(const float *a, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
  return m;
}

int main(int argc, char **argv) {
  size_t b = argc > 1 ? strtoull(argv[1], NULL, 10) : 50;
  ntk_cpu_single_thread();
  ntk_cpu_flush_denormals(1);
  const size_t sizes[] = {784, 1000, 1000, 10};
  struct ntk_mlp m;
  ntk_mlp_init(&m, sizes, 4);
  size_t np = m.nparams;
  float *state = calloc(3 * np, sizeof(float)), *gstate = calloc(3 * np, sizeof(float));
  float *x = malloc(b * 784 * sizeof(float)), *gc = malloc(np * sizeof(float)), *gg = malloc(np * sizeof(float));
  float *work = malloc(ntk_mlp_work_floats(&m, b) * sizeof(float));
  int32_t *y = malloc(b * sizeof(int32_t));
  uint64_t s = 7;
  ntk_mlp_init_params(&m, 1, state);
  for (size_t i = 0; i < b * 784; i++) x[i] = (float)((ntk_splitmix64(&s) >> 40) % 256) / 255.0f;
  for (size_t i = 0; i < b; i++) y[i] = (int32_t)(ntk_splitmix64(&s) % 10);
  for (size_t i = 0; i < 3 * np; i++) gstate[i] = state[i];
  if (ntk_mlp_gpu_devices() < 1) {
    fprintf(stderr, "gpu_check_train: no GPU visible\n");
    return 2;
  }
  ntk_mlp_gpu_t *gpu;
  char err[512];
  if (ntk_mlp_gpu_create(&m, b, 0, gstate, &gpu, err, sizeof err)) {
    fprintf(stderr, "gpu_check_train: %s\n", err);
    return 2;
  }
  struct ntk_adam h = {0.001, 0.9, 0.999, 1e-8};
  double worst_g = 0, worst_p = 0;
  for (int step = 1; step <= 10; step++) {
    size_t hc = 0, hg = 0;
    double lc = ntk_mlp_grad(&m, state, x, y, b, work, gc, &hc), lg;
    if (ntk_mlp_gpu_grad(gpu, x, y, b, gg, &lg, &hg, err, sizeof err)) {
      fprintf(stderr, "gpu_check_train: %s\n", err);
      return 2;
    }
    double scale = max_abs(gc, np), e = 0;
    for (size_t i = 0; i < np; i++) e = fmax(e, fabs((double)gc[i] - gg[i]) / scale);
    worst_g = fmax(worst_g, e);
    if (step == 1)
      printf("batch %zu: loss cpu %.6f gpu %.6f, correct cpu %zu gpu %zu, gradient max rel diff %.3g\n", b, lc, lg,
             hc, hg, e);
    /* Both sides update with the CPU's gradient, so only Adam is compared. */
    ntk_adam_update(&h, (uint64_t)step, 1.0f / (float)b, state, state + np, state + 2 * np, gc, np);
    if (ntk_mlp_gpu_adam(gpu, &h, (uint64_t)step, 1.0f / (float)b, gc, gstate, err, sizeof err)) {
      fprintf(stderr, "gpu_check_train: %s\n", err);
      return 2;
    }
    for (size_t i = 0; i < np; i++) worst_p = fmax(worst_p, fabs((double)state[i] - gstate[i]));
  }
  printf("10 steps: gradient max rel diff %.3g (bound 1e-4), parameter max abs diff %.3g (bound 1e-5)\n", worst_g,
         worst_p);
  ntk_mlp_gpu_free(gpu);
  int ok = worst_g < 1e-4 && worst_p < 1e-5;
  printf("gpu_check_train: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
