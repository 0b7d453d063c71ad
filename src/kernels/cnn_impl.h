/* CNN pair kernels, written once for both precisions: src/kernels/cnn.c
 * includes this file through each_precision.h (REAL = float / double,
 * ABRELU_R / RSQRT / ERF the matching maps; each name below becomes
 * name_f / name_d).
 *
 * A pair (a, b) carries the covariance between positions of image a and
 * image b: F[p * hw + p'] (GENERAL), one offset at a time (SLICE), or only
 * p = p' (DIAG). Nonlinearities read each image's own variance at its own
 * position from va / vb, computed by running the pair (a, a). A
 * nonlinearity's slot holds the n variances of its layer, then their
 * ntk_rsqrt (the ReLU map's factors), filled in by capture_vars.
 *
 * Stops: the functions that loop long (over the rows of a covariance, the
 * offsets of a slice run, the layers of a pair) poll the stop flag
 * (base/stop.h) once per turn and return 1 when it is set, leaving their
 * output garbage; 0 when they finished. */

/* The per-precision names this file defines (each_precision.h), ... */
#define affine SFX(affine)
#define affine1 SFX(affine1)
#define affine_op SFX(affine_op)
#define affine_diag SFX(affine_diag)
#define nonlin1r SFX(nonlin1r)
#define nonlin1 SFX(nonlin1)
#define capture_vars SFX(capture_vars)
#define layernorm_means SFX(layernorm_means)
#define dropout_diag SFX(dropout_diag)
#define branch_op SFX(branch_op)
#define branch_cat SFX(branch_cat)
#define conv_diag SFX(conv_diag)
#define conv_full SFX(conv_full)
#define convt_full SFX(convt_full)
#define convt_input SFX(convt_input)
#define convt_fold SFX(convt_fold)
#define pool_scale SFX(pool_scale)
#define pool_full SFX(pool_full)
#define attention_weights SFX(attention_weights)
#define attention_full SFX(attention_full)
#define aggregate_full SFX(aggregate_full)
#define pattern_edges SFX(pattern_edges)
#define resample_axis SFX(resample_axis)
#define resize_full SFX(resize_full)
#define slice SFX(slice)
#define slice_conv SFX(slice_conv)
#define slice_pointwise SFX(slice_pointwise)
#define slice_conv_strided SFX(slice_conv_strided)
#define slice_swap SFX(slice_swap)
#define slice_branch SFX(slice_branch)
#define run_slices SFX(run_slices)
#define pair_diag SFX(pair_diag)
#define full_input SFX(full_input)
#define pair_full SFX(pair_full)
#define pair_tail SFX(pair_tail)
#define pair SFX(pair)
/* ... and those of src/kernels/branch_impl.h it calls. */
#define branch_fork SFX(branch_fork)
#define branch_next SFX(branch_next)
#define branch_join SFX(branch_join)

/* ---- pointwise maps ------------------------------------------------------- */

static void affine(REAL *g, REAL *t, size_t n, REAL w2, REAL b2) {
  for (size_t k = 0; k < n; k++) g[k] = w2 * g[k] + b2;
  if (t)
    for (size_t k = 0; k < n; k++) t[k] = g[k] + w2 * t[k];
}

/* One entry's affine map under either parameterisation: nngp' = W^2 g + b^2;
 * ntk' = nngp' + W^2 t ('ntk'), or fan_in g + W^2 t (+ 1 with a bias)
 * ('standard'; docs/MATH.md). g, t: the entry after the layer's averaging. */
static inline void affine1(const struct cnn_plan *P, double fan, const struct ntk_layer *l, REAL *g, REAL *t) {
  REAL w2 = (REAL)(l->w_std * l->w_std), b2 = (REAL)(l->b_std * l->b_std);
  if (P->standard) {
    *t = ((REAL)fan * *g + (REAL)(l->bias ? 1 : 0)) + w2 * *t;
    *g = w2 * *g + b2;
  } else {
    *g = w2 * *g + b2;
    *t = *g + w2 * *t;
  }
}

/* affine over n entries, for op (Conv or Dense); t NULL: the NNGP only. */
static void affine_op(const struct cnn_plan *P, const struct cnn_op *op, REAL *g, REAL *t, size_t n) {
  const struct ntk_layer *l = op->layer;
  if (!P->standard) {
    affine(g, t, n, (REAL)(l->w_std * l->w_std), (REAL)(l->b_std * l->b_std));
    return;
  }
  REAL dummy = 0;
  for (size_t k = 0; k < n; k++) affine1(P, op->fan, l, &g[k], t ? &t[k] : &dummy);
}

/* A nonlinearity on one entry; r11, r22: the variances' ntk_rsqrt from a
 * slot (the ReLU family's factors; the other maps ignore them). */
static inline REAL nonlin1r(const struct ntk_layer *l, REAL q12, REAL q11, REAL q22, REAL r11, REAL r22,
                            REAL *td) {
  return MAP(&l->map, q12, q11, q22, r11, r22, td);
}

/* The same where no slot holds the factors (the scalar tail). */
static REAL nonlin1(const struct ntk_layer *l, REAL q12, REAL q11, REAL q22, REAL *td) {
  return nonlin1r(l, q12, q11, q22, RSQRT(q11), RSQRT(q22), td);
}

/* Complete a slot whose n variances a self run has just written. */
static void capture_vars(REAL *slot, size_t n) {
  for (size_t p = 0; p < n; p++) slot[n + p] = RSQRT(slot[p]);
}

/* LayerNorm over positions too (stax's axis with H and/or W): the h x w
 * variances a self run captured for op become their means over the rows
 * (ln_h), the columns (ln_w) or both, summed in double and rounded once:
 * stax divides by the mean over those axes of eps + the variance. */
static void layernorm_means(const struct cnn_op *op, REAL *q, size_t h, size_t w) {
  if (!op->ln_h && !op->ln_w) return;
  /* groups of len values `step` apart, the groups `next` apart: all
   * positions, each column (over the rows), or each row (over the columns) */
  size_t groups = op->ln_h && op->ln_w ? 1 : op->ln_h ? w : h;
  size_t len = op->ln_h && op->ln_w ? h * w : op->ln_h ? h : w;
  size_t step = op->ln_h && !op->ln_w ? w : 1, next = op->ln_h ? 1 : w;
  for (size_t g = 0; g < groups; g++) {
    REAL *v = q + g * next;
    double s = 0;
    for (size_t k = 0; k < len; k++) s += (double)v[k * step];
    REAL m = (REAL)(s / (double)len);
    for (size_t k = 0; k < len; k++) v[k * step] = m;
  }
}

/* Dropout (mode='train') on a sample paired with itself: stax multiplies
 * the entries of each position with itself by 1/rate, NNGP and NTK (the
 * other pairs, and other positions, keep theirs). The n entries are at
 * g[k / w * ld + k % w]: a slice's valid region (ld its row length), or
 * the diagonal of a full covariance (ld = n + 1, w = 1), or one per
 * position (ld = w). */
static void dropout_diag(const struct cnn_op *op, REAL *g, REAL *t, size_t n, size_t ld, size_t w) {
  REAL f = (REAL)(1.0 / op->layer->rate);
  for (size_t k = 0; k < n; k++) {
    size_t at = k / w * ld + k % w;
    g[at] *= f;
    if (t) t[at] *= f;
  }
}

/* The NEXT or JOIN of a FanInConcat along a spatial axis (op->cat), on
 * the full covariance: the branch ending here (op->hi x wi positions) goes
 * into the block's output (cat_h x cat_w, slot's sum arrays) at its
 * offset along the axis, its entries with other branches' positions 0, as
 * stax's _concat_kernels pads them; the first branch zeroes the sum. A
 * NEXT then restores the block's input (op->ho x wo), a JOIN returns the
 * output. */
