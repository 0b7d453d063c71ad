/* Convolutional NNGP/NTK tiles on the CPU.
 *
 * The architecture is compiled into a plan: spatial operations (with the
 * layer sizes and paddings they see), a readout (Flatten or GlobalAvgPool)
 * and a fully-connected tail on scalars. Three ways to run the spatial part
 * (docs/MATH.md):
 *   DIAG    Flatten without pooling: only same-position entries, O(HW) per pair.
 *   SLICE   runs of convolutions (any stride, not CIRCULAR), pointwise layers
 *           and residual blocks of them are done one diagonal slice
 *           (offset) at a time, all layers of the run while the slice sits
 *           in L1 (a stride-s convolution takes offset s*d to d: plan_chain;
 *           the batched kernels and the GPU take stride-1 SAME runs only);
 *           other layers (pooling, CIRCULAR) work on the full covariance
 *           between runs. Before a Flatten readout only the band of offsets
 *           it needs is computed (cnn_op.bh, bw), before strided
 *           convolutions only its multiples of the strides (cnn_op.mh, mw).
 *   GENERAL every layer on the full (HW)^2 covariance: the reference the
 *           fast paths are tested against.
 * Each image's own variances per layer come from running the pair (a, a),
 * once per tile for the tile's images: memory is bounded by the tile. */
#include "kernels/cnn.h"

#include <cblas.h>
#include <float.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpuinit.h"
#include "base/fpbits.h"
#include "base/stop.h"
#include "kernels/branch.h"
#include "kernels/cnn_dev.h"
#include "kernels/map_rows.h"
#include "kernels/kernel_maps.h"

struct cnn_op {
  const struct ntk_layer *layer;
  size_t hi, wi, ho, wo; /* input and output sizes */
  size_t lo_h, lo_w;     /* padding before (Conv SAME/CIRCULAR) */
  int circular;
  int var;               /* nonlinearity: its variance slot, else -1 */
  int slice_local;       /* stride-1 SAME conv, Dense, nonlinearity, Identity */
  size_t bh, bw;         /* SLICE: the largest row and column offsets of this op's input that the readout needs */
  size_t vbh, vbw;       /* the same for the per-position variances alone (a self run that only captures them) */
  size_t mh, mw;         /* SLICE: the offsets of this op's input that anything after it reads are multiples of
                            these (the product of the strides of the convolutions up to the next pooling) */
  size_t obh, obw, omh, omw; /* a Conv on the full covariance: the band and lattice of its output that are read */
  int chain;             /* SLICE, the pair path: a slice run carries it (plan_chain) */
  int even;              /* FORK: every branch's strides multiply to the same (plan_bands) */
  double fan;            /* standard parameterisation: Conv's fan-in (channels x f^2), Dense's (channels) */
  size_t fh, fw, sh, sw; /* Conv filter or pooling window, and strides, per dimension */
  int depth;             /* FORK, NEXT, JOIN: the block's stack slot (branch.h) */
  int first;             /* NEXT: it ends the block's first branch */
  double fanw, fandiv;   /* NEXT, JOIN: the FanIn weight of the branch it ends; JOIN: the divisor (branch.h) */
  int cat;               /* NEXT, JOIN of a FanInConcat along a spatial axis: 1 the rows, 2 the columns
                            (ntk_concat_axis): the branch ending here is placed at offset cat_off along
                            it in the block's output, cat_h x cat_w, block-diagonally */
  size_t cat_off, cat_h, cat_w;
  size_t th, tw, fold_h, fold_w; /* ConvTranspose: its extent before CIRCULAR's fold (else the output's), and
                                    the fold's shift (plan_transpose_axis) */
  int ln_h, ln_w;        /* LayerNorm over the rows, the columns too: its slot holds the variances' means
                            over them (ntk_layernorm_axes) */
  double *rh, *rw;       /* ImageResize, Index: its weights, ho x hi and wo x wi (plan_resize_axis) */
  size_t *bandh, *bandw; /* their nonzero columns per row: [2 o] the first, [2 o + 1] one past the last */
};

struct cnn_plan {
  size_t H, W, C;
  int rank;            /* the data's axes as stax counts them: 3 for (N, L, C) sequences, else 4 */
  struct cnn_op *ops;
  size_t nops;
  ntk_layer_kind readout;
  int readout_sum;     /* GlobalSumPool: the readout sums instead of averaging */
  const struct ntk_layer *tail;
  size_t ntail;
  int standard;        /* parameterization = standard: the NTK's affine maps take the fan-ins */
  double *tail_fan;    /* standard: the tail layers' fan-ins */
  double *tail_fanw;   /* the tail's FanIn weights and divisors (as cnn_op's fanw, fandiv), 2 per layer */
  size_t *var_off; /* per slot: offset in an image's variance block */
  size_t nvar, tail_off, var_size;
  size_t out_h, out_w; /* spatial size at the readout */
  size_t pad;          /* slice border: the largest slice-local filter - 1 */
  size_t fmax;         /* elements of one covariance buffer */
  ntk_cnn_path path;
  int batched;         /* DIAG, or SLICE with one run from the input to GAP, or `multi` */
  int multi;           /* batched SLICE: runs of slice-local layers joined by pooling, into GAP (Myrtle) */
  size_t multi_part, multi_full; /* its buffers' elements per lane: pooling partial sums, a run's input */
  int branch_depth;    /* residual blocks: the deepest nesting (0: none) */
  int self_vars_only;  /* a self run need not compute its own entry */
  int cat;             /* a FanInConcat along a spatial axis: the GENERAL path only */
  int local;           /* a ConvLocal: DIAG or GENERAL (plan_path) */
  int transpose;       /* a ConvTranspose: GENERAL (plan_path) */
  int attention;       /* a GlobalSelfAttention: GENERAL (plan_path) */
  int resize;          /* an ImageResize: GENERAL (plan_path) */
  size_t aggregate;    /* an Aggregate: GENERAL (plan_path); the positions its pattern pairs (every Aggregate's) */
  size_t resize_cells; /* the largest covariance an ImageResize passes through between its axes */
  size_t big_h, big_w; /* the largest image a layer reads or writes (plan_path) */
};

/* Per-image variances are kept for the whole job (computed once per
 * worker) when all of them fit in this many bytes, and recomputed for each
 * tile's images otherwise, so that a worker's memory never grows with N
 * beyond this bound. */
#define NTK_CNN_VAR_CACHE ((size_t)256 << 20)

/* The most bytes the batched Myrtle-style path (plan_build's `multi`)
 * holds for pooling partial sums and the next run's input, per worker: 40
 * MB for 32 x 32 images in float32; beyond it the pair path. */
#define NTK_CNN_MULTI_MAX ((size_t)256 << 20)

/* Images b per batch (lanes): 16 floats fill one AVX-512 register. */
#define NTK_CNN_BATCH 16

struct cnn_bws {
  void *g, *t, *g2, *t2; /* [cell][lane] */
  void *rows;             /* the filters' row sums: two such arrays, rows_cap elements apart */
  size_t rows_cap;
  void *stack;                  /* residual blocks: 4 such arrays per depth (branch.h) */
  void *pg, *pt, *fg, *ft;      /* multi: pooling partial sums and the next run's input covariance */
};

/* An edge of an Aggregate's pattern, from position `from` to `to`. */
struct cnn_edge {
  uint32_t from, to;
  double w;
};

struct cnn_ws {
  void *a, *b, *c, *d, *e;             /* covariance buffers, fmax elements */
  struct cnn_edge *edges;              /* an Aggregate's two patterns' edges where sparse, n^2 / 8 each */
  void *sg, *st, *sg2, *st2, *srows;   /* slice buffers */
  void *stack;                         /* residual blocks: 4 fmax-element arrays per depth (branch.h) */
  void *sstack;                        /* the same for slice buffers: 4 slice-sized arrays per depth */
};

struct ntk_cnn {
  const struct ntk_arch *arch;
  const struct ntk_dataset *data;
  struct ntk_cnn_judged *judged; /* the variance slots judged as each image's block is computed */
  size_t njudged;
  const struct ntk_stop *stop; /* polled per layer, per row of a full covariance, per image pair (cnn_impl.h) */
  struct cnn_plan plan;
  struct cnn_ws ws;
  void *rowvar, *colvar; /* variance blocks of a tile's row and column images */
  size_t var_cap;        /* images each can hold */
  void *allvar;          /* every image's block, when they fit in NTK_CNN_VAR_CACHE */
  unsigned char *have;   /* allvar[i] computed */
  struct cnn_bws bws;
  void *xt, *vt;         /* a tile's column images and variances, [batch][index][lane] */
  size_t xt_cap, vt_cap; /* bytes */
};

/* GlobalSelfAttention's limit, as neural-tangents takes it (docs/MATH.md,
 * "Convolutional networks"): the embeddings' one-hot covariance enters as
 * kw C + pw I (SUM: kw 1, pw W_pos_emb_std^2; CONCAT, as many channels as
 * the input: both halved). Both precisions' attention passes use it. */
static void attention_mix(const struct ntk_attention *a, double *kw, double *pw) {
  *kw = 1.0;
  *pw = a->pos == NTK_POS_NONE ? 0.0 : a->pos_std * a->pos_std;
  if (a->pos == NTK_POS_CONCAT) {
    *kw = 0.5;
    *pw *= 0.5;
  }
}

#define EACH_PRECISION_FILE "kernels/cnn_impl.h"
#include "kernels/each_precision.h"
#define EACH_PRECISION_FILE "kernels/cnn_batch_impl.h"
#include "kernels/each_precision.h"

int ntk_cnn_applies(const struct ntk_arch *arch, const struct ntk_dataset *data) {
  if (data->h == 0) return 0;
  for (size_t i = 0; i < arch->n; i++) {
    const struct ntk_layer_traits *t = ntk_layer_traits(arch->layers[i].kind);
    if (t->spatial) return 1;
    if (t->readout) return i > 0; /* Flatten */
  }
  return 0;
}

