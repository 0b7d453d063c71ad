/* CNN kernels for a GPU block, written once for CUDA and for the host
 * emulation that tests them (src/worker/cnn_gpu.c): included through
 * each_precision.h (REAL, SFX(x), ABRELU_R, RSQRT, ERF), with DEV (the
 * function qualifiers) and BLK_SYNC(B) (__syncthreads(), or a barrier)
 * defined by the includer.
 *
 * Each function is the body of one block: thread B->tid of B->nt, block
 * (B->bx, B->by); `sm` is the block's shared memory. Work is split by
 * block-stride loops, and every BLK_SYNC is reached by all threads of the
 * block (no barrier inside thread-dependent branches). The arithmetic per
 * entry is the CPU's (src/worker/cnn_impl.h): the same maps, the same
 * order of operations inside an entry; sums over many entries (readouts)
 * are in double as on the CPU but in another order, so float64 results
 * agree to rounding, and float32 ones (rounded once from those sums) in
 * practice to the bit.
 *
 * Shared memory: DIAG 4 H*W elements, SLICE 6 (h + 2 pad)(w + 2 pad)
 * elements, each plus 2 nt doubles; READOUT 2 nt doubles; the
 * full-covariance kernels none. */

static DEV REAL SFX(dv_nonlin)(const struct ntk_dev_op *o, REAL q12, REAL q11, REAL q22, REAL r11, REAL r22,
                               REAL *td) {
  if (o->kind == NTK_LAYER_ERF) return ERF(q12, q11, q22, td);
  return ABRELU_R((REAL)o->a, (REAL)o->b, q12, q11, q22, r11, r22, td);
}

/* Block sums of (*sg, *st), in a fixed order for a given block size (so
 * a tile's values do not depend on scheduling): threads past the largest
 * power of two p <= nt fold into the first ones, then a tree of log2(p)
 * steps. The result in thread 0. In double whatever REAL is, as the CPU's
 * readout sums. red: 2 nt doubles of shared memory. */
static DEV void SFX(dv_reduce)(struct ntk_blk *B, double *red, double *sg, double *st) {
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

static DEV REAL SFX(dv_dot)(const REAL *xa, const REAL *xb, int C) {
  REAL sum = 0;
  for (int k = 0; k < C; k++) sum += xa[k] * xb[k];
  return sum / (REAL)C;
}

/* Nonlinearity o on one entry (g, t) pairing a's position p with b's
 * position q; qa, qb: the layer's variance slots of a and b. When
 * `capture` (a pair (a, a) at offset 0, so p == q and qa == qb), a's
 * variance at p is written first: the thread that owns the entry is the
 * only one that reads it in this launch. */
static DEV void SFX(dv_cell_nonlin)(const struct ntk_dev_op *o, int capture, REAL *qa, const REAL *qb, unsigned hw,
                                    unsigned p, unsigned q, REAL *g, REAL *t, int with_t) {
  if (capture) {
    qa[p] = *g;
    qa[hw + p] = RSQRT(*g);
  }
  REAL td;
  *g = SFX(dv_nonlin)(o, *g, qa[p], qb[q], qa[hw + p], qb[hw + q], &td);
  if (with_t) *t *= td;
}

/* The nonlinearity right after op k, if any: fused into the convolution's
 * last pass (it is pointwise, and reads only its own entry). */
static DEV const struct ntk_dev_op *SFX(dv_next_nonlin)(const struct ntk_dev_plan *P, int k, int k1) {
  return k + 1 < k1 && P->ops[k + 1].var_off >= 0 ? &P->ops[k + 1] : (const struct ntk_dev_op *)0;
}

/* ---- DIAG: one pair per block, same-position entries, all layers ------- */

static DEV void SFX(dv_diag)(const struct ntk_dev_args *A, struct ntk_blk *B, REAL *sm) {
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
    dg[p] = SFX(dv_dot)(xa + p * (size_t)P->C, xb + p * (size_t)P->C, P->C);
    dt[p] = 0;
  }
  BLK_SYNC(B);
  for (int k = 0; k < P->nops; k++) {
    const struct ntk_dev_op *o = &P->ops[k];
    size_t n = (size_t)o->ho * (size_t)o->wo;
    REAL w2 = (REAL)o->w2, b2 = (REAL)o->b2;
    if (o->kind == NTK_LAYER_CONV) {
      const struct ntk_dev_op *nl = SFX(dv_next_nonlin)(P, k, P->nops);
      REAL scale = (REAL)(1.0 / (double)(o->f * o->f));
      float inv = 1.0f / (float)o->wo;
      for (unsigned p = tid; p < (unsigned)n; p += nt) {
        unsigned pi, pj;
        DV_CELL(p, (unsigned)o->wo, inv, pi, pj);
        int i = (int)pi, j = (int)pj;
        REAL sg = 0, st = 0;
        for (int a = 0; a < o->f; a++) { /* rows, then columns: conv_diag's order */
          int r = o->s * i + a - o->lo_h;
          if (o->circular) r = (r % o->hi + o->hi) % o->hi;
          else if (r < 0 || r >= o->hi) continue;
          REAL rg = 0, rt = 0;
          for (int b = 0; b < o->f; b++) {
            int c = o->s * j + b - o->lo_w;
            if (o->circular) c = (c % o->wi + o->wi) % o->wi;
            else if (c < 0 || c >= o->wi) continue;
            rg += dg[r * o->wi + c];
            rt += dt[r * o->wi + c];
          }
          sg += rg;
          st += rt;
        }
        REAL g = w2 * (sg * scale) + b2, t = with_t ? g + w2 * (st * scale) : 0;
        if (nl) SFX(dv_cell_nonlin)(nl, A->self, va + nl->var_off, vb + nl->var_off, (unsigned)n, p, p, &g, &t, with_t);
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
        dg[p] = w2 * dg[p] + b2;
        if (with_t) dt[p] = dg[p] + w2 * dt[p];
      }
      BLK_SYNC(B);
    } else if (o->var_off >= 0) {
      REAL *qa = va + o->var_off;
      const REAL *qb = vb + o->var_off;
      for (unsigned p = tid; p < (unsigned)n; p += nt)
        SFX(dv_cell_nonlin)(o, A->self, qa, qb, (unsigned)n, p, p, &dg[p], &dt[p], with_t);
      BLK_SYNC(B);
    }
  }
  size_t n = (size_t)P->out_h * (size_t)P->out_w;
  double sg = 0, st = 0;
  for (size_t p = tid; p < n; p += nt) {
    sg += (double)dg[p];
    st += (double)dt[p];
  }
  SFX(dv_reduce)(B, red, &sg, &st);
  if (tid == 0) {
    double *part = (double *)A->part + pair * 2;
    part[0] = sg;
    part[1] = st;
  }
}

