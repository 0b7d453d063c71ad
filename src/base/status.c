/* Status names, exit codes and the last-error message buffer. */
#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

/* Per thread: the coordinator's writer thread reports its own errors. */
static _Thread_local char last_message[2048];

const char *ntk_status_str(ntk_status s) {
  switch (s) {
  case NTK_OK: return "success";
  case NTK_EUSAGE: return "usage error";
  case NTK_ECONFIG: return "configuration error";
  case NTK_EINPUT: return "input data error";
  case NTK_EMISMATCH: return "store belongs to another job";
  case NTK_EIO: return "I/O error";
  case NTK_ECORRUPT: return "corrupt store";
  case NTK_EINCOMPLETE: return "store incomplete";
  case NTK_ENOMEM: return "out of memory";
  case NTK_EINTERRUPTED: return "interrupted";
  case NTK_ECOMM: return "MPI error";
  case NTK_EINTERNAL: return "internal error";
  case NTK_ELOCKED: return "store in use by another job";
  case NTK_ENONFINITE: return "kernel value not finite";
  case NTK_ESTALLED: return "worker stopped answering";
  }
  return "unknown status";
}

int ntk_status_exit_code(ntk_status s) {
  switch (s) {
  case NTK_OK: return NTK_EXIT_OK;
  case NTK_EUSAGE:
  case NTK_ECONFIG:
  case NTK_EINPUT:
  case NTK_EMISMATCH: return NTK_EXIT_USAGE;
  case NTK_EIO: return NTK_EXIT_IO;
  case NTK_ECORRUPT: return NTK_EXIT_CORRUPT;
  case NTK_EINCOMPLETE: return NTK_EXIT_INCOMPLETE;
  case NTK_EINTERRUPTED: return NTK_EXIT_INTERRUPTED;
  case NTK_ENOMEM:
  case NTK_ECOMM:
  case NTK_EINTERNAL: return NTK_EXIT_FAILURE;
  case NTK_ELOCKED: return NTK_EXIT_LOCKED;
  case NTK_ENONFINITE: return NTK_EXIT_NONFINITE;
  case NTK_ESTALLED: return NTK_EXIT_STALLED;
  }
  return NTK_EXIT_FAILURE;
}

/* " (the address-space limit, ulimit -v, is N MiB)" where one is set. */
static void memory_limit_hint(char *out, size_t cap) {
  struct rlimit as, data;
  int has_as = !getrlimit(RLIMIT_AS, &as) && as.rlim_cur != RLIM_INFINITY;
  int has_data = !getrlimit(RLIMIT_DATA, &data) && data.rlim_cur != RLIM_INFINITY;
  if (has_as)
    snprintf(out, cap, " (the address-space limit, ulimit -v, is %llu MiB)", (unsigned long long)(as.rlim_cur >> 20));
  else if (has_data)
    snprintf(out, cap, " (the data-size limit, ulimit -d, is %llu MiB)", (unsigned long long)(data.rlim_cur >> 20));
}

ntk_status ntk_error(ntk_status s, const char *fmt, ...) {
  /* Format into a copy: callers may pass ntk_error_message() as an argument. */
  char buf[sizeof last_message];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  /* Out of memory under a limit the user set: the limit is what to change
   * (a bare "out of memory" at 230 MB of a 24 GB machine said nothing). */
  if (s == NTK_ENOMEM && n >= 0 && (size_t)n < sizeof buf && !strstr(buf, "ulimit"))
    memory_limit_hint(buf + n, sizeof buf - (size_t)n);
  memcpy(last_message, buf, sizeof buf);
  return s;
}

const char *ntk_error_message(void) { return last_message; }

void ntk_error_clear(void) { last_message[0] = '\0'; }
