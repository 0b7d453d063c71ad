/* The worker's message loop (worker/worker.h): tiles from rank 0, computed
 * by the engine, their records written into the store where rank 0
 * grants (worker/protocol.h). */
#include "worker/worker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/signals.h"
#include "comm/comm.h"
#include "store/store.h"

/* Rank 0 as this worker waits for it. A worker waits for rank 0 only
 * when rank 0 owes it an answer (worker/protocol.h): holding nothing, for
 * its next tile or the end; or for the grant of a finished tile. One that
 * waits longer than the patience of base/clock.h ([compute]
 * worker_timeout, at least 3x the longest stretch between two messages of
 * rank 0 seen in this run) takes rank 0 for stopped (SIGSTOP, a hung node)
 * and ends the job (exit 9), instead of waiting until the allocation's
 * time limit. The clock starts at rank 0's first message: before it rank
 * 0 reads the data, opens (perhaps scans) the store and sorts the tiles,
 * which no stretch seen yet bounds (a start-up is not watched). A message
 * that arrived while this rank itself did not run (stopped, starved) is
 * found by the next poll before any limit is looked at, and the time it
 * did not run is not rank 0's silence (ntk_not_run: a suspend of the whole
 * job, every rank stopped together, is not a stopped rank 0). */
struct rank0 {
  double timeout;       /* [compute] worker_timeout */
  struct ntk_pace pace; /* rank 0's messages (pace.last 0: none yet) */
  double waiting;       /* since when this worker waits with nothing to do (0: it does not) */
  double turn;          /* when the message loop last looked (ntk_not_run) */
};

static void heard(struct rank0 *z) {
  double now = ntk_now();
  if (z->pace.last > 0)
    ntk_pace_mark(&z->pace, now);
  else
    z->pace.last = now;
  z->waiting = 0;
}

static double rank0_limit(const struct rank0 *z) { return ntk_patience(z->timeout, z->pace.slowest); }

/* Rank 0 did not answer for `waited` seconds, past the limit: say so, once
 * per waiting rank, and end every rank. What the workers wrote is in the
 * file; a rerun's resume finds the records the index does not list yet
 * (docs/STORE-FORMAT.md). */
__attribute__((noreturn)) static void rank0_stalled(const ntk_comm_t *comm, const struct rank0 *z, double waited,
                                                    const char *what) {
  fprintf(stderr, "ntkd: rank %d: waited %.1f s for rank 0 to send %s: rank 0 stopped answering (limit %.1f s: "
          "[compute] worker_timeout, at least 3x the longest stretch between two of its messages); ending the job: "
          "the store keeps every tile written so far; rerun the same command to resume\n",
          ntk_comm_rank(comm), waited, what, rank0_limit(z));
  ntk_comm_abort(ntk_status_exit_code(NTK_ESTALLED));
}

/* Take a waiting CANCEL message, if any. */
static int take_cancel(const ntk_comm_t *comm, struct rank0 *z) {
  if (!ntk_comm_probe(comm, 0, NTK_TAG_CANCEL)) return 0;
  ntk_comm_recv(comm, 0, NTK_TAG_CANCEL, NULL, 0);
  heard(z);
  return 1;
}

/* Report failure `st` (its message recorded) to the coordinator: the
 * status, then the text. */
static ntk_status send_fail(const ntk_comm_t *comm, ntk_status st) {
  unsigned char buf[sizeof(int32_t) + 2048];
  int32_t code = (int32_t)st;
  memcpy(buf, &code, sizeof code);
  int n = snprintf((char *)buf + sizeof code, sizeof buf - sizeof code, "%s", ntk_error_message());
  size_t len = n < 0 ? 0 : (size_t)n < sizeof buf - sizeof code ? (size_t)n : sizeof buf - sizeof code - 1;
  return ntk_comm_send(comm, 0, NTK_TAG_FAIL, buf, sizeof code + len + 1);
}

/* How long a worker whose messages failed waits for the coordinator's
 * acknowledgement before it ends the job itself. The coordinator answers
 * within a poll (0.25 s) unless its disk holds it up. */
#define NTK_ACK_WAIT 60.0