/* ---- SLICE: one offset of one pair through a run of slice-local ops ------ */

static DEV void SFX(dv_slice)(const struct ntk_dev_args *A, struct ntk_blk *B, REAL *sm) {
  const struct ntk_dev_plan *P = A->P;
  /* In-block indices are 32-bit: a slice block holds at most a few
   * thousand cells (shared memory); global offsets stay size_t. */
  unsigned h = (unsigned)A->h, w = (unsigned)A->w, hw = h * w, pad = (unsigned)P->pad;
  unsigned ld = w + 2 * pad, cells = ld * (h + 2 * pad), C = (unsigned)P->C;
  unsigned tid = B->tid, nt = B->nt;
  size_t pair = B->by, d = (size_t)P->H * P->W * C;
  int with_t = A->with_t;
  int nbw = 2 * A->bw + 1;
  int di = A->capture ? 0 : (int)B->bx / nbw - A->bh, dj = A->capture ? 0 : (int)B->bx % nbw - A->bw;
  unsigned i0 = di > 0 ? (unsigned)di : 0, i1 = di < 0 ? (unsigned)((int)h + di) : h;
  unsigned j0 = dj > 0 ? (unsigned)dj : 0, j1 = dj < 0 ? (unsigned)((int)w + dj) : w;
  unsigned vw = j1 - j0, nvalid = (i1 - i0) * vw, ii, jj;
  float inv = 1.0f / (float)vw;
  int shift = di * (int)w + dj; /* image b's position of a's position p is p - shift */
  REAL *va = (REAL *)A->var + A->pa[pair] * (size_t)P->var_size;
  const REAL *vb = (const REAL *)A->var + A->pb[pair] * (size_t)P->var_size;
  REAL *g = sm, *t = sm + cells, *g2 = sm + 2 * cells, *t2 = sm + 3 * cells, *rows = sm + 4 * cells;
  REAL *rows_t = sm + 5 * cells;
  double *red = (double *)(void *)(sm + 6 * cells); /* 8-byte aligned: 6 cells elements of 4 or 8 bytes */
  /* Zero borders: SAME padding for every convolution of the run. */
  for (unsigned k = tid; k < 4 * cells; k += nt) sm[k] = 0;
  BLK_SYNC(B);
  for (unsigned k = tid; k < nvalid; k += nt) {
    DV_CELL(k, vw, inv, ii, jj);
    unsigned i = i0 + ii, j = j0 + jj, p = i * w + j, q = (unsigned)((int)p - shift);
    REAL gv, tv = 0;
    if (A->from_x) {
      gv = SFX(dv_dot)((const REAL *)A->x + A->pa[pair] * d + (size_t)p * C,
                       (const REAL *)A->x + A->pb[pair] * d + (size_t)q * C, (int)C);
    } else {
      size_t at = pair * A->fstride + (size_t)p * hw + q;
      gv = ((const REAL *)A->fg)[at];
      if (with_t) tv = ((const REAL *)A->ft)[at];
    }
    g[(i + pad) * ld + pad + j] = gv;
    t[(i + pad) * ld + pad + j] = tv;
  }
  BLK_SYNC(B);
  for (int k = A->k0; k < A->k1; k++) {
    const struct ntk_dev_op *o = &P->ops[k];
    REAL w2 = (REAL)o->w2, b2 = (REAL)o->b2;
    if (o->kind == NTK_LAYER_CONV) {
      /* Row sums of NNGP and NTK for every row read below; then per cell
       * the column sums, the affine map and a following nonlinearity, in
       * the CPU's order per entry: two barriers per Conv + nonlinearity. */
      const struct ntk_dev_op *nl = SFX(dv_next_nonlin)(P, k, A->k1);
      unsigned f = (unsigned)o->f, lo = (unsigned)o->lo_h, r0 = i0 + pad - lo, nr = (i1 - i0) + f - 1;
      REAL scale = (REAL)(1.0 / (double)(f * f));
      for (unsigned k2 = tid; k2 < nr * vw; k2 += nt) {
        DV_CELL(k2, vw, inv, ii, jj);
        unsigned r = r0 + ii, j = j0 + jj, at = r * ld + pad - lo + j;
        REAL sg = 0, st = 0;
        for (unsigned b = 0; b < f; b++) sg += g[at + b];
        rows[r * ld + j] = sg;
        if (with_t) {
          for (unsigned b = 0; b < f; b++) st += t[at + b];
          rows_t[r * ld + j] = st;
        }
      }
      BLK_SYNC(B);
      for (unsigned k2 = tid; k2 < nvalid; k2 += nt) {
        DV_CELL(k2, vw, inv, ii, jj);
        unsigned i = i0 + ii, j = j0 + jj, idx = (i + pad) * ld + pad + j, p = i * w + j;
        REAL sg = 0, st = 0;
        for (unsigned a = 0; a < f; a++) sg += rows[(i + pad - lo + a) * ld + j];
        REAL gv = w2 * (sg * scale) + b2, tv = 0;
        if (with_t) {
          for (unsigned a = 0; a < f; a++) st += rows_t[(i + pad - lo + a) * ld + j];
          tv = gv + w2 * (st * scale);
        }
        if (nl)
          SFX(dv_cell_nonlin)(nl, A->capture, va + nl->var_off, vb + nl->var_off, hw, p, (unsigned)((int)p - shift), &gv,
                              &tv, with_t);
        g2[idx] = gv;
        t2[idx] = tv;
      }
      BLK_SYNC(B);
      REAL *x = g;
      g = g2;
      g2 = x;
      x = t;
      t = t2;
      t2 = x;
      if (nl) k++;
    } else if (o->kind == NTK_LAYER_DENSE) {
      for (unsigned k2 = tid; k2 < nvalid; k2 += nt) {
        DV_CELL(k2, vw, inv, ii, jj);
        unsigned idx = (i0 + ii + pad) * ld + pad + j0 + jj;
        g[idx] = w2 * g[idx] + b2;
        if (with_t) t[idx] = g[idx] + w2 * t[idx];
      }
      BLK_SYNC(B);
    } else if (o->var_off >= 0) {
      for (unsigned k2 = tid; k2 < nvalid; k2 += nt) {
        DV_CELL(k2, vw, inv, ii, jj);
        unsigned i = i0 + ii, j = j0 + jj, idx = (i + pad) * ld + pad + j, p = i * w + j;
        SFX(dv_cell_nonlin)(o, A->capture, va + o->var_off, vb + o->var_off, hw, p, (unsigned)((int)p - shift), &g[idx],
                            &t[idx], with_t);
      }
      BLK_SYNC(B);
    }
  }
  if (A->capture) return;
  if (A->to_part) {
    double sg = 0, st = 0;
    for (unsigned k = tid; k < nvalid; k += nt) {
      DV_CELL(k, vw, inv, ii, jj);
      unsigned idx = (i0 + ii + pad) * ld + pad + j0 + jj;
      sg += (double)g[idx];
      if (with_t) st += (double)t[idx];
    }
    SFX(dv_reduce)(B, red, &sg, &st);
    if (tid == 0) {
      double *part = (double *)A->part + (pair * (size_t)A->noff + B->bx) * 2;
      part[0] = sg;
      part[1] = st;
    }
    return;
  }
  for (unsigned k = tid; k < nvalid; k += nt) { /* back into the pair's covariance: only this offset's entries */
    DV_CELL(k, vw, inv, ii, jj);
    unsigned i = i0 + ii, j = j0 + jj, idx = (i + pad) * ld + pad + j, p = i * w + j;
    size_t at = pair * A->fstride + (size_t)p * hw + (unsigned)((int)p - shift);
    ((REAL *)A->fg)[at] = g[idx];
    if (with_t) ((REAL *)A->ft)[at] = t[idx];
  }
}

