/* Kernel regression on a finished store: see include/ntkd/solve.h and
 * docs/SOLVE.md. */
#include "ntkd/solve.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntkd/arch.h"
#include "ntkd/codec.h"
#include "ntkd/cpuinit.h"
#include "ntkd/data.h"
#include "ntkd/fsutil.h"
#include "ntkd/jobfiles.h"
#include "ntkd/jobhash.h"
#include "ntkd/npy.h"
#include "ntkd/progress.h"
#include "ntkd/run.h"
#include "ntkd/signals.h"
#include "ntkd/store.h"

/* LAPACK from OpenBLAS, Fortran interface (LP64: 32-bit integers). The
 * trailing size_t is the hidden length of the character argument. */
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t);
void dpotrs_(const char *uplo, const int *n, const int *nrhs, const double *a, const int *lda, double *b,
             const int *ldb, int *info, size_t);
void dpocon_(const char *uplo, const int *n, const double *a, const int *lda, const double *anorm,
             double *rcond, double *work, int *iwork, int *info, size_t);

/* Reference LAPACK (dpocon) indexes with 32-bit integers. */
#define MAX_SOLVE_N 46340

int ntk_spd_solve(double *a, size_t n, double reg, double *b, size_t nrhs, double *rcond) {
  *rcond = 0;
  if (n == 0) return 0;
  double *diag = malloc(n * sizeof *diag), *work = malloc(3 * n * sizeof *work);
  double *bc = malloc(n * nrhs * sizeof *bc);
  int *iwork = malloc(n * sizeof *iwork);
  if (!diag || !work || !bc || !iwork) {
    free(diag), free(work), free(bc), free(iwork);
    return -1;
  }
  /* Row-major lower = column-major upper: LAPACK factors the row-major
   * lower triangle ('U' in its column-major view) and never touches the
   * upper one, from which the matrix is restored afterwards. */
  double anorm = 0;
  for (size_t i = 0; i < n; i++) {
    diag[i] = a[i * n + i];
    a[i * n + i] += reg;
    double sum = 0;
    for (size_t j = 0; j < n; j++) sum += fabs(a[i * n + j]);
    if (sum > anorm) anorm = sum;
  }
  int ni = (int)n, nr = (int)nrhs, info = 0;
  dpotrf_("U", &ni, a, &ni, &info, 1);
  if (info == 0) dpocon_("U", &ni, a, &ni, &anorm, rcond, work, iwork, &info, 1);
  if (info == 0) {
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < nrhs; k++) bc[k * n + i] = b[i * nrhs + k];
    dpotrs_("U", &ni, &nr, a, &ni, bc, &ni, &info, 1);
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < nrhs; k++) b[i * nrhs + k] = bc[k * n + i];
  }
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < i; j++) a[i * n + j] = a[j * n + i];
    a[i * n + i] = diag[i];
  }
  free(diag), free(work), free(bc), free(iwork);
  return info;
}

static const char *kname(int k) { return k == NTK_KERNEL_NTK ? "ntk" : "nngp"; }

/* Train x train (full, row-major, n_tr x n_tr) and test x train (n_te x
 * n_tr) blocks of kernel `which`, in float64, from every needed tile. */
static ntk_status assemble(ntk_store_t *s, int which, double *ktt, double *kst) {
  const struct ntk_store_info *in = ntk_store_get_info(s);
  const struct ntk_tiling *tg = ntk_store_tiling(s);
  size_t ntr = (size_t)in->n_train, es = in->elem;
  ntk_codec_t *codec = ntk_codec_create(1);
  size_t edge = in->tile < in->n ? in->tile : (size_t)in->n;
  char *raw = malloc(edge * edge * es * 2 + 1), *v = malloc(edge * edge * es + 1);
  ntk_status st = codec && raw && v ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory");
  for (uint64_t idx = 0; idx < tg->ntiles && !st; idx++) {
    if (!ntk_tiling_needed(tg, idx)) continue;
    struct ntk_tile t = ntk_tiling_tile(tg, idx);
    if ((st = ntk_store_read_kernel(s, codec, idx, which, raw, v))) break;
    for (size_t r = 0; r < t.rows && !st; r++)
      for (size_t c = 0; c < t.cols; c++) {
        size_t i = (size_t)t.r0 + r, j = (size_t)t.c0 + c;
        double x = es == 4 ? (double)((const float *)(const void *)v)[r * t.cols + c]
                           : ((const double *)(const void *)v)[r * t.cols + c];
        if (!isfinite(x)) { /* a store from a build that did not check tiles before storing them */
          st = ntk_error(NTK_EINPUT, "%s kernel entry (%zu, %zu) is %g: not a kernel that can be solved%s",
                         kname(which), i, j, x, es == 4 ? "; the kernel exceeds float32: recompute it with "
                                                          "[compute] precision = float64" : "");
          break;
        }
        if (i < ntr && j < ntr) ktt[i * ntr + j] = ktt[j * ntr + i] = x;
        else if (j < ntr) kst[(i - ntr) * ntr + j] = x;
        else if (i < ntr) kst[(j - ntr) * ntr + i] = x;
        /* both >= ntr: test x test, not used here */
      }
  }
  free(v);
  free(raw);
  ntk_codec_free(codec);
  return st;
}

