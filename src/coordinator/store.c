/* The append-only tile store. Each record is a 64-byte header (with its own
 * checksum) followed by the payload; on open the records are scanned and a
 * torn or garbage tail is cut off, so a crash at any moment loses at most
 * the record being written. */
#include "ntkd/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntkd/codec.h"
#include "ntkd/config.h"
#include "ntkd/fsutil.h"

static const char header_magic[8] = {'N', 'T', 'K', 'D', 'S', 'T', 'O', 'R'};
static const char record_magic[8] = {'N', 'T', 'K', 'D', 'T', 'I', 'L', 'E'};
#define STORE_VERSION 1
#define CODEC_SHUFFLE_ZSTD 1

struct ntk_store {
  int fd;
  int writable;
  char path[NTK_PATH_MAX];
  struct ntk_store_info info;
  struct ntk_tiling tiling;
  uint64_t *offset; /* per tile: record offset, 0 = absent */
  uint64_t *length; /* per tile: payload bytes of that record */
  uint64_t done;
  uint64_t end;     /* append position */
  struct ntk_store_scan scan;
};

/* ---- little-endian field access ------------------------------------------ */

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static uint64_t get64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* Header layout (offsets in bytes). */
enum {
  H_MAGIC = 0, H_VERSION = 8, H_HSIZE = 12, H_N = 16, H_D = 24, H_TILE = 32, H_ELEM = 36,
  H_KERNELS = 40, H_NTILES = 48, H_JOBHASH = 56, H_DESC = 72, H_NTRAIN = 1096, H_FLAGS = 1104, H_CHECKSUM = NTK_STORE_HEADER_SIZE - 8,
};
/* Record header layout. */
enum {
  R_MAGIC = 0, R_TILE = 8, R_ROWS = 16, R_COLS = 20, R_RAW = 24, R_LEN = 32, R_SUM = 40,
  R_CODEC = 48, R_CHECKSUM = 56,
};

static int kernel_count(uint32_t mask) { return (mask & 1) + ((mask >> 1) & 1); }

size_t ntk_store_raw_bytes(const ntk_store_t *s, const struct ntk_tile *t) {
  return (size_t)(t->rows * t->cols) * s->info.elem * (size_t)kernel_count(s->info.kernels);
}

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

static void encode_header(const struct ntk_store_info *info, const struct ntk_tiling *t, unsigned char *h) {
  memset(h, 0, NTK_STORE_HEADER_SIZE);
  memcpy(h + H_MAGIC, header_magic, 8);
  put32(h + H_VERSION, STORE_VERSION);
  put32(h + H_HSIZE, NTK_STORE_HEADER_SIZE);
  put64(h + H_N, info->n);
  put64(h + H_D, info->d);
  put32(h + H_TILE, info->tile);
  put32(h + H_ELEM, info->elem);
  put32(h + H_KERNELS, info->kernels);
  put64(h + H_NTILES, t->ntiles);
  memcpy(h + H_JOBHASH, info->job_hash, 16);
  memcpy(h + H_DESC, info->description, strnlen(info->description, NTK_STORE_DESC_MAX - 1));
  put64(h + H_NTRAIN, info->n_train);
  put32(h + H_FLAGS, info->test_test ? NTK_STORE_FLAG_TEST_TEST : 0);
  put64(h + H_CHECKSUM, ntk_checksum(h, H_CHECKSUM));
}

