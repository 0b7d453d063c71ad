/* Tiling: every lower-triangle pair in exactly one tile, for ragged sizes. */
#include "base/tiling.h"
#include "testutil.h"

START_TEST(test_cover_exactly_once) {
  const uint64_t ns[] = {1, 2, 7, 64, 100, 101, 257};
  const uint64_t ts[] = {1, 3, 8, 64, 100, 1000};
  for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
    for (size_t b = 0; b < sizeof ts / sizeof *ts; b++) {
      uint64_t n = ns[a];
      struct ntk_tiling t;
      ntk_tiling_init(&t, n, ts[b]);
      unsigned char *seen = calloc(n * n, 1);
      uint64_t pairs = 0;
      for (uint64_t k = 0; k < t.ntiles; k++) {
        struct ntk_tile tl = ntk_tiling_tile(&t, k);
        ck_assert_uint_eq(tl.index, k);
        ck_assert_uint_eq(ntk_tiling_index(tl.bi, tl.bj), k);
        ck_assert(tl.bi >= tl.bj);
        ck_assert(tl.rows >= 1 && tl.cols >= 1);
        ck_assert(tl.r0 + tl.rows <= n && tl.c0 + tl.cols <= n);
        for (uint64_t i = tl.r0; i < tl.r0 + tl.rows; i++)
          for (uint64_t j = tl.c0; j < tl.c0 + tl.cols; j++)
            if (i >= j) seen[i * n + j]++;
        pairs += ntk_tile_pairs(&tl);
      }
      for (uint64_t i = 0; i < n; i++)
        for (uint64_t j = 0; j <= i; j++)
          ck_assert_msg(seen[i * n + j] == 1, "n=%llu tile=%llu: pair (%llu,%llu) covered %d times",
                        (unsigned long long)n, (unsigned long long)ts[b], (unsigned long long)i,
                        (unsigned long long)j, seen[i * n + j]);
      ck_assert_uint_eq(pairs, n * (n + 1) / 2);
      free(seen);
    }
}
END_TEST

START_TEST(test_limit_columns) {
  /* needed = the tiles whose first column is among the first m samples,
   * counted by brute force, for every m and a few shapes. */
  const uint64_t shapes[][2] = {{10, 4}, {100, 7}, {1000, 64}, {12000, 512}, {5, 10}};
  for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
    uint64_t n = shapes[k][0], T = shapes[k][1];
    for (uint64_t m = 0; m <= n + 1; m += (n > 200 ? 97 : 1)) {
      struct ntk_tiling t;
      ntk_tiling_init(&t, n, T);
      ntk_tiling_limit_columns(&t, m);
      uint64_t count = 0;
      for (uint64_t i = 0; i < t.ntiles; i++) {
        struct ntk_tile tl = ntk_tiling_tile(&t, i);
        int want = m == 0 || m >= n || tl.c0 < m;
        ck_assert_int_eq(ntk_tiling_needed(&t, i), want);
        count += (uint64_t)want;
      }
      ck_assert_uint_eq(t.needed, count);
      ck_assert(!ntk_tiling_needed(&t, t.ntiles));
    }
  }
}
END_TEST

START_TEST(test_walk_needed) {
  /* ntk_tiling_first/next give the needed tiles, in index order, each equal
   * to ntk_tiling_tile's, for the shapes of test_limit_columns and n = 0. */
  const uint64_t shapes[][2] = {{10, 4}, {100, 7}, {1000, 64}, {12000, 512}, {5, 10}, {0, 4}, {1, 1}};
  for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
    uint64_t n = shapes[k][0], T = shapes[k][1];
    for (uint64_t m = 0; m <= n + 1; m += (n > 200 ? 97 : 1)) {
      struct ntk_tiling t;
      ntk_tiling_init(&t, n, T);
      ntk_tiling_limit_columns(&t, m);
      struct ntk_tile w;
      int more = ntk_tiling_first(&t, &w);
      uint64_t walked = 0;
      for (uint64_t i = 0; i < t.ntiles; i++) {
        if (!ntk_tiling_needed(&t, i)) continue;
        ck_assert_msg(more, "n=%llu T=%llu m=%llu: the walk ended before tile %llu", (unsigned long long)n,
                      (unsigned long long)T, (unsigned long long)m, (unsigned long long)i);
        struct ntk_tile want = ntk_tiling_tile(&t, i);
        ck_assert_mem_eq(&w, &want, sizeof w);
        walked++;
        more = ntk_tiling_next(&t, &w);
      }
      ck_assert_msg(!more, "n=%llu T=%llu m=%llu: the walk went past the last needed tile", (unsigned long long)n,
                    (unsigned long long)T, (unsigned long long)m);
      ck_assert_uint_eq(walked, t.needed);
    }
  }
}
END_TEST

