"""The integrator behind predict.gradient_descent: y' = f(y) from y(0) = y0 to
given times, by Dormand and Prince's explicit Runge-Kutta pair of orders 5 and
4 with adaptive steps (Hairer, Norsett and Wanner, Solving Ordinary
Differential Equations I, sections II.4 and II.5: the tableau, the error
norm, the step control and the first step), in float64 numpy.

Its tolerances are JAX's odeint defaults, which neural-tangents'
gradient_descent uses: each accepted step's local error estimate is at most
ATOL + RTOL |y| in root mean square. Unlike odeint it steps onto each
requested time (no interpolation between steps) and takes the times in any
order (sorted here, once).
"""

import math

import numpy as np

RTOL = 1.4e-8
ATOL = 1.4e-8

# The Dormand-Prince 5(4) tableau: nodes, stages, the 5th-order weights (the
# last stage's row: that stage is f at the new point, reused by the next step)
# and the 5th minus the 4th-order weights (the error estimate).
_A = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    (35 / 384, 0., 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
)
_B4 = (5179 / 57600, 0., 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40)
_E = tuple(b5 - b4 for b5, b4 in zip(_A[6] + (0.,), _B4))

_SAFETY, _GROW, _SHRINK = 0.9, 10.0, 0.2


def _rms(x):
    """The root mean square, scaled by the largest value first (its squares could overflow):
    inf where a value is not finite."""
    if not x.size:
        return 0.0
    top = float(np.max(np.abs(x)))
    if top == 0 or not math.isfinite(top):
        return top
    return top * math.sqrt(float(np.mean(np.square(x / top))))


# The rows as arrays, for one matrix-vector product per stage over the stages' buffer.
_ROWS = tuple(np.array(row) for row in _A)
_ERR = np.array(_E)


def _first_step(f, y0, f0):
    """Hairer's starting step: small enough for the first derivative's change."""
    scale = ATOL + RTOL * np.abs(y0)
    d0, d1 = _rms(y0 / scale), _rms(f0 / scale)
    h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
    h0 = h0 if h0 > 0 else np.finfo(np.float64).tiny  # d1 beyond d0 by more than float64's range
    with np.errstate(over="ignore", invalid="ignore"):
        f1 = f(y0 + h0 * f0)
        d2 = _rms((f1 - f0) / scale) / h0
    top = max(d1, d2) if math.isfinite(d2) else d1
    h1 = max(1e-6, h0 * 1e-3) if top <= 1e-15 else (0.01 / top) ** (1 / 5)
    # a first step of 0 (an estimate beyond float64) would stop at t = 0: the main loop's
    # step control shortens a step that is too long instead
    return min(100 * h0, h1) if h1 > 0 else h0


class StepError(ArithmeticError):
    """The integration cannot go on at time t: f is not finite, or the step fell below rounding."""

    def __init__(self, t, why):
        super().__init__(why)
        self.t = t


def integrate(f, y0, times):
    """y(t) at each of `times` (a 1-D array of finite times >= 0), as an array of
    shape (len(times), y0.size): y0 is a vector, and f(y) returns one of its size. Raises
    StepError where f gives a value that is not finite or the step size underflows."""
    times = np.asarray(times, dtype=np.float64)
    order = np.argsort(times, kind="stable")
    y = np.array(y0, dtype=np.float64).ravel()
    out = np.empty((times.size, y.size))
    t = 0.0
    k1 = f(y)
    if not np.all(np.isfinite(k1)):
        raise StepError(t, "the derivative is not finite at t = 0")
    h = None
    why = None  # why the last step was cut: values that are not finite
    ks = np.empty((7, y.size))  # the stages' derivatives; ks[6] is f at the step's end
    done = 0
    while done < times.size:
        target = times[order[done]]
        if target <= t:  # t = 0, or a repeated time
            out[order[done]] = y
            done += 1
            continue
        if h is None:
            h = _first_step(f, y, k1)
        hit = t + h >= target
        step = target - t if hit else h
        if not t + step > t:
            raise StepError(t, why or f"the step size fell to {step:.3g}, below the rounding of t")
        ks[0] = k1
        finite = True
        with np.errstate(over="ignore", invalid="ignore"):
            for s, row in enumerate(_ROWS[1:], 1):
                point = y + step * (row @ ks[:s])  # the 7th: the 5th-order step
                ks[s] = f(point)
                if not np.isfinite(ks[s]).all():
                    finite = False
                    break
            if finite:
                y_new = point
                err = step * (_ERR @ ks)
                ratio = _rms(err / (ATOL + RTOL * np.maximum(np.abs(y), np.abs(y_new))))
        if not finite or not math.isfinite(ratio):
            # A step too long for the values to stay finite, or a derivative that is not:
            # shorter steps tell which (the step falls below rounding only for the second).
            why = "the derivative is not finite just after it"
            h = step * _SHRINK
            continue
        why = None
        if ratio <= 1.0:
            t = target if hit else t + step
            y, k1 = y_new, ks[6].copy()
            factor = _GROW if ratio == 0 else min(_GROW, max(1.0, _SAFETY * ratio ** -0.2))
            # a step cut short to land on a requested time says nothing against the longer one
            h = max(step * factor, h) if hit else step * factor
        else:
            h = step * max(_SHRINK, _SAFETY * ratio ** -0.2)
    return out
