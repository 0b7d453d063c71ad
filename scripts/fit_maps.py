#!/usr/bin/env python3
"""Fit the polynomials of the float32 kernel maps (src/kernels/kernel_maps.h).

Both are odd: f(u) ~= u + u*z*P(z), z = u^2, P of degree 3, fitted by least
squares weighted for relative error; each is printed with its coefficients
(constant term first) and the worst relative error in float64 and when
evaluated in float32 as the C code does.

  atan(u), 0 <= u <= tan(pi/8)   ntk_atan2f (the Erf map)
  asin(u), 0 <= u <= sin(pi/8)   ntk_asin_smallf (the ReLU-family map)
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