static void branch_cat(REAL *slot, size_t cap, const struct cnn_op *op, REAL *g, REAL *t) {
  size_t h = op->hi, w = op->wi, n = h * w, W = op->cat_w, N = op->cat_h * op->cat_w;
  for (int q = 0; q < (t ? 2 : 1); q++) {
    REAL *sum = slot + (size_t)(2 + q) * cap;
    const REAL *src = q ? t : g;
    if (op->first) memset(sum, 0, N * N * sizeof(REAL));
    for (size_t p = 0; p < n; p++) {
      size_t i = p / w, j = p % w;
      size_t P1 = op->cat == 1 ? (i + op->cat_off) * W + j : i * W + j + op->cat_off;
      for (size_t r = 0; r < n; r++) {
        size_t i2 = r / w, j2 = r % w;
        size_t P2 = op->cat == 1 ? (i2 + op->cat_off) * W + j2 : i2 * W + j2 + op->cat_off;
        sum[P1 * N + P2] = src[p * n + r];
      }
    }
  }
  size_t m = op->layer->kind == NTK_LAYER_NEXT ? op->ho * op->wo : op->cat_h * op->cat_w;
  size_t from = op->layer->kind == NTK_LAYER_NEXT ? 0 : 2;
  memcpy(g, slot + from * cap, m * m * sizeof(REAL));
  if (t) memcpy(t, slot + (from + 1) * cap, m * m * sizeof(REAL));
}

/* A residual block's FORK, NEXT or JOIN on the pair's values
 * (src/kernels/branch.h); the plan gives the slot and the first branch.
 * full: the full covariance (n^2 values for n positions), else one per
 * position. A NEXT's input is a branch's end, its output the block's
 * input again (op->hi x wi and ho x wo). */
static void branch_op(struct cnn_ws *ws, const struct cnn_plan *P, const struct cnn_op *op, REAL *g, REAL *t,
                      int full) {
  REAL *slot = (REAL *)ws->stack + 4 * P->fmax * (size_t)op->depth;
  size_t n = op->hi * op->wi, n_out = op->ho * op->wo;
  if (op->cat && full) {
    branch_cat(slot, P->fmax, op, g, t);
    return;
  }
  if (full) {
    n *= n;
    n_out *= n_out;
  }
  if (op->layer->kind == NTK_LAYER_FORK) branch_fork(slot, P->fmax, n, g, t);
  else if (op->layer->kind == NTK_LAYER_NEXT)
    branch_next(slot, P->fmax, n, n_out, op->first, op->layer->prod, (REAL)op->fanw, g, t);
  else branch_join(slot, P->fmax, n, op->layer->branches, op->layer->prod, (REAL)op->fanw, (REAL)op->fandiv, g, t);
}

/* affine_op on the same-position entries of an n x n covariance alone: a
 * ConvLocal's bias, unshared too, is independent between two positions,
 * whose entries stay 0. */
static void affine_diag(const struct cnn_plan *P, const struct cnn_op *op, REAL *g, REAL *t, size_t n) {
  for (size_t p = 0; p < n; p++) affine_op(P, op, g + p * (n + 1), t ? t + p * (n + 1) : NULL, 1);
}

/* ---- DIAG: same-position entries only ------------------------------------- */

/* Each output is the sum over filter rows of that row's sum over filter
 * columns (rows then columns, skipping cells outside the input): the order
 * of the batched b_conv_diag, which shares the row sums between outputs,
 * and of the slices' box filter. */
static int conv_diag(const struct cnn_op *op, const REAL *in, REAL *out, const struct ntk_stop *stop) {
  size_t fh = op->fh, fw = op->fw, sh = op->sh, sw = op->sw;
  REAL scale = (REAL)(1.0 / (double)(fh * fw));
  for (size_t i = 0; i < op->ho; i++) {
    if (ntk_stop_seen(stop)) return 1;
    for (size_t j = 0; j < op->wo; j++) {
      REAL sum = 0;
      for (size_t a = 0; a < fh; a++) {
        long r = (long)(sh * i + a) - (long)op->lo_h;
        if (op->circular) r = (r % (long)op->hi + (long)op->hi) % (long)op->hi;
        else if (r < 0 || r >= (long)op->hi) continue;
        REAL row = 0;
        for (size_t b = 0; b < fw; b++) {
          long c = (long)(sw * j + b) - (long)op->lo_w;
          if (op->circular) c = (c % (long)op->wi + (long)op->wi) % (long)op->wi;
          else if (c < 0 || c >= (long)op->wi) continue;
          row += in[(size_t)r * op->wi + (size_t)c];
        }
        sum += row;
      }
      out[i * op->wo + j] = sum * scale;
    }
  }
  return 0;
}

/* ---- GENERAL: the full covariance ------------------------------------------ */

/* Only the output entries read later: offsets in the band obh, obw, on the
 * lattice omh, omw (plan_bands); the others keep what the buffer held. */
static int conv_full(const struct cnn_op *op, const REAL *in, REAL *out, const struct ntk_stop *stop) {
  size_t fh = op->fh, fw = op->fw, sh = op->sh, sw = op->sw, hwi = op->hi * op->wi, hwo = op->ho * op->wo;
  REAL scale = (REAL)(1.0 / (double)(fh * fw));
  for (size_t p = 0; p < hwo; p++) {
    if (ntk_stop_seen(stop)) return 1;
    for (size_t q = 0; q < hwo; q++) {
      size_t i = p / op->wo, j = p % op->wo, i2 = q / op->wo, j2 = q % op->wo;
      size_t di = i > i2 ? i - i2 : i2 - i, dj = j > j2 ? j - j2 : j2 - j;
      if (op->layer->local && p != q) { /* ConvLocal: two positions' weights are independent */
        out[p * hwo + q] = 0;
        continue;
      }
      if (di > op->obh || dj > op->obw || di % op->omh || dj % op->omw) continue;
      REAL sum = 0;
      for (size_t a = 0; a < fh; a++) {
        long r1 = (long)(sh * i + a) - (long)op->lo_h, r2 = (long)(sh * i2 + a) - (long)op->lo_h;
        if (op->circular) {
          r1 = (r1 % (long)op->hi + (long)op->hi) % (long)op->hi;
          r2 = (r2 % (long)op->hi + (long)op->hi) % (long)op->hi;
        } else if (r1 < 0 || r1 >= (long)op->hi || r2 < 0 || r2 >= (long)op->hi) {
          continue;
        }
        for (size_t b = 0; b < fw; b++) {
          long c1 = (long)(sw * j + b) - (long)op->lo_w, c2 = (long)(sw * j2 + b) - (long)op->lo_w;
          if (op->circular) {
            c1 = (c1 % (long)op->wi + (long)op->wi) % (long)op->wi;
            c2 = (c2 % (long)op->wi + (long)op->wi) % (long)op->wi;
          } else if (c1 < 0 || c1 >= (long)op->wi || c2 < 0 || c2 >= (long)op->wi) {
            continue;
          }
          sum += in[((size_t)r1 * op->wi + (size_t)c1) * hwi + (size_t)r2 * op->wi + (size_t)c2];
        }
      }
      out[p * hwo + q] = sum * scale;
    }
  }
  return 0;
}

/* A ConvTranspose's input position along one axis whose dilated place is
 * g (a place of its padded, dilated grid: (g - lo) / s where that
 * divides and is inside the n inputs), else -1. */
static inline long convt_input(size_t g, size_t lo, size_t s, size_t n) {
  if (g < lo || (g - lo) % s) return -1;
  size_t i = (g - lo) / s;
  return i < n ? (long)i : -1;
}

/* Where extent position u lands among n outputs: itself, or CIRCULAR's
 * fold, (u - shift) modulo n (plan_transpose_axis). */
static inline size_t convt_fold(size_t u, size_t n, size_t shift) { return (u + n - shift % n) % n; }

/* A ConvTranspose on the full covariance: output positions (u, v) and
 * (u2, v2) of its extent th x tw read, for each filter tap (a, b) of both,
 * the input positions whose dilated places they are, (u + a - lo) / s
 * where that divides; CIRCULAR folds the extent onto the output
 * (plan_transpose_axis). Every output entry is written. */
