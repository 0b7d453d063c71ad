/* File-system helpers: see src/base/fsutil.h. */
#define _GNU_SOURCE /* renameat2 */
#include "base/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/defs.h"
#include "base/magic.h"

static const char *kind_of(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISDIR(m)) return "a folder";
  if (S_ISLNK(m)) return "a symbolic link";
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

ntk_status ntk_fsize_limit_error(const char *path, unsigned long long end) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) || rl.rlim_cur == RLIM_INFINITY || end <= (unsigned long long)rl.rlim_cur)
    return NTK_OK;
  return ntk_error(NTK_EIO, "%s: a file-size limit (ulimit -f: %llu bytes) below the store's size while writing a "
                   "tile (finished tiles are kept; raise the limit and rerun to resume)", path,
                   (unsigned long long)rl.rlim_cur);
}

int ntk_errno_transient(int e) {
  return e == EMFILE || e == ENFILE || e == ENOMEM || e == ENOBUFS || e == EIO || e == EAGAIN;
}

/* A file ntkd creates is read back by a later run (a resume reads the
 * store, its index, its lock file and the training snapshot): its owner
 * keeps read and write whatever the umask (a umask of 0277 or 0777 made a
 * store that no rerun could open). The umask still decides group and other. */
static void owner_read_write(int fd, const struct stat *sb) {
  if ((sb->st_mode & 0600) != 0600 && sb->st_uid == geteuid()) (void)fchmod(fd, (sb->st_mode & 07777) | 0600);
}

