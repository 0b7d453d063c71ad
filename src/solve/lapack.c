/* The single-process solve method: rank 0 holds the train block of one
 * kernel in float64 and factorises it with OpenBLAS's LAPACK, all cores.
 * See src/solve/solve_method.h and docs/SOLVE.md. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpuinit.h"
#include "base/clock.h"
#include "base/signals.h"
#include "solve/solve.h"
#include "solve/solve_method.h"

/* LAPACK from OpenBLAS, Fortran interface (LP64: 32-bit integers). The
 * trailing size_t are the hidden lengths of the character arguments. */
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t);
void dpotrs_(const char *uplo, const int *n, const int *nrhs, const double *a, const int *lda, double *b,
             const int *ldb, int *info, size_t);
void dpocon_(const char *uplo, const int *n, const double *a, const int *lda, const double *anorm,
             double *rcond, double *work, int *iwork, int *info, size_t);
void dtrtri_(const char *uplo, const char *diag, const int *n, double *a, const int *lda, int *info, size_t,
             size_t);

/* The steps of a dense SPD solve on a row-major n x n matrix `a` holding
 * both triangles. Row-major lower = column-major upper: LAPACK factors the
 * row-major lower triangle ('U' in its column-major view, a = U^T U) and
 * never touches the upper one, from which the matrix is restored. */
struct spd {
  double *a, *diag; /* the matrix; its diagonal before `reg` was added */
  size_t n;
  int ni;
};

/* x <- (a + reg I)^-1 x by the factor in s->a (ntk_solve_inverse_probe). */
static ntk_status apply_factor(void *ctx, double *x) {
  const struct spd *s = ctx;
  int one = 1, info = 0;
  dpotrs_("U", &s->ni, &one, s->a, &s->ni, x, &s->ni, &info, 1);
  return info ? ntk_error(NTK_EINTERNAL, "dpotrs: argument %d is invalid", -info) : NTK_OK;
}

/* Add reg to the diagonal, Cholesky, 1-norm condition estimate. Returns
 * the LAPACK info (> 0: not positive definite at that column), -1: out of
 * memory. s->diag must hold n doubles. */
static int spd_factor(struct spd *s, double reg, double *rcond) {
  size_t n = s->n;
  double *a = s->a, anorm = 0;
  double *work = malloc(3 * n * sizeof *work);
  int *iwork = malloc(n * sizeof *iwork), info = 0;
  if (!work || !iwork) {
    free(work), free(iwork);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    s->diag[i] = a[i * n + i];
    a[i * n + i] += reg;
    double sum = 0;
    for (size_t j = 0; j < n; j++) sum += fabs(a[i * n + j]);
    if (sum > anorm) anorm = sum;
  }
  dpotrf_("U", &s->ni, a, &s->ni, &info, 1);
  if (info == 0) dpocon_("U", &s->ni, a, &s->ni, &anorm, rcond, work, iwork, &info, 1);
  if (info == 0 && *rcond > 0 && anorm > 0) {
    /* dpocon's estimate of the inverse's norm, then inverse iteration's
     * look (solve_method.h) */
    double est0 = 1 / (*rcond * anorm), est = est0;
    (void)ntk_solve_inverse_probe(apply_factor, s, n, work, &est); /* dpotrs with one column cannot fail */
    if (est > est0) *rcond = 1 / est / anorm;
  }
  free(work), free(iwork);
  return info;
}

/* (a + reg I)^-1 B for B column-major n x nrhs (leading dimension n), in
 * place. */
static int spd_solve_cm(const struct spd *s, double *b, size_t nrhs) {
  int nr = (int)nrhs, info = 0;
  if (nrhs) dpotrs_("U", &s->ni, &nr, s->a, &s->ni, b, &s->ni, &info, 1);
  return info;
}

/* diag((a + reg I)^-1) = squared row norms of U^-1 (column-major: row i of
 * U^-1 is a[j * n + i], j >= i), the inverse computed in place of the
 * factor, which is then gone: the last step before spd_restore. */
static int spd_diag_inverse(struct spd *s, double *diag_inv) {
  size_t n = s->n;
  int info = 0;
  dtrtri_("U", "N", &s->ni, s->a, &s->ni, &info, 1, 1);
  for (size_t i = 0; i < n && info == 0; i++) {
    double sum = 0;
    for (size_t j = i; j < n; j++) sum += s->a[j * n + i] * s->a[j * n + i];
    diag_inv[i] = sum;
  }
  return info;
}

/* The matrix as it was, bit for bit, from the untouched upper triangle. */
static void spd_restore(struct spd *s) {
  size_t n = s->n;
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < i; j++) s->a[i * n + j] = s->a[j * n + i];
    s->a[i * n + i] = s->diag[i];
  }
}

