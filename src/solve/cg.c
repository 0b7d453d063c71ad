/* The cg method (src/solve/solve_method.h, docs/SOLVE.md "n beyond
 * memory: conjugate gradients"): kernel regression without ever forming
 * the n x n matrix. Every rank takes part.
 *
 * - The train kernel K: the store's lower-triangle tiles are dealt to the
 *   ranks (greedy, by work); a rank applies its tiles T as T x and T^T x
 *   (a diagonal tile, full and symmetric, once) and the ranks' products
 *   are summed. cg_kernel = memory: each rank holds its tiles' train part
 *   in the store's precision (float32 or float64), decompressed once;
 *   stream: each product reads and decompresses them from the store again.
 *   Products accumulate in float64: a float32 tile's values are taken to
 *   float64 as they are read (src/solve/skinny.c, ntk_skinny_tile64: one
 *   pass over the tile; OpenBLAS's dgemm on converted rows beyond its
 *   columns), so CG solves exactly the matrix the Cholesky methods
 *   factorise.
 * - cg_products = float32 (the default for float32 tiles): the iterations'
 *   products K D run in float32 (src/solve/skinny.c: one pass over each
 *   held tile at the usual 8-48 columns, sgemm otherwise; each tile's
 *   result added in float64), twice the flops per second and no
 *   conversion. Their rounding (about eps32 |K| |P|, far above the 1e-8
 *   tolerance) makes the recurrence's residual drift from the truth, so
 *   a column's true residual B - (K + reg) X is computed with a float64
 *   product whenever its residual fell by CG_REFRESH since the last one,
 *   when it reaches the tolerance and at max_iterations, and replaces the
 *   recurrence's (a "reliable update": X and the direction P are kept, so
 *   the Krylov space is not lost as a restart would lose it). A column
 *   stops only on a true residual at most the tolerance.
 * - Every rank holds the full vectors (n x columns doubles); the columns
 *   are all (ridge, class) pairs, each with its own shift reg_r, one
 *   product K D per iteration for the directions of all columns still
 *   running. A ridge's classes share K + reg_r and run as one block
 *   (block CG, O'Leary 1980): its directions span all of its columns'
 *   preconditioned residuals, orthonormalised each step and with those
 *   that add almost nothing left out (Ji and Li's breakdown-free
 *   variant, 2017); each column's step minimises its error over them all
 *   (update_columns, new_directions).
 * - The preconditioner: a partial Cholesky factorisation of K with greedy
 *   pivoting on the residual diagonal, K ~ L L^T with L n x k, its rows
 *   spread over the ranks. The pivots come in batches: the BATCH largest
 *   residual diagonals are candidates, their kernel columns are read in
 *   one pass over the tiles, and they are taken greedily while each is at
 *   least ACCEPT times the largest residual outside the batch (so every
 *   pivot is within that factor of the greedy choice). For shift s the
 *   preconditioner (L L^T + s I)^-1 is applied by Woodbury,
 *   (r - L (s I + L^T L)^-1 L^T r) / s, s = reg plus the mean residual
 *   diagonal (what L L^T leaves out); the k x k inverse of each ridge is
 *   held by one rank (the ridges dealt round the ranks), which applies it
 *   to its ridge's columns.
 * - Decisions that steer collectives (which columns still run, the
 *   pivots) are made identically on every rank: from values that are
 *   exact sums (each summed entry has one contributor), or broadcast from
 *   rank 0.
 */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/codec.h"
#include "comm/comm.h"
#include "base/clock.h"
#include "base/signals.h"
#include "solve/solve_method.h"
#include "solve/skinny.h"
#include "base/tiling.h"

void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t);
void dpotri_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t);

/* Defaults (docs/SOLVE.md says why). */
#define CG_TOLERANCE 1e-8
#define CG_MAX_ITERATIONS 2000
#define CG_RANK_MAX 4000 /* default preconditioner rank: n / 4, at most this */
#ifndef CG_BATCH
#define CG_BATCH 128 /* pivot candidates per pass over the tiles */
#endif
#ifndef CG_ACCEPT
#define CG_ACCEPT 0.5
#endif
#ifndef CG_BLOCK_MAX
#define CG_BLOCK_MAX 32 /* classes per block, at most */
#endif
#ifndef CG_DROP
#define CG_DROP 1e-6 /* a block's direction adding less than this of its norm to those before it is left out */
#endif
#ifndef CG_PRINT_EVERY
#define CG_PRINT_EVERY 5.0 /* seconds between progress lines */
#endif
#define CG_RESTARTS 3      /* restarts from the true residual when the recurrence drifted */
#ifndef CG_REFRESH
#define CG_REFRESH 0.01 /* float32 products: the true residual again once a column's fell by this factor */
#endif

enum {
  COL_RUN = 0, COL_DONE = 1, COL_FAIL = 2,
  COL_REFRESH = 3, /* verdicts only: the true residual first, */
  COL_RESTART = 4  /* or (f32, a breakdown) float64 products from now on and a restart from the true residual */
};
/* WHY_DRIFT: the recurrence converged, but the true residual stayed above
 * the tolerance through CG_RESTARTS restarts from it (rounding), well
 * before max_iterations. */
enum { WHY_NONE = 0, WHY_MAXIT = 1, WHY_BREAKDOWN = 2, WHY_DRIFT = 3 };

struct cg_tile {
  uint64_t idx;
  size_t r0, rows, c0, cols; /* the block of the tile used (absolute indices) */
  int diag;                  /* a diagonal tile's train block: square, symmetric, applied once */
  double cost;
  void *v; /* memory mode: rows x cols values, compact; NULL when streamed */
};

struct cg {
  const struct ntk_solve_problem *p;
  ntk_store_t *s;
  int rank, nranks, memory;
  size_t n, nte, T, elem, classes, ncols;
  struct cg_tile *tr, *te; /* this rank's train and test tiles */
  size_t ntr_t, nte_t, all_tr_t;
  double tile_bytes;       /* this rank's held train values */
  ntk_codec_t *codec;
  char *raw, *val; /* stream scratch: a tile's payload and one kernel's values */
  int f32;         /* the iterations' products in float32 (float32 tiles): see run_cg */
  size_t bsize;    /* a ridge's classes run in blocks of this many (NTKD_TEST_CG_UNBLOCKED=1: 1) */
  double refresh;  /* f32: a column's true residual is recomputed once its residual fell by this factor */
  void *skinny; /* scratch of the skinny.h products */
  size_t lo, hi;   /* this rank's rows of the preconditioner */
  size_t m;        /* preconditioner rank */
  double *L;       /* (hi - lo) x m, row stride ldl: this rank's rows of the factor */
  size_t ldl;
  double *fac[NTK_MAX_RIDGES]; /* per ridge, on its owner (ridge_owner): (s I + L^T L)^-1, m x m */
  double rshift[NTK_MAX_RIDGES]; /* per ridge: preconditioner shift, 0: none */
  double *reg;     /* per column */
  double t0;
  double t_prod, t_comm, t_pre; /* time in products (local), their sums, and the preconditioner */
  double t_fresh;  /* f32: of t_prod, the float64 products for true residuals */
  size_t n_fresh;  /* f32: how many, and their columns */
  size_t c_fresh;
  size_t passes;   /* passes over the tiles for the preconditioner */
  double t_fac;    /* L^T L and its inverses */
  struct ntk_pace pace; /* the collectives: the longest stretch between two */
  int failure_agreed;   /* a failure was agreed: a status passed on after it is not a new one to print */
};

/* ---- helpers ---------------------------------------------------------- */

/* The stop's message: the store is complete, and what solves again. */
static ntk_status interrupted(const struct cg *c) {
  return ntk_error(NTK_EINTERRUPTED, "interrupted during the solve (the store is complete): %sntkd solve %s JOB.conf "
                   "solves again", c->nranks > 1 ? "mpirun " : "", c->p->store_path);
}

/* How long a collective may wait for the other ranks, and the end of one
 * (past the limit: the job ends, as agree below says). */
static double wait_limit(const struct cg *c) { return ntk_patience(c->p->rank_timeout, c->pace.slowest); }

static ntk_status synced(struct cg *c, ntk_status st, double limit) {
  if (st == NTK_ESTALLED) {
    fprintf(stderr, "ntkd: rank %d: %s, in the cg solve of %s (limit %.1f s: [compute] worker_timeout, at least 3x "
            "the longest stretch between two steps of the solve); ending the job: the store is complete: %sntkd solve "
            "%s JOB.conf solves again\n", c->rank, ntk_error_message(), ntk_solve_kernel_name(c->p->which), limit,
            c->nranks > 1 ? "mpirun " : "", c->p->store_path);
    ntk_comm_abort(ntk_status_exit_code(st)); /* the collective is still pending: no way back */
  }
  ntk_pace_mark(&c->pace, ntk_now());
  return st;
}

/* Collective: the worst status; a rank that is fine but stops for another
 * rank's failure gets a message saying so (the failing rank keeps its own).
 * A rank other than 0 prints its own failure ("ntkd: rank R: ..."), once
 * per solve: only rank 0's message reaches the driver, and a damaged tile
 * read by rank 1 was reported as "another rank failed" with no rank
 * naming the tile.
 * A rank waits for the others at most [compute] worker_timeout seconds
 * (agree, and sum and bcast below), and at least 3 times the longest
 * stretch between two collectives seen in this solve (the tiles' loading,
 * a pass of the preconditioner, an iteration): a rank that stops answering
 * (SIGSTOP, a hung node) would otherwise hold the others for ever. Then
 * the waiting ranks say so and end the job (exit 9); the store is
 * complete, and `ntkd solve` solves again. */
static ntk_status agree(struct cg *c, ntk_status local) {
  if (local && !c->failure_agreed && c->rank != 0)
    fprintf(stderr, "ntkd: rank %d: %s\n", c->rank, ntk_error_message());
  double limit = wait_limit(c);
  ntk_status st = synced(c, ntk_comm_agree_within(c->p->comm, local, limit), limit);
  if (st) c->failure_agreed = 1;
  if (st == NTK_EINTERRUPTED && local != NTK_EINTERRUPTED)
    interrupted(c);
  else if (st && !local)
    ntk_error(st, "the solve stopped: another rank failed (its message names it)");
  return st;
}

/* Collective sums and broadcasts, entered once every rank has arrived
 * (agree waits with sleeps): a rank that is early must not spin in the
 * blocking collective, taking a core from a rank still computing when
 * ranks outnumber cores (the usual mpirun -np 3 on 2 cores). */
static ntk_status sum_now(struct cg *c, double *buf, size_t n) { /* every rank is here: the sum itself */
  double limit = wait_limit(c);
  return agree(c, synced(c, ntk_comm_sum_doubles_within(c->p->comm, buf, n, limit), limit));
}

static ntk_status sum(struct cg *c, double *buf, size_t n) {
  ntk_status st = agree(c, NTK_OK);
  return st ? st : sum_now(c, buf, n);
}

static ntk_status bcast(struct cg *c, void *buf, size_t bytes) {
  ntk_status st = agree(c, NTK_OK);
  double limit = wait_limit(c);
  return st ? st : agree(c, synced(c, ntk_comm_bcast_within(c->p->comm, buf, bytes, limit), limit));
}

static ntk_status stop_check(const struct cg *c) { return ntk_stop_requested() ? interrupted(c) : NTK_OK; }

