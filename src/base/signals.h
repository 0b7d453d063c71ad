/* The process-wide stop flag: SIGINT, SIGTERM, SIGUSR1, SIGHUP (unless
 * ignored at start: nohup) and SIGXCPU (a CPU-time limit) request a clean
 * stop that every long loop (loading data, the coordinator, workers,
 * training, the solve) polls with ntk_stop_requested(). A low-level module:
 * anything may call it, it calls nothing of ntkd's. */
#ifndef NTKD_SIGNALS_H
#define NTKD_SIGNALS_H

/* Install the stop handlers (and ignore SIGXFSZ, so that a write past a
 * file-size limit fails with EFBIG instead of killing the process), then
 * unblock the stop signals. Called first thing in main(), before MPI
 * starts, so a signal during start-up is not the default death. The first
 * stop signal also arms alarm(NTKD_STOP_GRACE seconds, 120 by default, 0
 * for none): a process still alive then (a thread stuck in a call that
 * does not poll the flag) says so and _exits with 5. Idempotent;
 * rank-local. */
void ntk_signals_install(void);

/* For commands that do not poll the stop flag (info, verify, check):
 * stop signals keep their default action, SIGXFSZ is ignored (a
 * write past a file-size limit fails with EFBIG and the temporary file is
 * removed), and signals blocked across an exec are unblocked. */
void ntk_signals_plain(void);

/* Block the stop signals (before an exec: the mask survives it, so a
 * signal that arrives while the new image loads waits, pending, until its
 * main() has installed the handlers). */
void ntk_signals_block(void);

/* How many times this process was continued after a stop (SIGCONT: a
 * suspend of the job, kill -STOP/-CONT), counted from ntk_signals_install.
 * A stretch of time that holds one is not a measure of anybody's pace
 * (base/clock.h). Async-safe. */
int ntk_continued(void);

/* The number of the first stop signal received, 0 if none. Async-safe. */
int ntk_stop_requested(void);

/* The same as a flag a computation polls (base/stop.h): a kernel job's
 * problem carries it, so that a tile stops inside itself. */
const volatile int *ntk_stop_flag(void);

#endif
