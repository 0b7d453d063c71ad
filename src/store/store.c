/* The tile store (docs/STORE-FORMAT.md). Two copies of the header, the job
 * text, then self-describing records at aligned offsets: each names its
 * store (a random id), its tile and its extent, and carries checksums of
 * itself and of its payload. A scan that meets damage looks for the next
 * intact record at the following aligned offsets, so damage loses only the
 * tiles it touches; a resume marks damaged stretches dead and cuts the
 * torn tail, so that afterwards every byte before the end belongs to an
 * intact record or a dead region. */
#define _GNU_SOURCE /* renameat2 */
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "base/codec.h"
#include "base/defs.h"
#include "base/fsutil.h"
#include "store/lock.h"
#include "base/magic.h"
#include "base/signals.h"
#include "store/index.h"
#include "store/le.h"

static const char header_magic[NTK_MAGIC_LEN] = NTK_MAGIC_STORE;
static const char record_magic[NTK_MAGIC_LEN] = NTK_MAGIC_RECORD;
#define KIND_TILE 1
#define KIND_DEAD 2
#define NO_TILE UINT64_MAX
/* The second header copy, and where the job text starts. */
#define HEADER_B NTK_STORE_HEADER_SIZE
#define JOB_TEXT_AT (2 * NTK_STORE_HEADER_SIZE)
#define JOB_TEXT_MAX ((uint64_t)64 << 20)
#define PAGE 4096u

/* One stretch that is not an intact record (all of them, for the repair;
 * the scan keeps the first few for reports). */
struct region_vec {
  struct ntk_store_region *v;
  size_t n, cap;
};

struct ntk_store {
  int fd;
  int writable;
  int ifd;           /* the index, open for appending (writable stores) */
  char path[NTK_PATH_MAX];
  struct ntk_store_info info;
  struct ntk_tiling tiling;
  uint64_t first;    /* offset of the first record */
  uint64_t *offset;  /* per tile: record offset, 0 = absent */
  uint64_t *length;  /* per tile: payload bytes of that record */
  uint64_t *seq;     /* per tile: that record's sequence number */
  uint64_t done;
  uint64_t end;      /* append position */
  uint64_t last_seq; /* highest sequence number seen */
  char *job_text;    /* "" if damaged */
  struct ntk_store_scan scan;
  struct region_vec regions;
  unsigned char good_header[NTK_STORE_HEADER_SIZE]; /* an intact copy, for repairs */
  /* The writer's reservations and its index (rank 0's main thread reserves
   * and confirms while its sync thread syncs): under mu. */
  pthread_mutex_t mu;
  struct ntk_store_grant *open; /* reserved, neither confirmed nor abandoned */
  size_t nopen, capopen;
  struct ntk_index_entry *fresh; /* confirmed since the last index sync */
  size_t nfresh, capfresh;
  uint64_t synced_covered;       /* the last sync mark's `covered` */
  uint64_t settled;              /* the index's sync mark when opened (0: none): what a scan finds
                                    past it that is not a record is an unfinished write */
  int stop_aware;                /* the scan gives up on a stop signal (the audit) */
};


/* Header layout (offsets in bytes). */
enum {
  H_MAGIC = 0, H_VERSION = 8, H_HSIZE = 12, H_N = 16, H_D = 24, H_TILE = 32, H_ELEM = 36, H_KERNELS = 40,
  H_ALIGN = 44, H_NTILES = 48, H_JOBHASH = 56, H_STOREID = 72, H_NTRAIN = 88, H_FLAGS = 96,
  H_TEXT_AT = 104, H_TEXT_LEN = 112, H_TEXT_RAW = 120, H_TEXT_SUM = 128, H_FIRST = 136, H_DESC = 144,
  H_CHECKSUM = NTK_STORE_HEADER_SIZE - 8,
};
/* Record header layout. */
enum {
  R_MAGIC = 0, R_VERSION = 8, R_KIND = 12, R_STOREID = 16, R_TILE = 32, R_ROWS = 40, R_COLS = 44,
  R_RAW = 48, R_LEN = 56, R_SUM = 64, R_CODEC = 72, R_EXTENT = 80, R_SEQ = 88,
  R_CHECKSUM = NTK_STORE_RECORD_HEADER - 8,
};

static int kernel_count(uint32_t mask) { return (mask & 1) + ((mask >> 1) & 1); }

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static size_t raw_bytes(const struct ntk_store_info *info, const struct ntk_tile *t) {
  return (size_t)(t->rows * t->cols) * info->elem * (size_t)kernel_count(info->kernels);
}

size_t ntk_store_raw_bytes(const ntk_store_t *s, const struct ntk_tile *t) { return raw_bytes(&s->info, t); }

static ntk_status io_error(const ntk_store_t *s, const char *what) {
  return ntk_error(NTK_EIO, "%s: %s: %s", s->path, what, strerror(errno));
}

static ntk_status pwrite_all(int fd, const void *buf, size_t len, uint64_t off) {
  const unsigned char *p = buf;
  while (len) {
    ssize_t w = pwrite(fd, p, len > (1u << 30) ? (1u << 30) : len, (off_t)off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return NTK_EIO;
    }
    p += w;
    len -= (size_t)w;
    off += (uint64_t)w;
  }
  return NTK_OK;
}

/* 0 on success, 1 at end of file before len bytes, -1 on error. */
static int pread_all(int fd, void *buf, size_t len, uint64_t off) {
  unsigned char *p = buf;
  while (len) {
    ssize_t r = pread(fd, p, len > (1u << 30) ? (1u << 30) : len, (off_t)off);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) return 1;
    p += r;
    len -= (size_t)r;
    off += (uint64_t)r;
  }
  return 0;
}

void ntk_store_tiling_of(const struct ntk_store_info *info, struct ntk_tiling *t) {
  ntk_tiling_init(t, info->n, info->tile);
  if (info->n_train && !info->test_test) ntk_tiling_limit_columns(t, info->n_train);
}

/* Records are page-aligned, so that writers on different nodes never
 * share a page (a network file system writes back whole pages). Stores
 * written before several ranks wrote used 512 bytes for small tiles; they
 * are still read and resumed with their alignment. */
static uint32_t record_alignment(const struct ntk_store_info *info) {
  (void)info;
  return PAGE;
}

static void encode_header(const struct ntk_store_info *info, const struct ntk_tiling *t, uint64_t text_len,
                          uint64_t text_raw, uint64_t text_sum, uint64_t first, unsigned char *h) {
  memset(h, 0, NTK_STORE_HEADER_SIZE);
  memcpy(h + H_MAGIC, header_magic, 8);
  ntk_put32(h + H_VERSION, NTK_STORE_VERSION);
  ntk_put32(h + H_HSIZE, NTK_STORE_HEADER_SIZE);
  ntk_put64(h + H_N, info->n);
  ntk_put64(h + H_D, info->d);
  ntk_put32(h + H_TILE, info->tile);
  ntk_put32(h + H_ELEM, info->elem);
  ntk_put32(h + H_KERNELS, info->kernels);
  ntk_put32(h + H_ALIGN, info->align);
  ntk_put64(h + H_NTILES, t->ntiles);
  memcpy(h + H_JOBHASH, info->job_hash, 16);
  memcpy(h + H_STOREID, info->store_id, 16);
  ntk_put64(h + H_NTRAIN, info->n_train);
  ntk_put32(h + H_FLAGS, info->test_test ? NTK_STORE_FLAG_TEST_TEST : 0);
  ntk_put64(h + H_TEXT_AT, JOB_TEXT_AT);
  ntk_put64(h + H_TEXT_LEN, text_len);
  ntk_put64(h + H_TEXT_RAW, text_raw);
  ntk_put64(h + H_TEXT_SUM, text_sum);
  ntk_put64(h + H_FIRST, first);
  memcpy(h + H_DESC, info->description, strnlen(info->description, NTK_STORE_DESC_MAX - 1));
  ntk_put64(h + H_CHECKSUM, ntk_checksum(h, H_CHECKSUM));
}

/* 1 if `h` is an intact header of any version (magic and checksum). */
static int header_intact(const unsigned char *h) {
  return !memcmp(h + H_MAGIC, header_magic, 8) && ntk_get64(h + H_CHECKSUM) == ntk_checksum(h, H_CHECKSUM);
}

/* Fields of an intact header: refuse what no writer makes, and sizes whose
 * products would overflow (a header with N = 2^64 - 1 is not a store). */