/* ---- the full covariance, for layers that couple offsets ---------------- */

/* Items k = bx * nt + tid, stepping by gx * nt: a grid-stride loop. */
#define DV_GRID_LOOP(k, total) \
  for (size_t k = (size_t)B->bx * B->nt + B->tid; k < (total); k += (size_t)B->gx * B->nt)

static DEV void SFX(dv_input_full)(const struct ntk_dev_args *A, struct ntk_blk *B) {
  const struct ntk_dev_plan *P = A->P;
  size_t W = (size_t)P->W, HW = (size_t)P->H * W, C = (size_t)P->C, d = HW * C;
  DV_GRID_LOOP(k, (size_t)A->np * HW * HW) {
    size_t pair = k / (HW * HW), r = k % (HW * HW), p = r / HW, q = r % HW;
    long di = (long)(p / W) - (long)(q / W), dj = (long)(p % W) - (long)(q % W);
    if (di < -A->bh || di > A->bh || dj < -A->bw || dj > A->bw) continue; /* outside the band: stays 0 */
    ((REAL *)A->fg)[pair * A->fstride + r] = SFX(dv_dot)((const REAL *)A->x + A->pa[pair] * d + p * C,
                                                         (const REAL *)A->x + A->pb[pair] * d + q * C, (int)C);
  }
}

