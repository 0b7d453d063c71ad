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
#include <stdarg.h>
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

/* The tiles the store holds, by tile number: open addressing (linear
 * probing, a power-of-two capacity at most half full), so that memory
 * follows the records stored, not the tile count a header claims. */
struct slot {
  uint64_t tile;   /* NO_TILE: empty */
  uint64_t offset; /* the tile's newest intact record: offset, payload bytes, sequence number */
  uint64_t len, seq;
  int beyond;      /* taken from the index past its sync mark: the scan must meet it there */
};
struct tile_map {
  struct slot *v;
  size_t cap, n;
};

/* Index entries (records) in a growable array. */
struct entry_vec {
  struct ntk_index_entry *v;
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
  struct tile_map map; /* the needed tiles present: their newest intact record */
  /* The other intact tile records: older records of a tile that has a
   * newer one, records of tiles the store does not need. No reader uses
   * them; the index lists them so that it accounts for every byte. */
  struct entry_vec others;
  /* The index's entries below its sync mark, sorted by offset (when an
   * index of this store passed the checks of load_index): what
   * probe_entry checks a record against. */
  struct ntk_index_entry *ient;
  size_t nient;
  uint64_t end;      /* append position */
  uint64_t last_seq; /* highest sequence number seen */
  char *job_text;    /* "" if damaged */
  struct ntk_store_scan scan;
  struct region_vec regions;
  unsigned char good_header[NTK_STORE_HEADER_SIZE]; /* an intact copy, for repairs */
  /* The writer's reservations and its index (rank 0's main thread reserves
   * and confirms while its sync thread syncs and the audit thread checks):
   * under mu, as are map and others while a writer runs. */
  pthread_mutex_t mu;
  struct ntk_store_grant *open; /* reserved, neither confirmed nor abandoned */
  size_t nopen, capopen;
  struct ntk_index_entry *fresh; /* confirmed since the last index sync */
  size_t nfresh, capfresh;
  uint64_t synced_covered;       /* the last sync mark's `covered` */
  uint64_t synced_end;           /* `end` at the last sync that succeeded (synced_once) */
  int synced_once;
  int index_stale;               /* the index lists records the audit found damaged or placed
                                    otherwise: the next sync writes a fresh one */
  int sync_failed;               /* an fdatasync failed: the records it covered may be lost (the
                                    kernel may have dropped the pages it could not write), so the
                                    index never names them or moves its mark past them; a resume
                                    checks every record after the mark */
  uint64_t settled;              /* the index's sync mark when opened (0: none): what a scan finds
                                    past it that is not a record is an unfinished write */
  int stop_aware;                /* the scan gives up on a stop signal (the audit) ... */
  const volatile int *stop_also; /* ... or once this is set (NULL: never) */
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

/* ---- the tile map -------------------------------------------------------------- */

static size_t slot_home(uint64_t tile, size_t cap) {
  tile ^= tile >> 33;
  tile *= 0xff51afd7ed558ccdull;
  tile ^= tile >> 33;
  return (size_t)tile & (cap - 1);
}

static struct slot *map_find(const struct tile_map *m, uint64_t tile) {
  if (!m->cap) return NULL;
  for (size_t i = slot_home(tile, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (m->v[i].tile == tile) return &m->v[i];
    if (m->v[i].tile == NO_TILE) return NULL;
  }
}

static int map_grow(struct tile_map *m) {
  size_t cap = m->cap ? 2 * m->cap : 64;
  struct slot *v = malloc(cap * sizeof *v);
  if (!v) return 0;
  for (size_t i = 0; i < cap; i++) v[i].tile = NO_TILE;
  for (size_t i = 0; i < m->cap; i++) {
    if (m->v[i].tile == NO_TILE) continue;
    size_t j = slot_home(m->v[i].tile, cap);
    while (v[j].tile != NO_TILE) j = (j + 1) & (cap - 1);
    v[j] = m->v[i];
  }
  free(m->v);
  m->v = v;
  m->cap = cap;
  return 1;
}

/* The slot of `tile`, added empty (offset 0) if absent; NULL when out of memory. */
static struct slot *map_add(struct tile_map *m, uint64_t tile) {
  struct slot *f = map_find(m, tile);
  if (f) return f;
  if (2 * (m->n + 1) > m->cap && !map_grow(m)) return NULL;
  size_t i = slot_home(tile, m->cap);
  while (m->v[i].tile != NO_TILE) i = (i + 1) & (m->cap - 1);
  memset(&m->v[i], 0, sizeof m->v[i]);
  m->v[i].tile = tile;
  m->n++;
  return &m->v[i];
}

static void map_del(struct tile_map *m, uint64_t tile) {
  struct slot *f = map_find(m, tile);
  if (!f) return;
  size_t mask = m->cap - 1, i = (size_t)(f - m->v);
  /* Backward shift: move up each later slot of the run whose home is not
   * between the hole and it. */
  for (size_t j = (i + 1) & mask; m->v[j].tile != NO_TILE; j = (j + 1) & mask) {
    size_t k = slot_home(m->v[j].tile, m->cap);
    if (j > i ? (k <= i || k > j) : (k <= i && k > j)) {
      m->v[i] = m->v[j];
      i = j;
    }
  }
  m->v[i].tile = NO_TILE;
  m->n--;
}

static int push_entry(struct entry_vec *v, const struct ntk_index_entry *e) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? 2 * v->cap : 64;
    struct ntk_index_entry *p = realloc(v->v, cap * sizeof *p);
    if (!p) return 0;
    v->v = p;
    v->cap = cap;
  }
  v->v[v->n++] = *e;
  return 1;
}

static int by_offset(const void *a, const void *b) {
  uint64_t x = ((const struct ntk_index_entry *)a)->offset, y = ((const struct ntk_index_entry *)b)->offset;
  return x < y ? -1 : x > y;
}