static ntk_status check_finite(const struct cg *c, const void *v, size_t rows, size_t cols, size_t ld, size_t r0,
                               size_t c0) {
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < cols; j++) {
      double x = c->elem == 4 ? (double)((const float *)v)[i * ld + j] : ((const double *)v)[i * ld + j];
      if (!isfinite(x))
        return ntk_error(NTK_EINPUT, "%s kernel entry (%zu, %zu) is %g: not a kernel that can be solved%s",
                         ntk_solve_kernel_name(c->p->which), r0 + i, c0 + j, x,
                         c->elem == 4 ? "; the kernel exceeds float32: recompute it with [compute] precision = "
                                        "float64"
                                      : "");
    }
  return NTK_OK;
}

/* ---- tiles ------------------------------------------------------------ */

/* Deal tiles to ranks: each to the rank with the least work so far, in
 * index order (the same on every rank). */
static void deal(struct cg_tile *t, size_t count, int nranks, int *owner) {
  double load[1024] = {0};
  double *ld = nranks <= 1024 ? load : calloc((size_t)nranks, sizeof *ld);
  for (size_t i = 0; i < count; i++) {
    int best = 0;
    if (ld)
      for (int r = 1; r < nranks; r++)
        if (ld[r] < ld[best]) best = r;
    owner[i] = ld ? best : (int)(i % (size_t)nranks);
    if (ld) ld[best] += t[i].cost;
  }
  if (ld != load) free(ld);
}

/* This rank's train tiles (train rows x train columns) and test tiles
 * (test rows x train columns). */
static ntk_status plan_tiles(struct cg *c) {
  const struct ntk_tiling *tg = ntk_store_tiling(c->s);
  size_t n = c->n, T = c->T, nb_tr = (n + T - 1) / T, nb = (size_t)tg->nb;
  size_t ctr = nb_tr * (nb_tr + 1) / 2, cte = 0;
  for (size_t bi = 0; bi < nb; bi++)
    if ((bi + 1) * T > n) cte += nb_tr < bi + 1 ? nb_tr : bi + 1;
  struct cg_tile *all = calloc(ctr + cte + 1, sizeof *all);
  int *own = malloc((ctr + cte + 1) * sizeof *own);
  if (!all || !own) {
    free(all), free(own);
    return ntk_error(NTK_ENOMEM, "out of memory");
  }
  size_t k = 0;
  for (size_t bi = 0; bi < nb_tr; bi++)
    for (size_t bj = 0; bj <= bi; bj++) {
      struct ntk_tile t = ntk_tiling_tile(tg, ntk_tiling_index(bi, bj));
      size_t r1 = t.r0 + t.rows < n ? t.r0 + t.rows : n, c1 = t.c0 + t.cols < n ? t.c0 + t.cols : n;
      all[k] = (struct cg_tile){t.index, t.r0, r1 - t.r0, t.c0, c1 - t.c0, bi == bj, 0, NULL};
      all[k].cost = (double)all[k].rows * (double)all[k].cols * (bi == bj ? 1.0 : 2.0);
      k++;
    }
  deal(all, ctr, c->nranks, own);
  size_t mine = 0;
  for (size_t i = 0; i < ctr; i++) mine += own[i] == c->rank;
  c->tr = calloc(mine + 1, sizeof *c->tr);
  c->all_tr_t = ctr;
  for (size_t i = 0; c->tr && i < ctr; i++)
    if (own[i] == c->rank) c->tr[c->ntr_t++] = all[i];
  size_t k0 = k;
  for (size_t bi = 0; bi < nb; bi++) {
    if ((bi + 1) * T <= n) continue;
    for (size_t bj = 0; bj <= bi && bj < nb_tr; bj++) {
      struct ntk_tile t = ntk_tiling_tile(tg, ntk_tiling_index(bi, bj));
      size_t r0 = t.r0 > n ? t.r0 : n, c1 = t.c0 + t.cols < n ? t.c0 + t.cols : n;
      all[k] = (struct cg_tile){t.index, r0, t.r0 + t.rows - r0, t.c0, c1 - t.c0, 0, 0, NULL};
      all[k].cost = (double)all[k].rows * (double)all[k].cols;
      k++;
    }
  }
  deal(all + k0, k - k0, c->nranks, own + k0);
  mine = 0;
  for (size_t i = k0; i < k; i++) mine += own[i] == c->rank;
  c->te = calloc(mine + 1, sizeof *c->te);
  for (size_t i = k0; c->te && i < k; i++)
    if (own[i] == c->rank) c->te[c->nte_t++] = all[i];
  free(all), free(own);
  if (!c->tr || !c->te) return ntk_error(NTK_ENOMEM, "out of memory");
  c->tile_bytes = 0;
  for (size_t i = 0; i < c->ntr_t; i++)
    c->tile_bytes += (double)c->tr[i].rows * (double)c->tr[i].cols * (double)c->elem;
  return NTK_OK;
}

/* A tile's used block: held (memory mode) or read and decompressed into
 * c->val. *ld: its row stride. */
static ntk_status tile_values(struct cg *c, const struct cg_tile *t, const void **v, size_t *ld) {
  if (t->v) {
    *v = t->v;
    *ld = t->cols;
    return NTK_OK;
  }
  struct ntk_tile g = ntk_tiling_tile(ntk_store_tiling(c->s), t->idx);
  ntk_status st = ntk_store_read_kernel(c->s, c->codec, t->idx, c->p->which, c->raw, c->val);
  if (st) return st;
  *ld = (size_t)g.cols;
  *v = c->val + ((t->r0 - (size_t)g.r0) * (size_t)g.cols + (t->c0 - (size_t)g.c0)) * c->elem;
  return check_finite(c, *v, t->rows, t->cols, *ld, t->r0, t->c0);
}

/* Memory mode: read this rank's train tiles once. */
static ntk_status load_tiles(struct cg *c) {
  ntk_status st = NTK_OK;
  for (size_t i = 0; i < c->ntr_t && !st; i++) {
    struct cg_tile *t = &c->tr[i];
    const void *v;
    size_t ld;
    if ((st = stop_check(c))) break;
    if ((st = tile_values(c, t, &v, &ld))) break;
    t->v = malloc(t->rows * t->cols * c->elem + 1);
    if (!t->v) {
      st = ntk_error(NTK_ENOMEM, "out of memory holding the kernel's tiles (%.1f GB on this rank): set [solve] "
                     "cg_kernel = stream", c->tile_bytes / 1e9);
      break;
    }
    for (size_t r = 0; r < t->rows; r++)
      memcpy((char *)t->v + r * t->cols * c->elem, (const char *)v + r * ld * c->elem, t->cols * c->elem);
  }
  return st;
}

static void free_tiles(struct cg *c) {
  for (size_t i = 0; c->tr && i < c->ntr_t; i++) free(c->tr[i].v), c->tr[i].v = NULL;
}

/* y[rows] += A x[cols] (x, y: n x na row-major, indexed from xoff, yoff);
 * with yt: yt[cols] += A^T xt[rows]. A float32 A: float32 products with
 * lowp (ntk_skinny_tile, summed per tile in float64), else float64 ones
 * (ntk_skinny_tile64). */
static void block_product(struct cg *c, const void *a, size_t rows, size_t cols, size_t ld, const double *x,
                          double *y, const double *xt, double *yt, size_t na, int lowp) {
  int ina = (int)na;
  if (c->elem == 4) {
    if (lowp) ntk_skinny_tile(a, rows, cols, ld, x, xt, y, yt, na, c->skinny, NTK_SKINNY_AUTO);
    else ntk_skinny_tile64(a, rows, cols, ld, x, xt, y, yt, na, c->skinny, NTK_SKINNY_AUTO);
    return;
  }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, ina, (int)cols, 1.0, a, (int)ld, x, ina, 1.0, y,
              ina);
  if (yt)
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)cols, ina, (int)rows, 1.0, a, (int)ld, xt, ina, 1.0, yt,
                ina);
}

/* This rank's share of Y = K X (n x na, zeroed here): not yet summed. */
static ntk_status local_product(struct cg *c, const double *x, double *y, size_t na, int lowp) {
  memset(y, 0, c->n * na * sizeof *y);
  ntk_status st = NTK_OK;
  for (size_t i = 0; i < c->ntr_t && !st; i++) {
    const struct cg_tile *t = &c->tr[i];
    const void *v;
    size_t ld;
    if ((st = tile_values(c, t, &v, &ld))) break;
    block_product(c, v, t->rows, t->cols, ld, x + t->c0 * na, y + t->r0 * na, t->diag ? NULL : x + t->r0 * na,
                  t->diag ? NULL : y + t->c0 * na, na, lowp);
    if (!c->memory && (st = stop_check(c))) break;
  }
  return st;
}

/* Collective: Y = K X, the same on every rank. */
static ntk_status product(struct cg *c, const double *x, double *y, size_t na, int lowp) {
  double t = ntk_now();
  ntk_status st = local_product(c, x, y, na, lowp);
  c->t_prod += ntk_now() - t;
  if (!st) st = stop_check(c);
  t = ntk_now();
  /* the agree on the local status already has every rank here */
  if (!(st = agree(c, st))) st = sum_now(c, y, c->n * na);
  c->t_comm += ntk_now() - t;
  return st;
}

/* ---- the preconditioner ------------------------------------------------- */

/* Collective: the diagonal of K (n, on every rank). */
static ntk_status diagonal(struct cg *c, double *d) {
  memset(d, 0, c->n * sizeof *d);
  ntk_status st = NTK_OK;
  for (size_t i = 0; i < c->ntr_t && !st; i++) {
    const struct cg_tile *t = &c->tr[i];
    if (!t->diag) continue;
    const void *v;
    size_t ld;
    if ((st = tile_values(c, t, &v, &ld))) break;
    for (size_t r = 0; r < t->rows; r++)
      d[t->r0 + r] = c->elem == 4 ? (double)((const float *)v)[r * ld + r] : ((const double *)v)[r * ld + r];
  }
  if ((st = agree(c, st))) return st;
  return sum(c, d, c->n);
}

/* Is (value, index) a before b: larger value first, then smaller index. */
static int before(double va, double ia, double vb, double ib) { return va > vb || (va == vb && ia < ib); }

/* Insert (v, i) into the sorted top list (val, idx) of *cnt <= cap entries. */
static void top_insert(double *val, double *idx, size_t *cnt, size_t cap, double v, double i) {
  if (*cnt == cap && !before(v, i, val[cap - 1], idx[cap - 1])) return;
  size_t k = *cnt < cap ? (*cnt)++ : cap - 1;
  while (k > 0 && before(v, i, val[k - 1], idx[k - 1])) {
    val[k] = val[k - 1], idx[k] = idx[k - 1];
    k--;
  }
  val[k] = v, idx[k] = i;
}

/* Columns K[:, S] for the b candidates S (sorted), this rank's tiles'
 * entries into out (n x b, zeroed here); then summed. */