/* A message of this worker failed (`st`, message recorded): it cannot be
 * relied on to serve tiles or to take part in a collective any more. It
 * tells the coordinator, which counts it out, stores what the others still
 * return, syncs and ends every rank (ntk_comm_abort); the coordinator's
 * stop is the acknowledgement, after which this returns `st` (and the rank
 * waits to be ended). Without one (the coordinator cannot be reached) this
 * rank ends the job itself rather than hang. */
static ntk_status comm_failed(const ntk_comm_t *comm, ntk_status st) {
  char msg[2048];
  snprintf(msg, sizeof msg, "%s", ntk_error_message());
  if (!send_fail(comm, st)) {
    double until = ntk_now() + NTK_ACK_WAIT;
    int from, tag;
    size_t bytes;
    while (ntk_now() < until && ntk_comm_poll(comm, 0, &from, &tag, &bytes, until - ntk_now())) {
      uint64_t index = 0;
      if (bytes > sizeof index || ntk_comm_recv(comm, 0, tag, &index, bytes)) break;
      if (tag == NTK_TAG_WORK && bytes == sizeof index && index == NTK_WORK_STOP) return ntk_error(st, "%s", msg);
      /* Work still queued, or a cancel: dropped; the coordinator has counted
       * this rank out, its tiles stay missing for a rerun. */
    }
  }
  fprintf(stderr, "ntkd: rank %d: %s\nntkd: rank %d: the coordinator does not answer: ending the job (rerun to "
          "resume)\n", ntk_comm_rank(comm), msg, ntk_comm_rank(comm));
  ntk_comm_abort(ntk_status_exit_code(st));
}

struct ntk_worker_store {
  ntk_comm_file_t *f;
  struct ntk_store_info info;
  struct ntk_tiling tiling;
  int sync_own; /* on another node than rank 0: sync each record before reporting it */
};

ntk_status ntk_worker_open_store(const char *path, const struct ntk_store_info *info, int sync_own, int direct,
                                 ntk_worker_store_t **out) {
  *out = NULL;
  ntk_worker_store_t *ws = calloc(1, sizeof *ws);
  unsigned char *h = malloc(NTK_STORE_HEADER_SIZE);
  ntk_status st = ws && h ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory");
  if (!st) {
    ws->info = *info;
    ws->sync_own = sync_own;
    ntk_store_tiling_of(info, &ws->tiling);
    st = ntk_comm_file_open(path, direct, &ws->f);
  }
  if (!st) st = ntk_comm_file_read_at(ws->f, 0, h, NTK_STORE_HEADER_SIZE);
  /* The file this rank opened must be the store rank 0 opened (the same
   * path on another node may be another file). */
  if (!st && !ntk_store_header_names(h, info))
    st = ntk_error(NTK_EMISMATCH, "%s: the file this rank opened is not the job's store (another store, or a "
                   "different file at this path on this node)", path);
  free(h);
  if (st) {
    ntk_worker_close_store(ws);
    return st;
  }
  *out = ws;
  return NTK_OK;
}

void ntk_worker_close_store(ntk_worker_store_t *ws) {
  if (!ws) return;
  ntk_comm_file_close(ws->f);
  free(ws);
}

/* A record written in the background (ntk_comm_file_write_start) while the
 * next tile computes: its result, kept taken from the engine, and its
 * grant. On a CPU FC job the write was 5 % of a worker's tiles phase
 * (docs/PERFORMANCE.md). The record is on disk as soon as before, but
 * reported WRITTEN (indexed, counted in the progress) only at the next
 * turn of the loop, after that next tile: so only tiles shorter than this
 * many seconds (compute and compression) go this way, where the write
 * is worth hiding and the report waits little. A kill meanwhile loses
 * nothing written: a resume finds records past the index by its scan
 * (docs/STORE-FORMAT.md). */
#define NTK_BACKGROUND_TILE_MAX 2.0

struct background {
  int on;
  struct ntk_engine_result r;
  struct ntk_store_grant g;
};

/* Tell rank 0 the record of grant g is written (wst: how that went). */
static ntk_status send_written(const ntk_comm_t *comm, const struct ntk_store_grant *g, ntk_status wst) {
  unsigned char msg[sizeof *g + sizeof(int32_t) + 2048];
  int32_t code = (int32_t)wst;
  size_t len = sizeof *g + sizeof code;
  if (wst) {
    int n = snprintf((char *)msg + len, sizeof msg - len, "%s", ntk_error_message());
    len += n < 0 ? 1 : (size_t)n < sizeof msg - len ? (size_t)n + 1 : sizeof msg - len;
    msg[sizeof msg - 1] = '\0';
  }
  memcpy(msg, g, sizeof *g);
  memcpy(msg + sizeof *g, &code, sizeof code);
  return ntk_comm_send(comm, 0, NTK_TAG_WRITTEN, msg, len);
}

