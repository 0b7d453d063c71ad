/* The kernel maps of nonlinearities without a closed form (stax's
 * ElementwiseNumerical): E[f(u) f(v)] and E[f'(u) f'(v)] for (u, v) of
 * covariance [[q11, q12], [q12, q22]], in double, within ~1e-14 of their
 * scale at every variance (docs/MATH.md, "Nonlinearities by quadrature").
 *
 * Why not Gauss-Hermite, as neural-tangents: f(sigma z) has its complex
 * singularities (tanh: at +-i pi / (2 sigma)) closer to the real axis the
 * larger the variance, and Gauss-Hermite's error decays only like
 * exp(-d sqrt(n)) in their distance d: at variance 20 its 101 nodes leave
 * 1e-4. Two ways here, each sized beforehand, without an error estimate to
 * trust; tests/test_kernel.c checks each against the other and both
 * against an independent 30-digit reference (tests/data/ref_numerical_map.txt):
 *
 * 1. Tanh, sigmoid, softplus and silu are scale mixtures of functions with
 *    a closed-form kernel (sigmoid(x) = E[Phi(x / S)], S = 2K with K
 *    Kolmogorov-distributed): the pair's kernel is an average of closed
 *    forms at the covariance plus diag(S1^2, S2^2), a smooth integral over
 *    (log K1, log K2) that a fixed trapezoidal rule of 30 x 30 nodes gets to
 *    1e-15 whatever Q (its singularities stay pi/2 away in log K).
 *
 * 2. The Elu family (and, for the tests, every function): nested composite
 *    Gauss-Legendre, E[f(u) G(c u)] with G(m) = E[f(m + s w)], w standard
 *    normal, c = q12 / q11 and s^2 = det Q / q11 the variance of v given u.
 *    Gauss-Legendre on a panel of half-width h whose Bernstein ellipse of
 *    semi-minor axis b stays clear of the integrand's singularities errs
 *    by about M rho^-32 (16 nodes, rho = b/h + sqrt(1 + b^2/h^2), M its
 *    bound on the ellipse). f is analytic in a strip |Im y| < d (tanh:
 *    pi/2; sigmoid, softplus, silu: pi; the Elu family is entire on each
 *    side of its kink at 0, and grows like e^y), so panels at most WIDTH_D d
 *    wide where f has structure, and GAUSS_W standard deviations wide
 *    elsewhere (the Gaussian factor, entire, grows by exp(b^2 / 2) on the
 *    ellipse). Beyond +-X, f is its linear asymptote to 1e-17: that is
 *    where its narrow panels end (at variance 1e6 the Gaussian is 1e3 wide
 *    and f's structure 40). G is analytic in the same strip as f, and
 *    entire with growth exp(Im^2 / (2 s^2)) for s > 0: its panels are the
 *    wider of the two bounds. Measured: halving every width changes no
 *    value by more than 2.1e-15 of its scale (7 functions, variances 1e-6 to 1e6).
 *
 * Pure, host-only, reentrant (the node tables are built once, under
 * pthread_once). */
#include "kernels/numerical.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>

#define GL_N 16     /* Gauss-Legendre nodes per panel */
#define TAIL 10.0   /* standard deviations integrated each side: phi(10) = 8e-23 */
#define GAUSS_W 4.0 /* the widest panel, in standard deviations */
#define WIDTH_D 1.0 /* a panel's width in f's strip half-widths d (1.6: errors of 3e-14) */
#define MAX_CUTS 16
#define INV_SQRT_2PI 0.39894228040143267794

/* ---- the functions --------------------------------------------------------- */

/* 1 / (1 + e^-x) without overflow. */
static double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}

