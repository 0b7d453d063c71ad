/* Fully-connected NNGP/NTK tiles on the CPU.
 *
 * The input covariance X_r X_c^T / d of a tile is assembled from fixed
 * NTK_GRAM_BLOCK-row blocks (syrk on the diagonal blocks, gemm elsewhere),
 * so an entry's bits never depend on the tile size: OpenBLAS picks different
 * kernels and summation orders for different call shapes. The layer maps
 * then run pointwise with the per-sample variances computed once in
 * ntk_fc_create(). Built with -ffp-contract=off: vectorised loop bodies and
 * scalar tails round identically, so an entry's value never depends on its
 * position in the tile either. */
#include "kernels/fc.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/defs.h"
#include "base/fpbits.h"
#include "base/stop.h"
#include "kernels/branch.h"
#include "kernels/fc_entry.h"
#include "kernels/map_rows.h"
#include "kernels/kernel_maps.h"

struct ntk_fc {
  const struct ntk_arch *arch;
  const struct ntk_dataset *data;
  void *var;      /* (arch->n + 1) x n variances, in the data's precision */
  void *rvar;     /* their ntk_rsqrt, for the ReLU map */
  void *scratch;  /* NTK_GRAM_BLOCK^2 elements */
  double *fan;    /* standard parameterisation: each layer's input width (Dense: its fan-in) */
  void *bstack;   /* residual blocks: NTK_BRANCH_MAXDEPTH slots of 4 tile-sized arrays (branch.h) */
  size_t bstack_count; /* elements per array */
  int *nexts;     /* per NEXT/JOIN layer: how many branches of its block ended before it */
  double *bw, *bdiv; /* per NEXT/JOIN layer: its branch's FanIn weight; JOIN: the divisor (branch.h) */
  const struct ntk_stop *stop; /* polled per block of the input covariance and per band of each layer */
  size_t *twin; /* per sample, the first sample with the same input row (itself if none); NULL if rows all differ */
  size_t *dup, ndup; /* the samples with an equal row, ascending */
};

/* Entries a layer's map runs on between two polls of the stop flag: a
 * band of rows of the tile (~0.5 ms of Erf on this project's CPU). */
#define NTK_FC_BAND ((size_t)1 << 16)

/* ---- pointwise layer maps over a tile ------------------------------------ */

/* dense, dense_std, next_var and apply_layers, _f and _d. */
#define EACH_PRECISION_FILE "kernels/fc_impl.h"
#include "kernels/each_precision.h"

/* ---- input covariance in canonical blocks --------------------------------- */

/* Block (a, b), a >= b, of X X^T / d into out (leading dimension ldo). For
 * a == b only the lower triangle is written. */
static void gram_block(const ntk_fc_t *fc, size_t a, size_t b, void *out, size_t ldo) {
  const struct ntk_dataset *ds = fc->data;
  size_t B = NTK_GRAM_BLOCK, d = ds->d;
  size_t ra = a * B, rb = b * B;
  size_t ma = ds->n - ra < B ? ds->n - ra : B, mb = ds->n - rb < B ? ds->n - rb : B;
  double alpha = 1.0 / (double)d;
  if (ds->elem == 4) {
    const float *x = ds->x;
    if (a == b)
      cblas_ssyrk(CblasRowMajor, CblasLower, CblasNoTrans, (int)ma, (int)d, (float)alpha, x + ra * d,
                  (int)d, 0.0f, out, (int)ldo);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)ma, (int)mb, (int)d, (float)alpha,
                  x + ra * d, (int)d, x + rb * d, (int)d, 0.0f, out, (int)ldo);
  } else {
    const double *x = ds->x;
    if (a == b)
      cblas_dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, (int)ma, (int)d, alpha, x + ra * d, (int)d,
                  0.0, out, (int)ldo);
    else
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)ma, (int)mb, (int)d, alpha, x + ra * d,
                  (int)d, x + rb * d, (int)d, 0.0, out, (int)ldo);
  }
}

/* Fill the tile's input covariance for all entries with i >= j; 1 if a
 * stop was seen first (polled per block: one BLAS call of NTK_GRAM_BLOCK
 * rows each is not interrupted). */
