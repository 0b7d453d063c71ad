/* The writer lock: one holder at a time, released by death (even SIGKILL),
 * a holder named in the refusal, the cross-machine heartbeat check, and
 * NTKD_NO_LOCK. */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "base/fsutil.h"
#include "base/magic.h"
#include "store/lock.h"
#include "testutil.h"

static const char *dir;

START_TEST(test_one_holder) {
  char p[512], lp[520];
  tu_path(p, sizeof p, dir, "one.ntk");
  snprintf(lp, sizeof lp, "%s.lock", p);
  ntk_lock_t *a = NULL, *b = NULL;
  ck_assert_int_eq(ntk_lock_acquire(p, "store", &a), NTK_OK);
  ck_assert_ptr_nonnull(a);
  /* OFD locks conflict between open file descriptions, even in one process. */
  ck_assert_int_eq(ntk_lock_acquire(p, "store", &b), NTK_ELOCKED);
  ck_assert_ptr_null(b);
  char pid[32];
  snprintf(pid, sizeof pid, "pid %ld", (long)getpid());
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), pid));
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), ntk_hostname()));
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "nothing was changed"));
  char holder[600];
  ck_assert(ntk_lock_holder(p, holder, sizeof holder));
  ck_assert_ptr_nonnull(strstr(holder, pid));
  ntk_lock_release(a);
  ck_assert(!ntk_lock_holder(p, holder, sizeof holder));
  ck_assert_int_eq(access(lp, F_OK), -1); /* removed on release */
  ck_assert_int_eq(ntk_lock_acquire(p, "store", &b), NTK_OK);
  ntk_lock_release(b);
}
END_TEST

/* ntk_lock_check: a lock whose file stayed is intact; once the file was
 * removed and another holder locked a new one, or the heartbeat had to put
 * one back (another job may have held it in between), it is not, and stays
 * not. */
START_TEST(test_check_after_removal) {
  char p[512], lp[520];
  tu_path(p, sizeof p, dir, "check.preds");
  snprintf(lp, sizeof lp, "%s.lock", p);
  ntk_lock_t *a = NULL, *b = NULL;
  ck_assert_int_eq(ntk_lock_acquire(p, "set of predictions", &a), NTK_OK);
  ck_assert_int_eq(ntk_lock_check(a), NTK_OK);
  ck_assert_int_eq(ntk_lock_check(NULL), NTK_OK);
  ck_assert_int_eq(unlink(lp), 0);
  ck_assert_int_eq(ntk_lock_acquire(p, "set of predictions", &b), NTK_OK); /* the file gone: a second holder */
  ck_assert_int_eq(ntk_lock_check(b), NTK_OK);
  ck_assert_int_eq(ntk_lock_check(a), NTK_ELOCKED);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "was removed or replaced while this job held it"));
  ntk_lock_release(b);
  ck_assert_int_eq(ntk_lock_check(a), NTK_ELOCKED); /* and stays lost */
  ntk_lock_release(a);
  ck_assert_int_eq(access(lp, F_OK), -1);
  /* Removed and put back by the heartbeat (NTKD_TEST_LOCK_HEARTBEAT=1):
   * the file is this holder's again, and the check still fails. */
  setenv("NTKD_TEST_LOCK_HEARTBEAT", "1", 1);
  ck_assert_int_eq(ntk_lock_acquire(p, "set of predictions", &a), NTK_OK);
  ck_assert_int_eq(unlink(lp), 0);
  /* a hang guard only (30 s): a beat of 1 s may come late on a loaded machine */
  for (int i = 0; i < 3000 && access(lp, F_OK); i++) nanosleep(&(struct timespec){0, 10000000}, NULL);
  ck_assert_int_eq(access(lp, F_OK), 0);
  ck_assert_int_eq(ntk_lock_check(a), NTK_ELOCKED);
  ntk_lock_release(a); /* its heartbeat joined: the setting can go */
  unsetenv("NTKD_TEST_LOCK_HEARTBEAT");
}
END_TEST

/* A holder that has taken the lock and not yet written its name (the
 * microseconds between the two): the refusal waits for the name; a name
 * that never comes is said so, with no "kill -USR1 0" (a signal to the
 * reader's own process group). */
START_TEST(test_holder_not_yet_named) {
  char p[512], lp[520];
  tu_path(p, sizeof p, dir, "unnamed.ntk");
  snprintf(lp, sizeof lp, "%s.lock", p);
  int fd = open(lp, O_RDWR | O_CREAT | O_TRUNC, 0644);
  ck_assert_int_ge(fd, 0);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  ck_assert_int_eq(fcntl(fd, F_OFD_SETLK, &fl), 0);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  ntk_lock_t *l = NULL;
  ck_assert_int_eq(ntk_lock_acquire(p, "store", &l), NTK_ELOCKED);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double waited = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
  ck_assert_msg(waited >= 0.4, "refused after %.3f s, without waiting for the holder's name", waited);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "not yet written its name"));
  ck_assert_ptr_null(strstr(ntk_error_message(), "kill -USR1"));
  /* The name arriving 0.1 s later: the refusal names it. */
  pid_t child = fork();
  if (child == 0) {
    nanosleep(&(struct timespec){0, 100000000}, NULL);
    char text[256];
    int n = snprintf(text, sizeof text, NTK_MAGIC_LOCK " of %s\nhost=%s\npid=%ld\nstarted=now\n", p, ntk_hostname(), 4242L);
    _exit(pwrite(fd, text, (size_t)n, 0) == n ? 0 : 1);
  }
  ck_assert_int_eq(ntk_lock_acquire(p, "store", &l), NTK_ELOCKED);
  ck_assert_msg(strstr(ntk_error_message(), "pid 4242") && strstr(ntk_error_message(), "kill -USR1 4242"), "%s",
                ntk_error_message());
  int status;
  waitpid(child, &status, 0);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(fd);
  unlink(lp);
}
END_TEST

