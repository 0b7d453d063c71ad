/* Dynamic scheduling of tiles over workers. The largest tiles go first and
 * the cheaper diagonal and edge tiles last, so the workers finish together.
 * The next tile is sent before the finished one is written, so a worker
 * never waits for the disk. */
#include "ntkd/coordinator.h"

#include <stdlib.h>
#include <string.h>

#include "ntkd/codec.h"
#include "ntkd/comm.h"
#include "ntkd/progress.h"
#include "ntkd/run.h"

struct sched {
  ntk_store_t *store;
  const struct ntk_tiling *tiling;
  uint64_t *pending;
  uint64_t npending, next;
  struct ntk_progress progress;
  double last_sync, sync_interval;
  ntk_status failure; /* first error: stop handing out work */
  int stopping;       /* signal received */
  double compute_seconds; /* summed over tiles: compute + compress */
};

static const struct ntk_tiling *sort_tiling;

static int by_cost_desc(const void *pa, const void *pb) {
  struct ntk_tile a = ntk_tiling_tile(sort_tiling, *(const uint64_t *)pa);
  struct ntk_tile b = ntk_tiling_tile(sort_tiling, *(const uint64_t *)pb);
  uint64_t ca = a.rows * a.cols / (a.bi == a.bj ? 2 : 1), cb = b.rows * b.cols / (b.bi == b.bj ? 2 : 1);
  if (ca != cb) return ca > cb ? -1 : 1;
  return a.index < b.index ? -1 : a.index > b.index;
}

static ntk_status sched_init(struct sched *s, ntk_store_t *store, const struct ntk_job *job) {
  memset(s, 0, sizeof *s);
  s->store = store;
  s->tiling = ntk_store_tiling(store);
  s->sync_interval = job->sync_interval;
  uint64_t total_pairs = s->tiling->n * (s->tiling->n + 1) / 2, done_pairs = 0;
  s->pending = malloc((size_t)(s->tiling->ntiles ? s->tiling->ntiles : 1) * sizeof *s->pending);
  if (!s->pending) return ntk_error(NTK_ENOMEM, "out of memory");
  for (uint64_t i = 0; i < s->tiling->ntiles; i++) {
    if (!ntk_store_has_tile(store, i)) {
      s->pending[s->npending++] = i;
    } else {
      struct ntk_tile t = ntk_tiling_tile(s->tiling, i);
      done_pairs += ntk_tile_pairs(&t);
    }
  }
  sort_tiling = s->tiling;
  qsort(s->pending, (size_t)s->npending, sizeof *s->pending, by_cost_desc);
  ntk_progress_init(&s->progress, stderr, job->progress_interval, s->tiling->ntiles,
                    ntk_store_tiles_done(store), total_pairs, done_pairs);
  s->last_sync = ntk_now();
  return NTK_OK;
}

/* Store one finished tile; errors stop the scheduling but never lose tiles
 * already written. */
static void sched_store(struct sched *s, const struct ntk_result_header *h, const void *payload) {
  if (s->failure) return;
  if (h->tile >= s->tiling->ntiles || ntk_checksum(payload, (size_t)h->len) != h->checksum) {
    s->failure = ntk_error(NTK_ECOMM, "a tile arrived damaged (checksum mismatch in transit)");
    return;
  }
  struct ntk_tile t = ntk_tiling_tile(s->tiling, h->tile);
  ntk_status st = ntk_store_append(s->store, &t, payload, (size_t)h->len, h->checksum);
  if (st) {
    s->failure = st;
    return;
  }
  ntk_progress_add(&s->progress, ntk_tile_pairs(&t));
  s->compute_seconds += h->seconds;
  double now = ntk_now();
  if (now - s->last_sync >= s->sync_interval) {
    s->last_sync = now;
    if ((st = ntk_store_sync(s->store))) s->failure = st;
  }
}

static int sched_more(const struct sched *s) {
  return !s->failure && !s->stopping && s->next < s->npending;
}

static void check_signal(struct sched *s) {
  if (ntk_stop_requested() && !s->stopping) {
    s->stopping = 1;
    fprintf(stderr, "\nntkd: signal %d: finishing the tiles in flight, then stopping (rerun to resume)\n",
            ntk_stop_requested());
  }
}

static ntk_status run_solo(struct sched *s, ntk_engine_t *e) {
  while (sched_more(s)) {
    struct ntk_tile t = ntk_tiling_tile(s->tiling, s->pending[s->next++]);
    struct ntk_result_header h;
    const void *payload;
    size_t len;
    double t0 = ntk_now();
    ntk_status st = ntk_engine_run(e, &t, &payload, &len, &h.checksum);
    h.seconds = ntk_now() - t0;
    if (st) {
      s->failure = st;
      break;
    }
    h.tile = t.index;
    h.len = len;
    sched_store(s, &h, payload);
    ntk_progress_tick(&s->progress, 0);
    check_signal(s);
  }
  return NTK_OK;
}

/* Tiles queued per worker: while it computes one, the next is already in
 * its inbox, so it never waits for the coordinator between tiles. */
