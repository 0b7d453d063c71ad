/* Kernel regression (src/solve/): predictions, leave-one-out and the
 * predictive variance against neural-tangents' nt.predict
 * (tests/data/ref_solve.txt, from scripts/nt_reference.sh), and the dense
 * solver's refusals of matrices it cannot solve. The end-to-end path (data
 * -> tiles -> store -> `ntkd solve` -> .npy) is checked against the same
 * file by tests/e2e_solve.sh. And cg's skinny products (src/solve/skinny.c)
 * against plain float64 sums. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "base/codec.h"
#include "base/rng.h"
#include "job/config.h"
#include "solve/solve.h"
#include "solve/skinny.h"
#include "store/store.h"
#include "base/tiling.h"
#include "refcase.h"
#include "testutil.h"

static ntk_comm_t *world;

static void read_label_block(FILE *f, const char *label, double *out, size_t count) {
  ck_assert_msg(ref_read_matrix(f, label, out, count), "reading %s", label);
}

/* Kernel-regression predictions of one kernel (n x n reference matrix k). */
/* loo (may be NULL): the closed-form leave-one-out predictions of the train
 * set, y_i - alpha_i / [(K + reg I)^-1]_ii (ntr x classes), from
 * ntk_spd_solve's diag_inv. */
static void predict(const double *k, size_t n, size_t ntr, const int *labels, size_t classes, double ridge,
                    double *pred, double *rcond, double *loo) {
  size_t nte = n - ntr;
  double *ktt = malloc(ntr * ntr * sizeof *ktt), *copy = malloc(ntr * ntr * sizeof *copy);
  double *alpha = calloc(ntr * classes, sizeof *alpha), *dinv = malloc(ntr * sizeof *dinv);
  double trace = 0;
  for (size_t i = 0; i < ntr; i++) {
    /* Symmetric from the lower triangle, as ntkd's store holds it
     * (neural-tangents' matrix may differ by an ulp across the diagonal). */
    for (size_t j = 0; j < ntr; j++) ktt[i * ntr + j] = j <= i ? k[i * n + j] : k[j * n + i];
    trace += k[i * n + i];
    alpha[i * classes + (size_t)labels[i]] = 1.0;
  }
  memcpy(copy, ktt, ntr * ntr * sizeof *ktt);
  ck_assert_int_eq(ntk_spd_solve(ktt, ntr, ridge * trace / (double)ntr, alpha, classes, rcond, loo ? dinv : NULL),
                   0);
  /* The matrix comes back as it was, bit for bit, for the next ridge (also
   * after the inverse's diagonal, computed in place of the factor). */
  ck_assert(!memcmp(copy, ktt, ntr * ntr * sizeof *ktt));
  for (size_t i = 0; loo && i < ntr; i++)
    for (size_t c = 0; c < classes; c++)
      loo[i * classes + c] = ((size_t)labels[i] == c ? 1.0 : 0.0) - alpha[i * classes + c] / dinv[i];
  for (size_t i = 0; i < nte; i++)
    for (size_t c = 0; c < classes; c++) {
      double s = 0;
      for (size_t j = 0; j < ntr; j++) s += k[(ntr + i) * n + j] * alpha[j * classes + c];
      pred[i * classes + c] = s;
    }
  free(ktt), free(copy), free(alpha), free(dinv);
}

/* Largest |got - want| over the largest |want|. */
static double rel_err(const double *got, const double *want, size_t count, size_t stride) {
  double scale = 0, err = 0;
  for (size_t k = 0; k < count; k++) scale = fmax(scale, fabs(want[k * stride]));
  for (size_t k = 0; k < count; k++) {
    double e = fabs(got[k] - want[k * stride]) / scale;
    if (!(e <= err)) err = e;
  }
  return err;
}

