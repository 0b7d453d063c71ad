/* CNN kernels for a GPU block, written once for CUDA and for the host
 * emulation that tests them (src/backend/cuda/cnn_gpu.c): included through
 * each_precision.h (REAL, ABRELU_R, RSQRT, ERF, MAP; each name below
 * becomes name_f / name_d), with DEV (the function qualifiers) and
 * BLK_SYNC(B) (__syncthreads(), or a barrier) defined by the includer.
 *
 * Each function is the body of one block: thread B->tid of B->nt, block
 * (B->bx, B->by); `sm` is the block's shared memory. Work is split by
 * block-stride loops, and every BLK_SYNC is reached by all threads of the
 * block (no barrier inside thread-dependent branches). The arithmetic per
 * entry is the CPU's (src/kernels/cnn_impl.h): the same maps, the same
 * order of operations inside an entry; sums over many entries (readouts)
 * are in double as on the CPU but in another order, so float64 results
 * agree to rounding, and float32 ones (rounded once from those sums) in
 * practice to the bit.
 *
 * Shared memory: DIAG 4 H*W elements, SLICE 6 (h + 2 pad)(w + 2 pad)
 * elements, each plus 2 nt doubles; READOUT 2 nt doubles; the
 * full-covariance kernels none. */

/* The per-precision names this file defines (each_precision.h), ... */
#define dv_nonlin SFX(dv_nonlin)
#define dv_affine SFX(dv_affine)
#define dv_reduce SFX(dv_reduce)
#define dv_dot SFX(dv_dot)
#define dv_cell_nonlin SFX(dv_cell_nonlin)
#define dv_next_nonlin SFX(dv_next_nonlin)
#define dv_branch_diag SFX(dv_branch_diag)
#define dv_diag SFX(dv_diag)
#define dv_slice_blk SFX(dv_slice_blk)
#define dv_slice_geom SFX(dv_slice_geom)
#define dv_slice_setup SFX(dv_slice_setup)
#define dv_slice_load SFX(dv_slice_load)
#define dv_slice_swap SFX(dv_slice_swap)
#define dv_slice_conv SFX(dv_slice_conv)
#define dv_slice_conv_strided SFX(dv_slice_conv_strided)
#define dv_slice_dense SFX(dv_slice_dense)
#define dv_slice_nonlin SFX(dv_slice_nonlin)
#define dv_slice_branch SFX(dv_slice_branch)
#define dv_slice_branch_strided SFX(dv_slice_branch_strided)
#define dv_slice_geo SFX(dv_slice_geo)
#define dv_slice_store SFX(dv_slice_store)
#define dv_slice SFX(dv_slice)
#define dv_ldq SFX(dv_ldq)
#define s3_abrelu SFX(s3_abrelu)
#define s3_nl SFX(s3_nl)
#define s3_post SFX(s3_post)
#define s3ctx SFX(s3ctx)
#define s3me SFX(s3me)
#define s3_place SFX(s3_place)
#define s3_strip SFX(s3_strip)
#define s3_fast SFX(s3_fast)
#define dv_slice3 SFX(dv_slice3)
#define dv_input_full SFX(dv_input_full)
#define dv_conv_full SFX(dv_conv_full)
#define dv_pool_scale SFX(dv_pool_scale)
#define dv_pool_full SFX(dv_pool_full)
#define dv_branch_full SFX(dv_branch_full)
#define dv_readout SFX(dv_readout)
/* ... and the types of src/kernels/cnn_dev.h it uses. */
#define dv_pair SFX(dv_pair)
#define dv_quad SFX(dv_quad)

/* A nonlinearity on one entry. `any` is a constant of each kernel variant
 * (cnn_cuda.cu): 0 for runs whose maps are all ABRelu or Erf(1, 1, 0),
 * whose code alone is then compiled in (the other maps' code had cost the
 * SLICE kernel 30 registers: 48 -> 78, cuobjdump -res-usage); 1 for any
 * map, through the dispatcher. cnn_gpu.c picks the variant per run. */
static DEV DV_INLINE REAL dv_nonlin(const struct ntk_dev_op *o, REAL q12, REAL q11, REAL q22, REAL r11,
                                    REAL r22, REAL *td, int any) {
  if (any) return MAP(&o->map, q12, q11, q22, r11, r22, td);
  if (o->map.kind == NTK_MAP_ERF) return ERF(q12, q11, q22, td);
  return ABRELU_R((REAL)o->map.a, (REAL)o->map.b, q12, q11, q22, r11, r22, td);
}

/* Affine op o (Conv or Dense) on one entry, G and T the entry after the
 * layer's averaging: cnn_impl.h's affine1, in its order. 'ntk':
 * nngp' = W^2 G + b^2, ntk' = nngp' + W^2 T; 'standard': ntk' =
 * (fan G + one) + W^2 T. *t is 0 without the NTK. */
static DEV DV_INLINE void dv_affine(const struct ntk_dev_op *o, REAL G, REAL T, int with_t, REAL *g, REAL *t) {
  REAL w2 = (REAL)o->w2, b2 = (REAL)o->b2;
  if (o->standard) {
    *t = with_t ? ((REAL)o->fan * G + (REAL)o->one) + w2 * T : 0;
    *g = w2 * G + b2;
  } else {
    *g = w2 * G + b2;
    *t = with_t ? *g + w2 * T : 0;
  }
}

/* Block sums of (*sg, *st), in a fixed order for a given block size (so
 * a tile's values do not depend on scheduling): threads past the largest
 * power of two p <= nt fold into the first ones, then a tree of log2(p)
 * steps. The result in thread 0. In double whatever REAL is, as the CPU's
 * readout sums. red: 2 nt doubles of shared memory. */
static DEV void dv_reduce(struct ntk_blk *B, double *red, double *sg, double *st) {
  unsigned tid = B->tid, nt = B->nt, p = 1;
  while (2 * p <= nt) p *= 2;
  red[tid] = *sg;
  red[nt + tid] = *st;
  BLK_SYNC(B);
  if (tid >= p) {
    red[tid - p] += red[tid];
    red[nt + tid - p] += red[nt + tid];
  }
  BLK_SYNC(B);
  for (unsigned half = p / 2; half > 0; half /= 2) {
    if (tid < half) {
      red[tid] += red[tid + half];
      red[nt + tid] += red[nt + tid + half];
    }
    BLK_SYNC(B);
  }
  *sg = red[0];
  *st = red[nt];
  BLK_SYNC(B); /* red may be reused */
}

static DEV REAL dv_dot(const REAL *xa, const REAL *xb, int C) {
  REAL sum = 0;
  for (int k = 0; k < C; k++) sum += xa[k] * xb[k];
  return sum / (REAL)C;
}

/* Nonlinearity o on one entry (g, t) pairing a's position p with b's
 * position q; qa, qb: the layer's variance slots of a and b (per
 * position NTK_DEV_VSLOT elements: the variance, its RSQRT, and the
 * products v, u of cnn_dev.h). When `capture` (a pair (a, a) at offset 0,
 * so p == q and qa == qb), a's slot at p is written first: the thread that
 * owns the entry is the only one that reads it in this launch. */
static DEV DV_INLINE void dv_cell_nonlin(const struct ntk_dev_op *o, int any, int capture, REAL *qa, const REAL *qb, unsigned p,
                                    unsigned q, REAL *g, REAL *t, int with_t) {
  if (capture) {
    qa[NTK_DEV_VSLOT * p] = *g;
    qa[NTK_DEV_VSLOT * p + 1] = RSQRT(*g);
    qa[NTK_DEV_VSLOT * p + 2] = qa[NTK_DEV_VSLOT * p] * qa[NTK_DEV_VSLOT * p + 1];
    qa[NTK_DEV_VSLOT * p + 3] = qa[NTK_DEV_VSLOT * p + 2] * qa[NTK_DEV_VSLOT * p + 1];
  }
  REAL td;
  *g = dv_nonlin(o, *g, qa[NTK_DEV_VSLOT * p], qb[NTK_DEV_VSLOT * q], qa[NTK_DEV_VSLOT * p + 1],
                 qb[NTK_DEV_VSLOT * q + 1], &td, any);
  if (with_t) *t *= td;
}

/* The nonlinearity right after op k, if any: fused into the convolution's
 * last pass (it is pointwise, and reads only its own entry). */
static DEV const struct ntk_dev_op *dv_next_nonlin(const struct ntk_dev_plan *P, int k, int k1) {
  return k + 1 < k1 && P->ops[k + 1].var_off >= 0 ? &P->ops[k + 1] : (const struct ntk_dev_op *)0;
}

/* ---- DIAG: one pair per block, same-position entries, all layers ------- */

/* A residual block's FORK, NEXT or JOIN on the pair's same-position
 * values dg, dt (shared memory): branch.h's operations, in its order, on
 * the pair's stack in global memory (4 arrays of bstride elements per
 * depth). Each thread owns its positions; the caller synchronises. */