ntk_status ntk_open_regular(const char *path, int flags, const char *what, int *fd) {
  *fd = -1;
  /* An empty argument ('' on a command line, an unset variable) opens
   * nothing: say so, not ": cannot open". */
  if (!*path) return ntk_error(NTK_EUSAGE, "an empty path was given%s%s%s", what ? " (" : "", what ? what : "",
                               what ? ")" : "");
  /* Checked before open(): opening a FIFO blocks until a writer comes,
   * opening some devices has effects of its own. */
  ntk_status st = ntk_check_regular(path, what);
  if (st) return st;
  struct stat lb;
  if ((flags & O_NOFOLLOW) && lstat(path, &lb) == 0 && S_ISLNK(lb.st_mode)) return not_regular(path, what, S_IFLNK);
  /* O_NONBLOCK closes the race with a FIFO put there after the stat. */
  int f = open(path, flags | O_CLOEXEC | O_NONBLOCK, 0644);
  if (f < 0) {
    int e = errno;
    if (e == ENXIO) return not_regular(path, what, S_IFIFO);
    if (e == ELOOP && (flags & O_NOFOLLOW)) return not_regular(path, what, S_IFLNK);
    struct stat fb;
    char folder[NTK_PATH_MAX];
    const char *slash = strrchr(path, '/');
    snprintf(folder, sizeof folder, "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1, slash ? path : ".");
    /* A file ntkd creates (a lock file beside the store) in a folder that
     * exists but takes no new files (/proc, /sys, a read-only mount): the
     * folder is what the user can change, not a file they never named. */
    int about_folder = e == ENOENT || e == EACCES || e == EPERM || e == EROFS || e == ENOSPC || e == EDQUOT;
    if ((flags & O_CREAT) && about_folder && lstat(path, &fb) && stat(folder, &fb) == 0) /* (not a dangling link) */
      st = ntk_error(e == ENOENT ? NTK_EUSAGE : NTK_EIO, "%s: cannot create %s%s%sthere: %s", folder,
                     what ? "the " : "", what ? what : "", what ? " " : "", strerror(e));
    else
      st = ntk_error(e == ENOENT ? NTK_EUSAGE : NTK_EIO, "%s: cannot open: %s", path, strerror(e));
    errno = e;
    return st;
  }
  struct stat sb;
  if (fstat(f, &sb) || !S_ISREG(sb.st_mode)) {
    mode_t m = sb.st_mode;
    close(f);
    return not_regular(path, what, m);
  }
  if (flags & O_CREAT) owner_read_write(f, &sb);
  int fl = fcntl(f, F_GETFL);
  if (fl != -1) fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
  *fd = f;
  return NTK_OK;
}

/* The folder and the name of `path` ("." for a bare name). */
static void split_path(const char *path, char *dir, size_t cap, const char **base) {
  const char *slash = strrchr(path, '/');
  *base = slash ? slash + 1 : path;
  if (!slash) snprintf(dir, cap, ".");
  else if (slash == path) snprintf(dir, cap, "/");
  else snprintf(dir, cap, "%.*s", (int)(slash - path), path);
}

/* `path` made absolute with its folder resolved (the file itself need not
 * exist): "a/../b/x.npy" and "/w/b/x.npy" agree. */
static void canonical(const char *path, char *out, size_t cap) {
  char dir[PATH_MAX], res[PATH_MAX];
  const char *base;
  split_path(path, dir, sizeof dir, &base);
  if (realpath(dir, res)) {
    snprintf(out, cap, "%s/%s", strcmp(res, "/") ? res : "", base);
    return;
  }
  /* A folder that does not exist yet (ntk_make_parents makes it, of plain
   * folders): the nearest folder above it that exists, resolved, and the
   * rest word by word ("." dropped, ".." taking off the word before it),
   * so that "new/./x" and "new/x" agree before "new" is made: two outputs
   * there must not pass as two files (the snapshot renamed over the log). */
  size_t keep = strlen(dir);
  for (;;) {
    char *slash = strrchr(dir, '/');
    if (!slash) {
      keep = 0;
      snprintf(dir, sizeof dir, ".");
    } else if (slash == dir) {
      keep = 1;
      dir[1] = '\0';
    } else {
      *slash = '\0';
      keep = (size_t)(slash - dir) + 1;
    }
    if (realpath(dir, res)) break;
    if (!strcmp(dir, ".") || !strcmp(dir, "/")) {
      snprintf(out, cap, "%s", path);
      return;
    }
  }
  if (!strcmp(res, "/")) res[0] = '\0';
  size_t len = strlen(res);
  const char *rest = path + keep;
  while (*rest) {
    size_t n = strcspn(rest, "/");
    if (n == 2 && !strncmp(rest, "..", 2)) {
      char *up = strrchr(res, '/');
      len = up ? (size_t)(up - res) : 0;
      res[len] = '\0';
    } else if (n && !(n == 1 && rest[0] == '.')) {
      if (len + 1 + n >= sizeof res) {
        snprintf(out, cap, "%s", path);
        return;
      }
      res[len++] = '/';
      memcpy(res + len, rest, n);
      len += n;
      res[len] = '\0';
    }
    rest += n;
    while (*rest == '/') rest++;
  }
  snprintf(out, cap, "%s", res[0] ? res : "/");
}

int ntk_fd_at_path(int fd, const char *path) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
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

/* The part of a temporary name before ".tmp.HOST.PID": the file's own name,
 * or, where that would make the temporary name longer than a name may be
 * (NAME_MAX), its first bytes and a hash of the whole, so that any legal
 * name can be written. The same for every pid, so the clean-up finds it. */
static void tmp_stem(const char *base, char *out, size_t cap) {
  size_t room = NAME_MAX - (5 + strlen(ntk_hostname()) + 1 + 10); /* ".tmp." HOST "." up to 10 digits */
  size_t len = strlen(base);
  if (len <= room) {
    snprintf(out, cap, "%s", base);
    return;
  }
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)base; *p; p++) h = (h ^ *p) * 1099511628211ull;
  snprintf(out, cap, "%.*s~%016llx", (int)(room - 17), base, (unsigned long long)h);
}

int ntk_tmp_path(const char *path, char *out, size_t cap) {
  char dir[PATH_MAX], stem[NAME_MAX + 1];
  const char *base;
  split_path(path, dir, sizeof dir, &base);
  tmp_stem(base, stem, sizeof stem);
  int n = base == path ? snprintf(out, cap, "%s.tmp.%s.%ld", stem, ntk_hostname(), (long)getpid())
                       : snprintf(out, cap, "%.*s%s.tmp.%s.%ld", (int)(base - path), path, stem, ntk_hostname(),
                                  (long)getpid());
  return n > 0 && (size_t)n < cap;
}

int ntk_is_tmp_name(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  /* NAME.tmp.HOST.PID: the last dot is followed by digits only, and ".tmp."
   * comes before it. */
  const char *dot = strrchr(base, '.');
  if (!dot || !dot[1] || strspn(dot + 1, "0123456789") != strlen(dot + 1)) return 0;
  for (const char *p = base; p + 5 <= dot; p++)
    if (!strncmp(p, ".tmp.", 5) && p + 5 < dot) return 1;
  return 0;
}