static ntk_status read_columns(struct cg *c, const size_t *S, size_t b, double *out, unsigned char *blk) {
  size_t n = c->n, T = c->T, nbl = (n + T - 1) / T;
  memset(out, 0, n * b * sizeof *out);
  memset(blk, 0, nbl);
  for (size_t j = 0; j < b; j++) blk[S[j] / T] = 1;
  ntk_status st = NTK_OK;
  for (size_t i = 0; i < c->ntr_t && !st; i++) {
    const struct cg_tile *t = &c->tr[i];
    int hit_c = blk[t->c0 / T], hit_r = !t->diag && blk[t->r0 / T];
    if (!hit_c && !hit_r) continue;
    const void *v;
    size_t ld;
    if ((st = tile_values(c, t, &v, &ld))) break;
    const float *f = v;
    const double *dd = v;
    for (size_t j = 0; j < b; j++) {
      size_t p = S[j];
      if (hit_c && p >= t->c0 && p < t->c0 + t->cols) /* K[rows, p]: column p - c0 */
        for (size_t r = 0; r < t->rows; r++)
          out[(t->r0 + r) * b + j] = c->elem == 4 ? (double)f[r * ld + (p - t->c0)] : dd[r * ld + (p - t->c0)];
      if (hit_r && p >= t->r0 && p < t->r0 + t->rows) /* K[cols, p] = row p - r0 */
        for (size_t q = 0; q < t->cols; q++)
          out[(t->c0 + q) * b + j] = c->elem == 4 ? (double)f[(p - t->r0) * ld + q] : dd[(p - t->r0) * ld + q];
    }
  }
  if (!st) st = stop_check(c);
  if ((st = agree(c, st))) return st;
  c->passes++;
  return sum(c, out, n * b);
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* Collective: the partial pivoted Cholesky factor (rank <= k) of K, its
 * rows [lo, hi) in L (n_loc x k); the residual diagonal's sum in *resid.
 * d: the diagonal (n, every rank). */
static ntk_status pivoted_cholesky(struct cg *c, const double *d, size_t k, double *L, double *resid) {
  size_t n = c->n, lo = c->lo, nl = c->hi - c->lo, R = (size_t)c->nranks;
  size_t bcap = k < CG_BATCH ? k : CG_BATCH;
  /* n x b of columns: keep it under 512 MB at large n */
  while (bcap > 8 && (double)n * (double)bcap * 8.0 > 512e6) bcap /= 2;
  double *dl = malloc((nl + 1) * sizeof *dl), *C = malloc((n * bcap + 1) * sizeof *C);
  double *top = malloc((2 * R * bcap + 1) * sizeof *top), *tv = malloc((bcap + 1) * sizeof *tv);
  double *ti = malloc((bcap + 1) * sizeof *ti), *E = malloc((bcap * bcap + 1) * sizeof *E);
  double *LS = malloc((bcap * k + 1) * sizeof *LS), *lS = malloc((bcap * bcap + 1) * sizeof *lS);
  double *col = malloc((nl + 1) * sizeof *col);
  size_t *S = malloc((bcap + 1) * sizeof *S);
  unsigned char *blk = malloc((n + c->T - 1) / c->T + 1), *left = malloc(bcap + 1), *chosen = calloc(nl + 1, 1);
  ntk_status st = dl && C && top && tv && ti && E && LS && lS && col && S && blk && left && chosen
                      ? NTK_OK
                      : ntk_error(NTK_ENOMEM, "out of memory for the preconditioner");
  st = agree(c, st);
  double dmax0 = 0;
  for (size_t i = 0; i < n; i++) dmax0 = d[i] > dmax0 ? d[i] : dmax0;
  double floor = 1e-13 * dmax0;
  if (!st) memcpy(dl, d + lo, nl * sizeof *dl);
  size_t m = 0;
  while (!st && m < k) {
    size_t b = k - m < bcap ? k - m : bcap;
    /* The b largest residual diagonals: each rank's own, then merged. */
    size_t cnt = 0;
    for (size_t i = 0; i < nl; i++)
      if (!chosen[i] && dl[i] > floor) top_insert(tv, ti, &cnt, b, dl[i], (double)(lo + i));
    memset(top, 0, 2 * R * b * sizeof *top);
    for (size_t j = 0; j < cnt; j++) { /* (value, index + 1) in this rank's slots */
      top[2 * ((size_t)c->rank * b + j)] = tv[j];
      top[2 * ((size_t)c->rank * b + j) + 1] = ti[j] + 1;
    }
    if ((st = sum(c, top, 2 * R * b))) break;
    size_t avail = 0;
    cnt = 0;
    for (size_t j = 0; j < R * b; j++)
      if (top[2 * j + 1] > 0) avail++, top_insert(tv, ti, &cnt, b, top[2 * j], top[2 * j + 1] - 1);
    if (cnt == 0) break; /* the residual is below the floor everywhere: K has numerical rank m */
    b = cnt;
    /* theta bounds every residual diagonal outside the batch */
    double theta = avail > b ? tv[b - 1] : 0;
    for (size_t j = 0; j < b; j++) S[j] = (size_t)ti[j];
    qsort(S, b, sizeof *S, cmp_size);
    if ((st = read_columns(c, S, b, C, blk))) break;
    /* L's rows at the candidates (b x m), from their owners */
    memset(LS, 0, b * m * sizeof *LS);
    for (size_t j = 0; j < b; j++)
      if (S[j] >= lo && S[j] < c->hi) memcpy(LS + j * m, L + (S[j] - lo) * k, m * sizeof *LS);
    if (m && (st = sum(c, LS, b * m))) break;
    /* E = K[S, S] - L_S L_S^T, the residual on the batch (every rank alike) */
    for (size_t i = 0; i < b; i++)
      for (size_t j = 0; j < b; j++) {
        double e = C[S[i] * b + j];
        for (size_t q = 0; q < m; q++) e -= LS[i * m + q] * LS[j * m + q];
        E[i * b + j] = e;
      }
    /* local rows of the candidates' residual columns */
    double *Cl = C + lo * b;
    if (m && nl)
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nl, (int)b, (int)m, -1.0, L, (int)k, LS, (int)m, 1.0,
                  Cl, (int)b);
    memset(left, 1, b);
    size_t a = 0, m0 = m;
    while (m < k) {
      size_t js = b;
      for (size_t j = 0; j < b; j++)
        if (left[j] && (js == b || E[j * b + j] > E[js * b + js])) js = j;
      if (js == b) break;
      double piv = E[js * b + js];
      if (!(piv > floor) || piv < CG_ACCEPT * theta) break;
      double sq = sqrt(piv);
      left[js] = 0;
      for (size_t j = 0; j < b; j++) lS[a * b + j] = left[j] ? E[j * b + js] / sq : 0;
      lS[a * b + js] = sq;
      for (size_t i = 0; i < b; i++)
        for (size_t j = 0; j < b; j++)
          if (left[i] && left[j]) E[i * b + j] -= lS[a * b + i] * lS[a * b + j];
      /* the new column on this rank's rows */
      for (size_t i = 0; i < nl; i++) col[i] = Cl[i * b + js];
      if (a && nl) {
        double *w = tv; /* lS[0..a) at js */
        for (size_t t = 0; t < a; t++) w[t] = lS[t * b + js];
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)nl, (int)a, -1.0, L + m0, (int)k, w, 1, 1.0, col, 1);
      }
      for (size_t i = 0; i < nl; i++) {
        double l = col[i] / sq;
        L[i * k + m] = l;
        dl[i] -= l * l;
        if (dl[i] < 0) dl[i] = 0;
      }
      if (S[js] >= lo && S[js] < c->hi) dl[S[js] - lo] = 0, chosen[S[js] - lo] = 1, L[(S[js] - lo) * k + m] = sq;
      m++, a++;
    }
    if (a == 0) break; /* cannot happen: the batch's best is the global best */
  }
  double total = 0;
  for (size_t i = 0; !st && i < nl; i++) total += dl[i];
  if (!st) st = sum(c, &total, 1);
  if (!st) st = bcast(c, &total, sizeof total);
  *resid = total;
  c->m = m;
  free(dl), free(C), free(top), free(tv), free(ti), free(E), free(LS), free(lS), free(col), free(S);
  free(blk), free(left), free(chosen);
  return st;
}

/* The rank that holds ridge r's inverse and applies it: the ridges dealt
 * round the ranks, so that their inversions run side by side. */
static int ridge_owner(const struct cg *c, size_t r) { return (int)(r % (size_t)c->nranks); }

/* Collective: the preconditioner of rank <= k (0: none): L (this rank's
 * rows), G = L^T L, and per ridge the inverse of s I + G, on the ridge's
 * owner. */
