/* Kernel regression (src/solve.c): predictions against neural-tangents'
 * nt.predict (tests/data/ref_solve.txt, from scripts/nt_reference.sh), and
 * the dense solver's refusals of matrices it cannot solve. The end-to-end
 * path (store -> `ntkd solve` -> .npy) is checked against the same file by
 * tests/e2e.sh. */
#include <math.h>

#include "ntkd/codec.h"
#include "ntkd/config.h"
#include "ntkd/solve.h"
#include "ntkd/store.h"
#include "refcase.h"
#include "testutil.h"

static void read_label_block(FILE *f, const char *label, double *out, size_t count) {
  ck_assert_msg(ref_read_matrix(f, label, out, count), "reading %s", label);
}

/* Kernel-regression predictions of one kernel (n x n reference matrix k). */
static void predict(const double *k, size_t n, size_t ntr, const int *labels, size_t classes, double ridge,
                    double *pred, double *rcond) {
  size_t nte = n - ntr;
  double *ktt = malloc(ntr * ntr * sizeof *ktt), *copy = malloc(ntr * ntr * sizeof *copy);
  double *alpha = calloc(ntr * classes, sizeof *alpha);
  double trace = 0;
  for (size_t i = 0; i < ntr; i++) {
    /* Symmetric from the lower triangle, as ntkd's store holds it
     * (neural-tangents' matrix may differ by an ulp across the diagonal). */
    for (size_t j = 0; j < ntr; j++) ktt[i * ntr + j] = j <= i ? k[i * n + j] : k[j * n + i];
    trace += k[i * n + i];
    alpha[i * classes + (size_t)labels[i]] = 1.0;
  }
  memcpy(copy, ktt, ntr * ntr * sizeof *ktt);
  ck_assert_int_eq(ntk_spd_solve(ktt, ntr, ridge * trace / (double)ntr, alpha, classes, rcond, NULL), 0);
  /* The matrix comes back as it was, bit for bit, for the next ridge. */
  ck_assert(!memcmp(copy, ktt, ntr * ntr * sizeof *ktt));
  for (size_t i = 0; i < nte; i++)
    for (size_t c = 0; c < classes; c++) {
      double s = 0;
      for (size_t j = 0; j < ntr; j++) s += k[(ntr + i) * n + j] * alpha[j * classes + c];
      pred[i * classes + c] = s;
    }
  free(ktt), free(copy), free(alpha);
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
      predict(which ? c.ntk : c.nngp, c.n, ntr, labels, classes, ridge, got, &rcond);
      double scale = 0, err = 0;
      for (size_t k = 0; k < nte * classes; k++) scale = fmax(scale, fabs(want[k]));
      for (size_t k = 0; k < nte * classes; k++) {
        double e = fabs(got[k] - want[k]) / scale;
        if (!(e <= err)) err = e;
      }
      /* Both sides solve the same float64 system; the bound allows for
       * the condition number (rcond down to ~1e-6 here). */
      ck_assert_msg(err < 1e-8, "%s %s: prediction error %.3g (rcond %.2g)", c.name, which ? "ntk" : "nngp", err,
                    rcond);
    }
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
  ck_assert_int_eq(ntk_store_append(s, &t, payload, len, ntk_checksum(payload, len)), NTK_OK);
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
  ck_assert_int_eq(ntk_solve(store, job, NULL, 0, NULL), NTK_EINPUT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "inf"));
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "float64"));
  ck_assert_int_eq(ntk_status_exit_code(NTK_EINPUT), 2);
  free(job);
}
END_TEST

int main(void) {
  Suite *s = suite_create("solve");
  TCase *tc = tcase_create("solve");
  tcase_add_test(tc, test_against_neural_tangents);
  tcase_add_test(tc, test_not_positive_definite);
  tcase_add_test(tc, test_ill_conditioned);
  tcase_add_test(tc, test_known_answer);
  tcase_add_test(tc, test_non_finite_kernel);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
