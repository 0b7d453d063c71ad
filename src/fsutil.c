/* File-system helpers: see include/ntkd/fsutil.h. */
#include "ntkd/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntkd/config.h"

static const char *kind_of(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISDIR(m)) return "a folder";
  return "not a regular file";
}

static ntk_status not_regular(const char *path, const char *what, mode_t m) {
  return ntk_error(NTK_EINPUT, "%s is %s, not a regular file%s%s%s", path, kind_of(m), what ? " (" : "",
                   what ? what : "", what ? ")" : "");
}

ntk_status ntk_check_regular(const char *path, const char *what) {
  struct stat sb;
  if (stat(path, &sb)) return NTK_OK; /* absent (or unreachable: the open that follows reports it) */
  return S_ISREG(sb.st_mode) ? NTK_OK : not_regular(path, what, sb.st_mode);
}

ntk_status ntk_open_regular(const char *path, int flags, const char *what, int *fd) {
  *fd = -1;
  /* Checked before open(): opening a FIFO blocks until a writer comes,
   * opening some devices has effects of its own. */
  ntk_status st = ntk_check_regular(path, what);
  if (st) return st;
  /* O_NONBLOCK closes the race with a FIFO put there after the stat. */
  int f = open(path, flags | O_CLOEXEC | O_NONBLOCK, 0644);
  if (f < 0) {
    int e = errno;
    if (e == ENXIO) return not_regular(path, what, S_IFIFO);
    return ntk_error(e == ENOENT ? NTK_EUSAGE : NTK_EIO, "%s: cannot open: %s", path, strerror(e));
  }
  struct stat sb;
  if (fstat(f, &sb) || !S_ISREG(sb.st_mode)) {
    mode_t m = sb.st_mode;
    close(f);
    return not_regular(path, what, m);
  }
  int fl = fcntl(f, F_GETFL);
  if (fl != -1) fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
  *fd = f;
  return NTK_OK;
}

/* `path` made absolute with its folder resolved (the file itself need not
 * exist): "a/../b/x.npy" and "/w/b/x.npy" agree. */
static void canonical(const char *path, char *out, size_t cap) {
  char dir[PATH_MAX], res[PATH_MAX];
  const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == path) snprintf(dir, sizeof dir, "/");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  if (realpath(dir, res)) snprintf(out, cap, "%s/%s", strcmp(res, "/") ? res : "", base);
  else snprintf(out, cap, "%s", path);
}

int ntk_same_file(const char *a, const char *b) {
  struct stat sa, sb;
  int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
  if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (ea != eb) return 0;
  char ca[PATH_MAX + 256], cb[PATH_MAX + 256];
  canonical(a, ca, sizeof ca);
  canonical(b, cb, sizeof cb);
  return !strcmp(ca, cb);
}

ntk_status ntk_check_outputs(const struct ntk_named_path *in, size_t nin, const struct ntk_named_path *out,
                             size_t nout) {
  for (size_t i = 0; i < nout; i++) {
    if (!out[i].path || !*out[i].path) continue;
    for (size_t k = 0; k < nin; k++)
      if (in[k].path && *in[k].path && ntk_same_file(out[i].path, in[k].path))
        return ntk_error(NTK_EUSAGE, "%s (%s) is also %s: an output never replaces an input", out[i].name,
                         out[i].path, in[k].name);
    for (size_t k = 0; k < i; k++)
      if (out[k].path && *out[k].path && ntk_same_file(out[i].path, out[k].path))
        return ntk_error(NTK_EUSAGE, "%s (%s) is also %s: two outputs cannot share a file", out[i].name,
                         out[i].path, out[k].name);
  }
  return NTK_OK;
}

const char *ntk_hostname(void) {
  static char host[256];
  if (!host[0]) {
    if (gethostname(host, sizeof host - 1) || !host[0]) snprintf(host, sizeof host, "?");
    for (char *p = host; *p; p++)
      if (*p == '/') *p = '_';
  }
  return host;
}

int ntk_tmp_path(const char *path, char *out, size_t cap) {
  int n = snprintf(out, cap, "%s.tmp.%s.%ld", path, ntk_hostname(), (long)getpid());
  return n > 0 && (size_t)n < cap;
}

int ntk_clean_stale_tmp(const char *path) {
  char dir[PATH_MAX], prefix[NAME_MAX + 300];
  const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == path) snprintf(dir, sizeof dir, "/");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  int plen = snprintf(prefix, sizeof prefix, "%s.tmp.%s.", base, ntk_hostname());
  if (plen <= 0 || (size_t)plen >= sizeof prefix) return 0;
  DIR *d = opendir(dir);
  if (!d) return 0;
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, prefix, (size_t)plen)) continue;
    const char *digits = e->d_name + plen;
    char *end;
    long pid = strtol(digits, &end, 10);
    if (end == digits || *end || pid <= 0) continue;
    if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    char full[PATH_MAX + NAME_MAX + 2];
    snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
    if (unlink(full) == 0) removed++;
  }
  closedir(d);
  return removed;
}

ntk_status ntk_tmp_create(const char *path, char *tmp, size_t cap, int *fd) {
  *fd = -1;
  if (!ntk_tmp_path(path, tmp, cap)) return ntk_error(NTK_EUSAGE, "%s: path too long", path);
  ntk_clean_stale_tmp(path);
  unlink(tmp); /* a leftover of an earlier process with this pid */
  *fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (*fd < 0) return ntk_error(NTK_EIO, "%s: cannot create: %s", tmp, strerror(errno));
  return NTK_OK;
}

ntk_status ntk_fsync_folder_of(const char *path) {
  char dir[NTK_PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash == dir) dir[1] = '\0';
  else if (slash) *slash = '\0';
  else strcpy(dir, ".");
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ntk_error(NTK_EIO, "%s: cannot open folder for fsync: %s", dir, strerror(errno));
  int rc = fsync(fd);
  int e = errno;
  close(fd);
  if (rc) return ntk_error(NTK_EIO, "%s: fsync of folder failed: %s", dir, strerror(e));
  return NTK_OK;
}

ntk_status ntk_make_parents(const char *path) {
  char dir[NTK_PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir) return NTK_OK;
  *slash = '\0';
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(dir, 0777) && errno != EEXIST) return ntk_error(NTK_EIO, "%s: cannot create folder: %s", dir, strerror(errno));
    *p = '/';
  }
  if (mkdir(dir, 0777) && errno != EEXIST) return ntk_error(NTK_EIO, "%s: cannot create folder: %s", dir, strerror(errno));
  return NTK_OK;
}
