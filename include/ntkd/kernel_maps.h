/* Pointwise kernel maps of the nonlinearities, in neural-tangents'
 * conventions (docs/MATH.md). Pure static inline functions on scalars, so
 * that the CPU loops vectorise them and a CUDA backend can share them.
 *
 * Each map takes the pre-activation covariance q12 of a pair and the two
 * variances q11, q22, and returns the post-activation covariance and the
 * factor tdot = E[f'(u) f'(v)] by which the NTK is multiplied. */
#ifndef NTKD_KERNEL_MAPS_H
#define NTKD_KERNEL_MAPS_H

#include <math.h>

#ifdef __CUDACC__
#define NTK_HD __host__ __device__
#else
#define NTK_HD
#endif

/* Hot CPU loops are compiled for AVX-512, AVX2 and baseline x86-64 and the
 * best is picked at run time. With -ffp-contract=off all three round alike. */
#if defined(__x86_64__) && !defined(__CUDACC__) && !defined(__SANITIZE_ADDRESS__)
#define NTK_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define NTK_CLONES
#endif

#define NTK_PI 3.14159265358979323846
#define NTK_PI_2 1.57079632679489661923
#define NTK_PI_4 0.78539816339744830962

/* atan2 for float in ~2e-8 relative error, branch-free so loops vectorise.
 * Reduction to |u| <= tan(pi/8) and an odd polynomial u + u^3 P(u^2) whose
 * coefficients scripts/fit_maps.py fitted (weighted least squares). */
static inline NTK_HD float ntk_atan2f(float y, float x) {
  float ay = fabsf(y), ax = fabsf(x);
  int swap = ay > ax;
  float mx = swap ? ay : ax, mn = swap ? ax : ay;
  /* t = mn/mx; above tan(pi/8) use atan(t) = pi/4 + atan((t-1)/(t+1)),
   * i.e. (mn-mx)/(mn+mx): one division either way (division and square
   * root bound this map on AVX-512). */
  int big = mn > 0.41421356f * mx;
  float num = big ? mn - mx : mn, den = big ? mn + mx : mx;
  float u = num / (den > 0.0f ? den : 1.0f);
  float z = u * u;
  float p = ((0.080686243f * z - 0.13882883f) * z + 0.19978272f) * z - 0.33332967f;
  float r = u + u * z * p;
  r = big ? r + (float)NTK_PI_4 : r;
  r = swap ? (float)NTK_PI_2 - r : r;
  r = x < 0.0f ? (float)NTK_PI - r : r;
  return y < 0.0f ? -r : r;
}

/* 1/sqrt(q), 0 for q <= 0: the per-position (or per-sample) factor the
 * float ReLU map takes, computed once per variance instead of once per
 * entry. Correctly rounded on every target (and in CUDA without
 * --use_fast_math), so a precomputed value and one computed on the spot are
 * the same bits. */
static inline NTK_HD float ntk_rsqrtf(float q) { return q > 0.0f ? 1.0f / sqrtf(q) : 0.0f; }
static inline NTK_HD double ntk_rsqrt(double q) { return q > 0.0 ? 1.0 / sqrt(q) : 0.0; }

/* asin(m) for 0 <= m <= sin(pi/8) in ~6e-8 relative error:
 * m + m^3 P(m^2), coefficients from scripts/fit_maps.py. */
static inline NTK_HD float ntk_asin_smallf(float m) {
  float z = m * m;
  float p = ((0.039999873f * z + 0.043400775f) * z + 0.075060871f) * z + 0.16666576f;
  return m + m * z * p;
}

/* ABRelu(a, b): f(x) = a*min(x, 0) + b*max(x, 0). Relu = (0, 1),
 * LeakyRelu(s) = (s, 1), Abs = (-1, 1). The angle of a pair with zero
 * variance and zero covariance is pi/2, as in neural-tangents.
 *
 * The float map takes r11 = ntk_rsqrtf(q11) and r22 = ntk_rsqrtf(q22) from
 * its caller and has no division: (s, c) = (sqrt(det), q12) / sqrt(q11 q22)
 * is a unit vector, its angle the asin of the smaller of |s|, |c| (past
 * pi/8 rotated back by pi/8 first). det = q11 q22 - q12^2 keeps a pair at
 * q12 = q11 = q22 exactly at angle 0. A division and atan2's reduction cost
 * ~45% of the map on AVX-512 (docs/PERFORMANCE.md). The double map keeps
 * libm's atan2 and ignores r11, r22. */
