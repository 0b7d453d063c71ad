/* The single-process solve method: rank 0 holds the train block of one
 * kernel in float64 and factorises it with OpenBLAS's LAPACK, all cores.
 * See include/ntkd/solve_method.h and docs/SOLVE.md. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntkd/cpuinit.h"
#include "ntkd/progress.h"
#include "ntkd/signals.h"
#include "ntkd/solve.h"
#include "ntkd/solve_method.h"

/* LAPACK from OpenBLAS, Fortran interface (LP64: 32-bit integers). The
 * trailing size_t are the hidden lengths of the character arguments. */
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t);
void dpotrs_(const char *uplo, const int *n, const int *nrhs, const double *a, const int *lda, double *b,
             const int *ldb, int *info, size_t);
void dpocon_(const char *uplo, const int *n, const double *a, const int *lda, const double *anorm,
             double *rcond, double *work, int *iwork, int *info, size_t);
void dtrtri_(const char *uplo, const char *diag, const int *n, double *a, const int *lda, int *info, size_t,
             size_t);

int ntk_spd_solve(double *a, size_t n, double reg, double *b, size_t nrhs, double *rcond, double *diag_inv) {
  *rcond = 0;
  if (n == 0) return 0;
  if (n > NTK_LAPACK_MAX_N) return -2;
  double *diag = malloc(n * sizeof *diag), *work = malloc(3 * n * sizeof *work);
  double *bc = malloc(n * nrhs * sizeof *bc);
  int *iwork = malloc(n * sizeof *iwork);
  if (!diag || !work || !bc || !iwork) {
    free(diag), free(work), free(bc), free(iwork);
    return -1;
  }
  /* Row-major lower = column-major upper: LAPACK factors the row-major
   * lower triangle ('U' in its column-major view) and never touches the
   * upper one, from which the matrix is restored afterwards. */
  double anorm = 0;
  for (size_t i = 0; i < n; i++) {
    diag[i] = a[i * n + i];
    a[i * n + i] += reg;
    double sum = 0;
    for (size_t j = 0; j < n; j++) sum += fabs(a[i * n + j]);
    if (sum > anorm) anorm = sum;
  }
  int ni = (int)n, nr = (int)nrhs, info = 0;
  dpotrf_("U", &ni, a, &ni, &info, 1);
  if (info == 0) dpocon_("U", &ni, a, &ni, &anorm, rcond, work, iwork, &info, 1);
  if (info == 0) {
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < nrhs; k++) bc[k * n + i] = b[i * nrhs + k];
    dpotrs_("U", &ni, &nr, a, &ni, bc, &ni, &info, 1);
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < nrhs; k++) b[i * nrhs + k] = bc[k * n + i];
  }
  /* diag((U^T U)^-1) = squared row norms of U^-1 (column-major: row i of
   * U^-1 is a[j * n + i], j >= i), the inverse computed in place of the
   * factor, which is no longer needed. */
  if (info == 0 && diag_inv) {
    dtrtri_("U", "N", &ni, a, &ni, &info, 1, 1);
    for (size_t i = 0; i < n && info == 0; i++) {
      double s = 0;
      for (size_t j = i; j < n; j++) s += a[j * n + i] * a[j * n + i];
      diag_inv[i] = s;
    }
  }
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < i; j++) a[i * n + j] = a[j * n + i];
    a[i * n + i] = diag[i];
  }
  free(diag), free(work), free(bc), free(iwork);
  return info;
}

size_t ntk_solve_lapack_bytes(size_t ntr, size_t nte, size_t classes) {
  return 8 * (ntr * ntr + nte * ntr + 2 * ntr * classes + 5 * ntr);
}

