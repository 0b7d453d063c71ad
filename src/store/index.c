/* PATH.index: a 64-byte header naming the store, then 64-byte entries,
 * each with its own checksum. A tile entry says where the tile's record
 * is; a sync mark says that every entry before it is durable, and that
 * every byte of the store below `covered` belongs to a record it (or an
 * earlier mark) lists, or to a dead region. Entries after the last mark
 * (a write cut short) are ignored. This file reads and writes it; whether
 * what it says is true of the store is store.c's to check. Format:
 * docs/STORE-FORMAT.md. */
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
#include "base/magic.h"

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
  ntk_status st = ntk_tmp_create(path, tmp, sizeof tmp, &fd, NTK_MAGIC_INDEX);
  if (!st && write_all(fd, buf, (n + 2) * ENTRY))
    st = ntk_error(NTK_EIO, "%s: cannot write the index: %s", tmp, strerror(errno));
  if (!st && fsync(fd)) st = ntk_error(NTK_EIO, "%s: fsync failed: %s", tmp, strerror(errno));
  /* Over the store's own index only: another job's store finished at
   * this name meanwhile is not replaced (ntk_commit_at). */
  if (!st && (st = ntk_commit_at(tmp, path, NTK_FILE_INDEX)) == NTK_EUSAGE)
    st = ntk_error(st, "%s: its index cannot be written: %s (its [output] path: the index is NAME.index)", store_path,
                   ntk_error_message());
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

/* 0 on success, 1 at end of file before len bytes, -1 on error. */
static int pread_full(int fd, unsigned char *p, size_t len, uint64_t off) {
  while (len) {
    ssize_t r = pread(fd, p, len, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) return 1;
    p += r;
    len -= (size_t)r;
    off += (uint64_t)r;
  }
  return 0;
}

#define CHUNK_LINES 1024 /* 64 KiB read at a time */

ntk_status ntk_index_read(const char *store_path, const uint8_t id[16], int store_fd, uint64_t first, uint32_t align,
                          struct ntk_index_entry **out, size_t *nout, uint64_t *covered, int *verdict, char *why,
                          size_t cap) {
  *out = NULL;
  *nout = 0;
  *covered = 0;
  *verdict = NTK_INDEX_NONE;
  char path[NTK_PATH_MAX + 16];
  if (!ntk_index_path(store_path, path, sizeof path)) {
    snprintf(why, cap, "path too long");
    return NTK_OK;
  }
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    /* This process's lack (descriptors, memory) or the disk's says nothing
     * of the index: an error, not "no usable index" to be rebuilt. */
    if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == EIO)
      return ntk_error(NTK_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (errno == ENOENT) snprintf(why, cap, "no index");
    else snprintf(why, cap, "cannot open %s: %s", path, strerror(errno));
    return NTK_OK; /* a link in its place included: ignored, and replaced by the next run */
  }
  struct stat sb;
  unsigned char h[ENTRY];
  if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
    close(fd);
    *verdict = NTK_INDEX_BLOCKED;
    snprintf(why, cap, "%s is not a regular file", path);
    return NTK_OK;
  }
  int rc = pread_full(fd, h, ENTRY, 0);
  if (rc < 0) {
    close(fd);
    return ntk_error(NTK_EIO, "%s: read failed: %s", path, strerror(errno));
  }
  if (rc) {
    close(fd);
    *verdict = NTK_INDEX_DAMAGED;
    snprintf(why, cap, "%s is %lld bytes, shorter than an index header", path, (long long)sb.st_size);
    return NTK_OK;
  }
  /* The header first: whose index it is decides whether anything else counts. */
  if (memcmp(h, index_magic, 8) || !sealed(h) || ntk_get32(h + 8) != INDEX_VERSION || ntk_get32(h + 12) != ENTRY) {
    close(fd);
    *verdict = NTK_INDEX_DAMAGED;
    snprintf(why, cap, memcmp(h, index_magic, 8) ? "%s is not an index (no NTKDINDX magic)" : "the header of %s is damaged",
             path);
    return NTK_OK;
  }
  if (memcmp(h + 16, id, 16)) {
    close(fd);
    snprintf(why, cap, "the index is of another store");
    return NTK_OK;
  }
  /* Then its size: never more than the store can need, so that memory and
   * time follow the store, not the file's length. */
  struct stat ss;
  if (fstat(store_fd, &ss)) {
    close(fd);
    return ntk_error(NTK_EIO, "%s: stat failed: %s", store_path, strerror(errno));
  }
  uint64_t records = (uint64_t)ss.st_size > first ? ((uint64_t)ss.st_size - first) / align + 1 : 1;
  uint64_t lines = (uint64_t)sb.st_size / ENTRY, max_lines = 3 * records + 1;
  if (lines - 1 > max_lines) {
    close(fd);
    *verdict = NTK_INDEX_OUTGROWN;
    snprintf(why, cap, "%s is %lld bytes, more than this store can need (at most %llu): not read", path,
             (long long)sb.st_size, (unsigned long long)((max_lines + 1) * ENTRY));
    return NTK_OK;
  }
  unsigned char *buf = malloc(CHUNK_LINES * ENTRY);
  struct ntk_index_entry *e = NULL;
  size_t n = 0, ecap = 0, kept = 0;
  uint64_t bad = 0; /* the first line that fails its checksum (0: none) */
  int marks = 0, unknown = 0;
  ntk_status st = buf ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory for the index of %s", store_path);
  for (uint64_t line = 1; !st && line < lines && !unknown;) {
    size_t k = lines - line < CHUNK_LINES ? (size_t)(lines - line) : CHUNK_LINES;
    rc = pread_full(fd, buf, k * ENTRY, line * ENTRY);
    if (rc < 0) {
      st = ntk_error(NTK_EIO, "%s: read failed: %s", path, strerror(errno));
      break;
    }
    if (rc) break; /* shorter now than when it was measured: read as it was */
    for (size_t j = 0; j < k && !unknown; j++, line++) {
      const unsigned char *b = buf + j * ENTRY;
      uint32_t kind = ntk_get32(b);
      if (!sealed(b)) {
        if (!bad) bad = line;
      } else if (bad) {
        /* An intact line after a damaged one: a torn append leaves only
         * a damaged end, so this is damage. */
        unknown = 1;
        snprintf(why, cap, "entry %llu of %s fails its checksum and intact entries follow it",
                 (unsigned long long)bad, path);
      } else if (kind == KIND_TILE) {
        if (n == ecap) {
          size_t c = ecap ? 2 * ecap : 256;
          struct ntk_index_entry *v = realloc(e, c * sizeof *v);
          if (!v) {
            st = ntk_error(NTK_ENOMEM, "out of memory for the index of %s", store_path);
            break;
          }
          e = v;
          ecap = c;
        }
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
        unknown = 1;
        snprintf(why, cap, "entry %llu of %s is of no known kind (%u)", (unsigned long long)line, path, kind);
      }
    }
  }
  close(fd);
  free(buf);
  if (st) {
    free(e);
    return st;
  }
  if (unknown || !marks) {
    free(e);
    *covered = 0;
    *verdict = NTK_INDEX_DAMAGED;
    if (!unknown) snprintf(why, cap, "%s has no sync mark", path);
    return NTK_OK;
  }
  *out = e;
  *nout = kept;
  *verdict = NTK_INDEX_READ;
  return NTK_OK;
}
