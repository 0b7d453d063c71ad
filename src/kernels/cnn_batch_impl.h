/* Batched CNN kernels: one image a against a batch of NTK_CNN_BATCH images
 * b, the batch index innermost so that every loop runs along contiguous
 * SIMD lanes with no edge cases. Included twice by src/kernels/cnn.c like
 * cnn_impl.h. Three shapes are batched:
 *   DIAG          Flatten readout, no pooling: arrays [position][k];
 *   SLICE_SINGLE  one run of stride-1 SAME layers from the input to
 *                 GlobalAvgPool (CNTK-GAP): one offset at a time, arrays
 *                 [cell][k] with a zero border, all layers while in cache;
 *   SLICE_MULTI   such runs joined by pooling layers, into GlobalAvgPool
 *                 (Myrtle): each run as SLICE_SINGLE, pooled on the way
 *                 into the next run's full covariance [P][Q][k].
 * Every entry gets the bits of the same path pair by pair (cnn_impl.h):
 * the same operations in the same order, per lane.
 * Inputs of the batch images (xb) and their variances (vb) are transposed
 * per tile to [position][channel or slot][k]. The b_pair_* functions poll
 * the stop flag per layer (of each offset) and return 1 when it is set,
 * their outputs then garbage (cnn_impl.h's rule). */

/* The per-precision names this file defines (each_precision.h), ... */
#define lanes SFX(lanes)
#define dlanes SFX(dlanes)
#define b_affine SFX(b_affine)
#define b_conv_diag SFX(b_conv_diag)
#define b_nonlin SFX(b_nonlin)
#define b_is_nonlin SFX(b_is_nonlin)
#define b_diag_input SFX(b_diag_input)
#define b_diag_sum SFX(b_diag_sum)
#define b_pair_diag SFX(b_pair_diag)
#define box_sums SFX(box_sums)
#define box_affine SFX(box_affine)
#define box_affine_abrelu SFX(box_affine_abrelu)
#define slice_map SFX(slice_map)
#define b_slice_conv SFX(b_slice_conv)
#define b_slice_ops SFX(b_slice_ops)
#define b_slice_input SFX(b_slice_input)
#define b_slice_clear SFX(b_slice_clear)
#define b_slice_sum SFX(b_slice_sum)
#define b_pair_slice SFX(b_pair_slice)
#define b_pool_range SFX(b_pool_range)
#define b_slice_from_full SFX(b_slice_from_full)
#define b_pool_add SFX(b_pool_add)
#define b_pool_finish SFX(b_pool_finish)
#define b_pair_multi SFX(b_pair_multi)
#define b_tail SFX(b_tail)
/* ... and those of cnn_impl.h and branch_impl.h it calls. */
#define pool_scale SFX(pool_scale)
#define nonlin1 SFX(nonlin1)
#define branch_fork SFX(branch_fork)
#define branch_next SFX(branch_next)
#define branch_join SFX(branch_join)

#define B NTK_CNN_BATCH

/* One value per lane as a GCC vector: the filter sums below are plain vector
 * adds whatever the compiler makes of short loops (with arrays and loops it
 * emitted scalar adds and shuffles: 78% of the time, perf). Unaligned, may
 * alias the REAL arrays. */
typedef REAL lanes __attribute__((vector_size(NTK_CNN_BATCH * sizeof(REAL)), aligned(sizeof(REAL)), may_alias));
/* The same lanes in double: readout sums (GlobalAvgPool adds up to a
 * million entries per pair; in float32 that alone cost 1e-4). */
typedef double dlanes __attribute__((vector_size(NTK_CNN_BATCH * sizeof(double))));

