/* The message layer: process-wide services between the ranks of a job.
 * Only src/comm/comm_mpi.c includes mpi.h; everything else sees these calls.
 * Every call names its communicator (ntk_comm_t, as HPL passes its grid):
 * the job's world, a node's ranks (ntk_comm_split_node), or any other
 * group a caller splits off. Ranks are positions in that communicator.
 * Without an MPI launcher (plain `ntkd job.conf`) MPI is not initialised,
 * and the world has one rank. */
#ifndef NTKD_COMM_H
#define NTKD_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Tags at and above NTK_COMM_TAGS are this layer's own (the pieces of
 * large messages); callers use those below (worker/protocol.h). */
#define NTK_COMM_TAGS 64

typedef struct ntk_comm ntk_comm_t;

/* Collective. Initialises MPI if launched by mpirun/srun; *world is every
 * rank of the job (owned by the layer: never freed by the caller). */
ntk_status ntk_comm_init(int *argc, char ***argv, ntk_comm_t **world);
/* Collective. */
void ntk_comm_finalize(void);
int ntk_comm_rank(const ntk_comm_t *c);
int ntk_comm_size(const ntk_comm_t *c);
int ntk_comm_active(void); /* MPI initialised */
/* This process's rank as its launcher (mpirun, srun) numbers it, read from
 * the environment without starting MPI; 0 when not launched as a rank. */
int ntk_comm_launch_rank(void);

/* Collective over c: the ranks of c that share this rank's node (its
 * memory), in c's rank order, as a new communicator (free it with
 * ntk_comm_free). Test setting NTKD_TEST_NODES=K (environment, read at
 * ntk_comm_init): the ranks of each real node are dealt into K pretend
 * nodes of consecutive world ranks, so the multi-node paths (node leaders,
 * broadcasts between them, one shared window per node) run on one
 * machine. Never set it in production. */
ntk_status ntk_comm_split_node(const ntk_comm_t *c, ntk_comm_t **node);
/* Collective over c: the ranks with the same `color` (>= 0), ordered by
 * rank in c; a rank with color < 0 gets NULL. */
ntk_status ntk_comm_split(const ntk_comm_t *c, int color, ntk_comm_t **out);
/* Collective over c; accepts NULL. Never the world. */
void ntk_comm_free(ntk_comm_t *c);

/* The ranks of this rank's node (those sharing its memory, pretend nodes
 * included), in rank order, which is also their order in the node's GPU
 * placement. */
struct ntk_node_info {
  int index;      /* this rank's position among them */
  int size;       /* how many */
  int first_rank; /* rank in c of the first (0: the coordinator is here) */
  char host[64];  /* MPI's processor name (the host), for messages */
};

/* Collective: every rank contributes `bytes` bytes (`mine`) and gets the
 * contributions of all the ranks of its node, in node order, in a new
 * buffer *all (node->size * bytes; free it), plus its node's details.
 * Without mpirun: a copy of its own. */
ntk_status ntk_comm_node_gather(const ntk_comm_t *c, const void *mine, size_t bytes, void **all,
                                struct ntk_node_info *node);
/* The same, waiting at most `timeout` seconds for the other ranks, as the
 * _within collectives below (NTK_ESTALLED: the caller must end the job).
 * Only the world's exchange can be timed whole: its node communicator is
 * split at start-up, another's is split here, blocking. */
ntk_status ntk_comm_node_gather_within(const ntk_comm_t *c, const void *mine, size_t bytes, void **all,
                                       struct ntk_node_info *node, double timeout);

/* Collective: broadcast `bytes` bytes from rank 0 of c (any size). */
ntk_status ntk_comm_bcast(const ntk_comm_t *c, void *buf, size_t bytes);

/* Collective: buf (n values on every rank) becomes the elementwise sum
 * over ranks, the same on every rank; in place, the caller's buffer. */
