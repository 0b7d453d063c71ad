/* The writer lock: see include/ntkd/lock.h. */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include "ntkd/lock.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ntkd/config.h"
#include "ntkd/fsutil.h"

struct ntk_lock {
  int fd;
  char path[NTK_PATH_MAX + 8]; /* the lock file */
  pthread_t beat;
  int beating;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int closing;
};

static int lock_path(const char *path, char *out, size_t cap) {
  int n = snprintf(out, cap, "%s.lock", path);
  return n > 0 && (size_t)n < cap;
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
  char buf[1024];
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

static void *heartbeat(void *arg) {
  ntk_lock_t *l = arg;
  pthread_mutex_lock(&l->mu);
  while (!l->closing) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += NTK_LOCK_HEARTBEAT;
    pthread_cond_timedwait(&l->cv, &l->mu, &until);
    if (!l->closing) futimens(l->fd, NULL); /* best effort: a failure only weakens the cross-host check */
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
  if (!lock_path(path, l->path, sizeof l->path)) {
    free(l);
    return ntk_error(NTK_EUSAGE, "%s: path too long", path);
  }
  ntk_status st = ntk_make_parents(path);
  /* A releasing job removes the file: if ours was removed between our
   * open and our lock, the lock is on a dead inode; try again. */
  for (int attempt = 0; !st && attempt < 20; attempt++) {
    /* Never through a symbolic link: the file is truncated and rewritten. */
    if ((st = ntk_open_regular(l->path, O_RDWR | O_CREAT | O_NOFOLLOW, "lock file", &l->fd))) break;
    if (try_lock(l->fd, F_WRLCK)) {
      int e = errno;
      if (e == EAGAIN || e == EACCES) {
        struct holder h;
        char who[512];
        read_holder(l->fd, &h);
        describe(&h, who, sizeof who);
        st = ntk_error(NTK_ELOCKED, "%s: the %s is in use by another running job (%s); nothing was changed. "
                       "Wait for it to finish, or stop it (kill -USR1 %ld on %s) and run again", path, what,
                       who, h.pid, h.host[0] ? h.host : "its host");
      } else {
        st = ntk_error(NTK_EIO, "%s: cannot lock: %s (this file system may not support locks: see "
                       "docs/RELIABILITY.md, NTKD_NO_LOCK)", l->path, strerror(e));
      }
      break;
    }
    struct stat a, b;
    if (fstat(l->fd, &a) || stat(l->path, &b) || a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
      close(l->fd);
      l->fd = -1;
      continue;
    }
    /* We hold the kernel lock. A name of another host, touched recently,
     * means that host's job holds a lock we cannot see: this file system
     * does not share locks between machines. */
    struct holder h;
    if (read_holder(l->fd, &h) && strcmp(h.host, ntk_hostname()) &&
        time(NULL) - h.mtime < NTK_LOCK_STALE) {
      char who[512];
      describe(&h, who, sizeof who);
      st = ntk_error(NTK_ELOCKED, "%s: the %s is in use by a job on another machine (%s, alive %lds ago); "
                     "this file system's locks are not shared between machines (docs/RELIABILITY.md). Nothing "
                     "was changed; run again once it has stopped", path, what, who,
                     (long)(time(NULL) - h.mtime));
      break;
    }
    char text[1024], when[64];
    time_t now = time(NULL);
    struct tm tmv;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %z", localtime_r(&now, &tmv));
    int n = snprintf(text, sizeof text, "ntkd writer lock of %s\nhost=%s\npid=%ld\nstarted=%s\n", path,
                     ntk_hostname(), (long)getpid(), when);
    if (ftruncate(l->fd, 0) || pwrite(l->fd, text, (size_t)n, 0) != n)
      st = ntk_error(NTK_EIO, "%s: cannot write: %s", l->path, strerror(errno));
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
  free(l);
  return st;
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
   * check and opens the new one. */
  unlink(l->path);
  close(l->fd);
  free(l);
}

int ntk_lock_holder(const char *path, char *holder, size_t cap) {
  char lp[NTK_PATH_MAX + 8];
  if (cap) holder[0] = '\0';
  if (!lock_path(path, lp, sizeof lp) || ntk_check_regular(lp, NULL)) return 0;
  int fd = open(lp, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return 0;
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  int held = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
  if (held) {
    struct holder h;
    read_holder(fd, &h);
    describe(&h, holder, cap);
  }
  close(fd);
  return held;
}
