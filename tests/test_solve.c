/* Kernel regression (src/solve.c): predictions against neural-tangents'
 * nt.predict (tests/data/ref_solve.txt, from scripts/nt_reference.sh), and
 * the dense solver's refusals of matrices it cannot solve. The end-to-end
 * path (store -> `ntkd solve` -> .npy) is checked against the same file by
 * tests/e2e.sh. */
#include <math.h>

#include "ntkd/config.h"
#include "ntkd/solve.h"
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
  ck_assert_int_eq(ntk_spd_solve(ktt, ntr, ridge * trace / (double)ntr, alpha, classes, rcond), 0);
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
  ck_assert_int_eq(ntk_spd_solve(a, 2, 0, b, 1, &rcond), 2);
  ck_assert(a[0] == 1 && a[1] == 2 && a[2] == 2 && a[3] == 1);
  /* A ridge of 1.5 makes it positive definite: (1.5+1, 2; 2, 2.5). */
  ck_assert_int_eq(ntk_spd_solve(a, 2, 1.5, b, 1, &rcond), 0);
  ck_assert_double_eq_tol(b[0], 1.0 / 4.5, 1e-15);
  ck_assert_double_eq_tol(b[1], 1.0 / 4.5, 1e-15);
}
END_TEST

START_TEST(test_ill_conditioned) {
  /* Two identical samples: K = [[1,1],[1,1]] is singular; rounding may let
   * the Cholesky through, the condition estimate must not. */
  double a[9] = {1, 1, 0.5, 1, 1, 0.5, 0.5, 0.5, 1}, b[3] = {1, 0, 0}, rcond = 1;
  int info = ntk_spd_solve(a, 3, 0, b, 1, &rcond);
  ck_assert_msg(info > 0 || rcond < NTK_SOLVE_MIN_RCOND, "info %d rcond %g", info, rcond);
  /* Any ridge > 0 makes it solvable. */
  double b2[3] = {1, 0, 0};
  ck_assert_int_eq(ntk_spd_solve(a, 3, 1e-3, b2, 1, &rcond), 0);
  ck_assert(rcond > NTK_SOLVE_MIN_RCOND && isfinite(b2[0]));
}
END_TEST

START_TEST(test_known_answer) {
  /* K = diag(2, 4) + 0: alpha = Y / diag. Two right-hand sides. */
  double a[4] = {2, 0, 0, 4}, b[4] = {1, 0, 0, 1}, rcond;
  ck_assert_int_eq(ntk_spd_solve(a, 2, 0, b, 2, &rcond), 0);
  ck_assert_double_eq_tol(b[0], 0.5, 1e-15);
  ck_assert_double_eq_tol(b[3], 0.25, 1e-15);
  ck_assert(b[1] == 0 && b[2] == 0);
  ck_assert_double_eq_tol(rcond, 0.5, 1e-15);
}
END_TEST

int main(void) {
  Suite *s = suite_create("solve");
  TCase *tc = tcase_create("solve");
  tcase_add_test(tc, test_against_neural_tangents);
  tcase_add_test(tc, test_not_positive_definite);
  tcase_add_test(tc, test_ill_conditioned);
  tcase_add_test(tc, test_known_answer);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
