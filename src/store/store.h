/* The output store: one file holding the compressed tiles of a kernel
 * matrix, and its index PATH.index; together the checkpoint. Format:
 * docs/STORE-FORMAT.md. One job writes it, holding the writer lock
 * (store/lock.h): its rank 0 owns the ntk_store_t, reserves room for each
 * record, indexes and syncs; the record itself is written by rank 0 (one
 * process) or by the worker that computed the tile, at the reserved
 * offset (ntk_store_encode_record). `info`, `export`, `verify` and `solve`
 * read it. All functions are rank-local; reserve, confirm, abandon and
 * sync may be called from two threads. */
#ifndef NTKD_STORE_H
#define NTKD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "base/magic.h"
#include "base/status.h"
#include "base/tiling.h"

#define NTK_STORE_VERSION 2
#define NTK_STORE_HEADER_SIZE NTK_MAGIC_STORE_COPY_B /* copy B starts where copy A ends (base/magic.h) */
#define NTK_STORE_RECORD_HEADER 128
#define NTK_STORE_DESC_MAX 1024
#define NTK_STORE_DAMAGED_LIST 16
#define NTK_STORE_INDEX_DAMAGE_MAX 2048 /* ntk_store_index_damage's sentence, as long as a message */
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
  uint8_t job_hash[16]; /* XXH3-128 of the job text (job/jobhash.h) */
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
  uint64_t unsettled, unsettled_bytes; /* regions past the index's sync mark that are not intact
                                          records: writes still under way (a running job), or cut
                                          short by a kill; not damage (the next resume marks them dead) */
  uint64_t tail_bytes;    /* bytes after the last intact record */
  int tail_damaged;       /* the tail is not what a torn write leaves (it holds a
                             foreign or damaged record, or garbage) */
  int header_damaged;     /* 1: one of the two header copies is damaged; 2: both, the header rebuilt from them */
  int job_text_damaged;   /* the stored job text fails its checksum */
  uint64_t payload_bytes; /* compressed bytes of the indexed tiles */
  /* How the records were found: from the index (index_used: the records
   * below its sync mark `index_covered` taken from it, only the rest
   * scanned, so regions and dead records below it are not counted), or by
   * scanning the whole store (NTK_STORE_FULL_SCAN, or no usable index:
   * index_note says why). */
  int index_used;
  uint64_t index_covered;
  uint64_t index_entries; /* the index's entries below its sync mark (a usable index) */
  uint64_t settled;      /* the index's sync mark the scan used (0: none): past it, what is not
                            an intact record may be a write under way */
  int index_blocked;     /* the index's name holds no regular file: a run refuses the job until it is removed */
  char index_note[320];  /* why no index was used: "no index", "the index is of another store"
                            (neither is damage), or what is wrong with it; "" when it was */
  /* The index is damaged, or what it says disagrees with the store
   * (docs/STORE-FORMAT.md, "The index"): damage, as the store's own. The
   * records are what counts: a resume ignores such an index and writes a
   * fresh one from a scan. index_problem completes "the index (PATH.index) ". */
  int index_damaged;
  char index_problem[480];
  int index_past_end; /* 1: the index names bytes past the store's end: the store may have been
                         cut short, and the tiles there are lost; 2: it is longer than the store
                         can need (cut short, or grown garbage: unread, it cannot tell)
                         (ntk_store_index_damage) */
  uint64_t index_dead;      /* full scan: entries over regions marked dead since the index was written
                               (their tiles are missing; the next run rewrites the index) */
  uint64_t index_corrected; /* the audit: tiles whose record it found elsewhere than the index said */
};

enum {
  NTK_STORE_READ = 0,
  NTK_STORE_CHECK_PAYLOAD = 2, /* verify every payload checksum (and padding) while scanning */
  NTK_STORE_FULL_SCAN = 4,     /* ignore the index: scan every record (verify, info --records) */
};

/* Create a new, empty store at `path`, replacing any file there; the
 * caller holds the writer lock on `path` (store/lock.h). `job_text` (the canonical job, any
 * length) is kept in the store for the message that refuses another job.
 * Header, job text and a second copy of the header are written to a
 * temporary file, fsynced, renamed into place and the folder fsynced, so
 * `path` is always either the old file or a valid empty store. */
ntk_status ntk_store_create(const char *path, const struct ntk_store_info *info, const char *job_text,
                            ntk_store_t **out);

/* Open an existing store for reading, check its header, and index its
 * records: those the index lists below its last sync mark without reading
 * them (each is checked when read: ntk_store_read_payload), the rest by a
 * scan from the mark on. `flags`: NTK_STORE_* bits. Never writes.
 * Errors: NTK_EINPUT if the file is not a store (or an old format),
 * NTK_ECORRUPT if both header copies are damaged or impossible, NTK_EIO. */
ntk_status ntk_store_open(const char *path, int flags, ntk_store_t **out);

