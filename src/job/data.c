/* Readers for the input formats. All go through zlib's gzFile, which reads
 * plain files transparently, so any of them may also be gzip-compressed.
 * Each value is widened to double, scaled, checked and narrowed as it
 * arrives, into an array of the job's precision: memory is the data's
 * size in that precision, not twice or three times it. */
#include "job/data.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/clock.h"
#include "base/fsutil.h"
#include "base/signals.h"

/* Element types found in files. */
typedef enum { T_U8, T_I8, T_I16, T_I32, T_F32, T_F64, T_I64 } src_type;

static size_t type_size(src_type t) {
  static const size_t s[] = {1, 1, 2, 4, 4, 8, 8};
  return s[t];
}

/* A matrix as it loads: values already scaled, checked and in `elem`
 * bytes (4: float, 8: double). */
struct raw {
  size_t n, d, h, w, c;
  void *x;
  int is_u8;
  size_t cap;   /* values x can hold: grown as data arrive (see raw_reserve) */
  int elem;     /* 4 or 8 */
  int samples;  /* samples (scaled by raw_scale, finite, in range), not labels (as read) */
  const struct ntk_job *job; /* samples: [data] scale */
  int chw;      /* samples arrive C x H x W (NCHW), reordered to HWC once read */
  size_t bad;   /* the first sample value refused, as an index into the HWC array; SIZE_MAX: none */
  double bad_v; /* its value as read */
  size_t *flushed, nflushed, capflushed; /* samples with a value that was not 0 as read and is 0 stored
                                            (below the precision's range after scaling): raw_flushed */
  const struct ntk_data_sink *sink; /* NULL: memory of its own */
  int placed;   /* x is the sink's memory, all n*d values: not ours to grow or free */
};

/* The factor every sample value is multiplied by: [data] scale, else 1/255
 * for uint8 data (pixels), else 1. */
static double raw_scale(const struct raw *r) {
  if (!r->samples) return 1.0;
  return r->job->has_scale ? r->job->scale : r->is_u8 ? 1.0 / 255.0 : 1.0;
}

/* raw_put's common case, as one branch-free loop the compiler vectorises
 * (the load of 10 000 x 3 072 floats spent 0.06 s in raw_put's per-value
 * branches): the same values stored, and 1 when none of them was refused
 * or flushed to 0. Otherwise 0, and raw_put stores them again, one by one,
 * remembering which (the same bits: each value's arithmetic is the same). */
static int put_plain(struct raw *r, size_t at, const double *v, size_t count, double scale, double lim) {
  uint64_t odd = 0; /* 64 bits: the width of a double's comparison, which gcc then vectorises */
  if (r->elem == 4) {
    float *x = (float *)r->x + at;
    for (size_t k = 0; k < count; k++) {
      double y = v[k] * scale;
      float f = (float)y;
      x[k] = f;
      uint64_t out = !(fabs(y) <= lim);
      odd |= out | ((f == 0) & (v[k] != 0));
    }
  } else {
    double *x = (double *)r->x + at;
    for (size_t k = 0; k < count; k++) {
      double y = v[k] * scale;
      x[k] = y;
      uint64_t out = !(fabs(y) <= lim);
      odd |= out | ((y == 0) & (v[k] != 0));
    }
  }
  return !odd;
}

/* The largest magnitude a sample value may have in the job's precision
 * (elem bytes): raw_put's limit, and what raw_refused says. */
static double raw_limit(int elem) { return elem == 4 ? 3.0e38 : 1.7e308; }

/* Store count values v (doubles, as read) from value index `at` on: scaled,
 * checked (samples: NaN, infinite, or beyond float32 in a float32 job, after
 * scaling) and narrowed to r->elem bytes. A refused value is remembered,
 * not reported (raw_refused): the file is read to its end first, so that a
 * truncated or malformed file says so whatever its values, and the value
 * reported is the first in the HWC array, as when every value was checked
 * after loading. */
static void raw_put(struct raw *r, size_t at, const double *v, size_t count) {
  double scale = raw_scale(r), lim = raw_limit(r->elem);
  if (r->samples && put_plain(r, at, v, count, scale, lim)) return;
  for (size_t k = 0; k < count; k++) {
    double y = v[k] * scale;
    if (r->samples && !(fabs(y) <= lim)) {
      size_t i = at + k, f = i % r->d, hw = r->h * r->w;
      if (r->chw) f = f % hw * r->c + f / hw; /* its place once the sample is reordered */
      i = i - i % r->d + f;
      if (i < r->bad) {
        r->bad = i;
        r->bad_v = v[k];
      }
    }
    int zero;
    if (r->elem == 4) zero = (((float *)r->x)[at + k] = (float)y) == 0;
    else zero = (((double *)r->x)[at + k] = y) == 0;
    if (zero && r->samples && v[k] != 0) { /* underflowed: remember the sample (raw_flushed) */
      size_t smp = (at + k) / r->d;
      if (!r->nflushed || r->flushed[r->nflushed - 1] != smp) {
        if (r->nflushed == r->capflushed) {
          size_t c = r->capflushed ? 2 * r->capflushed : 16;
          size_t *p = realloc(r->flushed, c * sizeof *p);
          if (!p) continue; /* out of memory: not remembered, as before */
          r->flushed = p, r->capflushed = c;
        }
        r->flushed[r->nflushed++] = smp;
      }
    }
  }
}

/* A sample whose every value is 0 as stored although one as read was not:
 * below the precision's range after scaling (float32 data scaled by 1e-46,
 * float64 data of 1e-50 in a float32 job). Its kernel would be exactly 0,
 * which the worker takes for a sample of zeros (engine.c zero_verdict) and
 * stores with exit 0. A sample with one value left keeps its own. */
static ntk_status raw_flushed(const struct raw *r, const char *path) {
  for (size_t k = 0; k < r->nflushed; k++) {
    size_t s = r->flushed[k], nz = 0;
    for (size_t f = 0; f < r->d && !nz; f++)
      nz = r->elem == 4 ? ((const float *)r->x)[s * r->d + f] != 0 : ((const double *)r->x)[s * r->d + f] != 0;
    if (!nz)
      return ntk_error(NTK_EINPUT, "%s: sample %zu: every value is 0 in %s after scaling (by %g), though its values "
                       "as read are not: they are below %s's range; use %s", path, s,
                       r->elem == 4 ? "float32" : "float64", raw_scale(r), r->elem == 4 ? "float32" : "float64",
                       r->job->train.enabled ? "a larger [data] scale (training computes in float32)"
                                             : "[compute] precision = float64 or a larger [data] scale");
  }
  return NTK_OK;
}

/* The first value raw_put refused, as an error naming the first file. */
static ntk_status raw_refused(const struct raw *r, const char *path) {
  if (r->bad == SIZE_MAX) return NTK_OK;
  /* A finite value out of range: past what the job's precision holds, after [data] scale where one is set
   * (a 1e300 value of a float32 job was said to be so "after scaling" with no scale). */
  char range[160] = "";
  if (isfinite(r->bad_v))
    snprintf(range, sizeof range, " (%.9g%s; a %s job holds at most %.3g)", r->bad_v * raw_scale(r),
             raw_scale(r) != 1 ? " after [data] scale" : "", r->elem == 4 ? "float32" : "float64", raw_limit(r->elem));
  return ntk_error(NTK_EINPUT, "%s: sample %zu, feature %zu is %s%s", path, r->bad / r->d, r->bad % r->d,
                   isnan(r->bad_v) ? "NaN" : "infinite or out of range", range);
}

/* Open an input file for reading through zlib. FIFOs, devices and sockets
 * are refused before anything can block on them (/dev/zero would never end,
 * a FIFO would wait for a writer). `*plain_size` is the size in bytes of a
 * file stored plain, -1 for a gzip-compressed one (no cheap size). zlib
 * reads through a buffer of `buffer` bytes. `*in` is the file as opened, for
 * input_unchanged() once it is read. */