START_TEST(test_against_neural_tangents) {
  FILE *f = ref_open("ref_solve.txt");
  struct ref_case c;
  int cases = 0;
  while (ref_read_case(f, &c)) {
    size_t ntr;
    double ridge;
    ck_assert_int_eq(fscanf(f, " ntrain %zu ridge %lf", &ntr, &ridge), 2);
    double *lab = malloc(c.n * sizeof *lab);
    read_label_block(f, "labels", lab, c.n);
    int *labels = malloc(c.n * sizeof *labels);
    size_t classes = 0;
    for (size_t i = 0; i < c.n; i++) {
      labels[i] = (int)lab[i];
      if ((size_t)labels[i] + 1 > classes) classes = (size_t)labels[i] + 1;
    }
    size_t nte = c.n - ntr;
    double *want = malloc(nte * classes * sizeof *want), *got = malloc(nte * classes * sizeof *got);
    for (int which = 0; which < 2; which++) {
      read_label_block(f, which ? "pred_ntk" : "pred_nngp", want, nte * classes);
      double rcond;
      predict(which ? c.ntk : c.nngp, c.n, ntr, labels, classes, ridge, got, &rcond, NULL);
      double err = rel_err(got, want, nte * classes, 1);
      /* Both sides solve the same float64 system; the bound allows for
       * the condition number (rcond down to ~1e-6 here). */
      ck_assert_msg(err < 1e-8, "%s %s: prediction error %.3g (rcond %.2g)", c.name, which ? "ntk" : "nngp", err,
                    rcond);
    }
    /* Leave-one-out: the closed form from diag((K + reg I)^-1) against
     * neural-tangents predicting each train sample from the other n - 1
     * (same regulariser), sample by sample. */
    double *loo_want = malloc(ntr * classes * sizeof *loo_want), *loo_got = malloc(ntr * classes * sizeof *loo_got);
    for (int which = 0; which < 2; which++) {
      double summary[2], rcond;
      read_label_block(f, which ? "loo_ntk" : "loo_nngp", summary, 2);
      read_label_block(f, which ? "loo_pred_ntk" : "loo_pred_nngp", loo_want, ntr * classes);
      predict(which ? c.ntk : c.nngp, c.n, ntr, labels, classes, ridge, got, &rcond, loo_got);
      double err = rel_err(loo_got, loo_want, ntr * classes, 1);
      printf("%s %s: leave-one-out predictions: largest relative error %.3g\n", c.name, which ? "ntk" : "nngp", err);
      ck_assert_msg(err < 1e-8, "%s %s: leave-one-out error %.3g", c.name, which ? "ntk" : "nngp", err);
    }
    free(loo_want), free(loo_got);
    free(lab), free(labels), free(want), free(got);
    ref_free_case(&c);
    cases++;
  }
  fclose(f);
  ck_assert_int_ge(cases, 4);
}
END_TEST

START_TEST(test_not_positive_definite) {
  /* Eigenvalues 3 and -1. */
  double a[4] = {1, 2, 2, 1}, b[2] = {1, 1}, rcond;
  ck_assert_int_eq(ntk_spd_solve(a, 2, 0, b, 1, &rcond, NULL), 2);
  ck_assert(a[0] == 1 && a[1] == 2 && a[2] == 2 && a[3] == 1);
  /* A ridge of 1.5 makes it positive definite: (1.5+1, 2; 2, 2.5). */
  ck_assert_int_eq(ntk_spd_solve(a, 2, 1.5, b, 1, &rcond, NULL), 0);
  ck_assert_double_eq_tol(b[0], 1.0 / 4.5, 1e-15);
  ck_assert_double_eq_tol(b[1], 1.0 / 4.5, 1e-15);
}
END_TEST

START_TEST(test_ill_conditioned) {
  /* Two identical samples: K = [[1,1],[1,1]] is singular; rounding may let
   * the Cholesky through, the condition estimate must not. */
  double a[9] = {1, 1, 0.5, 1, 1, 0.5, 0.5, 0.5, 1}, b[3] = {1, 0, 0}, rcond = 1;
  int info = ntk_spd_solve(a, 3, 0, b, 1, &rcond, NULL);
  ck_assert_msg(info > 0 || rcond < NTK_SOLVE_MIN_RCOND, "info %d rcond %g", info, rcond);
  /* Any ridge > 0 makes it solvable. */
  double b2[3] = {1, 0, 0};
  ck_assert_int_eq(ntk_spd_solve(a, 3, 1e-3, b2, 1, &rcond, NULL), 0);
  ck_assert(rcond > NTK_SOLVE_MIN_RCOND && isfinite(b2[0]));
}
END_TEST

