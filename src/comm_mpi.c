/* MPI behind include/ntkd/comm.h. Waiting is MPI_Iprobe + nanosleep with a
 * growing pause: a blocking receive would spin at 100 % CPU and steal a
 * core from a worker on the same node. Messages above the piece size go as
 * an announcement (total and piece size) followed by the pieces, each
 * under MPI's int count limit. */
#include "ntkd/comm.h"

#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int active, rank, size = 1;

/* Large messages: tag NTK_COMM_TAGS + t announces a message of tag t whose
 * pieces follow with tag 2 * NTK_COMM_TAGS + t. MPI keeps the messages of
 * one sender in order, and a sender sends all pieces before anything else. */
#define TAG_ANNOUNCE(t) (NTK_COMM_TAGS + (t))
#define TAG_PIECE(t) (2 * NTK_COMM_TAGS + (t))
#define IS_ANNOUNCE(t) ((t) >= NTK_COMM_TAGS && (t) < 2 * NTK_COMM_TAGS)

struct announce {
  uint64_t bytes, piece;
};

/* Per source: a message announced (its announcement already received by
 * ntk_comm_poll) whose pieces are still to be received. */
struct pending {
  int tag; /* 0: none */
  int rc;  /* MPI error receiving the announcement */
  struct announce a;
};

static size_t piece_size = (size_t)1 << 30;
static struct pending *pending;
static long fail_send_at, fail_recv_at, sends, recvs; /* test settings */

static int launched_by_mpi(void) {
  const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
    if (getenv(vars[i])) return 1;
  return 0;
}

static ntk_status mpi_fail(int rc, const char *what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return ntk_error(NTK_ECOMM, "MPI %s failed: %.*s", what, len, msg);
}

/* NAME=R:K on rank R: K, else 0. */
static long test_count(const char *name) {
  const char *v = getenv(name);
  int r = -1;
  long k = 0;
  char extra;
  if (!v || sscanf(v, "%d:%ld%c", &r, &k, &extra) != 2 || r != rank || k < 1) return 0;
  return k;
}

static void read_test_settings(void) {
  const char *v = getenv("NTKD_TEST_MPI_PIECE");
  char *end;
  unsigned long long p = v ? strtoull(v, &end, 10) : 0;
  if (v && *end == '\0' && p >= 1 && p <= INT_MAX) piece_size = (size_t)p;
  fail_send_at = test_count("NTKD_TEST_FAIL_SEND");
  fail_recv_at = test_count("NTKD_TEST_FAIL_RECV");
  /* Said aloud, so that one left set by mistake is seen. */
  const char *names[] = {"NTKD_TEST_MPI_PIECE", "NTKD_TEST_FAIL_SEND", "NTKD_TEST_FAIL_RECV"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (rank == 0 && getenv(names[i])) fprintf(stderr, "ntkd: test setting %s=%s\n", names[i], getenv(names[i]));
}

ntk_status ntk_comm_init(int *argc, char ***argv) {
  if (!launched_by_mpi()) return NTK_OK;
  /* Tiles are megabytes. Without single-copy transfers (CMA, often off in
   * containers) Open MPI's shared-memory transport moves them in 32 KiB
   * fragments; 256 KiB fragments made the tile phase of a 10 000-sample
   * Fashion-MNIST job 2.2x faster (2.94 s -> 1.33 s, docs/PERFORMANCE.md).
   * A value set by the user wins. */
  setenv("OMPI_MCA_btl_vader_max_send_size", "262144", 0);
  int rc = MPI_Init(argc, argv);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "init");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  active = 1;
  read_test_settings();
  pending = calloc((size_t)size, sizeof *pending);
  if (!pending) return ntk_error(NTK_ENOMEM, "out of memory");
  return NTK_OK;
}

void ntk_comm_finalize(void) {
  if (active) MPI_Finalize();
  active = 0;
  free(pending);
  pending = NULL;
}

