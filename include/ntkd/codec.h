/* Tile payload codec: byte shuffle (all first bytes of the values, then all
 * second bytes, ...) followed by one zstd frame; and the payload checksum. */
#ifndef NTKD_CODEC_H
#define NTKD_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "ntkd/status.h"

typedef struct ntk_codec ntk_codec_t;

/* A codec with reusable zstd contexts at compression `level`. Rank-local;
 * NULL on allocation failure. Free with ntk_codec_free (accepts NULL). */
ntk_codec_t *ntk_codec_create(int level);
void ntk_codec_free(ntk_codec_t *c);

/* Largest compressed size of `raw_bytes` bytes. */
size_t ntk_codec_bound(size_t raw_bytes);

/* Compress `bytes` bytes of `elem`-byte values into dst (capacity cap,
 * at least ntk_codec_bound(bytes)); *out_len gets the compressed size. */
ntk_status ntk_codec_compress(ntk_codec_t *c, const void *src, size_t bytes, int elem, void *dst,
                              size_t cap, size_t *out_len);

/* Inverse of ntk_codec_compress; fails with NTK_ECORRUPT unless the frame
 * decodes to exactly `raw_bytes` bytes. */
ntk_status ntk_codec_decompress(ntk_codec_t *c, const void *src, size_t len, int elem, void *dst,
                                size_t raw_bytes);

/* XXH3-64 of a buffer; the checksum used throughout the store. */
uint64_t ntk_checksum(const void *p, size_t n);

/* Byte shuffle and its inverse for `count` values of `elem` bytes. Pure. */
void ntk_shuffle(const void *src, void *dst, size_t count, int elem);
void ntk_unshuffle(const void *src, void *dst, size_t count, int elem);

#endif