START_TEST(test_duplicates_condition) {
  /* Two pairs of equal samples (rows 1 = 0, 7 = 5) in a well-conditioned
   * Gram matrix (n = 200 samples of d = 400 features): K has two null
   * directions, e0 - e1 and e5 - e7, and a tiny ridge leaves it ill-
   * conditioned. Higham's estimator alone (dpocon) saw none of it: rcond
   * 1.9e-12 printed where the truth was 4.2e-15 (a hunt, n = 600), and the
   * ridge was solved. The estimate must be within a factor of 10 of the
   * true 1-norm rcond, from the explicit inverse, and refused. */
  enum { n = 200, d = 400 };
  static double x[n * d], k[n * n], inv[n * n];
  uint64_t state = 42;
  for (size_t i = 0; i < n * d; i++) x[i] = (double)(ntk_splitmix64(&state) >> 11) * 0x1p-53 - 0.5;
  memcpy(x + 1 * d, x + 0 * d, d * sizeof *x);
  memcpy(x + 7 * d, x + 5 * d, d * sizeof *x);
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < n; j++) {
      double s = 0;
      for (size_t f = 0; f < d; f++) s += x[i * d + f] * x[j * d + f];
      k[i * n + j] = s / d;
    }
  double trace = 0;
  for (size_t i = 0; i < n; i++) trace += k[i * n + i];
  for (int e = 12; e >= 9; e--) {
    double reg = pow(10, -e) * (trace / n), rcond = 1, true_rcond, rc_inv;
    memset(inv, 0, sizeof inv);
    for (size_t i = 0; i < n; i++) inv[i * n + i] = 1;
    ck_assert_int_eq(ntk_spd_solve(k, n, reg, inv, n, &rc_inv, NULL), 0);
    double na = 0, ni = 0;
    for (size_t j = 0; j < n; j++) {
      double sa = 0, si = 0;
      for (size_t i = 0; i < n; i++) sa += fabs(k[i * n + j] + (i == j ? reg : 0)), si += fabs(inv[i * n + j]);
      na = fmax(na, sa), ni = fmax(ni, si);
    }
    true_rcond = 1 / (na * ni);
    double b[n];
    for (size_t i = 0; i < n; i++) b[i] = 1;
    ck_assert_int_eq(ntk_spd_solve(k, n, reg, b, 1, &rcond, NULL), 0);
    ck_assert_msg(rcond >= true_rcond / 1.01 && rcond <= 10 * true_rcond,
                  "ridge 1e-%d: rcond estimated %.3g, true %.3g", e, rcond, true_rcond);
    if (true_rcond < NTK_SOLVE_MIN_RCOND / 10) ck_assert(rcond < NTK_SOLVE_MIN_RCOND);
  }
}
END_TEST

START_TEST(test_known_answer) {
  /* K = diag(2, 4) + 0: alpha = Y / diag. Two right-hand sides. */
  double a[4] = {2, 0, 0, 4}, b[4] = {1, 0, 0, 1}, rcond;
  ck_assert_int_eq(ntk_spd_solve(a, 2, 0, b, 2, &rcond, NULL), 0);
  ck_assert_double_eq_tol(b[0], 0.5, 1e-15);
  ck_assert_double_eq_tol(b[3], 0.25, 1e-15);
  ck_assert(b[1] == 0 && b[2] == 0);
  ck_assert_double_eq_tol(rcond, 0.5, 1e-15);
}
END_TEST

