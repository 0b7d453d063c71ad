/* FC kernels against neural-tangents reference values (tests/data/ref_fc.txt,
 * from scripts/nt_reference.sh), the pointwise maps, and bit-identity of
 * tiles across tile sizes. */
#include <float.h>
#include <math.h>

#include "kernels/arch.h"
#include "job/config.h"
#include "kernels/fc.h"
#include "kernels/kernel_maps.h"
#include "kernels/layers.h"
#include "kernels/numerical.h"
#include "kernels/fc_entry.h"
#include "refcase.h"
#include "testutil.h"

/* Compute the whole matrix with tiles of edge `tile`, into n x n buffers. */
static void compute_full(const struct ntk_arch *arch, const struct ntk_dataset *ds, size_t tile, void *nngp,
                         void *ntk) {
  ntk_fc_t *fc;
  ck_assert_int_eq(ntk_fc_create(arch, ds, NULL, &fc), NTK_OK);
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

static void check_against_reference(const char *file, int min_cases, int elem, double tol) {
  FILE *f = ref_open(file);
  struct ref_case c;
  int cases = 0;
  double worst_nngp = 0, worst_ntk = 0;
  while (ref_read_case(f, &c)) {
    struct ntk_arch arch;
    ck_assert_msg(ntk_arch_parse_param(c.arch, 1.0, 0.0, c.standard, &arch) == NTK_OK, "%s: %s", c.name, ntk_error_message());
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
  ck_assert_int_ge(cases, min_cases);
  printf("%s (%s): %d cases, max relative error nngp %.3g, ntk %.3g (bound %.0e)\n", file,
         elem == 4 ? "float32" : "float64", cases, worst_nngp, worst_ntk, tol);
}

START_TEST(test_reference_float64) { check_against_reference("ref_fc.txt", 30, 8, 1e-10); }
END_TEST

START_TEST(test_reference_float32) { check_against_reference("ref_fc.txt", 30, 4, 1e-5); }
END_TEST

/* ElementwiseNumerical's networks against the independent 30-digit
 * reference of scripts/numerical_reference.py (not neural-tangents, whose
 * Gauss-Hermite values are off by up to 1e-3 there: docs/MATH.md). */
START_TEST(test_numerical_reference_float64) { check_against_reference("ref_numerical.txt", 10, 8, 1e-10); }
END_TEST

START_TEST(test_numerical_reference_float32) { check_against_reference("ref_numerical.txt", 10, 4, 1e-5); }
END_TEST

/* The map of fn at (q12, q11, q22), and its scale sqrt(E f(u)^2 E f(v)^2)
 * (and the same for f'), from the diagonal entries. */
static double numerical_scaled(const struct ntk_map *m, double q12, double q11, double q22, double *tdot,
                               double *scale, double *tscale) {
  double t1, t2, g1 = ntk_numerical_map(m, q11, q11, q11, &t1), g2 = ntk_numerical_map(m, q22, q22, q22, &t2);
  *scale = sqrt(g1) * sqrt(g2);
  *tscale = sqrt(t1) * sqrt(t2);
  return ntk_numerical_map(m, q12, q11, q22, tdot);
}

/* Every map against tests/data/ref_numerical_map.txt (30 digits, mpmath):
 * within 1e-13 of its scale, from variances of 1e-6 to 1e6, correlations
 * 0 to +-1 exactly, zero variances. */
START_TEST(test_numerical_map_reference) {
  FILE *f = ref_open("ref_numerical_map.txt");
  char line[512];
  int rows = 0, seen[NTK_FN_COUNT] = {0};
  double worst = 0, worst_t = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    char name[32];
    double q11, q22, q12, g, t;
    ck_assert_msg(sscanf(line, "%31s %lf %lf %lf %lf %lf", name, &q11, &q22, &q12, &g, &t) == 6, "bad line: %s", line);
    struct ntk_map m;
    const char *closed;
    ck_assert_msg(ntk_numfn_find(name, &m, &closed) && !closed, "%s: not a numerical function", name);
    double td, scale, tscale, v = numerical_scaled(&m, q12, q11, q22, &td, &scale, &tscale);
    double e = fabs(v - g) / (scale > 0 ? scale : 1.0), et = fabs(td - t) / (tscale > 0 ? tscale : 1.0);
    ck_assert_msg(e < 1e-13 && et < 1e-13, "%s q11 %g q22 %g q12 %.17g: %.17g vs %.17g, tdot %.17g vs %.17g (%.2g, %.2g)",
                  name, q11, q22, q12, v, g, td, t, e, et);
    worst = e > worst ? e : worst;
    worst_t = et > worst_t ? et : worst_t;
    seen[m.degree]++;
    rows++;
  }
  fclose(f);
  for (int k = 0; k < NTK_FN_COUNT; k++) ck_assert_msg(seen[k] >= 20, "%s: %d rows", ntk_numfn_name(k), seen[k]);
  printf("ref_numerical_map.txt: %d rows, worst error %.2g (nngp) %.2g (tdot) of the scale\n", rows, worst, worst_t);
}
END_TEST

/* The reference comparison itself: a NaN anywhere is the worst error, even
 * with finite errors after it (it once let a later entry replace it). */
START_TEST(test_ref_max_err_nan) {
  double ref[4] = {1, 0.5, 0.5, 1}, got[4] = {NAN, 0.5, 0.5, 1.5};
  for (int plain = 0; plain <= 1; plain++) ck_assert(isnan(ref_max_err(got, 8, ref, 2, plain)));
  got[0] = 1;
  ck_assert(fabs(ref_max_err(got, 8, ref, 2, 1) - 0.5) < 1e-15);
}
END_TEST

/* The two ways of numerical.c, scale mixture and nested quadrature, agree
 * for the four functions that have both, over variances 1e-8 to 1e9 and
 * every correlation (the same identities, reached independently); and the
 * maps refuse what is not a covariance. */
START_TEST(test_numerical_methods_agree) {
  static const double qs[] = {1e-8, 0.05, 1, 20, 1e4, 1e9}, rhos[] = {-1, -0.999999, -0.7, 0, 0.3, 0.99999, 1};
  double worst = 0;
  for (int fn = NTK_FN_TANH; fn <= NTK_FN_SILU; fn++) {
    struct ntk_map m = {.kind = NTK_MAP_NUMERICAL, .degree = fn};
    for (size_t a = 0; a < sizeof qs / sizeof *qs; a++)
      for (size_t b = a; b < sizeof qs / sizeof *qs; b += 2)
        for (size_t r = 0; r < sizeof rhos / sizeof *rhos; r++) {
          double q11 = qs[a], q22 = qs[b], q12 = rhos[r] * sqrt(q11) * sqrt(q22), t1, t2, scale, tscale;
          double g1 = numerical_scaled(&m, q12, q11, q22, &t1, &scale, &tscale);
          double g2 = ntk_numerical_map_nested(&m, q12, q11, q22, &t2);
          double e = fabs(g1 - g2) / scale, et = fabs(t1 - t2) / tscale;
          ck_assert_msg(e < 1e-12 && et < 1e-12, "%s q %g %g rho %g: %.17g vs %.17g, tdot %.17g vs %.17g",
                        ntk_numfn_name(fn), q11, q22, rhos[r], g1, g2, t1, t2);
          worst = fmax(worst, fmax(e, et));
        }
  }
  printf("numerical maps: mixture and nested quadrature within %.2g of the scale\n", worst);
  struct ntk_map m = {.kind = NTK_MAP_NUMERICAL, .degree = NTK_FN_ELU, .a = 1.0};
  double td;
  ck_assert(isnan(ntk_numerical_map(&m, 0.1, -1.0, 1.0, &td)) && isnan(td));
  ck_assert(isnan(ntk_numerical_map(&m, NAN, 1.0, 1.0, &td)) && isnan(td));
  m.degree = NTK_FN_TANH;
  ck_assert(isnan(ntk_numerical_map(&m, 0.1, 1.0, INFINITY, &td)) && isnan(td));
  /* a zero variance: f(0) E[f(v)], exactly 0 for tanh */
  ck_assert(ntk_numerical_map(&m, 0.0, 0.0, 2.0, &td) == 0.0);
}
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

/* ---- range: every value the precision holds comes out right ------------- */

/* Deterministic inputs: a linear congruential generator, uniform in [0, 1). */
static double lcg(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (double)((*s >> 8) & 0xffffff) / 16777216.0;
}

/* The ABRelu map `act`: 0 Relu, 1 LeakyRelu(0.1), 2 Abs. */
static const double act_ab[3][2] = {{0, 1}, {0.1, 1}, {-1, 1}};
static float map_f(int act, float q12, float q11, float q22, float *td) {
  return ntk_abreluf((float)act_ab[act][0], (float)act_ab[act][1], q12, q11, q22, td);
}
static double map_d(int act, double q12, double q11, double q22, double *td) {
  return ntk_abrelu(act_ab[act][0], act_ab[act][1], q12, q11, q22, td);
}

/* One pair through Dense(W_std=1.5) act Dense(W_std=1.5) act Dense with
 * b_std = 0, as src/kernels/fc.c does it: k[0..2] the NNGP of (x, x'),
 * (x, x), (x', x'), k[3..5] the NTK. The input covariances in `q`. */
static void chain_f(int act, const double q[3], double k[6]) {
  float g[3] = {(float)q[0], (float)q[1], (float)q[2]}, t[3] = {0, 0, 0}, w2 = 2.25f;
  for (int l = 0; l < 3; l++) {
    for (int e = 0; e < 3; e++) {
      g[e] = w2 * g[e] + 0.0f;
      t[e] = g[e] + w2 * t[e];
    }
    if (l == 2) break;
    float td[3], g0 = map_f(act, g[0], g[1], g[2], &td[0]);
    float g1 = map_f(act, g[1], g[1], g[1], &td[1]), g2 = map_f(act, g[2], g[2], g[2], &td[2]);
    g[0] = g0, g[1] = g1, g[2] = g2;
    for (int e = 0; e < 3; e++) t[e] *= td[e];
  }
  for (int e = 0; e < 3; e++) k[e] = g[e], k[3 + e] = t[e];
}
static void chain_d(int act, const double q[3], double k[6]) {
  double g[3] = {q[0], q[1], q[2]}, t[3] = {0, 0, 0}, w2 = 2.25;
  for (int l = 0; l < 3; l++) {
    for (int e = 0; e < 3; e++) {
      g[e] = w2 * g[e] + 0.0;
      t[e] = g[e] + w2 * t[e];
    }
    if (l == 2) break;
    double td[3], g0 = map_d(act, g[0], g[1], g[2], &td[0]);
    double g1 = map_d(act, g[1], g[1], g[1], &td[1]), g2 = map_d(act, g[2], g[2], g[2], &td[2]);
    g[0] = g0, g[1] = g1, g[2] = g2;
    for (int e = 0; e < 3; e++) t[e] *= td[e];
  }
  for (int e = 0; e < 3; e++) k[e] = g[e], k[3 + e] = t[e];
}

/* The covariances of two random 8-vectors: q[0] = x.x'/8, q[1] = x.x/8,
 * q[2] = x'.x'/8, with |correlation| <= 0.99 (closer to +-1 the float
 * inputs' own rounding moves the angle by ~sqrt(eps): test_collinear). */
static void random_pair(unsigned *seed, double q[3]) {
  for (;;) {
    double x[8], y[8], a = 0, b = 0, c = 0, w = lcg(seed) * 2;
    for (int i = 0; i < 8; i++) {
      x[i] = lcg(seed) * 2 - 1;
      y[i] = w * x[i] + lcg(seed) * 2 - 1; /* correlations of either sign */
      if (lcg(seed) < 0.3) y[i] = -y[i];
      a += x[i] * y[i], b += x[i] * x[i], c += y[i] * y[i];
    }
    q[0] = a / 8, q[1] = b / 8, q[2] = c / 8;
    if (fabs(q[0]) <= 0.99 * sqrt(q[1] * q[2])) return;
  }
}

/* Relative error of entry e of `got` against `ref` (times s2), measured
 * against max(|K12|, sqrt(K11 K22)) of that kernel, as the other tests. */
static double rel_err(const double got[6], const double ref[6], double s2, int e) {
  int g = e < 3 ? 0 : 3;
  double scale = fmax(fabs(ref[g]), sqrt(ref[g + 1] * ref[g + 2])) * s2;
  return fabs(got[e] - ref[e] * s2) / scale;
}

/* With b_std = 0 a network of Dense and ReLU-family layers is positively
 * homogeneous: K(s x, s x') = s^2 K(x, x') for NNGP and NTK. The map chain
 * on inputs scaled by s must be the scale-1 float64 chain times s^2, at
 * scales where q11 q22 left the range of the old product formula (float:
 * ~1.8e19 and ~1e-19 for the variances; double: 1e154, 1e-154). */
START_TEST(test_range_homogeneous) {
  const double sf[] = {1e10, 1e-10, 1e12, 1e-12, 1e15, 1e-15};
  const double sd[] = {1e10, 1e-12, 1e80, 1e-80, 1e150, 1e-150};
  double worst_f = 0, worst_d = 0;
  unsigned seed = 11;
  for (int act = 0; act < 3; act++)
    for (int i = 0; i < 300; i++) {
      double q[3], ref[6], got[6];
      random_pair(&seed, q);
      chain_d(act, q, ref);
      for (int si = 0; si < 6; si++) {
        double s2 = sf[si] * sf[si], qs[3] = {q[0] * s2, q[1] * s2, q[2] * s2};
        chain_f(act, qs, got);
        for (int e = 0; e < 6; e++) {
          double err = rel_err(got, ref, s2, e);
          ck_assert_msg(err < 1e-6, "float32, act %d, scale %g, entry %d: %g vs %g (relative error %.3g)", act,
                        sf[si], e, got[e], ref[e] * s2, err);
          worst_f = fmax(worst_f, err);
        }
        s2 = sd[si] * sd[si];
        double qd[3] = {q[0] * s2, q[1] * s2, q[2] * s2};
        chain_d(act, qd, got);
        for (int e = 0; e < 6; e++) {
          double err = rel_err(got, ref, s2, e);
          ck_assert_msg(err < 1e-13, "float64, act %d, scale %g, entry %d: %g vs %g (relative error %.3g)", act,
                        sd[si], e, got[e], ref[e] * s2, err);
          worst_d = fmax(worst_d, err);
        }
      }
    }
  printf("range, homogeneity: largest relative error float32 %.3g (scales 1e+-10..15), float64 %.3g (to 1e+-150)\n",
         worst_f, worst_d);
}
END_TEST

/* Scaling q12, q11, q22 by 4^k scales the ABRelu maps' nngp by exactly
 * 4^k and leaves tdot alone, bit for bit, over the whole normal range
 * (the old product formula overflowed at 4^32 in float32, 4^256 in double). */
START_TEST(test_range_pow4_exact) {
  unsigned seed = 5;
  for (int i = 0; i < 200; i++) {
    double q[3];
    random_pair(&seed, q);
    if (i % 10 == 0) q[0] = q[1] = q[2]; /* a pair with itself */
    for (int act = 0; act < 3; act++) {
      float a = (float)act_ab[act][0], b = (float)act_ab[act][1], t0, tk;
      float g0 = ntk_abreluf(a, b, (float)q[0], (float)q[1], (float)q[2], &t0);
      for (int k = -50; k <= 50; k++) {
        float gk = ntk_abreluf(a, b, ldexpf((float)q[0], 2 * k), ldexpf((float)q[1], 2 * k),
                               ldexpf((float)q[2], 2 * k), &tk);
        ck_assert_msg(gk == ldexpf(g0, 2 * k) && tk == t0, "float32 act %d, 4^%d: %a %a vs %a %a", act, k, gk, tk,
                      ldexpf(g0, 2 * k), t0);
      }
      double s0, sk, h0 = ntk_abrelu(act_ab[act][0], act_ab[act][1], q[0], q[1], q[2], &s0);
      for (int k = -500; k <= 500; k += 7) {
        double hk = ntk_abrelu(act_ab[act][0], act_ab[act][1], ldexp(q[0], 2 * k), ldexp(q[1], 2 * k),
                               ldexp(q[2], 2 * k), &sk);
        ck_assert_msg(hk == ldexp(h0, 2 * k) && sk == s0, "float64 act %d, 4^%d: %a %a vs %a %a", act, k, hk, sk,
                      ldexp(h0, 2 * k), s0);
      }
    }
  }
}
END_TEST

/* A pair with itself keeps the angle exactly 0 at every scale, subnormal
 * variances included: nngp = tdot * q and tdot = (a^2 + b^2)/2 exactly. */
START_TEST(test_range_pair_with_itself) {
  const float mant[] = {1.0f, 1.37f, 1.9999999f};
  for (int act = 0; act < 3; act++) {
    float a = (float)act_ab[act][0], b = (float)act_ab[act][1], want_t = (a * a + b * b) * 0.5f, tf;
    for (int e = -149; e <= 127; e++)
      for (int m = 0; m < 3; m++) {
        float q = ldexpf(mant[m], e);
        if (q == 0.0f || !isfinite(q)) continue;
        float g = ntk_abreluf(a, b, q, q, q, &tf);
        ck_assert_msg(tf == want_t && g == want_t * q, "float32 act %d, q = %a: %a, tdot %a", act, q, g, tf);
      }
    double want_d = (act_ab[act][0] * act_ab[act][0] + act_ab[act][1] * act_ab[act][1]) / 2.0, td;
    for (int e = -1074; e <= 1023; e++) {
      double q = ldexp(1.37, e);
      if (q == 0.0 || !isfinite(q)) continue;
      double g = ntk_abrelu(act_ab[act][0], act_ab[act][1], q, q, q, &td);
      ck_assert_msg(td == want_d && g == want_d * q, "float64 act %d, q = %a: %a, tdot %a", act, q, g, td);
    }
  }
}
END_TEST

/* The float ABRelu map against the double one over the whole float range
 * (variances 1e-36..1e36, both signs of q12): the same accuracy at every
 * scale as test_abreluf_angles has at O(1). */
START_TEST(test_range_abreluf_accuracy) {
  unsigned seed = 17;
  double worst_g = 0, worst_t = 0;
  for (int i = 0; i < 200000; i++) {
    int act = i % 3;
    double q11 = pow(10, 72 * lcg(&seed) - 36), q22 = pow(10, 72 * lcg(&seed) - 36), rho = 1.98 * lcg(&seed) - 0.99;
    float f11 = (float)q11, f22 = (float)q22, f12 = (float)(rho * sqrt(q11 * q22)), tf;
    double td, g = ntk_abrelu(act_ab[act][0], act_ab[act][1], f12, f11, f22, &td);
    float gf = ntk_abreluf((float)act_ab[act][0], (float)act_ab[act][1], f12, f11, f22, &tf);
    double eg = fabs(gf - g) / sqrt((double)f11 * f22), et = fabs(tf - td);
    ck_assert_msg(isfinite(gf) && eg < 2e-6 && et < 2e-6, "q12 %a q11 %a q22 %a: nngp %a vs %a, tdot %a vs %a", f12,
                  f11, f22, gf, g, tf, td);
    worst_g = fmax(worst_g, eg);
    worst_t = fmax(worst_t, et);
  }
  printf("range, float ABRelu over 1e-36..1e36: nngp error %.3g of sqrt(q11 q22), tdot %.3g\n", worst_g, worst_t);
}
END_TEST

/* The double ABRelu map scales its variances by powers of two always
 * (ntk_abrelu_angle); the product formula, with the same atan2, must give
 * the same bits wherever its products stay in range: the scaling never
 * shows. */
static double abrelu_tail(double a, double b, double q12, double sq, double theta, double *tdot) {
  double factor = (a - b) * (a - b) / (2.0 * NTK_PI);
  double dot_sigma = (a * a + b * b) / 2.0 - factor * theta;
  *tdot = dot_sigma;
  return factor * sq + dot_sigma * q12;
}
static double abrelu_products(double a, double b, double q12, double q11, double q22, double *tdot) {
  double det = q11 * q22 - q12 * q12;
  double sq = sqrt(det > 0.0 ? det : 0.0);
  double theta = (sq == 0.0 && q12 == 0.0) ? NTK_PI_2 : ntk_atan2(sq, q12);
  return abrelu_tail(a, b, q12, sq, theta, tdot);
}
/* ntk_atan2, the double maps' atan2, against long double: within 3 ulp
 * over every quadrant, near the reduction's edges (|y/x| near tan(pi/8)
 * and 1) and at tiny and huge ratios; a NaN in either argument gives NaN;
 * atan2(0, +-1) and atan2(+-1, 0) exactly as libm. */
START_TEST(test_atan2_double) {
  unsigned seed = 41;
  double worst = 0;
  for (int i = 0; i < 2000000; i++) {
    double y = 2 * lcg(&seed) - 1, x = 2 * lcg(&seed) - 1;
    if (i % 5 == 1) y = x * (0.41421356237309503 + (lcg(&seed) - 0.5) * 1e-9);
    if (i % 5 == 2) y = x * (1 + (lcg(&seed) - 0.5) * 1e-9);
    if (i % 5 == 3) y = x * pow(10, 40 * lcg(&seed) - 20);
    double got = ntk_atan2(y, x), want = atan2(y, x);
    long double exact = atan2l(y, x);
    double ulp = fabs(nextafter(want, INFINITY) - want), err = (double)fabsl((long double)got - exact) / ulp;
    ck_assert_msg(err <= 3.0, "atan2(%a, %a): %a, long double %La: %.2f ulp", y, x, got, exact, err);
    worst = fmax(worst, err);
  }
  ck_assert(isnan(ntk_atan2(NAN, 1.0)) && isnan(ntk_atan2(1.0, NAN)) && isnan(ntk_atan2(0.0, NAN)));
  ck_assert(isnan(ntk_atan2f(NAN, 1.0f)) && isnan(ntk_atan2f(1.0f, NAN)) && isnan(ntk_atan2f(0.0f, NAN)));
  ck_assert(ntk_atan2(0.0, 1.0) == 0.0 && ntk_atan2(0.0, -1.0) == atan2(0.0, -1.0));
  ck_assert(ntk_atan2(1.0, 0.0) == atan2(1.0, 0.0) && ntk_atan2(-1.0, 0.0) == atan2(-1.0, 0.0));
  printf("ntk_atan2: largest error %.2f ulp\n", worst);
}
END_TEST

START_TEST(test_range_abrelu_f64_bits) {
  unsigned seed = 23;
  for (int i = 0; i < 300000; i++) {
    int act = i % 3;
    double q11 = pow(10, 300 * lcg(&seed) - 150), q22 = pow(10, 300 * lcg(&seed) - 150), u = lcg(&seed);
    double rho = u < 0.1 ? 1 - pow(10, -16 * lcg(&seed)) : u < 0.2 ? -1 + pow(10, -16 * lcg(&seed)) : 2 * u - 1;
    double q12 = rho * sqrt(q11 * q22), t1, t2, a = act_ab[act][0], b = act_ab[act][1];
    if (i % 50 == 0) q12 = q11 = q22;
    if (i % 50 == 1) q12 = 0;
    double g1 = ntk_abrelu(a, b, q12, q11, q22, &t1), g2 = abrelu_products(a, b, q12, q11, q22, &t2);
    ck_assert_msg(!memcmp(&g1, &g2, sizeof g1) && !memcmp(&t1, &t2, sizeof t1),
                  "q12 %a q11 %a q22 %a: map %a %a, product formula %a %a", q12, q11, q22, g1, t1, g2, t2);
  }
}
END_TEST

/* Erf at variances the product form could not take, against the double
 * map (float, 1e4..1e37: the double map needs no scaling there) and
 * against long double (double, 1e150..1e300), for pairs with
 * |correlation| <= 0.99 and for a pair with itself, whose tdot the product
 * form lost to cancellation from ~1e4 on (inf from ~1e8). */
START_TEST(test_range_erf) {
  unsigned seed = 29;
  double worst_g = 0, worst_t = 0;
  for (int i = 0; i < 100000; i++) {
    double q11 = pow(10, 4 + 33 * lcg(&seed)), q22 = q11 * pow(10, 2 * lcg(&seed) - 1), rho = 1.98 * lcg(&seed) - 0.99;
    float f11 = (float)q11, f22 = (float)q22, f12 = (float)(rho * sqrt(q11 * q22)), tf;
    if (i % 10 == 0) f12 = f22 = f11;
    double td, g = ntk_erf(f12, f11, f22, &td);
    float gf = ntk_erff(f12, f11, f22, &tf);
    double eg = fabs(gf - g), et = fabs(tf - td) / td;
    ck_assert_msg(isfinite(gf) && isfinite(tf) && eg < 1e-6 && et < 1e-5,
                  "float32 q12 %a q11 %a q22 %a: nngp %a vs %a, tdot %a vs %a", f12, f11, f22, gf, g, tf, td);
    worst_g = fmax(worst_g, eg);
    worst_t = fmax(worst_t, et);
  }
#if LDBL_MANT_DIG >= 64 && LDBL_MAX_EXP > 2 * DBL_MAX_EXP
  const long double pi = 3.141592653589793238462643383279502884L;
  for (int i = 0; i < 100000; i++) {
    double q11 = pow(10, 150 + 150 * lcg(&seed)), q22 = q11 * pow(10, 2 * lcg(&seed) - 1);
    double rho = 1.98 * lcg(&seed) - 0.99;
    double q12 = rho * sqrt(q11) * sqrt(q22), td;
    if (i % 10 == 0) q12 = q22 = q11;
    long double det = (long double)q11 * q22 - (long double)q12 * q12;
    long double d = 1 + 2 * (long double)q11 + 2 * (long double)q22 + 4 * (det > 0 ? det : 0);
    long double rg = 2 / pi * atan2l(2 * (long double)q12, sqrtl(d)), rt = 4 / pi / sqrtl(d);
    double g = ntk_erf(q12, q11, q22, &td);
    ck_assert_msg(fabsl(g - rg) < 1e-14 && fabsl((td - rt) / rt) < 1e-13,
                  "float64 q12 %a q11 %a q22 %a: %a %a vs %La %La", q12, q11, q22, g, td, rg, rt);
  }
#endif
  printf("range, float Erf at variances 1e4..1e37: nngp error %.3g, tdot relative error %.3g\n", worst_g, worst_t);
}
END_TEST

/* Variances past half the largest finite value, where 1 + 2q overflows:
 * the Erf maps gave nngp 0 and tdot 0 there (a finite kernel with nothing
 * of the Erf: `Dense(W_std=1.2e154) Erf Dense(b_std=0.1)` stored NNGP 0.01
 * for 1.01, exit 0). */
START_TEST(test_range_erf_top) {
#if LDBL_MANT_DIG >= 64 && LDBL_MAX_EXP > 2 * DBL_MAX_EXP
  unsigned seed = 41;
  const long double pi = 3.141592653589793238462643383279502884L;
  double worst = 0;
  for (int i = 0; i < 20000; i++) {
    double q11 = 0x1p1023 * (1 + 0.999 * lcg(&seed)), q22 = i % 3 ? 0x1p1023 * (1 + 0.999 * lcg(&seed)) : 1.0;
    double rho = 1.98 * lcg(&seed) - 0.99;
    double q12 = rho * sqrt(q11) * sqrt(q22), td;
    if (i % 10 == 0) q12 = q22 = q11;
    long double det = (long double)q11 * q22 - (long double)q12 * q12;
    long double d = 1 + 2 * (long double)q11 + 2 * (long double)q22 + 4 * (det > 0 ? det : 0);
    long double rg = 2 / pi * atan2l(2 * (long double)q12, sqrtl(d)), rt = 4 / pi / sqrtl(d);
    double g = ntk_erf(q12, q11, q22, &td);
    ck_assert_msg(fabsl(g - rg) < 1e-13 && fabsl((td - rt) / rt) < 1e-12, "float64 q12 %a q11 %a q22 %a: %a %a vs %La %La",
                  q12, q11, q22, g, td, rg, rt);
    worst = fmax(worst, (double)fabsl(g - rg));
    float f11 = 0x1p127f * (float)(1 + 0.999 * lcg(&seed)), f22 = i % 3 ? 0x1p127f * (float)(1 + 0.999 * lcg(&seed)) : 1.0f;
    float f12 = (float)(rho * sqrt((double)f11 * f22)), tf;
    if (i % 10 == 0) f12 = f22 = f11;
    double tfd, gfd = ntk_erf(f12, f11, f22, &tfd);
    float gf = ntk_erff(f12, f11, f22, &tf);
    ck_assert_msg(isfinite(gf) && fabs(gf - gfd) < 1e-6 && fabs(tf - tfd) / tfd < 1e-5,
                  "float32 q12 %a q11 %a q22 %a: nngp %a vs %a, tdot %a vs %a", f12, f11, f22, gf, gfd, tf, tfd);
  }
  printf("range, Erf at variances past half the largest value: float64 nngp error %.3g\n", worst);
#endif
}
END_TEST

/* Exactly collinear inputs: (N, 1) data with b_std = 0. Then every pair of
 * samples of the same sign has K(x, x') = sqrt(K(x, x) K(x', x')) exactly
 * (positive homogeneity), and opposite signs stay exactly opposite at the
 * first nonlinearity. The float inputs of a map carry their own rounding,
 * though: q12 against sqrt(q11 q22) is only known to a few ulps, and the
 * angle, whose slope in the correlation is infinite at +-1, turns that into
 * up to sqrt(13 u) (u the unit roundoff; largest seen sqrt(8 u)). Each Relu
 * layer's NTK factor (pi - theta)/(2 pi) then errs by up to sqrt(13 u)/pi
 * relative: 2.8e-4 in float32, 1.2e-8 in float64, per Relu layer, always
 * downwards, so they add up (docs/MATH.md, "Collinear inputs"). The NNGP
 * only moves by theta^2. */
START_TEST(test_collinear) {
  size_t n = 300, nrelu = 2;
  struct ntk_arch arch;
  ck_assert_int_eq(ntk_arch_parse("Dense(W_std=1.5) Relu Dense(W_std=1.5) Relu Dense", 1.0, 0.0, &arch), NTK_OK);
  float *xf = malloc(n * sizeof *xf);
  double *xd = malloc(n * sizeof *xd);
  unsigned seed = 31;
  for (size_t i = 0; i < n; i++) {
    xf[i] = (float)((lcg(&seed) * 2 - 1) * (0.1 + 3 * lcg(&seed)));
    xd[i] = xf[i];
  }
  struct ntk_dataset df = {n, 1, 0, 0, 0, 4, xf, 0, 0, 0}, dd = {n, 1, 0, 0, 0, 8, xd, 0, 0, 0};
  float *gf = malloc(n * n * 4), *tf = malloc(n * n * 4);
  double *gd = malloc(n * n * 8), *td = malloc(n * n * 8);
  compute_full(&arch, &df, n, gf, tf);
  compute_full(&arch, &dd, n, gd, td);
  const double bound_f = (double)nrelu * sqrt(13 * 0x1p-24) / NTK_PI;
  const double bound_d = (double)nrelu * sqrt(13 * 0x1p-53) / NTK_PI;
  double e_ideal = 0, e_t = 0, e_g = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < i; j++) {
      size_t k = i * n + j;
      double st = sqrt(td[i * n + i] * td[j * n + j]), sg = sqrt(gd[i * n + i] * gd[j * n + j]);
      if ((xd[i] > 0) == (xd[j] > 0)) e_ideal = fmax(e_ideal, fabs(td[k] - st) / st);
      e_t = fmax(e_t, fabs(tf[k] - td[k]) / st);
      e_g = fmax(e_g, fabs(gf[k] - gd[k]) / sg);
    }
  printf("collinear (N, 1) data, %zu Relu layers: float64 NTK off the exact value by %.3g (bound %.3g); "
         "float32 against float64: NTK %.3g (bound %.3g), NNGP %.3g\n",
         nrelu, e_ideal, bound_d, e_t, bound_f, e_g);
  ck_assert_msg(e_ideal < bound_d, "float64 NTK of collinear pairs off by %.3g >= %.3g", e_ideal, bound_d);
  ck_assert_msg(e_t < bound_f, "float32 NTK of collinear pairs off by %.3g >= %.3g", e_t, bound_f);
  ck_assert_msg(e_g < 1e-5, "float32 NNGP of collinear pairs off by %.3g", e_g);
  free(xf);
  free(xd);
  free(gf);
  free(tf);
  free(gd);
  free(td);
  ntk_arch_free(&arch);
}
END_TEST