/* Whether the file `full` is empty or starts with `magic` (any, if NULL). */
static int holds_magic(const char *full, const char *magic) {
  if (!magic) return 1;
  size_t len = strlen(magic);
  int fd = open(full, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return 0;
  char head[64];
  struct stat sb;
  int ok = 0;
  if (!fstat(fd, &sb) && S_ISREG(sb.st_mode) && len <= sizeof head)
    ok = sb.st_size == 0 || (pread(fd, head, len, 0) == (ssize_t)len && !memcmp(head, magic, len));
  close(fd);
  return ok;
}

/* The folder of the file `path`'s links reach, where its temporary files
 * sit, opened (dir: its name, PATH_MAX bytes), and their stem, NAME_MAX + 1
 * bytes (tmp_stem). NULL if it cannot be read. */
static DIR *open_tmp_folder(const char *path, char *dir, char *stem) {
  char resolved[PATH_MAX];
  if (ntk_resolve_links(path, resolved, sizeof resolved) == NTK_OK) path = resolved;
  const char *base;
  split_path(path, dir, PATH_MAX, &base);
  tmp_stem(base, stem, NAME_MAX + 1);
  return opendir(dir);
}

int ntk_clean_stale_tmp(const char *path, const char *magic) {
  char dir[PATH_MAX], stem[NAME_MAX + 1], prefix[NAME_MAX + 300];
  DIR *d = open_tmp_folder(path, dir, stem);
  if (!d) return 0;
  int plen = snprintf(prefix, sizeof prefix, "%s.tmp.%s.", stem, ntk_hostname());
  if (plen <= 0 || (size_t)plen >= sizeof prefix) {
    closedir(d);
    return 0;
  }
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
    if (holds_magic(full, magic) && unlink(full) == 0) removed++;
  }
  closedir(d);
  return removed;
}

int ntk_find_displaced(const char *path, char *out, size_t cap) {
  char dir[PATH_MAX], stem[NAME_MAX + 1], prefix[NAME_MAX + 8];
  DIR *d = open_tmp_folder(path, dir, stem);
  if (!d) return 0;
  int plen = snprintf(prefix, sizeof prefix, "%s.tmp.", stem);
  if (plen <= 0 || (size_t)plen >= sizeof prefix) {
    closedir(d);
    return 0;
  }
  int found = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name), tail = sizeof ".displaced" - 1;
    if (strncmp(e->d_name, prefix, (size_t)plen) || len < (size_t)plen + tail ||
        strcmp(e->d_name + len - tail, ".displaced"))
      continue;
    if (!found++ && cap) snprintf(out, cap, "%s/%s", dir, e->d_name);
  }
  closedir(d);
  return found;
}

ntk_status ntk_resolve_links(const char *path, char *out, size_t cap) {
  char cur[PATH_MAX], target[PATH_MAX];
  if (snprintf(cur, sizeof cur, "%s", path) >= (int)sizeof cur)
    return ntk_error(NTK_EUSAGE, "%s: path too long", path);
  for (int hops = 0;; hops++) {
    struct stat sb;
    if (lstat(cur, &sb) || !S_ISLNK(sb.st_mode)) break;
    if (hops == 40) return ntk_error(NTK_EUSAGE, "%s: too many levels of symbolic links", path);
    ssize_t n = readlink(cur, target, sizeof target - 1);
    if (n < 0) return ntk_error(NTK_EIO, "%s: cannot read the symbolic link: %s", cur, strerror(errno));
    target[n] = '\0';
    const char *slash = strrchr(cur, '/');
    if (target[0] == '/' || !slash) {
      memmove(cur, target, (size_t)n + 1);
    } else { /* relative to the link's folder */
      size_t keep = (size_t)(slash - cur) + 1;
      if (keep + (size_t)n >= sizeof cur) return ntk_error(NTK_EUSAGE, "%s: path too long", path);
      memcpy(cur + keep, target, (size_t)n + 1);
    }
  }
  if (snprintf(out, cap, "%s", cur) >= (int)cap) return ntk_error(NTK_EUSAGE, "%s: path too long", path);
  return NTK_OK;
}

ntk_status ntk_tmp_create(const char *path, char *tmp, size_t cap, int *fd, const char *magic) {
  *fd = -1;
  /* Beside the file the name reaches, where ntk_tmp_commit renames it. */
  char file[PATH_MAX];
  if (ntk_resolve_links(path, file, sizeof file) == NTK_OK) path = file;
  if (!ntk_tmp_path(path, tmp, cap)) return ntk_error(NTK_EUSAGE, "%s: path too long", path);
  ntk_clean_stale_tmp(path, magic);
  unlink(tmp); /* a leftover of an earlier process with this pid */
  *fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (*fd < 0) return ntk_error(NTK_EIO, "%s: cannot create: %s", tmp, strerror(errno));
  struct stat sb;
  if (!fstat(*fd, &sb)) owner_read_write(*fd, &sb);
  return NTK_OK;
}

