/* Pointwise kernel maps of the nonlinearities, in neural-tangents'
 * conventions (docs/MATH.md). Pure static inline functions on scalars, so
 * that the CPU loops vectorise them and a CUDA backend can share them.
 *
 * Each map takes the pre-activation covariance q12 of a pair and the two
 * variances q11, q22, and returns the post-activation covariance and the
 * factor tdot = E[f'(u) f'(v)] by which the NTK is multiplied.
 *
 * A nonlinearity is a struct ntk_map (its kind and parameters); ntk_mapf
 * and ntk_map at the end of this file dispatch on the kind, one switch per
 * precision without a default, so a kind added to the enum and not to a
 * dispatcher fails the build (-Werror=switch). Every engine, CPU and GPU,
 * reaches the maps through them or through src/kernels/map_rows.c, the
 * vectorised loop for every map. */
#ifndef NTKD_KERNEL_MAPS_H
#define NTKD_KERNEL_MAPS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/defs.h"

#ifdef __CUDACC__
#define NTK_HD __host__ __device__
#else
#define NTK_HD
#endif

/* The maps on the hot paths and their helpers are always inlined on the
 * CPU. The clones of the loops (NTK_CLONES: arch=x86-64-v4, -v3) have
 * another `arch` than the functions they call, and GCC then inlines only
 * as its size limits allow: one more loop calling the Erf map left it out
 * of line, the loop scalar, and an Erf FC job 22x slower (issue 15). */
#if defined(__GNUC__) && !defined(__CUDACC__)
#define NTK_INLINE inline __attribute__((always_inline))
#else
#define NTK_INLINE inline
#endif

/* Hot CPU loops are compiled for x86-64-v4, -v3 and baseline x86-64
 * (NTK_CLONES, src/base/defs.h). All three round alike: -ffp-contract=off
 * fuses nothing behind the code's back, and the fused multiply-adds the
 * maps do want are written out as fmaf/fma, which IEEE 754 rounds once
 * everywhere (a vfmadd instruction in the v3 and v4 clones, libm's
 * correctly rounded fma in the baseline one, which runs only on a CPU
 * without FMA). tests/test_clones.c compiles the map loops for each
 * target and compares them bit for bit. */

/* The nonlinearities with a closed-form kernel (src/kernels/layers.c names them
 * and their parameters as stax does). */
typedef enum ntk_map_kind {
  NTK_MAP_ABRELU, /* a*min(x, 0) + b*max(x, 0): Relu, LeakyRelu, Abs, ABRelu */
  NTK_MAP_ERF,    /* a*erf(b*x) + c: Erf, Sigmoid_like */
  NTK_MAP_GELU,   /* x * Phi(x), Phi the standard normal CDF */
  NTK_MAP_SIN,    /* a*sin(b*x + c): Sin, Cos (c + pi/2) */
  NTK_MAP_RBF,    /* sqrt(2) sin(sqrt(2 gamma) x + pi/4), gamma in a */
  NTK_MAP_EXP,    /* a*exp(b*x) */
  NTK_MAP_EXPNORM,/* ExpNormalized: gamma in a, shift in b, do_clip in flag */
  NTK_MAP_GAUSSIAN, /* a*exp(b*x^2) */
  NTK_MAP_SIGN,   /* sign(x) */
  NTK_MAP_MONOMIAL, /* x^degree, degree 0..5 */
  NTK_MAP_RECTMONO, /* (x >= 0) x^degree */
  NTK_MAP_POLYNOMIAL, /* coef[0] + coef[1] x + ... (degree coefficients) */
  NTK_MAP_HERMITE,  /* the normalised probabilists' Hermite polynomial of that degree */
  NTK_MAP_GABOR,    /* exp(-x^2) sin(x) */
  NTK_MAP_LAYERNORM, /* LayerNorm over channels (a layer of its own, not a nonlinearity): eps in a */
  NTK_MAP_NUMERICAL, /* ElementwiseNumerical: no closed form; fn in degree, alpha in a (src/kernels/numerical.h) */
} ntk_map_kind;

#define NTK_MAP_MAXCOEF 32 /* Polynomial coefficients (degree 31: its factorials, past 22!, rounded to 1e-16) */

/* A nonlinearity as plain data (the GPU copies it as it is). */
struct ntk_map {
  ntk_map_kind kind;
  int degree;                   /* Monomial, RectifiedMonomial, Hermite; Polynomial: coefficients */
  int flag;                     /* ExpNormalized's do_clip */
  double a, b, c;               /* the stax parameters, in stax's order (docs/JOB-FILE.md) */
  double coef[NTK_MAP_MAXCOEF]; /* Polynomial */
};

#define NTK_PI 3.14159265358979323846
#define NTK_PI_2 1.57079632679489661923
#define NTK_PI_4 0.78539816339744830962

/* Bit casts for the power-of-two scales below (memcpy compiles to a plain
 * register move and keeps the loops vectorised; CUDA has intrinsics). */
static NTK_INLINE NTK_HD uint32_t ntk_f2u(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
#endif
}
static NTK_INLINE NTK_HD float ntk_u2f(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
#endif
}
static NTK_INLINE NTK_HD uint64_t ntk_d2u(double x) {
#ifdef __CUDA_ARCH__
  return (uint64_t)__double_as_longlong(x);
#else
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
#endif
}
static NTK_INLINE NTK_HD double ntk_u2d(uint64_t u) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double((long long)u);
#else
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
#endif
}

/* 2^floor(e/2), e the exponent of q >= 0 (from the biased field E:
 * ((E + bias) >> 1) << mantissa bits), so that q / (that)^2 is in [1, 4)
 * for a normal q.
 * A zero or subnormal q gives 2^-512 (float: 2^-64), inf and NaN 2^512
 * (2^64): always normal, and so is its reciprocal, ntk_pow2_inv. */
static NTK_INLINE NTK_HD double ntk_pow2_half_exp(double q) {
  return ntk_u2d((((ntk_d2u(q) & 0x7ff0000000000000ull) + (1023ull << 52)) >> 1) & 0x7ff0000000000000ull);
}
static NTK_INLINE NTK_HD float ntk_pow2_half_expf(float q) {
  return ntk_u2f((((ntk_f2u(q) & 0x7f800000u) + (127u << 23)) >> 1) & 0x7f800000u);
}
/* 1/p for a normal power of two p: exact. */
static NTK_INLINE NTK_HD double ntk_pow2_inv(double p) { return ntk_u2d((2046ull << 52) - ntk_d2u(p)); }
static NTK_INLINE NTK_HD float ntk_pow2_invf(float p) { return ntk_u2f((254u << 23) - ntk_f2u(p)); }

