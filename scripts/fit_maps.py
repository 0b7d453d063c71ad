#!/usr/bin/env python3
"""Fit the polynomials of the float32 kernel maps (src/kernels/kernel_maps.h).

Both are odd: f(u) ~= u + u*z*P(z), z = u^2, P of degree 3, fitted by least
squares weighted for relative error; each is printed with its coefficients
(constant term first) and the worst relative error in float64 and when
evaluated in float32 as the C code does.

  atan(u), 0 <= u <= tan(pi/8)   ntk_atan2f (the Erf map)
  asin(u), 0 <= u <= sin(pi/8)   ntk_asin_smallf (the ReLU-family map)

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


fit('atan', np.arctan, np.tan(np.pi / 8))
fit('asin', np.arcsin, np.sin(np.pi / 8))


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