static ntk_status build_preconditioner(struct cg *c, size_t k, const double *d, const double *regs, size_t nridge,
                                       double trace) {
  size_t n = c->n, nl = c->hi - c->lo;
  c->m = 0;
  double resid = trace;
  ntk_status st = NTK_OK;
  if (k) {
    c->L = malloc((nl * k + 1) * sizeof *c->L);
    if ((st = agree(c, c->L ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory for the %zu x %zu preconditioner", n, k))))
      return st;
    if ((st = pivoted_cholesky(c, d, k, c->L, &resid))) return st;
    c->ldl = k;
  }
  /* per ridge: the shift, reg plus the mean residual diagonal: M = L L^T +
   * mean(diag(K - L L^T)) I + reg I has the trace of K + reg I. (reg alone
   * measured 0 to 60 % more iterations at small ridges, as the Woodbury
   * form's rounding, about eps |L^T L| / s relative, reached 1e-8.) */
  double mean_resid = resid / (double)n;
  for (size_t r = 0; r < nridge; r++) {
    double s = regs[r] + (mean_resid > 0 ? mean_resid : 0);
    c->rshift[r] = c->m ? s : 0;
  }
  if (!c->m) return NTK_OK;
  /* G = L^T L, summed on every rank; each ridge's owner inverts s I + G
   * (Cholesky, dpotrf and dpotri: k^3 flops), one k x k matrix per ridge,
   * the owners side by side. Applied as one product (a pass over it; with
   * two triangular solves instead the preconditioner took 0.130 s per
   * iteration against 0.104 s, n = 20 000); a shared eigendecomposition of
   * G (rank 0's dsyevd, then L V on every rank) took 17 s at k = 4 000 and
   * 96 s at 8 000, n = 20 000, where G and the inverses take 7 s and 48 s
   * (docs/PERFORMANCE.md, 2026-12-05). */
  size_t m = c->m;
  double t_fac = ntk_now();
  double *G = calloc(m * m + 1, sizeof *G);
  st = G ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory for the preconditioner (%zu^2)", m);
  if (!st && nl)
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)m, (int)nl, 1.0, c->L, (int)c->ldl, 0.0, G, (int)m);
  if (!(st = agree(c, st))) st = sum_now(c, G, m * m);
  /* The shift's floor: applied as (R - L (s I + G)^-1 L^T R) / s, the
   * preconditioner's rounding is about eps |G| / s relative. A tiny ridge
   * with a preconditioner of the kernel's full rank (k = n, the default
   * below 100 samples) left s of 1e-300 and a preconditioner of rounding
   * noise times 1e284: a kernel lapack solves was called "not positive
   * definite", or ran 2000 iterations. At s >= 1e6 eps |G| the rounding
   * stays under 1e-6; |G| is bounded by the smaller of trace(G) and the
   * largest absolute row sum (G is positive semi-definite). The system
   * solved, K + reg I, is not changed, only how close M is to it. The same
   * on every rank (G is summed). */
  double gtrace = 0, grow = 0;
  for (size_t i = 0; !st && i < m; i++) { /* G holds its upper triangle (dsyrk): row i is column i above it */
    double row = 0;
    for (size_t j = 0; j < i; j++) row += fabs(G[j * m + i]);
    for (size_t j = i; j < m; j++) row += fabs(G[i * m + j]);
    gtrace += G[i * m + i];
    grow = row > grow ? row : grow;
  }
  double floor_s = 1e6 * DBL_EPSILON * (grow > 0 && grow < gtrace ? grow : gtrace);
  for (size_t r = 0; !st && r < nridge; r++)
    if (c->rshift[r] < floor_s) c->rshift[r] = floor_s;
  double failed[NTK_MAX_RIDGES] = {0}; /* per ridge: 1 where its owner's inversion failed (one contributor) */
  size_t last = nridge; /* this rank's last ridge is inverted in G itself */
  for (size_t r = 0; r < nridge; r++)
    if (ridge_owner(c, r) == c->rank && c->rshift[r] > 0) last = r;
  for (size_t r = 0; !st && r < nridge; r++) {
    if (ridge_owner(c, r) != c->rank || !(c->rshift[r] > 0)) continue; /* shift 0 (G = 0, so no floor): none */
    double *U = r == last ? G : malloc((m * m + 1) * sizeof *U);
    if (!U) {
      st = ntk_error(NTK_ENOMEM, "out of memory for the preconditioner's inverses (one of %zu^2 doubles per ridge, "
                     "%zu ridges on %d ranks): lower [solve] preconditioner_rank or run more ranks", m, nridge,
                     c->nranks);
      break;
    }
    if (U != G) memcpy(U, G, m * m * sizeof *U);
    for (size_t i = 0; i < m; i++) U[i * m + i] += c->rshift[r];
    int mi = (int)m, info = 0;
    dpotrf_("L", &mi, U, &mi, &info, 1); /* column-major lower = row-major upper */
    if (info == 0) dpotri_("L", &mi, U, &mi, &info, 1);
    for (size_t i = 0; info == 0 && i < m; i++) /* the inverse's other triangle */
      for (size_t j = 0; j < i; j++) U[i * m + j] = U[j * m + i];
    if (info != 0) { /* not expected: G is positive semi-definite, s > 0 */
      failed[r] = 1;
      if (U != G) free(U);
      U = NULL;
    }
    c->fac[r] = U;
    if (U == G) G = NULL;
  }
  free(G);
  if ((st = agree(c, st))) return st;
  if ((st = sum(c, failed, nridge))) return st;
  for (size_t r = 0; r < nridge; r++)
    if (failed[r] > 0) {
      c->rshift[r] = 0;
      if (c->rank == 0)
        fprintf(stderr, "ntkd: solve: cg %s: ridge %g: the preconditioner's inversion failed: solving that ridge "
                "without it\n", ntk_solve_kernel_name(c->p->which), c->p->ridge[r]);
    }
  c->t_fac = ntk_now() - t_fac;
  return NTK_OK;
}

/* The end of the run of equal values grp[b0], grp[b0 + 1], ... (below w):
 * a ridge's columns (precondition), a group's directions (below). */
static size_t run_end(const size_t *grp, size_t b0, size_t w) {
  size_t b1 = b0;
  while (b1 < w && grp[b1] == grp[b0]) b1++;
  return b1;
}

/* Collective: Z = M^-1 R = (R - L (s I + G)^-1 L^T R) / s for na columns
 * (n x na, every rank) whose ridges are rid[] (columns of one ridge are
 * adjacent); a ridge with shift 0 (its inversion failed, or G = 0) is
 * not preconditioned (Z = R). w: m x na, corr: n x na scratch. */
static ntk_status precondition(struct cg *c, const double *R, double *Z, const size_t *rid, size_t na, double *w,
                               double *corr) {
  size_t n = c->n, nl = c->hi - c->lo, m = c->m;
  int any = 0;
  for (size_t a = 0; a < na; a++) any |= c->rshift[rid[a]] > 0;
  if (!m || !any) {
    memcpy(Z, R, n * na * sizeof *Z);
    return NTK_OK;
  }
  /* w = L^T R (m x na; skinny.h, as the products below) */
  if (nl) ntk_skinny_atx(c->L, nl, m, c->ldl, R + c->lo * na, w, na, c->skinny, NTK_SKINNY_AUTO);
  else memset(w, 0, m * na * sizeof *w);
  ntk_status st = sum(c, w, m * na);
  if (st) return st;
  /* w = (s I + G)^-1 w: each ridge's columns solved by its owner, zero
   * elsewhere, and summed (one contributor per entry: exact) */
  for (size_t a0 = 0, a1; a0 < na; a0 = a1) {
    size_t r = rid[a0];
    a1 = run_end(rid, a0, na);
    size_t wa = a1 - a0;
    if (c->fac[r] && c->rshift[r] > 0) { /* through Z and corr, free until below */
      for (size_t i = 0; i < m; i++) memcpy(corr + i * wa, w + i * na + a0, wa * sizeof *w);
      ntk_skinny_ax(c->fac[r], m, m, m, corr, Z, wa, c->skinny, NTK_SKINNY_AUTO);
      for (size_t i = 0; i < m; i++) memcpy(w + i * na + a0, Z + i * wa, wa * sizeof *w);
    } else {
      for (size_t i = 0; i < m; i++) memset(w + i * na + a0, 0, wa * sizeof *w);
    }
  }
  if ((st = sum(c, w, m * na))) return st;
  /* corr = L w on this rank's rows, summed */
  memset(corr, 0, n * na * sizeof *corr);
  if (nl) ntk_skinny_ax(c->L, nl, m, c->ldl, w, corr + c->lo * na, na, c->skinny, NTK_SKINNY_AUTO);
  if ((st = sum(c, corr, n * na))) return st;
  for (size_t i = 0; i < n; i++)
    for (size_t a = 0; a < na; a++) {
      double sh = c->rshift[rid[a]], r = R[i * na + a];
      Z[i * na + a] = sh > 0 ? (r - corr[i * na + a]) / sh : r;
    }
  return NTK_OK;
}

/* ---- conjugate gradients ------------------------------------------------ */

/* The columns of one group (a ridge's classes: they share K + reg) run as
 * one block: its directions, D's columns g0[g] .. g0[g] + gm[g] - 1, span
 * its running columns' preconditioned residuals (see update_columns). */
struct cgv {
  double *X, *R;          /* n x ncols */
  double *D, *Dn;         /* n x nd: the directions, packed by group (Dn: the next ones, scratch) */
  double *Qa, *Za;        /* n x nd: (K + reg) D; n x na: preconditioned residuals (packed running columns) */
  double *corr, *w;       /* precondition scratch */
  double *G, *ab;         /* per group its gm x gm factor of D'(K + reg)D (at goff; orthonormalise's Gram
                           * matrices in between); a step's gm x columns */
  double *bnorm, *res, *best; /* best: the smallest residual reached */
  double *rref;           /* f32: the residual when the true one was last computed */
  size_t nd, *dg;         /* directions, and the group of each */
  size_t *g0, *gm, *goff; /* per group: its first direction, how many, where its factor is in G */
  size_t *it, *act, *rid;
  size_t *redo, nredo;    /* f32: columns to restart after a breakdown */
  int *state, *why;
  unsigned char *keep;    /* a direction kept (orthonormalise) */
};

static void free_cgv(struct cgv *v) {
  free(v->X), free(v->R), free(v->D), free(v->Dn), free(v->Qa), free(v->Za), free(v->corr), free(v->w);
  free(v->G), free(v->ab), free(v->bnorm), free(v->res), free(v->best), free(v->rref), free(v->dg), free(v->g0);
  free(v->gm), free(v->goff), free(v->it), free(v->act), free(v->rid), free(v->redo), free(v->state), free(v->why);
  free(v->keep);
}

static void pack(const double *A, size_t n, size_t ncols, const size_t *act, size_t na, double *out) {
  for (size_t i = 0; i < n; i++)
    for (size_t a = 0; a < na; a++) out[i * na + a] = A[i * ncols + act[a]];
}

/* Collective: the true residuals R = B - (K + reg) X of the na columns
 * cols[] (a float64 product; none when zero_x, X being 0) and their
 * relative norms res (and rref). xs, ys: n x na scratch. */
static ntk_status true_residuals(struct cg *c, struct cgv *v, const size_t *cols, size_t na, int zero_x, double *xs,
                                 double *ys) {
  size_t n = c->n, nc = c->ncols;
  ntk_status st;
  if (!zero_x) {
    pack(v->X, n, nc, cols, na, xs);
    if ((st = product(c, xs, ys, na, 0))) return st;
  }
  for (size_t i = 0; i < n; i++)
    for (size_t a = 0; a < na; a++) {
      size_t q = cols[a];
      double b = (size_t)c->p->ytr[i] == q % c->classes ? 1.0 : 0.0;
      v->R[i * nc + q] = zero_x ? b : b - (ys[i * na + a] + c->reg[q] * v->X[i * nc + q]);
    }
  for (size_t a = 0; a < na; a++) {
    size_t q = cols[a];
    double rr = 0;
    for (size_t i = 0; i < n; i++) rr += v->R[i * nc + q] * v->R[i * nc + q];
    v->res[q] = v->rref[q] = v->bnorm[q] > 0 ? sqrt(rr) / v->bnorm[q] : 0;
  }
  return NTK_OK;
}

/* ---- blocks: the columns of a group share their directions ------------- */

/* A column's group: its ridge's classes (they share K + reg), c->bsize at
 * a time (at most CG_BLOCK_MAX: a block's own steps cost about n bsize^2
 * flops per column, the product n^2 / ranks; 1 with
 * NTKD_TEST_CG_UNBLOCKED: one column per block, plain CG). */
static size_t groups_per_ridge(const struct cg *c) { return (c->classes + c->bsize - 1) / c->bsize; }
static size_t group_of(const struct cg *c, size_t q) {
  return q / c->classes * groups_per_ridge(c) + q % c->classes / c->bsize;
}
static size_t group_count(const struct cg *c) { return c->ncols / c->classes * groups_per_ridge(c); }
static double group_reg(const struct cg *c, size_t g) { return c->reg[g / groups_per_ridge(c) * c->classes]; }

/* Cholesky A = U^T U in place (m x m, row-major, upper triangle used) of
 * the blocks' small symmetric matrices; 0 where not positive definite.
 * keep (optional): which columns to keep, decided here: not one whose pivot
 * is below CG_DROP^2 of its diagonal (it adds almost nothing to those
 * before it), which is then left out of the factor. */
static int small_cholesky(double *A, size_t m, unsigned char *keep) {
  for (size_t j = 0; j < m; j++) {
    double d = A[j * m + j];
    for (size_t k = 0; k < j; k++)
      if (!keep || keep[k]) d -= A[k * m + j] * A[k * m + j];
    if (keep && !(keep[j] = d > CG_DROP * CG_DROP * A[j * m + j] && isfinite(d))) continue;
    if (!(d > 0) || !isfinite(d)) return 0;
    d = sqrt(d);
    A[j * m + j] = d;
    for (size_t i = j + 1; i < m; i++) {
      double t = A[j * m + i];
      for (size_t k = 0; k < j; k++)
        if (!keep || keep[k]) t -= A[k * m + j] * A[k * m + i];
      A[j * m + i] = t / d;
    }
  }
  return 1;
}

/* B (m x s, row stride s) = A^-1 B, A = U^T U from small_cholesky */
static void small_solve(const double *U, size_t m, double *B, size_t s) {
  for (size_t a = 0; a < s; a++) {
    for (size_t i = 0; i < m; i++) {
      double t = B[i * s + a];
      for (size_t k = 0; k < i; k++) t -= U[k * m + i] * B[k * s + a];
      B[i * s + a] = t / U[i * m + i];
    }
    for (size_t i = m; i-- > 0;) {
      double t = B[i * s + a];
      for (size_t k = i + 1; k < m; k++) t -= U[i * m + k] * B[k * s + a];
      B[i * s + a] = t / U[i * m + i];
    }
  }
}

/* S (m x m) = A[:, a0 .. a0+m)^T B[:, b0 .. b0+m') for n x lda / n x ldb
 * row-major A and B: the blocks' small products (m' = mb columns). */
static void small_gram(const double *A, size_t lda, size_t a0, size_t ma, const double *B, size_t ldb, size_t b0,
                       size_t mb, size_t n, double *S) {
  memset(S, 0, ma * mb * sizeof *S);
  if (ma && mb && n)
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)ma, (int)mb, (int)n, 1.0, A + a0, (int)lda, B + b0,
                (int)ldb, 0.0, S, (int)mb);
}