struct input {
  int fd; /* gzclose() closes it */
  struct stat at_open;
};
static ntk_status open_input(const char *path, unsigned buffer, gzFile *out, long long *plain_size,
                             struct input *in) {
  *out = NULL;
  *plain_size = -1;
  int fd;
  /* A missing or unreadable input is an input error (exit 2), like every
   * other data error, whatever ntk_open_regular calls it; a shortage of
   * this process (no descriptor left, ulimit -n) is an I/O failure (3). */
  ntk_status ost = ntk_open_regular(path, O_RDONLY, NULL, &fd);
  if (ost) return ost == NTK_EIO && ntk_errno_transient(errno) ? ost : ntk_error(NTK_EINPUT, "%s", ntk_error_message());
  struct stat sb;
  if (fstat(fd, &sb)) {
    int e = errno;
    close(fd);
    return ntk_error(NTK_EINPUT, "%s: cannot stat: %s", path, strerror(e));
  }
  gzFile f = gzdopen(fd, "rb");
  if (!f) { /* zlib leaves the fd open when it fails; from here on gzclose() closes it */
    close(fd);
    return ntk_error(NTK_ENOMEM, "%s: out of memory", path);
  }
  gzbuffer(f, buffer); /* before gzdirect(), which starts reading */
  if (gzdirect(f)) *plain_size = (long long)sb.st_size;
  *out = f;
  in->fd = fd;
  in->at_open = sb;
  return NTK_OK;
}

/* After the last read of an input, before gzclose(): a file written
 * while it was read (in place: its size or times changed) holds values of
 * two versions, and a kernel of data that never existed would be stored
 * and reported done (a hunt: a slow file system's reads, the file
 * rewritten between two of them). The values as read are refused. */
static ntk_status input_unchanged(const char *path, const struct input *in) {
  struct stat now;
  if (fstat(in->fd, &now)) return ntk_error(NTK_EINPUT, "%s: cannot stat after reading it: %s", path, strerror(errno));
  const struct stat *was = &in->at_open;
  if (now.st_size == was->st_size && now.st_mtim.tv_sec == was->st_mtim.tv_sec &&
      now.st_mtim.tv_nsec == was->st_mtim.tv_nsec && now.st_ctim.tv_sec == was->st_ctim.tv_sec &&
      now.st_ctim.tv_nsec == was->st_ctim.tv_nsec)
    return NTK_OK;
  return ntk_error(NTK_EINPUT, "%s changed while it was read (its %s): the values read may be of two versions of "
                   "it; run again once it is written", path, now.st_size != was->st_size ? "size" : "modification time");
}

/* The stop flag, polled by every loop that reads: a SIGTERM while a large
 * file loads must not wait for the end of the file. */
static ntk_status check_stop(const char *path) {
  int sig = ntk_stop_requested();
  return sig ? ntk_error(NTK_EINTERRUPTED, "interrupted while reading %s (signal %d)", path, sig) : NTK_OK;
}

/* After the last read of a compressed input: nothing after its last gzip
 * member but zeros (padding, which gzip reads past too). zlib's gzread
 * ends the file there and drops what follows when it is not another member
 * (gzip -t: "trailing garbage"), so two files run together, the first
 * compressed, were read as the first alone, exit 0, where a plain file is
 * refused for it (check_end; a hunt). The members are walked with inflate
 * to where the last one ends: a second decompression, about 0.5 s per
 * 200 MB of data. (The trailer's length field alone was not enough: a tail
 * that ends with the same 4 bytes, a trailer written twice, passed.) */
static ntk_status compressed_tail(const char *path, const struct input *in, gzFile f) {
  if (gzdirect(f)) return NTK_OK;
  long long size = (long long)in->at_open.st_size;
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return ntk_error(NTK_ENOMEM, "%s: out of memory", path);
  enum { CHUNK = 1 << 16 };
  unsigned char *inb = malloc(CHUNK), *outb = malloc(CHUNK);
  long long at = 0, end = -1;
  ntk_status st = inb && outb ? NTK_OK : ntk_error(NTK_ENOMEM, "%s: out of memory", path);
  while (!st) {
    if (!z.avail_in) {
      ssize_t r = pread(in->fd, inb, CHUNK, (off_t)at);
      if (r < 0) st = ntk_error(NTK_EINPUT, "%s: read error: %s", path, strerror(errno));
      if (r <= 0) break;
      z.next_in = inb, z.avail_in = (uInt)r, at += r;
    }
    z.next_out = outb, z.avail_out = CHUNK;
    int ret = inflate(&z, Z_NO_FLUSH);
    if (ret == Z_STREAM_END) {
      end = at - (long long)z.avail_in;
      unsigned char m[2];
      if (end == size || pread(in->fd, m, 2, (off_t)end) != 2 || m[0] != 0x1f || m[1] != 0x8b) break;
      inflateReset(&z); /* another member follows */
      end = -1;
    } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
      break; /* (damage: gzread saw it first) */
    }
    st = check_stop(path);
  }
  inflateEnd(&z);
  long long zeros = end; /* the tail's leading zero bytes end here */
  while (!st && end >= 0 && zeros < size) {
    ssize_t r = pread(in->fd, inb, CHUNK, (off_t)zeros);
    if (r <= 0) break;
    ssize_t k = 0;
    while (k < r && !inb[k]) k++;
    zeros += k;
    if (k < r) break;
  }
  free(inb);
  free(outb);
  if (!st && end >= 0 && zeros < size)
    st = ntk_error(NTK_EINPUT, "%s: %lld byte%s after its gzip stream (from byte %lld of %lld) %s not another "
                   "gzip member: two files run together, or damage (gzip -t says \"trailing garbage\")", path,
                   size - end, size - end == 1 ? "" : "s", end, size, size - end == 1 ? "is" : "are");
  return st;
}

/* A read error of `f`: interrupted (a stop signal makes read() fail with
 * EINTR, the handlers do not restart it) or zlib's own text, without the
 * "<fd:N>: " that gzdopen() puts in front of it. */
static ntk_status read_error(gzFile f, const char *path, const char *what) {
  if (ntk_stop_requested()) return check_stop(path);
  int err;
  const char *msg = gzerror(f, &err);
  if (!strncmp(msg, "<fd:", 4) && strstr(msg, ": ")) msg = strstr(msg, ": ") + 2;
  return ntk_error(NTK_EINPUT, "%s: read error in %s: %s", path, what, msg);
}

/* Where gzread() gave 0, the end of a compressed file: zlib reports a
 * stream cut short (inside the data, or inside its trailer, the CRC-32 and
 * length that check every byte) as Z_BUF_ERROR, which gzread() does not
 * return as an error. Such a file is cut, as a short plain file is; without
 * this, a file missing its last bytes was read with its checksum unchecked. */
static ntk_status compressed_end(gzFile f, const char *path) {
  int err = Z_OK;
  if (!gzdirect(f)) gzerror(f, &err);
  if (err != Z_BUF_ERROR) return NTK_OK;
  return ntk_error(NTK_EINPUT, "%s: file is truncated (its compressed stream ends early: the last bytes, or its "
                   "checksum, are missing)", path);
}

/* Up to `most` bytes of a compressed file read and dropped, into *got;
 * fewer only at its end, which must be clean (compressed_end). */
static ntk_status compressed_drain(gzFile f, const char *path, unsigned long long most, unsigned long long *got) {
  unsigned char buf[1 << 16];
  *got = 0;
  while (*got < most) {
    ntk_status st = check_stop(path);
    if (st) return st;
    unsigned long long want = most - *got;
    int r = gzread(f, buf, want < sizeof buf ? (unsigned)want : (unsigned)sizeof buf);
    if (r < 0) return read_error(f, path, "the rest of the file");
    if (r == 0) return compressed_end(f, path);
    *got += (unsigned long long)r;
  }
  return NTK_OK;
}

/* A compressed file read on to its end, taking `skip` more bytes (the
 * samples its header declares that the job does not use) and then
 * nothing: its checksum is only checked at its end, and the bytes a job
 * uses are only as good as that check. */
static ntk_status compressed_rest(gzFile f, const char *path, unsigned long long skip) {
  unsigned long long got;
  ntk_status st = compressed_drain(f, path, skip, &got);
  if (!st && got < skip)
    st = ntk_error(NTK_EINPUT, "%s: file is truncated (it holds fewer samples than its header declares)", path);
  if (!st) st = compressed_drain(f, path, 1, &got);
  if (!st && got)
    st = ntk_error(NTK_EINPUT, "%s: the data go on after the samples its header declares: the file is damaged, or "
                   "its header's shape is wrong", path);
  return st;
}

static ntk_status read_exact(gzFile f, const char *path, void *buf, size_t len, const char *what) {
  unsigned char *p = buf;
  while (len) {
    unsigned chunk = len > (1u << 30) ? (1u << 30) : (unsigned)len;
    int r = gzread(f, p, chunk);
    if (r < 0) return read_error(f, path, what);
    if (r == 0) return ntk_error(NTK_EINPUT, "%s: file is truncated (ends inside %s)", path, what);
    p += r;
    len -= (size_t)r;
  }
  return NTK_OK;
}

