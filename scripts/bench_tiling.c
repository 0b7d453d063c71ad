/* The coordinator's start-up walk over the needed tiles (sched_init in
 * src/coordinator/coordinator.c: each needed tile, its pairs for the
 * progress and its size for the cost class), against its peer in the same
 * run: the per-index path it replaced (ntk_tiling_needed, then
 * ntk_tiling_tile, each inverting the index with a square root, and the
 * tile decoded a second time for its cost). CPU seconds of this process,
 * the fastest of 3 rounds; prints both and the ratio per-index / walk
 * (above 1: the walk faster). The two passes must see the same tiles, the
 * same pairs and the same entries, or it exits 1.
 *   build/ntkd_bench_tiling [N [TILE [M]]]   (300 000, 32: 44 M tiles;
 *   M: only the columns of the first M samples, as a job with test rows) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/tiling.h"

static double cpu_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

struct sums {
  uint64_t tiles, pairs, entries, index;
};

static struct sums per_index(const struct ntk_tiling *t) {
  struct sums s = {0, 0, 0, 0};
  for (uint64_t i = 0; i < t->ntiles; i++) {
    if (!ntk_tiling_needed(t, i)) continue;
    struct ntk_tile a = ntk_tiling_tile(t, i);
    s.tiles++, s.pairs += ntk_tile_pairs(&a), s.index += a.index;
    struct ntk_tile b = ntk_tiling_tile(t, i); /* the cost, decoded again */
    s.entries += b.rows * b.cols;
  }
  return s;
}

static struct sums walk(const struct ntk_tiling *t) {
  struct sums s = {0, 0, 0, 0};
  struct ntk_tile w;
  for (int more = ntk_tiling_first(t, &w); more; more = ntk_tiling_next(t, &w))
    s.tiles++, s.pairs += ntk_tile_pairs(&w), s.index += w.index, s.entries += w.rows * w.cols;
  return s;
}

int main(int argc, char **argv) {
  uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 300000;
  uint64_t tile = argc > 2 ? strtoull(argv[2], NULL, 10) : 32;
  uint64_t m = argc > 3 ? strtoull(argv[3], NULL, 10) : 0;
  if (argc > 4 || n < 1 || tile < 1) {
    fprintf(stderr, "usage: ntkd_bench_tiling [N [TILE [M]]]\n");
    return 2;
  }
  struct ntk_tiling t;
  ntk_tiling_init(&t, n, tile);
  ntk_tiling_limit_columns(&t, m);
  if (t.ntiles > 4000000000ull) {
    fprintf(stderr, "ntkd_bench_tiling: %llu tiles: more than this benchmark walks (4e9)\n",
            (unsigned long long)t.ntiles);
    return 2;
  }
  double best_a = 1e300, best_b = 1e300;
  struct sums a = {0, 0, 0, 0}, b = {0, 0, 0, 0};
  for (int round = 0; round < 3; round++) {
    double t0 = cpu_seconds();
    a = per_index(&t);
    double t1 = cpu_seconds();
    b = walk(&t);
    double t2 = cpu_seconds();
    if (t1 - t0 < best_a) best_a = t1 - t0;
    if (t2 - t1 < best_b) best_b = t2 - t1;
  }
  printf("N = %llu, tile %llu%s: %llu of %llu tiles needed\n", (unsigned long long)n, (unsigned long long)tile,
         m ? " (columns limited)" : "", (unsigned long long)b.tiles, (unsigned long long)t.ntiles);
  printf("per index %.3f s, walk %.3f s: ratio %.2f\n", best_a, best_b, best_b > 0 ? best_a / best_b : 0.0);
  if (a.tiles != b.tiles || a.pairs != b.pairs || a.entries != b.entries || a.index != b.index || b.tiles != t.needed) {
    fprintf(stderr, "ntkd_bench_tiling: the walk and the per-index path disagree: tiles %llu/%llu (needed %llu), "
            "pairs %llu/%llu, entries %llu/%llu\n", (unsigned long long)a.tiles, (unsigned long long)b.tiles,
            (unsigned long long)t.needed, (unsigned long long)a.pairs, (unsigned long long)b.pairs,
            (unsigned long long)a.entries, (unsigned long long)b.entries);
    return 1;
  }
  return 0;
}