/* The same entries, bit for bit, whatever the tile size (N > the Gram block). */
static void check_tile_independence(int elem) {
  size_t n = 1100, d = 37, es = (size_t)elem;
  struct ntk_dataset ds = {n, d, 0, 0, 0, elem, malloc(n * d * es), 0, 0, 0};
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

/* Equal rows (ntk_fc_twins): a sample given twice is the sample with
 * itself, its pair's NNGP and NTK the diagonal's bits, whatever the tile;
 * so is a row equal to it as values (-0.0 for 0.0: the same vector, whose
 * float32 NTK through two Relus came out 2.4e-4 off the diagonal's); a row
 * one ulp away is another sample. A negated row is the sample at an angle
 * of pi: through a bias-free Dense and a Relu its pair's NNGP and NTK are
 * 0 exactly (from the rows' product, the float32 NTK was 5e-5 of the
 * largest entry off neural-tangents'), and two negated copies are equal.
 * Data without equal rows have no twins at all. */
static void check_equal_rows(int elem) {
  size_t n = 1100, d = 37, es = (size_t)elem;
  struct ntk_dataset ds = {n, d, 0, 0, 0, elem, malloc(n * d * es), 0, 0, 0};
  unsigned seed = 43;
  for (size_t k = 0; k < n * d; k++) {
    double v = lcg(&seed) * 2 - 1;
    if (k % d == 5) v = 0.0; /* a zero to flip */
    if (elem == 4) ((float *)ds.x)[k] = (float)v;
    else ((double *)ds.x)[k] = v;
  }
  struct ntk_arch arch;
  ck_assert_int_eq(ntk_arch_parse("Dense(W_std=1.5, b_std=0.1) Relu Dense(W_std=1.5) Relu Dense", 1.0, 0.0, &arch),
                   NTK_OK);
  ntk_fc_t *fc;
  ck_assert_int_eq(ntk_fc_create(&arch, &ds, NULL, &fc), NTK_OK);
  ck_assert_msg(ntk_fc_twins(fc) == NULL, "distinct rows matched");
  ntk_fc_free(fc);
  char *x = ds.x;
  size_t row = d * es;
  for (size_t i = 0; i < 50; i++) memcpy(x + (1000 + i) * row, x + i * row, row); /* across blocks and tiles */
  memcpy(x + 700 * row, x + 3 * row, row);
  memcpy(x + 701 * row, x + 3 * row, row); /* a third copy */
  memcpy(x + 800 * row, x + 9 * row, row); /* one ulp away */
  if (elem == 4) ((float *)ds.x)[800 * d + 1] = nextafterf(((float *)ds.x)[800 * d + 1], 2.0f);
  else ((double *)ds.x)[800 * d + 1] = nextafter(((double *)ds.x)[800 * d + 1], 2.0);
  memcpy(x + 801 * row, x + 10 * row, row); /* -0.0 for 0.0 */
  if (elem == 4) ((float *)ds.x)[801 * d + 5] = -0.0f;
  else ((double *)ds.x)[801 * d + 5] = -0.0;
  /* negated: 802 and 803 of row 11 (its 0.0 negated as -0.0 in one, kept
   * 0.0 in the other), 804 of row 0 */
  for (size_t k = 0; k < d; k++) {
    if (elem == 4) {
      float *f = ds.x;
      f[802 * d + k] = f[803 * d + k] = -f[11 * d + k];
      f[804 * d + k] = -f[k];
    } else {
      double *f = ds.x;
      f[802 * d + k] = f[803 * d + k] = -f[11 * d + k];
      f[804 * d + k] = -f[k];
    }
  }
  if (elem == 4) ((float *)ds.x)[803 * d + 5] = 0.0f;
  else ((double *)ds.x)[803 * d + 5] = 0.0;
  ck_assert_int_eq(ntk_fc_create(&arch, &ds, NULL, &fc), NTK_OK);
  const size_t *tw = ntk_fc_twins(fc);
  ck_assert(tw != NULL);
  for (size_t i = 0; i < n; i++) {
    size_t want = i >= 1000 && i < 1050 ? i - 1000
                  : i == 700 || i == 701 ? 3
                  : i == 801             ? 10
                  : i == 802 || i == 803 ? 11 | NTK_TWIN_NEGATED
                  : i == 804             ? NTK_TWIN_NEGATED
                                         : i;
    ck_assert_msg(tw[i] == want, "sample %zu: twin %zu, not %zu", i, tw[i], want);
  }
  ntk_fc_free(fc);
  void *g0 = malloc(n * n * es), *t0 = malloc(n * n * es), *g1 = malloc(n * n * es), *t1 = malloc(n * n * es);
  compute_full(&arch, &ds, 512, g0, t0);
  size_t pairs[][2] = {{1000, 0}, {1049, 49}, {1020, 20}, {700, 3}, {701, 3}, {701, 700}, {801, 10}, {803, 802}};
  for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++) {
    size_t i = pairs[k][0], j = pairs[k][1], at = (i * n + j) * es, ii = (i * n + i) * es, jj = (j * n + j) * es;
    ck_assert_msg(!memcmp((char *)g0 + at, (char *)g0 + ii, es) && !memcmp((char *)t0 + at, (char *)t0 + ii, es) &&
                      !memcmp((char *)t0 + at, (char *)t0 + jj, es),
                  "equal samples %zu, %zu: not the diagonal's bits", i, j);
  }
  /* a sample's two negated copies: one pair with it, bit for bit */
  ck_assert(!memcmp((char *)g0 + (802 * n + 11) * es, (char *)g0 + (803 * n + 11) * es, es) &&
            !memcmp((char *)t0 + (802 * n + 11) * es, (char *)t0 + (803 * n + 11) * es, es));
  ck_assert(!memcmp((char *)g0 + (1000 * n + 804) * es, (char *)g0 + (804 * n + 0) * es, es) &&
            !memcmp((char *)t0 + (1000 * n + 804) * es, (char *)t0 + (804 * n + 0) * es, es));
  compute_full(&arch, &ds, 77, g1, t1);
  ck_assert_msg(!memcmp(g0, g1, n * n * es) && !memcmp(t0, t1, n * n * es), "tile 77 differs from tile 512");
  /* at an angle of pi, through a bias-free Dense and a Relu: 0 to within
   * the map's rounding at pi (from the rows' product, ~1e-4 of the
   * diagonal's NTK in float32) */
  struct ntk_arch bare;
  ck_assert_int_eq(ntk_arch_parse("Dense(W_std=1.5) Relu Dense(W_std=1.5)", 1.0, 0.0, &bare), NTK_OK);
  compute_full(&bare, &ds, 77, g1, t1);
  size_t neg[][2] = {{802, 11}, {803, 11}, {804, 0}, {1000, 804}};
  for (size_t k = 0; k < sizeof neg / sizeof *neg; k++) {
    size_t at = neg[k][0] * n + neg[k][1];
    double gv = elem == 4 ? ((float *)g1)[at] : ((double *)g1)[at];
    double tv = elem == 4 ? ((float *)t1)[at] : ((double *)t1)[at];
    size_t ii = neg[k][0] * (n + 1);
    double tii = elem == 4 ? ((float *)t1)[ii] : ((double *)t1)[ii], eps = elem == 4 ? 1e-7 : 1e-15;
    ck_assert_msg(fabs(gv) <= eps * tii && fabs(tv) <= eps * tii, "negated samples %zu, %zu: NNGP %g, NTK %g, not 0",
                  neg[k][0], neg[k][1], gv, tv);
  }
  ntk_arch_free(&bare);
  free(g0);
  free(t0);
  free(g1);
  free(t1);
  free(ds.x);
  ntk_arch_free(&arch);
}

