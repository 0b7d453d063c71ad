/* FC kernels against neural-tangents reference values (tests/data/ref_fc.txt,
 * from scripts/nt_reference.sh), the pointwise maps, and bit-identity of
 * tiles across tile sizes. */
#include <math.h>

#include "ntkd/arch.h"
#include "ntkd/config.h"
#include "ntkd/fc.h"
#include "ntkd/kernel_maps.h"
#include "refcase.h"
#include "testutil.h"

/* Compute the whole matrix with tiles of edge `tile`, into n x n buffers. */
static void compute_full(const struct ntk_arch *arch, const struct ntk_dataset *ds, size_t tile, void *nngp,
                         void *ntk) {
  ntk_fc_t *fc;
  ck_assert_int_eq(ntk_fc_create(arch, ds, &fc), NTK_OK);
  struct ntk_tiling tg;
  ntk_tiling_init(&tg, ds->n, tile);
  size_t es = (size_t)ds->elem, n = ds->n;
  char *g = malloc(tile * tile * es), *t = malloc(tile * tile * es);
  for (uint64_t k = 0; k < tg.ntiles; k++) {
    struct ntk_tile tl = ntk_tiling_tile(&tg, k);
    ck_assert_int_eq(ntk_fc_tile(fc, &tl, g, t), NTK_OK);
    for (size_t i = 0; i < tl.rows; i++)
      for (size_t j = 0; j < tl.cols; j++) {
        size_t I = tl.r0 + i, J = tl.c0 + j, src = (i * tl.cols + j) * es;
        if (I < J) continue;
        memcpy((char *)nngp + (I * n + J) * es, g + src, es);
        memcpy((char *)nngp + (J * n + I) * es, g + src, es);
        memcpy((char *)ntk + (I * n + J) * es, t + src, es);
        memcpy((char *)ntk + (J * n + I) * es, t + src, es);
      }
  }
  free(g);
  free(t);
  ntk_fc_free(fc);
}

static void check_against_reference(int elem, double tol) {
  FILE *f = ref_open("ref_fc.txt");
  struct ref_case c;
  int cases = 0;
  double worst_nngp = 0, worst_ntk = 0;
  while (ref_read_case(f, &c)) {
    struct ntk_arch arch;
    ck_assert_msg(ntk_arch_parse(c.arch, 1.0, 0.0, &arch) == NTK_OK, "%s: %s", c.name, ntk_error_message());
    struct ntk_dataset ds = ref_dataset(&c, elem);
    void *g = malloc(c.n * c.n * (size_t)elem), *t = malloc(c.n * c.n * (size_t)elem);
    /* One tile, then ragged tiles: both must match. */
    size_t tiles[] = {c.n, 2, 4};
    for (size_t ti = 0; ti < 3; ti++) {
      compute_full(&arch, &ds, tiles[ti], g, t);
      double en = ref_max_err(g, elem, c.nngp, c.n, elem == 8), et = ref_max_err(t, elem, c.ntk, c.n, elem == 8);
      ck_assert_msg(en < tol && et < tol, "%s (%s, tile %zu): relative error nngp %.3g ntk %.3g >= %.0e", c.name,
                    elem == 4 ? "float32" : "float64", tiles[ti], en, et, tol);
      worst_nngp = en > worst_nngp ? en : worst_nngp;
      worst_ntk = et > worst_ntk ? et : worst_ntk;
    }
    free(g);
    free(t);
    free(ds.x);
    ntk_arch_free(&arch);
    ref_free_case(&c);
    cases++;
  }
  fclose(f);
  ck_assert_int_ge(cases, 30);
  printf("reference (%s): %d cases, max relative error nngp %.3g, ntk %.3g (bound %.0e)\n",
         elem == 4 ? "float32" : "float64", cases, worst_nngp, worst_ntk, tol);
}

START_TEST(test_reference_float64) { check_against_reference(8, 1e-10); }
END_TEST

START_TEST(test_reference_float32) { check_against_reference(4, 1e-5); }
END_TEST

