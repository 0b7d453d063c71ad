/* The FC layers over a tile, written once for both precisions:
 * src/kernels/fc.c includes this file through each_precision.h (REAL,
 * MAP, RSQRT, MAP_ROWS; each name below becomes name_f / name_d). */

/* The per-precision names this file defines (each_precision.h), ... */
#define dense SFX(dense)
#define dense_std SFX(dense_std)
#define next_var SFX(next_var)
#define apply_layers SFX(apply_layers)
/* ... and those of branch_impl.h it calls. */
#define branch_fork SFX(branch_fork)
#define branch_next SFX(branch_next)
#define branch_join SFX(branch_join)

NTK_CLONES static void dense(REAL *restrict g, REAL *restrict t, size_t count, REAL w2, REAL b2) {
  for (size_t k = 0; k < count; k++) g[k] = w2 * g[k] + b2;
  if (t)
    for (size_t k = 0; k < count; k++) t[k] = g[k] + w2 * t[k];
}

/* Standard parameterisation: ntk' = fan_in nngp + W^2 ntk (+ 1 with a bias). */
NTK_CLONES static void dense_std(REAL *restrict g, REAL *restrict t, size_t count, REAL w2, REAL b2, REAL fan,
                                 REAL one) {
  if (t)
    for (size_t k = 0; k < count; k++) t[k] = (fan * g[k] + one) + w2 * t[k];
  for (size_t k = 0; k < count; k++) g[k] = w2 * g[k] + b2;
}

/* Variances after layer l from those before it: the same maps at q12 = q11 = q22. */
static void next_var(const struct ntk_layer *l, const REAL *q, REAL *out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    REAL td, v = q[i];
    switch (l->kind) {
    case NTK_LAYER_DENSE: v = (REAL)(l->w_std * l->w_std) * v + (REAL)(l->b_std * l->b_std); break;
    case NTK_LAYER_MAP:
    case NTK_LAYER_LAYERNORM: v = MAP(&l->map, v, v, v, RSQRT(v), RSQRT(v), &td); break;
    case NTK_LAYER_DROPOUT: v = v * (REAL)(1.0 / l->rate); break; /* a sample with itself */
    case NTK_LAYER_IDENTITY:
    case NTK_LAYER_FLATTEN:
    case NTK_LAYER_FORK:
    case NTK_LAYER_NEXT: /* ntk_fc_create does these rows (whole rows, not per sample) */
    case NTK_LAYER_JOIN: break;
    case NTK_LAYER_CONV: /* not on vectors: ntk_fc_create refuses them */
    case NTK_LAYER_AVGPOOL:
    case NTK_LAYER_GLOBALAVGPOOL:
    case NTK_LAYER_ATTENTION:
    case NTK_LAYER_RESIZE:
    case NTK_LAYER_AGGREGATE:
    case NTK_LAYER_KINDS: v = (REAL)NAN; break;
    }
    out[i] = v;
  }
}

/* Every layer of the network on a tile whose g holds the input covariance
 * (gram_tile); t, unless NULL, gets the NTK. Each layer sweeps the tile in
 * bands of rows (NTK_FC_BAND entries), the stop flag polled before each:
 * the maps are pointwise, so the bits are the whole tile's. The entries
 * are counted as done in proportion to the layers done. Returns 0, or
 * layer + 1 where a stop was seen (the tile is then garbage). */