START_TEST(test_equal_rows_f32) { check_equal_rows(4); }
END_TEST
START_TEST(test_equal_rows_f64) { check_equal_rows(8); }
END_TEST

/* Identities between the maps that no single reference pins down. */
static double rel(double a, double b) { return a == b ? 0 : fabs(a - b) / fmax(fabs(a), fabs(b)); }

START_TEST(test_map_identities) {
  unsigned seed = 12345;
  double worst = 0;
  for (int it = 0; it < 2000; it++) {
    seed = seed * 1103515245u + 12345u;
    double q11 = 0.05 + (seed >> 8) % 1000 / 200.0;
    seed = seed * 1103515245u + 12345u;
    double q22 = 0.05 + (seed >> 8) % 1000 / 200.0;
    seed = seed * 1103515245u + 12345u;
    double q12 = ((double)((seed >> 8) % 2001) / 1000.0 - 1.0) * sqrt(q11 * q22) * 0.999;
    double g1, t1, g2, t2;
    /* RectifiedMonomial(1) is Relu */
    struct ntk_map rm = {.kind = NTK_MAP_RECTMONO, .degree = 1}, relu = {.kind = NTK_MAP_ABRELU, .a = 0, .b = 1};
    g1 = ntk_map(&rm, q12, q11, q22, 0, 0, &t1);
    g2 = ntk_map(&relu, q12, q11, q22, 0, 0, &t2);
    worst = fmax(worst, fmax(fabs(g1 - g2) / sqrt(q11 * q22), fabs(t1 - t2))); /* near theta = pi both vanish */
    /* Monomial(k) is Polynomial(e_k) */
    for (int k = 0; k <= 5; k++) {
      struct ntk_map mo = {.kind = NTK_MAP_MONOMIAL, .degree = k}, po = {.kind = NTK_MAP_POLYNOMIAL, .degree = k + 1};
      po.coef[k] = 1.0;
      g1 = ntk_map(&mo, q12, q11, q22, 0, 0, &t1);
      g2 = ntk_map(&po, q12, q11, q22, 0, 0, &t2);
      ck_assert_msg(rel(g1, g2) < 1e-12 && rel(t1, t2) < 1e-12, "Monomial(%d) %g %g vs Polynomial %g %g", k, g1, t1,
                    g2, t2);
    }
    /* Rbf(gamma) is Sin(sqrt(2), sqrt(2 gamma), pi/4) */
    struct ntk_map rbf = {.kind = NTK_MAP_RBF, .a = 0.7}, sn = {.kind = NTK_MAP_SIN, .a = sqrt(2.0), .b = sqrt(1.4), .c = NTK_PI_4};
    g1 = ntk_map(&rbf, q12, q11, q22, 0, 0, &t1);
    g2 = ntk_map(&sn, q12, q11, q22, 0, 0, &t2);
    ck_assert_msg(fabs(g1 - g2) < 1e-13 && fabs(t1 - t2) < 1e-13, "Rbf %g %g vs Sin %g %g", g1, t1, g2, t2);
    /* the float dispatcher of a double-computed map: the double result, rounded */
    float tf;
    float gf = ntk_mapf(&sn, (float)q12, (float)q11, (float)q22, 0, 0, &tf);
    double gd = ntk_map(&sn, (float)q12, (float)q11, (float)q22, 0, 0, &t2);
    ck_assert(gf == (float)gd && tf == (float)t2);
  }
  ck_assert_msg(worst < 1e-13, "RectifiedMonomial(1) vs Relu: %g", worst);
  /* RectifiedMonomial's variance: stax's diagonal formula (2n-1)!! q^n / 2, the
   * entries the neural-tangents references cannot give (NaN there) */
  for (int n = 0; n <= 5; n++)
    for (double q = 0.01; q < 100; q *= 1.7) {
      struct ntk_map rm = {.kind = NTK_MAP_RECTMONO, .degree = n};
      double td, df = 1, want = 0.5;
      for (int k = 2 * n - 1; k > 1; k -= 2) df *= k;
      for (int k = 0; k < n; k++) want *= q;
      want *= df;
      double got = ntk_map(&rm, q, q, q, 0, 0, &td);
      ck_assert_msg(rel(got, want) < 1e-14, "RectifiedMonomial(%d) at q = %g: %.17g vs %.17g", n, q, got, want);
    }
  /* Polynomial where a variance is 0 (an all-zero input, b_std = 0): finite, s_0(0) s_0(q22) + 0 */
  {
    struct ntk_map po = {.kind = NTK_MAP_POLYNOMIAL, .degree = 3, .coef = {0.3, 0.7, 0.4}};
    double td, g = ntk_map(&po, 0.0, 0.0, 1.7, 0, 0, &td);
    ck_assert_msg(g == 0.3 * (0.3 + 0.4 * 1.7) && td == 0.7 * 0.7 * 1.0 * 1.0, "Polynomial at q11 = 0: %g %g", g, td);
  }
  /* every map kind has a stax name (a kind no name reaches is dead code or a half-added map) */
  size_t count;
  const struct ntk_map_name *names = ntk_map_names(&count);
  for (int k = 0; k <= NTK_MAP_HERMITE; k++) {
    int found = 0;
    for (size_t i = 0; i < count; i++) found |= names[i].fixed.kind == (ntk_map_kind)k;
    ck_assert_msg(found, "map kind %d has no name in src/kernels/layers.c", k);
  }
}
END_TEST

