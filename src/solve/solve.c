/* Kernel regression on a finished store, the driver: see
 * src/solve/solve.h, src/solve/solve_method.h and docs/SOLVE.md. */
#include "solve/solve.h"

#include <cblas.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/arch.h"
#include "base/codec.h"
#include "base/cpuinit.h"
#include "job/data.h"
#include "base/fsutil.h"
#include "job/jobfiles.h"
#include "job/jobhash.h"
#include "job/store_ranks.h"
#include "base/npy.h"
#include "base/numparse.h"
#include "base/clock.h"
#include "base/signals.h"
#include "solve/solve_method.h"
#include "store/lock.h"
#include "comm/comm.h"
#include "store/store.h"

#define kname ntk_solve_kernel_name


/* x (rows x cols) as PATH, through a temporary file renamed into place.
 * guard (if not NULL), called on garg once the temporary file is written
 * and before it takes the name: a failure leaves PATH as it was. */
static ntk_status write_npy(const char *path, const double *x, size_t rows, size_t cols,
                            ntk_status (*guard)(const void *), const void *garg) {
  char tmp[NTK_PATH_MAX + 400], hdr[256];
  int fd;
  ntk_status st = ntk_make_parents(path);
  if (!st) st = ntk_tmp_create(path, tmp, sizeof tmp, &fd, "\x93NUMPY");
  if (st) return st;
  FILE *f = fdopen(fd, "wb");
  if (!f) {
    st = ntk_error(NTK_EIO, "%s: cannot open: %s", tmp, strerror(errno));
    close(fd);
    unlink(tmp);
    return st;
  }
  size_t hl = ntk_npy_header(hdr, sizeof hdr, 8, rows, cols);
  if (fwrite(hdr, 1, hl, f) != hl || fwrite(x, sizeof *x, rows * cols, f) != rows * cols || fflush(f) ||
      fsync(fileno(f)))
    st = ntk_error(NTK_EIO, "%s: write failed: %s", tmp, strerror(errno));
  if (fclose(f) && !st) st = ntk_error(NTK_EIO, "%s: close failed: %s", tmp, strerror(errno));
  if (!st && guard) st = guard(garg);
  if (!st) st = ntk_tmp_commit(tmp, path, NTK_FILE_OTHER);
  if (st) unlink(tmp);
  else if ((st = ntk_fsync_folder_of(path))) /* the new name survives a crash too */
    st = ntk_error(st, "%s: written, but %s", path, ntk_error_message());
  return st;
}

/* PREFIX: [solve] predictions, or the store path without ".ntk". */
static void prediction_prefix(const char *store_path, const struct ntk_job *job, char *prefix, size_t cap) {
  if (job->solve.predictions[0]) {
    snprintf(prefix, cap, "%s", job->solve.predictions);
  } else {
    snprintf(prefix, cap, "%s", store_path);
    size_t l = strlen(prefix);
    if (l > 4 && !strcmp(prefix + l - 4, ".ntk")) prefix[l - 4] = '\0';
  }
}

static void prediction_path(const char *store_path, const struct ntk_job *job, int kernel, double ridge, char *out,
                            size_t cap) {
  char prefix[NTK_PATH_MAX];
  prediction_prefix(store_path, job, prefix, sizeof prefix);
  snprintf(out, cap, "%s-%s-ridge%g.npy", prefix, kname(kernel), ridge);
}

/* One solve at a time writes the predictions of a PREFIX: rank 0 holds
 * PREFIX.predictions.lock (store/lock.h: dropped by the kernel when it
 * dies) from before the first file is written until the last is. Two
 * solves of the same store, or two jobs whose stores give one PREFIX
 * (`run` and `run.ntk`), would otherwise replace each other's files, each
 * file whole but the set a mix of the two, with exit 0 for both. */
static ntk_status lock_predictions(const char *store_path, const struct ntk_job *job, const ntk_store_t *s,
                                   ntk_lock_t **lock) {
  char prefix[NTK_PATH_MAX], path[NTK_PATH_MAX + 16], what[NTK_PATH_MAX + 64];
  prediction_prefix(store_path, job, prefix, sizeof prefix);
  snprintf(path, sizeof path, "%s.predictions", prefix);
  snprintf(what, sizeof what, "set of predictions files %s-KERNEL-ridgeR.npy", prefix);
  ntk_status st = ntk_lock_acquire(path, what, lock);
  /* A job's own [solve]: "nothing was changed" is the predictions' part;
   * the job computed its store (or replaced one: --overwrite), which stays. */
  if (st == NTK_ELOCKED && ntk_store_is_writable(s))
    st = ntk_error(st, "%s. This job's store %s is complete and kept: only its solve waits (`ntkd solve %s %s` "
                   "writes the predictions once the other solve is done)", ntk_error_message(), store_path, store_path,
                   job->source[0] ? job->source : "JOB.conf");
  return st;
}

/* Rank 0, before each file takes its name and after the last: the predictions' lock has
 * been this solve's throughout. Its file removed, another solve takes a
 * lock file of its own and both would write, each with exit 0 (seen: a
 * solve's NNGP files beside another's NTK files). */
static ntk_status predictions_still_locked(ntk_lock_t *lock, const char *store_path, const struct ntk_job *job,
                                           const char *consequence) {
  ntk_status st = ntk_lock_check(lock);
  if (!st) return NTK_OK;
  char prefix[NTK_PATH_MAX];
  prediction_prefix(store_path, job, prefix, sizeof prefix);
  return ntk_error(st, "the predictions %s-KERNEL-ridgeR.npy: %s; %s: run the solve again, one at a time", prefix,
                   ntk_error_message(), consequence);
}

/* Whether this solve writes the variance files of kind `full` (0: -var.npy,
 * 1: -cov.npy). */
static int writes_variance(const struct ntk_job *job, int full) {
  return job->solve.variance && (job->solve.variance == NTK_VARIANCE_FULL) == full;
}

/* PREFIX-KERNEL-ridgeR-var.npy (or -cov.npy) next to the predictions. */
static void variance_path(const char *pred_path, int full, char *out, size_t cap) {
  size_t l = strlen(pred_path);
  snprintf(out, cap, "%.*s-%s.npy", (int)(l > 4 ? l - 4 : l), pred_path, full ? "cov" : "var");
}