#define NTK_PREFETCH 2

/* Top up worker w's queue, or tell it to stop once its queue is empty and
 * nothing is left to hand out. */
static ntk_status send_next(struct sched *s, int worker, int *inflight, int *active) {
  while (inflight[worker] < NTK_PREFETCH && sched_more(s)) {
    uint64_t index = s->pending[s->next++];
    ntk_status st = ntk_comm_send(worker, NTK_TAG_WORK, &index, sizeof index);
    if (st) return st;
    inflight[worker]++;
  }
  if (inflight[worker] == 0) {
    uint64_t stop = NTK_WORK_STOP;
    (*active)--;
    inflight[worker] = -1; /* stopped */
    return ntk_comm_send(worker, NTK_TAG_WORK, &stop, sizeof stop);
  }
  return NTK_OK;
}

static ntk_status run_mpi(struct sched *s) {
  int nworkers = ntk_comm_size() - 1, active = nworkers;
  int *inflight = calloc((size_t)nworkers + 1, sizeof *inflight);
  if (!inflight) return ntk_error(NTK_ENOMEM, "out of memory");
  ntk_status st = NTK_OK;
  for (int w = 1; w <= nworkers && !st; w++) st = send_next(s, w, inflight, &active);
  size_t cap = 0;
  unsigned char *buf = NULL;
  while (active > 0 && !st) {
    int from, tag;
    size_t bytes;
    check_signal(s);
    if (!ntk_comm_poll(-1, &from, &tag, &bytes, 0.25)) {
      ntk_progress_tick(&s->progress, 0);
      continue;
    }
    if (bytes > cap) {
      free(buf);
      cap = bytes;
      buf = malloc(cap);
      if (!buf) {
        st = ntk_error(NTK_ENOMEM, "coordinator: out of memory for a %zu-byte message", bytes);
        break;
      }
    }
    if ((st = ntk_comm_recv(from, tag, buf, bytes))) break;
    if (tag == NTK_TAG_RESULT) {
      struct ntk_result_header h;
      if (bytes < sizeof h) {
        st = ntk_error(NTK_ECOMM, "short result message from rank %d", from);
        break;
      }
      memcpy(&h, buf, sizeof h);
      if (sizeof h + h.len != bytes) {
        st = ntk_error(NTK_ECOMM, "malformed result message from rank %d", from);
        break;
      }
      inflight[from]--;
      if ((st = send_next(s, from, inflight, &active))) break;
      sched_store(s, &h, buf + sizeof h);
      ntk_progress_tick(&s->progress, 0);
    } else if (tag == NTK_TAG_FAIL) {
      buf[bytes ? bytes - 1 : 0] = '\0';
      if (!s->failure) s->failure = ntk_error(NTK_EINTERNAL, "worker rank %d: %s", from, (char *)buf);
      inflight[from]--;
      if ((st = send_next(s, from, inflight, &active))) break;
    } else if (tag == NTK_TAG_INTERRUPT) {
      if (!s->stopping) {
        s->stopping = 1;
        fprintf(stderr, "\nntkd: worker rank %d was signalled: finishing the tiles in flight, then stopping\n", from);
      }
    } else {
      st = ntk_error(NTK_ECOMM, "unexpected message tag %d from rank %d", tag, from);
    }
  }
  free(buf);
  free(inflight);
  return st;
}

ntk_status ntk_coordinator_run(ntk_store_t *store, ntk_engine_t *solo, const struct ntk_job *job) {
  struct sched s;
  ntk_status st = sched_init(&s, store, job);
  if (st) return st;
  fprintf(stderr, "ntkd: %llu of %llu tiles to compute on %d %s\n", (unsigned long long)s.npending,
          (unsigned long long)s.tiling->ntiles, solo ? 1 : ntk_comm_size() - 1,
          solo || ntk_comm_size() == 2 ? "worker" : "workers");
  st = solo ? run_solo(&s, solo) : run_mpi(&s);
  /* Whatever happened, make what was stored durable. */
  ntk_status sync = ntk_store_sync(store);
  int complete = ntk_store_tiles_done(store) == s.tiling->ntiles;
  ntk_progress_finish(&s.progress, complete ? "done" : s.failure || st ? "failed" : "stopped");
  int nw = solo ? 1 : ntk_comm_size() - 1;
  double wall = ntk_now() - s.progress.start;
  if (wall > 0 && s.progress.pairs_session)
    fprintf(stderr, "ntkd: workers spent %.2f s computing tiles: %.0f%% of %d x %.2f s\n", s.compute_seconds,
            100.0 * s.compute_seconds / (nw * wall), nw, wall);
  free(s.pending);
  if (st) return st;
  if (s.failure) return s.failure;
  if (sync) return sync;
  if (!complete)
    return ntk_error(NTK_EINTERRUPTED, "interrupted with %llu of %llu tiles stored; rerun the same command to resume",
                     (unsigned long long)ntk_store_tiles_done(store), (unsigned long long)s.tiling->ntiles);
  return NTK_OK;
}