static DEV void SFX(dv_conv_full)(const struct ntk_dev_args *A, struct ntk_blk *B) {
  const struct ntk_dev_op *o = &A->P->ops[A->k0];
  size_t hwi = (size_t)o->hi * o->wi, hwo = (size_t)o->ho * o->wo;
  REAL scale = (REAL)(1.0 / (double)(o->f * o->f)), w2 = (REAL)o->w2, b2 = (REAL)o->b2;
  DV_GRID_LOOP(k, (size_t)A->np * hwo * hwo) {
    size_t pair = k / (hwo * hwo), r = k % (hwo * hwo), p = r / hwo, q = r % hwo;
    long i = (long)(p / (size_t)o->wo), j = (long)(p % (size_t)o->wo);
    long i2 = (long)(q / (size_t)o->wo), j2 = (long)(q % (size_t)o->wo);
    const REAL *ing = (const REAL *)A->fg + pair * A->fstride;
    const REAL *int_ = A->with_t ? (const REAL *)A->ft + pair * A->fstride : ing;
    REAL sg = 0, st = 0;
    for (int a = 0; a < o->f; a++) { /* conv_full's order */
      long r1 = o->s * i + a - o->lo_h, r2 = o->s * i2 + a - o->lo_h;
      if (o->circular) {
        r1 = (r1 % o->hi + o->hi) % o->hi;
        r2 = (r2 % o->hi + o->hi) % o->hi;
      } else if (r1 < 0 || r1 >= o->hi || r2 < 0 || r2 >= o->hi) {
        continue;
      }
      for (int b = 0; b < o->f; b++) {
        long c1 = o->s * j + b - o->lo_w, c2 = o->s * j2 + b - o->lo_w;
        if (o->circular) {
          c1 = (c1 % o->wi + o->wi) % o->wi;
          c2 = (c2 % o->wi + o->wi) % o->wi;
        } else if (c1 < 0 || c1 >= o->wi || c2 < 0 || c2 >= o->wi) {
          continue;
        }
        size_t at = (size_t)(r1 * o->wi + c1) * hwi + (size_t)(r2 * o->wi + c2);
        sg += ing[at];
        if (A->with_t) st += int_[at];
      }
    }
    REAL g = w2 * (sg * scale) + b2;
    ((REAL *)A->ng)[pair * A->fstride + r] = g;
    if (A->with_t) ((REAL *)A->nt)[pair * A->fstride + r] = g + w2 * (st * scale);
  }
}