static int convt_full(const struct cnn_op *op, const REAL *in, REAL *out, const struct ntk_stop *stop) {
  size_t fh = op->fh, fw = op->fw, hwi = op->hi * op->wi, hwo = op->ho * op->wo, X = op->th * op->tw;
  REAL scale = (REAL)(1.0 / (double)(fh * fw));
  memset(out, 0, hwo * hwo * sizeof(REAL));
  for (size_t p = 0; p < X; p++) {
    if (ntk_stop_seen(stop)) return 1;
    size_t u = p / op->tw, v = p % op->tw;
    size_t po = convt_fold(u, op->ho, op->fold_h) * op->wo + convt_fold(v, op->wo, op->fold_w);
    for (size_t q = 0; q < X; q++) {
      size_t u2 = q / op->tw, v2 = q % op->tw;
      REAL sum = 0;
      for (size_t a = 0; a < fh; a++) {
        long r1 = convt_input(u + a, op->lo_h, op->sh, op->hi), r2 = convt_input(u2 + a, op->lo_h, op->sh, op->hi);
        if (r1 < 0 || r2 < 0) continue;
        for (size_t b = 0; b < fw; b++) {
          long c1 = convt_input(v + b, op->lo_w, op->sw, op->wi), c2 = convt_input(v2 + b, op->lo_w, op->sw, op->wi);
          if (c1 >= 0 && c2 >= 0)
            sum += in[((size_t)r1 * op->wi + (size_t)c1) * hwi + (size_t)r2 * op->wi + (size_t)c2];
        }
      }
      size_t qo = convt_fold(u2, op->ho, op->fold_h) * op->wo + convt_fold(v2, op->wo, op->fold_w);
      out[po * hwo + qo] += sum * scale;
    }
  }
  return 0;
}

/* The scale of output position (i, j) of a pooling op: 1 for SumPool,
 * else 1/w^2, or with normalize_edges (SAME) 1/(the window's cells inside
 * the input), as stax. Cells outside the input (SAME's zero padding) are
 * skipped by pool_full. */
static REAL pool_scale(const struct cnn_op *op, size_t i, size_t j) {
  const struct ntk_layer *l = op->layer;
  if (l->sum) return (REAL)1;
  if (!l->normalize_edges) return (REAL)(1.0 / (double)(op->fh * op->fw));
  size_t rows = 0, cols = 0;
  for (size_t a = 0; a < op->fh; a++) {
    long r = (long)(op->sh * i + a) - (long)op->lo_h;
    rows += r >= 0 && r < (long)op->hi;
  }
  for (size_t b = 0; b < op->fw; b++) {
    long c = (long)(op->sw * j + b) - (long)op->lo_w;
    cols += c >= 0 && c < (long)op->wi;
  }
  return (REAL)(1.0 / (double)(rows * cols));
}

/* AvgPool over both positions, separably: first image b's, then image a's.
 * CIRCULAR wraps the window's cells around the input (stax pads the input
 * periodically, then pools VALID), so every window is whole. */
static int pool_full(const struct cnn_op *op, const REAL *in, REAL *tmp, REAL *out, const struct ntk_stop *stop) {
  size_t wh = op->fh, ww = op->fw, sh = op->sh, sw = op->sw;
  size_t hwi = op->hi * op->wi, hwo = op->ho * op->wo;
  long hi = (long)op->hi, wi = (long)op->wi, lo_h = (long)op->lo_h, lo_w = (long)op->lo_w;
  for (size_t p = 0; p < hwi; p++) {
    if (ntk_stop_seen(stop)) return 1;
    for (size_t q = 0; q < hwo; q++) {
      size_t i2 = q / op->wo, j2 = q % op->wo;
      REAL sum = 0;
      for (size_t a = 0; a < wh; a++) {
        long r = (long)(sh * i2 + a) - lo_h;
        if (op->circular) r = (r % hi + hi) % hi;
        else if (r < 0 || r >= hi) continue;
        for (size_t b = 0; b < ww; b++) {
          long c = (long)(sw * j2 + b) - lo_w;
          if (op->circular) c = (c % wi + wi) % wi;
          if (c >= 0 && c < wi) sum += in[p * hwi + (size_t)(r * wi + c)];
        }
      }
      tmp[p * hwo + q] = sum * pool_scale(op, i2, j2);
    }
  }
  for (size_t p = 0; p < hwo; p++) {
    if (ntk_stop_seen(stop)) return 1;
    size_t i = p / op->wo, j = p % op->wo;
    REAL scale = pool_scale(op, i, j);
    for (size_t q = 0; q < hwo; q++) {
      REAL sum = 0;
      for (size_t a = 0; a < wh; a++) {
        long r = (long)(sh * i + a) - lo_h;
        if (op->circular) r = (r % hi + hi) % hi;
        else if (r < 0 || r >= hi) continue;
        for (size_t b = 0; b < ww; b++) {
          long c = (long)(sw * j + b) - lo_w;
          if (op->circular) c = (c % wi + wi) % wi;
          if (c >= 0 && c < wi) sum += tmp[(size_t)(r * wi + c) * hwo + q];
        }
      }
      out[p * hwo + q] = sum * scale;
    }
  }
  return 0;
}

/* ---- SLICE: one offset through a run of stride-1 SAME layers --------------- */

/* The slice of offset (di, dj) lives in a buffer with a zero border of
 * `pad` cells: entry (i, j) of image a paired with (i - di, j - dj) of image
 * b, valid for i in [i0, i1), j in [j0, j1); everything else stays zero,
 * which is what SAME padding means for the next convolution. */
struct slice {
  REAL *g, *t, *g2, *t2, *rows; /* (h + 2 pad) x (w + 2 pad) each; rows: box-filter scratch */
  size_t h, w, pad, ld;
  long di, dj;
  size_t i0, i1, j0, j1;
};

/* A layer's output (g2, t2) becomes the slice (g, t). */
static void slice_swap(struct slice *S) {
  REAL *x = S->g;
  S->g = S->g2;
  S->g2 = x;
  x = S->t;
  S->t = S->t2;
  S->t2 = x;
}

static void slice_conv(const struct cnn_plan *P, struct slice *S, const struct cnn_op *op, int with_t) {
  const struct ntk_layer *l = op->layer;
  size_t fh = op->fh, fw = op->fw, lo = op->lo_h, lo_w = op->lo_w, ld = S->ld, pad = S->pad;
  REAL w2 = (REAL)(l->w_std * l->w_std), b2 = (REAL)(l->b_std * l->b_std);
  REAL scale = (REAL)(1.0 / (double)(fh * fw));
  for (int which = 0; which < 1 + with_t; which++) {
    const REAL *in = which ? S->t : S->g;
    REAL *out = which ? S->t2 : S->g2;
    /* Horizontal sums for every row the vertical pass reads. */
    size_t r0 = S->i0 + pad - lo, r1 = S->i1 + pad - lo + fh - 1;
    for (size_t r = r0; r < r1; r++) {
      const REAL *src = in + r * ld + pad - lo_w;
      REAL *dst = S->rows + r * ld;
      for (size_t j = S->j0; j < S->j1; j++) {
        REAL sum = 0;
        for (size_t b = 0; b < fw; b++) sum += src[j + b];
        dst[j] = sum;
      }
    }
    for (size_t i = S->i0; i < S->i1; i++) {
      REAL *o = out + (i + pad) * ld + pad;
      for (size_t j = S->j0; j < S->j1; j++) {
        REAL sum = 0;
        for (size_t a = 0; a < fh; a++) sum += S->rows[(i + pad - lo + a) * ld + j];
        o[j] = sum * scale;
      }
    }
  }
  /* nngp' = W^2 A(nngp) + b^2, ntk' = nngp' + W^2 A(ntk), on the valid region. */
  for (size_t i = S->i0; i < S->i1; i++) {
    REAL *g = S->g2 + (i + pad) * ld + pad, *t = S->t2 + (i + pad) * ld + pad;
    if (P->standard) {
      REAL dummy = 0;
      for (size_t j = S->j0; j < S->j1; j++) affine1(P, op->fan, l, &g[j], with_t ? &t[j] : &dummy);
      continue;
    }
    for (size_t j = S->j0; j < S->j1; j++) {
      g[j] = w2 * g[j] + b2;
      if (with_t) t[j] = g[j] + w2 * t[j];
    }
  }
  slice_swap(S);
}

