/* The ScaLAPACK solve method: every rank of the job holds a share of the
 * train block of one kernel in a 2-D block-cyclic layout and the ranks
 * factorise it together (pdpotrf; pdpotrs for alpha and for the condition
 * estimate; pdtrtri for leave-one-out). Each rank reads only the store
 * tiles that hold its blocks; the test x train block is never held whole.
 * See src/solve/solve_method.h and docs/SOLVE.md ("Beyond one node's
 * memory").
 *
 * Layout: a P_r x P_c BLACS grid in row-major rank order (rank 0 is
 * process (0, 0)) and square blocks of nb x nb that divide the store's
 * tile edge, so a tile is a whole number of blocks. The local matrix is
 * column-major with leading dimension lld = max(1, local rows).
 *
 * Per ridge: the lower triangle (column-major) is factorised (above
 * PANEL_MIN_N in panels, with progress lines and stop points between
 * them); the strictly upper one keeps the kernel, from which the lower one
 * is restored for the next ridge (a distributed transpose, pdtran, one
 * block column at a time), the diagonal from a saved copy. After the last
 * ridge, one pass over the test x train tiles predicts every ridge. */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "base/cpuinit.h"
#include "base/clock.h"
#include "base/signals.h"
#include "solve/solve.h"
#include "solve/solve_method.h"

/* The grid comes from the job's communicator (ntk_comm_blacs_grid,
 * comm_mpi.c). */
void Cblacs_gridinfo(int context, int *nprow, int *npcol, int *myrow, int *mycol);

/* ScaLAPACK, Fortran (32-bit integers; the trailing size_t are the hidden
 * lengths of the character arguments). */
void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb, const int *irsrc,
               const int *icsrc, const int *ictxt, const int *lld, int *info);
void pdpotrf_(const char *uplo, const int *n, double *a, const int *ia, const int *ja, const int *desca, int *info,
              size_t);
void pdpotrs_(const char *uplo, const int *n, const int *nrhs, const double *a, const int *ia, const int *ja,
              const int *desca, double *b, const int *ib, const int *jb, const int *descb, int *info, size_t);
double pdlansy_(const char *norm, const char *uplo, const int *n, const double *a, const int *ia, const int *ja,
                const int *desca, double *work, size_t, size_t);
void pdtrtri_(const char *uplo, const char *diag, const int *n, double *a, const int *ia, const int *ja,
              const int *desca, int *info, size_t, size_t);
/* PBLAS, written in C: no hidden lengths. */
void pdtrsm_(const char *side, const char *uplo, const char *transa, const char *diag, const int *m, const int *n,
             const double *alpha, const double *a, const int *ia, const int *ja, const int *desca, double *b,
             const int *ib, const int *jb, const int *descb);
void pdsyrk_(const char *uplo, const char *trans, const int *n, const int *k, const double *alpha, const double *a,
             const int *ia, const int *ja, const int *desca, const double *beta, double *c, const int *ic,
             const int *jc, const int *descc);
void pdtran_(const int *m, const int *n, const double *alpha, const double *a, const int *ia, const int *ja,
             const int *desca, const double *beta, double *c, const int *ic, const int *jc, const int *descc);

/* Above this many train samples the factorisation runs in panels with a
 * progress line (pdpotrf itself is one call); below, plain pdpotrf. */
#define PANEL_MIN_N 8192
#define PANELS 16          /* about this many panels */
#define PROGRESS_EVERY 10.0 /* seconds between progress lines */
/* ScaLAPACK indexes local arrays with 32-bit integers. */
#define LOCAL_MAX ((size_t)1 << 31)

/* Rows (or columns) of an n-vector in blocks of nb that process `p` of
 * `np` holds, the first block on process 0 (ScaLAPACK's NUMROC). */
static size_t nloc(size_t n, size_t nb, int p, int np) {
  size_t blocks = n / nb, have = blocks / (size_t)np * nb, extra = blocks % (size_t)np;
  if ((size_t)p < extra) have += nb;
  else if ((size_t)p == extra) have += n % nb;
  return have;
}
static int owner(size_t g, size_t nb, int np) { return (int)(g / nb % (size_t)np); }
static size_t g2l(size_t g, size_t nb, int np) { return g / (nb * (size_t)np) * nb + g % nb; }
static size_t l2g(size_t l, size_t nb, int me, int np) { return (l / nb * (size_t)np + (size_t)me) * nb + l % nb; }
/* The first local index of process `me` whose global index is >= g. */
static size_t first_local(size_t g, size_t nb, int me, int np) {
  size_t b = g / nb, o = b % (size_t)np;
  if (o == (size_t)me) return g2l(g, nb, np);
  b = b - o + (size_t)me + (o < (size_t)me ? 0 : (size_t)np); /* my next block after g's */
  return b / (size_t)np * nb;
}

/* As square as P allows, rows <= columns (4: 2 x 2, 6: 2 x 3, 2: 1 x 2). */
static void square_grid(int P, int *rows, int *cols) {
  int r = 1;
  for (int d = 1; (long)d * d <= P; d++)
    if (P % d == 0) r = d;
  *rows = r, *cols = P / r;
}

/* The default block: the largest divisor of the tile edge up to 256 (256
 * for the default tile of 1024). */