static double get_value(const unsigned char *p, src_type t, int big_endian) {
  unsigned char b[8];
  size_t s = type_size(t);
  for (size_t i = 0; i < s; i++) b[i] = big_endian ? p[s - 1 - i] : p[i];
  switch (t) {
  case T_U8: return b[0];
  case T_I8: return (int8_t)b[0];
  case T_I16: { int16_t v; memcpy(&v, b, 2); return v; }
  case T_I32: { int32_t v; memcpy(&v, b, 4); return v; }
  case T_F32: { float v; memcpy(&v, b, 4); return v; }
  case T_F64: { double v; memcpy(&v, b, 8); return v; }
  case T_I64: { int64_t v; memcpy(&v, b, 8); return (double)v; }
  }
  return 0;
}

/* Check the sizes a header claims. Memory is taken as the values arrive
 * (raw_reserve), so a header that claims terabytes in a 100-byte file is
 * reported as truncated, not answered with a giant allocation (found by
 * fuzzing). */
static ntk_status alloc_raw(struct raw *r, const char *path) {
  if (r->d == 0 || r->n == 0) return ntk_error(NTK_EINPUT, "%s: empty data (no samples or no features)", path);
  if (r->d > ((size_t)1 << 40) / r->n) return ntk_error(NTK_EINPUT, "%s: data too large", path);
  r->x = NULL;
  r->cap = 0;
  return NTK_OK;
}

/* The sink's memory for all n*d values (raw_place), asked for where the
 * file is plain and long enough to hold them after `f`'s position: a
 * header claiming more than the file holds still fails as truncated,
 * without memory sized by it. */
static ntk_status raw_place(struct raw *r, gzFile f, long long plain_size, size_t value_bytes) {
  long long at = (long long)gztell(f);
  if (!r->sink || plain_size < 0 || at < 0 || (unsigned long long)(plain_size - at) / value_bytes / r->d < r->n)
    return NTK_OK;
  struct ntk_dataset shape = {.n = r->n, .d = r->d, .h = r->h, .w = r->w, .c = r->c, .elem = r->elem,
                              .one_d = r->job->layout == NTK_LAYOUT_NLC && r->h};
  void *x = NULL;
  ntk_status st = r->sink->place(r->sink->ctx, &shape, &x);
  if (!st && x) {
    r->x = x;
    r->cap = r->n * r->d;
    r->placed = 1;
  }
  return st;
}

/* Room for at least `values` values, growing geometrically up to n*d. */
static ntk_status raw_reserve(struct raw *r, const char *path, size_t values) {
  if (values <= r->cap) return NTK_OK;
  size_t want = r->cap * 2 > values ? r->cap * 2 : values, all = r->n * r->d;
  if (want > all) want = all;
  void *x = realloc(r->x, want * (size_t)r->elem);
  if (!x) return ntk_error(NTK_ENOMEM, "%s: out of memory for %zu values", path, want);
  r->x = x;
  r->cap = want;
  return NTK_OK;
}

/* Whether count values just read in place, in the job's own format
 * (read_values), are what raw_put would store unchanged: none NaN,
 * infinite, beyond the precision's limit or subnormal (which raw_put's
 * arithmetic may flush where the thread's MXCSR says so). Judged by the
 * bits, one loop the compiler vectorises. */
static int plain_values(const void *x, size_t count, int elem) {
  uint64_t odd = 0;
  if (elem == 4) {
    float lim = (float)raw_limit(4); /* raw_put's limit, as the largest float not above it */
    if ((double)lim > raw_limit(4)) lim = nextafterf(lim, 0.0f);
    uint32_t top, *u = (uint32_t *)x;
    memcpy(&top, &lim, 4);
    for (size_t k = 0; k < count; k++) {
      uint32_t a = u[k] & 0x7fffffffu;
      odd |= (uint64_t)((a > top) | ((a != 0) & (a < 0x00800000u)));
    }
  } else {
    double lim = raw_limit(8);
    uint64_t top, *u = (uint64_t *)x;
    memcpy(&top, &lim, 8);
    for (size_t k = 0; k < count; k++) {
      uint64_t a = u[k] & 0x7fffffffffffffffull;
      odd |= (uint64_t)((a > top) | ((a != 0) & (a < 0x0010000000000000ull)));
    }
  }
  return !odd;
}

/* Read n*d values of type t into raw->x starting at sample `at`, in
 * chunks of at most 4 Mi values whatever the sample size, each widened to
 * double RAW_STEP values at a time and stored by raw_put. Values already
 * in the job's format (little-endian float32 for float32, float64 for
 * float64, no scale) are read in place instead: the copy out of the page
 * cache is the only pass over them besides plain_values' check (47 of the
 * 120 ms rank 0 spent loading 10 000 x 3 072 floats went to widening and
 * narrowing them), and a chunk that fails the check is stored again by
 * raw_put from those bits. */
#define RAW_STEP 4096

/* m values of type t at b, as read, into v (doubles). */
static void to_doubles(const unsigned char *b, size_t m, src_type t, int big_endian, double *v) {
  /* Common cases without a per-value switch. */
  if (t == T_U8) {
    for (size_t k = 0; k < m; k++) v[k] = b[k];
  } else if (t == T_F32 && !big_endian) {
    for (size_t k = 0; k < m; k++) {
      float x;
      memcpy(&x, b + 4 * k, 4);
      v[k] = x;
    }
  } else if (t == T_F64 && !big_endian) {
    memcpy(v, b, m * 8);
  } else {
    for (size_t k = 0; k < m; k++) v[k] = get_value(b + k * type_size(t), t, big_endian);
  }
}

/* Under the test setting NTKD_TEST_READ_PAUSE=S: S seconds before a data
 * file's first values are read (a test rewrites the file meanwhile, for
 * input_unchanged to find). */
static void test_read_pause(const char *path) {
  const char *v = getenv("NTKD_TEST_READ_PAUSE");
  if (!v) return;
  fprintf(stderr, "ntkd: test setting NTKD_TEST_READ_PAUSE=%s: paused before the values of %s\n", v, path);
  ntk_sleep(atof(v), NULL);
}

static ntk_status read_values(gzFile f, const char *path, struct raw *r, size_t at, size_t n,
                              src_type t, int big_endian) {
  if (r->samples && at == 0) test_read_pause(path);
  size_t s = type_size(t), total = n * r->d, chunk = (size_t)1 << 22, base = at * r->d;
  int in_place = r->samples && !big_endian && raw_scale(r) == 1.0 &&
                 ((t == T_F32 && r->elem == 4) || (t == T_F64 && r->elem == 8));
  if (in_place) {
    double v[RAW_STEP];
    ntk_status st = NTK_OK;
    for (size_t i = 0; i < total && !st; i += chunk) {
      size_t count = total - i < chunk ? total - i : chunk;
      if ((st = check_stop(path)) || (st = raw_reserve(r, path, base + i + count))) break;
      unsigned char *x = (unsigned char *)r->x + (base + i) * s;
      if ((st = read_exact(f, path, x, count * s, "the data")) || plain_values(x, count, r->elem)) continue;
      for (size_t j = 0; j < count; j += RAW_STEP) {
        size_t m = count - j < RAW_STEP ? count - j : RAW_STEP;
        to_doubles(x + j * s, m, t, 0, v);
        raw_put(r, base + i + j, v, m);
      }
    }
    return st;
  }
  unsigned char *buf = malloc((total < chunk ? total : chunk) * s + 1);
  double *v = malloc(RAW_STEP * sizeof *v);
  if (!buf || !v) {
    free(buf), free(v);
    return ntk_error(NTK_ENOMEM, "%s: out of memory", path);
  }
  ntk_status st = NTK_OK;
  for (size_t i = 0; i < total && !st; i += chunk) {
    size_t count = total - i < chunk ? total - i : chunk;
    if ((st = check_stop(path))) break;
    st = read_exact(f, path, buf, count * s, "the data");
    if (!st) st = raw_reserve(r, path, base + i + count);
    for (size_t j = 0; j < count && !st; j += RAW_STEP) {
      size_t m = count - j < RAW_STEP ? count - j : RAW_STEP;
      to_doubles(buf + j * s, m, t, big_endian, v);
      raw_put(r, base + i + j, v, m);
    }
  }
  free(buf), free(v);
  return st;
}

/* After the values a reader took, `left` more samples of `sample_bytes`
 * each that the header declares and the job does not use: the file must
 * end where its header says. A header edited to a smaller shape, or two
 * files run together, read the first rows as if they were the data; a
 * shorter file is cut. A plain file is measured by its size; a compressed
 * one is read to its end (compressed_rest), which checks its checksum. */