static DEV DV_INLINE void dv_branch_diag(const struct ntk_dev_args *A, struct ntk_blk *B,
                                         const struct ntk_dev_op *o, size_t pair, REAL *dg, REAL *dt) {
  size_t n = (size_t)o->hi * o->wi, n_in = (size_t)o->ho * o->wo, cap = A->bstride, m = n > n_in ? n : n_in;
  REAL *slot = (REAL *)A->bstack + (pair * (size_t)A->P->branch_depth + (size_t)o->depth) * 4 * cap;
  REAL w = (REAL)o->fanw, div = (REAL)o->fandiv;
  for (size_t e = B->tid; e < m; e += B->nt) {
    if (o->kind == NTK_LAYER_FORK) {
      if (e < n) {
        slot[e] = dg[e];
        slot[cap + e] = dt[e];
      }
    } else if (o->kind == NTK_LAYER_NEXT) {
      if (e < n && o->prod && !o->first) { /* FanInProd: the product rule (branch.h) */
        slot[3 * cap + e] = slot[3 * cap + e] * dg[e] + slot[2 * cap + e] * dt[e];
        slot[2 * cap + e] *= dg[e];
      } else if (e < n) {
        slot[2 * cap + e] = o->first ? w * dg[e] : slot[2 * cap + e] + w * dg[e];
        slot[3 * cap + e] = o->first ? w * dt[e] : slot[3 * cap + e] + w * dt[e];
      }
      if (e < n_in) {
        dg[e] = slot[e];
        dt[e] = slot[cap + e];
      }
    } else if (e < n && o->branches > 1 && o->prod) { /* JOIN of FanInProd */
      dt[e] = slot[3 * cap + e] * dg[e] + slot[2 * cap + e] * dt[e];
      dg[e] = slot[2 * cap + e] * dg[e];
    } else if (e < n && o->branches > 1) { /* JOIN */
      dg[e] = slot[2 * cap + e] + w * dg[e];
      dt[e] = slot[3 * cap + e] + w * dt[e];
      if (div != 0) {
        dg[e] /= div;
        dt[e] /= div;
      }
    }
  }
}

static DEV DV_INLINE void dv_diag(const struct ntk_dev_args *A, struct ntk_blk *B, REAL *sm, int any) {
  const struct ntk_dev_plan *P = A->P;
  size_t pair = B->bx, n0 = (size_t)P->H * (size_t)P->W, d = n0 * (size_t)P->C;
  unsigned tid = B->tid, nt = B->nt;
  int with_t = A->with_t;
  const REAL *xa = (const REAL *)A->x + A->pa[pair] * d, *xb = (const REAL *)A->x + A->pb[pair] * d;
  REAL *va = (REAL *)A->var + A->pa[pair] * (size_t)P->var_size;
  const REAL *vb = (const REAL *)A->var + A->pb[pair] * (size_t)P->var_size;
  REAL *dg = sm, *dt = sm + n0, *ng = sm + 2 * n0, *nt_ = sm + 3 * n0;
  double *red = (double *)(void *)(sm + 4 * n0); /* 8-byte aligned: 4 n0 elements of 4 or 8 bytes */
  for (size_t p = tid; p < n0; p += nt) {
    dg[p] = dv_dot(xa + p * (size_t)P->C, xb + p * (size_t)P->C, P->C);
    dt[p] = 0;
  }
  BLK_SYNC(B);
  for (int k = 0; k < P->nops; k++) {
    const struct ntk_dev_op *o = &P->ops[k];
    size_t n = (size_t)o->ho * (size_t)o->wo;
    if (o->kind == NTK_LAYER_CONV) {
      const struct ntk_dev_op *nl = dv_next_nonlin(P, k, P->nops);
      REAL scale = (REAL)(1.0 / (double)(o->fh * o->fw));
      float inv = 1.0f / (float)o->wo;
      for (unsigned p = tid; p < (unsigned)n; p += nt) {
        unsigned pi, pj;
        DV_CELL(p, (unsigned)o->wo, inv, pi, pj);
        int i = (int)pi, j = (int)pj;
        REAL sg = 0, st = 0;
        for (int a = 0; a < o->fh; a++) { /* rows, then columns: conv_diag's order */
          int r = o->sh * i + a - o->lo_h;
          if (o->circular) r = (r % o->hi + o->hi) % o->hi;
          else if (r < 0 || r >= o->hi) continue;
          REAL rg = 0, rt = 0;
          for (int b = 0; b < o->fw; b++) {
            int c = o->sw * j + b - o->lo_w;
            if (o->circular) c = (c % o->wi + o->wi) % o->wi;
            else if (c < 0 || c >= o->wi) continue;
            rg += dg[r * o->wi + c];
            rt += dt[r * o->wi + c];
          }
          sg += rg;
          st += rt;
        }
        REAL g, t;
        dv_affine(o, sg * scale, st * scale, with_t, &g, &t);
        if (nl) dv_cell_nonlin(nl, any, A->self, va + nl->var_off, vb + nl->var_off, p, p, &g, &t, with_t);
        ng[p] = g;
        nt_[p] = t;
      }
      BLK_SYNC(B);
      REAL *x = dg;
      dg = ng;
      ng = x;
      x = dt;
      dt = nt_;
      nt_ = x;
      if (nl) k++;
    } else if (o->kind == NTK_LAYER_DENSE) {
      for (size_t p = tid; p < n; p += nt) {
        REAL g, t;
        dv_affine(o, dg[p], dt[p], with_t, &g, &t);
        dg[p] = g;
        if (with_t) dt[p] = t;
      }
      BLK_SYNC(B);
    } else if (o->var_off >= 0) {
      REAL *qa = va + o->var_off;
      const REAL *qb = vb + o->var_off;
      for (unsigned p = tid; p < (unsigned)n; p += nt)
        dv_cell_nonlin(o, any, A->self, qa, qb, p, p, &dg[p], &dt[p], with_t);
      BLK_SYNC(B);
    } else if (o->kind == NTK_LAYER_FORK || o->kind == NTK_LAYER_NEXT || o->kind == NTK_LAYER_JOIN) {
      dv_branch_diag(A, B, o, pair, dg, dt);
      BLK_SYNC(B);
    }
  }
  size_t n = (size_t)P->out_h * (size_t)P->out_w;
  double sg = 0, st = 0;
  for (size_t p = tid; p < n; p += nt) {
    sg += (double)dg[p];
    st += (double)dt[p];
  }
  dv_reduce(B, red, &sg, &st);
  if (tid == 0) {
    double *part = (double *)A->part + pair * 2;
    part[0] = sg;
    part[1] = st;
  }
}

/* ---- SLICE: one offset of one pair through a run of slice-local ops ------ */

/* What every step of a SLICE block shares: the slice's size h x w and
 * border, this block's offset (di, dj: its valid cells [i0, i1) x [j0,
 * j1), nvalid of them, vw a row) and pair, the two images' variance
 * blocks, and the block's shared-memory arrays, `cells` elements each (the
 * run's first size, its largest: a strided Conv takes the slice to a
 * smaller size and offset, cnn.c's plan_chain). In-block indices are
 * 32-bit: a slice block holds at most a few thousand cells (shared
 * memory); global offsets stay size_t. */
struct dv_slice_blk {
  unsigned h, w, hw, pad, ld, cells, tid, nt;
  size_t pair;
  int with_t;
  int di, dj;
  unsigned i0, i1, j0, j1, vw, nvalid;
  float inv;        /* 1 / vw, for DV_CELL */
  int shift;        /* image b's position of a's position p is p - shift */
  REAL *va;
  const REAL *vb;
  REAL *g, *t, *g2, *t2, *rows, *rows_t; /* bordered arrays of `cells` elements */
  double *red;      /* dv_reduce's 2 nt doubles */
  REAL *stk;        /* residual blocks: 4 bordered arrays per depth */
};

/* The slice's size h x w and offset (di, dj), and what follows from them;
 * `empty`: no valid cells (an offset past a VALID convolution's output,
 * and every slice after it: cnn_impl.h's slice_conv_strided). */
static DEV DV_INLINE void dv_slice_geom(struct dv_slice_blk *S, unsigned h, unsigned w, int di, int dj, int empty) {
  S->h = h, S->w = w, S->hw = h * w, S->ld = w + 2 * S->pad;
  S->di = di, S->dj = dj;
  S->i0 = di > 0 ? (unsigned)di : 0, S->i1 = di < 0 ? (unsigned)((int)h + di) : h;
  S->j0 = dj > 0 ? (unsigned)dj : 0, S->j1 = dj < 0 ? (unsigned)((int)w + dj) : w;
  if (empty) S->i0 = S->i1 = S->j0 = S->j1 = 0;
  S->vw = S->j1 - S->j0, S->nvalid = (S->i1 - S->i0) * S->vw;
  S->inv = S->vw ? 1.0f / (float)S->vw : 0.0f;
  S->shift = di * (int)w + dj;
}

/* The block's offset and arrays (see struct dv_slice_blk). */
static DEV DV_INLINE void dv_slice_setup(const struct ntk_dev_args *A, const struct ntk_blk *B, REAL *sm,
                                         struct dv_slice_blk *S) {
  const struct ntk_dev_plan *P = A->P;
  S->pad = (unsigned)P->pad;
  S->cells = ((unsigned)A->w + 2 * S->pad) * ((unsigned)A->h + 2 * S->pad);
  S->tid = B->tid, S->nt = B->nt;
  S->pair = B->by;
  S->with_t = A->with_t;
  int nbw = 2 * (A->bw / A->mw) + 1; /* the band's lattice points: offsets bx / nbw, bx % nbw of it */
  int di = A->capture ? 0 : ((int)B->bx / nbw) * A->mh - A->bh, dj = A->capture ? 0 : ((int)B->bx % nbw) * A->mw - A->bw;
  dv_slice_geom(S, (unsigned)A->h, (unsigned)A->w, di, dj, 0);
  S->va = (REAL *)A->var + A->pa[S->pair] * (size_t)P->var_size;
  S->vb = (const REAL *)A->var + A->pb[S->pair] * (size_t)P->var_size;
  unsigned cells = S->cells;
  S->g = sm, S->t = sm + cells, S->g2 = sm + 2 * cells, S->t2 = sm + 3 * cells, S->rows = sm + 4 * cells;
  S->rows_t = sm + 5 * cells;
  S->red = (double *)(void *)(sm + 6 * cells); /* 8-byte aligned: 6 cells elements of 4 or 8 bytes */
  S->stk = (REAL *)(void *)(S->red + 2 * S->nt);
}

/* The slice's entries, from the images (from_x) or the pair's covariance
 * fg, ft, inside zero borders: SAME padding for every convolution of the
 * run. */
