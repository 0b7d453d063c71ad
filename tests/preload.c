/* Events of a run seen from inside ntkd without changing it, for the
 * end-to-end tests: an LD_PRELOAD library (built with mpicc), so that a
 * signal meets the run at an event and not after a delay that a loaded
 * machine stretches, and so that a test can count what ntkd read.
 *   STOPAT=start        raise the signal in this library's constructor: after
 *                       main.c's .preinit_array has blocked the stop signals,
 *                       before main() (a signal during start-up);
 *   STOPAT=open         raise it when a file whose name ends in STOPAT_PATH is
 *                       opened (the data file, the store: during set-up);
 *   STOPAT=open_prefix  when a file whose base name begins with STOPAT_PATH is
 *                       opened (NAME.tmp.HOST.PID, a file being written);
 *   STOPAT=mpi_init     in MPI_Init, hold the rank until a stop signal has
 *                       arrived (it stays pending meanwhile), then let the
 *                       handler take it and go on into MPI_Init: the test
 *                       signals mpirun while every rank is starting.
 * STOPAT_SIGNAL: the signal number (default SIGTERM). STOPAT_MARK: a file
 * written when the moment came (STOPAT_MARK.RANK for mpi_init), so that the
 * test knows the signal met the run where it wanted.
 * READ_BYTES=FILE: at exit, the bytes the process read (rchar of
 * /proc/self/io) are written to FILE.
 * FAIL_FDATASYNC=K: the K-th fdatasync of the process (1-based) fails with
 * EIO without syncing, as a disk that lost the write (a store's sync).
 * FAIL_FOLDER_FSYNC=1: every fsync of a folder fails with EIO (the sync
 * that makes a rename last: a file put in place must not be reported
 * written when its new name may be lost).
 * FAIL_INDEX_WRITE=K: the K-th write() to a file whose name ends in
 * ".index" (a store's index, appended at each sync) fails with EDQUOT and
 * writes nothing, as a disk quota met there.
 * TAKE_FOLDERS=mkdir: the first mkdir that finds its folder there (EEXIST)
 * and empty removes it before returning, as another job taking back the
 * empty folders it made would between this mkdir and the next;
 * TAKE_FOLDERS=lock: the first open that creates a NAME.lock removes the
 * (empty) folder it is to go into first. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int is(const char *where) {
  const char *w = getenv("STOPAT");
  return w && !strcmp(w, where);
}

static void mark(const char *suffix) {
  const char *m = getenv("STOPAT_MARK");
  if (!m) return;
  char path[4096];
  snprintf(path, sizeof path, "%s%s", m, suffix);
  FILE *f = fopen(path, "w");
  if (f) fprintf(f, "%d\n", (int)getpid()), fclose(f);
}

static void stop_now(void) {
  static int done;
  if (done) return;
  done = 1;
  mark("");
  const char *s = getenv("STOPAT_SIGNAL");
  raise(s ? atoi(s) : SIGTERM);
}

__attribute__((constructor)) static void at_start(void) {
  if (is("start")) stop_now();
}

__attribute__((destructor)) static void at_exit_read_bytes(void) {
  const char *out = getenv("READ_BYTES");
  if (!out) return;
  FILE *io = fopen("/proc/self/io", "r"), *f;
  char line[256];
  long long rchar = -1;
  while (io && fgets(line, sizeof line, io))
    if (sscanf(line, "rchar: %lld", &rchar) == 1) break;
  if (io) fclose(io);
  if ((f = fopen(out, "w"))) fprintf(f, "%lld\n", rchar), fclose(f);
}

static void at_open(const char *path) {
  const char *want = getenv("STOPAT_PATH");
  if (!want || !path) return;
  size_t n = strlen(path), w = strlen(want);
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  if (is("open") && n >= w && !strcmp(path + n - w, want) && (n == w || path[n - w - 1] == '/')) stop_now();
  if (is("open_prefix") && !strncmp(base, want, w)) stop_now();
}

static int real_open(const char *name, const char *path, int flags, mode_t mode) {
  int (*next)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, name);
  const char *take = getenv("TAKE_FOLDERS");
  static int taken;
  size_t n = strlen(path);
  if (take && !strcmp(take, "lock") && (flags & O_CREAT) && n > 5 && !strcmp(path + n - 5, ".lock") &&
      !__atomic_exchange_n(&taken, 1, __ATOMIC_SEQ_CST)) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0', rmdir(dir);
  }
  return next(path, flags, mode);
}

int mkdir(const char *path, mode_t mode) {
  int (*next)(const char *, mode_t) = (int (*)(const char *, mode_t))dlsym(RTLD_NEXT, "mkdir");
  int rc = next(path, mode), e = errno;
  const char *take = getenv("TAKE_FOLDERS");
  static int taken;
  if (rc && e == EEXIST && take && !strcmp(take, "mkdir") && !__atomic_load_n(&taken, __ATOMIC_SEQ_CST) &&
      rmdir(path) == 0)
    __atomic_store_n(&taken, 1, __ATOMIC_SEQ_CST);
  errno = e;
  return rc;
}

int open(const char *path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  at_open(path);
  return real_open("open", path, flags, mode);
}

int open64(const char *path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  at_open(path);
  return real_open("open64", path, flags, mode);
}

int fdatasync(int fd) {
  static int calls;
  const char *k = getenv("FAIL_FDATASYNC");
  if (k && __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST) == atoi(k)) {
    errno = EIO;
    return -1;
  }
  int (*next)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  return next(fd);
}

ssize_t write(int fd, const void *buf, size_t len) {
  static int calls;
  const char *k = getenv("FAIL_INDEX_WRITE");
  if (k) {
    char link[64], name[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, name, sizeof name - 1);
    if (n >= 6 && !memcmp(name + n - 6, ".index", 6) && __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST) == atoi(k)) {
      errno = EDQUOT;
      return -1;
    }
  }
  ssize_t (*next)(int, const void *, size_t) = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
  return next(fd, buf, len);
}

int fsync(int fd) {
  struct stat st;
  if (getenv("FAIL_FOLDER_FSYNC") && !fstat(fd, &st) && S_ISDIR(st.st_mode)) {
    errno = EIO;
    return -1;
  }
  int (*next)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  return next(fd);
}

int MPI_Init(int *argc, char ***argv) {
  if (is("mpi_init")) {
    sigset_t stop, old, pending;
    sigemptyset(&stop);
    int sigs[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP};
    for (int i = 0; i < 4; i++) sigaddset(&stop, sigs[i]);
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    char suffix[64];
    snprintf(suffix, sizeof suffix, ".%s", r ? r : "0");
    mark(suffix);
    /* At most 10 minutes (a hang guard): without the signal the job runs
     * to its end and the test fails on its exit code. */
    for (int k = 0; k < 60000; k++) {
      sigpending(&pending);
      int got = 0;
      for (int i = 0; i < 4; i++) got |= sigismember(&pending, sigs[i]) == 1;
      if (got) break;
      nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL); /* the pending signal reaches ntkd's handler here */
  }
  return PMPI_Init(argc, argv);
}
