/* Batched CNN kernels: one image a against a batch of NTK_CNN_BATCH images
 * b, the batch index innermost so that every loop runs along contiguous
 * SIMD lanes with no edge cases. Included twice by src/worker/cnn.c like
 * cnn_impl.h. Two shapes are batched:
 *   DIAG          Flatten readout, no pooling: arrays [position][k];
 *   SLICE_SINGLE  one run of stride-1 SAME layers from the input to
 *                 GlobalAvgPool (CNTK-GAP): one offset at a time, arrays
 *                 [cell][k] with a zero border, all layers while in cache.
 * Inputs of the batch images (xb) and their variances (vb) are transposed
 * per tile to [position][channel or slot][k]. */

#define B NTK_CNN_BATCH

/* One value per lane as a GCC vector: the filter sums below are plain vector
 * adds whatever the compiler makes of short loops (with arrays and loops it
 * emitted scalar adds and shuffles: 78% of the time, perf). Unaligned, may
 * alias the REAL arrays. */
typedef REAL SFX(lanes) __attribute__((vector_size(NTK_CNN_BATCH * sizeof(REAL)), aligned(sizeof(REAL)), may_alias));
/* The same lanes in double: readout sums (GlobalAvgPool adds up to a
 * million entries per pair; in float32 that alone cost 1e-4). */
typedef double SFX(dlanes) __attribute__((vector_size(NTK_CNN_BATCH * sizeof(double))));

NTK_CLONES static void SFX(b_affine)(REAL *restrict g, REAL *restrict t, size_t n, REAL w2, REAL b2) {
  for (size_t k = 0; k < n; k++) g[k] = w2 * g[k] + b2;
  if (t)
    for (size_t k = 0; k < n; k++) t[k] = g[k] + w2 * t[k];
}

/* DIAG conv followed by the layer's affine map: the box sum of in, then
 * nngp' = W^2 sum/f^2 + b^2 (gnew NULL) or ntk' = gnew + W^2 sum/f^2 (gnew
 * the layer's nngp'), rounded as conv_diag and affine round them. The box
 * sum goes as conv_diag's: first each input row's sums over the filter
 * columns for every output column (rows: hi x wo cells), then those over
 * the filter rows, cells outside the input skipped. */
NTK_CLONES static void SFX(b_conv_diag)(const struct cnn_op *op, const REAL *restrict in, REAL *restrict rows,
                                        REAL *restrict out, const REAL *restrict gnew) {
  long fh = (long)op->fh, fw = (long)op->fw, sh = (long)op->sh, sw = (long)op->sw;
  long lo_h = (long)op->lo_h, lo_w = (long)op->lo_w;
  long hi = (long)op->hi, wi = (long)op->wi;
  REAL scale = (REAL)(1.0 / (double)(fh * fw));
  REAL w2 = (REAL)(op->layer->w_std * op->layer->w_std), b2 = (REAL)(op->layer->b_std * op->layer->b_std);
  for (long r = 0; r < hi; r++)
    for (size_t j = 0; j < op->wo; j++) {
      SFX(lanes) acc = {0};
      long c0 = sw * (long)j - lo_w;
      if (op->circular) {
        for (long bb = 0; bb < fw; bb++)
          acc += *(const SFX(lanes) *)(in + (size_t)(r * wi + ((c0 + bb) % wi + wi) % wi) * B);
      } else {
        long b0 = c0 < 0 ? -c0 : 0, b1 = c0 + fw > wi ? wi - c0 : fw;
        const REAL *src = in + (size_t)(r * wi + c0 + b0) * B;
        for (long bb = b0; bb < b1; bb++) acc += *(const SFX(lanes) *)(src + (size_t)(bb - b0) * B);
      }
      *(SFX(lanes) *)(rows + ((size_t)r * op->wo + j) * B) = acc;
    }
  for (size_t i = 0; i < op->ho; i++) {
    long r0 = sh * (long)i - lo_h;
    long a0 = op->circular || r0 >= 0 ? 0 : -r0, a1 = !op->circular && r0 + fh > hi ? hi - r0 : fh;
    for (size_t j = 0; j < op->wo; j++) {
      SFX(lanes) acc = {0};
      for (long a = a0; a < a1; a++) {
        long r = op->circular ? ((r0 + a) % hi + hi) % hi : r0 + a;
        acc += *(const SFX(lanes) *)(rows + ((size_t)r * op->wo + j) * B);
      }
      SFX(lanes) *o = (SFX(lanes) *)(out + (i * op->wo + j) * B);
      if (gnew) *o = *(const SFX(lanes) *)(gnew + (i * op->wo + j) * B) + w2 * (acc * scale);
      else *o = w2 * (acc * scale) + b2;
    }
  }
}