/* plan_build's walk over the spatial layers: the size at the current
 * layer's input and, per residual block open around it, its input's size,
 * where its branches ended and how many did. */
struct plan_walk {
  size_t h, w;
  int has_pool; /* an AvgPool so far */
  int depth;    /* blocks open */
  int ended[NTK_BRANCH_MAXDEPTH];
  size_t fork_h[NTK_BRANCH_MAXDEPTH], fork_w[NTK_BRANCH_MAXDEPTH], end_h[NTK_BRANCH_MAXDEPTH],
      end_w[NTK_BRANCH_MAXDEPTH];
  size_t cat_len[NTK_BRANCH_MAXDEPTH]; /* a spatial FanInConcat: the branches' length along its axis so far */
};

/* The longest side a ConvTranspose may grow an image to: its covariance
 * buffers, (h w)^2 entries, stay far from overflowing a size_t (and far
 * beyond any memory). */
#define NTK_CNN_MAX_SIDE 4096

/* One axis of a ConvTranspose, as jax.lax.conv_transpose (stax's) sizes
 * it: the n inputs spread s apart, `lo` zeros before them and the rest
 * of its padding after, then a stride-1 filter of f. VALID: n*s +
 * max(f - s, 0) outputs, SAME: n*s. CIRCULAR computes VALID's `ext`
 * positions and folds them onto n*s: position u adds into (u - shift)
 * modulo n*s, shift half the excess (stax's
 * _same_pad_for_filter_shape_transpose). */
static void plan_transpose_axis(size_t n, size_t f, size_t s, ntk_padding padding, size_t *lo, size_t *ext,
                                size_t *out, size_t *shift) {
  size_t len;
  if (padding == NTK_PAD_SAME) {
    len = f + s - 2;
    *lo = s > f - 1 ? f - 1 : (len + 1) / 2;
  } else { /* VALID, and CIRCULAR before its fold */
    len = f + s - 2 + (f > s ? f - s : 0);
    *lo = f - 1;
  }
  *ext = (n - 1) * s + 1 + len - (f - 1);
  *out = padding == NTK_PAD_CIRCULAR ? n * s : *ext;
  *shift = (*ext - *out) / 2;
}

/* A convolution or pooling layer (layer i): its window and strides, its
 * output size and padding, and whether a slice run takes it (a stride-1
 * SAME convolution, whose filter then widens the slices' border). */
static ntk_status plan_window(struct cnn_plan *P, struct cnn_op *op, const struct ntk_layer *l, size_t i,
                              struct plan_walk *W) {
  size_t h = W->h, w = W->w;
  /* filter or window fh x fw, strides sh, sw (rectangular, or (f, 1) on 1-D data) */
  int conv = l->kind == NTK_LAYER_CONV;
  size_t fh = (size_t)(conv ? l->filter : l->window), fw = (size_t)(conv ? l->filter_w : l->window_w);
  size_t sh = (size_t)l->stride, sw = (size_t)l->stride_w;
  op->fh = fh;
  op->fw = fw;
  op->sh = sh;
  op->sw = sw;
  if (l->one_d && w != 1)
    return ntk_error(NTK_ECONFIG, "arch, layer %zu: %s with a 1-D size on %zu x %zu images; 1-D layers take "
                     "(N, L, C) data ([data] layout = NLC)", i + 1, l->name, h, w);
  /* (a 2-D layer on (N, L, C) data: refused by ntk_arch_check_rank) */
  if (conv && l->transpose) {
    plan_transpose_axis(h, fh, sh, l->padding, &op->lo_h, &op->th, &op->ho, &op->fold_h);
    plan_transpose_axis(w, fw, sw, l->padding, &op->lo_w, &op->tw, &op->wo, &op->fold_w);
    /* (the extent before CIRCULAR's fold too: convt_full sweeps it) */
    if (op->th > NTK_CNN_MAX_SIDE || op->tw > NTK_CNN_MAX_SIDE) {
      if (P->rank == 3)
        return ntk_error(NTK_ECONFIG, "arch, layer %zu: %s makes sequences of %zu positions %zu long%s, more than %d",
                         i + 1, l->name, h, op->th, op->th > op->ho ? " before its CIRCULAR fold" : "",
                         NTK_CNN_MAX_SIDE);
      return ntk_error(NTK_ECONFIG, "arch, layer %zu: %s makes %zu x %zu images %zu x %zu%s, more than %d positions a "
                       "side", i + 1, l->name, h, w, op->th, op->tw,
                       op->th > op->ho || op->tw > op->wo ? " before its CIRCULAR fold" : "", NTK_CNN_MAX_SIDE);
    }
    P->transpose = 1;
    return NTK_OK;
  }
  if (l->padding == NTK_PAD_VALID) {
    if (h < fh || w < fw)
      return ntk_error(NTK_ECONFIG, "arch, layer %zu: %s(%zu x %zu) VALID on a %zu x %zu input", i + 1, l->name,
                       fh, fw, h, w);
    op->ho = (h - fh) / sh + 1;
    op->wo = (w - fw) / sw + 1;
  } else { /* SAME, CIRCULAR: ceil(h / s) outputs, the padding split low-first */
    op->ho = (h + sh - 1) / sh;
    op->wo = (w + sw - 1) / sw;
    size_t th = (op->ho - 1) * sh + fh > h ? (op->ho - 1) * sh + fh - h : 0;
    size_t tw = (op->wo - 1) * sw + fw > w ? (op->wo - 1) * sw + fw - w : 0;
    op->lo_h = th / 2;
    op->lo_w = tw / 2;
    op->circular = l->padding == NTK_PAD_CIRCULAR;
  }
  if (conv) {
    op->slice_local = sh == 1 && sw == 1 && l->padding == NTK_PAD_SAME && !l->local;
    P->local |= l->local;
    if (op->slice_local && fh - 1 > P->pad) P->pad = fh - 1;
    if (op->slice_local && fw - 1 > P->pad) P->pad = fw - 1;
  } else {
    W->has_pool = 1;
  }
  return NTK_OK;
}

/* A residual block's FORK, NEXT or JOIN (layer i): its stack slot, and
 * the size the next layer sees (after a NEXT the block's input again).
 * Every branch starts from the block's input and must end at the same
 * size (stax's FanInSum needs equal shapes). */
static ntk_status plan_branch(struct cnn_plan *P, struct cnn_op *op, const struct ntk_layer *l, size_t i,
                              struct plan_walk *W) {
  if (l->kind == NTK_LAYER_FORK) {
    if (W->depth == NTK_BRANCH_MAXDEPTH)
      return ntk_error(NTK_ECONFIG, "arch, layer %zu: residual blocks nested deeper than %d", i + 1,
                       NTK_BRANCH_MAXDEPTH);
    op->depth = W->depth;
    W->fork_h[W->depth] = W->h;
    W->fork_w[W->depth] = W->w;
    W->ended[W->depth] = 0;
    W->depth++;
    if (W->depth > P->branch_depth) P->branch_depth = W->depth;
  } else {
    int d = W->depth - 1;
    op->depth = d;
    int cat = l->sum || l->prod ? 0 : ntk_concat_axis(l, P->rank, i);
    if (cat < 0) return NTK_ECONFIG;
    op->cat = cat;
    if (cat) {
      /* stax's FanInConcat along a spatial axis: the other axes equal,
       * the branches' lengths along it add up */
      size_t other = cat == 1 ? W->w : W->h, len = cat == 1 ? W->h : W->w;
      if (W->ended[d] && other != (cat == 1 ? W->end_w[d] : W->end_h[d]))
        return ntk_error(NTK_ECONFIG,
                         "arch, layer %zu (FanInConcat(axis=%d)): the branches end at %zu x %zu and %zu x %zu; "
                         "stax concatenates along one axis only, the other must be equal",
                         i + 1, l->axis, W->end_h[d], W->end_w[d], W->h, W->w);
      if (!W->ended[d]) W->cat_len[d] = 0;
      op->cat_off = W->cat_len[d];
      W->cat_len[d] += len;
      P->cat = 1;
    } else if (W->ended[d] && (W->h != W->end_h[d] || W->w != W->end_w[d])) {
      return ntk_error(NTK_ECONFIG,
                       "arch, layer %zu (%s): the branches of a residual block end at different sizes "
                       "(%zu x %zu and %zu x %zu); stax's FanIn needs equal shapes",
                       i + 1, l->name, W->end_h[d], W->end_w[d], W->h, W->w);
    }
    W->end_h[d] = W->h;
    W->end_w[d] = W->w;
    op->first = W->ended[d]++ == 0;
    if (l->kind == NTK_LAYER_NEXT) {
      W->h = W->fork_h[d];
      W->w = W->fork_w[d];
    } else {
      W->depth--;
      if (cat) {
        /* the block's output; its NEXTs place their branches in it */
        if (cat == 1) W->h = W->cat_len[d];
        else W->w = W->cat_len[d];
        for (struct cnn_op *q = op; q >= P->ops; q--) {
          if (q->depth == d && q->layer->kind == NTK_LAYER_FORK) break;
          if (q->depth == d && ntk_layer_traits(q->layer->kind)->branch) {
            q->cat_h = W->h;
            q->cat_w = W->w;
          }
        }
      }
    }
  }
  op->ho = W->h;
  op->wo = W->w;
  return NTK_OK;
}

/* A pointwise layer (Dense, a nonlinearity, Identity): slice-local, the
 * same size out; a nonlinearity gets a slot in the variance block: its
 * h*w variances, then their ntk_rsqrt. */