/* The files a solve reads and must never replace or remove: the job's
 * inputs and the store. `in` holds NTK_JOB_MAX_INPUTS + 1. */
static size_t solve_inputs(const struct ntk_job *job, const char *store_path, struct ntk_named_path *in) {
  size_t nin = ntk_job_inputs(job, in);
  in[nin++] = (struct ntk_named_path){"the store", store_path, 0};
  return nin;
}

/* The prediction files must not replace the store or any input of the job. */
ntk_status ntk_solve_check_outputs(const char *store_path, const struct ntk_job *job, uint32_t kernels) {
  struct ntk_named_path in[NTK_JOB_MAX_INPUTS + 1], out[4 * NTK_MAX_RIDGES];
  char(*names)[NTK_PATH_MAX + 64] = malloc(4 * NTK_MAX_RIDGES * sizeof *names);
  char(*what)[80] = malloc(4 * NTK_MAX_RIDGES * sizeof *what);
  if (!names || !what) {
    free(names), free(what);
    return ntk_error(NTK_ENOMEM, "out of memory");
  }
  size_t nin = solve_inputs(job, store_path, in), nout = 0;
  for (int which = NTK_KERNEL_NNGP; which <= NTK_KERNEL_NTK; which <<= 1)
    for (size_t r = 0; r < job->solve.nridge && (kernels & (uint32_t)which); r++) {
      /* Named by the ridge in full: two ridges that %g prints alike give one file. */
      double ridge = job->solve.ridge[r];
      prediction_path(store_path, job, which, ridge, names[nout], sizeof names[nout]);
      char rt[32];
      ntk_fmt_double(ridge, rt, sizeof rt);
      snprintf(what[nout], sizeof what[nout], "the %s predictions file of ridge %s", kname(which), rt);
      out[nout] = (struct ntk_named_path){what[nout], names[nout], 0};
      nout++;
      if (job->solve.variance) {
        char v[NTK_PATH_MAX + 64];
        variance_path(names[nout - 1], job->solve.variance == NTK_VARIANCE_FULL, v, sizeof v);
        memcpy(names[nout], v, sizeof v);
        snprintf(what[nout], sizeof what[nout], "the %s variance file of ridge %s", kname(which), rt);
        out[nout] = (struct ntk_named_path){what[nout], names[nout], 0};
        nout++;
      }
    }
  /* At the line that names the files: two of them one file (the ridges'
   * line), else an input's or the store's name or a folder's (the prefix's,
   * where one is set). */
  ntk_status st = ntk_check_outputs(NULL, 0, out, nout);
  if (st) st = ntk_job_error_at(job, job->solve.ridge_line, "[solve] ridge", st);
  else if ((st = ntk_check_output_files(in, nin, out, nout)))
    st = job->solve.predictions[0] ? ntk_job_error_at(job, job->solve.predictions_line, "[solve] predictions", st)
                                   : ntk_job_error_at(job, job->solve.ridge_line, "[solve] ridge", st);
  free(names), free(what);
  /* The solve holds PREFIX.predictions.lock: where PREFIX.predictions is
   * the store, that is the store's own lock file, which the job holds. */
  char prefix[NTK_PATH_MAX], lock_of[NTK_PATH_MAX + 16];
  prediction_prefix(store_path, job, prefix, sizeof prefix);
  snprintf(lock_of, sizeof lock_of, "%s.predictions", prefix);
  if (!st && ntk_same_file(lock_of, store_path)) {
    st = ntk_error(NTK_EUSAGE, "%s: the solve locks %s.lock, which is the lock file of the store %s: choose another "
                   "prefix or store name", prefix, lock_of, store_path);
    st = ntk_job_error_at(job, job->solve.predictions[0] ? job->solve.predictions_line : job->solve.ridge_line,
                          job->solve.predictions[0] ? "[solve] predictions" : "[solve] ridge", st);
  }
  return st;
}

ntk_status ntk_solve_check_ranks(const struct ntk_job *job, int nranks, int under_mpi) {
  if (job->solve.method != NTK_SOLVE_SCALAPACK) return NTK_OK;
  if (!under_mpi)
    return ntk_error(NTK_EINPUT, "[solve] method = scalapack runs under mpirun (mpirun -np 1 for one process)");
  int pr, pc;
  return ntk_scalapack_grid(job->solve.grid_rows, job->solve.grid_cols, nranks, &pr, &pc);
}

ntk_status ntk_solve_check_tile(const struct ntk_job *job, uint64_t tile) {
  size_t nb;
  if (!job->solve.block || !tile) return NTK_OK;
  ntk_status st = ntk_scalapack_block(job->solve.block, (size_t)tile, &nb);
  if (!st || job->solve.block_line <= 0) return st;
  return ntk_error(st, "%s:%d: %s", job->source, job->solve.block_line, ntk_error_message());
}

/* The train and test labels and the classes they make (ntk_labels_classes:
 * [data] classes, or 0 .. the largest label without a large gap; `classes`
 * NULL: not judged). `say`: a line per file on stderr. On error nothing is
 * left allocated. */
static ntk_status load_labels(const struct ntk_job *job, size_t ntr, size_t nte, int say, int32_t **ytr, int32_t **yte,
                              size_t *classes) {
  size_t limit = job->classes ? job->classes : NTK_LABELS_MAX;
  ntk_status st = ntk_job_error_at(job, job->labels_line, "[data] labels",
                                   ntk_labels_load(job->labels_path, ntr, job->count == 0, limit, ytr));
  if (!st)
    st = ntk_job_error_at(job, job->test.labels_line, "[test] labels",
                          ntk_labels_load(job->test.labels, nte, job->test.count == 0, limit, yte));
  if (st && job->classes) /* say where the bound comes from */
    st = ntk_error(st, "%s (%s:%d: [data] classes = %zu)", ntk_error_message(), job->source, job->classes_line,
                   job->classes);
  if (!st && classes) st = ntk_labels_classes(job, *ytr, ntr, *yte, nte, say, classes);
  if (st) {
    free(*ytr), free(*yte);
    *ytr = *yte = NULL;
  }
  return st;
}