/* Branch widths, where stax's kernel shapes carry them: a FanInSum of
 * different widths is refused (neural-tangents raises), as is a
 * FanInConcat of different known widths with a branch of unknown width
 * (its weight is unknown); unknown widths (the short forms) pass, and a
 * FanInConcat of different known widths is weighted (ref_fc.txt's
 * fc_residual_concat_* cases check the values). */
/* Sin and Gabor at small variances: stax's forms subtract two numbers near
 * 1 (s1 - s2, er - 1), which kept ~1e-16 / q12 of the kernel's digits (8 %
 * off at variances ~1e-14, 0 at 1e-16: success over a wrong number). The
 * references: Sin's exp(-b^2 s/2) (2 sinh(b^2 q12) + 2 exp(-b^2 q12) sin^2 c)
 * (a^2/2 of it), Gabor's kernel ~ q12 (1 + O(q)) near 0. */
START_TEST(test_small_variances) {
  struct ntk_map sins[] = {{.kind = NTK_MAP_SIN, .a = 1, .b = 1, .c = 0}, {.kind = NTK_MAP_SIN, .a = 1.1, .b = 0.5, .c = 0.2}};
  struct ntk_map gabor = {.kind = NTK_MAP_GABOR};
  for (int e = 2; e <= 300; e += 7) {
    double q11 = 1.3 * pow(10.0, -e), q22 = 0.7 * pow(10.0, -e), q12 = 0.4 * pow(10.0, -e), t;
    for (int k = 0; k < 2; k++) {
      const struct ntk_map *m = &sins[k];
      double b2 = m->b * m->b, sc = sin(m->c), s = q11 + q22;
      double want = m->a * m->a / 2 * exp(-b2 * s / 2) * (2 * sinh(b2 * q12) + 2 * exp(-b2 * q12) * sc * sc);
      double got = ntk_map(m, q12, q11, q22, 0, 0, &t);
      ck_assert_msg(rel(got, want) < 1e-14, "Sin(%g, %g, %g) at variances 1e-%d: %.17g, exact %.17g", m->a, m->b, m->c,
                    e, got, want);
    }
    double g = ntk_map(&gabor, q12, q11, q22, 0, 0, &t);
    ck_assert_msg(fabs(g / q12 - 1) < 1e-12 + 10 * q11, "Gabor at variances 1e-%d: %.17g, ~q12 = %.17g", e, g, q12);
  }
}
END_TEST

