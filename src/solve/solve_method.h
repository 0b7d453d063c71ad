/* The methods behind `ntkd solve` (docs/SOLVE.md), and what they share.
 *
 * src/solve/solve.c (the driver) opens the store on every rank, reads and
 * checks the labels, chooses a method ([solve] method, or auto), and for
 * each kernel of the store calls that method once with every ridge. The
 * method returns, per ridge, the test predictions (and what else the job
 * asked for) on rank 0; the driver scores them (test accuracy and MSE, and
 * leave-one-out from alpha and diag_inv), prints the table and writes the
 * .npy files. A method never prints the table and never writes files; it
 * may print progress lines (rank 0, stderr, "ntkd: solve: ...").
 *
 *   lapack     src/solve/lapack.c     rank 0 alone, the whole train block in
 *                                     float64, OpenBLAS's dpotrf (n <= 46340)
 *   scalapack  src/solve/scalapack.c  every rank, 2-D block-cyclic,
 *                                     pdpotrf/pdpocon/pdpotrs
 *   cg         src/solve/cg.c         every rank, preconditioned conjugate
 *                                     gradients, for n beyond memory
 */
#ifndef NTKD_SOLVE_METHOD_H
#define NTKD_SOLVE_METHOD_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "job/config.h"
#include "base/status.h"
#include "store/store.h"

/* One kernel of a complete store with a train/test split: the same on
 * every rank (each rank has its own read-only store handle). */
struct ntk_solve_problem {
  ntk_store_t *store;   /* this rank's read-only handle; complete, undamaged */
  const char *store_path;
  int which;            /* NTK_KERNEL_NNGP or NTK_KERNEL_NTK */
  size_t ntr, nte;      /* train samples 0..ntr-1, test samples ntr..ntr+nte-1 */
  size_t classes;       /* one-hot targets: Y[i][k] = (ytr[i] == k) */
  const int32_t *ytr;   /* ntr train labels */
  size_t nridge;
  const double *ridge;  /* [solve] ridge, as given (diag_reg) */
  const struct ntk_solve_opts *opts; /* block, grid, tolerance, loo, variance, ... */
  int nranks, rank;     /* the job's ranks (1 and 0 without mpirun) */
  const ntk_comm_t *comm; /* and their communicator */
  double rank_timeout;  /* [compute] worker_timeout: how long a rank of method cg waits for the others */
};

/* Why a ridge was not solved. */
enum ntk_ridge_failure {
  NTK_RIDGE_OK = 0,
  NTK_RIDGE_NOT_PD = 1,        /* Cholesky stopped: not positive definite */
  NTK_RIDGE_ILL = 2,           /* rcond below NTK_SOLVE_MIN_RCOND */
  NTK_RIDGE_NOT_CONVERGED = 3, /* CG: max_iterations without reaching the tolerance, or a breakdown */
};

/* One ridge's outcome. The driver allocates the arrays (on rank 0 only; NULL
 * elsewhere and where not asked for) before the call; the method fills them
 * on rank 0. */
struct ntk_ridge_out {
  double reg;         /* added to the diagonal: ridge * trace(K_train) / ntr */
  double rcond;       /* Cholesky: reciprocal condition estimate (1-norm); CG: 0 */
  size_t iterations;  /* CG: iterations run; Cholesky: 0 */
  double residual;    /* CG: largest relative residual ||b - A x|| / ||b|| over the classes */
  int failure;        /* enum ntk_ridge_failure */
  char why[512];      /* the message when failure != 0: kernel, ridge, what happened, what to do */
  double *pred;       /* nte x classes, row-major: K_test,train alpha */
  double *alpha;      /* ntr x classes: (K + reg I)^-1 Y */
  double *diag_inv;   /* ntr: diag((K + reg I)^-1), for leave-one-out; NULL when loo is off or
                       * the method cannot give it (cg) */
  double *var;        /* variance = yes: nte predictive variances; = full: nte x nte covariance;
                       * NULL when not asked for (docs/SOLVE.md, "Leave-one-out and predictive
                       * variance") */
};