static size_t default_block(size_t tile) {
  size_t b = tile < 256 ? tile : 256;
  while (tile % b) b--;
  return b;
}

ntk_status ntk_scalapack_block(size_t block, size_t tile, size_t *nb) {
  *nb = block ? block : default_block(tile);
  if (tile % *nb == 0) return NTK_OK;
  return ntk_error(NTK_EINPUT, "[solve] block = %zu does not divide the store's tile edge %zu: ScaLAPACK's blocks "
                   "must tile the store's tiles (a divisor of %zu such as %zu, or leave block out)", *nb, tile, tile,
                   default_block(tile));
}

/* Elements of the largest local matrix (process (0, 0) has the most). */
static size_t local_elems(size_t n, size_t nb, int pr, int pc) {
  size_t r = nloc(n, nb, 0, pr), c = nloc(n, nb, 0, pc);
  return (r ? r : 1) * c;
}

/* The fewest ranks (with the as-square-as-possible grid) whose local
 * matrices stay below 2^31 elements. */
static long min_ranks(size_t n, size_t nb) {
  for (long P = 1; P <= INT_MAX; P++) {
    int r, c;
    square_grid((int)P, &r, &c);
    if (local_elems(n, nb, r, c) < LOCAL_MAX) return P;
  }
  return -1;
}

size_t ntk_solve_scalapack_bytes(size_t ntr, size_t nte, size_t classes, int nranks) {
  int P = nranks > 0 ? nranks : 1, r, c;
  square_grid(P, &r, &c);
  /* The local matrix with the default block of the default tile, the
   * right-hand sides, every ridge's alpha (gathered on every rank), the
   * test predictions of every ridge, vectors of n, and the tile buffers
   * (three tiles of 1024^2 float64). */
  size_t nb = 256, lr = nloc(ntr, nb, 0, r), lc = nloc(ntr, nb, 0, c);
  return 8 * ((lr ? lr : 1) * lc + lr * nloc(classes, nb, 0, c) + ntr * classes * (NTK_MAX_RIDGES + 1) +
              nte * classes * NTK_MAX_RIDGES + 4 * ntr + 3 * 1024 * 1024);
}

/* The distributed train matrix and what goes with it. */
struct dist {
  const ntk_comm_t *comm;
  int ctxt, pr, pc, myr, myc, rank;
  size_t n, nb, locr, locc, lld;
  int desc[9];
  double *a; /* lld x locc, column-major */
};

#define AT(d, lr, lc) ((d)->a[(lr) + (lc) * (d)->lld])

/* Collective: the worst of the ranks' statuses. A failure seen by one rank
 * is printed by it (ranks other than 0; rank 0's message is returned to
 * the driver); the others return the same status saying so. */
static ntk_status agree_all(const ntk_comm_t *comm, ntk_status st) {
  int rank = ntk_comm_rank(comm);
  /* A status without a message of its own is printed by its name, never
   * as an empty (or an older, unrelated) line. */
  if (st && rank != 0)
    fprintf(stderr, "ntkd: rank %d: %s\n", rank, *ntk_error_message() ? ntk_error_message() : ntk_status_str(st));
  ntk_status all = ntk_comm_agree(comm, st);
  if (all && !st) ntk_error(all, "the ScaLAPACK solve stopped: another rank failed (its message is above)");
  return all;
}

/* Test settings (environment; never set them in production):
 *   NTKD_TEST_SCALAPACK_PANEL=W  factorise in panels of W columns (rounded
 *                                up to whole blocks) at any n, with a
 *                                progress line per panel; "off": plain
 *                                pdpotrf at any n;
 *   NTKD_TEST_SCALAPACK_STOP=R:K rank R raises SIGTERM at its K-th stop
 *                                point (between ridges and panels);
 *                                R:K:KILL SIGKILL (no clean-up runs). */
static long test_panel, test_stop_rank = -1, test_stop_at;
static int test_stop_sig = SIGTERM;