static ntk_status check_end(gzFile f, const char *path, long long plain_size, size_t left, size_t sample_bytes) {
  long long at = (long long)gztell(f);
  if (plain_size >= 0 && at >= 0) {
    unsigned long long want = (unsigned long long)at + (unsigned long long)left * sample_bytes;
    if ((unsigned long long)plain_size == want) return NTK_OK;
    return ntk_error(NTK_EINPUT, "%s: the file has %lld bytes, its header declares %llu: it is %s", path, plain_size,
                     want, (unsigned long long)plain_size > want ? "damaged, or its header's shape is wrong (the "
                     "data go on after the declared samples)" : "cut short");
  }
  unsigned long long skip; /* shape_size bounded left * sample_bytes; saturate all the same */
  if (__builtin_mul_overflow((unsigned long long)left, (unsigned long long)sample_bytes, &skip)) skip = ULLONG_MAX;
  return compressed_rest(f, path, skip);
}

/* The values per sample a header claims, dims[1] * ... * dims[nd-1], in
 * `*sample`, once it is checked that neither that product nor the size in
 * bytes of the whole array (times dims[0] and `elem_size`) wraps around 64
 * bits: a crafted header could otherwise pass a sample of 5 values off as
 * 3 x 12297829382473034411 x 5, whose image shape breaks the CNN code. */
static ntk_status shape_size(const char *path, const char *kind, const size_t *dims, int nd, size_t elem_size,
                             size_t *sample) {
  size_t d = 1, bytes;
  int wrap = 0;
  for (int i = 1; i < nd; i++) wrap |= __builtin_mul_overflow(d, dims[i], &d);
  wrap = wrap || __builtin_mul_overflow(d, dims[0], &bytes) || __builtin_mul_overflow(bytes, elem_size, &bytes);
  if (!wrap) {
    *sample = d;
    return NTK_OK;
  }
  char s[128] = "";
  size_t at = 0;
  for (int i = 0; i < nd && at < sizeof s; i++)
    at += (size_t)snprintf(s + at, sizeof s - at, "%s%zu", i ? ", " : "", dims[i]);
  return ntk_error(NTK_EINPUT, "%s: %s shape (%s) is too large: its size overflows 64 bits", path, kind, s);
}

static size_t want_count(const struct ntk_job *job, size_t have, const char *path, ntk_status *st) {
  *st = NTK_OK;
  if (job->count == 0) return have;
  if (job->count > have)
    *st = ntk_error(NTK_EINPUT, "%s: %s = %zu but the data hold only %zu samples", path,
                    job->count_key[0] ? job->count_key : "[data] count", job->count, have);
  return job->count;
}


/* ---- .npy ---------------------------------------------------------------- */

/* `labels`: a 1-D array of integers (uint8, int32, int64) instead of 2-D
 * to 4-D samples (float32, float64, uint8). */
/* p past the blanks numpy's header parser (Python's literal_eval) takes
 * between tokens: spaces, tabs, line ends. */
static const char *npy_skip(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  return p;
}

/* How much of the header at p a message quotes: to the next blank, at most
 * 20 bytes (a newline in it split the message). */
static int npy_token(const char *p) {
  size_t n = strcspn(p, " \t\r\n");
  return (int)(n > 20 ? 20 : n);
}

/* A quoted string of the header at p (' or ", as Python writes either;
 * no escapes: numpy's keys and dtype strings have none): its text in
 * [*a, *z), and the byte after its closing quote; NULL if none. */
static const char *npy_string(const char *p, const char **a, const char **z) {
  if (*p != '\'' && *p != '"') return NULL;
  const char *e = strchr(p + 1, *p);
  if (!e || memchr(p + 1, '\\', (size_t)(e - p - 1))) return NULL;
  *a = p + 1, *z = e;
  return e + 1;
}

/* The header's dictionary, read as Python's literal_eval reads it (numpy.load
 * does so): exactly the keys descr, fortran_order and shape, each once, in
 * any order and either quote, and nothing else between the braces. A text
 * search found the first of a repeated key where numpy takes the last, and
 * a key inside a comment: another shape, order or byte order read, exit 0
 * (a hunt). */
static ntk_status npy_parse_header(const char *path, const char *hdr, int labels, src_type *t, int *big,
                                   size_t *shape, int *ndim) {
  static const char *const names[3] = {"descr", "fortran_order", "shape"};
  int seen[3] = {0, 0, 0}, fortran = 0;
  char descr[16] = {0};
  const char *p = npy_skip(strchr(hdr, '{') + 1); /* npy_check_text: one {...} */
  while (*p != '}') {
    const char *a, *z;
    const char *after = npy_string(p, &a, &z);
    if (!after)
      return ntk_error(NTK_EINPUT, "%s: .npy header: '%.*s' where a quoted key belongs: not a .npy header numpy "
                       "wrote", path, npy_token(p), p);
    size_t len = (size_t)(z - a);
    int k = 0;
    while (k < 3 && !(strlen(names[k]) == len && !strncmp(a, names[k], len))) k++;
    if (k == 3)
      return ntk_error(NTK_EINPUT, "%s: .npy header has the key '%.*s' (a .npy header has exactly 'descr', "
                       "'fortran_order' and 'shape'): not a .npy file numpy wrote", path, (int)(len < 40 ? len : 40), a);
    if (seen[k]++) return ntk_error(NTK_EINPUT, "%s: .npy header repeats a key: '%s'", path, names[k]);
    p = npy_skip(after);
    if (*p++ != ':') return ntk_error(NTK_EINPUT, "%s: .npy header: no ':' after '%s'", path, names[k]);
    p = npy_skip(p);
    if (k == 0) { /* descr */
      const char *v = npy_string(p, &a, &z);
      if (!v && *p == '[') { /* a structured dtype: a list of fields */
        const char *e = strchr(p, ']');
        int whole = e && e - p < 60; /* the field list, or its start */
        return ntk_error(NTK_EINPUT, "%s: .npy dtype %.*s%s is not supported (%s)", path,
                         whole ? (int)(e - p + 1) : 20, p, whole ? "" : "...",
                         labels ? "uint8, int32 or int64" : "float32, float64 or uint8");
      }
      if (!v || z - a >= (long)sizeof descr) return ntk_error(NTK_EINPUT, "%s: .npy header: bad 'descr'", path);
      memcpy(descr, a, (size_t)(z - a));
      p = v;
    } else if (k == 1) { /* fortran_order */
      if (!strncmp(p, "True", 4)) fortran = 1, p += 4;
      else if (!strncmp(p, "False", 5)) p += 5;
      else return ntk_error(NTK_EINPUT, "%s: .npy header: bad 'fortran_order'", path);
    } else { /* shape: a tuple of integers */
      if (*p++ != '(') return ntk_error(NTK_EINPUT, "%s: .npy header: bad 'shape'", path);
      *ndim = 0;
      for (;;) {
        p = npy_skip(p);
        if (*p == ')') break;
        if (*p == '-') return ntk_error(NTK_EINPUT, "%s: .npy header: negative 'shape'", path); /* strtoull takes it */
        if (*p < '0' || *p > '9') return ntk_error(NTK_EINPUT, "%s: .npy header: bad 'shape'", path);
        char *e;
        errno = 0;
        unsigned long long v = strtoull(p, &e, 10);
        if (errno == ERANGE)
          return ntk_error(NTK_EINPUT, "%s: .npy shape: %.*s is too large", path, (int)(e - p < 40 ? e - p : 40), p);
        if (*ndim == 4)
          return ntk_error(NTK_EINPUT, "%s: .npy shape must have %s dimensions", path, labels ? "one" : "2 to 4");
        shape[(*ndim)++] = (size_t)v;
        p = npy_skip(e);
        if (*p == ',') p++;
        else if (*p != ')') return ntk_error(NTK_EINPUT, "%s: .npy header: bad 'shape'", path);
      }
      p++;
    }
    p = npy_skip(p);
    if (*p == ',') p = npy_skip(p + 1);
    else if (*p != '}')
      return ntk_error(NTK_EINPUT, "%s: .npy header: '%.*s' after the value of '%s': not a .npy header numpy wrote",
                       path, npy_token(p), p, names[k]);
  }
  if (*npy_skip(p + 1))
    return ntk_error(NTK_EINPUT, "%s: .npy header: text after its dictionary: not a .npy header numpy wrote", path);
  for (int k = 0; k < 3; k++)
    if (!seen[k]) return ntk_error(NTK_EINPUT, "%s: .npy header has no '%s'", path, names[k]);
  *big = descr[0] == '>';
  const char *ty = descr + (descr[0] == '<' || descr[0] == '>' || descr[0] == '|' || descr[0] == '=');
  if (!strcmp(ty, "u1")) *t = T_U8;
  else if (!labels && !strcmp(ty, "f4")) *t = T_F32;
  else if (!labels && !strcmp(ty, "f8")) *t = T_F64;
  else if (labels && !strcmp(ty, "i4")) *t = T_I32;
  else if (labels && !strcmp(ty, "i8")) *t = T_I64;
  else if (labels)
    return ntk_error(NTK_EINPUT, "%s: .npy dtype '%s' is not supported for labels (uint8, int32 or int64)",
                     path, descr);
  else
    return ntk_error(NTK_EINPUT, "%s: .npy dtype '%s' is not supported (float32, float64 or uint8)",
                     path, descr);
  if (fortran)
    return ntk_error(NTK_EINPUT, "%s: Fortran-ordered .npy is not supported; save with "
                     "numpy.ascontiguousarray", path);
  if (labels && *ndim != 1)
    return ntk_error(NTK_EINPUT, "%s: a labels .npy must have one dimension (N,), not %d", path, *ndim);
  if (!labels && *ndim < 2) return ntk_error(NTK_EINPUT, "%s: .npy shape must have 2 to 4 dimensions (N, d) "
                                             "or (N, H, W, C)", path);
  return NTK_OK;
}