/* The methods: collective over every rank of the job (lapack computes on
 * rank 0 and the others only take part in the final agreement). Per-ridge
 * failures go to out[r].failure/why and the other ridges are still solved;
 * the return status is for what ends the solve (NTK_ENOMEM, NTK_EIO,
 * NTK_ECORRUPT, NTK_EINTERRUPTED on a stop signal, NTK_EINPUT), the same on
 * every rank. */
ntk_status ntk_solve_lapack(const struct ntk_solve_problem *p, struct ntk_ridge_out *out);
ntk_status ntk_solve_scalapack(const struct ntk_solve_problem *p, struct ntk_ridge_out *out);
ntk_status ntk_solve_cg(const struct ntk_solve_problem *p, struct ntk_ridge_out *out);

/* [solve] grid (rows x cols; 0 x 0: as square as possible) on nranks
 * ranks, into *pr x *pc: NTK_EINPUT unless it uses every rank. */
ntk_status ntk_scalapack_grid(int rows, int cols, int nranks, int *pr, int *pc);

/* [solve] block (0: the default, the largest divisor of the tile up to 256)
 * into *nb: NTK_EINPUT unless it divides the store's tile edge. */
ntk_status ntk_scalapack_block(size_t block, size_t tile, size_t *nb);

/* Bytes each rank needs for a method on this problem (the method's own
 * estimate, used by `method = auto` and in messages). */
size_t ntk_solve_lapack_bytes(size_t ntr, size_t nte, size_t classes);
size_t ntk_solve_scalapack_bytes(size_t ntr, size_t nte, size_t classes, int nranks);

/* Shared by the methods ----------------------------------------------- */

/* Block [r0, r1) x [c0, c1) of kernel `which` as float64 into `out`
 * (row-major, leading dimension ld), from the store's lower-triangle
 * tiles, the upper triangle by symmetry. Reads only the tiles the block
 * touches; scratch is one tile. A non-finite entry is NTK_EINPUT (a
 * kernel that cannot be solved). Entries of test x test tiles that were
 * not computed are NaN. */
ntk_status ntk_solve_read_block(ntk_store_t *s, int which, size_t r0, size_t r1, size_t c0, size_t c1,
                                double *out, size_t ld);

/* trace of the train block of kernel `which` (its diagonal tiles only). */
ntk_status ntk_solve_train_trace(ntk_store_t *s, int which, size_t ntr, double *trace);

/* Bytes this node has available (MemAvailable) and this process's peak
 * resident memory (VmHWM), from /proc; 0 where they cannot be read. */
double ntk_solve_mem_available(void);
double ntk_solve_peak_rss(void);

/* A Cholesky method's verdict on one ridge from the factorisation's info
 * and o->rcond: sets o->failure and o->why (not positive definite, or
 * rcond below NTK_SOLVE_MIN_RCOND) and returns 0, or returns 1 when the
 * ridge can be solved. */
int ntk_solve_ridge_verdict(struct ntk_ridge_out *o, const char *kernel, double ridge, int info, size_t ntr);

/* "nngp" or "ntk". */
const char *ntk_solve_kernel_name(int which);

/* sum |x[i]|, in index order: the 1-norm of a vector (the condition
 * estimates'). */
double ntk_solve_sum_abs(const double *x, size_t n);

/* The condition estimate's second look: Higham's estimate of ||A^-1||_1
 * (dpocon's, scalapack.c's condition()) probes A^-1 with the ones vector,
 * sign vectors and an alternating vector, and misses a near-null direction
 * none of them leans on: two equal train samples (e_i - e_j) with a small
 * ridge came out 450 times too well conditioned (a hunt: rcond 1.9e-12
 * printed, 4.2e-15 true, the predictions 3e-4 off, exit 0). Inverse
 * iteration from a fixed pseudo-random start (the same on every rank and
 * every run) turns towards the smallest eigenvalue's direction whatever
 * its structure, and each ||A^-1 z||_1 / ||z||_1 on the way is a lower bound
 * on the norm: *est becomes the largest of them and itself, so the
 * estimate only comes closer to the truth. apply(ctx, x): x <- A^-1 x in
 * place (collective for scalapack: x the same on every rank); x: n
 * doubles of scratch. */
#define NTK_SOLVE_PROBE_STEPS 3
ntk_status ntk_solve_inverse_probe(ntk_status (*apply)(void *ctx, double *x), void *ctx, size_t n, double *x,
                                   double *est);

#endif