static ntk_status plan_pointwise(struct cnn_plan *P, struct cnn_op *op, const struct ntk_layer *l, size_t i,
                                 const struct plan_walk *W) {
  op->ho = W->h;
  op->wo = W->w;
  op->slice_local = 1;
  if (ntk_layer_traits(l->kind)->var_slot) {
    op->var = (int)P->nvar;
    P->var_off[P->nvar++] = P->var_size;
    P->var_size += 2 * W->h * W->w;
  }
  if (l->kind == NTK_LAYER_LAYERNORM && ntk_layernorm_axes(l, P->rank, i, &op->ln_h, &op->ln_w)) return NTK_ECONFIG;
  return NTK_OK;
}

/* A GlobalSelfAttention: the same size out; with linear_scaling a slot in
 * the variance block for the image's attention weights, (h w)^2 of them
 * (the GENERAL path's self run writes them, cnn_impl.h's attention_full). */
static void plan_attention(struct cnn_plan *P, struct cnn_op *op, const struct ntk_layer *l,
                           const struct plan_walk *W) {
  op->ho = W->h;
  op->wo = W->w;
  if (l->attn.linear) {
    op->var = (int)P->nvar;
    P->var_off[P->nvar++] = P->var_size;
    P->var_size += W->h * W->w * W->h * W->w;
  }
  P->attention = 1;
}

/* An Aggregate: the same size out, each image's positions mapped by its
 * own pattern (cnn_impl.h's aggregate_full); every Aggregate of a network
 * reads the one pattern a sample has (neural-tangents' kernel_fn takes one
 * pattern pair for all), so all of them must see as many positions. */
static ntk_status plan_aggregate(struct cnn_plan *P, struct cnn_op *op, const struct ntk_layer *l, size_t i,
                                 const struct plan_walk *W) {
  if (ntk_aggregate_axes(l, P->rank, i)) return NTK_ECONFIG;
  op->ho = W->h;
  op->wo = W->w;
  size_t n = W->h * W->w;
  if (P->aggregate && P->aggregate != n)
    return ntk_error(NTK_ECONFIG, "arch, layer %zu (Aggregate): it aggregates %zu positions, an Aggregate before it "
                     "%zu: every Aggregate reads the same pattern, so they must see images of one size", i + 1, n,
                     P->aggregate);
  P->aggregate = n;
  return NTK_OK;
}

/* One axis of an ImageResize, n inputs to m outputs, as jax.image.resize
 * (stax's) resamples it: w (m x n) row o the weights of output o. An axis
 * of the same size is kept (jax skips it). 'nearest': input floor((o +
 * 1/2) n / m), in float32 as jax's compiled code computes it, (o + 1/2)
 * (n (1/m)): where the exact value is an integer that product can fall one
 * float step below it and take the input before (10 -> 25: 5 of the 25
 * outputs; the plain quotient took them from the next input and the kernel
 * came out 11 % off with exit 0, a hunt). 'linear': a triangle
 * filter centred at (o + 1/2) n / m - 1/2, as wide as the step n / m when
 * downsampling with antialias (else 1), its weights normalised to sum 1
 * (0 where the sum is below 1000 float32 epsilons, or the centre outside
 * the input). */
static void plan_resize_axis(size_t n, size_t m, int nearest, int antialias, double *w) {
  memset(w, 0, m * n * sizeof *w);
  for (size_t o = 0; o < m; o++) {
    double *row = w + o * n;
    if (n == m) {
      row[o] = 1;
    } else if (nearest) {
      float at = ((float)o + 0.5f) * ((float)n * (1.0f / (float)m));
      size_t k = (size_t)floorf(at);
      row[k < n ? k : n - 1] = 1;
    } else {
      double inv = 1.0 / ((double)m / (double)n), width = antialias && inv > 1 ? inv : 1.0;
      double centre = ((double)o + 0.5) * inv - 0.0 * inv - 0.5, total = 0;
      for (size_t k = 0; k < n; k++) {
        double x = fabs(centre - (double)k) / width;
        row[k] = fmax(0.0, 1.0 - x);
        total += row[k];
      }
      int inside = centre >= -0.5 && centre <= (double)n - 0.5;
      for (size_t k = 0; k < n; k++)
        row[k] = inside && fabs(total) > 1000.0 * FLT_EPSILON ? row[k] / total : 0.0;
    }
  }
}

/* An Index's selection along spatial axis `axis` (ntk_index_axis) of n
 * positions: its count into *m, a weight of 1 per kept position into *w. */
static ntk_status plan_index_axis(const struct cnn_plan *P, const struct ntk_layer *l, size_t i, int axis, size_t n,
                                  size_t *m, double **w) {
  size_t *keep = malloc(n * sizeof *keep);
  if (!keep) return ntk_error(NTK_ENOMEM, "out of memory");
  if (ntk_index_axis(l, P->rank, i, axis, n, keep, m)) {
    free(keep);
    return NTK_ECONFIG;
  }
  *w = calloc(*m * n, sizeof **w);
  if (*w)
    for (size_t o = 0; o < *m; o++) (*w)[o * n + keep[o]] = 1;
  free(keep);
  return *w ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory");
}

/* An ImageResize (layer i): its output size from the shape (one entry per
 * axis of the data, stax's: its length the data's rank), and its weights;
 * an Index (the same kind): its selection of positions, weights of 1. */
static ntk_status plan_resize(struct cnn_plan *P, struct cnn_op *op, const struct ntk_layer *l, size_t i,
                              const struct plan_walk *W) {
  if (l->index) { /* a selection of positions per axis */
    ntk_status st = plan_index_axis(P, l, i, 1, W->h, &op->ho, &op->rh);
    if (!st && P->rank == 4) st = plan_index_axis(P, l, i, 2, W->w, &op->wo, &op->rw);
    if (!st && P->rank == 3) st = plan_index_axis(P, l, i, 3, W->w, &op->wo, &op->rw); /* (the width of 1 kept) */
    if (st) return st;
  } else { /* jax.image.resize's weights per axis */
    if (l->resize_len != P->rank)
      return ntk_error(NTK_ECONFIG, "arch, layer %zu (ImageResize): its shape has %d entries, and the data %d axes "
                       "(%s): one entry per axis, -1 where it keeps its size", i + 1, l->resize_len, P->rank,
                       P->rank == 3 ? "N, L, C" : "N, H, W, C");
    op->ho = l->resize[1] == -1 ? W->h : (size_t)l->resize[1];
    op->wo = P->rank == 3 || l->resize[2] == -1 ? W->w : (size_t)l->resize[2];
    op->rh = malloc(op->ho * W->h * sizeof *op->rh);
    op->rw = malloc(op->wo * W->w * sizeof *op->rw);
    if (!op->rh || !op->rw) return ntk_error(NTK_ENOMEM, "out of memory");
    plan_resize_axis(W->h, op->ho, l->nearest, l->antialias, op->rh);
    plan_resize_axis(W->w, op->wo, l->nearest, l->antialias, op->rw);
  }
  /* the band of each row's nonzero weights, which resample_axis sums */
  size_t *band[2] = {NULL, NULL}, rows[2] = {op->ho, op->wo}, cols[2] = {W->h, W->w};
  const double *wt[2] = {op->rh, op->rw};
  for (int a = 0; a < 2; a++) {
    if (!(band[a] = malloc(2 * rows[a] * sizeof *band[a]))) {
      free(band[0]);
      return ntk_error(NTK_ENOMEM, "out of memory");
    }
    for (size_t o = 0; o < rows[a]; o++) {
      size_t lo = 0, hi = cols[a];
      while (lo < hi && wt[a][o * cols[a] + lo] == 0) lo++;
      while (hi > lo && wt[a][o * cols[a] + hi - 1] == 0) hi--;
      band[a][2 * o] = lo;
      band[a][2 * o + 1] = hi;
    }
  }
  op->bandh = band[0];
  op->bandw = band[1];
  /* between its passes (cnn_impl.h's resize_full: the rows of both images, then the columns) */
  double h = (double)W->h, w = (double)W->w, ho = (double)op->ho, wo = (double)op->wo;
  double cells[3] = {ho * w * h * w, ho * w * ho * w, ho * wo * ho * w}; /* (plan_path refuses past 1e18) */
  for (int k = 0; k < 3; k++)
    if (cells[k] > (double)P->resize_cells) P->resize_cells = cells[k] < 1e19 ? (size_t)cells[k] : (size_t)1e19;
  P->resize = 1;
  return NTK_OK;
}

/* One op per spatial layer, with the sizes it sees, up to the readout
 * (layer *readout; its input is out_h x out_w). */
static ntk_status plan_spatial(struct cnn_plan *P, const struct ntk_arch *arch, size_t *readout, int *has_pool) {
  struct plan_walk W = {.h = P->H, .w = P->W};
  size_t i = 0;
  for (; i < arch->n; i++) {
    const struct ntk_layer *l = &arch->layers[i];
    if (ntk_layer_traits(l->kind)->readout) break;
    struct cnn_op *op = &P->ops[P->nops++];
    op->layer = l;
    op->hi = W.h;
    op->wi = W.w;
    op->var = -1;
    ntk_status st = NTK_OK;
    if (l->kind == NTK_LAYER_CONV || l->kind == NTK_LAYER_AVGPOOL) st = plan_window(P, op, l, i, &W);
    else if (ntk_layer_traits(l->kind)->branch) st = plan_branch(P, op, l, i, &W);
    else if (l->kind == NTK_LAYER_ATTENTION) plan_attention(P, op, l, &W);
    else if (l->kind == NTK_LAYER_RESIZE) st = plan_resize(P, op, l, i, &W);
    else if (l->kind == NTK_LAYER_AGGREGATE) st = plan_aggregate(P, op, l, i, &W);
    else st = plan_pointwise(P, op, l, i, &W);
    if (st) return st;
    W.h = op->ho;
    W.w = op->wo;
  }
  if (i == arch->n)
    return ntk_error(NTK_ECONFIG, "arch: a convolutional network must end its spatial part with Flatten or "
                     "GlobalAvgPool (before any Dense readout)");
  P->out_h = W.h;
  P->out_w = W.w;
  *readout = i;
  *has_pool = W.has_pool;
  return NTK_OK;
}