static inline NTK_HD double ntk_abrelu_r(double a, double b, double q12, double q11, double q22, double r11,
                                         double r22, double *tdot) {
  (void)r11;
  (void)r22;
  double det = q11 * q22 - q12 * q12;
  double sq = sqrt(det > 0.0 ? det : 0.0);
  double theta = (sq == 0.0 && q12 == 0.0) ? NTK_PI_2 : atan2(sq, q12);
  double factor = (a - b) * (a - b) / (2.0 * NTK_PI);
  double dot_sigma = (a * a + b * b) / 2.0 - factor * theta;
  *tdot = dot_sigma;
  return factor * sq + dot_sigma * q12;
}

static inline NTK_HD double ntk_abrelu(double a, double b, double q12, double q11, double q22, double *tdot) {
  return ntk_abrelu_r(a, b, q12, q11, q22, 0.0, 0.0, tdot);
}

static inline NTK_HD float ntk_abreluf_r(float a, float b, float q12, float q11, float q22, float r11, float r22,
                                         float *tdot) {
  float det = q11 * q22 - q12 * q12;
  float sq = sqrtf(det > 0.0f ? det : 0.0f);
  float rs = r11 * r22;
  rs = rs < 3.0e38f ? rs : 3.0e38f; /* two tiny variances: stay finite */
  float s = sq * rs, c = q12 * rs, ac = fabsf(c);
  int s_big = s >= ac; /* also for s = c = 0: the angle pi/2 */
  float mx = s_big ? s : ac, mn = s_big ? ac : s;
  /* phi = atan2(mn, mx) in [0, pi/4]; past pi/8 rotate by -pi/8. */
  int far = mn > 0.41421356f * mx; /* tan(pi/8) */
  float m = far ? mn * 0.92387953f - mx * 0.38268343f : mn;
  float phi = ntk_asin_smallf(m);
  phi = far ? phi + (float)(NTK_PI / 8) : phi;
  float theta = s_big ? (float)NTK_PI_2 - phi : phi;
  theta = c < 0.0f ? (float)NTK_PI - theta : theta;
  float factor = (a - b) * (a - b) * (float)(1.0 / (2.0 * NTK_PI));
  float dot_sigma = (a * a + b * b) * 0.5f - factor * theta;
  *tdot = dot_sigma;
  return factor * sq + dot_sigma * q12;
}

static inline NTK_HD float ntk_abreluf(float a, float b, float q12, float q11, float q22, float *tdot) {
  return ntk_abreluf_r(a, b, q12, q11, q22, ntk_rsqrtf(q11), ntk_rsqrtf(q22), tdot);
}

/* Erf: f(x) = erf(x). */
static inline NTK_HD double ntk_erf(double q12, double q11, double q22, double *tdot) {
  double prod = (1.0 + 2.0 * q11) * (1.0 + 2.0 * q22);
  double d = prod - 4.0 * q12 * q12;
  double r = sqrt(d > 0.0 ? d : 0.0);
  *tdot = (4.0 / NTK_PI) / r;
  return (2.0 / NTK_PI) * atan2(2.0 * q12, r);
}

static inline NTK_HD float ntk_erff(float q12, float q11, float q22, float *tdot) {
  float prod = (1.0f + 2.0f * q11) * (1.0f + 2.0f * q22);
  float d = prod - 4.0f * q12 * q12;
  float r = sqrtf(d > 0.0f ? d : 0.0f);
  *tdot = (float)(4.0 / NTK_PI) / r;
  return (float)(2.0 / NTK_PI) * ntk_atan2f(2.0f * q12, r);
}

#endif