static ntk_status write_npy(const char *path, const double *x, size_t rows, size_t cols) {
  char tmp[NTK_PATH_MAX + 400], hdr[256];
  int fd;
  ntk_status st = ntk_make_parents(path);
  if (!st) st = ntk_tmp_create(path, tmp, sizeof tmp, &fd);
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
  if (!st && rename(tmp, path)) st = ntk_error(NTK_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
  if (st) unlink(tmp);
  return st;
}

static void prediction_path(const char *store_path, const struct ntk_job *job, int kernel, double ridge, char *out,
                            size_t cap) {
  char prefix[NTK_PATH_MAX];
  if (job->solve.predictions[0]) {
    snprintf(prefix, sizeof prefix, "%s", job->solve.predictions);
  } else {
    snprintf(prefix, sizeof prefix, "%s", store_path);
    size_t l = strlen(prefix);
    if (l > 4 && !strcmp(prefix + l - 4, ".ntk")) prefix[l - 4] = '\0';
  }
  snprintf(out, cap, "%s-%s-ridge%g.npy", prefix, kname(kernel), ridge);
}

/* The prediction files must not replace the store or any input of the job. */
static ntk_status check_outputs(const char *store_path, const struct ntk_job *job, uint32_t kernels) {
  struct ntk_named_path in[NTK_JOB_MAX_INPUTS + 1], out[2 * NTK_MAX_RIDGES];
  char(*names)[NTK_PATH_MAX + 64] = malloc(2 * NTK_MAX_RIDGES * sizeof *names);
  if (!names) return ntk_error(NTK_ENOMEM, "out of memory");
  size_t nin = ntk_job_inputs(job, in), nout = 0;
  in[nin++] = (struct ntk_named_path){"the store", store_path};
  for (int which = NTK_KERNEL_NNGP; which <= NTK_KERNEL_NTK; which <<= 1)
    for (size_t r = 0; r < job->solve.nridge && (kernels & (uint32_t)which); r++) {
      prediction_path(store_path, job, which, job->solve.ridge[r], names[nout], sizeof names[nout]);
      out[nout] = (struct ntk_named_path){"a predictions file", names[nout]};
      nout++;
    }
  ntk_status st = ntk_check_outputs(in, nin, out, nout);
  free(names);
  return st;
}

ntk_status ntk_solve(const char *store_path, const struct ntk_job *job, struct ntk_solve_result *results,
                     size_t cap, size_t *nresults) {
  if (nresults) *nresults = 0;
  ntk_store_t *s;
  ntk_status st = ntk_store_open(store_path, NTK_STORE_READ, &s);
  if (st) return st;
  const struct ntk_store_info *in = ntk_store_get_info(s);
  size_t ntr = (size_t)in->n_train, nte = (size_t)(in->n - in->n_train);
  st = check_outputs(store_path, job, in->kernels);
  if (!st && ntk_store_is_damaged(s))
    st = ntk_error(NTK_ECORRUPT, "%s is damaged (ntkd verify lists where); run the job again to repair it", store_path);
  else if (!st && !ntr)
    st = ntk_error(NTK_EINPUT, "%s holds no test set: it was computed by a job without [test]", store_path);
  else if (!st && ntk_store_tiles_done(s) != ntk_store_tiling(s)->needed)
    st = ntk_error(NTK_EINCOMPLETE, "%s is not complete (%llu of %llu tiles); run the job to finish it",
                   store_path, (unsigned long long)ntk_store_tiles_done(s),
                   (unsigned long long)ntk_store_tiling(s)->needed);
  else if (!st && ntr > MAX_SOLVE_N)
    st = ntk_error(NTK_EINPUT, "%zu train samples: the single-node solve handles up to %d (%.0f GB); "
                   "docs/SOLVE.md says how a larger one runs", ntr, MAX_SOLVE_N, 8.0 * MAX_SOLVE_N * MAX_SOLVE_N / 1e9);
  int32_t *ytr = NULL, *yte = NULL;
  if (!st) st = ntk_labels_load(job->labels_path, ntr, job->count == 0, 65536, &ytr);
  if (!st) st = ntk_labels_load(job->test.labels, nte, job->test.count == 0, 65536, &yte);
  if (st) {
    free(ytr);
    ntk_store_close(s);
    return st;
  }
  size_t classes = 2;
  for (size_t i = 0; i < ntr; i++) classes = (size_t)ytr[i] + 1 > classes ? (size_t)ytr[i] + 1 : classes;
  for (size_t i = 0; i < nte; i++) classes = (size_t)yte[i] + 1 > classes ? (size_t)yte[i] + 1 : classes;

  double *ktt = malloc(ntr * ntr * sizeof *ktt), *kst = malloc(nte * ntr * sizeof *kst);
  double *alpha = malloc(ntr * classes * sizeof *alpha), *pred = malloc(nte * classes * sizeof *pred);
  if (!ktt || !kst || !alpha || !pred)
    st = ntk_error(NTK_ENOMEM, "out of memory for the %zu x %zu train kernel and the %zu x %zu test block "
                   "(%.1f GB); docs/SOLVE.md says how a larger solve runs", ntr, ntr, nte, ntr,
                   8.0 * (double)(ntr * ntr + nte * ntr) / 1e9);
  ntk_cpu_all_threads();
  printf("%-6s %-10s %-12s %-9s %-10s %s\n", "kernel", "ridge", "added", "rcond", "test acc", "test MSE");
  ntk_status bad = NTK_OK;
  size_t nr = 0, nfact = 0;
  double t_read = 0, t_solve = 0, t0;
  for (int which = NTK_KERNEL_NNGP; which <= NTK_KERNEL_NTK && !st; which <<= 1) {
    if (!(in->kernels & (uint32_t)which)) continue;
    t0 = ntk_now();
    if ((st = assemble(s, which, ktt, kst))) break;
    t_read += ntk_now() - t0;
    double trace = 0;
    for (size_t i = 0; i < ntr; i++) trace += ktt[i * ntr + i];
    for (size_t r = 0; r < job->solve.nridge && !st; r++) {
      if (ntk_stop_requested()) { /* a job's signal handlers are installed; the store is complete */
        st = ntk_error(NTK_EINTERRUPTED, "interrupted during the solve (the store is complete): "
                       "ntkd solve %s JOB.conf solves again", store_path);
        break;
      }
      struct ntk_solve_result res = {which, job->solve.ridge[r], job->solve.ridge[r] * trace / (double)ntr,
                                     0, 0, 0, 0};
      for (size_t i = 0; i < ntr; i++)
        for (size_t k = 0; k < classes; k++) alpha[i * classes + k] = (size_t)ytr[i] == k ? 1.0 : 0.0;
      t0 = ntk_now();
      int info = ntk_spd_solve(ktt, ntr, res.reg, alpha, classes, &res.rcond);
      t_solve += ntk_now() - t0;
      nfact++;
      if (info < 0) {
        st = ntk_error(NTK_ENOMEM, "out of memory in the solve");
        break;
      }
      if (info > 0 || res.rcond < NTK_SOLVE_MIN_RCOND) {
        if (info > 0)
          bad = ntk_error(NTK_EINPUT, "%s train kernel with ridge %g (%.3g added to the diagonal) is not positive "
                          "definite (Cholesky stopped at column %d of %zu): increase the ridge", kname(which),
                          res.ridge, res.reg, info, ntr);
        else
          bad = ntk_error(NTK_EINPUT, "%s train kernel with ridge %g is too ill-conditioned to solve (reciprocal "
                          "condition number %.1e < %.0e): increase the ridge", kname(which), res.ridge,
                          res.rcond, NTK_SOLVE_MIN_RCOND);
        printf("%-6s %-10g %-12.4g %-9.2e %s\n", kname(which), res.ridge, res.reg, res.rcond,
               "failed: not solved (see the message below)");
        fprintf(stderr, "ntkd: %s\n", ntk_error_message());
      } else {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nte, (int)classes, (int)ntr, 1.0, kst,
                    (int)ntr, alpha, (int)classes, 0.0, pred, (int)classes);
        size_t right = 0;
        double se = 0;
        for (size_t i = 0; i < nte; i++) {
          size_t best = 0;
          for (size_t k = 0; k < classes; k++) {
            double p = pred[i * classes + k], e = p - ((size_t)yte[i] == k ? 1.0 : 0.0);
            se += e * e;
            if (p > pred[i * classes + best]) best = k;
          }
          right += best == (size_t)yte[i];
        }
        res.accuracy = nte ? (double)right / (double)nte : 0;
        res.mse = nte ? se / (double)(nte * classes) : 0;
        res.ok = isfinite(res.mse);
        printf("%-6s %-10g %-12.4g %-9.2e %-10.4f %.6f\n", kname(which), res.ridge, res.reg, res.rcond,
               res.accuracy, res.mse);
        char path[NTK_PATH_MAX + 64];
        prediction_path(store_path, job, which, res.ridge, path, sizeof path);
        st = write_npy(path, pred, nte, classes);
      }
      if (results && nr < cap) results[nr] = res;
      nr++;
    }
  }
  fflush(stdout);
  ntk_cpu_single_thread();
  if (nresults) *nresults = nr < cap ? nr : cap;
  free(ktt), free(kst), free(alpha), free(pred), free(ytr), free(yte);
  ntk_store_close(s);
  if (!st && bad) st = ntk_error(bad, "%s", "some ridges could not be solved (see above); the others were written");
  if (!st) {
    char path[NTK_PATH_MAX + 64];
    prediction_path(store_path, job, NTK_KERNEL_NTK, 0, path, sizeof path);
    char *cut = strstr(path, "-ntk-ridge0.npy");
    if (cut) strcpy(cut, "-KERNEL-ridgeR.npy");
    fprintf(stderr, "ntkd: %zu train, %zu test samples, %zu classes; predictions in %s\n", ntr, nte, classes, path);
    fprintf(stderr, "ntkd: solve times: reading the kernels %.2f s, %zu Cholesky solves %.2f s (%.2f s each)\n",
            t_read, nfact, t_solve, nfact ? t_solve / (double)nfact : 0.0);
  }
  return st;
}

