/* Progress lines: "\r" updates at most 4 times a second on a terminal, a
 * newline-terminated line every `interval` seconds otherwise. */
#include "coordinator/progress.h"

#include <unistd.h>

#include "base/clock.h"

void ntk_progress_init(struct ntk_progress *p, FILE *out, double interval, uint64_t tiles_total,
                       uint64_t tiles_done, uint64_t pairs_total, uint64_t pairs_done) {
  p->out = out;
  p->tty = isatty(fileno(out));
  p->start = p->last = ntk_now();
  p->interval = interval;
  p->tiles_total = tiles_total;
  p->tiles_done = tiles_done;
  p->pairs_total = pairs_total;
  p->pairs_done = pairs_done;
  p->pairs_session = 0;
}

void ntk_progress_add(struct ntk_progress *p, uint64_t pairs) {
  p->tiles_done++;
  p->pairs_done += pairs;
  p->pairs_session += pairs;
}

void ntk_progress_remove(struct ntk_progress *p, uint64_t pairs) {
  if (p->tiles_done) p->tiles_done--;
  p->pairs_done = p->pairs_done >= pairs ? p->pairs_done - pairs : 0;
}

static void fmt_time(char *buf, size_t cap, double s) {
  if (s < 0 || s > 1e8) {
    snprintf(buf, cap, "--:--:--");
    return;
  }
  long t = (long)(s + 0.5);
  snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

static void print_line(struct ntk_progress *p, double now, const char *end) {
  double el = now - p->start;
  double rate = el > 0 ? (double)p->pairs_session / el : 0;
  double eta = rate > 0 ? (double)(p->pairs_total - p->pairs_done) / rate : -1;
  char e[32], t[32];
  fmt_time(e, sizeof e, el);
  fmt_time(t, sizeof t, eta);
  fprintf(p->out, "%sntkd: %llu/%llu tiles (%.1f%%)  %.3g pairs/s  elapsed %s  ETA %s%s",
          p->tty ? "\r" : "", (unsigned long long)p->tiles_done, (unsigned long long)p->tiles_total,
          p->tiles_total ? 100.0 * (double)p->tiles_done / (double)p->tiles_total : 100.0, rate, e, t, end);
  fflush(p->out);
}

void ntk_progress_tick(struct ntk_progress *p, int force) {
  double now = ntk_now();
  double every = p->tty ? 0.25 : p->interval;
  if (!force && now - p->last < every) return;
  p->last = now;
  print_line(p, now, p->tty ? "   " : "\n");
}

void ntk_progress_finish(struct ntk_progress *p, const char *state) {
  double now = ntk_now();
  if (p->tty) print_line(p, now, "\n");
  fprintf(p->out, "ntkd: %s: %llu/%llu tiles in the store, %.2f s this run\n", state,
          (unsigned long long)p->tiles_done, (unsigned long long)p->tiles_total, now - p->start);
  fflush(p->out);
}
