/* Dynamic scheduling of tiles over workers. The largest tiles go first and
 * the cheaper diagonal and edge tiles last, so the workers finish together.
 * Under MPI the main thread only receives and hands out work; a writer
 * thread checks, appends and syncs, so a worker never waits for the disk
 * (measured: workers busy 63% -> see docs/PERFORMANCE.md). */
#include "ntkd/coordinator.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ntkd/codec.h"
#include "ntkd/comm.h"
#include "ntkd/progress.h"
#include "ntkd/signals.h"

struct sched {
  ntk_store_t *store;
  const struct ntk_tiling *tiling;
  uint64_t *pending;
  uint64_t npending, next;
  struct ntk_progress progress;
  double last_sync, sync_interval;
  pthread_mutex_t mu;  /* guards failure and failure_msg */
  ntk_status failure;  /* first error: stop handing out work */
  char failure_msg[2048];
  int stopping;        /* signal received (main thread only) */
  double compute_seconds; /* summed over tiles: compute + compress */
  uint64_t *per_worker;    /* tiles each rank returned this run (MPI) */
};

static void set_failure(struct sched *s, ntk_status st) {
  pthread_mutex_lock(&s->mu);
  if (!s->failure) {
    s->failure = st;
    snprintf(s->failure_msg, sizeof s->failure_msg, "%s", ntk_error_message());
  }
  pthread_mutex_unlock(&s->mu);
}

static ntk_status get_failure(struct sched *s) {
  pthread_mutex_lock(&s->mu);
  ntk_status st = s->failure;
  pthread_mutex_unlock(&s->mu);
  return st;
}

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
  pthread_mutex_init(&s->mu, NULL);
  s->store = store;
  s->tiling = ntk_store_tiling(store);
  s->sync_interval = job->sync_interval;
  uint64_t total_pairs = 0, done_pairs = 0;
  s->pending = malloc((size_t)(s->tiling->ntiles ? s->tiling->ntiles : 1) * sizeof *s->pending);
  if (!s->pending) return ntk_error(NTK_ENOMEM, "out of memory");
  for (uint64_t i = 0; i < s->tiling->ntiles; i++) {
    if (!ntk_tiling_needed(s->tiling, i)) continue; /* test x test, not asked for */
    struct ntk_tile t = ntk_tiling_tile(s->tiling, i);
    total_pairs += ntk_tile_pairs(&t);
    if (!ntk_store_has_tile(store, i)) s->pending[s->npending++] = i;
    else done_pairs += ntk_tile_pairs(&t);
  }
  sort_tiling = s->tiling;
  qsort(s->pending, (size_t)s->npending, sizeof *s->pending, by_cost_desc);
  ntk_progress_init(&s->progress, stderr, job->progress_interval, s->tiling->needed,
                    ntk_store_tiles_done(store), total_pairs, done_pairs);
  s->last_sync = ntk_now();
  return NTK_OK;
}

/* Store one finished tile; errors stop the scheduling but never lose tiles
 * already written. Called by the writer thread (or the solo loop). */
static void sched_store(struct sched *s, const struct ntk_result_header *h, const void *payload) {
  if (get_failure(s)) return;
  if (!ntk_tiling_needed(s->tiling, h->tile) || ntk_checksum(payload, (size_t)h->len) != h->checksum) {
    set_failure(s, ntk_error(NTK_ECOMM, "a tile arrived damaged (checksum mismatch in transit)"));
    return;
  }
  struct ntk_tile t = ntk_tiling_tile(s->tiling, h->tile);
  ntk_status st = ntk_store_append(s->store, &t, payload, (size_t)h->len, h->checksum);
  if (st) {
    set_failure(s, st);
    return;
  }
  ntk_progress_add(&s->progress, ntk_tile_pairs(&t));
  s->compute_seconds += h->seconds;
  double now = ntk_now();
  if (now - s->last_sync >= s->sync_interval) {
    s->last_sync = now;
    if ((st = ntk_store_sync(s->store))) set_failure(s, st);
  }
}

/* ---- the writer thread ---------------------------------------------------- */

#define NTK_WRITE_QUEUE 4

