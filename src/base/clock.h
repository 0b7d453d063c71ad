/* Seconds on the monotonic clock, for durations, timeouts and rates.
 * Rank-local. */
#ifndef NTKD_CLOCK_H
#define NTKD_CLOCK_H

double ntk_now(void);

#endif
