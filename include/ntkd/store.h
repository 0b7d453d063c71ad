/* The output store: one file holding the compressed tiles of a kernel
 * matrix; it is also the checkpoint. Format: docs/STORE-FORMAT.md.
 * Only the coordinator (rank 0) writes it, holding the writer lock
 * (ntkd/lock.h); `info`, `export`, `verify` and `solve` read it. All
 * functions are rank-local. */
#ifndef NTKD_STORE_H
#define NTKD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "ntkd/status.h"
#include "ntkd/tiling.h"

#define NTK_STORE_VERSION 2
#define NTK_STORE_HEADER_SIZE 4096
#define NTK_STORE_RECORD_HEADER 128
#define NTK_STORE_DESC_MAX 1024
#define NTK_STORE_DAMAGED_LIST 16
#define NTK_STORE_FLAG_TEST_TEST 1u
/* Bounds a header must respect: beyond them sizes overflow 64 bits. */
#define NTK_STORE_MAX_N ((uint64_t)1 << 40)
#define NTK_STORE_MAX_TILE 16384u

struct ntk_store_info {
  uint64_t n, d;       /* samples, input features */
  uint32_t tile;       /* tile edge */
  uint32_t elem;       /* 4 or 8 */
  uint32_t kernels;    /* NTK_KERNEL_* mask */
  uint64_t n_train;    /* regression jobs: samples 0..n_train-1 are the train set,
                          the rest the test set; 0: no split */
  int test_test;       /* with n_train: test x test tiles are computed too */
  uint8_t job_hash[16]; /* XXH3-128 of the job text (ntkd/jobhash.h) */
  char description[NTK_STORE_DESC_MAX]; /* human-readable job summary */
  /* Set by the store when it creates or opens a file: */
  uint8_t store_id[16]; /* random, carried by every record of this store */
  uint32_t align;       /* records start at multiples of this */
};

typedef struct ntk_store ntk_store_t;

/* A stretch of the file that is not part of an intact record. */
struct ntk_store_region {
  uint64_t offset, bytes;
  uint64_t tile;   /* the record's tile when its header was intact, else UINT64_MAX */
  const char *why; /* static text: "record header damaged", "payload checksum mismatch", ... */
};

/* What opening a store found. Damage is everything before the tail that
 * is not an intact record or a region marked dead; the tail is what
 * follows the last intact record. */
struct ntk_store_scan {
  uint64_t records;       /* intact tile records */
  uint64_t duplicates;    /* intact records of a tile that has a newer one */
  uint64_t damaged;       /* tiles with a damaged record and no intact one */
  uint64_t damaged_list[NTK_STORE_DAMAGED_LIST]; /* the first of them */
  uint64_t ndamaged_list;
  uint64_t regions, region_bytes; /* damaged regions before the tail */
  struct ntk_store_region region_list[NTK_STORE_DAMAGED_LIST]; /* the first of them */
  uint64_t dead, dead_bytes; /* regions marked dead by an earlier resume (repaired damage) */
  uint64_t tail_bytes;    /* bytes after the last intact record */
  int tail_damaged;       /* the tail is not what a torn write leaves (it holds a
                             foreign or damaged record, or garbage) */
  int header_damaged;     /* one of the two header copies is damaged */
  int job_text_damaged;   /* the stored job text fails its checksum */
  uint64_t payload_bytes; /* compressed bytes of the indexed tiles */
};

enum {
  NTK_STORE_READ = 0,
  NTK_STORE_CHECK_PAYLOAD = 2, /* verify every payload checksum (and padding) while scanning */
};

/* Create a new, empty store at `path`, replacing any file there; the
 * caller holds the writer lock on `path` (ntkd/lock.h). `job_text` (the canonical job, any
 * length) is kept in the store for the message that refuses another job.
 * Header, job text and a second copy of the header are written to a
 * temporary file, fsynced, renamed into place and the folder fsynced, so
 * `path` is always either the old file or a valid empty store. */
