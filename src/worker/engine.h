/* The tile engine: a backend's tile, checked finite, byte-shuffled,
 * compressed and checksummed (or only computed and checked, for callers
 * that keep the values). One per computing thread: a job's worker, the
 * coordinator of a one-process job, each thread of the in-process pool
 * (worker/pool.h). MPI-free. */
#ifndef NTKD_ENGINE_H
#define NTKD_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/status.h"
#include "base/tiling.h"
#include "worker/protocol.h"

typedef struct ntk_engine ntk_engine_t;

/* Backend context, codec and buffers sized for the largest tile, and the
 * backend's compress_threads compression threads, or p->host_threads when
 * that is more (the environment variable NTKD_COMPRESS_THREADS, 0-64,
 * overrides both). `held`: results the caller keeps taken while it
 * submits more (a worker's record being written: 1), each a buffer more.
 * Rank-local. Free
 * with ntk_engine_free (accepts NULL; joins the threads, dropping tiles
 * still queued in them). */
ntk_status ntk_engine_create(const struct ntk_problem *p, const struct ntk_backend_ops *be, int level,
                             const struct ntk_tiling *tiling, int held, ntk_engine_t **out);
void ntk_engine_free(ntk_engine_t *e);

/* The compression threads of one device worker of a node: the cores the
 * node has online, less one per CPU worker on it (each computes on one),
 * shared among its device workers, at most the `allowed` cores this
 * process may run on, and so few that the tile buffers (one per thread
 * and one more, `buffer` bytes each) of its device workers take at most a
 * quarter of the node's `memory` bytes. 0 when there is no device worker
 * or nothing is left (the backend's own number then stands). The
 * coordinator, which mostly waits, is not counted. */
int ntk_engine_host_threads(int online, int allowed, int cpu_workers, int device_workers, double memory,
                            double buffer);

/* Compute one tile and check that every value is finite, without the
 * compression: *vals points at its NNGP values, then (when the engine
 * computes it) its NTK, rows x cols each, row-major, in the engine's
 * buffer until the next call. The in-process pool (worker/pool.h) and
 * the library compute through it; a job's tiles go on through the codec
 * (below). Not while tiles are in the pipeline. */
ntk_status ntk_engine_compute(ntk_engine_t *e, const struct ntk_tile *t, const void **vals);

/* Compute, check, shuffle, compress and checksum one tile: submit, then
 * take (below). *payload points into the engine's buffer, valid until the
 * next call. A value that is not finite is NTK_ENONFINITE, naming the
 * first one (NNGP before NTK, global row and column) and the precision to
 * use. Not while tiles are in the pipeline. */
ntk_status ntk_engine_run(ntk_engine_t *e, const struct ntk_tile *t, const void **payload, size_t *len,
                          uint64_t *checksum);

/* The pipeline (MPI-free; ntk_worker_serve runs it). One thread submits
 * tiles and takes results; with compression threads, the check and the
 * compression of a submitted tile run on them while the caller computes
 * the next one. The bytes of a tile's payload are the same either way
 * (one codec per thread, each tile compressed whole by one). */

/* Compression threads (0: submit also checks and compresses). */
int ntk_engine_threads(const ntk_engine_t *e);
/* Tiles a worker with this engine wants queued at it: the one it computes,
 * one per compression thread, and the next in its inbox. */
int ntk_engine_depth(const ntk_engine_t *e);
/* 1 if a tile buffer is free for ntk_engine_submit. */
int ntk_engine_can_submit(ntk_engine_t *e);
/* Tiles submitted and not yet taken. */
int ntk_engine_pending(ntk_engine_t *e);
/* Compute tile t on the calling thread into a free buffer (the caller
 * checks ntk_engine_can_submit first), then queue it for the check and
 * the compression. A failure of the backend is returned now and nothing is
 * queued. */
ntk_status ntk_engine_submit(ntk_engine_t *e, const struct ntk_tile *t);

struct ntk_engine_result {
  uint64_t tile;
  ntk_status status;   /* of the check and compression; message recorded by take */
  struct ntk_result_header header; /* NTK_OK: tile, len, checksum, seconds */
  unsigned char *record; /* NTK_OK: the record buffer, page-aligned, record_cap bytes: room for the
                            record header, then the payload, then room for the padding */
  size_t record_cap;
  const void *payload; /* NTK_OK: the payload alone (record + NTK_STORE_RECORD_HEADER), len bytes */
  size_t len;
  uint64_t checksum;
  int slot;
};
/* The oldest submitted tile once it is finished: waits up to `wait`
 * seconds (0: just looks; < 0: as long as it takes). 1 with *r filled (a
 * failure's message recorded on the calling thread), 0 if none is
 * finished or none is pending. Results come in submission order; *r stays
 * valid, and its buffer taken, until ntk_engine_release. */
int ntk_engine_take(ntk_engine_t *e, double wait, struct ntk_engine_result *r);
void ntk_engine_release(ntk_engine_t *e, const struct ntk_engine_result *r);

/* Tests: `hook` is called by whichever thread checks and compresses a
 * tile, before it starts on it. */
void ntk_engine_set_hook(ntk_engine_t *e, void (*hook)(void *arg, const struct ntk_tile *t), void *arg);

#endif
