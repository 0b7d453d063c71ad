#!/usr/bin/env python3
"""High-precision reference kernel maps of nonlinearities without a closed
form (ntkd's ElementwiseNumerical), independent of ntkd's C code and of
neural-tangents' Gauss-Hermite quadrature.

Run with the pinned reference venv (scripts/nt_reference.sh creates it; it
pins mpmath and gmpy2 too):

    /opt/ntkd-ref-venv/bin/python scripts/numerical_reference.py
        writes tests/data/ref_numerical_map.txt and tests/data/ref_numerical.txt
    ... --check     only the self-checks (closed-form Erf map, two methods)
    ... --nt        neural-tangents' ElementwiseNumerical (deg 25, 101, 201)
                    against tests/data/ref_numerical.txt; writes
                    docs/numerical-nt-accuracy.md

Definitions. For a pair (u, v) ~ N(0, [[q11, q12], [q12, q22]]):
    nngp_map(q11, q22, q12) = E[f(u) f(v)],  tdot(q11, q22, q12) = E[f'(u) f'(v)].

How. u = s1 z1, v = s2 (rho z1 + c z2) with z1, z2 independent standard
normals, s = sqrt(q), c = sqrt(1 - rho^2). The expectation is the nested
integral  int phi(z1) f(u) [ int phi(z2) f(a + b z2) dz2 ] dz1  with
a = s2 rho z1, b = s2 c. Each 1-D integral is composite Gauss-Legendre over
panels: a Gaussian grid on [-L, L] (the Gaussian beyond L is below 1e-36),
plus the point where f's argument is 0 (f's kink, or the centre of its
complex singularities at distance >= pi/2 off the real axis) with panels
graded geometrically from there, from the width K / (multiplier of z in f's
argument) up to 2. So a variance of 1e6 (the structure of tanh 1e-3 wide
against the Gaussian) and a correlation 0.999999 (the inner Gaussian 1e-3
wide against f) are resolved alike; the inner panels move with the outer
node. Arithmetic is MPFR (gmpy2) at 113 or 120 bits; Gauss-Legendre nodes
come from mpmath.

Degenerate cases exactly: q11 = 0 (u = 0: f(0) E[f(v)]), q22 = 0, both,
q12 = 0 (E[f(u)] E[f(v)]) and |rho| = 1 exactly (q12^2 = q11 q22:
v = +-sqrt(q22/q11) u, a 1-D integral). For selu, whose derivative jumps at
0, f'(0) is what jax.grad(jax.nn.selu)(0.) gives and so what
neural-tangents' ElementwiseNumerical uses at a zero variance: the negative
side's scale * alpha (jax.nn.selu is a jnp.where(x > 0, ...)). Only the tdot
of a zero variance depends on it; in a network its NTK factor multiplies an
NTK of 0.

Proof of accuracy. Every value is computed twice: method A (113 bits,
20-point Gauss-Legendre panels, Gaussian grid 0 +-1.5 +-3 ... +-9.5 +-13,
grading from K = 0.5 / s, outer variable u) and method B (120 bits, 22
points, grid 0 +-1.25 +-2.5 ... +-10 +-13.5, grading from K = 0.35 / s, and
the roles of u and v swapped: outer variable v, inner u | v). The script
stops if they differ by more than 1e-20 times sqrt(E f(u)^2 E f(v)^2) (for
tdot: of f'), and it checks first that both methods reproduce the
closed-form Erf map 2/pi asin(2 q12 / sqrt((1 + 2 q11)(1 + 2 q22))) and its
tdot 4/pi / sqrt((1 + 2 q11)(1 + 2 q22) - 4 q12^2) to 1e-25 of the value,
through the same code (every branch: general, |rho| = 1, zero variance).
With --nt it also checks that the definitions here are jax's: f and
jax.grad(f) at ten points, to 1e-14.
"""
import argparse
import os
import sys
import time
import zlib
from fractions import Fraction

import gmpy2
import mpmath
from gmpy2 import mpfr

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SELU_ALPHA = '1.6732632423543772848170429916717'
SELU_SCALE = '1.0507009873554804934193349852946'
FUNCS = ['Tanh', 'Sigmoid', 'Softplus', 'Silu', 'Elu', 'Selu', 'Celu']
KINKED = ('Elu', 'Selu', 'Celu')
TOL = 1e-20  # A vs B, relative to sqrt(E f(u)^2 E f(v)^2)


def ctx(prec):
    return gmpy2.context(gmpy2.get_context(), precision=prec)


