/* The message layer between coordinator and workers. Only src/comm_mpi.c
 * includes mpi.h; everything else sees these calls. Without an MPI launcher
 * (plain `ntkd job.conf`) MPI is not initialised and size is 1. */
#ifndef NTKD_COMM_H
#define NTKD_COMM_H

#include <stddef.h>

#include "ntkd/status.h"

enum ntk_tag {
  NTK_TAG_WORK = 1,      /* coordinator -> worker: uint64 tile index, or NTK_WORK_STOP */
  NTK_TAG_RESULT = 2,    /* worker -> coordinator: struct ntk_result_header + payload */
  NTK_TAG_FAIL = 3,      /* worker -> coordinator: error text */
  NTK_TAG_INTERRUPT = 4, /* worker -> coordinator: the worker got a signal */
  NTK_TAG_SKIP = 5,      /* worker -> coordinator: uint64 tile not computed (stopping) */
  NTK_TAG_CANCEL = 6,    /* coordinator -> worker: skip the tiles still queued */
};

#define NTK_WORK_STOP UINT64_MAX

/* Collective. Initialises MPI if launched by mpirun/srun. */
ntk_status ntk_comm_init(int *argc, char ***argv);
/* Collective. */
void ntk_comm_finalize(void);
int ntk_comm_rank(void);
int ntk_comm_size(void);
int ntk_comm_active(void); /* MPI initialised */

/* Collective: this rank's index among the ranks of its node that compute
 * tiles (-1 for rank 0 of a multi-rank job, which coordinates) and how
 * many of them the node has. Without mpirun: 0 and 1. */
ntk_status ntk_comm_node_slot(int *slot, int *count);

/* Collective: broadcast `bytes` bytes from rank 0 (any size). */
ntk_status ntk_comm_bcast(void *buf, size_t bytes);

/* Collective: buf (n values on every rank) becomes the elementwise sum
 * over ranks, the same on every rank; in place, the caller's buffer. */
ntk_status ntk_comm_sum_floats(float *buf, size_t n);
ntk_status ntk_comm_sum_doubles(double *buf, size_t n);

/* Collective: every rank gets the worst (largest) of the ranks' statuses. */
ntk_status ntk_comm_agree(ntk_status local);

/* Point to point, rank-local. */
ntk_status ntk_comm_send(int dest, int tag, const void *buf, size_t bytes);

/* Wait up to `timeout` seconds for a message from `source` (-1: any),
 * sleeping between probes so an idle rank does not spin a core. Returns 1
 * with its source, tag and size when one is there, 0 on timeout. */
int ntk_comm_poll(int source, int *from, int *tag, size_t *bytes, double timeout);

ntk_status ntk_comm_recv(int source, int tag, void *buf, size_t bytes);

/* Non-blocking: is a message with `tag` from `source` waiting? */
int ntk_comm_probe(int source, int tag);

/* Abort every rank (after a failure the others cannot learn about). */
void ntk_comm_abort(int code);

#endif
