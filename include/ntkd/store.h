/* The output store: one append-only file holding the compressed tiles of a
 * kernel matrix; it is also the checkpoint. Format: docs/STORE-FORMAT.md.
 * Only the coordinator (rank 0) writes it; `info`, `export` and `verify`
 * read it. All functions are rank-local. */
#ifndef NTKD_STORE_H
#define NTKD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "ntkd/status.h"
#include "ntkd/tiling.h"

#define NTK_STORE_HEADER_SIZE 4096
#define NTK_STORE_RECORD_HEADER 64
#define NTK_STORE_DESC_MAX 1024
#define NTK_STORE_DAMAGED_LIST 16
#define NTK_STORE_FLAG_TEST_TEST 1u

struct ntk_store_info {
  uint64_t n, d;       /* samples, input features */
  uint32_t tile;       /* tile edge */
  uint32_t elem;       /* 4 or 8 */
  uint32_t kernels;    /* NTK_KERNEL_* mask */
  uint64_t n_train;    /* regression jobs: samples 0..n_train-1 are the train set,
                          the rest the test set; 0: no split */
  int test_test;       /* with n_train: test x test tiles are computed too */
  uint8_t job_hash[16];
  char description[NTK_STORE_DESC_MAX]; /* human-readable job summary */
};

typedef struct ntk_store ntk_store_t;

/* What opening a store found. */
struct ntk_store_scan {
  uint64_t records;       /* intact records */
  uint64_t duplicates;    /* intact records superseding an earlier one */
  uint64_t damaged;       /* tiles whose only records have a bad payload */
  uint64_t tail_bytes;    /* bytes after the last intact record (torn write, garbage) */
  uint64_t payload_bytes; /* compressed bytes of the indexed tiles */
  uint64_t ndamaged_list;  /* the first damaged tiles (with NTK_STORE_CHECK_PAYLOAD) */
  uint64_t damaged_list[NTK_STORE_DAMAGED_LIST];
};

enum {
  NTK_STORE_READ = 0,
  NTK_STORE_WRITE = 1,         /* open for appending; cuts a torn tail */
  NTK_STORE_CHECK_PAYLOAD = 2, /* verify every payload checksum while scanning */
};

/* Create a new, empty store at `path`, replacing any file there. The header
 * is written to a temporary file, fsynced, renamed into place and the
 * folder fsynced, so `path` is always either the old file or a valid store. */
ntk_status ntk_store_create(const char *path, const struct ntk_store_info *info, ntk_store_t **out);

/* Open an existing store, check its header, and index its records.
 * `flags`: NTK_STORE_* bits. A record with a valid header but a damaged
 * payload (found with NTK_STORE_CHECK_PAYLOAD) leaves its tile missing.
 * Errors: NTK_EINPUT if the file is not a store, NTK_ECORRUPT if its header is damaged
 * NTK_EIO for I/O failures. */
ntk_status ntk_store_open(const char *path, int flags, ntk_store_t **out);

/* Close, fsyncing first if writable; accepts NULL. Returns fsync status. */
ntk_status ntk_store_close(ntk_store_t *s);

/* The tiling a store with header `info` holds: the whole lower triangle,
 * or without test x test only the columns of the train set. */
void ntk_store_tiling_of(const struct ntk_store_info *info, struct ntk_tiling *t);

const struct ntk_store_info *ntk_store_get_info(const ntk_store_t *s);
const struct ntk_tiling *ntk_store_tiling(const ntk_store_t *s);
const struct ntk_store_scan *ntk_store_get_scan(const ntk_store_t *s);
uint64_t ntk_store_tiles_done(const ntk_store_t *s);
int ntk_store_has_tile(const ntk_store_t *s, uint64_t tile);

/* Uncompressed payload size of a tile: rows*cols*elem*(number of kernels). */
size_t ntk_store_raw_bytes(const ntk_store_t *s, const struct ntk_tile *t);

/* Append tile `t`'s compressed payload (with its checksum, as computed by
 * the worker). On a write error the file is cut back to its previous end
 * and NTK_EIO returned; earlier tiles are untouched. */
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