/* Sign, Gaussian and Gelu took q11 q22 - q12^2 (or (1 + c q11)(1 + c q22)
 * - c^2 q12^2) as a difference of raw products. Sign is scale-invariant, but
 * its product left double's range near input variances 1e+-154 and came back
 * 0.998 wrong (1e-150, 1e+150) or 5e-4 wrong (1e-80: a subnormal product),
 * exit 0. Gaussian's and Gelu's products cancelled: the diagonal of
 * Gaussian(1, -1) is 1/sqrt(1 + 4q) exactly, but came 3.5e-5 off at
 * q ~ 1.7e12 and 2.3e-3 at 1.7e14 (exit 0); Gelu's d2 = 1 + 2q lost all its
 * digits past q ~ 1e16 (inf: refused, a value ~q/4 in range). */
/* Sin and Cos at variances past half the largest value (q11 + q22
 * overflowed: nngp and tdot 0 for E[sin^2] = 1/2), and Gaussian's tdot
 * past ~1e205 (det^3 overflowed: tdot 0, the NTK losing the layer's term). */
START_TEST(test_range_sin_gaussian_top) {
  struct ntk_map sn = {.kind = NTK_MAP_SIN, .a = 1, .b = 1, .c = 0}, gauss = {.kind = NTK_MAP_GAUSSIAN, .a = 1, .b = -1};
  struct ntk_map cs = {.kind = NTK_MAP_SIN, .a = 1, .b = 1, .c = NTK_PI_2};
  double t;
  for (double q = 1e300; q < 1.7e308; q *= 1.5) {
    double g = ntk_map(&sn, q, q, q, 0, 0, &t);
    ck_assert_msg(fabs(g - 0.5) < 1e-15 && fabs(t - 0.5) < 1e-15, "Sin at variance %g: %g, tdot %g (1/2, 1/2)", q, g, t);
    g = ntk_map(&cs, q, q, q, 0, 0, &t);
    ck_assert_msg(fabs(g - 0.5) < 1e-15 && fabs(t - 0.5) < 1e-15, "Cos at variance %g: %g, tdot %g (1/2, 1/2)", q, g, t);
  }
  for (double q = 1e100; q < 1e150; q *= 7.3) {
    /* b = -1, q12 = q11 = q22: nngp 1/sqrt(1 + 4q), tdot 4q / (1 + 4q)^(3/2) */
    double g = ntk_map(&gauss, q, q, q, 0, 0, &t), rg = 1 / sqrt(1 + 4 * q), rt = 4 * q * rg * rg * rg;
    ck_assert_msg(fabs(g - rg) < 1e-14 * rg && fabs(t - rt) < 1e-14 * rt, "Gaussian at variance %g: %g %g vs %g %g", q, g,
                  t, rg, rt);
  }
  for (double q = 1e210; q < 1e300; q *= 7.3) {
    double g = ntk_map(&gauss, q, q, q, 0, 0, &t), rg = 1 / sqrt(4 * q), rt = 1 / (2 * sqrt(q));
    ck_assert_msg(fabs(g - rg) < 1e-14 * rg && fabs(t - rt) < 1e-14 * rt, "Gaussian at variance %g: %g %g vs %g %g", q, g,
                  t, rg, rt);
    /* correlation -1/4: nngp 1/sqrt(4q + 4 q^2 15/16) ~ 1e-210 and less, tdot ~ 1e-420: 0 to the diagonal's scale */
    g = ntk_map(&gauss, -0.25 * q, q, q, 0, 0, &t);
    ck_assert_msg(g < 1e-20 * rg && fabs(t) < 1e-20 * rt, "Gaussian at variance %g, correlation -1/4: %g %g (~0)", q, g, t);
  }
}
END_TEST

