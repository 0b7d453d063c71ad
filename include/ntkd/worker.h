/* A worker turns tile numbers into compressed, checksummed payloads with a
 * backend, and (under MPI) serves the coordinator's requests. */
#ifndef NTKD_WORKER_H
#define NTKD_WORKER_H

#include <stddef.h>
#include <stdint.h>

#include "ntkd/backend.h"
#include "ntkd/status.h"
#include "ntkd/tiling.h"

/* Fixed-size prefix of a RESULT message; the payload follows. */
struct ntk_result_header {
  uint64_t tile;
  uint64_t len;      /* payload bytes */
  uint64_t checksum; /* ntk_checksum(payload) */
  double seconds;    /* compute + compress time */
};

typedef struct ntk_engine ntk_engine_t;

/* Backend context, codec and buffers sized for the largest tile.
 * Rank-local. Free with ntk_engine_free (accepts NULL). */
ntk_status ntk_engine_create(const struct ntk_problem *p, const struct ntk_backend_ops *be, int level,
                             const struct ntk_tiling *tiling, ntk_engine_t **out);
void ntk_engine_free(ntk_engine_t *e);

/* Compute, check, shuffle, compress and checksum one tile. *payload
 * points into the engine's buffer, valid until the next call. A value that
 * is not finite is NTK_ENONFINITE, naming the first one (NNGP before NTK,
 * global row and column) and the precision to use. */
ntk_status ntk_engine_run(ntk_engine_t *e, const struct ntk_tile *t, const void **payload, size_t *len,
                          uint64_t *checksum);

/* The worker's message loop (rank > 0): compute what rank 0 sends until it
 * says stop. A tile that fails is reported to rank 0 with its status and
 * the loop goes on (rank 0 answers with stop). If a message of this rank
 * fails, it tells rank 0, waits for its stop and returns the error; rank 0
 * then ends the job (ntk_comm_abort) once the others' tiles are stored.
 * Without an answer within a minute this rank ends the job itself.
 * Rank-local (talks only to rank 0). */
ntk_status ntk_worker_serve(ntk_engine_t *e, const struct ntk_tiling *tiling);

#endif