/* Open an existing store of this job to resume it; the caller holds the
 * writer lock and has checked the job hash (ntk_store_open first). The
 * index is trusted below its last sync mark; every record after it is
 * read and its payload checked (with no usable index: every record of
 * the store). Then the store is repaired before anything is appended: a
 * damaged header copy is rewritten from the other, a damaged job text from
 * `job_text`, each damaged region is marked dead (its tiles are then
 * missing and get recomputed), the tail is cut, and a fresh index of the
 * result written (so a lost index is rebuilt by this scan). All of it
 * fsynced. */
ntk_status ntk_store_resume(const char *path, const char *job_text, ntk_store_t **out);

/* Close, fsyncing first if writable; accepts NULL. Returns fsync status.
 * The lock stays the caller's. */
ntk_status ntk_store_close(ntk_store_t *s);

/* Close a writable store that holds no record (none stored, none reserved,
 * nothing past its header on disk) and remove it and its index; a store
 * with anything in it is only closed. Sets *removed. For a job refused
 * after creating its store and before its first tile: it leaves no file
 * behind, so that the rerun with the cure is not refused as another job.
 * The lock stays the caller's, who must hold it. */
ntk_status ntk_store_discard(ntk_store_t *s, int *removed);

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
 * what `export` and `solve` refuse. Never on a writer's handle: its resume
 * and audit repaired what they found (a job's own solve reads through it). */
int ntk_store_is_damaged(const ntk_store_t *s);

/* Whether this is a writer's handle (the job that computed or resumed the
 * store), not a reader's (info, verify, export, `ntkd solve`). */
int ntk_store_is_writable(const ntk_store_t *s);

/* Offset of tile `tile`'s intact record (0 if absent): for `info --records`. */
uint64_t ntk_store_record_offset(const ntk_store_t *s, uint64_t tile);

/* Uncompressed payload size of a tile: rows*cols*elem*(number of kernels). */
size_t ntk_store_raw_bytes(const ntk_store_t *s, const struct ntk_tile *t);

/* Write tile `t`'s compressed payload (with its checksum, as computed by
 * the worker) as one record, from this process: reserve, write, confirm.
 * On a write error the partial record is cut (when it is the last one) and
 * NTK_EIO returned; earlier tiles are untouched. */
ntk_status ntk_store_append(ntk_store_t *s, const struct ntk_tile *t, const void *payload, size_t len,
                            uint64_t checksum, int codec);

/* Tile `tile`'s values of one kernel (NTK_KERNEL_NNGP or NTK_KERNEL_NTK,
 * which the store must hold): its payload read, checked and decompressed
 * into `raw` (ntk_store_raw_bytes of scratch), that kernel's rows x cols
 * copied to `out`. Errors as ntk_store_read_payload, and the codec's. */
struct ntk_codec;
ntk_status ntk_store_read_kernel(ntk_store_t *s, struct ntk_codec *codec, uint64_t tile, int which, void *raw,
                                 void *out);

/* After a resume that took records from the index: check every record
 * below the index's sync mark as a full scan would (each payload read and
 * checked), mark each damaged stretch there dead, and drop from the store
 * the tiles whose record is damaged: *tiles (free it) lists them, *n how
 * many, for the caller to compute again. Meant for a thread of its own
 * while the job computes (reserve, confirm and sync may run meanwhile);
 * nothing to do when the resume scanned everything. NTK_EINTERRUPTED on a
 * stop signal, or once `stop` (NULL: none) is set (a worker's signal, which
 * the coordinator hears) (nothing dropped: the next resume checks again). */
ntk_status ntk_store_audit(ntk_store_t *s, const volatile int *stop, uint64_t **tiles, size_t *n);

/* A record's place, reserved by the writer for one tile. */
struct ntk_store_grant {
  uint64_t tile, offset, extent, seq; /* extent: bytes from offset, header + payload + zero padding */
  uint64_t len, checksum;             /* the payload's */
  uint64_t codec;                     /* NTK_CODEC_* (base/codec.h) */
};

/* Reserve room at the end of the store for tile `tile`'s record of a
 * `len`-byte payload with `checksum`: the offset, the extent and the next
 * sequence number. NTK_ECOMM for a tile or a length no worker makes. */
ntk_status ntk_store_reserve(ntk_store_t *s, uint64_t tile, uint64_t len, uint64_t checksum, int codec,
                             struct ntk_store_grant *g);
/* The record of reservation g is written in full: index it (durable at the
 * next ntk_store_sync). NTK_ECOMM if g is not an open reservation. */
ntk_status ntk_store_confirm(ntk_store_t *s, const struct ntk_store_grant *g);
/* Reservation g will never be written in full (its writer failed): its
 * region is marked dead so that scans step over it. */
ntk_status ntk_store_abandon(ntk_store_t *s, const struct ntk_store_grant *g);

/* For the rank that writes a granted record: its 128-byte header, from the
 * store's header fields (info: as ntk_store_get_info on rank 0) and the
 * grant. The record is the header, the payload, then zeros to g->extent. */
void ntk_store_encode_record(const struct ntk_store_info *info, const struct ntk_tile *t,
                             const struct ntk_store_grant *g, unsigned char *rec);
/* Bytes a record of a `len`-byte payload takes (header, payload, padding). */
uint64_t ntk_store_extent(const struct ntk_store_info *info, uint64_t len);
/* 1 if `h` (the file's first NTK_STORE_HEADER_SIZE bytes) is an intact
 * header of the store `info` describes: a writing rank's check that the
 * file it opened is the job's store. */
int ntk_store_header_names(const unsigned char *h, const struct ntk_store_info *info);

/* Make the records confirmed so far durable, then the index entries that
 * name them and a sync mark below which every byte is accounted for (the
 * first open reservation, or the end): fdatasync of the store, an append
 * to PATH.index, fdatasync of it. Records written by ranks on another node
 * must be synced by them first. A failure is fatal: the caller must stop
 * (never retry and continue: the kernel may have dropped the dirty
 * pages). */
ntk_status ntk_store_sync(ntk_store_t *s);

/* The sentence every report of a damaged index says (inspect, verify,
 * export, solve, a store that opens): "the index (PATH.index) PROBLEM;
 * run the job again: the resume rebuilds it from the records (LOSS)",
 * into buf (cap bytes; cut short if longer). LOSS is what the resume
 * loses: "no tile is lost" (the records are all there and a scan finds
 * them), or that the tiles the index places past the store's end are
 * lost (a store cut short) and computed again. Returns buf. */
const char *ntk_store_index_damage(const struct ntk_store_scan *sc, const char *path, char *buf, size_t cap);

/* The writer's last check before its job says it is done (after the last
 * ntk_store_sync): the path still names the file it wrote; every tile it
 * holds is a record of this store, of that tile and sequence number, at
 * the offset it holds (the 128-byte record headers read back); the index
 * on disk names each of them and ends with this writer's last sync mark.
 * NTK_ECORRUPT saying what differs (another writer, or damage). */
ntk_status ntk_store_check_final(ntk_store_t *s);

/* verify: 1 in *intact if tile `tile`'s record is intact (header, payload
 * checksum, zero padding). NTK_EIO on a read error. */
ntk_status ntk_store_check_record(ntk_store_t *s, uint64_t tile, int *intact);

/* Readers through the index (export, solve): the record of tile `tile`
 * that the index lists below its sync mark, checked against the header at
 * its place (what the open did not read). Where a resume has marked it
 * dead since (the index not yet rewritten), the tile is missing: taken out
 * of the store, NTK_OK. NTK_ECORRUPT (message: what is there) when the
 * place holds another record (the index disagrees with the store: damage,
 * also set in the scan) or no intact record. NTK_OK for a tile absent or
 * found by the scan. */
ntk_status ntk_store_check_entry(ntk_store_t *s, uint64_t tile);

/* The same for every entry below the index's sync mark: what a reader
 * runs before it says a tile is missing, so that an index that hides a
 * record is reported as damage (4), not as an unfinished store (6). */
ntk_status ntk_store_check_entries(ntk_store_t *s);

/* The tiles present, ascending, in *tiles (free it): memory and time
 * follow what is stored, not the tile count. */
ntk_status ntk_store_stored_tiles(const ntk_store_t *s, uint64_t **tiles, size_t *n);

/* The block rows [r0, r1) x columns [c0, c1) of kernel `which`
 * (NTK_KERNEL_NNGP or NTK_KERNEL_NTK) into `out`, in the store's precision,
 * row-major with leading dimension `ld` (elements); the upper triangle by
 * symmetry, NaN for test x test tiles a regression store never computes.
 * Reads only the tiles the block touches, each checked. NTK_ECORRUPT for a
 * damaged store, whatever the block; NTK_EINCOMPLETE naming the first
 * tile the block needs that the store lacks; NTK_EUSAGE for a block
 * outside the matrix or a kernel it does not hold. (store/block.c) */
ntk_status ntk_store_read_block(ntk_store_t *s, int which, uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1,
                                void *out, size_t ld);

/* Tile `tile` whole (every kernel it stores) into `raw`
 * (ntk_store_raw_bytes): read, checked, decoded by its record's codec.
 * Errors as ntk_store_read_payload, and the codec's (NTK_ECORRUPT). */
ntk_status ntk_store_read_tile(ntk_store_t *s, struct ntk_codec *codec, uint64_t tile, void *raw);

/* Read and verify tile `tile`'s compressed payload into a buffer the
 * caller frees. NTK_EINCOMPLETE if absent, NTK_ECORRUPT on checksum error. */
ntk_status ntk_store_read_payload(ntk_store_t *s, uint64_t tile, void **payload, size_t *len);

#endif