static ntk_status decode_header(const char *path, const unsigned char *h, struct ntk_store_info *info,
                                struct ntk_tiling *t) {
  if (memcmp(h + H_MAGIC, header_magic, 8))
    return ntk_error(NTK_EINPUT, "%s: not an ntkd store (no NTKDSTOR magic)", path);
  if (get32(h + H_VERSION) != STORE_VERSION)
    return ntk_error(NTK_ECORRUPT, "%s: store format version %u, this ntkd reads version %d", path,
                     get32(h + H_VERSION), STORE_VERSION);
  if (get64(h + H_CHECKSUM) != ntk_checksum(h, H_CHECKSUM))
    return ntk_error(NTK_ECORRUPT, "%s: store header is damaged (checksum mismatch)", path);
  memset(info, 0, sizeof *info);
  info->n = get64(h + H_N);
  info->d = get64(h + H_D);
  info->tile = get32(h + H_TILE);
  info->elem = get32(h + H_ELEM);
  info->kernels = get32(h + H_KERNELS);
  memcpy(info->job_hash, h + H_JOBHASH, 16);
  memcpy(info->description, h + H_DESC, NTK_STORE_DESC_MAX - 1);
  info->n_train = get64(h + H_NTRAIN);
  info->test_test = (get32(h + H_FLAGS) & NTK_STORE_FLAG_TEST_TEST) != 0;
  if (get32(h + H_HSIZE) != NTK_STORE_HEADER_SIZE || info->n == 0 || info->tile == 0 ||
      (info->elem != 4 && info->elem != 8) || info->kernels == 0 || info->kernels > 3)
    return ntk_error(NTK_ECORRUPT, "%s: store header has impossible values", path);
  if (info->n_train > info->n || (get32(h + H_FLAGS) & ~(uint32_t)NTK_STORE_FLAG_TEST_TEST))
    return ntk_error(NTK_ECORRUPT, "%s: store header has impossible values", path);
  ntk_store_tiling_of(info, t);
  if (get64(h + H_NTILES) != t->ntiles)
    return ntk_error(NTK_ECORRUPT, "%s: store header tile count is inconsistent", path);
  return NTK_OK;
}

static ntk_status alloc_index(ntk_store_t *s) {
  if (s->tiling.ntiles > ((uint64_t)1 << 34))
    return ntk_error(NTK_ECORRUPT, "%s: %llu tiles is more than ntkd supports", s->path,
                     (unsigned long long)s->tiling.ntiles);
  s->offset = calloc((size_t)s->tiling.ntiles, sizeof *s->offset);
  s->length = calloc((size_t)s->tiling.ntiles, sizeof *s->length);
  if (!s->offset || !s->length) return ntk_error(NTK_ENOMEM, "%s: out of memory for the tile index", s->path);
  return NTK_OK;
}

ntk_status ntk_store_create(const char *path, const struct ntk_store_info *info, ntk_store_t **out) {
  *out = NULL;
  ntk_status pst = ntk_make_parents(path);
  if (pst) return pst;
  ntk_store_t *s = calloc(1, sizeof *s);
  if (!s) return ntk_error(NTK_ENOMEM, "out of memory");
  s->fd = -1;
  snprintf(s->path, sizeof s->path, "%s", path);
  s->info = *info;
  ntk_store_tiling_of(info, &s->tiling);
  ntk_status st = alloc_index(s);
  unsigned char *h = malloc(NTK_STORE_HEADER_SIZE);
  char tmp[NTK_PATH_MAX + 32];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  if (!st && !h) st = ntk_error(NTK_ENOMEM, "out of memory");
  int fd = -1;
  if (!st) {
    encode_header(info, &s->tiling, h);
    fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) st = ntk_error(NTK_EIO, "%s: cannot create: %s", tmp, strerror(errno));
  }
  if (!st && pwrite_all(fd, h, NTK_STORE_HEADER_SIZE, 0))
    st = ntk_error(NTK_EIO, "%s: cannot write header: %s", tmp, strerror(errno));
  if (!st && fsync(fd)) st = ntk_error(NTK_EIO, "%s: fsync failed: %s", tmp, strerror(errno));
  if (!st && rename(tmp, path)) st = ntk_error(NTK_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
  if (!st) st = ntk_fsync_folder_of(path);
  free(h);
  if (st) {
    if (fd >= 0) {
      close(fd);
      unlink(tmp);
    }
    free(s->offset);
    free(s->length);
    free(s);
    return st;
  }
  s->fd = fd;
  s->writable = 1;
  s->end = NTK_STORE_HEADER_SIZE;
  *out = s;
  return NTK_OK;
}

