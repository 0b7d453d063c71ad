/* Any block of a store's symmetric matrix in its own precision: the reads
 * of the library (ntkd_store_read). See store/store.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/codec.h"
#include "base/defs.h"
#include "store/store.h"

ntk_status ntk_store_read_block(ntk_store_t *s, int which, uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1,
                                void *out, size_t ld) {
  const struct ntk_store_info *in = ntk_store_get_info(s);
  const struct ntk_tiling *tg = ntk_store_tiling(s);
  uint64_t n = in->n, T = in->tile;
  size_t es = in->elem;
  /* (r1 - r0) rows of ld elements must be a size: a leading dimension whose
   * byte offsets wrap would write rows before `out` */
  if (r1 > n || c1 > n || r0 > r1 || c0 > c1 || ld < c1 - c0 || (r1 > r0 && ld > SIZE_MAX / es / (r1 - r0)))
    return ntk_error(NTK_EUSAGE, "block [%llu, %llu) x [%llu, %llu) (leading dimension %zu) does not fit the %llu x "
                     "%llu matrix", (unsigned long long)r0, (unsigned long long)r1, (unsigned long long)c0,
                     (unsigned long long)c1, ld, (unsigned long long)n, (unsigned long long)n);
  if (!(in->kernels & (uint32_t)which))
    return ntk_error(NTK_EUSAGE, "the store holds no %s kernel", which == NTK_KERNEL_NTK ? "NTK" : "NNGP");
  /* Damage first, whatever the block: a store missing tiles because of
   * damage is damaged, not merely unfinished (as export). */
  if (ntk_store_is_damaged(s))
    return ntk_error(NTK_ECORRUPT, "the store is damaged (ntkd verify lists where); run the job again to repair it");
  if (r0 == r1 || c0 == c1) return NTK_OK;
  for (uint64_t I = r0 / T; I <= (r1 - 1) / T; I++)
    for (uint64_t J = c0 / T; J <= (c1 - 1) / T; J++) {
      uint64_t idx = I >= J ? ntk_tiling_index(I, J) : ntk_tiling_index(J, I);
      if (ntk_tiling_needed(tg, idx) && !ntk_store_has_tile(s, idx)) {
        struct ntk_tile t = ntk_tiling_tile(tg, idx);
        return ntk_error(NTK_EINCOMPLETE, "the store is not complete (%llu of %llu tiles) and the block needs tile "
                         "%llu (rows %llu:%llu, cols %llu:%llu)", (unsigned long long)ntk_store_tiles_done(s),
                         (unsigned long long)tg->needed, (unsigned long long)idx, (unsigned long long)t.r0,
                         (unsigned long long)(t.r0 + t.rows), (unsigned long long)t.c0,
                         (unsigned long long)(t.c0 + t.cols));
      }
    }
  size_t edge = (size_t)(T < n ? T : n);
  ntk_codec_t *codec = ntk_codec_create(1);
  char *raw = malloc(ntk_store_raw_bytes(s, &(struct ntk_tile){0, 0, 0, 0, edge, 0, edge}) + 1);
  char *v = malloc(edge * edge * es + 1);
  ntk_status st = codec && raw && v ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory");
  char *o = out;
  for (uint64_t I = r0 / T; I <= (r1 - 1) / T && !st; I++)
    for (uint64_t J = c0 / T; J <= (c1 - 1) / T && !st; J++) {
      uint64_t bi = I >= J ? I : J, bj = I >= J ? J : I, idx = ntk_tiling_index(bi, bj);
      struct ntk_tile t = ntk_tiling_tile(tg, idx);
      uint64_t ra = I * T > r0 ? I * T : r0, rb = (I + 1) * T < r1 ? (I + 1) * T : r1;
      uint64_t ca = J * T > c0 ? J * T : c0, cb = (J + 1) * T < c1 ? (J + 1) * T : c1;
      if (!ntk_tiling_needed(tg, idx)) { /* test x test of a regression store: never computed */
        for (uint64_t i = ra; i < rb; i++)
          for (uint64_t j = ca; j < cb; j++) {
            char *e = o + ((i - r0) * ld + (j - c0)) * es;
            if (es == 4) *(float *)(void *)e = NAN;
            else *(double *)(void *)e = NAN;
          }
        continue;
      }
      if ((st = ntk_store_read_kernel(s, codec, idx, which, raw, v))) break;
      for (uint64_t i = ra; i < rb; i++) {
        char *dst = o + ((i - r0) * ld + (ca - c0)) * es;
        if (I >= J) { /* a row of the stored tile */
          memcpy(dst, v + ((i - t.r0) * t.cols + (ca - t.c0)) * es, (cb - ca) * es);
        } else { /* the upper triangle: a column of the stored tile (J, I) */
          for (uint64_t j = ca; j < cb; j++) memcpy(dst + (j - ca) * es, v + ((j - t.r0) * t.cols + (i - t.c0)) * es, es);
        }
      }
    }
  free(v);
  free(raw);
  ntk_codec_free(codec);
  return st;
}