/* Nonlinearity on `n` positions: q11 per position (image a), q22 per lane;
 * ra, rb: their ntk_rsqrt, laid out alike (src/worker/map_rows.c). */
static void SFX(b_nonlin)(const struct cnn_op *op, REAL *g, REAL *t, size_t n, const REAL *qa, const REAL *qb,
                          const REAL *ra, const REAL *rb, size_t qb_stride) {
  MAP_ROWS(&op->layer->map, g, t, n, B, qa, ra, qb, rb, qb_stride);
}

/* Image a against the batch: xbt is [position][channel][k], vbt is
 * [slot][position][k] for the spatial slots (variances, then their
 * ntk_rsqrt). Results per lane. */
static void SFX(b_pair_diag)(const ntk_cnn_t *c, struct cnn_bws *ws, const REAL *xa, const REAL *xbt, const REAL *va,
                             const REAL *vbt, int with_t, REAL *out_g, REAL *out_t) {
  const struct cnn_plan *P = &c->plan;
  size_t HW = P->H * P->W, C = P->C;
  REAL *g = (REAL *)ws->g, *t = (REAL *)ws->t, *g2 = (REAL *)ws->g2, *t2 = (REAL *)ws->t2;
  /* Same operations as the per-pair code (a division, not a reciprocal):
   * the entry of a pair (a, a) must equal a's variance bit for bit. */
  for (size_t p = 0; p < HW; p++) {
    REAL *gp = g + p * B;
    for (size_t k = 0; k < B; k++) gp[k] = 0;
    for (size_t ch = 0; ch < C; ch++) {
      REAL xv = xa[p * C + ch];
      const REAL *xb = xbt + (p * C + ch) * B;
      for (size_t k = 0; k < B; k++) gp[k] += xv * xb[k];
    }
    for (size_t k = 0; k < B; k++) gp[k] /= (REAL)C;
  }
  if (with_t) memset(t, 0, HW * B * sizeof(REAL));
  for (size_t k = 0; k < P->nops; k++) {
    const struct cnn_op *op = &P->ops[k];
    size_t n = op->ho * op->wo;
    const struct ntk_layer *l = op->layer;
    if (l->kind == NTK_LAYER_CONV) {
      SFX(b_conv_diag)(op, g, (REAL *)ws->rows, g2, NULL);
      if (with_t) SFX(b_conv_diag)(op, t, (REAL *)ws->rows, t2, g2);
      REAL *x = g; g = g2; g2 = x;
      x = t; t = t2; t2 = x;
    } else if (l->kind == NTK_LAYER_DENSE) {
      SFX(b_affine)(g, with_t ? t : NULL, n * B, (REAL)(l->w_std * l->w_std), (REAL)(l->b_std * l->b_std));
    } else if (ntk_layer_traits(l->kind)->branch) { /* a residual block (branch.h), B lanes per position */
      size_t cap = HW * B, nin = op->hi * op->wi * B;
      REAL *slot = (REAL *)ws->stack + 4 * cap * (size_t)op->depth, *tt = with_t ? t : NULL;
      if (l->kind == NTK_LAYER_FORK) SFX(branch_fork)(slot, cap, nin, g, tt);
      else if (l->kind == NTK_LAYER_NEXT) SFX(branch_next)(slot, cap, nin, n * B, op->first, g, tt);
      else SFX(branch_join)(slot, cap, nin, l->branches, l->sum, g, tt);
    } else if (op->var >= 0) {
      size_t off = P->var_off[op->var];
      SFX(b_nonlin)(op, g, with_t ? t : NULL, n, va + off, vbt + off * B, va + off + n, vbt + (off + n) * B, B);
    }
  }
  size_t n = P->out_h * P->out_w;
  double sg[NTK_CNN_BATCH] = {0}, st[NTK_CNN_BATCH] = {0}; /* readout sums in double, as pair() */
  for (size_t p = 0; p < n; p++)
    for (size_t k = 0; k < B; k++) {
      sg[k] += (double)g[p * B + k];
      if (with_t) st[k] += (double)t[p * B + k];
    }
  for (size_t k = 0; k < B; k++) {
    out_g[k] = (REAL)(sg[k] / (double)n);
    out_t[k] = (REAL)(st[k] / (double)n);
  }
}

