/* A job's files: see src/job/jobfiles.h. */
#include "job/jobfiles.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/magic.h"
#include "store/store.h"

size_t ntk_job_inputs(const struct ntk_job *job, struct ntk_named_path *in) {
  size_t n = 0;
  in[n++] = (struct ntk_named_path){"the job file", job->source, 0};
  for (int i = 0; i < job->ndata; i++) in[n++] = (struct ntk_named_path){"[data] path", job->data_path[i], 0};
  in[n++] = (struct ntk_named_path){"[data] labels", job->labels_path, 0};
  /* a graph network's patterns: read as the data are (a solve wrote its
   * predictions over them, and --overwrite its store, exit 0: a hunt) */
  in[n++] = (struct ntk_named_path){"[data] pattern", job->pattern_path, 0};
  if (job->train.enabled) {
    in[n++] = (struct ntk_named_path){"[validation] path", job->train.val_path, 0};
    in[n++] = (struct ntk_named_path){"[validation] labels", job->train.val_labels, 0};
  } else if (job->test.enabled) {
    for (int i = 0; i < job->test.ndata; i++) in[n++] = (struct ntk_named_path){"[test] path", job->test.path[i], 0};
    in[n++] = (struct ntk_named_path){"[test] labels", job->test.labels, 0};
    in[n++] = (struct ntk_named_path){"[test] pattern", job->test.pattern, 0};
  }
  return n;
}

/* 1 if `path` is STEM + `suffix` where STEM is a file of kind `a` or `b`. */
static int companion_of(const char *path, const char *suffix, int a, int b) {
  size_t n = strlen(path), k = strlen(suffix);
  if (n <= k || strcmp(path + n - k, suffix)) return 0;
  char stem[PATH_MAX];
  if (n - k >= sizeof stem) return 0;
  memcpy(stem, path, n - k);
  stem[n - k] = '\0';
  int kind = ntk_file_kind_by_content(stem, 0);
  return kind != NTK_FILE_OTHER && (kind == a || kind == b);
}

int ntk_file_kind(const char *path) {
  if (ntk_is_tmp_name(path)) return NTK_FILE_TMP;
  int kind = ntk_file_kind_by_content(path, 0);
  if (kind != NTK_FILE_OTHER) return kind;
  /* An index or lock file not yet (or no longer) written: by the name. */
  if (companion_of(path, ".index", NTK_FILE_STORE, NTK_FILE_STORE)) return NTK_FILE_INDEX;
  if (companion_of(path, ".lock", NTK_FILE_STORE, NTK_FILE_SNAPSHOT)) return NTK_FILE_LOCK;
  return NTK_FILE_OTHER;
}


ntk_status ntk_check_output_files(const struct ntk_named_path *in, size_t nin, const struct ntk_named_path *out,
                                  size_t nout) {
  ntk_status st = ntk_check_outputs(in, nin, out, nout);
  for (size_t i = 0; !st && i < nout; i++) {
    if (!out[i].path || !*out[i].path) continue;
    /* A file's name, before any work: not a folder's (ending in '/'), and
     * no longer than a name may be. */
    const char *p = out[i].path, *base = strrchr(p, '/');
    base = base ? base + 1 : p;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
      st = ntk_error(NTK_EUSAGE, "%s (%s) names a folder, not a file", out[i].name, p);
      break;
    }
    if (strlen(base) > NAME_MAX) {
      st = ntk_error(NTK_EUSAGE, "%s (%s...): the file name is %zu bytes, more than the %d a name may have",
                     out[i].name, base, strlen(base), NAME_MAX);
      break;
    }
    /* Outputs are replaced by rename: never over a FIFO, a device or a
     * socket, whatever the flags (through a symbolic link: the file it
     * reaches, which is what ntk_tmp_commit replaces). */
    if ((st = ntk_check_regular(out[i].path, out[i].name))) break;
    int kind = ntk_file_kind(out[i].path);
    if (kind != NTK_FILE_OTHER && kind != out[i].own)
      st = ntk_error(NTK_EUSAGE, "%s (%s) is %s: an output never replaces one of ntkd's own files (a store, its "
                     "index or lock file, a training snapshot, a temporary file); choose another name",
                     out[i].name, out[i].path, ntk_file_kind_name(kind));
  }
  return st;
}

/* A store or snapshot keeps NAME.index and NAME.lock beside it: its name
 * must leave room for them. */
static ntk_status check_room(const char *path, const char *what, const char *suffix) {
  char file[PATH_MAX];
  if (ntk_resolve_links(path, file, sizeof file)) return NTK_OK; /* reported when it is opened */
  const char *slash = strrchr(file, '/'), *base = slash ? slash + 1 : file;
  size_t most = NAME_MAX - strlen(suffix);
  if (strlen(base) > most)
    return ntk_error(NTK_EUSAGE, "%s (%s): the name is %zu bytes; ntkd keeps NAME%s beside it, so it may have at "
                     "most %zu bytes", what, path, strlen(base), suffix, most);
  return NTK_OK;
}