int ntk_rename_noreplace(const char *tmp, const char *path) {
  int rc = renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE);
  if (rc && (errno == EINVAL || errno == ENOSYS)) { /* a file system without it: link(2) cannot replace either */
    rc = link(tmp, path);
    if (!rc) unlink(tmp);
    else if (errno == EPERM || errno == ENOSYS || errno == EOPNOTSUPP) return 2;
  }
  if (!rc) return 0;
  return errno == EEXIST ? 1 : -1;
}

int ntk_rename_over(const char *tmp, const char *path, int fd) {
  if (fd < 0) return ntk_rename_noreplace(tmp, path);
  /* The exchange goes through a name the stale-file clean-up never takes
   * (ntk_clean_stale_tmp: its pid is not the last part): killed between the
   * two exchanges, the other writer's file stays there, not removed. */
  char aside[PATH_MAX + 32];
  if (snprintf(aside, sizeof aside, "%s.displaced", tmp) >= (int)sizeof aside) {
    errno = ENAMETOOLONG;
    return -1;
  }
  if (rename(tmp, aside)) return -1;
  if (renameat2(AT_FDCWD, aside, AT_FDCWD, path, RENAME_EXCHANGE)) {
    int e = errno;
    if (rename(aside, tmp)) return -1;
    errno = e;
    if (e == EINVAL || e == ENOSYS || e == EOPNOTSUPP) return 2;
    return e == ENOENT ? 1 : -1; /* (ENOENT: nothing at path, removed) */
  }
  /* aside now names what stood at path: the held file, or another's put back */
  struct stat held, was;
  if (fstat(fd, &held) == 0 && fstatat(AT_FDCWD, aside, &was, AT_SYMLINK_NOFOLLOW) == 0 &&
      held.st_dev == was.st_dev && held.st_ino == was.st_ino) {
    unlink(aside);
    return 0;
  }
  if (renameat2(AT_FDCWD, aside, AT_FDCWD, path, RENAME_EXCHANGE)) return 3;
  if (rename(aside, tmp)) return -1;
  return 1;
}

int ntk_file_kind_by_content(const char *path, int flags) {
  int fd = -1;
  if (ntk_open_regular(path, O_RDONLY | flags, NULL, &fd)) return NTK_FILE_OTHER;
  char head[32] = "", copy_b[NTK_MAGIC_LEN] = "";
  ssize_t n = pread(fd, head, sizeof head, 0);
  /* A store whose first header copy is damaged is a store still (a rerun
   * repairs it from the second, 4 096 bytes in). */
  ssize_t nb = pread(fd, copy_b, sizeof copy_b, NTK_MAGIC_STORE_COPY_B);
  close(fd);
  size_t lock_len = strlen(NTK_MAGIC_LOCK);
  if ((n >= NTK_MAGIC_LEN && !memcmp(head, NTK_MAGIC_STORE, NTK_MAGIC_LEN)) ||
      (nb == NTK_MAGIC_LEN && !memcmp(copy_b, NTK_MAGIC_STORE, NTK_MAGIC_LEN)))
    return NTK_FILE_STORE;
  if (n >= NTK_MAGIC_LEN && !memcmp(head, NTK_MAGIC_INDEX, NTK_MAGIC_LEN)) return NTK_FILE_INDEX;
  if (n >= NTK_MAGIC_LEN && !memcmp(head, NTK_MAGIC_SNAPSHOT, NTK_MAGIC_LEN)) return NTK_FILE_SNAPSHOT;
  if (n >= (ssize_t)lock_len && !memcmp(head, NTK_MAGIC_LOCK, lock_len)) return NTK_FILE_LOCK;
  return NTK_FILE_OTHER;
}

const char *ntk_file_kind_name(int kind) {
  switch (kind) {
    case NTK_FILE_STORE: return "an ntkd store";
    case NTK_FILE_INDEX: return "the index of an ntkd store";
    case NTK_FILE_LOCK: return "the lock file of a running or finished ntkd job";
    case NTK_FILE_SNAPSHOT: return "an ntkd training snapshot";
    case NTK_FILE_TMP: return "named as an ntkd temporary file (NAME.tmp.HOST.PID: a file a job is writing)";
    default: return "another file";
  }
}

