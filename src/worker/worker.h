/* A worker (rank > 0 of a job): the coordinator's requests served with an
 * engine (worker/engine.h), each tile's record written into the store at
 * the place rank 0 grants (worker/protocol.h). */
#ifndef NTKD_WORKER_H
#define NTKD_WORKER_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "worker/engine.h"
#include "worker/protocol.h"
#include "base/status.h"
#include "store/store.h"
#include "base/tiling.h"


/* The job's store as a worker writes it: its own MPI-IO handle on the
 * file (comm/comm.h), the store's header fields (info, from rank 0), and
 * whether to sync each record itself (sync_own: a rank on another node
 * than rank 0, whose fdatasync does not reach this node's cache), and
 * whether to write with O_DIRECT where possible (direct: [output]
 * direct_io; records are page-aligned, and so are the engine's buffers). The
 * file's header must name the store `info` describes (NTK_EMISMATCH).
 * Rank-local. */
typedef struct ntk_worker_store ntk_worker_store_t;
ntk_status ntk_worker_open_store(const char *path, const struct ntk_store_info *info, int sync_own, int direct,
                                 ntk_worker_store_t **out);
void ntk_worker_close_store(ntk_worker_store_t *ws);

/* The worker's message loop (rank > 0): compute what rank 0 sends until it
 * says stop. Each finished tile is reported (RESULT), rank 0 grants its
 * record a place in the store (GRANT), this rank writes the record there
 * through `ws` and reports it (WRITTEN), so tiles never travel through
 * rank 0. A tile that fails is reported to rank 0 with its status and
 * the loop goes on (rank 0 answers with stop). If a message of this rank
 * fails, it tells rank 0, waits for its stop and returns the error; rank 0
 * then ends the job (ntk_comm_abort) once the others' tiles are stored.
 * Without an answer within a minute this rank ends the job itself.
 * A rank 0 that stops answering while this rank waits for it (its next
 * tile or the end, a grant) for longer than `timeout` ([compute]
 * worker_timeout), and at least 3 times the longest stretch between two
 * of rank 0's messages seen (base/clock.h), ends the job from here: a
 * line saying so, then ntk_comm_abort (exit 9); the tiles written stay in
 * the store for a rerun. Rank-local (talks only to rank 0). */
ntk_status ntk_worker_serve(const ntk_comm_t *world, ntk_engine_t *e, const struct ntk_tiling *tiling,
                            ntk_worker_store_t *ws, double timeout);

#endif