/* f(x) and f'(x) of map m (kind NTK_MAP_NUMERICAL: fn in degree, alpha in a). */
static void eval(const struct ntk_map *m, double x, double *f, double *d) {
  switch ((enum ntk_numfn)m->degree) {
  case NTK_FN_TANH: { /* one expm1: e = e^-2|x| - 1, tanh |x| = -e / (2 + e), sech^2 = 4 (1 + e) / (2 + e)^2 */
    double e = expm1(-2.0 * fabs(x)), r = 1.0 / (2.0 + e);
    *f = copysign(-e * r, x);
    *d = 4.0 * (1.0 + e) * r * r;
    return;
  }
  case NTK_FN_SIGMOID: {
    double e = exp(-fabs(x)), s = sigmoid(x);
    *f = s;
    *d = e / ((1.0 + e) * (1.0 + e));
    return;
  }
  case NTK_FN_SOFTPLUS:
    *f = (x > 0 ? x : 0.0) + log1p(exp(-fabs(x)));
    *d = sigmoid(x);
    return;
  case NTK_FN_SILU: {
    double s = sigmoid(x), e = exp(-fabs(x));
    *f = x * s;
    *d = s + x * e / ((1.0 + e) * (1.0 + e));
    return;
  }
  case NTK_FN_ELU:
  case NTK_FN_SELU: {
    double a = m->a, scale = m->degree == NTK_FN_SELU ? NTK_SELU_SCALE : 1.0;
    *f = scale * (x > 0 ? x : a * expm1(x));
    *d = scale * (x > 0 ? 1.0 : a * exp(x));
    return;
  }
  case NTK_FN_CELU: {
    double a = m->a;
    *f = x > 0 ? x : a * expm1(x / a);
    *d = x > 0 ? 1.0 : exp(x / a);
    return;
  }
  case NTK_FN_COUNT: break;
  }
  *f = *d = NAN;
}

/* X: beyond +-X, f is its linear asymptote to 1e-17 (tanh: 1 - tanh 20 =
 * 8e-18; e^-40 = 4e-18 for the others, scaled by alpha for celu). */
static double reach(const struct ntk_map *m) {
  switch ((enum ntk_numfn)m->degree) {
  case NTK_FN_TANH: return 20.0;
  case NTK_FN_CELU: return 40.0 * fabs(m->a);
  default: return 40.0;
  }
}

/* The widest panel in f's argument: WIDTH_D times the half-width d of the
 * strip where f is analytic; for the Elu family, whose pieces are entire,
 * the scale of their e^y (Celu: e^(y / alpha)) as for a Gaussian. */
static double f_width(const struct ntk_map *m) {
  switch ((enum ntk_numfn)m->degree) {
  case NTK_FN_TANH: return WIDTH_D * NTK_PI_2;
  case NTK_FN_SIGMOID:
  case NTK_FN_SOFTPLUS:
  case NTK_FN_SILU: return WIDTH_D * NTK_PI;
  case NTK_FN_CELU: return GAUSS_W * fabs(m->a);
  default: return GAUSS_W;
  }
}

/* Whether f has a kink at 0 (the Elu family's pieces meet there): there G
 * is smooth only on the scale s, not f's. */
static int kinked(const struct ntk_map *m) { return m->degree >= NTK_FN_ELU; }

/* ---- composite Gauss-Legendre ----------------------------------------------- */

static double gl_x[GL_N / 2], gl_w[GL_N / 2]; /* the positive nodes, their weights */
static pthread_once_t gl_once = PTHREAD_ONCE_INIT;

/* The n-point Gauss-Legendre rule on [-1, 1] (n even): its n/2 positive
 * nodes x and their weights w, by Newton on the Legendre polynomial P_n
 * from the classical initial guesses, to the last bit or so. */
static void gauss_legendre(int n, double *x, double *w) {
  for (int i = 0; i < n / 2; i++) {
    double t = cos(NTK_PI * (i + 0.75) / (n + 0.5)), dp = 1.0;
    for (int it = 0; it < 100; it++) {
      double p0 = 1.0, p1 = t;
      for (int k = 2; k <= n; k++) {
        double p2 = ((2.0 * k - 1.0) * t * p1 - (k - 1.0) * p0) / k;
        p0 = p1;
        p1 = p2;
      }
      dp = n * (t * p1 - p0) / (t * t - 1.0);
      double dt = p1 / dp;
      t -= dt;
      if (fabs(dt) < 1e-17) break;
    }
    x[i] = t;
    w[i] = 2.0 / ((1.0 - t * t) * dp * dp);
  }
}

static void mix_init(void);

static void gl_init(void) {
  gauss_legendre(GL_N, gl_x, gl_w);
  mix_init();
}

/* An integrand with two components (the NNGP's and the NTK factor's). */
typedef void (*integrand)(void *ctx, double t, double out[2]);

/* Where the panels must be narrow: within [lo, hi], at most `width` wide. */
struct zone {
  double lo, hi, width;
};