/* c ? a : b, as bit operations: the same value. Written as ?: on floats,
 * a select whose result feeds a polynomial (or a division) becomes, in
 * the AVX-512 loops, two masked copies of that polynomial, one per
 * outcome; this keeps one (the batched ReLU loop: 66 instructions per 16
 * lanes instead of 72). Selects after the polynomial stay ?: (one masked
 * instruction each). */
static NTK_INLINE NTK_HD float ntk_selectf(int c, float a, float b) {
  uint32_t m = 0u - (uint32_t)(c != 0);
  return ntk_u2f((ntk_f2u(a) & m) | (ntk_f2u(b) & ~m));
}
static NTK_INLINE NTK_HD double ntk_select(int c, double a, double b) {
  uint64_t m = 0ull - (uint64_t)(c != 0);
  return ntk_u2d((ntk_d2u(a) & m) | (ntk_d2u(b) & ~m));
}

/* atan2 for float in ~2e-8 relative error, branch-free so loops vectorise.
 * Reduction to |u| <= tan(pi/8) and an odd polynomial u + u^3 P(u^2) whose
 * coefficients scripts/fit_maps.py fitted (weighted least squares). */
static NTK_INLINE NTK_HD float ntk_atan2f(float y, float x) {
  float ay = fabsf(y), ax = fabsf(x);
  int swap = ay > ax;
  float mx = swap ? ay : ax, mn = swap ? ax : ay;
  /* t = mn/mx; above tan(pi/8) use atan(t) = pi/4 + atan((t-1)/(t+1)),
   * i.e. (mn-mx)/(mn+mx): one division either way (division and square
   * root bound this map on AVX-512). */
  int big = mn > 0.41421356f * mx;
  float num = ntk_selectf(big, mn - mx, mn), den = ntk_selectf(big, mn + mx, mx);
  float u = num / (den == 0.0f ? 1.0f : den); /* a NaN stays NaN */
  float z = u * u;
  float p = fmaf(fmaf(fmaf(0.080686243f, z, -0.13882883f), z, 0.19978272f), z, -0.33332967f);
  float r = fmaf(u * z, p, u);
  r = big ? r + (float)NTK_PI_4 : r;
  r = swap ? (float)NTK_PI_2 - r : r;
  r = x < 0.0f ? (float)NTK_PI - r : r;
  return y < 0.0f ? -r : r;
}

/* atan2 for double within 2.5 ulp (glibc's: 0.5), branch-free so that the
 * double maps' loops vectorise: libm's atan2 kept them scalar, 8-16x
 * slower per layer than the float maps (docs/PERFORMANCE.md, 2026-12-03).
 * The reduction of ntk_atan2f, and u + u^3 P(u^2) with P of degree 10 on
 * |u| <= tan(pi/8), coefficients from scripts/fit_maps.py (a Chebyshev fit
 * in 50 digits: 5e-18 relative, below the double rounding). It uses only
 * the ratio of |y| and |x|, so scaling both by one power of two leaves
 * its bits unchanged (the double ABRelu and Erf maps rely on it). */
static NTK_INLINE NTK_HD double ntk_atan2(double y, double x) {
  double ay = fabs(y), ax = fabs(x);
  int swap = ay > ax;
  double mx = swap ? ay : ax, mn = swap ? ax : ay;
  int big = mn > 0.41421356237309503 * mx;
  double num = ntk_select(big, mn - mx, mn), den = ntk_select(big, mn + mx, mx);
  double u = num / (den == 0.0 ? 1.0 : den), z = u * u; /* a NaN stays NaN */
  double p = fma(-0.01917688711906226, z, 0.039231658295587189);
  p = fma(p, z, -0.050854497379402598);
  p = fma(p, z, 0.0585814891280221);
  p = fma(p, z, -0.066645114473819475);
  p = fma(p, z, 0.076921831908260865);
  p = fma(p, z, -0.090909045781239026);
  p = fma(p, z, 0.11111111015256361);
  p = fma(p, z, -0.14285714284666542);
  p = fma(p, z, 0.19999999999995521);
  p = fma(p, z, -0.33333333333333331);
  double r = fma(u * z, p, u);
  /* the constants' rounding errors added back (0x1.1a62633145c07p-55 = pi/4
   * - NTK_PI_4, and twice, four times that): near pi, where a pair's
   * ReLU kernel cancels, the angle is then as close as libm's */
  r = big ? NTK_PI_4 + (r + 0x1.1a62633145c07p-55) : r;
  r = swap ? (NTK_PI_2 - r) + 0x1.1a62633145c07p-54 : r;
  r = x < 0.0 ? (NTK_PI - r) + 0x1.1a62633145c07p-53 : r;
  return y < 0.0 ? -r : r;
}

/* 1/sqrt(q), 0 for q <= 0: the per-position (or per-sample) factor the
 * float ReLU map takes, computed once per variance instead of once per
 * entry. Correctly rounded on every target (and in CUDA without
 * --use_fast_math), so a precomputed value and one computed on the spot are
 * the same bits. */
static NTK_INLINE NTK_HD float ntk_rsqrtf(float q) { return q > 0.0f ? 1.0f / sqrtf(q) : 0.0f; }
static NTK_INLINE NTK_HD double ntk_rsqrt(double q) { return q > 0.0 ? 1.0 / sqrt(q) : 0.0; }

/* acos(x) / sqrt(1 - x^2) for 0 <= x <= 1 (pi/2 at 0, 1 at 1), a polynomial
 * of degree 9 within 7e-8 relative (2.0e-7 evaluated in float32),
 * coefficients from scripts/fit_maps.py: the angle of a unit vector
 * (s, x) is s times it, s >= 0. The function is analytic on [0, 1] (its
 * singularity is at x = -1), so one polynomial covers the whole range
 * with no reduction. */
static NTK_INLINE NTK_HD float ntk_acos_over_sinf(float x) {
  float p = fmaf(fmaf(fmaf(-0.0113574378f, x, 0.0687592328f), x, -0.193785369f), x, 0.350112408f);
  p = fmaf(fmaf(fmaf(p, x, -0.481647491f), x, 0.576778829f), x, -0.664930522f);
  return fmaf(fmaf(fmaf(p, x, 0.785270333f), x, -0.999996305f), x, 1.57079625f);
}

