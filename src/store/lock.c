/* The writer lock: see src/store/lock.h. */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include "store/lock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/defs.h"
#include "base/fsutil.h"
#include "base/magic.h"

struct ntk_lock {
  int fd;
  char path[PATH_MAX + 8];      /* the lock file */
  char store[PATH_MAX];         /* what it locks, as named in it */
  struct ntk_made_folders made; /* the folders made for it, removed again if left empty */
  pthread_t beat;
  int beating;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int closing;
  int lost; /* PATH.lock was seen not to be this holder's (ntk_lock_check) */
};

/* PATH.lock beside the file the name reaches (a symbolic link to a store
 * and the store itself share one lock file). */
static ntk_status lock_path(const char *path, char *out, size_t cap) {
  char file[PATH_MAX];
  ntk_status st = ntk_resolve_links(path, file, sizeof file);
  if (st) return st;
  const char *slash = strrchr(file, '/'), *base = slash ? slash + 1 : file;
  if (strlen(base) + 5 > NAME_MAX)
    return ntk_error(NTK_EUSAGE, "%s: the name is %zu bytes; ntkd keeps NAME.lock beside it, so the name may "
                     "have at most %d bytes", path, strlen(base), NAME_MAX - 5);
  int n = snprintf(out, cap, "%s.lock", file);
  if (n <= 0 || (size_t)n >= cap) return ntk_error(NTK_EUSAGE, "%s: path too long", path);
  return NTK_OK;
}

/* The holder's description from the lock file: "host H, pid P, since T". */
struct holder {
  char host[256];
  long pid;
  char since[64];
  time_t mtime;
};

static int read_holder(int fd, struct holder *h) {
  memset(h, 0, sizeof *h);
  char buf[PATH_MAX + 512]; /* all that write_holder writes */
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  struct stat sb;
  if (n <= 0 || fstat(fd, &sb)) return 0;
  buf[n] = '\0';
  h->mtime = sb.st_mtime;
  for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
    if (!strncmp(line, "host=", 5)) snprintf(h->host, sizeof h->host, "%s", line + 5);
    else if (!strncmp(line, "pid=", 4)) h->pid = strtol(line + 4, NULL, 10);
    else if (!strncmp(line, "started=", 8)) snprintf(h->since, sizeof h->since, "%s", line + 8);
  }
  return h->host[0] != '\0';
}

static void describe(const struct holder *h, char *out, size_t cap) {
  if (!h->host[0]) snprintf(out, cap, "a job that has not yet written its name");
  else snprintf(out, cap, "host %s, pid %ld, since %s", h->host, h->pid, h->since);
}

static int try_lock(int fd, int type) {
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = (short)type;
  fl.l_whence = SEEK_SET;
  return fcntl(fd, F_OFD_SETLK, &fl);
}

/* Open PATH.lock for taking it, creating it if missing: only a file that is
 * ntkd's to rewrite. Never through a symbolic link, and never a file with
 * other names (a hard link: rewriting it would rewrite the data or store
 * the other name holds), nor one that holds anything but a lock's text
 * (empty: a holder killed between its truncate and its write). NTK_EINPUT
 * (exit 2) saying which, and the file is untouched. */
static ntk_status open_lock_file(const char *path, int *fd) {
  ntk_status st = ntk_open_regular(path, O_RDWR | O_CREAT | O_NOFOLLOW, "lock file", fd);
  if (st) return st;
  struct stat sb;
  char head[sizeof NTK_MAGIC_LOCK] = "";
  ssize_t n = fstat(*fd, &sb) ? -1 : pread(*fd, head, sizeof head - 1, 0);
  const char *why = n < 0 ? NULL
                    : sb.st_nlink > 1 ? "it has other names (a hard link): ntkd rewrites its lock file and would "
                                        "rewrite the file they name"
                    : memcmp(head, NTK_MAGIC_LOCK, (size_t)n) /* a prefix of it: a holder writing it now */
                        ? "it is not an ntkd lock file (ntkd rewrites and removes its lock file): move it away"
                        : NULL;
  if (n < 0) st = ntk_error(NTK_EIO, "%s: cannot read: %s", path, strerror(errno));
  else if (why) st = ntk_error(NTK_EINPUT, "%s is not a lock file ntkd may take: %s", path, why);
  if (st) {
    close(*fd);
    *fd = -1;
  }
  return st;
}