static void read_test_settings(int rank) {
  const char *v = getenv("NTKD_TEST_SCALAPACK_PANEL");
  test_panel = v ? (strcmp(v, "off") ? atol(v) : -1) : 0;
  v = getenv("NTKD_TEST_SCALAPACK_STOP");
  if (!v || sscanf(v, "%ld:%ld", &test_stop_rank, &test_stop_at) != 2) test_stop_rank = -1;
  if (v && strstr(v, ":KILL")) test_stop_sig = SIGKILL;
  const char *names[] = {"NTKD_TEST_SCALAPACK_PANEL", "NTKD_TEST_SCALAPACK_STOP"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (rank == 0 && getenv(names[i])) fprintf(stderr, "ntkd: test setting %s=%s\n", names[i], getenv(names[i]));
}

/* Collective: NTK_EINTERRUPTED on every rank if any has a stop signal. */
static ntk_status stop_point(const struct ntk_solve_problem *p) {
  static long count;
  if (test_stop_rank == p->rank && ++count == test_stop_at) raise(test_stop_sig);
  /* The rank with the signal says so itself: it passed a bare status, and
   * agree_all printed an empty "ntkd: rank 1:" line. */
  int sig = ntk_stop_requested();
  ntk_status st = agree_all(p->comm, sig ? ntk_error(NTK_EINTERRUPTED, "stopped by a signal (%s)", strsignal(sig)) : NTK_OK);
  if (st == NTK_EINTERRUPTED)
    return ntk_error(st, "interrupted during the solve (the store is complete): %sntkd solve %s JOB.conf solves again",
                     p->nranks > 1 ? "mpirun " : "", p->store_path);
  return st;
}

/* Does process `me` of `np` hold any block of [g0, g1)? */
static int holds(size_t g0, size_t g1, size_t nb, int me, int np) {
  if (g1 <= g0) return 0;
  if ((g1 - 1) / nb - g0 / nb + 1 >= (size_t)np) return 1;
  for (size_t b = g0 / nb; b <= (g1 - 1) / nb; b++)
    if ((int)(b % (size_t)np) == me) return 1;
  return 0;
}

/* Each rank's blocks of the train x train block, read tile by tile: a
 * stored tile (I >= J) is read when the rank holds a block of it or of
 * its transpose, and each tile is read once. */
static ntk_status read_train(const struct ntk_solve_problem *p, struct dist *d) {
  size_t n = d->n, nb = d->nb, T = ntk_store_get_info(p->store)->tile, edge = T < n ? T : n;
  double *buf = malloc(edge * edge * sizeof *buf + 1);
  if (!buf) return ntk_error(NTK_ENOMEM, "out of memory for a tile");
  ntk_status st = NTK_OK;
  for (size_t TI = 0; TI * T < n && !st; TI++)
    for (size_t TJ = 0; TJ <= TI && !st; TJ++) {
      size_t r0 = TI * T, r1 = r0 + T < n ? r0 + T : n, c0 = TJ * T, c1 = c0 + T < n ? c0 + T : n, ld = c1 - c0;
      int direct = holds(r0, r1, nb, d->myr, d->pr) && holds(c0, c1, nb, d->myc, d->pc);
      int trans = TI != TJ && holds(c0, c1, nb, d->myr, d->pr) && holds(r0, r1, nb, d->myc, d->pc);
      if (!direct && !trans) continue;
      if ((st = ntk_solve_read_block(p->store, p->which, r0, r1, c0, c1, buf, ld))) break;
      /* (i, j) of the tile to A(i, j) and, off the diagonal, to A(j, i):
       * whole blocks, since nb divides T. */
      for (size_t bj = c0; bj < c1; bj += nb)
        for (size_t bi = r0; bi < r1; bi += nb) {
          size_t ei = bi + nb < r1 ? bi + nb : r1, ej = bj + nb < c1 ? bj + nb : c1;
          if (direct && owner(bi, nb, d->pr) == d->myr && owner(bj, nb, d->pc) == d->myc) {
            size_t li = g2l(bi, nb, d->pr), lj = g2l(bj, nb, d->pc);
            for (size_t j = bj; j < ej; j++)
              for (size_t i = bi; i < ei; i++) AT(d, li + i - bi, lj + j - bj) = buf[(i - r0) * ld + (j - c0)];
          }
          if (trans && owner(bj, nb, d->pr) == d->myr && owner(bi, nb, d->pc) == d->myc) {
            size_t li = g2l(bj, nb, d->pr), lj = g2l(bi, nb, d->pc);
            for (size_t i = bi; i < ei; i++)
              for (size_t j = bj; j < ej; j++) AT(d, li + j - bj, lj + i - bi) = buf[(i - r0) * ld + (j - c0)];
          }
        }
    }
  free(buf);
  return st;
}

/* Set the diagonal this rank holds to diag + reg. */
static void set_diagonal(struct dist *d, const double *diag, double reg) {
  for (size_t i = 0; i < d->n; i += d->nb)
    if (owner(i, d->nb, d->pr) == d->myr && owner(i, d->nb, d->pc) == d->myc) {
      size_t li = g2l(i, d->nb, d->pr), lj = g2l(i, d->nb, d->pc), e = i + d->nb < d->n ? i + d->nb : d->n;
      for (size_t k = 0; k < e - i; k++) AT(d, li + k, lj + k) = diag[i + k] + reg;
    }
}

/* Collective: the lower triangle from the strictly upper one, which the
 * factorisation, the triangular inverse and the trailing updates never
 * touch, and the diagonal from `diag`. Below each diagonal block, a
 * distributed transpose of the block row to its right; the diagonal block
 * (one process's) locally. */
static void restore(struct dist *d, const double *diag) {
  const double one = 1, zero = 0;
  for (size_t j0 = 0; j0 < d->n; j0 += d->nb) {
    size_t w = d->nb < d->n - j0 ? d->nb : d->n - j0, j1 = j0 + w;
    if (j1 < d->n) {
      int m = (int)(d->n - j1), wn = (int)w, ia = (int)j0 + 1, ja = (int)j1 + 1;
      /* A(j1:n, j0:j1) = A(j0:j1, j1:n)^T: disjoint parts of one matrix */
      pdtran_(&m, &wn, &one, d->a, &ia, &ja, d->desc, &zero, d->a, &ja, &ia, d->desc);
    }
    if (owner(j0, d->nb, d->pr) == d->myr && owner(j0, d->nb, d->pc) == d->myc) {
      size_t li = g2l(j0, d->nb, d->pr), lj = g2l(j0, d->nb, d->pc);
      for (size_t c = 0; c < w; c++) {
        AT(d, li + c, lj + c) = diag[j0 + c];
        for (size_t r = c + 1; r < w; r++) AT(d, li + r, lj + c) = AT(d, li + c, lj + r);
      }
    }
  }
}

/* Panel width for the factorisation with progress: 0 for plain pdpotrf. */
static size_t panel_width(size_t n, size_t nb, int *every_panel) {
  *every_panel = test_panel > 0;
  if (test_panel > 0) return ((size_t)test_panel + nb - 1) / nb * nb;
  if (test_panel < 0 || n <= PANEL_MIN_N) return 0;
  return (n / PANELS + nb - 1) / nb * nb;
}

/* Collective: the Cholesky factor of the lower triangle in place; *info as
 * pdpotrf's (> 0: the leading minor of that order is not positive
 * definite). Large n: right-looking in panels of width w with ScaLAPACK's
 * own pieces (pdpotrf on the diagonal panel, pdtrsm below it, pdsyrk on
 * the trailing matrix), a stop point and a progress line between panels. */
static ntk_status factor(const struct ntk_solve_problem *p, struct dist *d, double ridge, int *info) {
  int every_panel, n = (int)d->n, one_i = 1;
  size_t w = panel_width(d->n, d->nb, &every_panel);
  *info = 0;
  if (!w || w >= d->n) {
    pdpotrf_("L", &n, d->a, &one_i, &one_i, d->desc, info, 1);
    return NTK_OK;
  }
  const double one = 1, mone = -1;
  double t0 = ntk_now(), last = t0;
  ntk_status st = NTK_OK;
  for (size_t j0 = 0; j0 < d->n && !st && !*info; j0 += w) {
    if ((st = stop_point(p))) break;
    int jw = (int)(w < d->n - j0 ? w : d->n - j0), ia = (int)j0 + 1, ib = ia + jw, m = n - ib + 1, pinfo = 0;
    pdpotrf_("L", &jw, d->a, &ia, &ia, d->desc, &pinfo, 1);
    if (pinfo) { /* global, as pdpotrf's */
      *info = pinfo > 0 ? (int)j0 + pinfo : pinfo;
      break;
    }
    if (m > 0) {
      pdtrsm_("R", "L", "T", "N", &m, &jw, &one, d->a, &ia, &ia, d->desc, d->a, &ib, &ia, d->desc);
      pdsyrk_("L", "N", &m, &jw, &mone, d->a, &ib, &ia, d->desc, &one, d->a, &ib, &ib, d->desc);
    }
    double now = ntk_now(), left = (double)m / (double)n, done = 1 - left * left * left;
    if (p->rank == 0 && m > 0 && (every_panel || now - last >= PROGRESS_EVERY)) {
      fprintf(stderr, "ntkd: solve: %s ridge %g: Cholesky %.0f%% (%.1f s, ETA %.0f s)\n",
              ntk_solve_kernel_name(p->which), ridge, 100 * done, now - t0, (now - t0) * (1 - done) / done);
      last = now;
    }
  }
  return st;
}

/* Collective: x (n, on every rank) becomes (L L^T)^-1 x, by pdpotrs on the
 * first column of the right-hand sides `b` (descriptor descb). */
static ntk_status apply_inverse(struct dist *d, double *b, const int *descb, double *x) {
  int n = (int)d->n, one = 1, info = 0;
  if (d->myc == 0)
    for (size_t li = 0; li < d->locr; li++) b[li] = x[l2g(li, d->nb, d->myr, d->pr)];
  pdpotrs_("L", &n, &one, d->a, &one, &one, d->desc, b, &one, &one, descb, &info, 1);
  if (info) return ntk_error(NTK_EINTERNAL, "pdpotrs: argument %d is invalid", -info);
  memset(x, 0, d->n * sizeof *x);
  if (d->myc == 0)
    for (size_t li = 0; li < d->locr; li++) x[l2g(li, d->nb, d->myr, d->pr)] = b[li];
  return agree_all(d->comm, ntk_comm_sum_doubles(d->comm, x, d->n)); /* each entry from one rank: exact, the same everywhere */
}

struct probe_ctx {
  struct dist *d;
  double *b;
  const int *descb;
};
static ntk_status probe_apply(void *ctx, double *x) {
  struct probe_ctx *pc = ctx;
  return apply_inverse(pc->d, pc->b, pc->descb, x);
}

/* Collective: the reciprocal condition number in the 1-norm, 1 / (anorm *
 * est), with est Higham's estimate of ||(L L^T)^-1||_1 (ACM TOMS 14(4),
 * 1988; the algorithm of LAPACK's dlacn2 behind dpocon, which the lapack
 * method uses), its products by pdpotrs. Not pdpocon: its estimator
 * (pdlacon, ScaLAPACK 2.2.1) restarts its running estimate from the
 * caller's, still 0, at every step, and so returns only the final
 * alternating-vector estimate, 37 times below the true norm on a 3000-sample
 * NNGP kernel where dpocon's was exact. The vectors are on every rank,
 * identical, so every rank takes the same branches. */
static ntk_status condition(struct dist *d, double *b, const int *descb, double anorm, double *rcond) {
  size_t n = d->n;
  double *x = malloc(n * sizeof *x + 1);
  int *sgn = malloc(n * sizeof *sgn + 1);
  ntk_status st = agree_all(d->comm, x && sgn ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory"));
  double est = 0;
  *rcond = 0;
  if (!st) {
    for (size_t i = 0; i < n; i++) x[i] = 1.0 / (double)n;
    st = apply_inverse(d, b, descb, x);
  }
  if (!st && n == 1) est = fabs(x[0]);
  else if (!st) {
    est = ntk_solve_sum_abs(x, n);
    for (size_t i = 0; i < n; i++) sgn[i] = x[i] >= 0 ? 1 : -1, x[i] = sgn[i];
    st = apply_inverse(d, b, descb, x); /* the transpose: the same, symmetric */
    size_t j = 0;
    for (size_t i = 1; i < n && !st; i++)
      if (fabs(x[i]) > fabs(x[j])) j = i;
    for (int iter = 2; !st; iter++) {
      memset(x, 0, n * sizeof *x);
      x[j] = 1;
      if ((st = apply_inverse(d, b, descb, x))) break;
      double old = est;
      est = ntk_solve_sum_abs(x, n);
      int changed = 0;
      for (size_t i = 0; i < n && !changed; i++) changed = (x[i] >= 0 ? 1 : -1) != sgn[i];
      if (!changed || est <= old) break; /* a repeated sign vector, or no growth */
      for (size_t i = 0; i < n; i++) sgn[i] = x[i] >= 0 ? 1 : -1, x[i] = sgn[i];
      if ((st = apply_inverse(d, b, descb, x))) break;
      size_t last = j;
      j = 0;
      for (size_t i = 1; i < n; i++)
        if (fabs(x[i]) > fabs(x[j])) j = i;
      if (x[last] == fabs(x[j]) || iter >= 5) break;
    }
    if (!st) { /* the alternating vector, for matrices that fool the iteration */
      for (size_t i = 0; i < n; i++) x[i] = (i % 2 ? -1.0 : 1.0) * (1 + (double)i / (double)(n - 1));
      st = apply_inverse(d, b, descb, x);
      double alt = 2 * ntk_solve_sum_abs(x, n) / (double)(3 * n);
      if (!st && alt > est) est = alt;
    }
  }
  if (!st) { /* and inverse iteration's look (solve_method.h), as the lapack method */
    struct probe_ctx pc = {d, b, descb};
    st = ntk_solve_inverse_probe(probe_apply, &pc, n, x, &est);
  }
  if (!st && est > 0 && anorm > 0) *rcond = 1 / est / anorm;
  free(x), free(sgn);
  return st;
}

/* Collective: the 1-norm of the symmetric matrix (lower triangle). */
static ntk_status norm1(struct dist *d, double *anorm) {
  int n = (int)d->n, one_i = 1;
  double *work = malloc((2 * d->locc + 2 * d->locr + d->nb + 64) * sizeof *work);
  ntk_status st = agree_all(d->comm, work ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory"));
  if (!st) *anorm = pdlansy_("1", "L", &n, d->a, &one_i, &one_i, d->desc, work, 1, 1);
  free(work);
  return st;
}

ntk_status ntk_scalapack_grid(int rows, int cols, int nranks, int *pr, int *pc) {
  *pr = rows, *pc = cols;
  if (!rows && !cols) square_grid(nranks, pr, pc);
  if ((long)*pr * *pc == nranks) return NTK_OK;
  int sr, sc;
  square_grid(nranks, &sr, &sc);
  return ntk_error(NTK_EINPUT, "[solve] grid = %d x %d is %ld processes, but the job runs on %d rank%s: the grid must "
                   "use every rank (%d x %d, or leave grid out)", *pr, *pc, (long)*pr * *pc, nranks,
                   nranks == 1 ? "" : "s", sr, sc);
}

/* The block size and the process grid of the job, or the refusal (the
 * same on every rank, so no agreement is needed): not under mpirun, no
 * train samples, [solve] variance, a block that does not divide the tile,
 * a grid that does not use every rank, or shares beyond ScaLAPACK's
 * 32-bit local indexing. */
static ntk_status check_layout(const struct ntk_solve_problem *p, size_t *nb_out, int *pr_out, int *pc_out) {
  const struct ntk_store_info *in = ntk_store_get_info(p->store);
  const struct ntk_solve_opts *o = p->opts;
  size_t ntr = p->ntr, T = in->tile;
  int P = p->nranks;
  if (!ntk_comm_active())
    return ntk_error(NTK_EINPUT, "method = scalapack runs under mpirun (mpirun -np 1 for one process): "
                     "mpirun -np P ntkd solve %s JOB.conf", p->store_path);
  if (!ntr) return ntk_error(NTK_EINPUT, "%s holds no train samples to solve with", p->store_path);
  if (o->variance)
    return ntk_error(NTK_EINPUT, "[solve] variance is not computed by method = scalapack: use method = lapack, "
                     "or variance = no");
  size_t nb;
  ntk_status bst = ntk_scalapack_block(o->block, T, &nb);
  if (bst) return bst;
  int pr, pc;
  ntk_status gst = ntk_scalapack_grid(o->grid_rows, o->grid_cols, P, &pr, &pc);
  if (gst) return gst;
  if (ntr > INT_MAX / 2 || local_elems(ntr, nb, pr, pc) >= LOCAL_MAX) {
    long need = min_ranks(ntr, nb);
    return ntk_error(NTK_EINPUT, "%zu train samples on %d rank%s (grid %d x %d, block %zu): a rank's share of the "
                     "matrix, %zu x %zu, exceeds ScaLAPACK's 32-bit local indexing (2^31 elements); run on at "
                     "least %ld ranks (mpirun -np %ld)", ntr, P, P == 1 ? "" : "s", pr, pc, nb,
                     nloc(ntr, nb, 0, pr), nloc(ntr, nb, 0, pc), need, need);
  }
  *nb_out = nb, *pr_out = pr, *pc_out = pc;
  return NTK_OK;
}

/* What the ridges share besides the matrix: the right-hand sides b (the
 * one-hot labels, laid out as the matrix: locc_b local columns, descb),
 * the train block's diagonal, one ridge's alpha, the squared column norms
 * of L^-1 (colsq), and every ridge's alpha side by side (all: ntr x M,
 * M = ridges x classes), the last four on every rank. */
struct sl_work {
  double *b, *diag, *alpha, *all, *colsq;
  int descb[9];
  size_t locc_b, M;
};

/* Collective: this rank's place in the grid (d->ctxt set), its local
 * sizes and the descriptors, and its share of the matrix and of w
 * allocated. */
static ntk_status dist_layout(const struct ntk_solve_problem *p, struct dist *d, struct sl_work *w) {
  size_t ntr = d->n, nb = d->nb, classes = p->classes;
  int pr = d->pr, pc = d->pc;
  if (p->nranks > 1) ntk_cpu_single_thread(); /* the ranks share the cores */
  else ntk_cpu_all_threads();
  int gpr, gpc;
  Cblacs_gridinfo(d->ctxt, &gpr, &gpc, &d->myr, &d->myc);
  d->locr = nloc(ntr, nb, d->myr, pr), d->locc = nloc(ntr, nb, d->myc, pc);
  d->lld = d->locr ? d->locr : 1;
  w->locc_b = nloc(classes, nb, d->myc, pc), w->M = p->nridge * classes;
  int n_i = (int)ntr, nb_i = (int)nb, cl_i = (int)classes, zero_i = 0, lld_i = (int)d->lld, info = 0;
  descinit_(d->desc, &n_i, &n_i, &nb_i, &nb_i, &zero_i, &zero_i, &d->ctxt, &lld_i, &info);
  if (!info) descinit_(w->descb, &n_i, &cl_i, &nb_i, &nb_i, &zero_i, &zero_i, &d->ctxt, &lld_i, &info);
  ntk_status st = info ? ntk_error(NTK_EINTERNAL, "descinit: argument %d is invalid", -info) : NTK_OK;

  d->a = malloc(d->lld * d->locc * sizeof *d->a + 1);
  w->b = malloc(d->lld * w->locc_b * sizeof *w->b + 1), w->diag = malloc(ntr * sizeof *w->diag + 1);
  w->alpha = malloc(ntr * classes * sizeof *w->alpha + 1), w->all = calloc(ntr * w->M + 1, sizeof *w->all);
  w->colsq = malloc(ntr * sizeof *w->colsq + 1);
  if (!st && (!d->a || !w->b || !w->diag || !w->alpha || !w->all || !w->colsq))
    st = ntk_error(NTK_ENOMEM, "out of memory for this rank's %zu x %zu share of the %zu x %zu train kernel "
                   "(%.1f GB); more ranks need less each", d->locr, d->locc, ntr, ntr,
                   8.0 * (double)(d->lld * d->locc) / 1e9);
  return agree_all(p->comm, st);
}

/* Collective: the train block, each rank its own blocks; then its
 * diagonal on every rank (each entry from its one holder: exact), and the
 * trace summed in order, as the lapack method does. */
static ntk_status train_block(const struct ntk_solve_problem *p, struct dist *d, double *diag, double *trace) {
  size_t ntr = d->n, nb = d->nb;
  int pr = d->pr, pc = d->pc;
  double t0 = ntk_now();
  ntk_status st = agree_all(p->comm, read_train(p, d));
  if (!st && p->rank == 0)
    fprintf(stderr, "ntkd: solve: %s: read the %zu x %zu train block in %.2f s (ScaLAPACK grid %d x %d, block %zu)\n",
            ntk_solve_kernel_name(p->which), ntr, ntr, ntk_now() - t0, pr, pc, nb);
  if (st) return st;
  memset(diag, 0, ntr * sizeof *diag);
  for (size_t i = 0; i < ntr; i += nb)
    if (owner(i, nb, pr) == d->myr && owner(i, nb, pc) == d->myc)
      for (size_t k = i; k < ntr && k < i + nb; k++) diag[k] = AT(d, g2l(k, nb, pr), g2l(k, nb, pc));
  st = agree_all(p->comm, ntk_comm_sum_doubles(p->comm, diag, ntr));
  for (size_t i = 0; i < ntr && !st; i++) *trace += diag[i];
  return st;
}

/* Collective, after ridge r's factorisation: alpha = (K + reg I)^-1 Y for
 * all classes at once, then on every rank: into ro->alpha and its columns
 * of w->all. */
static ntk_status ridge_alpha(const struct ntk_solve_problem *p, struct dist *d, struct sl_work *w,
                              struct ntk_ridge_out *ro, size_t r) {
  size_t ntr = d->n, nb = d->nb, classes = p->classes, M = w->M;
  int pr = d->pr, pc = d->pc, n_i = (int)ntr, cl_i = (int)classes, one_i = 1, info = 0;
  ntk_status st;
  for (size_t lj = 0; lj < w->locc_b; lj++) {
    size_t k = l2g(lj, nb, d->myc, pc);
    for (size_t li = 0; li < d->locr; li++)
      w->b[li + lj * d->lld] = (size_t)p->ytr[l2g(li, nb, d->myr, pr)] == k ? 1.0 : 0.0;
  }
  pdpotrs_("L", &n_i, &cl_i, d->a, &one_i, &one_i, d->desc, w->b, &one_i, &one_i, w->descb, &info, 1);
  if (info) return ntk_error(NTK_EINTERNAL, "pdpotrs: argument %d is invalid", -info);
  memset(w->alpha, 0, ntr * classes * sizeof *w->alpha);
  for (size_t lj = 0; lj < w->locc_b; lj++)
    for (size_t li = 0; li < d->locr; li++)
      w->alpha[l2g(li, nb, d->myr, pr) * classes + l2g(lj, nb, d->myc, pc)] = w->b[li + lj * d->lld];
  if ((st = agree_all(p->comm, ntk_comm_sum_doubles(p->comm, w->alpha, ntr * classes)))) return st;
  for (size_t i = 0; i < ntr; i++)
    memcpy(w->all + i * M + r * classes, w->alpha + i * classes, classes * sizeof *w->all);
  if (ro->alpha) memcpy(ro->alpha, w->alpha, ntr * classes * sizeof *w->alpha);
  return NTK_OK;
}

/* Collective, after ridge r's factorisation: diag((L L^T)^-1), the squared
 * column norms of L^-1, the inverse in place of the factor (no longer
 * needed; the upper triangle stays), into ro->diag_inv for leave-one-out.
 * *t_loo: the seconds it took. */
static ntk_status ridge_loo(const struct ntk_solve_problem *p, struct dist *d, struct sl_work *w,
                            struct ntk_ridge_out *ro, double *t_loo) {
  size_t ntr = d->n, nb = d->nb;
  int pr = d->pr, pc = d->pc, n_i = (int)ntr, one_i = 1, info = 0;
  ntk_status st;
  double t = ntk_now();
  pdtrtri_("L", "N", &n_i, d->a, &one_i, &one_i, d->desc, &info, 1, 1);
  if (info) return ntk_error(NTK_EINTERNAL, "pdtrtri: info %d after a successful Cholesky", info);
  memset(w->colsq, 0, ntr * sizeof *w->colsq);
  for (size_t lj = 0; lj < d->locc; lj++) {
    size_t j = l2g(lj, nb, d->myc, pc);
    double s = 0;
    for (size_t li = first_local(j, nb, d->myr, pr); li < d->locr; li++) s += AT(d, li, lj) * AT(d, li, lj);
    w->colsq[j] = s;
  }
  if ((st = agree_all(p->comm, ntk_comm_sum_doubles(p->comm, w->colsq, ntr)))) return st;
  if (ro->diag_inv) memcpy(ro->diag_inv, w->colsq, ntr * sizeof *w->colsq);
  *t_loo = ntk_now() - t;
  return NTK_OK;
}

/* Collective: ridge r: the shift on the diagonal, the Cholesky factor,
 * the condition estimate and the verdict; if it stands, alpha and (with
 * want_loo) leave-one-out; then the matrix restored for the next ridge. */
static ntk_status solve_ridge(const struct ntk_solve_problem *p, struct dist *d, struct sl_work *w,
                              struct ntk_ridge_out *out, size_t r, double trace, int want_loo) {
  size_t ntr = d->n;
  const char *kn = ntk_solve_kernel_name(p->which);
  int info = 0;
  ntk_status st;
  if ((st = stop_point(p))) return st;
  struct ntk_ridge_out *ro = &out[r];
  ro->reg = p->ridge[r] * (trace / (double)ntr);
  ro->rcond = 0, ro->iterations = 0, ro->residual = 0, ro->failure = NTK_RIDGE_OK, ro->why[0] = '\0';
  double t_start = ntk_now(), t_fact, t_cond = 0, t_loo = 0, anorm = 0;
  set_diagonal(d, w->diag, ro->reg);
  if ((st = norm1(d, &anorm))) return st;
  t_fact = ntk_now();
  if ((st = factor(p, d, p->ridge[r], &info))) return st;
  t_fact = ntk_now() - t_fact;
  if (info < 0) return ntk_error(NTK_EINTERNAL, "pdpotrf: argument %d is invalid", -info);
  if (info == 0) {
    t_cond = ntk_now();
    if ((st = condition(d, w->b, w->descb, anorm, &ro->rcond))) return st;
    t_cond = ntk_now() - t_cond;
  }
  if (ntk_solve_ridge_verdict(ro, kn, p->ridge[r], info, ntr)) {
    if ((st = ridge_alpha(p, d, w, ro, r))) return st;
    if (want_loo && (st = ridge_loo(p, d, w, ro, &t_loo))) return st;
  }
  double t_restore = ntk_now();
  if (r + 1 < p->nridge) restore(d, w->diag);
  t_restore = ntk_now() - t_restore;
  if (p->rank == 0 && ntr >= PANEL_MIN_N)
    fprintf(stderr, "ntkd: solve: %s ridge %g: Cholesky %.2f s (%.1f GFLOP/s), condition estimate %.2f s, "
            "leave-one-out %.2f s, restore %.2f s, ridge total %.2f s\n", kn, p->ridge[r], t_fact,
            (double)ntr * (double)ntr * (double)ntr / 3 / t_fact / 1e9, t_cond, t_loo, t_restore,
            ntk_now() - t_start);
  return NTK_OK;
}

/* Collective: the predictions of every solved ridge at once: the test x
 * train tiles dealt round-robin to the ranks, each times its rows of
 * alpha (all, ntr x M), summed over the ranks; into out[r].pred. */
static ntk_status predict(const struct ntk_solve_problem *p, struct ntk_ridge_out *out, const double *all, size_t M) {
  const struct ntk_store_info *in = ntk_store_get_info(p->store);
  size_t ntr = p->ntr, nte = p->nte, classes = p->classes, T = in->tile;
  double *pred = calloc(nte * M + 1, sizeof *pred);
  size_t edge = T < ntr + nte ? T : ntr + nte;
  double *buf = malloc(edge * edge * sizeof *buf + 1);
  ntk_status st = pred && buf ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory for the predictions");
  size_t k = 0;
  for (size_t TI = ntr / T; TI * T < ntr + nte && !st; TI++)
    for (size_t TJ = 0; TJ * T < ntr && !st; TJ++) {
      if (k++ % (size_t)p->nranks != (size_t)p->rank) continue;
      size_t r0 = TI * T > ntr ? TI * T : ntr, r1 = (TI + 1) * T < ntr + nte ? (TI + 1) * T : ntr + nte;
      size_t c0 = TJ * T, c1 = (TJ + 1) * T < ntr ? (TJ + 1) * T : ntr;
      if (r0 >= r1) continue;
      if ((st = ntk_solve_read_block(p->store, p->which, r0, r1, c0, c1, buf, c1 - c0))) break;
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(r1 - r0), (int)M, (int)(c1 - c0), 1.0, buf,
                  (int)(c1 - c0), all + c0 * M, (int)M, 1.0, pred + (r0 - ntr) * M, (int)M);
    }
  free(buf);
  st = agree_all(p->comm, st);
  if (!st) st = agree_all(p->comm, ntk_comm_sum_doubles(p->comm, pred, nte * M));
  for (size_t r = 0; r < p->nridge && !st; r++)
    if (out[r].pred && !out[r].failure)
      for (size_t i = 0; i < nte; i++) memcpy(out[r].pred + i * classes, pred + i * M + r * classes,
                                              classes * sizeof *pred);
  free(pred);
  return st;
}

ntk_status ntk_solve_scalapack(const struct ntk_solve_problem *p, struct ntk_ridge_out *out) {
  size_t nb = 0;
  int pr = 0, pc = 0;
  ntk_status st = check_layout(p, &nb, &pr, &pc);
  if (st) return st;
  read_test_settings(p->rank);
  struct dist D = {0}, *d = &D;
  d->pr = pr, d->pc = pc, d->n = p->ntr, d->nb = nb, d->rank = p->rank, d->comm = p->comm;
  struct ntk_blacs_grid grid;
  ntk_status mine = ntk_comm_blacs_grid(p->comm, pr, pc, &grid), gst = agree_all(p->comm, mine);
  if (gst) {
    if (!mine) ntk_comm_blacs_free(&grid); /* another rank's failed */
    return gst;
  }
  d->ctxt = grid.ctxt;
  struct sl_work w = {0};
  st = dist_layout(p, d, &w);
  double trace = 0;
  if (!st) st = train_block(p, d, w.diag, &trace);
  /* Leave-one-out as rank 0's arrays say (the driver allocates them). */
  int32_t want_loo = p->rank == 0 && p->opts->loo && p->nridge && out[0].diag_inv;
  if (!st) st = agree_all(p->comm, ntk_comm_bcast(p->comm, &want_loo, sizeof want_loo));
  for (size_t r = 0; r < p->nridge && !st; r++) st = solve_ridge(p, d, &w, out, r, trace, want_loo);
  free(w.colsq), free(w.alpha), free(w.b), free(d->a);
  d->a = NULL;
  if (!st && p->nte) st = predict(p, out, w.all, w.M);
  free(w.all), free(w.diag);
  ntk_comm_blacs_free(&grid);
  ntk_cpu_single_thread();
  return st;
}
