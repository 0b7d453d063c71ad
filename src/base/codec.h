/* Tile payload codecs: byte shuffle (all first bytes of the values, then
 * all second bytes, ...) followed by one zstd frame; or the raw values
 * ([output] level = 0: no compression, where it does not pay); and the
 * payload checksum. */
#ifndef NTKD_CODEC_H
#define NTKD_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct ntk_codec ntk_codec_t;

/* The codec of a record (its header's codec field). */
enum { NTK_CODEC_SHUFFLE_ZSTD = 1, NTK_CODEC_RAW = 2 };

/* A codec with reusable zstd contexts at compression `level` (0: stored
 * raw, NTK_CODEC_RAW). Rank-local; NULL on allocation failure. Free with
 * ntk_codec_free (accepts NULL). */
ntk_codec_t *ntk_codec_create(int level);
void ntk_codec_free(ntk_codec_t *c);
/* The codec id ntk_codec_compress writes: NTK_CODEC_RAW at level 0. */
int ntk_codec_id(const ntk_codec_t *c);

/* Largest compressed size of `raw_bytes` bytes. */
size_t ntk_codec_bound(size_t raw_bytes);

/* Compress `bytes` bytes of `elem`-byte values into dst (capacity cap,
 * at least ntk_codec_bound(bytes)); *out_len gets the compressed size. */
ntk_status ntk_codec_compress(ntk_codec_t *c, const void *src, size_t bytes, int elem, void *dst,
                              size_t cap, size_t *out_len);

/* Inverse of ntk_codec_compress for a payload of codec `id` (whatever
 * level c has); fails with NTK_ECORRUPT unless it decodes to exactly
 * `raw_bytes` bytes. */
ntk_status ntk_codec_decode(ntk_codec_t *c, int id, const void *src, size_t len, int elem, void *dst,
                            size_t raw_bytes);
/* ntk_codec_decode of NTK_CODEC_SHUFFLE_ZSTD. */
ntk_status ntk_codec_decompress(ntk_codec_t *c, const void *src, size_t len, int elem, void *dst,
                                size_t raw_bytes);

/* XXH3-64 of a buffer; the checksum used throughout the store. */
uint64_t ntk_checksum(const void *p, size_t n);

/* Byte shuffle and its inverse for `count` values of `elem` bytes. Pure. */
void ntk_shuffle(const void *src, void *dst, size_t count, int elem);
void ntk_unshuffle(const void *src, void *dst, size_t count, int elem);

#endif