START_TEST(test_range_sign_gaussian_gelu) {
  struct ntk_map sign = {.kind = NTK_MAP_SIGN}, gauss = {.kind = NTK_MAP_GAUSSIAN, .a = 1, .b = -1};
  struct ntk_map gelu = {.kind = NTK_MAP_GELU};
  double q11 = 1.3, q22 = 0.7, q12 = 0.4, t, t1;
  double ref = ntk_map(&sign, q12, q11, q22, 0, 0, &t);
  for (int e = -300; e <= 300; e += 10) {
    double s = pow(10.0, e), got = ntk_map(&sign, q12 * s, q11 * s, q22 * s, 0, 0, &t);
    ck_assert_msg(rel(got, ref) < 1e-14, "Sign at variances 1e%d: %.17g, at 1: %.17g", e, got, ref);
    double self = ntk_map(&sign, q11 * s, q11 * s, q11 * s, 0, 0, &t);
    ck_assert_msg(self == 1.0, "Sign of a sample with itself at 1e%d: %.17g", e, self);
  }
  /* RectifiedMonomial(n) is homogeneous of degree n, LayerNorm(eps = 0) of 0 */
  struct ntk_map rm[3] = {{.kind = NTK_MAP_RECTMONO, .degree = 0}, {.kind = NTK_MAP_RECTMONO, .degree = 1},
                          {.kind = NTK_MAP_RECTMONO, .degree = 2}};
  struct ntk_map ln = {.kind = NTK_MAP_LAYERNORM, .a = 0};
  double lref = ntk_map(&ln, q12, q11, q22, 0, 0, &t1), ltref = t1;
  for (int e = -300; e <= 300; e += 10) {
    double s = pow(10.0, e);
    for (int n = 0; n < 3; n++) {
      double r0 = ntk_map(&rm[n], q12, q11, q22, 0, 0, &t1), tr = t1;
      if (abs(e * n) > 290) continue;
      double got = ntk_map(&rm[n], q12 * s, q11 * s, q22 * s, 0, 0, &t);
      double sn = pow(s, n), st = n ? pow(s, n - 1) : 1;
      ck_assert_msg(rel(got, r0 * sn) < 1e-13 && rel(t, tr * st) < 1e-13,
                    "RectifiedMonomial(%d) at variances 1e%d: %.17g (%.17g), want %.17g (%.17g)", n, e, got, t, r0 * sn,
                    tr * st);
    }
    double got = ntk_map(&ln, q12 * s, q11 * s, q22 * s, 0, 0, &t);
    ck_assert_msg(rel(got, lref) < 1e-14 && rel(t * s, ltref) < 1e-14, "LayerNorm(eps = 0) at variances 1e%d: %.17g, at 1: %.17g",
                  e, got, lref);
  }
  for (int e = 0; e <= 150; e += 5) {
    double q = 1.7 * pow(10.0, e), want = 1.0 / sqrt(1.0 + 4.0 * q);
    double got = ntk_map(&gauss, q, q, q, 0, 0, &t), wt = 4.0 * q * want * want * want;
    ck_assert_msg(rel(got, want) < 1e-14 && rel(t, wt) < 1e-14, "Gaussian at q = %g: %.17g (%.17g), exact %.17g (%.17g)",
                  q, got, t, want, wt);
  }
  for (int e = 0; e <= 100; e += 5) {
    double q = 1.7 * pow(10.0, e), d = sqrt(1.0 + 2.0 * q), ang = atan2(q, d);
    /* NT's closed form at q12 = q11 = q22 = q with d2 = 1 + 2q exact */
    double want = ((q * q + q * q * (d * d)) / ((1 + q) * (1 + q) * d) + q * ang) / (2 * NTK_PI) + 0.25 * q;
    double got = ntk_map(&gelu, q, q, q, 0, 0, &t1);
    ck_assert_msg(isfinite(got) && rel(got, want) < 1e-13, "Gelu at q = %g: %.17g, exact %.17g", q, got, want);
    ck_assert_msg(isfinite(t1), "Gelu's NTK factor at q = %g: %g", q, t1);
  }
}
END_TEST

/* Gelu at pairs of any correlation, variances 1e-6 up to where the kernel
 * itself nears the top of the range, against neural-tangents' closed form
 * in long double (64-bit mantissa, range 1e4932: its products of q^3 and
 * q^4 are in range there). Those products overflowed in the map from
 * variances ~4e9 in float32 and ~1e77 in float64: a Gelu kernel of 1e10 was
 * refused as "exceeds float32" (docs/MATH.md, Range). Errors are relative
 * to the pair's scale sqrt(q11 q22) (NNGP) and to 1 (the NTK factor). */
static void gelu_reference(long double q12, long double q11, long double q22, long double *nngp, long double *tdot) {
  const long double pi = 3.141592653589793238462643383279502884L;
  long double p = q11 * q22, p1 = (1 + q11) * (1 + q22), d2 = 1 + q11 + q22 + (p - q12 * q12), d = sqrtl(d2);
  long double angle = atan2l(q12, d);
  *tdot = q12 / (2 * pi * d) * (1 / d2 + (2 + q11 + q22) / p1) + 0.25L + angle / (2 * pi);
  *nngp = ((q12 * q12 + p * d2) / (p1 * d) + q12 * angle) / (2 * pi) + 0.25L * q12;
}

