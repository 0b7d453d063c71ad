/* The coordinator (rank 0): hands out the tiles missing from the store,
 * stores what comes back, reports progress. The only code that knows which
 * tiles are in flight. */
#ifndef NTKD_COORDINATOR_H
#define NTKD_COORDINATOR_H

#include "ntkd/config.h"
#include "ntkd/status.h"
#include "ntkd/store.h"
#include "ntkd/worker.h"

/* Compute every tile missing from `store`. With `solo` (a single process)
 * the coordinator computes the tiles itself; otherwise ranks 1..size-1 are
 * workers serving ntk_worker_serve(). Rank 0 only. Returns NTK_OK when the
 * store is complete, NTK_EINTERRUPTED after a signal (all received tiles
 * stored and synced), or the first error. */
ntk_status ntk_coordinator_run(ntk_store_t *store, ntk_engine_t *solo, const struct ntk_job *job);

#endif