START_TEST(test_maps) {
  double td;
  /* Relu of a pair with itself: q/2, derivative factor 1/2. */
  ck_assert_double_eq_tol(ntk_abrelu(0, 1, 2.0, 2.0, 2.0, &td), 1.0, 1e-15);
  ck_assert_double_eq_tol(td, 0.5, 1e-15);
  /* Orthogonal inputs: theta = pi/2 -> nngp = sqrt(q11 q22)/(2 pi), tdot = 1/4. */
  ck_assert_double_eq_tol(ntk_abrelu(0, 1, 0.0, 4.0, 1.0, &td), 2.0 / (2 * NTK_PI), 1e-15);
  ck_assert_double_eq_tol(td, 0.25, 1e-15);
  /* Opposite inputs: nothing in common. */
  ck_assert_double_eq_tol(ntk_abrelu(0, 1, -1.0, 1.0, 1.0, &td), 0.0, 1e-15);
  ck_assert_double_eq_tol(td, 0.0, 1e-15);
  /* Abs is an even function: E[|u||v|] at q12 = q is q; identity-like LeakyRelu(1) is linear. */
  ck_assert_double_eq_tol(ntk_abrelu(-1, 1, 3.0, 3.0, 3.0, &td), 3.0, 1e-14);
  ck_assert_double_eq_tol(ntk_abrelu(1, 1, 0.3, 1.0, 2.0, &td), 0.3, 1e-15);
  ck_assert_double_eq_tol(td, 1.0, 1e-15);
  /* Zero variance and covariance: angle pi/2 as in neural-tangents. */
  ck_assert_double_eq(ntk_abrelu(0, 1, 0.0, 0.0, 0.0, &td), 0.0);
  ck_assert_double_eq_tol(td, 0.25, 1e-15);
  /* Erf: E[erf(u) erf(v)] = (2/pi) asin(2 q12 / sqrt((1+2q11)(1+2q22))). */
  double q11 = 0.7, q22 = 1.3, q12 = 0.4;
  ck_assert_double_eq_tol(ntk_erf(q12, q11, q22, &td), 2 / NTK_PI * asin(2 * q12 / sqrt((1 + 2 * q11) * (1 + 2 * q22))),
                          1e-15);
  ck_assert_double_eq_tol(td, 4 / NTK_PI / sqrt((1 + 2 * q11) * (1 + 2 * q22) - 4 * q12 * q12), 1e-14);
  /* float versions agree with the double ones. */
  float tf;
  ck_assert_float_eq_tol(ntk_abreluf(0.1f, 1, 0.3f, 1.0f, 2.0f, &tf), (float)ntk_abrelu(0.1, 1, 0.3, 1, 2, &td), 1e-6f);
  ck_assert_float_eq_tol(tf, (float)td, 1e-6f);
  ck_assert_float_eq_tol(ntk_erff(0.4f, 0.7f, 1.3f, &tf), (float)ntk_erf(0.4, 0.7, 1.3, &td), 1e-6f);
}
END_TEST

START_TEST(test_atan2f) {
  double worst = 0;
  for (int i = -200; i <= 200; i++)
    for (int j = -200; j <= 200; j++) {
      float y = (float)i * 0.37f, x = (float)j * 0.91f;
      if (i == 0 && j == 0) continue;
      double e = fabs((double)ntk_atan2f(y, x) - atan2((double)y, (double)x));
      worst = e > worst ? e : worst;
    }
  ck_assert_msg(worst < 5e-7, "ntk_atan2f error %.3g", worst);
  ck_assert_float_eq(ntk_atan2f(0.0f, 1.0f), 0.0f);
  ck_assert_float_eq_tol(ntk_atan2f(0.0f, -1.0f), (float)NTK_PI, 1e-7f);
  ck_assert_float_eq(ntk_atan2f(1e-30f, 1e30f), 0.0f); /* underflows */
  ck_assert_float_eq_tol(ntk_atan2f(1e-3f, 1e3f), 1e-6f, 1e-12f);
}
END_TEST

/* The division-free float ReLU map against the double one over the whole
 * angle range (both signs of q12, both sides of pi/4 and pi/8, near +-1),
 * and its exact cases: a pair with itself, zero variances. */
