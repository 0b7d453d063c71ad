/* A computation's link to whoever waits for it: the stop flags it polls
 * where its work divides (a layer, a band of rows, a pair of images, a
 * slice), and a counter of the entries it has done, which the waiting
 * thread may read while it runs. The CLI's flag is the stop signals' one
 * (base/signals.h: ntk_stop_flag); the library's are its caller's `cancel`
 * and the in-process pool's own (worker/pool.c). Kernels get it through
 * the problem (backend/backend.h), never as a global.
 *
 * A poll is two plain loads, no lock and no call: the kernels poll at
 * points where that costs nothing measurable. A flag, once set, is never
 * reset while a computation that polls it runs. Header-only, no I/O. */
#ifndef NTKD_STOP_H
#define NTKD_STOP_H

#include <stddef.h>
#include <stdint.h>

struct ntk_stop {
  /* Non-zero: stop as soon as possible. NULL: never set. Written from any
   * thread or a signal handler. */
  const volatile int *flag[2];
  /* NULL, or a counter the computation adds the entries of its tile to as
   * it does them (a fully-connected tile: in proportion to its layers
   * done), rows x cols in all. Each thread its own; the waiting thread
   * reads it with ntk_stop_done and resets it between tiles. */
  uint64_t *done;
};

/* Whether a stop was asked for (s may be NULL: never). */
static inline int ntk_stop_seen(const struct ntk_stop *s) {
  /* Relaxed atomic loads: the flags are set by other threads (and a
   * signal handler) while the computing threads read them; a plain read
   * was a data race (ThreadSanitizer), harmless on x86 but undefined. */
  return s && ((s->flag[0] && __atomic_load_n(s->flag[0], __ATOMIC_RELAXED)) ||
               (s->flag[1] && __atomic_load_n(s->flag[1], __ATOMIC_RELAXED)));
}

/* `entries` more of the tile finished (s may be NULL). */
static inline void ntk_stop_count(const struct ntk_stop *s, uint64_t entries) {
  if (s && s->done) __atomic_store_n(s->done, __atomic_load_n(s->done, __ATOMIC_RELAXED) + entries, __ATOMIC_RELAXED);
}

/* The counter as another thread sees it now. */
static inline uint64_t ntk_stop_done(const uint64_t *done) { return __atomic_load_n(done, __ATOMIC_RELAXED); }

#endif
