/* File-system helpers shared by every module that reads or writes files:
 * opening without blocking on FIFOs or devices, telling whether two paths
 * are one file, temporary names and their clean-up, folders. Rank-local. */
#ifndef NTKD_FSUTIL_H
#define NTKD_FSUTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "base/magic.h"
#include "base/status.h"

/* open(2) `path` with `flags` (O_RDONLY, O_RDWR, ...; O_CLOEXEC is added),
 * refusing anything that is not a regular file before it can block: a
 * FIFO, a device or a socket gives NTK_EINPUT ("PATH is a FIFO, not a
 * regular file (`what`)"); with O_NOFOLLOW a symbolic link too. With
 * O_CREAT a missing file is created as usual.
 * A missing file without O_CREAT: NTK_EUSAGE; other failures NTK_EIO,
 * with errno left as open(2) set it. */
ntk_status ntk_open_regular(const char *path, int flags, const char *what, int *fd);

/* Whether errno value e is a shortage of this process or node (descriptors,
 * memory, an I/O error) that a rerun may not meet, not a fault of the
 * file: its open is an I/O failure (exit 3: finished tiles kept, rerun to
 * resume), never bad input (exit 2: fix the job). */
int ntk_errno_transient(int e);

/* A failed write of a tile record to store `path` that would have ended
 * the file at byte `end`: when that passes the file-size limit (ulimit -f,
 * RLIMIT_FSIZE), the error (NTK_EIO) naming the limit, not "File too
 * large" or a short write's EIO; else NTK_OK (the caller says why). */
ntk_status ntk_fsize_limit_error(const char *path, unsigned long long end);

/* NTK_OK if `path` does not exist or is a regular file; otherwise the
 * error ntk_open_regular would give. Never opens it. */
ntk_status ntk_check_regular(const char *path, const char *what);

/* 1 if `path` (links followed) names the file open on `fd`: a file a job
 * holds open is still the one at its name, not replaced or removed. */
int ntk_fd_at_path(int fd, const char *path);

/* 1 if `a` and `b` name the same file: the same inode when both exist,
 * else the same absolute path once the folders are resolved. */
int ntk_same_file(const char *a, const char *b);

/* Refuse an output that is one of the inputs (or another output): each of
 * the `nout` outputs is compared with every input and every other output.
 * NULL or "" entries are skipped. The message names the keys:
 * "[output] path (x.npy) is also [data] path: an output never replaces an
 * input". NTK_EUSAGE on a clash. */
struct ntk_named_path {
  const char *name; /* "[output] path", "OUT.npy", ... */
  const char *path;
  int own;          /* an output that is itself one of ntkd's files (NTK_FILE_STORE,
                       NTK_FILE_SNAPSHOT: job/jobfiles.h) may replace one of that kind */
};
ntk_status ntk_check_outputs(const struct ntk_named_path *in, size_t nin, const struct ntk_named_path *out,
                             size_t nout);

/* The temporary name next to `path` that this process writes before a
 * rename: PATH.tmp.HOST.PID (for a name so long that this would exceed
 * NAME_MAX, its first bytes and a hash of the whole instead of NAME).
 * Returns 0 if it does not fit in `cap`. */
int ntk_tmp_path(const char *path, char *out, size_t cap);

/* 1 if the last component of `path` has the form of an ntkd temporary
 * file, NAME.tmp.HOST.PID. */
int ntk_is_tmp_name(const char *path);

/* `path` with the symbolic links of its last component followed (to a
 * file that need not exist), into `out`: the name by which a store's
 * companions (PATH.index, PATH.lock, temporary files) are found, whatever
 * link reaches it. A path without links is returned as it is. */
ntk_status ntk_resolve_links(const char *path, char *out, size_t cap);

/* Remove PATH.tmp.HOST.PID files of this host whose process is gone (a
 * killed export, snapshot or store creation) that are empty or start with
 * `magic` (what that writer writes first; NULL: any file): a file of
 * another kind under such a name (a job's data) is not ntkd's to remove.
 * Returns how many. */
int ntk_clean_stale_tmp(const char *path, const char *magic);

/* The temporary file this process writes before renaming it to `path`:
 * stale ones of dead processes are removed, then PATH.tmp.HOST.PID (its
 * name into `tmp`, `cap` bytes) is created afresh, never through a
 * symbolic link or over an existing file (O_EXCL | O_NOFOLLOW), and opened
 * for writing into *fd; beside the file that symbolic links in `path`
 * reach (ntk_tmp_commit puts it in place there). Stale temporary files of
 * the same name are removed first (ntk_clean_stale_tmp, with `magic`). */