static const char *method_name(int m) {
  return m == NTK_SOLVE_LAPACK ? "lapack" : m == NTK_SOLVE_SCALAPACK ? "scalapack" : m == NTK_SOLVE_CG ? "cg" : "auto";
}

/* [solve] method = auto: one process with LAPACK when the train block fits
 * rank 0's node (all cores), else ScaLAPACK over the ranks when their
 * shares fit, else conjugate gradients. Collective: rank 0 decides. */
static ntk_status choose_method(const ntk_comm_t *comm, const struct ntk_job *job, size_t ntr, size_t nte, size_t classes, int *method) {
  int m = job->solve.method, size = ntk_comm_size(comm);
  if (m == NTK_SOLVE_AUTO && ntk_comm_rank(comm) == 0) {
    size_t avail = (size_t)ntk_solve_mem_available(), need1 = ntk_solve_lapack_bytes(ntr, nte, classes);
    if (job->solve.variance) /* the NTK's variance: the NNGP blocks and Z (docs/SOLVE.md) */
      need1 += 8 * (ntr * ntr + 2 * ntr * nte + 256 * ntr) + (job->solve.variance == NTK_VARIANCE_FULL ? 8 * nte * nte : 0);
    size_t needp = ntk_solve_scalapack_bytes(ntr, nte, classes, size);
    if (job->solve.variance) m = NTK_SOLVE_LAPACK; /* the only method that computes it */
    else if (ntr <= NTK_LAPACK_MAX_N && (!avail || need1 < avail / 10 * 9)) m = NTK_SOLVE_LAPACK;
    else if (size > 1 && needp && (!avail || needp * (size_t)size < avail / 10 * 9)) m = NTK_SOLVE_SCALAPACK;
    else m = NTK_SOLVE_CG;
    if (m != NTK_SOLVE_LAPACK)
      fprintf(stderr, "ntkd: solve: %zu train samples: the one-process solve needs %.1f GB (%.1f GB available%s); "
              "method = auto chose %s\n", ntr, (double)need1 / 1e9, (double)avail / 1e9,
              ntr > NTK_LAPACK_MAX_N ? ", and n is above its 46340" : "", method_name(m));
  }
  int32_t mm = m;
  ntk_status st = ntk_comm_bcast(comm, &mm, sizeof mm);
  *method = mm;
  return st;
}

/* Accuracy (largest prediction = label) and MSE against one-hot labels. */
/* Accuracy and MSE of predictions `pred` (n x classes) for labels y. The
 * predicted class is the largest prediction among the classes that occur in
 * the train labels (`present`): a class without a train sample has a column
 * of exact zeros (its one-hot target column is 0), which says nothing about
 * that class, yet would be the largest wherever the other predictions are
 * all negative; so the accuracy would depend on how the labels are numbered
 * (labels 0, 2, 5 scored lower than the same task as 0, 1, 2). The MSE is
 * over every column, as documented. */
static void score(const double *pred, const int32_t *y, size_t n, size_t classes, const unsigned char *present,
                  double *acc, double *mse) {
  size_t right = 0;
  double se = 0;
  for (size_t i = 0; i < n; i++) {
    size_t best = classes;
    for (size_t k = 0; k < classes; k++) {
      double p = pred[i * classes + k], e = p - ((size_t)y[i] == k ? 1.0 : 0.0);
      se += e * e;
      if (present[k] && (best == classes || p > pred[i * classes + best])) best = k;
    }
    right += best == (size_t)y[i];
  }
  *acc = n ? (double)right / (double)n : 0;
  *mse = n ? se / (double)(n * classes) : 0;
}

/* Leave-one-out predictions of the train set: the prediction for sample i
 * from the others is y_i - alpha_i / diag_inv_i (kernel ridge regression's
 * closed form; docs/SOLVE.md). */
static void loo_predictions(const struct ntk_ridge_out *o, const int32_t *y, size_t n, size_t classes, double *p) {
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < classes; k++)
      p[i * classes + k] = ((size_t)y[i] == k ? 1.0 : 0.0) - o->alpha[i * classes + k] / o->diag_inv[i];
}

/* The largest relative error that the difference y_i - alpha_i / diag_i
 * alone gives a sample's LOO predictions: unit roundoff times its largest
 * term over its largest result. Where the ridge dwarfs a sample's kernel
 * row, (A^-1)_ii -> 1/lambda and alpha_i -> y_i/lambda: the terms agree to
 * nearly every digit and the difference is rounding (at a ridge of 1e15
 * times the mean diagonal the table printed an LOO accuracy of 0.38 where
 * brute force gives 0.42). A sample with no covariance with the others
 * (a zero row) cancels as well: its computed prediction is rounding where
 * the true one is 0. *at: the worst sample. */
static double loo_cancellation(const struct ntk_ridge_out *o, const double *lp, size_t n, size_t classes, size_t *at) {
  double worst = 0;
  *at = 0;
  for (size_t i = 0; i < n; i++) {
    double term = 0, res = 0;
    for (size_t k = 0; k < classes; k++) {
      double t = fabs(o->alpha[i * classes + k] / o->diag_inv[i]), f = fabs(lp[i * classes + k]);
      if (t > term) term = t;
      if (f > res) res = f;
    }
    double e = term == 0 ? 0 : res == 0 ? INFINITY : DBL_EPSILON * term / res;
    if (!(e <= worst)) { /* NaN too */
      worst = e;
      *at = i;
    }
  }
  return worst;
}

/* LOO columns printed only where every sample's predictions keep at least
 * this relative accuracy (about 6 digits) through that difference. */
#define NTK_LOO_MAX_ERROR 1e-6

static void free_outs(struct ntk_ridge_out *o, size_t n) {
  for (size_t r = 0; o && r < n; r++) free(o[r].pred), free(o[r].alpha), free(o[r].diag_inv), free(o[r].var);
  free(o);
}

