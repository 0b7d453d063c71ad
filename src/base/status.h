/* Status codes shared by every module, the last error message, and the
 * mapping from status to the documented process exit codes. */
#ifndef NTKD_STATUS_H
#define NTKD_STATUS_H

#include <stddef.h>

typedef enum ntk_status {
  NTK_OK = 0,
  NTK_EUSAGE,       /* bad command line */
  NTK_ECONFIG,      /* bad job file */
  NTK_EINPUT,       /* bad or unreadable data file */
  NTK_EMISMATCH,    /* store belongs to another job */
  NTK_EIO,          /* read/write/fsync failure on the store or export */
  NTK_ECORRUPT,     /* damaged store contents */
  NTK_EINCOMPLETE,  /* store lacks tiles an operation needs */
  NTK_ENOMEM,
  NTK_EINTERRUPTED, /* stopped by a signal, resumable */
  NTK_ECOMM,        /* MPI failure */
  NTK_EINTERNAL,
  NTK_ELOCKED,      /* the store (or snapshot) is in use by another running job */
  NTK_ENONFINITE,   /* a computed kernel value is not finite (exceeds the precision) */
  NTK_ESTALLED,     /* a worker stopped answering; what arrived is stored */
} ntk_status;

/* Process exit codes (documented in docs/CLI.md). */
enum {
  NTK_EXIT_OK = 0,
  NTK_EXIT_FAILURE = 1,     /* internal error, out of memory, MPI failure */
  NTK_EXIT_USAGE = 2,       /* bad usage, config, input, or store of another job */
  NTK_EXIT_IO = 3,          /* I/O failure; finished tiles are kept */
  NTK_EXIT_CORRUPT = 4,     /* damaged store found (verify, export) */
  NTK_EXIT_INTERRUPTED = 5, /* signal received; rerun to resume */
  NTK_EXIT_INCOMPLETE = 6,  /* export of a store that is not finished */
  NTK_EXIT_LOCKED = 7,      /* the store is in use by another running job; nothing touched */
  NTK_EXIT_NONFINITE = 8,   /* a kernel value is not finite; finished tiles are kept */
  NTK_EXIT_STALLED = 9,     /* a worker stopped answering; tiles received are kept, rerun to resume */
};

/* Name of a status, e.g. "configuration error". Rank-local, static memory. */
const char *ntk_status_str(ntk_status s);

/* Exit code for a status. */
int ntk_status_exit_code(ntk_status s);

/* Record a formatted message for the current error and return s.
 * Rank-local; the message lives in a static buffer until the next call. */
ntk_status ntk_error(ntk_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The message recorded by the last ntk_error(), "" if none. */
const char *ntk_error_message(void);

/* Forget the recorded message. */
void ntk_error_clear(void);

#endif
