/* Conjugate gradients' skinny products (src/solve/skinny.c), each against
 * its BLAS peer in one run, on one core (a CG rank per core):
 *   - a T x T float32 tile (T = 2048, the store's usual edge) times the
 *     column counts a 10-class, 4-ridge solve runs (40 down to 10) and a
 *     few more, both products of an off-diagonal tile, against sgemm on
 *     64-row chunks (the path it replaced); the same in float64
 *     arithmetic (CG's true residuals; up to 24 columns) against dgemm on
 *     64 rows converted to float64 at a time;
 *   - the preconditioner's float64 factor (N x K: 6 667 x 4 000, a third
 *     of 20 000 samples at rank 4 000) times them, L^T R and L w, against
 *     dgemm.
 * Each width is timed over several matrices (more than the caches hold),
 * the faster of 3 rounds; prints milliseconds per product and the ratio
 * BLAS / one-pass (above 1: one-pass faster), and which AUTO takes. The
 * two results must agree within rounding (float32: 1e-5, float64: 1e-12
 * of the sum of |terms|), or exit 1. NTKD_BENCH_SKINNY_HALF=0 or 1: the
 * 64-byte or the 32-byte layout for the widths that have both (skinny.h,
 * ntk_skinny_set_half), instead of the one this core's timing picks.
 *   build/ntkd_bench_skinny [T [N K]] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/cpuinit.h"
#include "solve/skinny.h"

static unsigned seed = 12345;
static double uniform(void) { return (double)((seed = seed * 1103515245u + 12345u) >> 8) / 16777216.0; }

static const size_t widths[] = {1, 6, 8, 10, 16, 20, 30, 40, 48, 64};
#define NW (sizeof widths / sizeof *widths)
#define MAXW 64
static const int hows[2] = {NTK_SKINNY_BLAS, NTK_SKINNY_ONEPASS};

/* Largest |a - b| over the n entries. */
static double maxdiff(const double *a, const double *b, size_t n) {
  double e = 0;
  for (size_t i = 0; i < n; i++) e = fmax(e, fabs(a[i] - b[i]));
  return e;
}

static int row(const char *what, int f32, size_t na, const double best[2], double err, double bound) {
  int bad = !(err <= bound);
  printf("  %-22s %7zu %8.2f %9.2f %15.2f  %s%s\n", what, na, best[0] * 1e3, best[1] * 1e3, best[0] / best[1],
         ntk_skinny_takes(na, f32) ? "one-pass" : "BLAS", bad ? "  DIFFER" : "");
  if (bad) fprintf(stderr, "check FAILED: %s, %zu columns: one-pass and BLAS differ by %.3g (bound %.3g)\n", what, na,
                   err, bound);
  return bad;
}

int main(int argc, char **argv) {
  ntk_cpu_fix_openblas(argv);
  ntk_cpu_set_blas_threads(1); /* one core each: a CG rank per core */
  if (getenv("NTKD_BENCH_SKINNY_HALF")) ntk_skinny_set_half(atoi(getenv("NTKD_BENCH_SKINNY_HALF")));
  size_t T = argc > 1 ? (size_t)atol(argv[1]) : 2048, ntile = 8;
  size_t N = argc > 2 ? (size_t)atol(argv[2]) : 6667, K = argc > 3 ? (size_t)atol(argv[3]) : 4000;
  size_t big = (T > N ? T : N) > K ? (T > N ? T : N) : K;
  size_t sk32 = ntk_skinny_scratch(T, T, MAXW, 1), sk64 = ntk_skinny_scratch(N, K, MAXW, 0);
  size_t skm = ntk_skinny_scratch(T, T, MAXW, NTK_SKINNY_MIXED);
  sk32 = sk32 > skm ? sk32 : skm;
  void *scratch = malloc(sk32 > sk64 ? sk32 : sk64);
  double *x = malloc(big * MAXW * sizeof *x), *xt = malloc(big * MAXW * sizeof *xt), *y[2], *yt[2];
  for (int k = 0; k < 2; k++) y[k] = malloc(big * MAXW * sizeof **y), yt[k] = malloc(big * MAXW * sizeof **yt);
  float **tiles = malloc(ntile * sizeof *tiles);
  for (size_t k = 0; k < ntile; k++) {
    tiles[k] = malloc(T * T * sizeof **tiles);
    for (size_t i = 0; i < T * T; i++) tiles[k][i] = (float)uniform();
  }
  double *L[2];
  for (int k = 0; k < 2; k++) {
    L[k] = malloc(N * K * sizeof **L);
    for (size_t i = 0; i < N * K; i++) L[k][i] = uniform() - 0.5;
  }
  for (size_t i = 0; i < big * MAXW; i++) x[i] = uniform() - 0.5, xt[i] = uniform() - 0.5;
  int status = 0;
  printf("CG's skinny products, one core: ms per product, BLAS against one-pass (src/solve/skinny.c)\n");
  printf("  %-22s %7s %8s %9s %15s  %s\n", "product", "columns", "BLAS", "one-pass", "BLAS/one-pass", "AUTO takes");
  for (int mixed = 0; mixed < 2; mixed++) /* float32 sums; float64 ones (true residuals), up to 24 columns */
    for (size_t w = 0; w < NW && (!mixed || widths[w] <= 24); w++) {
      size_t na = widths[w];
      double best[2] = {1e30, 1e30};
      for (int round = 0; round < 3; round++)
        for (int k = 0; k < 2; k++) {
          memset(y[k], 0, T * na * sizeof **y), memset(yt[k], 0, T * na * sizeof **yt);
          double t0 = ntk_now();
          for (size_t i = 0; i < ntile; i++)
            (mixed ? ntk_skinny_tile64 : ntk_skinny_tile)(tiles[i], T, T, T, x, xt, y[k], yt[k], na, scratch, hows[k]);
          double t = (ntk_now() - t0) / (double)ntile;
          if (t < best[k]) best[k] = t;
        }
      /* an entry's sum of |terms|: at most T * 0.5 per tile, summed over the ntile tiles of a round */
      double err = fmax(maxdiff(y[0], y[1], T * na), maxdiff(yt[0], yt[1], T * na));
      status |= row(mixed ? "float32 tile in f64" : "float32 tile, both", !mixed, na, best, err,
                    (mixed ? 1e-12 : 1e-5) * 0.5 * (double)T * (double)ntile);
    }
  for (size_t w = 0; w < NW; w++) {
    size_t na = widths[w];
    double bt[2] = {1e30, 1e30}, ba[2] = {1e30, 1e30};
    for (int round = 0; round < 3; round++)
      for (int k = 0; k < 2; k++)
        for (int l = 0; l < 2; l++) {
          double t0 = ntk_now();
          ntk_skinny_atx(L[l], N, K, K, xt, yt[k], na, scratch, hows[k]);
          double t1 = ntk_now();
          ntk_skinny_ax(L[l], N, K, K, x, y[k], na, scratch, hows[k]);
          double t2 = ntk_now();
          bt[k] = fmin(bt[k], t1 - t0), ba[k] = fmin(ba[k], t2 - t1);
        }
    /* an entry's sum of |terms|: at most 0.25 N (L^T R) or 0.25 K (L w) */
    status |= row("float64 L^T R", 0, na, bt, maxdiff(yt[0], yt[1], K * na), 1e-12 * 0.25 * (double)N);
    status |= row("float64 L w", 0, na, ba, maxdiff(y[0], y[1], N * na), 1e-12 * 0.25 * (double)K);
  }
  return status;
}
