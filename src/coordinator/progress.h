/* Progress of a kernel job on the coordinator: tiles done/total, pairs per
 * second and ETA; a live line on a terminal, plain periodic lines in a log. */
#ifndef NTKD_PROGRESS_H
#define NTKD_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

struct ntk_progress {
  FILE *out;
  int tty;
  double start, last, interval;
  uint64_t tiles_total, tiles_done;
  uint64_t pairs_total, pairs_done, pairs_session;
};

/* `interval`: seconds between plain lines when `out` is not a terminal. */
void ntk_progress_init(struct ntk_progress *p, FILE *out, double interval, uint64_t tiles_total,
                       uint64_t tiles_done, uint64_t pairs_total, uint64_t pairs_done);
void ntk_progress_add(struct ntk_progress *p, uint64_t pairs);
/* A tile counted done turned out damaged (the resume's audit): not done. */
void ntk_progress_remove(struct ntk_progress *p, uint64_t pairs);
/* Print if due (or always when `force`). */
void ntk_progress_tick(struct ntk_progress *p, int force);
/* Final line. */
void ntk_progress_finish(struct ntk_progress *p, const char *state);

#endif