/* The integral over [from, TAIL] (from = -TAIL, or 0 for half of an even
 * integrand) with panels at most GAUSS_W wide, and narrower in the zones;
 * every zone's ends are panel ends (f's kink and the ends of its structure
 * fall between panels). */
static void integrate(integrand fn, void *ctx, const struct zone *z, int nz, double from, double out[2]) {
  double pts[2 * MAX_CUTS + 2];
  int n = 0;
  pts[n++] = from;
  pts[n++] = TAIL;
  for (int i = 0; i < nz; i++) {
    if (z[i].lo > from && z[i].lo < TAIL) pts[n++] = z[i].lo;
    if (z[i].hi > from && z[i].hi < TAIL) pts[n++] = z[i].hi;
  }
  for (int i = 1; i < n; i++) /* insertion sort: a handful of points */
    for (int j = i; j > 0 && pts[j - 1] > pts[j]; j--) {
      double t = pts[j];
      pts[j] = pts[j - 1];
      pts[j - 1] = t;
    }
  out[0] = out[1] = 0.0;
  for (int i = 0; i + 1 < n; i++) {
    double a = pts[i], b = pts[i + 1], width = GAUSS_W, c = 0.5 * (a + b);
    if (!(b > a)) continue;
    for (int k = 0; k < nz; k++)
      if (c > z[k].lo && c < z[k].hi && z[k].width < width) width = z[k].width;
    double panels = ceil((b - a) / width);
    if (!(panels <= 1e4)) { /* never: every zone's length is a few tens of its width; NaN rather than a guess */
      out[0] = out[1] = NAN;
      return;
    }
    long np = (long)panels;
    double h = 0.5 * (b - a) / (double)np;
    for (long p = 0; p < np; p++) {
      double mid = a + (2.0 * (double)p + 1.0) * h, s0 = 0.0, s1 = 0.0;
      for (int j = 0; j < GL_N / 2; j++) {
        double lo[2], hi[2];
        fn(ctx, mid - h * gl_x[j], lo);
        fn(ctx, mid + h * gl_x[j], hi);
        s0 += gl_w[j] * (lo[0] + hi[0]);
        s1 += gl_w[j] * (lo[1] + hi[1]);
      }
      out[0] += h * s0;
      out[1] += h * s1;
    }
  }
}

/* ---- the Gaussian expectations ---------------------------------------------- */

static double phi(double t) { return INV_SQRT_2PI * exp(-0.5 * t * t); }

/* G(m) = E[f(m + s w)] and E[f'(m + s w)], in w. */
struct inner {
  const struct ntk_map *map;
  double m, s;
};

static void inner_fn(void *ctx, double t, double out[2]) {
  const struct inner *c = ctx;
  double f, d, w = phi(t);
  eval(c->map, c->m + c->s * t, &f, &d);
  out[0] = f * w;
  out[1] = d * w;
}

/* E[f(m + s w)], E[f'(m + s w)] for s > 0: narrow panels where f has its
 * structure, y = m + s t in [-X, X], split at y = 0. */
static void gauss(const struct ntk_map *map, double m, double s, double out[2]) {
  struct inner c = {map, m, s};
  double x = reach(map);
  struct zone z[2] = {{(-x - m) / s, (x - m) / s, f_width(map) / s}, {-m / s, -m / s, GAUSS_W}};
  integrate(inner_fn, &c, z, 2, -TAIL, out);
}

/* The pair: E[f(u) G(c u)] over u = sigma1 z. */
struct outer {
  const struct ntk_map *map;
  double sigma1, c, s; /* s == 0: v = c u exactly */
};

static void outer_fn(void *ctx, double z, double out[2]) {
  const struct outer *c = ctx;
  double u = c->sigma1 * z, f, d, g[2], w = phi(z);
  eval(c->map, u, &f, &d);
  if (c->s > 0) gauss(c->map, c->c * u, c->s, g);
  else eval(c->map, c->c * u, &g[0], &g[1]);
  out[0] = f * g[0] * w;
  out[1] = d * g[1] * w;
}

/* ---- tanh and sigmoid as scale mixtures of Gaussian CDFs -------------------- */