int ntk_spd_solve(double *a, size_t n, double reg, double *b, size_t nrhs, double *rcond, double *diag_inv) {
  *rcond = 0;
  if (n == 0) return 0;
  if (n > NTK_LAPACK_MAX_N) return -2;
  struct spd s = {a, malloc(n * sizeof(double)), n, (int)n};
  double *bc = malloc(n * nrhs * sizeof *bc + 1);
  if (!s.diag || !bc) {
    free(s.diag), free(bc);
    return -1;
  }
  int info = spd_factor(&s, reg, rcond);
  if (info == 0) {
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < nrhs; k++) bc[k * n + i] = b[i * nrhs + k];
    info = spd_solve_cm(&s, bc, nrhs);
    for (size_t i = 0; i < n && info == 0; i++)
      for (size_t k = 0; k < nrhs; k++) b[i * nrhs + k] = bc[k * n + i];
  }
  if (info == 0 && diag_inv) info = spd_diag_inverse(&s, diag_inv);
  if (info >= 0) spd_restore(&s); /* -1: spd_factor failed before touching a */
  free(s.diag), free(bc);
  return info;
}

size_t ntk_solve_lapack_bytes(size_t ntr, size_t nte, size_t classes) {
  return 8 * (ntr * ntr + nte * ntr + 2 * ntr * classes + 5 * ntr);
}

/* Predictive variance (docs/SOLVE.md, "Leave-one-out and predictive
 * variance"): neural-tangents' compute_cov at t = infinity. With A = K +
 * reg I the regularised train block of the kernel being solved, K^g the
 * NNGP blocks (x train, t test) and Theta the NTK blocks:
 *   nngp  cov = K^g_tt - K^g_tx A^-1 K^g_xt                 (A = K^g_xx + reg I)
 *   ntk   cov = K^g_tt + Z^T K^g_xx Z - Z^T K^g_xt - K^g_tx Z, Z = A^-1 Theta_xt
 *                                                           (A = Theta_xx + reg I)
 * No regulariser on K^g_tt, nor on K^g_xx in the NTK formula. */
#define VAR_COLS 256 /* test columns per block of the NTK formula's K^g_xx Z */

struct var_in {
  int full;     /* nte x nte covariance, else its diagonal */
  double *ktt;  /* NNGP test x test: nte x nte (full) or its diagonal (nte) */
  double *kxx;  /* NTK only: the NNGP train block, ntr x ntr (symmetric) */
  double *kxt;  /* NTK only: the NNGP test x train block, nte x ntr row-major, i.e. K^g_xt column-major */
  double *z;    /* ntr x nte column-major scratch */
  double *m;    /* NTK only: ntr x VAR_COLS column-major scratch */
};

static void free_var_in(struct var_in *v) { free(v->ktt), free(v->kxx), free(v->kxt), free(v->z), free(v->m); }

/* Read what the variance needs besides the kernel's own train and test x
 * train blocks, and allocate the scratch. */
static ntk_status read_var_in(const struct ntk_solve_problem *p, struct var_in *v) {
  size_t ntr = p->ntr, nte = p->nte, n = ntr + nte;
  const struct ntk_store_info *in = ntk_store_get_info(p->store);
  int ntk = p->which == NTK_KERNEL_NTK;
  memset(v, 0, sizeof *v);
  v->full = p->opts->variance == NTK_VARIANCE_FULL;
  if (!(in->kernels & NTK_KERNEL_NNGP))
    return ntk_error(NTK_EINPUT, "[solve] variance needs the NNGP kernel, which %s does not hold", p->store_path);
  size_t T = in->tile < nte ? in->tile : nte;
  v->ktt = malloc((v->full ? nte * nte : T * T) * sizeof *v->ktt);
  v->z = malloc(ntr * nte * sizeof *v->z);
  if (ntk) {
    v->kxx = malloc(ntr * ntr * sizeof *v->kxx);
    v->kxt = malloc(nte * ntr * sizeof *v->kxt);
    v->m = malloc(ntr * VAR_COLS * sizeof *v->m);
  }
  if (!v->ktt || !v->z || (ntk && (!v->kxx || !v->kxt || !v->m)))
    return ntk_error(NTK_ENOMEM, "out of memory for the predictive variance of %zu test samples (%.1f GB more; "
                     "docs/SOLVE.md)", nte, 8.0 * (double)((v->full ? nte * nte : nte) + ntr * nte +
                     (ntk ? ntr * ntr + ntr * nte + ntr * VAR_COLS : 0)) / 1e9);
  ntk_status st = NTK_OK;
  if (v->full) {
    st = ntk_solve_read_block(p->store, NTK_KERNEL_NNGP, ntr, n, ntr, n, v->ktt, nte);
  } else {
    /* The diagonal, one stored tile at a time. */
    double *d = malloc(nte * sizeof *d);
    if (!d) return ntk_error(NTK_ENOMEM, "out of memory");
    for (size_t b = ntr; b < n && !st; ) {
      size_t e = (b / in->tile + 1) * in->tile;
      e = e < n ? e : n;
      st = ntk_solve_read_block(p->store, NTK_KERNEL_NNGP, b, e, b, e, v->ktt, e - b);
      for (size_t i = 0; i < e - b && !st; i++) d[b - ntr + i] = v->ktt[i * (e - b) + i];
      b = e;
    }
    free(v->ktt);
    v->ktt = d;
  }
  if (!st && ntk) st = ntk_solve_read_block(p->store, NTK_KERNEL_NNGP, 0, ntr, 0, ntr, v->kxx, ntr);
  if (!st && ntk) st = ntk_solve_read_block(p->store, NTK_KERNEL_NNGP, ntr, n, 0, ntr, v->kxt, ntr);
  return st;
}

