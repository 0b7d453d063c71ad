/* One writer per file: the job that writes a store (or a training
 * snapshot) holds an exclusive lock for its whole life, so a second job on
 * the same output touches nothing and says who holds it.
 *
 * The lock is an open-file-description lock (fcntl F_OFD_SETLK) on
 * PATH.lock: the kernel drops it when the holder dies, even by SIGKILL, so
 * a resume after a crash is never blocked. The file names the holder
 * (host, pid, start time) and a thread touches it every
 * NTK_LOCK_HEARTBEAT seconds (and put back if it was removed or replaced
 * meanwhile): on a shared file system whose locks are not
 * shared between machines (Lustre without -o flock, NFS without lockd), a
 * job on another machine still sees a live holder by that heartbeat and
 * refuses. docs/RELIABILITY.md has the details. Rank-local. */
#ifndef NTKD_LOCK_H
#define NTKD_LOCK_H

#include <stddef.h>

#include "base/status.h"

#define NTK_LOCK_HEARTBEAT 10     /* seconds between touches of the lock file */
#define NTK_LOCK_STALE 120        /* a lock file of another host untouched this long is stale */

typedef struct ntk_lock ntk_lock_t;

/* Take the lock on `path` (the store or snapshot; the lock file is
 * PATH.lock beside the file that symbolic links in the name reach,
 * created if missing). `what` names the file in messages
 * ("store", "snapshot"). NTK_ELOCKED with the holder's host, pid and start
 * time when another job holds it; NTK_EIO/NTK_EINPUT when the lock file
 * cannot be made. NTKD_NO_LOCK=1 in the environment skips locking (for
 * file systems without working locks; docs/RELIABILITY.md). */
ntk_status ntk_lock_acquire(const char *path, const char *what, ntk_lock_t **out);

/* Whether this holder's lock has been its own throughout: NTK_ELOCKED
 * (saying so) once PATH.lock has been seen removed or replaced, now or by
 * the heartbeat (which puts one back: between the two another job may have
 * locked a file of its own and written). For a lock that is the only one
 * on what it guards (the predictions of a solve; a store also has
 * ntk_lock_file). Accepts NULL (no lock: NTKD_NO_LOCK). */
ntk_status ntk_lock_check(ntk_lock_t *l);

/* Release: the lock file is removed, then the lock dropped. Accepts NULL. */
void ntk_lock_release(ntk_lock_t *l);

/* Whether a job holds the lock on `path` now (PATH.lock's, or the file's
 * own: ntk_lock_file); if so `holder` (cap bytes) gets "host H, pid P,
 * since T", or says that the writer's lock file is elsewhere or gone.
 * For `info` and `verify`. */
int ntk_lock_holder(const char *path, char *holder, size_t cap);

/* The lock that belongs to the file itself, whatever name reaches it (a
 * hard link, another mount, a symbolic link) and whatever happens to
 * PATH.lock meanwhile: an OFD lock on one byte far past any data, taken
 * through `fd` (open for writing) and held while that open file
 * description lives. The store's writer takes it before it writes
 * anything (store/store.h). NTK_ELOCKED when another job holds it; NTK_EIO
 * when the file system refuses locks. NTKD_NO_LOCK=1 skips it. lock_file:
 * whether the file also has a PATH.lock, taken first (a store); the
 * message then says how another job got past it. */
ntk_status ntk_lock_file(int fd, const char *path, const char *what, int lock_file);

/* Whether some process holds ntk_lock_file's lock on `path` now. */
int ntk_lock_file_held(const char *path);

#endif