/* The logistic function is a scale mixture of normal CDFs: sigmoid(x) =
 * E[Phi(x / S)] with S = 2K, K Kolmogorov-distributed (Andrews and Mallows
 * 1974; Stefanski 1991). So for (u, v) of covariance Q, with S1, S2
 * independent of them and of each other, as for Erf (docs/MATH.md):
 *   E[sigmoid(u) sigmoid(v)] = 1/4 + E[asin(q12 / sqrt((q11 + S1^2)(q22 + S2^2)))] / (2 pi),
 *   E[sigmoid'(u) sigmoid'(v)] = E[1 / sqrt((q11 + S1^2)(q22 + S2^2) - q12^2)] / (2 pi),
 * and tanh(x) = 2 sigmoid(2x) - 1 is the same at 4Q. The expectation over
 * (S1, S2) is a smooth two-dimensional integral whatever Q: a fixed
 * product rule of mix_n x mix_n nodes instead of the pair's nested one,
 * 15-40x faster. */
/* The trapezoidal rule in log K from MIX_LO to MIX_HI: P(K < 0.15) ~ e^-55
 * and P(K > 4.6) ~ e^-42 are left out; step 0.12 (30 nodes) errs by
 * ~1e-15, 0.15 by 3e-12. */
#define MIX_H 0.12
#define MIX_LO 0.15
#define MIX_HI 4.6
#define MIX_MAX 64
static int mix_n;
static double mix_s2[MIX_MAX], mix_w[MIX_MAX]; /* S^2 at the nodes, and their weights times K's density */
/* The Kolmogorov distribution's density: from its theta-function form
 * sqrt(2 pi) / k sum exp(-(2j-1)^2 pi^2 / (8 k^2)) below 1, from
 * 1 - 2 sum (-1)^(j-1) exp(-2 j^2 k^2) above (both converge fast there). */
static double kolmogorov_density(double k) {
  double s = 0.0;
  if (k < 1.0) {
    for (int j = 1; j < 40; j++) {
      double a = (2.0 * j - 1.0) * (2.0 * j - 1.0) * NTK_PI * NTK_PI / 8.0;
      s += exp(-a / (k * k)) * (2.0 * a / (k * k * k * k) - 1.0 / (k * k));
    }
    return sqrt(2.0 * NTK_PI) * s;
  }
  for (int j = 1; j < 40; j++) s += (j % 2 ? 1.0 : -1.0) * j * j * exp(-2.0 * j * j * k * k);
  return 8.0 * k * s;
}

static void mix_init(void) {
  double t0 = log(MIX_LO), t1 = log(MIX_HI);
  int n = (int)ceil((t1 - t0) / MIX_H);
  if (n >= MIX_MAX) n = MIX_MAX - 1;
  for (int i = 0; i <= n; i++) {
    double k = exp(t0 + i * MIX_H);
    mix_s2[i] = 4.0 * k * k;
    mix_w[i] = MIX_H * k * kolmogorov_density(k);
  }
  mix_n = n + 1;
}

/* The correlation rho = q12 / sqrt(q11 q22) and 1 - rho^2, the latter to a
 * few units in its last place at any variance: Kahan's fma form of
 * q11 q22 - q12^2 on the variances scaled by powers of two into [1, 4)
 * (the plain difference loses every digit near |rho| = 1: at variances
 * 1e9 it errs by ~100 where the terms added to it are ~1e8; and q11 q22
 * overflows past 1e154). |rho| a rounding above 1 is 1; a zero variance
 * gives rho = 0. */
static double correlation(double q12, double q11, double q22, double *omr) {
  if (!(q11 > 0 && q22 > 0)) {
    *omr = 1.0;
    return 0.0;
  }
  int e1, e2;
  frexp(q11, &e1);
  frexp(q22, &e2);
  double x11 = ldexp(q11, -2 * (e1 / 2)), x22 = ldexp(q22, -2 * (e2 / 2)), x12 = ldexp(q12, -(e1 / 2) - (e2 / 2));
  double w = x12 * x12, err = fma(-x12, x12, w), f = fma(x11, x22, -w), det = f + err;
  double rho = x12 / sqrt(x11) / sqrt(x22);
  if (!(det > 0) || fabs(rho) >= 1.0) {
    *omr = 0.0;
    return copysign(1.0, q12);
  }
  *omr = det / x11 / x22;
  return rho;
}

