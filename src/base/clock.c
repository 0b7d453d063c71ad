/* The monotonic clock: see base/clock.h. */
#include "base/clock.h"

#include <time.h>

double ntk_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

struct timespec ntk_timespec(double t) {
  if (!(t > 0)) t = 0;
  struct timespec ts = {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
  if (ts.tv_nsec > 999999999L) ts.tv_nsec = 999999999L;
  return ts;
}

void ntk_sleep(double seconds, int (*cut)(void)) {
  double until = ntk_now() + seconds, left;
  while (!(cut && cut()) && (left = until - ntk_now()) > 0) {
    if (cut && left > 0.1) left = 0.1; /* a cut set by another thread is seen within 0.1 s */
    struct timespec ts = ntk_timespec(left);
    nanosleep(&ts, NULL);
  }
}