static ntk_status decode_header(ntk_store_t *s, const unsigned char *h) {
  const char *path = s->path;
  struct ntk_store_info *info = &s->info;
  uint32_t version = ntk_get32(h + H_VERSION);
  if (version != NTK_STORE_VERSION)
    return ntk_error(NTK_EINPUT, "%s: store format version %u; this ntkd reads version %d%s", path, version,
                     NTK_STORE_VERSION,
                     version == 1 ? " (version 1 was written by ntkd 0.1: export it with that version, or rerun "
                                    "the job with --overwrite)" : "");
  memset(info, 0, sizeof *info);
  info->n = ntk_get64(h + H_N);
  info->d = ntk_get64(h + H_D);
  info->tile = ntk_get32(h + H_TILE);
  info->elem = ntk_get32(h + H_ELEM);
  info->kernels = ntk_get32(h + H_KERNELS);
  info->align = ntk_get32(h + H_ALIGN);
  memcpy(info->job_hash, h + H_JOBHASH, 16);
  memcpy(info->store_id, h + H_STOREID, 16);
  memcpy(info->description, h + H_DESC, NTK_STORE_DESC_MAX - 1);
  info->n_train = ntk_get64(h + H_NTRAIN);
  uint32_t flags = ntk_get32(h + H_FLAGS);
  info->test_test = (flags & NTK_STORE_FLAG_TEST_TEST) != 0;
  s->first = ntk_get64(h + H_FIRST);
  uint64_t text_len = ntk_get64(h + H_TEXT_LEN), text_raw = ntk_get64(h + H_TEXT_RAW);
  int ok = ntk_get32(h + H_HSIZE) == NTK_STORE_HEADER_SIZE && info->n > 0 && info->n <= NTK_STORE_MAX_N &&
           info->tile > 0 && info->tile <= NTK_STORE_MAX_TILE && (info->elem == 4 || info->elem == 8) &&
           info->kernels > 0 && info->kernels <= 3 && (info->align == 512 || info->align == PAGE) &&
           info->n_train <= info->n && !(flags & ~(uint32_t)NTK_STORE_FLAG_TEST_TEST) &&
           ntk_get64(h + H_TEXT_AT) == JOB_TEXT_AT && text_len <= JOB_TEXT_MAX && text_raw <= JOB_TEXT_MAX &&
           s->first == align_up(JOB_TEXT_AT + text_len, PAGE);
  if (!ok) return ntk_error(NTK_ECORRUPT, "%s: store header has impossible values", path);
  ntk_store_tiling_of(info, &s->tiling);
  if (ntk_get64(h + H_NTILES) != s->tiling.ntiles)
    return ntk_error(NTK_ECORRUPT, "%s: store header tile count is inconsistent", path);
  if (s->tiling.ntiles > ((uint64_t)1 << 34))
    return ntk_error(NTK_ECORRUPT, "%s: %llu tiles is more than ntkd supports", path,
                     (unsigned long long)s->tiling.ntiles);
  return NTK_OK;
}

static ntk_status alloc_index(ntk_store_t *s) {
  size_t n = (size_t)s->tiling.ntiles ? (size_t)s->tiling.ntiles : 1;
  s->offset = calloc(n, sizeof *s->offset);
  s->length = calloc(n, sizeof *s->length);
  s->seq = calloc(n, sizeof *s->seq);
  if (!s->offset || !s->length || !s->seq)
    return ntk_error(NTK_ENOMEM, "%s: out of memory for the tile index", s->path);
  return NTK_OK;
}

static void store_free(ntk_store_t *s) {
  if (!s) return;
  if (s->fd >= 0) close(s->fd);
  if (s->ifd >= 0) close(s->ifd);
  free(s->open);
  free(s->fresh);
  pthread_mutex_destroy(&s->mu);
  free(s->offset);
  free(s->length);
  free(s->seq);
  free(s->job_text);
  free(s->regions.v);
  free(s);
}

static ntk_store_t *store_new(const char *path) {
  ntk_store_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->fd = -1;
  s->ifd = -1;
  pthread_mutex_init(&s->mu, NULL);
  /* The file the name reaches: its index and temporary files sit beside
   * it, whatever symbolic link the caller named (a name that cannot be
   * resolved is kept: opening it reports why). */
  if (ntk_resolve_links(path, s->path, sizeof s->path)) snprintf(s->path, sizeof s->path, "%s", path);
  return s;
}

/* The file a new store replaces (--overwrite), if there is one: locked by
 * this writer until the new one is in its place, so that no job writing
 * it through another name loses it unawares (*fd -1: there is none). */
static ntk_status lock_replaced(const ntk_store_t *s, int *fd) {
  *fd = -1;
  struct stat sb;
  if (lstat(s->path, &sb)) return NTK_OK;
  ntk_status st = ntk_open_regular(s->path, O_RDWR | O_NOFOLLOW, "store", fd);
  if (st == NTK_EIO && errno == EACCES) { /* a read-only file: see whether a writer holds it */
    if (ntk_lock_file_held(s->path))
      return ntk_error(NTK_ELOCKED, "%s: the store is being written by another running job; nothing was changed",
                       s->path);
    return NTK_OK;
  }
  if (!st) st = ntk_lock_file(*fd, s->path, "store");
  if (st && *fd >= 0) {
    close(*fd);
    *fd = -1;
  }
  return st;
}

/* Put the finished temporary file `tmp` at the store's path: over the
 * file there if `replacing` (whose lock this writer holds), else only if
 * nothing appeared there meanwhile (another job that went around the
 * lock file): then NTK_ELOCKED, and `tmp` is left for the caller. */
static ntk_status put_in_place(const ntk_store_t *s, const char *tmp, int replacing) {
  if (replacing) {
    if (rename(tmp, s->path)) return ntk_error(NTK_EIO, "%s: cannot rename into place: %s", s->path, strerror(errno));
    return NTK_OK;
  }
  int rc = renameat2(AT_FDCWD, tmp, AT_FDCWD, s->path, RENAME_NOREPLACE);
  if (rc && (errno == EINVAL || errno == ENOSYS)) { /* a file system without it: link(2) cannot replace either */
    rc = link(tmp, s->path);
    if (rc && errno != EEXIST && (errno == EPERM || errno == ENOSYS || errno == EOPNOTSUPP)) rc = rename(tmp, s->path);
    else if (!rc) unlink(tmp);
  }
  if (rc && errno == EEXIST)
    return ntk_error(NTK_ELOCKED, "%s: another job created this store while this one was starting (it went around "
                     "the lock file); nothing of it was changed", s->path);
  if (rc) return ntk_error(NTK_EIO, "%s: cannot rename into place: %s", s->path, strerror(errno));
  return NTK_OK;
}

/* ---- creation ------------------------------------------------------------ */

ntk_status ntk_store_create(const char *path, const struct ntk_store_info *info, const char *job_text,
                            ntk_store_t **out) {
  *out = NULL;
  ntk_status st = ntk_make_parents(path);
  if (st) return st;
  ntk_store_t *s = store_new(path);
  if (!s) return ntk_error(NTK_ENOMEM, "out of memory");
  s->info = *info;
  s->info.align = record_alignment(info);
  /* A fresh identity: records of any other store, even of the same job,
   * are not this store's. */
  if (getrandom(s->info.store_id, sizeof s->info.store_id, 0) != (ssize_t)sizeof s->info.store_id) {
    uint64_t seed[2] = {(uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32), (uint64_t)clock()};
    memcpy(s->info.store_id, seed, sizeof seed);
  }
  ntk_store_tiling_of(&s->info, &s->tiling);
  if (s->tiling.ntiles > ((uint64_t)1 << 34))
    st = ntk_error(NTK_EUSAGE, "%s: %llu tiles is more than ntkd supports: use a larger tile", path,
                   (unsigned long long)s->tiling.ntiles);
  if (!st) st = alloc_index(s);
  size_t raw = strlen(job_text), cap = ZSTD_compressBound(raw);
  unsigned char *text = st ? NULL : malloc(cap + 1);
  if (!st && !text) st = ntk_error(NTK_ENOMEM, "out of memory");
  size_t tlen = 0;
  if (!st) {
    tlen = ZSTD_compress(text, cap, job_text, raw, 3);
    if (ZSTD_isError(tlen) || tlen > JOB_TEXT_MAX || raw > JOB_TEXT_MAX)
      st = ntk_error(NTK_EUSAGE, "%s: the job description (%zu bytes) is too large for a store", path, raw);
  }
  unsigned char *h = st ? NULL : malloc(NTK_STORE_HEADER_SIZE);
  if (!st && !h) st = ntk_error(NTK_ENOMEM, "out of memory");
  char tmp[NTK_PATH_MAX + 400];
  int fd = -1, old = -1;
  if (!st) st = lock_replaced(s, &old);
  int replacing = old >= 0;
  if (!st) {
    s->first = align_up(JOB_TEXT_AT + tlen, PAGE);
    encode_header(&s->info, &s->tiling, tlen, raw, ntk_checksum(text, tlen), s->first, h);
    memcpy(s->good_header, h, NTK_STORE_HEADER_SIZE);
    st = ntk_tmp_create(s->path, tmp, sizeof tmp, &fd);
    /* Locked before it has a name anyone else could open. */
    if (!st) st = ntk_lock_file(fd, s->path, "store");
  }
  if (!st && (pwrite_all(fd, h, NTK_STORE_HEADER_SIZE, 0) || pwrite_all(fd, h, NTK_STORE_HEADER_SIZE, HEADER_B) ||
              pwrite_all(fd, text, tlen, JOB_TEXT_AT) || ftruncate(fd, (off_t)s->first)))
    st = ntk_error(NTK_EIO, "%s: cannot write the store header: %s", tmp, strerror(errno));
  if (!st && fsync(fd)) st = ntk_error(NTK_EIO, "%s: fsync failed: %s", tmp, strerror(errno));
  /* Replacing a file: the new store's (empty) index first (an index names
   * its store, so the old file, if this stops here, is not misread
   * through it). Else the file first: the index of a store that another
   * job put there meanwhile is not replaced before put_in_place says so. */
  if (!st && replacing) st = ntk_index_write(s->path, s->info.store_id, NULL, 0, s->first, &s->ifd);
  if (!st) st = put_in_place(s, tmp, replacing);
  if (!st && !replacing) st = ntk_index_write(s->path, s->info.store_id, NULL, 0, s->first, &s->ifd);
  if (!st) st = ntk_fsync_folder_of(s->path);
  if (old >= 0) close(old);
  free(h);
  free(text);
  if (!st && !(s->job_text = strdup(job_text))) st = ntk_error(NTK_ENOMEM, "out of memory");
  if (st) {
    if (fd >= 0) {
      close(fd);
      unlink(tmp);
    }
    store_free(s);
    return st;
  }
  s->fd = fd;
  s->writable = 1;
  s->end = s->first;
  s->synced_covered = s->first;
  *out = s;
  return NTK_OK;
}