static DEV DV_INLINE void dv_slice_load(const struct ntk_dev_args *A, struct ntk_blk *B, REAL *sm,
                                        const struct dv_slice_blk *S) {
  const struct ntk_dev_plan *P = A->P;
  unsigned C = (unsigned)P->C, ii, jj;
  size_t pair = S->pair, d = (size_t)P->H * P->W * C;
  for (unsigned k = S->tid; k < 4 * S->cells; k += S->nt) sm[k] = 0;
  BLK_SYNC(B);
  for (unsigned k = S->tid; k < S->nvalid; k += S->nt) {
    DV_CELL(k, S->vw, S->inv, ii, jj);
    unsigned i = S->i0 + ii, j = S->j0 + jj, p = i * S->w + j, q = (unsigned)((int)p - S->shift);
    REAL gv, tv = 0;
    if (A->from_x) {
      gv = dv_dot((const REAL *)A->x + A->pa[pair] * d + (size_t)p * C,
                  (const REAL *)A->x + A->pb[pair] * d + (size_t)q * C, (int)C);
    } else {
      size_t at = pair * A->fstride + ntk_dev_full_slice(S->di, S->dj, S->h, S->w) + p;
      gv = ((const REAL *)A->fg)[at];
      if (S->with_t) tv = ((const REAL *)A->ft)[at];
    }
    S->g[(i + S->pad) * S->ld + S->pad + j] = gv;
    S->t[(i + S->pad) * S->ld + S->pad + j] = tv;
  }
  BLK_SYNC(B);
}

/* A layer's output (g2, t2) becomes the slice (g, t). */
static DEV DV_INLINE void dv_slice_swap(struct dv_slice_blk *S) {
  REAL *x = S->g;
  S->g = S->g2;
  S->g2 = x;
  x = S->t;
  S->t = S->t2;
  S->t2 = x;
}

/* Conv o (op k) on the slice: row sums of NNGP and NTK for every row read
 * below; then per cell the column sums, the affine map and a following
 * nonlinearity, in the CPU's order per entry: two barriers per Conv +
 * nonlinearity. Returns 1 when it took that nonlinearity (op k + 1). */
static DEV DV_INLINE int dv_slice_conv(const struct ntk_dev_args *A, struct ntk_blk *B, struct dv_slice_blk *S,
                                       const struct ntk_dev_op *o, int k, int any) {
  const struct ntk_dev_op *nl = dv_next_nonlin(A->P, k, A->k1);
  unsigned tid = S->tid, nt = S->nt, pad = S->pad, ld = S->ld, vw = S->vw, ii, jj;
  unsigned fh = (unsigned)o->fh, fw = (unsigned)o->fw, lo = (unsigned)o->lo_h, lo_w = (unsigned)o->lo_w;
  unsigned r0 = S->i0 + pad - lo, nr = (S->i1 - S->i0) + fh - 1;
  REAL scale = (REAL)(1.0 / (double)(fh * fw));
  for (unsigned k2 = tid; k2 < nr * vw; k2 += nt) {
    DV_CELL(k2, vw, S->inv, ii, jj);
    unsigned r = r0 + ii, j = S->j0 + jj, at = r * ld + pad - lo_w + j;
    REAL sg = 0, st = 0;
    for (unsigned b = 0; b < fw; b++) sg += S->g[at + b];
    S->rows[r * ld + j] = sg;
    if (S->with_t) {
      for (unsigned b = 0; b < fw; b++) st += S->t[at + b];
      S->rows_t[r * ld + j] = st;
    }
  }
  BLK_SYNC(B);
  for (unsigned k2 = tid; k2 < S->nvalid; k2 += nt) {
    DV_CELL(k2, vw, S->inv, ii, jj);
    unsigned i = S->i0 + ii, j = S->j0 + jj, idx = (i + pad) * ld + pad + j, p = i * S->w + j;
    REAL sg = 0, st = 0;
    for (unsigned a = 0; a < fh; a++) sg += S->rows[(i + pad - lo + a) * ld + j];
    if (S->with_t)
      for (unsigned a = 0; a < fh; a++) st += S->rows_t[(i + pad - lo + a) * ld + j];
    REAL gv, tv;
    dv_affine(o, sg * scale, st * scale, S->with_t, &gv, &tv);
    if (nl)
      dv_cell_nonlin(nl, any, A->capture, S->va + nl->var_off, S->vb + nl->var_off, p,
                     (unsigned)((int)p - S->shift), &gv, &tv, S->with_t);
    S->g2[idx] = gv;
    S->t2[idx] = tv;
  }
  BLK_SYNC(B);
  dv_slice_swap(S);
  return nl != NULL;
}

/* A convolution of any stride and padding but CIRCULAR that a slice run
 * carries (cnn.c's plan_chain): the output slice of offset (di / sh,
 * dj / sw) from this one (the lattice makes the division exact), each
 * entry conv_full's taps in its order, a tap outside the input in either
 * image skipped as conv_full skips it, then scaled and the affine map:
 * cnn_impl.h's slice_conv_strided, the same bits. The slice takes the
 * output's size, offset and valid cells, inside zero borders. */
static DEV DV_INLINE void dv_slice_conv_strided(struct ntk_blk *B, struct dv_slice_blk *S,
                                                const struct ntk_dev_op *o) {
  int sh = o->sh, sw = o->sw, ho = o->ho, wo = o->wo, idi = S->di, idj = S->dj;
  unsigned pad = S->pad, ldi = S->ld, ii, jj;
  int di = idi / sh, dj = idj / sw;
  int empty = S->nvalid == 0 || (di < 0 ? ho + di : ho) <= (di > 0 ? di : 0) ||
              (dj < 0 ? wo + dj : wo) <= (dj > 0 ? dj : 0);
  const REAL *ing = S->g, *int_ = S->t;
  dv_slice_geom(S, (unsigned)ho, (unsigned)wo, di, dj, empty);
  unsigned cells2 = S->ld * (S->h + 2 * pad);
  for (unsigned k = S->tid; k < cells2; k += S->nt) {
    S->g2[k] = 0;
    S->t2[k] = 0;
  }
  BLK_SYNC(B);
  REAL scale = (REAL)(1.0 / (double)(o->fh * o->fw));
  for (unsigned k2 = S->tid; k2 < S->nvalid; k2 += S->nt) {
    DV_CELL(k2, S->vw, S->inv, ii, jj);
    int i = (int)(S->i0 + ii), j = (int)(S->j0 + jj);
    REAL sg = 0, st = 0;
    for (int a = 0; a < o->fh; a++) {
      int r1 = sh * i + a - o->lo_h, r2 = r1 - idi;
      if (r1 < 0 || r1 >= o->hi || r2 < 0 || r2 >= o->hi) continue;
      for (int b = 0; b < o->fw; b++) {
        int c1 = sw * j + b - o->lo_w, c2 = c1 - idj;
        if (c1 < 0 || c1 >= o->wi || c2 < 0 || c2 >= o->wi) continue;
        unsigned at = ((unsigned)r1 + pad) * ldi + pad + (unsigned)c1;
        sg += ing[at];
        if (S->with_t) st += int_[at];
      }
    }
    REAL gv, tv;
    dv_affine(o, sg * scale, st * scale, S->with_t, &gv, &tv);
    unsigned idx = ((unsigned)i + pad) * S->ld + pad + (unsigned)j;
    S->g2[idx] = gv;
    S->t2[idx] = tv;
  }
  BLK_SYNC(B);
  dv_slice_swap(S);
  /* the next stride-1 Conv writes only the valid cells of g2, t2: the
   * rest zero in the new size */
  for (unsigned k = S->tid; k < cells2; k += S->nt) {
    S->g2[k] = 0;
    S->t2[k] = 0;
  }
  BLK_SYNC(B);
}

/* Dense op o on the slice's valid cells. */
static DEV DV_INLINE void dv_slice_dense(struct ntk_blk *B, const struct dv_slice_blk *S, const struct ntk_dev_op *o) {
  unsigned ii, jj;
  for (unsigned k2 = S->tid; k2 < S->nvalid; k2 += S->nt) {
    DV_CELL(k2, S->vw, S->inv, ii, jj);
    unsigned idx = (S->i0 + ii + S->pad) * S->ld + S->pad + S->j0 + jj;
    REAL gv, tv;
    dv_affine(o, S->g[idx], S->t[idx], S->with_t, &gv, &tv);
    S->g[idx] = gv;
    if (S->with_t) S->t[idx] = tv;
  }
  BLK_SYNC(B);
}

/* Nonlinearity o on the slice's valid cells (in a capture run, recording
 * the variances). */
static DEV DV_INLINE void dv_slice_nonlin(const struct ntk_dev_args *A, struct ntk_blk *B,
                                          const struct dv_slice_blk *S, const struct ntk_dev_op *o, int any) {
  unsigned ii, jj;
  for (unsigned k2 = S->tid; k2 < S->nvalid; k2 += S->nt) {
    DV_CELL(k2, S->vw, S->inv, ii, jj);
    unsigned i = S->i0 + ii, j = S->j0 + jj, idx = (i + S->pad) * S->ld + S->pad + j, p = i * S->w + j;
    dv_cell_nonlin(o, any, A->capture, S->va + o->var_off, S->vb + o->var_off, p, (unsigned)((int)p - S->shift),
                   &S->g[idx], &S->t[idx], S->with_t);
  }
  BLK_SYNC(B);
}

/* A slice-local residual block's FORK, NEXT or JOIN o (stride-1 SAME:
 * every branch keeps the size): branch.h's operations on the offset's
 * valid cells. */