/* A convolution of any stride and padding but CIRCULAR on a slice
 * (plan_chain): the slice of offset (di / sh, dj / sw) at the op's output
 * size, each entry the sum of the taps in conv_full's order, a tap whose
 * position in either image falls outside the input skipped as conv_full
 * skips it, then scaled and the affine map applied: conv_full's bits. The
 * slice takes the new size, offset and valid region. */
static void slice_conv_strided(const struct cnn_plan *P, struct slice *S, const struct cnn_op *op, int with_t) {
  long sh = (long)op->sh, sw = (long)op->sw, lo_h = (long)op->lo_h, lo_w = (long)op->lo_w;
  long hi = (long)op->hi, wi = (long)op->wi, ho = (long)op->ho, wo = (long)op->wo;
  long di = S->di / sh, dj = S->dj / sw; /* exact: the offsets run on the lattice */
  size_t pad = S->pad, ld = S->ld, ld2 = (size_t)wo + 2 * pad, cells2 = ld2 * ((size_t)ho + 2 * pad);
  long li0 = di > 0 ? di : 0, li1 = di < 0 ? ho + di : ho, lj0 = dj > 0 ? dj : 0, lj1 = dj < 0 ? wo + dj : wo;
  /* an offset past the output (a VALID convolution shrinks it): no entries, and none after no entries */
  if (li1 <= li0 || lj1 <= lj0 || S->i1 <= S->i0 || S->j1 <= S->j0) li0 = li1 = lj0 = lj1 = 0;
  size_t i0 = (size_t)li0, i1 = (size_t)li1, j0 = (size_t)lj0, j1 = (size_t)lj1;
  REAL scale = (REAL)(1.0 / (double)(op->fh * op->fw));
  for (int which = 0; which < 1 + with_t; which++) {
    const REAL *in = which ? S->t : S->g;
    REAL *out = which ? S->t2 : S->g2;
    memset(out, 0, cells2 * sizeof(REAL));
    for (size_t i = i0; i < i1; i++)
      for (size_t j = j0; j < j1; j++) {
        REAL sum = 0;
        for (long a = 0; a < (long)op->fh; a++) {
          long r1 = sh * (long)i + a - lo_h, r2 = r1 - S->di;
          if (r1 < 0 || r1 >= hi || r2 < 0 || r2 >= hi) continue;
          for (long b = 0; b < (long)op->fw; b++) {
            long c1 = sw * (long)j + b - lo_w, c2 = c1 - S->dj;
            if (c1 < 0 || c1 >= wi || c2 < 0 || c2 >= wi) continue;
            sum += in[(size_t)(r1 + (long)pad) * ld + pad + (size_t)c1];
          }
        }
        out[(i + pad) * ld2 + pad + j] = sum * scale;
      }
  }
  for (size_t i = i0; i < i1; i++) {
    REAL *g = S->g2 + (i + pad) * ld2 + pad + j0;
    affine_op(P, op, g, with_t ? S->t2 + (i + pad) * ld2 + pad + j0 : NULL, j1 - j0);
  }
  slice_swap(S);
  /* the next stride-1 convolution writes the valid cells of g2 and t2 and
   * leaves their borders: zero, in the new geometry */
  memset(S->g2, 0, cells2 * sizeof(REAL));
  if (with_t) memset(S->t2, 0, cells2 * sizeof(REAL));
  S->h = (size_t)ho;
  S->w = (size_t)wo;
  S->ld = ld2;
  S->di = di;
  S->dj = dj;
  S->i0 = i0;
  S->i1 = i1;
  S->j0 = j0;
  S->j1 = j1;
}

/* FORK, NEXT or JOIN of a block that a slice run carries. A slice-local
 * block (every branch at the slice's size) works on the valid rows; a
 * strided one on whole buffers, zero borders included, its FORK keeping
 * the slice's geometry (`geo`, per depth) for each NEXT to return to.
 * `cap`: the elements of one slot array (the run's largest slice). */
static void slice_branch(struct cnn_ws *ws, const struct cnn_op *op, struct slice *S, struct slice *geo, size_t cap,
                         int with_t) {
  REAL *slot = (REAL *)ws->sstack + 4 * cap * (size_t)op->depth;
  REAL *tt = with_t ? S->t : NULL;
  if (op->slice_local) {
    for (size_t i = S->i0; i < S->i1; i++) {
      size_t at = (i + S->pad) * S->ld + S->pad + S->j0, nrow = S->j1 - S->j0;
      REAL *gr = S->g + at, *tr = with_t ? S->t + at : NULL;
      if (op->layer->kind == NTK_LAYER_FORK) branch_fork(slot + at, cap, nrow, gr, tr);
      else if (op->layer->kind == NTK_LAYER_NEXT)
        branch_next(slot + at, cap, nrow, nrow, op->first, op->layer->prod, (REAL)op->fanw, gr, tr);
      else branch_join(slot + at, cap, nrow, op->layer->branches, op->layer->prod, (REAL)op->fanw, (REAL)op->fandiv, gr, tr);
    }
    return;
  }
  size_t cells = S->ld * (S->h + 2 * S->pad);
  struct slice *in = &geo[op->depth];
  if (op->layer->kind == NTK_LAYER_FORK) {
    branch_fork(slot, cap, cells, S->g, tt);
    *in = *S;
  } else if (op->layer->kind == NTK_LAYER_NEXT) {
    branch_next(slot, cap, cells, in->ld * (in->h + 2 * in->pad), op->first, op->layer->prod, (REAL)op->fanw, S->g, tt);
    REAL *g = S->g, *t = S->t, *g2 = S->g2, *t2 = S->t2; /* the buffers stay where they are */
    *S = *in;
    S->g = g, S->t = t, S->g2 = g2, S->t2 = t2;
    size_t cells_in = S->ld * (S->h + 2 * S->pad); /* g2, t2 zero again in the block input's geometry */
    memset(S->g2, 0, cells_in * sizeof(REAL));
    if (with_t) memset(S->t2, 0, cells_in * sizeof(REAL));
  } else {
    branch_join(slot, cap, cells, op->layer->branches, op->layer->prod, (REAL)op->fanw, (REAL)op->fandiv, S->g, tt);
  }
}

static void slice_pointwise(const struct cnn_plan *P, struct slice *S, const struct cnn_op *op,
                            const REAL *va, const REAL *vb, int with_t) {
  const struct ntk_layer *l = op->layer;
  size_t ld = S->ld, pad = S->pad;
  for (size_t i = S->i0; i < S->i1; i++) {
    REAL *g = S->g + (i + pad) * ld + pad, *t = S->t + (i + pad) * ld + pad;
    if (l->kind == NTK_LAYER_DENSE) {
      affine_op(P, op, g + S->j0, with_t ? t + S->j0 : NULL, S->j1 - S->j0);
      continue;
    }
    /* (i, j) pairs image a's position (i, j) with image b's (i - di, j - dj) */
    size_t hw = S->h * S->w, j0 = S->j0;
    const REAL *qa = va + i * S->w + j0, *qb = vb + (size_t)(((long)i - S->di) * (long)S->w + (long)j0 - S->dj);
    MAP_PAIRS(&l->map, g + j0, with_t ? t + j0 : NULL, S->j1 - j0, qa, qa + hw, qb, qb + hw);
  }
}

/* Run layers [k0, k1) (all carried by a slice run: plan_chain) over every
 * offset of the h x w covariance F on the band and lattice the first needs;
 * a strided convolution takes the slice to its output's size and offset
 * s times smaller. With gsum, add the results up for GlobalAvgPool instead
 * of writing them into og, ot (at the last layer's size: fg, ft when that
 * is the first's, whose offsets are disjoint, else other buffers). In a self run (a, a) the zero offset goes first: its
 * slice is the diagonal, i.e. the variances the other offsets need.
 * Not inlined: inside pair_full (GCC 12 -O3) the pair path ran 20 %
 * slower (issue 26). */
