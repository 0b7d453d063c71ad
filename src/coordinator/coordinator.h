/* The coordinator (rank 0): hands out the tiles missing from the store,
 * stores what comes back, reports progress. The only code that knows which
 * tiles are in flight. */
#ifndef NTKD_COORDINATOR_H
#define NTKD_COORDINATOR_H

#include "comm/comm.h"
#include "job/config.h"
#include "base/status.h"
#include "store/store.h"
#include "worker/worker.h"

/* Compute every tile missing from `store`. With `solo` (a single process)
 * the coordinator computes the tiles itself; otherwise ranks 1..size-1 are
 * workers serving ntk_worker_serve(), worker k kept depth[k] tiles ahead
 * (at least 2; depth may be NULL). Rank 0 only. Returns NTK_OK when the
 * store is complete, NTK_EINTERRUPTED after a signal (all received tiles
 * stored and synced), or the first error (a worker's included, with its
 * status: NTK_ENONFINITE, ...), the other workers stopped cleanly.
 * Does not return when a worker is counted out, because it held tiles and
 * sent nothing for job->worker_timeout seconds (at least 3x the slowest
 * tile; NTK_ESTALLED) or because a message to or from it failed
 * (NTK_ECOMM): such a rank cannot take part in a collective, so once the
 * other workers' tiles are stored and the store synced, this prints the
 * error and ends every rank with ntk_comm_abort(exit code of the first
 * failure), leaving the store open (the process ends; its lock with it).
 * A worker idle while the audit of a resumed store may still give tiles
 * back gets a WAIT every second (worker/protocol.h): the workers end the
 * job when this rank stops answering them, and the audit must not look so. */
ntk_status ntk_coordinator_run(const ntk_comm_t *world, ntk_store_t *store, ntk_engine_t *solo,
                               const struct ntk_job *job, const int *depth);

#endif
