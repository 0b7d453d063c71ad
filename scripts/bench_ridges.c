/* A ridge sweep with leave-one-out on one train kernel, two ways, in one
 * run (issue 28, item 5): ntkd's per-ridge path (ntk_spd_solve: add the
 * ridge, Cholesky, condition estimate, solve for the classes, the inverse's
 * diagonal through the triangular inverse, restore the matrix) against one
 * eigendecomposition of the kernel (LAPACK's dsyevd) shared by every
 * ridge, after which a ridge costs two n x n x classes products and one
 * n x n pass for the inverse's diagonal.
 *
 *   ntkd_bench_ridges RAW N ELEM CLASSES RIDGE...
 *     RAW: an N x N kernel, row-major, ELEM = 4 (float32) or 8 (float64)
 *     bytes per value (`ntkd export STORE RAW --kernel nngp --rows 0:N
 *     --cols 0:N --format raw`); CLASSES one-hot targets, sample i of class
 *     i mod CLASSES; each RIDGE times the mean of the diagonal, as [solve].
 *
 * Prints each way's time for the sweep, their ratio and the ridge count at
 * which one eigendecomposition would break even. Checks that both ways
 * agree: the largest difference of the solutions and of the inverse's
 * diagonal, relative to the largest value, must stay under 1e-6 (both are
 * float64 solves of a matrix whose condition number reaches ~1e9); exits
 * 1 otherwise. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/cpuinit.h"
#include "solve/solve.h"

void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda, double *w, double *work,
             const int *lwork, int *iwork, const int *liwork, int *info, size_t, size_t);

static double max_rel(const double *a, const double *b, size_t count) {
  double scale = 0, diff = 0;
  for (size_t i = 0; i < count; i++) {
    if (fabs(b[i]) > scale) scale = fabs(b[i]);
    if (fabs(a[i] - b[i]) > diff) diff = fabs(a[i] - b[i]);
  }
  return scale > 0 ? diff / scale : diff;
}

int main(int argc, char **argv) {
  ntk_cpu_fix_openblas(argv);
  if (argc < 6) {
    fprintf(stderr, "usage: ntkd_bench_ridges RAW N ELEM CLASSES RIDGE...\n");
    return 2;
  }
  size_t n = strtoul(argv[2], NULL, 10), classes = strtoul(argv[4], NULL, 10), nn = n * n;
  int elem = atoi(argv[3]), nr = argc - 5;
  if (n == 0 || n > 46000 || (elem != 4 && elem != 8) || classes == 0) {
    fprintf(stderr, "ntkd_bench_ridges: N in 1..46000, ELEM 4 or 8, CLASSES > 0\n");
    return 2;
  }
  double *a = malloc(nn * sizeof *a), *v = malloc(nn * sizeof *v), *w = malloc(n * sizeof *w);
  double *y = calloc(n * classes, sizeof *y), *x = malloc(n * classes * sizeof *x), *t = malloc(n * classes * sizeof *t);
  double *ac = malloc(nr * n * classes * sizeof *ac), *dc = malloc(nr * n * sizeof *dc);
  double *ae = malloc(n * classes * sizeof *ae), *de = malloc(n * sizeof *de);
  void *raw = malloc(nn * (size_t)elem);
  FILE *f = fopen(argv[1], "rb");
  if (!a || !v || !w || !y || !x || !t || !ac || !dc || !ae || !de || !raw || !f ||
      fread(raw, (size_t)elem, nn, f) != nn) {
    fprintf(stderr, "ntkd_bench_ridges: cannot read %zu x %zu values of %d bytes from %s\n", n, n, elem, argv[1]);
    return 1;
  }
  fclose(f);
  for (size_t i = 0; i < nn; i++) a[i] = elem == 4 ? (double)((float *)raw)[i] : ((double *)raw)[i];
  free(raw);
  double mean = 0;
  for (size_t i = 0; i < n; i++) mean += a[i * n + i] / (double)n;
  for (size_t i = 0; i < n; i++) y[i * classes + i % classes] = 1;

  /* ntkd's way: per ridge, everything from the matrix. */
  ntk_cpu_all_threads();
  double t0 = ntk_now();
  for (int r = 0; r < nr; r++) {
    double rcond;
    memcpy(ac + (size_t)r * n * classes, y, n * classes * sizeof *y);
    int info = ntk_spd_solve(a, n, atof(argv[5 + r]) * mean, ac + (size_t)r * n * classes, classes, &rcond,
                             dc + (size_t)r * n);
    if (info) {
      fprintf(stderr, "ntkd_bench_ridges: ridge %s: ntk_spd_solve returned %d\n", argv[5 + r], info);
      return 1;
    }
  }
  double tchol = ntk_now() - t0;

  /* One eigendecomposition, K = V diag(w) V^T (column-major V: the row-major
   * matrix is symmetric), then per ridge V (w + s)^-1 V^T Y and
   * diag = sum_j V_ij^2 / (w_j + s). */
  t0 = ntk_now();
  memcpy(v, a, nn * sizeof *v);
  int ni = (int)n, lwork = -1, liwork = -1, iwq, info;
  double wq;
  dsyevd_("V", "U", &ni, v, &ni, w, &wq, &lwork, &iwq, &liwork, &info, 1, 1);
  lwork = (int)wq, liwork = iwq;
  double *work = malloc((size_t)lwork * sizeof *work);
  int *iwork = malloc((size_t)liwork * sizeof *iwork);
  if (!work || !iwork) return 1;
  dsyevd_("V", "U", &ni, v, &ni, w, work, &lwork, iwork, &liwork, &info, 1, 1);
  double teig = ntk_now() - t0;
  if (info) {
    fprintf(stderr, "ntkd_bench_ridges: dsyevd info %d\n", info);
    return 1;
  }
  double worst = 0, tper = 0;
  for (int r = 0; r < nr; r++) {
    double s = atof(argv[5 + r]) * mean, t1 = ntk_now();
    /* T = V^T Y (n x classes, row-major: T = Y^T V as columns), scaled, X = V T. */
    cblas_dgemm(CblasColMajor, CblasTrans, CblasTrans, ni, (int)classes, ni, 1.0, v, ni, y, (int)classes, 0.0, t, ni);
    for (size_t k = 0; k < classes; k++)
      for (size_t j = 0; j < n; j++) t[k * n + j] /= w[j] + s;
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, ni, (int)classes, ni, 1.0, v, ni, t, ni, 0.0, x, ni);
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < classes; k++) ae[i * classes + k] = x[k * n + i];
    for (size_t i = 0; i < n; i++) de[i] = 0;
    for (size_t j = 0; j < n; j++) {
      double inv = 1.0 / (w[j] + s);
      const double *vj = v + j * n;
      for (size_t i = 0; i < n; i++) de[i] += vj[i] * vj[i] * inv;
    }
    tper += ntk_now() - t1;
    double e1 = max_rel(ae, ac + (size_t)r * n * classes, n * classes), e2 = max_rel(de, dc + (size_t)r * n, n);
    printf("  ridge %-8s solution %.1e, inverse's diagonal %.1e (relative differences)\n", argv[5 + r], e1, e2);
    if (e1 > worst) worst = e1;
    if (e2 > worst) worst = e2;
  }
  ntk_cpu_single_thread();
  double per = tchol / nr, even = (teig) / (per - tper / nr);
  printf("ridge sweep with leave-one-out, n = %zu, %d ridges, %zu classes:\n", n, nr, classes);
  printf("  Cholesky per ridge (ntkd):   %.2f s for the sweep (%.2f s per ridge)\n", tchol, per);
  printf("  one eigendecomposition:      %.2f s for the sweep (dsyevd %.2f s, then %.3f s per ridge)\n",
         teig + tper, teig, tper / nr);
  printf("  ratio eigen / Cholesky:      %.2f (above 1: Cholesky is faster)\n", (teig + tper) / tchol);
  printf("  break-even:                  %.1f ridges\n", even);
  if (!(worst <= 1e-6)) {
    printf("check FAILED: the two ways differ by %.1e (bound 1e-6)\n", worst);
    return 1;
  }
  printf("check: the two ways agree within %.1e (bound 1e-6)\n", worst);
  return 0;
}