/* Check a record header at `off`; returns 1 if intact and plausible. */
static int record_header_ok(const ntk_store_t *s, const unsigned char *r, uint64_t off, uint64_t size) {
  if (memcmp(r + R_MAGIC, record_magic, 8)) return 0;
  if (get64(r + R_CHECKSUM) != ntk_checksum(r, R_CHECKSUM)) return 0;
  uint64_t tile = get64(r + R_TILE);
  if (tile >= s->tiling.ntiles || get32(r + R_CODEC) != CODEC_SHUFFLE_ZSTD) return 0;
  struct ntk_tile t = ntk_tiling_tile(&s->tiling, tile);
  if (get32(r + R_ROWS) != t.rows || get32(r + R_COLS) != t.cols) return 0;
  if (get64(r + R_RAW) != ntk_store_raw_bytes(s, &t)) return 0;
  uint64_t len = get64(r + R_LEN);
  if (len == 0 || len > ntk_codec_bound(ntk_store_raw_bytes(s, &t))) return 0;
  return off + NTK_STORE_RECORD_HEADER + len <= size;
}

static ntk_status scan_records(ntk_store_t *s, int check_payload, uint64_t size) {
  unsigned char r[NTK_STORE_RECORD_HEADER];
  unsigned char *buf = NULL;
  size_t cap = 0;
  uint64_t off = NTK_STORE_HEADER_SIZE;
  ntk_status st = NTK_OK;
  /* Damaged records count only if no intact copy of the tile follows
   * (a rerun appends a recomputed copy; the damaged one stays in place). */
  unsigned char *hurt = calloc((size_t)s->tiling.ntiles, 1);
  if (!hurt) return ntk_error(NTK_ENOMEM, "out of memory while scanning %s", s->path);
  while (off + NTK_STORE_RECORD_HEADER <= size) {
    int rc = pread_all(s->fd, r, sizeof r, off);
    if (rc < 0) {
      st = io_error(s, "read failed");
      break;
    }
    if (rc > 0 || !record_header_ok(s, r, off, size)) break;
    uint64_t tile = get64(r + R_TILE), len = get64(r + R_LEN);
    if (!ntk_tiling_needed(&s->tiling, tile)) {
      /* A test x test tile this store does not ask for (no writer makes
       * one): stepped over, never counted, and the records after it kept. */
      off += NTK_STORE_RECORD_HEADER + len;
      continue;
    }
    int intact = 1;
    if (check_payload) {
      if (len > cap) {
        free(buf);
        cap = (size_t)len;
        buf = malloc(cap);
        if (!buf) {
          st = ntk_error(NTK_ENOMEM, "out of memory while scanning %s", s->path);
          break;
        }
      }
      rc = pread_all(s->fd, buf, (size_t)len, off + NTK_STORE_RECORD_HEADER);
      if (rc) {
        st = rc < 0 ? io_error(s, "read failed") : NTK_OK;
        break;
      }
      intact = ntk_checksum(buf, (size_t)len) == get64(r + R_SUM);
    }
    if (!intact) {
      if (!hurt[tile] && s->scan.ndamaged_list < NTK_STORE_DAMAGED_LIST)
        s->scan.damaged_list[s->scan.ndamaged_list++] = tile;
      hurt[tile] = 1;
    } else {
      /* A later intact record of a tile is a recomputation: it wins. */
      if (s->offset[tile]) {
        s->scan.duplicates++;
        s->scan.payload_bytes -= s->length[tile];
      } else {
        s->done++;
      }
      s->offset[tile] = off;
      s->length[tile] = len;
      s->scan.records++;
      s->scan.payload_bytes += len;
    }
    off += NTK_STORE_RECORD_HEADER + len;
  }
  free(buf);
  for (uint64_t i = 0; i < s->tiling.ntiles; i++) s->scan.damaged += hurt[i] && !s->offset[i];
  /* Keep in the list only tiles that are still damaged. */
  uint64_t kept = 0;
  for (uint64_t k = 0; k < s->scan.ndamaged_list; k++)
    if (!s->offset[s->scan.damaged_list[k]]) s->scan.damaged_list[kept++] = s->scan.damaged_list[k];
  s->scan.ndamaged_list = kept;
  free(hurt);
  s->end = off;
  s->scan.tail_bytes = size - off;
  return st;
}

