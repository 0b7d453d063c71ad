/* Training numerics: Adam against hand-computed values, the subnormal
 * decay of Adam's moments with and without FTZ/DAZ, softmax
 * cross-entropy, the MLP gradient against finite differences in double,
 * the shuffle, and snapshots. Single process, no MPI. */
#include <math.h>

#include "ntkd/cpuinit.h"
#include "ntkd/train.h"
#include "testutil.h"

START_TEST(test_adam_reference) {
  /* Two steps by hand (beta1 0.9, beta2 0.999, alpha 0.001, eps 1e-8):
   * t=1, g=0.5: m = 0.05, v = 0.00025, lr = 0.001 sqrt(0.001)/0.1,
   *   p -= lr * 0.05 / (sqrt(0.00025) + 1e-8);
   * t=2, g=-1 (gscale 2 of -0.5): m = 0.9*0.05 - 0.1 = -0.055,
   *   v = 0.999*0.00025 + 0.001 = 0.00124975, lr = 0.001 sqrt(1-0.999^2)/(1-0.81). */
  struct ntk_adam h = {0.001, 0.9, 0.999, 1e-8};
  float p = 1.0f, m = 0, v = 0, g = 0.5f;
  ntk_adam_update(&h, 1, 1.0f, &p, &m, &v, &g, 1);
  double lr1 = 0.001 * sqrt(0.001) / 0.1, p1 = 1.0 - lr1 * 0.05 / (sqrt(0.00025) + 1e-8);
  ck_assert_double_eq_tol(m, 0.05, 1e-8);
  ck_assert_double_eq_tol(v, 0.00025, 1e-10);
  ck_assert_double_eq_tol(p, p1, 1e-7);
  g = -0.5f;
  ntk_adam_update(&h, 2, 2.0f, &p, &m, &v, &g, 1);
  double lr2 = 0.001 * sqrt(1 - 0.999 * 0.999) / (1 - 0.81);
  double p2 = p1 - lr2 * -0.055 / (sqrt(0.00124975) + 1e-8);
  ck_assert_double_eq_tol(m, -0.055, 1e-8);
  ck_assert_double_eq_tol(v, 0.00124975, 1e-9);
  ck_assert_double_eq_tol(p, p2, 1e-7);
}
END_TEST

/* Some steps with gradients, then many with zero gradients: m decays by
 * beta1 and v by beta2 per step, through the subnormal range. Returns the
 * number of subnormal values left in m and v. */
static size_t subnormals_after_zero_steps(int flush) {
  enum { N = 16 };
  struct ntk_adam h = {0.001, 0.9, 0.999, 1e-8};
  float p[N], m[N] = {0}, v[N] = {0}, g[N], zero[N] = {0};
  for (int i = 0; i < N; i++) {
    p[i] = 0.1f * (float)i;
    g[i] = (float)((i % 5) - 2) * 1e-3f * (float)(i + 1);
  }
  int was = ntk_cpu_flushing_denormals();
  ntk_cpu_flush_denormals(flush);
  uint64_t t = 0;
  for (int s = 0; s < 10; s++) ntk_adam_update(&h, ++t, 1.0f, p, m, v, g, N);
  /* v takes ~90 000 steps of 0.999 to fall from 1e-9 below 1e-45. */
  for (int s = 0; s < 120000; s++) ntk_adam_update(&h, ++t, 1.0f, p, m, v, zero, N);
  ntk_cpu_flush_denormals(was);
  size_t count = 0;
  for (int i = 0; i < N; i++) count += (fpclassify(m[i]) == FP_SUBNORMAL) + (fpclassify(v[i]) == FP_SUBNORMAL);
  return count;
}

START_TEST(test_adam_subnormals) {
#if defined(__x86_64__) || defined(__i386__)
  ck_assert_uint_eq(subnormals_after_zero_steps(1), 0);
  /* The same without the fix: the moments get stuck in subnormals (m at a
   * few times 1.4e-45, where m * 0.1 rounds to 0), which shows that the
   * flush is what makes the difference. */
  size_t without = subnormals_after_zero_steps(0);
  ck_assert_msg(without > 0, "expected subnormal moments without FTZ/DAZ");
#endif
}
END_TEST