/* A holder killed with SIGKILL leaves its lock file behind but no lock. */
START_TEST(test_released_by_death) {
  char p[512];
  tu_path(p, sizeof p, dir, "death.ntk");
  int ready[2];
  ck_assert_int_eq(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    ntk_lock_t *l;
    if (ntk_lock_acquire(p, "store", &l)) _exit(3);
    if (write(ready[1], "x", 1) != 1) _exit(4);
    for (;;) pause();
  }
  char c;
  ck_assert_int_eq(read(ready[0], &c, 1), 1);
  ntk_lock_t *l = NULL;
  ck_assert_int_eq(ntk_lock_acquire(p, "store", &l), NTK_ELOCKED);
  kill(child, SIGKILL);
  int status;
  waitpid(child, &status, 0);
  ck_assert_int_eq(ntk_lock_acquire(p, "store", &l), NTK_OK);
  ntk_lock_release(l);
  close(ready[0]);
  close(ready[1]);
}
END_TEST

/* A lock file naming another machine, touched recently: that machine's
 * job holds a lock this file system does not share. Untouched for longer
 * than NTK_LOCK_STALE: a crashed job's leftover, taken over. */
START_TEST(test_other_machine) {
  char p[512], lp[520];
  tu_path(p, sizeof p, dir, "remote.ntk");
  snprintf(lp, sizeof lp, "%s.lock", p);
  const char text[] = "ntkd writer lock\nhost=some-other-node-17\npid=4242\nstarted=2026-11-30 10:00:00 +0000\n";
  tu_write(lp, text, sizeof text - 1);
  ntk_lock_t *l = NULL;
  ck_assert_int_eq(ntk_lock_acquire(p, "store", &l), NTK_ELOCKED);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "some-other-node-17"));
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "another machine"));
  struct timespec old[2] = {{time(NULL) - NTK_LOCK_STALE - 5, 0}, {time(NULL) - NTK_LOCK_STALE - 5, 0}};
  ck_assert_int_eq(utimensat(AT_FDCWD, lp, old, 0), 0);
  ck_assert_int_eq(ntk_lock_acquire(p, "store", &l), NTK_OK);
  ntk_lock_release(l);
}
END_TEST

/* A store named by a long path (here about 1 100 bytes, which a job's
 * store reaches through a link or `ntkd solve` names): the lock file
 * still names its holder. It was written from a 1 024-byte buffer (the
 * text cut short, and the bytes past the buffer written after it) and
 * read back 1 023 bytes at a time, so the holder's host was lost: a job
 * on another machine took over a live lock (exit 0, two writers). */
START_TEST(test_long_path_holder) {
  char p[1400], lp[1410], comp[201];
  memset(comp, 'l', 200);
  comp[200] = '\0';
  tu_path(p, sizeof p, dir, "");
  size_t at = strlen(p);
  for (int i = 0; i < 5; i++) at += (size_t)snprintf(p + at, sizeof p - at, "%s/", comp);
  snprintf(p + at, sizeof p - at, "long.ntk");
  ck_assert_int_eq(ntk_make_parents(p), NTK_OK);
  ck_assert_uint_gt(strlen(p), 1024);
  snprintf(lp, sizeof lp, "%s.lock", p);
  ntk_lock_t *l = NULL;
  ck_assert_msg(ntk_lock_acquire(p, "store", &l) == NTK_OK, "%s", ntk_error_message());
  char expect[2048], got[4096];
  snprintf(expect, sizeof expect, "host=%s\npid=%ld\n", ntk_hostname(), (long)getpid());
  int fd = open(lp, O_RDONLY);
  ck_assert_int_ge(fd, 0);
  ssize_t n = read(fd, got, sizeof got - 1);
  close(fd);
  ck_assert_int_gt(n, 0);
  got[n] = '\0';
  ck_assert_uint_eq(strlen(got), (size_t)n); /* no NUL, nothing past the text */
  ck_assert_ptr_nonnull(strstr(got, p));
  ck_assert_ptr_nonnull(strstr(got, expect));
  ntk_lock_release(l);
  /* Another machine's job holding it: refused. */
  char text[2048];
  int tn = snprintf(text, sizeof text, "ntkd writer lock of %s\nhost=some-other-node-17\npid=4242\n"
                    "started=2026-11-30 10:00:00 +0000\n", p);
  tu_write(lp, text, (size_t)tn);
  ck_assert_int_eq(ntk_lock_acquire(p, "store", &l), NTK_ELOCKED);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "some-other-node-17"));
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "another machine"));
  unlink(lp);
}
END_TEST