static int by_tile(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

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

/* Both copies damaged, but perhaps not in the same bytes: one stretch of
 * damage across their boundary (the end of copy A, the start of copy B)
 * leaves each copy's other part intact. The copies are identical, so the
 * first k bytes of one and the rest of the other make the header if the
 * damage lies on either side of k; the checksum tells which k does. Or a
 * few bytes differ: each from one copy or the other. Writes the header to
 * `out` and returns 1 if one of these is intact. */
static int header_splice(const unsigned char *a, const unsigned char *b, unsigned char *out) {
  for (int order = 0; order < 2; order++) {
    const unsigned char *head = order ? b : a, *rest = order ? a : b;
    for (size_t k = 1; k < NTK_STORE_HEADER_SIZE; k++) {
      memcpy(out, head, k);
      memcpy(out + k, rest + k, NTK_STORE_HEADER_SIZE - k);
      if (header_intact(out)) return 1;
    }
  }
  /* Scattered damage (a few flipped bytes in each copy, not in the same
   * places): where the copies differ, one of them is right; try every
   * choice when they differ in few bytes. */
  enum { MAXDIFF = 12 };
  size_t pos[MAXDIFF], d = 0;
  for (size_t i = 0; i < NTK_STORE_HEADER_SIZE; i++)
    if (a[i] != b[i]) {
      if (d == MAXDIFF) return 0;
      pos[d++] = i;
    }
  for (uint32_t m = 1; d && m + 1 < (1u << d); m++) {
    memcpy(out, a, NTK_STORE_HEADER_SIZE);
    for (size_t j = 0; j < d; j++)
      if (m >> j & 1) out[pos[j]] = b[pos[j]];
    if (header_intact(out)) return 1;
  }
  return 0;
}

/* What header_choose found in a file's two header copies. */
enum header_pick {
  PICK_NONE,     /* neither copy intact, and no splice of them: not a store, or damaged beyond repair */
  PICK_DISAGREE, /* two intact copies that differ: neither can be trusted */
  PICK_BOTH,     /* both intact and equal */
  PICK_ONE,      /* one intact copy (the other damaged) */
  PICK_SPLICED,  /* both damaged, the header rebuilt from them (header_splice) */
};

/* The one rule a store's header is chosen by, for its opener and for the
 * writer's last check (check_final): copy A if intact, else copy B, else
 * one spliced from both; two intact copies must agree. Writes the chosen
 * header to `out` (PICK_BOTH, PICK_ONE, PICK_SPLICED). */
static enum header_pick header_choose(const unsigned char *a, const unsigned char *b, unsigned char *out) {
  int a_ok = header_intact(a), b_ok = header_intact(b);
  if (a_ok && b_ok && memcmp(a, b, NTK_STORE_HEADER_SIZE)) return PICK_DISAGREE;
  if (a_ok || b_ok) {
    memcpy(out, a_ok ? a : b, NTK_STORE_HEADER_SIZE);
    return a_ok && b_ok ? PICK_BOTH : PICK_ONE;
  }
  return header_splice(a, b, out) ? PICK_SPLICED : PICK_NONE;
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

/* The tile map, empty (sized by what is stored as it grows, not by the
 * tile count). */
static ntk_status alloc_index(ntk_store_t *s) {
  if (!s->map.cap && !map_grow(&s->map)) return ntk_error(NTK_ENOMEM, "%s: out of memory for the tile index", s->path);
  return NTK_OK;
}

static void store_free(ntk_store_t *s) {
  if (!s) return;
  if (s->fd >= 0) close(s->fd);
  if (s->ifd >= 0) close(s->ifd);
  free(s->open);
  free(s->fresh);
  pthread_mutex_destroy(&s->mu);
  free(s->map.v);
  free(s->others.v);
  free(s->ient);
  free(s->job_text);
  free(s->regions.v);
  free(s);
}

static ntk_status store_new(const char *path, ntk_store_t **out) {
  *out = NULL;
  ntk_store_t *s = calloc(1, sizeof *s);
  if (!s) return ntk_error(NTK_ENOMEM, "out of memory");
  s->fd = -1;
  s->ifd = -1;
  pthread_mutex_init(&s->mu, NULL);
  /* The file the name reaches: its index and temporary files sit beside
   * it, whatever symbolic link the caller named (a name whose link cannot
   * be read is kept: opening it reports why). A name, or the file it
   * reaches, longer than s->path holds is refused: cut short it would
   * name another file (`ntkd info DIR/s.ntk.bak` reading DIR/s.ntk). */
  ntk_status st = ntk_resolve_links(path, s->path, sizeof s->path);
  if (st && (st == NTK_EUSAGE || strlen(path) >= sizeof s->path)) {
    if (st != NTK_EUSAGE)
      st = ntk_error(NTK_EUSAGE, "%s: path too long (a store's path may have at most %d bytes)", path,
                     NTK_PATH_MAX - 1);
    store_free(s);
    return st;
  }
  if (st) snprintf(s->path, sizeof s->path, "%s", path);
  *out = s;
  return NTK_OK;
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
  if (!st) st = ntk_lock_file(*fd, s->path, "store", 1);
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
  int rc = ntk_rename_noreplace(tmp, s->path);
  if (rc == 2) rc = rename(tmp, s->path) ? -1 : 0; /* a file system that can do neither */
  if (rc == 1)
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
  ntk_store_t *s;
  if ((st = store_new(path, &s))) return st;
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
    st = ntk_tmp_create(s->path, tmp, sizeof tmp, &fd, NTK_MAGIC_STORE);
    /* Locked before it has a name anyone else could open. */
    if (!st) st = ntk_lock_file(fd, s->path, "store", 1);
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
  /* A hole to the end of the range reads as zeros without reading it. */
  off_t data = lseek(s->fd, (off_t)off, SEEK_DATA);
  if ((data < 0 && errno == ENXIO) || (data >= 0 && (uint64_t)data >= off + bytes)) return 1;
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
    /* Holes hold no record: skip them (a store extended by a sparse
     * 100 GB of nothing took minutes to read). Where the file system
     * cannot say, SEEK_DATA answers `base` itself and all is read. */
    off_t data = lseek(s->fd, (off_t)base, SEEK_DATA);
    if (data < 0 && errno == ENXIO) break; /* nothing but holes to the end */
    if (data > (off_t)base) {
      uint64_t at = (uint64_t)data / A * A;
      if (at > base) {
        base = at;
        if (base >= size) break;
      }
    }
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

/* Take the record at `off` as tile `tile`'s newest, when its sequence
 * number is the highest so far (ties: the later one found); the loser
 * becomes one of the others. 0 when out of memory. */
static int index_record(ntk_store_t *s, uint64_t tile, uint64_t off, uint64_t len, uint64_t seq, int *won) {
  struct ntk_index_entry e = {tile, off, len, seq};
  *won = 0;
  if (!ntk_tiling_needed(&s->tiling, tile)) return push_entry(&s->others, &e); /* test x test: not counted */
  struct slot *f = map_find(&s->map, tile);
  if (f) {
    s->scan.duplicates++;
    if (seq < f->seq) return push_entry(&s->others, &e);
    /* (An entry the index places past its mark is not known to be there
     * yet: if it is, the scan meets it and it joins the others then.) */
    struct ntk_index_entry old = {tile, f->offset, f->len, f->seq};
    if (!f->beyond && !push_entry(&s->others, &old)) return 0;
    s->scan.payload_bytes -= f->len;
  } else {
    if (!(f = map_add(&s->map, tile))) return 0;
    s->scan.records++;
  }
  f->offset = off;
  f->len = len;
  f->seq = seq;
  f->beyond = 0;
  s->scan.payload_bytes += len;
  *won = 1;
  return 1;
}

/* Drop tile `tile`'s record from the index built so far (it turned out
 * damaged, missing, or marked dead): the newest other intact record of it
 * takes its place, if there is one. */
static void unindex(ntk_store_t *s, uint64_t tile) {
  struct slot *f = map_find(&s->map, tile);
  if (!f) return;
  s->scan.payload_bytes -= f->len;
  s->scan.records--;
  map_del(&s->map, tile);
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < s->others.n; i++)
    if (s->others.v[i].tile == tile && (best == SIZE_MAX || s->others.v[i].seq >= s->others.v[best].seq)) best = i;
  if (best == SIZE_MAX) return;
  struct ntk_index_entry e = s->others.v[best];
  s->others.v[best] = s->others.v[--s->others.n];
  s->scan.duplicates--;
  if ((f = map_add(&s->map, tile))) { /* cannot fail: a slot was just freed */
    f->offset = e.offset;
    f->len = e.len;
    f->seq = e.seq;
    s->scan.payload_bytes += e.len;
    s->scan.records++;
  }
}

static ntk_status scan_oom(const ntk_store_t *s) {
  return ntk_error(NTK_ENOMEM, "out of memory while scanning %s", s->path);
}

/* Index the records from `start` on (the store's first record, or the
 * index's sync mark). Tiles the index places at or after `start` (slots
 * marked beyond) must be met there intact, or they are dropped again. */
static ntk_status scan_records(ntk_store_t *s, int check_payload, uint64_t size, uint64_t start) {
  unsigned char r[NTK_STORE_RECORD_HEADER];
  unsigned char *buf = NULL;
  size_t cap = 0;
  uint64_t off = start;
  ntk_status st = NTK_OK;
  /* Tiles that have a damaged record, in the order found: they count as
   * damaged only while no intact record of theirs exists. */
  uint64_t *hurt = NULL;
  size_t nhurt = 0, caphurt = 0;
  while (off < size && !st) {
    if (s->stop_aware && (ntk_stop_requested() || (s->stop_also && *s->stop_also))) {
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
    struct slot *f = map_find(&s->map, tile);
    if (f && f->beyond && f->offset == off) { /* the index's own record of it */
      f->beyond = 0;
      if (intact && f->len == len && f->seq == seq) {
        off += extent;
        continue;
      }
      unindex(s, tile);
    }
    if (!intact && s->settled && off >= s->settled) {
      st = add_region(s, off, extent, tile, "payload checksum mismatch"); /* a write under way */
    } else if (!intact) {
      if (nhurt == caphurt) {
        size_t c = caphurt ? 2 * caphurt : 16;
        uint64_t *v = realloc(hurt, c * sizeof *v);
        if (!v) {
          st = scan_oom(s);
          break;
        }
        hurt = v;
        caphurt = c;
      }
      hurt[nhurt++] = tile;
      st = add_region(s, off, extent, tile, "payload checksum mismatch");
    } else {
      /* The newest record of a tile wins (by sequence number, not by
       * position: with several writers file order is not write order); a
       * test x test tile this store does not ask for (no writer makes one)
       * is stepped over and not counted. */
      int won;
      if (!index_record(s, tile, off, len, seq, &won)) st = scan_oom(s);
    }
    off += extent;
  }
  free(buf);
  /* Tiles the index places past its sync mark whose record the scan did
   * not meet intact: missing, to be computed again. */
  uint64_t *drop = NULL;
  size_t ndrop = 0;
  if (!st && s->map.n && !(drop = malloc(s->map.n * sizeof *drop))) st = scan_oom(s);
  for (size_t i = 0; !st && i < s->map.cap; i++)
    if (s->map.v[i].tile != NO_TILE && s->map.v[i].beyond) drop[ndrop++] = s->map.v[i].tile;
  for (size_t i = 0; i < ndrop; i++) unindex(s, drop[i]);
  free(drop);
  /* Damaged: tiles with a damaged record and no intact one; the list keeps
   * the first of them in the order found. */
  if (nhurt) {
    for (size_t i = 0; i < nhurt && s->scan.ndamaged_list < NTK_STORE_DAMAGED_LIST; i++) {
      int seen = map_find(&s->map, hurt[i]) != NULL;
      for (uint64_t k = 0; k < s->scan.ndamaged_list && !seen; k++) seen = s->scan.damaged_list[k] == hurt[i];
      if (!seen) s->scan.damaged_list[s->scan.ndamaged_list++] = hurt[i];
    }
    if (nhurt) qsort(hurt, nhurt, sizeof *hurt, by_tile); /* never qsort(NULL, 0): undefined */
    for (size_t i = 0; i < nhurt; i++)
      s->scan.damaged += (i == 0 || hurt[i] != hurt[i - 1]) && !map_find(&s->map, hurt[i]);
  }
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
 * job_text_damaged if it fails its checksum. The stored bytes fit the file
 * (the header's first record offset follows from them); the raw size is
 * allocated only once the stored text checks out and its zstd frame says
 * that size. */
static ntk_status read_job_text(ntk_store_t *s, const unsigned char *h) {
  uint64_t len = ntk_get64(h + H_TEXT_LEN), raw = ntk_get64(h + H_TEXT_RAW);
  unsigned char *buf = malloc((size_t)len + 1);
  if (!buf) return ntk_error(NTK_ENOMEM, "out of memory");
  int ok = pread_all(s->fd, buf, (size_t)len, JOB_TEXT_AT) == 0 && ntk_checksum(buf, (size_t)len) == ntk_get64(h + H_TEXT_SUM) &&
           ZSTD_getFrameContentSize(buf, (size_t)len) == raw;
  s->job_text = malloc(ok ? (size_t)raw + 1 : 1);
  if (!s->job_text) {
    free(buf);
    return ntk_error(NTK_ENOMEM, "out of memory");
  }
  if (ok) {
    size_t got = ZSTD_decompress(s->job_text, (size_t)raw, buf, (size_t)len);
    ok = !ZSTD_isError(got) && got == raw;
  }
  s->job_text[ok ? raw : 0] = '\0';
  s->scan.job_text_damaged = !ok;
  free(buf);
  return NTK_OK;
}

/* ---- the index: what it claims, checked ---------------------------------------- */

static uint64_t entry_extent(const ntk_store_t *s, const struct ntk_index_entry *e) {
  return align_up(NTK_STORE_RECORD_HEADER + e->len, s->info.align);
}

/* What the 128 bytes at `off` are, in words, for messages. */
static void describe_at(ntk_store_t *s, uint64_t off, char *what, size_t cap) {
  unsigned char r[NTK_STORE_RECORD_HEADER];
  int rc = pread_all(s->fd, r, sizeof r, off);
  if (rc) {
    snprintf(what, cap, rc < 0 ? "bytes that cannot be read" : "the end of the store");
  } else if (classify(s, r, off, UINT64_MAX) == REC_BAD) {
    snprintf(what, cap, "no intact record header");
  } else if (ntk_get32(r + R_KIND) == KIND_DEAD) {
    snprintf(what, cap, "a dead region of %llu bytes", (unsigned long long)ntk_get64(r + R_EXTENT));
  } else {
    snprintf(what, cap, "a record of tile %llu (sequence number %llu, %llu payload bytes)",
             (unsigned long long)ntk_get64(r + R_TILE), (unsigned long long)ntk_get64(r + R_SEQ),
             (unsigned long long)ntk_get64(r + R_LEN));
  }
}

/* The record header at `off`: 1 if it is an intact header of this store
 * (*dead: of a dead region; *extent: its extent), 0 if not, -1 on a read
 * error. */
static int header_at(ntk_store_t *s, uint64_t off, int *dead, uint64_t *extent) {
  unsigned char r[NTK_STORE_RECORD_HEADER];
  int rc = pread_all(s->fd, r, sizeof r, off);
  if (rc < 0) return -1;
  if (rc || classify(s, r, off, UINT64_MAX) == REC_BAD) return 0;
  *dead = ntk_get32(r + R_KIND) == KIND_DEAD;
  *extent = ntk_get64(r + R_EXTENT);
  return 1;
}

enum { PROBE_OK, PROBE_DEAD, PROBE_OTHER, PROBE_DAMAGED };

/* What is at the place of the index's entry ient[i] now: its record
 * (PROBE_OK: an intact header of that tile, length and sequence number),
 * a region a resume marked dead since the index was written (PROBE_DEAD:
 * a dead header there, or at an earlier record boundary with an extent
 * over it; the tile is missing, not damaged), another intact record
 * (PROBE_OTHER: the index disagrees with the store), or no intact header
 * (PROBE_DAMAGED). `what` says what is there. Reads the record header,
 * and at damage the headers of the boundaries before it. */
static ntk_status probe_entry(ntk_store_t *s, size_t i, int *verdict, char *what, size_t cap) {
  const struct ntk_index_entry *e = &s->ient[i];
  unsigned char r[NTK_STORE_RECORD_HEADER];
  int rc = pread_all(s->fd, r, sizeof r, e->offset);
  if (rc < 0) return io_error(s, "read failed");
  if (!rc && classify(s, r, e->offset, UINT64_MAX) != REC_BAD) {
    if (ntk_get32(r + R_KIND) == KIND_DEAD) *verdict = PROBE_DEAD;
    else if (ntk_get64(r + R_TILE) == e->tile && ntk_get64(r + R_LEN) == e->len && ntk_get64(r + R_SEQ) == e->seq)
      *verdict = PROBE_OK;
    else *verdict = PROBE_OTHER;
    describe_at(s, e->offset, what, cap);
    return NTK_OK;
  }
  /* Damaged bytes: inside a dead region that starts at an earlier record
   * boundary (a region over several records is marked dead at its start)?
   * The boundaries below are the earlier entries and the starts of the
   * gaps between them (each filled by dead regions when the index was
   * checked), down to the first record; the walk stops at the first
   * intact header. */
  *verdict = PROBE_DAMAGED;
  snprintf(what, cap, rc ? "the end of the store" : "no intact record header");
  for (size_t j = i + 1; j-- > 0;) {
    /* Below entry j: the gap before it (if any), then entry j - 1. */
    uint64_t prev_end = j ? s->ient[j - 1].offset + entry_extent(s, &s->ient[j - 1]) : s->first;
    uint64_t cand[2] = {prev_end, j ? s->ient[j - 1].offset : 0};
    for (int c = 0; c < 2; c++) {
      if (c == 0 && prev_end >= s->ient[j].offset) continue; /* no gap */
      if (c == 1 && !j) continue;
      int dead = 0;
      uint64_t ext = 0;
      int h = header_at(s, cand[c], &dead, &ext);
      if (h < 0) return io_error(s, "read failed");
      if (h && dead && cand[c] + ext > e->offset) {
        *verdict = PROBE_DEAD;
        snprintf(what, cap, "a dead region from offset %llu", (unsigned long long)cand[c]);
        return NTK_OK;
      }
      if (h) return NTK_OK; /* an intact header whose record does not reach it */
    }
  }
  return NTK_OK;
}

const char *ntk_store_index_damage(const struct ntk_store_scan *sc, const char *path, char *buf, size_t cap) {
  static const char *const loss[] = {
      "no tile is lost",
      "the store may have been cut short: the tiles the index places past its end are lost, and the resume "
      "computes them again",
      "unless the store was cut short under it: then the tiles past its end are lost, and the resume computes them "
      "again; ntkd verify counts the tiles the store holds"};
  snprintf(buf, cap, "the index (%s.index) %s; run the job again: the resume rebuilds it from the records (%s)", path,
           sc->index_problem, loss[sc->index_past_end]);
  return buf;
}

/* Record the index as damage (verify, info, export and solve report it;
 * a resume rebuilds the index from the records). */
static void index_damage(ntk_store_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void index_damage(ntk_store_t *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->scan.index_problem, sizeof s->scan.index_problem, fmt, ap);
  va_end(ap);
  s->scan.index_damaged = 1;
}

/* From `*pos` to `to`, every byte must be a dead region (a gap between the
 * index's entries, or after the last one up to its sync mark). Where it is
 * not, *blame says whom: the index when an intact record is there (it
 * left it out), not when the bytes there are damaged (store damage, which
 * the scan finds; the index only cannot be checked). */
static ntk_status dead_walk(ntk_store_t *s, uint64_t *pos, uint64_t to, int *ok, int *blame, char *why, size_t cap) {
  while (*ok && *pos < to) {
    uint64_t ext = 0;
    int dead = 0, h = header_at(s, *pos, &dead, &ext);
    if (h < 0) return io_error(s, "read failed");
    if (!h || !dead || *pos + ext > to) {
      char what[160];
      describe_at(s, *pos, what, sizeof what);
      snprintf(why, cap, "no entry accounts for bytes %llu..%llu below its sync mark, where the store has %s",
               (unsigned long long)*pos, (unsigned long long)(to - 1), what);
      *ok = 0;
      *blame = h != 0;
      break;
    }
    *pos += ext;
  }
  return NTK_OK;
}

/* Whether the index's claim holds, as far as it can be checked without
 * reading the records it lists: its mark is a record offset inside the
 * file; every entry names a tile of this store and fits the file without
 * straddling the mark; sorted by offset, the entries below the mark and
 * the dead regions in the gaps between them cover [first record, mark)
 * exactly; and the record that ends at the mark is what the index says
 * (so the mark is a record boundary: a scan from it never starts inside a
 * record). Sorts e[0..n) by offset; *below: how many are below the mark.
 * Reads only the record headers at gaps and the one before the mark.
 * *ok = 0 when it fails; *blame = 0 then when what failed is damage of
 * the store at a place looked at (the index cannot be checked: not used,
 * not blamed). */
static ntk_status index_check(ntk_store_t *s, struct ntk_index_entry *e, size_t n, uint64_t covered, uint64_t size,
                              size_t *below, int *ok, int *blame, char *why, size_t cap) {
  const uint64_t A = s->info.align;
  *ok = 1;
  *blame = 1;
  *below = 0;
  if (covered < s->first || (covered - s->first) % A) {
    snprintf(why, cap, "its sync mark (byte %llu) is not a record offset of this store", (unsigned long long)covered);
    *ok = 0;
    return NTK_OK;
  }
  if (covered > size) {
    s->scan.index_past_end = 1;
    snprintf(why, cap, "its sync mark says the first %llu bytes are written, but the store has %llu",
             (unsigned long long)covered, (unsigned long long)size);
    *ok = 0;
    return NTK_OK;
  }
  for (size_t i = 0; i < n; i++) {
    const char *bad = NULL;
    if (e[i].tile >= s->tiling.ntiles) {
      bad = "names no tile of this store";
    } else {
      struct ntk_tile t = ntk_tiling_tile(&s->tiling, e[i].tile);
      uint64_t extent = entry_extent(s, &e[i]);
      if (e[i].offset < s->first || (e[i].offset - s->first) % A) bad = "is not at a record offset";
      else if (!e[i].len || e[i].len > ntk_codec_bound(ntk_store_raw_bytes(s, &t))) bad = "has an impossible length";
      else if (e[i].offset > size || extent > size - e[i].offset) {
        bad = "runs past the end of the store";
        s->scan.index_past_end = 1;
      }
      else if (e[i].offset < covered && e[i].offset + extent > covered) bad = "straddles its sync mark";
    }
    if (bad) {
      snprintf(why, cap, "its entry for tile %llu at offset %llu %s", (unsigned long long)e[i].tile,
               (unsigned long long)e[i].offset, bad);
      *ok = 0;
      return NTK_OK;
    }
  }
  if (n) qsort(e, n, sizeof *e, by_offset); /* never qsort(NULL, 0): undefined */
  size_t k = 0;
  while (k < n && e[k].offset < covered) k++;
  uint64_t pos = s->first;
  ntk_status st = NTK_OK;
  for (size_t i = 0; i < k && *ok && !st; i++) {
    if (e[i].offset < pos) {
      snprintf(why, cap, "its entries for tiles %llu and %llu overlap at offset %llu",
               (unsigned long long)e[i - 1].tile, (unsigned long long)e[i].tile, (unsigned long long)e[i].offset);
      *ok = 0;
      break;
    }
    st = dead_walk(s, &pos, e[i].offset, ok, blame, why, cap);
    pos = e[i].offset + entry_extent(s, &e[i]);
  }
  int last_is_entry = k && pos == covered;
  if (!st && *ok) st = dead_walk(s, &pos, covered, ok, blame, why, cap);
  *below = k;
  if (!st && *ok && last_is_entry) {
    /* The record before the mark, read: the mark is where it ends. */
    struct ntk_index_entry *save = s->ient;
    size_t nsave = s->nient;
    s->ient = e;
    s->nient = k;
    int v = PROBE_OK;
    char what[160];
    st = probe_entry(s, k - 1, &v, what, sizeof what);
    s->ient = save;
    s->nient = nsave;
    if (!st && v != PROBE_OK && v != PROBE_DEAD) {
      snprintf(why, cap, "its entry for tile %llu at offset %llu, the last below its sync mark, where the store has %s",
               (unsigned long long)e[k - 1].tile, (unsigned long long)e[k - 1].offset, what);
      *ok = 0;
      *blame = v == PROBE_OTHER;
    }
  }
  return st;
}

/* Read the index (PATH.index) and check its claim (index_check). Without
 * full_scan, take its entries below the sync mark as the records there
 * and those past it as expected there (scan_records checks them), and
 * set *start to the mark. An index that fails a check is damage
 * (scan.index_damaged) and is not used: the store is scanned whole. No
 * index, or one of another store, is not damage (index_note says which).
 * *size: the store's size, measured again after the index was read (a
 * running job's records are written before the index names them). */
static ntk_status load_index(ntk_store_t *s, uint64_t *size, int full_scan, uint64_t *start) {
  struct ntk_index_entry *e = NULL;
  size_t n = 0;
  uint64_t covered = 0;
  int verdict = NTK_INDEX_NONE;
  char why[300] = "";
  ntk_status st = ntk_index_read(s->path, s->info.store_id, s->fd, s->first, s->info.align, &e, &n, &covered,
                                 &verdict, why, sizeof why);
  if (st) return st;
  struct stat sb;
  if (fstat(s->fd, &sb)) {
    free(e);
    return io_error(s, "stat failed");
  }
  *size = (uint64_t)sb.st_size;
  char path[NTK_PATH_MAX + 16];
  ntk_index_path(s->path, path, sizeof path);
  int ok = verdict == NTK_INDEX_READ, blame = 1;
  size_t below = 0;
  if (ok && (st = index_check(s, e, n, covered, *size, &below, &ok, &blame, why, sizeof why))) {
    free(e);
    return st;
  }
  /* An index longer than the store can need: the store was cut short
   * (below a tenth of its length, all its records: a cut of 2.9 MB to 200 kB
   * was reported with "no tile is lost"), or the index grew garbage; which,
   * the unread index cannot tell. */
  if (verdict == NTK_INDEX_OUTGROWN) s->scan.index_past_end = 2;
  if (verdict == NTK_INDEX_BLOCKED) s->scan.index_blocked = 1;
  if (verdict == NTK_INDEX_DAMAGED || verdict == NTK_INDEX_OUTGROWN) index_damage(s, "is damaged: %s", why);
  else if (verdict == NTK_INDEX_READ && !ok && blame) index_damage(s, "disagrees with the store: %s", why);
  if (!ok) {
    free(e);
    snprintf(s->scan.index_note, sizeof s->scan.index_note, "%s%s", why,
             verdict == NTK_INDEX_READ && !blame ? " (the store is damaged there; the index cannot be checked)" : "");
    return NTK_OK;
  }
  s->ient = e;
  s->nient = below;
  s->scan.index_entries = below;
  s->scan.index_covered = covered;
  s->settled = covered;
  if (full_scan) return NTK_OK; /* checked against the scan after it (check_entries_all) */
  for (size_t i = 0; i < n; i++) {
    uint64_t tile = e[i].tile;
    if (e[i].seq > s->last_seq) s->last_seq = e[i].seq;
    int won = 0;
    if (e[i].offset < covered) {
      if (!index_record(s, tile, e[i].offset, e[i].len, e[i].seq, &won)) return scan_oom(s);
      continue;
    }
    /* Past the mark: expected there; the scan must meet it. */
    struct slot *f = map_find(&s->map, tile);
    if (!ntk_tiling_needed(&s->tiling, tile) || (f && f->seq > e[i].seq)) continue;
    if (!index_record(s, tile, e[i].offset, e[i].len, e[i].seq, &won)) return scan_oom(s);
    if (won) map_find(&s->map, tile)->beyond = 1;
  }
  s->scan.index_used = 1;
  *start = covered;
  return NTK_OK;
}

/* Index of the entry below the mark at `off` in ient (sorted); SIZE_MAX if none. */
static size_t ient_at(const ntk_store_t *s, uint64_t off) {
  size_t lo = 0, hi = s->nient;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->ient[mid].offset < off) lo = mid + 1;
    else hi = mid;
  }
  return lo < s->nient && s->ient[lo].offset == off ? lo : SIZE_MAX;
}

/* 1 if byte `off` lies in a region the scan found not intact (the regions
 * are in file order: the scan walks forward). */
static int in_region(const ntk_store_t *s, uint64_t off) {
  size_t lo = 0, hi = s->regions.n; /* the first region starting after off */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->regions.v[mid].offset <= off) lo = mid + 1;
    else hi = mid;
  }
  return lo > 0 && off - s->regions.v[lo - 1].offset < s->regions.v[lo - 1].bytes;
}

/* After a full scan (verify, info): every entry below the index's mark
 * against the record at its place. One that names another record, or
 * damaged bytes the scan did not find damaged, makes the index damage;
 * one over a region marked dead since is a tile now missing. */
static ntk_status check_entries_all(ntk_store_t *s) {
  uint64_t wrong = 0;
  char first[300] = "";
  for (size_t i = 0; i < s->nient; i++) {
    int v = PROBE_OK;
    char what[160];
    ntk_status st = probe_entry(s, i, &v, what, sizeof what);
    if (st) return st;
    s->scan.index_dead += v == PROBE_DEAD;
    if (v == PROBE_OK || v == PROBE_DEAD || (v == PROBE_DAMAGED && in_region(s, s->ient[i].offset))) continue;
    if (!wrong++)
      snprintf(first, sizeof first, "its entry for tile %llu at offset %llu, where the store has %s",
               (unsigned long long)s->ient[i].tile, (unsigned long long)s->ient[i].offset, what);
  }
  if (wrong == 1) index_damage(s, "disagrees with the store: %s", first);
  else if (wrong) index_damage(s, "disagrees with the store: %s (and %llu more of its %llu entries)", first,
                               (unsigned long long)(wrong - 1), (unsigned long long)s->nient);
  return NTK_OK;
}

/* Open, pick an intact header copy, index the records: from the index and
 * a scan of what follows its sync mark, or (full_scan, or no usable
 * index) by a scan of the whole store. */
static ntk_status open_scan(const char *path, int writable, int check_payload, int full_scan, ntk_store_t **out) {
  *out = NULL;
  ntk_store_t *s;
  ntk_status st = store_new(path, &s);
  if (st) return st;
  s->writable = writable;
  st = ntk_open_regular(s->path, writable ? O_RDWR : O_RDONLY, "store", &s->fd);
  /* The writer holds the file itself before it reads what it will repair. */
  if (!st && writable) st = ntk_lock_file(s->fd, s->path, "store", 1);
  struct stat sb;
  if (!st && fstat(s->fd, &sb)) st = io_error(s, "stat failed");
  unsigned char *h = st ? NULL : malloc(2 * NTK_STORE_HEADER_SIZE);
  if (!st && !h) st = ntk_error(NTK_ENOMEM, "out of memory");
  if (!st) {
    uint64_t size = (uint64_t)sb.st_size;
    size_t got = (size_t)(size < 2 * NTK_STORE_HEADER_SIZE ? size : 2 * NTK_STORE_HEADER_SIZE);
    memset(h, 0, 2 * NTK_STORE_HEADER_SIZE);
    if (pread_all(s->fd, h, got, 0) < 0) st = io_error(s, "cannot read the header");
    unsigned char *a = h, *b = h + NTK_STORE_HEADER_SIZE, *good = s->good_header;
    enum header_pick pick = st ? PICK_NONE : header_choose(a, b, good);
    if (st) {
    } else if (pick == PICK_NONE) {
      if (memcmp(a, header_magic, 8) && memcmp(b, header_magic, 8))
        st = ntk_error(NTK_EINPUT, "%s: not an ntkd store (no NTKDSTOR magic)", path);
      else
        st = ntk_error(NTK_ECORRUPT, "%s: both copies of the store header are damaged", path);
    } else if (pick == PICK_DISAGREE) {
      st = ntk_error(NTK_ECORRUPT, "%s: the two copies of the store header disagree", path);
    } else {
      st = decode_header(s, good);
      if (!st) {
        s->scan.header_damaged = pick == PICK_SPLICED ? 2 : pick == PICK_ONE;
        if (size < s->first) st = ntk_error(NTK_ECORRUPT, "%s: store is shorter than its own header", path);
      }
      if (!st) st = read_job_text(s, good);
      if (!st) st = alloc_index(s);
      uint64_t start = s->first;
      if (!st) st = load_index(s, &size, full_scan, &start);
      s->scan.settled = s->settled;
      if (!st) st = scan_records(s, check_payload, size, start);
      if (!st && full_scan) st = check_entries_all(s);
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

/* Every intact tile record the store holds, as index entries sorted by
 * offset (*e: free it): the newest of each tile and the others. Under mu
 * where a writer runs. */
static ntk_status all_entries(ntk_store_t *s, struct ntk_index_entry **e, size_t *n) {
  *n = 0;
  *e = malloc((s->map.n + s->others.n + 1) * sizeof **e);
  if (!*e) return ntk_error(NTK_ENOMEM, "out of memory for the index of %s", s->path);
  for (size_t i = 0; i < s->map.cap; i++)
    if (s->map.v[i].tile != NO_TILE)
      (*e)[(*n)++] = (struct ntk_index_entry){s->map.v[i].tile, s->map.v[i].offset, s->map.v[i].len, s->map.v[i].seq};
  if (s->others.n) memcpy(*e + *n, s->others.v, s->others.n * sizeof **e); /* v may be NULL */
  *n += s->others.n;
  qsort(*e, *n, sizeof **e, by_offset);
  return NTK_OK;
}

/* A fresh index of every record now in the store, its mark at `covered`;
 * the index stays open for appending. */
static ntk_status write_fresh_index(ntk_store_t *s, const struct ntk_index_entry *e, size_t n, uint64_t covered) {
  if (s->ifd >= 0) close(s->ifd);
  s->ifd = -1;
  ntk_status st = ntk_index_write(s->path, s->info.store_id, e, n, covered, &s->ifd);
  if (!st) s->synced_covered = covered;
  return st;
}

static ntk_status rewrite_index(ntk_store_t *s) {
  struct ntk_index_entry *e;
  size_t n;
  ntk_status st = all_entries(s, &e, &n);
  if (!st) st = write_fresh_index(s, e, n, s->end);
  free(e);
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

ntk_status ntk_store_discard(ntk_store_t *s, int *removed) {
  *removed = 0;
  if (!s) return NTK_OK;
  struct stat sb;
  pthread_mutex_lock(&s->mu);
  int empty = s->writable && s->fd >= 0 && s->map.n == 0 && s->others.n == 0 && s->nopen == 0 &&
              s->end == s->first && fstat(s->fd, &sb) == 0 && (uint64_t)sb.st_size <= s->first;
  pthread_mutex_unlock(&s->mu);
  if (!empty || !ntk_fd_at_path(s->fd, s->path)) return ntk_store_close(s); /* (another file at its name) */
  char index[NTK_PATH_MAX];
  int named = ntk_index_path(s->path, index, sizeof index);
  /* Removed while still open, under the store's own file lock (closing
   * first would let a job past a removed lock file take the empty store in
   * between). The index first: a store without one is still whole, an
   * index without its store is nothing ntkd reads. */
  ntk_status st = NTK_OK;
  if (named && unlink(index) && errno != ENOENT)
    st = ntk_error(NTK_EIO, "%s: cannot remove: %s", index, strerror(errno));
  if (!st && unlink(s->path) && errno != ENOENT)
    st = ntk_error(NTK_EIO, "%s: cannot remove: %s", s->path, strerror(errno));
  *removed = !st;
  if (*removed) s->writable = 0; /* nothing to sync: a sync could write the index again */
  ntk_status closed = ntk_store_close(s);
  return st ? st : closed;
}

const struct ntk_store_info *ntk_store_get_info(const ntk_store_t *s) { return &s->info; }
const struct ntk_tiling *ntk_store_tiling(const ntk_store_t *s) { return &s->tiling; }
const struct ntk_store_scan *ntk_store_get_scan(const ntk_store_t *s) { return &s->scan; }
const char *ntk_store_job_text(const ntk_store_t *s) { return s->job_text ? s->job_text : ""; }

/* The map under the writer's mutex: the audit thread changes it while the
 * main thread asks (the store is not const to the mutex). */
static pthread_mutex_t *map_mu(const ntk_store_t *s) { return (pthread_mutex_t *)&s->mu; }

uint64_t ntk_store_tiles_done(const ntk_store_t *s) {
  pthread_mutex_lock(map_mu(s));
  uint64_t n = s->map.n;
  pthread_mutex_unlock(map_mu(s));
  return n;
}

uint64_t ntk_store_record_offset(const ntk_store_t *s, uint64_t tile) {
  pthread_mutex_lock(map_mu(s));
  const struct slot *f = map_find(&s->map, tile);
  uint64_t off = f ? f->offset : 0;
  pthread_mutex_unlock(map_mu(s));
  return off;
}

int ntk_store_has_tile(const ntk_store_t *s, uint64_t tile) { return ntk_store_record_offset(s, tile) != 0; }

ntk_status ntk_store_stored_tiles(const ntk_store_t *s, uint64_t **tiles, size_t *n) {
  pthread_mutex_lock(map_mu(s));
  *n = 0;
  *tiles = malloc((s->map.n + 1) * sizeof **tiles);
  if (*tiles)
    for (size_t i = 0; i < s->map.cap; i++)
      if (s->map.v[i].tile != NO_TILE) (*tiles)[(*n)++] = s->map.v[i].tile;
  pthread_mutex_unlock(map_mu(s));
  if (!*tiles) return ntk_error(NTK_ENOMEM, "out of memory");
  if (*n) qsort(*tiles, *n, sizeof **tiles, by_tile); /* never qsort(NULL, 0): undefined */
  return NTK_OK;
}

int ntk_store_is_writable(const ntk_store_t *s) { return s && s->writable; }

int ntk_store_is_damaged(const ntk_store_t *s) {
  /* A writer's handle repaired what its scans found before it went on (the
   * resume: dead regions marked, the tail cut, header, job text and index
   * rewritten; the audit: dead regions, a fresh index at the next sync); the
   * counts stay, for its messages. The tiles lost are missing, not damage. */
  if (s->writable) return 0;
  const struct ntk_store_scan *c = &s->scan;
  return c->regions || c->damaged || c->tail_damaged || c->header_damaged || c->job_text_damaged || c->index_damaged;
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
    int won;
    if (!index_record(s, g->tile, g->offset, g->len, g->seq, &won)) st = ntk_error(NTK_ENOMEM, "out of memory");
  }
  pthread_mutex_unlock(&s->mu);
  return st;
}

/* 1 if g is an open reservation. Under mu. */
static int is_reserved(const ntk_store_t *s, const struct ntk_store_grant *g) {
  for (size_t i = 0; i < s->nopen; i++)
    if (s->open[i].offset == g->offset && s->open[i].tile == g->tile && s->open[i].seq == g->seq) return 1;
  return 0;
}

ntk_status ntk_store_abandon(ntk_store_t *s, const struct ntk_store_grant *g) {
  pthread_mutex_lock(&s->mu);
  int known = is_reserved(s, g);
  pthread_mutex_unlock(&s->mu);
  if (!known) return NTK_OK;
  /* A dead record over whatever the writer left: scans step over it. The
   * reservation stays open until that is written, so that no sync mark
   * passes the place before it is a dead region (the index's claim); if it
   * cannot be written, or the file does not reach the place's end (the
   * write failed for want of room: the dead region would run past the
   * end, a torn tail that the next resume cuts), it stays open and no
   * mark ever passes it. */
  unsigned char r[NTK_STORE_RECORD_HEADER];
  encode_record(s, r, KIND_DEAD, NO_TILE, NULL, 0, 0, g->extent, g->seq);
  if (pwrite_all(s->fd, r, sizeof r, g->offset)) return io_error(s, "cannot mark an abandoned record dead");
  struct stat sb;
  if (fstat(s->fd, &sb) || (uint64_t)sb.st_size < g->offset + g->extent) return NTK_OK;
  pthread_mutex_lock(&s->mu);
  close_reservation(s, g);
  pthread_mutex_unlock(&s->mu);
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
      ntk_status fst = ntk_fsize_limit_error(s->path, at + left);
      if (fst) return fst;
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

ntk_status ntk_store_audit(ntk_store_t *s, const volatile int *stop, uint64_t **tiles, size_t *ntiles_out) {
  *tiles = NULL;
  *ntiles_out = 0;
  uint64_t covered = s->scan.index_covered;
  if (!s->writable || !s->scan.index_used || covered <= s->first) return NTK_OK;
  /* A second, read-only view of the store below the mark, scanned as a
   * full scan would (every payload checked), while the writer goes on. */
  ntk_store_t *v;
  ntk_status st = store_new(s->path, &v);
  if (st) return st;
  st = ntk_open_regular(s->path, O_RDONLY, "store", &v->fd);
  if (!st) {
    v->info = s->info;
    v->tiling = s->tiling;
    v->first = s->first;
    v->stop_aware = 1;
    v->stop_also = stop;
    st = alloc_index(v);
  }
  if (!st) st = scan_records(v, 1, covered, v->first);
  if (!st && (ntk_stop_requested() || (stop && *stop)))
    st = ntk_error(NTK_EINTERRUPTED, "interrupted while checking the store");
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
  /* Below the mark the scan is the truth, the index only a claim: a tile
   * the index placed there whose record the scan did not find intact is
   * missing now (computed again); one the scan found elsewhere, or only
   * the scan found, is taken from the scan. Either way the index no longer
   * says what the store holds: the next sync writes a fresh one. */
  uint64_t *bad = NULL;
  size_t nbad = 0;
  int changed = v->regions.n > 0, locked = !st;
  if (locked) pthread_mutex_lock(&s->mu);
  if (!st && !(bad = malloc((s->map.n + 1) * sizeof *bad))) st = ntk_error(NTK_ENOMEM, "out of memory");
  if (!st) {
    /* The other records below the mark: the scan's. */
    size_t k = 0;
    for (size_t i = 0; i < s->others.n; i++)
      if (s->others.v[i].offset >= covered) s->others.v[k++] = s->others.v[i];
    if (s->others.n - k) qsort(s->others.v + k, s->others.n - k, sizeof *s->others.v, by_offset);
    if (v->others.n) qsort(v->others.v, v->others.n, sizeof *v->others.v, by_offset); /* never qsort(NULL, 0): undefined */
    changed |= s->others.n - k != v->others.n ||
               (v->others.n && memcmp(s->others.v + k, v->others.v, v->others.n * sizeof *v->others.v));
    s->others.n = k;
    for (size_t i = 0; !st && i < v->others.n; i++)
      if (!push_entry(&s->others, &v->others.v[i])) st = ntk_error(NTK_ENOMEM, "out of memory");
  }
  for (size_t i = 0; !st && i < s->map.cap; i++) {
    const struct slot *f = &s->map.v[i];
    if (f->tile == NO_TILE || f->offset >= covered) continue;
    const struct slot *t = map_find(&v->map, f->tile);
    if (!t) bad[nbad++] = f->tile;
  }
  for (size_t i = 0; !st && i < nbad; i++) unindex(s, bad[i]);
  if (!st) {
    /* The newest record of each tile below the mark: the scan's, unless a
     * newer one was written past the mark. */
    for (size_t i = 0; !st && i < v->map.cap; i++) {
      const struct slot *t = &v->map.v[i];
      if (t->tile == NO_TILE) continue;
      struct slot *f = map_find(&s->map, t->tile);
      if (f && f->offset == t->offset && f->len == t->len && f->seq == t->seq) continue;
      changed = 1;
      s->scan.index_corrected++;
      if (f && f->offset < covered) { /* the index's claim, wrong: the scan's record instead */
        s->scan.payload_bytes -= f->len;
        s->scan.records--;
        map_del(&s->map, t->tile);
      }
      int won;
      if (!index_record(s, t->tile, t->offset, t->len, t->seq, &won)) st = ntk_error(NTK_ENOMEM, "out of memory");
    }
  }
  if (!st && (changed || nbad)) s->index_stale = 1;
  if (!st) {
    s->scan.regions += v->scan.regions;
    s->scan.region_bytes += v->scan.region_bytes;
  }
  if (locked) pthread_mutex_unlock(&s->mu);
  store_free(v);
  if (st) {
    free(bad);
    return st;
  }
  /* A tile the scan found below the mark after all (an older intact record
   * promoted in its place) is not missing. */
  size_t k = 0;
  for (size_t i = 0; i < nbad; i++)
    if (!ntk_store_has_tile(s, bad[i])) bad[k++] = bad[i];
  *tiles = bad;
  *ntiles_out = k;
  return NTK_OK;
}

ntk_status ntk_store_sync(ntk_store_t *s) {
  if (!s->writable) return NTK_OK;
  /* What is confirmed now, and how far every byte is accounted for: below
   * the first open reservation (a record still being written). After the
   * audit changed what the store holds below the index's mark, the whole
   * index is written afresh instead (its entries there would be wrong). */
  pthread_mutex_lock(&s->mu);
  if (s->sync_failed) {
    pthread_mutex_unlock(&s->mu);
    return ntk_error(NTK_EIO, "%s: an earlier fsync failed; the store may have lost recent tiles", s->path);
  }
  struct ntk_index_entry *e = s->fresh;
  size_t n = s->nfresh;
  uint64_t covered = s->end, end = s->end;
  for (size_t i = 0; i < s->nopen; i++)
    if (s->open[i].offset < covered) covered = s->open[i].offset;
  /* Nothing reserved, confirmed or found since the last sync that
   * succeeded: nothing to make durable. The store's close then adds no
   * fdatasync after the coordinator's last one, whose failure would have
   * come after the job had said "done". */
  if (s->synced_once && !n && !s->index_stale && covered == s->synced_covered && end == s->synced_end) {
    pthread_mutex_unlock(&s->mu);
    return NTK_OK;
  }
  s->fresh = NULL;
  s->nfresh = s->capfresh = 0;
  int whole = s->index_stale;
  ntk_status st = NTK_OK;
  if (whole) {
    free(e);
    st = all_entries(s, &e, &n);
    s->index_stale = 0;
  }
  pthread_mutex_unlock(&s->mu);
  /* The records first (one page cache on this node: the fdatasync covers
   * what this node's ranks wrote; ranks on other nodes sync their own
   * records before they report them written), then the index that names
   * them. */
  if (!st && fdatasync(s->fd)) {
    st = io_error(s, "fsync failed; the store may have lost recent tiles");
    pthread_mutex_lock(&s->mu);
    s->sync_failed = 1;
    pthread_mutex_unlock(&s->mu);
  }
  if (!st && whole) {
    st = write_fresh_index(s, e, n, covered);
    if (st) { /* still to be written whole: no index is open to append to (a later sync said "no index open") */
      pthread_mutex_lock(&s->mu);
      s->index_stale = 1;
      pthread_mutex_unlock(&s->mu);
    }
  } else if (!st && (n || covered != s->synced_covered)) {
    if (s->ifd < 0) st = ntk_error(NTK_EINTERNAL, "%s: no index open", s->path);
    else st = ntk_index_append(s->ifd, s->path, e, n, covered);
    if (!st) {
      s->synced_covered = covered;
    } else {
      /* Its entries did not reach the index (or only some: a torn line),
       * and they have left the fresh list: a later sync that appended only
       * its own mark would cover records the index does not list (an
       * append refused by a disk quota, then the close's sync: the store
       * was reported damaged). The next sync writes the index whole. */
      pthread_mutex_lock(&s->mu);
      s->index_stale = 1;
      pthread_mutex_unlock(&s->mu);
    }
  }
  free(e);
  if (!st) {
    pthread_mutex_lock(&s->mu);
    s->synced_end = end;
    s->synced_once = 1;
    pthread_mutex_unlock(&s->mu);
  }
  return st;
}

ntk_status ntk_store_check_final(ntk_store_t *s) {
  if (!s->writable) return NTK_OK;
  struct stat mine, now;
  if (fstat(s->fd, &mine)) return io_error(s, "stat failed");
  if (stat(s->path, &now) || now.st_ino != mine.st_ino || now.st_dev != mine.st_dev)
    return ntk_error(NTK_ECORRUPT, "%s is no longer the file this job wrote: it was removed or replaced while the "
                     "job ran; run the job again", s->path);
  /* Its own header, both copies, and job text, as it left them; nothing
   * past its end (all of it: 8 KiB and the job text, read once). */
  if ((uint64_t)mine.st_size > s->end)
    return ntk_error(NTK_ECORRUPT, "%s changed under this job: %llu bytes were added after its end (%llu): another "
                     "writer; run the job again to repair it", s->path,
                     (unsigned long long)((uint64_t)mine.st_size - s->end), (unsigned long long)s->end);
  unsigned char *h = calloc(2, NTK_STORE_HEADER_SIZE); /* zeros past a short file's end */
  if (!h) return ntk_error(NTK_ENOMEM, "out of memory");
  int rc = pread_all(s->fd, h, 2 * NTK_STORE_HEADER_SIZE, 0);
  const char *hwhy = rc < 0 ? NULL
                     : rc || memcmp(h, s->good_header, NTK_STORE_HEADER_SIZE) ? "its header (copy A) is not the one it wrote"
                     : memcmp(h + HEADER_B, s->good_header, NTK_STORE_HEADER_SIZE) ? "its header (copy B) is not the one it wrote"
                     : NULL;
  /* No header its opener could go by any more (truncated, overwritten by
   * another program), or a file shorter than that header says: a rerun
   * refuses the file, it cannot repair it. */
  unsigned char chosen[NTK_STORE_HEADER_SIZE];
  enum header_pick pick = rc < 0 ? PICK_NONE : header_choose(h, h + HEADER_B, chosen);
  int no_store = rc >= 0 && (pick == PICK_NONE || pick == PICK_DISAGREE ||
                             (uint64_t)mine.st_size < ntk_get64(chosen + H_FIRST));
  free(h);
  if (rc < 0) return io_error(s, "read failed");
  if (no_store)
    return ntk_error(NTK_ECORRUPT, "%s changed under this job: no usable copy of its header is there any more (the file "
                     "was truncated or overwritten by another program): the tiles in it cannot be found again; run "
                     "the job again with --overwrite to compute them anew", s->path);
  if (!hwhy && s->job_text && s->job_text[0]) { /* the job text, unless it was damaged beyond repair at the start */
    uint64_t len = ntk_get64(s->good_header + H_TEXT_LEN);
    unsigned char *t = malloc((size_t)len + 1);
    if (!t) return ntk_error(NTK_ENOMEM, "out of memory");
    rc = pread_all(s->fd, t, (size_t)len, JOB_TEXT_AT);
    if (!rc && ntk_checksum(t, (size_t)len) != ntk_get64(s->good_header + H_TEXT_SUM)) hwhy = "its job text is damaged";
    free(t);
    if (rc < 0) return io_error(s, "read failed");
    if (rc) hwhy = "its job text is cut short";
  }
  if (hwhy)
    return ntk_error(NTK_ECORRUPT, "%s changed under this job: %s (another writer, or damage); run the job again to "
                     "repair it", s->path, hwhy);
  /* Every tile this writer holds: a record of this store, of that tile and
   * sequence number, where it believes it is (headers only: 128 bytes a
   * tile; a payload's bytes are checked by every reader and resume). */
  uint64_t bad = 0, first_bad = 0, first_off = 0;
  const char *why = "";
  for (size_t i = 0; i < s->map.cap; i++) {
    const struct slot *f = &s->map.v[i];
    if (f->tile == NO_TILE) continue;
    unsigned char r[NTK_STORE_RECORD_HEADER];
    rc = pread_all(s->fd, r, sizeof r, f->offset);
    if (rc < 0) return io_error(s, "read failed");
    const char *w = rc ? "the file ends before it"
                    : memcmp(r + R_MAGIC, record_magic, 8) || ntk_get64(r + R_CHECKSUM) != ntk_checksum(r, R_CHECKSUM)
                        ? "no intact record header there"
                    : memcmp(r + R_STOREID, s->info.store_id, 16) ? "a record of another store there"
                    : ntk_get32(r + R_KIND) != KIND_TILE || ntk_get64(r + R_TILE) != f->tile ||
                            ntk_get64(r + R_SEQ) != f->seq || ntk_get64(r + R_LEN) != f->len
                        ? "another record there"
                        : NULL;
    if (w && !bad++) first_bad = f->tile, first_off = f->offset, why = w;
  }
  /* The index names each of them below its last sync mark. */
  struct ntk_index_entry *e = NULL;
  size_t n = 0;
  uint64_t covered = 0;
  int verdict = NTK_INDEX_NONE;
  char note[320] = "";
  ntk_status st = ntk_index_read(s->path, s->info.store_id, s->fd, s->first, s->info.align, &e, &n, &covered,
                                 &verdict, note, sizeof note);
  if (st) return st;
  uint64_t unlisted = 0;
  if (verdict == NTK_INDEX_READ) {
    struct tile_map seen = {NULL, 0, 0};
    for (size_t i = 0; i < n && !st; i++) {
      const struct slot *f = map_find(&s->map, e[i].tile);
      if (!f || f->offset != e[i].offset || f->seq != e[i].seq) continue;
      if (!map_add(&seen, e[i].tile)) st = ntk_error(NTK_ENOMEM, "out of memory");
    }
    unlisted = st ? 0 : s->map.n - seen.n;
    free(seen.v);
    if (st) {
      free(e);
      return st;
    }
    if (covered != s->synced_covered)
      snprintf(note, sizeof note, "its last sync mark is at %llu, this job's at %llu", (unsigned long long)covered,
               (unsigned long long)s->synced_covered);
    else if (unlisted)
      snprintf(note, sizeof note, "it does not list %llu of the %llu tiles", (unsigned long long)unlisted,
               (unsigned long long)s->map.n);
  }
  free(e);
  int index_wrong = verdict != NTK_INDEX_READ || unlisted || covered != s->synced_covered;
  if (bad)
    return ntk_error(NTK_ECORRUPT, "%s changed under this job: %llu of the %llu tiles it holds are not its records "
                     "there any more (first: tile %llu at offset %llu: %s): another writer or damage; run the job "
                     "again to repair the store and recompute them", s->path, (unsigned long long)bad,
                     (unsigned long long)s->map.n, (unsigned long long)first_bad, (unsigned long long)first_off, why);
  if (index_wrong)
    return ntk_error(NTK_ECORRUPT, "%s: its index (%s.index) is not the one this job wrote: %s; another writer or "
                     "damage; run the job again to rebuild it (no tile is recomputed)", s->path, s->path,
                     note[0] ? note : "it cannot be read as an index of this store");
  return NTK_OK;
}

ntk_status ntk_store_check_record(ntk_store_t *s, uint64_t tile, int *intact) {
  *intact = 0;
  uint64_t off = ntk_store_record_offset(s, tile);
  if (!off) return NTK_OK;
  unsigned char r[NTK_STORE_RECORD_HEADER];
  int rc = pread_all(s->fd, r, sizeof r, off);
  if (rc < 0) return io_error(s, "read failed");
  if (rc || classify(s, r, off, UINT64_MAX) == REC_BAD || ntk_get32(r + R_KIND) != KIND_TILE ||
      ntk_get64(r + R_TILE) != tile)
    return NTK_OK;
  unsigned char *buf = NULL;
  size_t cap = 0;
  ntk_status st = payload_intact(s, r, off, &buf, &cap, intact);
  free(buf);
  return st;
}

/* The error for an index entry whose place holds something else than its
 * record (probe_entry's PROBE_OTHER: the index is damage; PROBE_DAMAGED:
 * the record is). */
static ntk_status entry_error(ntk_store_t *s, const struct ntk_index_entry *e, int verdict, const char *what) {
  if (verdict == PROBE_OTHER) {
    index_damage(s, "disagrees with the store: its entry for tile %llu at offset %llu, where the store has %s",
                 (unsigned long long)e->tile, (unsigned long long)e->offset, what);
    char why[NTK_STORE_INDEX_DAMAGE_MAX];
    return ntk_error(NTK_ECORRUPT, "%s: %s", s->path, ntk_store_index_damage(&s->scan, s->path, why, sizeof why));
  }
  return ntk_error(NTK_ECORRUPT, "%s: the record of tile %llu at offset %llu is damaged (%s there); run the job "
                   "again to repair it and recompute what was lost", s->path, (unsigned long long)e->tile,
                   (unsigned long long)e->offset, what);
}

ntk_status ntk_store_check_entry(ntk_store_t *s, uint64_t tile) {
  for (;;) {
    const struct slot *f = map_find(&s->map, tile);
    if (!f || !s->scan.index_used || f->offset >= s->scan.index_covered) return NTK_OK; /* absent, or scanned */
    size_t i = ient_at(s, f->offset);
    if (i == SIZE_MAX) return NTK_OK;
    int v = PROBE_OK;
    char what[160];
    ntk_status st = probe_entry(s, i, &v, what, sizeof what);
    if (st) return st;
    if (v == PROBE_OK) return NTK_OK;
    if (v != PROBE_DEAD) return entry_error(s, &s->ient[i], v, what);
    unindex(s, tile); /* marked dead by a resume since: missing (an older record may take its place) */
  }
}

ntk_status ntk_store_check_entries(ntk_store_t *s) {
  if (!s->scan.index_used) return NTK_OK;
  for (size_t i = 0; i < s->nient; i++) {
    const struct ntk_index_entry *e = &s->ient[i];
    int v = PROBE_OK;
    char what[160];
    ntk_status st = probe_entry(s, i, &v, what, sizeof what);
    if (st) return st;
    if (v == PROBE_OK) continue;
    if (v != PROBE_DEAD) return entry_error(s, e, v, what);
    const struct slot *f = map_find(&s->map, e->tile);
    if (f && f->offset == e->offset) {
      unindex(s, e->tile);
      continue;
    }
    for (size_t k = 0; k < s->others.n; k++)
      if (s->others.v[k].offset == e->offset) {
        s->others.v[k] = s->others.v[--s->others.n];
        s->scan.duplicates -= ntk_tiling_needed(&s->tiling, e->tile) != 0;
        break;
      }
  }
  return NTK_OK;
}

ntk_status ntk_store_read_payload(ntk_store_t *s, uint64_t tile, void **payload, size_t *len) {
  int codec;
  return read_payload(s, tile, payload, len, &codec);
}

static ntk_status read_payload(ntk_store_t *s, uint64_t tile, void **payload, size_t *len, int *codec) {
  *payload = NULL;
  const struct slot *f = map_find(&s->map, tile);
  if (!f)
    return ntk_error(NTK_EINCOMPLETE, "%s: tile %llu is not in the store", s->path, (unsigned long long)tile);
  unsigned char r[NTK_STORE_RECORD_HEADER];
  uint64_t off = f->offset;
  int rc = pread_all(s->fd, r, sizeof r, off);
  if (rc < 0) return io_error(s, "read failed");
  /* Read again now: the file may have changed since the scan, and a
   * record below the index's mark was not read by it. */
  if (rc || classify(s, r, off, UINT64_MAX) == REC_BAD || ntk_get32(r + R_KIND) != KIND_TILE ||
      ntk_get64(r + R_TILE) != tile || ntk_get64(r + R_LEN) != f->len || ntk_get64(r + R_SEQ) != f->seq) {
    size_t i = s->scan.index_used && off < s->scan.index_covered ? ient_at(s, off) : SIZE_MAX;
    if (i != SIZE_MAX) {
      int v = PROBE_OK;
      char what[160];
      ntk_status st = probe_entry(s, i, &v, what, sizeof what);
      if (st) return st;
      if (v == PROBE_DEAD) {
        unindex(s, tile);
        return ntk_error(NTK_EINCOMPLETE, "%s: tile %llu is missing: a resume found its record (offset %llu) "
                         "damaged and marked it dead; run the job to compute it again", s->path,
                         (unsigned long long)tile, (unsigned long long)off);
      }
      if (v != PROBE_OK) return entry_error(s, &s->ient[i], v, what);
    }
    return ntk_error(NTK_ECORRUPT, "%s: record of tile %llu at offset %llu is damaged", s->path,
                     (unsigned long long)tile, (unsigned long long)off);
  }
  size_t n = (size_t)ntk_get64(r + R_LEN); /* at most the tile's compressed bound (classify) */
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
    /* Past the index's sync mark a record whose payload is not yet whole
     * is a write under way (or cut short), as the scan takes it: the tile
     * is not there yet. */
    if (s->settled && off >= s->settled)
      return ntk_error(NTK_EINCOMPLETE, "%s: tile %llu is not in the store yet: its record (offset %llu, past the "
                       "index's sync mark) is still being written or was cut short", s->path,
                       (unsigned long long)tile, (unsigned long long)off);
    return ntk_error(NTK_ECORRUPT, "%s: tile %llu (offset %llu) is damaged: checksum mismatch", s->path,
                     (unsigned long long)tile, (unsigned long long)off);
  }
  *payload = buf;
  *len = n;
  *codec = (int)ntk_get32(r + R_CODEC);
  return NTK_OK;
}