ntk_status ntk_store_create(const char *path, const struct ntk_store_info *info, const char *job_text,
                            ntk_store_t **out);

/* Open an existing store for reading, check its header, and index its
 * records. `flags`: NTK_STORE_* bits. Never writes.
 * Errors: NTK_EINPUT if the file is not a store (or an old format),
 * NTK_ECORRUPT if both header copies are damaged or impossible, NTK_EIO. */
ntk_status ntk_store_open(const char *path, int flags, ntk_store_t **out);

/* Open an existing store of this job to resume it; the caller holds the
 * writer lock and has checked the job hash (ntk_store_open first). Every payload is
 * checked, then the store is repaired before anything is appended: a
 * damaged header copy is rewritten from the other, a damaged job text from
 * `job_text`, each damaged region is marked dead (its tiles are then
 * missing and get recomputed), and the tail is cut. All of it fsynced. */
ntk_status ntk_store_resume(const char *path, const char *job_text, ntk_store_t **out);

/* Close, fsyncing first if writable; accepts NULL. Returns fsync status.
 * The lock stays the caller's. */
ntk_status ntk_store_close(ntk_store_t *s);

/* The tiling a store with header `info` holds: the whole lower triangle,
 * or without test x test only the columns of the train set. */
void ntk_store_tiling_of(const struct ntk_store_info *info, struct ntk_tiling *t);

const struct ntk_store_info *ntk_store_get_info(const ntk_store_t *s);
const struct ntk_tiling *ntk_store_tiling(const ntk_store_t *s);
const struct ntk_store_scan *ntk_store_get_scan(const ntk_store_t *s);
uint64_t ntk_store_tiles_done(const ntk_store_t *s);
int ntk_store_has_tile(const ntk_store_t *s, uint64_t tile);

/* The job text kept in the store ("" if it is damaged). Owned by the store. */
const char *ntk_store_job_text(const ntk_store_t *s);

/* Whether the scan found damage: a damaged region, tile, header copy, job
 * text, or a tail that is not a torn write. What `verify` exits 4 on and
 * what `export` and `solve` refuse. */
int ntk_store_is_damaged(const ntk_store_t *s);

/* Offset of tile `tile`'s intact record (0 if absent): for `info --records`. */
uint64_t ntk_store_record_offset(const ntk_store_t *s, uint64_t tile);

/* Uncompressed payload size of a tile: rows*cols*elem*(number of kernels). */
size_t ntk_store_raw_bytes(const ntk_store_t *s, const struct ntk_tile *t);

/* Append tile `t`'s compressed payload (with its checksum, as computed by
 * the worker) as one record. On a write error the file is cut back to its
 * previous end and NTK_EIO returned; earlier tiles are untouched. */
ntk_status ntk_store_append(ntk_store_t *s, const struct ntk_tile *t, const void *payload, size_t len,
                            uint64_t checksum);

/* Tile `tile`'s values of one kernel (NTK_KERNEL_NNGP or NTK_KERNEL_NTK,
 * which the store must hold): its payload read, checked and decompressed
 * into `raw` (ntk_store_raw_bytes of scratch), that kernel's rows x cols
 * copied to `out`. Errors as ntk_store_read_payload, and the codec's. */
struct ntk_codec;
ntk_status ntk_store_read_kernel(ntk_store_t *s, struct ntk_codec *codec, uint64_t tile, int which, void *raw,
                                 void *out);

/* fdatasync the store. A failure is fatal: the caller must stop (never
 * retry and continue: the kernel may have dropped the dirty pages). */
ntk_status ntk_store_sync(ntk_store_t *s);

/* Read and verify tile `tile`'s compressed payload into a buffer the
 * caller frees. NTK_EINCOMPLETE if absent, NTK_ECORRUPT on checksum error. */
ntk_status ntk_store_read_payload(ntk_store_t *s, uint64_t tile, void **payload, size_t *len);

#endif