/* Per group, the start and count of its directions (adjacent in D) and
 * where the factor of its D^T (K + reg) D goes in v->G. */
static void index_groups(const struct cg *c, struct cgv *v) {
  size_t ng = group_count(c), off = 0;
  for (size_t g = 0; g < ng; g++) v->gm[g] = 0;
  for (size_t j = 0; j < v->nd; j++) {
    size_t g = v->dg[j];
    if (!v->gm[g]) v->g0[g] = j;
    v->gm[g]++;
  }
  for (size_t g = 0; g < ng; g++) v->goff[g] = off, off += v->gm[g] * v->gm[g];
}

/* Collective: the Gram matrix W_g^T W_g of each group g of W's columns
 * (n x w, row stride w; grp[b] the group of column b, each group's
 * adjacent) into v->G, one after the other, as rank 0 computed them: the
 * factors, and so the choices made from them, are then the same on every
 * rank (BLAS may round differently on another node). */
static ntk_status group_grams(struct cg *c, struct cgv *v, const double *W, size_t w, const size_t *grp) {
  size_t off = 0;
  for (size_t b0 = 0, b1; b0 < w; b0 = b1) {
    b1 = run_end(grp, b0, w);
    small_gram(W, w, b0, b1 - b0, W, w, b0, b1 - b0, c->n, v->G + off);
    off += (b1 - b0) * (b1 - b0);
  }
  return bcast(c, v->G, off * sizeof *v->G);
}

/* Collective: W (n x w, row stride w) holds candidate directions, grp[b]
 * the group of column b (each group's adjacent). Within each group those
 * adding less than CG_DROP of their norm to the ones before them are left
 * out, W and grp compacted to the *kept, and the rest made orthonormal
 * (Cholesky QR, twice: W = W U^-1 with U^T U = W^T W). */
static ntk_status orthonormalise(struct cg *c, struct cgv *v, double *W, size_t w, size_t *grp, size_t *kept) {
  size_t n = c->n, k = 0, off = 0;
  unsigned char *keep = v->keep;
  ntk_status st = group_grams(c, v, W, w, grp); /* the choice: rank 0's numbers */
  if (st) return st;
  for (size_t b0 = 0, b1; b0 < w; off += (b1 - b0) * (b1 - b0), b0 = b1) { /* each group's choice */
    b1 = run_end(grp, b0, w);
    if (!small_cholesky(v->G + off, b1 - b0, keep + b0))
      for (size_t b = b0; b < b1; b++) keep[b] = 0; /* not finite */
  }
  for (size_t i = 0; i < n; i++) /* compact, row by row (the new place is never after the old) */
    for (size_t b = 0; b < w; b++)
      if (keep[b]) W[k++] = W[i * w + b];
  k = 0;
  for (size_t b = 0; b < w; b++)
    if (keep[b]) grp[k++] = grp[b];
  *kept = w = k;
  for (size_t b0 = 0, b1; b0 < w; b0 = b1) {
    b1 = run_end(grp, b0, w);
    size_t m = b1 - b0;
    double *U = v->ab;
    for (int pass = 0; pass < 2; pass++) {
      small_gram(W, w, b0, m, W, w, b0, m, n, U);
      if (small_cholesky(U, m, NULL)) {
        cblas_dtrsm(CblasRowMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, (int)n, (int)m, 1.0, U, (int)m,
                    W + b0, (int)w);
        continue;
      }
      /* not expected (the choice above kept a well-conditioned set; here
       * rounding, on this rank alone): Gram-Schmidt column by column, the
       * same directions in exact arithmetic, and none dropped, so that the
       * ranks still agree on their number */
      for (size_t j = 0; j < m; j++) {
        for (size_t l = 0; l < j; l++) {
          double d = 0;
          for (size_t i = 0; i < n; i++) d += W[i * w + b0 + l] * W[i * w + b0 + j];
          for (size_t i = 0; i < n; i++) W[i * w + b0 + j] -= d * W[i * w + b0 + l];
        }
        double d = 0;
        for (size_t i = 0; i < n; i++) d += W[i * w + b0 + j] * W[i * w + b0 + j];
        d = d > 0 ? 1 / sqrt(d) : 0;
        for (size_t i = 0; i < n; i++) W[i * w + b0 + j] *= d;
      }
    }
  }
  return NTK_OK;
}

/* Collective: (re)start the given columns (ascending, whole groups that
 * have no directions now) from X: R = B - (K + reg) X, and their groups'
 * directions, M^-1 R orthonormalised, added to D. */
static ntk_status restart(struct cg *c, struct cgv *v, const size_t *cols, size_t na, int zero_x) {
  size_t n = c->n, nc = c->ncols, nd = v->nd, w;
  ntk_status st = true_residuals(c, v, cols, na, zero_x, v->Dn, v->Qa);
  if (st) return st;
  pack(v->R, n, nc, cols, na, v->Dn);
  for (size_t a = 0; a < na; a++) v->rid[a] = cols[a] / c->classes;
  if ((st = precondition(c, v->Dn, v->Za, v->rid, na, v->w, v->corr))) return st;
  for (size_t a = 0; a < na; a++) v->rid[a] = group_of(c, cols[a]);
  if ((st = orthonormalise(c, v, v->Za, na, v->rid, &w))) return st;
  for (size_t i = n; i-- > 0;) { /* D: n x nd -> n x (nd + w), from the last row (the new place is never before) */
    memmove(v->D + i * (nd + w), v->D + i * nd, nd * sizeof *v->D);
    memcpy(v->D + i * (nd + w) + nd, v->Za + i * w, w * sizeof *v->D);
  }
  for (size_t b = 0; b < w; b++) v->dg[nd + b] = v->rid[b];
  v->nd = nd + w;
  index_groups(c, v);
  return NTK_OK;
}

static void fmt_time(double s, char *out, size_t cap) {
  if (s < 100) snprintf(out, cap, "%.0f s", s);
  else if (s < 6000) snprintf(out, cap, "%.0f min", s / 60);
  else snprintf(out, cap, "%.1f h", s / 3600);
}

/* run_cg's progress lines: the worst running residual of the last 64
 * iterations and when each was reached (for the ETA), and when the last
 * line was printed. */
struct cg_eta {
  double last_print, t[64], r[64];
  size_t n;
};

/* Every column's right-hand side norm and state (a class no train label
 * has is done at once), X = 0; the running columns into v->act. Returns
 * their count. */
static size_t start_columns(struct cg *c, struct cgv *v) {
  size_t n = c->n, nc = c->ncols;
  for (size_t q = 0; q < nc; q++) {
    double b = 0;
    for (size_t i = 0; i < n; i++) b += (size_t)c->p->ytr[i] == q % c->classes;
    v->bnorm[q] = sqrt(b);
    v->state[q] = b > 0 ? COL_RUN : COL_DONE;
    v->it[q] = 0, v->why[q] = WHY_NONE, v->best[q] = 1;
  }
  memset(v->X, 0, n * nc * sizeof *v->X);
  size_t na = 0;
  for (size_t q = 0; q < nc; q++)
    if (v->state[q] == COL_RUN) v->act[na++] = q;
    else v->res[q] = 0;
  return na;
}

/* Collective, when no column runs: the true residual of the converged
 * columns; those above the tolerance (rank 0's numbers decide) run again
 * from it, at most CG_RESTARTS times in all. *again: how many. */
static ntk_status recheck_converged(struct cg *c, struct cgv *v, double tol, size_t max_it, int *restarts,
                                    int *again) {
  size_t nc = c->ncols, nd = 0;
  ntk_status st;
  *again = 0;
  for (size_t q = 0; q < nc; q++)
    if (v->state[q] == COL_DONE && v->bnorm[q] > 0) v->act[nd++] = q;
  if (!nd) return NTK_OK;
  /* the directions this adds, from every converged column, then serve
   * those of their groups that run again: a larger space, not a wrong one */
  if ((st = restart(c, v, v->act, nd, 0))) return st;
  /* decisions on rank 0's numbers */
  unsigned char *flag = (unsigned char *)v->Qa;
  if (c->rank == 0)
    for (size_t a = 0; a < nd; a++) {
      size_t q = v->act[a];
      flag[a] = v->res[q] > tol && v->it[q] < max_it && *restarts < CG_RESTARTS;
    }
  if ((st = bcast(c, flag, nd))) return st;
  for (size_t a = 0; a < nd; a++)
    if (flag[a]) v->state[v->act[a]] = COL_RUN, (*again)++;
  if (!*again) return NTK_OK;
  (*restarts)++;
  if (c->rank == 0)
    fprintf(stderr, "ntkd: solve: cg %s: the true residual drifted above the tolerance in %d column%s; "
            "restarting them\n", ntk_solve_kernel_name(c->p->which), *again, *again == 1 ? "" : "s");
  return NTK_OK;
}

/* Collective, f32: the true residual R = B - (K + reg) X (a float64
 * product) of the columns flagged COL_REFRESH among the na running ones
 * replaces the recurrence's; their verdicts follow from it (rank 0's
 * numbers, broadcast into flag). Uses v->Za and v->corr as scratch. */
