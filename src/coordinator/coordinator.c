/* Dynamic scheduling of tiles over workers. The largest tiles go first and
 * the cheaper diagonal and edge tiles last, so the workers finish together.
 * Under MPI the main thread hands out work and grants each finished tile a
 * place in the store; the worker writes the record there itself and says
 * so, and the main thread indexes it. A sync thread makes records and index
 * durable every sync interval, so nobody waits for the disk. The main
 * thread also watches the workers: one that stops answering, or whose
 * messages fail, is counted out, and once the others' tiles are stored and
 * synced every rank is ended (a collective with it would hang). After a
 * resume from the index an audit thread checks the records the index
 * vouched for, and the tiles it finds damaged are computed again. */
#include "coordinator/coordinator.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/codec.h"
#include "comm/comm.h"
#include "base/clock.h"
#include "coordinator/progress.h"
#include "base/signals.h"
#include "worker/protocol.h"

struct sched {
  const ntk_comm_t *comm; /* the job's ranks: 0 coordinates, the others compute */
  ntk_store_t *store;
  const struct ntk_tiling *tiling;
  uint64_t *pending;
  uint64_t npending, next;
  struct ntk_progress progress;
  double last_sync, sync_interval;
  int dirty;           /* stored since the last sync (under mu) */
  int store_failed;    /* an append or sync failed: store nothing more (under mu) */
  pthread_mutex_t mu;  /* guards failure and failure_msg, dirty, store_failed, the audit's results */
  ntk_status failure;  /* first error: stop handing out work */
  char failure_msg[2048];
  int stopping;        /* signal received, here or by a worker (main thread only) */
  volatile int worker_stopped; /* a worker's signal: also stops the audit (its thread reads it) */
  int signalled;       /* this process's own stop signal seen and said (main thread only) */
  double compute_seconds; /* summed over tiles: compute + compress */
  uint64_t tiles_returned; /* tiles the workers returned this run (compute_seconds is theirs) */
  uint64_t *per_worker;    /* tiles each rank returned this run (MPI) */
  /* Main thread, MPI: */
  double worker_timeout;   /* [compute] worker_timeout */
  double slowest;          /* longest compute + compress time of a tile this run */
  int lost;                /* workers counted out: the job must end with ntk_comm_abort */
  /* The audit (ntk_store_audit) of a resume from the index: */
  pthread_t audit_thread;
  int auditing;            /* the thread runs or has not been joined (main thread) */
  int audit_done;          /* under mu */
  int audit_unfinished;    /* it stopped early (a stop request): the store is not known intact */
  double audit_began;      /* ntk_now() at its start */
  ntk_status audit_st;
  char audit_msg[2048];
  uint64_t *audit_tiles;
  size_t naudit;
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

static uint64_t tile_cost(const struct ntk_tile *t) { return t->rows * t->cols / (t->bi == t->bj ? 2 : 1); }

static int by_cost_desc(const void *pa, const void *pb) {
  struct ntk_tile a = ntk_tiling_tile(sort_tiling, *(const uint64_t *)pa);
  struct ntk_tile b = ntk_tiling_tile(sort_tiling, *(const uint64_t *)pb);
  uint64_t ca = tile_cost(&a), cb = tile_cost(&b);
  if (ca != cb) return ca > cb ? -1 : 1;
  return a.index < b.index ? -1 : a.index > b.index;
}

static int u64_desc(const void *pa, const void *pb) {
  uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
  return a > b ? -1 : a < b;
}

/* The pending tiles' costs, classed as sched_init finds them: they take a
 * handful of values (full, diagonal and edge tiles), so a counting sort by
 * class places them without decoding a tile again (qsort decoded two tiles
 * a comparison: 14 s of start-up at 44 M tiles). Beyond COST_CLASSES
 * values, or without memory for the classes, qsort. */
enum { COST_CLASSES = 64 };
struct cost_classes {
  unsigned char *cls; /* the class of each pending tile; NULL: qsort */
  uint64_t cost[COST_CLASSES], count[COST_CLASSES];
  int n;
};

static void cost_class(struct cost_classes *cc, uint64_t i, const struct ntk_tile *t) {
  if (!cc->cls) return;
  uint64_t c = tile_cost(t);
  int k = 0;
  while (k < cc->n && cc->cost[k] != c) k++;
  if (k == COST_CLASSES) {
    free(cc->cls);
    cc->cls = NULL;
    return;
  }
  if (k == cc->n) cc->cost[cc->n++] = c;
  cc->cls[i] = (unsigned char)k;
  cc->count[k]++;
}

/* The pending tiles (in index order), largest first, ties by index: the
 * order by_cost_desc defines. Frees cc->cls. */
static void sort_pending(struct sched *s, struct cost_classes *cc) {
  uint64_t n = s->npending;
  /* As large as pending: a resume's audit appends the tiles it finds damaged. */
  uint64_t cap = s->tiling->ntiles ? s->tiling->ntiles : 1;
  uint64_t *out = cc->cls ? malloc((size_t)cap * sizeof *out) : NULL;
  if (!out) { /* many sizes, or out of memory for the copy: in place */
    free(cc->cls);
    sort_tiling = s->tiling;
    qsort(s->pending, (size_t)n, sizeof *s->pending, by_cost_desc);
    return;
  }
  uint64_t sorted[COST_CLASSES], start[COST_CLASSES], at = 0;
  memcpy(sorted, cc->cost, (size_t)cc->n * sizeof *cc->cost);
  qsort(sorted, (size_t)cc->n, sizeof *sorted, u64_desc);
  for (int r = 0; r < cc->n; r++)
    for (int k = 0; k < cc->n; k++)
      if (cc->cost[k] == sorted[r]) start[k] = at, at += cc->count[k];
  for (uint64_t i = 0; i < n; i++) out[start[cc->cls[i]]++] = s->pending[i];
  free(cc->cls);
  free(s->pending);
  s->pending = out;
}

static ntk_status sched_init(struct sched *s, ntk_store_t *store, const struct ntk_job *job) {
  memset(s, 0, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  s->store = store;
  s->tiling = ntk_store_tiling(store);
  s->sync_interval = job->sync_interval;
  s->worker_timeout = job->worker_timeout;
  uint64_t total_pairs = 0, done_pairs = 0;
  size_t cap = (size_t)(s->tiling->ntiles ? s->tiling->ntiles : 1);
  s->pending = malloc(cap * sizeof *s->pending);
  if (!s->pending) return ntk_error(NTK_ENOMEM, "out of memory");
  struct cost_classes cc = {.cls = malloc(cap)};
  struct ntk_tile t;
  for (int more = ntk_tiling_first(s->tiling, &t); more; more = ntk_tiling_next(s->tiling, &t)) {
    total_pairs += ntk_tile_pairs(&t);
    if (ntk_store_has_tile(store, t.index)) {
      done_pairs += ntk_tile_pairs(&t);
      continue;
    }
    cost_class(&cc, s->npending, &t);
    s->pending[s->npending++] = t.index;
  }
  sort_pending(s, &cc);
  ntk_progress_init(&s->progress, stderr, job->progress_interval, s->tiling->needed,
                    ntk_store_tiles_done(store), total_pairs, done_pairs);
  s->last_sync = ntk_now();
  return NTK_OK;
}

/* Test setting NTKD_TEST_AUDIT_DELAY=S (docs/CLI.md): the audit starts S
 * seconds late, as on a store of many gigabytes, so that a test sees the
 * workers idle while it runs (they must not take rank 0 for stopped). */
static const volatile int *delay_also; /* the audit's other stop flag, for the delay's cut */
static int delay_cut(void) { return ntk_stop_requested() || (delay_also && *delay_also); }
static void audit_test_delay(const volatile int *also) {
  const char *v = getenv("NTKD_TEST_AUDIT_DELAY");
  double left = v ? atof(v) : 0;
  delay_also = also;
  if (left > 0) ntk_sleep(left, delay_cut);
}

static void *audit_main(void *arg) {
  struct sched *s = arg;
  uint64_t *tiles = NULL;
  size_t n = 0;
  audit_test_delay(&s->worker_stopped);
  ntk_status st = ntk_store_audit(s->store, &s->worker_stopped, &tiles, &n);
  pthread_mutex_lock(&s->mu);
  s->audit_st = st;
  if (st) snprintf(s->audit_msg, sizeof s->audit_msg, "%s", ntk_error_message());
  s->audit_tiles = tiles;
  s->naudit = n;
  s->audit_done = 1;
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* Start the audit if the store was resumed from its index. */
static void audit_start(struct sched *s) {
  const struct ntk_store_scan *sc = ntk_store_get_scan(s->store);
  if (!sc->index_used || !ntk_store_tiles_done(s->store)) return;
  if (getenv("NTKD_TEST_AUDIT_DELAY"))
    fprintf(stderr, "ntkd: test setting NTKD_TEST_AUDIT_DELAY=%s\n", getenv("NTKD_TEST_AUDIT_DELAY"));
  if (pthread_create(&s->audit_thread, NULL, audit_main, s)) {
    set_failure(s, ntk_error(NTK_EINTERNAL, "cannot start the thread that checks the resumed store"));
    return;
  }
  s->auditing = 1;
  s->audit_began = ntk_now();
  /* Every payload below the mark is read again: at 7 GB, half a minute in
   * which a finished job said nothing (a hunt). Said where it takes time. */
  if (sc->index_covered >= ((uint64_t)256 << 20))
    fprintf(stderr, "ntkd: checking the %llu stored tiles below the index's sync mark (%.1f GB) beside the "
            "computation; the job ends once they are read\n", (unsigned long long)sc->index_entries,
            (double)sc->index_covered / 1e9);
}

/* If the audit has finished (or `wait`: once it has), join it and queue
 * the tiles it found damaged. 1 if it was joined just now. Main thread. */
static int audit_collect(struct sched *s, int wait) {
  if (!s->auditing) return 0;
  pthread_mutex_lock(&s->mu);
  int done = s->audit_done;
  pthread_mutex_unlock(&s->mu);
  if (!done && !wait) return 0;
  pthread_join(s->audit_thread, NULL);
  s->auditing = 0;
  if (s->audit_st == NTK_EINTERRUPTED) {
    /* Stopping: the next resume checks again. Until then the records it
     * did not reach may hold a damaged tile, so the job is not complete. */
    s->audit_unfinished = 1;
  } else if (s->audit_st) {
    ntk_error(s->audit_st, "%s", s->audit_msg);
    set_failure(s, s->audit_st);
  } else {
    const struct ntk_store_scan *sc = ntk_store_get_scan(s->store);
    fprintf(stderr, "\nntkd: resume check of the records below the index's sync mark: %s", s->naudit ? "" : "all intact");
    if (s->naudit)
      fprintf(stderr, "%zu damaged tile%s to recompute, %llu damaged region%s marked dead", s->naudit,
              s->naudit == 1 ? "" : "s", (unsigned long long)sc->regions, sc->regions == 1 ? "" : "s");
    if (sc->index_corrected)
      fprintf(stderr, "; the index placed %llu tile%s wrongly: taken from the records, the index rewritten",
              (unsigned long long)sc->index_corrected, sc->index_corrected == 1 ? "" : "s");
    fprintf(stderr, " (%.1f s)\n", ntk_now() - s->audit_began);
    for (size_t i = 0; i < s->naudit; i++) {
      struct ntk_tile t = ntk_tiling_tile(s->tiling, s->audit_tiles[i]);
      s->pending[s->npending++] = s->audit_tiles[i];
      ntk_progress_remove(&s->progress, ntk_tile_pairs(&t));
    }
  }
  free(s->audit_tiles);
  s->audit_tiles = NULL;
  return 1;
}

/* Sync if tiles were stored `sync_interval` seconds or more after the
 * last sync. Sync thread (or the solo loop). */
static void sched_sync_due(struct sched *s) {
  double now = ntk_now();
  pthread_mutex_lock(&s->mu);
  int due = s->dirty && !s->store_failed && now - s->last_sync >= s->sync_interval;
  if (due) {
    s->last_sync = now;
    s->dirty = 0;
  }
  pthread_mutex_unlock(&s->mu);
  if (!due) return;
  ntk_status st = ntk_store_sync(s->store);
  if (st) {
    pthread_mutex_lock(&s->mu);
    s->store_failed = 1;
    pthread_mutex_unlock(&s->mu);
    set_failure(s, st);
  }
}

static int store_broken(struct sched *s) {
  pthread_mutex_lock(&s->mu);
  int f = s->store_failed;
  pthread_mutex_unlock(&s->mu);
  return f;
}

static void mark_dirty(struct sched *s) {
  pthread_mutex_lock(&s->mu);
  s->dirty = 1;
  pthread_mutex_unlock(&s->mu);
}

/* Store one finished tile from this process (the solo loop); errors stop
 * the scheduling but never lose tiles already written. */
static void sched_store(struct sched *s, const struct ntk_result_header *h, const void *payload) {
  if (store_broken(s)) return;
  if (!ntk_tiling_needed(s->tiling, h->tile) || ntk_checksum(payload, (size_t)h->len) != h->checksum) {
    set_failure(s, ntk_error(NTK_EINTERNAL, "a tile came out of the engine damaged (checksum mismatch)"));
    return;
  }
  struct ntk_tile t = ntk_tiling_tile(s->tiling, h->tile);
  ntk_status st = ntk_store_append(s->store, &t, payload, (size_t)h->len, h->checksum, (int)h->codec);
  if (st) {
    pthread_mutex_lock(&s->mu);
    s->store_failed = 1;
    pthread_mutex_unlock(&s->mu);
    set_failure(s, st);
    return;
  }
  ntk_progress_add(&s->progress, ntk_tile_pairs(&t));
  s->compute_seconds += h->seconds;
  mark_dirty(s);
  sched_sync_due(s);
}

/* ---- the sync thread ------------------------------------------------------ */

struct syncer {
  struct sched *s;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t wake;
  int closing;
};

static void *syncer_main(void *arg) {
  struct syncer *y = arg;
  pthread_mutex_lock(&y->mu);
  while (!y->closing) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 250000000;
    if (until.tv_nsec >= 1000000000) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&y->wake, &y->mu, &until);
    pthread_mutex_unlock(&y->mu);
    /* What was indexed becomes durable even if no tile follows (a stalled
     * worker, a job about to be ended). */
    sched_sync_due(y->s);
    pthread_mutex_lock(&y->mu);
  }
  pthread_mutex_unlock(&y->mu);
  return NULL;
}

static ntk_status syncer_start(struct syncer *y, struct sched *s) {
  memset(y, 0, sizeof *y);
  y->s = s;
  pthread_mutex_init(&y->mu, NULL);
  pthread_cond_init(&y->wake, NULL);
  if (pthread_create(&y->thread, NULL, syncer_main, y)) return ntk_error(NTK_EINTERNAL, "cannot start the sync thread");
  return NTK_OK;
}

static void syncer_stop(struct syncer *y) {
  pthread_mutex_lock(&y->mu);
  y->closing = 1;
  pthread_cond_signal(&y->wake);
  pthread_mutex_unlock(&y->mu);
  pthread_join(y->thread, NULL);
  pthread_mutex_destroy(&y->mu);
  pthread_cond_destroy(&y->wake);
}

static int sched_more(struct sched *s) {
  return !s->stopping && s->next < s->npending && !get_failure(s);
}

/* Said once even when a worker's interrupt came first: a worker sees the
 * same signal (mpirun's SIGTERM to every rank) inside its tile and may
 * report it before this loop looks. */
static void check_signal(struct sched *s) {
  if (ntk_stop_requested() && !s->signalled) {
    s->signalled = s->stopping = 1;
    fprintf(stderr, "\nntkd: signal %d: finishing the tiles in flight, then stopping (rerun to resume)\n",
            ntk_stop_requested());
  }
}

/* One process computes and stores. Through the engine's pipeline: with
 * compression threads (a GPU backend) the next tile is computed while the
 * last one is checked and compressed; tiles are stored in the order they
 * were computed, and those in the pipeline when a failure or a stop comes
 * are still stored. A stop signal also stops the tile being computed,
 * inside itself (the problem's stop flag): that tile is dropped, never
 * stored in part; a rerun computes it. */
static ntk_status run_solo(struct sched *s, ntk_engine_t *e) {
  for (;;) {
    int room = sched_more(s) && ntk_engine_can_submit(e);
    if (room) {
      struct ntk_tile t = ntk_tiling_tile(s->tiling, s->pending[s->next++]);
      ntk_status st = ntk_engine_submit(e, &t);
      if (st == NTK_EINTERRUPTED && ntk_stop_requested()) {
        char why[512];
        snprintf(why, sizeof why, "%s", ntk_error_message());
        check_signal(s);
        fprintf(stderr, "ntkd: %s: the tile is dropped (a rerun computes it)\n", why);
      } else if (st) {
        set_failure(s, st);
      }
    }
    struct ntk_engine_result r;
    if (!ntk_engine_take(e, room ? 0 : -1, &r)) {
      if (!room && !ntk_engine_pending(e) && !audit_collect(s, 1)) break;
      continue;
    }
    if (r.status) {
      set_failure(s, r.status); /* message recorded by take */
    } else {
      sched_store(s, &r.header, r.payload);
      ntk_progress_tick(&s->progress, 0);
    }
    ntk_engine_release(e, &r);
    check_signal(s);
  }
  return NTK_OK;
}

/* Tiles queued per worker when it does not say (ntk_coordinator_run's
 * depth): while it computes one, the next is already in its inbox, so it
 * never waits for the coordinator between tiles. A worker with a pipeline
 * (compression threads) asks for one more per thread. */
#define NTK_PREFETCH 2

/* Rank 0's view of one worker. */
struct peer {
  int inflight; /* tiles sent, not yet answered; -1 once stopped or counted out */
  int depth;    /* tiles to keep queued at it */
  int lost;     /* counted out: stalled, or its messages failed */
  double heard; /* when its last message arrived (or the run started) */
};

/* Worker k can no longer take part (failure `st`, message recorded): it
 * gets no more work, its tiles in flight stay missing for a rerun, and the
 * job will end with ntk_comm_abort once the others' tiles are stored. */
static void lose(struct sched *s, struct peer *p, int k, int *active, ntk_status st) {
  set_failure(s, st);
  p[k].lost = 1;
  if (p[k].inflight >= 0) {
    (*active)--;
    p[k].inflight = -1;
  }
  s->lost++;
}

/* Top up worker w's queue, or tell it to stop once its queue is empty and
 * nothing is left to hand out. A failed send counts the worker out. */
static void send_next(struct sched *s, int worker, struct peer *p, int *active) {
  /* A deep queue only where there are tiles enough for every worker: at
   * most its share of what is left (and never less than NTK_PREFETCH), so
   * the first workers served do not take every tile of a small job. */
  uint64_t unassigned = s->npending - s->next, workers = *active > 0 ? (uint64_t)*active : 1;
  uint64_t left = unassigned + (uint64_t)(p[worker].inflight > 0 ? p[worker].inflight : 0);
  uint64_t share = (left + workers - 1) / workers;
  int limit = share < (uint64_t)p[worker].depth ? (int)share : p[worker].depth;
  if (limit < NTK_PREFETCH) limit = NTK_PREFETCH;
  /* And none queued behind a tile being computed once fewer tiles are left
   * than would fill every worker's queue: a queue saves a worker the round
   * trip to rank 0 between tiles (milliseconds) and lets a pipelined one
   * compute while it compresses, but at the end of a job a tile queued at
   * a busy worker while another goes idle costs up to a whole tile (3
   * WideResNet tiles on 2 workers took 41 s where 28 s would do). */
  if (unassigned < NTK_PREFETCH * workers) limit = 1;
  while (p[worker].inflight < limit && sched_more(s)) {
    uint64_t index = s->pending[s->next];
    ntk_status st = ntk_comm_send(s->comm, worker, NTK_TAG_WORK, &index, sizeof index);
    if (st) {
      lose(s, p, worker, active, st);
      return;
    }
    s->next++;
    p[worker].inflight++;
  }
  /* The audit of a resumed store may still give tiles back: an idle worker
   * waits for it, unless the job is stopping anyway. */
  if (p[worker].inflight == 0 && s->auditing && !s->stopping && !get_failure(s)) return;
  if (p[worker].inflight == 0) {
    uint64_t stop = NTK_WORK_STOP;
    (*active)--;
    p[worker].inflight = -1; /* stopped */
    ntk_status st = ntk_comm_send(s->comm, worker, NTK_TAG_WORK, &stop, sizeof stop);
    if (st) lose(s, p, worker, active, st);
  }
}

/* How long a worker holding tiles may stay silent: [compute]
 * worker_timeout, but at least 3 times the slowest tile seen this run. The
 * largest tiles go first, so the first results bound the rest; a worker
 * slowed down 3x by other load on its node is not taken for a hung one,
 * and a worker_timeout set too low for the tile size does not end a
 * healthy job. Until a tile has come back only worker_timeout applies. A
 * worker with a pipeline sends its first tile only once the tiles behind it
 * are computed: before its first result it gets that many times the limit
 * (check_stalls). */
static double stall_limit(const struct sched *s) {
  return ntk_patience(s->worker_timeout, s->slowest);
}

/* Count out every worker that holds tiles and has sent nothing for longer
 * than stall_limit(). A message already waiting from it means this rank
 * was slow to look, not the worker. */
static void check_stalls(struct sched *s, struct peer *p, int nworkers, int *active) {
  double base = stall_limit(s), now = ntk_now();
  for (int k = 1; k <= nworkers; k++) {
    double quiet = now - p[k].heard;
    double limit = s->per_worker[k] || p[k].depth <= NTK_PREFETCH ? base : base * (p[k].depth - 1);
    int from, tag;
    size_t bytes;
    if (p[k].inflight <= 0 || p[k].lost || quiet <= limit || ntk_comm_poll(s->comm, k, &from, &tag, &bytes, 0)) continue;
    fprintf(stderr, "\nntkd: worker rank %d has returned nothing for %.1f s while holding %d tile%s (limit %.1f s): "
            "counting it out; storing the tiles the others return, then ending the job\n",
            k, quiet, p[k].inflight, p[k].inflight == 1 ? "" : "s", limit);
    /* No tile back yet: the limit is worker_timeout alone, and a tile that
     * takes longer than it ends every rerun here too; say so (a hunt: a job
     * with worker_timeout below its tile time never finished). */
    lose(s, p, k, active,
         ntk_error(NTK_ESTALLED, "worker rank %d stopped answering: nothing for %.1f s while it held %d tile%s "
                   "(limit %.1f s: [compute] worker_timeout, at least 3x the slowest tile%s)",
                   k, quiet, p[k].inflight, p[k].inflight == 1 ? "" : "s", limit,
                   s->slowest > 0 ? "" : "; no tile of this run has come back yet, so worker_timeout alone applies: "
                   "if one tile takes longer than that, raise [compute] worker_timeout"));
  }
}

/* A FAIL message: int32 status, then text. A worker whose own messages
 * failed is counted out (it waits for our stop as an acknowledgement, then
 * for the end of the job); any other failure stops the job cleanly. */
static void on_fail(struct sched *s, struct peer *p, int from, unsigned char *buf, size_t bytes, int *active) {
  int32_t code = NTK_EINTERNAL;
  const char *text = "(no message)";
  if (bytes > sizeof code) {
    memcpy(&code, buf, sizeof code);
    buf[bytes - 1] = '\0';
    text = (const char *)buf + sizeof code;
  }
  ntk_status st = code > 0 ? (ntk_status)code : NTK_EINTERNAL;
  st = ntk_error(st, "worker rank %d: %s", from, text);
  if (st == NTK_ECOMM) {
    lose(s, p, from, active, st);
    uint64_t stop = NTK_WORK_STOP;
    ntk_comm_send(s->comm, from, NTK_TAG_WORK, &stop, sizeof stop);
    return;
  }
  set_failure(s, st);
  p[from].inflight--;
  send_next(s, from, p, active);
}

/* A RESULT from worker `from`: a finished tile. Grant its record a place
 * (or none, offset 0, when the store failed or has it already); the tile
 * stays in flight until the worker says it is written. */
static void on_result(struct sched *s, struct peer *p, int from, const unsigned char *buf, size_t bytes,
                      int *active) {
  struct ntk_result_header h;
  if (bytes != sizeof h) {
    if (!p[from].lost) lose(s, p, from, active, ntk_error(NTK_ECOMM, "malformed result message from rank %d", from));
    return;
  }
  memcpy(&h, buf, sizeof h);
  struct ntk_store_grant g;
  memset(&g, 0, sizeof g);
  if (h.tile < s->tiling->ntiles && !ntk_tiling_needed(s->tiling, h.tile)) {
    set_failure(s, ntk_error(NTK_ECOMM, "worker rank %d computed tile %llu, which this job does not need", from,
                             (unsigned long long)h.tile));
  } else if (!p[from].lost && !store_broken(s) && !ntk_store_has_tile(s->store, h.tile)) {
    ntk_status st = ntk_store_reserve(s->store, h.tile, h.len, h.checksum, (int)h.codec, &g);
    if (st) {
      set_failure(s, ntk_error(st, "worker rank %d: %s", from, ntk_error_message()));
      memset(&g, 0, sizeof g);
    }
  }
  if (h.seconds > s->slowest) s->slowest = h.seconds;
  s->compute_seconds += h.seconds;
  s->tiles_returned++;
  ntk_status st = ntk_comm_send(s->comm, from, NTK_TAG_GRANT, &g, sizeof g);
  if (st && !p[from].lost) {
    if (g.offset) ntk_store_abandon(s->store, &g);
    lose(s, p, from, active, st);
  }
}

/* A WRITTEN from worker `from`: the grant, int32 status, the error text. */
static void on_written(struct sched *s, struct peer *p, int from, unsigned char *buf, size_t bytes, int *active) {
  struct ntk_store_grant g;
  int32_t code;
  if (bytes < sizeof g + sizeof code) {
    if (!p[from].lost) lose(s, p, from, active, ntk_error(NTK_ECOMM, "malformed message from rank %d", from));
    return;
  }
  memcpy(&g, buf, sizeof g);
  memcpy(&code, buf + sizeof g, sizeof code);
  if (g.offset && !code) {
    ntk_status st = ntk_store_confirm(s->store, &g);
    if (st) {
      set_failure(s, ntk_error(st, "worker rank %d: %s", from, ntk_error_message()));
    } else {
      struct ntk_tile t = ntk_tiling_tile(s->tiling, g.tile);
      ntk_progress_add(&s->progress, ntk_tile_pairs(&t));
      mark_dirty(s);
    }
  } else if (g.offset) {
    /* The write failed: whatever reached the file is marked dead, the
     * tile stays missing, the job stops (the other tiles are kept). */
    buf[bytes - 1] = '\0';
    const char *text = bytes > sizeof g + sizeof code ? (const char *)buf + sizeof g + sizeof code : "(no message)";
    ntk_status st = ntk_store_abandon(s->store, &g);
    set_failure(s, ntk_error(code > 0 ? (ntk_status)code : NTK_EIO, "worker rank %d: %s", from, text));
    if (st) set_failure(s, st);
  }
  if (p[from].lost) return;
  p[from].inflight--;
  if (g.offset && !code) s->per_worker[from]++;
  send_next(s, from, p, active);
}

static ntk_status run_mpi(struct sched *s, const int *depth) {
  int nworkers = ntk_comm_size(s->comm) - 1, active = nworkers;
  struct peer *p = calloc((size_t)nworkers + 1, sizeof *p);
  s->per_worker = calloc((size_t)nworkers + 1, sizeof *s->per_worker);
  if (!p || !s->per_worker) {
    free(p);
    return ntk_error(NTK_ENOMEM, "out of memory");
  }
  struct syncer y;
  ntk_status st = syncer_start(&y, s);
  if (st) {
    free(p);
    return st;
  }
  double last_check = ntk_now();
  for (int k = 1; k <= nworkers; k++) {
    p[k].heard = last_check;
    p[k].depth = depth && depth[k] > NTK_PREFETCH ? depth[k] : NTK_PREFETCH;
    send_next(s, k, p, &active);
  }
  int cancelled = 0;
  double turn = last_check; /* when this loop last came back from its poll */
  double alive = last_check; /* when the idle workers were last told to keep waiting */
  while (active > 0) {
    int from, tag;
    size_t bytes;
    check_signal(s);
    if (audit_collect(s, 0)) /* tiles it gave back, or the stop it held up */
      for (int k = 1; k <= nworkers; k++)
        if (p[k].inflight == 0 && !p[k].lost) send_next(s, k, p, &active);
    /* A worker idle for the audit (send_next) may wait for it longer than
     * its patience with this rank (worker/serve.c): it hears every second
     * that this rank is alive. */
    if (s->auditing && ntk_now() - alive >= 1.0) {
      alive = ntk_now();
      for (int k = 1; k <= nworkers; k++) {
        if (p[k].inflight != 0 || p[k].lost) continue;
        ntk_status wst = ntk_comm_send(s->comm, k, NTK_TAG_WAIT, NULL, 0);
        if (wst) lose(s, p, k, &active, wst);
      }
    }
    if ((s->stopping || get_failure(s)) && !cancelled) {
      /* Workers hand back their queued tiles instead of computing them. */
      cancelled = 1;
      for (int k = 1; k <= nworkers; k++) {
        if (p[k].inflight == 0 && !p[k].lost) send_next(s, k, p, &active); /* idle, waiting for the audit */
        if (p[k].inflight <= 0) continue;
        ntk_status cst = ntk_comm_send(s->comm, k, NTK_TAG_CANCEL, NULL, 0);
        if (cst) lose(s, p, k, &active, cst);
      }
    }
    int got = ntk_comm_poll(s->comm, -1, &from, &tag, &bytes, 0.25);
    /* A turn of this loop takes about the poll's 0.25 s. The time of one
     * that took seconds is given back to every worker (base/clock.h):
     * counted, it blamed a healthy worker for the coordinator's stop
     * (exit 9). */
    double unrun = ntk_not_run(&turn, ntk_now());
    if (unrun > 0)
      for (int k = 1; k <= nworkers; k++) p[k].heard += unrun;
    ntk_progress_tick(&s->progress, 0);
    /* Look for silent workers when idle, and every second when busy. */
    if (!got || ntk_now() - last_check >= 1.0) {
      check_stalls(s, p, nworkers, &active);
      last_check = ntk_now();
    }
    if (!got) continue;
    unsigned char *buf = malloc(bytes ? bytes : 1);
    if (!buf) {
      lose(s, p, from, &active, ntk_error(NTK_ENOMEM, "coordinator: out of memory for a %zu-byte message from rank %d",
                                          bytes, from));
      /* Its message cannot be taken: nothing more from it can be either. */
      break;
    }
    p[from].heard = ntk_now();
    ntk_status rst = ntk_comm_recv_within(s->comm, from, tag, buf, bytes, stall_limit(s));
    if (rst) {
      if (rst != NTK_ESTALLED) free(buf); /* else MPI may still write into it: let it be */
      if (!p[from].lost) lose(s, p, from, &active, ntk_error(rst, "worker rank %d: %s", from, ntk_error_message()));
      continue;
    }
    p[from].heard = ntk_now();
    if (tag == NTK_TAG_RESULT) {
      on_result(s, p, from, buf, bytes, &active); /* a counted-out worker is answered too: it waits for it */
    } else if (tag == NTK_TAG_WRITTEN) {
      on_written(s, p, from, buf, bytes, &active);
    } else if (p[from].lost) {
      /* Nothing else a counted-out worker says counts. */
    } else if (tag == NTK_TAG_FAIL) {
      on_fail(s, p, from, buf, bytes, &active);
    } else if (tag == NTK_TAG_SKIP) {
      p[from].inflight--; /* the tile stays missing: a rerun computes it */
      send_next(s, from, p, &active);
    } else if (tag == NTK_TAG_INTERRUPT) {
      s->worker_stopped = 1; /* the audit of a resumed store stops too, as for rank 0's signal */
      if (!s->stopping) {
        s->stopping = 1;
        fprintf(stderr, "\nntkd: worker rank %d was signalled: finishing the tiles in flight, then stopping\n", from);
      }
    } else {
      lose(s, p, from, &active, ntk_error(NTK_ECOMM, "unexpected message tag %d from rank %d", tag, from));
    }
    free(buf);
  }
  audit_collect(s, 1);
  syncer_stop(&y);
  free(p);
  return NTK_OK;
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

ntk_status ntk_coordinator_run(const ntk_comm_t *world, ntk_store_t *store, ntk_engine_t *solo,
                               const struct ntk_job *job, const int *depth) {
  struct sched s;
  ntk_status st = sched_init(&s, store, job);
  if (st) return st;
  s.comm = world;
  audit_start(&s);
  fprintf(stderr, "ntkd: %llu of %llu tiles to compute on %d %s\n", (unsigned long long)s.npending,
          (unsigned long long)s.tiling->needed, solo ? 1 : ntk_comm_size(world) - 1,
          solo || ntk_comm_size(world) == 2 ? "worker" : "workers");
  st = solo ? run_solo(&s, solo) : run_mpi(&s, depth);
  audit_collect(&s, 1); /* joined on every path before the store is touched again */
  /* Whatever happened, make what was stored durable. */
  ntk_status sync = ntk_store_sync(store);
  int complete = ntk_store_tiles_done(store) == s.tiling->needed && !s.audit_unfinished;
  /* Before the last word: what this job believes stored is in the file,
   * as records of this store, and the index names them. */
  ntk_status final = complete && !sync && !st && !s.failure ? ntk_store_check_final(store) : NTK_OK;
  if (final) {
    set_failure(&s, final);
    complete = 0;
  }
  /* "done" only over a store synced and checked: never after a failed sync
   * (the check above was skipped then). */
  int done = complete && !sync && !s.failure;
  ntk_progress_finish(&s.progress, done ? "done" : s.failure || st || sync ? "failed" : "stopped");
  int nw = solo ? 1 : ntk_comm_size(world) - 1;
  double wall = ntk_now() - s.progress.start;
  /* The busy share as printed, whole percent: the note below decides on
   * the same number, so a run that says 25 % never also says it waited
   * more than 75 % (CI saw 24.6 % print as 25 beside the note). */
  double busy_pct = wall > 0 ? round(100.0 * s.compute_seconds / (nw * wall)) : 100.0;
  if (wall > 0 && s.progress.pairs_session)
    fprintf(stderr, "ntkd: workers spent %.2f s computing tiles: %.0f%% of %d x %.2f s\n", s.compute_seconds,
            busy_pct, nw, wall);
  if (s.per_worker && nw > 1) print_per_worker(s.per_worker, nw);
  /* Each tile under mpirun costs a few hundred microseconds of messages
   * and its record's write, whatever its size: tiles of 0.1 ms left one
   * worker busy 7 % of the time, 20 times slower than one process (a
   * hunt: N = 6 000, tile 32; 4 times since the waits' first pauses are
   * short). Said, with the cure, where it happens. */
  double mean = s.tiles_returned ? s.compute_seconds / (double)s.tiles_returned : 0;
  if (!solo && s.tiles_returned >= 1000 && mean < 2e-3 && busy_pct < 25)
    fprintf(stderr, "ntkd: note: a tile took %.0f us to compute and the workers waited %.0f%% of the time: under "
            "mpirun each tile also costs messages and its record's write; a larger [compute] tile (now %llu), or "
            "one process, is faster (docs/JOB-FILE.md, [compute])\n", 1e6 * mean,
            100.0 - busy_pct, (unsigned long long)s.tiling->tile);
  free(s.per_worker);
  free(s.pending);
  pthread_mutex_destroy(&s.mu);
  if (s.lost) {
    /* A counted-out worker cannot take part in the collective that ends a
     * job: end every rank from here, now that the store is synced. */
    fprintf(stderr, "ntkd: error: %s\n", s.failure_msg);
    if (sync) fprintf(stderr, "ntkd: error: %s\n", ntk_error_message());
    fprintf(stderr, "ntkd: %llu of %llu tiles in the store%s; ending every rank; rerun the same command to resume\n",
            (unsigned long long)ntk_store_tiles_done(store), (unsigned long long)s.tiling->needed,
            sync ? "" : ", synced");
    ntk_comm_abort(ntk_status_exit_code(sync ? sync : s.failure));
  }
  if (st) return st;
  if (s.failure) return ntk_error(s.failure, "%s", s.failure_msg);
  if (sync) return sync;
  if (s.audit_unfinished) /* complete already requires the check finished */
    return ntk_error(NTK_EINTERRUPTED,
                     "interrupted with %llu of %llu tiles stored, before the check of the resumed store's records "
                     "finished (a damaged tile would be among them); rerun the same command to resume",
                     (unsigned long long)ntk_store_tiles_done(store), (unsigned long long)s.tiling->needed);
  if (!complete)
    return ntk_error(NTK_EINTERRUPTED, "interrupted with %llu of %llu tiles stored; rerun the same command to resume",
                     (unsigned long long)ntk_store_tiles_done(store), (unsigned long long)s.tiling->needed);
  return NTK_OK;
}
