/* A CNN tile, written once for both precisions: src/kernels/cnn.c
 * includes this file through each_precision.h (each name below becomes
 * name_f / name_d). The pair kernels are cnn_impl.h's, the batched ones
 * cnn_batch_impl.h's. */

/* The per-precision names this file defines (each_precision.h), ... */
#define judge_image SFX(judge_image)
#define judge_one SFX(judge_one)
#define self_vars SFX(self_vars)
#define batched_tile SFX(batched_tile)
#define pair_tile SFX(pair_tile)
/* ... and those of cnn_impl.h and cnn_batch_impl.h it calls. */
#define pair SFX(pair)
#define b_pair_diag SFX(b_pair_diag)
#define b_pair_multi SFX(b_pair_multi)
#define b_pair_slice SFX(b_pair_slice)
#define b_tail SFX(b_tail)

/* Image i's block, just computed, judged (judge_vars). Where it has a 0
 * entering a scale-free layer, the image's oracle, its block with each
 * nonzero value of the image set to 1, tells a window of zeros (0 there
 * too) from a variance that underflowed (the image scaled by 1e-170: a 0
 * at every position, and Sign's NNGP was 0 instead of O(1), exit 0). */
static ntk_status judge_image(ntk_cnn_t *c, const struct ntk_tile *t, const REAL *block, size_t i) {
  int need = 0;
  ntk_status st = judge_vars(c, block, i, NULL, &need);
  if (st || !need) return st;
  size_t vs = c->plan.var_size, d = c->data->d;
  const REAL *x = (const REAL *)c->data->x + i * d;
  REAL *one = malloc((d + vs) * sizeof(REAL)), dummy[2];
  if (!one) return ntk_error(NTK_ENOMEM, "out of memory");
  for (size_t k = 0; k < d; k++) one[k] = ntk_fp_class(&x[k], (int)sizeof(REAL), NULL) == NTK_FP_ZERO ? 0 : 1;
  if (pair(c, &c->ws, one, one, one + d, NULL, 1, 1, 0, &dummy[0], &dummy[1])) st = tile_stopped(t, 0);
  else st = judge_vars(c, block, i, one + d, &need);
  free(one);
  return st;
}

/* Image i's block computed here alone and judged, its oracle included
 * (ntk_cnn_judge_image: for the GPU's blocks, judged without one). */
static ntk_status judge_one(ntk_cnn_t *c, size_t i) {
  size_t vs = c->plan.var_size, d = c->data->d;
  const REAL *x = (const REAL *)c->data->x + i * d;
  REAL *block = malloc(vs * sizeof(REAL)), dummy[2];
  if (!block) return ntk_error(NTK_ENOMEM, "out of memory");
  struct ntk_tile t = {.r0 = i, .c0 = i, .rows = 1, .cols = 1};
  ntk_status st = pair(c, &c->ws, x, x, block, NULL, 1, 1, 0, &dummy[0], &dummy[1]) ? tile_stopped(&t, 0)
                                                                                   : judge_image(c, &t, block, i);
  free(block);
  return st;
}

/* Each image's variance blocks, from the pair (a, a): *rv for the tile's
 * row images and *cv for its column images. From the job-wide cache where
 * there is one (each image computed once per worker), else computed into
 * the tile buffers. Each block computed is judged (judge_vars); a stop
 * inside is NTK_EINTERRUPTED (an image stopped inside is not cached). */
static ntk_status self_vars(ntk_cnn_t *c, const struct ntk_tile *t, REAL **rv, REAL **cv) {
  size_t vs = c->plan.var_size, d = c->data->d;
  const REAL *x = c->data->x;
  REAL dummy[2];
  int diag = t->bi == t->bj;
  ntk_status st;
  if (c->allvar) {
    REAL *all = c->allvar;
    *rv = all + t->r0 * vs;
    *cv = all + t->c0 * vs;
    for (int side = 0; side < 2; side++) {
      size_t first = side ? t->c0 : t->r0, count = side ? t->cols : t->rows;
      for (size_t i = first; i < first + count; i++) {
        if (c->have[i]) continue;
        if (pair(c, &c->ws, x + i * d, x + i * d, all + i * vs, NULL, 1, 1, 0, &dummy[0], &dummy[1]))
          return tile_stopped(t, 0);
        if ((st = judge_image(c, t, all + i * vs, i))) return st;
        c->have[i] = 1;
      }
    }
    return NTK_OK;
  }
  *rv = c->rowvar;
  *cv = diag ? c->rowvar : c->colvar;
  for (int side = 0; side < 2 - diag; side++) {
    size_t first = side ? t->c0 : t->r0, count = side ? t->cols : t->rows;
    REAL *v = side ? *cv : *rv;
    for (size_t i = 0; i < count; i++) {
      if (pair(c, &c->ws, x + (first + i) * d, x + (first + i) * d, v + i * vs, NULL, 1, 1, 0, &dummy[0], &dummy[1]))
        return tile_stopped(t, 0);
      if ((st = judge_image(c, t, v + i * vs, first + i))) return st;
    }
  }
  return NTK_OK;
}

/* Batched: each image's variances, then every row image against the
 * column images NTK_CNN_BATCH at a time (cnn_batch_impl.h). */