/* One ridge's variance into `var` (row-major), from the factor of A in s
 * and the kernel's test x train block kst (nte x ntr row-major). */
static int variance(const struct ntk_solve_problem *p, const struct spd *s, const double *kst, struct var_in *v,
                    double *var) {
  size_t ntr = p->ntr, nte = p->nte;
  int nr = (int)ntr, nt = (int)nte;
  double *z = v->z;
  memcpy(z, kst, ntr * nte * sizeof *z); /* row-major test x train = column-major train x test */
  if (v->full) memcpy(var, v->ktt, nte * nte * sizeof *var);
  if (p->which == NTK_KERNEL_NNGP) {
    /* W = U^-T K_xt, so that K_tx A^-1 K_xt = W^T W. */
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasUpper, CblasTrans, CblasNonUnit, nr, nt, 1.0, s->a, nr, z, nr);
    if (v->full) {
      /* Column-major upper = row-major lower triangle; mirrored below. */
      cblas_dsyrk(CblasColMajor, CblasUpper, CblasTrans, nt, nr, -1.0, z, nr, 1.0, var, nt);
      for (size_t i = 0; i < nte; i++)
        for (size_t j = 0; j < i; j++) var[j * nte + i] = var[i * nte + j];
    } else {
      for (size_t j = 0; j < nte; j++) {
        double w = 0;
        for (size_t i = 0; i < ntr; i++) w += z[j * ntr + i] * z[j * ntr + i];
        var[j] = v->ktt[j] - w;
      }
    }
    return 0;
  }
  int info = spd_solve_cm(s, z, nte); /* Z = A^-1 Theta_xt */
  for (size_t j0 = 0; j0 < nte && info == 0; j0 += VAR_COLS) {
    size_t b = nte - j0 < VAR_COLS ? nte - j0 : VAR_COLS;
    /* M = K_xx Z - K_xt for these columns; then Z^T M - K_tx Z. */
    memcpy(v->m, v->kxt + j0 * ntr, b * ntr * sizeof *v->m);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, nr, (int)b, nr, 1.0, v->kxx, nr, z + j0 * ntr, nr, -1.0,
                v->m, nr);
    if (v->full) {
      cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, nt, (int)b, nr, 1.0, z, nr, v->m, nr, 1.0, var + j0 * nte,
                  nt);
      cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, nt, (int)b, nr, -1.0, v->kxt, nr, z + j0 * ntr, nr, 1.0,
                  var + j0 * nte, nt);
    } else {
      for (size_t j = j0; j < j0 + b; j++) {
        const double *zj = z + j * ntr, *mj = v->m + (j - j0) * ntr, *kj = v->kxt + j * ntr;
        double w = 0;
        for (size_t i = 0; i < ntr; i++) w += zj[i] * (mj[i] - kj[i]);
        var[j] = v->ktt[j] + w;
      }
    }
  }
  /* Symmetric up to rounding; made exactly so. */
  for (size_t i = 0; v->full && i < nte; i++)
    for (size_t j = 0; j < i; j++) var[i * nte + j] = var[j * nte + i] = 0.5 * (var[i * nte + j] + var[j * nte + i]);
  return info;
}

