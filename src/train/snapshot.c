/* Training snapshots: one file per job, replaced atomically after every
 * epoch (and on a stop). Format (docs/TRAINING.md): a 512-byte header of
 * little-endian fields, then p, m and v as float32, nparams each. The
 * header ends with the XXH3 of the payload and of the header itself, so a
 * torn or foreign file is refused, never half-resumed. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/codec.h"
#include "base/fsutil.h"
#include "store/lock.h"
#include "store/store.h"
#include "base/magic.h"
#include "train/train.h"

#define SNAP_MAGIC NTK_MAGIC_SNAPSHOT
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
                        &in->t, &in->loss_sum, &in->correct, &in->elapsed, &in->nparams,
                        &in->log_state, &in->log_first, &in->log_sum, &in->log_head};
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
  GET(out->log_state); GET(out->log_first); GET(out->log_sum); GET(out->log_head);
#undef GET
}

#define BAD(...) return (snprintf(why, cap, __VA_ARGS__), 1)
#define U(x) ((unsigned long long)(x))

int ntk_snapshot_check(const struct ntk_snapshot_info *s, char *why, size_t cap) {
  if (s->nsizes < 2 || s->nsizes > NTK_TRAIN_MAX_LAYERS)
    BAD("number of layer sizes = %llu, expected 2..%d", U(s->nsizes), NTK_TRAIN_MAX_LAYERS);
  uint64_t np = 0;
  for (uint64_t i = 0; i < NTK_TRAIN_MAX_LAYERS; i++) {
    uint64_t z = s->sizes[i];
    if (i < s->nsizes && (z == 0 || z > NTK_TRAIN_MAX_SIZE))
      BAD("layer size %llu = %llu, expected 1..%llu", U(i + 1), U(z), U(NTK_TRAIN_MAX_SIZE));
    if (i >= s->nsizes && z)
      BAD("layer size %llu = %llu, past the %llu sizes in use: expected 0", U(i + 1), U(z), U(s->nsizes));
    if (i > 0 && i < s->nsizes) np += s->sizes[i - 1] * z + z; /* < 2^53: sizes <= 2^24 */
  }
  if (s->sizes[s->nsizes - 1] < 2)
    BAD("last layer size (classes) = %llu, expected at least 2", U(s->sizes[s->nsizes - 1]));
  if (s->nparams != np) BAD("number of parameters = %llu, but its layer sizes make %llu", U(s->nparams), U(np));
  if (np > ((uint64_t)1 << 34)) BAD("%llu parameters, more than this ntkd reads (2^34)", U(np));
  if (s->n_train == 0 || s->n_train > UINT32_MAX)
    BAD("training samples = %llu, expected 1..%llu", U(s->n_train), U(UINT32_MAX));
  if (s->batch == 0 || s->batch > NTK_TRAIN_MAX_SIZE || s->batch > s->n_train)
    BAD("batch = %llu, expected 1..%llu and at most the %llu samples", U(s->batch), U(NTK_TRAIN_MAX_SIZE),
        U(s->n_train));
  uint64_t steps = s->n_train / s->batch;
  if (s->epoch > NTK_TRAIN_MAX_EPOCHS)
    BAD("epochs finished = %llu, expected at most %llu", U(s->epoch), U(NTK_TRAIN_MAX_EPOCHS));
  if (s->step >= steps)
    BAD("steps of the next epoch done = %llu, but %llu samples in batches of %llu make %llu steps per epoch: "
        "expected 0..%llu", U(s->step), U(s->n_train), U(s->batch), U(steps), U(steps - 1));
  /* One Adam step per batch, counted from 1: t is the number of steps taken. */
  uint64_t t = s->epoch * steps + s->step; /* <= 10^6 x 2^32 */
  if (s->t != t)
    BAD("Adam's t = %llu, but %llu epochs of %llu steps and %llu steps more make %llu", U(s->t), U(s->epoch),
        U(steps), U(s->step), U(t));
  /* Each step adds its batch's summed loss, a finite float32. */
  if (!isfinite(s->loss_sum) || !(s->loss_sum >= 0) || (s->step == 0 && s->loss_sum != 0) ||
      s->loss_sum > (double)s->step * FLT_MAX)
    BAD("loss sum of the partial epoch = %g, expected %s", s->loss_sum,
        s->step ? "a number in 0..(steps done x 3.4e38), one float32 loss sum a step" : "0 (no step of it done)");
  double seen = (double)(s->step * s->batch);
  if (!(s->correct >= 0 && s->correct <= seen && s->correct == floor(s->correct)))
    BAD("hits of the partial epoch = %g, expected an integer in 0..%.0f (%llu steps of %llu samples)", s->correct,
        seen, U(s->step), U(s->batch));
  if (!isfinite(s->elapsed) || !(s->elapsed >= 0))
    BAD("seconds trained = %g, expected a finite number >= 0", s->elapsed);
  if (s->log_state > NTK_SNAP_LOG_CHAIN)
    BAD("log state = %llu, expected 0 (not recorded), 1 (no log) or 2 (recorded)", U(s->log_state));
  if (s->log_state == NTK_SNAP_LOG_CHAIN && (s->log_first < 1 || s->log_first > s->epoch + 1))
    BAD("first epoch in the log = %llu, expected 1..%llu (the epochs finished + 1)", U(s->log_first),
        U(s->epoch + 1));
  if (s->log_state != NTK_SNAP_LOG_CHAIN && (s->log_first || s->log_sum || s->log_head))
    BAD("log fields = %llu, %llu, %llu without a recorded log (state %llu): expected 0", U(s->log_first),
        U(s->log_sum), U(s->log_head), U(s->log_state));
  if (s->log_head > ((uint64_t)1 << 48))
    BAD("bytes of log kept unchecked = %llu, expected at most 2^48", U(s->log_head));
  if (s->log_state == NTK_SNAP_LOG_CHAIN && s->log_first > s->epoch && s->log_sum)
    BAD("log chain = %llu of no line (the log's first epoch is past those finished): expected 0", U(s->log_sum));
  return 0;
}
#undef BAD
#undef U

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

