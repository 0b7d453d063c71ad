/* Seconds on the monotonic clock, for durations, timeouts and rates,
 * and the rule for how long to wait for another rank. Rank-local. */
#ifndef NTKD_CLOCK_H
#define NTKD_CLOCK_H

#include <time.h>

#include "base/signals.h"

double ntk_now(void);

/* `t` seconds as a timespec: a time of ntk_now()'s clock for a wait on
 * CLOCK_MONOTONIC (pthread_cond_timedwait), or a duration. */
struct timespec ntk_timespec(double t);

/* Sleeps `seconds`, on through the signals that cut a sleep short, or
 * until cut() says to stop (asked at least every 0.1 s: another thread may
 * set what it reads; cut NULL: the whole time). */
void ntk_sleep(double seconds, int (*cut)(void));

/* How long ntkd waits for another rank before it counts it out: the
 * user's limit (`floor`: [compute] worker_timeout, [train] rank_timeout),
 * and at least 3 times the slowest stretch seen in the run, so that a
 * rank slowed down 3x by other load, or a long tile or snapshot, is not
 * taken for a stopped one. The kernel job's workers, a training's ranks
 * and a cg solve's ranks all wait by this rule. */
static inline double ntk_patience(double floor, double slowest) { return floor > 3 * slowest ? floor : 3 * slowest; }

/* What a waiting loop's deadline gives back for its last step: a step
 * (a poll of at most a second or a sleep of milliseconds) that took over
 * 2 s means this process did not run meanwhile (SIGSTOP, a suspend of the
 * whole job by SLURM, a debugger, a starved or suspended machine). The
 * other ranks were likely stopped with it, and their messages wait unread:
 * that time is nobody's silence. All of it but one second is given back,
 * so that a rank hung for real is still found while this one is starved
 * step after step. `turn` is the time of the last step (set to `now`). */
static inline double ntk_not_run(double *turn, double now) {
  double gap = now - *turn;
  *turn = now;
  return gap > 2.0 ? gap - 1.0 : 0.0;
}

/* The slowest stretch between two meetings of the ranks (collectives). A
 * stretch in which this process was stopped and continued (a suspend of
 * the job) is not counted: the limits would be 3 times the suspend for
 * the rest of the run, and a rank hung later found that much later. */
struct ntk_pace {
  double last, slowest;
  int conts; /* ntk_continued() at the last mark */
};
static inline void ntk_pace_mark(struct ntk_pace *p, double now) {
  int c = ntk_continued();
  if (c == p->conts && now - p->last > p->slowest) p->slowest = now - p->last;
  p->conts = c;
  p->last = now;
}

#endif
