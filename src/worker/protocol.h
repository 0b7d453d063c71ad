/* The messages between the coordinator (rank 0, coordinator/) and its
 * workers (worker/serve.c), in one place. Every message is sent with
 * ntk_comm_send (comm/comm.h) under one of these tags; a worker's
 * conversation with rank 0, for each tile:
 *
 *   rank 0  -- WORK (tile) ------------->  worker   (kept queued: a pipeline's depth)
 *   rank 0  <- RESULT (result header) ---  worker   the tile is computed and compressed
 *   rank 0  -- GRANT (store grant) ----->  worker   where to write its record
 *   rank 0  <- WRITTEN (grant, status) --  worker   the record is written (and, off rank 0's
 *                                                   node, synced): rank 0 indexes it
 *
 * and otherwise FAIL (a tile failed), SKIP (a queued tile handed back on a
 * stop), INTERRUPT (a worker got a stop signal), CANCEL (rank 0: hand back
 * what is queued), WAIT (rank 0: nothing for you yet, keep waiting), WORK
 * with NTK_WORK_STOP (no more tiles).
 *
 * A worker waits for rank 0 only when it holds nothing (for its next tile
 * or the end) and for a GRANT; rank 0 answers those at once, but for an
 * idle worker kept for the audit of a resumed store, which gets a WAIT
 * every second instead. So a worker that hears nothing for long (the
 * patience of base/clock.h) while it waits knows rank 0 stopped
 * answering (serve.c). */
#ifndef NTKD_PROTOCOL_H
#define NTKD_PROTOCOL_H

#include <stdint.h>

#include "comm/comm.h"
#include "store/store.h" /* struct ntk_store_grant: a GRANT's body */

enum ntk_tag {
  NTK_TAG_WORK = 1,      /* coordinator -> worker: uint64 tile index, or NTK_WORK_STOP */
  NTK_TAG_RESULT = 2,    /* worker -> coordinator: struct ntk_result_header of a finished tile */
  NTK_TAG_FAIL = 3,      /* worker -> coordinator: int32 status, then the error text */
  NTK_TAG_INTERRUPT = 4, /* worker -> coordinator: the worker got a signal */
  NTK_TAG_SKIP = 5,      /* worker -> coordinator: uint64 tile not computed (stopping) */
  NTK_TAG_CANCEL = 6,    /* coordinator -> worker: skip the tiles still queued */
  NTK_TAG_GRANT = 7,     /* coordinator -> worker: struct ntk_store_grant, where to write that tile's
                            record (offset 0: do not write it) */
  NTK_TAG_WRITTEN = 8,   /* worker -> coordinator: the grant, int32 status, then the error text */
  NTK_TAG_WAIT = 9,      /* coordinator -> worker: empty; no tile yet, rank 0 is alive (to an idle worker while the
                            resumed store's audit may still give tiles back) */
};
_Static_assert(NTK_TAG_WAIT < NTK_COMM_TAGS, "tags at and above NTK_COMM_TAGS are the comm layer's");

#define NTK_WORK_STOP UINT64_MAX

/* A RESULT message: a finished tile, whose record the worker writes where
 * rank 0 grants. */
struct ntk_result_header {
  uint64_t tile;
  uint64_t len;      /* payload bytes */
  uint64_t checksum; /* ntk_checksum(payload) */
  double seconds;    /* compute + check + compress time (the work, not waits between) */
  uint64_t codec;    /* NTK_CODEC_* of the payload */
};

#endif