ntk_status ntk_solve_check_labels(const struct ntk_job *job, size_t ntr, size_t nte) {
  int32_t *y = NULL;
  ntk_status st = ntk_labels_load(job->labels_path, ntr, job->count == 0, 65536, &y);
  free(y);
  y = NULL;
  if (!st) st = ntk_labels_load(job->test.labels, nte, job->test.count == 0, 65536, &y);
  free(y);
  return st;
}

int ntk_cmd_solve(const char *store_path, const char *conf_path) {
  char *text = NULL;
  struct ntk_job *job = calloc(1, sizeof *job);
  ntk_status st = job ? ntk_read_text_file(conf_path, &text, NULL) : ntk_error(NTK_ENOMEM, "out of memory");
  if (!st) st = ntk_job_parse_string(text, conf_path, job);
  free(text);
  if (!st && !job->solve.enabled)
    st = ntk_error(NTK_ECONFIG, "%s: has no [solve] section (ridge = ...) to solve with", conf_path);
  /* The store must be this job's: the same data, test set, model and
   * precision (the hash of ntk_job_identity). */
  struct ntk_arch arch = {0, NULL};
  struct ntk_dataset data;
  memset(&data, 0, sizeof data);
  if (!st) st = ntk_arch_parse(job->arch, job->w_std, job->b_std, &arch);
  if (!st) st = ntk_data_load_job(job, job->precision, &data);
  ntk_store_t *s = NULL;
  if (!st) st = ntk_store_open(store_path, NTK_STORE_READ, &s);
  if (!st) {
    struct ntk_store_info want;
    char *want_text = NULL;
    st = ntk_job_identity(job, &arch, &data, &want, &want_text);
    if (!st) st = ntk_job_check_store(store_path, s, &want, want_text, "solve it with the job file that computed it");
    free(want_text);
  }
  ntk_store_close(s);
  ntk_data_free(&data);
  ntk_arch_free(&arch);
  if (!st) st = ntk_solve(store_path, job, NULL, 0, NULL);
  ntk_job_free(job);
  free(job);
  if (st) fprintf(stderr, "ntkd: error: %s\n", ntk_error_message());
  return ntk_status_exit_code(st);
}
