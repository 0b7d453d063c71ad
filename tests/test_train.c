/* Training numerics: Adam against hand-computed values, the subnormal
 * decay of Adam's moments with and without FTZ/DAZ, softmax
 * cross-entropy, the MLP gradient against finite differences in double,
 * the shuffle, and snapshots (forged ones too). Single process, no MPI. */
#include <float.h>
#include <math.h>

#include "base/codec.h"
#include "base/cpuinit.h"
#include "base/rng.h"
#include "train/train.h"
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

/* docs/TRAINING.md's generators, computed from its text alone: a change
 * to either side fails here. */
static uint64_t doc_splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double doc_uniform(uint64_t *s) { return ldexp((double)(doc_splitmix64(s) >> 11) + 1, -53); }

START_TEST(test_generators_as_documented) {
  size_t sizes[4] = {5, 7, 3, 2}; /* W_0 35 entries (odd), W_1 21, W_2 6 */
  struct ntk_mlp m;
  ntk_mlp_init(&m, sizes, 4);
  float p[200], want[200];
  uint64_t seed = 0xFEDCBA9876543210ull;
  ntk_mlp_init_params(&m, seed, p);
  size_t at = 0;
  uint64_t s = seed ^ 0x6D6C7020696E6974ull;
  for (size_t l = 0; l < 3; l++) {
    size_t n = sizes[l] * sizes[l + 1];
    double std = 1 / sqrt((double)sizes[l]);
    for (size_t i = 0; i < n; i += 2) {
      double u1 = doc_uniform(&s), u2 = doc_uniform(&s);
      double r = sqrt(-2 * log(u1)), a = 2 * M_PI * u2;
      want[at + i] = (float)(std * r * cos(a));
      if (i + 1 < n) want[at + i + 1] = (float)(std * r * sin(a));
    }
    at += n;
    for (size_t k = 0; k < sizes[l + 1]; k++) want[at++] = 0;
  }
  ck_assert_uint_eq(at, m.nparams);
  ck_assert_mem_eq(p, want, at * sizeof *p);
  for (uint64_t e = 0; e < 3; e++) {
    uint32_t perm[101], ref[101];
    ntk_train_permutation(seed, e, 101, perm);
    uint64_t t = seed;
    t = doc_splitmix64(&t) ^ (e * 0xD1B54A32D192ED03ull);
    for (uint32_t i = 0; i < 101; i++) ref[i] = i;
    for (uint64_t i = 101; i >= 2; i--) {
      uint64_t j = ((doc_splitmix64(&t) >> 32) * i) >> 32;
      uint32_t x = ref[i - 1];
      ref[i - 1] = ref[j], ref[j] = x;
    }
    ck_assert_mem_eq(perm, ref, sizeof perm);
  }
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
  ck_assert_int_eq(ntk_snapshot_write(path, &in, s, s + 23, s + 46, NULL, NTK_SNAPSHOT_ANY, NULL, NULL), NTK_OK);
  float *st;
  ck_assert_int_eq(ntk_snapshot_read(path, &out, &st, NULL), NTK_OK);
  ck_assert_mem_eq(&in, &out, sizeof in);
  ck_assert_mem_eq(s, st, sizeof s);
  free(st);
  /* A flipped byte in the parameters, a truncated file, a foreign file. */
  FILE *f = fopen(path, "r+b");
  fseek(f, 512 + 40, SEEK_SET);
  fputc(0x7f, f);
  fclose(f);
  ck_assert_int_eq(ntk_snapshot_read(path, &out, &st, NULL), NTK_ECORRUPT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "damaged"));
  ck_assert_int_eq(ntk_snapshot_write(path, &in, s, s + 23, s + 46, NULL, NTK_SNAPSHOT_ANY, NULL, NULL), NTK_OK);
  ck_assert_int_eq(truncate(path, 600), 0);
  ck_assert_int_eq(ntk_snapshot_read(path, &out, &st, NULL), NTK_ECORRUPT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "truncated"));
  /* Cut inside its 512-byte header: a cut snapshot, not a foreign file. */
  ck_assert_int_eq(ntk_snapshot_write(path, &in, s, s + 23, s + 46, NULL, NTK_SNAPSHOT_ANY, NULL, NULL), NTK_OK);
  ck_assert_int_eq(truncate(path, 300), 0);
  ck_assert_int_eq(ntk_snapshot_read(path, &out, &st, NULL), NTK_ECORRUPT);
  ck_assert_msg(strstr(ntk_error_message(), "cut short inside its header (300 of 512 bytes)"), "%s",
                ntk_error_message());
  tu_write(path, "hello", 5);
  ck_assert_int_eq(ntk_snapshot_read(path, &out, &st, NULL), NTK_ECORRUPT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "not an ntkd training snapshot"));
}
END_TEST