/* The readout (layer i) and the fully-connected tail after it, which has
 * no second readout; the tail's variances go after the spatial ones. */
static ntk_status plan_readout(struct cnn_plan *P, const struct ntk_arch *arch, size_t i) {
  P->readout = arch->layers[i].kind;
  P->readout_sum = arch->layers[i].sum;
  P->tail = &arch->layers[i + 1];
  P->ntail = arch->n - i - 1;
  int h, w;
  for (size_t k = 0; k < P->ntail; k++) {
    if (ntk_layer_traits(P->tail[k].kind)->readout)
      return ntk_error(NTK_ECONFIG, "arch, layer %zu: a second readout", i + 2 + k);
    if (P->tail[k].kind == NTK_LAYER_LAYERNORM && ntk_layernorm_axes(&P->tail[k], 2, i + 1 + k, &h, &w))
      return NTK_ECONFIG; /* vectors after the readout */
    if (P->tail[k].kind == NTK_LAYER_JOIN && ntk_concat_axis(&P->tail[k], 2, i + 1 + k) < 0) return NTK_ECONFIG;
  }
  P->tail_off = P->var_size;
  P->var_size += P->ntail ? P->ntail : 1;
  return NTK_OK;
}

/* Fan-ins under standard parameterisation: the data's channels, then
 * each layer's width; Flatten (layer i) multiplies by the positions it
 * flattens. With them the FanIn weights and divisors (branch.h), per op
 * and per tail layer. */
static ntk_status plan_fans(struct cnn_plan *P, const struct ntk_arch *arch, size_t i) {
  P->standard = arch->standard;
  P->tail_fan = calloc(P->ntail ? P->ntail : 1, sizeof *P->tail_fan);
  P->tail_fanw = calloc(2 * (P->ntail ? P->ntail : 1), sizeof *P->tail_fanw);
  double *fanw = calloc(2 * arch->n, sizeof *fanw); /* per layer: FanIn weight, divisor */
  if (!P->tail_fan || !P->tail_fanw || !fanw) {
    free(fanw);
    return ntk_error(NTK_ENOMEM, "out of memory");
  }
  struct ntk_widths wd;
  ntk_widths_init(&wd, P->C);
  wd.weight = fanw;
  wd.div = fanw + arch->n;
  wd.rank = P->rank;
  int bad = 0;
  for (size_t k = 0; !bad && k < P->nops; k++) {
    const struct ntk_layer *l = P->ops[k].layer;
    P->ops[k].fan = (double)wd.chan * (l->kind == NTK_LAYER_CONV ? (double)l->filter * (double)l->filter_w : 1.0);
    bad = ntk_widths_step(&wd, l, (size_t)(l - arch->layers), 0);
  }
  if (!bad) bad = ntk_widths_step(&wd, &arch->layers[i], i, P->out_h * P->out_w);
  wd.rank = 2; /* vectors after the readout */
  for (size_t k = 0; !bad && k < P->ntail; k++) {
    P->tail_fan[k] = (double)wd.chan;
    bad = ntk_widths_step(&wd, &P->tail[k], i + 1 + k, 0);
  }
  for (size_t k = 0; !bad && k < P->nops; k++) {
    P->ops[k].fanw = fanw[k];
    P->ops[k].fandiv = fanw[arch->n + k];
  }
  for (size_t k = 0; !bad && k < P->ntail; k++) {
    P->tail_fanw[2 * k] = fanw[i + 1 + k];
    P->tail_fanw[2 * k + 1] = fanw[arch->n + i + 1 + k];
  }
  free(fanw);
  return bad ? NTK_ECONFIG : NTK_OK;
}

/* One past the JOIN of the residual block whose FORK is ops[k]. */
static size_t block_end(const struct cnn_plan *P, size_t k) {
  size_t j = k + 1;
  for (int d = 1; j < P->nops && d; j++) {
    ntk_layer_kind kind = P->ops[j].layer->kind;
    d += kind == NTK_LAYER_FORK ? 1 : kind == NTK_LAYER_JOIN ? -1 : 0;
  }
  return j;
}

/* The int member at `field` (offsetof in struct cnn_op) of the block's own
 * markers, ops[k] (its FORK) to `end` (block_end): the FORK, its NEXTs and
 * its JOIN, not those of blocks inside it. */
static void mark_block(struct cnn_plan *P, size_t k, size_t end, size_t field, int v) {
  *(int *)(void *)((char *)&P->ops[k] + field) = v;
  for (size_t m = k + 1, dd = 1; m < end; m++) {
    ntk_layer_kind kind = P->ops[m].layer->kind;
    if (kind == NTK_LAYER_FORK) dd++;
    if ((kind == NTK_LAYER_NEXT || kind == NTK_LAYER_JOIN) && dd == 1) *(int *)(void *)((char *)&P->ops[m] + field) = v;
    if (kind == NTK_LAYER_JOIN) dd--;
  }
}

/* A residual block whose layers are all slice-local (stride-1 SAME
 * convolutions and pointwise layers) is slice-local as a whole: its
 * FORK, NEXT and JOIN then run per offset inside a slice run. */
static void plan_local_blocks(struct cnn_plan *P) {
  for (size_t k = 0; k < P->nops; k++) {
    if (P->ops[k].layer->kind != NTK_LAYER_FORK) continue;
    size_t end = block_end(P, k);
    int local = 1;
    for (size_t j = k + 1; j < end; j++)
      if (!ntk_layer_traits(P->ops[j].layer->kind)->branch) local &= P->ops[j].slice_local;
    mark_block(P, k, end, offsetof(struct cnn_op, slice_local), local);
  }
}

/* The path (see the top of this file): the one asked for, or for AUTO
 * DIAG where the readout is Flatten with no pooling before it, else
 * SLICE; and the elements of a covariance buffer it needs. */
static ntk_status plan_path(struct cnn_plan *P, ntk_cnn_path want, int has_pool) {
  ntk_cnn_path path = want;
  /* a FanInConcat along a spatial axis couples positions of different
   * branches only through its zero blocks, which neither the
   * same-position nor the offset slices hold: the full covariance */
  if (P->cat && path != NTK_CNN_AUTO && path != NTK_CNN_GENERAL)
    return ntk_error(NTK_ECONFIG, "a FanInConcat along a spatial axis takes the general path only");
  if (P->cat) path = NTK_CNN_GENERAL;
  /* a ConvLocal's covariance between two different positions is 0, its
   * same-position entries a Conv's: the same-position path computes it
   * as a Conv, the full covariance with those zeros; the slices, which
   * hold one offset of every position pair, are not written for it */
  if (P->local && path == NTK_CNN_SLICE)
    return ntk_error(NTK_ECONFIG, "a ConvLocal takes the same-position or the general path, not the slices");
  /* a ConvTranspose pairs positions through its dilated input: the full covariance */
  if (P->transpose && path != NTK_CNN_AUTO && path != NTK_CNN_GENERAL)
    return ntk_error(NTK_ECONFIG, "a ConvTranspose takes the general path only");
  if (P->transpose) path = NTK_CNN_GENERAL;
  /* an attention layer mixes every position with every other, each image's
   * weights from its own full covariance */
  if (P->attention && path != NTK_CNN_AUTO && path != NTK_CNN_GENERAL)
    return ntk_error(NTK_ECONFIG, "a GlobalSelfAttention takes the general path only");
  if (P->attention) path = NTK_CNN_GENERAL;
  /* an ImageResize maps every position of the image to the outputs near it (an Index: a selection of them) */
  if (P->resize && path != NTK_CNN_AUTO && path != NTK_CNN_GENERAL)
    return ntk_error(NTK_ECONFIG, "an ImageResize or Index takes the general path only");
  if (P->resize) path = NTK_CNN_GENERAL;
  /* an Aggregate maps every position of the image to the ones its edges reach */
  if (P->aggregate && path != NTK_CNN_AUTO && path != NTK_CNN_GENERAL)
    return ntk_error(NTK_ECONFIG, "an Aggregate takes the general path only");
  if (P->aggregate) path = NTK_CNN_GENERAL;
  int diag = !has_pool && P->readout == NTK_LAYER_FLATTEN;
  if (path == NTK_CNN_AUTO) path = diag ? NTK_CNN_DIAG : P->local ? NTK_CNN_GENERAL : NTK_CNN_SLICE;
  if (path == NTK_CNN_DIAG && (has_pool || P->readout != NTK_LAYER_FLATTEN))
    return ntk_error(NTK_EINTERNAL, "the same-position path needs a Flatten readout and no pooling");
  P->path = path;
  size_t hw = P->H * P->W, bh = P->H, bw = P->W;
  /* (a spatial FanInConcat makes a layer's input larger than the data, ImageResize and ConvTranspose an output) */
  for (size_t k = 0; k < P->nops; k++) {
    const struct cnn_op *op = &P->ops[k];
    if (op->hi * op->wi > hw) hw = op->hi * op->wi, bh = op->hi, bw = op->wi;
    if (op->ho * op->wo > hw) hw = op->ho * op->wo, bh = op->ho, bw = op->wo;
  }
  /* in double: a size past size_t is refused (plan_memory bounds what a CPU engine allocates) */
  double cells = path == NTK_CNN_DIAG ? (double)hw : (double)hw * (double)hw;
  if ((double)P->resize_cells > cells) cells = (double)P->resize_cells;
  P->big_h = bh;
  P->big_w = bw;
  if (cells > 1e18)
    return ntk_error(NTK_ECONFIG, "the network's largest image, %zu x %zu positions, makes covariances of %.3g "
                     "entries, past what ntkd indexes: a smaller image", bh, bw, cells);
  P->fmax = (size_t)cells;
  return NTK_OK;
}