ntk_status ntk_comm_sum_floats(const ntk_comm_t *c, float *buf, size_t n);
ntk_status ntk_comm_sum_doubles(const ntk_comm_t *c, double *buf, size_t n);

/* Collective: every rank gets the worst (largest) of the ranks' statuses. */
ntk_status ntk_comm_agree(const ntk_comm_t *c, ntk_status local);

/* The same, but a rank whose own status is an error prints its message
 * first ("ntkd: error: ..." on rank 0 of c, "ntkd: rank R: ..." with its
 * world rank elsewhere), so a failure is reported once, by the rank that
 * saw it. */
ntk_status ntk_comm_agree_report(const ntk_comm_t *c, ntk_status local);

/* The five above, waiting at most `timeout` seconds for the other ranks
 * (< 0: as long as it takes, as above): after it NTK_ESTALLED, saying so,
 * with the operation still pending, so that the caller must end the job
 * (ntk_comm_abort) and never use c again. For loops whose every rank
 * reaches each collective within a known time (a training step): a rank
 * that stopped answering then ends the job instead of holding the others
 * for ever. */
ntk_status ntk_comm_bcast_within(const ntk_comm_t *c, void *buf, size_t bytes, double timeout);
ntk_status ntk_comm_sum_floats_within(const ntk_comm_t *c, float *buf, size_t n, double timeout);
ntk_status ntk_comm_sum_doubles_within(const ntk_comm_t *c, double *buf, size_t n, double timeout);
ntk_status ntk_comm_agree_within(const ntk_comm_t *c, ntk_status local, double timeout);
ntk_status ntk_comm_agree_report_within(const ntk_comm_t *c, ntk_status local, double timeout);

/* A node-shared allocation: `bytes` bytes that every rank of `node`
 * (ntk_comm_split_node) maps at its own address, one copy per node (an
 * MPI-3 shared-memory window). Collective over node. Without MPI, or when
 * the MPI cannot, a private allocation on each rank (still correct:
 * the caller fills each copy the same way). */
typedef struct ntk_comm_shared ntk_comm_shared_t;
ntk_status ntk_comm_shared_alloc(const ntk_comm_t *node, size_t bytes, ntk_comm_shared_t **out, void **base);
/* Collective over the node it was allocated on; accepts NULL. */
void ntk_comm_shared_free(ntk_comm_shared_t *sh);
/* Collective over the node: what every rank of it wrote before is seen by
 * all after (a barrier with a memory fence). */
ntk_status ntk_comm_shared_fence(ntk_comm_shared_t *sh);

/* A file written by this rank alone at offsets it is given (MPI-IO,
 * independent: MPI_File_open on MPI_COMM_SELF; without MPI, POSIX). The
 * store's records from the workers go through it. Rank-local. */
typedef struct ntk_comm_file ntk_comm_file_t;
/* Open an existing file for reading and writing; errors name `path`.
 * `direct`: writes whose offset, length and buffer are multiples of 4 096
 * bytes go through an O_DIRECT descriptor instead (no page-cache copy),
 * where the file system takes it; the others, and all of them where it
 * does not, through MPI-IO. */
ntk_status ntk_comm_file_open(const char *path, int direct, ntk_comm_file_t **out);
ntk_status ntk_comm_file_read_at(ntk_comm_file_t *f, uint64_t off, void *buf, size_t len);
/* All `len` bytes at `off`, or NTK_EIO (disk full said so). */
ntk_status ntk_comm_file_write_at(ntk_comm_file_t *f, uint64_t off, const void *buf, size_t len);
/* Write in the background, on a thread of the file's own, where the
 * write needs no MPI: an O_DIRECT one (offset, length and buffer multiples
 * of 4 096 bytes). 1: started, and `buf` must stay as it is until
 * ntk_comm_file_write_wait says it is done; 0: not started (write with
 * ntk_comm_file_write_at). One at a time: nothing else is done with `f`
 * until its write is waited for. */