ntk_status ntk_tmp_create(const char *path, char *tmp, size_t cap, int *fd, const char *magic);

/* Rename `tmp` to `path` only if nothing is there: renameat2's
 * RENAME_NOREPLACE, else link(2) and unlink(tmp). 0 when renamed; 1 when
 * something is there; 2 when the file system can do neither (the caller
 * decides); -1 on another failure (errno). */
int ntk_rename_noreplace(const char *tmp, const char *path);

/* Rename `tmp` to `path` over the file this process holds open as `fd`,
 * and over no other: renameat2's RENAME_EXCHANGE, then the file it took
 * the place of (now at tmp) compared with fd's; another file there is put
 * back at once (a reader may have seen tmp's for that moment). fd < 0:
 * nothing may be there (ntk_rename_noreplace). So a file another writer
 * put at path after any earlier check is never lost: the exchange goes
 * through the name TMP.displaced, which the stale-file clean-up never
 * removes, so a process killed between the two exchanges leaves the other
 * file there. 0 when renamed (the held file's name removed); 1 when
 * another file or none stands there (tmp left, nothing replaced); 2 when
 * the file system cannot exchange (the caller checks, then renames); 3
 * when the other file could not be put back (it is TMP.displaced, tmp's
 * file at path); -1 on another failure (errno). */
int ntk_rename_over(const char *tmp, const char *path, int fd);

/* The files ntk_rename_over left beside `path` (PATH.tmp.HOST.PID.displaced,
 * any host): another writer's file that a process killed between its two
 * exchanges moved aside. Returns how many; the first one's path into `out`
 * (`cap` bytes). Nothing removes them: the caller says so. */
int ntk_find_displaced(const char *path, char *out, size_t cap);

/* Which of ntkd's own files (NTK_FILE_*, base/magic.h) `path` is by its
 * first bytes (a store also by its second header copy), or NTK_FILE_OTHER:
 * absent, unreadable, not a regular file, or another file. flags:
 * O_NOFOLLOW to take a symbolic link for another file, else 0. */
int ntk_file_kind_by_content(const char *path, int flags);

/* The kind's name for messages ("an ntkd store"). */
const char *ntk_file_kind_name(int kind);

/* Put the finished temporary file `tmp` (from ntk_tmp_create) in place of
 * `file` (no symbolic link followed): renamed into an empty place, or over
 * the file there unless that is one of ntkd's own files (a store, an
 * index, a snapshot, a lock file: ntk_file_kind_by_content) of another kind
 * than `own` (the kind this output replaces, e.g. a store's previous
 * index; NTK_FILE_OTHER: none). The output rule of the start
 * (ntk_check_output_files) checked the name before any work; this is the
 * same rule at the rename, for a file another job put there meanwhile (a
 * store x.ntk.index finished while the store x.ntk was made, then its
 * index renamed over it: that store lost). NTK_EUSAGE for such a file,
 * NTK_EIO on failure (tmp is the caller's to remove). */
ntk_status ntk_commit_at(const char *tmp, const char *file, int own);

/* ntk_commit_at over the file `path` reaches, so that an output named
 * through a symbolic link is written where the link points, never over
 * the link itself. */
ntk_status ntk_tmp_commit(const char *tmp, const char *path, int own);

/* fsync the folder holding the file `path` reaches, after a rename into it. */
ntk_status ntk_fsync_folder_of(const char *path);

/* Create the folders above `path` that are missing (mkdir -p of its
 * dirname). */
ntk_status ntk_make_parents(const char *path);

/* The folders calls of ntk_make_parents_noted made, by device and inode
 * (a chain of more than NTK_MADE_FOLDERS_MAX new folders: its innermost
 * are not noted, and the whole chain stays). */
#define NTK_MADE_FOLDERS_MAX 32
struct ntk_made_folders {
  int n;
  dev_t dev[NTK_MADE_FOLDERS_MAX];
  ino_t ino[NTK_MADE_FOLDERS_MAX];
};

/* The same, adding each folder it creates to `made` (NULL: not noted),
 * for ntk_remove_made_folders. */
ntk_status ntk_make_parents_noted(const char *path, struct ntk_made_folders *made);

/* Removes the folders above `path`, innermost first, while each is one
 * `made` lists and is empty: a refused job leaves no folder behind, and a
 * store, any file put there since, or a folder that was there (reached
 * through "..") stays. */
void ntk_remove_made_folders(const char *path, const struct ntk_made_folders *made);

/* This machine's host name ("?" if unknown), for lock holders and
 * temporary names. Static memory. */
const char *ntk_hostname(void);

#endif