/* Rank 0's arrays for every ridge (NULL on the other ranks). */
static ntk_status alloc_outs(const ntk_comm_t *comm, const struct ntk_job *job, int method, size_t ntr, size_t nte, size_t classes,
                             struct ntk_ridge_out **out) {
  size_t nr = job->solve.nridge;
  *out = calloc(nr, sizeof **out);
  if (!*out) return ntk_error(NTK_ENOMEM, "out of memory");
  if (ntk_comm_rank(comm) != 0) return NTK_OK;
  int loo = job->solve.loo && method != NTK_SOLVE_CG;
  size_t nvar = job->solve.variance == NTK_VARIANCE_FULL ? nte * nte : job->solve.variance ? nte : 0;
  for (size_t r = 0; r < nr; r++) {
    struct ntk_ridge_out *o = &(*out)[r];
    o->pred = calloc(nte * classes + 1, sizeof *o->pred);
    o->alpha = calloc(ntr * classes + 1, sizeof *o->alpha);
    o->diag_inv = loo ? calloc(ntr + 1, sizeof *o->diag_inv) : NULL;
    o->var = nvar ? calloc(nvar, sizeof *o->var) : NULL;
    if (!o->pred || !o->alpha || (loo && !o->diag_inv) || (nvar && !o->var))
      return ntk_error(NTK_ENOMEM, "out of memory for the predictions of %zu ridges", nr);
  }
  return NTK_OK;
}

/* The prediction (and variance) files of every kernel and ridge as they
 * were before this solve wrote any: which exist, and which file each is
 * (device and inode: a file this solve puts in place is a new inode, and
 * the one it replaced stays allocated until then). */
struct prior_files {
  size_t n;
  struct prior_file {
    char path[NTK_PATH_MAX + 64];
    int present;
    int removed; /* by prior_files_clear, before this solve's first file took its name */
    dev_t dev;
    ino_t ino;
  } *f;
};

static int file_id(const char *path, dev_t *dev, ino_t *ino) {
  struct stat sb;
  if (lstat(path, &sb)) return 0;
  *dev = sb.st_dev, *ino = sb.st_ino;
  return 1;
}

/* Whether the older file `path` of the set, one this solve does not write
 * (a variance file of the other kind, a kernel the store does not hold),
 * may be removed: not one of the job's inputs or its store, nor another of
 * ntkd's own files. (The files this solve writes are checked so before it
 * starts, ntk_solve_check_outputs; these names were not: a test data file
 * or the store itself named like one was removed, exit 0: a hunt.) */
static int other_removable(const char *path, const char *store_path, const struct ntk_job *job) {
  struct ntk_named_path in[NTK_JOB_MAX_INPUTS + 1];
  size_t nin = solve_inputs(job, store_path, in);
  for (size_t k = 0; k < nin; k++)
    if (in[k].path && *in[k].path && ntk_same_file(path, in[k].path)) return 0;
  return ntk_file_kind(path) == NTK_FILE_OTHER;
}

static void prior_add(struct prior_files *pf, const char *path, int written, const char *store_path,
                      const struct ntk_job *job) {
  struct prior_file *f = &pf->f[pf->n];
  snprintf(f->path, sizeof f->path, "%s", path);
  if (!written && !other_removable(f->path, store_path, job)) return;
  f->present = file_id(f->path, &f->dev, &f->ino);
  pf->n++;
}

/* The set: for each ridge of the job, both kernels' predictions files and
 * both variance files of each, whatever this solve writes. An earlier
 * solve's -var.npy beside this one's predictions (variance = no or full
 * now), or a kernel = ntk job's NTK predictions beside a kernel = nngp
 * job's, passed for this solve's (hunts). */
static void prior_files_take(struct prior_files *pf, const char *store_path, const struct ntk_job *job,
                             uint32_t kernels) {
  size_t nr = job->solve.nridge;
  pf->n = 0;
  pf->f = calloc(6 * nr + 1, sizeof *pf->f);
  for (int which = NTK_KERNEL_NNGP; pf->f && which <= NTK_KERNEL_NTK; which <<= 1)
    for (size_t r = 0; r < nr; r++) {
      int solved = (kernels & (uint32_t)which) != 0;
      char pred[NTK_PATH_MAX + 64], var[NTK_PATH_MAX + 64];
      prediction_path(store_path, job, which, job->solve.ridge[r], pred, sizeof pred);
      prior_add(pf, pred, solved, store_path, job);
      for (int full = 0; full <= 1; full++) {
        variance_path(pred, full, var, sizeof var);
        prior_add(pf, var, solved && writes_variance(job, full), store_path, job);
      }
    }
}

/* Whether the file of prior entry i is still the one seen before this
 * solve (its name never taken by a file of this solve's). */
static int prior_unchanged(const struct prior_file *f) {
  dev_t d;
  ino_t n;
  return f->present && file_id(f->path, &d, &n) && d == f->dev && n == f->ino;
}

/* Rank 0, under the predictions' lock, once this solve's first file is
 * written and before it takes its name: the older files of the set go
 * (each would be replaced or removed by this solve anyway). A kill at any
 * later moment (Ctrl-C to mpirun, a batch system's SIGKILL, the OOM
 * killer: no stop path runs) left this solve's first files beside an
 * earlier solve's others, which passed for its result (a hunt); now it
 * leaves a part of this solve's set and nothing older. */
static void prior_files_clear(struct prior_files *pf) {
  for (size_t i = 0; pf->f && i < pf->n; i++)
    if (prior_unchanged(&pf->f[i]) && unlink(pf->f[i].path) == 0) pf->f[i].present = 0, pf->f[i].removed = 1;
}

/* Whether prior_files_clear removed the older file at `path`. */
static int prior_removed(const struct prior_files *pf, const char *path) {
  for (size_t i = 0; pf && pf->f && i < pf->n; i++)
    if (pf->f[i].removed && !strcmp(pf->f[i].path, path)) return 1;
  return 0;
}

/* A solve that stopped (a signal, a failed write or folder sync) after it
 * put some file in place: the files still as they were before it are
 * another solve's (other labels, another kernel), and beside this solve's
 * they would pass for its result, as report_ridge says of a failed ridge.
 * They are removed and counted on stderr (the stop's own error line is
 * printed). A file this solve put in place is never removed, nor anything
 * once the predictions' lock is no longer this solve's (the files may be
 * another solve's now). Rank 0. The error message is kept.
 * Those prior_files_clear removed are counted too, also when nothing of
 * this solve's took its place (its first file's rename failed). */