NTK_CLONES static void b_affine(REAL *restrict g, REAL *restrict t, size_t n, REAL w2, REAL b2) {
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
NTK_CLONES static void b_conv_diag(const struct cnn_op *op, const REAL *restrict in, REAL *restrict rows,
                                   REAL *restrict out, const REAL *restrict gnew) {
  long fh = (long)op->fh, fw = (long)op->fw, sh = (long)op->sh, sw = (long)op->sw;
  long lo_h = (long)op->lo_h, lo_w = (long)op->lo_w;
  long hi = (long)op->hi, wi = (long)op->wi;
  REAL scale = (REAL)(1.0 / (double)(fh * fw));
  REAL w2 = (REAL)(op->layer->w_std * op->layer->w_std), b2 = (REAL)(op->layer->b_std * op->layer->b_std);
  for (long r = 0; r < hi; r++)
    for (size_t j = 0; j < op->wo; j++) {
      lanes acc = {0};
      long c0 = sw * (long)j - lo_w;
      if (op->circular) {
        for (long bb = 0; bb < fw; bb++)
          acc += *(const lanes *)(in + (size_t)(r * wi + ((c0 + bb) % wi + wi) % wi) * B);
      } else {
        long b0 = c0 < 0 ? -c0 : 0, b1 = c0 + fw > wi ? wi - c0 : fw;
        const REAL *src = in + (size_t)(r * wi + c0 + b0) * B;
        if (b1 - b0 == 3) { /* the usual 3-wide window, whole: the same adds unrolled */
          acc += *(const lanes *)src;
          acc += *(const lanes *)(src + B);
          acc += *(const lanes *)(src + 2 * B);
        } else {
          for (long bb = b0; bb < b1; bb++) acc += *(const lanes *)(src + (size_t)(bb - b0) * B);
        }
      }
      *(lanes *)(rows + ((size_t)r * op->wo + j) * B) = acc;
    }
  for (size_t i = 0; i < op->ho; i++) {
    long r0 = sh * (long)i - lo_h;
    long a0 = op->circular || r0 >= 0 ? 0 : -r0, a1 = !op->circular && r0 + fh > hi ? hi - r0 : fh;
    int three = !op->circular && a1 - a0 == 3; /* the usual 3 rows, whole: unrolled */
    const REAL *row0 = three ? rows + (size_t)(r0 + a0) * op->wo * B : rows;
    const REAL *row1 = three ? row0 + op->wo * B : rows, *row2 = three ? row1 + op->wo * B : rows;
    for (size_t j = 0; j < op->wo; j++) {
      lanes acc = {0};
      if (three) {
        acc += *(const lanes *)(row0 + j * B);
        acc += *(const lanes *)(row1 + j * B);
        acc += *(const lanes *)(row2 + j * B);
      } else {
        for (long a = a0; a < a1; a++) {
          long r = op->circular ? ((r0 + a) % hi + hi) % hi : r0 + a;
          acc += *(const lanes *)(rows + ((size_t)r * op->wo + j) * B);
        }
      }
      lanes *o = (lanes *)(out + (i * op->wo + j) * B);
      if (gnew) *o = *(const lanes *)(gnew + (i * op->wo + j) * B) + w2 * (acc * scale);
      else *o = w2 * (acc * scale) + b2;
    }
  }
}

/* Nonlinearity on `n` positions: q11 per position (image a), q22 per lane;
 * ra, rb: their ntk_rsqrt, laid out alike (src/kernels/map_rows.c). */
static void b_nonlin(const struct cnn_op *op, REAL *g, REAL *t, size_t n, const REAL *qa, const REAL *qb,
                     const REAL *ra, const REAL *rb, size_t qb_stride) {
  MAP_ROWS(&op->layer->map, g, t, n, B, qa, ra, qb, rb, qb_stride);
}

/* Whether op is a nonlinearity on per-position variances (b_nonlin). */
static int b_is_nonlin(const struct cnn_op *op) {
  return op->layer->kind != NTK_LAYER_DENSE && !ntk_layer_traits(op->layer->kind)->branch && op->var >= 0;
}

/* The input covariance of image a against the batch, position by
 * position, with the per-pair code's operations (a division, not a
 * reciprocal: the entry of a pair (a, a) must equal a's variance bit for
 * bit). */
NTK_CLONES static void b_diag_input(REAL *restrict g, const REAL *restrict xa, const REAL *restrict xbt,
                                    size_t HW, size_t C) {
  for (size_t p = 0; p < HW; p++) {
    lanes acc = {0};
    for (size_t ch = 0; ch < C; ch++) acc += xa[p * C + ch] * *(const lanes *)(xbt + (p * C + ch) * B);
    *(lanes *)(g + p * B) = acc / (REAL)C;
  }
}

/* s[k] += the n positions of lane k, in double, in position order. */
NTK_CLONES static void b_diag_sum(const REAL *restrict g, size_t n, double *restrict s) {
  dlanes acc = {0};
  for (size_t p = 0; p < n; p++) acc += __builtin_convertvector(*(const lanes *)(g + p * B), dlanes);
  for (size_t k = 0; k < B; k++) s[k] += acc[k];
}

/* Image a against the batch: xbt is [position][channel][k], vbt is
 * [slot][position][k] for the spatial slots (variances, then their
 * ntk_rsqrt). Results per lane. */
static int b_pair_diag(const ntk_cnn_t *c, struct cnn_bws *ws, const REAL *xa, const REAL *xbt, const REAL *va,
                       const REAL *vbt, int with_t, REAL *out_g, REAL *out_t) {
  const struct cnn_plan *P = &c->plan;
  size_t HW = P->H * P->W, C = P->C;
  REAL *g = (REAL *)ws->g, *t = (REAL *)ws->t, *g2 = (REAL *)ws->g2, *t2 = (REAL *)ws->t2;
  b_diag_input(g, xa, xbt, HW, C);
  if (with_t) memset(t, 0, HW * B * sizeof(REAL));
  for (size_t k = 0; k < P->nops; k++) {
    if (ntk_stop_seen(c->stop)) return 1;
    const struct cnn_op *op = &P->ops[k];
    size_t n = op->ho * op->wo;
    const struct ntk_layer *l = op->layer;
    if (l->kind == NTK_LAYER_CONV) {
      b_conv_diag(op, g, (REAL *)ws->rows, g2, NULL);
      if (with_t) b_conv_diag(op, t, (REAL *)ws->rows, t2, g2);
      REAL *x = g; g = g2; g2 = x;
      x = t; t = t2; t2 = x;
    } else if (l->kind == NTK_LAYER_DENSE) {
      b_affine(g, with_t ? t : NULL, n * B, (REAL)(l->w_std * l->w_std), (REAL)(l->b_std * l->b_std));
    } else if (ntk_layer_traits(l->kind)->branch) { /* a residual block (branch.h), B lanes per position */
      size_t cap = HW * B, nin = op->hi * op->wi * B;
      REAL *slot = (REAL *)ws->stack + 4 * cap * (size_t)op->depth, *tt = with_t ? t : NULL;
      if (l->kind == NTK_LAYER_FORK) branch_fork(slot, cap, nin, g, tt);
      else if (l->kind == NTK_LAYER_NEXT) branch_next(slot, cap, nin, n * B, op->first, l->prod, (REAL)op->fanw, g, tt);
      else branch_join(slot, cap, nin, l->branches, l->prod, (REAL)op->fanw, (REAL)op->fandiv, g, tt);
    } else if (op->var >= 0) {
      size_t off = P->var_off[op->var];
      b_nonlin(op, g, with_t ? t : NULL, n, va + off, vbt + off * B, va + off + n, vbt + (off + n) * B, B);
    }
  }
  size_t n = P->out_h * P->out_w;
  double sg[NTK_CNN_BATCH] = {0}, st[NTK_CNN_BATCH] = {0}; /* readout sums in double, as pair() */
  b_diag_sum(g, n, sg);
  if (with_t) b_diag_sum(t, n, st);
  for (size_t k = 0; k < B; k++) {
    out_g[k] = (REAL)(sg[k] / (double)n);
    out_t[k] = (REAL)(st[k] / (double)n);
  }
  return 0;
}

/* dst[j] = src[j] + src[j + step] + ... (f terms, added in that order) for
 * the lanes of cells j0 <= j < j1. Inlined with f constant for the usual
 * 3 x 3 filter, so that the sum is two plain adds per cell. */
static inline __attribute__((always_inline)) void box_sums(const REAL *restrict src, REAL *restrict dst,
                                                           size_t j0, size_t j1, size_t step, size_t f) {
  for (size_t j = j0; j < j1; j++) {
    const REAL *p = src + j * B;
    lanes acc = *(const lanes *)p;
    for (size_t k = 1; k < f; k++) acc += *(const lanes *)(p + k * step);
    *(lanes *)(dst + j * B) = acc;
  }
}

/* The vertical sums, as box_sums, of cells j0 <= j < j1 and the layer's
 * affine map on them: out[j] = W^2 (sum * scale) + b^2, or with gnew (the
 * ntk pass) gnew[j] + W^2 (sum * scale). out and gnew start at cell j0. */
static inline __attribute__((always_inline)) void box_affine(const REAL *restrict src, REAL *out,
                                                             const REAL *gnew, size_t j0, size_t j1,
                                                             size_t step, size_t f, REAL w2, REAL b2,
                                                             REAL scale) {
  for (size_t j = j0; j < j1; j++) {
    const REAL *p = src + j * B;
    lanes acc = *(const lanes *)p;
    for (size_t k = 1; k < f; k++) acc += *(const lanes *)(p + k * step);
    lanes *o = (lanes *)(out + (j - j0) * B);
    if (gnew) *o = *(const lanes *)(gnew + (j - j0) * B) + w2 * (acc * scale);
    else *o = w2 * (acc * scale) + b2;
  }
}

/* box_affine of both kernels (fh = 3) and the ABRelu map, cell by cell:
 * the same operations as box_affine on the nngp row, box_affine on the
 * ntk row (gnew the new nngp cell) and the map loop of map_rows.c on both
 * (ntk_map_rows), so the same bits. One pass instead of three lets the
 * filter's adds issue beside the map's multiplies and FMAs: the map alone
 * keeps the multiply pipes busy and the adds' pipes idle. qa, ra: image a's
 * variance and its ntk_rsqrt per cell; qb, rb: the batch's, B lanes per
 * cell, and vb, ub its v = q r and u = v r (ABRELU_VU). ot NULL: the nngp
 * alone. */
static inline __attribute__((always_inline)) void box_affine_abrelu(
    const REAL *restrict sg, const REAL *restrict st, REAL *restrict og, REAL *restrict ot, size_t j0, size_t j1,
    size_t step, REAL w2, REAL b2, REAL scale, REAL pa, REAL pb, const REAL *restrict qa, const REAL *restrict ra,
    const REAL *restrict qb, const REAL *restrict rb, const REAL *restrict vb, const REAL *restrict ub) {
  for (size_t j = j0; j < j1; j++) {
    const REAL *p = sg + j * B;
    lanes acc = *(const lanes *)p;
    acc += *(const lanes *)(p + step);
    acc += *(const lanes *)(p + 2 * step);
    lanes g = w2 * (acc * scale) + b2, t = {0}, go, to;
    if (ot) {
      const REAL *q = st + j * B;
      lanes at = *(const lanes *)q;
      at += *(const lanes *)(q + step);
      at += *(const lanes *)(q + 2 * step);
      t = g + w2 * (at * scale);
    }
    size_t c = j - j0;
    REAL q11 = qa[c], r11 = ra[c];
    const REAL *q22 = qb + c * B, *r22 = rb + c * B, *v22 = vb + c * B, *u22 = ub + c * B;
    for (size_t k = 0; k < B; k++) {
      REAL td;
      go[k] = ABRELU_VU(pa, pb, g[k], q11, r11, q22[k], r22[k], v22[k], u22[k], &td);
      to[k] = t[k] * td;
    }
    *(lanes *)(og + c * B) = go;
    if (ot) *(lanes *)(ot + c * B) = to;
  }
}

/* The nonlinearity after a slice's conv, for b_slice_conv to apply row by
 * row: op NULL for none. */
struct slice_map {
  const struct cnn_op *op;
  const REAL *va, *vbt; /* image a's variance slots, the batch's ([slot][position][k]) */
  const REAL *vu;       /* the batch's v = q r and u = v r, as vbt (batched_tile) */
  size_t off, w, hw;    /* the op's slot offset, the image width, positions */
  long di, dj;          /* the slice's offset */
};

/* Box filter of one slice over the valid region (f x f, SAME, stride 1),
 * then nngp' = W^2 A + b^2, ntk' = nngp' + W^2 A(ntk), then the layer's
 * nonlinearity m->op (if any). Cells outside the region stay zero.
 * Row by row: an output row takes the horizontal sums of its fh input rows
 * (each input row summed once, just before the first output row that
 * needs it), its vertical sums, the affine map and the nonlinearity, so
 * that each pass reads what the one before wrote while it is in L1; a
 * layer at a time, the slice (~70 KB per array) went to L2 and back five
 * times. The arithmetic, and so every bit, is that of the separate passes:
 * the nngp row first, then the ntk row from it, then the map on both. */
NTK_CLONES static void b_slice_conv(const struct cnn_op *op, struct cnn_bws *ws, size_t ld, size_t pad,
                                    size_t i0, size_t i1, size_t j0, size_t j1, int with_t,
                                    const struct slice_map *m) {
  const struct ntk_layer *l = op->layer;
  size_t fh = op->fh, fw = op->fw, lo = op->lo_h, lo_w = op->lo_w;
  REAL w2 = (REAL)(l->w_std * l->w_std), b2 = (REAL)(l->b_std * l->b_std);
  REAL scale = (REAL)(1.0 / (double)(fh * fw));
  const REAL *in_g = (const REAL *)ws->g, *in_t = (const REAL *)ws->t;
  REAL *out_g = (REAL *)ws->g2, *out_t = (REAL *)ws->t2;
  REAL *rows_g = (REAL *)ws->rows, *rows_t = (REAL *)ws->rows + ws->rows_cap;
  size_t next = i0 + pad - lo; /* the next input row to sum horizontally */
  for (size_t i = i0; i < i1; i++) {
    for (; next < i + pad - lo + fh; next++)
      for (int which = 0; which < 1 + with_t; which++) {
        const REAL *in = which ? in_t : in_g;
        REAL *rows = which ? rows_t : rows_g;
        const REAL *src = in + (next * ld + pad - lo_w) * B;
        REAL *dst = rows + next * ld * B;
        if (fw == 3) box_sums(src, dst, j0, j1, B, 3);
        else box_sums(src, dst, j0, j1, B, fw);
      }
    size_t row = ((i + pad) * ld + pad + j0) * B;
    if (m->op && fh == 3 && m->op->layer->map.kind == NTK_MAP_ABRELU) {
      size_t pa = m->off + i * m->w + j0;
      size_t pb = (m->off + (size_t)(((long)i - m->di) * (long)m->w + (long)j0 - m->dj)) * B;
      const REAL *src = rows_g + (i + pad - lo) * ld * B, *srt = rows_t + (i + pad - lo) * ld * B;
      box_affine_abrelu(src, srt, out_g + row, with_t ? out_t + row : NULL, j0, j1, ld * B, w2, b2, scale,
                        (REAL)m->op->layer->map.a, (REAL)m->op->layer->map.b, m->va + pa, m->va + pa + m->hw,
                        m->vbt + pb, m->vbt + pb + m->hw * B, m->vu + pb, m->vu + pb + m->hw * B);
      continue;
    }
    for (int which = 0; which < 1 + with_t; which++) {
      const REAL *rows = which ? rows_t : rows_g;
      REAL *out = which ? out_t : out_g;
      const REAL *src = rows + (i + pad - lo) * ld * B;
      const REAL *gnew = which ? out_g + row : NULL; /* the ntk row adds the new nngp row */
      if (fh == 3) box_affine(src, out + row, gnew, j0, j1, ld * B, 3, w2, b2, scale);
      else box_affine(src, out + row, gnew, j0, j1, ld * B, fh, w2, b2, scale);
    }
    if (m->op) {
      size_t pa = m->off + i * m->w + j0;
      size_t pb = (m->off + (size_t)(((long)i - m->di) * (long)m->w + (long)j0 - m->dj)) * B;
      b_nonlin(m->op, out_g + row, with_t ? out_t + row : NULL, j1 - j0, m->va + pa, m->vbt + pb,
               m->va + pa + m->hw, m->vbt + pb + m->hw * B, B);
    }
  }
  void *x = ws->g;
  ws->g = ws->g2;
  ws->g2 = x;
  x = ws->t;
  ws->t = ws->t2;
  ws->t2 = x;
}

/* Layers [k0, k1) of the plan, all slice-local, on the slice of offset
 * (di, dj) of an h x w stage, held in ws->g and ws->t over its valid region
 * [i0, i1) x [j0, j1). va, vbt: the variance slots (b_nonlin). */
static int b_slice_ops(const ntk_cnn_t *c, struct cnn_bws *ws, size_t k0, size_t k1, size_t h, size_t w,
                       long di, long dj, size_t i0, size_t i1, size_t j0, size_t j1, const REAL *va,
                       const REAL *vbt, int with_t) {
  const struct cnn_plan *P = &c->plan;
  size_t pad = P->pad, ld = w + 2 * pad, hw = h * w;
  for (size_t kk = k0; kk < k1; kk++) {
    if (ntk_stop_seen(c->stop)) return 1;
    const struct cnn_op *op = &P->ops[kk];
    const struct ntk_layer *l = op->layer;
    if (l->kind == NTK_LAYER_CONV) {
      /* the nonlinearity right after it goes with it, row by row */
      struct slice_map m = {NULL, va, vbt, vbt + P->var_size * B, 0, w, hw, di, dj};
      if (kk + 1 < k1 && b_is_nonlin(&P->ops[kk + 1])) {
        m.op = &P->ops[++kk];
        m.off = P->var_off[m.op->var];
      }
      b_slice_conv(op, ws, ld, pad, i0, i1, j0, j1, with_t, &m);
    } else if (ntk_layer_traits(l->kind)->branch) { /* a slice-local residual block, row by row */
      size_t cap = ld * (h + 2 * pad) * B, nrow = (j1 - j0) * B;
      REAL *slot = (REAL *)ws->stack + 4 * cap * (size_t)op->depth;
      for (size_t i = i0; i < i1; i++) {
        size_t at = ((i + pad) * ld + pad + j0) * B;
        REAL *gr = (REAL *)ws->g + at, *tr = with_t ? (REAL *)ws->t + at : NULL;
        if (l->kind == NTK_LAYER_FORK) branch_fork(slot + at, cap, nrow, gr, tr);
        else if (l->kind == NTK_LAYER_NEXT)
          branch_next(slot + at, cap, nrow, nrow, op->first, l->prod, (REAL)op->fanw, gr, tr);
        else branch_join(slot + at, cap, nrow, l->branches, l->prod, (REAL)op->fanw, (REAL)op->fandiv, gr, tr);
      }
    } else if (l->kind == NTK_LAYER_DENSE || op->var >= 0) {
      for (size_t i = i0; i < i1; i++) {
        size_t cell = (i + pad) * ld + pad + j0;
        REAL *g = (REAL *)ws->g + cell * B, *t = with_t ? (REAL *)ws->t + cell * B : NULL;
        if (l->kind == NTK_LAYER_DENSE) {
          b_affine(g, t, (j1 - j0) * B, (REAL)(l->w_std * l->w_std), (REAL)(l->b_std * l->b_std));
        } else {
          size_t pa = P->var_off[op->var] + i * w + j0;
          size_t pb = (P->var_off[op->var] + (size_t)(((long)i - di) * (long)w + (long)j0 - dj)) * B;
          b_nonlin(op, g, t, j1 - j0, va + pa, vbt + pb, va + pa + hw, vbt + pb + hw * B, B);
        }
      }
    }
  }
  return 0;
}

/* The input covariance of offset (di, dj) into the slice, straight from
 * the images (the same operations, in the same order, as the per-pair
 * code). */
NTK_CLONES static void b_slice_input(const struct cnn_plan *P, struct cnn_bws *ws, const REAL *xa,
                                     const REAL *xbt, long di, long dj, size_t i0, size_t i1, size_t j0,
                                     size_t j1) {
  size_t w = P->W, C = P->C, pad = P->pad, ld = w + 2 * pad;
  for (size_t i = i0; i < i1; i++)
    for (size_t j = j0; j < j1; j++) {
      size_t pa = i * w + j, pb = (size_t)(((long)i - di) * (long)w + (long)j - dj);
      lanes acc = {0};
      for (size_t ch = 0; ch < C; ch++) acc += xa[pa * C + ch] * *(const lanes *)(xbt + (pb * C + ch) * B);
      *(lanes *)((REAL *)ws->g + ((i + pad) * ld + pad + j) * B) = acc / (REAL)C;
    }
}

/* Zero the slice's valid region again (in all four buffers), so that
 * every cell outside the next offset's region is zero, as SAME padding
 * needs. */
static void b_slice_clear(struct cnn_bws *ws, size_t ld, size_t pad, size_t i0, size_t i1, size_t j0, size_t j1,
                          int with_t) {
  for (size_t i = i0; i < i1; i++) {
    size_t cell = ((i + pad) * ld + pad + j0) * B, n = (j1 - j0) * B;
    memset((REAL *)ws->g + cell, 0, n * sizeof(REAL));
    memset((REAL *)ws->g2 + cell, 0, n * sizeof(REAL));
    if (with_t) {
      memset((REAL *)ws->t + cell, 0, n * sizeof(REAL));
      memset((REAL *)ws->t2 + cell, 0, n * sizeof(REAL));
    }
  }
}

/* The slice's region added to the readout sums (in double), row by row as
 * pair() adds it. */
NTK_CLONES static void b_slice_sum(struct cnn_bws *ws, size_t ld, size_t pad, size_t i0, size_t i1, size_t j0,
                                   size_t j1, int with_t, dlanes *gsum, dlanes *tsum) {
  for (size_t i = i0; i < i1; i++) {
    size_t cell = ((i + pad) * ld + pad + j0) * B, n = (j1 - j0) * B;
    const REAL *g = (const REAL *)ws->g + cell, *t = (const REAL *)ws->t + cell;
    for (size_t q = 0; q < n; q += B) *gsum += __builtin_convertvector(*(const lanes *)(g + q), dlanes);
    if (with_t)
      for (size_t q = 0; q < n; q += B) *tsum += __builtin_convertvector(*(const lanes *)(t + q), dlanes);
  }
}

/* Image a against the batch, single slice-local stage to GlobalAvgPool. */
static int b_pair_slice(const ntk_cnn_t *c, struct cnn_bws *ws, const REAL *xa, const REAL *xbt, const REAL *va,
                        const REAL *vbt, int with_t, REAL *out_g, REAL *out_t) {
  const struct cnn_plan *P = &c->plan;
  size_t h = P->H, w = P->W, pad = P->pad, ld = w + 2 * pad, hw = h * w;
  dlanes gsum = {0}, tsum = {0}; /* readout sums in double, as pair() */
  for (long di = -(long)h + 1; di < (long)h; di++)
    for (long dj = -(long)w + 1; dj < (long)w; dj++) {
      size_t i0 = di > 0 ? (size_t)di : 0, i1 = di < 0 ? (size_t)((long)h + di) : h;
      size_t j0 = dj > 0 ? (size_t)dj : 0, j1 = dj < 0 ? (size_t)((long)w + dj) : w;
      b_slice_input(P, ws, xa, xbt, di, dj, i0, i1, j0, j1);
      int stopped = b_slice_ops(c, ws, 0, P->nops, h, w, di, dj, i0, i1, j0, j1, va, vbt, with_t);
      if (!stopped) b_slice_sum(ws, ld, pad, i0, i1, j0, j1, with_t, &gsum, &tsum);
      b_slice_clear(ws, ld, pad, i0, i1, j0, j1, with_t); /* also when stopped: the next tile needs zeros */
      if (stopped) return 1;
    }
  double norm = P->readout_sum ? 1.0 : (double)(hw * hw); /* GlobalSumPool: the sum */
  for (size_t k = 0; k < B; k++) {
    out_g[k] = (REAL)(gsum[k] / norm);
    out_t[k] = with_t ? (REAL)(tsum[k] / norm) : 0;
  }
  return 0;
}

/* Output positions [*q0, *q1) of a pooling window (size f, stride s,
 * padding lo, n outputs) that contain input position x. */
static inline void b_pool_range(long x, long f, long s, long lo, long n, long *q0, long *q1) {
  long first = x + lo - f + 1; /* s q >= first */
  *q0 = first <= 0 ? 0 : (first + s - 1) / s;
  long last = (x + lo) / s + 1;
  *q1 = last < n ? last : n;
}

/* A run's input slice of offset (di, dj) from the full covariance of an
 * h x w stage, [p][q][lane]: entry (p, p - offset). */
NTK_CLONES static void b_slice_from_full(struct cnn_bws *ws, size_t ld, size_t pad, size_t h, size_t w, long di,
                                         long dj, size_t i0, size_t i1, size_t j0, size_t j1, int with_t) {
  const REAL *fg = (const REAL *)ws->fg, *ft = (const REAL *)ws->ft;
  size_t hw = h * w;
  for (size_t i = i0; i < i1; i++)
    for (size_t j = j0; j < j1; j++) {
      size_t q = ((i * w + j) * hw + (size_t)(((long)i - di) * (long)w + (long)j - dj)) * B;
      size_t cell = ((i + pad) * ld + pad + j) * B;
      *(lanes *)((REAL *)ws->g + cell) = *(const lanes *)(fg + q);
      if (with_t) *(lanes *)((REAL *)ws->t + cell) = *(const lanes *)(ft + q);
    }
}

/* The slice's region added into the pooling's first-pass sums: cell (i, j)
 * is entry (p, q) = ((i, j), (i - di, j - dj)), added to (p, Q) for every
 * window Q of image b that holds q. */
NTK_CLONES static void b_pool_add(const struct cnn_op *pool, struct cnn_bws *ws, size_t ld, size_t pad,
                                  size_t w, long di, long dj, size_t i0, size_t i1, size_t j0, size_t j1,
                                  int with_t) {
  long fh = (long)pool->fh, fw = (long)pool->fw, sh = (long)pool->sh, sw = (long)pool->sw;
  size_t ho = pool->ho, wo = pool->wo;
  REAL *pg = (REAL *)ws->pg, *pt = (REAL *)ws->pt;
  for (size_t i = i0; i < i1; i++) {
    long qi0, qi1; /* the windows of image b's row i - di */
    b_pool_range((long)i - di, fh, sh, (long)pool->lo_h, (long)ho, &qi0, &qi1);
    for (size_t j = j0; j < j1; j++) {
      long qj0, qj1;
      b_pool_range((long)j - dj, fw, sw, (long)pool->lo_w, (long)wo, &qj0, &qj1);
      size_t cell = ((i + pad) * ld + pad + j) * B;
      lanes vg = *(const lanes *)((const REAL *)ws->g + cell);
      lanes vt = *(const lanes *)((const REAL *)ws->t + cell);
      for (long qi = qi0; qi < qi1; qi++)
        for (long qj = qj0; qj < qj1; qj++) {
          size_t at = (((i * ho + (size_t)qi) * w + j) * wo + (size_t)qj) * B;
          *(lanes *)(pg + at) += vg;
          if (with_t) *(lanes *)(pt + at) += vt;
        }
    }
  }
}

/* pool_full's scale of its first pass, then its second pass over image
 * a's windows, into the next run's input ws->fg, ws->ft ([P][Q][lane]). */
NTK_CLONES static void b_pool_finish(const struct cnn_op *pool, struct cnn_bws *ws, size_t h, size_t w,
                                     int with_t) {
  size_t ho = pool->ho, wo = pool->wo;
  long hi = (long)h, wi = (long)w;
  for (int which = 0; which < 1 + with_t; which++) {
    REAL *part = (REAL *)(which ? ws->pt : ws->pg), *out = (REAL *)(which ? ws->ft : ws->fg);
    for (size_t i = 0; i < h; i++)
      for (size_t qi = 0; qi < ho; qi++)
        for (size_t j = 0; j < w; j++)
          for (size_t qj = 0; qj < wo; qj++) {
            lanes *x = (lanes *)(part + (((i * ho + qi) * w + j) * wo + qj) * B);
            *x = *x * pool_scale(pool, qi, qj);
          }
    for (size_t pi = 0; pi < ho; pi++)
      for (size_t pj = 0; pj < wo; pj++) {
        REAL scale = pool_scale(pool, pi, pj);
        for (size_t qi = 0; qi < ho; qi++)
          for (size_t qj = 0; qj < wo; qj++) {
            lanes sum = {0};
            for (size_t a = 0; a < pool->fh; a++) {
              long r = (long)(pool->sh * pi + a) - (long)pool->lo_h;
              if (r < 0 || r >= hi) continue;
              for (size_t b = 0; b < pool->fw; b++) {
                long cc = (long)(pool->sw * pj + b) - (long)pool->lo_w;
                if (cc >= 0 && cc < wi)
                  sum += *(const lanes *)(part + ((((size_t)r * ho + qi) * w + (size_t)cc) * wo + qj) * B);
              }
            }
            *(lanes *)(out + ((pi * wo + pj) * (ho * wo) + qi * wo + qj) * B) = sum * scale;
          }
      }
  }
}

/* Image a against the batch through runs of slice-local layers joined by
 * pooling layers, into GlobalAvgPool (Myrtle; plan_build's `multi`). Each
 * run goes one offset at a time, as b_pair_slice. A run that ends in a
 * pooling layer adds each slice into the pooling's first pass on the way:
 * pool_full (cnn_impl.h) first sums, for each position p of image a and
 * each output position Q of image b, the inputs (p, q) with q in Q's
 * window, in the window's row-major order, i.e. at offsets p - q in
 * descending order; the offsets go in that order here, so that every
 * partial sum takes its terms in pool_full's order and has its bits. Then
 * its scale, the second pass over image a's windows, as pool_full, into the
 * full covariance of the next run's input ([P][Q][lane]). Partial sums are
 * kept as [i][Qi][j][Qj][lane] (p = (i, j), Q = (Qi, Qj)), so that a slice
 * row touches one block of them. */
static int b_pair_multi(const ntk_cnn_t *c, struct cnn_bws *ws, const REAL *xa, const REAL *xbt, const REAL *va,
                        const REAL *vbt, int with_t, REAL *out_g, REAL *out_t) {
  const struct cnn_plan *P = &c->plan;
  size_t h = P->H, w = P->W, pad = P->pad, k0 = 0;
  dlanes gsum = {0}, tsum = {0}; /* readout sums in double, as pair() */
  for (;;) {
    size_t k1 = k0;
    while (k1 < P->nops && P->ops[k1].layer->kind != NTK_LAYER_AVGPOOL) k1++;
    const struct cnn_op *pool = k1 < P->nops ? &P->ops[k1] : NULL;
    size_t ld = w + 2 * pad, hw = h * w, ho = pool ? pool->ho : 0, wo = pool ? pool->wo : 0;
    if (pool) {
      memset(ws->pg, 0, hw * ho * wo * B * sizeof(REAL));
      if (with_t) memset(ws->pt, 0, hw * ho * wo * B * sizeof(REAL));
    }
    long noff = (long)(2 * h - 1) * (long)(2 * w - 1);
    for (long idx = 0; idx < noff; idx++) {
      long kk = pool ? noff - 1 - idx : idx; /* into a pooling layer: descending, see above */
      long di = kk / (long)(2 * w - 1) - ((long)h - 1), dj = kk % (long)(2 * w - 1) - ((long)w - 1);
      size_t i0 = di > 0 ? (size_t)di : 0, i1 = di < 0 ? (size_t)((long)h + di) : h;
      size_t j0 = dj > 0 ? (size_t)dj : 0, j1 = dj < 0 ? (size_t)((long)w + dj) : w;
      if (k0 == 0) {
        b_slice_input(P, ws, xa, xbt, di, dj, i0, i1, j0, j1);
      } else {
        b_slice_from_full(ws, ld, pad, h, w, di, dj, i0, i1, j0, j1, with_t);
      }
      int stopped = b_slice_ops(c, ws, k0, k1, h, w, di, dj, i0, i1, j0, j1, va, vbt, with_t);
      if (stopped) {
      } else if (!pool) {
        b_slice_sum(ws, ld, pad, i0, i1, j0, j1, with_t, &gsum, &tsum);
      } else {
        b_pool_add(pool, ws, ld, pad, w, di, dj, i0, i1, j0, j1, with_t);
      }
      b_slice_clear(ws, ld, pad, i0, i1, j0, j1, with_t); /* also when stopped: the next tile needs zeros */
      if (stopped) return 1;
    }
    if (!pool) {
      double norm = P->readout_sum ? 1.0 : (double)(hw * hw); /* GlobalSumPool: the sum */
      for (size_t k = 0; k < B; k++) {
        out_g[k] = (REAL)(gsum[k] / norm);
        out_t[k] = with_t ? (REAL)(tsum[k] / norm) : 0;
      }
      return 0;
    }
    b_pool_finish(pool, ws, h, w, with_t);
    h = ho;
    w = wo;
    k0 = k1 + 1;
  }
}

/* The fully-connected tail for a batch of scalars. */
static void b_tail(const ntk_cnn_t *c, const REAL *ta, const REAL *tbt, REAL *g, REAL *t) {
  const struct cnn_plan *P = &c->plan;
  REAL stack[4 * NTK_BRANCH_MAXDEPTH * B]; /* residual blocks (branch.h): 4 arrays of B lanes per depth */
  int ended[NTK_BRANCH_MAXDEPTH], depth = 0;
  for (size_t kk = 0; kk < P->ntail; kk++) {
    const struct ntk_layer *l = &P->tail[kk];
    REAL fw = (REAL)P->tail_fanw[2 * kk], fdiv = (REAL)P->tail_fanw[2 * kk + 1];
    if (l->kind == NTK_LAYER_FORK) {
      ended[depth] = 0;
      branch_fork(stack + 4 * B * (size_t)depth++, B, B, g, t);
    } else if (l->kind == NTK_LAYER_NEXT) {
      branch_next(stack + 4 * B * (size_t)(depth - 1), B, B, B, ended[depth - 1]++ == 0, l->prod, fw, g, t);
    } else if (l->kind == NTK_LAYER_JOIN) {
      depth--;
      branch_join(stack + 4 * B * (size_t)depth, B, B, l->branches, l->prod, fw, fdiv, g, t);
    }
    for (size_t k = 0; k < B; k++) {
      REAL td, w2 = (REAL)(l->w_std * l->w_std);
      switch (l->kind) { /* every kind, no default: -Werror=switch catches a new one */
      case NTK_LAYER_DENSE: /* ('ntk' only: a standard network is not batched) */
        g[k] = w2 * g[k] + (REAL)(l->b_std * l->b_std);
        t[k] = g[k] + w2 * t[k];
        break;
      case NTK_LAYER_MAP:
      case NTK_LAYER_LAYERNORM:
        g[k] = nonlin1(l, g[k], ta[kk], tbt[kk * B + k], &td);
        t[k] *= td;
        break;
      case NTK_LAYER_IDENTITY:
      case NTK_LAYER_FORK: /* above, on all lanes */
      case NTK_LAYER_NEXT:
      case NTK_LAYER_JOIN: break;
      case NTK_LAYER_CONV: /* spatial layers and a second readout: refused by plan_build and the parser */
      case NTK_LAYER_AVGPOOL:
      case NTK_LAYER_FLATTEN:
      case NTK_LAYER_GLOBALAVGPOOL:
      case NTK_LAYER_ATTENTION:
      case NTK_LAYER_RESIZE:
      case NTK_LAYER_AGGREGATE:
      case NTK_LAYER_DROPOUT: /* a network with Dropout is not batched (plan_batched) */
      case NTK_LAYER_KINDS: g[k] = (REAL)NAN; break;
      }
    }
  }
}

#undef B

#undef lanes
#undef dlanes
#undef b_affine
#undef b_conv_diag
#undef b_nonlin
#undef b_is_nonlin
#undef b_diag_input
#undef b_diag_sum
#undef b_pair_diag
#undef branch_fork
#undef branch_next
#undef branch_join
#undef box_sums
#undef box_affine
#undef box_affine_abrelu
#undef slice_map
#undef b_slice_conv
#undef b_slice_ops
#undef b_slice_input
#undef b_slice_clear
#undef b_slice_sum
#undef b_pair_slice
#undef b_pool_range
#undef b_slice_from_full
#undef b_pool_add
#undef b_pool_finish
#undef pool_scale
#undef b_pair_multi
#undef b_tail
#undef nonlin1
