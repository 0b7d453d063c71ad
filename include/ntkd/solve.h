/* Kernel regression on a finished store (docs/SOLVE.md): the train x train
 * block of each kernel, regularised with neural-tangents' diag_reg
 * convention, factorised by Cholesky in float64, predicts the test set's
 * one-hot labels from the test x train block. Rank-local (rank 0). */
#ifndef NTKD_SOLVE_H
#define NTKD_SOLVE_H

#include <stddef.h>
#include <stdint.h>

#include "ntkd/config.h"
#include "ntkd/status.h"

/* One (kernel, ridge) result. */
struct ntk_solve_result {
  int kernel;        /* NTK_KERNEL_NNGP or NTK_KERNEL_NTK */
  double ridge;      /* diag_reg as given */
  double reg;        /* what was added to the diagonal: ridge * mean(diag K_train) */
  double rcond;      /* LAPACK's estimate of 1 / condition number (1-norm) */
  double accuracy;   /* fraction of test samples whose largest prediction is their label */
  double mse;        /* mean over test samples and classes of (prediction - one-hot)^2 */
  int ok;            /* 0: the matrix was not positive definite or too ill-conditioned */
};

/* Reciprocal condition numbers below this are refused: the predictions
 * would be rounding noise. */
#define NTK_SOLVE_MIN_RCOND 1e-13

/* Dense symmetric positive-definite solve, the core of ntk_solve (exposed
 * for tests). `a` is n x n, row-major, full (both triangles); it is
 * restored on return except that its diagonal has `reg` added and removed
 * again. `b` is n x nrhs, row-major, and is overwritten by the solution.
 * Returns 0 and sets *rcond, or the LAPACK info (> 0: not positive
 * definite at that column; -1: out of memory). Rank-local; uses OpenBLAS's
 * threads. */
int ntk_spd_solve(double *a, size_t n, double reg, double *b, size_t nrhs, double *rcond);

/* Solve every kernel in the store at every ridge of job->solve, print a
 * table of test accuracy and MSE, and write the predictions
 * (PREFIX-KERNEL-ridgeR.npy, float64, (n_test, classes)) where PREFIX is
 * [solve] predictions or the store path without ".ntk". `results` (may be
 * NULL) receives up to `cap` results, *nresults how many. The store must
 * be complete and hold a test set; the job gives the labels. Errors:
 * NTK_EINCOMPLETE, NTK_EINPUT (labels, no test set, an ill-conditioned
 * matrix: the other ridges are still solved and written), NTK_ENOMEM,
 * NTK_EIO, NTK_ECORRUPT. */
ntk_status ntk_solve(const char *store_path, const struct ntk_job *job, struct ntk_solve_result *results,
                     size_t cap, size_t *nresults);

/* Read the job's train and test labels for ntr and nte samples and check
 * them (count, range), so that a bad labels file stops a job before its
 * tiles are computed rather than after. Rank-local. */
ntk_status ntk_solve_check_labels(const struct ntk_job *job, size_t ntr, size_t nte);

/* `ntkd solve STORE JOB.conf`: check that the store was computed from the
 * job's data and model, then ntk_solve. Returns the exit code. */
int ntk_cmd_solve(const char *store_path, const char *conf_path);

#endif
