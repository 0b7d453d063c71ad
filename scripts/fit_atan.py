#!/usr/bin/env python3
"""Fit the polynomial of ntk_atan2f (include/ntkd/kernel_maps.h).

atan(u) ~= u + u*z*P(z), z = u^2, on 0 <= u <= tan(pi/8), P of degree 3,
by least squares weighted for relative error. Prints the coefficients
(constant term first) and the worst relative error in float64.
"""
import numpy as np

tm = np.tan(np.pi / 8)
u = np.cos(np.linspace(0, np.pi, 4000)) * tm / 2 + tm / 2
u = u[u > 1e-4]
z = u * u
target = (np.arctan(u) / u - 1) / z
coef = np.polynomial.polynomial.polyfit(z, target, 3, w=u * z / np.arctan(u))
uu = np.linspace(1e-6, tm, 200001)
approx = uu + uu * uu * uu * np.polynomial.polynomial.polyval(uu * uu, coef)
print('coefficients:', [float('%.8g' % c) for c in coef])
print('max relative error: %.3g' % np.max(np.abs(approx - np.arctan(uu)) / np.arctan(uu)))