ntk_status ntk_store_open(const char *path, int flags, ntk_store_t **out) {
  *out = NULL;
  ntk_store_t *s = calloc(1, sizeof *s);
  if (!s) return ntk_error(NTK_ENOMEM, "out of memory");
  snprintf(s->path, sizeof s->path, "%s", path);
  s->writable = flags & NTK_STORE_WRITE;
  s->fd = open(path, (s->writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  ntk_status st = NTK_OK;
  if (s->fd < 0) st = ntk_error(errno == ENOENT ? NTK_EUSAGE : NTK_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (!st && fstat(s->fd, &sb)) st = io_error(s, "stat failed");
  if (!st && !S_ISREG(sb.st_mode)) st = ntk_error(NTK_ECORRUPT, "%s: not a regular file", path);
  if (!st && (uint64_t)sb.st_size < NTK_STORE_HEADER_SIZE)
    st = ntk_error(NTK_EINPUT, "%s: not an ntkd store (%lld bytes, shorter than a store header)",
                   path, (long long)sb.st_size);
  unsigned char *h = NULL;
  if (!st) {
    h = malloc(NTK_STORE_HEADER_SIZE);
    if (!h) st = ntk_error(NTK_ENOMEM, "out of memory");
    else if (pread_all(s->fd, h, NTK_STORE_HEADER_SIZE, 0)) st = io_error(s, "cannot read header");
  }
  if (!st) st = decode_header(path, h, &s->info, &s->tiling);
  free(h);
  if (!st) st = alloc_index(s);
  if (!st) st = scan_records(s, flags & NTK_STORE_CHECK_PAYLOAD, (uint64_t)sb.st_size);
  if (!st && s->writable && s->scan.tail_bytes) {
    /* A torn or garbage tail: cut it off so appends follow the last intact record. */
    if (ftruncate(s->fd, (off_t)s->end) || fsync(s->fd)) st = io_error(s, "cannot truncate damaged tail");
  }
  if (st) {
    if (s->fd >= 0) close(s->fd);
    free(s->offset);
    free(s->length);
    free(s);
    return st;
  }
  *out = s;
  return NTK_OK;
}

ntk_status ntk_store_close(ntk_store_t *s) {
  if (!s) return NTK_OK;
  ntk_status st = NTK_OK;
  if (s->writable && s->fd >= 0) st = ntk_store_sync(s);
  if (s->fd >= 0 && close(s->fd) && !st) st = io_error(s, "close failed");
  free(s->offset);
  free(s->length);
  free(s);
  return st;
}

const struct ntk_store_info *ntk_store_get_info(const ntk_store_t *s) { return &s->info; }
const struct ntk_tiling *ntk_store_tiling(const ntk_store_t *s) { return &s->tiling; }
const struct ntk_store_scan *ntk_store_get_scan(const ntk_store_t *s) { return &s->scan; }
ntk_status ntk_store_read_kernel(ntk_store_t *s, ntk_codec_t *codec, uint64_t tile, int which, void *raw,
                                 void *out) {
  struct ntk_tile t = ntk_tiling_tile(&s->tiling, tile);
  void *payload;
  size_t len, rawb = ntk_store_raw_bytes(s, &t);
  ntk_status st = ntk_store_read_payload(s, tile, &payload, &len);
  if (st) return st;
  st = ntk_codec_decompress(codec, payload, len, (int)s->info.elem, raw, rawb);
  free(payload);
  if (st) return ntk_error(st, "tile %llu: %s", (unsigned long long)tile, ntk_error_message());
  /* The raw tile holds NNGP, then NTK when both are stored. */
  size_t one = (size_t)(t.rows * t.cols) * s->info.elem;
  size_t off = (which == NTK_KERNEL_NTK && (s->info.kernels & NTK_KERNEL_NNGP)) ? one : 0;
  memcpy(out, (char *)raw + off, one);
  return NTK_OK;
}

uint64_t ntk_store_tiles_done(const ntk_store_t *s) { return s->done; }
int ntk_store_has_tile(const ntk_store_t *s, uint64_t tile) {
  return tile < s->tiling.ntiles && s->offset[tile] != 0;
}

ntk_status ntk_store_append(ntk_store_t *s, const struct ntk_tile *t, const void *payload, size_t len,
                            uint64_t checksum) {
  if (!s->writable) return ntk_error(NTK_EINTERNAL, "%s: store opened read-only", s->path);
  if (ntk_store_has_tile(s, t->index)) return NTK_OK;
  unsigned char r[NTK_STORE_RECORD_HEADER];
  memset(r, 0, sizeof r);
  memcpy(r + R_MAGIC, record_magic, 8);
  put64(r + R_TILE, t->index);
  put32(r + R_ROWS, (uint32_t)t->rows);
  put32(r + R_COLS, (uint32_t)t->cols);
  put64(r + R_RAW, ntk_store_raw_bytes(s, t));
  put64(r + R_LEN, len);
  put64(r + R_SUM, checksum);
  put32(r + R_CODEC, CODEC_SHUFFLE_ZSTD);
  put64(r + R_CHECKSUM, ntk_checksum(r, R_CHECKSUM));
  if (pwrite_all(s->fd, r, sizeof r, s->end) ||
      pwrite_all(s->fd, payload, len, s->end + NTK_STORE_RECORD_HEADER)) {
    int e = errno;
    /* Cut the partial record so that the file ends on an intact record. */
    if (ftruncate(s->fd, (off_t)s->end)) { /* the scan on reopen cuts it instead */ }
    errno = e;
    return io_error(s, e == ENOSPC ? "disk full while writing a tile (finished tiles are kept; "
                                     "free space and rerun to resume)"
                                   : "write failed (finished tiles are kept; rerun to resume)");
  }
  s->offset[t->index] = s->end;
  s->length[t->index] = len;
  s->end += NTK_STORE_RECORD_HEADER + len;
  s->done++;
  s->scan.payload_bytes += len;
  return NTK_OK;
}

ntk_status ntk_store_sync(ntk_store_t *s) {
  if (fdatasync(s->fd)) return io_error(s, "fsync failed; the store may have lost recent tiles");
  return NTK_OK;
}

ntk_status ntk_store_read_payload(ntk_store_t *s, uint64_t tile, void **payload, size_t *len) {
  *payload = NULL;
  if (!ntk_store_has_tile(s, tile))
    return ntk_error(NTK_EINCOMPLETE, "%s: tile %llu is not in the store", s->path, (unsigned long long)tile);
  unsigned char r[NTK_STORE_RECORD_HEADER];
  uint64_t off = s->offset[tile];
  if (pread_all(s->fd, r, sizeof r, off)) return io_error(s, "read failed");
  if (memcmp(r, record_magic, 8) || get64(r + R_CHECKSUM) != ntk_checksum(r, R_CHECKSUM))
    return ntk_error(NTK_ECORRUPT, "%s: record of tile %llu at offset %llu is damaged", s->path,
                     (unsigned long long)tile, (unsigned long long)off);
  size_t n = (size_t)get64(r + R_LEN);
  void *buf = malloc(n ? n : 1);
  if (!buf) return ntk_error(NTK_ENOMEM, "out of memory");
  int rc = pread_all(s->fd, buf, n, off + NTK_STORE_RECORD_HEADER);
  if (rc) {
    free(buf);
    return rc < 0 ? io_error(s, "read failed")
                  : ntk_error(NTK_ECORRUPT, "%s: tile %llu is truncated", s->path, (unsigned long long)tile);
  }
  if (ntk_checksum(buf, n) != get64(r + R_SUM)) {
    free(buf);
    return ntk_error(NTK_ECORRUPT, "%s: tile %llu (offset %llu) is damaged: checksum mismatch", s->path,
                     (unsigned long long)tile, (unsigned long long)off);
  }
  *payload = buf;
  *len = n;
  return NTK_OK;
}
