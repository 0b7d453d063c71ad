#!/usr/bin/env python3
"""Fit the polynomials of the float32 kernel maps (src/kernels/kernel_maps.h).

atan(u), 0 <= u <= tan(pi/8), for ntk_atan2f (the Erf and Gelu maps), is
odd: atan(u) ~= u + u*z*P(z), z = u^2, P of degree 3, fitted by least
squares weighted for relative error.

acos(x) / sqrt(1 - x^2), 0 <= x <= 1, for ntk_acos_over_sinf (the
ReLU-family map), is a polynomial of degree 9 in x, fitted by iteratively
reweighted least squares (Lawson's algorithm, towards the minimax
polynomial of the relative error) on Chebyshev nodes. The function is
analytic on [0, 1]: its only singularity is at x = -1.

Each is printed with its coefficients (constant term first) and the worst
relative error in float64 and when evaluated in float32 as the C code does
(fused multiply-adds emulated in float64: the product of two floats is
exact in a double, the sum is rounded twice, so this is the C code's error
to within a rounding; an exhaustive check over every float in [0, 1] of
the degree-9 polynomial gives 2.0e-7).

and the double maps' atan2 (ntk_atan2): atan(u) = u + u*z*P(z) with P of
degree 10, a Chebyshev fit in 50 digits (mpmath), printed to 17 digits
with its error bound (run with a Python that has mpmath, e.g. Debian's
python3-mpmath).
"""
import numpy as np


def fit(name, fn, top):
    u = np.cos(np.linspace(0, np.pi, 4000)) * top / 2 + top / 2
    u = u[u > 1e-4]
    z = u * u
    target = (fn(u) / u - 1) / z
    coef = np.polynomial.polynomial.polyfit(z, target, 3, w=u * z / fn(u))
    coef = np.array([float('%.8g' % c) for c in coef])
    uu = np.linspace(1e-6, top, 200001)
    approx = uu + uu * uu * uu * np.polynomial.polynomial.polyval(uu * uu, coef)
    # float32, Horner as in kernel_maps.h
    u32 = uu.astype(np.float32)
    z32 = u32 * u32
    c32 = coef.astype(np.float32)
    p = ((c32[3] * z32 + c32[2]) * z32 + c32[1]) * z32 + c32[0]
    a32 = u32 + u32 * z32 * p
    exact = fn(u32.astype(np.float64))
    print('%s on [0, %.8f]: coefficients %s' % (name, top, list(coef)))
    print('  max relative error: %.3g (float64), %.3g (float32)'
          % (np.max(np.abs(approx - fn(uu)) / fn(uu)), np.max(np.abs(a32 - exact) / exact)))


def acos_over_sin(x):
    s = np.sqrt((1 - x) * (1 + x))
    return np.where(s > 0, np.arccos(np.clip(x, -1, 1)) / np.where(s > 0, s, 1), 1.0)


def fit_acos_over_sin(deg=9):
    C = np.polynomial.chebyshev
    n = 4000
    t = np.cos(np.pi * (np.arange(n) + 0.5) / n)  # Chebyshev nodes on [-1, 1], x = (t + 1) / 2
    f = acos_over_sin((t + 1) / 2)
    w = np.ones(n)
    for _ in range(60):  # Lawson: weight each node by its relative error so far
        c = C.chebfit(t, f, deg, w=np.sqrt(w))
        w *= np.abs(C.chebval(t, c) - f) / f + 1e-30
        w /= w.sum()
    coef = np.zeros(deg + 1)  # the same polynomial in x: t = 2x - 1
    for k, a in enumerate(C.cheb2poly(c)):
        coef[:k + 1] += a * np.polynomial.polynomial.polypow([-1, 2], k)
    coef = np.array([float('%.9g' % np.float32(c)) for c in coef])
    xx = np.linspace(0, 1, 200001)
    exact = acos_over_sin(xx)
    approx = np.polynomial.polynomial.polyval(xx, coef)
    x32 = xx.astype(np.float32).astype(np.float64)
    p = np.full_like(x32, np.float32(coef[-1]))
    for a in coef[-2::-1]:  # Horner with fmaf, as kernel_maps.h
        p = (p * x32 + np.float64(np.float32(a))).astype(np.float32).astype(np.float64)
    print('acos(x)/sqrt(1-x^2) on [0, 1], degree %d: coefficients %s' % (deg, list(coef)))
    print('  max relative error: %.3g (float64), %.3g (float32)'
          % (np.max(np.abs(approx - exact) / exact), np.max(np.abs(p - acos_over_sin(x32)) / acos_over_sin(x32))))


fit('atan', np.arctan, np.tan(np.pi / 8))
fit_acos_over_sin()


def fit_double():
    try:
        import mpmath as mp
    except ImportError:
        print('atan (double): mpmath not installed, skipped')
        return
    mp.mp.dps = 50
    top = mp.tan(mp.pi / 8) ** 2

    def p_exact(z):  # (atan(u) - u) / u^3 at z = u^2
        if z == 0:
            return mp.mpf(-1) / 3
        u = mp.sqrt(z)
        return (mp.atan(u) - u) / (z * u)

    coef, err = mp.chebyfit(p_exact, [0, top], 11, error=True)
    print('atan (double) on [0, tan(pi/8)]: P(z), constant term first:')
    for c in reversed(coef):
        print('  %.17g' % float(c))
    print('  largest error of P %s; relative error of atan below %s' % (mp.nstr(err, 3), mp.nstr(err * top, 3)))


fit_double()