/* Range. The variances of a pair enter these maps as products (q11 q22,
 * q12^2, (1+2q11)(1+2q22)) that overflow or underflow long before the
 * results do: in float32 once variances pass ~1.8e19 or fall below
 * ~1e-19, in float64 near 1e154 / 1e-154. So no map forms such a product
 * of raw variances (docs/MATH.md, "Range"):
 * - the float ABRelu map works with variances normalised by the factors
 *   r = 1/sqrt(q) its caller passes (q r r ~ 1, q12 r11 r22 = cos(angle));
 * - the double ABRelu map and the Erf maps scale their inputs by exact
 *   powers of two s1, s2 (from exponent bits) to O(1) and scale the one
 *   result that needs it back, one power of two at a time (the double
 *   maps always, branch-free, so that their loops vectorise). A
 *   power-of-two scaling is exact unless a value goes subnormal or
 *   overflows, and correctly rounded sqrt and division and ntk_atan2 (a
 *   function of a ratio) commute with it: the double ABRelu map returns
 *   the bits of the unscaled formula wherever that one was in range.
 * All arithmetic is plain IEEE operations in a fixed order (no implicit
 * FMA under -ffp-contract=off / --fmad=false; the explicit fmaf calls of
 * the float maps round once on every CPU clone and, as fmaf/__fmaf_rn, on
 * the GPU), so every clone and the GPU agree to the bit. A difference of
 * products that must cancel exactly (q11 q22 - q12^2 of a sample with
 * itself) stays two roundings apart: fused, it would be a rounding error
 * instead of 0. */

/* ABRelu(a, b): f(x) = a*min(x, 0) + b*max(x, 0). Relu = (0, 1),
 * LeakyRelu(s) = (s, 1), Abs = (-1, 1). The angle of a pair with zero
 * variance and zero covariance is pi/2, as in neural-tangents.
 *
 * The float map takes r11 = ntk_rsqrtf(q11) and r22 = ntk_rsqrtf(q22) from
 * its caller and has no division: (s, c) = (sqrt(det), q12) / sqrt(q11 q22)
 * is a unit vector, its angle s acos(|c|)/sqrt(1 - c^2) (a polynomial,
 * ntk_acos_over_sinf), or pi minus that for c < 0: no reduction and no
 * select but c's sign. A division and atan2's reduction cost ~45% of the
 * map on AVX-512, an arcsine after a rotation by pi/8 (until 2026-12-05)
 * another 14% (docs/PERFORMANCE.md). The double map takes ntk_atan2 and
 * ignores r11, r22.
 *
 * In the float map u = q r r (1 to rounding, for any q > 0, subnormal
 * included) and c = q12 r11 r22, so det = u11 u22 - c^2 is the normalised
 * determinant: never out of range, and exactly 0 for a pair at
 * q12 = q11 = q22 (then u11 = u22 = c bit for bit), which keeps its angle
 * exactly 0. sqrt(q11 q22) comes back as (q11 r11)(q22 r22). A zero
 * variance has r = 0: u = c = 0, the angle pi/2. An infinite one (r = 0
 * too) gives NaN, never a finite value. The double map scales the
 * variances by powers of two to [1, 4) (ntk_abrelu_angle, zero variances
 * included): the bits of the product formula wherever q11 q22 and q12^2
 * are in range (tests/test_kernel.c), and right where they are not. */

/* Whether a product of two variances (q11 q22, (eps + q11)(eps + q22)) is
 * in [2^-1000, 2^1000], where the double maps form it as it is; outside,
 * they take it from variances scaled by powers of two. */
static NTK_INLINE NTK_HD int ntk_product_in_range(double p) { return p >= 0x1p-1000 && p <= 0x1p1000; }

/* The double map's sqrt(det) and angle from inputs scaled by powers of two
 * (s = 2^-floor(e/2), e the exponent of q, so q s^2 is in [1, 4)), with
 * sqrt(det) scaled back; Sign takes its angle from here too. */
static NTK_INLINE NTK_HD double ntk_abrelu_angle(double q12, double q11, double q22, double *theta) {
  double i1 = ntk_pow2_half_exp(q11), i2 = ntk_pow2_half_exp(q22);
  double s1 = ntk_pow2_inv(i1), s2 = ntk_pow2_inv(i2);
  double x11 = q11 * s1 * s1, x22 = q22 * s2 * s2, x12 = q12 * s1 * s2;
  double det = x11 * x22 - x12 * x12;
  double sqx = sqrt(det > 0.0 ? det : 0.0);
  double t = ntk_atan2(sqx, x12);
  *theta = (sqx == 0.0 && x12 == 0.0) ? NTK_PI_2 : t;
  return sqx * i1 * i2;
}

static NTK_INLINE NTK_HD double ntk_abrelu_r(double a, double b, double q12, double q11, double q22, double r11,
                                         double r22, double *tdot) {
  (void)r11;
  (void)r22;
  /* first: loop invariants, which GCC then keeps out of the loops */
  double factor = (a - b) * (a - b) / (2.0 * NTK_PI), half = (a * a + b * b) / 2.0;
  double theta, sq = ntk_abrelu_angle(q12, q11, q22, &theta);
  double dot_sigma = half - factor * theta;
  *tdot = dot_sigma;
  return factor * sq + dot_sigma * q12;
}

static NTK_INLINE NTK_HD double ntk_abrelu(double a, double b, double q12, double q11, double q22, double *tdot) {
  return ntk_abrelu_r(a, b, q12, q11, q22, 0.0, 0.0, tdot);
}

/* The float ABRelu map from its normalised cosine c, s = sqrt(det) and
 * the square roots v11, v22 of the variances: ntk_abreluf_r's angle and
 * value, shared with the GPU's form on precomputed variance slots
 * (ntk_dev_abreluf_vu, src/kernels/cnn_dev.h), so that both round alike. */
static NTK_INLINE NTK_HD float ntk_abreluf_angle(float a, float b, float q12, float c, float s, float v11, float v22,
                                             float *tdot) {
  float ac = fabsf(c);
  float phi = s * ntk_acos_over_sinf(ac);     /* acos(|c|); 0 at s = 0 */
  phi = ac + s == 0.0f ? (float)NTK_PI_2 : phi; /* s = c = 0, a zero variance: pi/2 */
  float theta = c < 0.0f ? (float)NTK_PI - phi : phi;
  float factor = (a - b) * (a - b) * (float)(1.0 / (2.0 * NTK_PI));
  float dot_sigma = fmaf(-factor, theta, (a * a + b * b) * 0.5f);
  float sq = s * v11 * v22;
  *tdot = dot_sigma;
  return fmaf(factor, sq, dot_sigma * q12);
}