/* `comp`, a file ntkd keeps beside the output `owner` (its index, its lock
 * file), is none of the job's inputs. */
static ntk_status companion_not_input(const struct ntk_named_path *in, size_t nin, const char *what,
                                      const char *comp, int kind, const char *owner, const char *key) {
  struct ntk_named_path c = {what, comp, kind};
  ntk_status st = ntk_check_output_files(in, nin, &c, 1);
  if (st)
    st = ntk_error(st, "%s (%s): %s", key, owner, ntk_error_message());
  return st;
}

ntk_status ntk_job_check_files(const struct ntk_job *job) {
  struct ntk_named_path in[NTK_JOB_MAX_INPUTS], out[2];
  int line[2];
  size_t nin = ntk_job_inputs(job, in), nout = 0;
  if (job->train.enabled) {
    line[nout] = job->train.snapshot_line;
    out[nout++] = (struct ntk_named_path){"[train] snapshot", job->train.snapshot, NTK_FILE_SNAPSHOT};
    line[nout] = job->train.log_line;
    out[nout++] = (struct ntk_named_path){"[train] log", job->train.log, NTK_FILE_OTHER};
  } else {
    line[nout] = job->out_path_line;
    out[nout++] = (struct ntk_named_path){"[output] path", job->out_path, NTK_FILE_STORE};
  }
  /* Each output on its own first, so that the message names its line; then
   * the two of a training job against each other (at the log's line). */
  ntk_status st = NTK_OK;
  int at = 0;
  for (size_t i = 0; !st && i < nout; i++)
    if ((st = ntk_check_output_files(in, nin, &out[i], 1))) at = line[i];
  if (!st && (st = ntk_check_outputs(NULL, 0, out, nout))) at = line[nout - 1];
  if (!st && !job->train.enabled && (st = check_room(job->out_path, "[output] path", ".index"))) at = line[0];
  /* The store's index and lock file beside it: files, or not there. */
  char comp[PATH_MAX + 8], file[PATH_MAX];
  static const char *const companions[] = {".index", ".lock"};
  /* Nor another of ntkd's files there: the store x.ntk wrote its index
   * over the store x.ntk.index (exit 0, that store lost). */
  for (int k = 0; !st && !job->train.enabled && k < 2; k++)
    if (!ntk_resolve_links(job->out_path, file, sizeof file) &&
        snprintf(comp, sizeof comp, "%s%s", file, companions[k]) < (int)sizeof comp) {
      const char *what = k ? "the store's lock file" : "the store's index";
      int kind = ntk_file_kind_by_content(comp, 0);
      if ((st = ntk_check_regular(comp, what)))
        st = ntk_error(st, "%s; remove it: ntkd keeps %s at that name", ntk_error_message(), what);
      else if (kind != NTK_FILE_OTHER && kind != (k ? NTK_FILE_LOCK : NTK_FILE_INDEX))
        st = ntk_error(NTK_EUSAGE, "[output] path (%s): %s, %s, is %s: an output never replaces one of ntkd's own "
                       "files; choose another name", job->out_path, what, comp, ntk_file_kind_name(kind));
      /* Nor an input: a pattern named STORE.index was written over by the
       * index, exit 0 (a hunt). */
      else
        st = companion_not_input(in, nin, what, comp, k ? NTK_FILE_LOCK : NTK_FILE_INDEX, job->out_path,
                                 "[output] path");
      if (st) at = line[0];
    }
  if (!st && job->train.enabled && job->train.snapshot[0] &&
      (st = check_room(job->train.snapshot, "[train] snapshot", ".lock")))
    at = line[0];
  if (!st && job->train.enabled && job->train.snapshot[0] &&
      !ntk_resolve_links(job->train.snapshot, file, sizeof file) &&
      snprintf(comp, sizeof comp, "%s.lock", file) < (int)sizeof comp &&
      (st = companion_not_input(in, nin, "the snapshot's lock file", comp, NTK_FILE_LOCK, job->train.snapshot,
                                "[train] snapshot")))
    at = line[0];
  /* The log must not be the snapshot's lock file (SNAPSHOT.lock), which
   * the job holds: it would find the log locked by itself. */
  if (!st && job->train.enabled && job->train.snapshot[0] && job->train.log[0] &&
      !ntk_resolve_links(job->train.snapshot, file, sizeof file) &&
      snprintf(comp, sizeof comp, "%s.lock", file) < (int)sizeof comp && ntk_same_file(job->train.log, comp)) {
    st = ntk_error(NTK_EUSAGE, "[train] log (%s) is the snapshot's lock file %s: choose another name", job->train.log,
                   comp);
    at = line[1];
  }
  if (st && at > 0) return ntk_error(st, "%s:%d: %s", job->source, at, ntk_error_message());
  if (st) return ntk_error(st, "%s: %s", job->source, ntk_error_message());
  return NTK_OK;
}