/* A 1-D int64 labels .npy. */
static void write_labels(const char *path, const int64_t *y, size_t n) {
  char hdr[128];
  int len = snprintf(hdr + 10, sizeof hdr - 10, "{'descr': '<i8', 'fortran_order': False, 'shape': (%zu,), }", n);
  size_t total = (10 + (size_t)len + 1 + 63) / 64 * 64;
  memcpy(hdr, "\x93NUMPY\x01\x00", 8);
  hdr[8] = (char)(total - 10);
  hdr[9] = 0;
  memset(hdr + 10 + len, ' ', total - 10 - (size_t)len - 1);
  hdr[total - 1] = '\n';
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(hdr, 1, total, f), total);
  ck_assert_uint_eq(fwrite(y, sizeof *y, n, f), n);
  fclose(f);
}

/* A float64 store (tile 5: tiles straddle the train/test boundary) holding
 * a reference case's two kernels, every tile including test x test. */
static void write_ref_store(const char *path, const struct ref_case *c, size_t ntr) {
  struct ntk_store_info in;
  memset(&in, 0, sizeof in);
  in.n = c->n;
  in.d = c->d;
  in.tile = 5;
  in.elem = 8;
  in.kernels = NTK_KERNEL_NNGP | NTK_KERNEL_NTK;
  in.n_train = ntr;
  in.test_test = 1;
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_create(path, &in, "test", &s), NTK_OK);
  const struct ntk_tiling *tg = ntk_store_tiling(s);
  ck_assert_uint_eq(tg->needed, tg->ntiles);
  ntk_codec_t *codec = ntk_codec_create(1);
  double raw[2 * 25];
  unsigned char payload[4096];
  for (uint64_t idx = 0; idx < tg->ntiles; idx++) {
    struct ntk_tile t = ntk_tiling_tile(tg, idx);
    size_t cells = (size_t)(t.rows * t.cols);
    /* The lower triangle of neural-tangents' matrices, as a worker stores it. */
    for (size_t i = 0; i < t.rows; i++)
      for (size_t j = 0; j < t.cols; j++) {
        size_t r = t.r0 + i, q = t.c0 + j, a = r >= q ? r : q, b = r >= q ? q : r;
        raw[i * t.cols + j] = c->nngp[a * c->n + b];
        raw[cells + i * t.cols + j] = c->ntk[a * c->n + b];
      }
    size_t len;
    ck_assert_int_eq(ntk_codec_compress(codec, raw, 2 * cells * sizeof *raw, 8, payload, sizeof payload, &len), NTK_OK);
    ck_assert_int_eq(ntk_store_append(s, &t, payload, len, ntk_checksum(payload, len), NTK_CODEC_SHUFFLE_ZSTD), NTK_OK);
  }
  ntk_codec_free(codec);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
}

/* A float64 .npy of `count` values; the header must give `shape`. */
static void read_npy(const char *path, const char *shape, double *out, size_t count) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  unsigned char pre[10];
  ck_assert_uint_eq(fread(pre, 1, 10, f), 10);
  size_t hl = pre[8] | (size_t)pre[9] << 8;
  char hdr[256] = "";
  ck_assert(hl < sizeof hdr && fread(hdr, 1, hl, f) == hl);
  ck_assert_msg(strstr(hdr, "'<f8'") && strstr(hdr, shape), "%s: header %s, want shape %s", path, hdr, shape);
  ck_assert_uint_eq(fread(out, sizeof *out, count, f), count);
  ck_assert_int_eq(fgetc(f), EOF);
  fclose(f);
}

/* The whole solve (src/solve/solve.c and lapack.c) on neural-tangents' own
 * kernels, read from a store: leave-one-out accuracy and MSE of the table
 * against the brute-force leave-one-out, and the predictive variance
 * (variance = yes: the diagonal; full: the covariance) against
 * compute_cov=True. */
