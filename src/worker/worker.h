/* A worker turns tile numbers into compressed, checksummed payloads with a
 * backend, and (under MPI) serves the coordinator's requests. */
#ifndef NTKD_WORKER_H
#define NTKD_WORKER_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "worker/protocol.h"
#include "base/status.h"
#include "store/store.h"
#include "base/tiling.h"


typedef struct ntk_engine ntk_engine_t;

/* Backend context, codec and buffers sized for the largest tile, and the
 * backend's compress_threads compression threads (the environment
 * variable NTKD_COMPRESS_THREADS, 0-64, overrides it). Rank-local. Free
 * with ntk_engine_free (accepts NULL; joins the threads, dropping tiles
 * still queued in them). */
ntk_status ntk_engine_create(const struct ntk_problem *p, const struct ntk_backend_ops *be, int level,
                             const struct ntk_tiling *tiling, ntk_engine_t **out);
void ntk_engine_free(ntk_engine_t *e);

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
 * Rank-local (talks only to rank 0). */
ntk_status ntk_worker_serve(const ntk_comm_t *world, ntk_engine_t *e, const struct ntk_tiling *tiling,
                            ntk_worker_store_t *ws);

#endif