ntk_status ntk_solve_lapack(const struct ntk_solve_problem *p, struct ntk_ridge_out *out) {
  if (p->rank != 0) return NTK_OK; /* rank 0 alone; the driver agrees on the outcome */
  size_t ntr = p->ntr, nte = p->nte, classes = p->classes;
  const char *kn = ntk_solve_kernel_name(p->which);
  if (ntr > NTK_LAPACK_MAX_N)
    return ntk_error(NTK_EINPUT, "%zu train samples: method = lapack (one process) handles up to %d; use "
                     "method = scalapack under mpirun or method = cg (docs/SOLVE.md)", ntr, NTK_LAPACK_MAX_N);
  double *ktt = malloc(ntr * ntr * sizeof *ktt), *kst = malloc((nte ? nte : 1) * ntr * sizeof *kst);
  if (!ktt || !kst) {
    free(ktt), free(kst);
    return ntk_error(NTK_ENOMEM, "out of memory for the %zu x %zu train kernel and the %zu x %zu test block "
                     "(%.1f GB); method = scalapack or cg (docs/SOLVE.md) need less per process", ntr, ntr, nte,
                     ntr, 8.0 * (double)(ntr * ntr + nte * ntr) / 1e9);
  }
  double t0 = ntk_now();
  ntk_status st = ntk_solve_read_block(p->store, p->which, 0, ntr, 0, ntr, ktt, ntr);
  if (!st) st = ntk_solve_read_block(p->store, p->which, ntr, ntr + nte, 0, ntr, kst, ntr);
  double trace = 0;
  for (size_t i = 0; i < ntr; i++) trace += ktt[i * ntr + i];
  if (!st) fprintf(stderr, "ntkd: solve: %s: read the %zu x %zu train and %zu x %zu test blocks in %.2f s\n", kn, ntr,
                   ntr, nte, ntr, ntk_now() - t0);
  ntk_cpu_all_threads();
  for (size_t r = 0; r < p->nridge && !st; r++) {
    if (ntk_stop_requested()) {
      st = ntk_error(NTK_EINTERRUPTED, "interrupted during the solve (the store is complete): "
                     "ntkd solve %s JOB.conf solves again", p->store_path);
      break;
    }
    struct ntk_ridge_out *o = &out[r];
    o->reg = p->ridge[r] * trace / (double)ntr;
    for (size_t i = 0; i < ntr; i++)
      for (size_t k = 0; k < classes; k++) o->alpha[i * classes + k] = (size_t)p->ytr[i] == k ? 1.0 : 0.0;
    t0 = ntk_now();
    int info = ntk_spd_solve(ktt, ntr, o->reg, o->alpha, classes, &o->rcond, o->diag_inv);
    if (info < 0) {
      st = ntk_error(NTK_ENOMEM, "out of memory in the solve");
      break;
    }
    if (info > 0) {
      o->failure = NTK_RIDGE_NOT_PD;
      snprintf(o->why, sizeof o->why, "%s train kernel with ridge %g (%.3g added to the diagonal) is not positive "
               "definite (Cholesky stopped at column %d of %zu): increase the ridge", kn, p->ridge[r], o->reg, info,
               ntr);
    } else if (o->rcond < NTK_SOLVE_MIN_RCOND) {
      o->failure = NTK_RIDGE_ILL;
      snprintf(o->why, sizeof o->why, "%s train kernel with ridge %g is too ill-conditioned to solve (reciprocal "
               "condition number %.1e < %.0e): increase the ridge", kn, p->ridge[r], o->rcond, NTK_SOLVE_MIN_RCOND);
    } else if (nte) {
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nte, (int)classes, (int)ntr, 1.0, kst, (int)ntr,
                  o->alpha, (int)classes, 0.0, o->pred, (int)classes);
    }
    if (ntr >= 8192)
      fprintf(stderr, "ntkd: solve: %s ridge %g: Cholesky%s %.2f s\n", kn, p->ridge[r],
              o->diag_inv ? " and leave-one-out" : "", ntk_now() - t0);
  }
  ntk_cpu_single_thread();
  free(ktt), free(kst);
  return st;
}