ntk_status ntk_commit_at(const char *tmp, const char *file, int own) {
  int rc = ntk_rename_noreplace(tmp, file);
  if (rc < 0) return ntk_error(NTK_EIO, "%s: cannot rename into place: %s", file, strerror(errno));
  if (rc == 0) return NTK_OK;
  /* Not through a link: the rename replaces the link itself. */
  int kind = ntk_file_kind_by_content(file, O_NOFOLLOW);
  if (kind != NTK_FILE_OTHER && kind != own)
    return ntk_error(NTK_EUSAGE, "%s is now %s, put there by another job after this one checked the name: an "
                     "output never replaces one of ntkd's own files, and nothing was replaced; choose another name",
                     file, ntk_file_kind_name(kind));
  if (rename(tmp, file)) return ntk_error(NTK_EIO, "%s: cannot rename into place: %s", file, strerror(errno));
  return NTK_OK;
}

ntk_status ntk_tmp_commit(const char *tmp, const char *path, int own) {
  char file[PATH_MAX];
  ntk_status st = ntk_resolve_links(path, file, sizeof file);
  if (st) return st;
  return ntk_commit_at(tmp, file, own);
}

ntk_status ntk_fsync_folder_of(const char *path) {
  char file[PATH_MAX];
  if (ntk_resolve_links(path, file, sizeof file) == NTK_OK) path = file; /* where ntk_tmp_commit renamed */
  char dir[PATH_MAX];
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

/* Notes the folder `dir` as made by this process (its device and inode). */
static void note_made(struct ntk_made_folders *made, const char *dir) {
  struct stat sb;
  if (made && made->n < NTK_MADE_FOLDERS_MAX && stat(dir, &sb) == 0) {
    made->dev[made->n] = sb.st_dev;
    made->ino[made->n++] = sb.st_ino;
  }
}

ntk_status ntk_make_parents_noted(const char *path, struct ntk_made_folders *made) {
  char dir[PATH_MAX];
  /* Cut short, the folders made would be another path's. */
  if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return ntk_error(NTK_EUSAGE, "%s: path too long", path);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir) return NTK_OK;
  *slash = '\0';
  size_t len = strlen(dir);
  /* A folder found there and gone at the next step (another job removing
   * the empty folders it made, ntk_remove_made_folders): from the top again. */
  for (int attempt = 0;; attempt++) {
    int gone = 0;
    for (char *p = dir + 1;; p++) {
      if (*p && *p != '/') continue;
      char c = *p;
      *p = '\0';
      if (mkdir(dir, 0777) == 0) {
        /* As `mkdir -p` makes the folders above: its owner can go on
         * into it whatever the umask (0777 made a folder nothing could
         * be created in). */
        struct stat sb;
        if (!stat(dir, &sb) && (sb.st_mode & 0700) != 0700) (void)chmod(dir, (sb.st_mode & 07777) | 0700);
        note_made(made, dir);
      } else if (errno == ENOENT && attempt < 20) {
        gone = 1;
      } else if (errno != EEXIST) {
        int e = errno; /* a path that cannot be (a name too long, a file on the way) is the user's to change */
        return ntk_error(e == ENAMETOOLONG || e == ENOTDIR || e == ELOOP ? NTK_EUSAGE : NTK_EIO,
                         "%s: cannot create folder: %s", dir, strerror(e));
      }
      *p = c;
      if (gone || (size_t)(p - dir) >= len) break;
    }
    if (!gone) return NTK_OK;
  }
}

ntk_status ntk_make_parents(const char *path) { return ntk_make_parents_noted(path, NULL); }

/* Whether `dir` is a folder `made` lists. */
static int was_made(const struct ntk_made_folders *made, const struct stat *sb) {
  if (!S_ISDIR(sb->st_mode)) return 0;
  for (int i = 0; i < made->n; i++)
    if (made->dev[i] == sb->st_dev && made->ino[i] == sb->st_ino) return 1;
  return 0;
}

void ntk_remove_made_folders(const char *path, const struct ntk_made_folders *made) {
  if (!made || !made->n) return;
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return;
  /* Up from the innermost, each one this process made (by its inode, not
   * its name: "new/../old" names a folder that was there), while empty. */
  for (char *slash; (slash = strrchr(dir, '/')) && slash != dir;) {
    *slash = '\0';
    struct stat sb;
    if (lstat(dir, &sb)) continue; /* never made: a mkdir on the way in failed (too long a name, no permission) */
    if (!was_made(made, &sb) || rmdir(dir)) return; /* not ours; or not empty (the store, another job's file) */
  }
}