struct writer {
  struct sched *s;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t nonempty, nonfull;
  unsigned char *items[NTK_WRITE_QUEUE]; /* result header + payload, owned */
  int head, count, closing;
};

static void *writer_main(void *arg) {
  struct writer *w = arg;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    while (w->count == 0 && !w->closing) {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_nsec += 250000000;
      if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
      }
      if (pthread_cond_timedwait(&w->nonempty, &w->mu, &until) == ETIMEDOUT) {
        pthread_mutex_unlock(&w->mu);
        ntk_progress_tick(&w->s->progress, 0);
        pthread_mutex_lock(&w->mu);
      }
    }
    if (w->count == 0) { /* closing and drained */
      pthread_mutex_unlock(&w->mu);
      return NULL;
    }
    unsigned char *item = w->items[w->head];
    w->head = (w->head + 1) % NTK_WRITE_QUEUE;
    w->count--;
    pthread_cond_signal(&w->nonfull);
    pthread_mutex_unlock(&w->mu);
    struct ntk_result_header h;
    memcpy(&h, item, sizeof h);
    sched_store(w->s, &h, item + sizeof h);
    free(item);
    ntk_progress_tick(&w->s->progress, 0);
  }
}

/* Hand a received result to the writer; blocks while its queue is full. */
static void writer_push(struct writer *w, unsigned char *item) {
  pthread_mutex_lock(&w->mu);
  while (w->count == NTK_WRITE_QUEUE) pthread_cond_wait(&w->nonfull, &w->mu);
  w->items[(w->head + w->count) % NTK_WRITE_QUEUE] = item;
  w->count++;
  pthread_cond_signal(&w->nonempty);
  pthread_mutex_unlock(&w->mu);
}

static ntk_status writer_start(struct writer *w, struct sched *s) {
  memset(w, 0, sizeof *w);
  w->s = s;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->nonempty, NULL);
  pthread_cond_init(&w->nonfull, NULL);
  if (pthread_create(&w->thread, NULL, writer_main, w))
    return ntk_error(NTK_EINTERNAL, "cannot start the writer thread");
  return NTK_OK;
}

/* Drain the queue and stop the thread. */
static void writer_stop(struct writer *w) {
  pthread_mutex_lock(&w->mu);
  w->closing = 1;
  pthread_cond_signal(&w->nonempty);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->nonempty);
  pthread_cond_destroy(&w->nonfull);
}

static int sched_more(struct sched *s) {
  return !s->stopping && s->next < s->npending && !get_failure(s);
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
      set_failure(s, st);
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
  s->per_worker = calloc((size_t)nworkers + 1, sizeof *s->per_worker);
  if (!inflight || !s->per_worker) {
    free(inflight);
    return ntk_error(NTK_ENOMEM, "out of memory");
  }
  struct writer w;
  ntk_status st = writer_start(&w, s);
  if (st) {
    free(inflight);
    return st;
  }
  for (int k = 1; k <= nworkers && !st; k++) st = send_next(s, k, inflight, &active);
  int cancelled = 0;
  while (active > 0 && !st) {
    int from, tag;
    size_t bytes;
    check_signal(s);
    if ((s->stopping || get_failure(s)) && !cancelled) {
      /* Workers hand back their queued tiles instead of computing them. */
      cancelled = 1;
      for (int k = 1; k <= nworkers && !st; k++)
        if (inflight[k] > 0) st = ntk_comm_send(k, NTK_TAG_CANCEL, NULL, 0);
      if (st) break;
    }
    if (!ntk_comm_poll(-1, &from, &tag, &bytes, 0.25)) continue;
    unsigned char *buf = malloc(bytes ? bytes : 1);
    if (!buf) {
      st = ntk_error(NTK_ENOMEM, "coordinator: out of memory for a %zu-byte message", bytes);
      break;
    }
    if ((st = ntk_comm_recv(from, tag, buf, bytes))) {
      free(buf);
      break;
    }
    if (tag == NTK_TAG_RESULT) {
      struct ntk_result_header h;
      if (bytes < sizeof h || (memcpy(&h, buf, sizeof h), sizeof h + h.len != bytes)) {
        free(buf);
        st = ntk_error(NTK_ECOMM, "malformed result message from rank %d", from);
        break;
      }
      inflight[from]--;
      s->per_worker[from]++;
      /* Top the worker's queue up first, then hand the tile to the writer. */
      if ((st = send_next(s, from, inflight, &active))) {
        free(buf);
        break;
      }
      writer_push(&w, buf);
      continue;
    }
    if (tag == NTK_TAG_FAIL) {
      buf[bytes ? bytes - 1 : 0] = '\0';
      set_failure(s, ntk_error(NTK_EINTERNAL, "worker rank %d: %s", from, (char *)buf));
      inflight[from]--;
      st = send_next(s, from, inflight, &active);
    } else if (tag == NTK_TAG_SKIP) {
      inflight[from]--; /* the tile stays missing: a rerun computes it */
      st = send_next(s, from, inflight, &active);
    } else if (tag == NTK_TAG_INTERRUPT) {
      if (!s->stopping) {
        s->stopping = 1;
        fprintf(stderr, "\nntkd: worker rank %d was signalled: finishing the tiles in flight, then stopping\n", from);
      }
    } else {
      st = ntk_error(NTK_ECOMM, "unexpected message tag %d from rank %d", tag, from);
    }
    free(buf);
  }
  writer_stop(&w);
  free(inflight);
  return st;
}