START_TEST(test_abreluf_angles) {
  double worst_g = 0, worst_t = 0;
  const float ab[3][2] = {{0, 1}, {0.1f, 1}, {-1, 1}};
  for (int v = 0; v < 3; v++)
    for (int i = 0; i <= 4000; i++) {
      double th = NTK_PI * i / 4000.0;
      float q11 = 0.37f + (float)(i % 7), q22 = 2.9f / (1 + (float)(i % 5));
      float q12 = (float)(cos(th) * sqrt((double)q11 * q22));
      float tf;
      double td, g = ntk_abrelu(ab[v][0], ab[v][1], q12, q11, q22, &td);
      float gf = ntk_abreluf(ab[v][0], ab[v][1], q12, q11, q22, &tf);
      double scale = sqrt((double)q11 * q22); /* entries are O(scale), tdot O(1) */
      double eg = fabs(gf - g) / scale, et = fabs(tf - td);
      worst_g = eg > worst_g ? eg : worst_g;
      worst_t = et > worst_t ? et : worst_t;
      /* the precomputed-factor form is the same function, bit for bit */
      float tf2, gf2 = ntk_abreluf_r(ab[v][0], ab[v][1], q12, q11, q22, ntk_rsqrtf(q11), ntk_rsqrtf(q22), &tf2);
      ck_assert(gf2 == gf && tf2 == tf);
    }
  /* float32 inputs carry 6e-8 relative rounding; near q12 = +-sqrt(q11 q22)
   * the angle amplifies it to ~sqrt(6e-8) in tdot, as in any float32 map. */
  ck_assert_msg(worst_g < 2e-6, "nngp error %.3g", worst_g);
  ck_assert_msg(worst_t < 2e-4, "tdot error %.3g", worst_t);
  float tf;
  /* A pair with itself: exactly q/2 and 1/2, whatever q. */
  for (float q = 1e-20f; q < 1e18f; q *= 7.3f) {
    ck_assert(ntk_abreluf(0, 1, q, q, q, &tf) == q * 0.5f);
    ck_assert(tf == 0.5f);
  }
  /* Zero variances: angle pi/2, as the double map. */
  ck_assert(ntk_abreluf(0, 1, 0.0f, 0.0f, 0.0f, &tf) == 0.0f);
  ck_assert_float_eq_tol(tf, 0.25f, 1e-7f);
  ck_assert(ntk_abreluf(0, 1, 0.0f, 0.0f, 3.0f, &tf) == 0.0f);
  ck_assert_float_eq_tol(tf, 0.25f, 1e-7f);
  /* Opposite inputs: nothing in common; tiny variances stay finite. */
  ck_assert_float_eq_tol(ntk_abreluf(0, 1, -2.0f, 2.0f, 2.0f, &tf), 0.0f, 1e-7f);
  ck_assert_float_eq_tol(tf, 0.0f, 1e-7f);
  float g = ntk_abreluf(0, 1, 1e-41f, 1e-40f, 2e-40f, &tf);
  ck_assert(isfinite(g) && isfinite(tf));
}
END_TEST

/* The same entries, bit for bit, whatever the tile size (N > the Gram block). */
static void check_tile_independence(int elem) {
  size_t n = 1100, d = 37, es = (size_t)elem;
  struct ntk_dataset ds = {n, d, 0, 0, 0, elem, malloc(n * d * es), 0};
  unsigned s = 7;
  for (size_t k = 0; k < n * d; k++) {
    s = s * 1103515245u + 12345u;
    double v = (double)((s >> 8) & 0xffff) / 32768.0 - 1.0;
    if (elem == 4) ((float *)ds.x)[k] = (float)v;
    else ((double *)ds.x)[k] = v;
  }
  struct ntk_arch arch;
  ck_assert_int_eq(ntk_arch_parse("Dense(b_std=0.1) Relu Dense(W_std=1.3) Erf Dense Abs Dense", 1.2, 0.0, &arch), NTK_OK);
  void *g0 = malloc(n * n * es), *t0 = malloc(n * n * es), *g1 = malloc(n * n * es), *t1 = malloc(n * n * es);
  compute_full(&arch, &ds, n, g0, t0);
  size_t tiles[] = {512, 300, 77, 1024};
  for (size_t i = 0; i < 4; i++) {
    compute_full(&arch, &ds, tiles[i], g1, t1);
    ck_assert_msg(!memcmp(g0, g1, n * n * es) && !memcmp(t0, t1, n * n * es), "tile %zu differs", tiles[i]);
  }
  /* And the matrix is exactly symmetric. */
  for (size_t i = 0; i < n; i += 7)
    for (size_t j = 0; j < i; j += 5) ck_assert(!memcmp((char *)t0 + (i * n + j) * es, (char *)t0 + (j * n + i) * es, es));
  free(g0);
  free(t0);
  free(g1);
  free(t1);
  free(ds.x);
  ntk_arch_free(&arch);
}

START_TEST(test_tile_independence_f32) { check_tile_independence(4); }
END_TEST
START_TEST(test_tile_independence_f64) { check_tile_independence(8); }
END_TEST

START_TEST(test_refuses_cnn) {
  struct ntk_arch arch;
  ck_assert_int_eq(ntk_arch_parse("Conv(3) Relu GlobalAvgPool Dense", 1, 0, &arch), NTK_OK);
  struct ntk_dataset ds = {1, 1, 0, 0, 0, 8, NULL, 0};
  ntk_fc_t *fc;
  ck_assert_int_eq(ntk_fc_create(&arch, &ds, &fc), NTK_ECONFIG);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "need image data"));
  ntk_arch_free(&arch);
}
END_TEST

int main(void) {
  Suite *s = suite_create("kernel");
  TCase *tc = tcase_create("fc");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_maps);
  tcase_add_test(tc, test_atan2f);
  tcase_add_test(tc, test_abreluf_angles);
  tcase_add_test(tc, test_reference_float64);
  tcase_add_test(tc, test_reference_float32);
  tcase_add_test(tc, test_tile_independence_f32);
  tcase_add_test(tc, test_tile_independence_f64);
  tcase_add_test(tc, test_refuses_cnn);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