/* Whether the folder that holds `path` does not exist. */
static int folder_gone(const char *path) {
  char dir[PATH_MAX + 8];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir) return 0;
  *slash = '\0';
  struct stat sb;
  return stat(dir, &sb) != 0 && errno == ENOENT;
}

/* Whether PATH.lock is still the file this holder locked. */
static int still_ours(const ntk_lock_t *l) {
  struct stat a, b;
  return fstat(l->fd, &a) == 0 && lstat(l->path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

/* Write the holder's description into a lock file this process holds. */
static int write_holder(int fd, const char *path) {
  /* Whole, whatever the path's length: a holder cut short has no host
   * line, and a job on another machine would take its lock over. */
  char text[PATH_MAX + 512], when[64];
  time_t now = time(NULL);
  struct tm tmv;
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %z", localtime_r(&now, &tmv));
  int n = snprintf(text, sizeof text, NTK_MAGIC_LOCK " of %s\nhost=%s\npid=%ld\nstarted=%s\n", path, ntk_hostname(),
                   (long)getpid(), when);
  if (n <= 0 || (size_t)n >= sizeof text) {
    errno = ENAMETOOLONG;
    return 0;
  }
  return ftruncate(fd, 0) == 0 && pwrite(fd, text, (size_t)n, 0) == n;
}

/* PATH.lock was removed, renamed or replaced while this job holds the
 * store: put a locked one naming this job back, so that `info` and a job
 * on a machine that does not share locks still see the holder. Where
 * another process holds the file now there, leave it (the store's own
 * lock, ntk_lock_file, still keeps its writer out). Under l->mu. */
static void reestablish(ntk_lock_t *l) {
  int fd = -1;
  if (open_lock_file(l->path, &fd)) return;
  if (try_lock(fd, F_WRLCK) || !write_holder(fd, l->store)) {
    close(fd);
    return;
  }
  close(l->fd);
  l->fd = fd;
}

/* Once per process: a test setting left set by mistake is seen (docs/CLI.md). */
static void say_test_heartbeat(void) {
  fprintf(stderr, "ntkd: test setting NTKD_TEST_LOCK_HEARTBEAT=%s\n", getenv("NTKD_TEST_LOCK_HEARTBEAT"));
}

static void *heartbeat(void *arg) {
  ntk_lock_t *l = arg;
  /* NTKD_TEST_LOCK_HEARTBEAT: a shorter beat, for the tests. */
  const char *v = getenv("NTKD_TEST_LOCK_HEARTBEAT");
  static pthread_once_t said = PTHREAD_ONCE_INIT;
  if (v) pthread_once(&said, say_test_heartbeat);
  int beat = v && atoi(v) > 0 ? atoi(v) : NTK_LOCK_HEARTBEAT;
  pthread_mutex_lock(&l->mu);
  while (!l->closing) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += beat;
    pthread_cond_timedwait(&l->cv, &l->mu, &until);
    if (l->closing) break;
    if (!still_ours(l)) {
      l->lost = 1;
      reestablish(l);
    }
    futimens(l->fd, NULL); /* best effort: a failure only weakens the cross-host check */
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

ntk_status ntk_lock_acquire(const char *path, const char *what, ntk_lock_t **out) {
  *out = NULL;
  const char *off = getenv("NTKD_NO_LOCK");
  if (off && !strcmp(off, "1")) return NTK_OK;
  ntk_lock_t *l = calloc(1, sizeof *l);
  if (!l) return ntk_error(NTK_ENOMEM, "out of memory");
  l->fd = -1;
  ntk_status st = lock_path(path, l->path, sizeof l->path);
  if (st) {
    free(l);
    return st;
  }
  snprintf(l->store, sizeof l->store, "%s", path);
  st = ntk_make_parents_noted(l->path, &l->made);
  /* A releasing job removes the file: if ours was removed between our
   * open and our lock, the lock is on a dead inode; try again. */
  for (int attempt = 0; !st && attempt < 20; attempt++) {
    /* Never through a symbolic link or a hard link, nor over a file that
     * is not a lock: the file is truncated and rewritten. */
    if ((st = open_lock_file(l->path, &l->fd))) {
      /* Its folder removed since our mkdir (a refused job taking back the
       * folders it made, ntk_remove_made_folders): made again, tried again. */
      int had = l->made.n;
      if (folder_gone(l->path) && !ntk_make_parents_noted(l->path, &l->made) && l->made.n > had) {
        st = NTK_OK;
        continue;
      } /* else (a folder that is a dangling link, say) the open's own error */
      break;
    }
    if (try_lock(l->fd, F_WRLCK)) {
      int e = errno;
      if (e == EAGAIN || e == EACCES) {
        struct holder h;
        char who[512];
        /* The holder writes its name right after taking the lock: a job
         * that lost the race by microseconds waits up to 0.5 s for it. */
        for (int wait = 0; !read_holder(l->fd, &h) && wait < 50; wait++) nanosleep(&(struct timespec){0, 10000000}, NULL);
        describe(&h, who, sizeof who);
        if (h.host[0] && h.pid > 0)
          st = ntk_error(NTK_ELOCKED, "%s: the %s is in use by another running job (%s); nothing was changed. "
                         "Wait for it to finish, or stop it (kill -USR1 %ld on %s) and run again", path, what,
                         who, h.pid, h.host);
        else /* never "kill -USR1 0": that signals the caller's own process group */
          st = ntk_error(NTK_ELOCKED, "%s: the %s is in use by another running job (%s); nothing was changed. "
                         "Wait for it to finish and run again", path, what, who);
      } else {
        st = ntk_error(NTK_EIO, "%s: cannot lock: %s (this file system may not support locks: see "
                       "docs/RELIABILITY.md, NTKD_NO_LOCK)", l->path, strerror(e));
      }
      break;
    }
    if (!ntk_fd_at_path(l->fd, l->path)) {
      close(l->fd);
      l->fd = -1;
      continue;
    }
    /* We hold the kernel lock. A name of another host, touched recently,
     * means that host's job holds a lock we cannot see: this file system
     * does not share locks between machines. */
    struct holder h;
    /* A file touched in the future (that host's clock, or the file
     * server's, runs ahead of ours) counts as alive: taking over a lock
     * that may be live would let two jobs write one file. */
    if (read_holder(l->fd, &h) && strcmp(h.host, ntk_hostname()) && time(NULL) - h.mtime < NTK_LOCK_STALE) {
      char who[512], age[sizeof l->path + 160];
      describe(&h, who, sizeof who);
      long ago = (long)(time(NULL) - h.mtime);
      if (ago >= 0) snprintf(age, sizeof age, "alive %lds ago", ago);
      else snprintf(age, sizeof age, "its lock file touched %lds in the future: the clocks disagree; if no job "
                    "runs there, remove %s", -ago, l->path);
      st = ntk_error(NTK_ELOCKED, "%s: the %s is in use by a job on another machine (%s, %s); "
                     "this file system's locks are not shared between machines (docs/RELIABILITY.md). Nothing "
                     "was changed; run again once it has stopped", path, what, who, age);
      break;
    }
    if (!write_holder(l->fd, path)) st = ntk_error(NTK_EIO, "%s: cannot write: %s", l->path, strerror(errno));
    if (!st) {
      pthread_mutex_init(&l->mu, NULL);
      pthread_cond_init(&l->cv, NULL);
      l->beating = pthread_create(&l->beat, NULL, heartbeat, l) == 0;
      *out = l;
      return NTK_OK;
    }
    break;
  }
  if (!st) st = ntk_error(NTK_EIO, "%s: the lock file keeps being replaced by another job", l->path);
  if (l->fd >= 0) close(l->fd);
  ntk_remove_made_folders(l->path, &l->made);
  free(l);
  return st;
}

ntk_status ntk_lock_check(ntk_lock_t *l) {
  if (!l) return NTK_OK;
  pthread_mutex_lock(&l->mu);
  if (!still_ours(l)) l->lost = 1;
  int lost = l->lost;
  pthread_mutex_unlock(&l->mu);
  return lost ? ntk_error(NTK_ELOCKED, "%s was removed or replaced while this job held it, so another job may have "
                          "taken it meanwhile", l->path)
              : NTK_OK;
}

void ntk_lock_release(ntk_lock_t *l) {
  if (!l) return;
  if (l->beating) {
    pthread_mutex_lock(&l->mu);
    l->closing = 1;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->beat, NULL);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
  }
  /* Unlink while holding: a job that opened the old file fails its inode
   * check and opens the new one. Only our own: a file put there since
   * (and not taken back by the heartbeat) is someone else's. */
  if (still_ours(l)) unlink(l->path);
  close(l->fd);
  ntk_remove_made_folders(l->path, &l->made);
  free(l);
}

/* The byte the writer of a store locks: far past anything a file holds,
 * so that MPI-IO's locks on the ranges it writes never meet it. */
#define FILE_LOCK_BYTE ((off_t)1 << 62)

static int file_lock_op(int fd, int cmd, struct flock *fl, short type) {
  memset(fl, 0, sizeof *fl);
  fl->l_type = type;
  fl->l_whence = SEEK_SET;
  fl->l_start = FILE_LOCK_BYTE;
  fl->l_len = 1;
  return fcntl(fd, cmd, fl);
}

ntk_status ntk_lock_file(int fd, const char *path, const char *what, int lock_file) {
  const char *off = getenv("NTKD_NO_LOCK");
  if (off && !strcmp(off, "1")) return NTK_OK;
  struct flock fl;
  if (file_lock_op(fd, F_OFD_SETLK, &fl, F_WRLCK) == 0) return NTK_OK;
  int e = errno;
  /* With a lock file (PATH.lock) beside it, that lock file was passed
   * before this one: the other job reaches the file by another name or
   * its lock file is gone. Without one, this is the only lock. */
  if (e == EAGAIN || e == EACCES)
    return ntk_error(NTK_ELOCKED, "%s: the %s is being written by another running job%s; nothing was changed. Wait "
                     "for that job to finish, or stop it, and run again", path, what,
                     lock_file ? ", which reaches it by another name (a hard link, another mount, a symbolic link) "
                                 "or took it after its lock file was removed or replaced"
                               : " (by this name or another)");
  return ntk_error(NTK_EIO, "%s: cannot lock: %s (this file system may not support locks: see "
                   "docs/RELIABILITY.md, NTKD_NO_LOCK)", path, strerror(e));
}

int ntk_lock_file_held(const char *path) {
  int fd = -1;
  if (ntk_open_regular(path, O_RDONLY, "store", &fd)) return 0;
  struct flock fl;
  int held = file_lock_op(fd, F_OFD_GETLK, &fl, F_WRLCK) == 0 && fl.l_type != F_UNLCK;
  close(fd);
  return held;
}

int ntk_lock_holder(const char *path, char *holder, size_t cap) {
  char lp[PATH_MAX + 8] = "PATH.lock";
  if (cap) holder[0] = '\0';
  int held = 0, fd = -1;
  if (!lock_path(path, lp, sizeof lp) && !ntk_check_regular(lp, NULL) &&
      (fd = open(lp, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)) >= 0) {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    held = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    if (held) {
      struct holder h;
      read_holder(fd, &h);
      describe(&h, holder, cap);
    }
    close(fd);
  }
  /* The file's own lock: a writer whose lock file is gone, or that
   * reaches the file by another name. */
  if (!held && ntk_lock_file_held(path)) {
    held = 1;
    snprintf(holder, cap, "a job whose lock file is not %s: it reaches the file by another name, or its lock "
             "file was removed", lp);
  }
  return held;
}