/* The header is a Python dict literal, padded with spaces to a newline, as
 * numpy writes it and numpy.load reads it: a control byte (a NUL, say) or
 * text around the braces is a damaged or foreign file, refused before the
 * keys are looked for in it. `at`: the header's offset in the file. */
static ntk_status npy_check_text(const char *path, const char *hdr, size_t hlen, size_t at) {
  for (size_t i = 0; i < hlen; i++) {
    unsigned char b = (unsigned char)hdr[i];
    if ((b < 0x20 && b != '\n' && b != '\r' && b != '\t') || b == 0x7f)
      return ntk_error(NTK_EINPUT, "%s: the .npy header holds the byte 0x%02x at offset %zu: not a .npy file "
                       "numpy wrote", path, b, at + i);
  }
  size_t a = 0, z = hlen;
  while (a < z && isspace((unsigned char)hdr[a])) a++;
  while (z > a && isspace((unsigned char)hdr[z - 1])) z--;
  if (z - a < 2 || hdr[a] != '{' || hdr[z - 1] != '}')
    return ntk_error(NTK_EINPUT, "%s: the .npy header is not one dictionary {...}: not a .npy file numpy wrote",
                     path);
  return NTK_OK;
}

/* Read the preamble and header of a .npy file, leaving `f` at the data. */
static ntk_status npy_read_header(const char *path, gzFile f, int labels, src_type *t, int *big, size_t *shape,
                                  int *ndim) {
  unsigned char pre[10];
  ntk_status st = read_exact(f, path, pre, 10, "the .npy preamble");
  if (st) return st;
  if (memcmp(pre, "\x93NUMPY", 6)) return ntk_error(NTK_EINPUT, "%s: not a .npy file (bad magic)", path);
  size_t hlen;
  if (pre[6] == 1) {
    hlen = pre[8] | (size_t)pre[9] << 8;
  } else if (pre[6] == 2 || pre[6] == 3) {
    unsigned char more[2];
    if ((st = read_exact(f, path, more, 2, "the .npy preamble"))) return st;
    hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)more[0] << 16 | (size_t)more[1] << 24;
  } else {
    return ntk_error(NTK_EINPUT, "%s: unsupported .npy version %d", path, pre[6]);
  }
  if (hlen > 1 << 20) return ntk_error(NTK_EINPUT, "%s: .npy header too long", path);
  char *hdr = calloc(1, hlen + 1);
  if (!hdr) return ntk_error(NTK_ENOMEM, "out of memory");
  st = read_exact(f, path, hdr, hlen, "the .npy header");
  if (!st) st = npy_check_text(path, hdr, hlen, pre[6] == 1 ? 10 : 12); /* the preamble's bytes before it */
  if (!st) st = npy_parse_header(path, hdr, labels, t, big, shape, ndim);
  free(hdr);
  return st;
}

static ntk_status read_npy(const struct ntk_job *job, const char *path, gzFile f, long long plain_size,
                           struct raw *r) {
  src_type t = T_F64;
  int big = 0, ndim = 0;
  size_t shape[4] = {0};
  ntk_status st = npy_read_header(path, f, 0, &t, &big, shape, &ndim);
  if (st) return st;
  if ((st = shape_size(path, ".npy", shape, ndim, type_size(t), &r->d))) return st;
  r->n = want_count(job, shape[0], path, &st);
  if (st) return st;
  size_t h = 0, w = 0, c = 0;
  if (ndim != 3 && job->layout == NTK_LAYOUT_NLC)
    return ntk_error(NTK_EINPUT, "%s: [data] layout = NLC is for 3-D (N, L, C) arrays, this one has %d dimensions",
                     path, ndim);
  /* NCHW names a channel axis that only a 4-D array has: on (N, C, L)
   * sequences it would be read silently as (N, H, W) grey images. */
  if (ndim != 4 && job->layout == NTK_LAYOUT_NCHW)
    return ntk_error(NTK_EINPUT, "%s: [data] layout = NCHW is for 4-D (N, C, H, W) arrays, this one has %d dimensions",
                     path, ndim);
  if (ndim == 3 && job->layout == NTK_LAYOUT_NLC) { h = shape[1]; w = 1; c = shape[2]; } /* 1-D: L x 1 images */
  else if (ndim == 3) { h = shape[1]; w = shape[2]; c = 1; }
  else if (ndim == 4 && job->layout == NTK_LAYOUT_NHWC) { h = shape[1]; w = shape[2]; c = shape[3]; }
  else if (ndim == 4) { c = shape[1]; h = shape[2]; w = shape[3]; }
  r->h = h; r->w = w; r->c = c;
  r->is_u8 = t == T_U8;
  r->chw = ndim == 4 && job->layout == NTK_LAYOUT_NCHW && c > 1;
  if ((st = alloc_raw(r, path))) return st;
  if ((st = raw_place(r, f, plain_size, type_size(t)))) return st;
  if ((st = read_values(f, path, r, 0, r->n, t, big))) return st;
  if ((st = check_end(f, path, plain_size, shape[0] - r->n, r->d * type_size(t)))) return st;
  if (r->chw) {
    /* Reorder each sample from CHW to HWC. */
    size_t es = (size_t)r->elem;
    char *tmp = malloc(r->d * es);
    if (!tmp) return ntk_error(NTK_ENOMEM, "out of memory");
    for (size_t i = 0; i < r->n; i++) {
      char *s = (char *)r->x + i * r->d * es;
      for (size_t ch = 0; ch < c; ch++)
        for (size_t p = 0; p < h * w; p++) memcpy(tmp + (p * c + ch) * es, s + (ch * h * w + p) * es, es);
      memcpy(s, tmp, r->d * es);
    }
    free(tmp);
  }
  return NTK_OK;
}

/* ---- IDX (MNIST) --------------------------------------------------------- */

/* Read the magic number and dimensions of an IDX file, leaving `f` at the
 * data. Any number of dimensions (1..4); the callers decide what they take. */
static ntk_status idx_read_header(const char *path, gzFile f, src_type *type, size_t *dim, int *ndim_out) {
  unsigned char m[4];
  ntk_status st = read_exact(f, path, m, 4, "the IDX magic number");
  if (st) return st;
  src_type t;
  switch (m[2]) {
  case 0x08: t = T_U8; break;
  case 0x09: t = T_I8; break;
  case 0x0B: t = T_I16; break;
  case 0x0C: t = T_I32; break;
  case 0x0D: t = T_F32; break;
  case 0x0E: t = T_F64; break;
  default: t = T_U8; m[0] = 1; break;
  }
  if (m[0] || m[1])
    return ntk_error(NTK_EINPUT, "%s: not an IDX file (bad magic %02x %02x %02x %02x); "
                     "set [data] format if this is another format", path, m[0], m[1], m[2], m[3]);
  int ndim = m[3];
  if (ndim < 1 || ndim > 4) return ntk_error(NTK_EINPUT, "%s: IDX file with %d dimensions", path, ndim);
  unsigned char db[16];
  if ((st = read_exact(f, path, db, (size_t)ndim * 4, "the IDX dimensions"))) return st;
  for (int i = 0; i < ndim; i++)
    dim[i] = (size_t)db[4 * i] << 24 | (size_t)db[4 * i + 1] << 16 | (size_t)db[4 * i + 2] << 8 | db[4 * i + 3];
  *type = t;
  *ndim_out = ndim;
  return NTK_OK;
}