/* ntk_abreluf_r from v = q r and u = v r of each variance: the CNN slices
 * take the batch's from its variance planes (v22 and u22 once per image
 * and position, not once per entry), ntk_abreluf_r forms them itself. */
static NTK_INLINE NTK_HD float ntk_abreluf_vu(float a, float b, float q12, float r11, float v11, float u11, float r22,
                                          float v22, float u22, float *tdot) {
  float c = q12 * r11 * r22, det = u11 * u22 - c * c;
  return ntk_abreluf_angle(a, b, q12, c, sqrtf(det < 0.0f ? 0.0f : det), v11, v22, tdot); /* NaN stays NaN */
}


/* The ABRelu map of either precision given image b's v22 = q22 r22 and
 * u22 = v22 r22 beside q22 and r22 (ABRELU_VU in each_precision.h): the
 * float map takes them (the bits of ntk_abreluf_r), the double map needs
 * neither r nor v, u (ntk_abrelu_r's bits). */
static NTK_INLINE NTK_HD float ntk_abreluf_slots(float a, float b, float q12, float q11, float r11, float q22,
                                             float r22, float v22, float u22, float *tdot) {
  (void)q22;
  float v11 = q11 * r11, u11 = v11 * r11; /* sqrt(q), 1, to rounding */
  return ntk_abreluf_vu(a, b, q12, r11, v11, u11, r22, v22, u22, tdot);
}

static NTK_INLINE NTK_HD float ntk_abreluf_r(float a, float b, float q12, float q11, float q22, float r11, float r22,
                                         float *tdot) {
  float v22 = q22 * r22; /* image b's v and u formed here, as the slices' planes hold them */
  return ntk_abreluf_slots(a, b, q12, q11, r11, q22, r22, v22, v22 * r22, tdot);
}

static NTK_INLINE NTK_HD double ntk_abrelu_slots(double a, double b, double q12, double q11, double r11, double q22,
                                             double r22, double v22, double u22, double *tdot) {
  (void)v22;
  (void)u22;
  return ntk_abrelu_r(a, b, q12, q11, q22, r11, r22, tdot);
}

static NTK_INLINE NTK_HD float ntk_abreluf(float a, float b, float q12, float q11, float q22, float *tdot) {
  return ntk_abreluf_r(a, b, q12, q11, q22, ntk_rsqrtf(q11), ntk_rsqrtf(q22), tdot);
}

/* Erf: f(x) = erf(x). With d = (1+2q11)(1+2q22) - 4q12^2,
 * nngp' = (2/pi) atan2(2q12, sqrt(d)) and tdot = (4/pi)/sqrt(d). d is
 * computed as 1 + 2q11 + 2q22 + 4 det, det = q11 q22 - q12^2 >= 0: the
 * product form cancels to nothing once the variances pass ~1/eps (a
 * pair at q12 = q11 = q22 = 1e8 had d = 0 and tdot = inf in float32),
 * while here such a pair has det = 0 exactly. Scales: s = 2^-floor(e/2)
 * from the exponent e of 1 + 2q (>= 1), so (1+2q) s^2 is in [1, 4); then
 * d s1^2 s2^2 = (1+2q11) s1^2 s2^2 + 2 q22 s2^2 s1^2 + 4 det s1^2 s2^2.
 * Both maps scale always (branch-free: the loops vectorise); for 1 + 2q
 * below 2 the scales are 1. */
static NTK_INLINE NTK_HD double ntk_erf(double q12, double q11, double q22, double *tdot) {
  double a1 = 1.0 + 2.0 * q11, a2 = 1.0 + 2.0 * q22;
  /* 1 + 2q overflows for a finite q past DBL_MAX / 2: the scale from
   * DBL_MAX there, and (1 + 2q) s^2 formed as s^2 + 2 q s^2 (the same bits
   * wherever 1 + 2q is finite). It used to be inf: the map gave 0 and
   * tdot 0 for such a variance, a finite kernel with nothing of the Erf. */
  a1 = a1 < 0x1.fffffffffffffp1023 ? a1 : 0x1.fffffffffffffp1023;
  a2 = a2 < 0x1.fffffffffffffp1023 ? a2 : 0x1.fffffffffffffp1023;
  double s1 = ntk_pow2_inv(ntk_pow2_half_exp(a1)), s2 = ntk_pow2_inv(ntk_pow2_half_exp(a2));
  double t1 = s1 * s1, t2 = s2 * s2; /* exact: >= 2^-1022 */
  double x11 = q11 * t1, x22 = q22 * t2, x12 = q12 * s1 * s2;
  double det = x11 * x22 - x12 * x12;
  det = det < 0.0 ? 0.0 : det; /* a Gram determinant; NaN stays NaN */
  double d = (t1 + 2.0 * x11) * t2 + (2.0 * x22) * t1 + 4.0 * det;
  double r = sqrt(d);
  *tdot = (4.0 / NTK_PI) / r * s1 * s2;
  return (2.0 / NTK_PI) * ntk_atan2(2.0 * x12, r);
}

static NTK_INLINE NTK_HD float ntk_erff(float q12, float q11, float q22, float *tdot) {
  float a1 = 1.0f + 2.0f * q11, a2 = 1.0f + 2.0f * q22;
  a1 = a1 < 0x1.fffffep127f ? a1 : 0x1.fffffep127f; /* as ntk_erf: 1 + 2q may overflow */
  a2 = a2 < 0x1.fffffep127f ? a2 : 0x1.fffffep127f;
  float s1 = ntk_pow2_invf(ntk_pow2_half_expf(a1)), s2 = ntk_pow2_invf(ntk_pow2_half_expf(a2));
  float t1 = s1 * s1, t2 = s2 * s2; /* exact: >= 2^-126 */
  float x11 = q11 * t1, x22 = q22 * t2, x12 = q12 * s1 * s2;
  float det = x11 * x22 - x12 * x12;
  det = det < 0.0f ? 0.0f : det; /* a Gram determinant; NaN stays NaN */
  float d = (t1 + 2.0f * x11) * t2 + (2.0f * x22) * t1 + 4.0f * det;
  float r = sqrtf(d);
  *tdot = (float)(4.0 / NTK_PI) / r * s1 * s2;
  return (float)(2.0 / NTK_PI) * ntk_atan2f(2.0f * x12, r);
}

/* Erf(a, b, c): f(x) = a erf(b x) + c. As stax: the kernel scaled by b^2
 * (q and the NTK), the Erf map, then nngp a^2 nngp + c^2 and the NTK a^2.
 * Erf(1, 1, 0) is ntk_erf itself, bit for bit (no scaling at all). */