static void remove_stale(const struct prior_files *pf, ntk_lock_t *lock) {
  if (!pf->f) return;
  size_t placed = 0, early = 0;
  for (size_t i = 0; i < pf->n; i++) {
    dev_t d;
    ino_t n;
    int now = file_id(pf->f[i].path, &d, &n);
    placed += now && !(pf->f[i].present && d == pf->f[i].dev && n == pf->f[i].ino);
    early += pf->f[i].removed && !now; /* removed before the first file, not replaced since */
  }
  if (!placed && !early) return; /* nothing of this solve's in place: the older set is whole */
  char keep[2048];
  snprintf(keep, sizeof keep, "%s", ntk_error_message());
  int held = ntk_lock_check(lock) == NTK_OK;
  (void)ntk_error(NTK_EINTERNAL, "%s", keep);
  size_t removed = early;
  for (size_t i = 0; held && i < pf->n; i++)
    if (prior_unchanged(&pf->f[i])) removed += unlink(pf->f[i].path) == 0;
  if (removed)
    fprintf(stderr, "ntkd: removed %zu older prediction file%s this solve did not replace (another solve's: beside "
            "this one's they would pass for its result)\n", removed, removed == 1 ? "" : "s");
}

/* The results table (its header printed with its first line) and the
 * files behind it, each written under the predictions' lock. */
struct table {
  int method, loo;
  int *header;
  ntk_lock_t *lock;
  const char *store_path;
  const struct ntk_job *job;
  size_t *written; /* files of this solve written so far */
  struct prior_files *prior; /* the set's files before this solve (NULL: none known) */
};
/* Before each file takes its name: the lock still this solve's, and
 * before the first, the older set removed (prior_files_clear). */
static ntk_status table_guard(const void *arg) {
  const struct table *t = arg;
  ntk_status st = predictions_still_locked(t->lock, t->store_path, t->job,
                                           *t->written ? "this file is not written, and those written before it may "
                                                         "be a mix of two solves'"
                                                       : "no file is written");
  if (!st && !*t->written && t->prior) prior_files_clear(t->prior);
  return st;
}
static void table_header(const struct table *t) {
  if (!(*t->header)++)
    printf("%-6s %-10s %-12s %-9s %-10s %-10s%s\n", "kernel", "ridge", "added",
           t->method == NTK_SOLVE_CG ? "CG" : "rcond", "test acc", "test MSE", t->loo ? " LOO acc    LOO MSE" : "");
}

/* Rank 0: write one ridge's files, print its line, fill *res. A ridge that
 * was not solved prints "failed" and returns NTK_EINPUT with its reason. */
static ntk_status report_ridge(const char *store_path, const struct ntk_job *job, int which, const struct table *tab,
                               const struct ntk_ridge_out *o, double ridge, const int32_t *ytr, const int32_t *yte,
                               size_t ntr, size_t nte, size_t classes, struct ntk_solve_result *res) {
  int method = tab->method;
  *res = (struct ntk_solve_result){which, ridge, o->reg, o->rcond, 0, 0, 0, NAN, NAN, o->iterations, method};
  char cond[32];
  if (method == NTK_SOLVE_CG) snprintf(cond, sizeof cond, "%zu it", o->iterations);
  else snprintf(cond, sizeof cond, "%.2e", o->rcond);
  if (o->failure) {
    table_header(tab);
    printf("%-6s %-10g %-12.4g %-9s %s\n", kname(which), ridge, o->reg, cond,
           "failed: not solved (see the message below)");
    fflush(stdout);
    /* No file of this ridge may stay from an earlier solve (another kernel,
     * other labels): read after this one, it would pass for its result.
     * This removal is the solve's first change where no file was written
     * before it: the older set goes first, as before a first file
     * (table_guard; a solve whose every ridge failed kept the other
     * kernel's older predictions: a hunt). */
    ntk_status guard = table_guard(tab);
    if (guard) return guard;
    char old[NTK_PATH_MAX + 64], vold[NTK_PATH_MAX + 64];
    prediction_path(store_path, job, which, ridge, old, sizeof old);
    int gone = unlink(old) == 0 || prior_removed(tab->prior, old);
    for (int full = 0; full <= 1; full++) {
      variance_path(old, full, vold, sizeof vold);
      if (writes_variance(job, full) || other_removable(vold, store_path, job))
        gone |= unlink(vold) == 0 || prior_removed(tab->prior, vold);
    }
    return ntk_error(NTK_EINPUT, "%s%s%s", o->why, gone ? "; removed the older file of this ridge: " : "",
                     gone ? old : "");
  }
  unsigned char *present = calloc(classes + 1, 1);
  if (!present) return ntk_error(NTK_ENOMEM, "out of memory");
  for (size_t i = 0; i < ntr; i++) present[ytr[i]] = 1;
  score(o->pred, yte, nte, classes, present, &res->accuracy, &res->mse);
  double loo_error = 0;
  size_t loo_at = 0;
  if (o->diag_inv) {
    double *lp = malloc((ntr * classes + 1) * sizeof *lp);
    if (!lp) {
      free(present);
      return ntk_error(NTK_ENOMEM, "out of memory");
    }
    loo_predictions(o, ytr, ntr, classes, lp);
    loo_error = loo_cancellation(o, lp, ntr, classes, &loo_at);
    if (loo_error <= NTK_LOO_MAX_ERROR) score(lp, ytr, ntr, classes, present, &res->loo_accuracy, &res->loo_mse);
    free(lp);
  }
  free(present);
  res->ok = isfinite(res->mse);
  /* The predictions file first: a ridge whose file could not be written (a
   * full disk) has no line in the table, which lists what was written. Its
   * variance file follows the line: one that fails is the error, and the
   * predictions written before it keep their line (they are right). */
  char path[NTK_PATH_MAX + 64];
  prediction_path(store_path, job, which, ridge, path, sizeof path);
  ntk_status st = write_npy(path, o->pred, nte, classes, table_guard, tab);
  *tab->written += !st;
  if (st) return st;
  table_header(tab);
  printf("%-6s %-10g %-12.4g %-9s %-10.4f %-10.6f", kname(which), ridge, o->reg, cond, res->accuracy, res->mse);
  if (o->diag_inv && loo_error <= NTK_LOO_MAX_ERROR) printf(" %-10.4f %.6f", res->loo_accuracy, res->loo_mse);
  else if (o->diag_inv) printf(" %-10s %s", "n/a", "n/a");
  printf("\n");
  fflush(stdout);
  char rt[32];
  if (o->diag_inv && !(loo_error <= NTK_LOO_MAX_ERROR))
    fprintf(stderr, "ntkd: %s ridge %s: leave-one-out not reported: for train sample %zu, y - alpha / "
            "diag((K + lambda I)^-1) leaves only rounding (relative error %.1e): the ridge dwarfs its kernel row, "
            "or it has no covariance with the other samples (docs/SOLVE.md)\n",
            kname(which), ntk_fmt_double(ridge, rt, sizeof rt), loo_at, loo_error);
  if (o->var) {
    char vpath[NTK_PATH_MAX + 64];
    variance_path(path, job->solve.variance == NTK_VARIANCE_FULL, vpath, sizeof vpath);
    st = write_npy(vpath, o->var, nte, job->solve.variance == NTK_VARIANCE_FULL ? nte : 1, table_guard, tab);
    *tab->written += !st;
    if (st) return ntk_error(st, "%s (the predictions file %s is written: its table line above)", ntk_error_message(), path);
  }
  return NTK_OK;
}

