/* Training snapshots: one file per job, replaced atomically after every
 * epoch (and on a stop). Format (docs/TRAINING.md): a 512-byte header of
 * little-endian fields, then p, m and v as float32, nparams each. The
 * header ends with the XXH3 of the payload and of the header itself, so a
 * torn or foreign file is refused, never half-resumed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntkd/codec.h"
#include "ntkd/fsutil.h"
#include "ntkd/store.h"
#include "ntkd/train.h"

#define SNAP_MAGIC "NTKDSNAP"
#define SNAP_VERSION 1
#define SNAP_HEADER 512

/* Header: magic[8], u64 version, then struct ntk_snapshot_info's fields in
 * order (u64 / f64), then u64 payload checksum at 496 and u64 header
 * checksum (of bytes 0..503) at 504. Written in host order: the targets
 * (x86-64, aarch64) are little-endian. */
static void put64(unsigned char *h, size_t *at, const void *v) {
  memcpy(h + *at, v, 8);
  *at += 8;
}

static void encode(const struct ntk_snapshot_info *in, uint64_t payload_sum, unsigned char *h) {
  memset(h, 0, SNAP_HEADER);
  memcpy(h, SNAP_MAGIC, 8);
  size_t at = 8;
  uint64_t version = SNAP_VERSION;
  put64(h, &at, &version);
  put64(h, &at, &in->nsizes);
  for (int i = 0; i < NTK_TRAIN_MAX_LAYERS; i++) put64(h, &at, &in->sizes[i]);
  const void *rest[] = {&in->n_train, &in->batch, &in->seed, &in->data_hash, &in->epoch, &in->step,
                        &in->t, &in->loss_sum, &in->correct, &in->elapsed, &in->nparams};
  for (size_t i = 0; i < sizeof rest / sizeof *rest; i++) put64(h, &at, rest[i]);
  memcpy(h + 496, &payload_sum, 8);
  uint64_t hs = ntk_checksum(h, 504);
  memcpy(h + 504, &hs, 8);
}

static void decode(const unsigned char *h, struct ntk_snapshot_info *out) {
  size_t at = 16;
#define GET(field) (memcpy(&(field), h + at, 8), at += 8)
  GET(out->nsizes);
  for (int i = 0; i < NTK_TRAIN_MAX_LAYERS; i++) GET(out->sizes[i]);
  GET(out->n_train); GET(out->batch); GET(out->seed); GET(out->data_hash); GET(out->epoch);
  GET(out->step); GET(out->t); GET(out->loss_sum); GET(out->correct); GET(out->elapsed); GET(out->nparams);
#undef GET
}

static int write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

ntk_status ntk_snapshot_write(const char *path, const struct ntk_snapshot_info *info, const float *p,
                              const float *m, const float *v) {
  ntk_status st = ntk_make_parents(path);
  if (st) return st;
  size_t bytes = info->nparams * sizeof(float);
  /* Checksum of p | m | v without concatenating them: XXH3 of the three sums. */
  uint64_t sums[3] = {ntk_checksum(p, bytes), ntk_checksum(m, bytes), ntk_checksum(v, bytes)};
  unsigned char h[SNAP_HEADER];
  encode(info, ntk_checksum(sums, sizeof sums), h);
  char tmp[NTK_PATH_MAX + 400];
  int fd;
  /* A snapshot write killed half-way leaves its temporary file: removed here. */
  if ((st = ntk_tmp_create(path, tmp, sizeof tmp, &fd))) return st;
  if (write_all(fd, h, sizeof h) || write_all(fd, p, bytes) || write_all(fd, m, bytes) || write_all(fd, v, bytes))
    st = ntk_error(NTK_EIO, "%s: cannot write the snapshot: %s", tmp, strerror(errno));
  if (!st && fsync(fd)) st = ntk_error(NTK_EIO, "%s: fsync failed: %s", tmp, strerror(errno));
  if (close(fd) && !st) st = ntk_error(NTK_EIO, "%s: close failed: %s", tmp, strerror(errno));
  if (!st && rename(tmp, path)) st = ntk_error(NTK_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
  if (st) {
    unlink(tmp);
    return st;
  }
  return ntk_fsync_folder_of(path);
}

ntk_status ntk_snapshot_read(const char *path, struct ntk_snapshot_info *info, float **state) {
  *state = NULL;
  int fd;
  ntk_status ost = ntk_open_regular(path, O_RDONLY, "[train] snapshot", &fd);
  if (ost) return ost;
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return ntk_error(NTK_EIO, "%s: cannot open: %s", path, strerror(errno));
  }
  unsigned char h[SNAP_HEADER];
  ntk_status st = NTK_OK;
  uint64_t version = 0, hs, ps;
  if (fread(h, 1, sizeof h, f) != sizeof h || memcmp(h, SNAP_MAGIC, 8))
    st = ntk_error(NTK_ECORRUPT, "%s: not an ntkd training snapshot", path);
  if (!st) {
    memcpy(&version, h + 8, 8);
    memcpy(&ps, h + 496, 8);
    memcpy(&hs, h + 504, 8);
    if (version != SNAP_VERSION)
      st = ntk_error(NTK_ECORRUPT, "%s: snapshot version %llu, this ntkd reads version %d", path,
                     (unsigned long long)version, SNAP_VERSION);
    else if (hs != ntk_checksum(h, 504))
      st = ntk_error(NTK_ECORRUPT, "%s: snapshot header is damaged (checksum mismatch)", path);
  }
  if (!st) {
    decode(h, info);
    if (info->nsizes < 2 || info->nsizes > NTK_TRAIN_MAX_LAYERS || info->nparams > ((size_t)1 << 34))
      st = ntk_error(NTK_ECORRUPT, "%s: snapshot header has impossible sizes", path);
  }
  float *s = NULL;
  size_t n = st ? 0 : (size_t)info->nparams;
  if (!st && !(s = malloc(3 * n * sizeof *s + 1)))
    st = ntk_error(NTK_ENOMEM, "%s: out of memory for %zu parameters", path, n);
  if (!st && fread(s, sizeof *s, 3 * n, f) != 3 * n)
    st = ntk_error(NTK_ECORRUPT, "%s: snapshot is truncated", path);
  if (!st && fgetc(f) != EOF) st = ntk_error(NTK_ECORRUPT, "%s: snapshot has trailing bytes", path);
  if (!st) {
    size_t bytes = n * sizeof *s;
    uint64_t sums[3] = {ntk_checksum(s, bytes), ntk_checksum(s + n, bytes), ntk_checksum(s + 2 * n, bytes)};
    if (ntk_checksum(sums, sizeof sums) != ps)
      st = ntk_error(NTK_ECORRUPT, "%s: snapshot parameters are damaged (checksum mismatch)", path);
  }
  fclose(f);
  if (st) {
    free(s);
    return st;
  }
  *state = s;
  return NTK_OK;
}