static NTK_INLINE NTK_HD double ntk_erf_abc(const struct ntk_map *m, double q12, double q11, double q22, double *tdot) {
  double b2 = m->b * m->b, a2 = m->a * m->a;
  if (b2 != 1.0) {
    q12 *= b2;
    q11 *= b2;
    q22 *= b2;
  }
  double g = ntk_erf(q12, q11, q22, tdot);
  if (a2 != 1.0 || b2 != 1.0) *tdot *= a2 * b2;
  return a2 != 1.0 || m->c != 0.0 ? a2 * g + m->c * m->c : g;
}
/* No condition on the parameters but one bit select (ntk_selectf): as ?:
 * under -fno-trapping-math (CMakeLists.txt) GCC if-converted them into
 * selects on a scalar condition that its AVX-512 vectoriser refused, and
 * the loop stayed scalar. A factor of 1 multiplies exactly (x * 1 = x, as
 * the former code's skipped product), so the inputs and tdot take their
 * factors unconditionally; the value keeps its select: a2 g + c2 would
 * turn a -0 into +0 where a = 1, c = 0. */
static NTK_INLINE NTK_HD float ntk_erf_abcf(const struct ntk_map *m, float q12, float q11, float q22, float *tdot) {
  float b2 = (float)(m->b * m->b), a2 = (float)(m->a * m->a), c2 = (float)(m->c * m->c);
  float td, g = ntk_erff(q12 * b2, q11 * b2, q22 * b2, &td);
  *tdot = td * (a2 * b2);
  return ntk_selectf(a2 != 1.0f || c2 != 0.0f, a2 * g + c2, g);
}

/* Gelu: f(x) = x Phi(x). With p = q11 q22, a1 = 1 + q11, a2 = 1 + q22,
 * p1 = a1 a2, d = sqrt(p1 - q12^2) and angle = atan2(q12, d) (Tsuchida et al.,
 * "Avoiding kernel fixed points", arXiv:2002.08517, as neural-tangents writes it):
 *   nngp' = ((q12^2 + p d^2) / (p1 d) + q12 angle) / (2 pi) + q12 / 4
 *   tdot  = q12 / (2 pi d) (1/d^2 + (1 - p) / p1 + 1) + 1/4 + angle / (2 pi)
 * Formed so that no intermediate leaves the range before the result does:
 * (q12^2 + p d^2) / (p1 d) = (q12/a1)(q12/a2)/d + (q11/a1)(q22/a2) d, and
 * (1 - p) / p1 + 1 = 1/a1 + 1/a2, each factor O(1) or O(q); d^2 = 1 + q11
 * + q22 + det (det = p - q12^2 >= 0, a Gram determinant) from variances
 * scaled by powers of two as in ntk_erf, so d, q12/d and the angle come
 * from O(1) numbers, and q12 angle / (2 pi) + q12 / 4 is q12 times a factor
 * in (0, 1/2). The products q12^2 + p d^2 ~ q^4 and p1 d ~ q^3
 * overflowed from variances ~4e9 in float32 (~1e77 in float64): a Gelu
 * kernel of 1e10 was refused as "exceeds float32". Every term is positive
 * but q12 f, as before q12 angle and q12/4: no new cancellation. The float map
 * takes ntk_atan2f, not libm's atan2f: CUDA's atan2f rounds otherwise than
 * glibc's, and a Gelu network's float32 tiles from a GPU were 2e-7 off the
 * CPU's (seen on an H200, 2026-12-04); every target computes this one. */
static NTK_INLINE NTK_HD double ntk_gelu(double q12, double q11, double q22, double *tdot) {
  double a1 = 1.0 + q11, a2 = 1.0 + q22;
  double s1 = ntk_pow2_inv(ntk_pow2_half_exp(a1)), s2 = ntk_pow2_inv(ntk_pow2_half_exp(a2));
  double t1 = s1 * s1, t2 = s2 * s2; /* exact: >= 2^-1022 */
  double x11 = q11 * t1, x22 = q22 * t2, x12 = q12 * s1 * s2;
  double det = x11 * x22 - x12 * x12;
  det = det < 0.0 ? 0.0 : det;
  double r = sqrt((t1 + x11) * t2 + x22 * t1 + det); /* d s1 s2 */
  double d = r / s1 / s2, c = x12 / r;                 /* d, q12 / d */
  double f = 0.25 + ntk_atan2(x12, r) / (2.0 * NTK_PI); /* in (0, 1/2) */
  *tdot = c / (2.0 * NTK_PI) * (1.0 / d / d + 1.0 / a1 + 1.0 / a2) + f;
  return ((q12 / a1) * (q12 / a2) / d + (q11 / a1) * (q22 / a2) * d) / (2.0 * NTK_PI) + q12 * f;
}
static NTK_INLINE NTK_HD float ntk_geluf(float q12, float q11, float q22, float *tdot) {
  float a1 = 1.0f + q11, a2 = 1.0f + q22;
  float s1 = ntk_pow2_invf(ntk_pow2_half_expf(a1)), s2 = ntk_pow2_invf(ntk_pow2_half_expf(a2));
  float t1 = s1 * s1, t2 = s2 * s2; /* exact: >= 2^-126 */
  float x11 = q11 * t1, x22 = q22 * t2, x12 = q12 * s1 * s2;
  float det = x11 * x22 - x12 * x12;
  det = det < 0.0f ? 0.0f : det;
  float r = sqrtf((t1 + x11) * t2 + x22 * t1 + det);
  float d = r / s1 / s2, c = x12 / r;
  float pi2 = (float)(2.0 * NTK_PI), f = 0.25f + ntk_atan2f(x12, r) / pi2;
  *tdot = c / pi2 * (1.0f / d / d + 1.0f / a1 + 1.0f / a2) + f;
  return ((q12 / a1) * (q12 / a2) / d + (q11 / a1) * (q22 / a2) * d) / pi2 + q12 * f;
}

/* ---- the other closed forms ------------------------------------------------ */

/* neural-tangents' formulas (stax/elementwise.py), in double in both
 * precisions: these maps are not on any hot path, and double keeps float32
 * kernels at float32's rounding without float-specific range work. s is
 * q11 + q22, p is q11 q22. Where a product leaves double's range the tile
 * is not finite, and refused. */