int ntk_comm_file_write_start(ntk_comm_file_t *f, uint64_t off, const void *buf, size_t len);
/* The started write: 1 when it is done (*st as ntk_comm_file_write_at
 * would have returned; also 1 with NTK_OK when none was started), 0 when
 * it still runs after `wait` seconds (0: just looks; < 0: as long as it
 * takes). */
int ntk_comm_file_write_wait(ntk_comm_file_t *f, double wait, ntk_status *st);
/* What this rank wrote, on stable storage (MPI_File_sync). */
ntk_status ntk_comm_file_sync(ntk_comm_file_t *f);
/* Accepts NULL; a write still in the background finishes first. */
void ntk_comm_file_close(ntk_comm_file_t *f);

/* Point to point, rank-local. A message may have any size: one above the
 * piece size (1 GiB; MPI counts are int) travels as an announcement and
 * pieces, reassembled by ntk_comm_poll/ntk_comm_recv; callers see one
 * message. Test settings (environment, read at ntk_comm_init):
 *   NTKD_TEST_MPI_PIECE=BYTES  piece size (so a small job exercises the
 *                              pieces; each rank uses its own, the receiver
 *                              follows the sender's announcement);
 *   NTKD_TEST_FAIL_SEND=R:K    the K-th ntk_comm_send of rank R (from 1)
 *                              fails, by an MPI call given an invalid tag;
 *   NTKD_TEST_FAIL_RECV=R:K    the same for the K-th ntk_comm_recv.
 * Never set them in production. */
ntk_status ntk_comm_send(const ntk_comm_t *c, int dest, int tag, const void *buf, size_t bytes);

/* Wait up to `timeout` seconds for a message from `source` (-1: any),
 * sleeping between probes so an idle rank does not spin a core. Returns 1
 * with its source, tag and size when one is there, 0 on timeout. */
int ntk_comm_poll(const ntk_comm_t *c, int source, int *from, int *tag, size_t *bytes, double timeout);

/* Receive the message ntk_comm_poll reported (or wait for it). */
ntk_status ntk_comm_recv(const ntk_comm_t *c, int source, int tag, void *buf, size_t bytes);

/* The same, but NTK_ESTALLED when `timeout` seconds pass without a piece
 * of the message arriving (the sender stopped mid-way). After that error
 * the receive may still be pending: `buf` must stay allocated and the
 * caller must end the job (ntk_comm_abort), not talk to `source` again. */
ntk_status ntk_comm_recv_within(const ntk_comm_t *c, int source, int tag, void *buf, size_t bytes, double timeout);

/* Non-blocking: is a message with `tag` from `source` waiting? */
int ntk_comm_probe(const ntk_comm_t *c, int source, int tag);

/* A BLACS process grid (ScaLAPACK's) of `rows` x `cols` over the ranks of
 * `c`, in row-major order (rank r of c is process (r / cols, r % cols)),
 * built from c itself, not from MPI_COMM_WORLD, as HPL builds its grid
 * from the communicator it is given. rows * cols must be c's size.
 * g->ctxt is the BLACS context for ScaLAPACK's descriptors; release the
 * grid with ntk_comm_blacs_free. Collective over c. */
struct ntk_blacs_grid {
  int ctxt;
  int handle; /* the BLACS system handle of c (-1: BLACS's own world, without mpirun) */
};
ntk_status ntk_comm_blacs_grid(const ntk_comm_t *c, int rows, int cols, struct ntk_blacs_grid *g);
void ntk_comm_blacs_free(const struct ntk_blacs_grid *g);

/* End every rank with exit code `code` (MPI_Abort; mpirun then exits with
 * it), for a failure after which a collective could hang: a rank that
 * stopped answering or whose messages fail. Without MPI: exit(code).
 * Does not return. */
void ntk_comm_abort(int code) __attribute__((noreturn));

#endif