static DEV DV_INLINE void dv_slice_branch(struct ntk_blk *B, const struct dv_slice_blk *S,
                                          const struct ntk_dev_op *o) {
  unsigned cells = S->cells, ii, jj;
  REAL *g = S->g, *t = S->t;
  REAL *slot = S->stk + 4 * cells * (unsigned)o->depth, fw = (REAL)o->fanw, div = (REAL)o->fandiv;
  for (unsigned k2 = S->tid; k2 < S->nvalid; k2 += S->nt) {
    DV_CELL(k2, S->vw, S->inv, ii, jj);
    unsigned idx = (S->i0 + ii + S->pad) * S->ld + S->pad + S->j0 + jj;
    if (o->kind == NTK_LAYER_FORK) {
      slot[idx] = g[idx];
      slot[cells + idx] = t[idx];
    } else if (o->kind == NTK_LAYER_NEXT) {
      if (o->prod && !o->first) { /* FanInProd: the product rule (branch.h) */
        slot[3 * cells + idx] = slot[3 * cells + idx] * g[idx] + slot[2 * cells + idx] * t[idx];
        slot[2 * cells + idx] *= g[idx];
      } else {
        slot[2 * cells + idx] = o->first ? fw * g[idx] : slot[2 * cells + idx] + fw * g[idx];
        slot[3 * cells + idx] = o->first ? fw * t[idx] : slot[3 * cells + idx] + fw * t[idx];
      }
      g[idx] = slot[idx];
      t[idx] = slot[cells + idx];
    } else if (o->branches > 1 && o->prod) {
      t[idx] = slot[3 * cells + idx] * g[idx] + slot[2 * cells + idx] * t[idx];
      g[idx] = slot[2 * cells + idx] * g[idx];
    } else if (o->branches > 1) {
      g[idx] = slot[2 * cells + idx] + fw * g[idx];
      t[idx] = slot[3 * cells + idx] + fw * t[idx];
      if (div != 0) {
        g[idx] /= div;
        t[idx] /= div;
      }
    }
  }
  BLK_SYNC(B);
}

/* A slice's size and offset at a strided block's FORK, for each of its
 * NEXTs to return to. */
struct dv_slice_geo {
  int h, w, di, dj, empty;
};

/* FORK, NEXT or JOIN o of a strided block a slice run carries (its
 * branches' strides multiply to the same number): branch.h's operations
 * on the whole arrays, zero borders included, at the slice's size (a NEXT
 * adds its branch's end, then restores the block's input and its size):
 * cnn_impl.h's slice_branch, entry by entry. */
static DEV DV_INLINE void dv_slice_branch_strided(struct ntk_blk *B, struct dv_slice_blk *S,
                                                  const struct ntk_dev_op *o, struct dv_slice_geo *geo) {
  unsigned cap = S->cells, n = S->ld * (S->h + 2 * S->pad), n_in = n;
  REAL *slot = S->stk + 4 * cap * (unsigned)o->depth, *g = S->g, *t = S->t, fw = (REAL)o->fanw;
  REAL div = (REAL)o->fandiv;
  int with_t = S->with_t;
  struct dv_slice_geo *in = &geo[o->depth];
  if (o->kind == NTK_LAYER_FORK) {
    for (unsigned k = S->tid; k < n; k += S->nt) {
      slot[k] = g[k];
      if (with_t) slot[cap + k] = t[k];
    }
    in->h = (int)S->h, in->w = (int)S->w, in->di = S->di, in->dj = S->dj, in->empty = S->nvalid == 0;
  } else if (o->kind == NTK_LAYER_NEXT) {
    n_in = ((unsigned)in->w + 2 * S->pad) * ((unsigned)in->h + 2 * S->pad);
    unsigned m = n > n_in ? n : n_in;
    for (unsigned k = S->tid; k < m; k += S->nt) {
      if (k < n && o->prod && !o->first) { /* FanInProd: the product rule, t first */
        if (with_t) slot[3 * cap + k] = slot[3 * cap + k] * g[k] + slot[2 * cap + k] * t[k];
        slot[2 * cap + k] *= g[k];
      } else if (k < n) {
        slot[2 * cap + k] = o->first ? fw * g[k] : slot[2 * cap + k] + fw * g[k];
        if (with_t) slot[3 * cap + k] = o->first ? fw * t[k] : slot[3 * cap + k] + fw * t[k];
      }
      if (k < n_in) {
        g[k] = slot[k];
        if (with_t) t[k] = slot[cap + k];
        S->g2[k] = 0; /* zero again at the block input's size */
        S->t2[k] = 0;
      }
    }
    dv_slice_geom(S, (unsigned)in->h, (unsigned)in->w, in->di, in->dj, in->empty);
  } else if (o->branches > 1) {
    for (unsigned k = S->tid; k < n; k += S->nt) {
      if (o->prod) {
        if (with_t) t[k] = slot[3 * cap + k] * g[k] + slot[2 * cap + k] * t[k];
        g[k] = slot[2 * cap + k] * g[k];
      } else {
        g[k] = slot[2 * cap + k] + fw * g[k];
        if (with_t) t[k] = slot[3 * cap + k] + fw * t[k];
        if (div != 0) {
          g[k] /= div;
          if (with_t) t[k] /= div;
        }
      }
    }
  }
  BLK_SYNC(B);
}

/* The slice's result: its sums into the block's part entry (a run into
 * GlobalAvgPool), or back into the pair's covariance (only this offset's
 * entries; into ng, nt when the run changed the size, where in fg they
 * would overwrite entries other blocks still load). */
static DEV DV_INLINE void dv_slice_store(const struct ntk_dev_args *A, struct ntk_blk *B,
                                         const struct dv_slice_blk *S) {
  unsigned ii, jj;
  if (A->to_part) {
    double sg = 0, st = 0;
    for (unsigned k = S->tid; k < S->nvalid; k += S->nt) {
      DV_CELL(k, S->vw, S->inv, ii, jj);
      unsigned idx = (S->i0 + ii + S->pad) * S->ld + S->pad + S->j0 + jj;
      sg += (double)S->g[idx];
      if (S->with_t) st += (double)S->t[idx];
    }
    dv_reduce(B, S->red, &sg, &st);
    if (S->tid == 0) {
      double *part = (double *)A->part + (S->pair * (size_t)A->noff + B->bx) * 2;
      part[0] = sg;
      part[1] = st;
    }
    return;
  }
  for (unsigned k = S->tid; k < S->nvalid; k += S->nt) {
    DV_CELL(k, S->vw, S->inv, ii, jj);
    unsigned i = S->i0 + ii, j = S->j0 + jj, idx = (i + S->pad) * S->ld + S->pad + j, p = i * S->w + j;
    size_t at = S->pair * A->fstride + ntk_dev_full_slice(S->di, S->dj, S->h, S->w) + p;
    ((REAL *)(A->moved ? A->ng : A->fg))[at] = S->g[idx];
    if (S->with_t) ((REAL *)(A->moved ? A->nt : A->ft))[at] = S->t[idx];
  }
}

/* One offset (block bx) of one pair (block by) through ops [k0, k1) of the
 * plan, all carried by a slice run (chain), in shared memory; a capture
 * run (the zero offset) only records the variances. */
static DEV DV_INLINE void dv_slice(const struct ntk_dev_args *A, struct ntk_blk *B, REAL *sm, int any) {
  const struct ntk_dev_plan *P = A->P;
  struct dv_slice_blk S;
  struct dv_slice_geo geo[NTK_DEV_MAXDEPTH]; /* strided blocks: the slice at each open FORK */
  dv_slice_setup(A, B, sm, &S);
  dv_slice_load(A, B, sm, &S);
  for (int k = A->k0; k < A->k1; k++) {
    const struct ntk_dev_op *o = &P->ops[k];
    if (o->kind == NTK_LAYER_CONV && o->slice_local) k += dv_slice_conv(A, B, &S, o, k, any);
    else if (o->kind == NTK_LAYER_CONV) dv_slice_conv_strided(B, &S, o); /* to the output's size */
    else if (o->kind == NTK_LAYER_DENSE) dv_slice_dense(B, &S, o);
    else if (o->var_off >= 0) dv_slice_nonlin(A, B, &S, o, any);
    else if (o->kind == NTK_LAYER_FORK || o->kind == NTK_LAYER_NEXT || o->kind == NTK_LAYER_JOIN) {
      if (o->slice_local) dv_slice_branch(B, &S, o);
      else dv_slice_branch_strided(B, &S, o, geo);
    }
  }
  if (A->capture) return;
  dv_slice_store(A, B, &S);
}

/* ---- SLICE3: every offset of a run of 3x3 convolutions, packed ----------- */

#ifndef DV_OPAQUE
#ifdef __CUDA_ARCH__
#define DV_OPAQUE(p) asm("" : "+l"(p)) /* an empty asm: the compiler no longer sees where p came from */
#else
#define DV_OPAQUE(p) (void)0
#endif
#endif

/* The fast path of SLICE for a run whose convolutions all have f = 3 (the
 * CNTK and Myrtle stages). Block (Di, Dj) holds the wrapped offset: a's
 * row i pairs with b's row i - Di when i >= Di (offset di = Di) and with
 * row i - Di + h when i < Di (di = Di - h), likewise for columns. The two
 * offsets of a row pair (and of a column pair) have h - Di and Di rows, so
 * a block always holds the four slices (di, dj) whose cells add up to one
 * whole h x w image: every block has the same work, and the grid has h w
 * blocks per pair instead of (2h - 1)(2w - 1) of uneven size. In shared
 * memory the four slices sit side by side, a's row i at memory row
 * i + 1 + [i >= Di] and column j at j + 1 + [j >= Dj], each with its own
 * zero border: the row and column between them stay zero, which is the
 * SAME padding of each slice, so every entry is the CPU's. Offsets outside
 * the band (Flatten readouts) stay zero and are not computed.
 *
 * Each thread owns a vertical strip of DV_S cells of one column: per 3x3
 * convolution it reads the DV_S + 2 rows around the strip once (3 loads
 * of an (NNGP, NTK) pair each: the row sums), adds the column sums as a
 * sliding window in registers, then the affine map and the pointwise
 * layers after the convolution, and stores into the other buffer: one
 * barrier per convolution. The entry is rounded as on the CPU: row sums
 * (left + centre) + right, column sums (top + centre) + bottom,
 * nngp' = W^2 (sum / 9) + b^2, ntk' = nngp' + W^2 (sum_t / 9). A Conv
 * followed by one nonlinearity (ops[k].fuse, set by cnn_gpu.c) runs it
 * inline, Relu with its constants folded; other pointwise layers go
 * through s3_post. A strip that crosses the row between two slices reads
 * the DV_S + 2 rows around its cells but that zero row, and takes +0 (the
 * zero row's sum: the same bits) in its place. A strip that runs past the
 * last row, or holds cells of an offset outside the band, takes the cells
 * one at a time (the same arithmetic). with_t (NTK) and capture are
 * compile-time constants in the CUDA kernels (cnn_cuda.cu).
 *
 * S3_TALLY(path) counts a strip's paths in the host emulation (the tests):
 * 0 the fast path in one slice, 1 the fast path across the row between
 * two slices, 2 cell by cell; nothing in the CUDA kernels. */
