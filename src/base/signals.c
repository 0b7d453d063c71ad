/* Stop signals: see src/base/signals.h. */
#include "base/signals.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t stop_signal;
/* ntk_stop_flag hands it out as an int flag (base/stop.h). */
_Static_assert(_Generic((sig_atomic_t)0, int: 1, default: 0), "sig_atomic_t is int");

static const int stop_signals[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP};
#define NSTOP (sizeof stop_signals / sizeof *stop_signals)

/* The first signal wins: a later one must not change the reported cause. */
static void on_signal(int sig) {
  if (!stop_signal) stop_signal = sig;
}

static void stop_mask(sigset_t *set) {
  sigemptyset(set);
  for (size_t i = 0; i < NSTOP; i++) sigaddset(set, stop_signals[i]);
}

void ntk_signals_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < NSTOP; i++) sigaction(stop_signals[i], &sa, NULL);
  signal(SIGXFSZ, SIG_IGN);
  sigset_t set;
  stop_mask(&set);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
}

void ntk_signals_plain(void) {
  signal(SIGXFSZ, SIG_IGN);
  sigset_t set;
  stop_mask(&set);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
}

void ntk_signals_block(void) {
  sigset_t set;
  stop_mask(&set);
  sigprocmask(SIG_BLOCK, &set, NULL);
}

int ntk_stop_requested(void) { return stop_signal; }

const volatile int *ntk_stop_flag(void) { return &stop_signal; }