ntk_status ntk_solve_labels_check(const struct ntk_job *job, size_t ntr, size_t nte) {
  int32_t *ytr = NULL, *yte = NULL;
  ntk_status st = load_labels(job, ntr, nte, 0, &ytr, &yte, NULL);
  free(ytr), free(yte);
  return st;
}

ntk_status ntk_solve_labels_load(const struct ntk_job *job, size_t ntr, size_t nte, struct ntk_solve_labels *L) {
  memset(L, 0, sizeof *L);
  L->ntr = ntr;
  L->nte = nte;
  return load_labels(job, ntr, nte, 1, &L->ytr, &L->yte, &L->classes);
}

void ntk_solve_labels_free(struct ntk_solve_labels *L) {
  if (!L) return;
  free(L->ytr);
  free(L->yte);
  L->ytr = L->yte = NULL;
}

/* Every rank's copy of the train labels and the class count, from rank 0's
 * (the methods build their share of the targets from them); the test
 * labels stay on rank 0, which scores. Collective. */
static ntk_status share_labels(const ntk_comm_t *comm, struct ntk_solve_labels *L) {
  uint64_t classes = L->classes;
  ntk_status st = ntk_comm_agree_report(comm, ntk_comm_bcast(comm, &classes, sizeof classes));
  L->classes = (size_t)classes;
  if (!st && ntk_comm_rank(comm) != 0 && !(L->ytr = malloc((L->ntr ? L->ntr : 1) * sizeof *L->ytr)))
    st = ntk_error(NTK_ENOMEM, "out of memory for the labels");
  if (!(st = ntk_comm_agree_report(comm, st)))
    st = ntk_comm_agree_report(comm, ntk_comm_bcast(comm, L->ytr, L->ntr * sizeof *L->ytr));
  return st;
}

/* The driver's meetings of the ranks once the kernels' solves begin. In a
 * cg solve a rank that stops answering ends the job (docs/SOLVE.md), also
 * here, between the kernels and after them (a rank stopped while rank 0
 * wrote the NNGP's files held the others for ever): each meeting waits at
 * most ntk_patience([compute] worker_timeout, the longest kernel solve so
 * far), then the waiting ranks say so and end the job (exit 9; the store
 * is complete). Rank 0 writing the predictions meanwhile (test samples x
 * classes x ridges values; 3.2 MB per kernel for all of Fashion-MNIST) is
 * the one stretch not bounded by a solve: a disk that takes longer than
 * that limit (30 min by default) to write them ends the job too. The other
 * methods, whose LAPACK and ScaLAPACK calls have no limit, wait as long as
 * it takes. */
struct meet {
  const ntk_comm_t *comm;
  const char *store_path;
  int timed;             /* method = cg */
  double floor, slowest; /* worker_timeout; the longest kernel solve */
};

static ntk_status met(const struct meet *m, ntk_status st, double limit) {
  if (st == NTK_ESTALLED) {
    fprintf(stderr, "ntkd: rank %d: %s, in the solve of %s (limit %.1f s: [compute] worker_timeout, at least 3x the "
            "longest kernel solve); ending the job: the store is complete: %sntkd solve %s JOB.conf solves again\n",
            ntk_comm_rank(m->comm), ntk_error_message(), m->store_path, limit,
            ntk_comm_size(m->comm) > 1 ? "mpirun " : "", m->store_path);
    ntk_comm_abort(ntk_status_exit_code(st)); /* the collective is still pending: no way back */
  }
  return st;
}

static double meet_limit(const struct meet *m) { return m->timed ? ntk_patience(m->floor, m->slowest) : -1.0; }

/* ntk_comm_agree_report, at most meet_limit seconds. */
static ntk_status meet_report(const struct meet *m, ntk_status local) {
  double limit = meet_limit(m);
  return met(m, ntk_comm_agree_report_within(m->comm, local, limit), limit);
}

/* Under the test setting NTKD_TEST_SOLVE_PAUSE=S: rank 0 sleeps S seconds
 * at the start of each kernel's solve, after the agreement before it, as a
 * long solve would (tests/e2e_solve_ranks.sh: a signal to another rank
 * lands while rank 0 solves alone). */
static void test_solve_pause(int rank) {
  const char *v = getenv("NTKD_TEST_SOLVE_PAUSE");
  if (!v || rank != 0) return;
  fprintf(stderr, "ntkd: test setting NTKD_TEST_SOLVE_PAUSE=%s: rank 0 paused in the solve\n", v);
  ntk_sleep(atof(v), NULL);
}

/* Collective: NTK_EINTERRUPTED on every rank, with the stopped message,
 * when any rank has a stop signal or stopped (`local`: this rank's
 * status). method = lapack computes on rank 0 alone, which never sees a
 * signal sent to another rank: without this the solve ended with exit 0
 * and every file written while rank 1 had been told to stop. */