ntk_status ntk_comm_node_gather(const void *mine, size_t bytes, void **all, struct ntk_node_info *node) {
  memset(node, 0, sizeof *node);
  node->size = 1;
  node->first_rank = rank;
  if (gethostname(node->host, sizeof node->host) != 0) snprintf(node->host, sizeof node->host, "?");
  node->host[sizeof node->host - 1] = '\0';
  *all = malloc(bytes ? bytes : 1);
  if (!*all) return ntk_error(NTK_ENOMEM, "out of memory");
  if (bytes) memcpy(*all, mine, bytes);
  if (!active || size == 1) return NTK_OK;
  if (bytes > INT_MAX) return ntk_error(NTK_ECOMM, "a %zu-byte contribution to a node exchange", bytes);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS && len > 0)
    snprintf(node->host, sizeof node->host, "%.*s", len, name);
  /* Keyed by world rank: node order is world-rank order. */
  MPI_Comm comm;
  int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &comm);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "split by node");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm, &node->index);
  MPI_Comm_size(comm, &node->size);
  void *buf = malloc((size_t)node->size * bytes + 1);
  ntk_status st = buf ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory");
  int err = !buf, any = 0;
  /* Every rank of the node takes part in both collectives, also one that
   * failed to allocate (it says so in the first). */
  rc = MPI_Allreduce(&err, &any, 1, MPI_INT, MPI_MAX, comm);
  if (rc != MPI_SUCCESS && !st) st = mpi_fail(rc, "allreduce on a node");
  if (!st && any) st = ntk_error(NTK_ENOMEM, "out of memory on another rank of node %s", node->host);
  if (!st) {
    rc = MPI_Allgather(mine, (int)bytes, MPI_BYTE, buf, (int)bytes, MPI_BYTE, comm);
    if (rc != MPI_SUCCESS) st = mpi_fail(rc, "allgather on a node");
  }
  if (!st) {
    rc = MPI_Allreduce(&rank, &node->first_rank, 1, MPI_INT, MPI_MIN, comm);
    if (rc != MPI_SUCCESS) st = mpi_fail(rc, "allreduce on a node");
  }
  MPI_Comm_free(&comm);
  if (st) {
    free(buf);
    return st;
  }
  free(*all);
  *all = buf;
  return NTK_OK;
}

int ntk_comm_rank(void) { return rank; }
int ntk_comm_size(void) { return size; }
int ntk_comm_active(void) { return active; }

ntk_status ntk_comm_bcast(void *buf, size_t bytes) {
  if (!active || size == 1) return NTK_OK;
  char *p = buf;
  while (bytes) {
    int chunk = bytes > (1u << 30) ? (1 << 30) : (int)bytes;
    int rc = MPI_Bcast(p, chunk, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "broadcast");
    p += chunk;
    bytes -= (size_t)chunk;
  }
  return NTK_OK;
}

/* In chunks of 2^28 values: MPI counts are int. */
static ntk_status sum_in_place(void *buf, size_t n, MPI_Datatype type, size_t elem) {
  if (!active || size == 1) return NTK_OK;
  char *p = buf;
  while (n) {
    int chunk = n > (1u << 28) ? (1 << 28) : (int)n;
    int rc = MPI_Allreduce(MPI_IN_PLACE, p, chunk, type, MPI_SUM, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "allreduce");
    p += (size_t)chunk * elem;
    n -= (size_t)chunk;
  }
  return NTK_OK;
}

ntk_status ntk_comm_sum_floats(float *buf, size_t n) { return sum_in_place(buf, n, MPI_FLOAT, sizeof *buf); }

ntk_status ntk_comm_sum_doubles(double *buf, size_t n) { return sum_in_place(buf, n, MPI_DOUBLE, sizeof *buf); }

#define WAIT_TIMEOUT (-1) /* not an MPI error code: those are >= 0 */
static int wait_request(MPI_Request *req, double timeout);

ntk_status ntk_comm_agree(ntk_status local) {
  if (!active || size == 1) return local;
  int in = (int)local, out = 0;
  /* Non-blocking and waited on with sleeps: ranks may wait here a long
   * time (while rank 0 solves a kernel regression) and must not spin. */
  MPI_Request req;
  int rc = MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req);
  if (rc == MPI_SUCCESS) rc = wait_request(&req, -1);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "allreduce");
  return (ntk_status)out;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Complete a request by testing with short sleeps in between. Blocking
 * MPI_Send/MPI_Recv of a large message busy-wait (sched_yield in a loop when
 * oversubscribed): measured at half a core on rank 0 of a 3-rank job.
 * WAIT_TIMEOUT after `timeout` seconds (< 0: never); the request is then
 * still pending. */