__attribute__((noinline)) static int run_slices(const ntk_cnn_t *c, struct cnn_ws *ws, REAL *fg, REAL *ft, REAL *og,
                                                REAL *ot, size_t h, size_t w, size_t k0, size_t k1, REAL *va,
                                                const REAL *vb, int self, int same, int with_t, double *gsum,
                                                double *tsum) {
  const struct cnn_plan *P = &c->plan;
  size_t hw = h * w;
  struct slice S;
  S.h = h;
  S.w = w;
  S.pad = P->pad;
  S.ld = w + 2 * P->pad;
  S.g = (REAL *)ws->sg;
  S.t = (REAL *)ws->st;
  S.g2 = (REAL *)ws->sg2;
  S.t2 = (REAL *)ws->st2;
  S.rows = (REAL *)ws->srows;
  size_t cells = S.ld * (h + 2 * P->pad); /* the run's largest slice: its first size */
  struct slice geo[NTK_BRANCH_MAXDEPTH];  /* strided blocks: the slice at each open FORK */
  /* A self run first takes the zero offset alone to capture the variances
   * (its slice is the diagonal). Then every offset in row order, the order
   * the batched code sums in, so that a pair (a, a) gives the same bits
   * either way. A self run whose only use is the variances computes only
   * the offsets they need (vbh, vbw: none past the capture in the run into
   * GAP, a band around the diagonal before a pooling layer). */
  int vars_only = self && P->self_vars_only;
  long noff = vars_only && gsum ? 0 : (long)(2 * h - 1) * (long)(2 * w - 1);
  long bh = (long)(vars_only ? P->ops[k0].vbh : P->ops[k0].bh); /* offsets the readout needs */
  long bw = (long)(vars_only ? P->ops[k0].vbw : P->ops[k0].bw);
  long mh = (long)P->ops[k0].mh, mw = (long)P->ops[k0].mw; /* only multiples of these are read (strides ahead) */
  for (long idx = self ? -1 : 0; idx < noff; idx++) {
    long k = idx < 0 ? ((long)h - 1) * (long)(2 * w - 1) + (long)w - 1 : idx;
    S.di = k / (long)(2 * w - 1) - ((long)h - 1);
    S.dj = k % (long)(2 * w - 1) - ((long)w - 1);
    if (S.di < -bh || S.di > bh || S.dj < -bw || S.dj > bw || S.di % mh || S.dj % mw) continue;
    S.h = h, S.w = w, S.ld = w + 2 * P->pad; /* a strided convolution of the last offset changed them */
    S.i0 = S.di > 0 ? (size_t)S.di : 0;
    S.i1 = S.di < 0 ? (size_t)((long)h + S.di) : h;
    S.j0 = S.dj > 0 ? (size_t)S.dj : 0;
    S.j1 = S.dj < 0 ? (size_t)((long)w + S.dj) : w;
    memset(S.g, 0, cells * sizeof(REAL));
    memset(S.g2, 0, cells * sizeof(REAL));
    if (with_t) {
      memset(S.t, 0, cells * sizeof(REAL));
      memset(S.t2, 0, cells * sizeof(REAL));
    }
    for (size_t i = S.i0; i < S.i1; i++) {
      size_t from = (i * w) * hw + (size_t)((long)i - S.di) * w;
      for (size_t j = S.j0; j < S.j1; j++) {
        size_t q = from + j * hw + (size_t)((long)j - S.dj);
        S.g[(i + S.pad) * S.ld + S.pad + j] = fg[q];
        if (with_t) S.t[(i + S.pad) * S.ld + S.pad + j] = ft[q];
      }
    }
    for (size_t kk = k0; kk < k1; kk++) {
      if (ntk_stop_seen(c->stop)) return 1; /* per layer of each offset: a huge filter, a deep run */
      const struct cnn_op *op = &P->ops[kk];
      if (op->layer->kind == NTK_LAYER_CONV) {
        if (op->slice_local) slice_conv(P, &S, op, with_t);
        else slice_conv_strided(P, &S, op, with_t); /* the slice moves to the output's size */
      } else if (op->layer->kind == NTK_LAYER_DENSE) {
        slice_pointwise(P, &S, op, NULL, NULL, with_t);
      } else if (ntk_layer_traits(op->layer->kind)->branch) {
        slice_branch(ws, op, &S, geo, cells, with_t); /* a residual block's stack: this slice */
      } else if (op->layer->kind == NTK_LAYER_DROPOUT) {
        if (same && S.di == 0 && S.dj == 0) /* the zero offset of a sample with itself: each position with itself */
          dropout_diag(op, S.g + S.pad * S.ld + S.pad, with_t ? S.t + S.pad * S.ld + S.pad : NULL, S.h * S.w,
                       S.ld, S.w);
      } else if (op->var >= 0) {
        REAL *qa = va + P->var_off[op->var];
        if (idx < 0) { /* at the slice's size: a strided convolution before may have changed it */
          for (size_t i = 0; i < S.h; i++)
            for (size_t j = 0; j < S.w; j++) qa[i * S.w + j] = S.g[(i + S.pad) * S.ld + S.pad + j];
          layernorm_means(op, qa, S.h, S.w);
          capture_vars(qa, S.h * S.w);
        }
        slice_pointwise(P, &S, op, qa, vb + P->var_off[op->var], with_t);
      }
    }
    if (idx < 0) continue; /* the capture pass */
    for (size_t i = S.i0; i < S.i1; i++) {
      const REAL *g = S.g + (i + S.pad) * S.ld + S.pad, *t = S.t + (i + S.pad) * S.ld + S.pad;
      if (gsum) {
        for (size_t j = S.j0; j < S.j1; j++) {
          *gsum += (double)g[j];
          if (with_t) *tsum += (double)t[j];
        }
        continue;
      }
      size_t wf = S.w, hwf = S.h * S.w; /* the run's last size */
      size_t from = (i * wf) * hwf + (size_t)((long)i - S.di) * wf;
      for (size_t j = S.j0; j < S.j1; j++) {
        size_t q = from + j * hwf + (size_t)((long)j - S.dj);
        og[q] = g[j];
        if (with_t) ot[q] = t[j];
      }
    }
  }
  return 0;
}

/* ---- GlobalSelfAttention ------------------------------------------------- */

/* linear_scaling: image a's attention weights from its own n x n
 * covariance c into g, row p the weights of query position p over the key
 * positions: mech(qk (kw c + pw I)), SOFTMAX over each row (jax.nn.softmax:
 * exp(x - max) / sum). */
static int attention_weights(const struct ntk_attention *a, const REAL *c, REAL *g, size_t n,
                             const struct ntk_stop *stop) {
  double kw, pw, qk = a->w_query * a->w_key;
  attention_mix(a, &kw, &pw);
  for (size_t p = 0; p < n; p++) {
    if (ntk_stop_seen(stop)) return 1;
    REAL *row = g + p * n;
    for (size_t q = 0; q < n; q++) {
      REAL x = (REAL)(qk * (kw * (double)c[p * n + q] + (p == q ? pw : 0.0)));
      row[q] = a->mech == NTK_ATTN_ABS ? (REAL)fabs((double)x) : a->mech == NTK_ATTN_RELU && !(x > 0) ? 0 : x;
    }
    if (a->mech != NTK_ATTN_SOFTMAX) continue;
    REAL top = row[0];
    for (size_t q = 1; q < n; q++) top = row[q] > top ? row[q] : top;
    double sum = 0;
    for (size_t q = 0; q < n; q++) sum += (double)(row[q] = (REAL)exp((double)(row[q] - top)));
    for (size_t q = 0; q < n; q++) row[q] = (REAL)((double)row[q] / sum);
  }
  return 0;
}

/* The pair's covariance fg, ft (n x n) through the layer. linear_scaling:
 * ng = ov^2 Ga V Gb^T + b^2 and nt = ov^2 Ga T Gb^T + b^2 + 2 (ng - b^2),
 * V, T the input's (with the embeddings' where val_pos_emb), Ga, Gb the
 * images' weights (qa, qb: written here in a self run), tmp a scratch
 * n x n; *swap set: the output is in ng, nt. IDENTITY without it: per
 * entry, from the pair's sums over every position pair (no weights per
 * image), in place. */
