/* Times one cblas_ssyrk of an N x d float32 matrix (the floor of the FC
 * benchmark) with OpenBLAS's default threading. Prints seconds. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/cpuinit.h"
#include "base/clock.h"

int main(int argc, char **argv) {
  ntk_cpu_fix_openblas(argv);
  if (argc != 3) {
    fprintf(stderr, "usage: ntkd_bench_syrk N d\n");
    return 2;
  }
  int n = atoi(argv[1]), d = atoi(argv[2]);
  float *x = malloc((size_t)n * d * sizeof *x), *c = malloc((size_t)n * n * sizeof *c);
  if (!x || !c) return 1;
  unsigned s = 12345;
  for (size_t i = 0; i < (size_t)n * d; i++) {
    s = s * 1103515245u + 12345u;
    x[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
  }
  double best = 1e30;
  for (int rep = 0; rep < 2; rep++) {
    double t0 = ntk_now();
    cblas_ssyrk(CblasRowMajor, CblasLower, CblasNoTrans, n, d, 1.0f / (float)d, x, d, 0.0f, c, n);
    double t = ntk_now() - t0;
    if (t < best) best = t;
  }
  printf("%.4f\n", best);
  fprintf(stderr, "ssyrk N=%d d=%d: %.4f s (%s kernels, %.1f GFLOP/s as N^2 d)\n", n, d, best,
          openblas_get_corename(), (double)n * n * d / best * 1e-9);
  free(x);
  free(c);
  return 0;
}