/* ---- scanning --------------------------------------------------------------- */

enum { REC_BAD, REC_OK, REC_TORN };

/* Classify the 128 bytes at `off`: an intact record of this store whose
 * extent fits in the file (REC_OK), one that runs past the end (REC_TORN:
 * a write cut short), or anything else (REC_BAD: damage, garbage, a record
 * of another store). */
static int classify(const ntk_store_t *s, const unsigned char *r, uint64_t off, uint64_t size) {
  if (memcmp(r + R_MAGIC, record_magic, 8) || ntk_get64(r + R_CHECKSUM) != ntk_checksum(r, R_CHECKSUM)) return REC_BAD;
  if (ntk_get32(r + R_VERSION) != NTK_STORE_VERSION || memcmp(r + R_STOREID, s->info.store_id, 16)) return REC_BAD;
  uint64_t extent = ntk_get64(r + R_EXTENT), A = s->info.align;
  if (extent == 0 || extent % A) return REC_BAD;
  uint32_t kind = ntk_get32(r + R_KIND);
  if (kind == KIND_DEAD) {
    if (ntk_get64(r + R_TILE) != NO_TILE || ntk_get64(r + R_LEN) || ntk_get32(r + R_CODEC)) return REC_BAD;
  } else if (kind == KIND_TILE) {
    uint64_t tile = ntk_get64(r + R_TILE);
    uint32_t codec = ntk_get32(r + R_CODEC);
    if (tile >= s->tiling.ntiles || (codec != NTK_CODEC_SHUFFLE_ZSTD && codec != NTK_CODEC_RAW)) return REC_BAD;
    struct ntk_tile t = ntk_tiling_tile(&s->tiling, tile);
    size_t raw = ntk_store_raw_bytes(s, &t);
    uint64_t len = ntk_get64(r + R_LEN);
    if (ntk_get32(r + R_ROWS) != t.rows || ntk_get32(r + R_COLS) != t.cols || ntk_get64(r + R_RAW) != raw) return REC_BAD;
    if (len == 0 || len > ntk_codec_bound(raw) || extent != align_up(NTK_STORE_RECORD_HEADER + len, A)) return REC_BAD;
    if (codec == NTK_CODEC_RAW && len != raw) return REC_BAD;
  } else {
    return REC_BAD;
  }
  return extent <= size - off ? REC_OK : REC_TORN;
}

/* 1 if [off, off + bytes) reads as zeros (a hole: room reserved for a
 * record not yet written). */
static int all_zero(ntk_store_t *s, uint64_t off, uint64_t bytes) {
  unsigned char buf[1 << 16];
  while (bytes) {
    size_t n = bytes < sizeof buf ? (size_t)bytes : sizeof buf;
    if (pread_all(s->fd, buf, n, off)) return 0;
    for (size_t i = 0; i < n; i++)
      if (buf[i]) return 0;
    off += n;
    bytes -= n;
  }
  return 1;
}

/* 1 if an intact record header of this store is at `off` now: the scan
 * read the place before a running job's writer reached it (zeros for the
 * header), and by the zero check its record was on its way in. */
static int header_now(ntk_store_t *s, uint64_t off) {
  unsigned char r[NTK_STORE_RECORD_HEADER];
  return pread_all(s->fd, r, sizeof r, off) == 0 && classify(s, r, off, UINT64_MAX) != REC_BAD;
}

static ntk_status add_region(ntk_store_t *s, uint64_t off, uint64_t bytes, uint64_t tile, const char *why) {
  /* Past the index's sync mark, several writers leave holes and records
   * not yet whole while they write, and a kill leaves them: unfinished
   * writes, not damage (a resume marks them dead all the same). Only
   * those: a hole reads as zeros, a record being written has our intact
   * header (looked at again: a reader can see a record's place empty and,
   * a moment later, its payload; trust.sh's readers once did); anything
   * else there (garbage, a foreign record) is damage. */
  int unsettled = s->settled && off >= s->settled &&
                  (tile != NO_TILE || all_zero(s, off, bytes) || header_now(s, off));
  struct region_vec *rv = &s->regions;
  if (rv->n == rv->cap) {
    size_t cap = rv->cap ? 2 * rv->cap : 16;
    struct ntk_store_region *v = realloc(rv->v, cap * sizeof *v);
    if (!v) return ntk_error(NTK_ENOMEM, "out of memory while scanning %s", s->path);
    rv->v = v;
    rv->cap = cap;
  }
  struct ntk_store_region r = {off, bytes, tile, why};
  rv->v[rv->n++] = r;
  if (unsettled) {
    s->scan.unsettled++;
    s->scan.unsettled_bytes += bytes;
    return NTK_OK;
  }
  if (s->scan.regions < NTK_STORE_DAMAGED_LIST) s->scan.region_list[s->scan.regions] = r;
  s->scan.regions++;
  s->scan.region_bytes += bytes;
  return NTK_OK;
}

/* The next offset at or after `from` (a multiple of the alignment) where
 * an intact record of this store starts, whole or torn; `size` if none. */
static ntk_status find_next(ntk_store_t *s, uint64_t from, uint64_t size, uint64_t *next) {
  const uint64_t A = s->info.align, chunk = (uint64_t)1 << 20;
  unsigned char *buf = malloc(chunk), r[NTK_STORE_RECORD_HEADER];
  if (!buf) return ntk_error(NTK_ENOMEM, "out of memory while scanning %s", s->path);
  ntk_status st = NTK_OK;
  *next = size;
  for (uint64_t base = from; base < size && *next == size; base += chunk) {
    size_t n = (size_t)(size - base < chunk ? size - base : chunk);
    if (pread_all(s->fd, buf, n, base) < 0) {
      st = io_error(s, "read failed");
      break;
    }
    for (uint64_t p = 0; p + 8 <= n; p += A) {
      if (memcmp(buf + p, record_magic, 8)) continue;
      uint64_t off = base + p;
      if (off + NTK_STORE_RECORD_HEADER > size) break;
      if (pread_all(s->fd, r, sizeof r, off)) {
        st = io_error(s, "read failed");
        break;
      }
      if (classify(s, r, off, size) != REC_BAD) {
        *next = off;
        break;
      }
    }
    if (st) break;
  }
  free(buf);
  return st;
}

/* The payload (and padding) of the tile record at `off`: 1 if its checksum
 * matches and its padding is zero. */
