/* The training loop (issue 6, docs/TRAINING.md). Rank 0 loads and checks
 * the data, resumes from the snapshot or initialises the parameters from
 * the seed, and broadcasts both. Then, for every global batch, each rank
 * computes the gradient sum of its contiguous share, one allreduce over a
 * flat buffer adds the shares (and the loss, the hits and a stop flag),
 * and every rank applies the same Adam update to its own copy. Rank 0
 * prints the table, appends the JSON log and writes the snapshots. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "base/codec.h"
#include "comm/comm.h"
#include "base/cpuinit.h"
#include "job/data.h"
#include "job/data_share.h"
#include "base/fsutil.h"
#include "store/lock.h"
#include "base/clock.h"
#include "base/signals.h"
#include "store/store.h"
#include "base/rng.h"
#include "train/train.h"

/* Validation rows per forward pass: bounds the scratch space, not the result. */
#define EVAL_CHUNK 500
/* Training data past this size (|x|) are named when the run diverges: data scaled to O(1), as networks are
 * trained, are far below it; a value of 1e19 squares past float32's range in Adam's second moment. */
#define NTK_TRAIN_XBIG 1e6f

void ntk_train_permutation(uint64_t seed, uint64_t epoch, size_t n, uint32_t *perm) {
  /* Mix (seed, epoch) through splitmix64 so nearby epochs get unrelated streams. */
  uint64_t s = seed;
  s = ntk_splitmix64(&s) ^ (epoch * 0xD1B54A32D192ED03ull);
  for (size_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
  for (size_t i = n; i > 1; i--) {
    /* Lemire's multiply-shift: unbiased enough for 2^32 > n, and cheap. */
    size_t j = (size_t)(((ntk_splitmix64(&s) >> 32) * (uint64_t)i) >> 32);
    uint32_t t = perm[i - 1];
    perm[i - 1] = perm[j];
    perm[j] = t;
  }
}

struct trainer {
  const ntk_comm_t *comm; /* the job's ranks, each training on its shard */
  ntk_data_share_t *train_share, *val_share; /* one copy of each set per node */
  const struct ntk_job *job;
  const struct ntk_train_opts *o;
  int rank, size;
  struct ntk_mlp mlp;
  struct ntk_adam adam;
  struct ntk_dataset train, val;
  int32_t *ytrain, *yval;
  float *state;  /* p, m, v: nparams each, one block (as in the snapshot) */
  float *g;      /* gradient sum, then loss, hits, stop flag, failure flag: one allreduce */
  float *work, *xb;
  int32_t *yb;
  uint32_t *perm;
  struct ntk_snapshot_info pos; /* identity and position, as in the snapshot */
  struct ntk_snapshot_info saved; /* what [train] snapshot holds now (resumed or written) */
  int have_saved;
  int log_fd; /* [train] log, locked from before the snapshot is read (-1: none) */
  FILE *log;  /* the same file, once cut back or started afresh */
  int log_created; /* rank 0: take_log made the log: removed again if the job stops before a line */
  /* Rank 0, a log that holds a line of the next epoch no snapshot of this
   * job records (a fresh start's epoch 1, check_fresh_log; a resume's next
   * epoch, check_log): that line (without its end), kept until this job's
   * own record of that epoch shows whether it is this job's
   * (pending_line_is_ours). Empty: none. */
  char log_pending[1024];
  off_t log_pending_at;   /* where that line starts in the log */
  off_t log_pending_size; /* the log's size when that line was read (it may not change meanwhile) */
  int snap_fd;     /* rank 0: the snapshot at its name as this job last read or wrote it, open and locked
                      from before it is read (-1: none was there, and none may be until this job writes one) */
  ntk_status failed;   /* this rank's device failed (a gradient or an update): told to the others at the */
  char failed_why[512]; /* next collective, which then stops every rank with this rank's message */
  const struct ntk_backend_ops *dev; /* the device this rank trains on (backend/backend.h) */
  void *dctx;
  struct ntk_pace pace; /* the loop's collectives: the longest stretch between two */
  float xmax;           /* rank 0: the training data's largest |value|, in sample xmax_at (diverged()'s hint) */
  size_t xmax_at;
};

/* The device this rank trains on: the placement of kernel jobs (docs/GPU.md,
 * "Placement"), where every rank computes, rank 0 too; with device = auto
 * a GPU that fails to start leaves its rank on the CPU. Collective
 * (agrees on errors). */
static ntk_status start_device(struct trainer *T, size_t bmax) {
  static const struct ntk_place_words words = {
      "[train] device", "device", "rank %d has no usable GPU", "rank",
      "Start at most one rank per GPU (every rank trains, rank 0 too)", "rank", "train "};
  int pref = T->o->device == NTK_TRAIN_DEVICE_CPU    ? NTK_BACKEND_CPU
             : T->o->device == NTK_TRAIN_DEVICE_CUDA ? NTK_BACKEND_CUDA
                                                      : NTK_BACKEND_AUTO;
  struct ntk_place_job pj = {pref, 1, 1, "", T->job->source, &words};
  struct ntk_place place;
  ntk_status st = ntk_place_ranks(T->comm, &pj, &place);
  if (st) return st;
  if (pref == NTK_BACKEND_AUTO && place.list_failed && place.tally[3] > 0) /* where GPUs are in use */
    fprintf(stderr, "ntkd: rank %d cannot list its GPUs (%s): training on the CPU\n", T->rank, place.why);
  const struct ntk_backend_ops *cpu = ntk_backend_find("cpu"), *gpu = ntk_backend_find("cuda");
  int on_gpu = 0;
  if (place.device >= 0) {
    st = gpu ? gpu->mlp_create(&T->mlp, bmax, place.device, T->state, &T->dctx)
             : ntk_error(NTK_ECONFIG, "GPU %d: this ntkd was built without CUDA", place.device);
    if (st) st = ntk_error(st, "rank %d, %s", T->rank, ntk_error_message());
    if (!st) T->dev = gpu, on_gpu = 1;
    else if (pref == NTK_BACKEND_AUTO) {
      fprintf(stderr, "ntkd: %s: training on the CPU instead\n", ntk_error_message());
      st = NTK_OK;
    }
  }
  if (!st && !T->dev) {
    st = cpu->mlp_create(&T->mlp, bmax, -1, T->state, &T->dctx);
    if (!st) T->dev = cpu;
  }
  if ((st = ntk_comm_agree_report(T->comm, st))) return st;
  return ntk_place_started(T->comm, &pj, &place, on_gpu, T->size);
}

static void layers_text(const uint64_t *sizes, size_t n, char *buf, size_t cap) {
  size_t len = 0;
  for (size_t i = 0; i < n && len < cap; i++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%" PRIu64, i ? "-" : "", sizes[i]);
}

/* One line on stderr: what a labels file holds, against the classes. */
static ntk_status say_labels(const char *path, const int32_t *y, size_t n, size_t classes) {
  struct ntk_label_counts c;
  ntk_status st = ntk_labels_count(y, n, classes, &c);
  if (st) return st;
  char line[NTK_PATH_MAX + 200];
  ntk_labels_describe(path, &c, line, sizeof line);
  fprintf(stderr, "ntkd: labels: %s; of the %zu classes of [train] layers\n", line, classes);
  return NTK_OK;
}

/* Under [train] flush_denormals (DAZ) a subnormal float32 input reads as
 * 0 in every step: a sample of nothing else would train as zeros, silently
 * (found by a hunt: pixels scaled by 1e-40 trained at chance, exit 0).
 * Refused then, as the kernel job refuses a sample below float32's range;
 * a few such values beside normal ones are said, not refused. */
static ntk_status subnormal_inputs(const struct trainer *T, struct ntk_dataset *ds, const char *path) {
  if (!T->o->flush_denormals) return NTK_OK;
  /* Each such value is held as the zero (of its sign) that DAZ reads, the
   * bytes the loader made under FTZ/DAZ before: the data's identity in a
   * snapshot (data_hash) stays what it was, and a snapshot of an earlier
   * ntkd resumes (a review: it was refused as another job's). */
  uint32_t *u = (uint32_t *)ds->x;
  size_t values = 0, samples = 0;
  for (size_t i = 0; i < ds->n; i++) {
    size_t sub = 0, normal = 0;
    for (size_t f = 0; f < ds->d; f++) {
      uint32_t *w = &u[i * ds->d + f];
      uint32_t a = *w & 0x7fffffffu;
      if (a != 0 && a < 0x00800000u) {
        sub++;
        *w &= 0x80000000u;
      }
      normal += a >= 0x00800000u;
    }
    if (sub && !normal)
      return ntk_error(NTK_EINPUT, "%s: sample %zu: every value is 0 or below float32's normal range (|x| < 1.18e-38), "
                       "which [train] flush_denormals = true reads as 0: it would train as a sample of zeros; scale "
                       "the data ([data] scale) or set flush_denormals = false", path, i);
    values += sub;
    samples += sub != 0;
  }
  if (values)
    fprintf(stderr, "ntkd: %s: %zu values in %zu samples are below float32's normal range (|x| < 1.18e-38) and read "
            "as 0 under [train] flush_denormals = true\n", path, values, samples);
  return NTK_OK;
}

/* Rank 0: the training and validation sets and their labels, checked
 * against [train] layers. */
static ntk_status load_sets(struct trainer *T) {
  const struct ntk_job *job = T->job;
  const struct ntk_train_opts *o = T->o;
  size_t classes = o->layers[o->nlayers - 1];
  ntk_status st = ntk_job_error_at(job, job->data_line, "[data] path", ntk_data_load(job, 4, &T->train));
  if (!st && T->train.d != o->layers[0])
    st = ntk_error(NTK_ECONFIG, "%s:%d: [train] layers starts with %zu inputs but %s has %zu features per sample",
                   job->source, o->layers_line, o->layers[0], job->data_path[0], T->train.d);
  if (!st)
    st = ntk_job_error_at(job, job->labels_line, "[data] labels",
                          ntk_labels_load(job->labels_path, T->train.n, job->count == 0, classes, &T->ytrain));
  if (!st) st = say_labels(job->labels_path, T->ytrain, T->train.n, classes);
  if (!st && T->train.n < o->batch)
    st = o->batch_line ? ntk_error(NTK_ECONFIG, "%s:%d: [train] batch = %zu is larger than the %zu training samples",
                                   job->source, o->batch_line, o->batch, T->train.n)
                       : ntk_error(NTK_ECONFIG, "%s: [train] batch = %zu (the default) is larger than the %zu training "
                                   "samples: set [train] batch", job->source, o->batch, T->train.n);
  if (!st && T->train.n > UINT32_MAX)
    st = ntk_error(NTK_ECONFIG, "%s: more than 2^32 training samples", job->source);
  if (!st) st = ntk_job_error_at(job, job->data_line, "[data] path", subnormal_inputs(T, &T->train, job->data_path[0]));
  if (st) return st;
  const float *x = T->train.x; /* finite: ntk_data_load refuses any other */
  for (size_t i = 0; i < T->train.n * T->train.d; i++)
    if (fabsf(x[i]) > T->xmax) T->xmax = fabsf(x[i]), T->xmax_at = i / T->train.d;
  /* The validation set through the same loader: the job with [validation]
   * as its [data] (same format, layout and scale). */
  struct ntk_job *vj = malloc(sizeof *vj);
  if (!vj) return ntk_error(NTK_ENOMEM, "out of memory");
  *vj = *job;
  vj->ndata = 1;
  memcpy(vj->data_path[0], o->val_path, sizeof o->val_path);
  vj->count = o->val_count;
  snprintf(vj->count_key, sizeof vj->count_key, "[validation] count");
  st = ntk_job_error_at(job, o->val_path_line, "[validation] path", ntk_data_load(vj, 4, &T->val));
  free(vj);
  if (!st && T->val.d != T->train.d)
    st = ntk_job_error_at(job, o->val_path_line, "[validation] path",
                          ntk_error(NTK_EINPUT, "%s: %zu features per sample, the training data have %zu", o->val_path,
                                    T->val.d, T->train.d));
  if (!st) st = ntk_job_error_at(job, o->val_path_line, "[validation] path", subnormal_inputs(T, &T->val, o->val_path));
  if (!st)
    st = ntk_job_error_at(job, o->val_labels_line, "[validation] labels",
                          ntk_labels_load(o->val_labels, T->val.n, o->val_count == 0, classes, &T->yval));
  if (!st) st = say_labels(o->val_labels, T->yval, T->val.n, classes);
  return st;
}

/* load_sets without FTZ/DAZ: under DAZ the loader's own conversions read a
 * subnormal float32 value as 0, and subnormal_inputs would see zeros (the
 * other ranks get rank 0's bytes). Normal values load the same either way. */
static ntk_status load_data(struct trainer *T) {
  ntk_cpu_flush_denormals(0);
  ntk_status st = load_sets(T);
  ntk_cpu_flush_denormals(T->o->flush_denormals);
  return st;
}

/* Collective: rank 0's samples and labels to every rank. */
static ntk_status share_data(struct trainer *T, struct ntk_dataset *ds, ntk_data_share_t **sh, int32_t **y) {
  ntk_status st = ntk_data_share(T->comm, ds, sh);
  if (st) return st;
  if (T->rank != 0 && !(*y = malloc((ds->n ? ds->n : 1) * sizeof **y)))
    st = ntk_error(NTK_ENOMEM, "out of memory for %zu labels", ds->n);
  if ((st = ntk_comm_agree_report(T->comm, st))) return st;
  return ntk_comm_bcast(T->comm, *y, ds->n * sizeof **y);
}

static int same_identity(const struct ntk_snapshot_info *a, const struct ntk_snapshot_info *b) {
  return a->nsizes == b->nsizes && !memcmp(a->sizes, b->sizes, sizeof a->sizes) && a->n_train == b->n_train &&
         a->batch == b->batch && a->seed == b->seed && a->data_hash == b->data_hash && a->nparams == b->nparams;
}

static void describe(const struct ntk_snapshot_info *s, char *buf, size_t cap) {
  char layers[256];
  layers_text(s->sizes, (size_t)s->nsizes, layers, sizeof layers);
  snprintf(buf, cap, "layers %s, %" PRIu64 " samples, batch %" PRIu64 ", seed %" PRIu64 ", data %016" PRIx64,
           layers, s->n_train, s->batch, s->seed, s->data_hash);
}

/* Rank 0: hold the snapshot at its name, open and locked (ntk_lock_file),
 * from before it is read to the end of the run; each new one is locked
 * before it takes the name (ntk_snapshot_write). So a second job on it
 * exits 7 whatever name reaches it and even after the lock file was
 * removed: with the lock file alone two jobs could write it in turn, both
 * exit 0. A file this job may not open for writing (read-only) is held
 * open without the lock (it is replaced, not written, at the first snapshot). */
static ntk_status hold_snapshot(struct trainer *T) {
  const char *path = T->o->snapshot;
  for (int tries = 0; tries < 100; tries++) {
    int fd, writable = 1;
    ntk_status st = ntk_open_regular(path, O_RDWR, "[train] snapshot", &fd);
    if (st && (errno == EACCES || errno == EPERM || errno == EROFS)) {
      /* Read-only: held open without the lock, which needs a file open for
       * writing. Open all the same: its inode is not freed, so no new file
       * can take its number and pass snapshot_in_place's check (ext4 gives a
       * freed number straight back). */
      writable = 0;
      st = ntk_open_regular(path, O_RDONLY, "[train] snapshot", &fd);
    }
    if (st) return st;
    if (writable && (st = ntk_lock_file(fd, path, "training snapshot", 1))) {
      close(fd);
      return st;
    }
    if (ntk_fd_at_path(fd, path)) {
      T->snap_fd = fd;
      return NTK_OK;
    }
    close(fd); /* replaced between the open and the lock: hold the new one */
  }
  return ntk_error(NTK_EIO, "%s: replaced again and again while this job tried to hold it", path);
}

/* Rank 0, just before a new snapshot takes the name (ntk_snapshot_write's
 * in_place): the snapshot at its name is still the one this job last read or
 * wrote (or, before its first, still none): else another writer was at work
 * (a job that got past a removed lock file without meeting this one's hold,
 * a copy by hand) and this job stops (exit 4) before it writes over it. */
static ntk_status snapshot_in_place(const void *ctx) {
  const struct trainer *T = ctx;
  const char *path = T->o->snapshot;
  int known = T->snap_fd >= 0, there = access(path, F_OK) == 0;
  if (known ? ntk_fd_at_path(T->snap_fd, path) : !there) return NTK_OK;
  return ntk_error(NTK_ECORRUPT, "%s is no longer the snapshot this job %s: it was %s while the job ran (by "
                   "another job, or by hand); this job wrote nothing over it: run the job again to resume from what "
                   "is there", path, known ? "last read or wrote" : "started without",
                   !known ? "created" : there ? "replaced" : "removed");
}

/* Rank 0: resume from the snapshot if it belongs to this job, refuse it if
 * not (unless `overwrite`), else start from the seed. */
static ntk_status start_state(struct trainer *T, int overwrite, int *resumed) {
  const char *path = T->o->snapshot;
  size_t np = T->mlp.nparams;
  *resumed = 0;
  char aside[PATH_MAX + NAME_MAX + 2];
  int displaced = *path ? ntk_find_displaced(path, aside, sizeof aside) : 0;
  if (displaced) /* kept, and said at every start until someone looks (docs/TRAINING.md) */
    fprintf(stderr, "ntkd: warning: %s%s is a file another writer had put at %s, moved aside by a job on it that "
            "was killed while its snapshot took the name; ntkd never removes it: look at it, keep it or remove "
            "it\n", aside, displaced > 1 ? " (and more of its kind)" : "", path);
  if (*path && access(path, F_OK) == 0) {
    struct ntk_snapshot_info have;
    float *s = NULL;
    ntk_status st = hold_snapshot(T);
    if (st) return st;
    struct stat read, held;
    st = ntk_snapshot_read(path, &have, &s, &read);
    if ((!st || st == NTK_ECORRUPT) && (fstat(T->snap_fd, &held) || held.st_dev != read.st_dev ||
                                        held.st_ino != read.st_ino)) {
      free(s); /* replaced between its hold and its read, by a writer that does not lock */
      return ntk_error(NTK_ECORRUPT, "%s was replaced while this job read it (by a writer that does not take its "
                       "lock); nothing was changed: run the job again", path);
    }
    if (st == NTK_ECORRUPT && !overwrite)
      return ntk_error(NTK_EMISMATCH, "%s\n  %s is not a usable snapshot; use --overwrite to start over",
                       ntk_error_message(), path);
    if (st && st != NTK_ECORRUPT) return st;
    int ours = !st && same_identity(&have, &T->pos);
    /* Trained into more epochs than this job asks: exit 0 would hand over
     * a model trained longer than the job file says. */
    uint64_t into = have.epoch + (have.step ? 1 : 0);
    if (ours && into > T->o->epochs && !overwrite) {
      char steps[64] = "";
      if (have.step) snprintf(steps, sizeof steps, " and %" PRIu64 " steps of epoch %" PRIu64, have.step, into);
      free(s);
      return ntk_error(NTK_EMISMATCH, "%s holds %" PRIu64 " epochs%s, more than this job's [train] epochs = %zu: "
                       "set epochs to at least %" PRIu64 " to keep it, or use --overwrite to start over", path,
                       have.epoch, steps, T->o->epochs, into);
    }
    if (ours && into <= T->o->epochs) {
      memcpy(T->state, s, 3 * np * sizeof *s);
      free(s);
      T->pos = T->saved = have;
      T->have_saved = *resumed = 1;
      fprintf(stderr, "ntkd: resuming from %s: %" PRIu64 " epochs done", path, have.epoch);
      if (have.step) fprintf(stderr, " and %" PRIu64 " steps of epoch %" PRIu64, have.step, have.epoch + 1);
      fprintf(stderr, "\n");
      return NTK_OK;
    }
    free(s);
    if (!st && !overwrite) {
      char a[512], b[512];
      describe(&have, a, sizeof a);
      describe(&T->pos, b, sizeof b);
      return ntk_error(NTK_EMISMATCH, "%s is the snapshot of another training job:\n  snapshot: %s\n  job:      %s\n"
                       "  use --overwrite to start over, or set [train] snapshot to a new file", path, a, b);
    }
    fprintf(stderr, "ntkd: --overwrite: starting over; %s is replaced at the first snapshot\n", path);
  }
  ntk_mlp_init_params(&T->mlp, T->o->seed, T->state);
  memset(T->state + np, 0, 2 * np * sizeof *T->state);
  return NTK_OK;
}

/* Rank 0: take [train] log before the snapshot is read: opened without
 * truncating it and locked (one byte at 2^62, as a store is), so that a
 * second job on the same log exits 7 before it reads, replaces or cuts back
 * anything, even when the first job's lock file was removed or replaced
 * meanwhile (the snapshot has its own hold: hold_snapshot). */
static ntk_status take_log(struct trainer *T) {
  const char *path = T->o->log;
  if (!*path) return NTK_OK;
  ntk_status st = ntk_make_parents(path);
  struct stat sb;
  T->log_created = stat(path, &sb) != 0 && errno == ENOENT;
  if (!st) st = ntk_open_regular(path, O_RDWR | O_CREAT | O_APPEND, "training log", &T->log_fd);
  if (!st) st = ntk_lock_file(T->log_fd, path, "training log", 0);
  if (st) T->log_created = 0;
  return st == NTK_ELOCKED ? st : ntk_job_error_at(T->job, T->o->log_line, "[train] log", st);
}

uint64_t ntk_train_log_chain(uint64_t prev, const char *line, size_t len) {
  char buf[8 + 1024];
  if (len > sizeof buf - 8) len = sizeof buf - 8; /* records are under 300 bytes */
  memcpy(buf, &prev, 8);
  memcpy(buf + 8, line, len);
  return ntk_checksum(buf, 8 + len);
}

/* A line of the next epoch found at `at` (its `len` bytes, "\n" included)
 * and ending at `end`: pending (T->log_pending), the log kept to its end. */
static void pend_line(struct trainer *T, const char *line, size_t len, long at, long *keep, long end) {
  snprintf(T->log_pending, sizeof T->log_pending, "%.*s", (int)(len ? len - 1 : 0), line);
  T->log_pending_at = at;
  T->log_pending_size = end;
  *keep = end;
}

/* Rank 0, resuming: how much of [train] log to keep (*keep bytes), and the
 * log fields of T->pos from now on. The log must hold, in order, the lines
 * of the epochs the snapshot recorded (log_first..epoch, with the chain of
 * their checksums it recorded: ntk_train_log_chain); after them it may hold
 * a line of the next epoch (this job's, written before a kill stopped the
 * snapshot, or another job's that shares the log: pending, pend_line) and
 * a fragment cut short at its end (a torn write: cut). Anything
 * else is another job's log or a changed one, refused (exit 2) with the
 * log untouched: once, any leading lines of epochs up to the snapshot's
 * were kept and the rest cut, splicing another job's lines into this one's
 * and cutting away that job's own. An empty log (a new file), or one whose
 * first line is the next epoch's (emptied, then stopped before that epoch's
 * snapshot; that line pending), starts at the next epoch. A snapshot from before these fields
 * (log state 0) resumes by that ntkd's rule (the leading whole lines of its
 * epochs kept, the rest cut), the lines kept recorded as an unchecked head. */
static ntk_status check_log(struct trainer *T, long *keep) {
  const char *path = T->o->log;
  struct ntk_snapshot_info *at = &T->pos;
  uint64_t E = at->epoch, first = E + 1, want = 0, head = 0;
  int legacy = at->log_state == NTK_SNAP_LOG_UNKNOWN;
  if (at->log_state == NTK_SNAP_LOG_CHAIN) first = at->log_first, want = at->log_sum, head = at->log_head;
  *keep = 0;
  FILE *f = fopen(path, "r");
  if (!f) return ntk_error(NTK_EIO, "%s: cannot read the log: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) == 0 && sb.st_size == 0) {
    fclose(f);
    if (first <= E || head)
      fprintf(stderr, "ntkd: %s is empty: it starts at epoch %llu (the lines of the epochs before are not in it)\n",
              path, (unsigned long long)E + 1);
    at->log_first = E + 1;
    at->log_sum = at->log_head = 0;
    return NTK_OK;
  }
  char line[1024], what[240] = "";
  unsigned long long e = 0, lineno = 0;
  uint64_t chain = 0, expect = first;
  int extra = 0;
  /* Lines kept as they were from a log of an ntkd before the record (below):
   * not checked, but whole and there. */
  while (!what[0] && (uint64_t)ftell(f) < head) {
    if (!fgets(line, sizeof line, f)) {
      snprintf(what, sizeof what, "it is shorter than the %llu bytes of lines kept from before",
               (unsigned long long)head);
      break;
    }
    lineno++;
    if ((uint64_t)ftell(f) > head)
      snprintf(what, sizeof what, "its first %llu bytes, kept from before, no longer end a line",
               (unsigned long long)head);
  }
  if (!what[0]) *keep = (long)head;
  while (!what[0] && fgets(line, sizeof line, f)) {
    size_t len = strlen(line);
    lineno++;
    int ended = len && line[len - 1] == '\n';
    if (!ended && feof(f)) { /* a fragment cut short at the end: cut, if of a line after the snapshot's */
      if (expect <= E && !legacy)
        snprintf(what, sizeof what, "line %llu, where epoch %llu's line belongs, is cut short", lineno,
                 (unsigned long long)expect);
      break;
    }
    if (!ended || len < 2 || line[len - 2] != '}' || sscanf(line, "{\"epoch\": %llu", &e) != 1) {
      if (!legacy) snprintf(what, sizeof what, "line %llu is not a log record", lineno);
      break;
    }
    if (legacy) { /* an ntkd before the record: its rule, whole records of the snapshot's epochs up to another */
      if (e > E) break;
      *keep = ftell(f);
    } else if (e == E + 1 && expect == first && first <= E && !head && ftell(f) == (long)len) {
      /* The log's first line is the next epoch's: the log was emptied (or is
       * new) and this job's run after it stopped before that epoch's
       * snapshot. As an empty log: it starts at the next epoch. */
      fprintf(stderr, "ntkd: %s holds no line of epochs %llu..%llu: it starts at epoch %llu\n", path,
              (unsigned long long)first, (unsigned long long)E, (unsigned long long)E + 1);
      first = expect = E + 1, want = 0;
      extra = 1;
      pend_line(T, line, len, 0, keep, ftell(f));
    } else if (!extra && e == expect && e <= E) {
      chain = ntk_train_log_chain(chain, line, len);
      expect++;
      *keep = ftell(f);
    } else if (!extra && e == E + 1 && expect == E + 1) {
      /* the next epoch's line, its snapshot never written: this job's (a
       * kill between the line and the snapshot) or another's, which a
       * resume once cut, exit 0 (a hunt): pending */
      extra = 1;
      pend_line(T, line, len, *keep, keep, ftell(f));
    } else {
      snprintf(what, sizeof what, "line %llu is epoch %llu, where %s", lineno, e,
               expect <= E ? "the snapshot's epochs go on" : "the snapshot's epochs have ended");
    }
  }
  int failed = ferror(f);
  fclose(f);
  if (failed) return ntk_error(NTK_EIO, "%s: cannot read the log", path);
  if (legacy) { /* from now on recorded: what was kept is the head, not checked; lines from the next epoch on */
    at->log_head = (uint64_t)*keep;
    at->log_first = E + 1;
    at->log_sum = 0;
    return NTK_OK;
  }
  if (!what[0] && expect != E + 1)
    snprintf(what, sizeof what, "it ends at epoch %llu", (unsigned long long)expect - 1);
  if (expect == E + 1 && chain != want) /* the first reason, if the later lines differ too */
    snprintf(what, sizeof what, "its lines of epochs %llu..%llu are not those this job wrote (their checksums "
             "differ from the snapshot's record; every byte counts, elapsed_time too)", (unsigned long long)first,
             (unsigned long long)E);
  char held[160];
  /* The snapshot's lines all there as this job wrote them, and more after
   * them: another job's, which shares the log (emptying it would lose them) */
  int ours_then_more = expect == E + 1 && chain == want;
  if (ours_then_more)
    snprintf(held, sizeof held, "after this job's lines of epochs %llu..%llu it holds lines no snapshot of this job "
             "records", (unsigned long long)first, (unsigned long long)E);
  else if (first <= E)
    snprintf(held, sizeof held, "the log does not hold the lines of the snapshot's epochs %llu..%llu as this job "
             "wrote them", (unsigned long long)first, (unsigned long long)E);
  else
    snprintf(held, sizeof held, "the log should hold no line before epoch %llu, where this job started it anew",
             (unsigned long long)E + 1);
  if (what[0] && ours_then_more)
    return ntk_error(NTK_EMISMATCH, "%s: %s: %s (%s holds %llu epochs): another job's lines, which share the log; "
                     "nothing was changed: set [train] log to a new file", path, what, held, T->o->snapshot,
                     (unsigned long long)E);
  if (what[0])
    return ntk_error(NTK_EMISMATCH, "%s: %s: %s (%s holds %llu epochs): it is another job's log, or was changed; "
                     "nothing was changed: restore it, or set [train] log to a new file, or empty it (it then "
                     "starts at epoch %llu)", path, what, held, T->o->snapshot, (unsigned long long)E,
                     (unsigned long long)E + 1);
  at->log_first = first;
  at->log_sum = chain;
  return NTK_OK;
}

/* Rank 0, before each line: the log at its name is still the file this job
 * writes. An editor's save, `sed -i` or a mv over it left the job writing
 * into the unlinked old file, its lines lost, exit 0; it stops (exit 4)
 * before the line, and before the snapshot of that epoch. */
static ntk_status log_in_place(const struct trainer *T) {
  if (ntk_fd_at_path(fileno(T->log), T->o->log)) return NTK_OK;
  char held[NTK_PATH_MAX + 64] = "";
  if (*T->o->snapshot && T->have_saved)
    snprintf(held, sizeof held, " (%s holds %llu epochs)", T->o->snapshot, (unsigned long long)T->saved.epoch);
  else if (*T->o->snapshot)
    snprintf(held, sizeof held, " (no snapshot written yet)");
  return ntk_error(NTK_ECORRUPT, "%s is no longer the log this job writes: it was replaced or removed while the "
                   "job ran; this job wrote no more%s: restore the log, or empty it (it then starts at the next "
                   "epoch), and run the job again", T->o->log, held);
}

/* Rank 0, starting afresh without --overwrite: [train] log may be empty
 * (new), or hold one line of epoch 1 and a fragment after it: this job's
 * (a run stopped between epoch 1's line and its snapshot: check_log's rule
 * for the next epoch) or another job's. That line is kept in
 * T->log_pending and the log left as it is until this job's epoch 1 ends
 * (pending_line_is_ours). Anything more is a run no snapshot of this job
 * records (another job's log, or this job's run without a snapshot), which
 * a fresh start emptied without a word (a hunt: another job's finished log,
 * its own rerun then refused). Refused (exit 2), the log untouched. */
static ntk_status check_fresh_log(struct trainer *T) {
  const char *path = T->o->log;
  FILE *f = fopen(path, "r");
  if (!f) return ntk_error(NTK_EIO, "%s: cannot read the log: %s", path, strerror(errno));
  char line[1024];
  unsigned long long e = 0, lines = 0, first = 0;
  int own_form = 0; /* the first line as ntkd writes one: at the start, '}' and '\n' at its end */
  while (fgets(line, sizeof line, f)) {
    size_t len = strlen(line);
    int ended = len && line[len - 1] == '\n';
    if (!ended && !feof(f)) { /* longer than any record (or a NUL inside): a line, not a record */
      for (int c = 0; c != EOF && c != '\n';) c = fgetc(f);
      if (!lines++) first = 0;
      continue;
    }
    while (len && isspace((unsigned char)line[len - 1])) line[--len] = '\0'; /* "\n", "\r\n" */
    if (!len) continue; /* a blank line (`echo > log`): no run's record */
    int record = sscanf(line, "{\"epoch\": %llu", &e) == 1 && line[len - 1] == '}';
    /* At the end without its newline: a record whole but for it is a line
     * (an editor drops it); anything else a write cut short. */
    if (!ended && !record) break;
    if (!lines++) {
      first = record ? e : 0;
      own_form = ended && ftell(f) == (long)len + 1; /* no blank line before it, no "\r" */
      snprintf(T->log_pending, sizeof T->log_pending, "%s", line);
    }
  }
  int failed = ferror(f);
  fclose(f);
  if (failed) return ntk_error(NTK_EIO, "%s: cannot read the log", path);
  struct stat sb;
  if (lines == 1 && first == 1 && own_form && stat(path, &sb) == 0) {
    T->log_pending_at = 0;
    T->log_pending_size = sb.st_size;
    return NTK_OK;
  }
  T->log_pending[0] = '\0';
  if (!lines) return NTK_OK;
  if (lines == 1 && first == 1) /* edited: ntkd's own killed run leaves its line as it wrote it */
    return ntk_error(NTK_EMISMATCH, "%s holds a line of epoch 1 that is not as ntkd writes one (a blank line before "
                     "it, a CRLF end or no final newline): an edited log, or another program's; nothing was "
                     "changed: use --overwrite to start over, or set [train] log to a new file", path);
  return ntk_error(NTK_EMISMATCH, "%s holds %llu line%s of a training run that %s records (another job's log, or an "
                   "earlier run of this job): this job starts afresh and would empty it; nothing was changed: use "
                   "--overwrite to start over, or set [train] log to a new file", path, lines, lines == 1 ? "" : "s",
                   *T->o->snapshot ? "no snapshot of this job" : "no snapshot ([train] snapshot is not set)");
}

/* Rank 0: the JSON log, checked and cut back to the epochs the snapshot
 * holds when resuming (check_log), else started afresh (check_fresh_log
 * unless `overwrite`); the log fields of T->pos, which every snapshot
 * records. */
static ntk_status open_log(struct trainer *T, int resumed, int overwrite) {
  const char *path = T->o->log;
  struct ntk_snapshot_info *at = &T->pos;
  if (!*path) {
    at->log_state = NTK_SNAP_LOG_NONE;
    at->log_first = at->log_sum = at->log_head = 0;
    return NTK_OK;
  }
  long keep = 0;
  T->log_pending[0] = '\0';
  if (resumed) {
    ntk_status st = check_log(T, &keep);
    if (st) return st;
  } else {
    if (!overwrite) {
      ntk_status st = check_fresh_log(T);
      if (st) return st;
      /* A line of epoch 1 that may be another job's: kept, with what follows it, until this job's own. */
      struct stat sb;
      if (T->log_pending[0] && fstat(T->log_fd, &sb) == 0) keep = (long)sb.st_size;
    }
    at->log_first = 1;
    at->log_sum = at->log_head = 0;
  }
  at->log_state = NTK_SNAP_LOG_CHAIN;
  if (ftruncate(T->log_fd, keep)) return ntk_error(NTK_EIO, "%s: cannot cut back the log: %s", path, strerror(errno));
  if (!(T->log = fdopen(T->log_fd, "a")))
    return ntk_error(NTK_EIO, "%s: cannot open the log: %s", path, strerror(errno));
  T->log_fd = -1; /* T->log owns it (and its lock) now */
  return NTK_OK;
}

/* What a rerun of a job without [train] snapshot does: it starts over,
 * and with a log that holds more than epoch 1's line, only with
 * --overwrite (check_fresh_log: such a log may be another job's). */
static const char *no_snapshot_rerun(const struct trainer *T) {
  return *T->o->log ? "no [train] snapshot is set, so a rerun starts over (with --overwrite, which empties the log)"
                    : "no [train] snapshot is set, so a rerun starts over";
}

/* Rank 0: training diverged `where` ("in epoch 3, step 5 of 12"), because
 * of `what`. NTK_ENONFINITE (exit 8) saying what the snapshot and the log
 * still hold, which are never given a non-finite value, and what to change. */
static ntk_status diverged(const struct trainer *T, const char *where, const char *what) {
  const struct ntk_train_opts *o = T->o;
  char kept[NTK_PATH_MAX + 200];
  if (!*o->snapshot)
    snprintf(kept, sizeof kept, "%s", no_snapshot_rerun(T));
  else if (!T->have_saved)
    snprintf(kept, sizeof kept, "no snapshot was written yet, so a rerun starts over");
  else if (T->saved.step)
    snprintf(kept, sizeof kept, "%s holds %" PRIu64 " epochs and %" PRIu64 " steps, and a rerun resumes from it "
             "with the constants of the job file then (they may change between runs; --overwrite starts over)",
             o->snapshot, T->saved.epoch, T->saved.step);
  else
    snprintf(kept, sizeof kept, "%s holds %" PRIu64 " epochs, and a rerun resumes from it with the constants of "
             "the job file then (they may change between runs; --overwrite starts over)", o->snapshot,
             T->saved.epoch);
  /* Inputs far from 1 can overflow float32 in the forward and backward passes whatever the step size: say so
   * first (the data, not alpha, are what to change). */
  char data[NTK_PATH_MAX + 200] = "";
  if (T->xmax >= NTK_TRAIN_XBIG)
    snprintf(data, sizeof data, "The training data reach |x| = %g (sample %zu of %s), which float32 steps do not "
             "hold: scale them ([data] scale), then, if it still diverges,", (double)T->xmax, T->xmax_at,
             T->job->data_path[0]);
  return ntk_error(NTK_ENONFINITE, "%s: training diverged %s: %s. Neither the log nor the snapshot has it: %s. "
                   "%s%s lower [train] alpha (now %g), or raise beta2 towards 1 (now %g) or eps (now %g)",
                   T->job->source, where, what, kept, data,
                   *data ? "" : "The steps are too large for this network and data:", o->alpha, o->beta2, o->eps);
}

/* The training loop's collectives (a step's sum, validation, the epoch's
 * end) wait for the other ranks at most [train] rank_timeout seconds, and at
 * least 3 times the longest stretch between two of them seen on this rank
 * (a step; an epoch's end, with rank 0's snapshot), so that a slow snapshot
 * or a rank slowed by other load is not taken for a stopped one. A rank
 * that stops answering (SIGSTOP, a hung node) ends the job from the ranks
 * that wait for it: exit 9, the last snapshot kept. */
static double wait_limit(const struct trainer *T) { return ntk_patience(T->o->rank_timeout, T->pace.slowest); }

static ntk_status synced(struct trainer *T, ntk_status st, double limit) {
  if (st == NTK_ESTALLED) {
    char kept[NTK_PATH_MAX + 100];
    if (T->have_saved)
      snprintf(kept, sizeof kept, "%s holds epoch %" PRIu64 " step %" PRIu64 "; rerun the same command to resume",
               T->o->snapshot, T->saved.epoch, T->saved.step);
    else
      snprintf(kept, sizeof kept, "%s", *T->o->snapshot ? "no snapshot was written yet, so a rerun starts over"
                                                        : no_snapshot_rerun(T));
    fprintf(stderr, "ntkd: rank %d: %s, in epoch %" PRIu64 " after step %" PRIu64 " (limit %.1f s: [train] "
            "rank_timeout, at least 3x the longest stretch between two steps); ending the job: %s\n", T->rank,
            ntk_error_message(), T->pos.epoch + 1, T->pos.step, limit, kept);
    ntk_comm_abort(ntk_status_exit_code(st)); /* the collective is still pending: no way back */
  }
  ntk_pace_mark(&T->pace, ntk_now());
  return st;
}

static ntk_status t_sum_floats(struct trainer *T, float *buf, size_t n) {
  double limit = wait_limit(T);
  return synced(T, ntk_comm_sum_floats_within(T->comm, buf, n, limit), limit);
}

static ntk_status t_sum_doubles(struct trainer *T, double *buf, size_t n) {
  double limit = wait_limit(T);
  return synced(T, ntk_comm_sum_doubles_within(T->comm, buf, n, limit), limit);
}

static ntk_status t_bcast(struct trainer *T, void *buf, size_t bytes) {
  double limit = wait_limit(T);
  return synced(T, ntk_comm_bcast_within(T->comm, buf, bytes, limit), limit);
}

static ntk_status t_agree_report(struct trainer *T, ntk_status local) {
  double limit = wait_limit(T);
  return synced(T, ntk_comm_agree_report_within(T->comm, local, limit), limit);
}

/* Rank 0: exit 8 unless the parameters and Adam's m and v are finite
 * (and v >= 0): nothing else may be logged or snapshotted. One pass. */
static ntk_status check_state(const struct trainer *T, const char *where) {
  size_t np = T->mlp.nparams;
  char why[400];
  if (ntk_adam_state_problem(T->state, T->state + np, T->state + 2 * np, np, why, sizeof why))
    return diverged(T, where, why);
  return NTK_OK;
}

/* snapshot_in_place, then, under the test setting NTKD_TEST_SNAPSHOT_PAUSE=S,
 * S seconds before the new snapshot takes the name: a test replaces the
 * file there meanwhile (ntk_snapshot_write must not write over it). */
static ntk_status snapshot_in_place_paused(const void *ctx) {
  ntk_status st = snapshot_in_place(ctx);
  const char *pause = getenv("NTKD_TEST_SNAPSHOT_PAUSE");
  if (!st && pause) {
    fprintf(stderr, "ntkd: test setting NTKD_TEST_SNAPSHOT_PAUSE: paused before the snapshot takes its name\n");
    ntk_sleep(atof(pause), NULL);
  }
  return st;
}

static ntk_status write_snapshot(struct trainer *T) {
  if (!*T->o->snapshot) return NTK_OK;
  size_t np = T->mlp.nparams;
  int held = -1;
  ntk_status st = ntk_snapshot_write(T->o->snapshot, &T->pos, T->state, T->state + np, T->state + 2 * np, &held,
                                     T->snap_fd, snapshot_in_place_paused, T);
  if (st) return st;
  if (T->snap_fd >= 0) close(T->snap_fd); /* the one it replaced */
  T->snap_fd = held;
  T->saved = T->pos, T->have_saved = 1;
  return NTK_OK;
}

/* This rank's device failed: kept, with its message, until the next
 * collective tells every rank (a rank that returned at once left the others
 * waiting in the step's sum for rank_timeout, then exit 9 "stopped
 * answering", the failure unsaid). Test setting NTKD_TEST_TRAIN_FAIL=R:T:
 * rank R's gradient fails at Adam step T (docs/TRAINING.md). */
static void fail_here(struct trainer *T, ntk_status dst) {
  if (T->failed) return;
  T->failed = dst;
  snprintf(T->failed_why, sizeof T->failed_why, "%s", ntk_error_message());
}

static int test_failure(const struct trainer *T) {
  const char *v = getenv("NTKD_TEST_TRAIN_FAIL");
  int r;
  unsigned long long t;
  return v && sscanf(v, "%d:%llu", &r, &t) == 2 && r == T->rank && t == T->pos.t + 1;
}

/* This rank's failure, raised again with its message, or NTK_OK. */
static ntk_status own_failure(const struct trainer *T) {
  return T->failed ? ntk_error(T->failed, "%s", T->failed_why) : NTK_OK;
}

/* Collective, after a sum that carried the ranks' failure flags (`any`):
 * every rank stops with the failed rank's status and message. */
static ntk_status failed_somewhere(struct trainer *T, int any) {
  if (!any) return NTK_OK;
  ntk_status st = t_agree_report(T, own_failure(T));
  return st ? st : ntk_error(NTK_EINTERNAL, "a rank's device failed"); /* (agree always sees it) */
}

/* Collective: summed validation loss and hits over the ranks' contiguous
 * shares, plus the number of ranks asking to stop (one reduction for all). */
static ntk_status validate(struct trainer *T, double *loss, double *acc, int *stop) {
  size_t nv = T->val.n, lo = nv * (size_t)T->rank / (size_t)T->size, hi = nv * (size_t)(T->rank + 1) / (size_t)T->size;
  const float *x = T->val.x;
  double s[4] = {0, 0, ntk_stop_requested() ? 1 : 0, T->failed ? 1 : 0};
  for (size_t i = lo; i < hi; i += EVAL_CHUNK) {
    size_t b = hi - i < EVAL_CHUNK ? hi - i : EVAL_CHUNK, hits = 0;
    s[0] += ntk_mlp_eval(&T->mlp, T->state, x + i * T->val.d, T->yval + i, b, T->work, &hits);
    s[1] += (double)hits;
  }
  ntk_status st = t_sum_doubles(T, s, 4);
  if (!st) st = failed_somewhere(T, s[3] > 0); /* an update failed in the epoch's last step */
  *loss = s[0] / (double)nv;
  *acc = s[1] / (double)nv;
  *stop = s[2] > 0;
  return st;
}

/* Collective: every rank's parameters must be bit-identical to rank 0's. */
static ntk_status check_in_step(struct trainer *T, uint64_t *sum) {
  uint64_t mine = ntk_checksum(T->state, T->mlp.nparams * sizeof(float)), root = mine;
  ntk_status st = t_bcast(T, &root, sizeof root);
  if (!st && mine != root)
    st = ntk_error(NTK_EINTERNAL, "rank %d: parameters differ from rank 0's after epoch %" PRIu64
                   " (checksum %016" PRIx64 " vs %016" PRIx64 ")", T->rank, T->pos.epoch, mine, root);
  *sum = root;
  return t_agree_report(T, st);
}

/* Rank 0, at the end of the epoch whose line the log already held
 * (T->log_pending: epoch 1 on a fresh start, check_fresh_log; the next
 * epoch on a resume, check_log): this job's record `rec` of that epoch
 * equal to it but for the value of elapsed_time (a run of the same job on
 * as many ranks is bit-identical; the value as ntkd prints it) stands for
 * it: that line is kept byte for byte (a fragment after it cut) and is the
 * line this job's snapshots record (*kept). It is this job's (a run stopped
 * between that line and its snapshot), or the same training's under
 * another snapshot. Another record (another job's, or this job's on other
 * ranks), or a log changed since it was read, is refused (exit 2) before
 * the line and the snapshot, the log as it was. A fresh start once emptied
 * another job's log of one epoch, and a resume cut another job's line of
 * its next epoch, exit 0, that job's rerun then refused (hunts). */
static ntk_status pending_line_is_ours(struct trainer *T, const char *rec, int *kept) {
  static const char key[] = ", \"elapsed_time\": ";
  const char *tail = strstr(rec, key), *old = T->log_pending;
  size_t n = tail ? (size_t)(tail - rec) + sizeof key - 1 : strlen(rec);
  double t = -1;
  int used = -1;
  int ours = tail && strncmp(old, rec, n) == 0 && sscanf(old + n, "%lf}%n", &t, &used) == 1 && used > 0 &&
             old[n + (size_t)used] == '\0' && isfinite(t) && t >= 0;
  /* and elapsed_time as ntkd prints it (%.6f): a JSON number (C's 0x1p-3 or 5. were taken, a hunt) */
  char again[64];
  if (ours) snprintf(again, sizeof again, "%.6f}", t), ours = !strcmp(again, old + n);
  *kept = 0;
  unsigned long long E1 = (unsigned long long)T->pos.epoch;
  if (!ours) {
    T->log_pending[0] = '\0';
    return ntk_error(NTK_EMISMATCH, "%s: its line of epoch %llu is not the record of this job's epoch %llu (another "
                     "job's line, or this job's from a run on another number of ranks): this job trained epoch %llu "
                     "and wrote neither its line nor a snapshot; the log is as it was: %s", T->o->log, E1, E1, E1,
                     T->have_saved ? "if that line is this job's, remove it and run again (it resumes from the "
                                     "snapshot); else set [train] log to a new file"
                                   : "set [train] log to a new file, or use --overwrite to empty it and start over");
  }
  char line[sizeof T->log_pending + 1], now[sizeof line];
  size_t len = strlen(old);
  memcpy(line, old, len);
  line[len++] = '\n';
  T->log_pending[0] = '\0';
  /* The file still as it was read (the line as ntkd writes one, perhaps a
   * fragment after it): a writer's lines added meanwhile were cut, exit 0
   * (a hunt). Then only the fragment goes. */
  int fd = fileno(T->log);
  off_t at = T->log_pending_at;
  struct stat sb;
  if (fflush(T->log) || fstat(fd, &sb))
    return ntk_error(NTK_EIO, "%s: cannot read the log: %s", T->o->log, strerror(errno));
  if (sb.st_size != T->log_pending_size || pread(fd, now, len, at) != (ssize_t)len || memcmp(now, line, len))
    return ntk_error(NTK_EMISMATCH, "%s changed while this job trained its epoch %llu (another writer): this job "
                     "wrote neither its line nor a snapshot, and left the log as it is: set [train] log to a new "
                     "file, or use --overwrite to empty it and start over", T->o->log, E1);
  if (ftruncate(fd, at + (off_t)len) || (fsync(fd) && errno != EINVAL))
    return ntk_error(NTK_EIO, "%s: cannot cut the fragment after its line of epoch %llu: %s", T->o->log, E1,
                     strerror(errno));
  T->pos.log_sum = ntk_train_log_chain(T->pos.log_sum, line, len);
  *kept = 1;
  return NTK_OK;
}

static ntk_status interrupted(struct trainer *T) {
  /* a rank whose last update failed holds parameters the others do not: no snapshot of them */
  ntk_status st = t_agree_report(T, own_failure(T));
  if (st) return st;
  if (T->rank == 0) {
    char where[200];
    snprintf(where, sizeof where, "by the stop in epoch %" PRIu64 " after step %" PRIu64, T->pos.epoch + 1,
             T->pos.step);
    st = check_state(T, where);
    /* Not while the log holds a line of this epoch not yet known to be this
     * job's: a later resume could not tell that it was pending. */
    if (!st && !T->log_pending[0]) st = write_snapshot(T);
  }
  if ((st = t_agree_report(T, st))) return st;
  if (T->rank == 0 && T->log_pending[0])
    return ntk_error(NTK_EINTERRUPTED, "interrupted in epoch %" PRIu64 " after step %" PRIu64 "; no snapshot of it: "
                     "%s holds a line of epoch %" PRIu64 " that is checked against this job's at that epoch's end, "
                     "so a rerun goes on from %s", T->pos.epoch + 1, T->pos.step, T->o->log, T->pos.epoch + 1,
                     T->have_saved ? "the last snapshot" : "the start");
  if (*T->o->snapshot)
    return ntk_error(NTK_EINTERRUPTED, "interrupted in epoch %" PRIu64 " after step %" PRIu64 "; snapshot in %s; "
                     "rerun the same command to resume", T->pos.epoch + 1, T->pos.step, T->o->snapshot);
  return ntk_error(NTK_EINTERRUPTED, "interrupted in epoch %" PRIu64 "; %s", T->pos.epoch + 1, no_snapshot_rerun(T));
}

static ntk_status train_epochs(struct trainer *T) {
  const struct ntk_train_opts *o = T->o;
  size_t np = T->mlp.nparams, d = T->train.d, B = o->batch, steps = T->train.n / B;
  size_t lo = B * (size_t)T->rank / (size_t)T->size, bl = B * (size_t)(T->rank + 1) / (size_t)T->size - lo;
  const float *x = T->train.x;
  float *g = T->g;
  double t0 = ntk_now(), elapsed0 = T->pos.elapsed;
  T->pace.last = t0;
  if (T->rank == 0) {
    printf("%-12s%-12s%-22s%-15s%-26s%s\n", "epoch", "main/loss", "validation/main/loss", "main/accuracy",
           "validation/main/accuracy", "elapsed_time");
    fflush(stdout);
  }
  for (uint64_t e = T->pos.epoch; e < o->epochs; e++) {
    ntk_train_permutation(o->seed, e, T->train.n, T->perm);
    int stop = 0;
    for (uint64_t s = T->pos.step; s < steps; s++) {
      const uint32_t *idx = T->perm + s * B + lo;
      for (size_t i = 0; i < bl; i++) {
        memcpy(T->xb + i * d, x + (size_t)idx[i] * d, d * sizeof *x);
        T->yb[i] = T->ytrain[idx[i]];
      }
      size_t hits = 0;
      double loss = 0;
      ntk_status dst = T->failed ? T->failed : T->dev->mlp_grad(T->dctx, T->xb, T->yb, bl, g, &loss, &hits);
      if (!dst && test_failure(T)) dst = ntk_error(NTK_EINTERNAL, "the gradient failed (test setting "
                                                   "NTKD_TEST_TRAIN_FAIL)");
      if (dst) {
        fail_here(T, dst);
        memset(g, 0, np * sizeof *g), loss = 0, hits = 0;
      }
      g[np] = (float)loss;
      g[np + 1] = (float)hits;
      g[np + 2] = ntk_stop_requested() ? 1.0f : 0.0f;
      g[np + 3] = T->failed ? 1.0f : 0.0f;
      ntk_status st = t_sum_floats(T, g, np + 4);
      if (!st) st = failed_somewhere(T, g[np + 3] > 0);
      if (st) return st;
      /* A non-finite loss or gradient stops the run before the update:
       * every rank holds the same reduced bits (as for the parameters),
       * so all stop at this step; rank 0 says why. */
      int loss_bad = !isfinite(g[np]);
      size_t bad = loss_bad ? np : ntk_train_first_nonfinite(g, np);
      if (loss_bad || bad < np) {
        if (T->rank == 0) {
          char where[200], what[200];
          snprintf(where, sizeof where, "in epoch %" PRIu64 ", step %" PRIu64 " of %zu", e + 1, s + 1, steps);
          if (loss_bad) snprintf(what, sizeof what, "the batch's loss is %s", g[np] > 0 ? "inf" : "NaN");
          else snprintf(what, sizeof what, "the batch's gradient of parameter %zu of %zu is %s", bad, np,
                        isnan(g[bad]) ? "NaN" : g[bad] > 0 ? "inf" : "-inf");
          st = diverged(T, where, what);
        }
        return t_agree_report(T, st);
      }
      /* Gradient sums over the global batch, divided by it inside the update. */
      if ((dst = T->dev->mlp_adam(T->dctx, &T->adam, ++T->pos.t, 1.0f / (float)B, g)))
        fail_here(T, ntk_error(dst, "%s", ntk_error_message())); /* said at the next sum */
      T->pos.loss_sum += g[np];
      T->pos.correct += g[np + 1];
      T->pos.step = s + 1;
      if (g[np + 2] > 0) {
        T->pos.elapsed = elapsed0 + ntk_now() - t0;
        if (s + 1 < steps) return interrupted(T);
        stop = 1;
      }
    }
    double vloss, vacc;
    int vstop;
    ntk_status st = validate(T, &vloss, &vacc, &vstop);
    if (st) return st;
    double seen = (double)(steps * B), loss = T->pos.loss_sum / seen, acc = T->pos.correct / seen;
    T->pos.epoch = e + 1;
    T->pos.step = 0;
    T->pos.loss_sum = T->pos.correct = 0;
    T->pos.elapsed = elapsed0 + ntk_now() - t0;
    uint64_t sum;
    if ((st = check_in_step(T, &sum))) return st;
    if (T->rank == 0) {
      /* Only finite numbers reach the table, the log and the snapshot. */
      char where[64];
      snprintf(where, sizeof where, "after epoch %" PRIu64, T->pos.epoch);
      if (!isfinite(vloss)) {
        char what[64];
        snprintf(what, sizeof what, "the validation loss is %s", vloss > 0 ? "inf" : "NaN");
        st = diverged(T, where, what);
      }
      if (!st) st = check_state(T, where);
      if (!st) {
        printf("%-12" PRIu64 "%-12.6g%-22.6g%-15.6g%-26.6g%.6g\n", T->pos.epoch, loss, vloss, acc, vacc,
               T->pos.elapsed);
        fflush(stdout);
      }
      if (!st && T->log) st = log_in_place(T);
      if (!st && T->log) {
        /* One write() per record: the line (under 300 bytes) is formatted
         * into the stream's empty buffer and flushed at once. fsync before
         * the snapshot: the log holds every epoch the snapshot holds, also
         * after a crash (a device that cannot sync, EINVAL, is let be). */
        char rec[512];
        int len = snprintf(rec, sizeof rec, "{\"epoch\": %" PRIu64 ", \"main/loss\": %.9g, \"validation/main/loss\": "
                           "%.9g, \"main/accuracy\": %.9g, \"validation/main/accuracy\": %.9g, \"elapsed_time\": "
                           "%.6f}\n", T->pos.epoch, loss, vloss, acc, vacc, T->pos.elapsed);
        int kept = 0; /* the log's line of epoch 1 stands for rec (pending_line_is_ours) */
        if (T->log_pending[0]) st = pending_line_is_ours(T, rec, &kept);
        if (!st && !kept &&
            (fwrite(rec, 1, (size_t)len, T->log) != (size_t)len || fflush(T->log) ||
             (fsync(fileno(T->log)) && errno != EINVAL)))
          st = ntk_error(NTK_EIO, "%s: cannot write the log: %s", o->log, strerror(errno));
        /* the snapshot records the chain of the lines it holds (check_log) */
        if (!st && !kept) T->pos.log_sum = ntk_train_log_chain(T->pos.log_sum, rec, (size_t)len);
        T->log_created = 0;
      }
      if (!st) st = write_snapshot(T);
    }
    if ((st = t_agree_report(T, st))) return st;
    if (*o->snapshot) T->saved = T->pos, T->have_saved = 1; /* every rank knows, for its messages */
    if (e + 1 == o->epochs) {
      /* The end: the snapshot and log at their names are still this job's. One
       * replaced after the last write (by hand, by another job) is told (exit
       * 4), not a success over a result no longer there. */
      const char *pause = getenv("NTKD_TEST_TRAIN_END_PAUSE"); /* seconds: a test replaces a file meanwhile */
      if (T->rank == 0 && pause) ntk_sleep(atof(pause), NULL);
      if (T->rank == 0 && *o->snapshot) st = snapshot_in_place(T);
      if (T->rank == 0 && !st && T->log) st = log_in_place(T);
      if ((st = t_agree_report(T, st))) return st;
      if (T->rank == 0)
        fprintf(stderr, "ntkd: %" PRIu64 " epochs trained; parameters identical on all %d rank%s (checksum %016"
                PRIx64 ")\n", T->pos.epoch, T->size, T->size > 1 ? "s" : "", sum);
    }
    if ((stop || vstop) && e + 1 < o->epochs) return interrupted(T);
  }
  return NTK_OK;
}

static ntk_status setup(struct trainer *T, int overwrite) {
  const struct ntk_train_opts *o = T->o;
  ntk_status st = ntk_comm_agree_report(T->comm, T->rank == 0 ? load_data(T) : NTK_OK);
  if (!st) st = ntk_comm_agree_report(T->comm, share_data(T, &T->train, &T->train_share, &T->ytrain));
  if (!st) st = ntk_comm_agree_report(T->comm, share_data(T, &T->val, &T->val_share, &T->yval));
  if (st) return st;
  ntk_mlp_init(&T->mlp, o->layers, o->nlayers);
  size_t np = T->mlp.nparams, B = o->batch, bmax = (B + (size_t)T->size - 1) / (size_t)T->size;
  size_t wb = bmax > EVAL_CHUNK ? bmax : EVAL_CHUNK;
  T->state = malloc(3 * np * sizeof *T->state);
  T->g = malloc((np + 4) * sizeof *T->g);
  T->work = malloc(ntk_mlp_work_floats(&T->mlp, wb) * sizeof *T->work);
  T->xb = malloc((bmax ? bmax : 1) * T->train.d * sizeof *T->xb);
  T->yb = malloc((bmax ? bmax : 1) * sizeof *T->yb);
  T->perm = malloc(T->train.n * sizeof *T->perm);
  if (!T->state || !T->g || !T->work || !T->xb || !T->yb || !T->perm)
    st = ntk_error(NTK_ENOMEM, "out of memory for %zu parameters", np);
  if ((st = ntk_comm_agree_report(T->comm, st))) return st;

  struct ntk_snapshot_info *id = &T->pos;
  memset(id, 0, sizeof *id);
  id->nsizes = o->nlayers;
  for (size_t i = 0; i < o->nlayers; i++) id->sizes[i] = o->layers[i];
  id->n_train = T->train.n;
  id->batch = B;
  id->seed = o->seed;
  id->nparams = np;
  int resumed = 0;
  if (T->rank == 0) {
    /* The data's identity: what a snapshot must have been trained on. */
    uint64_t h[4] = {ntk_checksum(T->train.x, T->train.n * T->train.d * sizeof(float)),
                     ntk_checksum(T->ytrain, T->train.n * sizeof *T->ytrain),
                     ntk_checksum(T->val.x, T->val.n * T->val.d * sizeof(float)),
                     ntk_checksum(T->yval, T->val.n * sizeof *T->yval)};
    id->data_hash = ntk_checksum(h, sizeof h);
    st = take_log(T);
    if (!st) st = start_state(T, overwrite, &resumed);
    if (!st) st = open_log(T, resumed, overwrite);
  }
  if ((st = ntk_comm_agree_report(T->comm, st))) return st;
  /* Rank 0 initialised or resumed; everyone starts from its state. */
  st = ntk_comm_bcast(T->comm, &T->pos, sizeof T->pos);
  if (!st) st = ntk_comm_bcast(T->comm, T->state, 3 * np * sizeof *T->state);
  if ((st = ntk_comm_agree_report(T->comm, st))) return st;
  if (*o->snapshot && (T->pos.epoch || T->pos.step)) T->saved = T->pos, T->have_saved = 1; /* resumed */
  if ((st = start_device(T, bmax))) return st;
  if (T->rank == 0 && getenv("NTKD_TEST_TRAIN_FAIL"))
    fprintf(stderr, "ntkd: test setting NTKD_TEST_TRAIN_FAIL=%s\n", getenv("NTKD_TEST_TRAIN_FAIL"));
  if (T->rank == 0 && getenv("NTKD_TEST_TRAIN_END_PAUSE"))
    fprintf(stderr, "ntkd: test setting NTKD_TEST_TRAIN_END_PAUSE=%s\n", getenv("NTKD_TEST_TRAIN_END_PAUSE"));
  if (T->rank == 0) {
    char layers[256];
    layers_text(id->sizes, o->nlayers, layers, sizeof layers);
    fprintf(stderr, "ntkd: %s: training %s (%zu parameters) on %zu samples, validation %zu; batch %zu over %d "
            "rank%s, %zu steps per epoch; Adam alpha %g beta1 %g beta2 %g eps %g; flush_denormals %s\n",
            T->job->source, layers, np, T->train.n, T->val.n, B, T->size, T->size > 1 ? "s" : "", T->train.n / B,
            o->alpha, o->beta1, o->beta2, o->eps, o->flush_denormals ? "true" : "false");
  }
  return NTK_OK;
}

ntk_status ntk_train_run(const ntk_comm_t *comm, const struct ntk_job *job, int overwrite) {
  /* Before any arithmetic, on every rank: this (main) thread is the only
   * one that computes. ntkd creates no threads while training and OpenBLAS
   * runs single-threaded (ntk_cpu_single_thread), so sgemm executes here
   * under the same MXCSR bits; a pool thread would not inherit them. */
  ntk_cpu_flush_denormals(job->train.flush_denormals);
  struct trainer T;
  memset(&T, 0, sizeof T);
  T.log_fd = -1;
  T.snap_fd = -1;
  T.job = job;
  T.o = &job->train;
  T.comm = comm;
  T.rank = ntk_comm_rank(comm);
  T.size = ntk_comm_size(comm);
  T.adam = (struct ntk_adam){job->train.alpha, job->train.beta1, job->train.beta2, job->train.eps};
  ntk_status st = setup(&T, overwrite);
  int refused = st != NTK_OK;
  if (!st && T.pos.epoch >= T.o->epochs) {
    if (T.rank == 0)
      fprintf(stderr, "ntkd: %s already holds %" PRIu64 " epochs ([train] epochs = %zu): nothing to train\n",
              T.o->snapshot, T.pos.epoch, T.o->epochs);
  } else if (!st) {
    st = train_epochs(&T);
    if (st == NTK_EINTERRUPTED && T.rank == 0) fprintf(stderr, "ntkd: %s\n", ntk_error_message());
  }
  if (refused && T.log_created) { /* made by this run, which was refused: as it was, absent (under its lock) */
    struct stat sb;
    if (fstat(T.log ? fileno(T.log) : T.log_fd, &sb) == 0 && sb.st_size == 0) unlink(T.o->log);
  }
  if (T.log) fclose(T.log);
  if (T.log_fd >= 0) close(T.log_fd);
  if (T.snap_fd >= 0) close(T.snap_fd); /* its hold, last */
  ntk_data_unshare(T.train_share, &T.train);
  ntk_data_unshare(T.val_share, &T.val);
  free(T.ytrain);
  free(T.yval);
  free(T.state);
  free(T.g);
  free(T.work);
  free(T.xb);
  free(T.yb);
  free(T.perm);
  if (T.dev) T.dev->mlp_destroy(T.dctx);
  return st;
}