/* Sin(a, b, c) (Cos: c + pi/2): E[sin(bu+c) sin(bv+c)] from cos(b(u -+ v)).
 * stax's s1 - s2 cancels where cos 2c > 0 and b^2 q12 is small: both
 * terms are ~1 and their difference ~2 b^2 q12, so Sin's kernel kept only
 * ~1e-16 / q12 of its digits (2e-6 relative at input variances ~1e-10, 0
 * at 1e-16, a value no check can tell from a right one). There it is
 * (s1 - e2) + 2 e2 sin^2 c, with e2 = s2 / cos 2c and s1 - e2 from expm1:
 * no difference of near-equal numbers is left. Where cos 2c <= 0 (Cos)
 * nothing cancels and stax's form stays. */
static inline NTK_HD double ntk_sin_map(const struct ntk_map *m, double q12, double q11, double q22, double *tdot) {
  /* -s/2 as -q11/2 - q22/2 (the same bits: halving is exact): q11 + q22
   * overflowed for variances past half the largest value, and Sin and Cos
   * gave 0 for E[sin^2] = 1/2 there (nngp and tdot 0, exit 0). */
  double b2 = m->b * m->b, half_a2 = m->a * m->a / 2.0, hs = -0.5 * q11 - 0.5 * q22, cc = cos(2.0 * m->c);
  double s1 = exp(b2 * (hs + q12)), e2 = exp(b2 * (hs - q12)), s2 = e2 * cc;
  *tdot = half_a2 * b2 * (s1 + s2);
  if (cc <= 0.0) return half_a2 * (s1 - s2);
  double sc = sin(m->c), d = q12 >= 0.0 ? -s1 * expm1(-2.0 * b2 * q12) : e2 * expm1(2.0 * b2 * q12);
  return half_a2 * (d + 2.0 * e2 * (sc * sc));
}

/* Rbf(gamma): exp(-gamma (q11 + q22 - 2 q12)). */
static inline NTK_HD double ntk_rbf_map(const struct ntk_map *m, double q12, double q11, double q22, double *tdot) {
  double g = exp(m->a * (-(q11 + q22) + 2.0 * q12));
  *tdot = 2.0 * m->a * g;
  return g;
}

/* Exp(a, b): a^2 exp(b^2 (s/2 + q12)). */
static inline NTK_HD double ntk_exp_map(const struct ntk_map *m, double q12, double q11, double q22, double *tdot) {
  double b2 = m->b * m->b, a2 = m->a * m->a, e = exp(b2 * ((q11 + q22) / 2.0 + q12));
  *tdot = a2 * (b2 * e);
  return a2 * e;
}

/* ExpNormalized(gamma, shift, do_clip): r = sqrt(max(p, 1e-30)),
 * nngp' = r exp(gamma (q12 / r + shift)), tdot = gamma exp(...). */
static inline NTK_HD double ntk_expnorm_map(const struct ntk_map *m, double q12, double q11, double q22,
                                            double *tdot) {
  double p = q11 * q22, r = sqrt(p > 1e-30 ? p : 1e-30), c = q12 / r;
  if (m->flag) c = c < -1.0 ? -1.0 : c > 1.0 ? 1.0 : c;
  double e = exp(m->a * (c + m->b));
  *tdot = m->a * e;
  return r * e;
}

/* Gaussian(a, b): a^2 / sqrt((1 - 2b q11)(1 - 2b q22) - 4 b^2 q12^2). */
static inline NTK_HD double ntk_gaussian_map(const struct ntk_map *m, double q12, double q11, double q22,
                                             double *tdot) {
  double f = 4.0 * m->b * m->b, a2 = m->a * m->a;
  /* (1 - 2b q11)(1 - 2b q22) - 4b^2 q12^2 expanded, with the Gram
   * determinant q11 q22 - q12^2 (>= 0) taken as one term: the product form
   * cancelled (a sample with itself, 1 + 4q for b = -1, was 3.5e-5 off at
   * q ~ 1.7e12, 2.3e-3 at 1.7e14), as Erf's did. */
  /* The determinant from variances scaled by powers of two, scaled back
   * (the same bits in range): q11 q22 - q12^2 formed as it is was
   * inf - inf = NaN past variances ~1.3e154, clamped to 0, and a pair of
   * correlation -0.25 came back with the nngp of correlation 1 and an NTK
   * 6 % of the diagonal's (true: ~1e-155 of it), exit 0. */
  double i1 = ntk_pow2_half_exp(q11), i2 = ntk_pow2_half_exp(q22);
  double s1 = ntk_pow2_inv(i1), s2 = ntk_pow2_inv(i2);
  double x11 = q11 * s1 * s1, x22 = q22 * s2 * s2, x12 = q12 * s1 * s2;
  double g = (x11 * x22 - x12 * x12) * (i1 * i2) * (i1 * i2);
  double x = (1.0 - 2.0 * m->b * q11 - 2.0 * m->b * q22) + f * (g > 0.0 ? g : 0.0);
  double det = sqrt(x > 0.0 ? x : 0.0);
  /* det^2 is x, in range; det^3 overflowed from variances ~1e205 (the
   * kernel there ~1e-205), and tdot came back 0: the NTK lost the layer's
   * whole term (5e139 at variance 1e280 stored as 0), exit 0 */
  *tdot = a2 * (f * q12 / det / (det * det));
  return a2 * (1.0 / det);
}

/* Sign: 1 - 2 angle / pi (the angle pi/2 for zero variance and covariance).
 * Its derivative is a delta: neural-tangents sets the NTK to zero, and so
 * does this map (tdot = 0). */
static inline NTK_HD double ntk_sign_map(double q12, double q11, double q22, double *tdot) {
  /* The angle as the ABRelu map takes it, from variances scaled by powers
   * of two (the kernel is scale-invariant; the raw product gave 0.998 off
   * at variances 1e+-150 and 5e-4 at 1e-160, exit 0). */
  double angle;
  (void)ntk_abrelu_angle(q12, q11, q22, &angle);
  *tdot = 0.0;
  return 1.0 - angle * 2.0 / NTK_PI;
}

/* E[u^k v^k] for (u, v) of covariance q12 and p = q11 q22, k = 0..5 (-1: 0). */
static inline NTK_HD double ntk_monomial_moment(int k, double x, double p) {
  switch (k) {
  case 0: return 1.0;
  case 1: return x;
  case 2: return 2.0 * x * x + p;
  case 3: return 6.0 * x * x * x + 9.0 * x * p;
  case 4: return 3.0 * (8.0 * x * x * x * x + 3.0 * p * (8.0 * x * x + p));
  case 5: return 15.0 * x * (8.0 * x * x * x * x + 5.0 * p * (8.0 * x * x + 3.0 * p));
  default: return 0.0;
  }
}