/* AvgPool over both positions: per output, image a's window of (image b's
 * window sums times scale), times scale -- pool_full's two passes, in its
 * order, for one entry. */
static DEV void SFX(dv_pool_full)(const struct ntk_dev_args *A, struct ntk_blk *B) {
  const struct ntk_dev_op *o = &A->P->ops[A->k0];
  size_t hwi = (size_t)o->hi * o->wi, hwo = (size_t)o->ho * o->wo, win = (size_t)o->f, s = (size_t)o->s;
  size_t wi = (size_t)o->wi, wo = (size_t)o->wo;
  REAL scale = (REAL)(1.0 / (double)(win * win));
  for (int which = 0; which < 1 + A->with_t; which++) {
    const REAL *in = (const REAL *)(which ? A->ft : A->fg);
    REAL *out = (REAL *)(which ? A->nt : A->ng);
    DV_GRID_LOOP(k, (size_t)A->np * hwo * hwo) {
      size_t pair = k / (hwo * hwo), r = k % (hwo * hwo), p = r / hwo, q = r % hwo;
      size_t i = p / wo, j = p % wo, i2 = q / wo, j2 = q % wo;
      const REAL *src = in + pair * A->fstride;
      REAL outer = 0;
      for (size_t a = 0; a < win; a++)
        for (size_t b = 0; b < win; b++) {
          const REAL *row = src + ((s * i + a) * wi + s * j + b) * hwi;
          REAL inner = 0;
          for (size_t a2 = 0; a2 < win; a2++)
            for (size_t b2 = 0; b2 < win; b2++) inner += row[(s * i2 + a2) * wi + s * j2 + b2];
          outer += inner * scale;
        }
      out[pair * A->fstride + r] = outer * scale;
    }
  }
}

/* ---- readout and the fully-connected tail -------------------------------- */

static DEV void SFX(dv_readout)(const struct ntk_dev_args *A, struct ntk_blk *B, REAL *sm) {
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
    norm = P->readout == NTK_LAYER_GLOBALAVGPOOL ? (double)(n * n) : (double)n;
  } else {
    const REAL *fg = (const REAL *)A->fg + pair * A->fstride;
    const REAL *ft = A->with_t ? (const REAL *)A->ft + pair * A->fstride : fg;
    int gap = A->mode == NTK_RO_FULL_GAP;
    size_t items = gap ? n * n : n;
    for (size_t k = tid; k < items; k += nt) {
      size_t at = gap ? k : k * n + k;
      sg += (double)fg[at];
      if (A->with_t) st += (double)ft[at];
    }
    norm = gap ? (double)(n * n) : (double)n;
  }
  SFX(dv_reduce)(B, (double *)(void *)sm, &sg, &st);
  if (tid != 0) return;
  REAL g = (REAL)(sg / norm), t = (REAL)(st / norm);
  REAL *ta = (REAL *)A->var + A->pa[pair] * (size_t)P->var_size + P->tail_off;
  const REAL *tb = (const REAL *)A->var + A->pb[pair] * (size_t)P->var_size + P->tail_off;
  for (int k = 0; k < P->ntail; k++) {
    const struct ntk_dev_op *o = &P->tail[k];
    if (A->self) ta[k] = g;
    if (o->kind == NTK_LAYER_DENSE) {
      REAL w2 = (REAL)o->w2;
      g = w2 * g + (REAL)o->b2;
      t = g + w2 * t;
    } else if (o->kind == NTK_LAYER_ABRELU || o->kind == NTK_LAYER_ERF) {
      REAL td;
      g = SFX(dv_nonlin)(o, g, ta[k], tb[k], RSQRT(ta[k]), RSQRT(tb[k]), &td);
      t *= td;
    }
  }
  REAL *out = (REAL *)A->out + pair * 2;
  out[0] = g;
  out[1] = A->with_t ? t : 0;
}