/* The background write, if one runs: once done (waiting up to `wait`
 * seconds, < 0 as long as it takes), reported and its buffer given back.
 * A failure of the message is returned. */
static ntk_status finish_background(const ntk_comm_t *comm, ntk_engine_t *e, ntk_worker_store_t *ws,
                                    struct background *bg, double wait) {
  ntk_status wst;
  if (!bg->on || !ntk_comm_file_write_wait(ws->f, wait, &wst)) return NTK_OK;
  bg->on = 0;
  ntk_engine_release(e, &bg->r);
  return send_written(comm, &bg->g, wst);
}

/* Finished tile r: ask rank 0 where its record goes, write it there (and
 * sync it when this rank is on another node), report it written. A short
 * tile's record is written in the background instead (bg), and r is then
 * kept: *kept = 1. A write that fails is reported with its error; rank 0
 * marks the region dead and stops the job (the other tiles are kept). A
 * failure of a message is returned (the caller ends with comm_failed). */
static ntk_status write_tile(const ntk_comm_t *comm, ntk_engine_t *e, ntk_worker_store_t *ws,
                             struct ntk_engine_result *r, struct background *bg, int *kept, struct rank0 *z) {
  ntk_status st = ntk_comm_send(comm, 0, NTK_TAG_RESULT, &r->header, sizeof r->header);
  /* One write at a time: the last one (long done: a tile was computed meanwhile). */
  if (!st) st = finish_background(comm, e, ws, bg, -1);
  struct ntk_store_grant g;
  double asked = ntk_now();
  if (!st) st = ntk_comm_recv_within(comm, 0, NTK_TAG_GRANT, &g, sizeof g, rank0_limit(z));
  if (st == NTK_ESTALLED) {
    char what[64];
    snprintf(what, sizeof what, "the grant for tile %llu", (unsigned long long)r->tile);
    rank0_stalled(comm, z, ntk_now() - asked, what);
  }
  if (st) return st;
  heard(z);
  if (g.offset && (g.tile != r->tile || g.len != r->len || g.checksum != r->checksum || g.codec != r->header.codec ||
                   g.extent != ntk_store_extent(&ws->info, r->len) || g.extent > r->record_cap))
    return ntk_error(NTK_ECOMM, "worker %d: a grant that does not match tile %llu", ntk_comm_rank(comm),
                     (unsigned long long)r->tile);
  ntk_status wst = NTK_OK;
  if (g.offset) { /* else: rank 0 does not want it (stopping after a failure) */
    struct ntk_tile t = ntk_tiling_tile(&ws->tiling, g.tile);
    ntk_store_encode_record(&ws->info, &t, &g, r->record);
    memset(r->record + NTK_STORE_RECORD_HEADER + r->len, 0, (size_t)(g.extent - NTK_STORE_RECORD_HEADER - r->len));
    if (!ws->sync_own && r->header.seconds < NTK_BACKGROUND_TILE_MAX &&
        ntk_comm_file_write_start(ws->f, g.offset, r->record, (size_t)g.extent)) {
      bg->on = 1;
      bg->r = *r;
      bg->g = g;
      *kept = 1;
      return NTK_OK;
    }
    wst = ntk_comm_file_write_at(ws->f, g.offset, r->record, (size_t)g.extent);
    if (!wst && ws->sync_own) wst = ntk_comm_file_sync(ws->f);
  }
  return send_written(comm, &g, wst);
}

/* Finished tile r: its record written (or its failure sent to the
 * coordinator), its buffer freed, or kept while written in the background. */