START_TEST(test_loo_and_variance_against_neural_tangents) {
  const char *dir = tu_tmpdir();
  FILE *f = ref_open("ref_solve.txt");
  struct ref_case c;
  int cases = 0;
  double worst_loo = 0, worst_var = 0, worst_cov = 0;
  while (ref_read_case(f, &c)) {
    size_t ntr;
    double ridge;
    ck_assert_int_eq(fscanf(f, " ntrain %zu ridge %lf", &ntr, &ridge), 2);
    size_t nte = c.n - ntr, classes = 0;
    double *lab = malloc(c.n * sizeof *lab);
    read_label_block(f, "labels", lab, c.n);
    int64_t *y = malloc(c.n * sizeof *y);
    for (size_t i = 0; i < c.n; i++) {
      y[i] = (int64_t)lab[i];
      if ((size_t)y[i] + 1 > classes) classes = (size_t)y[i] + 1;
    }
    double *skip = malloc((nte > ntr ? nte : ntr) * classes * sizeof *skip);
    double loo[2][2], *cov[2], *got = malloc(nte * nte * sizeof *got);
    read_label_block(f, "pred_nngp", skip, nte * classes);
    read_label_block(f, "pred_ntk", skip, nte * classes);
    for (int which = 0; which < 2; which++) {
      read_label_block(f, which ? "loo_ntk" : "loo_nngp", loo[which], 2);
      read_label_block(f, which ? "loo_pred_ntk" : "loo_pred_nngp", skip, ntr * classes);
    }
    for (int which = 0; which < 2; which++) {
      cov[which] = malloc(nte * nte * sizeof *cov[which]);
      read_label_block(f, which ? "cov_ntk" : "cov_nngp", cov[which], nte * nte);
    }
    char store[512], ytr[512], yte[512], prefix[512];
    tu_path(store, sizeof store, dir, "ref.ntk");
    tu_path(ytr, sizeof ytr, dir, "ytr.npy");
    tu_path(yte, sizeof yte, dir, "yte.npy");
    tu_path(prefix, sizeof prefix, dir, c.name);
    unlink(store);
    write_ref_store(store, &c, ntr);
    write_labels(ytr, y, ntr);
    write_labels(yte, y + ntr, nte);
    struct ntk_job *job = calloc(1, sizeof *job);
    ntk_job_defaults(job);
    snprintf(job->labels_path, sizeof job->labels_path, "%s", ytr);
    snprintf(job->test.labels, sizeof job->test.labels, "%s", yte);
    snprintf(job->solve.predictions, sizeof job->solve.predictions, "%s", prefix);
    job->test.enabled = job->test.test_test = job->solve.enabled = 1;
    job->solve.method = NTK_SOLVE_LAPACK;
    job->solve.nridge = 1;
    job->solve.ridge[0] = ridge;
    for (int variance = NTK_VARIANCE_DIAG; variance <= NTK_VARIANCE_FULL; variance++) {
      job->solve.variance = variance;
      struct ntk_solve_result res[2];
      size_t nres = 0;
      ck_assert_int_eq(ntk_solve(world, store, NULL, job, NULL, res, 2, &nres), NTK_OK);
      ck_assert_uint_eq(nres, 2);
      for (int which = 0; which < 2; which++) {
        const char *kn = which ? "ntk" : "nngp";
        ck_assert_int_eq(res[which].kernel, which ? NTK_KERNEL_NTK : NTK_KERNEL_NNGP);
        /* One train sample is 1/ntr of the accuracy: equal, not close. */
        ck_assert_msg(fabs(res[which].loo_accuracy - loo[which][0]) < 1e-12, "%s %s: LOO accuracy %.17g, "
                      "neural-tangents %.17g", c.name, kn, res[which].loo_accuracy, loo[which][0]);
        double e = fabs(res[which].loo_mse - loo[which][1]) / loo[which][1];
        worst_loo = fmax(worst_loo, e);
        ck_assert_msg(e < 1e-8, "%s %s: LOO MSE %.17g, neural-tangents %.17g", c.name, kn, res[which].loo_mse,
                      loo[which][1]);
        char path[700], shape[64];
        snprintf(path, sizeof path, "%s-%s-ridge%g-%s.npy", prefix, kn, ridge,
                 variance == NTK_VARIANCE_FULL ? "cov" : "var");
        if (variance == NTK_VARIANCE_FULL) {
          snprintf(shape, sizeof shape, "(%zu, %zu)", nte, nte);
          read_npy(path, shape, got, nte * nte);
          e = rel_err(got, cov[which], nte * nte, 1);
          worst_cov = fmax(worst_cov, e);
          for (size_t i = 0; i < nte; i++)
            for (size_t j = 0; j < i; j++) ck_assert(got[i * nte + j] == got[j * nte + i]);
        } else {
          snprintf(shape, sizeof shape, "(%zu, 1)", nte);
          read_npy(path, shape, got, nte);
          e = rel_err(got, cov[which], nte, nte + 1); /* the diagonal */
          worst_var = fmax(worst_var, e);
        }
        ck_assert_msg(e < 1e-8, "%s %s: %s error %.3g", c.name, kn, variance == NTK_VARIANCE_FULL ? "covariance"
                      : "variance", e);
      }
    }
    /* loo = no: no leave-one-out (NaN in the results). */
    job->solve.loo = 0;
    job->solve.variance = NTK_VARIANCE_NO;
    struct ntk_solve_result res[2];
    size_t nres = 0;
    ck_assert_int_eq(ntk_solve(world, store, NULL, job, NULL, res, 2, &nres), NTK_OK);
    ck_assert(nres == 2 && isnan(res[0].loo_accuracy) && isnan(res[1].loo_mse));
    free(job), free(lab), free(y), free(skip), free(got), free(cov[0]), free(cov[1]);
    ref_free_case(&c);
    cases++;
  }
  fclose(f);
  printf("through ntk_solve: largest relative error: LOO MSE %.3g, variance %.3g, covariance %.3g\n", worst_loo,
         worst_var, worst_cov);
  ck_assert_int_ge(cases, 4);
}
END_TEST

