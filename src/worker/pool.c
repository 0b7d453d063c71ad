/* The in-process pool: see worker/pool.h. */
#include "worker/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clocale.h"
#include "base/clock.h"
#include "worker/worker.h"

struct ntk_pool {
  int n;
  ntk_engine_t **engines;
  struct ntk_problem *probs; /* engine i's problem: the caller's, with the pool's stop flag and counter i */
  uint64_t *done;            /* per engine: entries of the tile it computes finished so far (base/stop.h) */
  volatile int halt;         /* the pool's own stop flag: progress asked to stop, or a thread failed */
};

ntk_status ntk_pool_create(const struct ntk_problem *p, const struct ntk_pool_device *devices, int n,
                           const struct ntk_tiling *tiling, ntk_pool_t **out) {
  *out = NULL;
  size_t k = (size_t)(n > 0 ? n : 1);
  ntk_pool_t *pool = calloc(1, sizeof *pool);
  if (pool) {
    pool->engines = calloc(k, sizeof *pool->engines);
    pool->probs = calloc(k, sizeof *pool->probs);
    pool->done = calloc(k, sizeof *pool->done);
  }
  if (!pool || !pool->engines || !pool->probs || !pool->done) {
    ntk_pool_free(pool);
    return ntk_error(NTK_ENOMEM, "out of memory");
  }
  ntk_status st = NTK_OK;
  for (int i = 0; !st && i < n; i++) {
    /* The engine keeps a pointer to its problem: it lives in the pool. */
    struct ntk_problem *q = &pool->probs[i];
    *q = *p;
    q->device = devices[i].device;
    q->stop.flag[1] = &pool->halt;
    q->stop.done = &pool->done[i];
    /* Level 1: the engine's codec is never used by ntk_engine_compute. */
    st = ntk_engine_create(q, devices[i].backend, 1, tiling, 0, &pool->engines[i]);
    if (!st) pool->n = i + 1;
  }
  if (st) {
    ntk_pool_free(pool);
    return st;
  }
  *out = pool;
  return NTK_OK;
}

void ntk_pool_free(ntk_pool_t *pool) {
  if (!pool) return;
  for (int i = 0; pool->engines && i < pool->n; i++) ntk_engine_free(pool->engines[i]);
  free(pool->engines);
  free(pool->probs);
  free(pool->done);
  free(pool);
}

/* A run: the tiles handed out in order, the first failure, the counts. */
struct run {
  ntk_pool_t *pool;
  const struct ntk_tile *tiles;
  size_t n, next;
  ntk_pool_deliver_fn deliver;
  void *deliver_arg;
  pthread_mutex_t mu;
  pthread_cond_t changed;
  int stop;         /* a failure or a cancel: take no more tiles */
  int running;      /* threads not yet finished */
  ntk_status failure;
  char message[2048];
  uint64_t pairs_done; /* entries of the tiles delivered */
  uint64_t dropped;    /* entries computed in tiles stopped inside (not delivered) */
};

struct worker_arg {
  struct run *r;
  int index; /* its engine */
};

/* The caller's cancel flag or the pool's own (the first problem's stop
 * holds both, as every engine's does). */
static int cancelled(const ntk_pool_t *pool) { return pool->n > 0 && ntk_stop_seen(&pool->probs[0].stop); }

/* Entries computed now: delivered, dropped, and inside the tiles being
 * computed. Under r->mu. */
static uint64_t entries_now(const struct run *r) {
  uint64_t done = r->pairs_done + r->dropped;
  for (int i = 0; i < r->pool->n; i++) done += ntk_stop_done(&r->pool->done[i]);
  return done;
}

static void *pool_main(void *arg) {
  struct worker_arg *w = arg;
  struct run *r = w->r;
  ntk_pool_t *pool = r->pool;
  ntk_c_locale_enter(); /* a new thread starts in the host's locale: its messages' numbers in C's */
  for (;;) {
    pthread_mutex_lock(&r->mu);
    if (cancelled(pool)) r->stop = 1;
    size_t i = r->stop || r->next >= r->n ? r->n : r->next++;
    pthread_mutex_unlock(&r->mu);
    if (i >= r->n) break;
    const void *vals;
    ntk_status st = ntk_engine_compute(pool->engines[w->index], &r->tiles[i], &vals);
    if (!st) r->deliver(r->deliver_arg, &r->tiles[i], vals);
    pthread_mutex_lock(&r->mu);
    /* A tile stopped inside (NTK_EINTERRUPTED) is no failure: a flag was
     * set, which the run reports. */
    if (st && st != NTK_EINTERRUPTED && !r->failure) {
      r->failure = st;
      snprintf(r->message, sizeof r->message, "%s", ntk_error_message()); /* this thread's */
    }
    uint64_t in_tile = ntk_stop_done(&pool->done[w->index]);
    __atomic_store_n(&pool->done[w->index], 0, __ATOMIC_RELAXED);
    if (st) {
      r->stop = 1;
      __atomic_store_n(&pool->halt, 1, __ATOMIC_RELAXED); /* the other threads stop inside their tiles too */
      r->dropped += in_tile;
    } else {
      r->pairs_done += r->tiles[i].rows * r->tiles[i].cols;
    }
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->mu);
  }
  pthread_mutex_lock(&r->mu);
  r->running--;
  pthread_cond_broadcast(&r->changed);
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

