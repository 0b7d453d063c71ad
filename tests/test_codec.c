/* Shuffle + zstd codec: round trips, and damage is detected. */
#include "base/codec.h"
#include "testutil.h"

START_TEST(test_shuffle_roundtrip) {
  for (int elem = 4; elem <= 8; elem += 4) {
    size_t count = 1001;
    unsigned char *a = malloc(count * (size_t)elem), *b = malloc(count * (size_t)elem), *c = malloc(count * (size_t)elem);
    for (size_t i = 0; i < count * (size_t)elem; i++) a[i] = (unsigned char)(i * 31 + 7);
    ntk_shuffle(a, b, count, elem);
    /* the stored layout (docs/STORE-FORMAT.md): byte p of value i at p * count + i */
    for (size_t i = 0; i < count; i++)
      for (size_t p = 0; p < (size_t)elem; p++)
        ck_assert_msg(b[p * count + i] == a[i * (size_t)elem + p], "elem %d: byte %zu of value %zu misplaced", elem, p, i);
    ntk_unshuffle(b, c, count, elem);
    ck_assert_mem_eq(a, c, count * (size_t)elem);
    free(a);
    free(b);
    free(c);
  }
}
END_TEST

START_TEST(test_compress_roundtrip_and_ratio) {
  size_t n = 1 << 16;
  float *v = malloc(n * sizeof *v), *w = malloc(n * sizeof *w);
  unsigned s = 1;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    v[i] = 0.5f + (float)(s >> 9) / 8388608.0f; /* kernel-like: O(1), random mantissa */
  }
  ntk_codec_t *c = ntk_codec_create(3);
  ck_assert_ptr_nonnull(c);
  size_t cap = ntk_codec_bound(n * 4), len;
  unsigned char *z = malloc(cap);
  ck_assert_int_eq(ntk_codec_compress(c, v, n * 4, 4, z, cap, &len), NTK_OK);
  ck_assert_uint_lt(len, n * 4); /* shuffling exposes the exponent bytes */
  ck_assert_int_eq(ntk_codec_decompress(c, z, len, 4, w, n * 4), NTK_OK);
  ck_assert_mem_eq(v, w, n * 4);
  /* Wrong expected size, truncated frame, flipped byte. */
  ck_assert_int_eq(ntk_codec_decompress(c, z, len, 4, w, n * 4 - 4), NTK_ECORRUPT);
  ck_assert_int_eq(ntk_codec_decompress(c, z, len / 2, 4, w, n * 4), NTK_ECORRUPT);
  uint64_t sum = ntk_checksum(z, len);
  z[len / 2] ^= 0x10;
  ck_assert_uint_ne(ntk_checksum(z, len), sum);
  ntk_codec_free(c);
  ntk_codec_free(NULL);
  free(v);
  free(w);
  free(z);
}
END_TEST

/* Level 0: the values stored as they are, decoded by the record's codec id
 * whatever the reader's level; a raw payload of another size is damage. */
START_TEST(test_raw) {
  float v[1000];
  for (int i = 0; i < 1000; i++) v[i] = (float)i * 0.37f - 11.0f;
  ntk_codec_t *raw = ntk_codec_create(0), *z = ntk_codec_create(1);
  ck_assert_int_eq(ntk_codec_id(raw), NTK_CODEC_RAW);
  ck_assert_int_eq(ntk_codec_id(z), NTK_CODEC_SHUFFLE_ZSTD);
  unsigned char out[8000];
  size_t len = 0;
  ck_assert_int_eq(ntk_codec_compress(raw, v, sizeof v, 4, out, sizeof out, &len), NTK_OK);
  ck_assert_uint_eq(len, sizeof v);
  ck_assert_mem_eq(out, v, sizeof v);
  float back[1000];
  ck_assert_int_eq(ntk_codec_decode(z, NTK_CODEC_RAW, out, len, 4, back, sizeof back), NTK_OK);
  ck_assert_mem_eq(back, v, sizeof v);
  ck_assert_int_eq(ntk_codec_decode(z, NTK_CODEC_RAW, out, len - 4, 4, back, sizeof back), NTK_ECORRUPT);
  ck_assert_int_eq(ntk_codec_decode(z, 7, out, len, 4, back, sizeof back), NTK_ECORRUPT);
  /* A zstd payload is not read as raw values, nor raw ones as zstd. */
  size_t zl = 0;
  ck_assert_int_eq(ntk_codec_compress(z, v, sizeof v, 4, out, sizeof out, &zl), NTK_OK);
  ck_assert_int_eq(ntk_codec_decode(z, NTK_CODEC_SHUFFLE_ZSTD, out, zl, 4, back, sizeof back), NTK_OK);
  ck_assert_mem_eq(back, v, sizeof v);
  ck_assert_int_eq(ntk_codec_decode(z, NTK_CODEC_SHUFFLE_ZSTD, v, sizeof v, 4, back, sizeof back), NTK_ECORRUPT);
  ntk_codec_free(raw);
  ntk_codec_free(z);
}
END_TEST

int main(void) {
Suite *s = suite_create("codec");
  TCase *tc = tcase_create("codec");
  tcase_add_test(tc, test_shuffle_roundtrip);
  tcase_add_test(tc, test_compress_roundtrip_and_ratio);
  tcase_add_test(tc, test_raw);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