#ifndef S3_TALLY
#define S3_TALLY(path) ((void)0)
#endif
#ifndef DV_S
#define DV_S 4 /* rows per strip */
#endif
/* An op's parameter as REAL: the float copy in the float kernels. */
#define DV_R(o, fld) (sizeof(REAL) == 4 ? (REAL)(o)->fld##f : (REAL)(o)->fld)

/* A variance slot, through the read-only data path on a GPU (the slots
 * are not written during a launch that reads them this way). */
static DEV DV_INLINE dv_quad dv_ldq(const dv_quad *p) {
#ifdef __CUDA_ARCH__
  dv_quad r;
  if (sizeof(REAL) == 4) {
    float4 v = __ldg((const float4 *)(const void *)p);
    r.x = (REAL)v.x;
    r.y = (REAL)v.y;
    r.z = (REAL)v.z;
    r.w = (REAL)v.w;
  } else {
    double2 a = __ldg((const double2 *)(const void *)p), b = __ldg((const double2 *)(const void *)p + 1);
    r.x = (REAL)a.x;
    r.y = (REAL)a.y;
    r.z = (REAL)b.x;
    r.w = (REAL)b.y;
  }
  return r;
#else
  return *p;
#endif
}

/* ABRelu on slots A, B: in float the map on the slots' products
 * (ntk_dev_abreluf_vu, the bits of ntk_abreluf_r), in double
 * ntk_abrelu_r itself (it takes the variances only). */
static DEV DV_INLINE REAL s3_abrelu(REAL a, REAL b, REAL q12, const dv_quad *A, const dv_quad *B, REAL *td) {
  if (sizeof(REAL) == 4) {
    float tf, g = ntk_dev_abreluf_vu((float)a, (float)b, (float)q12, (float)A->y, (float)A->z, (float)A->w,
                                     (float)B->y, (float)B->z, (float)B->w, &tf);
    *td = (REAL)tf;
    return (REAL)g;
  }
  return ABRELU_R(a, b, q12, A->x, B->x, A->y, B->y, td);
}

/* Nonlinearity o (fuse: NTK_FUSE_RELU, _ABRELU or _ERF: the maps SLICE3
 * takes, cnn_gpu.c's run_is_slice3) on n cells (g, t),
 * a's positions pp, b's qq. With capture (a pair (a, a) at offset 0) the
 * variance and its RSQRT are written first, and used as they are. */
static DEV DV_INLINE void s3_nl(int fuse, const struct ntk_dev_op *DV_RESTRICT o, int with_t, int capture,
                                REAL *DV_RESTRICT va, const REAL *DV_RESTRICT vb, int n, const unsigned *pp,
                                const unsigned *qq, REAL *G, REAL *T) {
  dv_quad *sa = (dv_quad *)(va + (unsigned)o->var_off); /* >= 0 here */
  const dv_quad *sb = (const dv_quad *)(vb + (unsigned)o->var_off);
  dv_quad ua[DV_S], ub[DV_S];
  for (int c = 0; c < n; c++) {
    if (capture) {
      ua[c].x = G[c];
      ua[c].y = RSQRT(G[c]);
      ua[c].z = ua[c].x * ua[c].y;
      ua[c].w = ua[c].z * ua[c].y;
      sa[pp[c]] = ua[c];
      ub[c] = ua[c];
    } else {
      ua[c] = dv_ldq(sa + pp[c]);
      ub[c] = dv_ldq(sb + qq[c]);
    }
  }
  REAL td[DV_S];
  if (fuse == NTK_FUSE_ERF) {
    for (int c = 0; c < n; c++) G[c] = ERF(G[c], ua[c].x, ub[c].x, &td[c]);
  } else if (fuse == NTK_FUSE_RELU) {
    for (int c = 0; c < n; c++) G[c] = s3_abrelu((REAL)0, (REAL)1, G[c], &ua[c], &ub[c], &td[c]);
  } else {
    REAL a = sizeof(REAL) == 4 ? (REAL)o->af : (REAL)o->map.a, b = sizeof(REAL) == 4 ? (REAL)o->bf : (REAL)o->map.b;
    for (int c = 0; c < n; c++) G[c] = s3_abrelu(a, b, G[c], &ua[c], &ub[c], &td[c]);
  }
  if (with_t)
    for (int c = 0; c < n; c++) T[c] *= td[c];
}

/* Pointwise layers ops [k, k1) on n cells. */
static DEV DV_INLINE void s3_post(const struct ntk_dev_plan *DV_RESTRICT P, int k, int k1, int with_t,
                                  int capture, REAL *DV_RESTRICT va, const REAL *DV_RESTRICT vb, int n,
                                  const unsigned *pp, const unsigned *qq, REAL *G, REAL *T) {
  for (; k < k1; k++) {
    const struct ntk_dev_op *o = &P->ops[k];
    if (o->kind == NTK_LAYER_DENSE) {
      REAL w2 = DV_R(o, w2), b2 = DV_R(o, b2);
      for (int c = 0; c < n; c++) {
        G[c] = w2 * G[c] + b2;
        if (with_t) T[c] = G[c] + w2 * T[c];
      }
    } else if (o->var_off >= 0) {
      s3_nl(ntk_map_is_plain_erf(&o->map) ? NTK_FUSE_ERF : NTK_FUSE_ABRELU, o, with_t, capture, va, vb, n, pp,
            qq, G, T);
    }
  }
}

/* Row sum of NNGP and NTK around memory cell `at`: (left + centre) + right. */
#define S3_ROW(at, rg, rt)                             \
  do {                                                 \
    dv_pair l_ = (at)[-1], c_ = (at)[0], r_ = (at)[1]; \
    (rg) = (l_.x + c_.x) + r_.x;                       \
    if (with_t) (rt) = (l_.y + c_.y) + r_.y;           \
  } while (0)

/* A block's wrapped offset, as the strips see it. */
struct s3ctx {
  const struct ntk_dev_args *A;
  const struct ntk_dev_plan *P;
  REAL *va;
  const REAL *vb;
  size_t pair;
  int h, w, Di, Dj, ok_lo, ok_up, ok_ri, ok_le, sh_lo, sh_up;
  unsigned LD, hw;
};

/* A thread's strip: rows s DV_S .. of column c, and what the fast path
 * needs of it in every layer (computed once per block where a thread has
 * one strip): the pair index in either buffer of the first row it reads,
 * a's positions pp and b's positions qq of its cells.
 *
 * The fast path reads DV_S + 2 rows, r = 0 .. DV_S + 1 at memory rows
 * m0 - 1 + r, and cell k takes rows (k, k + 1, k + 2) and stores to row
 * k + 1. A strip across row Di (its first kx = Di - i0 cells in the slice
 * di = Di - h, memory rows m0 .. m0 + kx - 1, the others in di = Di, from
 * m0 + kx + 1 on) skips the zero row m0 + kx between them: its rows
 * r > kx are one memory row further down, and the zero row is cell
 * kx - 1's bottom row, in place of row kx + 1, and cell kx's top row, in
 * place of row kx. A strip of one slice has kx = DV_S + 1: no cell next
 * to that row, no row skipped. */
struct s3me {
  unsigned s, c;
  int fast; /* 0: cell by cell; DV_S + 2: in one slice, a width of 32 k (s3_strip); else kx (cells in the band) */
  int cok;  /* the column's offset is in the band (0: no strip) */
  unsigned at; /* the pair index of row r = 0 at the strip's column, in either buffer */
  unsigned pp[DV_S], qq[DV_S];
};

static DEV DV_INLINE void s3_place(const struct s3ctx *X, unsigned s, unsigned c, struct s3me *M) {
  const int i0 = (int)s * DV_S, j = (int)c, ri = j >= X->Dj, w = X->w, h = X->h, Di = X->Di;
  const int dj = ri ? X->Dj : X->Dj - w, cok = ri ? X->ok_ri : X->ok_le, lo = i0 >= Di;
  const unsigned m0 = (unsigned)i0 + 1 + (unsigned)lo, mc = c + 1 + (unsigned)ri;
  const int kx = lo || i0 + DV_S <= Di ? DV_S + 1 : Di - i0; /* 1 .. DV_S - 1 across row Di */
  M->s = s;
  M->c = c;
  M->cok = cok;
  /* every row in the image, each slice it touches in the band */
  M->fast = cok && i0 + DV_S <= h && (lo || X->ok_up) && (i0 + DV_S <= Di || X->ok_lo) ? kx : 0;
  if (M->fast == DV_S + 1 && (w & 31) == 0) M->fast = DV_S + 2;
  M->at = (m0 - 1) * X->LD + mc;
  for (int k = 0; k < DV_S; k++) {
    M->pp[k] = (unsigned)(i0 + k) * (unsigned)w + c;
    M->qq[k] = (unsigned)((int)M->pp[k] - ((i0 + k >= Di ? X->sh_lo : X->sh_up) + dj));
  }
}

/* The fast path of s3_strip: DV_S cells, rows m0 - 1 .. m0 + DV_S
 * (skipping the zero row between two slices, memory row m0 + kx, for a
 * strip across it). Inlined twice: kx = DV_S + 1 as a constant (a strip in
 * one slice, no selects) and the strips across. */
