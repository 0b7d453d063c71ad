/* The in-process pool: tiles computed by several engines at once, one per
 * thread, each on its own device (a CPU engine per core, or a GPU). It is
 * how the library (include/ntkd.h) computes: the same engine as a job's
 * workers (ntk_engine_compute), so a tile computed here equals a job's
 * tile bit for bit. MPI-free; rank-local. */
#ifndef NTKD_POOL_H
#define NTKD_POOL_H

#include <stdint.h>

#include "backend/backend.h"
#include "base/status.h"
#include "base/tiling.h"

typedef struct ntk_pool ntk_pool_t;

/* One engine per entry of `devices` (a backend, and its device for a
 * GPU backend), on problem p (which must outlive the pool), with buffers
 * for tiles of at most `tiling`'s edge. p->stop.flag[0] is the caller's
 * cancel flag (may be NULL); the pool sets each engine's flag[1] (its own)
 * and counter. */
struct ntk_pool_device {
  const struct ntk_backend_ops *backend;
  int device;
};
ntk_status ntk_pool_create(const struct ntk_problem *p, const struct ntk_pool_device *devices, int n,
                           const struct ntk_tiling *tiling, ntk_pool_t **out);
void ntk_pool_free(ntk_pool_t *pool); /* accepts NULL */

/* Called by a pool thread with a finished tile's values (NNGP, then NTK
 * when the problem has it; rows x cols each): distinct threads call it at
 * once for distinct tiles. Never with a tile stopped inside. */
typedef void (*ntk_pool_deliver_fn)(void *arg, const struct ntk_tile *t, const void *vals);
/* Called on the calling thread before the first tile, about ten times a
 * second with the entries computed so far (inside tiles too, as the
 * kernels count them: base/stop.h), and once at the end, also after a stop or a
 * failure (its answer then ignored); non-zero stops the run. */
typedef int (*ntk_pool_progress_fn)(void *arg, uint64_t done, uint64_t total);

/* Compute tiles[0..n) (each computed once, by whichever thread is free)
 * and deliver them. Returns at the first failure (its message recorded
 * on the calling thread; the other threads stop inside their tiles),
 * NTK_EINTERRUPTED when progress asks or the caller's cancel flag
 * becomes non-zero: every thread stops inside its tile soon after (the
 * kernels poll both flags), and a tile stopped inside is not delivered. */
ntk_status ntk_pool_run(ntk_pool_t *pool, const struct ntk_tile *tiles, size_t n, ntk_pool_deliver_fn deliver,
                        void *deliver_arg, ntk_pool_progress_fn progress, void *progress_arg);

#endif