START_TEST(test_no_lock_setting) {
  char p[512];
  tu_path(p, sizeof p, dir, "nolock.ntk");
  ntk_lock_t *a = NULL, *b = NULL;
  ck_assert_int_eq(ntk_lock_acquire(p, "store", &a), NTK_OK);
  setenv("NTKD_NO_LOCK", "1", 1);
  ck_assert_int_eq(ntk_lock_acquire(p, "store", &b), NTK_OK); /* asked for: no locking */
  ck_assert_ptr_null(b);
  unsetenv("NTKD_NO_LOCK");
  ntk_lock_release(a);
  ntk_lock_release(NULL);
}
END_TEST

START_TEST(test_fifo_lock_file) {
  char p[512], lp[520];
  tu_path(p, sizeof p, dir, "fifo.ntk");
  snprintf(lp, sizeof lp, "%s.lock", p);
  ck_assert_int_eq(mkfifo(lp, 0600), 0);
  ntk_lock_t *l = NULL;
  alarm(10);
  ck_assert_int_eq(ntk_lock_acquire(p, "store", &l), NTK_EINPUT);
  alarm(0);
}
END_TEST

/* A lock file is truncated and rewritten: never through a symbolic link
 * (one pointing at an unrelated file would destroy it). */
START_TEST(test_symlink_lock_file) {
  char p[512], lp[520], victim[512];
  tu_path(p, sizeof p, dir, "sym.ntk");
  tu_path(victim, sizeof victim, dir, "precious.txt");
  snprintf(lp, sizeof lp, "%s.lock", p);
  tu_write(victim, "keep me\n", 8);
  ck_assert_int_eq(symlink(victim, lp), 0);
  ntk_lock_t *l = NULL;
  ck_assert_int_eq(ntk_lock_acquire(p, "store", &l), NTK_EINPUT); /* exit 2: rerunning would not help */
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "symbolic link"));
  ck_assert_ptr_null(l);
  char buf[16] = "";
  FILE *f = fopen(victim, "rb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fread(buf, 1, sizeof buf, f), 8);
  fclose(f);
  ck_assert_int_eq(memcmp(buf, "keep me\n", 8), 0);
}
END_TEST

/* The file's own lock: whatever name reaches the file (a hard link, a
 * symbolic link), one writer; the name lock through a symbolic link is the
 * lock file beside its target. */
START_TEST(test_file_lock) {
  char p[512], hard[512], sym[512];
  tu_path(p, sizeof p, dir, "file.ntk");
  tu_path(hard, sizeof hard, dir, "hard.ntk");
  tu_path(sym, sizeof sym, dir, "sym-to-file.ntk");
  tu_write(p, "data\n", 5);
  ck_assert_int_eq(link(p, hard), 0);
  ck_assert_int_eq(symlink(p, sym), 0);
  int a = open(p, O_RDWR), b = open(hard, O_RDWR);
  ck_assert_int_ge(a, 0);
  ck_assert_int_ge(b, 0);
  ck_assert(!ntk_lock_file_held(hard));
  ck_assert_int_eq(ntk_lock_file(a, p, "store", 1), NTK_OK);
  ck_assert(ntk_lock_file_held(hard));
  ck_assert_int_eq(ntk_lock_file(b, hard, "store", 1), NTK_ELOCKED);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "another name"));
  char holder[600];
  ck_assert(ntk_lock_holder(sym, holder, sizeof holder)); /* no lock file: the file's own lock */
  close(a);
  ck_assert(!ntk_lock_file_held(hard));
  ck_assert_int_eq(ntk_lock_file(b, hard, "store", 1), NTK_OK);
  close(b);
  ntk_lock_t *l = NULL, *m = NULL;
  ck_assert_int_eq(ntk_lock_acquire(p, "store", &l), NTK_OK);
  ck_assert_int_eq(ntk_lock_acquire(sym, "store", &m), NTK_ELOCKED);
  char lsym[530];
  snprintf(lsym, sizeof lsym, "%s.lock", sym);
  ck_assert_int_eq(access(lsym, F_OK), -1); /* none beside the link */
  ntk_lock_release(l);
}
END_TEST

int main(void) {
  dir = tu_tmpdir();
  Suite *s = suite_create("lock");
  TCase *tc = tcase_create("lock");
  tcase_add_test(tc, test_one_holder);
  tcase_add_test(tc, test_check_after_removal);
  tcase_add_test(tc, test_released_by_death);
  tcase_add_test(tc, test_holder_not_yet_named);
  tcase_add_test(tc, test_other_machine);
  tcase_add_test(tc, test_long_path_holder);
  tcase_add_test(tc, test_no_lock_setting);
  tcase_add_test(tc, test_fifo_lock_file);
  tcase_add_test(tc, test_symlink_lock_file);
  tcase_add_test(tc, test_file_lock);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