static ntk_status refresh_columns(struct cg *c, struct cgv *v, size_t na, unsigned char *flag, double tol,
                                  size_t max_it) {
  size_t nr = 0;
  size_t *cols = malloc((na + 1) * sizeof *cols);
  unsigned char *verdict = malloc(na + 1);
  ntk_status st = agree(c, cols && verdict ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory"));
  for (size_t a = 0; !st && a < na; a++)
    if (flag[a] == COL_REFRESH) cols[nr++] = v->act[a];
  if (!st) { /* v->Qa, this iteration's product, is still needed: other scratch */
    double t = c->t_prod;
    st = true_residuals(c, v, cols, nr, 0, v->Za, v->corr);
    c->t_fresh += c->t_prod - t, c->n_fresh++, c->c_fresh += nr;
  }
  for (size_t a = 0; !st && a < nr; a++) {
    size_t q = cols[a];
    if (v->res[q] < v->best[q]) v->best[q] = v->res[q];
    verdict[a] = !isfinite(v->res[q]) ? COL_FAIL : v->res[q] <= tol ? COL_DONE : v->it[q] >= max_it ? COL_FAIL : COL_RUN;
  }
  if (!st) st = bcast(c, verdict, nr);
  for (size_t a = 0, j = 0; !st && a < na; a++)
    if (flag[a] == COL_REFRESH) {
      size_t q = v->act[a];
      flag[a] = verdict[j++];
      if (flag[a] == COL_FAIL) v->why[q] = isfinite(v->res[q]) ? WHY_MAXIT : WHY_BREAKDOWN;
    }
  free(cols), free(verdict);
  return st;
}

/* NTKD_TEST_CG_BREAKDOWN=K (tests): every group breaks down at its K-th
 * iteration, as if D^T (K + reg) D were not positive definite. */
static long test_breakdown = -1;

/* Collective, after the product Q = K D of the directions (v->Qa): each
 * group's step (X += D A, R -= (K + reg) D A, A = (D^T (K + reg) D)^-1 D^T R
 * for its running columns: every column's error minimised over all of the
 * group's directions), each column's residual, and whether it converged,
 * failed or runs on (rank 0's verdicts broadcast). The columns still
 * running stay in v->act (*still of them); *worst: the largest residual of
 * the na. */
static ntk_status update_columns(struct cg *c, struct cgv *v, size_t na, double tol, size_t max_it, size_t *still,
                                 double *worst) {
  size_t n = c->n, nc = c->ncols, nd = v->nd;
  ntk_status st;
  unsigned char *flag = malloc(na + 1);
  if ((st = agree(c, flag ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory")))) {
    free(flag);
    return st;
  }
  /* Q = (K + reg) D, and every group's D^T (K + reg) D as rank 0 computed
   * it: whether a group broke down, and its step, are then decided alike
   * on every rank */
  size_t ng = group_count(c), gsz = 0;
  for (size_t g = 0; g < ng; g++)
    if (v->gm[g]) {
      size_t j0 = v->g0[g], j1 = j0 + v->gm[g];
      double reg = group_reg(c, g);
      for (size_t i = 0; i < n; i++)
        for (size_t j = j0; j < j1; j++) v->Qa[i * nd + j] += reg * v->D[i * nd + j];
      small_gram(v->D, nd, j0, v->gm[g], v->Qa, nd, j0, v->gm[g], n, v->G + v->goff[g]);
      gsz = v->goff[g] + v->gm[g] * v->gm[g];
    }
  if ((st = bcast(c, v->G, gsz * sizeof *v->G))) {
    free(flag);
    return st;
  }
  for (size_t a0 = 0; a0 < na;) {
    size_t g = group_of(c, v->act[a0]), a1 = a0;
    while (a1 < na && group_of(c, v->act[a1]) == g) a1++;
    size_t s = a1 - a0, m = v->gm[g], j0 = v->g0[g];
    const size_t *cols = v->act + a0;
    double *U = v->G + v->goff[g], *A = v->ab;
    int broke = m == 0;
    for (size_t a = 0; a < s; a++) {
      v->it[cols[a]]++;
      flag[a0 + a] = COL_RUN;
      broke |= test_breakdown >= 0 && (long)v->it[cols[a]] == test_breakdown;
    }
    if (!broke) {
      for (size_t j = 0; j < m; j++)
        for (size_t k = 0; k < j; k++) U[k * m + j] = U[j * m + k] = 0.5 * (U[k * m + j] + U[j * m + k]);
      broke = !small_cholesky(U, m, NULL);
    }
    if (broke) {
      /* D^T (K + reg) D not positive definite: with float32 products it
       * can round so where tiny; such a group starts again in float64 */
      for (size_t a = 0; a < s; a++) {
        flag[a0 + a] = c->f32 ? COL_RESTART : COL_FAIL;
        if (!c->f32) v->why[cols[a]] = WHY_BREAKDOWN;
      }
      a0 = a1;
      continue;
    }
    /* A from D^T R, not from the preconditioned residuals: equal in exact
     * arithmetic (R is orthogonal to the previous directions), but after a
     * residual replacement (f32) R has a component along them, and the
     * step would overstate it (a preconditioner near K + reg, rank k = n:
     * the iteration diverged) */
    double *Rs = v->Za, *Xs = v->corr; /* the group's columns of R and X, packed (n x s) */
    pack(v->R, n, nc, cols, s, Rs);
    pack(v->X, n, nc, cols, s, Xs);
    small_gram(v->D, nd, j0, m, Rs, s, 0, s, n, A);
    small_solve(U, m, A, s);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)s, (int)m, 1.0, v->D + j0, (int)nd, A, (int)s,
                1.0, Xs, (int)s);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)s, (int)m, -1.0, v->Qa + j0, (int)nd, A,
                (int)s, 1.0, Rs, (int)s);
    for (size_t a = 0; a < s; a++) v->res[cols[a]] = 0;
    for (size_t i = 0; i < n; i++)
      for (size_t a = 0; a < s; a++) {
        size_t q = cols[a];
        double r = Rs[i * s + a];
        v->X[i * nc + q] = Xs[i * s + a], v->R[i * nc + q] = r;
        v->res[q] += r * r;
      }
    for (size_t a = 0; a < s; a++) {
      size_t q = cols[a];
      v->res[q] = sqrt(v->res[q]) / v->bnorm[q];
      if (!c->f32 && v->res[q] < v->best[q]) v->best[q] = v->res[q];
      if (!isfinite(v->res[q])) flag[a0 + a] = COL_FAIL, v->why[q] = WHY_BREAKDOWN;
      else if (c->f32 && (v->res[q] <= tol || v->res[q] < c->refresh * v->rref[q] || v->it[q] >= max_it))
        flag[a0 + a] = COL_REFRESH; /* the recurrence's residual is not the truth in f32: see run_cg */
      else if (v->res[q] <= tol) flag[a0 + a] = COL_DONE;
      else if (v->it[q] >= max_it) flag[a0 + a] = COL_FAIL, v->why[q] = WHY_MAXIT;
    }
    a0 = a1;
  }
  int any = 0;
  for (size_t a = 0; a < na; a++) any |= flag[a] == COL_REFRESH;
  for (size_t a = 0; any && a < na; a++) /* columns about to need it share the product */
    if (flag[a] == COL_RUN && v->res[v->act[a]] < sqrt(c->refresh) * v->rref[v->act[a]]) flag[a] = COL_REFRESH;
  if ((st = bcast(c, flag, na))) {
    free(flag);
    return st;
  }
  any = 0;
  for (size_t a = 0; a < na; a++) any |= flag[a] == COL_REFRESH;
  if (any && (st = refresh_columns(c, v, na, flag, tol, max_it))) {
    free(flag);
    return st;
  }
  /* progress: the worst running residual */
  *worst = 0;
  for (size_t a = 0; a < na; a++) *worst = v->res[v->act[a]] > *worst ? v->res[v->act[a]] : *worst;
  *still = 0;
  for (size_t a = 0; a < na; a++) {
    size_t q = v->act[a];
    v->state[q] = flag[a] == COL_RESTART ? COL_RUN : flag[a];
    if (flag[a] == COL_RESTART) v->redo[v->nredo++] = q;
    else if (flag[a] == COL_RUN) v->act[(*still)++] = q;
  }
  free(flag);
  return NTK_OK;
}

/* Rank 0's progress line after iteration `it` (the first, then every
 * CG_PRINT_EVERY seconds and the last), with an ETA from the rate the
 * worst residual fell over the last iterations. */
static void progress(struct cg *c, struct cg_eta *e, double worst, size_t na, size_t still, size_t it, double tol) {
  double now = ntk_now();
  if (e->n == 64) { /* the last 64 iterations, for the ETA */
    memmove(e->r, e->r + 1, 63 * sizeof *e->r);
    memmove(e->t, e->t + 1, 63 * sizeof *e->t);
    e->n--;
  }
  e->r[e->n] = worst, e->t[e->n] = now, e->n++;
  if (c->rank == 0 && (it == 1 || now - e->last_print >= CG_PRINT_EVERY || still == 0)) {
    char el[32], eta[48] = "";
    fmt_time(now - c->t0, el, sizeof el);
    if (e->n >= 8 && still) {
      double rate = log(e->r[0] / e->r[e->n - 1]) / (double)(e->n - 1); /* per iteration */
      double per = (e->t[e->n - 1] - e->t[0]) / (double)(e->n - 1);
      if (rate > 0) {
        char s[32];
        fmt_time(log(worst / tol) / rate * per, s, sizeof s);
        snprintf(eta, sizeof eta, ", ETA ~%s", s);
      }
    }
    fprintf(stderr, "ntkd: solve: cg %s iteration %zu: residual %.1e (worst of %zu column%s), %s%s\n",
            ntk_solve_kernel_name(c->p->which), it, worst, na, na == 1 ? "" : "s", el, eta);
    e->last_print = now;
  }
}

/* Collective: Z = M^-1 R for the `still` columns still running (v->act)
 * and their groups' next directions: Z - D B, B = (D^T (K + reg) D)^-1
 * ((K + reg) D)^T Z, conjugate to the group's last ones (as Polak-Ribiere's
 * beta does for one column: robust to the preconditioner's rounding),
 * orthonormalised. */
static ntk_status new_directions(struct cg *c, struct cgv *v, size_t still) {
  size_t n = c->n, nc = c->ncols, nd = v->nd, w;
  ntk_status st;
  pack(v->R, n, nc, v->act, still, v->Dn);
  for (size_t a = 0; a < still; a++) v->rid[a] = v->act[a] / c->classes;
  double tp = ntk_now();
  if ((st = precondition(c, v->Dn, v->Za, v->rid, still, v->w, v->corr))) return st;
  c->t_pre += ntk_now() - tp;
  for (size_t a0 = 0; a0 < still;) {
    size_t g = group_of(c, v->act[a0]), a1 = a0;
    while (a1 < still && group_of(c, v->act[a1]) == g) a1++;
    size_t s = a1 - a0, m = v->gm[g], j0 = v->g0[g];
    double *B = v->ab;
    small_gram(v->Qa, nd, j0, m, v->Za, still, a0, s, n, B);
    small_solve(v->G + v->goff[g], m, B, s);
    for (size_t i = 0; i < n; i++) memcpy(v->Dn + i * still + a0, v->Za + i * still + a0, s * sizeof *v->Dn);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)s, (int)m, -1.0, v->D + j0, (int)nd, B, (int)s,
                1.0, v->Dn + a0, (int)still);
    for (size_t a = a0; a < a1; a++) v->rid[a] = g;
    a0 = a1;
  }
  if ((st = orthonormalise(c, v, v->Dn, still, v->rid, &w))) return st;
  double *t = v->D;
  v->D = v->Dn, v->Dn = t, v->nd = w;
  memcpy(v->dg, v->rid, w * sizeof *v->dg);
  index_groups(c, v);
  return NTK_OK;
}

/* Collective: run CG on every column until each converges (relative
 * residual <= tol), fails, or uses max_it iterations. With c->f32 the
 * products below are float32 and update_columns refreshes the residuals
 * (the file's head says how). */
static ntk_status run_cg(struct cg *c, struct cgv *v, double tol, size_t max_it, size_t *total_it) {
  size_t nc = c->ncols;
  struct cg_eta eta = {0};
  int restarts = 0;
  ntk_status st;
  *total_it = 0;
  size_t na = start_columns(c, v);
  v->nd = 0;
  if ((st = restart(c, v, v->act, na, 1))) return st;
  for (;;) {
    na = 0;
    for (size_t q = 0; q < nc; q++)
      if (v->state[q] == COL_RUN) v->act[na++] = q;
    if (na == 0) { /* all done: check the true residual of the converged columns */
      int again;
      if ((st = recheck_converged(c, v, tol, max_it, &restarts, &again))) return st;
      if (!again) break;
      continue;
    }
    /* one product for every running group's directions */
    if ((st = product(c, v->D, v->Qa, v->nd, c->f32))) return st;
    (*total_it)++;
    size_t still;
    double worst;
    if ((st = update_columns(c, v, na, tol, max_it, &still, &worst))) return st;
    progress(c, &eta, worst, na, still, *total_it, tol);
    if (still && (st = new_directions(c, v, still))) return st;
    if (!still) v->nd = 0;
    if (v->nredo) { /* a breakdown on float32 products (update_columns) */
      c->f32 = 0;
      if (c->rank == 0)
        fprintf(stderr, "ntkd: solve: cg %s: a breakdown on float32 products in %zu column%s: float64 products from "
                "here on, restarting %s from the true residual\n", ntk_solve_kernel_name(c->p->which), v->nredo,
                v->nredo == 1 ? "" : "s", v->nredo == 1 ? "it" : "them");
      st = restart(c, v, v->redo, v->nredo, 0);
      v->nredo = 0;
      if (st) return st;
    }
  }
  return NTK_OK;
}