/* The pair by the mixture, for the functions that are one (tanh at 4Q
 * through sigmoid): over the node pairs (S1^2, S2^2) = (s1, s2), with
 * a = q11 + s1, b = q22 + s2 and d = ab - q12^2 > 0, each term a closed
 * form:
 * - sigmoid: asin(q12 / sqrt(ab)) and 1 / sqrt(d), as above;
 * - softplus(x) = E[relu(x + S Z)] (the integral of E[Phi(x / S)], Z
 *   standard normal): ReLU's arc-cosine kernel at Q + diag(s1, s2),
 *   (sqrt(d) + (pi - theta) q12) / (2 pi), theta = atan2(sqrt(d), q12), and
 *   softplus' = sigmoid, (pi - theta) / (2 pi);
 * - silu(x) = x sigmoid(x) = E[S gelu(x / S)], gelu(x) = x Phi(x): Gelu's
 *   closed form (kernel_maps.h) at the covariance Q / (S1 S2) scaled back,
 *   [(q12^2 s1 s2 + q11 q22 d) / (ab D) + q12 angle] / (2 pi) + q12 / 4 with
 *   D = sqrt(d), angle = atan2(q12, D), and its factor
 *   q12 / (2 pi D) (s1 s2 / d + (s1 s2 - q11 q22) / (ab) + 1) + 1/4 + angle / (2 pi).
 * Everything is written in ratios that stay in range at any variance a
 * double holds: x = q12 / sqrt(ab) = rho sqrt(ra rb) and
 * delta = d / (ab) = (1 - rho^2) ra rb + ra sb + sa rb + sa sb, with
 * ra = q11 / a, sa = s1 / a (rb, sb alike); 1 - |x| = delta / (1 + |x|)
 * without cancellation. The sums, each / (2 pi), in *g and *t; the caller
 * adds the constant terms (1/4, q12 / 4), which the weights then need not
 * sum to exactly. */
static void mixture(int fn, double q12, double q11, double q22, double *g, double *t) {
  double omr, rho = correlation(q12, q11, q22, &omr);
  double rb[MIX_MAX], sb[MIX_MAX], sqb[MIX_MAX], srb[MIX_MAX];
  for (int j = 0; j < mix_n; j++) {
    double b = q22 + mix_s2[j];
    rb[j] = q22 / b;
    srb[j] = sqrt(rb[j]);
    sb[j] = mix_s2[j] / b;
    sqb[j] = sqrt(b);
  }
  double sg = 0.0, st = 0.0;
  for (int i = 0; i < mix_n; i++) {
    double a = q11 + mix_s2[i], ra = q11 / a, sra = sqrt(ra), sa = mix_s2[i] / a, sqa = sqrt(a), rg = 0.0, rt = 0.0;
    for (int j = 0; j < mix_n; j++) {
      double x = rho * sra * srb[j]; /* not sqrt(ra rb), which underflows at variances of 1e-160 */
      double delta = omr * ra * rb[j] + ra * sb[j] + sa * rb[j] + sa * sb[j], sd = sqrt(delta);
      double gij, tij;
      switch (fn) {
      case NTK_FN_SIGMOID:
        gij = fabs(x) <= 0.5 ? asin(x) : copysign(NTK_PI_2 - 2.0 * asin(sqrt(0.5 * delta / (1.0 + fabs(x)))), x);
        tij = 1.0 / (sqa * sqb[j] * sd);
        break;
      case NTK_FN_SOFTPLUS: {
        double theta = atan2(sd, x);
        gij = sqa * sqb[j] * sd + (NTK_PI - theta) * q12;
        tij = NTK_PI_2 - theta; /* + pi/2 outside: (pi - theta) */
        break;
      }
      default: { /* NTK_FN_SILU */
        double angle = atan2(x, sd), ss = sa * sb[j], rr = ra * rb[j];
        gij = sqa * sqb[j] * (x * x * ss / sd + rr * sd) + q12 * angle;
        tij = x / sd * (ss / delta + ss - rr + 1.0) + angle;
        break;
      }
      }
      rg += mix_w[j] * gij;
      rt += mix_w[j] * tij;
    }
    sg += mix_w[i] * rg;
    st += mix_w[i] * rt;
  }
  *g = sg / (2.0 * NTK_PI);
  *t = st / (2.0 * NTK_PI);
}

/* ---- the pair by nested quadrature ----------------------------------------- */

/* Every function, the Elu family's only way: E[f(u) G(c u)] by composite
 * Gauss-Legendre in both variables. */