static ntk_status read_idx(const struct ntk_job *job, const char *path, gzFile f, long long plain_size,
                           struct raw *r) {
  src_type t;
  size_t dim[4];
  int ndim;
  ntk_status st = idx_read_header(path, f, &t, dim, &ndim);
  if (st) return st;
  if (ndim == 1)
    return ntk_error(NTK_EINPUT, "%s: this IDX file has one dimension (a labels file?); "
                     "[data] path needs the images", path);
  /* Four 32-bit sizes: their product can pass 64 bits. */
  if ((st = shape_size(path, "IDX", dim, ndim, type_size(t), &r->d))) return st;
  r->n = want_count(job, dim[0], path, &st);
  if (st) return st;
  r->h = ndim >= 3 ? dim[1] : 0;
  r->w = ndim >= 3 ? dim[2] : 0;
  r->c = ndim == 4 ? dim[3] : ndim == 3 ? 1 : 0;
  r->is_u8 = t == T_U8;
  if ((st = alloc_raw(r, path))) return st;
  if ((st = raw_place(r, f, plain_size, type_size(t)))) return st;
  if ((st = read_values(f, path, r, 0, r->n, t, 1))) return st;
  return check_end(f, path, plain_size, dim[0] - r->n, r->d * type_size(t));
}

/* ---- CIFAR-10 binary ------------------------------------------------------ */

#define CIFAR_REC 3073

/* `sizes[k]`: the size of file k when it is stored plain, -1 when it is
 * gzip-compressed. Plain files are counted from their sizes, which must be
 * whole numbers of records, so a count of 10 reads 10 records of a 100 GB
 * file. A compressed file has no cheap size: it is read record by record
 * as far as the count needs, and then to its end (its checksum is checked
 * there, and that it ends on a whole record; the labels past the count are
 * not); the compressed files after it are not read. */
static ntk_status read_cifar(const struct ntk_job *job, gzFile *files, const long long *sizes, int nfiles,
                             struct raw *r) {
  size_t total = 0, per_file[NTK_MAX_DATA_FILES];
  int all_plain = 1;
  for (int k = 0; k < nfiles; k++) {
    per_file[k] = SIZE_MAX; /* compressed: until its end */
    if (sizes[k] < 0) {
      all_plain = 0;
      continue;
    }
    if (sizes[k] == 0 || sizes[k] % CIFAR_REC)
      return ntk_error(NTK_EINPUT, "%s: %lld bytes is not a whole number of CIFAR-10 records "
                       "(3073 bytes each: label + 3x32x32 pixels); truncated or not CIFAR-10",
                       job->data_path[k], sizes[k]);
    per_file[k] = (size_t)(sizes[k] / CIFAR_REC);
    total += per_file[k];
  }
  r->h = r->w = 32;
  r->c = 3;
  r->d = 3072;
  r->is_u8 = 1;
  ntk_status st = NTK_OK;
  /* Without the total, n is the count or, for all the samples, the bound
   * alloc_raw allows; memory grows as the records arrive. */
  const size_t most = ((size_t)1 << 40) / 3072;
  /* What holds the samples, for a count they fall short of: every batch */
  char held[NTK_PATH_MAX + 64];
  if (nfiles > 1)
    snprintf(held, sizeof held, "%s and %d more batch file%s", job->data_path[0], nfiles - 1,
             nfiles > 2 ? "s" : "");
  else
    snprintf(held, sizeof held, "%s", job->data_path[0]);
  if (all_plain) r->n = want_count(job, total, held, &st);
  else r->n = job->count ? job->count : most;
  if (!st) st = alloc_raw(r, job->data_path[0]);
  if (!st && all_plain) st = raw_reserve(r, job->data_path[0], r->n * r->d); /* the sizes say they exist */
  unsigned char rec[CIFAR_REC];
  double v[3072];
  size_t i = 0;
  int cur = -1, cur_ended = 0; /* the last file read from, and whether it was read to its end */
  for (int k = 0; k < nfiles && !st && i < r->n; k++) {
    const char *path = job->data_path[k];
    cur = k, cur_ended = 0;
    for (size_t j = 0; j < per_file[k] && i < r->n; j++, i++) {
      if ((st = check_stop(path))) break;
      int got = gzread(files[k], rec, CIFAR_REC);
      if (got < 0) {
        st = read_error(files[k], path, "a CIFAR-10 record");
      } else if (got == 0 && per_file[k] == SIZE_MAX && j > 0) {
        st = compressed_end(files[k], path); /* the end of a compressed file, on a record boundary */
        cur_ended = 1;
        break;
      } else if (got < CIFAR_REC) {
        st = per_file[k] != SIZE_MAX
                 ? ntk_error(NTK_EINPUT, "%s: file is truncated (ends in record %zu)", path, j)
                 : ntk_error(NTK_EINPUT, "%s: %zu bytes is not a whole number of CIFAR-10 records "
                             "(3073 bytes each: label + 3x32x32 pixels); truncated or not CIFAR-10",
                             path, j * CIFAR_REC + (size_t)got);
      } else if (rec[0] > 9) {
        st = ntk_error(NTK_EINPUT, "%s: record %zu has label %d (CIFAR-10 labels are 0..9); "
                       "not a CIFAR-10 batch", path, j, rec[0]);
      } else {
        st = raw_reserve(r, path, (i + 1) * r->d);
      }
      if (st) break;
      for (size_t ch = 0; ch < 3; ch++)
        for (size_t p = 0; p < 1024; p++) v[p * 3 + ch] = rec[1 + ch * 1024 + p];
      raw_put(r, i * 3072, v, 3072);
    }
  }
  /* A compressed file the count ended inside: read to its end, for its
   * checksum (compressed_rest); whole records, as a plain file's size is. */
  unsigned long long rest = 0;
  if (!st && cur >= 0 && sizes[cur] < 0 && !cur_ended) {
    st = compressed_drain(files[cur], job->data_path[cur], ULLONG_MAX, &rest);
    if (!st && rest % CIFAR_REC)
      st = ntk_error(NTK_EINPUT, "%s: does not end on a CIFAR-10 record (3073 bytes each: label + 3x32x32 pixels); "
                     "truncated or not CIFAR-10", job->data_path[cur]);
  }
  if (st || all_plain) return st;
  if (job->count && i < job->count)
    return ntk_error(NTK_EINPUT, "%s: %s = %zu but the data hold only %zu samples", held,
                     job->count_key[0] ? job->count_key : "[data] count", job->count, i);
  if (!job->count && i == most) return ntk_error(NTK_EINPUT, "%s: data too large", job->data_path[0]);
  r->n = i;
  void *x = realloc(r->x, i * r->d * (size_t)r->elem); /* give back what the growth took in advance */
  if (x) r->x = x;
  return NTK_OK;
}

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

ntk_data_format ntk_data_guess_format(const char *path) {
  if (ends_with(path, ".npy") || ends_with(path, ".npy.gz")) return NTK_FORMAT_NPY;
  if (ends_with(path, ".bin") || ends_with(path, ".bin.gz")) return NTK_FORMAT_CIFAR10;
  return NTK_FORMAT_IDX;
}

static ntk_status load_one(const struct ntk_job *job, int elem, const struct ntk_data_sink *sink,
                           struct ntk_dataset *ds) {
  memset(ds, 0, sizeof *ds);
  struct raw r;
  memset(&r, 0, sizeof r);
  r.sink = sink;
  r.elem = elem;
  r.samples = 1;
  r.job = job;
  r.bad = SIZE_MAX;
  ntk_data_format fmt = job->format == NTK_FORMAT_AUTO ? ntk_data_guess_format(job->data_path[0]) : job->format;
  if (job->ndata > 1 && fmt != NTK_FORMAT_CIFAR10)
    return ntk_error(NTK_EINPUT, "%s: [data] path lists %d files; several files are only "
                     "supported for CIFAR-10 batches", job->source, job->ndata);
  /* Zeroed: gcc cannot see that ndata >= 1 and warns about files[0]. */
  gzFile files[NTK_MAX_DATA_FILES] = {0};
  long long sizes[NTK_MAX_DATA_FILES];
  struct input ins[NTK_MAX_DATA_FILES];
  int opened = 0;
  ntk_status st = NTK_OK;
  for (; opened < job->ndata; opened++)
    if ((st = open_input(job->data_path[opened], 1u << 20, &files[opened], &sizes[opened], &ins[opened]))) break;
  if (!st) {
    const char *path = job->data_path[0];
    if (fmt == NTK_FORMAT_NPY) st = read_npy(job, path, files[0], sizes[0], &r);
    else if (fmt == NTK_FORMAT_IDX) st = read_idx(job, path, files[0], sizes[0], &r);
    else st = read_cifar(job, files, sizes, job->ndata, &r);
    for (int k = 0; k < opened && !st; k++) st = input_unchanged(job->data_path[k], &ins[k]);
    for (int k = 0; k < opened && !st; k++) st = compressed_tail(job->data_path[k], &ins[k], files[k]);
    if (!st) st = raw_refused(&r, path);
    if (!st) st = raw_flushed(&r, path);
  }
  free(r.flushed);
  for (int k = 0; k < opened; k++) gzclose(files[k]);
  if (st) {
    if (!r.placed) free(r.x);
    return st;
  }
  ds->n = r.n;
  ds->d = r.d;
  ds->h = r.h;
  ds->w = r.w;
  ds->c = r.c;
  ds->one_d = job->layout == NTK_LAYOUT_NLC && r.h; /* read_npy refuses NLC for other than 3-D arrays */
  ds->elem = elem;
  ds->x = r.x;
  return NTK_OK;
}

