/* libFuzzer target: the store reader. The input is a whole store file;
 * every tile that the scan accepts is read and decoded. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/codec.h"
#include "store/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char path[64];
  if (!path[0]) snprintf(path, sizeof path, "/tmp/ntkd-fuzz-store-%ld", (long)getpid());
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  fwrite(data, 1, size, f);
  fclose(f);
  ntk_store_t *s;
  if (ntk_store_open(path, NTK_STORE_READ | NTK_STORE_CHECK_PAYLOAD, &s) != NTK_OK) return 0;
  const struct ntk_tiling *t = ntk_store_tiling(s);
  const struct ntk_store_info *in = ntk_store_get_info(s);
  ntk_codec_t *codec = ntk_codec_create(1);
  for (uint64_t i = 0; i < t->ntiles && i < 64; i++) {
    if (!ntk_store_has_tile(s, i)) continue;
    struct ntk_tile tile = ntk_tiling_tile(t, i);
    void *payload;
    size_t len, raw = ntk_store_raw_bytes(s, &tile);
    if (ntk_store_read_payload(s, i, &payload, &len) != NTK_OK) continue;
    void *out = raw <= (64u << 20) ? malloc(raw ? raw : 1) : NULL;
    if (out) ntk_codec_decompress(codec, payload, len, (int)in->elem, out, raw);
    free(out);
    free(payload);
  }
  ntk_codec_free(codec);
  ntk_store_close(s);
  return 0;
}