ntk_status ntk_solve_lapack(const struct ntk_solve_problem *p, struct ntk_ridge_out *out) {
  if (p->rank != 0) return NTK_OK; /* rank 0 alone; the driver agrees on the outcome */
  size_t ntr = p->ntr, nte = p->nte, classes = p->classes;
  const char *kn = ntk_solve_kernel_name(p->which);
  if (ntr > NTK_LAPACK_MAX_N)
    return ntk_error(NTK_EINPUT, "%zu train samples: method = lapack (one process) handles up to %d; use "
                     "method = scalapack under mpirun or method = cg (docs/SOLVE.md)", ntr, NTK_LAPACK_MAX_N);
  double *ktt = malloc(ntr * ntr * sizeof *ktt + 1), *kst = malloc((nte ? nte : 1) * ntr * sizeof *kst);
  struct spd s = {ktt, malloc(ntr * sizeof(double) + 1), ntr, (int)ntr};
  double *bc = malloc(ntr * classes * sizeof *bc + 1);
  if (!ktt || !kst || !s.diag || !bc) {
    free(ktt), free(kst), free(s.diag), free(bc);
    return ntk_error(NTK_ENOMEM, "out of memory for the %zu x %zu train kernel and the %zu x %zu test block "
                     "(%.1f GB); method = scalapack or cg (docs/SOLVE.md) need less per process", ntr, ntr, nte,
                     ntr, 8.0 * (double)(ntr * ntr + nte * ntr) / 1e9);
  }
  int want_var = p->nridge && out[0].var != NULL && p->opts->variance && nte > 0;
  struct var_in v;
  memset(&v, 0, sizeof v);
  double t0 = ntk_now();
  ntk_status st = ntk_solve_read_block(p->store, p->which, 0, ntr, 0, ntr, ktt, ntr);
  if (!st) st = ntk_solve_read_block(p->store, p->which, ntr, ntr + nte, 0, ntr, kst, ntr);
  if (!st && want_var) st = read_var_in(p, &v);
  double trace = 0;
  for (size_t i = 0; i < ntr; i++) trace += ktt[i * ntr + i];
  if (!st) fprintf(stderr, "ntkd: solve: %s: read the %zu x %zu train and %zu x %zu test blocks%s in %.2f s\n", kn, ntr,
                   ntr, nte, ntr, want_var ? " and what the variance needs" : "", ntk_now() - t0);
  ntk_cpu_all_threads();
  for (size_t r = 0; r < p->nridge && !st; r++) {
    if (ntk_stop_requested()) {
      st = ntk_error(NTK_EINTERRUPTED, "interrupted during the solve (the store is complete): "
                     "ntkd solve %s JOB.conf solves again", p->store_path);
      break;
    }
    struct ntk_ridge_out *o = &out[r];
    o->reg = p->ridge[r] * (trace / (double)ntr);
    t0 = ntk_now();
    /* Factor, solve for alpha, predict, variance (needs the factor), then
     * the inverse's diagonal for leave-one-out (overwrites the factor),
     * restore the matrix for the next ridge. */
    o->rcond = 0;
    int info = ntr ? spd_factor(&s, o->reg, &o->rcond) : 0;
    if (info < 0) {
      st = ntk_error(NTK_ENOMEM, "out of memory in the solve");
      break;
    }
    if (ntk_solve_ridge_verdict(o, kn, p->ridge[r], info, ntr)) {
      /* alpha = A^-1 Y, Y one-hot, column-major for dpotrs. */
      memset(bc, 0, ntr * classes * sizeof *bc);
      for (size_t i = 0; i < ntr; i++) bc[(size_t)p->ytr[i] * ntr + i] = 1.0;
      info = spd_solve_cm(&s, bc, classes);
      for (size_t i = 0; i < ntr; i++)
        for (size_t k = 0; k < classes; k++) o->alpha[i * classes + k] = bc[k * ntr + i];
      if (nte)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nte, (int)classes, (int)ntr, 1.0, kst, (int)ntr,
                    o->alpha, (int)classes, 0.0, o->pred, (int)classes);
      if (info == 0 && want_var && o->var) info = variance(p, &s, kst, &v, o->var);
      if (info == 0 && o->diag_inv) info = spd_diag_inverse(&s, o->diag_inv);
      if (info != 0) {
        st = ntk_error(NTK_EINPUT, "%s ridge %g: LAPACK failed after the factorisation (info %d)", kn, p->ridge[r],
                       info);
        break;
      }
    }
    spd_restore(&s);
    if (ntr >= 8192)
      fprintf(stderr, "ntkd: solve: %s ridge %g: Cholesky%s%s %.2f s\n", kn, p->ridge[r],
              o->diag_inv ? ", leave-one-out" : "", want_var ? ", variance" : "", ntk_now() - t0);
  }
  ntk_cpu_single_thread();
  free_var_in(&v);
  free(ktt), free(kst), free(s.diag), free(bc);
  return st;
}