/* ---- labels ----------------------------------------------------------------- */

/* Through the same header readers and read_values as the samples: a label
 * file is a one-column matrix of integers. */
ntk_status ntk_labels_load(const char *path, size_t n, int exact, size_t classes, int32_t **labels) {
  *labels = NULL;
  gzFile f;
  long long size;
  struct input in;
  ntk_status st = open_input(path, 1u << 16, &f, &size, &in); /* labels are small */
  if (st) return st;
  src_type t = T_U8;
  int big = 1, ndim = 0;
  size_t dim[4] = {0}, one;
  int npy = ntk_data_guess_format(path) == NTK_FORMAT_NPY;
  if (npy) {
    st = npy_read_header(path, f, 1, &t, &big, dim, &ndim);
  } else {
    st = idx_read_header(path, f, &t, dim, &ndim);
    if (!st && (ndim != 1 || t != T_U8))
      st = ntk_error(NTK_EINPUT, "%s: not an IDX labels file (%d dimensions%s; labels have magic 0x00000801: "
                     "one dimension of uint8)", path, ndim, t != T_U8 ? ", not uint8" : "");
  }
  if (!st) st = shape_size(path, npy ? "labels .npy" : "labels IDX", dim, ndim, type_size(t), &one);
  if (!st && dim[0] < n)
    st = ntk_error(NTK_EINPUT, "%s: holds %zu labels for %zu samples", path, dim[0], n);
  if (!st && exact && dim[0] != n)
    st = ntk_error(NTK_EINPUT, "%s: holds %zu labels but the data hold %zu samples; set count to use "
                   "the first ones", path, dim[0], n);
  struct raw r = {.n = n, .d = 1, .elem = 8, .bad = SIZE_MAX}; /* labels as read: doubles, not scaled */
  if (!st) st = alloc_raw(&r, path);
  if (!st) st = read_values(f, path, &r, 0, n, t, big);
  if (!st) st = check_end(f, path, size, dim[0] - n, type_size(t));
  if (!st) st = input_unchanged(path, &in);
  if (!st) st = compressed_tail(path, &in, f);
  gzclose(f);
  int32_t *out = st ? NULL : malloc(n * sizeof *out);
  if (!st && !out) st = ntk_error(NTK_ENOMEM, "%s: out of memory for %zu labels", path, n);
  const double *y = r.x;
  for (size_t i = 0; i < n && !st; i++) {
    if (!(y[i] >= 0 && y[i] < (double)classes))
      st = ntk_error(NTK_EINPUT, "%s: label %zu is %.0f, outside the classes 0..%zu", path, i, y[i],
                     classes - 1);
    else out[i] = (int32_t)y[i];
  }
  free(r.x);
  if (st) {
    free(out);
    return st;
  }
  *labels = out;
  return NTK_OK;
}

/* Sets y's labels in `bits` (limit bits; the labels were read below it,
 * and any other is left out, never written past the bitmap); *max the
 * largest (0 for none). */
static void mark_labels(const int32_t *y, size_t n, uint64_t *bits, size_t limit, size_t *max) {
  *max = 0;
  for (size_t i = 0; i < n; i++) {
    if (y[i] < 0 || (size_t)y[i] >= limit) continue;
    size_t v = (size_t)y[i];
    bits[v / 64] |= (uint64_t)1 << (v % 64);
    if (v > *max) *max = v;
  }
}

static size_t count_bits(const uint64_t *bits, size_t words) {
  size_t c = 0;
  for (size_t w = 0; w < words; w++) c += (size_t)__builtin_popcountll(bits[w]);
  return c;
}

ntk_status ntk_labels_count(const int32_t *y, size_t n, size_t limit, struct ntk_label_counts *out) {
  size_t words = (limit + 63) / 64;
  uint64_t *bits = calloc(words ? words : 1, sizeof *bits);
  if (!bits) return ntk_error(NTK_ENOMEM, "out of memory for counting %zu classes", limit);
  out->n = n;
  mark_labels(y, n, bits, limit, &out->max);
  out->distinct = count_bits(bits, words);
  free(bits);
  return NTK_OK;
}

void ntk_labels_describe(const char *path, const struct ntk_label_counts *c, char *buf, size_t cap) {
  if (!c->n) snprintf(buf, cap, "%s: no labels", path);
  else if (c->distinct == c->max + 1)
    snprintf(buf, cap, "%s: %zu class%s (0..%zu), %zu labels", path, c->distinct, c->distinct == 1 ? "" : "es",
             c->max, c->n);
  else
    snprintf(buf, cap, "%s: %zu class%s in 0..%zu, %zu labels", path, c->distinct, c->distinct == 1 ? "" : "es",
             c->max, c->n);
}

ntk_status ntk_labels_classes(const struct ntk_job *job, const int32_t *ytr, size_t ntr, const int32_t *yte, size_t nte,
                              int say, size_t *classes) {
  size_t limit = job->classes ? job->classes : NTK_LABELS_MAX, words = (limit + 63) / 64;
  uint64_t *bits = calloc(2 * words, sizeof *bits); /* train, then test */
  if (!bits) return ntk_error(NTK_ENOMEM, "out of memory for counting %zu classes", limit);
  struct ntk_label_counts c[2] = {{ntr, 0, 0}, {nte, 0, 0}};
  mark_labels(ytr, ntr, bits, limit, &c[0].max);
  mark_labels(yte, nte, bits + words, limit, &c[1].max);
  c[0].distinct = count_bits(bits, words);
  c[1].distinct = count_bits(bits + words, words);
  for (size_t w = 0; w < words; w++) bits[w] |= bits[words + w];
  size_t both = count_bits(bits, words);
  free(bits);
  for (int f = 0; f < 2 && say; f++) {
    char line[NTK_PATH_MAX + 200];
    ntk_labels_describe(f ? job->test.labels : job->labels_path, &c[f], line, sizeof line);
    if (job->classes) fprintf(stderr, "ntkd: labels: %s; of the %zu [data] classes\n", line, job->classes);
    else fprintf(stderr, "ntkd: labels: %s\n", line);
  }
  if (job->classes) {
    *classes = job->classes;
    return NTK_OK;
  }
  int in_test = c[1].n && c[1].max > c[0].max; /* the file with the largest label */
  size_t max = c[in_test].max, range = max + 1, absent = range - both;
  if (2 * absent > range) {
    const int32_t *y = in_test ? yte : ytr;
    size_t at = 0;
    while (at < c[in_test].n && (size_t)y[at] != max) at++;
    return ntk_error(NTK_ECONFIG, "%s:%d: [%s] labels: %s: label %zu is %zu, and only %zu of the %zu classes 0..%zu "
                     "occur in the train and test labels (%zu never do): a stray label? If the task has %zu classes, "
                     "state it in [data]: classes = %zu", job->source, in_test ? job->test.labels_line : job->labels_line,
                     in_test ? "test" : "data", in_test ? job->test.labels : job->labels_path, at, max, both, range,
                     max, absent, range, range);
  }
  *classes = range < 2 ? 2 : range;
  return NTK_OK;
}

void ntk_data_free(struct ntk_dataset *ds) {
  if (!ds) return;
  free(ds->x);
  ds->x = NULL;
}

ntk_status ntk_data_load(const struct ntk_job *job, int elem, struct ntk_dataset *ds) {
  return load_one(job, elem, NULL, ds);
}

ntk_status ntk_data_load_job(const struct ntk_job *job, int elem, struct ntk_dataset *ds) {
  return ntk_data_load_to(job, elem, NULL, ds);
}

static ntk_status load_with_test(const struct ntk_job *job, int elem, const struct ntk_data_sink *sink,
                                 struct ntk_dataset *ds);