# ---------------------------------------------------------------- functions
def make_fn(name):
    """(f, f') at w (mpfr, in the current context); returns a function."""
    exp, expm1, log1p = gmpy2.exp, gmpy2.expm1, gmpy2.log1p
    if name == 'Tanh':
        def F(w):
            if not w:
                return mpfr(0), mpfr(1)
            e1 = expm1(-2 * abs(w))       # e^{-2|w|} - 1 in (-1, 0)
            e = e1 + 1
            t = -e1 / (2 + e1)
            return (t if w > 0 else -t), 4 * e / ((1 + e) * (1 + e))
    elif name in ('Sigmoid', 'Softplus', 'Silu'):
        def sig(w):  # sigma(w), sigma'(w), e^{-|w|}
            e = exp(-abs(w))
            s = 1 / (1 + e) if w >= 0 else e / (1 + e)
            return s, e / ((1 + e) * (1 + e)), e
        if name == 'Sigmoid':
            def F(w):
                s, d, _ = sig(w)
                return s, d
        elif name == 'Softplus':
            def F(w):
                s, _, e = sig(w)
                return log1p(e) + (w if w > 0 else 0), s
        else:
            def F(w):
                s, d, _ = sig(w)
                return w * s, s + w * d
    elif name in ('Elu', 'Celu', 'Selu'):
        if name == 'Selu':
            alpha, scale = mpfr(SELU_ALPHA), mpfr(SELU_SCALE)
        else:  # jax.nn.elu / jax.nn.celu, alpha = 1 (celu: alpha (exp(x / alpha) - 1))
            alpha, scale = mpfr(1), mpfr(1)
        sa = scale * alpha

        def F(w):
            if w > 0:
                return scale * w, scale
            return sa * expm1(w), sa * exp(w)
    elif name == 'Erf':  # closed form known: the check of the integrator
        c2 = 2 / gmpy2.sqrt(gmpy2.const_pi())

        def F(w):
            return gmpy2.erf(w), c2 * exp(-w * w)
    else:
        raise ValueError(name)
    return F


def fprime0(name):
    """f'(0) for the zero-variance cases (selu: jax.grad's, see the docstring)."""
    if name == 'Selu':
        return mpfr(SELU_SCALE) * mpfr(SELU_ALPHA)
    return make_fn(name)(mpfr(0))[1]