static size_t apply_layers(const ntk_fc_t *fc, const struct ntk_tile *tl, REAL *g, REAL *t) {
  size_t n = fc->data->n, rows = tl->rows, cols = tl->cols, count = rows * cols, nl = fc->arch->n;
  const REAL *var = fc->var, *rvar = fc->rvar;
  int diag = tl->bi == tl->bj, depth = 0;
  REAL *bs = fc->bstack;
  size_t band = cols && NTK_FC_BAND / cols ? NTK_FC_BAND / cols : 1;
  if (t) memset(t, 0, count * sizeof(REAL));
  /* A diagonal tile: gram_tile filled i >= j only; the layers run on the
   * whole tile, so the rest starts at zero (valgrind saw the maps branch
   * on uninitialised values there) and is mirrored over at the end. */
  if (diag)
    for (size_t i = 0; i < rows; i++) {
      g[i * cols + i] = var[tl->r0 + i];
      if (i + 1 < cols) memset(g + i * cols + i + 1, 0, (cols - i - 1) * sizeof(REAL));
    }
  for (size_t li = 0; li < nl; li++) {
    const struct ntk_layer *l = &fc->arch->layers[li];
    int d = depth; /* the block stack's depth before this layer */
    for (size_t r0 = 0; r0 < rows; r0 += band) {
      if (ntk_stop_seen(fc->stop)) return li + 1;
      size_t nr = rows - r0 < band ? rows - r0 : band, off = r0 * cols, bn = nr * cols;
      REAL *gb = g + off, *tb = t ? t + off : NULL;
      const REAL *qr = var + li * n + tl->r0 + r0, *qc = var + li * n + tl->c0;
      const REAL *rr = rvar + li * n + tl->r0 + r0, *rc = rvar + li * n + tl->c0;
      switch (l->kind) {
      case NTK_LAYER_DENSE:
        if (fc->arch->standard)
          dense_std(gb, tb, bn, (REAL)(l->w_std * l->w_std), (REAL)(l->b_std * l->b_std), (REAL)fc->fan[li],
                    (REAL)(l->bias ? 1 : 0));
        else
          dense(gb, tb, bn, (REAL)(l->w_std * l->w_std), (REAL)(l->b_std * l->b_std));
        break;
      case NTK_LAYER_MAP:
      case NTK_LAYER_LAYERNORM: MAP_ROWS(&l->map, gb, tb, nr, cols, qr, rr, qc, rc, 0); break;
      case NTK_LAYER_IDENTITY:
      case NTK_LAYER_FLATTEN: break;
      case NTK_LAYER_DROPOUT: /* a sample with itself only, the tile's diagonal (its NNGP: the variance, below) */
        for (size_t i = r0; diag && tb && i < r0 + nr; i++) t[i * cols + i] *= (REAL)(1.0 / l->rate);
        break;
      case NTK_LAYER_FORK: branch_fork(bs + 4 * count * (size_t)d + off, count, bn, gb, tb); break;
      case NTK_LAYER_NEXT:
        branch_next(bs + 4 * count * (size_t)(d - 1) + off, count, bn, bn, fc->nexts[li] == 0, l->prod, (REAL)fc->bw[li], gb,
                    tb);
        break;
      case NTK_LAYER_JOIN:
        branch_join(bs + 4 * count * (size_t)(d - 1) + off, count, bn, l->branches, l->prod, (REAL)fc->bw[li],
                    (REAL)fc->bdiv[li], gb, tb);
        break;
      case NTK_LAYER_CONV:
      case NTK_LAYER_AVGPOOL:
      case NTK_LAYER_GLOBALAVGPOOL:
      case NTK_LAYER_ATTENTION:
      case NTK_LAYER_RESIZE:
      case NTK_LAYER_AGGREGATE:
      case NTK_LAYER_KINDS: /* refused by ntk_fc_create; NaN if one ever got here */
        for (size_t k = 0; k < bn; k++) gb[k] = (REAL)NAN;
        break;
      }
      /* A pair of a sample with itself is exactly its variance. */
      if (diag)
        for (size_t i = r0; i < r0 + nr; i++) g[i * cols + i] = var[(li + 1) * n + tl->r0 + i];
      /* Progress in proportion to the layers done: bn entries over all layers. */
      ntk_stop_count(fc->stop, (uint64_t)bn * (li + 1) / nl - (uint64_t)bn * li / nl);
    }
    if (l->kind == NTK_LAYER_FORK) depth++;
    else if (l->kind == NTK_LAYER_JOIN) depth--;
  }
  if (!nl) ntk_stop_count(fc->stop, count);
  /* Exact symmetry of diagonal tiles: the lower triangle copied over, in
   * 32 x 32 blocks (a row at a time it read a column of the tile: 4.5 % of
   * the CPU of a Fashion-MNIST FC job at tile 2048). */
  for (size_t i0 = 0; diag && i0 < rows; i0 += 32)
    for (size_t j0 = i0; j0 < cols; j0 += 32)
      for (size_t i = i0; i < i0 + 32 && i < rows; i++)
        for (size_t j = j0 > i + 1 ? j0 : i + 1; j < j0 + 32 && j < cols; j++) {
          g[i * cols + j] = g[j * cols + i];
          if (t) t[i * cols + j] = t[j * cols + i];
        }
  return 0;
}

#undef dense
#undef dense_std
#undef next_var
#undef apply_layers
#undef branch_fork
#undef branch_next
#undef branch_join