/* A graph's patterns, file `path` (an (N, V, V) .npy, `count` samples, 0
 * all), read for the `n` samples from `what` ([data] or [test]): *out (n x
 * V^2 values, malloc'd), *v its V (the positions the Aggregates see, which
 * the network's plan checks; want, where not 0, the V it must be; hw the
 * samples' own, for the message). Errors name the file. */
static ntk_status load_pattern(const struct ntk_job *job, const char *path, size_t count, size_t n, size_t hw,
                               size_t want, size_t *v, const char *what, int line, int elem, void **out) {
  char key[32];
  snprintf(key, sizeof key, "%s pattern", what);
  *out = NULL;
  struct ntk_job *tj = malloc(sizeof *tj);
  if (!tj) return ntk_error(NTK_ENOMEM, "out of memory");
  *tj = *job; /* its values as they are: an integer pattern is not scaled as uint8 images are */
  tj->ndata = 1;
  snprintf(tj->data_path[0], sizeof tj->data_path[0], "%s", path);
  tj->format = NTK_FORMAT_NPY;
  tj->layout = NTK_LAYOUT_NHWC;
  tj->count = count;
  tj->scale = 1.0;
  tj->has_scale = 1;
  struct ntk_dataset p;
  ntk_status st = load_one(tj, elem, NULL, &p);
  free(tj);
  if (st) { /* "[data] pattern: P.npy: sample 1, feature 11 is NaN" (feature i V + j: entry [i, j]) */
    int dims = strstr(ntk_error_message(), "dimensions") != NULL;
    if (dims) ntk_error(st, "%s (a pattern file is (N, V, V): reshape an (N, H, W, H, W) array to (N, H W, H W))",
                        ntk_error_message());
    return ntk_job_error_at(job, line, key, st);
  }
  *v = want ? want : p.h;
  if (p.n != n || !p.h || p.h != p.w || p.c != 1 || p.h != *v) {
    char got[96], wanted[96];
    if (!p.h) snprintf(got, sizeof got, "(%zu, %zu)", p.n, p.d);
    else if (p.c == 1) snprintf(got, sizeof got, "(%zu, %zu, %zu)", p.n, p.h, p.w);
    else snprintf(got, sizeof got, "(%zu, %zu, %zu, %zu)", p.n, p.h, p.w, p.c);
    if (want) snprintf(wanted, sizeof wanted, "(%zu, %zu, %zu), as the [data] pattern's", n, want, want);
    else snprintf(wanted, sizeof wanted, "(%zu, V, V)", n);
    st = ntk_error(NTK_EINPUT, "%s: the pattern must have shape %s: one V x V matrix per sample, V the positions "
                   "the network's Aggregates see (the samples' %zu, or fewer after a pooling; row-major: reshape an "
                   "(N, H, W, H, W) array to (N, H W, H W)), not %s", path, wanted, hw, got);
    ntk_job_error_at(job, line, key, st);
  }
  if (st) {
    ntk_data_free(&p);
    return st;
  }
  *out = p.x;
  return NTK_OK;
}

/* A sample's shape for messages: "HxWxC (D values)" for images, "vectors
 * of D values" for (N, D) data (whose h, w, c are 0). */
static const char *shape_text(const struct ntk_dataset *s, char *buf, size_t cap) {
  if (s->h && s->w && s->c) snprintf(buf, cap, "%zux%zux%zu (%zu values)", s->h, s->w, s->c, s->d);
  else snprintf(buf, cap, "vectors of %zu values", s->d);
  return buf;
}

/* The patterns of [data] and [test] after each sample's features (struct
 * ntk_dataset's pattern): the rows laid out again in memory of their own. */
static ntk_status attach_patterns(const struct ntk_job *job, int elem, struct ntk_dataset *ds) {
  size_t ntr = job->test.enabled ? ds->n_train : ds->n, nte = ds->n - ntr, hw = ds->h * ds->w, v = 0;
  size_t es = (size_t)elem;
  if (!ds->h)
    return ntk_error(NTK_EINPUT, "%s:%d: [data] pattern: a graph's pattern pairs the positions of (N, L, C) "
                     "sequences or (N, H, W, C) images, and these data are (N, %zu) vectors", job->source,
                     job->pattern_line, ds->d);
  void *pa = NULL, *pb = NULL;
  ntk_status st = load_pattern(job, job->pattern_path, job->count, ntr, hw, 0, &v, "[data]", job->pattern_line, elem,
                               &pa);
  if (!st && v > ((size_t)1 << 16))
    st = ntk_job_error_at(job, job->pattern_line, "[data] pattern",
                          ntk_error(NTK_EINPUT, "%s: %zu positions, above ntkd's 65536 to aggregate",
                                    job->pattern_path, v));
  if (!st && nte)
    st = load_pattern(job, job->test.pattern, job->test.count, nte, hw, v, &v, "[test]", job->test.pattern_line, elem,
                      &pb);
  size_t d = ds->d + v * v, row;
  char *x = NULL;
  if (!st && (__builtin_mul_overflow(ds->n, d * es, &row) || !(x = malloc(row ? row : 1))))
    st = ntk_error(NTK_ENOMEM, "out of memory for %zu samples with their patterns", ds->n);
  if (!st)
    for (size_t i = 0; i < ds->n; i++) {
      const char *p = i < ntr ? (const char *)pa + i * v * v * es : (const char *)pb + (i - ntr) * v * v * es;
      memcpy(x + i * d * es, (const char *)ds->x + i * ds->d * es, ds->d * es);
      memcpy(x + (i * d + ds->d) * es, p, v * v * es);
    }
  free(pa);
  free(pb);
  if (st) return st;
  free(ds->x);
  ds->x = x;
  ds->d = d;
  ds->pattern = v * v;
  return NTK_OK;
}

ntk_status ntk_data_load_to(const struct ntk_job *job, int elem, const struct ntk_data_sink *sink,
                            struct ntk_dataset *ds) {
  ntk_status st = load_with_test(job, elem, job->pattern_path[0] ? NULL : sink, ds);
  if (st || !job->pattern_path[0]) return st;
  if ((st = attach_patterns(job, elem, ds))) ntk_data_free(ds);
  return st;
}

/* [data], and [test] joined after it in memory of their own. */
static ntk_status load_with_test(const struct ntk_job *job, int elem, const struct ntk_data_sink *sink,
                                 struct ntk_dataset *ds) {
  ntk_status st = load_one(job, elem, job->test.enabled ? NULL : sink, ds);
  if (st) return ntk_job_error_at(job, job->data_line, "[data] path", st);
  if (!job->test.enabled) return NTK_OK;
  /* The test set: the same reader with [test]'s files and count. */
  struct ntk_job *tj = malloc(sizeof *tj);
  if (!tj) {
    ntk_data_free(ds);
    return ntk_error(NTK_ENOMEM, "out of memory");
  }
  *tj = *job;
  tj->ndata = job->test.ndata;
  memcpy(tj->data_path, job->test.path, sizeof tj->data_path);
  tj->count = job->test.count;
  snprintf(tj->count_key, sizeof tj->count_key, "[test] count");
  struct ntk_dataset te;
  st = ntk_data_load(tj, elem, &te);
  free(tj);
  if (st) {
    ntk_data_free(ds);
    return ntk_job_error_at(job, job->test.path_line, "[test] path", st);
  }
  if (te.d != ds->d || te.h != ds->h || te.w != ds->w || te.c != ds->c) {
    char a[96], b[96];
    st = ntk_error(NTK_EINPUT, "%s: [test] samples are %s, the [data] samples %s: they must have the same shape",
                   job->test.path[0], shape_text(&te, a, sizeof a), shape_text(ds, b, sizeof b));
    ntk_job_error_at(job, job->test.path_line, "[test] path", st);
  }
  /* Each part passed alloc_raw's bound; checked all the same. */
  size_t row = ds->d * (size_t)elem, all;
  if (!st && (__builtin_add_overflow(ds->n, te.n, &all) || __builtin_mul_overflow(all, row, &all)))
    st = ntk_error(NTK_EINPUT, "%s: [data] and [test] together are too large", job->test.path[0]);
  void *x = st ? NULL : realloc(ds->x, all + 1);
  if (!st && !x) st = ntk_error(NTK_ENOMEM, "out of memory for %zu + %zu samples", ds->n, te.n);
  if (st) {
    ntk_data_free(&te);
    ntk_data_free(ds);
    return st;
  }
  memcpy((char *)x + ds->n * row, te.x, te.n * row);
  ds->x = x;
  ds->n_train = ds->n;
  ds->n += te.n;
  ntk_data_free(&te);
  return NTK_OK;
}