START_TEST(test_flush_switch) {
#if defined(__x86_64__) || defined(__i386__)
  ntk_cpu_flush_denormals(1);
  ck_assert(ntk_cpu_flushing_denormals());
  volatile float tiny = 1e-38f, r = tiny * 0.01f; /* subnormal result, flushed */
  ck_assert(r == 0.0f);
  ntk_cpu_flush_denormals(0);
  ck_assert(!ntk_cpu_flushing_denormals());
  r = tiny * 0.01f;
  ck_assert(fpclassify(r) == FP_SUBNORMAL);
#endif
}
END_TEST

START_TEST(test_softmax_xent) {
  float z[6] = {1, 2, 3, 0, 0, 0};
  int32_t y[2] = {2, 1};
  float d[6];
  size_t hits = 0;
  double loss = ntk_softmax_xent(z, y, 2, 3, d, &hits);
  double s = exp(1) + exp(2) + exp(3);
  ck_assert_double_eq_tol(loss, (log(s) - 3) + log(3.0), 1e-6);
  ck_assert_uint_eq(hits, 1); /* row 1 ties: the first maximum (0) wins, not 1 */
  ck_assert_double_eq_tol(d[0], exp(1) / s, 1e-7);
  ck_assert_double_eq_tol(d[2], exp(3) / s - 1, 1e-7);
  ck_assert_double_eq_tol(d[4], 1.0 / 3 - 1, 1e-7);
  /* Large logits do not overflow. */
  float big[2] = {1000, 0};
  int32_t y0 = 1;
  hits = 0;
  ck_assert_double_eq_tol(ntk_softmax_xent(big, &y0, 1, 2, NULL, &hits), 1000.0, 1e-3);
}
END_TEST

/* The loss of the MLP in double, written independently of mlp.c. */
static double ref_loss(const struct ntk_mlp *m, const double *p, const float *x, const int32_t *y, size_t b) {
  double total = 0, a[64], z[64];
  for (size_t i = 0; i < b; i++) {
    for (size_t k = 0; k < m->sizes[0]; k++) a[k] = x[i * m->sizes[0] + k];
    for (size_t l = 0; l + 1 < m->nsizes; l++) {
      size_t ni = m->sizes[l], no = m->sizes[l + 1];
      for (size_t j = 0; j < no; j++) {
        z[j] = p[m->b_off[l] + j];
        for (size_t k = 0; k < ni; k++) z[j] += a[k] * p[m->w_off[l] + k * no + j];
      }
      for (size_t j = 0; j < no; j++) a[j] = l + 2 < m->nsizes && z[j] < 0 ? 0 : z[j];
    }
    size_t k = m->sizes[m->nsizes - 1];
    double mx = a[0], s = 0;
    for (size_t c = 1; c < k; c++) mx = a[c] > mx ? a[c] : mx;
    for (size_t c = 0; c < k; c++) s += exp(a[c] - mx);
    total += log(s) + mx - a[y[i]];
  }
  return total;
}

START_TEST(test_mlp_gradient) {
  size_t sizes[4] = {5, 7, 6, 3};
  struct ntk_mlp m;
  ntk_mlp_init(&m, sizes, 4);
  ck_assert_uint_eq(m.nparams, 5 * 7 + 7 + 7 * 6 + 6 + 6 * 3 + 3);
  float p[200], g[200], work[400], x[4 * 5];
  double pd[200];
  ntk_mlp_init_params(&m, 42, p);
  uint64_t s = 9;
  for (size_t i = 0; i < m.nparams; i++) p[i] += (float)((double)(ntk_splitmix64(&s) >> 40) / (1 << 24) * 0.2 - 0.1);
  for (size_t i = 0; i < 20; i++) x[i] = (float)((double)(ntk_splitmix64(&s) >> 40) / (1 << 24) * 2 - 1);
  int32_t y[4] = {0, 2, 1, 2};
  ck_assert_uint_le(ntk_mlp_work_floats(&m, 4), 400);
  size_t hits = 0;
  double loss = ntk_mlp_grad(&m, p, x, y, 4, work, g, &hits);
  for (size_t i = 0; i < m.nparams; i++) pd[i] = p[i];
  ck_assert_double_eq_tol(loss, ref_loss(&m, pd, x, y, 4), 1e-5);
  /* Central differences in double; ReLU kinks are unlikely with h = 1e-6. */
  for (size_t i = 0; i < m.nparams; i++) {
    double h = 1e-6, keep = pd[i];
    pd[i] = keep + h;
    double up = ref_loss(&m, pd, x, y, 4);
    pd[i] = keep - h;
    double down = ref_loss(&m, pd, x, y, 4);
    pd[i] = keep;
    double fd = (up - down) / (2 * h);
    ck_assert_msg(fabs(fd - g[i]) <= 1e-4 + 1e-3 * fabs(fd), "parameter %zu: analytic %g, numeric %g", i, g[i], fd);
  }
  size_t h2 = 0;
  ck_assert_double_eq_tol(ntk_mlp_eval(&m, p, x, y, 4, work, &h2), loss, 1e-9);
  ck_assert_uint_eq(h2, hits);
  /* An empty share contributes a zero gradient. */
  ck_assert_double_eq(ntk_mlp_grad(&m, p, x, y, 0, work, g, &hits), 0);
  for (size_t i = 0; i < m.nparams; i++) ck_assert(g[i] == 0.0f);
}
END_TEST

