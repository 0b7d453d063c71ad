#!/usr/bin/env python3
"""What ntkd.predict's condition check costs beside the Cholesky factor it checks, measured in
one run: the estimate of ||A^-1||_1 (_inverse_norm1, up to 13 single-column solves) through the
factor's diagonal blocks solved on each call (np.linalg.solve: each block factored again) and
through their inverses (_block_inverses, computed once: what _Factor does), on a polynomial
kernel of random samples. Prints one line per size with the ratios; exits 1 where the two
estimates differ by more than 1e-6 relative.

    NTKD_LIBRARY=build/libntkd.so OPENBLAS_NUM_THREADS=1 /usr/bin/python3 scripts/bench_condition.py [N ...]
    (default 1000 2000 4000; run from the source tree: it imports python/ntkd)
"""

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from ntkd import predict as P  # noqa: E402


def best(fn, reps=5):
    times, out = [], None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [1000, 2000, 4000]
    bad = 0
    print("n      cholesky (s)  estimate, block solves (s)  /cholesky  block inverses (s)  /cholesky  speed-up")
    for n in sizes:
        x = np.random.default_rng(n).standard_normal((n, 30))
        A, _ = P._regularised((x @ x.T / 30 + 1) ** 2, 1e-4, False)
        tc, L = best(lambda: np.linalg.cholesky(A.T))
        ts, es = best(lambda: P._inverse_norm1(lambda B: P._upper_solve(L, P._lower_solve(L, B)), n))

        def by_inverses():
            inv = P._block_inverses(L)
            return P._inverse_norm1(lambda B: P._upper_solve(L, P._lower_solve(L, B, inv), inv), n)

        ti, ei = best(by_inverses)
        bad += abs(es - ei) > 1e-6 * es
        print(f"{n:<6} {tc:12.4g} {ts:27.4g} {ts / tc:10.2f} {ti:19.4g} {ti / tc:10.2f} {ts / ti:9.1f}")
    if bad:
        print("the two estimates differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