static ntk_status send_done(const ntk_comm_t *comm, ntk_engine_t *e, struct ntk_engine_result *r, int *told_interrupt,
                            ntk_worker_store_t *ws, struct background *bg, struct rank0 *z) {
  ntk_status st;
  int kept = 0;
  if (r->status) /* message recorded by ntk_engine_take. Keep serving: the coordinator answers with stop. */
    st = send_fail(comm, r->status);
  else
    st = write_tile(comm, e, ws, r, bg, &kept, z);
  if (!kept) ntk_engine_release(e, r);
  if (st) return st;
  if (ntk_stop_requested() && !*told_interrupt) {
    *told_interrupt = 1;
    return ntk_comm_send(comm, 0, NTK_TAG_INTERRUPT, NULL, 0);
  }
  return NTK_OK;
}

/* Hand tile `index` back uncomputed (stopping: our signal, or the
 * coordinator's cancel), first telling the coordinator of our signal, once. */
static ntk_status hand_back(const ntk_comm_t *comm, uint64_t index, int *told_interrupt) {
  if (ntk_stop_requested() && !*told_interrupt) {
    *told_interrupt = 1;
    ntk_status st = ntk_comm_send(comm, 0, NTK_TAG_INTERRUPT, NULL, 0);
    if (st) return st;
  }
  return ntk_comm_send(comm, 0, NTK_TAG_SKIP, &index, sizeof index);
}

/* Tile numbers received and not computed yet, oldest first. */
struct tile_queue {
  uint64_t *v;
  size_t n, cap;
};

static int queue_push(struct tile_queue *q, uint64_t index) {
  if (q->n == q->cap) {
    size_t cap = q->cap ? 2 * q->cap : 8;
    uint64_t *v = realloc(q->v, cap * sizeof *v);
    if (!v) return 0;
    q->v = v;
    q->cap = cap;
  }
  q->v[q->n++] = index;
  return 1;
}

static uint64_t queue_pop(struct tile_queue *q) {
  uint64_t index = q->v[0];
  memmove(q->v, q->v + 1, --q->n * sizeof *q->v);
  return index;
}

/* The loop of ntk_worker_serve; the queue is freed by the caller. MPI
 * stays on this thread: the compression threads only fill buffers that
 * this loop sends, the file's background thread only writes them. Each
 * turn: report the background write once done; send every finished tile;
 * then compute the oldest received tile if a buffer is free (compute_tile
 * runs here while the threads compress and write earlier tiles); else look
 * at messages, waiting up to 1 ms on the pipeline first when tiles are in
 * it. */