/* A CPU engine's five covariance buffers (four more per residual depth;
 * an Aggregate's edges) of plan P: refused past half this machine's
 * memory, naming the image, before an allocation the kernel would grant
 * and then kill the job for (ImageResize 2 x 2 -> 200 x 200: 12.8 GB
 * each, a hunt). The GPU's plan has its own bounds (device memory per
 * pair). */
static ntk_status plan_memory(const struct cnn_plan *P, size_t elem) {
  double mem = ntk_cpu_memory(), bytes = (double)P->fmax * (5.0 + 4.0 * P->branch_depth) * (double)elem;
  bytes += (double)P->aggregate * (double)P->aggregate / 4.0 * (double)sizeof(struct cnn_edge); /* two patterns' */
  if (mem > 0 && bytes > mem / 2)
    return ntk_error(NTK_ENOMEM, "the network's largest image, %zu x %zu positions, needs covariance buffers of %.3g "
                     "GiB per thread on the %s path, more than half of this machine's %.1f GiB: a smaller image",
                     P->big_h, P->big_w, bytes / 1073741824.0,
                     P->path == NTK_CNN_DIAG ? "same-position" : "full-covariance", mem / 1073741824.0);
  return NTK_OK;
}

/* Offset bands, from the readout back: Flatten needs only offset 0 at its
 * input, GlobalAvgPool every offset. Pointwise layers and convolutions
 * keep an offset (a stride s multiplies it; CIRCULAR wraps, so all);
 * AvgPool(w, s) needs s*offset + w - 1. A network with pooling before
 * Flatten then computes only a band of slices, not the whole covariance.
 * The GENERAL path (the reference) always takes every offset.
 * The variances alone (vbh, vbw) need only what the diagonal needs at
 * every layer: the same rule from offset 0 at the readout.
 * A convolution pairs the same filter tap in both images, so output offset
 * d reads input offset s*d alone: before a stride-s convolution only the
 * multiples of s are read (mh, mw; a product through several). Pooling
 * pairs every tap with every other: all offsets again (1). Residual
 * blocks: the block's input takes the gcd over its branches. One lattice
 * serves the variances too: they need offset 0 after every capture, a
 * multiple of anything. */
static size_t gcd(size_t a, size_t b) {
  while (b) {
    size_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

static void plan_bands(struct cnn_plan *P) {
  size_t h = P->out_h, w = P->out_w;
  size_t bh = P->readout == NTK_LAYER_FLATTEN ? 0 : h, bw = P->readout == NTK_LAYER_FLATTEN ? 0 : w;
  size_t vbh = 0, vbw = 0, mh = 1, mw = 1;
  int deep = 0; /* a block nested past NTK_BRANCH_MAXDEPTH: no lattice (every offset in the band) */
  /* Residual blocks, walked backwards: every branch's end needs the band
   * and lattice the JOIN's output needs; the block's input, the largest
   * band any branch's start needs, on the gcd of their lattices. Per open
   * block: [0..5] the end's bh, bw, vbh, vbw, mh, mw, [6..11] the input's
   * so far (lattice 0: no branch yet), [12] whether two branches' start
   * lattices differed (their strides multiply to different numbers). */
  size_t bstk[NTK_BRANCH_MAXDEPTH][13];
  int bd = 0;
  for (size_t k = P->nops; k-- > 0;) {
    struct cnn_op *op = &P->ops[k];
    const struct ntk_layer *l = op->layer;
    size_t *cur[6] = {&bh, &bw, &vbh, &vbw, &mh, &mw};
    if (l->kind == NTK_LAYER_JOIN && bd < NTK_BRANCH_MAXDEPTH) {
      for (int q = 0; q < 6; q++) bstk[bd][q] = *cur[q];
      for (int q = 0; q < 6; q++) bstk[bd][6 + q] = 0;
      bstk[bd][12] = 0;
      bd++;
    } else if ((l->kind == NTK_LAYER_NEXT || l->kind == NTK_LAYER_FORK) && bd > 0) {
      size_t *s = bstk[bd - 1];
      for (int q = 0; q < 4; q++) s[6 + q] = *cur[q] > s[6 + q] ? *cur[q] : s[6 + q]; /* a branch's start */
      for (int q = 4; q < 6; q++) {
        if (s[6 + q] && s[6 + q] != *cur[q]) s[12] = 1;
        s[6 + q] = gcd(*cur[q], s[6 + q]);
      }
      if (l->kind == NTK_LAYER_FORK) op->even = !s[12];
      for (int q = 0; q < 6; q++) *cur[q] = s[l->kind == NTK_LAYER_NEXT ? q : 6 + q]; /* the previous end, or the input */
      if (l->kind == NTK_LAYER_FORK) bd--;
    } else if (ntk_layer_traits(l->kind)->branch) {
      deep = 1;
    } else if (l->kind == NTK_LAYER_CONV) {
      int any = P->path != NTK_CNN_SLICE || deep;
      op->obh = any || bh + 1 > op->ho ? op->ho - 1 : bh;
      op->obw = any || bw + 1 > op->wo ? op->wo - 1 : bw;
      /* (a lattice past the size leaves offset 0 alone, as the size does: kept small, it fits ntk_dev_op's int) */
      op->omh = any || !mh ? 1 : mh < op->ho ? mh : op->ho;
      op->omw = any || !mw ? 1 : mw < op->wo ? mw : op->wo;
      bh = op->circular ? op->hi : bh * op->sh;
      bw = op->circular ? op->wi : bw * op->sw;
      vbh = op->circular ? op->hi : vbh * op->sh;
      vbw = op->circular ? op->wi : vbw * op->sw;
      mh = op->circular ? 1 : mh * op->sh;
      mw = op->circular ? 1 : mw * op->sw;
    } else if (l->kind == NTK_LAYER_AVGPOOL) { /* CIRCULAR wraps: all */
      bh = op->circular ? op->hi : bh * op->sh + op->fh - 1;
      bw = op->circular ? op->wi : bw * op->sw + op->fw - 1;
      vbh = op->circular ? op->hi : vbh * op->sh + op->fh - 1;
      vbw = op->circular ? op->wi : vbw * op->sw + op->fw - 1;
      mh = mw = 1;
    }
    int all = P->path != NTK_CNN_SLICE;
    op->bh = all || bh + 1 > op->hi ? op->hi - 1 : bh;
    op->bw = all || bw + 1 > op->wi ? op->wi - 1 : bw;
    op->vbh = all || vbh + 1 > op->hi ? op->hi - 1 : vbh;
    op->vbw = all || vbw + 1 > op->wi ? op->wi - 1 : vbw;
    op->mh = all || !mh ? 1 : mh < op->hi ? mh : op->hi;
    op->mw = all || !mw ? 1 : mw < op->wi ? mw : op->wi;
  }
  if (deep)
    for (size_t k = 0; k < P->nops; k++) P->ops[k].mh = P->ops[k].mw = P->ops[k].omh = P->ops[k].omw = 1;
}

/* The ops a slice run carries on the pair path (chain): the slice-local
 * ones, and a convolution of any stride or padding but CIRCULAR, whose
 * output slice of offset d comes from its input slice of offset s*d alone
 * (the lattice of plan_bands makes s*d a whole offset); a residual block
 * when all of its layers may be carried and the strides of its branches,
 * and of every block inside it, multiply to the same number (each of its
 * output slices then comes from one input slice). A run then goes from
 * one pooling layer to the next through strided blocks, one offset at a
 * time, with no full covariance between. */
static void plan_chain(struct cnn_plan *P) {
  for (size_t k = 0; k < P->nops; k++) {
    const struct cnn_op *op = &P->ops[k];
    int conv = op->layer->kind == NTK_LAYER_CONV && !op->circular;
    /* (its input lattice a multiple of its strides, or only offset 0: so each offset divides) */
    int divides = conv && (op->mh % op->sh == 0 || op->mh >= op->hi) && (op->mw % op->sw == 0 || op->mw >= op->wi);
    P->ops[k].chain = op->slice_local || divides;
  }
  for (size_t k = 0; k < P->nops; k++) {
    if (P->ops[k].layer->kind != NTK_LAYER_FORK) continue;
    size_t end = block_end(P, k);
    int ok = P->ops[k].even;
    for (size_t j = k + 1; j < end; j++) {
      const struct cnn_op *o = &P->ops[j];
      ntk_layer_kind kind = o->layer->kind;
      if (kind == NTK_LAYER_FORK) ok &= o->even;
      if ((kind == NTK_LAYER_NEXT || kind == NTK_LAYER_JOIN) && o->cat) ok = 0;
      if (!ntk_layer_traits(kind)->branch) ok &= o->chain;
    }
    mark_block(P, k, end, offsetof(struct cnn_op, chain), ok);
  }
}

/* Whether the batched kernels (cnn_batch_impl.h) take the plan, for
 * elements of `elem` bytes: DIAG, or SLICE with one run of slice-local
 * layers from the input into GAP (not GAP of the raw input, whose pair
 * path sums in another order), or `multi`; only under the NTK
 * parameterisation, whose affine maps they fuse, and only when the path
 * was not forced. */
static void plan_batched(struct cnn_plan *P, ntk_cnn_path want, size_t elem) {
  int single = P->readout == NTK_LAYER_GLOBALAVGPOOL && P->nops > 0;
  for (size_t k = 0; k < P->nops; k++) single &= P->ops[k].slice_local;
  /* Batched too (b_pair_multi): runs of slice-local layers, each pair
   * joined by one pooling layer, into GAP, no residual blocks, and buffers
   * within NTK_CNN_MULTI_MAX. */
  int multi = !single && P->path == NTK_CNN_SLICE && P->readout == NTK_LAYER_GLOBALAVGPOOL && P->nops > 0 &&
              !P->branch_depth && P->ops[0].slice_local && P->ops[P->nops - 1].slice_local;
  for (size_t k = 0; multi && k < P->nops; k++) {
    const struct cnn_op *op = &P->ops[k];
    if (op->slice_local) continue;
    /* (the last op is slice-local); a CIRCULAR pooling takes the pair path (b_pool_add does not wrap) */
    multi = op->layer->kind == NTK_LAYER_AVGPOOL && !op->circular && P->ops[k + 1].slice_local;
    size_t in = op->hi * op->wi, out = op->ho * op->wo;
    if (in * out > P->multi_part) P->multi_part = in * out;
    if (out * out > P->multi_full) P->multi_full = out * out;
  }
  if (multi && 2 * (P->multi_part + P->multi_full) * NTK_CNN_BATCH * elem > NTK_CNN_MULTI_MAX) multi = 0;
  int tail_nonlin = 0, dropout = 0;
  for (size_t k = 0; k < P->ntail; k++) tail_nonlin |= ntk_layer_traits(P->tail[k].kind)->var_slot;
  /* Dropout scales the entries of a sample with itself, which the lanes
   * do not tell apart: such networks take the pair path */
  for (size_t k = 0; k < P->nops; k++) dropout |= P->ops[k].layer->kind == NTK_LAYER_DROPOUT;
  for (size_t k = 0; k < P->ntail; k++) dropout |= P->tail[k].kind == NTK_LAYER_DROPOUT;
  P->batched = want == NTK_CNN_AUTO && !P->standard && !dropout &&
               (P->path == NTK_CNN_DIAG || (P->path == NTK_CNN_SLICE && (single || multi)));
  P->multi = P->batched && multi;
  P->self_vars_only = P->batched && P->path == NTK_CNN_SLICE && !tail_nonlin;
}

/* What plan_build allocated, on success or not. */
static void plan_release(struct cnn_plan *P) {
  for (size_t k = 0; P->ops && k < P->nops; k++) {
    free(P->ops[k].rh);
    free(P->ops[k].rw);
    free(P->ops[k].bandh);
    free(P->ops[k].bandw);
  }
  free(P->ops);
  free(P->var_off);
  free(P->tail_fan);
  free(P->tail_fanw);
}

/* The data's pattern against the network's Aggregate layers: one where
 * there are some, of V^2 values for the V positions they see. */
static ntk_status plan_pattern(const struct cnn_plan *P, const struct ntk_dataset *data) {
  if (!P->aggregate && data->pattern)
    return ntk_error(NTK_ECONFIG, "the data have a pattern (a graph's edges) and the network no Aggregate layer to "
                     "read it");
  if (P->aggregate && !data->pattern)
    return ntk_error(NTK_ECONFIG, "the network's Aggregate layers need each sample's pattern (a graph's edges): "
                     "[data] pattern = FILE in a job (docs/JOB-FILE.md), kernel_fn(..., pattern=(p1, p2)) in Python");
  if (P->aggregate && data->pattern != P->aggregate * P->aggregate)
    return ntk_error(NTK_ECONFIG, "the pattern has %zu values per sample and the network's Aggregate layers see %zu "
                     "positions: %zu x %zu values%s", data->pattern, P->aggregate, P->aggregate, P->aggregate,
                     data->c == 1 && !data->one_d ? " (the data have one channel: a 3-D .npy of (N, L, C) node "
                                                    "features needs [data] layout = NLC, or it is read as (N, H, W) "
                                                    "grey images)" : "");
  return NTK_OK;
}

/* The plan of `arch` on `data` (`want`: a path, or NTK_CNN_AUTO): the
 * spatial ops and their sizes, the readout and tail, the fan-ins, the
 * path, the offset bands each op needs, and whether the batched kernels
 * run it. On error the caller frees what P holds. */
static ntk_status plan_build(struct cnn_plan *P, const struct ntk_arch *arch, const struct ntk_dataset *data,
                             ntk_cnn_path want) {
  memset(P, 0, sizeof *P);
  if (!data->h) return ntk_error(NTK_ECONFIG, "a convolutional network needs image data ((N, H, W, C) arrays)");
  P->H = data->h;
  P->W = data->w;
  P->C = data->c;
  if (ntk_arch_data_rank(arch, data->one_d, (int)data->w, &P->rank)) return NTK_ECONFIG;
  P->ops = calloc(arch->n ? arch->n : 1, sizeof *P->ops);
  P->var_off = calloc(arch->n ? arch->n : 1, sizeof *P->var_off);
  if (!P->ops || !P->var_off) return ntk_error(NTK_ENOMEM, "out of memory");
  size_t readout = 0;
  int has_pool = 0;
  ntk_status st = plan_spatial(P, arch, &readout, &has_pool);
  if (!st) st = plan_pattern(P, data);
  if (!st) st = plan_readout(P, arch, readout);
  if (!st) st = plan_fans(P, arch, readout);
  if (st) return st;
  plan_local_blocks(P);
  if ((st = plan_path(P, want, has_pool))) return st;
  plan_bands(P);
  plan_chain(P);
  plan_batched(P, want, (size_t)data->elem);
  return NTK_OK;
}

/* Zeroed memory on a 64-byte boundary: the batched kernels load 16 lanes
 * (64 bytes in float32) per cell, and a buffer 16 bytes off a cache line
 * splits every load in two: CNTK-GAP-21 ran 7-10 % slower after an
 * unrelated allocation moved the heap (issue 14's benchmark). */
static void *zalloc64(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, 64, bytes ? bytes : 64)) return NULL;
  memset(p, 0, bytes);
  return p;
}