/* The snapshot of test_snapshot's job (layers 4-3-2, 100 samples in
 * batches of 10, 2 epochs and 3 steps done, t = 23) written at `path`. */
static void good_snapshot(const char *path, struct ntk_snapshot_info *in, float *s) {
  memset(in, 0, sizeof *in);
  in->nsizes = 3;
  in->sizes[0] = 4;
  in->sizes[1] = 3;
  in->sizes[2] = 2;
  in->n_train = 100, in->batch = 10, in->seed = 5, in->data_hash = 0x1234, in->epoch = 2, in->step = 3, in->t = 23;
  in->loss_sum = 1.5, in->correct = 7, in->elapsed = 3.25, in->nparams = 23;
  for (int i = 0; i < 69; i++) s[i] = (float)i * 0.5f;
  ck_assert_int_eq(ntk_snapshot_write(path, in, s, s + 23, s + 46,
                                      NULL, NTK_SNAPSHOT_ANY, NULL, NULL), NTK_OK);
}

/* Replace `len` bytes of the file at `at` and reseal the checksums as a
 * forger would: the payload's (XXH3 of the XXH3s of p, m, v) and the
 * header's. */
static void forge(const char *path, size_t at, const void *val, size_t len) {
  FILE *f = fopen(path, "r+b");
  ck_assert_ptr_nonnull(f);
  unsigned char b[512 + 3 * 23 * 4];
  ck_assert_uint_eq(fread(b, 1, sizeof b, f), sizeof b);
  ck_assert_uint_le(at + len, sizeof b);
  memcpy(b + at, val, len);
  uint64_t sums[3], ps, hs;
  for (int i = 0; i < 3; i++) sums[i] = ntk_checksum(b + 512 + (size_t)i * 23 * 4, 23 * 4);
  ps = ntk_checksum(sums, sizeof sums);
  memcpy(b + 496, &ps, 8);
  hs = ntk_checksum(b, 504);
  memcpy(b + 504, &hs, 8);
  rewind(f);
  ck_assert_uint_eq(fwrite(b, 1, sizeof b, f), sizeof b);
  fclose(f);
}