/* Tiles per worker rank: scheduling is on demand, so faster workers (GPUs)
 * return more. All ranks up to 16 workers, else the extremes. */
static void print_per_worker(const uint64_t *count, int nw) {
  if (nw <= 16) {
    fprintf(stderr, "ntkd: tiles per worker:");
    for (int k = 1; k <= nw; k++) fprintf(stderr, "%s rank %d: %llu", k > 1 ? "," : "", k, (unsigned long long)count[k]);
    fprintf(stderr, "\n");
    return;
  }
  int lo = 1, hi = 1;
  for (int k = 2; k <= nw; k++) {
    if (count[k] < count[lo]) lo = k;
    if (count[k] > count[hi]) hi = k;
  }
  fprintf(stderr, "ntkd: tiles per worker: fewest %llu (rank %d), most %llu (rank %d), %d workers\n",
          (unsigned long long)count[lo], lo, (unsigned long long)count[hi], hi, nw);
}

ntk_status ntk_coordinator_run(ntk_store_t *store, ntk_engine_t *solo, const struct ntk_job *job) {
  struct sched s;
  ntk_status st = sched_init(&s, store, job);
  if (st) return st;
  fprintf(stderr, "ntkd: %llu of %llu tiles to compute on %d %s\n", (unsigned long long)s.npending,
          (unsigned long long)s.tiling->needed, solo ? 1 : ntk_comm_size() - 1,
          solo || ntk_comm_size() == 2 ? "worker" : "workers");
  st = solo ? run_solo(&s, solo) : run_mpi(&s);
  /* Whatever happened, make what was stored durable. */
  ntk_status sync = ntk_store_sync(store);
  int complete = ntk_store_tiles_done(store) == s.tiling->needed;
  ntk_progress_finish(&s.progress, complete ? "done" : s.failure || st ? "failed" : "stopped");
  int nw = solo ? 1 : ntk_comm_size() - 1;
  double wall = ntk_now() - s.progress.start;
  if (wall > 0 && s.progress.pairs_session)
    fprintf(stderr, "ntkd: workers spent %.2f s computing tiles: %.0f%% of %d x %.2f s\n", s.compute_seconds,
            100.0 * s.compute_seconds / (nw * wall), nw, wall);
  if (s.per_worker && nw > 1) print_per_worker(s.per_worker, nw);
  free(s.per_worker);
  free(s.pending);
  pthread_mutex_destroy(&s.mu);
  if (st) return st;
  if (s.failure) return ntk_error(s.failure, "%s", s.failure_msg);
  if (sync) return sync;
  if (!complete)
    return ntk_error(NTK_EINTERRUPTED, "interrupted with %llu of %llu tiles stored; rerun the same command to resume",
                     (unsigned long long)ntk_store_tiles_done(store), (unsigned long long)s.tiling->needed);
  return NTK_OK;
}