static double nested(const struct ntk_map *m, double q12, double q11, double q22, double *tdot) {
  double r[2];
  if (!(q11 > 0) || !(q22 > 0)) { /* u or v is 0: f(0) E[f(the other)] */
    double f0, d0, q = q11 > 0 ? q11 : q22;
    eval(m, 0.0, &f0, &d0);
    if (q > 0) gauss(m, 0.0, sqrt(q), r);
    else r[0] = f0, r[1] = d0;
    *tdot = d0 * r[1];
    return f0 * r[0];
  }
  double sigma1 = sqrt(q11), sigma2 = sqrt(q22), omr, rho = correlation(q12, q11, q22, &omr);
  double c = rho * (sigma2 / sigma1), s = sigma2 * sqrt(omr); /* v = c u + s w; s = 0: |rho| = 1 */
  double x = reach(m), wf = f_width(m), cs = fabs(c) * sigma1;
  struct zone z[4];
  int nz = 0;
  z[nz++] = (struct zone){-x / sigma1, x / sigma1, wf / sigma1}; /* f(u) */
  z[nz++] = (struct zone){0.0, 0.0, GAUSS_W};                    /* f's kink, G's when s = 0 */
  if (cs > 0) {                                                  /* G(c u) */
    double reach_g = x + TAIL * s, width_g = s > 0 && 2.0 * s > wf ? 2.0 * s : wf;
    z[nz++] = (struct zone){-reach_g / cs, reach_g / cs, width_g / cs};
    if (s > 0 && kinked(m)) z[nz++] = (struct zone){-TAIL * s / cs, TAIL * s / cs, 2.0 * s / cs};
  }
  struct outer o = {m, sigma1, c, s};
  /* tanh is odd, its derivative even, so are G and G': both integrands are
   * even in z, and half the line is enough */
  int odd = m->degree == NTK_FN_TANH;
  integrate(outer_fn, &o, z, nz, odd ? 0.0 : -TAIL, r);
  *tdot = odd ? 2.0 * r[1] : r[1];
  return odd ? 2.0 * r[0] : r[0];
}

static int covariance(double q12, double q11, double q22) {
  return q11 >= 0 && q22 >= 0 && isfinite(q11) && isfinite(q22) && isfinite(q12);
}

double ntk_numerical_map(const struct ntk_map *m, double q12, double q11, double q22, double *tdot) {
  pthread_once(&gl_once, gl_init);
  if (!covariance(q12, q11, q22)) {
    *tdot = NAN;
    return NAN;
  }
  double g, t;
  switch (m->degree) {
  case NTK_FN_TANH: /* tanh(x) = 2 sigmoid(2x) - 1 and E[sigmoid(2u)] = 1/2 */
    mixture(NTK_FN_SIGMOID, 4.0 * q12, 4.0 * q11, 4.0 * q22, &g, &t);
    *tdot = 16.0 * t;
    return 4.0 * g;
  case NTK_FN_SIGMOID:
    mixture(NTK_FN_SIGMOID, q12, q11, q22, &g, &t);
    *tdot = t;
    return 0.25 + g;
  case NTK_FN_SOFTPLUS:
    mixture(NTK_FN_SOFTPLUS, q12, q11, q22, &g, &t);
    *tdot = 0.25 + t;
    return g;
  case NTK_FN_SILU:
    mixture(NTK_FN_SILU, q12, q11, q22, &g, &t);
    *tdot = 0.25 + t;
    return 0.25 * q12 + g;
  default: return nested(m, q12, q11, q22, tdot);
  }
}

double ntk_numerical_map_nested(const struct ntk_map *m, double q12, double q11, double q22, double *tdot) {
  pthread_once(&gl_once, gl_init);
  if (!covariance(q12, q11, q22)) {
    *tdot = NAN;
    return NAN;
  }
  return nested(m, q12, q11, q22, tdot);
}

/* ---- names --------------------------------------------------------------------- */

const char *ntk_numfn_name(int fn) {
  static const char *const names[NTK_FN_COUNT] = {
      [NTK_FN_TANH] = "Tanh", [NTK_FN_SIGMOID] = "Sigmoid", [NTK_FN_SOFTPLUS] = "Softplus", [NTK_FN_SILU] = "Silu",
      [NTK_FN_ELU] = "Elu",   [NTK_FN_SELU] = "Selu",       [NTK_FN_CELU] = "Celu"};
  return fn >= 0 && fn < NTK_FN_COUNT ? names[fn] : "?";
}