static ntk_status payload_intact(ntk_store_t *s, const unsigned char *r, uint64_t off, unsigned char **buf,
                                 size_t *cap, int *intact) {
  uint64_t len = ntk_get64(r + R_LEN), extent = ntk_get64(r + R_EXTENT);
  size_t body = (size_t)(extent - NTK_STORE_RECORD_HEADER);
  if (body > *cap) {
    free(*buf);
    *cap = body;
    if (!(*buf = malloc(body))) return ntk_error(NTK_ENOMEM, "out of memory while scanning %s", s->path);
  }
  int rc = pread_all(s->fd, *buf, body, off + NTK_STORE_RECORD_HEADER);
  if (rc < 0) return io_error(s, "read failed");
  *intact = rc == 0 && ntk_checksum(*buf, (size_t)len) == ntk_get64(r + R_SUM);
  for (size_t i = (size_t)len; i < body && *intact; i++)
    if ((*buf)[i]) *intact = 0;
  return NTK_OK;
}

/* Drop tile `tile` from the index built so far (its record turned out
 * damaged or missing). */
static void unindex(ntk_store_t *s, uint64_t tile) {
  if (!s->offset[tile]) return;
  s->offset[tile] = 0;
  s->scan.payload_bytes -= s->length[tile];
  s->scan.records--;
  s->done--;
}

/* Index the records from `start` on (the store's first record, or the
 * index's sync mark). beyond[tile] (NULL without an index) marks tiles the
 * index places at or after `start`: the scan must meet their record there
 * intact, or they are dropped again. */
static ntk_status scan_records(ntk_store_t *s, int check_payload, uint64_t size, uint64_t start,
                               unsigned char *beyond) {
  unsigned char r[NTK_STORE_RECORD_HEADER];
  unsigned char *buf = NULL;
  size_t cap = 0;
  uint64_t off = start;
  ntk_status st = NTK_OK;
  /* Tiles that have a damaged record: they count as damaged only while no
   * intact record of theirs exists. */
  unsigned char *hurt = calloc((size_t)s->tiling.ntiles ? (size_t)s->tiling.ntiles : 1, 1);
  if (!hurt) return ntk_error(NTK_ENOMEM, "out of memory while scanning %s", s->path);
  while (off < size && !st) {
    if (s->stop_aware && ntk_stop_requested()) {
      st = ntk_error(NTK_EINTERRUPTED, "interrupted while checking the store");
      break;
    }
    int rc = size - off >= NTK_STORE_RECORD_HEADER ? pread_all(s->fd, r, sizeof r, off) : 1;
    if (rc < 0) {
      st = io_error(s, "read failed");
      break;
    }
    int kind = rc ? REC_TORN : classify(s, r, off, size);
    if (kind == REC_TORN) break; /* the tail: a write cut short */
    if (kind == REC_BAD) {
      uint64_t next = size;
      if ((st = find_next(s, off + s->info.align, size, &next))) break;
      if (next == size) break; /* the tail, classified below */
      st = add_region(s, off, next - off, NO_TILE, "not an intact record of this store");
      off = next;
      continue;
    }
    uint64_t extent = ntk_get64(r + R_EXTENT), seq = ntk_get64(r + R_SEQ);
    if (seq > s->last_seq) s->last_seq = seq;
    if (ntk_get32(r + R_KIND) == KIND_DEAD) {
      s->scan.dead++;
      s->scan.dead_bytes += extent;
      off += extent;
      continue;
    }
    uint64_t tile = ntk_get64(r + R_TILE), len = ntk_get64(r + R_LEN);
    int intact = 1;
    if (check_payload && (st = payload_intact(s, r, off, &buf, &cap, &intact))) break;
    if (beyond && beyond[tile] && s->offset[tile] == off) { /* the index's own record of it */
      beyond[tile] = 0;
      if (intact) {
        off += extent;
        continue;
      }
      unindex(s, tile);
    }
    if (!intact && s->settled && off >= s->settled) {
      st = add_region(s, off, extent, tile, "payload checksum mismatch"); /* a write under way */
    } else if (!intact) {
      if (!hurt[tile] && s->scan.ndamaged_list < NTK_STORE_DAMAGED_LIST)
        s->scan.damaged_list[s->scan.ndamaged_list++] = tile;
      hurt[tile] = 1;
      st = add_region(s, off, extent, tile, "payload checksum mismatch");
    } else if (ntk_tiling_needed(&s->tiling, tile)) {
      /* The newest record of a tile wins (by sequence number, not by
       * position: with several writers file order is not write order). */
      if (s->offset[tile]) {
        s->scan.duplicates++;
        if (seq >= s->seq[tile]) {
          s->scan.payload_bytes -= s->length[tile];
          s->offset[tile] = 0;
        }
      } else {
        s->done++;
      }
      if (!s->offset[tile]) {
        s->offset[tile] = off;
        s->length[tile] = len;
        s->seq[tile] = seq;
        s->scan.payload_bytes += len;
        if (beyond) beyond[tile] = 0; /* a newer record than the index's */
      }
      s->scan.records++;
    }
    /* else: a test x test tile this store does not ask for (no writer
     * makes one): an intact record, stepped over and not counted. */
    off += extent;
  }
  free(buf);
  /* Tiles the index places past its sync mark whose record the scan did
   * not meet intact: missing, to be computed again. */
  for (uint64_t i = 0; beyond && i < s->tiling.ntiles; i++)
    if (beyond[i]) unindex(s, i);
  for (uint64_t i = 0; i < s->tiling.ntiles; i++) s->scan.damaged += hurt[i] && !s->offset[i];
  uint64_t kept = 0; /* keep in the list only tiles that are still damaged */
  for (uint64_t k = 0; k < s->scan.ndamaged_list; k++)
    if (!s->offset[s->scan.damaged_list[k]]) s->scan.damaged_list[kept++] = s->scan.damaged_list[k];
  s->scan.ndamaged_list = kept;
  free(hurt);
  s->end = off;
  s->scan.tail_bytes = off < size ? size - off : 0;
  if (!st && s->scan.tail_bytes) {
    /* What a write cut short leaves is a prefix of a record: less than a
     * record header, or a header of ours whose record runs past the end.
     * Anything else (zeros included: a kill never leaves them, and a
     * zeroed last record looks like nothing else) is damage. */
    int torn = s->scan.tail_bytes < NTK_STORE_RECORD_HEADER ||
               (pread_all(s->fd, r, sizeof r, off) == 0 && classify(s, r, off, size) == REC_TORN);
    /* Zeros at the end are damage even past the index's sync mark: a
     * reservation not yet written extends the file only once a later one
     * is, and then it is a hole before that record, not the tail. */
    s->scan.tail_damaged = !torn;
  }
  return st;
}

/* The job text at JOB_TEXT_AT, as the header describes it; "" and
 * job_text_damaged if it fails its checksum. */
static ntk_status read_job_text(ntk_store_t *s, const unsigned char *h) {
  uint64_t len = ntk_get64(h + H_TEXT_LEN), raw = ntk_get64(h + H_TEXT_RAW);
  unsigned char *buf = malloc((size_t)len + 1);
  s->job_text = malloc((size_t)raw + 1);
  if (!buf || !s->job_text) {
    free(buf);
    return ntk_error(NTK_ENOMEM, "out of memory");
  }
  int ok = pread_all(s->fd, buf, (size_t)len, JOB_TEXT_AT) == 0 && ntk_checksum(buf, (size_t)len) == ntk_get64(h + H_TEXT_SUM);
  if (ok) {
    size_t got = ZSTD_decompress(s->job_text, (size_t)raw, buf, (size_t)len);
    ok = !ZSTD_isError(got) && got == raw;
  }
  s->job_text[ok ? raw : 0] = '\0';
  s->scan.job_text_damaged = !ok;
  free(buf);
  return NTK_OK;
}

/* The index's sync mark, when there is an index of this store whose mark
 * fits the file; 0 otherwise. */
static uint64_t index_mark(ntk_store_t *s, uint64_t size) {
  struct ntk_index_entry *e = NULL;
  size_t n = 0;
  uint64_t covered = 0;
  char why[300];
  int r = ntk_index_read(s->path, s->info.store_id, &e, &n, &covered, why, sizeof why);
  free(e);
  return r > 0 && covered >= s->first && covered <= size ? covered : 0;
}

/* Take the index's entries (PATH.index, written by the job's writer at
 * each sync) as the records below its sync mark, and those it lists past
 * it as expected there (beyond[], for scan_records). Each entry is checked
 * against the store's geometry; one that cannot be right discards the
 * whole index (the caller then scans the store whole). *start stays
 * s->first without a usable index. */