# --------------------------------------------------------------- quadrature
class Method:
    def __init__(self, tag, prec, n, grid, L, K, ratio, swap):
        self.tag, self.prec, self.n, self.K, self.ratio, self.swap = tag, prec, n, K, ratio, swap
        self.cache = {}  # panel (lo, hi) -> nodes; the Gaussian grid's panels recur
        with ctx(prec):
            mpmath.mp.prec = prec + 40
            X, W = mpmath.mp.gauss_quadrature(n, 'legendre')
            self.X = [mpfr(mpmath.nstr(x, prec // 3 + 12)) for x in X]
            self.W = [mpfr(mpmath.nstr(w, prec // 3 + 12)) for w in W]
            self.L = mpfr(L)
            g = sorted(set([mpfr(0)] + [mpfr(p) for p in grid] + [-mpfr(p) for p in grid]))
            self.grid = g
            self.norm = 1 / gmpy2.sqrt(2 * gmpy2.const_pi())

    def breaks(self, centre, eps):
        """Gaussian grid, plus centre and points graded from it (eps up to 2)."""
        L = self.L
        pts = list(self.grid)
        if centre is not None and -L - 2 < centre < L + 2:
            pts.append(centre)
            t = mpfr(eps)
            while t < 2:
                pts.append(centre + t)
                pts.append(centre - t)
                t *= self.ratio
        pts = sorted(p for p in pts if -L <= p <= L)
        out = [pts[0]]
        for p in pts[1:]:
            if p > out[-1]:
                out.append(p)
        return out

    def nodes(self, centre, eps):
        """[(z, weight * phi(z))] on the panels."""
        bp = self.breaks(centre, eps)
        X, W, norm, exp, cache = self.X, self.W, self.norm, gmpy2.exp, self.cache
        if len(cache) > 20000:
            cache.clear()
        out = []
        for lo, hi in zip(bp, bp[1:]):
            panel = cache.get((lo, hi))
            if panel is None:
                m, h = (lo + hi) / 2, (hi - lo) / 2
                hn = h * norm
                panel = [(z, w * hn * exp(-z * z / 2)) for z, w in ((m + h * x, w) for x, w in zip(X, W))]
                cache[(lo, hi)] = panel
            out += panel
        return out

    def eps(self, s):
        """Finest panel for f(s z): K / s (capped at 1)."""
        return min(mpfr(1), self.K / s) if s > 0 else mpfr(1)

    def one_d(self, F, s1, s2, sign):
        """E[f(s1 z) f(sign s2 z)], E[f'(..) f'(..)]; s1, s2 > 0."""
        e = min(self.eps(s1), self.eps(s2))
        a = b = mpfr(0)
        for z, w in self.nodes(mpfr(0), e):
            f1, d1 = F(s1 * z)
            f2, d2 = F(sign * s2 * z)
            a += w * f1 * f2
            b += w * d1 * d2
        return a, b

    def mean(self, F, s):
        """E[f(s z)], E[f'(s z)]."""
        a = b = mpfr(0)
        for z, w in self.nodes(mpfr(0), self.eps(s)):
            f, d = F(s * z)
            a += w * f
            b += w * d
        return a, b

    def two_d(self, F, q11, q22, q12, kinked):
        """General case: q11, q22 > 0, |rho| < 1."""
        if self.swap:
            q11, q22 = q22, q11
        s1, s2 = gmpy2.sqrt(q11), gmpy2.sqrt(q22)
        rho = q12 / (s1 * s2)
        b = gmpy2.sqrt((q11 * q22 - q12 * q12) / q11)  # s2 sqrt(1 - rho^2)
        K = self.K
        # the outer integrand: f(s1 z1) (scale K / s1) times g(s2 rho z1),
        # g = f smoothed by N(0, b^2): scale max(K, b) in its argument, for
        # a kink (elu) b
        e_out = self.eps(s1)
        if rho != 0:
            e_out = min(e_out, (min(K, b) if kinked else max(K, b)) / (s2 * abs(rho)))
        e_in = self.eps(b)
        acc_f = acc_d = mpfr(0)
        for z1, w1 in self.nodes(mpfr(0), e_out):
            fu, du = F(s1 * z1)
            a = s2 * rho * z1
            gf = gd = mpfr(0)
            for z2, w2 in self.nodes(-a / b, e_in):
                fv, dv = F(a + b * z2)
                gf += w2 * fv
                gd += w2 * dv
            acc_f += w1 * fu * gf
            acc_d += w1 * du * gd
        return acc_f, acc_d


METHOD_A = Method('A', 113, 20, [1.5, 3, 4.5, 6, 7.5, 9.5, 13], 13, 0.5, 2, False)
METHOD_B = Method('B', 120, 22, [1.25, 2.5, 3.75, 5, 6.5, 8, 10, 13.5], 13.5, 0.35, 2, True)
HIPREC = 200  # the network recursion and the inputs of the maps


def kmap_method(meth, name, q11, q22, q12):
    """(nngp_map, tdot) by one method; q's mpfr (any precision), exact inputs."""
    F = make_fn(name)
    with ctx(HIPREC):
        if q11 < 0 or q22 < 0 or q12 * q12 > q11 * q22:
            raise ValueError('not a covariance: %r %r %r' % (q11, q22, q12))
        det = q11 * q22 - q12 * q12  # exact at HIPREC for the inputs used here
        rho1 = q11 > 0 and q22 > 0 and det <= q11 * q22 * mpfr('1e-45')
    with ctx(meth.prec):
        q11, q22, q12 = mpfr(q11), mpfr(q22), mpfr(q12)
        if q11 == 0 and q22 == 0:
            f0, d0 = F(mpfr(0))[0], fprime0(name)
            return f0 * f0, d0 * d0
        if q11 == 0 or q22 == 0:
            f0, d0 = F(mpfr(0))[0], fprime0(name)
            m, md = meth.mean(F, gmpy2.sqrt(q22 if q11 == 0 else q11))
            return f0 * m, d0 * md
        if rho1:
            return meth.one_d(F, gmpy2.sqrt(q11), gmpy2.sqrt(q22), 1 if q12 > 0 else -1)
        if q12 == 0:  # independent: E[f(u)] E[f(v)]
            m1, d1 = meth.mean(F, gmpy2.sqrt(q11))
            m2, d2 = meth.mean(F, gmpy2.sqrt(q22))
            return m1 * m2, d1 * d2
        return meth.two_d(F, q11, q22, q12, name in KINKED)


STATS = {'maps': 0, 'worst': 0.0, 'worst_at': None}


def kmap(name, q11, q22, q12, check=True):
    """(nngp_map, tdot) at HIPREC-rounded method A, verified against B."""
    a = kmap_method(METHOD_A, name, q11, q22, q12)
    if not check:
        return a
    b = kmap_method(METHOD_B, name, q11, q22, q12)
    with ctx(HIPREC):
        d1 = kmap_method(METHOD_A, name, q11, q11, q11)
        d2 = kmap_method(METHOD_A, name, q22, q22, q22)
        for k, what in ((0, 'nngp'), (1, 'tdot')):
            scale = gmpy2.sqrt(abs(d1[k] * d2[k]))
            diff = abs(mpfr(a[k]) - mpfr(b[k]))
            rel = float(diff / scale) if scale > 0 else float(diff)
            STATS['maps'] += 1
            if rel > STATS['worst']:
                STATS['worst'], STATS['worst_at'] = rel, (name, what, float(q11), float(q22), float(q12))
            if not rel <= TOL:
                sys.exit('numerical_reference: methods A and B disagree for %s %s at q11=%r q22=%r q12=%r: '
                         '%s vs %s (relative %g > %g)' % (name, what, float(q11), float(q22), float(q12),
                                                          a[k], b[k], rel, TOL))
    return a


# ------------------------------------------------------------ Erf check
def erf_check():
    """The integrator (both methods, every branch) against the closed-form Erf map."""
    worst = 0.0
    triples = [(1, 1, 0.3), (0.3, 20, -0.5), (300, 1e4, 1500), (1e6, 1e6, 0.999999e6),
               (4, 4, 4), (1e4, 1e6, -1e5), (0, 20, 0), (1e-6, 1e-6, 0.999999e-6)]
    with ctx(HIPREC):
        pi = gmpy2.const_pi()
        for q11, q22, q12 in triples:
            q11, q22, q12 = mpfr(q11), mpfr(q22), mpfr(q12)
            r2 = (1 + 2 * q11) * (1 + 2 * q22)
            nngp = 2 / pi * gmpy2.asin(2 * q12 / gmpy2.sqrt(r2))
            tdot = 4 / pi / gmpy2.sqrt(r2 - 4 * q12 * q12)
            for meth in (METHOD_A, METHOD_B):
                got = kmap_method(meth, 'Erf', q11, q22, q12)
                for g, want in zip(got, (nngp, tdot)):
                    e = float(abs(mpfr(g) - want) / abs(want)) if want else float(abs(g))
                    worst = max(worst, e)
                    if not e <= 1e-25:
                        sys.exit('numerical_reference: Erf check failed (%s) at %s: %s vs %s (%g)'
                                 % (meth.tag, (float(q11), float(q22), float(q12)), g, want, e))
    return worst


# ---------------------------------------------------------- map grid (a)
def map_triples():
    """~40 (q11, q22, q12) doubles; |rho| = 1 only where q12^2 = q11 q22 exactly."""
    out = []
    same = [1e-6, 1e-3, 0.3, 1.0, 4.0, 20.0, 300.0, 1e4, 1e6]
    for q in same:
        out.append((q, q, 0.0))
        out.append((q, q, q))         # rho = 1 exactly
    for q in [1e-6, 1.0, 20.0, 1e6]:
        for rho in (0.3, -0.3, 0.9, 0.999999):
            out.append((q, q, rho * q))
    out.append((1e4, 1e4, 0.3 * 1e4))
    out.append((20.0, 20.0, -20.0))   # rho = -1 exactly
    out.append((1e6, 1e6, -1e6))
    for q11, q22 in [(1e-6, 1e6), (1e-3, 300.0), (1.0, 20.0), (20.0, 1e-3)]:
        for rho in (0.3, -0.9, 0.999999):
            out.append((q11, q22, rho * (q11 * q22) ** 0.5))
    out.append((0.3, 1e4, 0.9 * (0.3 * 1e4) ** 0.5))
    out.append((4.0, 1e6, -0.3 * (4.0 * 1e6) ** 0.5))
    # rho = +-1 exactly with unequal variances (q11 q22 a square of a double)
    out += [(1.0, 4.0, 2.0), (4.0, 1e6, 2000.0), (1e4, 1e6, -1e5), (0.25, 1e4, 50.0)]
    # zero variances
    out += [(0.0, 0.0, 0.0), (0.0, 1.0, 0.0), (1e6, 0.0, 0.0), (0.0, 1e-6, 0.0)]
    for q11, q22, q12 in out:
        if q12 * q12 == q11 * q22 and q11 * q22 > 0:
            assert Fraction(q12) ** 2 == Fraction(q11) * Fraction(q22)
        assert Fraction(q12) ** 2 <= Fraction(q11) * Fraction(q22)
    return out


def write_map(path, quick=False):
    triples = map_triples()
    lines = []
    for name in FUNCS:
        for q11, q22, q12 in triples:
            t0 = time.time()
            nngp, tdot = kmap(name, mpfr(q11), mpfr(q22), mpfr(q12))
            lines.append('%s %.17g %.17g %.17g %.17g %.17g' % (name, q11, q22, q12, float(nngp), float(tdot)))
            if time.time() - t0 > 5:
                print('  slow: %s %g %g %g %.1fs' % (name, q11, q22, q12, time.time() - t0), file=sys.stderr)
        print('map %s done (%d triples)' % (name, len(triples)), file=sys.stderr)
    with open(path, 'w') as f:
        f.write('\n'.join(header_common() + [
            '# lines: fn q11 q22 q12 nngp_map tdot  (%.17g; q12 = rho sqrt(q11 q22) in float64,',
            '#   the reference is exact for the written doubles; rho = +-1 only where q12^2 = q11 q22 exactly)',
            '# nngp_map = E[f(u) f(v)], tdot = E[f\'(u) f\'(v)], (u, v) ~ N(0, [[q11, q12], [q12, q22]])',
        ]) + '\n')
        f.write('\n'.join(lines) + '\n')


def header_common():
    return [
        '# generator: scripts/numerical_reference.py (ntkd), mpmath %s, gmpy2 %s (%s)'
        % (mpmath.__version__, gmpy2.version(), gmpy2.mpfr_version()),
        '# functions (jax.nn conventions): Tanh tanh; Sigmoid 1/(1+exp(-x)); Softplus log(1+exp(x));',
        '#   Silu x sigmoid(x); Elu x>0 ? x : exp(x)-1; Celu (alpha 1) the same;',
        '#   Selu scale (x>0 ? x : alpha (exp(x)-1)), alpha %s, scale %s' % (SELU_ALPHA, SELU_SCALE),
        '# f\' the true derivative; Selu\'(0) := scale alpha, as jax.grad (matters only for a zero variance)',
        '# every value computed twice (113-bit and 120-bit nested Gauss-Legendre, 20 and 22 points,',
        '#   different panels, outer variable u resp. v); they agree to %g of sqrt(E f(u)^2 E f(v)^2)' % TOL,
    ]


# ------------------------------------------------------ network cases (b)
def case_x(name, n, d, k, zero_rows=(), dup=(), neg=()):
    """RandomState(crc32(name)) normals, rounded to multiples of 1/8, times 2^k."""
    import numpy as np
    rng = np.random.RandomState(zlib.crc32(name.encode()) & 0x7fffffff)
    x = np.round(rng.standard_normal((n, d)) * 8) / 8 * 2.0 ** k
    for i in zero_rows:
        x[i] = 0
    for i, j in dup:
        x[j] = x[i]
    for i, j in neg:
        x[j] = -x[i]
    return [[float(v) + 0.0 for v in row] for row in x]  # no -0


def dense(W, b):
    return ('Dense', W, b)


def net_cases():
    cases = []
    # (tag, W, b, k): first-layer variances ~ 0.01, ~1, ~20, ~1e4
    regimes = [('v001', 1.5, 0.05, -4), ('v1', 1.0, 0.1, 0), ('v20', 2.0, 0.5, 1), ('v1e4', 1.5, 0.1, 6)]
    for fn in FUNCS:
        for tag, W, b, k in regimes:
            name = 'num_%s_%s' % (fn.lower(), tag)
            cases.append(dict(name=name, layers=[dense(W, b), ('Num', fn), dense(W, b)],
                              x=case_x(name, 5, 4, k)))
    for tag, W, b, k in [('v20', 2.0, 0.5, 1)]:
        name = 'num_tanh_deep_%s' % tag
        cases.append(dict(name=name, layers=[dense(W, b), ('Num', 'Tanh')] * 3 + [dense(W, b)],
                          x=case_x(name, 5, 4, k)))
    # b_std = 0 with a zero row (variance exactly 0), duplicate rows (rho = 1)
    # and a negated row (rho = -1)
    for fn in ['Tanh', 'Sigmoid', 'Selu']:
        name = 'num_%s_b0_zero_dup' % fn.lower()
        cases.append(dict(name=name, layers=[dense(1.5, 0.0), ('Num', fn), dense(1.5, 0.0), ('Num', fn),
                                             dense(1.5, 0.0)],
                          x=case_x(name, 6, 5, 1, zero_rows=(2,), dup=((0, 4),), neg=((1, 5),))))
    name = 'num_elu_dup_v20'
    cases.append(dict(name=name, layers=[dense(2.0, 0.5), ('Num', 'Elu'), dense(2.0, 0.5)],
                      x=case_x(name, 5, 4, 1, dup=((1, 3),))))
    return cases


def short(v):
    """The shortest decimal that reads back as the double v (0.05, 1.5, 0)."""
    r = repr(float(v))
    return r[:-2] if r.endswith('.0') else r


def arch_string(layers):
    out = []
    for l in layers:
        if l[0] == 'Dense':
            out.append('Dense(W_std=%s,b_std=%s)' % (short(l[1]), short(l[2])))
        else:
            out.append('ElementwiseNumerical(%s)' % l[1])
    return ' '.join(out)


def net_kernels(case, check=True):
    x, layers = case['x'], case['layers']
    n, d = len(x), len(x[0])
    with ctx(HIPREC):
        X = [[mpfr(v) for v in row] for row in x]
        nngp = [[sum(X[i][t] * X[j][t] for t in range(d)) / d for j in range(n)] for i in range(n)]
        ntk = [[mpfr(0)] * n for _ in range(n)]  # the inputs carry no parameters: ntk1 = nngp1
        for l in layers:
            if l[0] == 'Dense':
                W2, b2 = mpfr(l[1]) ** 2, mpfr(l[2]) ** 2  # the doubles W_std, b_std
                nngp = [[W2 * v + b2 for v in row] for row in nngp]
                ntk = [[nngp[i][j] + W2 * ntk[i][j] for j in range(n)] for i in range(n)]
            else:
                new = [[None] * n for _ in range(n)]
                nt2 = [[None] * n for _ in range(n)]
                for i in range(n):
                    for j in range(i, n):
                        m, t = kmap(l[1], nngp[i][i], nngp[j][j], nngp[i][j], check=check)
                        with ctx(HIPREC):
                            new[i][j] = new[j][i] = mpfr(m)
                            nt2[i][j] = ntk[i][j] * mpfr(t)
                            nt2[j][i] = ntk[j][i] * mpfr(t)
                nngp, ntk = new, nt2
    return [[float(v) for v in row] for row in nngp], [[float(v) for v in row] for row in ntk]


def write_net(path, check=True):
    cases = net_cases()
    with open(path, 'w') as f:
        f.write('\n'.join(header_common() + [
            '# NNGP/NTK of infinitely wide networks, NT\'s \'ntk\' parameterization: first Dense',
            '#   nngp = ntk = W^2 x x^T / d + b^2; Dense nngp\' = W^2 nngp + b^2, ntk\' = nngp\' + W^2 ntk;',
            '#   ElementwiseNumerical(f) nngp\' = nngp_map(nngp_ii, nngp_jj, nngp_ij), ntk\' = ntk tdot(...)',
            '#   (the recursion in 200-bit arithmetic, the results rounded once to double)',
            '# x: per-case np.random.RandomState(crc32(name)) standard normal rounded to multiples of 1/8,',
            '#   times a power of two (exact doubles); some cases with a zero row, duplicate and negated rows',
        ]) + '\n')
        for c in cases:
            t0 = time.time()
            nngp, ntk = net_kernels(c, check)
            n, d = len(c['x']), len(c['x'][0])
            f.write('\ncase %s\narch %s\nshape %d %d\nx\n' % (c['name'], arch_string(c['layers']), n, d))
            for row in c['x']:
                f.write(' '.join('%.17g' % v for v in row) + '\n')
            for label, K in (('nngp', nngp), ('ntk', ntk)):
                f.write(label + '\n')
                for row in K:
                    f.write(' '.join('%.17g' % v for v in row) + '\n')
            f.write('end\n')
            f.flush()
            print('case %s: %.1fs (diag nngp %.3g..%.3g)' % (c['name'], time.time() - t0,
                                                           min(nngp[i][i] for i in range(n)),
                                                           max(nngp[i][i] for i in range(n))), file=sys.stderr)


# --------------------------------------------------------- neural-tangents
def read_ref(path):
    cases, cur, lines = [], None, open(path).read().split('\n')
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith('case '):
            name = ln[5:].strip()
            arch = lines[i + 1][5:].strip()
            n, d = map(int, lines[i + 2].split()[1:3])
            assert lines[i + 3] == 'x'
            x = [list(map(float, lines[i + 4 + r].split())) for r in range(n)]
            assert lines[i + 4 + n] == 'nngp'
            nngp = [list(map(float, lines[i + 5 + n + r].split())) for r in range(n)]
            assert lines[i + 5 + 2 * n] == 'ntk'
            ntk = [list(map(float, lines[i + 6 + 2 * n + r].split())) for r in range(n)]
            cases.append(dict(name=name, arch=arch, x=x, nngp=nngp, ntk=ntk))
            i += 6 + 3 * n
        else:
            i += 1
    return cases


def ref_max_err(got, ref, skip_nan=False):
    """tests/refcase.h's ref_max_err(.., plain = 0): max over entries of
    |got - ref| / max(|ref_ij|, sqrt(|ref_ii ref_jj|)); a NaN of got makes
    it NaN, or with skip_nan is left out."""
    import math
    n, worst = len(ref), 0.0
    for i in range(n):
        for j in range(n):
            r, g = ref[i][j], float(got[i][j])
            if math.isnan(r) or (skip_nan and math.isnan(g)):
                continue
            scale = max(abs(r), math.sqrt(abs(ref[i][i] * ref[j][j])))
            if g == r:
                e = 0.0
            elif math.isnan(g):
                return math.nan  # (refcase.h's loop can drop a NaN met before a finite error)
            else:
                e = abs(g - r) / scale if scale else math.inf
            if not e <= worst:
                worst = e
    return worst


def nt_table(ref_path, out_path):
    os.environ.setdefault('JAX_PLATFORMS', 'cpu')
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
    import warnings
    warnings.filterwarnings('ignore')
    import jax
    jax.config.update('jax_enable_x64', True)
    import jax.numpy as jnp
    import numpy as np
    import neural_tangents as nt
    from neural_tangents import stax
    jfn = {'Tanh': jnp.tanh, 'Sigmoid': jax.nn.sigmoid, 'Softplus': jax.nn.softplus, 'Silu': jax.nn.silu,
           'Elu': jax.nn.elu, 'Selu': jax.nn.selu, 'Celu': jax.nn.celu}
    # the definitions here are jax's: f and jax.grad(f) at a few points
    for name, fn in jfn.items():
        F = make_fn(name)
        for w in (-30.0, -3.5, -1.0, -0.25, -1e-3, 1e-3, 0.25, 1.0, 3.5, 30.0):
            with ctx(113):
                f, d = F(mpfr(w))
            jf, jd = float(fn(w)), float(jax.grad(fn)(w))
            for a, b in ((float(f), jf), (float(d), jd)):
                if not abs(a - b) <= 1e-14 * max(abs(a), 1.0):  # jax rounds tanh'(-30) to 0
                    sys.exit('numerical_reference: %s at %g: %r here, %r in jax' % (name, w, a, b))
    import re
    rows, odd = [], []
    for c in read_ref(ref_path):
        for deg in (25, 101, 201):
            layers = []
            for tok in c['arch'].split():
                m = re.fullmatch(r'Dense\(W_std=([^,]+),b_std=([^)]+)\)', tok)
                if m:
                    layers.append(stax.Dense(1, W_std=float(m.group(1)), b_std=float(m.group(2))))
                    continue
                m = re.fullmatch(r'ElementwiseNumerical\((\w+)\)', tok)
                layers.append(stax.ElementwiseNumerical(jfn[m.group(1)], deg=deg))
            kernel_fn = stax.serial(*layers)[2]
            x = np.array(c['x'], dtype=np.float64)
            k = kernel_fn(x, None, ('nngp', 'ntk'))
            en = ref_max_err(np.asarray(k.nngp), c['nngp'], skip_nan=True)
            et = ref_max_err(np.asarray(k.ntk), c['ntk'], skip_nan=True)
            nans = int(np.isnan(np.asarray(k.nngp)).sum() + np.isnan(np.asarray(k.ntk)).sum())
            if nans:
                odd.append('%s deg %d: %d NaN entries' % (c['name'], deg, nans))
            rows.append((c['name'], deg, en, et, nans))
            print('%s deg %d: nngp %.3g ntk %.3g%s' % (c['name'], deg, en, et, ' (NaN %d)' % nans if nans else ''),
                  file=sys.stderr)
    import jax as _j
    md = ['# neural-tangents\' ElementwiseNumerical against the exact kernels', '',
          'neural-tangents %s (jax %s, float64) `stax.ElementwiseNumerical(fn, deg)` (Gauss-Hermite'
          % (getattr(nt, '__version__', '0.6.5'), _j.__version__),
          'quadrature on deg x deg points, the derivative by `jax.grad`) on the network cases of',
          '`tests/data/ref_numerical.txt`, whose kernels `scripts/numerical_reference.py` computes',
          'to better than 1e-20 (nested Gauss-Legendre in 113- and 120-bit arithmetic, two ways',
          'checked against each other). fn is `jnp.tanh`, `jax.nn.sigmoid`, `softplus`, `silu`,',
          '`elu`, `selu` or `celu`. The case name gives the first layer\'s variances: v001 ~0.01,',
          'v1 ~1, v20 ~20, v1e4 ~1e4 (Dense f Dense; `deep`: three tanh layers); the `b0_zero_dup`',
          'cases have b_std = 0, an input row of zeros (variance exactly 0), a duplicate and a',
          'negated row (correlation exactly +-1), through two nonlinearities.',
          '',
          'Error: tests/refcase.h\'s `ref_max_err` (not plain): the largest over the matrix of',
          '|NT - ref| / max(|ref_ij|, sqrt(ref_ii ref_jj)), over the entries NT does not return as',
          'NaN; the last column counts those (NNGP and NTK together).',
          '',
          'Produced by (about a minute on two cores)',
          '',
          '    /opt/ntkd-ref-venv/bin/python scripts/numerical_reference.py --nt',
          '',
          '| case | NNGP deg 25 | deg 101 | deg 201 | NTK deg 25 | deg 101 | deg 201 | NaN (201) |',
          '|---|---:|---:|---:|---:|---:|---:|---:|']
    by = {}
    for name, deg, en, et, nans in rows:
        by.setdefault(name, {})[deg] = (en, et, nans)
    for name, d in by.items():
        md.append('| %s | %s | %s | %s | %s | %s | %s | %s |' % (
            name, *('%.2g' % d[g][0] for g in (25, 101, 201)), *('%.2g' % d[g][1] for g in (25, 101, 201)),
            d[201][2] if d[201][2] else ''))
    nan_cases = sorted({r[0] for r in rows if r[4]})
    if nan_cases:
        md += ['', 'NaN: %s, at every deg: every entry of the zero input\'s row and column of both'
               % ', '.join(nan_cases),
               'kernels (at the NNGP stage where its variance is exactly 0, NT\'s quadrature computes',
               '`nngp**2 / q11` = 0/0, and the NaN then spreads through its diagonal). The other entries,',
               'duplicate and negated rows included, are compared.']
    with open(out_path, 'w') as f:
        f.write('\n'.join(md) + '\n')
    print('\n'.join(md))


# --------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--check', action='store_true', help='only the self-checks')
    ap.add_argument('--nt', action='store_true', help='the neural-tangents accuracy table')
    ap.add_argument('--only', choices=['map', 'net'])
    ap.add_argument('--map-out', default=os.path.join(ROOT, 'tests/data/ref_numerical_map.txt'))
    ap.add_argument('--net-out', default=os.path.join(ROOT, 'tests/data/ref_numerical.txt'))
    ap.add_argument('--nt-out', default=os.path.join(ROOT, 'docs/numerical-nt-accuracy.md'))
    args = ap.parse_args()
    t0 = time.time()
    if args.nt:
        nt_table(args.net_out, args.nt_out)
        return
    w = erf_check()
    print('Erf closed form reproduced by both methods: worst relative error %.3g (%.1fs)'
          % (w, time.time() - t0), file=sys.stderr)
    if args.check:
        for name in FUNCS:
            for q in [(1.0, 1.0, 0.3), (1e6, 1e6, 0.999999e6), (1e-6, 1e6, 0.3e0), (20.0, 20.0, -6.0)]:
                kmap(name, *map(mpfr, q))
    else:
        if args.only in (None, 'map'):
            write_map(args.map_out)
            print('map: %.1fs' % (time.time() - t0), file=sys.stderr)
        if args.only in (None, 'net'):
            write_net(args.net_out)
    print('A vs B: %d values, worst relative disagreement %.3g at %s; %.1fs in all'
          % (STATS['maps'], STATS['worst'], STATS['worst_at'], time.time() - t0), file=sys.stderr)


if __name__ == '__main__':
    main()
