/* PATH.index: a 64-byte header naming the store, then 64-byte entries,
 * each with its own checksum. A tile entry says where the tile's record
 * is; a sync mark says that every entry before it is durable, and that
 * every byte of the store below `covered` belongs to a record it (or an
 * earlier mark) lists, or to a dead region. Entries after the last mark
 * (a write cut short) are ignored. Format: docs/STORE-FORMAT.md. */
#include "store/index.h"
#include "store/le.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/codec.h"
#include "base/defs.h"
#include "base/fsutil.h"

static const char index_magic[8] = {'N', 'T', 'K', 'D', 'I', 'N', 'D', 'X'};
#define INDEX_VERSION 1u
#define ENTRY 64
#define KIND_TILE 1u
#define KIND_SYNC 2u
#define SUM_AT 56


int ntk_index_path(const char *store_path, char *out, size_t cap) {
  int n = snprintf(out, cap, "%s.index", store_path);
  return n > 0 && (size_t)n < cap;
}

static void seal(unsigned char *b) { ntk_put64(b + SUM_AT, ntk_checksum(b, SUM_AT)); }
static int sealed(const unsigned char *b) { return ntk_get64(b + SUM_AT) == ntk_checksum(b, SUM_AT); }

static void encode_header(unsigned char *h, const uint8_t id[16]) {
  memset(h, 0, ENTRY);
  memcpy(h, index_magic, 8);
  ntk_put32(h + 8, INDEX_VERSION);
  ntk_put32(h + 12, ENTRY);
  memcpy(h + 16, id, 16);
  seal(h);
}

/* Entries e[0..n) and a sync mark into buf ((n + 1) * ENTRY bytes). */
static void encode_entries(unsigned char *buf, const struct ntk_index_entry *e, size_t n, uint64_t covered) {
  memset(buf, 0, (n + 1) * ENTRY);
  for (size_t i = 0; i < n; i++) {
    unsigned char *b = buf + i * ENTRY;
    ntk_put32(b, KIND_TILE);
    ntk_put64(b + 8, e[i].tile);
    ntk_put64(b + 16, e[i].offset);
    ntk_put64(b + 24, e[i].len);
    ntk_put64(b + 32, e[i].seq);
    seal(b);
  }
  unsigned char *m = buf + n * ENTRY;
  ntk_put32(m, KIND_SYNC);
  ntk_put64(m + 40, covered);
  seal(m);
}

static ntk_status write_all(int fd, const unsigned char *p, size_t len) {
  while (len) {
    ssize_t w = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return NTK_EIO;
    p += w;
    len -= (size_t)w;
  }
  return NTK_OK;
}

ntk_status ntk_index_write(const char *store_path, const uint8_t id[16], const struct ntk_index_entry *e, size_t n,
                           uint64_t covered, int *fd_out) {
  if (fd_out) *fd_out = -1;
  char path[NTK_PATH_MAX + 16], tmp[NTK_PATH_MAX + 400];
  if (!ntk_index_path(store_path, path, sizeof path))
    return ntk_error(NTK_EUSAGE, "%s: path too long for its index", store_path);
  unsigned char *buf = malloc((n + 2) * ENTRY);
  if (!buf) return ntk_error(NTK_ENOMEM, "out of memory for the index of %s", store_path);
  encode_header(buf, id);
  encode_entries(buf + ENTRY, e, n, covered);
  int fd = -1;
  ntk_status st = ntk_tmp_create(path, tmp, sizeof tmp, &fd);
  if (!st && write_all(fd, buf, (n + 2) * ENTRY))
    st = ntk_error(NTK_EIO, "%s: cannot write the index: %s", tmp, strerror(errno));
  if (!st && fsync(fd)) st = ntk_error(NTK_EIO, "%s: fsync failed: %s", tmp, strerror(errno));
  if (!st && rename(tmp, path)) st = ntk_error(NTK_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
  if (!st) st = ntk_fsync_folder_of(path);
  free(buf);
  if (st) {
    if (fd >= 0) {
      close(fd);
      unlink(tmp);
    }
    return st;
  }
  if (fd_out) *fd_out = fd;
  else close(fd);
  return NTK_OK;
}

ntk_status ntk_index_append(int fd, const char *store_path, const struct ntk_index_entry *e, size_t n,
                            uint64_t covered) {
  unsigned char *buf = malloc((n + 1) * ENTRY);
  if (!buf) return ntk_error(NTK_ENOMEM, "out of memory for the index of %s", store_path);
  encode_entries(buf, e, n, covered);
  ntk_status st = NTK_OK;
  if (write_all(fd, buf, (n + 1) * ENTRY))
    st = ntk_error(NTK_EIO, "%s.index: cannot append to the index: %s", store_path, strerror(errno));
  else if (fdatasync(fd))
    st = ntk_error(NTK_EIO, "%s.index: fsync failed: %s", store_path, strerror(errno));
  free(buf);
  return st;
}

int ntk_index_read(const char *store_path, const uint8_t id[16], struct ntk_index_entry **out, size_t *nout,
                   uint64_t *covered, char *why, size_t cap) {
  *out = NULL;
  *nout = 0;
  *covered = 0;
  char path[NTK_PATH_MAX + 16];
  if (!ntk_index_path(store_path, path, sizeof path)) {
    snprintf(why, cap, "path too long");
    return 0;
  }
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    snprintf(why, cap, errno == ENOENT ? "no index" : "cannot open %s: %s", path, strerror(errno));
    return 0;
  }
  struct stat sb;
  if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_size < 2 * ENTRY) {
    close(fd);
    snprintf(why, cap, "%s is not an index", path);
    return 0;
  }
  size_t size = (size_t)sb.st_size / ENTRY * ENTRY;
  unsigned char *buf = malloc(size);
  struct ntk_index_entry *e = malloc((size / ENTRY) * sizeof *e);
  size_t got = 0;
  while (buf && e && got < size) {
    ssize_t r = pread(fd, buf + got, size - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (!buf || !e || got < size) {
    free(buf);
    free(e);
    if (!buf || !e) {
      ntk_error(NTK_ENOMEM, "out of memory for the index of %s", store_path);
      return -1;
    }
    ntk_error(NTK_EIO, "%s: read failed", path);
    return -1;
  }
  int ok = !memcmp(buf, index_magic, 8) && sealed(buf) && ntk_get32(buf + 8) == INDEX_VERSION &&
           ntk_get32(buf + 12) == ENTRY;
  if (!ok || memcmp(buf + 16, id, 16)) {
    free(buf);
    free(e);
    snprintf(why, cap, ok ? "the index is of another store" : "the index header is damaged");
    return 0;
  }
  size_t n = 0, kept = 0;
  int marks = 0;
  for (size_t off = ENTRY; off + ENTRY <= size; off += ENTRY) {
    const unsigned char *b = buf + off;
    if (!sealed(b)) break; /* a write cut short: what follows is not durable */
    uint32_t kind = ntk_get32(b);
    if (kind == KIND_TILE) {
      e[n].tile = ntk_get64(b + 8);
      e[n].offset = ntk_get64(b + 16);
      e[n].len = ntk_get64(b + 24);
      e[n].seq = ntk_get64(b + 32);
      n++;
    } else if (kind == KIND_SYNC) {
      kept = n;
      *covered = ntk_get64(b + 40);
      marks++;
    } else {
      break;
    }
  }
  free(buf);
  if (!marks) {
    free(e);
    snprintf(why, cap, "the index has no sync mark");
    return 0;
  }
  *out = e;
  *nout = kept;
  return 1;
}