static ntk_status apply_index(ntk_store_t *s, uint64_t size, uint64_t *start, unsigned char **beyond) {
  struct ntk_index_entry *e = NULL;
  size_t n = 0;
  uint64_t covered = 0;
  char why[300] = "";
  int r = ntk_index_read(s->path, s->info.store_id, &e, &n, &covered, why, sizeof why);
  if (r < 0) snprintf(why, sizeof why, "%s", ntk_error_message());
  const uint64_t A = s->info.align;
  int ok = r > 0 && covered >= s->first && covered <= size && (covered - s->first) % A == 0;
  for (size_t i = 0; ok && i < n; i++) {
    if (e[i].tile >= s->tiling.ntiles) {
      ok = 0;
      break;
    }
    struct ntk_tile t = ntk_tiling_tile(&s->tiling, e[i].tile);
    uint64_t extent = align_up(NTK_STORE_RECORD_HEADER + e[i].len, A);
    ok = e[i].offset >= s->first && (e[i].offset - s->first) % A == 0 && e[i].len > 0 &&
         e[i].len <= ntk_codec_bound(ntk_store_raw_bytes(s, &t)) && e[i].offset + extent <= size &&
         !(e[i].offset < covered && e[i].offset + extent > covered);
  }
  if (r > 0 && !ok) snprintf(why, sizeof why, "the index does not fit the store");
  if (!ok) {
    free(e);
    snprintf(s->scan.index_note, sizeof s->scan.index_note, "%s", why);
    return NTK_OK;
  }
  unsigned char *b = calloc((size_t)s->tiling.ntiles ? (size_t)s->tiling.ntiles : 1, 1);
  if (!b) {
    free(e);
    return ntk_error(NTK_ENOMEM, "out of memory for the index of %s", s->path);
  }
  for (size_t i = 0; i < n; i++) {
    uint64_t tile = e[i].tile;
    if (e[i].seq > s->last_seq) s->last_seq = e[i].seq;
    if (!ntk_tiling_needed(&s->tiling, tile)) continue; /* as the scan: stepped over, not counted */
    if (s->offset[tile]) {
      s->scan.duplicates++;
      if (s->seq[tile] >= e[i].seq) continue;
      unindex(s, tile);
    }
    s->offset[tile] = e[i].offset;
    s->length[tile] = e[i].len;
    s->seq[tile] = e[i].seq;
    s->scan.payload_bytes += e[i].len;
    s->scan.records++;
    s->done++;
    b[tile] = e[i].offset >= covered;
  }
  free(e);
  s->scan.index_used = 1;
  s->scan.index_covered = covered;
  *start = covered;
  *beyond = b;
  return NTK_OK;
}

/* Open, pick an intact header copy, index the records: from the index and
 * a scan of what follows its sync mark, or (full_scan, or no usable
 * index) by a scan of the whole store. */
static ntk_status open_scan(const char *path, int writable, int check_payload, int full_scan, ntk_store_t **out) {
  *out = NULL;
  ntk_store_t *s = store_new(path);
  if (!s) return ntk_error(NTK_ENOMEM, "out of memory");
  s->writable = writable;
  ntk_status st = ntk_open_regular(s->path, writable ? O_RDWR : O_RDONLY, "store", &s->fd);
  /* The writer holds the file itself before it reads what it will repair. */
  if (!st && writable) st = ntk_lock_file(s->fd, s->path, "store");
  struct stat sb;
  if (!st && fstat(s->fd, &sb)) st = io_error(s, "stat failed");
  unsigned char *h = st ? NULL : malloc(2 * NTK_STORE_HEADER_SIZE);
  if (!st && !h) st = ntk_error(NTK_ENOMEM, "out of memory");
  if (!st) {
    uint64_t size = (uint64_t)sb.st_size;
    size_t got = (size_t)(size < 2 * NTK_STORE_HEADER_SIZE ? size : 2 * NTK_STORE_HEADER_SIZE);
    memset(h, 0, 2 * NTK_STORE_HEADER_SIZE);
    if (pread_all(s->fd, h, got, 0) < 0) st = io_error(s, "cannot read the header");
    unsigned char *a = h, *b = h + NTK_STORE_HEADER_SIZE;
    int a_ok = !st && header_intact(a), b_ok = !st && header_intact(b);
    if (st) {
    } else if (!a_ok && !b_ok) {
      if (memcmp(a, header_magic, 8) && memcmp(b, header_magic, 8))
        st = ntk_error(NTK_EINPUT, "%s: not an ntkd store (no NTKDSTOR magic)", path);
      else
        st = ntk_error(NTK_ECORRUPT, "%s: both copies of the store header are damaged", path);
    } else {
      const unsigned char *good = a_ok ? a : b;
      /* Two intact copies that differ: neither can be trusted. */
      if (a_ok && b_ok && memcmp(a, b, NTK_STORE_HEADER_SIZE))
        st = ntk_error(NTK_ECORRUPT, "%s: the two copies of the store header disagree", path);
      if (!st) st = decode_header(s, good);
      if (!st) {
        memcpy(s->good_header, good, NTK_STORE_HEADER_SIZE);
        s->scan.header_damaged = !(a_ok && b_ok);
        if (size < s->first) st = ntk_error(NTK_ECORRUPT, "%s: store is shorter than its own header", path);
      }
      if (!st) st = read_job_text(s, good);
      if (!st) st = alloc_index(s);
      uint64_t start = s->first;
      unsigned char *beyond = NULL;
      if (!st && !full_scan) st = apply_index(s, size, &start, &beyond);
      if (!st && full_scan) s->settled = index_mark(s, size);
      else if (!st && s->scan.index_used) s->settled = s->scan.index_covered;
      s->scan.settled = s->settled;
      if (!st) st = scan_records(s, check_payload, size, start, beyond);
      free(beyond);
    }
  }
  free(h);
  if (st) {
    store_free(s);
    return st;
  }
  *out = s;
  return NTK_OK;
}

ntk_status ntk_store_open(const char *path, int flags, ntk_store_t **out) {
  return open_scan(path, 0, flags & NTK_STORE_CHECK_PAYLOAD, (flags & NTK_STORE_FULL_SCAN) != 0, out);
}

/* ---- resuming: repair before appending --------------------------------------- */

static void encode_record(const ntk_store_t *s, unsigned char *r, uint32_t kind, uint64_t tile,
                          const struct ntk_tile *t, uint64_t len, uint64_t sum, uint64_t extent, uint64_t seq) {
  memset(r, 0, NTK_STORE_RECORD_HEADER);
  memcpy(r + R_MAGIC, record_magic, 8);
  ntk_put32(r + R_VERSION, NTK_STORE_VERSION);
  ntk_put32(r + R_KIND, kind);
  memcpy(r + R_STOREID, s->info.store_id, 16);
  ntk_put64(r + R_TILE, tile);
  if (t) {
    ntk_put32(r + R_ROWS, (uint32_t)t->rows);
    ntk_put32(r + R_COLS, (uint32_t)t->cols);
    ntk_put64(r + R_RAW, ntk_store_raw_bytes(s, t));
    ntk_put32(r + R_CODEC, NTK_CODEC_SHUFFLE_ZSTD);
  }
  ntk_put64(r + R_LEN, len);
  ntk_put64(r + R_SUM, sum);
  ntk_put64(r + R_EXTENT, extent);
  ntk_put64(r + R_SEQ, seq);
  ntk_put64(r + R_CHECKSUM, ntk_checksum(r, R_CHECKSUM));
}

static ntk_status rewrite_index(ntk_store_t *s) {
  struct ntk_index_entry *e = malloc((size_t)(s->done ? s->done : 1) * sizeof *e);
  if (!e) return ntk_error(NTK_ENOMEM, "out of memory for the index of %s", s->path);
  size_t n = 0;
  for (uint64_t t = 0; t < s->tiling.ntiles; t++)
    if (s->offset[t] && n < s->done) e[n++] = (struct ntk_index_entry){t, s->offset[t], s->length[t], s->seq[t]};
  if (s->ifd >= 0) close(s->ifd);
  s->ifd = -1;
  ntk_status st = ntk_index_write(s->path, s->info.store_id, e, n, s->end, &s->ifd);
  free(e);
  if (!st) s->synced_covered = s->end;
  return st;
}