/* ---- the method ----------------------------------------------------------- */

/* What a rank needs in bytes and the memory available on its node, as
 * the ranks of a node exchange them. */
struct cg_need {
  double need, avail;
};

/* The problem's sizes, this rank's rows of the preconditioner. */
static void cg_init(struct cg *c, const struct ntk_solve_problem *p) {
  const struct ntk_store_info *in = ntk_store_get_info(p->store);
  memset(c, 0, sizeof *c);
  c->p = p, c->s = p->store, c->rank = p->rank, c->nranks = p->nranks;
  c->n = p->ntr, c->nte = p->nte, c->T = in->tile, c->elem = in->elem, c->classes = p->classes;
  c->ncols = p->nridge * p->classes;
  c->t0 = c->pace.last = ntk_now();
  size_t n = c->n, R = (size_t)c->nranks;
  c->lo = n * (size_t)c->rank / R, c->hi = n * ((size_t)c->rank + 1) / R;
}

/* The preconditioner's rank: [solve] preconditioner_rank, or n / 4 within
 * [100, CG_RANK_MAX]; at most n. */
static size_t precond_rank(const struct ntk_solve_problem *p, size_t n) {
  size_t k = p->opts->precond_rank;
  if (k == NTK_PRECOND_DEFAULT) {
    k = n / 4 < CG_RANK_MAX ? n / 4 : CG_RANK_MAX;
    if (k < 100) k = 100;
  }
  if (k > n) k = n;
  return k;
}

/* This rank's tiles (plan_tiles), the stream scratch, the shifts, the
 * diagonal *d and the CG vectors v for preconditioner rank k; *need:
 * the bytes this rank needs with its tiles held. */
static ntk_status cg_alloc(struct cg *c, struct cgv *v, size_t k, double **d, double *need) {
  const struct ntk_store_info *in = ntk_store_get_info(c->s);
  size_t n = c->n, nc = c->ncols;
  ntk_status st = plan_tiles(c);
  size_t edge = c->T < in->n ? c->T : (size_t)in->n;
  c->codec = ntk_codec_create(1);
  c->raw = malloc(ntk_store_raw_bytes(c->s, &(struct ntk_tile){0, 0, 0, 0, edge, 0, edge}) + 1);
  c->val = malloc(edge * edge * c->elem + 1);
  c->reg = malloc((nc + 1) * sizeof *c->reg);
  *d = malloc((n + 1) * sizeof **d);
  c->bsize = c->classes < CG_BLOCK_MAX ? c->classes : CG_BLOCK_MAX;
  if (getenv("NTKD_TEST_CG_UNBLOCKED") && atoi(getenv("NTKD_TEST_CG_UNBLOCKED"))) c->bsize = 1;
  v->X = malloc((n * nc + 1) * sizeof *v->X), v->R = malloc((n * nc + 1) * sizeof *v->R);
  v->D = malloc((n * nc + 1) * sizeof *v->D), v->Dn = malloc((n * nc + 1) * sizeof *v->Dn);
  v->Qa = malloc(((n > c->nte ? n : c->nte) * nc + 1) * sizeof *v->Qa), v->Za = malloc((n * nc + 1) * sizeof *v->Za);
  v->corr = malloc((n * nc + 1) * sizeof *v->corr), v->w = malloc((k * nc + 1) * sizeof *v->w);
  v->G = malloc((nc * c->bsize + 1) * sizeof *v->G), v->ab = malloc((c->bsize * c->bsize + 1) * sizeof *v->ab);
  v->bnorm = malloc((nc + 1) * sizeof *v->bnorm);
  v->res = calloc(nc + 1, sizeof *v->res), v->best = calloc(nc + 1, sizeof *v->best);
  v->dg = calloc(nc + 1, sizeof *v->dg), v->g0 = calloc(nc + 1, sizeof *v->g0), v->gm = calloc(nc + 1, sizeof *v->gm);
  v->goff = calloc(nc + 1, sizeof *v->goff), v->keep = calloc(nc + 1, 1), v->rid = malloc((nc + 1) * sizeof *v->rid);
  v->it = calloc(nc + 1, sizeof *v->it), v->act = malloc((nc + 1) * sizeof *v->act);
  v->state = calloc(nc + 1, sizeof *v->state), v->why = calloc(nc + 1, sizeof *v->why);
  v->rref = calloc(nc + 1, sizeof *v->rref), v->redo = calloc(nc + 1, sizeof *v->redo);
  c->f32 = c->elem == 4 && c->p->opts->cg_products != NTK_CG_PRODUCTS_FLOAT64;
  test_breakdown = getenv("NTKD_TEST_CG_BREAKDOWN") ? atol(getenv("NTKD_TEST_CG_BREAKDOWN")) : -1;
  if (c->rank == 0 && getenv("NTKD_TEST_CG_UNBLOCKED") && atoi(getenv("NTKD_TEST_CG_UNBLOCKED")))
    fprintf(stderr, "ntkd: test setting NTKD_TEST_CG_UNBLOCKED=%s\n", getenv("NTKD_TEST_CG_UNBLOCKED"));
  if (c->rank == 0 && getenv("NTKD_TEST_CG_BREAKDOWN")) /* said aloud, as every test setting (docs/CLI.md) */
    fprintf(stderr, "ntkd: test setting NTKD_TEST_CG_BREAKDOWN=%s\n", getenv("NTKD_TEST_CG_BREAKDOWN"));
  c->refresh = CG_REFRESH;
  size_t nl_k = c->hi - c->lo > k ? c->hi - c->lo : k; /* L's rows, or an inverse's (precondition) */
  size_t sk = ntk_skinny_scratch(edge, edge, nc, 1), sk_pre = ntk_skinny_scratch(nl_k, k, nc, 0);
  size_t sk_mixed = ntk_skinny_scratch(edge, edge, nc, NTK_SKINNY_MIXED);
  sk = sk > sk_pre ? sk : sk_pre;
  sk = sk > sk_mixed ? sk : sk_mixed;
  c->skinny = malloc(sk + 1);
  if (!st && !(c->codec && c->raw && c->val && c->reg && *d && v->X && v->R && v->D && v->Dn && v->Qa &&
               v->Za && v->corr && v->w && v->G && v->ab && v->bnorm && v->res && v->best && v->dg && v->g0 &&
               v->gm && v->goff && v->keep && v->rid && v->it && v->act && v->state && v->why && v->rref && v->redo &&
               c->skinny))
    st = ntk_error(NTK_ENOMEM, "out of memory for the conjugate-gradient vectors (%zu x %zu)", n, nc);
  /* what this rank needs besides the tiles: the vectors above, L, L^T L
   * and its ridges' inverses (the last in L^T L's place) and one more
   * k x k for the sum of L^T L (MPI's buffer), the batch of columns */
  double nl = (double)(c->hi - c->lo), owned = 0;
  for (size_t r = 0; r < c->p->nridge; r++) owned += ridge_owner(c, r) == c->rank;
  double other = 8.0 * (double)n * (double)nc * 7 + 8.0 * nl * (double)k +
                 8.0 * (double)k * (double)k * ((owned > 1 ? owned : 1) + 1) + 8.0 * (double)n * CG_BATCH +
                 3.0 * (double)edge * (double)edge * (double)c->elem * 2 + (double)sk;
  *need = c->tile_bytes + other;
  return st;
}

/* Collective: cg_kernel = memory where asked, or (auto) where every
 * node's ranks' needs fit in 80 % of its available memory; rank 0 says
 * which. OpenBLAS gets this node's cores shared by its ranks. */
static ntk_status choose_kernel_mode(struct cg *c, const struct cg_need *all, const struct ntk_node_info *node) {
  ntk_status st;
  { /* OpenBLAS threads: this node's cores shared by its ranks */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int th = cores > 0 ? (int)(cores / node->size) : 1;
    openblas_set_num_threads(th > 0 ? th : 1);
  }
  double node_need = 0;
  for (int i = 0; i < node->size; i++) node_need += all[i].need;
  double avail = all[0].avail, nofit = node_need > 0.8 * avail ? 1 : 0;
  if ((st = sum(c, &nofit, 1))) return st;
  double total_tiles = c->tile_bytes;
  if ((st = sum(c, &total_tiles, 1))) return st;
  int want = c->p->opts->cg_kernel;
  c->memory = want == NTK_CG_KERNEL_MEMORY || (want == NTK_CG_KERNEL_AUTO && nofit == 0);
  if (c->rank == 0)
    fprintf(stderr, "ntkd: solve: cg %s: %zu train tiles, %.2f GB of %s values: %s (node %s: %.1f GB needed, "
            "%.1f GB available)\n", ntk_solve_kernel_name(c->p->which), c->all_tr_t, total_tiles / 1e9,
            c->elem == 4 ? "float32" : "float64",
            c->memory ? "held in memory across the ranks" : "streamed from the store each iteration", node->host,
            node_need / 1e9, avail / 1e9);
  return NTK_OK;
}

/* Collective: this rank's tiles into memory (cg_kernel = memory); under
 * auto, where any rank runs out of memory, every rank streams them
 * instead. */
static ntk_status hold_tiles(struct cg *c) {
  const char *kn = ntk_solve_kernel_name(c->p->which);
  double t = ntk_now();
  ntk_status st = load_tiles(c);
  if (st == NTK_ENOMEM && c->p->opts->cg_kernel == NTK_CG_KERNEL_AUTO) st = NTK_OK, c->memory = -1; /* agreed below */
  double fallback = c->memory < 0;
  if ((st = agree(c, st))) return st;
  if ((st = sum(c, &fallback, 1))) return st;
  if (fallback > 0) {
    free_tiles(c);
    c->memory = 0;
    if (c->rank == 0) fprintf(stderr, "ntkd: solve: cg %s: out of memory holding the tiles: streaming them\n", kn);
  } else if (c->rank == 0) {
    fprintf(stderr, "ntkd: solve: cg %s: tiles loaded in %.1f s\n", kn, ntk_now() - t);
  }
  return NTK_OK;
}

/* Collective: the diagonal d, each column's shift (ridge times the mean
 * diagonal) and the preconditioner of rank k. */
static ntk_status shifts_and_preconditioner(struct cg *c, double *d, size_t k) {
  const struct ntk_solve_problem *p = c->p;
  size_t n = c->n;
  ntk_status st;
  if ((st = diagonal(c, d))) return st;
  double trace = 0;
  for (size_t i = 0; i < n; i++) trace += d[i];
  for (size_t r = 0; r < p->nridge; r++)
    for (size_t q = 0; q < c->classes; q++) c->reg[r * c->classes + q] = p->ridge[r] * (trace / (double)n);
  double t = ntk_now();
  double regs[NTK_MAX_RIDGES];
  for (size_t r = 0; r < p->nridge && r < NTK_MAX_RIDGES; r++) regs[r] = p->ridge[r] * (trace / (double)n);
  if ((st = build_preconditioner(c, k, d, regs, p->nridge, trace))) return st;
  if (c->rank == 0)
    fprintf(stderr, "ntkd: solve: cg %s: preconditioner: pivoted Cholesky of rank %zu (asked %zu), %zu pass%s over "
            "the tiles, %.1f s (of which %.1f s L^T L and its inverse per ridge)\n",
            ntk_solve_kernel_name(p->which), c->m, k, c->passes, c->passes == 1 ? "" : "es", ntk_now() - t, c->t_fac);
  return NTK_OK;
}