static int attention_full(const struct cnn_op *op, REAL *fg, REAL *ft, REAL *ng, REAL *nt, REAL *tmp, REAL *qa,
                          const REAL *qb, int self, int with_t, const struct ntk_stop *stop, int *swap) {
  const struct ntk_attention *a = &op->layer->attn;
  size_t n = op->ho * op->wo;
  double kw, pw, b2 = op->layer->b_std * op->layer->b_std, ov = a->w_out * a->w_value;
  attention_mix(a, &kw, &pw);
  *swap = 0;
  if (!a->linear) { /* IDENTITY: NI, TI the interpolations; dot12 and the NTK's dot from their sums */
    double dot12 = 0, dnt = 0, dnt2 = 0, std2 = a->w_query * a->w_key * ov;
    std2 *= std2;
    for (size_t p = 0; p < n; p++)
      for (size_t q = 0; q < n; q++) {
        size_t i = p * n + q;
        double k = (double)fg[i], ni = kw * k + (p == q ? pw : 0.0);
        dot12 += ni * (a->val_pos ? ni : k);
        if (!with_t) continue;
        double t = (double)ft[i], ti = kw * t + (p == q ? pw : 0.0);
        dnt += ni * ti;
        dnt2 += ni * t + k * ti;
      }
    double ntk_dot = a->val_pos || a->pos == NTK_POS_NONE ? 2 * dnt : dnt2;
    for (size_t p = 0; p < n; p++)
      for (size_t q = 0; q < n; q++) {
        size_t i = p * n + q;
        double ni = kw * (double)fg[i] + (p == q ? pw : 0.0);
        if (with_t) {
          double ti = kw * (double)ft[i] + (p == q ? pw : 0.0);
          ft[i] = (REAL)(std2 * (ntk_dot * ni + dot12 * (ti + 4 * ni)) + b2);
        }
        fg[i] = (REAL)(std2 * dot12 * ni + b2);
      }
    return 0;
  }
  if (self && attention_weights(a, fg, qa, n, stop)) return 1;
  const REAL *ga = qa, *gb = qb; /* a self run's qb is qa (pair: vb = va) */
  for (int pass = 0; pass < (with_t ? 2 : 1); pass++) {
    REAL *in = pass ? ft : fg, *out = pass ? nt : ng;
    if (a->val_pos) /* the values see the embeddings: kw K + pw I */
      for (size_t p = 0; p < n; p++) {
        for (size_t q = 0; q < n; q++) in[p * n + q] = (REAL)(kw * (double)in[p * n + q]);
        in[p * n + p] = (REAL)((double)in[p * n + p] + pw);
      }
    /* tmp = Ga in, out = ov^2 tmp Gb^T: OpenBLAS, one thread per worker
     * thread (its results the same bits wherever the pair is computed) */
    if (ntk_stop_seen(stop)) return 1;
    int m = (int)n;
    GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, (REAL)1, ga, m, in, m, (REAL)0, tmp, m);
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, m, m, m, (REAL)(ov * ov), tmp, m, gb, m, (REAL)0, out, m);
  }
  for (size_t i = 0; i < n * n; i++) {
    if (with_t) nt[i] = (REAL)((double)nt[i] + b2 + 2 * (double)ng[i]);
    ng[i] = (REAL)((double)ng[i] + b2);
  }
  *swap = 1;
  return 0;
}

/* ---- ImageResize ---------------------------------------------------------------- */

/* One axis of a row-major 4-D array of sizes d[4] resampled by the weights
 * r (m x d[axis]; row o nonzero in columns band[2 o] .. band[2 o + 1] - 1):
 * out's axis has m entries. 1 if stopped (polled per row of the outer axes). */
static int resample_axis(const REAL *in, REAL *out, const size_t d[4], int axis, const double *r,
                         const size_t *band, size_t m, const struct ntk_stop *stop) {
  size_t n = d[axis], outer = 1, inner = 1;
  for (int k = 0; k < axis; k++) outer *= d[k];
  for (int k = axis + 1; k < 4; k++) inner *= d[k];
  for (size_t a = 0; a < outer; a++) {
    if (ntk_stop_seen(stop)) return 1;
    for (size_t o = 0; o < m; o++) {
      REAL *dst = out + (a * m + o) * inner;
      memset(dst, 0, inner * sizeof(REAL));
      for (size_t k = band[2 * o]; k < band[2 * o + 1]; k++) {
        REAL w = (REAL)r[o * n + k];
        const REAL *src = in + (a * n + k) * inner;
        for (size_t b = 0; b < inner; b++) dst[b] += w * src[b];
      }
    }
  }
  return 0;
}

/* The covariance f (hi*wi x hi*wi, [i][j][i'][j']) through an ImageResize,
 * in place: the rows of both images, then the columns (docs/MATH.md); a and
 * b scratch of the plan's resize_cells. 1 if stopped. */
static int resize_full(const struct cnn_op *op, REAL *f, REAL *a, REAL *b, const struct ntk_stop *stop) {
  size_t h = op->hi, w = op->wi, ho = op->ho, wo = op->wo;
  size_t d0[4] = {h, w, h, w}, d1[4] = {ho, w, h, w}, d2[4] = {ho, w, ho, w}, d3[4] = {ho, wo, ho, w};
  return resample_axis(f, a, d0, 0, op->rh, op->bandh, ho, stop) ||
         resample_axis(a, b, d1, 2, op->rh, op->bandh, ho, stop) ||
         resample_axis(b, a, d2, 1, op->rw, op->bandw, wo, stop) ||
         resample_axis(a, f, d3, 3, op->rw, op->bandw, wo, stop);
}

/* ---- Aggregate ---------------------------------------------------------------- */

/* Pattern p's edges (n x n, row-major: i -> j of weight p[i][j]) into e,
 * in row-major order, where there are at most n^2 / 8 of them (the
 * capacity cnn.c gives e): their count; SIZE_MAX where there are more, and
 * the pattern's products go through the dense product instead. Edge by
 * edge, a product costs 2 nnz n against the dense 2 n^3 (a graph of a few
 * edges per node, padded to the dataset's largest: V = 256 at 1 % took
 * 2.4 times its network without two of its Aggregates through the dense
 * product). */
static size_t pattern_edges(const REAL *p, size_t n, struct cnn_edge *e) {
  size_t nnz = 0, most = n * n / 8;
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < n; j++) {
      REAL w = p[i * n + j];
      if (w == 0) continue;
      if (nnz == most) return SIZE_MAX;
      e[nnz++] = (struct cnn_edge){(uint32_t)i, (uint32_t)j, (double)w};
    }
  return nnz;
}

/* The pair's covariance f (n x n) through an Aggregate, out = Pa^T f Pb
 * (docs/MATH.md), Pa and Pb the images' patterns (n x n, row i the edges
 * out of position i), ea and eb their edges where sparse (pattern_edges:
 * na, nb; SIZE_MAX where dense); tmp a scratch n x n. By edges: row j of
 * Pa^T f gains w times row i of f for each edge i -> j of Pa, and each row
 * of the result gains w times its entry k at its entry l for each edge
 * k -> l of Pb; a dense pattern's product through OpenBLAS, one thread
 * per worker thread, as attention_full. The choice depends on the
 * patterns alone, so a pair's bits do not depend on where it is computed.
 * 1 if stopped. */
static int aggregate_full(size_t n, const REAL *f, REAL *out, REAL *tmp, const REAL *pa, const REAL *pb,
                          const struct cnn_edge *ea, size_t na, const struct cnn_edge *eb, size_t nb,
                          const struct ntk_stop *stop) {
  if (ntk_stop_seen(stop)) return 1;
  int m = (int)n;
  if (na != SIZE_MAX) {
    memset(tmp, 0, n * n * sizeof(REAL));
    for (size_t k = 0; k < na; k++) {
      REAL w = (REAL)ea[k].w, *d = tmp + (size_t)ea[k].to * n;
      const REAL *s = f + (size_t)ea[k].from * n;
      for (size_t r = 0; r < n; r++) d[r] += w * s[r];
    }
  } else {
    GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, m, m, m, (REAL)1, pa, m, f, m, (REAL)0, tmp, m);
  }
  if (ntk_stop_seen(stop)) return 1;
  if (nb != SIZE_MAX) {
    memset(out, 0, n * n * sizeof(REAL));
    for (size_t r = 0; r < n; r++) {
      const REAL *s = tmp + r * n;
      REAL *d = out + r * n;
      for (size_t k = 0; k < nb; k++) d[eb[k].to] += s[eb[k].from] * (REAL)eb[k].w;
    }
  } else {
    GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, (REAL)1, tmp, m, pb, m, (REAL)0, out, m);
  }
  return 0;
}