static int gram_tile(ntk_fc_t *fc, const struct ntk_tile *t, void *g) {
  size_t B = NTK_GRAM_BLOCK, n = fc->data->n, es = (size_t)fc->data->elem;
  size_t r1 = t->r0 + t->rows, c1 = t->c0 + t->cols;
  for (size_t a = t->r0 / B; a * B < r1; a++) {
    for (size_t b = t->c0 / B; b * B < c1 && b <= a; b++) {
      if (ntk_stop_seen(fc->stop)) return 1;
      size_t br0 = a * B, bc0 = b * B;
      size_t br1 = br0 + B < n ? br0 + B : n, bc1 = bc0 + B < n ? bc0 + B : n;
      char *tile = g;
      if (br0 >= t->r0 && br1 <= r1 && bc0 >= t->c0 && bc1 <= c1) {
        gram_block(fc, a, b, tile + ((br0 - t->r0) * t->cols + (bc0 - t->c0)) * es, t->cols);
        continue;
      }
      /* Block straddles the tile edge: compute it whole, copy the overlap. */
      gram_block(fc, a, b, fc->scratch, bc1 - bc0);
      size_t i0 = br0 > t->r0 ? br0 : t->r0, i1 = br1 < r1 ? br1 : r1;
      size_t j0 = bc0 > t->c0 ? bc0 : t->c0, j1 = bc1 < c1 ? bc1 : c1;
      for (size_t i = i0; i < i1; i++)
        memcpy(tile + ((i - t->r0) * t->cols + (j0 - t->c0)) * es,
               (char *)fc->scratch + ((i - br0) * (bc1 - bc0) + (j0 - bc0)) * es, (j1 - j0) * es);
    }
  }
  return 0;
}

