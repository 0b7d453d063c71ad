/* Stop signals: see src/base/signals.h. */
#include "base/signals.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t continued; /* SIGCONTs received */
/* ntk_stop_flag hands it out as an int flag (base/stop.h). */
_Static_assert(_Generic((sig_atomic_t)0, int: 1, default: 0), "sig_atomic_t is int");

/* SIGXCPU: a CPU-time limit's soft warning (ulimit -t, a batch system's
 * limit), before the SIGKILL of its hard limit. */
static const int stop_signals[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP, SIGXCPU};
#define NSTOP (sizeof stop_signals / sizeof *stop_signals)

/* Seconds a stop may take before the process ends itself (0: no limit),
 * and what it then says (formed when installed: no formatting in a
 * handler). */
static unsigned grace = 120;
static char grace_msg[320];
static size_t grace_len;

/* The first signal wins: a later one must not change the reported cause.
 * It also starts the stop's clock: a thread inside a library call that
 * never returns (OpenBLAS retrying an allocation for ever under an
 * address-space limit) would keep the process alive and deaf. */
static void on_signal(int sig) {
  if (!stop_signal) {
    stop_signal = sig;
    if (grace) alarm(grace);
  }
}

static void on_cont(int sig) {
  (void)sig;
  continued++;
}

/* The stop took longer than grace seconds: end now, as SIGKILL would
 * (records written are kept and checked on resume; the tile in flight is
 * lost), with exit 5 and a line saying why. */
static void on_alarm(int sig) {
  (void)sig;
  if (write(2, grace_msg, grace_len) < 0) { /* nothing more to do */
  }
  _exit(5); /* NTK_EXIT_INTERRUPTED (base/status.h; this module calls nothing of ntkd's) */
}

static void stop_mask(sigset_t *set) {
  sigemptyset(set);
  for (size_t i = 0; i < NSTOP; i++) sigaddset(set, stop_signals[i]);
}

void ntk_signals_install(void) {
  const char *g = getenv("NTKD_STOP_GRACE");
  char *end = NULL;
  unsigned long v = g && *g ? strtoul(g, &end, 10) : 120;
  int bad = g && *g && (*end || v > 86400);
  grace = bad ? 120 : (unsigned)v;
  if (bad) fprintf(stderr, "ntkd: note: NTKD_STOP_GRACE='%.40s' is not a number of seconds up to 86400: 120\n", g);
  int n = snprintf(grace_msg, sizeof grace_msg,
                   "ntkd: error: still running %u s after the stop signal (a call that does not poll it, or a "
                   "stuck thread); ending now as a kill would: what was written is kept, work in flight is lost "
                   "(a job's rerun resumes; NTKD_STOP_GRACE=S sets the seconds, 0 no limit)\n", grace);
  grace_len = n > 0 && (size_t)n < sizeof grace_msg ? (size_t)n : 0;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < NSTOP; i++) {
    /* A hangup ignored when ntkd starts (nohup) stays ignored: the job
     * was meant to outlive its terminal. */
    struct sigaction was;
    if (stop_signals[i] == SIGHUP && !sigaction(SIGHUP, NULL, &was) && was.sa_handler == SIG_IGN) continue;
    sigaction(stop_signals[i], &sa, NULL);
  }
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, NULL);
  sa.sa_handler = on_cont;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGCONT, &sa, NULL);
  /* a log reader that goes away (ntkd JOB.conf 2>&1 | head) must not end
   * hours of work as a kill would: writes to it fail (EPIPE) instead */
  signal(SIGPIPE, SIG_IGN);
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

int ntk_continued(void) { return continued; }

const volatile int *ntk_stop_flag(void) { return &stop_signal; }