START_TEST(test_snapshot_forged) {
  /* Every header field out of range or inconsistent with the others, and
   * impossible values in p, m, v, all with resealed checksums: refused as
   * damaged (NTK_ECORRUPT), naming the field. Offsets: docs/TRAINING.md. */
  const char *dir = tu_tmpdir();
  char path[512];
  tu_path(path, sizeof path, dir, "forged.snap");
  double nan = NAN, inf = INFINITY;
  struct {
    size_t at;
    int is_double;
    uint64_t u;
    double d;
    const char *says;
  } cases[] = {
      {16, 0, 1, 0, "number of layer sizes = 1"},
      {16, 0, 17, 0, "number of layer sizes = 17"},
      {16, 0, 4, 0, "layer size 4 = 0"},
      {24 + 8, 0, 0, 0, "layer size 2 = 0"},
      {24 + 8, 0, (1u << 24) + 1, 0, "layer size 2 = 16777217"},
      {24 + 8, 0, 5, 0, "number of parameters = 23, but its layer sizes make"},
      {24 + 16, 0, 1, 0, "last layer size (classes) = 1"},
      {24 + 40, 0, 7, 0, "layer size 6 = 7, past the 3 sizes"},
      {232, 0, 24, 0, "number of parameters = 24"},
      {232, 0, (uint64_t)1 << 40, 0, "number of parameters"},
      {152, 0, 0, 0, "training samples = 0"},
      {152, 0, (uint64_t)1 << 32, 0, "training samples = 4294967296"},
      {152, 0, 9, 0, "batch = 10, expected 1..16777216 and at most the 9 samples"},
      {160, 0, 0, 0, "batch = 0"},
      {160, 0, 101, 0, "batch = 101"},
      {160, 0, 20, 0, "Adam's t = 23, but 2 epochs of 5 steps and 3 steps more make 13"},
      {184, 0, 999999999, 0, "epochs finished = 999999999"},
      {184, 0, 3, 0, "Adam's t = 23, but 3 epochs of 10 steps and 3 steps more make 33"},
      {192, 0, 999999999, 0, "steps of the next epoch done = 999999999, but 100 samples in batches of 10 make "
                             "10 steps per epoch: expected 0..9"},
      {192, 0, 10, 0, "steps of the next epoch done = 10"},
      {192, 0, 4, 0, "Adam's t = 23, but 2 epochs of 10 steps and 4 steps more make 24"},
      {200, 0, UINT64_MAX, 0, "Adam's t = 18446744073709551615"},
      {200, 0, 0, 0, "Adam's t = 0"},
      {200, 0, 22, 0, "Adam's t = 22"},
      {208, 1, 0, nan, "loss sum of the partial epoch = nan"},
      {208, 1, 0, -inf, "loss sum of the partial epoch = -inf"},
      {208, 1, 0, -1, "loss sum of the partial epoch = -1"},
      {216, 1, 0, 1.5, "hits of the partial epoch = 1.5, expected an integer in 0..30"},
      {216, 1, 0, 31, "hits of the partial epoch = 31"},
      {216, 1, 0, -1, "hits of the partial epoch = -1"},
      {216, 1, 0, nan, "hits of the partial epoch = nan"},
      {224, 1, 0, -1, "seconds trained = -1"},
      {224, 1, 0, inf, "seconds trained = inf"},
      {224, 1, 0, nan, "seconds trained = nan"},
      {512 + 5 * 4, 2, 0, nan, "parameter 5 of 23 is NaN"},
      {512 + 23 * 4, 2, 0, inf, "Adam's m 0 of 23 is inf"},
      {512 + 49 * 4, 2, 0, -2, "Adam's v 3 of 23 is -2 (expected a finite number >= 0)"},
      {512 + 68 * 4, 2, 0, -inf, "Adam's v 22 of 23 is -inf"},
  };
  int failed = 0;
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    struct ntk_snapshot_info in, out;
    float s[69], *st = NULL;
    good_snapshot(path, &in, s);
    float f = (float)cases[c].d;
    if (cases[c].is_double == 2) forge(path, cases[c].at, &f, 4); /* a float of p, m or v */
    else forge(path, cases[c].at, cases[c].is_double ? (const void *)&cases[c].d : (const void *)&cases[c].u, 8);
    ntk_status r = ntk_snapshot_read(path, &out, &st, NULL);
    if (r != NTK_ECORRUPT || !strstr(ntk_error_message(), cases[c].says)) {
      fprintf(stderr, "case %zu (offset %zu): status %d, message '%s', wanted '%s'\n", c, cases[c].at, (int)r,
              ntk_error_message(), cases[c].says);
      failed++;
    }
    free(st);
  }
  ck_assert_msg(!failed, "%d of %zu forged snapshots not refused as they should be", failed,
                sizeof cases / sizeof *cases);
  /* The other way round: the untouched file, and a consistent position
   * at the start of an epoch, are read. */
  struct ntk_snapshot_info in, out;
  float s[69], *st = NULL;
  good_snapshot(path, &in, s);
  uint64_t zero = 0, t20 = 20;
  double dz = 0;
  forge(path, 192, &zero, 8);
  forge(path, 200, &t20, 8);
  forge(path, 208, &dz, 8);
  forge(path, 216, &dz, 8);
  ck_assert_int_eq(ntk_snapshot_read(path, &out, &st, NULL), NTK_OK);
  ck_assert_uint_eq(out.t, 20);
  free(st);
  /* A header consistent in itself that claims 8.6e9 parameters (103 GB of
   * state) in a 788-byte file: refused by the file's size, before any
   * allocation sized by the claim. */
  good_snapshot(path, &in, s);
  uint64_t big = (uint64_t)1 << 23, kilo = 1024, np = big * kilo + kilo + kilo * 2 + 2;
  forge(path, 24, &big, 8);
  forge(path, 32, &kilo, 8);
  forge(path, 232, &np, 8);
  ck_assert_int_eq(ntk_snapshot_read(path, &out, &st, NULL), NTK_ECORRUPT);
  ck_assert_msg(strstr(ntk_error_message(), "truncated") && strstr(ntk_error_message(), "its header says"), "%s",
                ntk_error_message());
}
END_TEST

