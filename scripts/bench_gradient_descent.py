#!/usr/bin/env python3
"""predict.gradient_descent (the dynamics of any loss) against neural-tangents' own, measured in
one run: the same kernel, loss, times and start, each timed twice (the first call of
neural-tangents' includes JAX's compilation; the second is the one compared), and their
outputs compared. Run with the pinned neural-tangents venv of scripts/nt_reference.sh, with
ntkd's package and library (its store reader's xxhash and zstandard installed there):

    NTKD_LIBRARY=build/libntkd.so PYTHONPATH=python JAX_PLATFORMS=cpu \\
        /opt/ntkd-ref-venv/bin/python scripts/bench_gradient_descent.py [N_TRAIN] [N_TEST] [CLASSES]

The kernel: ntkd's NTK of a fully-connected ReLU network on Gaussian data (float64); the loss
cross-entropy on one-hot classes, with and without momentum 0.9; times 1, 10, 100, 1000 in
units of half neural-tangents' max_learning_rate.
"""

import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import neural_tangents as nt  # noqa: E402

from ntkd import predict, stax  # noqa: E402


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main():
    n, m, k = (int(a) for a in (sys.argv[1:] + ["1000", "200", "10"][len(sys.argv) - 1:])[:3])
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n + m, 64))
    kernel_fn = stax.serial(stax.Dense(512), stax.Relu(), stax.Dense(512), stax.Relu(), stax.Dense(k))[2]
    K = kernel_fn(x, None, "ntk")
    k_dd, k_td = K[:n, :n], K[n:, :n]
    y = np.eye(k)[rng.integers(0, k, n)]
    lr = 0.5 * float(nt.predict.max_learning_rate(k_dd))
    t = np.array([1., 10., 100., 1000.])

    def cross_entropy(f, yy):
        return -jnp.mean(jax.nn.log_softmax(f) * yy)

    print(f"n = {n} train, {m} test, {k} classes; learning rate {lr:.4g}; t = {t.tolist()}")
    for momentum in (None, 0.9):
        ref = nt.predict.gradient_descent(cross_entropy, k_dd, y, learning_rate=lr, momentum=momentum)
        got = predict.gradient_descent(cross_entropy, k_dd, y, learning_rate=lr, momentum=momentum)
        times = {}
        for name, fn in (("neural-tangents", ref), ("ntkd", got)):
            _, first = timed(lambda: fn(t, 0., 0., k_td))
            out, second = timed(lambda: fn(t, 0., 0., k_td))
            times[name] = (first, second, [np.asarray(o) for o in out])
        a, b = times["neural-tangents"][2], times["ntkd"][2]
        err = max(np.abs(p - q).max() / np.abs(p).max() for p, q in zip(a, b))
        print(f"momentum {momentum}: neural-tangents {times['neural-tangents'][1]:.3f} s "
              f"(first call {times['neural-tangents'][0]:.3f} s), ntkd {times['ntkd'][1]:.3f} s "
              f"(first {times['ntkd'][0]:.3f} s): ntkd/neural-tangents "
              f"{times['ntkd'][1] / times['neural-tangents'][1]:.3f}; "
              f"outputs within {err:.1e} of the largest")


if __name__ == "__main__":
    main()
