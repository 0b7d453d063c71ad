/* Times CNN kernel entries on one core: computes one tile of `n` random
 * 32x32x3 images (or H W C given) with the CPU backend's CNN path and prints
 * seconds per entry (pair), each pair computed once (lower triangle).
 *   ntkd_bench_cnn "ARCH" N [float32|float64] [H W C]
 * Per-image work (the (a, a) runs) is included, as in a real tile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntkd/arch.h"
#include "ntkd/cnn.h"
#include "ntkd/cpuinit.h"
#include "ntkd/progress.h"

int main(int argc, char **argv) {
  ntk_cpu_fix_openblas(argv);
  if (argc < 3) {
    fprintf(stderr, "usage: ntkd_bench_cnn ARCH N [float32|float64] [H W C]\n");
    return 2;
  }
  size_t n = (size_t)atol(argv[2]);
  int elem = argc > 3 && !strcmp(argv[3], "float64") ? 8 : 4;
  size_t h = argc > 6 ? (size_t)atol(argv[4]) : 32, w = argc > 6 ? (size_t)atol(argv[5]) : 32,
         c = argc > 6 ? (size_t)atol(argv[6]) : 3;
  struct ntk_arch arch;
  if (ntk_arch_parse(argv[1], 1.4142135623730951, 0.0, &arch)) {
    fprintf(stderr, "%s\n", ntk_error_message());
    return 2;
  }
  struct ntk_dataset ds = {n, h * w * c, h, w, c, elem, malloc(n * h * w * c * (size_t)elem), 0};
  unsigned s = 1;
  for (size_t k = 0; k < n * ds.d; k++) {
    s = s * 1103515245u + 12345u;
    double v = (double)((s >> 8) & 0xffff) / 65536.0;
    if (elem == 4) ((float *)ds.x)[k] = (float)v;
    else ((double *)ds.x)[k] = v;
  }
  ntk_cnn_t *cnn;
  if (ntk_cnn_create(&arch, &ds, NTK_CNN_AUTO, &cnn)) {
    fprintf(stderr, "%s\n", ntk_error_message());
    return 2;
  }
  struct ntk_tiling tg;
  ntk_tiling_init(&tg, n, n);
  struct ntk_tile t = ntk_tiling_tile(&tg, 0);
  void *g = malloc(n * n * (size_t)elem), *k = malloc(n * n * (size_t)elem);
  double t0 = ntk_now();
  ntk_cnn_tile(cnn, &t, g, k);
  double sec = ntk_now() - t0, pairs = (double)n * (double)(n + 1) / 2.0;
  const char *names[] = {"auto", "diag", "slice", "general"};
  printf("%.6e\n", sec / pairs);
  fprintf(stderr, "%s: %zu images %zux%zux%zu %s, path %s: %.3f s for %.0f entries: %.3g s per entry on one core\n",
          argv[1], n, h, w, c, elem == 4 ? "float32" : "float64", names[ntk_cnn_get_path(cnn)], sec, pairs,
          sec / pairs);
  ntk_cnn_free(cnn);
  ntk_arch_free(&arch);
  free(ds.x);
  free(g);
  free(k);
  return 0;
}