ntk_status ntk_pool_run(ntk_pool_t *pool, const struct ntk_tile *tiles, size_t n, ntk_pool_deliver_fn deliver,
                        void *deliver_arg, ntk_pool_progress_fn progress, void *progress_arg) {
  struct run r;
  memset(&r, 0, sizeof r);
  r.pool = pool;
  r.tiles = tiles;
  r.n = n;
  r.deliver = deliver;
  r.deliver_arg = deliver_arg;
  __atomic_store_n(&pool->halt, 0, __ATOMIC_RELAXED);
  for (int i = 0; i < pool->n; i++) pool->done[i] = 0;
  pthread_mutex_init(&r.mu, NULL);
  /* The wait below on the monotonic clock: a wall clock set back would
   * hold its progress calls back as long */
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&r.changed, &ca);
  pthread_condattr_destroy(&ca);
  uint64_t total = ntk_tiles_entries(tiles, n);
  /* A first word before any tile: a caller may stop at once. */
  if (progress && progress(progress_arg, 0, total)) r.stop = 1;
  int asked_stop = r.stop;
  int nt = pool->n < (int)n ? pool->n : (int)n;
  pthread_t *th = calloc((size_t)(nt > 0 ? nt : 1), sizeof *th);
  struct worker_arg *wa = calloc((size_t)(nt > 0 ? nt : 1), sizeof *wa);
  ntk_status st = th && wa ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory");
  int started = 0;
  for (int i = 0; !st && i < nt; i++) {
    wa[i] = (struct worker_arg){&r, i};
    pthread_mutex_lock(&r.mu);
    r.running++;
    pthread_mutex_unlock(&r.mu);
    if (pthread_create(&th[i], NULL, pool_main, &wa[i])) {
      pthread_mutex_lock(&r.mu);
      r.running--;
      r.stop = 1;
      __atomic_store_n(&pool->halt, 1, __ATOMIC_RELAXED);
      pthread_mutex_unlock(&r.mu);
      st = ntk_error(NTK_EINTERNAL, "cannot start a computing thread");
      break;
    }
    started++;
  }
  /* Wait, telling progress every 0.1 s (the entries finished, inside
   * tiles too); a stop from it sets the pool's flag, which the threads
   * poll inside their tiles, as they poll the caller's. A finished tile
   * wakes the wait (for the cancel check); progress is called when the
   * clock says its 0.1 s are up, however the wait returned: on every
   * wake-up it was called thousands of times a second with small tiles
   * (each call holding Python's GIL), and on time-outs alone a wake-up
   * just past the deadline skipped a period. */
  pthread_mutex_lock(&r.mu);
  double next = ntk_now();
  while (r.running > 0) {
    double now = ntk_now();
    if (now >= next) next = now + 0.1;
    struct timespec until = ntk_timespec(next);
    pthread_cond_timedwait(&r.changed, &r.mu, &until);
    if (cancelled(pool)) asked_stop = r.stop = 1;
    if (r.running == 0) break; /* the last word comes below */
    if (ntk_now() < next) continue;
    uint64_t done = entries_now(&r);
    if (progress && !asked_stop) {
      pthread_mutex_unlock(&r.mu);
      int halt = progress(progress_arg, done, total);
      pthread_mutex_lock(&r.mu);
      if (halt) {
        asked_stop = r.stop = 1;
        __atomic_store_n(&pool->halt, 1, __ATOMIC_RELAXED);
      }
    }
    if (cancelled(pool)) asked_stop = r.stop = 1;
  }
  uint64_t done = entries_now(&r);
  pthread_mutex_unlock(&r.mu);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  free(th);
  free(wa);
  if (!st && r.failure) st = ntk_error(r.failure, "%s", r.message);
  if (!st && (asked_stop || cancelled(pool)) && r.pairs_done < total)
    st = ntk_error(NTK_EINTERRUPTED, "cancelled with %llu of %llu entries computed (%llu of them inside tiles it "
                   "stopped in, not delivered)", (unsigned long long)done, (unsigned long long)total,
                   (unsigned long long)r.dropped);
  /* The last word: how far it got, also when stopped or failed. */
  if (progress) progress(progress_arg, done, total);
  pthread_mutex_destroy(&r.mu);
  pthread_cond_destroy(&r.changed);
  return st;
}