static ntk_status agree_stop(const struct meet *m, ntk_status local) {
  const ntk_comm_t *comm = m->comm;
  if (!local && ntk_stop_requested())
    local = ntk_error(NTK_EINTERRUPTED, "interrupted during the solve (the store is complete): %sntkd solve %s "
                      "JOB.conf solves again", ntk_comm_size(comm) > 1 ? "mpirun " : "", m->store_path);
  double limit = meet_limit(m);
  ntk_status st = met(m, ntk_comm_agree_within(comm, local, limit), limit);
  if (st == NTK_EINTERRUPTED && !local)
    ntk_error(st, "interrupted during the solve (the store is complete): another rank was stopped by a signal; "
              "%sntkd solve %s JOB.conf solves again", ntk_comm_size(comm) > 1 ? "mpirun " : "", m->store_path);
  return st;
}

ntk_status ntk_solve(const ntk_comm_t *comm, const char *store_path, ntk_store_t *opened, const struct ntk_job *job,
                     const struct ntk_solve_labels *labels, struct ntk_solve_result *results, size_t cap,
                     size_t *nresults) {
  if (nresults) *nresults = 0;
  int rank = ntk_comm_rank(comm);
  /* Rank 0's handle as the caller opened it (it checked the job's identity
   * on it): the store is opened once per rank. */
  ntk_store_t *s = rank == 0 ? opened : NULL;
  ntk_store_ranks_test_open_late(rank);
  ntk_status st = ntk_comm_agree_report(comm, s ? NTK_OK : ntk_store_open(store_path, NTK_STORE_READ, &s));
  if (!st) st = ntk_store_same_on_ranks(comm, store_path, s, 0, "nothing was solved");
  if (st) {
    if (s != opened) ntk_store_close(s);
    return st;
  }
  const struct ntk_store_info *in = ntk_store_get_info(s);
  size_t ntr = (size_t)in->n_train, nte = (size_t)(in->n - in->n_train);
  st = rank == 0 ? ntk_solve_check_outputs(store_path, job, in->kernels) : NTK_OK;
  if (!st && rank == 0) st = ntk_solve_check_tile(job, in->tile); /* at the job's line, before the labels */
  ntk_lock_t *lock = NULL;
  if (!st && rank == 0) st = lock_predictions(store_path, job, s, &lock);
  const struct ntk_store_scan *sc = ntk_store_get_scan(s);
  char why[NTK_STORE_INDEX_DAMAGE_MAX];
  if (!st && ntk_store_is_damaged(s) && sc->index_damaged)
    st = ntk_error(NTK_ECORRUPT, "%s: %s", store_path, ntk_store_index_damage(sc, store_path, why, sizeof why));
  else if (!st && ntk_store_is_damaged(s))
    st = ntk_error(NTK_ECORRUPT, "%s is damaged (ntkd verify lists where); run the job again to repair it", store_path);
  else if (!st && !ntr)
    st = ntk_error(NTK_EINPUT, "%s holds no test set: it was computed by a job without [test]", store_path);
  /* Before a tile is called missing, the index is checked whole: one it
   * hides is damage (as export says). */
  else if (!st && ntk_store_tiles_done(s) != ntk_store_tiling(s)->needed && !(st = ntk_store_check_entries(s)))
    st = ntk_error(NTK_EINCOMPLETE, "%s is not complete (%llu of %llu tiles); run the job to finish it",
                   store_path, (unsigned long long)ntk_store_tiles_done(s),
                   (unsigned long long)ntk_store_tiling(s)->needed);
  else if (!st && job->solve.variance && !in->test_test)
    st = ntk_error(NTK_EINPUT, "[solve] variance needs the test x test kernel, which %s does not hold: compute it "
                   "with [test] test_test = yes", store_path);
  /* The labels: loaded once, on rank 0 (by the caller, or here). */
  struct ntk_solve_labels L = {NULL, NULL, ntr, nte, 2};
  if (!st && rank == 0 && labels) {
    if (labels->ntr != ntr || labels->nte != nte)
      st = ntk_error(NTK_EINTERNAL, "labels for %zu + %zu samples, the store has %zu + %zu", labels->ntr, labels->nte,
                     ntr, nte);
    L = *labels;
  } else if (!st && rank == 0) {
    st = ntk_solve_labels_load(job, ntr, nte, &L);
  }
  int own = rank != 0 || !labels; /* L's arrays are this function's to free */
  st = ntk_comm_agree_report(comm, st);
  if (!st) st = share_labels(comm, &L);
  const int32_t *ytr = L.ytr, *yte = L.yte;
  size_t classes = L.classes;
  int method = NTK_SOLVE_LAPACK;
  if (!st) st = ntk_comm_agree_report(comm, choose_method(comm, job, ntr, nte, classes, &method));
  ntk_status (*const fn[])(const struct ntk_solve_problem *, struct ntk_ridge_out *) = {
      [NTK_SOLVE_LAPACK] = ntk_solve_lapack, [NTK_SOLVE_SCALAPACK] = ntk_solve_scalapack,
      [NTK_SOLVE_CG] = ntk_solve_cg};
  if (!st && job->solve.variance && method != NTK_SOLVE_LAPACK)
    st = ntk_comm_agree_report(comm, rank == 0 ? ntk_error(NTK_EINPUT, "[solve] variance is computed by method = lapack (one process) only; "
                                     "this solve uses %s", method_name(method)) : NTK_OK);
  int loo = job->solve.loo && method != NTK_SOLVE_CG;
  if (!st && rank == 0) {
    fprintf(stderr, "ntkd: solve: %zu train, %zu test samples, %zu classes, %zu ridge%s, method %s on %d rank%s\n",
            ntr, nte, classes, job->solve.nridge, job->solve.nridge == 1 ? "" : "s", method_name(method),
            ntk_comm_size(comm), ntk_comm_size(comm) == 1 ? "" : "s");
    if (job->solve.loo && !loo) /* method = auto chose cg: say what is left out */
      fprintf(stderr, "ntkd: solve: no leave-one-out columns: cg does not compute them (lapack and scalapack do)\n");
  }
  ntk_status bad = NTK_OK;
  size_t nr = 0;
  int header = 0;  /* the table's header, printed with its first row (none for a solve stopped before it) */
  size_t written = 0; /* files written (struct table) */
  /* rank 0: the files as they were before this solve (NULL out of memory:
   * no clean-up after a stop) */
  struct prior_files prior = {0, NULL};
  if (!st && rank == 0) prior_files_take(&prior, store_path, job, in->kernels);
  double t_start = ntk_now();
  struct meet m = {comm, store_path, method == NTK_SOLVE_CG, job->worker_timeout, 0.0};
  for (int which = NTK_KERNEL_NNGP; which <= NTK_KERNEL_NTK && !st; which <<= 1) {
    if (!(in->kernels & (uint32_t)which)) continue;
    struct ntk_ridge_out *out = NULL;
    st = meet_report(&m, alloc_outs(comm, job, method, ntr, nte, classes, &out));
    struct ntk_solve_problem p = {s, store_path, which, ntr, nte, classes, ytr, job->solve.nridge, job->solve.ridge,
                                  &job->solve, ntk_comm_size(comm), rank, comm, job->worker_timeout};
    if (!st) { /* a method prints a failure that only one of its ranks saw; rank 0 prints the agreed one */
      /* Every rank agrees on a stop before the kernel's solve and after it,
       * before any of its files is written. */
      st = agree_stop(&m, NTK_OK);
      double t_kernel = ntk_now();
      if (!st) test_solve_pause(rank);
      ntk_status solved = st ? st : fn[method](&p, out);
      if (ntk_now() - t_kernel > m.slowest) m.slowest = ntk_now() - t_kernel;
      if (!st) st = agree_stop(&m, solved);
      /* A rank that waited in that agreement while rank 0 solved alone
       * (lapack) gave its stop flag as it was when it began to wait: read
       * again now, before any file of the kernel is written (a signal
       * there was seen only after every file: a hunt). */
      if (!st) st = agree_stop(&m, NTK_OK);
      if (st && rank == 0) fprintf(stderr, "ntkd: error: %s\n", ntk_error_message());
    }
    ntk_status wr = NTK_OK; /* rank 0: writing the results */
    for (size_t r = 0; r < job->solve.nridge && !st && !wr && rank == 0; r++) {
      struct ntk_solve_result res;
      struct table tab = {method, loo, &header, lock, store_path, job, &written, prior.f ? &prior : NULL};
      ntk_status rs = report_ridge(store_path, job, which, &tab, &out[r], job->solve.ridge[r], ytr, yte, ntr, nte,
                                   classes, &res);
      if (rs == NTK_EINPUT && out[r].failure) {
        fprintf(stderr, "ntkd: %s\n", ntk_error_message());
        bad = rs;
      } else {
        wr = rs;
      }
      if (results && nr < cap) results[nr] = res;
      nr++;
    }
    if (!st) st = meet_report(&m, wr);
    free_outs(out, job->solve.nridge);
  }
  if (nresults) *nresults = nr < cap ? nr : cap;
  if (!st) /* held to the end: else the files written may be a mix of two solves' */
    st = meet_report(&m, rank == 0 ? predictions_still_locked(lock, store_path, job,
                                                              "the files written may be a mix of two solves'")
                                   : NTK_OK);
  if (st && rank == 0) remove_stale(&prior, lock);
  free(prior.f);
  ntk_lock_release(lock); /* every file is written (or refused) */
  if (own) ntk_solve_labels_free(&L);
  if (s != opened) ntk_store_close(s);
  if (!st && bad) bad = ntk_error(bad, "%s", "some ridges could not be solved (see above); the others were written");
  if (!st) st = meet_report(&m, bad);
  if (!st) { /* a stop while the files were written: never the success line */
    st = agree_stop(&m, NTK_OK);
    if (st && rank == 0) fprintf(stderr, "ntkd: error: %s\n", ntk_error_message());
  }
  if (!st && rank == 0) {
    char path[NTK_PATH_MAX + 64];
    prediction_path(store_path, job, NTK_KERNEL_NTK, 0, path, sizeof path);
    char *cut = strstr(path, "-ntk-ridge0.npy");
    if (cut) strcpy(cut, "-KERNEL-ridgeR.npy");
    fprintf(stderr, "ntkd: %zu train, %zu test samples, %zu classes; predictions in %s\n", ntr, nte, classes, path);
    fprintf(stderr, "ntkd: solve time %.2f s (method %s)\n", ntk_now() - t_start, method_name(method));
  }
  return st;
}


