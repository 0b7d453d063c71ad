#!/usr/bin/env python3
"""Aggregate's cost on sparse graphs, against the network around it, in one run.

  NTKD_LIBRARY=build/libntkd.so PYTHONPATH=python /usr/bin/python3 scripts/bench_graph.py [N [V]]

N graphs (default 16) padded to V nodes (default 256), as graph datasets are
fed to neural-tangents' dense patterns: each graph has V/4 to V/2 real nodes
of 8 features, self-loops and about 4 edges per node, the rest zeros (about
1 % of the pattern's entries nonzero). Two networks, each timed as the
fastest of 3 kernel_fn calls (NNGP and NTK, float64, every core):

  graph   [Dense(64) Relu Aggregate] x 3, GlobalAvgPool, Dense(1)
  floor   [Dense(64) Relu] x 3, Aggregate, GlobalAvgPool, Dense(1): the same
          covariance work with one Aggregate (a pattern needs one)

and prints their times per distinct entry and graph / floor: what the two
extra Aggregates cost over the rest of the network. An Aggregate by a
sparse pattern goes edge by edge (src/kernels/cnn_impl.h, pattern_edges);
through the dense product, 2 V^3 per kernel, the ratio was 2.42 at V = 256
(docs/PERFORMANCE.md).
"""

import sys
import time

import numpy as np

from ntkd import stax


def graphs(n, v, seed=3):
    rng = np.random.default_rng(seed)
    x = np.zeros((n, v, 8))
    p = np.zeros((n, v, v))
    for s in range(n):
        m = rng.integers(v // 4, v // 2)
        x[s, :m] = rng.standard_normal((m, 8))
        for i in range(m):
            p[s, i, i] = 1
            for j in rng.integers(0, m, size=2):
                p[s, i, j] = p[s, j, i] = 1
    return x, p


def best(kernel_fn, x, p, reps=3):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        kernel_fn(x, None, ("nngp", "ntk"), pattern=(p, p))
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    v = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    x, p = graphs(n, v)
    layer = [stax.Dense(64, W_std=2 ** 0.5, b_std=0.1), stax.Relu()]
    graph = stax.serial(*((layer + [stax.Aggregate()]) * 3), stax.GlobalAvgPool(), stax.Dense(1))[2]
    floor = stax.serial(*(layer * 3), stax.Aggregate(), stax.GlobalAvgPool(), stax.Dense(1))[2]
    entries = n * (n + 1) / 2
    tg, tf = best(graph, x, p), best(floor, x, p)
    print(f"{n} graphs of {v} nodes, {np.count_nonzero(p) / p.size:.2%} of the pattern's entries nonzero")
    print(f"graph: {tg / entries * 1e6:.1f} us per entry; floor: {tf / entries * 1e6:.1f} us per entry; "
          f"graph / floor {tg / tf:.2f}")


if __name__ == "__main__":
    main()