START_TEST(test_range_gelu_pairs) {
  struct ntk_map gelu = {.kind = NTK_MAP_GELU};
  /* not correlation 1 of unequal variances: q12 rounded makes the Gram
   * determinant's rounding the angle's (docs/MATH.md, collinear inputs);
   * test_range_sign_gaussian_gelu takes a sample with itself */
  const double cs[] = {-0.95, -0.3, 0.0, 0.2, 0.7, 0.99};
  for (size_t k = 0; k < sizeof cs / sizeof *cs; k++)
    for (int e = -6; e <= 306; e += 4) {
      double q11 = 1.3 * pow(10.0, e), q22 = 0.6 * pow(10.0, e), q12 = cs[k] * sqrt(q11) * sqrt(q22), t;
      long double wn, wt;
      gelu_reference(q12, q11, q22, &wn, &wt);
      double got = ntk_map(&gelu, q12, q11, q22, 0, 0, &t), scale = sqrt(q11) * sqrt(q22);
      ck_assert_msg(fabs(got - (double)wn) <= 1e-13 * scale && fabs(t - (double)wt) <= 1e-13,
                    "Gelu at q11 = %g, correlation %g: %.17g (%.17g), closed form %.17Lg (%.17Lg)", q11, cs[k], got, t, wn,
                    wt);
      if (e > 38) continue;
      float tf, gf = ntk_mapf(&gelu, (float)q12, (float)q11, (float)q22, 0, 0, &tf);
      gelu_reference((float)q12, (float)q11, (float)q22, &wn, &wt);
      ck_assert_msg(isfinite(gf) && fabs(gf - (double)wn) <= 2e-6 * scale && fabs(tf - (double)wt) <= 2e-6,
                    "float Gelu at q11 = %g, correlation %g: %.9g (%.9g), closed form %.9Lg (%.9Lg)", q11, cs[k], gf, tf,
                    wn, wt);
    }
  /* at the top of the range, where q12 times the angle overflowed though
   * the value, about q12 / 2, does not */
  double t;
  long double wn, wt;
  gelu_reference(1.45e308, 1.5e308, 1.5e308, &wn, &wt);
  double got = ntk_map(&gelu, 1.45e308, 1.5e308, 1.5e308, 0, 0, &t);
  ck_assert_msg(isfinite(got) && fabs(got - (double)wn) <= 1e-13 * 1.5e308, "Gelu at 1.5e308: %.17g, closed form %.17Lg",
                got, wn);
  float tf, gf = ntk_mapf(&gelu, 2.9e38f, 3e38f, 3e38f, 0, 0, &tf);
  gelu_reference(2.9e38f, 3e38f, 3e38f, &wn, &wt);
  ck_assert_msg(isfinite(gf) && fabs(gf - (double)wn) <= 2e-6 * 3e38, "float Gelu at 3e38: %.9g, closed form %.9Lg", gf,
                wn);
}
END_TEST

/* A variance entering a scale-free layer (Sign, RectifiedMonomial(0),
 * LayerNorm) below the precision's normal range, or underflowed to 0 for a
 * sample that is not zeros, is refused at ntk_fc_create: the layer made
 * an O(1) value of its few bits (float32 at inputs x 1e-21: 5.7e-3 off,
 * exit 0). True zeros (a sample of zeros, w_std = 0 before) are kept, and
 * a scale-covariant map (Relu) is left to the output's checks. */
static ntk_status fc_scaled(const char *net, int elem, double scale, int zero_sample) {
  struct ntk_dataset ds = {5, 8, 0, 0, 0, elem, malloc(40 * (size_t)elem), 0, 0, 0};
  unsigned s = 7;
  for (size_t k = 0; k < 40; k++) {
    s = s * 1103515245u + 12345u;
    double v = ((double)((s >> 8) & 0xffff) / 32768.0 - 1.0) * scale;
    if (zero_sample && k < 8) v = 0;
    if (elem == 4) ((float *)ds.x)[k] = (float)v;
    else ((double *)ds.x)[k] = v;
  }
  struct ntk_arch arch;
  ck_assert_int_eq(ntk_arch_parse(net, 1.3, 0.0, &arch), NTK_OK);
  ntk_fc_t *fc = NULL;
  ntk_status st = ntk_fc_create(&arch, &ds, NULL, &fc);
  ntk_fc_free(fc);
  ntk_arch_free(&arch);
  free(ds.x);
  return st;
}

START_TEST(test_scale_free_underflow) {
  const char *free_nets[] = {"Dense Sign Dense", "Dense RectifiedMonomial(0) Dense", "Dense LayerNorm(eps=0) Dense",
                             "Dense LayerNorm Dense", "Dense Relu Dense Sign Dense"};
  for (size_t k = 0; k < 5; k++) {
    const char *net = free_nets[k];
    ck_assert_msg(fc_scaled(net, 4, 1, 0) == NTK_OK, "%s: %s", net, ntk_error_message());
    ck_assert_msg(fc_scaled(net, 8, 1e-150, 0) == NTK_OK, "%s: %s", net, ntk_error_message());
    ck_assert_int_eq(fc_scaled(net, 4, 1e-21, 0), NTK_ENONFINITE);
    ck_assert_msg(strstr(ntk_error_message(), "below float32's normal range"), "%s", ntk_error_message());
    ck_assert_int_eq(fc_scaled(net, 8, 1e-160, 0), NTK_ENONFINITE); /* subnormal */
    ck_assert_int_eq(fc_scaled(net, 8, 1e-170, 0), NTK_ENONFINITE); /* underflowed to 0 */
    ck_assert_msg(strstr(ntk_error_message(), "underflowed"), "%s", ntk_error_message());
    ck_assert_msg(fc_scaled(net, 4, 1, 1) == NTK_OK, "%s with a sample of zeros: %s", net, ntk_error_message());
  }
  /* w_std = 0 before Sign: every variance 0, the network's own value. */
  ck_assert_msg(fc_scaled("Dense(W_std=0) Sign Dense", 8, 1, 0) == NTK_OK, "%s", ntk_error_message());
  /* Maps to 0 whatever the input: a variance of 0 after them is right. */
  const char *zero_nets[] = {"Dense Erf(b=0) Dense(b_std=0) Sign Dense", "Dense Sin(b=0) Dense(b_std=0) Sign Dense",
                             "Dense Polynomial([0, 0]) Dense(b_std=0) LayerNorm Dense",
                             "Dense(W_std=0, b_std=0) Sign Dense"};
  for (size_t k = 0; k < 4; k++)
    ck_assert_msg(fc_scaled(zero_nets[k], 8, 1, 0) == NTK_OK, "%s: %s", zero_nets[k], ntk_error_message());
  /* A constant (Erf's c, a bias alone) is not 0: its variance underflowed
   * to 0 is refused (the true Sign NNGP is 1, not the 0 it would give). */
  const char *const_nets[] = {"Dense Erf(a=0, c=1e-170) Dense(b_std=0) Sign Dense",
                              "Dense(W_std=0, b_std=1e-170) Sign Dense"};
  for (size_t k = 0; k < 2; k++) {
    ck_assert_int_eq(fc_scaled(const_nets[k], 8, 1, 0), NTK_ENONFINITE);
    ck_assert_msg(strstr(ntk_error_message(), "underflowed"), "%s", ntk_error_message());
  }
  /* A residual block is 0 only where every branch is: one vanishing branch
   * leaves the other's underflow to judge (it stored 0.01 for O(1), exit 0). */
  ck_assert_int_eq(fc_scaled("FanOut(2) parallel(Dense(W_std=0, b_std=0), Dense) FanInSum Sign Dense", 8, 1e-170, 0),
                   NTK_ENONFINITE);
  ck_assert_msg(fc_scaled("FanOut(2) parallel(Dense(W_std=0, b_std=0), Dense(W_std=0, b_std=0)) FanInSum Sign Dense",
                          8, 1, 0) == NTK_OK, "%s", ntk_error_message());
  ck_assert_msg(fc_scaled("FanOut(2) parallel(Dense(W_std=0, b_std=0), Dense) FanInProd Dense(b_std=0) Sign Dense", 8,
                          1, 0) == NTK_OK, "%s", ntk_error_message());
  /* Relu is taken from the angle c / sqrt(q q'): its input variances are
   * judged too. Its underflow was once left to reach the output, judged on
   * the diagonal, which a cross block (x1 against x2) does not have: a
   * sample there came back 164 % off with exit 0. A linear ABRelu (a = b)
   * has no angle: its tiny variance is its value. */
  ck_assert_int_eq(fc_scaled("Dense Relu Dense", 4, 1e-21, 0), NTK_ENONFINITE);
  ck_assert_msg(strstr(ntk_error_message(), "(Relu) is") && strstr(ntk_error_message(), "angle"), "%s",
                ntk_error_message());
  ck_assert_msg(fc_scaled("Dense ABRelu(2, 2) Dense", 4, 1e-21, 0) == NTK_OK, "%s", ntk_error_message());
}
END_TEST

START_TEST(test_branch_widths) {
  struct ntk_dataset ds = {4, 3, 0, 0, 0, 8, calloc(12, 8), 0, 0, 0};
  const char *bad[] = {"Dense(8) FanOut(2) parallel(serial(Relu, Dense(16)), Identity) FanInSum Dense",
                       "Dense(8) FanOut(3) parallel(Dense(4), Dense(8), Dense) FanInConcat Dense",
                       "FanOut(2) parallel(Dense(3), Dense(4)) FanInSum Dense",
                       "FanOut(3) parallel(Dense(2), Identity, Dense) FanInConcat Dense"};
  for (size_t k = 0; k < 4; k++) {
    struct ntk_arch arch;
    ck_assert_int_eq(ntk_arch_parse(bad[k], 1, 0, &arch), NTK_OK);
    ntk_fc_t *fc = NULL;
    ck_assert_int_eq(ntk_fc_create(&arch, &ds, NULL, &fc), NTK_ECONFIG);
    ck_assert_msg(strstr(ntk_error_message(), "its branches end at different widths"), "%s", ntk_error_message());
    ntk_arch_free(&arch);
  }
  const char *good[] = {"Dense FanOut(2) parallel(serial(Relu, Dense), Identity) FanInSum Dense",
                        "Dense(3) FanOut(2) parallel(Dense(3), Identity) FanInSum Dense",
                        "Dense(8) FanOut(2) parallel(Dense(8), Dense) FanInConcat Dense",
                        "Dense(8) FanOut(2) parallel(Dense(4), Dense(8)) FanInConcat Dense",
                        "FanOut(2) parallel(Dense(5), Identity) FanInConcat Dense"};
  for (size_t k = 0; k < 5; k++) {
    struct ntk_arch arch;
    ck_assert_int_eq(ntk_arch_parse(good[k], 1, 0, &arch), NTK_OK);
    ntk_fc_t *fc = NULL;
    ck_assert_msg(ntk_fc_create(&arch, &ds, NULL, &fc) == NTK_OK, "%s: %s", good[k], ntk_error_message());
    ntk_fc_free(fc);
    ntk_arch_free(&arch);
  }
  free(ds.x);
}
END_TEST