static void ws_free(struct cnn_ws *ws) {
  free(ws->a);
  free(ws->b);
  free(ws->c);
  free(ws->d);
  free(ws->e);
  free(ws->edges);
  free(ws->sg);
  free(ws->st);
  free(ws->sg2);
  free(ws->st2);
  free(ws->srows);
  free(ws->stack);
  free(ws->sstack);
}

/* The slots of plan P to judge (ntk_cnn_judged_slots). */
static size_t judged_slots(const struct cnn_plan *P, const struct ntk_arch *arch, struct ntk_cnn_judged *out) {
  size_t n = 0;
  for (size_t k = 0; k < P->nops; k++) {
    const struct cnn_op *op = &P->ops[k];
    if (op->var >= 0 && ntk_layer_variance_judged(op->layer))
      out[n++] = (struct ntk_cnn_judged){P->var_off[op->var], op->ho * op->wo, op->wo,
                                         (size_t)(op->layer - arch->layers), 1, 0};
  }
  for (size_t k = 0; k < P->ntail; k++)
    if (ntk_layer_variance_judged(&P->tail[k]))
      out[n++] = (struct ntk_cnn_judged){P->tail_off + k, 1, 1, (size_t)(&P->tail[k] - arch->layers), 1, 1};
  return n;
}

ntk_status ntk_cnn_create(const struct ntk_arch *arch, const struct ntk_dataset *data, ntk_cnn_path path,
                          const struct ntk_stop *stop, ntk_cnn_t **out) {
  *out = NULL;
  ntk_cnn_t *c = calloc(1, sizeof *c);
  if (!c) return ntk_error(NTK_ENOMEM, "out of memory");
  c->arch = arch;
  c->data = data;
  c->stop = stop;
  ntk_status st = plan_build(&c->plan, arch, data, path);
  if (!st) st = plan_memory(&c->plan, (size_t)data->elem);
  if (!st && !(c->judged = malloc((arch->n ? arch->n : 1) * sizeof *c->judged)))
    st = ntk_error(NTK_ENOMEM, "out of memory");
  if (!st) c->njudged = judged_slots(&c->plan, arch, c->judged);
  if (!st) {
    size_t es = (size_t)data->elem, f = c->plan.fmax;
    size_t cells = (c->plan.W + 2 * c->plan.pad) * (c->plan.H + 2 * c->plan.pad);
    struct cnn_ws *ws = &c->ws;
    /* calloc: entries outside the offset band are never computed but are
     * read (harmlessly) by the full pooling and convolution loops. */
    ws->a = calloc(f, es);
    ws->b = calloc(f, es);
    ws->c = calloc(f, es);
    ws->d = calloc(f, es);
    ws->e = calloc(f, es);
    if (c->plan.aggregate) {
      size_t n = c->plan.aggregate;
      if (!(ws->edges = malloc((2 * (n * n / 8) + 1) * sizeof *ws->edges)))
        st = ntk_error(NTK_ENOMEM, "out of memory for an Aggregate's edges (%zu positions)", n);
    }
    ws->sg = malloc(cells * es);
    ws->st = malloc(cells * es);
    ws->sg2 = malloc(cells * es);
    ws->st2 = malloc(cells * es);
    ws->srows = calloc(cells, es);
    if (c->plan.branch_depth && (!(ws->stack = malloc(4 * f * (size_t)c->plan.branch_depth * es)) ||
                                 !(ws->sstack = calloc(4 * cells * (size_t)c->plan.branch_depth, es))))
      st = ntk_error(NTK_ENOMEM, "out of memory for the residual blocks' buffers");
    if (!ws->a || !ws->b || !ws->c || !ws->d || !ws->e || !ws->sg || !ws->st || !ws->sg2 || !ws->st2 || !ws->srows)
      st = ntk_error(NTK_ENOMEM, "out of memory for CNN buffers (%zu elements each)", f);
    if (!st && c->plan.batched) {
      size_t lanes = (c->plan.path == NTK_CNN_DIAG ? c->plan.H * c->plan.W : cells) * NTK_CNN_BATCH * es;
      struct cnn_bws *b = &c->bws;
      /* calloc: the slice path relies on cells outside a slice being zero. */
      b->g = zalloc64(lanes);
      b->t = zalloc64(lanes);
      b->g2 = zalloc64(lanes);
      b->t2 = zalloc64(lanes);
      b->rows = zalloc64(2 * lanes);
      b->rows_cap = lanes / es;
      if (c->plan.branch_depth) b->stack = zalloc64(4 * lanes * (size_t)c->plan.branch_depth);
      if (c->plan.multi) {
        size_t part = c->plan.multi_part * NTK_CNN_BATCH * es, full = c->plan.multi_full * NTK_CNN_BATCH * es;
        b->pg = zalloc64(part);
        b->pt = zalloc64(part);
        b->fg = zalloc64(full);
        b->ft = zalloc64(full);
      }
      if (!b->g || !b->t || !b->g2 || !b->t2 || !b->rows || (c->plan.branch_depth && !b->stack) ||
          (c->plan.multi && (!b->pg || !b->pt || !b->fg || !b->ft)))
        st = ntk_error(NTK_ENOMEM, "out of memory for CNN buffers");
    }
  }
  /* NTKD_CNN_VAR_CACHE (bytes) overrides the bound; the tests use 0. */
  size_t cache = getenv("NTKD_CNN_VAR_CACHE") ? (size_t)strtoull(getenv("NTKD_CNN_VAR_CACHE"), NULL, 10)
                                              : NTK_CNN_VAR_CACHE;
  if (!st && data->n * c->plan.var_size * (size_t)data->elem <= cache) {
    c->allvar = malloc(data->n * c->plan.var_size * (size_t)data->elem);
    c->have = calloc(data->n, 1);
    if (!c->allvar || !c->have) { /* no cache: recompute per tile */
      free(c->allvar);
      free(c->have);
      c->allvar = NULL;
      c->have = NULL;
    }
  }
  if (st) {
    ntk_cnn_free(c);
    return st;
  }
  *out = c;
  return NTK_OK;
}