int ntk_cmd_solve(const ntk_comm_t *comm, const char *store_path, const char *conf_path) {
  char *text = NULL;
  int rank = ntk_comm_rank(comm);
  struct ntk_job *job = calloc(1, sizeof *job);
  ntk_status st = job ? ntk_read_text_file(conf_path, &text, NULL) : ntk_error(NTK_ENOMEM, "out of memory");
  if (!st) st = ntk_job_parse_string(text, conf_path, job);
  free(text);
  if (!st && !job->solve.enabled)
    st = ntk_error(NTK_ECONFIG, "%s: has no [solve] section (ridge = ...) to solve with", conf_path);
  /* The store must be this job's: the same data, test set, model and
   * precision (the hash of ntk_job_identity). Rank 0 checks; the data is
   * not needed by the solve. */
  struct ntk_dataset data;
  memset(&data, 0, sizeof data);
  if (!st && rank == 0) st = ntk_data_load_job(job, job->precision, &data);
  ntk_store_t *s = NULL;
  if (!st && rank == 0) st = ntk_store_open(store_path, NTK_STORE_READ, &s);
  if (!st && rank == 0) {
    struct ntk_store_info want;
    char *want_text = NULL;
    st = ntk_job_identity(job, job->net, &data, &want, &want_text);
    if (!st)
      st = ntk_job_check_store(store_path, s, &want, want_text, 1, "solve it with the job file that computed it");
    free(want_text);
  }
  /* The labels, and the classes they make, said and checked as a run does,
   * and kept for the solve, which also keeps rank 0's store. */
  struct ntk_solve_labels L = {0};
  if (!st && rank == 0) st = ntk_solve_labels_load(job, data.n_train, data.n - data.n_train, &L);
  ntk_data_free(&data);
  st = ntk_comm_agree_report(comm, st);
  if (!st) st = ntk_solve(comm, store_path, s, job, &L, NULL, 0, NULL); /* prints its own errors */
  ntk_solve_labels_free(&L);
  ntk_store_close(s);
  if (job) ntk_job_free(job);
  free(job);
  return ntk_status_exit_code(st);
}