START_TEST(test_snapshot_write_refuses) {
  /* ntkd never writes what it would refuse to read; the snapshot in place stays. */
  const char *dir = tu_tmpdir();
  char path[512];
  tu_path(path, sizeof path, dir, "kept.snap");
  struct ntk_snapshot_info in;
  float s[69], *st = NULL;
  good_snapshot(path, &in, s);
  FILE *f = fopen(path, "rb");
  unsigned char before[788], after[788];
  ck_assert_uint_eq(fread(before, 1, sizeof before, f), sizeof before);
  fclose(f);
  struct ntk_snapshot_info bad = in;
  bad.t = 24;
  ck_assert_int_eq(ntk_snapshot_write(path, &bad, s, s + 23, s + 46,
                                      NULL, NTK_SNAPSHOT_ANY, NULL, NULL), NTK_EINTERNAL);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "Adam's t = 24"));
  s[30] = NAN;
  ck_assert_int_eq(ntk_snapshot_write(path, &in, s, s + 23, s + 46, NULL, NTK_SNAPSHOT_ANY, NULL, NULL),
                   NTK_ENONFINITE);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "Adam's m 7 of 23 is NaN"));
  s[30] = 1, s[50] = -1;
  ck_assert_int_eq(ntk_snapshot_write(path, &in, s, s + 23, s + 46, NULL, NTK_SNAPSHOT_ANY, NULL, NULL),
                   NTK_ENONFINITE);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "Adam's v 4 of 23 is -1"));
  f = fopen(path, "rb");
  ck_assert_uint_eq(fread(after, 1, sizeof after, f), sizeof after);
  ck_assert_int_eq(fgetc(f), EOF);
  fclose(f);
  ck_assert_mem_eq(before, after, sizeof before);
  ck_assert_int_eq(ntk_snapshot_read(path, &in, &st, NULL), NTK_OK);
  free(st);
}
END_TEST

START_TEST(test_first_nonfinite) {
  /* Every position of a 3000-value vector (three blocks of the scan and a
   * part), each kind of non-finite value, and the first of two. */
  static float x[3000];
  const float bad[3] = {NAN, INFINITY, -INFINITY};
  for (size_t i = 0; i < 3000; i++) x[i] = (float)i - 1500.0f;
  ck_assert_uint_eq(ntk_train_first_nonfinite(x, 3000), 3000);
  ck_assert_uint_eq(ntk_train_first_nonfinite(x, 0), 0);
  for (size_t i = 0; i < 3000; i++) {
    float keep = x[i];
    x[i] = bad[i % 3];
    ck_assert_uint_eq(ntk_train_first_nonfinite(x, 3000), i);
    ck_assert_uint_eq(ntk_train_first_nonfinite(x, i), i);
    if (i > 0) {
      x[i - 1] = NAN;
      ck_assert_uint_eq(ntk_train_first_nonfinite(x, 3000), i - 1);
      x[i - 1] = (float)(i - 1) - 1500.0f;
    }
    x[i] = keep;
  }
  /* FLT_MAX is finite; v = -0 (flushed) is a valid second moment. */
  x[7] = FLT_MAX, x[8] = -FLT_MAX;
  ck_assert_uint_eq(ntk_train_first_nonfinite(x, 3000), 3000);
  float p[2] = {1, 2}, m[2] = {0, 0}, v[2] = {-0.0f, 0};
  char why[200];
  ck_assert_int_eq(ntk_adam_state_problem(p, m, v, 2, why, sizeof why), 0);
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
  tcase_add_test(tc, test_generators_as_documented);
  tcase_add_test(tc, test_snapshot);
  tcase_add_test(tc, test_snapshot_forged);
  tcase_add_test(tc, test_snapshot_write_refuses);
  tcase_add_test(tc, test_first_nonfinite);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