static ntk_status serve(const ntk_comm_t *comm, ntk_engine_t *e, const struct ntk_tiling *tiling, struct tile_queue *q,
                        ntk_worker_store_t *ws, struct background *bg, struct rank0 *z) {
  int told_interrupt = 0, cancelled = 0;
  ntk_status st;
  for (;;) {
    int ready = q->n > 0 && ntk_engine_can_submit(e);
    /* A tile in the pipeline goes first: its RESULT is sent before the
     * wait for this write (write_tile waits for it after the send), so
     * rank 0's grant is on its way meanwhile. */
    if (bg->on) {
      if ((st = finish_background(comm, e, ws, bg, ready || ntk_engine_pending(e) ? 0 : 0.001)))
        return comm_failed(comm, st);
      ready = q->n > 0 && ntk_engine_can_submit(e);
    }
    struct ntk_engine_result r;
    for (double wait = ready ? 0 : 0.001; ntk_engine_take(e, wait, &r); wait = 0)
      if ((st = send_done(comm, e, &r, &told_interrupt, ws, bg, z))) return comm_failed(comm, st);
    if (ready) {
      uint64_t index = queue_pop(q);
      /* Stopping (our signal, or the coordinator's cancel): hand queued
       * tiles back uncomputed, so that every rank exits after the tiles
       * already computed. */
      cancelled |= take_cancel(comm, z);
      if (cancelled || ntk_stop_requested()) {
        if ((st = hand_back(comm, index, &told_interrupt))) return comm_failed(comm, st);
        continue;
      }
      struct ntk_tile t = ntk_tiling_tile(tiling, index);
      st = ntk_engine_submit(e, &t);
      /* Our signal seen inside the tile (the problem's stop flag): the
       * tile is dropped and handed back, as those still queued. */
      if (st == NTK_EINTERRUPTED && ntk_stop_requested()) {
        fprintf(stderr, "ntkd: rank %d: %s: the tile is dropped (a rerun computes it)\n", ntk_comm_rank(comm),
                ntk_error_message());
        if ((st = hand_back(comm, index, &told_interrupt))) return comm_failed(comm, st);
        continue;
      }
      /* A failure is reported and the loop goes on: the coordinator
       * answers a failure with stop. */
      if (st && (st = send_fail(comm, st))) return comm_failed(comm, st);
      continue;
    }
    int from, tag;
    size_t bytes;
    /* Idle (nothing in the pipeline or queued): wait for a message, and
     * for rank 0 at most its limit. */
    int idle = !ntk_engine_pending(e) && !q->n && !bg->on;
    if (!idle)
      z->waiting = 0;
    else if (!z->waiting)
      z->waiting = z->turn = ntk_now();
    int got = ntk_comm_poll(comm, 0, &from, &tag, &bytes, idle ? 0.5 : 0);
    double unrun = ntk_not_run(&z->turn, ntk_now());
    if (z->waiting) z->waiting += unrun;
    /* Our signal while idle (waiting for rank 0's check of a resumed
     * store, or for the end): told at once, as a busy worker tells it with
     * its next tile; the job ran on to "done" with exit 0 (a hunt). */
    if (idle && ntk_stop_requested() && !told_interrupt) {
      told_interrupt = 1;
      if ((st = ntk_comm_send(comm, 0, NTK_TAG_INTERRUPT, NULL, 0))) return comm_failed(comm, st);
    }
    if (!got) {
      if (idle && z->pace.last > 0 && ntk_now() - z->waiting > rank0_limit(z))
        rank0_stalled(comm, z, ntk_now() - z->waiting, "this rank's next tile or the end");
      continue;
    }
    if (tag == NTK_TAG_CANCEL) {
      cancelled |= take_cancel(comm, z);
      continue;
    }
    if (tag == NTK_TAG_WAIT && !bytes) { /* rank 0 alive, nothing yet */
      if ((st = ntk_comm_recv(comm, 0, NTK_TAG_WAIT, NULL, 0))) return comm_failed(comm, st);
      heard(z);
      continue;
    }
    uint64_t index;
    if (tag != NTK_TAG_WORK || bytes != sizeof index)
      return comm_failed(comm, ntk_error(NTK_ECOMM, "worker %d: unexpected message (tag %d, %zu bytes)", ntk_comm_rank(comm),
                                   tag, bytes));
    st = ntk_comm_recv(comm, 0, NTK_TAG_WORK, &index, sizeof index);
    if (st) return comm_failed(comm, st);
    heard(z);
    if (index == NTK_WORK_STOP) {
      take_cancel(comm, z); /* one may still be in flight: leave nothing unreceived */
      /* The coordinator stops a worker once every tile it sent is
       * answered (written), so nothing is left here; were anything, it is
       * dropped. */
      if (bg->on) {
        ntk_comm_file_write_wait(ws->f, -1, &st);
        ntk_engine_release(e, &bg->r);
        bg->on = 0;
      }
      while (ntk_engine_take(e, -1, &r)) ntk_engine_release(e, &r);
      return NTK_OK;
    }
    if (index >= tiling->ntiles)
      return comm_failed(comm, ntk_error(NTK_ECOMM, "worker %d: tile %llu out of range", ntk_comm_rank(comm),
                                   (unsigned long long)index));
    cancelled |= take_cancel(comm, z);
    if (cancelled || ntk_stop_requested()) {
      if ((st = hand_back(comm, index, &told_interrupt))) return comm_failed(comm, st);
      continue;
    }
    if (!queue_push(q, index))
      return comm_failed(comm, ntk_error(NTK_ECOMM, "worker %d: out of memory for its tile queue", ntk_comm_rank(comm)));
  }
}

ntk_status ntk_worker_serve(const ntk_comm_t *comm, ntk_engine_t *e, const struct ntk_tiling *tiling,
                            ntk_worker_store_t *ws, double timeout) {
  struct tile_queue q = {0};
  struct background bg = {0};
  struct rank0 z = {.timeout = timeout, .turn = ntk_now()};
  ntk_status st = serve(comm, e, tiling, &q, ws, &bg, &z);
  /* Leaving with a record still being written (a failed message): its
   * buffer is the engine's, so the write ends here. */
  ntk_status wst;
  if (bg.on) ntk_comm_file_write_wait(ws->f, -1, &wst);
  free(q.v);
  return st;
}