ntk_status ntk_store_resume(const char *path, const char *job_text, ntk_store_t **out) {
  ntk_store_t *s;
  ntk_status st = open_scan(path, 1, 1, 0, &s);
  if (st) return st;
  struct ntk_store_scan *sc = &s->scan;
  /* Both header copies from the intact one. */
  if (sc->header_damaged && (pwrite_all(s->fd, s->good_header, NTK_STORE_HEADER_SIZE, 0) ||
                             pwrite_all(s->fd, s->good_header, NTK_STORE_HEADER_SIZE, HEADER_B)))
    st = io_error(s, "cannot repair the store header");
  /* The job text from the job itself (the caller checked the job hash):
   * the same text compressed the same way gives the same bytes. */
  if (!st && sc->job_text_damaged) {
    const unsigned char *h = s->good_header;
    size_t raw = strlen(job_text), cap = ZSTD_compressBound(raw);
    unsigned char *text = malloc(cap + 1);
    size_t tlen = text ? ZSTD_compress(text, cap, job_text, raw, 3) : 0;
    if (text && !ZSTD_isError(tlen) && tlen == ntk_get64(h + H_TEXT_LEN) && raw == ntk_get64(h + H_TEXT_RAW) &&
        ntk_checksum(text, tlen) == ntk_get64(h + H_TEXT_SUM)) {
      if (pwrite_all(s->fd, text, tlen, JOB_TEXT_AT)) st = io_error(s, "cannot repair the job text");
      free(s->job_text);
      s->job_text = strdup(job_text);
      if (!s->job_text) st = ntk_error(NTK_ENOMEM, "out of memory");
    } else {
      fprintf(stderr, "ntkd: note: the job text kept in %s is damaged and this zstd cannot rebuild it "
              "byte for byte; only messages use it\n", path);
    }
    free(text);
  }
  /* Each damaged stretch becomes a dead region; its tiles are missing now. */
  for (size_t i = 0; i < s->regions.n && !st; i++) {
    unsigned char r[NTK_STORE_RECORD_HEADER];
    const struct ntk_store_region *g = &s->regions.v[i];
    encode_record(s, r, KIND_DEAD, NO_TILE, NULL, 0, 0, g->bytes, ++s->last_seq);
    if (pwrite_all(s->fd, r, sizeof r, g->offset)) st = io_error(s, "cannot mark a damaged region");
  }
  /* The tail, torn or damaged, is cut: appends follow the last intact record. */
  if (!st && sc->tail_bytes && ftruncate(s->fd, (off_t)s->end)) st = io_error(s, "cannot truncate the tail");
  if (!st && fsync(s->fd)) st = io_error(s, "fsync failed");
  /* A fresh index of everything now in the store (rebuilt from the scan
   * when there was none): every byte below the end is accounted for. */
  if (!st) st = rewrite_index(s);
  if (st) {
    store_free(s);
    return st;
  }
  *out = s;
  return NTK_OK;
}

/* ---- access -------------------------------------------------------------------- */

ntk_status ntk_store_close(ntk_store_t *s) {
  if (!s) return NTK_OK;
  ntk_status st = NTK_OK;
  if (s->writable && s->fd >= 0) st = ntk_store_sync(s);
  if (s->fd >= 0 && close(s->fd) && !st) st = io_error(s, "close failed");
  s->fd = -1;
  store_free(s);
  return st;
}

const struct ntk_store_info *ntk_store_get_info(const ntk_store_t *s) { return &s->info; }
const struct ntk_tiling *ntk_store_tiling(const ntk_store_t *s) { return &s->tiling; }
const struct ntk_store_scan *ntk_store_get_scan(const ntk_store_t *s) { return &s->scan; }
const char *ntk_store_job_text(const ntk_store_t *s) { return s->job_text ? s->job_text : ""; }
uint64_t ntk_store_tiles_done(const ntk_store_t *s) { return s->done; }

int ntk_store_has_tile(const ntk_store_t *s, uint64_t tile) {
  return tile < s->tiling.ntiles && s->offset[tile] != 0;
}

uint64_t ntk_store_record_offset(const ntk_store_t *s, uint64_t tile) {
  return tile < s->tiling.ntiles ? s->offset[tile] : 0;
}

int ntk_store_is_damaged(const ntk_store_t *s) {
  const struct ntk_store_scan *c = &s->scan;
  return c->regions || c->damaged || c->tail_damaged || c->header_damaged || c->job_text_damaged;
}

static ntk_status read_payload(ntk_store_t *s, uint64_t tile, void **payload, size_t *len, int *codec);

ntk_status ntk_store_read_tile(ntk_store_t *s, ntk_codec_t *codec, uint64_t tile, void *raw) {
  struct ntk_tile t = ntk_tiling_tile(&s->tiling, tile);
  void *payload;
  size_t len, rawb = ntk_store_raw_bytes(s, &t);
  int id = 0;
  ntk_status st = read_payload(s, tile, &payload, &len, &id);
  if (st) return st;
  st = ntk_codec_decode(codec, id, payload, len, (int)s->info.elem, raw, rawb);
  free(payload);
  if (st) return ntk_error(st, "tile %llu: %s", (unsigned long long)tile, ntk_error_message());
  return NTK_OK;
}

ntk_status ntk_store_read_kernel(ntk_store_t *s, ntk_codec_t *codec, uint64_t tile, int which, void *raw,
                                 void *out) {
  struct ntk_tile t = ntk_tiling_tile(&s->tiling, tile);
  ntk_status st = ntk_store_read_tile(s, codec, tile, raw);
  if (st) return st;
  /* The raw tile holds NNGP, then NTK when both are stored. */
  size_t one = (size_t)(t.rows * t.cols) * s->info.elem;
  size_t off = (which == NTK_KERNEL_NTK && (s->info.kernels & NTK_KERNEL_NNGP)) ? one : 0;
  memcpy(out, (char *)raw + off, one);
  return NTK_OK;
}

/* ---- writing: reservations, records, the index ------------------------------- */

static void encode_tile_record(const struct ntk_store_info *info, const struct ntk_tile *t,
                               const struct ntk_store_grant *g, unsigned char *r) {
  memset(r, 0, NTK_STORE_RECORD_HEADER);
  memcpy(r + R_MAGIC, record_magic, 8);
  ntk_put32(r + R_VERSION, NTK_STORE_VERSION);
  ntk_put32(r + R_KIND, KIND_TILE);
  memcpy(r + R_STOREID, info->store_id, 16);
  ntk_put64(r + R_TILE, g->tile);
  ntk_put32(r + R_ROWS, (uint32_t)t->rows);
  ntk_put32(r + R_COLS, (uint32_t)t->cols);
  ntk_put64(r + R_RAW, raw_bytes(info, t));
  ntk_put32(r + R_CODEC, (uint32_t)g->codec);
  ntk_put64(r + R_LEN, g->len);
  ntk_put64(r + R_SUM, g->checksum);
  ntk_put64(r + R_EXTENT, g->extent);
  ntk_put64(r + R_SEQ, g->seq);
  ntk_put64(r + R_CHECKSUM, ntk_checksum(r, R_CHECKSUM));
}

void ntk_store_encode_record(const struct ntk_store_info *info, const struct ntk_tile *t,
                             const struct ntk_store_grant *g, unsigned char *rec) {
  encode_tile_record(info, t, g, rec);
}

int ntk_store_header_names(const unsigned char *h, const struct ntk_store_info *info) {
  return header_intact(h) && !memcmp(h + H_STOREID, info->store_id, 16) && ntk_get32(h + H_VERSION) == NTK_STORE_VERSION;
}

uint64_t ntk_store_extent(const struct ntk_store_info *info, uint64_t len) {
  return align_up(NTK_STORE_RECORD_HEADER + len, info->align);
}

ntk_status ntk_store_reserve(ntk_store_t *s, uint64_t tile, uint64_t len, uint64_t checksum, int codec,
                             struct ntk_store_grant *g) {
  memset(g, 0, sizeof *g);
  if (!s->writable) return ntk_error(NTK_EINTERNAL, "%s: store opened read-only", s->path);
  if (tile >= s->tiling.ntiles)
    return ntk_error(NTK_ECOMM, "a tile number (%llu) this store does not hold", (unsigned long long)tile);
  struct ntk_tile t = ntk_tiling_tile(&s->tiling, tile);
  size_t rawb = ntk_store_raw_bytes(s, &t);
  if (len == 0 || len > ntk_codec_bound(rawb) || (codec != NTK_CODEC_SHUFFLE_ZSTD && codec != NTK_CODEC_RAW) ||
      (codec == NTK_CODEC_RAW && len != rawb))
    return ntk_error(NTK_ECOMM, "tile %llu: a %llu-byte payload of codec %d cannot be a tile of this store",
                     (unsigned long long)tile, (unsigned long long)len, codec);
  pthread_mutex_lock(&s->mu);
  ntk_status st = NTK_OK;
  if (s->nopen == s->capopen) {
    size_t cap = s->capopen ? 2 * s->capopen : 16;
    struct ntk_store_grant *v = realloc(s->open, cap * sizeof *v);
    if (!v) st = ntk_error(NTK_ENOMEM, "out of memory");
    else s->open = v, s->capopen = cap;
  }
  if (!st) {
    g->tile = tile;
    g->len = len;
    g->checksum = checksum;
    g->codec = (uint64_t)codec;
    g->offset = s->end;
    g->extent = align_up(NTK_STORE_RECORD_HEADER + len, s->info.align);
    g->seq = ++s->last_seq;
    s->end += g->extent;
    s->open[s->nopen++] = *g;
  }
  pthread_mutex_unlock(&s->mu);
  return st;
}