/* Collective: the predictions Y = K_test,train X (nte x ncols, into v->Qa),
 * each rank its test tiles, summed. */
static ntk_status test_predictions(struct cg *c, struct cgv *v) {
  size_t n = c->n, nc = c->ncols;
  ntk_status st = NTK_OK;
  double *Y = v->Qa; /* nte x nc */
  memset(Y, 0, c->nte * nc * sizeof *Y);
  for (size_t i = 0; i < c->nte_t && !st; i++) {
    const struct cg_tile *t = &c->te[i];
    const void *val;
    size_t ld;
    if ((st = tile_values(c, t, &val, &ld))) break;
    block_product(c, val, t->rows, t->cols, ld, v->X + t->c0 * nc, Y + (t->r0 - n) * nc, NULL, NULL, nc, 0);
    st = stop_check(c);
  }
  if ((st = agree(c, st))) return st;
  return sum(c, Y, c->nte * nc);
}

/* Each ridge's result from its columns (rank 0's residuals): iterations,
 * the worst residual (a failed column's best), why it failed; on rank 0
 * its predictions (from v->Qa) and alpha, and a line. */
static void ridge_outputs(struct cg *c, const struct cgv *v, struct ntk_ridge_out *out, double tol, size_t max_it) {
  const struct ntk_solve_problem *p = c->p;
  const char *kn = ntk_solve_kernel_name(p->which);
  size_t n = c->n, nc = c->ncols;
  const double *Y = v->Qa;
  for (size_t r = 0; r < p->nridge; r++) {
    struct ntk_ridge_out *o_r = &out[r];
    o_r->reg = c->reg[r * c->classes];
    o_r->rcond = 0;
    o_r->iterations = 0, o_r->residual = 0, o_r->failure = NTK_RIDGE_OK, o_r->why[0] = '\0';
    int why = WHY_NONE;
    for (size_t q = r * c->classes; q < (r + 1) * c->classes; q++) {
      /* a failed column: the best residual it reached */
      double rq = v->state[q] == COL_FAIL ? v->best[q] : v->res[q];
      o_r->iterations = v->it[q] > o_r->iterations ? v->it[q] : o_r->iterations;
      o_r->residual = rq > o_r->residual || isnan(rq) ? rq : o_r->residual;
      if (v->state[q] == COL_FAIL && why != WHY_BREAKDOWN) why = v->why[q];
      if (v->state[q] != COL_FAIL && v->res[q] > tol && why == WHY_NONE) why = v->it[q] < max_it ? WHY_DRIFT : WHY_MAXIT;
    }
    if (why != WHY_NONE) {
      o_r->failure = NTK_RIDGE_NOT_CONVERGED;
      if (!isfinite(o_r->reg))
        snprintf(o_r->why, sizeof o_r->why, "%s train kernel with ridge %g: the ridge times the mean of the "
                 "kernel's diagonal overflows float64 (%g added to the diagonal): choose a smaller ridge", kn,
                 p->ridge[r], o_r->reg);
      else if (why == WHY_BREAKDOWN)
        snprintf(o_r->why, sizeof o_r->why, "%s train kernel with ridge %g (%.3g added to the diagonal): conjugate "
                 "gradients broke down after %zu iterations, having reached a relative residual of %.1e (tolerance "
                 "%.0e): the matrix is not positive definite to working precision (duplicate samples and ridge "
                 "0?): increase the ridge", kn, p->ridge[r], o_r->reg, o_r->iterations, o_r->residual, tol);
      else if (why == WHY_DRIFT)
        snprintf(o_r->why, sizeof o_r->why, "%s train kernel with ridge %g (%.3g added to the diagonal): conjugate "
                 "gradients converged in %zu iterations, but the true residual stayed at %.1e, above the tolerance "
                 "%.0e, through %d restarts from it: rounding bounds the accuracy of a matrix this ill-conditioned "
                 "(more iterations do not help): increase the ridge or [solve] tolerance", kn, p->ridge[r],
                 o_r->reg, o_r->iterations, o_r->residual, tol, CG_RESTARTS);
      else
        snprintf(o_r->why, sizeof o_r->why, "%s train kernel with ridge %g (%.3g added to the diagonal): conjugate "
                 "gradients reached a relative residual of %.1e after %zu iterations, not the tolerance %.0e: "
                 "increase the ridge or [solve] max_iterations (now %zu)", kn, p->ridge[r], o_r->reg,
                 o_r->residual, o_r->iterations, tol, max_it);
    }
    if (c->rank == 0) {
      for (size_t i = 0; o_r->pred && i < c->nte; i++)
        for (size_t q = 0; q < c->classes; q++) o_r->pred[i * c->classes + q] = Y[i * nc + r * c->classes + q];
      for (size_t i = 0; o_r->alpha && i < n; i++)
        for (size_t q = 0; q < c->classes; q++) o_r->alpha[i * c->classes + q] = v->X[i * nc + r * c->classes + q];
      fprintf(stderr, "ntkd: solve: cg %s ridge %g: %zu iterations, relative residual %.1e%s\n", kn, p->ridge[r],
              o_r->iterations, o_r->residual, o_r->failure ? " (not converged)" : "");
    }
  }
}

/* Collective: rank 0's summary line: iterations and times, and the peak
 * memory of the worst rank and the worst node. */
static ntk_status report_summary(struct cg *c, size_t total_it, double tcg) {
  const ntk_comm_t *comm = c->p->comm;
  size_t R = (size_t)c->nranks;
  ntk_status st;
  double rss[2] = {ntk_solve_peak_rss(), 0};
  struct { double rss; } me = {rss[0]}, *nodes = NULL;
  struct ntk_node_info ni;
  double limit = wait_limit(c);
  if ((st = agree(c, synced(c, ntk_comm_node_gather_within(comm, &me, sizeof me, (void **)&nodes, &ni, limit),
                            limit)))) {
    free(nodes);
    return st;
  }
  double node_sum = 0, worst_rank = 0, worst_node = 0;
  for (int i = 0; i < ni.size; i++) node_sum += nodes[i].rss;
  free(nodes);
  worst_rank = rss[0], worst_node = ni.index == 0 ? node_sum : 0;
  double ww[2] = {worst_rank, worst_node};
  /* the largest over ranks and nodes, via a sum of one-hot slots */
  double *slots = calloc(2 * R + 1, sizeof *slots);
  if ((st = agree(c, slots ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory")))) {
    free(slots);
    return st;
  }
  slots[2 * (size_t)c->rank] = ww[0], slots[2 * (size_t)c->rank + 1] = ww[1];
  st = sum(c, slots, 2 * R);
  for (size_t r = 0; !st && r < R; r++) {
    worst_rank = slots[2 * r] > worst_rank ? slots[2 * r] : worst_rank;
    worst_node = slots[2 * r + 1] > worst_node ? slots[2 * r + 1] : worst_node;
  }
  free(slots);
  if (!st && c->rank == 0 && c->f32)
    fprintf(stderr, "ntkd: solve: cg %s: %zu true residuals (%zu columns) in float64: %.1f s of the products\n",
            ntk_solve_kernel_name(c->p->which), c->n_fresh, c->c_fresh, c->t_fresh);
  if (!st && c->rank == 0)
    fprintf(stderr, "ntkd: solve: cg %s: %zu iterations (products) in %.1f s (products %.1f s, waiting and summing "
            "%.1f s, preconditioner %.1f s on rank 0), %.1f s in all; peak memory %.2f GB per rank, %.2f GB per "
            "node\n", ntk_solve_kernel_name(c->p->which), total_it, tcg, c->t_prod, c->t_comm, c->t_pre,
            ntk_now() - c->t0, worst_rank / 1e9, worst_node / 1e9);
  return st;
}

ntk_status ntk_solve_cg(const struct ntk_solve_problem *p, struct ntk_ridge_out *out) {
  const struct ntk_solve_opts *o = p->opts;
  struct cg c;
  cg_init(&c, p);
  size_t nc = c.ncols;
  double tol = o->tolerance > 0 ? o->tolerance : CG_TOLERANCE;
  size_t max_it = o->max_iterations ? o->max_iterations : CG_MAX_ITERATIONS;
  size_t k = precond_rank(p, c.n);
  ntk_status st = NTK_OK;
  if (p->nridge > NTK_MAX_RIDGES) st = ntk_error(NTK_EINPUT, "more than %d ridges", NTK_MAX_RIDGES);
  else if (o->cg_products == NTK_CG_PRODUCTS_FLOAT32 && c.elem != 4) /* (a job file's: refused by the parser) */
    st = ntk_error(NTK_EINPUT, "[solve] cg_products = float32 needs a float32 kernel; this store holds float64 tiles "
                   "(use auto or float64)");
  else if (o->variance != NTK_VARIANCE_NO)
    st = ntk_error(NTK_EINPUT, "[solve] variance needs the inverse of the train kernel, which method = cg does not "
                   "form: use method = lapack or scalapack");
  if ((st = agree(&c, st))) return st;

  /* this rank's tiles and vectors; the kernel held or streamed */
  struct cg_need mine = {0, ntk_solve_mem_available()}, *all = NULL;
  struct ntk_node_info node;
  double *d = NULL;
  struct cgv v;
  memset(&v, 0, sizeof v);
  /* Every rank allocates, then all exchange (one that failed to allocate
   * skipped the exchange the others were in: a hang), within the limit. */
  if ((st = agree(&c, cg_alloc(&c, &v, k, &d, &mine.need)))) goto done;
  double limit = wait_limit(&c);
  st = synced(&c, ntk_comm_node_gather_within(p->comm, &mine, sizeof mine, (void **)&all, &node, limit), limit);
  if ((st = agree(&c, st))) goto done;
  if ((st = choose_kernel_mode(&c, all, &node))) goto done;
  if (c.memory && (st = hold_tiles(&c))) goto done;

  /* the diagonal, the shifts, the preconditioner */
  if ((st = shifts_and_preconditioner(&c, d, k))) goto done;

  /* conjugate gradients on every (ridge, class) column */
  size_t total_it = 0;
  double tcg = ntk_now();
  if ((st = run_cg(&c, &v, tol, max_it, &total_it))) goto done;
  tcg = ntk_now() - tcg;
  /* rank 0's residuals decide which ridges failed */
  if ((st = bcast(&c, v.res, nc * sizeof *v.res))) goto done;
  if ((st = bcast(&c, v.best, nc * sizeof *v.best))) goto done;

  /* predictions: K_test,train X, each rank its test tiles, summed */
  if ((st = test_predictions(&c, &v))) goto done;
  ridge_outputs(&c, &v, out, tol, max_it);
  st = report_summary(&c, total_it, tcg);

done:
  openblas_set_num_threads(1);
  free_tiles(&c);
  free(c.tr), free(c.te), free(c.raw), free(c.val), free(c.reg), free(c.L);
  for (size_t r = 0; r < NTK_MAX_RIDGES; r++) free(c.fac[r]);
  free(c.skinny);
  ntk_codec_free(c.codec);
  free(d), free(all);
  free_cgv(&v);
  return st;
}