/* The new snapshot tmp takes the name: over the file `replaces` holds
 * open, atomically where the file system can exchange (ntk_rename_over),
 * else after in_place's check; NTK_SNAPSHOT_ANY over whatever is there. */
static ntk_status commit(const char *tmp, const char *path, int replaces, ntk_status (*in_place)(const void *ctx),
                         const void *ctx) {
  if (replaces == NTK_SNAPSHOT_ANY) return ntk_tmp_commit(tmp, path, NTK_FILE_SNAPSHOT);
  char file[PATH_MAX];
  ntk_status st = ntk_resolve_links(path, file, sizeof file);
  if (st) return st;
  int rc = ntk_rename_over(tmp, file, replaces);
  if (rc == 2) { /* no exchange: checked once more, just before the rename (a window, narrower) */
    if (in_place && (st = in_place(ctx))) return st;
    return ntk_commit_at(tmp, file, NTK_FILE_SNAPSHOT);
  }
  if (rc == 3)
    return ntk_error(NTK_EIO, "%s: another writer's file stood at the name and could not be put back (%s): it is "
                     "%s.displaced; this job's new snapshot is at the name", file, strerror(errno), tmp);
  if (rc < 0) return ntk_error(NTK_EIO, "%s: cannot rename into place: %s", file, strerror(errno));
  if (rc == 0) return NTK_OK;
  /* replaced between in_place's check and the rename: its message says how */
  if (in_place && (st = in_place(ctx))) return st;
  return ntk_error(NTK_ECORRUPT, "%s is no longer the snapshot this job last read or wrote: it was replaced while "
                   "the job wrote its next one; this job wrote nothing over it: run the job again to resume from "
                   "what is there", path);
}

