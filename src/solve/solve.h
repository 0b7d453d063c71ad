/* Kernel regression on a finished store (docs/SOLVE.md): the train x train
 * block of each kernel, regularised with neural-tangents' diag_reg
 * convention, factorised by Cholesky in float64, predicts the test set's
 * one-hot labels from the test x train block. The methods (one process,
 * ScaLAPACK, conjugate gradients) are in src/solve/solve_method.h. */
#ifndef NTKD_SOLVE_H
#define NTKD_SOLVE_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "job/config.h"
#include "base/status.h"
#include "store/store.h"

/* One (kernel, ridge) result. */
struct ntk_solve_result {
  int kernel;        /* NTK_KERNEL_NNGP or NTK_KERNEL_NTK */
  double ridge;      /* diag_reg as given */
  double reg;        /* what was added to the diagonal: ridge * mean(diag K_train) */
  double rcond;      /* LAPACK's estimate of 1 / condition number (1-norm) */
  double accuracy;   /* fraction of test samples whose largest prediction is their label */
  double mse;        /* mean over test samples and classes of (prediction - one-hot)^2 */
  int ok;            /* 0: the matrix was not positive definite or too ill-conditioned, or CG did not converge */
  double loo_accuracy, loo_mse; /* leave-one-out on the train set (Cholesky methods with loo = yes); NaN if not */
  size_t iterations; /* CG iterations (0 for Cholesky) */
  int method;        /* NTK_SOLVE_LAPACK, _SCALAPACK or _CG: the method that ran */
};

/* Reciprocal condition numbers below this are refused: the predictions
 * would be rounding noise. */
#define NTK_SOLVE_MIN_RCOND 1e-13

/* OpenBLAS's LAPACK indexes with 32-bit integers: n * n must stay below
 * 2^31 (reference dpocon computes such offsets). */
#define NTK_LAPACK_MAX_N 46340

/* Dense symmetric positive-definite solve: the steps of the lapack method
 * (src/solve/lapack.c: Cholesky and condition estimate, solve, then the
 * inverse's diagonal in place of the factor) in one call, exposed for
 * tests. `a` is n x n, row-major, full (both triangles); it is restored on
 * return, bit for bit (its diagonal has `reg` added and then put back).
 * `b` is n x nrhs, row-major, and is overwritten by the solution.
 * `diag_inv` (may be NULL) receives diag((a + reg I)^-1), for leave-one-out.
 * Returns 0 and sets *rcond, or the LAPACK info (> 0: not positive
 * definite at that column; -1: out of memory; -2: n > NTK_LAPACK_MAX_N).
 * Rank-local; uses OpenBLAS's threads. */
int ntk_spd_solve(double *a, size_t n, double reg, double *b, size_t nrhs, double *rcond, double *diag_inv);

/* Collective over every rank of the job (the methods may use them all).
 * `store` (rank 0, may be NULL): its own open handle of store_path, which
 * the caller checked; `labels` (rank 0, may be NULL): the job's labels
 * as ntk_solve_labels_load gave them. Either NULL: opened or loaded here.
 * Solve every kernel in the store at every ridge of job->solve with the
 * job's method ([solve] method, or auto: docs/SOLVE.md), print a table of
 * test accuracy and MSE (rank 0), and write the predictions
 * (PREFIX-KERNEL-ridgeR.npy, float64, (n_test, classes)) where PREFIX is
 * [solve] predictions or the store path without ".ntk". `results` (may be
 * NULL) receives up to `cap` results, *nresults how many (rank 0). The store must
 * be complete and hold a test set; the job gives the labels. Errors:
 * NTK_EINCOMPLETE, NTK_EINPUT (labels, no test set, an ill-conditioned
 * matrix: the other ridges are still solved and written), NTK_ENOMEM,
 * NTK_EIO, NTK_ECORRUPT. */
struct ntk_solve_labels;
ntk_status ntk_solve(const ntk_comm_t *world, const char *store_path, ntk_store_t *store, const struct ntk_job *job,
                     const struct ntk_solve_labels *labels, struct ntk_solve_result *results, size_t cap,
                     size_t *nresults);

/* A regression's labels, loaded and checked once: ntr train and nte test
 * labels and the classes they make. */
struct ntk_solve_labels {
  int32_t *ytr, *yte;
  size_t ntr, nte, classes;
};

/* Read the job's train and test labels for ntr and nte samples and check
 * them (count, range, and the classes they make: ntk_labels_classes),
 * saying on stderr what each file holds, so that a bad labels file stops
 * a job before its tiles are computed rather than after; the job keeps
 * them for the solve (ntk_solve's `labels`). Rank-local. */
ntk_status ntk_solve_labels_load(const struct ntk_job *job, size_t ntr, size_t nte, struct ntk_solve_labels *L);

/* The labels of a [test] job without [solve] (solved later by ntkd solve):
 * each file read and checked as above (count, range), before its tiles
 * (they were never opened: a path naming nothing ran with exit 0); the
 * classes they make are the later solve's to judge ([data] classes may
 * come with it), and nothing is kept. Rank-local. */
ntk_status ntk_solve_labels_check(const struct ntk_job *job, size_t ntr, size_t nte);
void ntk_solve_labels_free(struct ntk_solve_labels *L); /* accepts NULL */

/* The prediction (and variance) files of the job's [solve] for a store
 * at store_path holding `kernels` (NTK_KERNEL_* mask): none may replace
 * an input, the store or one of ntkd's own files, nor another of them
 * (two ridges that print alike, 1e-4 and 1.000001e-4, name one file).
 * ntk_solve checks them; a kernel job checks them before its tiles too.
 * Rank-local. */
ntk_status ntk_solve_check_outputs(const char *store_path, const struct ntk_job *job, uint32_t kernels);

/* What the job's [solve] asks of the ranks, checked before its tiles:
 * method = scalapack runs under mpirun, its grid on all `nranks` ranks.
 * (A grid that did not fit was refused after every tile was computed.)
 * Rank-local. */
ntk_status ntk_solve_check_ranks(const struct ntk_job *job, int nranks, int under_mpi);

/* The job's [solve] block against the tile edge of its store (a resumed
 * store keeps its own tile): a block that does not divide it, refused at
 * the job file's line before the tiles (it was refused after them), and
 * by `ntkd solve` once the store is open. Rank-local. */
ntk_status ntk_solve_check_tile(const struct ntk_job *job, uint64_t tile);

/* `[mpirun -np P] ntkd solve STORE JOB.conf`: check that the store was
 * computed from the job's data and model, then ntk_solve. Collective.
 * Returns the exit code. */
int ntk_cmd_solve(const ntk_comm_t *world, const char *store_path, const char *conf_path);

#endif