static DEV DV_INLINE void s3_fast(const struct s3ctx *X, const int with_t, const int capture,
                                  const struct s3me *M, const dv_pair *DV_RESTRICT in, dv_pair *DV_RESTRICT out,
                                  int kc, int kn, int last, int fuse, REAL w2, REAL b2, double *sg, double *st,
                                  const int kx) {
  const struct ntk_dev_args *A = X->A;
  const REAL scale = (REAL)(1.0 / 9.0);
  const unsigned LD = X->LD;
  REAL G[DV_S], T[DV_S];
  REAL rg[DV_S + 2], rt[DV_S + 2];
  /* The rows' places from M->at and LD in each layer: with DV_S + 2
   * offsets kept per thread instead, the 64-register kernels spill more
   * (ptxas -v, sm_90, 2026-12-04). */
  for (int r = 0; r < DV_S + 2; r++) S3_ROW(in + M->at + (unsigned)(r + (r > kx)) * LD, rg[r], rt[r]);
  /* The zero row's sum, (0 + 0) + 0, is +0: the row between two slices
   * is zeroed with the buffers and never written (a's row i goes to
   * memory row i + 1 + [i >= Di]), so +0 in its place gives the bits
   * the cell-by-cell path gets from reading it. k is a constant once
   * the loop is unrolled: selects, no indexed register array. */
  for (int k = 0; k < DV_S; k++) {
    const int top0 = k > 0 && k == kx, bot0 = k + 1 < DV_S && k + 1 == kx; /* kx: 1 .. DV_S - 1 or DV_S + 1 */
    G[k] = w2 * ((((top0 ? (REAL)0 : rg[k]) + rg[k + 1]) + (bot0 ? (REAL)0 : rg[k + 2])) * scale) + b2;
    T[k] = with_t ? G[k] + w2 * ((((top0 ? (REAL)0 : rt[k]) + rt[k + 1]) + (bot0 ? (REAL)0 : rt[k + 2])) * scale) : 0;
  }
  S3_TALLY(kx < DV_S);
  if (fuse) s3_nl(fuse, &X->P->ops[kc + 1], with_t, capture, X->va, X->vb, DV_S, M->pp, M->qq, G, T);
  else s3_post(X->P, kc + 1, kn, with_t, capture, X->va, X->vb, DV_S, M->pp, M->qq, G, T);
  if (!last) {
    for (int k = 0; k < DV_S; k++) {
      dv_pair v;
      v.x = G[k];
      v.y = T[k];
      out[M->at + (unsigned)(k + 1 + (k >= kx)) * LD] = v;
    }
  } else if (!capture) {
    for (int k = 0; k < DV_S; k++) {
      if (A->to_part) {
        *sg += (double)G[k];
        *st += (double)T[k];
      } else {
        size_t at = X->pair * A->fstride + ntk_dev_full_slice(X->Di, X->Dj, (unsigned)X->h, (unsigned)X->w) +
                  M->pp[k];
        ((REAL *)A->fg)[at] = G[k];
        if (with_t) ((REAL *)A->ft)[at] = T[k];
      }
    }
  }
}

/* One convolution (ops[kc], then ops (kc, kn)) on the strip M, from `in`
 * into `out` (or, in the run's last layer, into the sums or the pair's
 * covariance). Where the image's width is a multiple of 32 a GPU warp is
 * one row of strips, so the branch between the two fast paths is the
 * warp's; on narrower images (Myrtle's 16 x 16 and 8 x 8 stages) a warp
 * holds several rows, one of them maybe across, and would run both
 * copies: there every strip takes the one with selects. */
static DEV DV_INLINE void s3_strip(const struct s3ctx *X, const int with_t, const int capture,
                                   const struct s3me *M, const dv_pair *DV_RESTRICT in,
                                   dv_pair *DV_RESTRICT out, int kc, int kn, int last, int fuse, REAL w2, REAL b2,
                                   double *sg, double *st) {
  const struct ntk_dev_args *A = X->A;
  const REAL scale = (REAL)(1.0 / 9.0);
  const unsigned s = M->s, c = M->c, LD = X->LD;
  const int i0 = (int)s * DV_S, j = (int)c, ri = j >= X->Dj, w = X->w, h = X->h, Di = X->Di;
  const unsigned mc = c + 1 + (unsigned)ri;
  const int dj = ri ? X->Dj : X->Dj - w;
  if (M->fast == DV_S + 2) {
    s3_fast(X, with_t, capture, M, in, out, kc, kn, last, fuse, w2, b2, sg, st, DV_S + 1);
    return;
  }
  if (M->fast) {
    s3_fast(X, with_t, capture, M, in, out, kc, kn, last, fuse, w2, b2, sg, st, M->fast); /* across */
    return;
  }
  /* cell by cell: the last rows, or the band's edge (a strip across two slices, one outside the band) */
  if (!M->cok) return;
  S3_TALLY(2);
  for (int k = 0; k < DV_S; k++) {
    const int i = i0 + k, il = i >= Di;
    if (i >= h || !(il ? X->ok_lo : X->ok_up)) continue;
    const unsigned m = (unsigned)i + 1 + (unsigned)il;
    const dv_pair *x = in + m * LD + mc;
    REAL r0g, r1g, r2g, r0t = 0, r1t = 0, r2t = 0;
    S3_ROW(x - LD, r0g, r0t);
    S3_ROW(x, r1g, r1t);
    S3_ROW(x + LD, r2g, r2t);
    REAL g1 = w2 * (((r0g + r1g) + r2g) * scale) + b2;
    REAL t1 = with_t ? g1 + w2 * (((r0t + r1t) + r2t) * scale) : 0;
    unsigned p = (unsigned)i * (unsigned)w + c;
    unsigned q = (unsigned)((int)p - (il ? X->sh_lo : X->sh_up) - dj);
    s3_post(X->P, kc + 1, kn, with_t, capture, X->va, X->vb, 1, &p, &q, &g1, &t1);
    if (!last) {
      dv_pair v;
      v.x = g1;
      v.y = t1;
      out[m * LD + mc] = v;
    } else if (capture) {
    } else if (A->to_part) {
      *sg += (double)g1;
      *st += (double)t1;
    } else {
      size_t at = X->pair * A->fstride + ntk_dev_full_slice(Di, X->Dj, (unsigned)h, (unsigned)w) + p;
      ((REAL *)A->fg)[at] = g1;
      if (with_t) ((REAL *)A->ft)[at] = t1;
    }
  }
}

static DEV DV_INLINE void dv_slice3(const struct ntk_dev_args *DV_RESTRICT A, struct ntk_blk *B, REAL *sm,
                                    const int with_t, const int capture) {
  const struct ntk_dev_plan *DV_RESTRICT P = A->P;
  const int h = A->h, w = A->w, bh = A->bh, bw = A->bw, k0 = A->k0, k1 = A->k1;
  const unsigned tid = B->tid, nt = B->nt, C = (unsigned)P->C, hw = (unsigned)(h * w);
  const size_t pair = B->by, d = (size_t)P->H * P->W * C;
  const int ndi = 2 * bh + 1 < h ? 2 * bh + 1 : h, ndj = 2 * bw + 1 < w ? 2 * bw + 1 : w;
  const int ti = capture ? 0 : (int)(B->bx / (unsigned)ndj), tj = capture ? 0 : (int)(B->bx % (unsigned)ndj);
  struct s3ctx X;
  X.A = A;
  X.P = P;
  X.pair = pair;
  X.h = h;
  X.w = w;
  X.Di = ti <= bh ? ti : ti + (h - ndi);
  X.Dj = tj <= bw ? tj : tj + (w - ndj);
  const int Di = X.Di, Dj = X.Dj;
  /* rows i >= Di: di = Di; rows i < Di: di = Di - h (likewise columns) */
  X.ok_lo = Di <= bh;
  X.ok_up = h - Di <= bh;
  X.ok_ri = Dj <= bw;
  X.ok_le = w - Dj <= bw;
  X.sh_lo = Di * w; /* b's position of a's p is p - (sh_row + dj) */
  X.sh_up = (Di - h) * w;
  X.LD = (unsigned)w + 3;
  X.hw = hw;
  const unsigned LD = X.LD, cells = ((unsigned)h + 3) * LD;
  dv_pair *buf = (dv_pair *)(void *)sm, *in = buf, *out = buf + cells;
  double *red = (double *)(void *)(buf + 2 * cells); /* pairs of 8 or 16 bytes */
  REAL *va = (REAL *)A->var + A->pa[pair] * (size_t)P->var_size;
  const REAL *vb = (const REAL *)A->var + A->pb[pair] * (size_t)P->var_size;
  DV_OPAQUE(va); /* kept as the block's two pointers, not recomputed per layer */
  DV_OPAQUE(vb);
  X.va = va;
  X.vb = vb;
  const unsigned nstrip = ((unsigned)h + DV_S - 1) / DV_S, items = nstrip * (unsigned)w;
  const float inv = 1.0f / (float)w;
  double sg = 0, st = 0;
  for (unsigned k = tid; k < 2 * cells; k += nt) buf[k].x = buf[k].y = 0;
  BLK_SYNC(B);
  int kc = k0;
  while (kc < k1 && P->ops[kc].kind != NTK_LAYER_CONV) kc++;
  /* Stage 0: the run's input, and the pointwise layers before its first
   * convolution, cell by cell. */
  for (unsigned it = tid; it < nstrip * DV_S * (unsigned)w; it += nt) {
    unsigned ii, c;
    DV_CELL(it, (unsigned)w, inv, ii, c);
    int i = (int)ii, j = (int)c;
    if (i >= h || !(i >= Di ? X.ok_lo : X.ok_up) || !(j >= Dj ? X.ok_ri : X.ok_le)) continue;
    unsigned p = ii * (unsigned)w + c;
    unsigned q = (unsigned)((int)p - (i >= Di ? X.sh_lo : X.sh_up) - (j >= Dj ? Dj : Dj - w));
    REAL G, T = 0;
    if (A->from_x) {
      G = dv_dot((const REAL *)A->x + A->pa[pair] * d + (size_t)p * C,
                 (const REAL *)A->x + A->pb[pair] * d + (size_t)q * C, (int)C);
    } else {
      size_t at = pair * A->fstride + ntk_dev_full_slice(Di, Dj, (unsigned)h, (unsigned)w) + p;
      G = ((const REAL *)A->fg)[at];
      if (with_t) T = ((const REAL *)A->ft)[at];
    }
    s3_post(P, k0, kc, with_t, capture, va, vb, 1, &p, &q, &G, &T);
    if (kc == k1) { /* no convolution in the run */
      if (capture) continue;
      if (A->to_part) {
        sg += (double)G;
        st += (double)T;
      } else {
        size_t at = pair * A->fstride + ntk_dev_full_slice(Di, Dj, (unsigned)h, (unsigned)w) + p;
        ((REAL *)A->fg)[at] = G;
        if (with_t) ((REAL *)A->ft)[at] = T;
      }
      continue;
    }
    dv_pair v;
    v.x = G;
    v.y = T;
    in[(unsigned)(i + 1 + (i >= Di)) * LD + (unsigned)(j + 1 + (j >= Dj))] = v;
  }
  /* The thread's strip when there is one per thread (a GPU block on an
   * image up to 32 x 32): its place, the same in every layer. */
  struct s3me me;
  me.s = me.c = 0;
  me.fast = me.cok = 0; /* no strip: nothing to do */
  if (items <= nt && tid < items) {
    unsigned s_me, c_me;
    DV_CELL(tid, (unsigned)w, inv, s_me, c_me);
    s3_place(&X, s_me, c_me, &me);
  }
  while (kc < k1) {
    BLK_SYNC(B);
    const struct ntk_dev_op *oc = &P->ops[kc];
    const int kn = oc->next < k1 ? oc->next : k1, last = kn == k1;
    const int fuse = kn == kc + 2 ? oc->fuse : NTK_FUSE_NONE;
    const REAL w2 = DV_R(oc, w2), b2 = DV_R(oc, b2);
    if (items <= nt) {
      s3_strip(&X, with_t, capture, &me, in, out, kc, kn, last, fuse, w2, b2, &sg, &st);
    } else {
      for (unsigned it = tid; it < items; it += nt) {
        unsigned s, c;
        DV_CELL(it, (unsigned)w, inv, s, c);
        s3_place(&X, s, c, &me);
        s3_strip(&X, with_t, capture, &me, in, out, kc, kn, last, fuse, w2, b2, &sg, &st);
      }
    }
    dv_pair *x = in;
    in = out;
    out = x;
    kc = kn;
  }
  if (capture || !A->to_part) return;
  dv_reduce(B, red, &sg, &st);
  if (tid == 0) {
    double *part = (double *)A->part + (pair * (size_t)A->noff + B->bx) * 2;
    part[0] = sg;
    part[1] = with_t ? st : 0;
  }
}
#undef S3_ROW
#undef DV_R