/* Counts are exact where they fit in 64 bits (a forged store header's
 * N = 2^32, T = 1: nb (nb + 1) wrapped before the halving, to 2^31 tiles)
 * and saturate where they do not. */
START_TEST(test_counts_saturate) {
  struct ntk_tiling t;
  ntk_tiling_init(&t, (uint64_t)1 << 32, 1);
  ck_assert_uint_eq(t.ntiles, ((uint64_t)1 << 63) + ((uint64_t)1 << 31));
  ntk_tiling_init(&t, (uint64_t)1 << 33, 1);
  ck_assert_uint_eq(t.ntiles, UINT64_MAX);
  ck_assert_uint_eq(t.needed, UINT64_MAX);
  ntk_tiling_init(&t, UINT64_MAX, 1);
  ck_assert_uint_eq(t.nb, UINT64_MAX);
  ck_assert_uint_eq(t.ntiles, UINT64_MAX);
  ntk_tiling_init(&t, UINT64_MAX, 2); /* nb = 2^63 (n + tile - 1 wrapped to nb = 0) */
  ck_assert_uint_eq(t.nb, (uint64_t)1 << 63);
  ck_assert_uint_eq(t.ntiles, UINT64_MAX);
  ntk_tiling_init(&t, (uint64_t)1 << 31, 1); /* 2^31 (2^31 + 1) / 2 fits */
  ck_assert_uint_eq(t.ntiles, ((uint64_t)1 << 30) * (((uint64_t)1 << 31) + 1));
  ntk_tiling_limit_columns(&t, (uint64_t)1 << 30);
  ck_assert_uint_eq(t.needed, ((uint64_t)1 << 29) * (((uint64_t)1 << 30) + 1) + ((uint64_t)1 << 30) * ((uint64_t)1 << 30));
  ntk_tiling_init(&t, (uint64_t)1 << 33, 1);
  ntk_tiling_limit_columns(&t, (uint64_t)1 << 32);
  ck_assert_uint_eq(t.needed, UINT64_MAX);
}
END_TEST

START_TEST(test_large_index_inverse) {
  struct ntk_tiling t;
  ntk_tiling_init(&t, 1000000, 100); /* 10^4 blocks, ~5e7 tiles */
  ck_assert_uint_eq(t.nb, 10000);
  const uint64_t probe[] = {0, 1, 2, 49994999, 50004999, 12345678};
  for (size_t i = 0; i < sizeof probe / sizeof *probe; i++) {
    if (probe[i] >= t.ntiles) continue;
    struct ntk_tile tl = ntk_tiling_tile(&t, probe[i]);
    ck_assert_uint_eq(ntk_tiling_index(tl.bi, tl.bj), probe[i]);
    ck_assert(tl.bj <= tl.bi);
  }
  struct ntk_tile last = ntk_tiling_tile(&t, t.ntiles - 1);
  ck_assert_uint_eq(last.bi, 9999);
  ck_assert_uint_eq(last.bj, 9999);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tiling");
  TCase *tc = tcase_create("tiles");
  tcase_add_test(tc, test_cover_exactly_once);
  tcase_add_test(tc, test_large_index_inverse);
  tcase_add_test(tc, test_limit_columns);
  tcase_add_test(tc, test_walk_needed);
  tcase_add_test(tc, test_counts_saturate);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