static ntk_status batched_tile(ntk_cnn_t *c, const struct ntk_tile *t, REAL *g, REAL *tt) {
  const size_t B = NTK_CNN_BATCH, rows = t->rows, cols = t->cols, vs = c->plan.var_size, d = c->data->d;
  const REAL *x = c->data->x;
  int diag = t->bi == t->bj, with_t = tt != NULL;
  REAL *rv, *cv;
  uint64_t done = 0;
  ntk_status vst = self_vars(c, t, &rv, &cv);
  if (vst) return vst;
  /* Column images and variances transposed per batch; spare lanes repeat
   * the last image. A batch's variances are 2 vs elements per lane: the
   * block, then the same slots' v = q r and u = v r in place of q and r
   * (ABRELU_VU, the slices' ABRelu maps). */
  size_t nb = (cols + B - 1) / B;
  REAL *xt = grow(&c->xt, &c->xt_cap, nb * d * B * sizeof(REAL));
  REAL *vt = grow(&c->vt, &c->vt_cap, nb * 2 * vs * B * sizeof(REAL));
  if (!xt || !vt) return ntk_error(NTK_ENOMEM, "out of memory for a tile's images");
  for (size_t bt = 0; bt < nb; bt++) {
    REAL *vbt = vt + bt * 2 * vs * B, *vu = vbt + vs * B;
    for (size_t k = 0; k < B; k++) {
      size_t j = bt * B + k < cols ? bt * B + k : cols - 1;
      const REAL *xj = x + (t->c0 + j) * d, *vj = cv + j * vs;
      for (size_t q = 0; q < d; q++) xt[(bt * d + q) * B + k] = xj[q];
      for (size_t q = 0; q < vs; q++) vbt[q * B + k] = vj[q];
    }
    memset(vu, 0, vs * B * sizeof(REAL));
    for (size_t o = 0; o < c->plan.nops; o++) {
      const struct cnn_op *op = &c->plan.ops[o];
      if (op->var < 0) continue;
      size_t hw = op->ho * op->wo, at = c->plan.var_off[op->var] * B;
      for (size_t e = 0; e < hw * B; e++) {
        REAL v = vbt[at + e] * vbt[at + hw * B + e];
        vu[at + e] = v;
        vu[at + hw * B + e] = v * vbt[at + hw * B + e];
      }
    }
  }
  REAL og[NTK_CNN_BATCH], ot[NTK_CNN_BATCH];
  for (size_t i = 0; i < rows; i++) {
    size_t jend = diag ? i + 1 : cols;
    for (size_t bt = 0; bt * B < jend; bt++) {
      const REAL *xbt = xt + bt * d * B, *vbt = vt + bt * 2 * vs * B, *xa = x + (t->r0 + i) * d, *va = rv + i * vs;
      int halt = c->plan.path == NTK_CNN_DIAG ? b_pair_diag(c, &c->bws, xa, xbt, va, vbt, with_t, og, ot)
                 : c->plan.multi            ? b_pair_multi(c, &c->bws, xa, xbt, va, vbt, with_t, og, ot)
                                            : b_pair_slice(c, &c->bws, xa, xbt, va, vbt, with_t, og, ot);
      if (halt) return tile_stopped(t, done);
      b_tail(c, rv + i * vs + c->plan.tail_off, vbt + c->plan.tail_off * B, og, ot);
      uint64_t entries = 0;
      for (size_t k = 0; k < B && bt * B + k < jend; k++) {
        size_t j = bt * B + k;
        g[i * cols + j] = og[k];
        if (with_t) tt[i * cols + j] = ot[k];
        if (diag) {
          g[j * cols + i] = og[k];
          if (with_t) tt[j * cols + i] = ot[k];
        }
        entries += diag && j != i ? 2 : 1;
      }
      done += entries;
      ntk_stop_count(c->stop, entries);
    }
  }
  return NTK_OK;
}

/* Pair by pair: each image's variances, then every pair (i >= j on the diagonal). */
static ntk_status pair_tile(ntk_cnn_t *c, const struct ntk_tile *t, REAL *g, REAL *tt) {
  size_t rows = t->rows, cols = t->cols, vs = c->plan.var_size, d = c->data->d;
  int diag = t->bi == t->bj, with_t = tt != NULL;
  const REAL *x = c->data->x;
  REAL *rv, *cv;
  uint64_t done = 0;
  ntk_status vst = self_vars(c, t, &rv, &cv);
  if (vst) return vst;
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < (diag ? i + 1 : cols); j++) {
      REAL gv, tv;
      if (pair(c, &c->ws, x + (t->r0 + i) * d, x + (t->c0 + j) * d, rv + i * vs, cv + j * vs, 0, diag && i == j, with_t,
               &gv, &tv))
        return tile_stopped(t, done);
      g[i * cols + j] = gv;
      if (with_t) tt[i * cols + j] = tv;
      if (diag) {
        g[j * cols + i] = gv;
        if (with_t) tt[j * cols + i] = tv;
      }
      uint64_t entries = diag && j != i ? 2 : 1;
      done += entries;
      ntk_stop_count(c->stop, entries);
    }
  return NTK_OK;
}

#undef judge_image
#undef judge_one
#undef self_vars
#undef batched_tile
#undef pair_tile
#undef pair
#undef b_pair_diag
#undef b_pair_multi
#undef b_pair_slice
#undef b_tail