/* ---- the full covariance, for layers that couple offsets ---------------- */

/* Items k = bx * nt + tid, stepping by gx * nt: a grid-stride loop. */
#define DV_GRID_LOOP(k, total) \
  for (size_t k = (size_t)B->bx * B->nt + B->tid; k < (total); k += (size_t)B->gx * B->nt)

static DEV void dv_input_full(const struct ntk_dev_args *A, struct ntk_blk *B) {
  const struct ntk_dev_plan *P = A->P;
  size_t W = (size_t)P->W, HW = (size_t)P->H * W, C = (size_t)P->C, d = HW * C;
  DV_GRID_LOOP(k, (size_t)A->np * HW * HW) {
    size_t pair = k / (HW * HW);
    unsigned r = (unsigned)(k - pair * HW * HW), pi, pj, qi, qj;
    ntk_dev_full_cell(r, (unsigned)P->H, (unsigned)W, &pi, &pj, &qi, &qj);
    long di = (long)pi - (long)qi, dj = (long)pj - (long)qj;
    if (di < -A->bh || di > A->bh || dj < -A->bw || dj > A->bw) continue; /* outside the band: stays 0 */
    size_t p = pi * W + pj, q = qi * W + qj;
    ((REAL *)A->fg)[pair * A->fstride + r] = dv_dot((const REAL *)A->x + A->pa[pair] * d + p * C,
                                                    (const REAL *)A->x + A->pb[pair] * d + q * C, (int)C);
  }
}

static DEV void dv_conv_full(const struct ntk_dev_args *A, struct ntk_blk *B) {
  const struct ntk_dev_op *o = &A->P->ops[A->k0];
  size_t hwo = (size_t)o->ho * o->wo;
  const unsigned hi = (unsigned)o->hi, wi = (unsigned)o->wi;
  REAL scale = (REAL)(1.0 / (double)(o->fh * o->fw));
  DV_GRID_LOOP(k, (size_t)A->np * hwo * hwo) {
    size_t pair = k / (hwo * hwo);
    unsigned r = (unsigned)(k - pair * hwo * hwo), pi, pj, qi, qj;
    ntk_dev_full_cell(r, (unsigned)o->ho, (unsigned)o->wo, &pi, &pj, &qi, &qj);
    long i = (long)pi, j = (long)pj, i2 = (long)qi, j2 = (long)qj;
    long di = i > i2 ? i - i2 : i2 - i, dj = j > j2 ? j - j2 : j2 - j;
    if (di > o->obh || dj > o->obw || di % o->omh || dj % o->omw) continue; /* not read later (conv_full) */
    const REAL *ing = (const REAL *)A->fg + pair * A->fstride;
    const REAL *int_ = A->with_t ? (const REAL *)A->ft + pair * A->fstride : ing;
    REAL sg = 0, st = 0;
    for (int a = 0; a < o->fh; a++) { /* conv_full's order */
      long r1 = o->sh * i + a - o->lo_h, r2 = o->sh * i2 + a - o->lo_h;
      if (o->circular) {
        r1 = (r1 % o->hi + o->hi) % o->hi;
        r2 = (r2 % o->hi + o->hi) % o->hi;
      } else if (r1 < 0 || r1 >= o->hi || r2 < 0 || r2 >= o->hi) {
        continue;
      }
      for (int b = 0; b < o->fw; b++) {
        long c1 = o->sw * j + b - o->lo_w, c2 = o->sw * j2 + b - o->lo_w;
        if (o->circular) {
          c1 = (c1 % o->wi + o->wi) % o->wi;
          c2 = (c2 % o->wi + o->wi) % o->wi;
        } else if (c1 < 0 || c1 >= o->wi || c2 < 0 || c2 >= o->wi) {
          continue;
        }
        unsigned at = ntk_dev_full_at((unsigned)r1, (unsigned)c1, (unsigned)r2, (unsigned)c2, hi, wi);
        sg += ing[at];
        if (A->with_t) st += int_[at];
      }
    }
    REAL g, t;
    dv_affine(o, sg * scale, st * scale, A->with_t, &g, &t);
    ((REAL *)A->ng)[pair * A->fstride + r] = g;
    if (A->with_t) ((REAL *)A->nt)[pair * A->fstride + r] = t;
  }
}

/* AvgPool over both positions: per output, image a's window of (image b's
 * window sums times scale), times scale -- pool_full's two passes, in its
 * order, for one entry. */
/* pool_scale of cnn_impl.h: SumPool 1, else 1/w^2, or with normalize_edges
 * 1/(the window's cells inside the input). */
static DEV REAL dv_pool_scale(const struct ntk_dev_op *o, long i, long j) {
  if (o->sum) return (REAL)1;
  if (!o->norm_edges) return (REAL)(1.0 / (double)(o->fh * o->fw));
  size_t rows = 0, cols = 0;
  for (long a = 0; a < o->fh; a++) {
    long r = o->sh * i + a - o->lo_h;
    rows += r >= 0 && r < o->hi;
  }
  for (long b = 0; b < o->fw; b++) {
    long c = o->sw * j + b - o->lo_w;
    cols += c >= 0 && c < o->wi;
  }
  return (REAL)(1.0 / (double)(rows * cols));
}

