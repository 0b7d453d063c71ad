/* The store's index file, PATH.index (docs/STORE-FORMAT.md, "The index"):
 * where each tile's record is, appended by the job's writer at every sync.
 * Internal to src/store/. */
#ifndef NTKD_STORE_INDEX_H
#define NTKD_STORE_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

struct ntk_index_entry {
  uint64_t tile, offset, len, seq;
};

/* PATH.index into out (cap bytes); 0 if it does not fit. */
int ntk_index_path(const char *store_path, char *out, size_t cap);

/* Replace PATH.index by an index of store `id` holding entries e[0..n) and
 * a sync mark `covered`: written to a temporary file, fsynced, renamed
 * into place, the folder fsynced. *fd (may be NULL) is left open on it for
 * appending. */
ntk_status ntk_index_write(const char *store_path, const uint8_t id[16], const struct ntk_index_entry *e, size_t n,
                           uint64_t covered, int *fd);

/* Append e[0..n) and a sync mark `covered` to the open index, fdatasync. */
ntk_status ntk_index_append(int fd, const char *store_path, const struct ntk_index_entry *e, size_t n,
                            uint64_t covered);

/* What ntk_index_read found. */
enum {
  NTK_INDEX_NONE = 0,    /* no index, or one of another store (a crash while a store was
                            created leaves one): not damage; `why` says which */
  NTK_INDEX_READ = 1,    /* an index of this store: its entries up to its last sync mark */
  NTK_INDEX_DAMAGED = 2, /* not what ntkd writes: damaged header or entries, no sync mark;
                            `why` says what */
  NTK_INDEX_OUTGROWN = 3, /* damaged too: larger than the store can need, so the store was cut
                             short under it (its tiles there are lost) or the index grew garbage */
  NTK_INDEX_BLOCKED = 4,  /* not a regular file (a FIFO, folder, device): not damage, not used,
                             and a run refuses the job until it is removed (job/jobfiles.c) */
};

/* Read PATH.index of store `id`, its header first, then its entries in
 * chunks: *e (free it) the entries up to its last sync mark, *n of them,
 * *covered that mark's. A file larger than the store can need is refused
 * unread: every record takes `align` bytes or more from `first` on, and
 * each gives the index at most three lines (its entry, the sync mark
 * after it, a sync mark that only moves `covered` past it); the store
 * (store_fd) is measured after the index, so that a running job never
 * makes the index look too long. Entries after the last mark are a write
 * cut short and left out, unless an intact line follows a damaged one
 * (damage: a torn append leaves only a damaged end). The verdict
 * (NTK_INDEX_*) in *verdict; NTK_EIO or NTK_ENOMEM on a read error or
 * out of memory (message recorded). */
ntk_status ntk_index_read(const char *store_path, const uint8_t id[16], int store_fd, uint64_t first, uint32_t align,
                          struct ntk_index_entry **e, size_t *n, uint64_t *covered, int *verdict, char *why,
                          size_t cap);

#endif