/* A store whose kernel holds an infinity (one written before tiles were
 * checked, or by hand): the solve says why and exits 2 (bad input), not 4
 * (a damaged store: its checksums are fine). */
START_TEST(test_non_finite_kernel) {
  const char *dir = tu_tmpdir();
  char store[512], ytr[512], yte[512];
  tu_path(store, sizeof store, dir, "inf.ntk");
  tu_path(ytr, sizeof ytr, dir, "ytr.npy");
  tu_path(yte, sizeof yte, dir, "yte.npy");
  struct ntk_store_info in;
  memset(&in, 0, sizeof in);
  in.n = 4;
  in.d = 1;
  in.tile = 4;
  in.elem = 4;
  in.kernels = NTK_KERNEL_NNGP;
  in.n_train = 2;
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_create(store, &in, "test", &s), NTK_OK);
  float k[16] = {2, 1, 0, 0, 1, 2, 0, 0, 1, INFINITY, 2, 0, 1, 1, 0, 2};
  unsigned char payload[256];
  size_t len;
  ntk_codec_t *c = ntk_codec_create(1);
  ck_assert_int_eq(ntk_codec_compress(c, k, sizeof k, 4, payload, sizeof payload, &len), NTK_OK);
  ntk_codec_free(c);
  struct ntk_tile t = ntk_tiling_tile(ntk_store_tiling(s), 0);
  ck_assert_int_eq(ntk_store_append(s, &t, payload, len, ntk_checksum(payload, len), NTK_CODEC_SHUFFLE_ZSTD), NTK_OK);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
  const int64_t y[2] = {0, 1};
  write_labels(ytr, y, 2);
  write_labels(yte, y, 2);
  struct ntk_job *job = calloc(1, sizeof *job);
  ntk_job_defaults(job);
  snprintf(job->labels_path, sizeof job->labels_path, "%s", ytr);
  snprintf(job->test.labels, sizeof job->test.labels, "%s", yte);
  job->test.enabled = job->solve.enabled = 1;
  job->solve.nridge = 1;
  job->solve.ridge[0] = 0.1;
  ck_assert_int_eq(ntk_solve(world, store, NULL, job, NULL, NULL, 0, NULL), NTK_EINPUT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "inf"));
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "float64"));
  ck_assert_int_eq(ntk_status_exit_code(NTK_EINPUT), 2);
  free(job);
}
END_TEST