static DEV void dv_pool_full(const struct ntk_dev_args *A, struct ntk_blk *B) {
  const struct ntk_dev_op *o = &A->P->ops[A->k0];
  const size_t hwo = (size_t)o->ho * o->wo;
  const int fh = o->fh, fw = o->fw, sh = o->sh, sw = o->sw, wi = o->wi, hi = o->hi, lo_h = o->lo_h, lo_w = o->lo_w;
  const int circ = o->circular, with_t = A->with_t;
  const unsigned uh = (unsigned)hi, uw = (unsigned)wi;
  const REAL sc0 = dv_pool_scale(o, 0, 0); /* every window's, but with normalize_edges */
  /* Both covariances in one pass (each summed in pool_full's order), the
   * index arithmetic in 32 bits: the kernel is bound by its instructions,
   * not its loads (H200, Myrtle-10, 2026-12-04). */
  DV_GRID_LOOP(k, (size_t)A->np * hwo * hwo) {
    size_t pair = k / (hwo * hwo);
    unsigned r = (unsigned)(k - pair * hwo * hwo), pi, pj, qi, qj;
    ntk_dev_full_cell(r, (unsigned)o->ho, (unsigned)o->wo, &pi, &pj, &qi, &qj);
    const int i = (int)pi, j = (int)pj, i2 = (int)qi, j2 = (int)qj;
    const REAL *sg = (const REAL *)A->fg + pair * A->fstride;
    const REAL *st = with_t ? (const REAL *)A->ft + pair * A->fstride : sg;
    REAL scale = o->norm_edges ? dv_pool_scale(o, i, j) : sc0;
    REAL scale2 = o->norm_edges ? dv_pool_scale(o, i2, j2) : sc0;
    REAL outg = 0, outt = 0;
    for (int a = 0; a < fh; a++) {
      int ra = sh * i + a - lo_h;
      if (circ) ra = (ra % hi + hi) % hi; /* CIRCULAR wraps (pool_full) */
      else if (ra < 0 || ra >= hi) continue;
      for (int b = 0; b < fw; b++) {
        int cb = sw * j + b - lo_w;
        if (circ) cb = (cb % wi + wi) % wi;
        else if (cb < 0 || cb >= wi) continue;
        REAL ing = 0, int_ = 0;
        for (int a2 = 0; a2 < fh; a2++) {
          int r2 = sh * i2 + a2 - lo_h;
          if (circ) r2 = (r2 % hi + hi) % hi;
          else if (r2 < 0 || r2 >= hi) continue;
          for (int b2 = 0; b2 < fw; b2++) {
            int c2 = sw * j2 + b2 - lo_w;
            if (circ) c2 = (c2 % wi + wi) % wi;
            if (c2 < 0 || c2 >= wi) continue;
            const unsigned at = ntk_dev_full_at((unsigned)ra, (unsigned)cb, (unsigned)r2, (unsigned)c2, uh, uw);
            ing += sg[at];
            if (with_t) int_ += st[at];
          }
        }
        outg += ing * scale2;
        outt += int_ * scale2;
      }
    }
    ((REAL *)A->ng)[pair * A->fstride + r] = outg * scale;
    if (with_t) ((REAL *)A->nt)[pair * A->fstride + r] = outt * scale;
  }
}

/* A residual block's FORK, NEXT or JOIN on the full covariance, entry by
 * entry: branch.h's operations, in its order (a NEXT adds the branch's
 * end to the sum before it restores the block's input), on a stack of 4
 * arrays of fstride elements per pair and depth. */
static DEV void dv_branch_full(const struct ntk_dev_args *A, struct ntk_blk *B) {
  const struct ntk_dev_op *o = &A->P->ops[A->k0];
  size_t n = (size_t)o->hi * o->wi, n_in = (size_t)o->ho * o->wo, cap = A->bstride;
  n *= n; /* a branch's end (FORK: the block's input) */
  n_in *= n_in;
  size_t m = n > n_in ? n : n_in;
  DV_GRID_LOOP(k, (size_t)A->np * m) {
    size_t pair = k / m, e = k % m;
    REAL *g = (REAL *)A->fg + pair * cap, *t = A->with_t ? (REAL *)A->ft + pair * cap : (REAL *)0;
    REAL *slot = (REAL *)A->bstack + (pair * (size_t)A->P->branch_depth + (size_t)o->depth) * 4 * cap;
    if (o->kind == NTK_LAYER_FORK) {
      if (e < n) {
        slot[e] = g[e];
        if (t) slot[cap + e] = t[e];
      }
    } else if (o->kind == NTK_LAYER_NEXT) {
      if (e < n && o->prod && !o->first) { /* FanInProd: the product rule (branch.h) */
        if (t) slot[3 * cap + e] = slot[3 * cap + e] * g[e] + slot[2 * cap + e] * t[e];
        slot[2 * cap + e] *= g[e];
      } else if (e < n) {
        REAL w = (REAL)o->fanw;
        slot[2 * cap + e] = o->first ? w * g[e] : slot[2 * cap + e] + w * g[e];
        if (t) slot[3 * cap + e] = o->first ? w * t[e] : slot[3 * cap + e] + w * t[e];
      }
      if (e < n_in) {
        g[e] = slot[e];
        if (t) t[e] = slot[cap + e];
      }
    } else if (e < n && o->branches > 1 && o->prod) { /* JOIN of FanInProd */
      if (t) t[e] = slot[3 * cap + e] * g[e] + slot[2 * cap + e] * t[e];
      g[e] = slot[2 * cap + e] * g[e];
    } else if (e < n && o->branches > 1) { /* JOIN */
      REAL w = (REAL)o->fanw, div = (REAL)o->fandiv;
      g[e] = slot[2 * cap + e] + w * g[e];
      if (t) t[e] = slot[3 * cap + e] + w * t[e];
      if (div != 0) {
        g[e] /= div;
        if (t) t[e] /= div;
      }
    }
  }
}

/* ---- readout and the fully-connected tail -------------------------------- */

static DEV void dv_readout(const struct ntk_dev_args *A, struct ntk_blk *B, REAL *sm) {
  const struct ntk_dev_plan *P = A->P;
  size_t pair = B->bx, n = (size_t)A->h * (size_t)A->w;
  unsigned tid = B->tid, nt = B->nt;
  double sg = 0, st = 0, norm;
  if (A->mode == NTK_RO_PART) {
    const double *part = (const double *)A->part + pair * (size_t)A->noff * 2;
    for (size_t k = tid; k < (size_t)A->noff; k += nt) {
      sg += part[2 * k];
      st += part[2 * k + 1];
    }
    norm = P->readout == NTK_LAYER_GLOBALAVGPOOL ? (P->readout_sum ? 1.0 : (double)(n * n)) : (double)n;
  } else {
    const REAL *fg = (const REAL *)A->fg + pair * A->fstride;
    const REAL *ft = A->with_t ? (const REAL *)A->ft + pair * A->fstride : fg;
    int gap = A->mode == NTK_RO_FULL_GAP;
    size_t items = gap ? n * n : n;
    for (size_t k = tid; k < items; k += nt) {
      /* FLATTEN: the diagonal, k < n: offset 0's slice (ntk_dev_full_at) */
      sg += (double)fg[k];
      if (A->with_t) st += (double)ft[k];
    }
    norm = gap ? (P->readout_sum ? 1.0 : (double)(n * n)) : (double)n;
  }
  dv_reduce(B, (double *)(void *)sm, &sg, &st);
  if (tid != 0) return;
  REAL g = (REAL)(sg / norm), t = (REAL)(st / norm);
  REAL *ta = (REAL *)A->var + A->pa[pair] * (size_t)P->var_size + P->tail_off;
  const REAL *tb = (const REAL *)A->var + A->pb[pair] * (size_t)P->var_size + P->tail_off;
  REAL stack[4 * NTK_DEV_MAXDEPTH]; /* residual blocks: branch.h's operations on the scalar */
  int depth = 0;
  for (int k = 0; k < P->ntail; k++) {
    const struct ntk_dev_op *o = &P->tail[k];
    if (A->self) ta[k] = g;
    REAL td, *s, w = (REAL)o->fanw, div = (REAL)o->fandiv;
    switch ((ntk_layer_kind)o->kind) { /* every kind, no default: -Werror=switch catches a new one */
    case NTK_LAYER_DENSE: dv_affine(o, g, t, 1, &g, &t); break;
    case NTK_LAYER_MAP:
    case NTK_LAYER_LAYERNORM:
      g = dv_nonlin(o, g, ta[k], tb[k], RSQRT(ta[k]), RSQRT(tb[k]), &td, 1);
      t *= td;
      break;
    case NTK_LAYER_IDENTITY: break;
    case NTK_LAYER_FORK:
      s = stack + 4 * depth++;
      s[0] = g;
      s[1] = t;
      break;
    case NTK_LAYER_NEXT:
      s = stack + 4 * (depth - 1);
      if (o->prod && !o->first) { /* FanInProd: the product rule (branch.h) */
        s[3] = s[3] * g + s[2] * t;
        s[2] *= g;
      } else {
        s[2] = o->first ? w * g : s[2] + w * g;
        s[3] = o->first ? w * t : s[3] + w * t;
      }
      g = s[0];
      t = s[1];
      break;
    case NTK_LAYER_JOIN:
      s = stack + 4 * --depth;
      if (o->branches < 2) break;
      if (o->prod) {
        t = s[3] * g + s[2] * t;
        g = s[2] * g;
        break;
      }
      g = s[2] + w * g;
      t = s[3] + w * t;
      if (div != 0) {
        g /= div;
        t /= div;
      }
      break;
    case NTK_LAYER_CONV: /* spatial layers and a second readout: refused by the plan and the parser */
    case NTK_LAYER_AVGPOOL:
    case NTK_LAYER_FLATTEN:
    case NTK_LAYER_GLOBALAVGPOOL:
    case NTK_LAYER_ATTENTION:
    case NTK_LAYER_RESIZE:
    case NTK_LAYER_AGGREGATE:
    case NTK_LAYER_DROPOUT: /* refused by ntk_cnn_dev_plan */
    case NTK_LAYER_KINDS: g = (REAL)NAN; break; /* a non-finite tile is refused, never stored */
    }
  }
  REAL *out = (REAL *)A->out + pair * 2;
  out[0] = g;
  out[1] = A->with_t ? t : 0;
}

#undef dv_pair
#undef dv_quad
#undef dv_nonlin
#undef dv_affine
#undef dv_reduce
#undef dv_dot
#undef dv_cell_nonlin
#undef dv_next_nonlin
#undef dv_branch_diag
#undef dv_diag
#undef dv_slice_blk
#undef dv_slice_geom
#undef dv_slice_setup
#undef dv_slice_load
#undef dv_slice_swap
#undef dv_slice_conv
#undef dv_slice_conv_strided
#undef dv_slice_dense
#undef dv_slice_nonlin
#undef dv_slice_branch
#undef dv_slice_branch_strided
#undef dv_slice_geo
#undef dv_slice_store
#undef dv_slice
#undef dv_ldq
#undef s3_abrelu
#undef s3_nl
#undef s3_post
#undef s3ctx
#undef s3me
#undef s3_place
#undef s3_strip
#undef s3_fast
#undef dv_slice3
#undef dv_input_full
#undef dv_conv_full
#undef dv_pool_scale
#undef dv_pool_full
#undef dv_branch_full
#undef dv_readout
