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

/* Read PATH.index: 1 with the entries up to its last sync mark (*e, free
 * it) and that mark's `covered` when it is an index of store `id`; 0 when
 * there is none, or it is of another store, or damaged before its first
 * mark (`why` says which). -1 on a read error (message recorded). */
int ntk_index_read(const char *store_path, const uint8_t id[16], struct ntk_index_entry **e, size_t *n,
                   uint64_t *covered, char *why, size_t cap);

#endif