/* cg's skinny products (skinny.h) against plain float64 sums, both ways of
 * computing each (AUTO, one-pass, BLAS): a matrix whose row count is not
 * a multiple of the one-pass blocks' 4 rows, whose stride is not its
 * width, with more than one 256-term band both ways; widths at the
 * one-pass bounds, with lanes left over in its vectors, and beyond them.
 * ntk_skinny_tile and _tile64 add to y and yt (they start at 1) and leave yt alone
 * without xt (NaN stays NaN); ax and atx overwrite theirs (they start as
 * NaN). Each entry within rounding (float32 1e-6, float64 1e-13) of the
 * sum of |terms|; every product in the 64-byte and the 32-byte layout
 * (ntk_skinny_set_half), bit for bit the same; and once in the layout this
 * core's timing picks. */
#define UNIFORM(s) ((double)((s = s * 1103515245u + 12345u) >> 8) / 16777216.0)

/* Checks got (rows x na) against a x (a: rows x cols, ld; x: cols x na)
 * plus `plus`, or with `trans` got (cols x na) against a^T x (x: rows x na). */
static void check_product(const char *what, const double *a, size_t rows, size_t cols, size_t ld, int trans,
                          const double *x, const double *got, size_t na, double plus, double tol, int how) {
  size_t out = trans ? cols : rows, in = trans ? rows : cols;
  for (size_t i = 0; i < out; i++)
    for (size_t q = 0; q < na; q++) {
      double want = plus, mag = fabs(plus);
      for (size_t j = 0; j < in; j++) {
        double t = (trans ? a[j * ld + i] : a[i * ld + j]) * x[j * na + q];
        want += t, mag += fabs(t);
      }
      ck_assert_msg(fabs(got[i * na + q] - want) <= tol * mag, "%s [%zu][%zu] = %.17g, want %.17g (na %zu, how %d)",
                    what, i, q, got[i * na + q], want, na, how);
    }
}