/* Box filter of one slice over the valid region (f x f, SAME, stride 1),
 * then nngp' = W^2 A + b^2, ntk' = nngp' + W^2 A(ntk). Cells outside the
 * region stay zero. */
NTK_CLONES static void SFX(b_slice_conv)(const struct cnn_op *op, struct cnn_bws *ws, size_t ld, size_t pad,
                                         size_t i0, size_t i1, size_t j0, size_t j1, int with_t) {
  const struct ntk_layer *l = op->layer;
  size_t fh = op->fh, fw = op->fw, lo = op->lo_h, lo_w = op->lo_w;
  REAL w2 = (REAL)(l->w_std * l->w_std), b2 = (REAL)(l->b_std * l->b_std);
  REAL scale = (REAL)(1.0 / (double)(fh * fw));
  REAL *rows = (REAL *)ws->rows;
  for (int which = 0; which < 1 + with_t; which++) {
    const REAL *in = (const REAL *)(which ? ws->t : ws->g);
    REAL *out = (REAL *)(which ? ws->t2 : ws->g2);
    size_t r0 = i0 + pad - lo, r1 = i1 + pad - lo + fh - 1;
    for (size_t r = r0; r < r1; r++)
      for (size_t j = j0; j < j1; j++) {
        const REAL *src = in + (r * ld + pad - lo_w + j) * B;
        SFX(lanes) acc = *(const SFX(lanes) *)src;
        for (size_t bb = 1; bb < fw; bb++) acc += *(const SFX(lanes) *)(src + bb * B);
        *(SFX(lanes) *)(rows + (r * ld + j) * B) = acc;
      }
    /* The vertical pass ends in the affine map, rounded as slice_conv's
     * separate pass rounds it (the nngp pass runs first). */
    const REAL *gnew = (const REAL *)ws->g2;
    for (size_t i = i0; i < i1; i++)
      for (size_t j = j0; j < j1; j++) {
        const REAL *src = rows + ((i + pad - lo) * ld + j) * B;
        SFX(lanes) acc = *(const SFX(lanes) *)src;
        for (size_t a = 1; a < fh; a++) acc += *(const SFX(lanes) *)(src + a * ld * B);
        size_t cell = ((i + pad) * ld + pad + j) * B;
        if (which) *(SFX(lanes) *)(out + cell) = *(const SFX(lanes) *)(gnew + cell) + w2 * (acc * scale);
        else *(SFX(lanes) *)(out + cell) = w2 * (acc * scale) + b2;
      }
  }
  void *x = ws->g;
  ws->g = ws->g2;
  ws->g2 = x;
  x = ws->t;
  ws->t = ws->t2;
  ws->t2 = x;
}