/* Remove the open reservation matching g; 0 if there is none. Under mu. */
static int close_reservation(ntk_store_t *s, const struct ntk_store_grant *g) {
  for (size_t i = 0; i < s->nopen; i++)
    if (s->open[i].offset == g->offset && s->open[i].tile == g->tile && s->open[i].seq == g->seq) {
      s->open[i] = s->open[--s->nopen];
      return 1;
    }
  return 0;
}

ntk_status ntk_store_confirm(ntk_store_t *s, const struct ntk_store_grant *g) {
  pthread_mutex_lock(&s->mu);
  ntk_status st = NTK_OK;
  if (!close_reservation(s, g)) {
    st = ntk_error(NTK_ECOMM, "tile %llu: a record reported written at offset %llu that was not reserved there",
                   (unsigned long long)g->tile, (unsigned long long)g->offset);
  } else if (s->nfresh == s->capfresh) {
    size_t cap = s->capfresh ? 2 * s->capfresh : 64;
    struct ntk_index_entry *v = realloc(s->fresh, cap * sizeof *v);
    if (!v) st = ntk_error(NTK_ENOMEM, "out of memory");
    else s->fresh = v, s->capfresh = cap;
  }
  if (!st) {
    s->fresh[s->nfresh++] = (struct ntk_index_entry){g->tile, g->offset, g->len, g->seq};
    if (!s->offset[g->tile] || s->seq[g->tile] < g->seq) {
      if (!s->offset[g->tile]) s->done++;
      else s->scan.payload_bytes -= s->length[g->tile];
      s->offset[g->tile] = g->offset;
      s->length[g->tile] = g->len;
      s->seq[g->tile] = g->seq;
      s->scan.payload_bytes += g->len;
    }
  }
  pthread_mutex_unlock(&s->mu);
  return st;
}

ntk_status ntk_store_abandon(ntk_store_t *s, const struct ntk_store_grant *g) {
  pthread_mutex_lock(&s->mu);
  int known = close_reservation(s, g);
  pthread_mutex_unlock(&s->mu);
  if (!known) return NTK_OK;
  /* A dead record over whatever the writer left: scans step over it. */
  unsigned char r[NTK_STORE_RECORD_HEADER];
  encode_record(s, r, KIND_DEAD, NO_TILE, NULL, 0, 0, g->extent, g->seq);
  if (pwrite_all(s->fd, r, sizeof r, g->offset)) return io_error(s, "cannot mark an abandoned record dead");
  return NTK_OK;
}

ntk_status ntk_store_append(ntk_store_t *s, const struct ntk_tile *t, const void *payload, size_t len,
                            uint64_t checksum, int codec) {
  if (!s->writable) return ntk_error(NTK_EINTERNAL, "%s: store opened read-only", s->path);
  if (ntk_store_has_tile(s, t->index)) return NTK_OK;
  static const unsigned char zeros[PAGE];
  struct ntk_store_grant g;
  ntk_status st = ntk_store_reserve(s, t->index, len, checksum, codec, &g);
  if (st) return st;
  unsigned char r[NTK_STORE_RECORD_HEADER];
  encode_tile_record(&s->info, t, &g, r);
  /* Header, payload and padding in one write: a kill leaves a prefix of
   * the record, which the next scan recognises as a torn tail. */
  struct iovec iov[3] = {{r, sizeof r}, {(void *)payload, len}, {(void *)zeros, (size_t)(g.extent - sizeof r - len)}};
  uint64_t at = g.offset, left = g.extent;
  int iv = 0;
  while (left) {
    ssize_t w = pwritev(s->fd, iov + iv, 3 - iv, (off_t)at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : EIO;
      /* Cut the partial record so that the file ends on an intact record
       * (this writer's reservation is the last one: nobody else writes). */
      pthread_mutex_lock(&s->mu);
      close_reservation(s, &g);
      int last = s->end == g.offset + g.extent && !s->nopen;
      if (last) s->end = g.offset;
      pthread_mutex_unlock(&s->mu);
      if (last && ftruncate(s->fd, (off_t)g.offset)) { /* the scan on reopen cuts it instead */ }
      errno = e;
      return io_error(s, e == ENOSPC ? "disk full while writing a tile (finished tiles are kept; "
                                       "free space and rerun to resume)"
                                     : "write failed (finished tiles are kept; rerun to resume)");
    }
    at += (uint64_t)w;
    left -= (uint64_t)w;
    for (size_t done = (size_t)w; done && iv < 3;) { /* step the iovecs past what was written */
      size_t step = done < iov[iv].iov_len ? done : iov[iv].iov_len;
      iov[iv].iov_base = (char *)iov[iv].iov_base + step;
      iov[iv].iov_len -= step;
      done -= step;
      if (!iov[iv].iov_len) iv++;
    }
    while (iv < 3 && !iov[iv].iov_len) iv++;
  }
  return ntk_store_confirm(s, &g);
}

ntk_status ntk_store_audit(ntk_store_t *s, uint64_t **tiles, size_t *ntiles_out) {
  *tiles = NULL;
  *ntiles_out = 0;
  uint64_t covered = s->scan.index_covered;
  if (!s->writable || !s->scan.index_used || covered <= s->first) return NTK_OK;
  /* A second, read-only view of the store below the mark, scanned as a
   * full scan would (every payload checked), while the writer goes on. */
  ntk_store_t *v = store_new(s->path);
  if (!v) return ntk_error(NTK_ENOMEM, "out of memory");
  ntk_status st = ntk_open_regular(s->path, O_RDONLY, "store", &v->fd);
  if (!st) {
    v->info = s->info;
    v->tiling = s->tiling;
    v->first = s->first;
    v->stop_aware = 1;
    st = alloc_index(v);
  }
  if (!st) st = scan_records(v, 1, covered, v->first, NULL);
  uint64_t *bad = NULL;
  size_t nbad = 0;
  if (!st && !(bad = malloc((size_t)(s->tiling.ntiles ? s->tiling.ntiles : 1) * sizeof *bad)))
    st = ntk_error(NTK_ENOMEM, "out of memory");
  if (!st && ntk_stop_requested()) st = ntk_error(NTK_EINTERRUPTED, "interrupted while checking the store");
  /* Every damaged stretch below the mark (and a damaged end of it: covered
   * is a record boundary) becomes a dead region. */
  if (!st && v->end < covered && (st = add_region(v, v->end, covered - v->end, NO_TILE, "damaged"))) {}
  for (size_t i = 0; !st && i < v->regions.n; i++) {
    unsigned char r[NTK_STORE_RECORD_HEADER];
    const struct ntk_store_region *g = &v->regions.v[i];
    pthread_mutex_lock(&s->mu);
    uint64_t seq = ++s->last_seq;
    pthread_mutex_unlock(&s->mu);
    encode_record(s, r, KIND_DEAD, NO_TILE, NULL, 0, 0, g->bytes, seq);
    if (pwrite_all(s->fd, r, sizeof r, g->offset)) st = io_error(s, "cannot mark a damaged region");
  }
  if (!st && v->regions.n && fdatasync(s->fd)) st = io_error(s, "fsync failed");
  /* The tiles the index places below the mark that are not intact there
   * are missing now. */
  for (uint64_t t = 0; !st && t < s->tiling.ntiles; t++) {
    pthread_mutex_lock(&s->mu);
    uint64_t off = s->offset[t];
    if (off && off < covered && v->offset[t] != off) {
      unindex(s, t);
      bad[nbad++] = t;
    }
    pthread_mutex_unlock(&s->mu);
  }
  s->scan.regions += v->scan.regions;
  s->scan.region_bytes += v->scan.region_bytes;
  store_free(v);
  if (st) {
    free(bad);
    return st;
  }
  *tiles = bad;
  *ntiles_out = nbad;
  return NTK_OK;
}

ntk_status ntk_store_sync(ntk_store_t *s) {
  if (!s->writable) return NTK_OK;
  /* What is confirmed now, and how far every byte is accounted for: below
   * the first open reservation (a record still being written). */
  pthread_mutex_lock(&s->mu);
  struct ntk_index_entry *e = s->fresh;
  size_t n = s->nfresh;
  uint64_t covered = s->end;
  for (size_t i = 0; i < s->nopen; i++)
    if (s->open[i].offset < covered) covered = s->open[i].offset;
  s->fresh = NULL;
  s->nfresh = s->capfresh = 0;
  pthread_mutex_unlock(&s->mu);
  ntk_status st = NTK_OK;
  /* The records first (one page cache on this node: the fdatasync covers
   * what this node's ranks wrote; ranks on other nodes sync their own
   * records before they report them written), then the index that names
   * them. */
  if (fdatasync(s->fd)) st = io_error(s, "fsync failed; the store may have lost recent tiles");
  if (!st && (n || covered != s->synced_covered)) {
    if (s->ifd < 0) st = ntk_error(NTK_EINTERNAL, "%s: no index open", s->path);
    else st = ntk_index_append(s->ifd, s->path, e, n, covered);
    if (!st) s->synced_covered = covered;
  }
  free(e);
  return st;
}