/* The first index of ascending v[0..n) at or past x (n if none). */
static size_t first_at_least(const size_t *v, size_t n, size_t x) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (v[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* A sample given twice (two equal rows of the data: a duplicate in a data
 * set, a test sample that is also a train sample) has the input covariance
 * of its variance, exactly. The product of the two rows in the block above
 * (float32 sums in sgemm) and the variance (summed in double) round apart
 * by an ulp or two, which leaves the pair an angle of ~sqrt(u) (docs/MATH.md,
 * "Collinear inputs"): through one Relu its float32 NTK came out 4e-5
 * relative low where neural-tangents' is within 1e-7. Set from the
 * variance it is the sample's pair with itself, as on the diagonal. A
 * sample and its negation (kernel_fn(x, -x)) are the same at the other
 * end, an angle of pi: their covariance is minus the variance (without a
 * bias in the first Dense, neural-tangents' default, Abs's float32 NTK was
 * 2.6e-4 off there, Sign's NNGP 1.5e-3). */
static void equal_rows_tile(const ntk_fc_t *fc, const struct ntk_tile *t, void *g) {
  if (!fc->twin) return;
  size_t es = (size_t)fc->data->elem;
  /* only the samples with an equal row: the tile's rows among them, each
   * against the tile's columns among them */
  size_t i0 = first_at_least(fc->dup, fc->ndup, t->r0), i1 = first_at_least(fc->dup, fc->ndup, t->r0 + t->rows);
  size_t j0 = first_at_least(fc->dup, fc->ndup, t->c0), j1 = first_at_least(fc->dup, fc->ndup, t->c0 + t->cols);
  for (size_t a = i0; a < i1; a++)
    for (size_t b = j0; b < j1; b++) {
      size_t gi = fc->dup[a], gj = fc->dup[b];
      if (gj >= gi) break; /* j < i: the entries gram_tile filled, less the diagonal */
      int rel = ntk_twin_relation(fc->twin[gi], fc->twin[gj]);
      if (!rel) continue;
      size_t at = (gi - t->r0) * t->cols + (gj - t->c0);
      if (es == 4) ((float *)g)[at] = rel > 0 ? ((const float *)fc->var)[gi] : -((const float *)fc->var)[gi];
      else ((double *)g)[at] = rel > 0 ? ((const double *)fc->var)[gi] : -((const double *)fc->var)[gi];
    }
}

struct row_key {
  uint64_t hash;
  size_t at;
};
static int cmp_row_key(const void *a, const void *b) {
  const struct row_key *x = a, *y = b;
  if (x->hash != y->hash) return (x->hash > y->hash) - (x->hash < y->hash);
  return (x->at > y->at) - (x->at < y->at);
}

/* A word of a row with each -0.0 in it made +0.0, for the hash: rows
 * equal as values hash alike. */
static uint64_t plus_zero_word(uint64_t w, int elem) {
  if (elem == 8) return w == 0x8000000000000000ull ? 0 : w;
  if ((uint32_t)w == 0x80000000u) w &= 0xffffffff00000000ull;
  if ((w >> 32) == 0x80000000u) w &= 0xffffffffull;
  return w;
}

/* Row a equal as values to row b times sign (+1 or -1; -0.0 is 0.0; a
 * NaN, refused when the data are read, equals nothing). */
static int rows_equal(const void *a, const void *b, size_t d, int elem, int sign) {
  if (elem == 4) {
    const float *x = a, *y = b;
    for (size_t k = 0; k < d; k++)
      if (x[k] != (sign > 0 ? y[k] : -y[k])) return 0;
  } else {
    const double *x = a, *y = b;
    for (size_t k = 0; k < d; k++)
      if (x[k] != (sign > 0 ? y[k] : -y[k])) return 0;
  }
  return 1;
}

/* The sign bits to flip in each 8-byte word of a row for its hash: all of
 * them when the row's first nonzero value is negative, so that a row and
 * its negation hash alike (a row of zeros keeps its own). */
static uint64_t sign_flip(const unsigned char *p, size_t d, int elem) {
  for (size_t k = 0; k < d; k++) {
    double v = elem == 4 ? (double)((const float *)(const void *)p)[k] : ((const double *)(const void *)p)[k];
    if (v != 0) return v > 0 ? 0 : elem == 4 ? 0x8000000080000000ull : 0x8000000000000000ull;
  }
  return 0;
}

/* ntk_fc_data_twins: each row hashed by its 8-byte words (FNV-1a, -0.0 as
 * 0.0, the sign bits flipped when its first nonzero value is negative), the
 * rows sorted by hash, and within a run of equal hashes each row compared
 * value by value with the run's earlier distinct rows, as it is and
 * negated, so that a collision never makes two samples equal. Rows equal
 * only as values (0.0 in one, -0.0 in the other) are one sample too: the
 * same vector, whose float32 product and double variance rounded apart as
 * any pair's did (the float32 NTK through two Relus 2.4e-4 off the
 * diagonal). */
ntk_status ntk_fc_data_twins(const struct ntk_dataset *ds, size_t **out) {
  *out = NULL;
  size_t n = ds->n, row = ds->d * (size_t)ds->elem;
  struct row_key *key = malloc((n ? n : 1) * sizeof *key);
  size_t *twin = malloc((n ? n : 1) * sizeof *twin);
  if (!key || !twin) {
    free(key);
    free(twin);
    return ntk_error(NTK_ENOMEM, "out of memory for the samples' row hashes");
  }
  const unsigned char *x = ds->x;
  for (size_t i = 0; i < n; i++) {
    const unsigned char *p = x + i * row;
    uint64_t v = 1469598103934665603ull, w, flip = sign_flip(p, ds->d, ds->elem);
    size_t k = 0;
    for (; k + 8 <= row; k += 8) {
      memcpy(&w, p + k, 8);
      v = (v ^ plus_zero_word(w ^ flip, ds->elem)) * 1099511628211ull;
    }
    if (k < row) { /* float32, an odd count of features: the last one */
      uint32_t u;
      memcpy(&u, p + k, 4);
      u ^= (uint32_t)flip;
      v = (v ^ (u == 0x80000000u ? 0u : u)) * 1099511628211ull;
    }
    key[i] = (struct row_key){v, i};
    twin[i] = i;
  }
  qsort(key, n, sizeof *key, cmp_row_key);
  int equal = 0;
  for (size_t s0 = 0, s1; s0 < n; s0 = s1) {
    for (s1 = s0 + 1; s1 < n && key[s1].hash == key[s0].hash; s1++) {
      size_t r = key[s1].at; /* after every earlier row of its run: key is sorted by index within a hash */
      for (size_t m = s0; m < s1; m++) {
        size_t q = key[m].at;
        if (twin[q] != q) continue;
        if (rows_equal(x + r * row, x + q * row, ds->d, ds->elem, 1)) twin[r] = q;
        else if (rows_equal(x + r * row, x + q * row, ds->d, ds->elem, -1)) twin[r] = q | NTK_TWIN_NEGATED;
        else continue;
        equal = 1;
        break;
      }
    }
  }
  free(key);
  if (equal) *out = twin;
  else free(twin);
  return NTK_OK;
}

/* fc->twin and fc->dup for equal_rows_tile (and the GPU's FC path); both
 * NULL when every row differs (such data pay nothing per tile). */
static ntk_status find_twins(ntk_fc_t *fc) {
  size_t n = fc->data->n, *twin;
  ntk_status st = ntk_fc_data_twins(fc->data, &twin);
  if (st || !twin) return st;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) m += twin[i] != i;
  size_t *dup = malloc(2 * m * sizeof *dup); /* at most m firsts and m later samples */
  unsigned char *in = calloc(n, 1);
  if (!dup || !in) {
    free(twin);
    free(dup);
    free(in);
    return ntk_error(NTK_ENOMEM, "out of memory for the samples' row hashes");
  }
  for (size_t i = 0; i < n; i++)
    if (twin[i] != i) in[i] = in[twin[i] & ~NTK_TWIN_NEGATED] = 1;
  fc->ndup = 0;
  for (size_t i = 0; i < n; i++)
    if (in[i]) dup[fc->ndup++] = i;
  free(in);
  fc->twin = twin;
  fc->dup = dup;
  return NTK_OK;
}

ntk_status ntk_fc_tile(ntk_fc_t *fc, const struct ntk_tile *t, void *nngp, void *ntk) {
  size_t count = t->rows * t->cols;
  if (fc->nexts && fc->bstack_count < count) { /* residual blocks: the stack for this tile size */
    void *p = malloc(4 * count * NTK_BRANCH_MAXDEPTH * (size_t)fc->data->elem);
    if (!p) return ntk_error(NTK_ENOMEM, "out of memory for the residual blocks' buffers");
    free(fc->bstack);
    fc->bstack = p;
    fc->bstack_count = count;
  }
  if (gram_tile(fc, t, nngp))
    return ntk_error(NTK_EINTERRUPTED, "stopped inside tile %llu, in its input covariance", (unsigned long long)t->index);
  equal_rows_tile(fc, t, nngp);
  size_t at = fc->data->elem == 4 ? apply_layers_f(fc, t, nngp, ntk) : apply_layers_d(fc, t, nngp, ntk);
  if (at)
    return ntk_error(NTK_EINTERRUPTED, "stopped inside tile %llu, at layer %zu of %zu", (unsigned long long)t->index,
                     at, fc->arch->n);
  return NTK_OK;
}

/* Whether the network computes on this data as a fully-connected one, and
 * its widths: input widths (standard parameterisation) from the data's
 * features, then each layer's width, through residual blocks; unequal
 * branch widths are refused here, where the data's width is known. With
 * fan, weight and div (arch->n entries each, or NULL), each layer's
 * fan-in and the FanIn weights. No per-sample work. */
static ntk_status fc_widths(const struct ntk_arch *arch, const struct ntk_dataset *data, double *fan, double *weight,
                            double *div) {
  if (!ntk_arch_is_fc(arch)) {
    size_t i = 0;
    while (i + 1 < arch->n && !ntk_layer_traits(arch->layers[i].kind)->spatial) i++;
    return ntk_error(NTK_ECONFIG, "arch, layer %zu (%s): Conv, AvgPool, GlobalAvgPool, GlobalSelfAttention, "
                     "ImageResize and Index need image data: (N, H, W, C) or (N, L, C) arrays (in a job file also an "
                     "(N, C, H, W) .npy, IDX images or CIFAR-10), not (N, d) vectors", i + 1, arch->layers[i].name);
  }
  if (ntk_arch_check_rank(arch, 2)) return NTK_ECONFIG; /* vectors */
  struct ntk_widths wd;
  ntk_widths_init(&wd, data->d);
  wd.weight = weight;
  wd.div = div;
  int h, w;
  for (size_t l = 0; l < arch->n; l++) {
    if (fan) fan[l] = (double)wd.chan;
    if (ntk_widths_step(&wd, &arch->layers[l], l, 0)) return NTK_ECONFIG;
    /* a vector per sample: LayerNorm's axes are the channels' */
    if (arch->layers[l].kind == NTK_LAYER_LAYERNORM && ntk_layernorm_axes(&arch->layers[l], 2, l, &h, &w))
      return NTK_ECONFIG;
  }
  return NTK_OK;
}

ntk_status ntk_fc_check(const struct ntk_arch *arch, const struct ntk_dataset *data) {
  /* float64's bound whatever the data's precision: a float32 job whose
   * scales are below float32's is computed in float64 (backend_cpu.c) */
  if (data->pattern)
    return ntk_error(NTK_ECONFIG, "the data have a pattern (a graph's edges) and the network no Aggregate layer to "
                     "read it (an Aggregate needs (N, L, C) or (N, H, W, C) data and a spatial part before its "
                     "readout)");
  ntk_status st = ntk_arch_check_scales(arch, 8);
  return st ? st : fc_widths(arch, data, NULL, NULL, NULL);
}

/* The variances entering a scale-free layer (ntk_layer_scale_free), or a
 * map taken from the angle (ntk_layer_variance_judged), per sample. One
 * below the precision's normal range has kept only a few bits, and such a
 * layer makes a wrong value of them (an O(1) one for a scale-free layer): Dense(W_std=1.3) Sign
 * Dense(W_std=1.3) in float32 on inputs scaled by 1e-21 came out 5.7e-3
 * off, in float64 at 1e-160 1.5e-3, with exit 0, and no check of the
 * output can tell. A 0 is the sample's own value only where the sample is
 * zeros or a layer before maps everything to 0 (w_std = 0); else it is a
 * variance that underflowed. NTK_ENONFINITE, as the worker's refusals of
 * an underflowed kernel (exit 8). */
static ntk_status judge_variances(const ntk_fc_t *fc) {
  const struct ntk_arch *arch = fc->arch;
  const struct ntk_dataset *ds = fc->data;
  size_t n = ds->n, es = (size_t)ds->elem;
  struct ntk_vanish zv = {0};
  for (size_t l = 0; l < arch->n; l++) {
    const struct ntk_layer *L = &arch->layers[l];
    int vanished = zv.zero;
    for (size_t i = 0; ntk_layer_variance_judged(L) && i < n; i++) {
      double v;
      int cls = ntk_fp_class((const char *)fc->var + (l * n + i) * es, ds->elem, &v);
      char who[48];
      snprintf(who, sizeof who, "sample %zu", i);
      if (cls == NTK_FP_NONFINITE) return ntk_variance_overflow(who, l, L, "", v, ds->elem);
      if (cls != NTK_FP_SUBNORMAL && (cls != NTK_FP_ZERO || vanished || !ntk_dataset_sample_nonzero(ds, i))) continue;
      char what[64];
      if (cls == NTK_FP_ZERO) snprintf(what, sizeof what, "0 (underflowed: the sample is not all zeros)");
      else snprintf(what, sizeof what, "%.3g", v);
      return ntk_variance_refusal(who, l, L, "", what, ds->elem);
    }
    ntk_vanish_step(&zv, L);
  }
  return NTK_OK;
}

/* Input variances x.x/d of rows i .. i + m - 1 (m <= NTK_FC_VAR_ROWS),
 * each summed in double in feature order, as one row alone would be, but
 * the rows' sums side by side: a sum waits on its previous add. One row
 * at a time took 25 ms of each worker's set-up on 10 000 x 3 072 float32
 * data, 8 side by side 14 ms (the pass over the data at memory speed). */
#define NTK_FC_VAR_ROWS 8
#define INPUT_VARIANCES(NAME, T)                                                                                      \
  static void NAME(const void *data, size_t d, size_t i, size_t m, void *var) {                                      \
    const T *x = (const T *)data + i * d;                                                                             \
    double s[NTK_FC_VAR_ROWS] = {0};                                                                                  \
    if (m == NTK_FC_VAR_ROWS)                                                                                         \
      for (size_t k = 0; k < d; k++)                                                                                  \
        for (size_t r = 0; r < NTK_FC_VAR_ROWS; r++) s[r] += (double)x[r * d + k] * x[r * d + k];                     \
    else                                                                                                              \
      for (size_t r = 0; r < m; r++)                                                                                  \
        for (size_t k = 0; k < d; k++) s[r] += (double)x[r * d + k] * x[r * d + k];                                   \
    for (size_t r = 0; r < m; r++) ((T *)var)[i + r] = (T)(s[r] / (double)d);                                         \
  }
INPUT_VARIANCES(input_variances_f, float)
INPUT_VARIANCES(input_variances_d, double)

ntk_status ntk_fc_create(const struct ntk_arch *arch, const struct ntk_dataset *data, const struct ntk_stop *stop,
                         ntk_fc_t **out) {
  *out = NULL;
  ntk_status st = ntk_fc_check(arch, data);
  if (st) return st;
  ntk_fc_t *fc = calloc(1, sizeof *fc);
  if (!fc) return ntk_error(NTK_ENOMEM, "out of memory");
  size_t n = data->n, es = (size_t)data->elem;
  fc->arch = arch;
  fc->data = data;
  fc->stop = stop;
  fc->var = malloc((arch->n + 1) * n * es);
  fc->rvar = malloc((arch->n + 1) * n * es);
  fc->scratch = malloc((size_t)NTK_GRAM_BLOCK * NTK_GRAM_BLOCK * es);
  fc->fan = malloc((arch->n ? arch->n : 1) * sizeof *fc->fan);
  fc->bw = calloc(arch->n ? arch->n : 1, sizeof *fc->bw);
  fc->bdiv = calloc(arch->n ? arch->n : 1, sizeof *fc->bdiv);
  if (!fc->var || !fc->rvar || !fc->scratch || !fc->fan || !fc->bw || !fc->bdiv) {
    ntk_fc_free(fc);
    return ntk_error(NTK_ENOMEM, "out of memory for per-sample variances");
  }
  if (fc_widths(arch, data, fc->fan, fc->bw, fc->bdiv)) {
    ntk_fc_free(fc);
    return NTK_ECONFIG;
  }
  ntk_status tst = find_twins(fc);
  if (tst) {
    ntk_fc_free(fc);
    return tst;
  }
  /* Input variances x.x/d, accumulated in double whatever the precision. */
  for (size_t i = 0; i < n; i += NTK_FC_VAR_ROWS) {
    if (ntk_stop_seen(stop)) {
      ntk_fc_free(fc);
      return ntk_error(NTK_EINTERRUPTED, "stopped while computing the samples' input variances");
    }
    size_t m = n - i < NTK_FC_VAR_ROWS ? n - i : NTK_FC_VAR_ROWS;
    if (es == 4) input_variances_f(data->x, data->d, i, m, fc->var);
    else input_variances_d(data->x, data->d, i, m, fc->var);
  }
  /* Residual blocks: which branch each NEXT ends; the variance rows go
   * through the same stack as the tiles (branch.h), one row per block. */
  int has_branch = 0;
  for (size_t l = 0; l < arch->n; l++) has_branch |= ntk_layer_traits(arch->layers[l].kind)->branch;
  void *vstack = NULL;
  if (has_branch) {
    fc->nexts = calloc(arch->n, sizeof *fc->nexts);
    vstack = malloc(4 * n * NTK_BRANCH_MAXDEPTH * es);
    if (!fc->nexts || !vstack) {
      free(vstack);
      ntk_fc_free(fc);
      return ntk_error(NTK_ENOMEM, "out of memory for the residual blocks' buffers");
    }
    int ended[NTK_BRANCH_MAXDEPTH], d = 0;
    for (size_t l = 0; l < arch->n; l++) {
      ntk_layer_kind k = arch->layers[l].kind;
      if (k == NTK_LAYER_FORK) ended[d++] = 0;
      else if (k == NTK_LAYER_NEXT) fc->nexts[l] = ended[d - 1]++;
      else if (k == NTK_LAYER_JOIN) fc->nexts[l] = ended[--d];
    }
  }
  for (size_t l = 0, d = 0; l < arch->n; l++) {
    if (ntk_stop_seen(stop)) { /* [Dense Erf]*100000 over many samples: seconds */
      free(vstack);
      ntk_fc_free(fc);
      return ntk_error(NTK_EINTERRUPTED, "stopped while computing the samples' variances, at layer %zu of %zu", l + 1,
                       arch->n);
    }
    const struct ntk_layer *L = &arch->layers[l];
    void *in = (char *)fc->var + l * n * es, *vout = (char *)fc->var + (l + 1) * n * es;
    memcpy(vout, in, n * es);
    if (L->kind == NTK_LAYER_FORK) {
      if (es == 4) branch_fork_f((float *)vstack + 4 * n * d, n, n, vout, NULL);
      else branch_fork_d((double *)vstack + 4 * n * d, n, n, vout, NULL);
      d++;
    } else if (L->kind == NTK_LAYER_NEXT) {
      if (es == 4)
        branch_next_f((float *)vstack + 4 * n * (d - 1), n, n, n, fc->nexts[l] == 0, L->prod, (float)fc->bw[l], vout, NULL);
      else branch_next_d((double *)vstack + 4 * n * (d - 1), n, n, n, fc->nexts[l] == 0, L->prod, fc->bw[l], vout, NULL);
    } else if (L->kind == NTK_LAYER_JOIN) {
      d--;
      if (es == 4)
        branch_join_f((float *)vstack + 4 * n * d, n, n, L->branches, L->prod, (float)fc->bw[l], (float)fc->bdiv[l], vout,
                      NULL);
      else branch_join_d((double *)vstack + 4 * n * d, n, n, L->branches, L->prod, fc->bw[l], fc->bdiv[l], vout, NULL);
    } else if (es == 4) {
      next_var_f(L, in, vout, n);
    } else {
      next_var_d(L, in, vout, n);
    }
  }
  free(vstack);
  if ((st = judge_variances(fc))) {
    ntk_fc_free(fc);
    return st;
  }
  for (size_t k = 0; k < (arch->n + 1) * n; k++) {
    if (es == 4) ((float *)fc->rvar)[k] = ntk_rsqrtf(((const float *)fc->var)[k]);
    else ((double *)fc->rvar)[k] = ntk_rsqrt(((const double *)fc->var)[k]);
  }
  *out = fc;
  return NTK_OK;
}

void ntk_fc_free(ntk_fc_t *fc) {
  if (!fc) return;
  free(fc->var);
  free(fc->rvar);
  free(fc->twin);
  free(fc->dup);
  free(fc->scratch);
  free(fc->fan);
  free(fc->bstack);
  free(fc->nexts);
  free(fc->bw);
  free(fc->bdiv);
  free(fc);
}

ntk_status ntk_fc_entry_layers(const ntk_fc_t *fc, struct ntk_fc_entry_layer *out, size_t nl) {
  const struct ntk_arch *arch = fc->arch;
  int ended[NTK_FC_ENTRY_MAXDEPTH], depth = 0;
  if (nl != arch->n) return ntk_error(NTK_EINTERNAL, "ntk_fc_entry_layers: %zu layers, not %zu", nl, arch->n);
  for (size_t l = 0; l < arch->n; l++) {
    const struct ntk_layer *L = &arch->layers[l];
    struct ntk_fc_entry_layer *y = &out[l];
    memset(y, 0, sizeof *y);
    y->kind = (int)L->kind;
    y->w2 = L->w_std * L->w_std;
    y->b2 = L->b_std * L->b_std;
    y->standard = arch->standard && L->kind == NTK_LAYER_DENSE;
    y->fan = fc->fan[l];
    y->one = L->bias ? 1 : 0;
    y->fanw = fc->bw[l];
    y->fandiv = fc->bdiv[l];
    y->branches = L->branches;
    y->prod = L->prod;
    y->map = L->map;
    y->drop = L->kind == NTK_LAYER_DROPOUT ? 1.0 / L->rate : 1.0;
    if (L->kind == NTK_LAYER_FORK) {
      if (depth == NTK_FC_ENTRY_MAXDEPTH)
        return ntk_error(NTK_ECONFIG, "arch, layer %zu: residual blocks nested deeper than %d", l + 1,
                         NTK_FC_ENTRY_MAXDEPTH);
      ended[depth++] = 0;
    } else if (L->kind == NTK_LAYER_NEXT) {
      y->first = ended[depth - 1]++ == 0;
    } else if (L->kind == NTK_LAYER_JOIN) {
      depth--;
    } else if (ntk_layer_traits(L->kind)->spatial) {
      return ntk_error(NTK_ECONFIG, "arch, layer %zu (%s): not a fully-connected layer", l + 1, L->name);
    }
  }
  return NTK_OK;
}

double ntk_fc_variance(const ntk_fc_t *fc, size_t l, size_t i) {
  size_t k = l * fc->data->n + i;
  return fc->data->elem == 4 ? ((const float *)fc->var)[k] : ((const double *)fc->var)[k];
}

const size_t *ntk_fc_twins(const ntk_fc_t *fc) { return fc->twin; }

const void *ntk_fc_variances(const ntk_fc_t *fc) { return fc->var; }