/* Monomial(degree): nngp' the moment of that degree, tdot degree^2 times the one below. */
static inline NTK_HD double ntk_monomial_map(const struct ntk_map *m, double q12, double q11, double q22,
                                             double *tdot) {
  double p = q11 * q22;
  *tdot = (double)(m->degree * m->degree) * ntk_monomial_moment(m->degree - 1, q12, p);
  return ntk_monomial_moment(m->degree, q12, p);
}

/* RectifiedMonomial(degree) = ReLU^n: the arc-cosine kernels (Cho and
 * Saul), k_n = (q11 q22)^(n/2) J_n(theta) / (2 pi), with J_0 = pi - theta,
 * J_1 = sin + (pi - theta) cos and J_n = (2n-1) cos J_(n-1) + (n-1)^2 sin^2
 * J_(n-2); tdot = n^2 (q11 q22)^((n-1)/2) J_(n-1) / (2 pi) (Price's
 * theorem). The angle as the ABRelu map takes it. */
static inline NTK_HD double ntk_rectmono_map(const struct ntk_map *m, double q12, double q11, double q22,
                                             double *tdot) {
  int n = m->degree;
  double p = q11 * q22, sp, theta, c, sn;
  if (ntk_product_in_range(p)) {
    double x = p - q12 * q12, det = sqrt(x > 0.0 ? x : 0.0);
    sp = sqrt(p);
    theta = det == 0.0 && q12 == 0.0 ? NTK_PI_2 : ntk_atan2(det, q12);
    c = q12 / sp;
    sn = det / sp;
  } else {
    /* q11 q22 out of range (or 0): the angle, cos and sin from variances
     * scaled by powers of two, as ABRelu's (the raw product gave
     * RectifiedMonomial(0) 0.5 off at input variances 1e+-160, exit 0) */
    double i1 = ntk_pow2_half_exp(q11), i2 = ntk_pow2_half_exp(q22);
    double s1 = ntk_pow2_inv(i1), s2 = ntk_pow2_inv(i2);
    double x11 = q11 * s1 * s1, x22 = q22 * s2 * s2, x12 = q12 * s1 * s2;
    double xp = x11 * x22, xs = sqrt(xp > 0.0 ? xp : 0.0), x = xp - x12 * x12, det = sqrt(x > 0.0 ? x : 0.0);
    theta = det == 0.0 && x12 == 0.0 ? NTK_PI_2 : ntk_atan2(det, x12);
    c = xs > 0.0 ? x12 / xs : 0.0;
    sn = xs > 0.0 ? det / xs : 1.0;
    sp = sqrt(q11 > 0.0 ? q11 : 0.0) * sqrt(q22 > 0.0 ? q22 : 0.0);
  }
  double jm = 0.0, j = NTK_PI - theta; /* J_(k-1), J_k at k = 0 */
  double pw = 1.0, pw_below = 0.0;     /* sp^k, sp^(k-1) */
  for (int k = 1; k <= n; k++) {
    double next = k == 1 ? sn + (NTK_PI - theta) * c
                         : (double)(2 * k - 1) * c * j + (double)((k - 1) * (k - 1)) * sn * sn * jm;
    jm = j;
    j = next;
    pw_below = pw;
    pw *= sp;
  }
  *tdot = n == 0 ? 0.0 : (double)(n * n) * pw_below * jm / (2.0 * NTK_PI);
  /* Degree 0 at a zero variance: stax's f is (x >= 0) x^0, so f(0) = 1 and
   * the pair's value is f(0) E[f(v)] = 1/2 (1 with both variances 0). The
   * angle formula gave the orthogonal pair's 1/4 (found by an adversarial
   * helper: an all-zeros sample with b_std = 0). Degrees >= 1 have f(0) = 0,
   * which the formula gives (sp^n = 0). */
  double zero = (q11 == 0.0 ? 1.0 : 0.5) * (q22 == 0.0 ? 1.0 : 0.5);
  return n == 0 && (q11 == 0.0 || q22 == 0.0) ? zero : pw * j / (2.0 * NTK_PI);
}

/* Polynomial(coef), n = degree coefficients. stax writes it with the
 * per-variance series r_l(q) = sum_i coef[2i+l] (2i+l)! / (2^i i! sqrt(l!))
 * q^((2i+l)/2) and rho = q12 / sqrt(q11 q22): nngp' = sum_l r_l(q11)
 * r_l(q22) rho^l, tdot = sum_(l>=1) l r_l(q11) r_l(q22) rho^(l-1) /
 * sqrt(q11 q22). With r_l(q) = q^(l/2) s_l(q), s_l the series in q^i, the
 * powers of sqrt(q11 q22) cancel: nngp' = sum_l s_l(q11) s_l(q22) q12^l,
 * tdot = sum_(l>=1) l s_l(q11) s_l(q22) q12^(l-1), the same values without
 * a division, so finite where a variance is 0 (stax's form is NaN there). */
static inline NTK_HD double ntk_poly_s(const struct ntk_map *m, int l, double q) {
  double s = 0.0, fl = 1.0, qi = 1.0; /* qi = q^i */
  for (int k = 2; k <= l; k++) fl *= k;
  double f = fl, sfl = sqrt(fl); /* f = (2i+l)! / (2^i i!), from the one before: l! at i = 0 (each an integer,
                                    exact below 2^53: the same values as from the factorials themselves, in
                                    O(degree) rather than O(degree^2)) */
  for (int i = 0; 2 * i + l < m->degree; i++) {
    if (i) f = f * (2 * i + l - 1) * (2 * i + l) / (2.0 * i);
    s += m->coef[2 * i + l] * f / sfl * qi;
    qi *= q;
  }
  return s;
}
static inline NTK_HD double ntk_polynomial_map(const struct ntk_map *m, double q12, double q11, double q22,
                                               double *tdot) {
  double g = 0.0, t = 0.0, pw = 1.0; /* pw = q12^(l-1) inside the loop for l >= 1 */
  for (int l = 0; l < m->degree; l++) {
    double ss = ntk_poly_s(m, l, q11) * ntk_poly_s(m, l, q22);
    if (l == 0) {
      g += ss;
      continue;
    }
    t += (double)l * ss * pw;
    pw *= q12;
    g += ss * pw;
  }
  *tdot = t;
  return g;
}

/* Hermite(degree), inputs assumed of unit variance as in stax: q12^n, tdot n q12^(n-1). */
static inline NTK_HD double ntk_hermite_map(const struct ntk_map *m, double q12, double *tdot) {
  double pw = 1.0, below = 0.0;
  for (int k = 0; k < m->degree; k++) {
    below = pw;
    pw *= q12;
  }
  *tdot = (double)m->degree * below;
  return pw;
}

