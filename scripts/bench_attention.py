#!/usr/bin/env python3
"""GlobalSelfAttention's cost per pair against its floor, measured in one run.

  NTKD_PROGRAM=build/ntkd NTKD_LIBRARY=build/libntkd.so PYTHONPATH=python \\
      /usr/bin/python3 scripts/bench_attention.py [L [N]]

kernel_fn(x, None, 'ntk', threads=1) of Dense(8) GlobalSelfAttention(8, 8, 8, 2)
GlobalAvgPool on N random float64 sequences of L positions (default 256, 16),
one thread, against the floor: the four L x L products a pair's attention layer
makes (G_a K G_b^T for the NNGP and the NTK), timed with numpy's matmul on one
OpenBLAS thread. Prints the time per pair (N(N+1)/2 entries and N self pairs)
and its ratio to the floor: what the rest of the pair (the covariances through
Dense and the readout, the weights' softmax) and the tile costs on top.
"""

import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

from ntkd import stax  # noqa: E402


def main():
    L = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    N = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    x = np.random.default_rng(0).standard_normal((N, L, 4))
    kernel_fn = stax.serial(stax.Dense(8), stax.GlobalSelfAttention(8, 8, 8, 2), stax.GlobalAvgPool())[2]
    kernel_fn(x[:2], None, "ntk", threads=1)  # the library loaded, its first call paid
    t = time.perf_counter()
    k = kernel_fn(x, None, "ntk", threads=1)
    dt = time.perf_counter() - t
    assert np.isfinite(k).all()
    pairs = N * (N + 1) // 2 + N
    a, b = np.random.default_rng(1).standard_normal((2, L, L))
    c, d, bt = np.empty((L, L)), np.empty((L, L)), np.ascontiguousarray(b.T)
    reps = max(3, int(2e8 / (8 * L ** 3)))
    floor = float("inf")
    for _ in range(reps):  # the fastest of the repetitions: the floor
        t = time.perf_counter()
        for _ in range(2):
            np.matmul(a, b, out=c)
            np.matmul(c, bt.T, out=d)
        floor = min(floor, time.perf_counter() - t)
    per = dt / pairs
    print(f"L = {L}, N = {N}: {dt:.3f} s, {per * 1e6:.1f} us per pair; floor (4 products of {L} x {L}) "
          f"{floor * 1e6:.1f} us; ratio {per / floor:.2f}")


if __name__ == "__main__":
    main()