static int wait_request(MPI_Request *req, double timeout) {
  double deadline = timeout < 0 ? 0 : now() + timeout;
  long pause_ns = 10000;
  for (int tries = 0;; tries++) {
    int done = 0;
    int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || done) return rc;
    if (tries < 4) continue;
    if (timeout >= 0 && now() >= deadline) return WAIT_TIMEOUT;
    struct timespec ts = {0, pause_ns};
    nanosleep(&ts, NULL);
    if (pause_ns < 200000) pause_ns *= 2;
  }
}

/* Test settings NTKD_TEST_FAIL_SEND / _RECV: the k-th send or receive of
 * this rank fails with a real MPI error, from an invalid tag. */
static ntk_status injected_failure(int send, int peer, const void *buf, long k) {
  MPI_Request req;
  int rc = send ? MPI_Isend(buf, 0, MPI_BYTE, peer, -7, MPI_COMM_WORLD, &req)
                : MPI_Irecv((void *)buf, 0, MPI_BYTE, peer, -7, MPI_COMM_WORLD, &req);
  if (rc == MPI_SUCCESS) rc = MPI_ERR_TAG;
  char what[64];
  snprintf(what, sizeof what, send ? "send to rank %d" : "receive from rank %d", peer);
  mpi_fail(rc, what);
  return ntk_error(NTK_ECOMM, "%s (NTKD_TEST_FAIL_%s: %s %ld of rank %d)", ntk_error_message(),
                   send ? "SEND" : "RECV", send ? "send" : "receive", k, rank);
}

static ntk_status send_one(const void *buf, size_t bytes, int dest, int tag) {
  MPI_Request req;
  int rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, dest, tag, MPI_COMM_WORLD, &req);
  if (rc == MPI_SUCCESS) rc = wait_request(&req, -1);
  if (rc == MPI_SUCCESS) return NTK_OK;
  char what[64];
  snprintf(what, sizeof what, "send to rank %d", dest);
  return mpi_fail(rc, what);
}

ntk_status ntk_comm_send(int dest, int tag, const void *buf, size_t bytes) {
  if (fail_send_at && ++sends == fail_send_at) return injected_failure(1, dest, buf, sends);
  if (bytes <= piece_size) return send_one(buf, bytes, dest, tag);
  struct announce a = {bytes, piece_size};
  ntk_status st = send_one(&a, sizeof a, dest, TAG_ANNOUNCE(tag));
  for (size_t off = 0; !st && off < bytes; off += piece_size)
    st = send_one((const char *)buf + off, bytes - off < piece_size ? bytes - off : piece_size, dest, TAG_PIECE(tag));
  return st;
}

