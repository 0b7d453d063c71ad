#!/usr/bin/env python3
"""What a finite t costs in ntkd.predict against t = infinity, measured in one run: the train
kernel's eigendecomposition (numpy.linalg.eigh, every finite t) against its Cholesky factor
(numpy.linalg.cholesky, t = None), on a random positive definite n x n matrix, and the peak
memory of the process after each size. Prints one line per size with the ratio.

    /usr/bin/python3 scripts/bench_predict.py [N ...]     (default 1000 2000 4000)
"""

import resource
import sys
import time

import numpy as np


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [1000, 2000, 4000]
    print("n      eigh (s)  cholesky (s)  eigh/cholesky  peak RSS (MiB)")
    for n in sizes:
        a = np.random.default_rng(n).standard_normal((n, n))
        a = a @ a.T / n + np.eye(n)
        t = time.perf_counter()
        np.linalg.eigh(a, UPLO="U")
        te = time.perf_counter() - t
        t = time.perf_counter()
        np.linalg.cholesky(a)
        tc = time.perf_counter() - t
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{n:<6} {te:9.4g} {tc:13.4g} {te / tc:14.1f} {rss:15.0f}")


if __name__ == "__main__":
    main()