/* ---- one pair ---------------------------------------------------------------- */

/* Readout sums are in double whatever REAL is: GlobalAvgPool adds up to a
 * million entries per pair, which in a float32 sum cost 1e-4 relative. */

/* DIAG: the same-position entries of images xa, xb through the spatial
 * layers, and their mean at the Flatten readout into *g, *t. */
static int pair_diag(const ntk_cnn_t *c, struct cnn_ws *ws, const REAL *xa, const REAL *xb, REAL *va,
                     const REAL *vb, int self, int same, int with_t, REAL *g, REAL *t) {
  const struct cnn_plan *P = &c->plan;
  size_t C = P->C, HW = P->H * P->W;
  double gs = 0, ts = 0;
  REAL *dg = (REAL *)ws->a, *dt = (REAL *)ws->b, *ng = (REAL *)ws->c, *nt = (REAL *)ws->d;
  for (size_t p = 0; p < HW; p++) {
    REAL sum = 0;
    for (size_t k = 0; k < C; k++) sum += xa[p * C + k] * xb[p * C + k];
    dg[p] = sum / (REAL)C;
    dt[p] = 0;
  }
  for (size_t k = 0; k < P->nops; k++) {
    if (ntk_stop_seen(c->stop)) return 1;
    const struct cnn_op *op = &P->ops[k];
    size_t n = op->ho * op->wo;
    if (op->layer->kind == NTK_LAYER_CONV) {
      if (conv_diag(op, dg, ng, c->stop) || (with_t && conv_diag(op, dt, nt, c->stop))) return 1;
      REAL *x = dg; dg = ng; ng = x;
      x = dt; dt = nt; nt = x;
      affine_op(P, op, dg, with_t ? dt : NULL, n);
    } else if (op->layer->kind == NTK_LAYER_DENSE) {
      affine_op(P, op, dg, with_t ? dt : NULL, n);
    } else if (ntk_layer_traits(op->layer->kind)->branch) {
      branch_op(ws, P, op, dg, with_t ? dt : NULL, 0);
    } else if (op->layer->kind == NTK_LAYER_DROPOUT) {
      if (same) dropout_diag(op, dg, with_t ? dt : NULL, n, n, n);
    } else if (op->var >= 0) {
      REAL *qa = va + P->var_off[op->var];
      const REAL *qb = vb + P->var_off[op->var];
      if (self) {
        memcpy(qa, dg, n * sizeof(REAL));
        layernorm_means(op, qa, op->ho, op->wo);
        capture_vars(qa, n);
      }
      MAP_PAIRS(&op->layer->map, dg, with_t ? dt : NULL, n, qa, qa + n, qb, qb + n);
    }
  }
  size_t n = P->out_h * P->out_w;
  for (size_t p = 0; p < n; p++) {
    gs += (double)dg[p];
    ts += (double)dt[p];
  }
  *g = (REAL)(gs / (double)n);
  *t = (REAL)(ts / (double)n);
  return 0;
}

/* SLICE and GENERAL: the input covariance of images xa, xb into fg,
 * only the offsets up to bh, bw the first layer needs, on its lattice
 * (multiples of mh, mw). */
static int full_input(const struct cnn_plan *P, const REAL *xa, const REAL *xb, REAL *fg, size_t bh, size_t bw,
                      size_t mh, size_t mw, const struct ntk_stop *stop) {
  size_t H = P->H, W = P->W, C = P->C, HW = H * W;
  for (size_t i = 0; i < H; i++) {
    if (ntk_stop_seen(stop)) return 1;
    for (size_t j = 0; j < W; j++) {
      size_t p = i * W + j, i1 = i + bh + 1 < H ? i + bh + 1 : H, j1 = j + bw + 1 < W ? j + bw + 1 : W;
      size_t ia = i > bh ? i - bh : 0, ja = j > bw ? j - bw : 0;
      ia += (i - ia) % mh; /* the first row and column at a multiple of the lattice from (i, j) */
      ja += (j - ja) % mw;
      for (size_t i2 = ia; i2 < i1; i2 += mh)
        for (size_t j2 = ja; j2 < j1; j2 += mw) {
          size_t q = i2 * W + j2;
          REAL sum = 0;
          for (size_t k = 0; k < C; k++) sum += xa[p * C + k] * xb[q * C + k];
          fg[p * HW + q] = sum / (REAL)C;
        }
    }
  }
  return 0;
}

/* SLICE and GENERAL: the covariance of images xa, xb through the spatial
 * layers (runs of slice-local layers one offset at a time on the SLICE
 * path, the others on the full covariance), and the readout's sum
 * normalised into *g, *t. */