START_TEST(test_skinny_products) {
  const size_t rows = 299, cols = 263, ld = 271;
  const size_t widths[] = {1, NTK_SKINNY_MIN, 10, 12, 16, 17, 20, 24, 25, 29, 33, 41, NTK_SKINNY_MAX, 50};
  const int hows[] = {NTK_SKINNY_AUTO, NTK_SKINNY_ONEPASS, NTK_SKINNY_BLAS};
  float *af = malloc(rows * ld * sizeof *af);
  double *ad = malloc(rows * ld * sizeof *ad), *aw = malloc(rows * ld * sizeof *aw);
  unsigned s = 12345;
  for (size_t i = 0; i < rows * ld; i++) af[i] = (float)(UNIFORM(s) - 0.3), aw[i] = af[i], ad[i] = UNIFORM(s) - 0.5;
  for (size_t w = 0; w < sizeof widths / sizeof *widths; w++)
    for (size_t h = 0; h < 3; h++) {
      size_t na = widths[w];
      double *x = malloc(cols * na * sizeof *x), *xt = malloc(rows * na * sizeof *xt);
      double *x32 = malloc(cols * na * sizeof *x32), *xt32 = malloc(rows * na * sizeof *xt32);
      for (size_t i = 0; i < cols * na; i++) x[i] = UNIFORM(s), x32[i] = (float)x[i];
      for (size_t i = 0; i < rows * na; i++) xt[i] = UNIFORM(s), xt32[i] = (float)xt[i];
      /* each width's own scratch, so that ASan sees a size too small for it */
      size_t sk = ntk_skinny_scratch(rows, cols, na, 1), sk64 = ntk_skinny_scratch(rows, cols, na, 0);
      size_t skm = ntk_skinny_scratch(rows, cols, na, NTK_SKINNY_MIXED);
      sk = sk > sk64 ? sk : sk64;
      void *scratch = malloc(sk > skm ? sk : skm);
      double *out[2][6]; /* per layout: tile y, tile yt, tile64 y, tile64 yt, ax, atx */
      for (int half = 0; half < 2; half++) { /* both layouts, whatever this core prefers */
        ntk_skinny_set_half(half);
        double **o = out[half];
        for (int k = 0; k < 6; k++) o[k] = malloc((k % 2 ? cols : rows) * na * sizeof **o);
        for (int transposed = 0; transposed < 2; transposed++) { /* the float32 tile, in float32 and in float64 */
          for (int mixed = 0; mixed < 2; mixed++) {
            double *y = o[2 * mixed], *yt = o[2 * mixed + 1];
            for (size_t i = 0; i < rows * na; i++) y[i] = 1.0;
            for (size_t i = 0; i < cols * na; i++) yt[i] = transposed ? 1.0 : NAN;
            if (mixed) ntk_skinny_tile64(af, rows, cols, ld, x, transposed ? xt : NULL, y, yt, na, scratch, hows[h]);
            else ntk_skinny_tile(af, rows, cols, ld, x, transposed ? xt : NULL, y, yt, na, scratch, hows[h]);
            double tol = mixed ? 1e-13 : 1e-6;
            check_product(mixed ? "tile64 y" : "tile y", aw, rows, cols, ld, 0, mixed ? x : x32, y, na, 1.0, tol,
                          hows[h]);
            if (transposed)
              check_product(mixed ? "tile64 yt" : "tile yt", aw, rows, cols, ld, 1, mixed ? xt : xt32, yt, na, 1.0,
                            tol, hows[h]);
            for (size_t i = 0; !transposed && i < cols * na; i++) ck_assert(isnan(yt[i]));
          }
        }
        for (size_t i = 0; i < rows * na; i++) o[4][i] = NAN;
        for (size_t i = 0; i < cols * na; i++) o[5][i] = NAN;
        ntk_skinny_ax(ad, rows, cols, ld, x, o[4], na, scratch, hows[h]);
        check_product("ax", ad, rows, cols, ld, 0, x, o[4], na, 0.0, 1e-13, hows[h]);
        ntk_skinny_atx(ad, rows, cols, ld, xt, o[5], na, scratch, hows[h]);
        check_product("atx", ad, rows, cols, ld, 1, xt, o[5], na, 0.0, 1e-13, hows[h]);
      }
      for (int k = 0; k < 6; k++) { /* the two layouts: the same bits */
        ck_assert_msg(!memcmp(out[0][k], out[1][k], (k % 2 ? cols : rows) * na * sizeof **out[0]),
                      "product %d, %zu columns, how %d: the 32-byte layout's bits differ", k, na, hows[h]);
        free(out[0][k]), free(out[1][k]);
      }
      free(x), free(xt), free(x32), free(xt32), free(scratch);
    }
  /* the core's own choice, timed (fma_chains): still the right sums */
  ntk_skinny_set_half(-1);
  size_t na = 20;
  double *x = malloc(cols * na * sizeof *x), *x32 = malloc(cols * na * sizeof *x32), *y = malloc(rows * na * sizeof *y);
  void *scratch = malloc(ntk_skinny_scratch(rows, cols, na, 1));
  for (size_t i = 0; i < cols * na; i++) x[i] = UNIFORM(s), x32[i] = (float)x[i];
  for (size_t i = 0; i < rows * na; i++) y[i] = 1.0;
  ntk_skinny_tile(af, rows, cols, ld, x, NULL, y, NULL, na, scratch, NTK_SKINNY_ONEPASS);
  check_product("tile y, timed layout", aw, rows, cols, ld, 0, x32, y, na, 1.0, 1e-6, NTK_SKINNY_ONEPASS);
  free(x), free(x32), free(y), free(scratch);
  free(af), free(ad), free(aw);
}
END_TEST

int main(void) {
  ntk_comm_init(NULL, NULL, &world); /* one rank: no MPI launcher */
  Suite *s = suite_create("solve");
  TCase *tc = tcase_create("solve");
  tcase_add_test(tc, test_against_neural_tangents);
  tcase_add_test(tc, test_not_positive_definite);
  tcase_add_test(tc, test_ill_conditioned);
  tcase_add_test(tc, test_duplicates_condition);
  tcase_add_test(tc, test_known_answer);
  tcase_add_test(tc, test_non_finite_kernel);
  tcase_add_test(tc, test_loo_and_variance_against_neural_tangents);
  tcase_add_test(tc, test_skinny_products);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