START_TEST(test_permutation) {
  uint32_t a[1000], b[1000], c[1000];
  ntk_train_permutation(7, 3, 1000, a);
  ntk_train_permutation(7, 3, 1000, b);
  ntk_train_permutation(7, 4, 1000, c);
  ck_assert_mem_eq(a, b, sizeof a); /* depends on (seed, epoch) only */
  ck_assert(memcmp(a, c, sizeof a));
  int seen[1000] = {0};
  for (int i = 0; i < 1000; i++) seen[a[i]]++;
  for (int i = 0; i < 1000; i++) ck_assert_int_eq(seen[i], 1);
}
END_TEST

START_TEST(test_snapshot) {
  const char *dir = tu_tmpdir();
  char path[512];
  tu_path(path, sizeof path, dir, "sub/snap.bin");
  struct ntk_snapshot_info in = {0}, out;
  in.nsizes = 3;
  in.sizes[0] = 4;
  in.sizes[1] = 3;
  in.sizes[2] = 2;
  in.n_train = 100, in.batch = 10, in.seed = 5, in.data_hash = 0x1234, in.epoch = 2, in.step = 3, in.t = 23;
  in.loss_sum = 1.5, in.correct = 7, in.elapsed = 3.25, in.nparams = 23;
  float s[69];
  for (int i = 0; i < 69; i++) s[i] = (float)i * 0.5f;
  ck_assert_int_eq(ntk_snapshot_write(path, &in, s, s + 23, s + 46), NTK_OK);
  float *st;
  ck_assert_int_eq(ntk_snapshot_read(path, &out, &st), NTK_OK);
  ck_assert_mem_eq(&in, &out, sizeof in);
  ck_assert_mem_eq(s, st, sizeof s);
  free(st);
  /* A flipped byte in the parameters, a truncated file, a foreign file. */
  FILE *f = fopen(path, "r+b");
  fseek(f, 512 + 40, SEEK_SET);
  fputc(0x7f, f);
  fclose(f);
  ck_assert_int_eq(ntk_snapshot_read(path, &out, &st), NTK_ECORRUPT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "damaged"));
  ck_assert_int_eq(ntk_snapshot_write(path, &in, s, s + 23, s + 46), NTK_OK);
  ck_assert_int_eq(truncate(path, 600), 0);
  ck_assert_int_eq(ntk_snapshot_read(path, &out, &st), NTK_ECORRUPT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "truncated"));
  tu_write(path, "hello", 5);
  ck_assert_int_eq(ntk_snapshot_read(path, &out, &st), NTK_ECORRUPT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "not an ntkd training snapshot"));
}
END_TEST

int main(void) {
  Suite *s = suite_create("train");
  TCase *tc = tcase_create("numerics");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_adam_reference);
  tcase_add_test(tc, test_adam_subnormals);
  tcase_add_test(tc, test_flush_switch);
  tcase_add_test(tc, test_softmax_xent);
  tcase_add_test(tc, test_mlp_gradient);
  tcase_add_test(tc, test_permutation);
  tcase_add_test(tc, test_snapshot);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