ntk_status ntk_snapshot_write(const char *path, const struct ntk_snapshot_info *info, const float *p,
                              const float *m, const float *v, int *held, int replaces,
                              ntk_status (*in_place)(const void *ctx), const void *ctx) {
  char why[400];
  if (ntk_snapshot_check(info, why, sizeof why))
    return ntk_error(NTK_EINTERNAL, "%s: snapshot not written, its header would be refused: %s", path, why);
  if (ntk_adam_state_problem(p, m, v, (size_t)info->nparams, why, sizeof why))
    return ntk_error(NTK_ENONFINITE, "%s: snapshot not written: %s", path, why);
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
  if ((st = ntk_tmp_create(path, tmp, sizeof tmp, &fd, NTK_MAGIC_SNAPSHOT))) return st;
  if (write_all(fd, h, sizeof h) || write_all(fd, p, bytes) || write_all(fd, m, bytes) || write_all(fd, v, bytes))
    st = ntk_error(NTK_EIO, "%s: cannot write the snapshot: %s", tmp, strerror(errno));
  if (!st && fsync(fd)) st = ntk_error(NTK_EIO, "%s: fsync failed: %s", tmp, strerror(errno));
  if (!st && held) st = ntk_lock_file(fd, path, "training snapshot", 1);
  if (st || !held) {
    if (close(fd) && !st) st = ntk_error(NTK_EIO, "%s: close failed: %s", tmp, strerror(errno));
    fd = -1;
  }
  if (!st && in_place) st = in_place(ctx);
  if (!st) st = commit(tmp, path, replaces, in_place, ctx);
  if (st) {
    unlink(tmp);
    if (fd >= 0) close(fd);
    return st;
  }
  st = ntk_fsync_folder_of(path);
  if (held && !st) *held = fd;
  else if (fd >= 0) close(fd);
  return st;
}

ntk_status ntk_snapshot_read(const char *path, struct ntk_snapshot_info *info, float **state, struct stat *read) {
  *state = NULL;
  int fd;
  ntk_status ost = ntk_open_regular(path, O_RDONLY, "[train] snapshot", &fd);
  if (ost) return ost;
  if (read && fstat(fd, read)) {
    int e = errno;
    close(fd);
    return ntk_error(NTK_EIO, "%s: stat failed: %s", path, strerror(e));
  }
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return ntk_error(NTK_EIO, "%s: cannot open: %s", path, strerror(errno));
  }
  unsigned char h[SNAP_HEADER];
  ntk_status st = NTK_OK;
  uint64_t version = 0, hs, ps;
  size_t got = fread(h, 1, sizeof h, f);
  if (got >= 8 && !memcmp(h, SNAP_MAGIC, 8) && got != sizeof h)
    st = ntk_error(NTK_ECORRUPT, "%s: an ntkd training snapshot cut short inside its header (%zu of %d bytes)", path,
                   got, SNAP_HEADER);
  else if (got != sizeof h || memcmp(h, SNAP_MAGIC, 8))
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
  char why[400];
  if (!st) {
    /* A header whose checksum matches can still be forged or written by a
     * faulty ntkd: every field is checked before any is used. */
    decode(h, info);
    if (ntk_snapshot_check(info, why, sizeof why))
      st = ntk_error(NTK_ECORRUPT, "%s: snapshot header has an impossible value: %s", path, why);
  }
  float *s = NULL;
  size_t n = st ? 0 : (size_t)info->nparams;
  /* Memory follows the file, not its header's claim: the size first. */
  struct stat sb;
  if (!st && fstat(fd, &sb)) st = ntk_error(NTK_EIO, "%s: cannot stat: %s", path, strerror(errno));
  if (!st && (uint64_t)sb.st_size != SNAP_HEADER + 3 * (uint64_t)n * sizeof *s)
    st = ntk_error(NTK_ECORRUPT, "%s: snapshot is %s: %llu bytes, its header says %llu", path,
                   (uint64_t)sb.st_size < SNAP_HEADER + 3 * (uint64_t)n * sizeof *s ? "truncated" : "longer than its header says",
                   (unsigned long long)sb.st_size, (unsigned long long)(SNAP_HEADER + 3 * (uint64_t)n * sizeof *s));
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
    else if (ntk_adam_state_problem(s, s + n, s + 2 * n, n, why, sizeof why))
      st = ntk_error(NTK_ECORRUPT, "%s: snapshot has an impossible value: %s", path, why);
  }
  fclose(f);
  if (st) {
    free(s);
    return st;
  }
  *state = s;
  return NTK_OK;
}