/* The GPU's FC kernel runs fc_entry.h's walk per entry (cuBLAS gives it
 * the input covariance): on the CPU's own input covariance (the tiles of
 * the network "Identity") it must give the CPU's tiles bit for bit, in
 * both precisions, for every layer kind, residual blocks (a weighted
 * FanInConcat included) and standard parameterisation. Diagonal tiles on
 * and below the diagonal: both engines mirror the rest (the maps are not
 * bitwise symmetric in q11 and q22). */
START_TEST(test_fc_entry_walk) {
  static const struct {
    const char *arch;
    int standard;
  } nets[] = {
      {"Dense(W_std=1.5, b_std=0.1) Relu Dense Erf Dense LeakyRelu(0.2) Dense Gelu Dense", 0},
      {"Dense LayerNorm Sin(1.1, 0.5, 0.2) Dense Rbf(0.7) Dense Sigmoid_like Dense Abs Dense", 0},
      {"Dense(16, W_std=1.5, b_std=0.1) FanOut(3) parallel(serial(Relu, Dense(32)), Identity, serial(Erf, "
       "Dense(8, W_std=0.8))) FanInConcat Dense(8) Relu Dense", 0},
      {"Dense(8) [FanOut(2) parallel(serial(Relu Dense(8, W_std=1.5)), Identity) FanInSum]*2 FanOut(2) "
       "parallel(FanOut(2) parallel(Dense(8), serial(Gelu Dense(8))) FanInSum, Identity) FanInSum Relu Dense", 0},
      {"Dense(64, W_std=1.5, b_std=0.1) Relu Dense(32, W_std=1.2, b_std=0.0) Erf Dense(16, b_std=None) Gelu Dense", 1},
      {"Dense(16, W_std=1.5, b_std=0.1) FanOut(2) parallel(serial(Relu, Dense(32, W_std=1.3)), Identity) "
       "FanInConcat Dense(8, W_std=1.2) Relu Dense", 1},
      /* FanInProd: products by the product rule, a nested one, non-Gaussian branches */
      {"Dense(8, W_std=1.2) FanOut(3) parallel(Identity, serial(Erf Dense(8, W_std=2.0)), FanOut(2) "
       "parallel(Dense(8, b_std=0.3), Identity) FanInProd) FanInProd Dense(4) Relu Dense", 0},
      {"Dense(8, W_std=1.5, b_std=0.1) FanOut(2) parallel(Relu, Erf) FanInProd Dense(8) FanOut(2) parallel(serial(Relu, "
       "Dense(8)), Identity) FanInProd Dense", 1},
      /* Dropout: a sample with itself scaled, in a block, twice, last */
      {"Dense(8, W_std=1.5, b_std=0.1) Relu Dense Dropout(0.7) Dense FanOut(2) parallel(serial(Erf, Dense, Dropout(0.4)), "
       "Identity) FanInProd Dense Dropout(0.9)", 0},
      {"Dense(W_std=1.5, b_std=0.1) Gabor Dense(W_std=2, b_std=0.5) Gabor Dense", 0}, /* exp(-x^2) sin x */
  };
  for (int elem = 4; elem <= 8; elem += 4)
    for (size_t a = 0; a < sizeof nets / sizeof *nets; a++) {
      size_t n = 23, d = 7, es = (size_t)elem;
      struct ntk_dataset ds = {n, d, 0, 0, 0, elem, malloc(n * d * es), 0, 0, 0};
      for (size_t k = 0; k < n * d; k++) {
        double v = sin(0.37 * (double)k + 0.1 * (double)a) * 1.7;
        if (elem == 4) ((float *)ds.x)[k] = (float)v;
        else ((double *)ds.x)[k] = v;
      }
      struct ntk_arch arch, id;
      ck_assert_msg(ntk_arch_parse_param(nets[a].arch, 1.3, 0.05, nets[a].standard, &arch) == NTK_OK, "%s",
                    ntk_error_message());
      ck_assert_int_eq(ntk_arch_parse("Identity", 1, 0, &id), NTK_OK);
      ntk_fc_t *fc, *fid;
      ck_assert_msg(ntk_fc_create(&arch, &ds, NULL, &fc) == NTK_OK, "%s", ntk_error_message());
      ck_assert_int_eq(ntk_fc_create(&id, &ds, NULL, &fid), NTK_OK);
      struct ntk_fc_entry_layer *L = calloc(arch.n, sizeof *L);
      ck_assert_msg(ntk_fc_entry_layers(fc, L, arch.n) == NTK_OK, "%s", ntk_error_message());
      struct ntk_tiling tg;
      ntk_tiling_init(&tg, n, 10);
      char *g = malloc(100 * es), *t = malloc(100 * es), *g0 = malloc(100 * es);
      size_t differ = 0;
      for (uint64_t k = 0; k < tg.ntiles; k++) {
        struct ntk_tile tl = ntk_tiling_tile(&tg, k);
        ck_assert_int_eq(ntk_fc_tile(fc, &tl, g, t), NTK_OK);
        ck_assert_int_eq(ntk_fc_tile(fid, &tl, g0, NULL), NTK_OK);
        for (size_t i = 0; i < tl.rows; i++)
          for (size_t j = 0; j < (tl.bi == tl.bj ? i + 1 : tl.cols); j++) { /* a diagonal tile mirrors j > i */
            size_t at = i * tl.cols + j;
            int self = tl.bi == tl.bj && i == j;
            if (elem == 4) {
              float gv = ((float *)g0)[at], tv = 0;
              ntk_fc_entry_f(L, arch.n, ntk_fc_variances(fc), n, tl.r0 + i, tl.c0 + j, self, &gv, &tv);
              differ += memcmp(&gv, (float *)g + at, 4) || memcmp(&tv, (float *)t + at, 4);
            } else {
              double gv = ((double *)g0)[at], tv = 0;
              ntk_fc_entry_d(L, arch.n, ntk_fc_variances(fc), n, tl.r0 + i, tl.c0 + j, self, &gv, &tv);
              differ += memcmp(&gv, (double *)g + at, 8) || memcmp(&tv, (double *)t + at, 8);
            }
          }
      }
      ck_assert_msg(!differ, "%s (float%d): %zu entries differ from the CPU's tiles", nets[a].arch, 8 * elem,
                    differ);
      free(g);
      free(t);
      free(g0);
      free(L);
      ntk_fc_free(fc);
      ntk_fc_free(fid);
      ntk_arch_free(&arch);
      ntk_arch_free(&id);
      free(ds.x);
    }
}
END_TEST

START_TEST(test_refuses_cnn) {
  struct ntk_arch arch;
  ck_assert_int_eq(ntk_arch_parse("Conv(3) Relu GlobalAvgPool Dense", 1, 0, &arch), NTK_OK);
  struct ntk_dataset ds = {1, 1, 0, 0, 0, 8, NULL, 0, 0, 0};
  ntk_fc_t *fc;
  ck_assert_int_eq(ntk_fc_create(&arch, &ds, NULL, &fc), NTK_ECONFIG);
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
  tcase_add_test(tc, test_range_homogeneous);
  tcase_add_test(tc, test_range_pow4_exact);
  tcase_add_test(tc, test_range_pair_with_itself);
  tcase_add_test(tc, test_range_abreluf_accuracy);
  tcase_add_test(tc, test_atan2_double);
  tcase_add_test(tc, test_range_abrelu_f64_bits);
  tcase_add_test(tc, test_range_erf);
  tcase_add_test(tc, test_range_erf_top);
  tcase_add_test(tc, test_range_sin_gaussian_top);
  tcase_add_test(tc, test_collinear);
  tcase_add_test(tc, test_fc_entry_walk);
  tcase_add_test(tc, test_reference_float64);
  tcase_add_test(tc, test_reference_float32);
  tcase_add_test(tc, test_numerical_reference_float64);
  tcase_add_test(tc, test_numerical_reference_float32);
  tcase_add_test(tc, test_numerical_map_reference);
  tcase_add_test(tc, test_numerical_methods_agree);
  tcase_add_test(tc, test_ref_max_err_nan);
  tcase_add_test(tc, test_tile_independence_f32);
  tcase_add_test(tc, test_tile_independence_f64);
  tcase_add_test(tc, test_equal_rows_f32);
  tcase_add_test(tc, test_equal_rows_f64);
  tcase_add_test(tc, test_refuses_cnn);
  tcase_add_test(tc, test_map_identities);
  tcase_add_test(tc, test_branch_widths);
  tcase_add_test(tc, test_small_variances);
  tcase_add_test(tc, test_range_sign_gaussian_gelu);
  tcase_add_test(tc, test_range_gelu_pairs);
  tcase_add_test(tc, test_scale_free_underflow);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