ntk_status ntk_store_check_final(ntk_store_t *s) {
  if (!s->writable) return NTK_OK;
  struct stat mine, now;
  if (fstat(s->fd, &mine)) return io_error(s, "stat failed");
  if (stat(s->path, &now) || now.st_ino != mine.st_ino || now.st_dev != mine.st_dev)
    return ntk_error(NTK_ECORRUPT, "%s is no longer the file this job wrote: it was removed or replaced while the "
                     "job ran; run the job again", s->path);
  /* Every tile this writer holds: a record of this store, of that tile and
   * sequence number, where it believes it is (headers only: 128 bytes a
   * tile). */
  uint64_t bad = 0, first_bad = 0, first_off = 0;
  const char *why = "";
  for (uint64_t t = 0; t < s->tiling.ntiles; t++) {
    if (!s->offset[t]) continue;
    unsigned char r[NTK_STORE_RECORD_HEADER];
    int rc = pread_all(s->fd, r, sizeof r, s->offset[t]);
    if (rc < 0) return io_error(s, "read failed");
    const char *w = rc ? "the file ends before it"
                    : memcmp(r + R_MAGIC, record_magic, 8) || ntk_get64(r + R_CHECKSUM) != ntk_checksum(r, R_CHECKSUM)
                        ? "no intact record header there"
                    : memcmp(r + R_STOREID, s->info.store_id, 16) ? "a record of another store there"
                    : ntk_get32(r + R_KIND) != KIND_TILE || ntk_get64(r + R_TILE) != t || ntk_get64(r + R_SEQ) != s->seq[t] ||
                            ntk_get64(r + R_LEN) != s->length[t]
                        ? "another record there"
                        : NULL;
    if (w && !bad++) first_bad = t, first_off = s->offset[t], why = w;
  }
  /* The index names each of them below its last sync mark. */
  struct ntk_index_entry *e = NULL;
  size_t n = 0;
  uint64_t covered = 0;
  char note[320] = "";
  int r = ntk_index_read(s->path, s->info.store_id, &e, &n, &covered, note, sizeof note);
  if (r < 0) return ntk_error(NTK_EIO, "%s", ntk_error_message());
  uint64_t unlisted = 0;
  if (r > 0) {
    unsigned char *seen = calloc((size_t)(s->tiling.ntiles ? s->tiling.ntiles : 1), 1);
    if (!seen) {
      free(e);
      return ntk_error(NTK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
      if (e[i].tile < s->tiling.ntiles && e[i].offset == s->offset[e[i].tile] && e[i].seq == s->seq[e[i].tile])
        seen[e[i].tile] = 1;
    for (uint64_t t = 0; t < s->tiling.ntiles; t++) unlisted += s->offset[t] && !seen[t];
    free(seen);
    if (covered != s->synced_covered)
      snprintf(note, sizeof note, "its last sync mark is at %llu, this job's at %llu", (unsigned long long)covered,
               (unsigned long long)s->synced_covered);
    else if (unlisted)
      snprintf(note, sizeof note, "it does not list %llu of the %llu tiles", (unsigned long long)unlisted,
               (unsigned long long)s->done);
  }
  free(e);
  int index_wrong = r == 0 || unlisted || covered != s->synced_covered;
  if (bad)
    return ntk_error(NTK_ECORRUPT, "%s changed under this job: %llu of the %llu tiles it holds are not its records "
                     "there any more (first: tile %llu at offset %llu: %s): another writer or damage; run the job "
                     "again to repair the store and recompute them", s->path, (unsigned long long)bad,
                     (unsigned long long)s->done, (unsigned long long)first_bad, (unsigned long long)first_off, why);
  if (index_wrong)
    return ntk_error(NTK_ECORRUPT, "%s: its index (%s.index) is not the one this job wrote: %s; another writer or "
                     "damage; run the job again to rebuild it (no tile is recomputed)", s->path, s->path, note);
  return NTK_OK;
}

ntk_status ntk_store_check_record(ntk_store_t *s, uint64_t tile, int *intact) {
  *intact = 0;
  if (!ntk_store_has_tile(s, tile)) return NTK_OK;
  unsigned char r[NTK_STORE_RECORD_HEADER];
  uint64_t off = s->offset[tile];
  int rc = pread_all(s->fd, r, sizeof r, off);
  if (rc < 0) return io_error(s, "read failed");
  if (rc || memcmp(r, record_magic, 8) || ntk_get64(r + R_CHECKSUM) != ntk_checksum(r, R_CHECKSUM) ||
      memcmp(r + R_STOREID, s->info.store_id, 16) || ntk_get64(r + R_TILE) != tile || ntk_get32(r + R_KIND) != KIND_TILE)
    return NTK_OK;
  unsigned char *buf = NULL;
  size_t cap = 0;
  ntk_status st = payload_intact(s, r, off, &buf, &cap, intact);
  free(buf);
  return st;
}

int ntk_store_check_index(ntk_store_t *s, uint64_t *entries, uint64_t *wrong, char *note, size_t cap) {
  *entries = *wrong = 0;
  struct ntk_index_entry *e = NULL;
  size_t n = 0;
  uint64_t covered = 0;
  int r = ntk_index_read(s->path, s->info.store_id, &e, &n, &covered, note, cap);
  if (r <= 0) {
    if (r < 0) snprintf(note, cap, "%s", ntk_error_message());
    return 0;
  }
  *entries = n;
  for (size_t i = 0; i < n; i++) {
    uint64_t t = e[i].tile;
    /* Entries past the mark the scan used were written after it (a running
     * job): the scan could not have seen their records. */
    if (!s->settled || e[i].offset >= s->settled) continue;
    if (t >= s->tiling.ntiles || !ntk_tiling_needed(&s->tiling, t)) {
      ++*wrong;
      continue;
    }
    int same = s->offset[t] == e[i].offset && s->length[t] == e[i].len && s->seq[t] == e[i].seq;
    int superseded = s->offset[t] && s->seq[t] > e[i].seq;
    if (!same && !superseded) ++*wrong;
  }
  free(e);
  return 1;
}

ntk_status ntk_store_read_payload(ntk_store_t *s, uint64_t tile, void **payload, size_t *len) {
  int codec;
  return read_payload(s, tile, payload, len, &codec);
}

static ntk_status read_payload(ntk_store_t *s, uint64_t tile, void **payload, size_t *len, int *codec) {
  *payload = NULL;
  if (!ntk_store_has_tile(s, tile))
    return ntk_error(NTK_EINCOMPLETE, "%s: tile %llu is not in the store", s->path, (unsigned long long)tile);
  unsigned char r[NTK_STORE_RECORD_HEADER];
  uint64_t off = s->offset[tile];
  int rc = pread_all(s->fd, r, sizeof r, off);
  if (rc < 0) return io_error(s, "read failed");
  /* Read again now: the file may have changed since the scan. */
  if (rc || memcmp(r, record_magic, 8) || ntk_get64(r + R_CHECKSUM) != ntk_checksum(r, R_CHECKSUM) ||
      memcmp(r + R_STOREID, s->info.store_id, 16) || ntk_get64(r + R_TILE) != tile)
    return ntk_error(NTK_ECORRUPT, "%s: record of tile %llu at offset %llu is damaged", s->path,
                     (unsigned long long)tile, (unsigned long long)off);
  size_t n = (size_t)ntk_get64(r + R_LEN);
  void *buf = malloc(n ? n : 1);
  if (!buf) return ntk_error(NTK_ENOMEM, "out of memory");
  rc = pread_all(s->fd, buf, n, off + NTK_STORE_RECORD_HEADER);
  if (rc) {
    free(buf);
    return rc < 0 ? io_error(s, "read failed")
                  : ntk_error(NTK_ECORRUPT, "%s: tile %llu is truncated", s->path, (unsigned long long)tile);
  }
  if (ntk_checksum(buf, n) != ntk_get64(r + R_SUM)) {
    free(buf);
    return ntk_error(NTK_ECORRUPT, "%s: tile %llu (offset %llu) is damaged: checksum mismatch", s->path,
                     (unsigned long long)tile, (unsigned long long)off);
  }
  *payload = buf;
  *len = n;
  *codec = (int)ntk_get32(r + R_CODEC);
  return NTK_OK;
}