static int pair_full(const ntk_cnn_t *c, struct cnn_ws *ws, const REAL *xa, const REAL *xb, REAL *va,
                      const REAL *vb, int self, int same, int with_t, REAL *g, REAL *t) {
  const struct cnn_plan *P = &c->plan;
  size_t H = P->H, W = P->W, HW = H * W;
  double gs = 0, ts = 0;
  REAL *fg = (REAL *)ws->a, *ft = (REAL *)ws->b, *ng = (REAL *)ws->c, *nt = (REAL *)ws->d;
  int vars_only = self && P->self_vars_only; /* run_slices: only the variances' band */
  size_t bh = P->nops ? (vars_only ? P->ops[0].vbh : P->ops[0].bh) : H;
  size_t bw = P->nops ? (vars_only ? P->ops[0].vbw : P->ops[0].bw) : W;
  size_t mh = P->nops ? P->ops[0].mh : 1, mw = P->nops ? P->ops[0].mw : 1;
  if (full_input(P, xa, xb, fg, bh, bw, mh, mw, c->stop)) return 1;
  if (with_t) memset(ft, 0, HW * HW * sizeof(REAL));
  size_t h = H, w = W;
  int summed = 0;
  for (size_t k = 0; k < P->nops;) {
    if (ntk_stop_seen(c->stop)) return 1;
    const struct cnn_op *op = &P->ops[k];
    if (P->path == NTK_CNN_SLICE && op->chain) {
      size_t k1 = k;
      while (k1 < P->nops && P->ops[k1].chain) k1++;
      int to_gap = k1 == P->nops && P->readout == NTK_LAYER_GLOBALAVGPOOL;
      /* strided convolutions in the run: the output, smaller, goes to ng, nt (in fg it would
       * overwrite the input of offsets still to come) */
      int moved = P->ops[k1 - 1].ho != h || P->ops[k1 - 1].wo != w;
      if (run_slices(c, ws, fg, ft, moved ? ng : fg, moved ? nt : ft, h, w, k, k1, va, vb, self, same, with_t,
                     to_gap ? &gs : NULL, to_gap ? &ts : NULL))
        return 1;
      if (moved) {
        REAL *x = fg; fg = ng; ng = x;
        x = ft; ft = nt; nt = x;
      }
      summed = to_gap;
      h = P->ops[k1 - 1].ho;
      w = P->ops[k1 - 1].wo;
      k = k1;
      continue;
    }
    size_t n = op->ho * op->wo;
    if (op->layer->kind == NTK_LAYER_CONV || op->layer->kind == NTK_LAYER_AVGPOOL) {
      if (op->layer->kind == NTK_LAYER_CONV && op->layer->transpose) {
        if (convt_full(op, fg, ng, c->stop) || (with_t && convt_full(op, ft, nt, c->stop))) return 1;
      } else if (op->layer->kind == NTK_LAYER_CONV) {
        if (conv_full(op, fg, ng, c->stop) || (with_t && conv_full(op, ft, nt, c->stop))) return 1;
      } else {
        if (pool_full(op, fg, (REAL *)ws->e, ng, c->stop) || (with_t && pool_full(op, ft, (REAL *)ws->e, nt, c->stop)))
          return 1;
      }
      REAL *x = fg; fg = ng; ng = x;
      x = ft; ft = nt; nt = x;
      if (op->layer->kind == NTK_LAYER_CONV && op->layer->local)
        affine_diag(P, op, fg, with_t ? ft : NULL, n);
      else if (op->layer->kind == NTK_LAYER_CONV)
        affine_op(P, op, fg, with_t ? ft : NULL, n * n);
    } else if (op->layer->kind == NTK_LAYER_DENSE) {
      affine_op(P, op, fg, with_t ? ft : NULL, n * n);
    } else if (op->layer->kind == NTK_LAYER_RESIZE) {
      if (resize_full(op, fg, ng, (REAL *)ws->e, c->stop) ||
          (with_t && resize_full(op, ft, ng, (REAL *)ws->e, c->stop)))
        return 1;
    } else if (op->layer->kind == NTK_LAYER_AGGREGATE) {
      const REAL *pa = xa + HW * P->C, *pb = xb + HW * P->C; /* the patterns after the features */
      struct cnn_edge *ea = ws->edges, *eb = ws->edges + n * n / 8;
      size_t na = pattern_edges(pa, n, ea), nb = pattern_edges(pb, n, eb);
      if (aggregate_full(n, fg, ng, (REAL *)ws->e, pa, pb, ea, na, eb, nb, c->stop) ||
          (with_t && aggregate_full(n, ft, nt, (REAL *)ws->e, pa, pb, ea, na, eb, nb, c->stop)))
        return 1;
      REAL *x = fg; fg = ng; ng = x;
      x = ft; ft = nt; nt = x;
    } else if (op->layer->kind == NTK_LAYER_ATTENTION) {
      int swap;
      REAL *qa = op->var >= 0 ? va + P->var_off[op->var] : NULL;
      const REAL *qb = op->var >= 0 ? vb + P->var_off[op->var] : NULL;
      if (attention_full(op, fg, ft, ng, nt, (REAL *)ws->e, qa, qb, self, with_t, c->stop, &swap)) return 1;
      if (swap) {
        REAL *x = fg; fg = ng; ng = x;
        x = ft; ft = nt; nt = x;
      }
    } else if (ntk_layer_traits(op->layer->kind)->branch) {
      branch_op(ws, P, op, fg, with_t ? ft : NULL, 1);
    } else if (op->layer->kind == NTK_LAYER_DROPOUT) {
      if (same) dropout_diag(op, fg, with_t ? ft : NULL, n, n + 1, 1);
    } else if (op->var >= 0) {
      REAL *qa = va + P->var_off[op->var];
      const REAL *qb = vb + P->var_off[op->var];
      if (self) {
        for (size_t p = 0; p < n; p++) qa[p] = fg[p * n + p];
        layernorm_means(op, qa, op->ho, op->wo);
        capture_vars(qa, n);
      }
      MAP_ROWS(&op->layer->map, fg, with_t ? ft : NULL, n, n, qa, qa + n, qb, qb + n, 0);
    }
    h = op->ho;
    w = op->wo;
    k++;
  }
  size_t n = h * w;
  if (!summed) {
    if (P->readout == NTK_LAYER_GLOBALAVGPOOL) {
      for (size_t p = 0; p < n * n; p++) {
        gs += (double)fg[p];
        if (with_t) ts += (double)ft[p];
      }
    } else {
      for (size_t p = 0; p < n; p++) {
        gs += (double)fg[p * n + p];
        if (with_t) ts += (double)ft[p * n + p];
      }
    }
  }
  double norm = P->readout == NTK_LAYER_GLOBALAVGPOOL ? (P->readout_sum ? 1.0 : (double)(n * n)) : (double)n;
  *g = (REAL)(gs / norm);
  *t = (REAL)(ts / norm);
  return 0;
}

/* The fully-connected tail on the scalars *g, *t; ta, tb: the tail's
 * variances of the two images (in a self run ta is written instead). */
static void pair_tail(const struct cnn_plan *P, REAL *ta, const REAL *tb, int self, int same, REAL *g, REAL *t) {
  REAL stack[4 * NTK_BRANCH_MAXDEPTH]; /* residual blocks on the scalar (branch.h, one value per array) */
  int ended[NTK_BRANCH_MAXDEPTH], depth = 0;
  for (size_t k = 0; k < P->ntail; k++) {
    const struct ntk_layer *l = &P->tail[k];
    REAL td, fw = (REAL)P->tail_fanw[2 * k], fdiv = (REAL)P->tail_fanw[2 * k + 1];
    if (self) ta[k] = *g;
    switch (l->kind) { /* every kind, no default: -Werror=switch catches a new one */
    case NTK_LAYER_DENSE: affine1(P, P->tail_fan[k], l, g, t); break;
    case NTK_LAYER_MAP:
    case NTK_LAYER_LAYERNORM:
      *g = nonlin1(l, *g, ta[k], tb[k], &td);
      *t *= td;
      break;
    case NTK_LAYER_IDENTITY: break;
    case NTK_LAYER_DROPOUT:
      if (same) {
        *g *= (REAL)(1.0 / l->rate);
        *t *= (REAL)(1.0 / l->rate);
      }
      break;
    case NTK_LAYER_FORK:
      ended[depth] = 0;
      branch_fork(stack + 4 * depth++, 1, 1, g, t);
      break;
    case NTK_LAYER_NEXT: branch_next(stack + 4 * (depth - 1), 1, 1, 1, ended[depth - 1]++ == 0, l->prod, fw, g, t); break;
    case NTK_LAYER_JOIN:
      depth--;
      branch_join(stack + 4 * depth, 1, 1, l->branches, l->prod, fw, fdiv, g, t);
      break;
    case NTK_LAYER_CONV: /* spatial layers and a second readout: refused by plan_build and the parser */
    case NTK_LAYER_AVGPOOL:
    case NTK_LAYER_FLATTEN:
    case NTK_LAYER_GLOBALAVGPOOL:
    case NTK_LAYER_ATTENTION:
    case NTK_LAYER_RESIZE:
    case NTK_LAYER_AGGREGATE:
    case NTK_LAYER_KINDS: *g = (REAL)NAN; break; /* a non-finite tile is refused, never stored */
    }
  }
}

/* Compute the kernel of images xa, xb. va, vb: their variance blocks (see
 * cnn.c); when `self` (xa == xb), va is filled in on the way instead.
 * `same`: a sample paired with itself (a self run, or an entry on the
 * matrix's diagonal), where Dropout scales. 1 if stopped (the outputs,
 * and in a self run va, are then garbage). */
static int pair(const ntk_cnn_t *c, struct cnn_ws *ws, const REAL *xa, const REAL *xb, REAL *va,
                const REAL *vb, int self, int same, int with_t, REAL *out_g, REAL *out_t) {
  const struct cnn_plan *P = &c->plan;
  REAL g, t;
  if (self) vb = va;
  same |= self;
  if (P->path == NTK_CNN_DIAG ? pair_diag(c, ws, xa, xb, va, vb, self, same, with_t, &g, &t)
                              : pair_full(c, ws, xa, xb, va, vb, self, same, with_t, &g, &t))
    return 1;
  pair_tail(P, va + P->tail_off, vb + P->tail_off, self, same, &g, &t);
  *out_g = g;
  *out_t = with_t ? t : 0;
  return 0;
}

#undef affine
#undef affine1
#undef affine_op
#undef affine_diag
#undef nonlin1r
#undef nonlin1
#undef capture_vars
#undef layernorm_means
#undef dropout_diag
#undef branch_op
#undef branch_cat
#undef branch_fork
#undef branch_next
#undef branch_join
#undef conv_diag
#undef conv_full
#undef convt_full
#undef convt_input
#undef convt_fold
#undef pool_scale
#undef pool_full
#undef attention_weights
#undef attention_full
#undef aggregate_full
#undef pattern_edges
#undef resample_axis
#undef resize_full
#undef slice
#undef slice_conv
#undef slice_conv_strided
#undef slice_swap
#undef slice_branch
#undef slice_pointwise
#undef run_slices
#undef pair_diag
#undef full_input
#undef pair_full
#undef pair_tail
#undef pair