/* Receive the announcement (probed: it is there) from `source` into pending[source]. */
static void take_announcement(int source, int tag) {
  struct pending *p = &pending[source];
  p->tag = tag - NTK_COMM_TAGS;
  p->rc = MPI_Recv(&p->a, (int)sizeof p->a, MPI_BYTE, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* An announced message from `source` (-1: any) not yet received. */
static int find_pending(int source) {
  for (int r = source < 0 ? 0 : source; r < (source < 0 ? size : source + 1); r++)
    if (pending[r].tag) return r;
  return -1;
}

int ntk_comm_poll(int source, int *from, int *tag, size_t *bytes, double timeout) {
  double deadline = now() + timeout;
  long pause_ns = 20000;
  for (;;) {
    int r = find_pending(source);
    if (r >= 0) {
      *from = r;
      *tag = pending[r].tag;
      *bytes = (size_t)pending[r].a.bytes;
      return 1;
    }
    int flag = 0;
    MPI_Status s;
    MPI_Iprobe(source < 0 ? MPI_ANY_SOURCE : source, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &s);
    if (flag && IS_ANNOUNCE(s.MPI_TAG)) {
      take_announcement(s.MPI_SOURCE, s.MPI_TAG);
      continue;
    }
    if (flag) {
      int count = 0;
      MPI_Get_count(&s, MPI_BYTE, &count);
      *from = s.MPI_SOURCE;
      *tag = s.MPI_TAG;
      *bytes = (size_t)count;
      return 1;
    }
    if (now() >= deadline) return 0;
    struct timespec ts = {0, pause_ns};
    nanosleep(&ts, NULL);
    if (pause_ns < 2000000) pause_ns *= 2;
  }
}

static ntk_status stalled(int source, size_t bytes, double timeout) {
  return ntk_error(NTK_ESTALLED, "nothing arrived from rank %d for %.0f s while receiving a %zu-byte message", source,
                   timeout, bytes);
}

static ntk_status recv_one(int source, int tag, void *buf, size_t bytes, double timeout) {
  if (bytes > INT_MAX) return ntk_error(NTK_ECOMM, "a %zu-byte message from rank %d came unannounced", bytes, source);
  MPI_Request req;
  int rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, source, tag, MPI_COMM_WORLD, &req);
  if (rc == MPI_SUCCESS) rc = wait_request(&req, timeout);
  if (rc == WAIT_TIMEOUT) return stalled(source, bytes, timeout);
  if (rc == MPI_SUCCESS) return NTK_OK;
  char what[64];
  snprintf(what, sizeof what, "receive from rank %d", source);
  return mpi_fail(rc, what);
}

ntk_status ntk_comm_recv_within(int source, int tag, void *buf, size_t bytes, double timeout) {
  if (fail_recv_at && ++recvs == fail_recv_at) return injected_failure(0, source, buf, recvs);
  struct pending *p = &pending[source];
  /* Not announced through ntk_comm_poll: wait for the message itself or
   * for its announcement. */
  double deadline = now() + timeout;
  long pause_ns = 20000;
  while (p->tag != tag) {
    int flag = 0;
    MPI_Status s;
    if (MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, &s) == MPI_SUCCESS && flag)
      return recv_one(source, tag, buf, bytes, timeout);
    if (MPI_Iprobe(source, TAG_ANNOUNCE(tag), MPI_COMM_WORLD, &flag, &s) == MPI_SUCCESS && flag) {
      take_announcement(source, TAG_ANNOUNCE(tag));
      break;
    }
    if (timeout >= 0 && now() >= deadline) return stalled(source, bytes, timeout);
    struct timespec ts = {0, pause_ns};
    nanosleep(&ts, NULL);
    if (pause_ns < 2000000) pause_ns *= 2;
  }
  struct announce a = p->a;
  int rc = p->rc;
  memset(p, 0, sizeof *p);
  if (rc != MPI_SUCCESS) {
    char what[64];
    snprintf(what, sizeof what, "receive from rank %d", source);
    return mpi_fail(rc, what);
  }
  if (a.bytes != bytes || a.piece < 1 || a.piece > INT_MAX)
    return ntk_error(NTK_ECOMM, "rank %d announced a %llu-byte message in %llu-byte pieces, expected %zu bytes",
                     source, (unsigned long long)a.bytes, (unsigned long long)a.piece, bytes);
  ntk_status st = NTK_OK;
  for (size_t off = 0; !st && off < bytes; off += a.piece)
    st = recv_one(source, TAG_PIECE(tag), (char *)buf + off, bytes - off < a.piece ? bytes - off : (size_t)a.piece,
                  timeout);
  return st;
}

ntk_status ntk_comm_recv(int source, int tag, void *buf, size_t bytes) {
  return ntk_comm_recv_within(source, tag, buf, bytes, -1);
}

int ntk_comm_probe(int source, int tag) {
  if (pending[source].tag == tag) return 1;
  int flag = 0;
  MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  if (!flag) MPI_Iprobe(source, TAG_ANNOUNCE(tag), MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  return flag;
}

void ntk_comm_abort(int code) {
  fflush(stdout);
  fflush(stderr);
  if (active) MPI_Abort(MPI_COMM_WORLD, code);
  exit(code);
}