/* Image a against the batch, single slice-local stage to GlobalAvgPool. */
static void SFX(b_pair_slice)(const ntk_cnn_t *c, struct cnn_bws *ws, const REAL *xa, const REAL *xbt, const REAL *va,
                              const REAL *vbt, int with_t, REAL *out_g, REAL *out_t) {
  const struct cnn_plan *P = &c->plan;
  size_t h = P->H, w = P->W, C = P->C, pad = P->pad, ld = w + 2 * pad, hw = h * w;
  SFX(dlanes) gsum = {0}, tsum = {0}; /* readout sums in double, as pair() */
  for (long di = -(long)h + 1; di < (long)h; di++)
    for (long dj = -(long)w + 1; dj < (long)w; dj++) {
      size_t i0 = di > 0 ? (size_t)di : 0, i1 = di < 0 ? (size_t)((long)h + di) : h;
      size_t j0 = dj > 0 ? (size_t)dj : 0, j1 = dj < 0 ? (size_t)((long)w + dj) : w;
      /* The input covariance of this offset, straight from the images
       * (the same operations, in the same order, as the per-pair code). */
      for (size_t i = i0; i < i1; i++)
        for (size_t j = j0; j < j1; j++) {
          size_t pa = i * w + j, pb = (size_t)(((long)i - di) * (long)w + (long)j - dj);
          SFX(lanes) acc = {0};
          for (size_t ch = 0; ch < C; ch++) acc += xa[pa * C + ch] * *(const SFX(lanes) *)(xbt + (pb * C + ch) * B);
          *(SFX(lanes) *)((REAL *)ws->g + ((i + pad) * ld + pad + j) * B) = acc / (REAL)C;
        }
      for (size_t kk = 0; kk < P->nops; kk++) {
        const struct cnn_op *op = &P->ops[kk];
        const struct ntk_layer *l = op->layer;
        if (l->kind == NTK_LAYER_CONV) {
          SFX(b_slice_conv)(op, ws, ld, pad, i0, i1, j0, j1, with_t);
        } else if (ntk_layer_traits(l->kind)->branch) { /* a slice-local residual block, row by row */
          size_t cap = ld * (h + 2 * pad) * B, nrow = (j1 - j0) * B;
          REAL *slot = (REAL *)ws->stack + 4 * cap * (size_t)op->depth;
          for (size_t i = i0; i < i1; i++) {
            size_t at = ((i + pad) * ld + pad + j0) * B;
            REAL *gr = (REAL *)ws->g + at, *tr = with_t ? (REAL *)ws->t + at : NULL;
            if (l->kind == NTK_LAYER_FORK) SFX(branch_fork)(slot + at, cap, nrow, gr, tr);
            else if (l->kind == NTK_LAYER_NEXT) SFX(branch_next)(slot + at, cap, nrow, nrow, op->first, gr, tr);
            else SFX(branch_join)(slot + at, cap, nrow, l->branches, l->sum, gr, tr);
          }
        } else if (l->kind == NTK_LAYER_DENSE || op->var >= 0) {
          for (size_t i = i0; i < i1; i++) {
            size_t cell = (i + pad) * ld + pad + j0;
            REAL *g = (REAL *)ws->g + cell * B, *t = with_t ? (REAL *)ws->t + cell * B : NULL;
            if (l->kind == NTK_LAYER_DENSE) {
              SFX(b_affine)(g, t, (j1 - j0) * B, (REAL)(l->w_std * l->w_std), (REAL)(l->b_std * l->b_std));
            } else {
              size_t pa = P->var_off[op->var] + i * w + j0;
              size_t pb = (P->var_off[op->var] + (size_t)(((long)i - di) * (long)w + (long)j0 - dj)) * B;
              SFX(b_nonlin)(op, g, t, j1 - j0, va + pa, vbt + pb, va + pa + hw, vbt + pb + hw * B, B);
            }
          }
        }
      }
      /* Sum for the readout, and clear the region for the next offset. */
      for (size_t i = i0; i < i1; i++) {
        size_t cell = (i + pad) * ld + pad + j0, n = (j1 - j0) * B;
        REAL *g = (REAL *)ws->g + cell * B, *t = (REAL *)ws->t + cell * B;
        for (size_t q = 0; q < n; q += B) gsum += __builtin_convertvector(*(const SFX(lanes) *)(g + q), SFX(dlanes));
        if (with_t)
          for (size_t q = 0; q < n; q += B) tsum += __builtin_convertvector(*(const SFX(lanes) *)(t + q), SFX(dlanes));
        memset(g, 0, n * sizeof(REAL));
        memset((REAL *)ws->g2 + cell * B, 0, n * sizeof(REAL));
        if (with_t) {
          memset(t, 0, n * sizeof(REAL));
          memset((REAL *)ws->t2 + cell * B, 0, n * sizeof(REAL));
        }
      }
    }
  double norm = P->readout_sum ? 1.0 : (double)(hw * hw); /* GlobalSumPool: the sum */
  for (size_t k = 0; k < B; k++) {
    out_g[k] = (REAL)(gsum[k] / norm);
    out_t[k] = with_t ? (REAL)(tsum[k] / norm) : 0;
  }
}

/* The fully-connected tail for a batch of scalars. */
static void SFX(b_tail)(const ntk_cnn_t *c, const REAL *ta, const REAL *tbt, REAL *g, REAL *t) {
  const struct cnn_plan *P = &c->plan;
  for (size_t kk = 0; kk < P->ntail; kk++) {
    const struct ntk_layer *l = &P->tail[kk];
    for (size_t k = 0; k < B; k++) {
      if (l->kind == NTK_LAYER_DENSE) {
        REAL w2 = (REAL)(l->w_std * l->w_std);
        g[k] = w2 * g[k] + (REAL)(l->b_std * l->b_std);
        t[k] = g[k] + w2 * t[k];
      } else if (ntk_layer_traits(l->kind)->var_slot) {
        REAL td;
        g[k] = SFX(nonlin1)(l, g[k], ta[kk], tbt[kk * B + k], &td);
        t[k] *= td;
      }
    }
  }
}

#undef B