/* Gabor, f(x) = exp(-x^2) sin(x), stax's closed form: with p = q11 q22,
 * s = q11 + q22, d = 4 (p - q12^2) (0 for a sample with itself),
 * den = 2 s + d + 1: nngp' = e_l (e_r - 1) / (2 sqrt(den)), e_l =
 * exp(-(s + d + 2 q12) / (2 den)), e_r = exp(2 q12 / den); tdot = e_l (lhs
 * + e_r rhs) / den^(5/2) / 2 with lhs, rhs = 1 + 2 s + 4 (q12^2 + p) -+
 * 4 q12 (d + 3 s + 2). In stax's order of operations. */
static inline NTK_HD double ntk_gabor_map(double q12, double q11, double q22, double *tdot) {
  double p = q11 * q22, s = q11 + q22;
  double diff = 4.0 * (p - q12 * q12), den = 2.0 * s + diff + 1.0, num = s + diff + 2.0 * q12;
  double el = exp(-num / (2.0 * den)), er = exp(2.0 * q12 / den);
  double shared = 1.0 + 2.0 * s + 4.0 * (q12 * q12 + p), dterm = 4.0 * q12 * (diff + 3.0 * s + 2.0);
  *tdot = el * ((shared - dterm) + er * (shared + dterm)) / pow(den, 2.5) / 2.0;
  return el * expm1(2.0 * q12 / den) / (2.0 * sqrt(den)); /* er - 1 cancelled at small q12 (as Sin's) */
}

/* LayerNorm over the channel axis, eps in a: both kernels divided by
 * sqrt((eps + q11)(eps + q22)), as neural-tangents. */
static inline NTK_HD double ntk_layernorm_map(const struct ntk_map *m, double q12, double q11, double q22,
                                              double *tdot) {
  double u = m->a + q11, v = m->a + q22, uv = u * v;
  /* out of range (eps = 0, variances near 1e+-154): the product over- or
   * underflowed (2e-3 off at 1e-160, exit 0) */
  double r = ntk_product_in_range(uv) ? sqrt(uv) : sqrt(u) * sqrt(v);
  *tdot = 1.0 / r;
  return q12 / r;
}

/* ---- dispatchers ---------------------------------------------------------- */

/* src/kernels/numerical.c, host only. */
double ntk_numerical_map(const struct ntk_map *m, double q12, double q11, double q22, double *tdot);

/* Map m on one entry. r11, r22: ntk_rsqrt of the variances (the float
 * ABRelu map's factors; the other maps ignore them). A kind no case knows
 * (memory damage) gives NaN, which no tile is stored with. */
static inline NTK_HD double ntk_map(const struct ntk_map *m, double q12, double q11, double q22, double r11,
                                    double r22, double *tdot) {
  switch (m->kind) {
  case NTK_MAP_ABRELU: return ntk_abrelu_r(m->a, m->b, q12, q11, q22, r11, r22, tdot);
  case NTK_MAP_ERF: return ntk_erf_abc(m, q12, q11, q22, tdot);
  case NTK_MAP_GELU: return ntk_gelu(q12, q11, q22, tdot);
  case NTK_MAP_SIN: return ntk_sin_map(m, q12, q11, q22, tdot);
  case NTK_MAP_RBF: return ntk_rbf_map(m, q12, q11, q22, tdot);
  case NTK_MAP_EXP: return ntk_exp_map(m, q12, q11, q22, tdot);
  case NTK_MAP_EXPNORM: return ntk_expnorm_map(m, q12, q11, q22, tdot);
  case NTK_MAP_GAUSSIAN: return ntk_gaussian_map(m, q12, q11, q22, tdot);
  case NTK_MAP_SIGN: return ntk_sign_map(q12, q11, q22, tdot);
  case NTK_MAP_MONOMIAL: return ntk_monomial_map(m, q12, q11, q22, tdot);
  case NTK_MAP_RECTMONO: return ntk_rectmono_map(m, q12, q11, q22, tdot);
  case NTK_MAP_POLYNOMIAL: return ntk_polynomial_map(m, q12, q11, q22, tdot);
  case NTK_MAP_HERMITE: return ntk_hermite_map(m, q12, tdot);
  case NTK_MAP_GABOR: return ntk_gabor_map(q12, q11, q22, tdot);
  case NTK_MAP_LAYERNORM: return ntk_layernorm_map(m, q12, q11, q22, tdot);
  case NTK_MAP_NUMERICAL:
#ifdef __CUDA_ARCH__
    break; /* the GPU backends refuse these maps before a tile runs */
#else
    return ntk_numerical_map(m, q12, q11, q22, tdot);
#endif
  }
  *tdot = NAN;
  return NAN;
}

/* The float dispatcher: ABRelu, Erf and Gelu in float; the other maps in
 * double (ntk_map), rounded once. */
static inline NTK_HD float ntk_mapf(const struct ntk_map *m, float q12, float q11, float q22, float r11, float r22,
                                    float *tdot) {
  double td = NAN, g = NAN;
  switch (m->kind) {
  case NTK_MAP_ABRELU: return ntk_abreluf_r((float)m->a, (float)m->b, q12, q11, q22, r11, r22, tdot);
  case NTK_MAP_ERF: return ntk_erf_abcf(m, q12, q11, q22, tdot);
  case NTK_MAP_GELU: return ntk_geluf(q12, q11, q22, tdot);
  case NTK_MAP_SIN:
  case NTK_MAP_RBF:
  case NTK_MAP_EXP:
  case NTK_MAP_EXPNORM:
  case NTK_MAP_GAUSSIAN:
  case NTK_MAP_SIGN:
  case NTK_MAP_MONOMIAL:
  case NTK_MAP_RECTMONO:
  case NTK_MAP_POLYNOMIAL:
  case NTK_MAP_HERMITE:
  case NTK_MAP_GABOR:
  case NTK_MAP_LAYERNORM:
  case NTK_MAP_NUMERICAL: g = ntk_map(m, q12, q11, q22, 0.0, 0.0, &td); break;
  }
  *tdot = (float)td;
  return (float)g;
}

/* True for Erf(1, 1, 0), the map the specialised Erf loops compute. */
static inline NTK_HD int ntk_map_is_plain_erf(const struct ntk_map *m) {
  return m->kind == NTK_MAP_ERF && m->a == 1.0 && m->b == 1.0 && m->c == 0.0;
}

#endif