void ntk_cnn_free(ntk_cnn_t *c) {
  if (!c) return;
  free(c->judged);
  ws_free(&c->ws);
  free(c->bws.g);
  free(c->bws.t);
  free(c->bws.g2);
  free(c->bws.t2);
  free(c->bws.rows);
  free(c->bws.stack);
  free(c->bws.pg);
  free(c->bws.pt);
  free(c->bws.fg);
  free(c->bws.ft);
  free(c->xt);
  free(c->vt);
  plan_release(&c->plan);
  free(c->rowvar);
  free(c->colvar);
  free(c->allvar);
  free(c->have);
  free(c);
}

ntk_cnn_path ntk_cnn_get_path(const ntk_cnn_t *c) { return c->plan.path; }

int ntk_cnn_batched(const ntk_cnn_t *c) { return c->plan.batched; }

static ntk_status reserve_vars(ntk_cnn_t *c, size_t images) {
  if (c->var_cap >= images) return NTK_OK;
  size_t bytes = images * c->plan.var_size * (size_t)c->data->elem;
  /* An attention layer's n^2 weights per image make these large: refused
   * before an allocation the kernel would grant and then kill the job for */
  double mem = ntk_cpu_memory();
  if (mem > 0 && 2.0 * (double)bytes > mem / 2)
    return ntk_error(NTK_ENOMEM, "a tile's per-image blocks take %.1f GiB (%zu images of %zu numbers each%s), more "
                     "than half of this machine's %.1f GiB: lower [compute] tile", 2.0 * (double)bytes / 1073741824.0,
                     2 * images, c->plan.var_size, c->plan.attention ? ": a GlobalSelfAttention keeps n x n weights "
                     "per image, n its positions" : "", mem / 1073741824.0);
  void *r = realloc(c->rowvar, bytes), *k = r ? realloc(c->colvar, bytes) : NULL;
  if (r) c->rowvar = r;
  if (k) c->colvar = k;
  if (!r || !k) return ntk_error(NTK_ENOMEM, "out of memory for per-image variances");
  c->var_cap = images;
  return NTK_OK;
}

/* A buffer of at least `bytes`, 64-byte aligned like the batch buffers;
 * its contents are not kept (each tile rewrites them). */
static void *grow(void **buf, size_t *cap, size_t bytes) {
  if (*cap >= bytes) return *buf;
  void *p = zalloc64(bytes);
  if (!p) return NULL;
  free(*buf);
  *buf = p;
  *cap = bytes;
  return p;
}

/* NTK_EINTERRUPTED for tile t, stopped with `done` of its entries computed. */
static ntk_status tile_stopped(const struct ntk_tile *t, uint64_t done) {
  return ntk_error(NTK_EINTERRUPTED, "stopped inside tile %llu, %llu of its %llu entries computed",
                   (unsigned long long)t->index, (unsigned long long)done, (unsigned long long)(t->rows * t->cols));
}

ntk_status ntk_cnn_judged_slots(const struct ntk_arch *arch, const struct ntk_dataset *data,
                                struct ntk_cnn_judged *out, size_t *n) {
  *n = 0;
  struct cnn_plan *P = calloc(1, sizeof *P);
  if (!P) return ntk_error(NTK_ENOMEM, "out of memory");
  ntk_status st = plan_build(P, arch, data, NTK_CNN_AUTO);
  if (!st) *n = judged_slots(P, arch, out);
  plan_release(P);
  free(P);
  return st;
}

/* The refusal of slot s's value v (class cls) at position p. */
static ntk_status judged_refusal(const struct ntk_arch *arch, const struct ntk_cnn_judged *s, size_t p, int cls,
                                 double v, size_t image, int elem, int every) {
  char where[96] = "", what[64];
  if (!s->tail)
    snprintf(where, sizeof where, every ? " at every position (the largest at (%zu, %zu))" : " at position (%zu, %zu)",
             p / s->w, p % s->w);
  if (cls == NTK_FP_ZERO)
    snprintf(what, sizeof what, s->tail ? "0 (underflowed: the image is not all zeros)"
                                        : "0 (underflowed: the window there is not all zeros)");
  else snprintf(what, sizeof what, "%.3g", v);
  char who[48];
  snprintf(who, sizeof who, "image %zu", image);
  return ntk_variance_refusal(who, s->layer, &arch->layers[s->layer], where, what, elem);
}

/* The refusal of slot s's non-finite value v at position p. */
static ntk_status judged_overflow(const struct ntk_arch *arch, const struct ntk_cnn_judged *s, size_t p, double v,
                                  size_t image, int elem) {
  char where[64] = "", who[48];
  if (!s->tail) snprintf(where, sizeof where, " at position (%zu, %zu)", p / s->w, p % s->w);
  snprintf(who, sizeof who, "image %zu", image);
  return ntk_variance_overflow(who, s->layer, &arch->layers[s->layer], where, v, elem);
}

ntk_status ntk_cnn_judge_vars(const struct ntk_arch *arch, const struct ntk_dataset *data,
                              const struct ntk_cnn_judged *slots, size_t n, const void *block, size_t image,
                              const void *oracle, int *need) {
  int elem = data->elem;
  /* An image of zeros: its 0s are its values. (Once per image: it was
   * asked at every zero position, a third of a CNN call's time on images
   * with black borders.) */
  if (!n || !ntk_dataset_sample_nonzero(data, image)) return NTK_OK;
  double tiny = elem == 4 ? (double)FLT_MIN : DBL_MIN;
  for (size_t k = 0; k < n; k++) {
    const struct ntk_cnn_judged *s = &slots[k];
    struct ntk_vanish zv = {0}; /* 0 by the network: a layer on the path maps everything to 0 */
    for (size_t i = 0; i < s->layer; i++) ntk_vanish_step(&zv, &arch->layers[i]);
    const char *at = (const char *)block + s->off * (size_t)elem, *oat = oracle ? (const char *)oracle + s->off *
                                                                                  (size_t)elem : NULL;
    size_t step = s->step * (size_t)elem;
    if (!ntk_layer_scale_free(&arch->layers[s->layer])) {
      /* An angle map (Relu): a position's error is as small as its own
       * variance, so the image's largest variance there is what counts. A
       * window of tiny values beside normal ones is right (a float32 decay
       * to 5e-30 was refused at such a position, within 1.2e-5 of
       * neural-tangents before); an image whose every variance there is
       * subnormal or underflowed is not (x1 at 1e-30 against x2). */
      double most = 0;
      size_t pm = 0;
      for (size_t p = 0; p < s->count; p++) {
        double v;
        if (ntk_fp_class(at + p * step, elem, &v) == NTK_FP_NONFINITE) return judged_overflow(arch, s, p, v, image, elem);
        if (v > most) most = v, pm = p;
      }
      if (most >= tiny) continue;
      if (most > 0) return judged_refusal(arch, s, pm, NTK_FP_SUBNORMAL, most, image, elem, 1);
      if (zv.zero) continue;
      if (s->tail) return judged_refusal(arch, s, 0, NTK_FP_ZERO, 0, image, elem, 0);
      /* every position 0: windows of zeros (the image's values where no
       * layer looks), or an underflow where the oracle says a window is not */
      if (!oat) {
        if (need) *need = 1;
        continue;
      }
      for (size_t p = 0; p < s->count; p++) {
        int ocls = ntk_fp_class(oat + p * step, elem, NULL);
        if (ocls == NTK_FP_NORMAL || ocls == NTK_FP_SUBNORMAL)
          return judged_refusal(arch, s, p, NTK_FP_ZERO, 0, image, elem, 0);
      }
      continue;
    }
    for (size_t p = 0; p < s->count; p++) {
      double v;
      int cls = ntk_fp_class(at + p * step, elem, &v);
      if (cls == NTK_FP_NONFINITE) return judged_overflow(arch, s, p, v, image, elem);
      if (cls != NTK_FP_SUBNORMAL && cls != NTK_FP_ZERO) continue;
      if (cls == NTK_FP_ZERO && zv.zero) continue;
      if (cls == NTK_FP_ZERO && !s->tail) {
        /* A zero window's 0, or an underflow (the image at 1e-170)? The
         * oracle, the image's block with each nonzero value set to 1, is 0
         * exactly where the window sees only zeros. Without one (the GPU's
         * blocks), the caller is asked for it (*need). */
        if (!oat) {
          if (need) *need = 1;
          continue;
        }
        int ocls = ntk_fp_class(oat + p * step, elem, NULL);
        if (ocls != NTK_FP_NORMAL && ocls != NTK_FP_SUBNORMAL) continue;
      }
      return judged_refusal(arch, s, p, cls, v, image, elem, 0);
    }
  }
  return NTK_OK;
}

/* An image's variance block, just computed, judged (ntk_cnn_judge_vars);
 * oracle and need as there (judge_image in cnn_tile_impl.h). */
static ntk_status judge_vars(const ntk_cnn_t *c, const void *block, size_t image, const void *oracle, int *need) {
  return c->njudged ? ntk_cnn_judge_vars(c->arch, c->data, c->judged, c->njudged, block, image, oracle, need)
                    : NTK_OK;
}

/* A tile: its images' variances, then its entries batched or pair by pair
 * (self_vars_f, batched_tile_f, pair_tile_f and the _d ones). */
#define EACH_PRECISION_FILE "kernels/cnn_tile_impl.h"
#include "kernels/each_precision.h"

ntk_status ntk_cnn_judge_image(ntk_cnn_t *c, size_t image) {
  return c->data->elem == 4 ? judge_one_f(c, image) : judge_one_d(c, image);
}

ntk_status ntk_cnn_tile(ntk_cnn_t *c, const struct ntk_tile *t, void *nngp, void *ntk) {
  size_t rows = t->rows, cols = t->cols;
  ntk_status st = reserve_vars(c, rows > cols ? rows : cols);
  if (st) return st;
  if (c->plan.batched)
    return c->data->elem == 4 ? batched_tile_f(c, t, nngp, ntk) : batched_tile_d(c, t, nngp, ntk);
  return c->data->elem == 4 ? pair_tile_f(c, t, nngp, ntk) : pair_tile_d(c, t, nngp, ntk);
}


ntk_status ntk_cnn_dev_plan(const struct ntk_arch *arch, const struct ntk_dataset *data, struct ntk_dev_plan *out) {
  memset(out, 0, sizeof *out);
  if (!ntk_cnn_applies(arch, data)) return ntk_error(NTK_ECONFIG, "not a convolutional network on image data");
  struct cnn_plan P;
  ntk_status st = plan_build(&P, arch, data, NTK_CNN_AUTO);
  if (!st && (P.nops > NTK_DEV_MAXOPS || P.ntail > NTK_DEV_MAXTAIL))
    st = ntk_error(NTK_ECONFIG, "arch: the GPU kernels take at most %d layers before the readout and %d after it",
                   NTK_DEV_MAXOPS, NTK_DEV_MAXTAIL);
  for (size_t k = 0; !st && k < P.nops; k++)
    if (P.ops[k].ln_h || P.ops[k].ln_w)
      st = ntk_error(NTK_ECONFIG, "arch, layer %zu: the GPU's CNN kernels do not compute LayerNorm over positions "
                     "(its variances averaged over the %s); the CPU does: backend = cpu (under auto, this rank computes "
                     "on the CPU)", (size_t)(P.ops[k].layer - arch->layers) + 1,
                     P.ops[k].ln_h && P.ops[k].ln_w ? "rows and columns" : P.ops[k].ln_h ? "rows" : "columns");
  for (size_t k = 0; !st && k < (size_t)arch->n; k++)
    if (arch->layers[k].kind == NTK_LAYER_DROPOUT)
      st = ntk_error(NTK_ECONFIG, "arch, layer %zu: the GPU's CNN kernels do not compute Dropout (mode='train'), "
                     "which scales a sample paired with itself; the CPU does: backend = cpu (under auto, this "
                     "rank computes on the CPU)", k + 1);
  for (size_t k = 0; !st && P.path != NTK_CNN_DIAG && k < (size_t)arch->n; k++)
    if (arch->layers[k].kind == NTK_LAYER_CONV && arch->layers[k].local)
      st = ntk_error(NTK_ECONFIG, "arch, layer %zu: the GPU's CNN kernels compute a ConvLocal only before a Flatten "
                     "readout with no pooling (where its kernel is a Conv's), not its zeros between positions; the CPU "
                     "does: backend = cpu (under auto, this rank computes on the CPU)", k + 1);
  if (!st && P.transpose)
    st = ntk_error(NTK_ECONFIG, "arch: the GPU's CNN kernels do not compute a ConvTranspose; the CPU does: backend = "
                   "cpu (under auto, this rank computes on the CPU)");
  if (!st && P.attention)
    st = ntk_error(NTK_ECONFIG, "arch: the GPU's CNN kernels do not compute a GlobalSelfAttention; the CPU does: "
                   "backend = cpu (under auto, this rank computes on the CPU)");
  if (!st && P.resize)
    st = ntk_error(NTK_ECONFIG, "arch: the GPU's CNN kernels do not compute an ImageResize or Index; the CPU does: "
                   "backend = cpu (under auto, this rank computes on the CPU)");
  if (!st && P.aggregate)
    st = ntk_error(NTK_ECONFIG, "arch: the GPU's CNN kernels do not compute an Aggregate; the CPU does: "
                   "backend = cpu (under auto, this rank computes on the CPU)");
  if (!st && P.cat)
    st = ntk_error(NTK_ECONFIG, "arch: the GPU's CNN kernels do not compute a FanInConcat along a spatial axis "
                   "(the image grows by the branches' sizes); the CPU does: backend = cpu (under auto, this rank "
                   "computes on the CPU)");
  if (!st) {
    out->H = (int)P.H;
    out->W = (int)P.W;
    out->C = (int)P.C;
    out->pad = (int)P.pad;
    out->path = P.path;
    out->readout = P.readout;
    out->readout_sum = P.readout_sum;
    out->out_h = (int)P.out_h;
    out->out_w = (int)P.out_w;
    out->nops = (int)P.nops;
    out->ntail = (int)P.ntail;
    out->var_size = (int)P.var_size;
    out->branch_depth = P.branch_depth;
    out->tail_off = (int)P.tail_off;
    int tail_ended[NTK_BRANCH_MAXDEPTH], tail_depth = 0;
    for (size_t k = 0; k < P.nops + P.ntail; k++) {
      int tail = k >= P.nops;
      const struct cnn_op *op = tail ? NULL : &P.ops[k];
      const struct ntk_layer *l = tail ? &P.tail[k - P.nops] : op->layer;
      struct ntk_dev_op *o = tail ? &out->tail[k - P.nops] : &out->ops[k];
      o->kind = l->kind;
      o->w2 = l->w_std * l->w_std;
      o->b2 = l->b_std * l->b_std;
      o->map = l->map;
      o->fh = l->kind == NTK_LAYER_AVGPOOL ? l->window : l->filter;
      o->fw = l->kind == NTK_LAYER_AVGPOOL ? l->window_w : l->filter_w;
      o->sh = l->stride;
      o->sw = l->stride_w;
      o->standard = P.standard && ntk_layer_traits(l->kind)->affine;
      o->fan = tail ? P.tail_fan[k - P.nops] : op->fan;
      o->one = l->bias ? 1 : 0;
      o->sum = l->sum;
      o->prod = l->prod;
      o->branches = l->branches;
      o->norm_edges = l->normalize_edges;
      o->var_off = -1;
      if (tail) { /* a residual block after the readout, on the scalar */
        o->fanw = P.tail_fanw[2 * (k - P.nops)];
        o->fandiv = P.tail_fanw[2 * (k - P.nops) + 1];
        if (l->kind == NTK_LAYER_FORK) tail_ended[tail_depth++] = 0;
        if (l->kind == NTK_LAYER_NEXT) o->first = tail_ended[tail_depth - 1]++ == 0;
        if (l->kind == NTK_LAYER_JOIN) tail_depth--;
        continue;
      }
      o->fanw = op->fanw;
      o->fandiv = op->fandiv;
      o->hi = (int)op->hi;
      o->wi = (int)op->wi;
      o->ho = (int)op->ho;
      o->wo = (int)op->wo;
      o->lo_h = (int)op->lo_h;
      o->lo_w = (int)op->lo_w;
      o->circular = op->circular;
      /* a block a slice run carries (chain: slice-local, or strided with
       * branches of equal stride products) has its FORK, NEXT and JOIN run
       * inside the SLICE kernel's runs (a stack in shared memory); the
       * others on the full covariance between runs (BRANCH_FULL) */
      o->slice_local = op->slice_local;
      o->chain = op->chain;
      o->depth = op->depth;
      o->first = op->first;
      o->bh = (int)op->bh;
      o->bw = (int)op->bw;
      o->mh = (int)op->mh;
      o->mw = (int)op->mw;
      o->obh = (int)op->obh;
      o->obw = (int)op->obw;
      o->omh = op->omh ? (int)op->omh : 1;
      o->omw = op->omw ? (int)op->omw : 1;
      o->var_off = op->var >= 0 ? (int)P.var_off[op->var] : -1;
    }
  }
  plan_release(&P);
  return st;
}

ntk_status ntk_cnn_check(const struct ntk_arch *arch, const struct ntk_dataset *data) {
  ntk_status st0 = ntk_arch_check_scales(arch, 8); /* as ntk_fc_check */
  if (st0) return st0;
  struct cnn_plan *P = malloc(sizeof *P);
  if (!P) return ntk_error(NTK_ENOMEM, "out of memory");
  ntk_status st = plan_build(P, arch, data, NTK_CNN_AUTO);
  if (!st) st = plan_memory(P, (size_t)data->elem);
  plan_release(P);
  free(P);
  return st;
}
