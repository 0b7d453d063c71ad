/* Architecture strings in neural-tangents' stax vocabulary, parsed into a
 * flat list of layers, and the validity rules stax enforces. Pure; no I/O. */
#ifndef NTKD_ARCH_H
#define NTKD_ARCH_H

#include <stddef.h>

#include "kernels/layers.h"
#include "base/status.h"

typedef enum ntk_padding {
  NTK_PAD_VALID,
  NTK_PAD_SAME,
  NTK_PAD_CIRCULAR,
} ntk_padding;

/* GlobalSelfAttention, stax's, in its infinite-width limit (docs/MATH.md,
 * "Convolutional networks"): the attention weights of an image are mech(qk * C) over its
 * positions, C its own covariance (with the positional embeddings' added);
 * the pair's covariance becomes ov^2 G_a K G_b^T + b^2. With
 * linear_scaling=False only the IDENTITY mechanism has a closed form (as in
 * neural-tangents). */
typedef enum ntk_attention_mech {
  NTK_ATTN_SOFTMAX, /* over the key positions, each query position's row */
  NTK_ATTN_IDENTITY,
  NTK_ATTN_ABS,
  NTK_ATTN_RELU,
} ntk_attention_mech;

typedef enum ntk_pos_emb {
  NTK_POS_NONE,
  NTK_POS_SUM,    /* one-hot positional embeddings added: C + W_pos_emb_std^2 I */
  NTK_POS_CONCAT, /* concatenated, as many channels as the input: (C + W_pos_emb_std^2 I) / 2 */
} ntk_pos_emb;

struct ntk_attention {
  int n_chan_key, n_chan_val, n_heads; /* as written (n_chan_out is struct ntk_layer's width) */
  double w_key, w_value, w_query, w_out; /* the stds as written: the kernel takes w_query w_key and w_out w_value */
  int linear;                            /* linear_scaling */
  ntk_attention_mech mech;
  ntk_pos_emb pos;
  double pos_std, p_norm; /* W_pos_emb_std; pos_emb_p_norm as written (unused: pos_emb_decay_fn is None) */
  int val_pos;            /* val_pos_emb: the values see the positional embeddings too */
};

/* One item of Index's idx as written (stax.Slice[...]): a slice
 * start:stop:step (each part given or not), or the Ellipsis. */
struct ntk_slice {
  int ellipsis;
  int has_start, has_stop, has_step;
  long start, stop, step;
};
#define NTK_INDEX_MAX 5 /* the items of an idx: one per axis of (N, H, W, C), and an Ellipsis */

struct ntk_layer {
  ntk_layer_kind kind;  /* what it is: ntk_layer_traits(kind) */
  double w_std, b_std;  /* Dense, Conv */
  struct ntk_map map;   /* NTK_LAYER_MAP: the nonlinearity */
  double param[NTK_MAP_MAXPARAMS]; /* NTK_LAYER_MAP: the parameters as written (canonical text) */
  int filter, stride;   /* Conv: filter height; Conv, AvgPool: stride along the height */
  int window;           /* AvgPool window height */
  int filter_w, stride_w, window_w; /* the same along the width (equal for square sizes) */
  int one_d;            /* written with 1-D sizes, (3,): for (N, L, C) data */
  int width;            /* Dense out_dim, Conv out_chan as written (stax's syntax); 0 if not given */
  int sum;              /* AvgPool, GlobalAvgPool kinds spelled SumPool, GlobalSumPool: sums, not means;
                           NTK_LAYER_JOIN: FanInSum (else FanInConcat or FanInProd) */
  int prod;             /* NTK_LAYER_JOIN: FanInProd, the branches' kernels multiplied entry by entry (sum 0) */
  int branches;         /* NTK_LAYER_FORK, NTK_LAYER_JOIN: the block's number of branches */
  int normalize_edges;  /* AvgPool SAME: divide by the window's cells inside the input (stax's
                           normalize_edges=True), not by w^2 (count_include_pad, the default) */
  int bias;             /* Dense, Conv: under standard parameterisation, a bias parameter (b_std written
                           as a number in the layer, or > 0): the NTK gains 1, as stax's b_std is not None */
  ntk_padding padding;  /* Conv */
  int transpose;        /* Conv spelled ConvTranspose: stax's transposed convolution (jax.lax.conv_transpose's
                           sizes: the input dilated by the strides, the image grows; docs/MATH.md) */
  int local;            /* Conv spelled ConvLocal: stax's locally connected layer, its weights unshared between
                           positions, so its covariance between two different positions is 0 (docs/MATH.md) */
  int ln_axes;          /* LayerNorm: its axes as written, bit a + 4 for axis a (-4..3); 0 for the default
                           (-1, the channels): ntk_layernorm_axes resolves them against the data */
  int axis;             /* NTK_LAYER_JOIN, FanInConcat: its axis as written (-4..3), 0 for the default (-1,
                           the channels; the batch axis 0 is refused): ntk_concat_axis resolves it */
  double rate;          /* Dropout (mode='train'): stax's keep rate, in (0, 1]; a sample's own entries are
                           multiplied by 1/rate (mode='test' is parsed as Identity) */
  struct ntk_attention attn; /* GlobalSelfAttention; its b_std is b_std above (0 for stax's None) */
  int resize[4];        /* ImageResize: its shape as written, -1 an axis kept (stax's (N, H, W, C) or (N, L, C)) */
  int resize_len;       /* ImageResize: the shape's length, 3 or 4 (checked against the data's rank) */
  int nearest;          /* ImageResize: method 'nearest' (else 'linear') */
  int antialias;        /* ImageResize, 'linear': a triangle filter as wide as the step when downsampling */
  int index;            /* NTK_LAYER_RESIZE spelled Index: stax's x[idx], idx slices of the spatial axes (the
                           batch and the channels whole): a selection of positions, resolved against the data
                           by ntk_index_axis */
  int nslice;
  struct ntk_slice slice[NTK_INDEX_MAX];
  int agg_axes;         /* Aggregate: aggregate_axis as written, bit a + 4 for axis a (-4..3); 0 for None (every
                           spatial axis, the one choice ntkd computes: ntk_aggregate_axes checks it) */
  char name[24];        /* spelling used in the string: Relu, LeakyRelu, Abs, ... */
};

struct ntk_arch {
  size_t n;
  struct ntk_layer *layers; /* owned; free with ntk_arch_free() */
  int standard;             /* stax's parameterization='standard' (widths matter), else 'ntk' */
};

/* Parse `text`. Layers without W_std/b_std get `w_std`/`b_std`. On error
 * returns NTK_ECONFIG with a message naming the column and the problem.
 * Rank-local. The caller frees `out` with ntk_arch_free(). */
ntk_status ntk_arch_parse(const char *text, double w_std, double b_std,
                          struct ntk_arch *out);

/* The same under stax's parameterization: `standard` 0 ('ntk', the
 * default) or 1 ('standard': every Dense and Conv but the last must give
 * its width, which then scales the NTK; docs/JOB-FILE.md). */
ntk_status ntk_arch_parse_param(const char *text, double w_std, double b_std, int standard, struct ntk_arch *out);

/* Or'ed into `standard` of ntk_arch_parse_param: `b_std` was written by
 * the user ([model] b_std), not a default, so a Dense or Conv without its
 * own b_std has a bias parameter even when b_std is 0, as stax's
 * Dense(b_std=0.) has (it changes the standard parameterisation's NTK). */
#define NTK_ARCH_B_STD_GIVEN 0x100

/* Channel widths along a network, as stax's kernel shapes carry them:
 * under standard parameterisation the NTK of an affine layer is
 * fan_in * A(nngp) + W^2 A(ntk) + (bias ? 1 : 0), fan_in the width of its
 * input (times the filter area for a Conv); FanInSum needs equal widths
 * and FanInConcat adds them. A layer without a width (ntkd's short forms)
 * has width 0: unknown, and equal to anything. Start with the data's
 * features or channels; `chan` is the width before the next layer.
 *
 * FanInConcat averages its branches' kernels weighted by their widths, as
 * stax does (equally when the widths are equal). With `weight` and `div`
 * set (arrays indexed by layer, as `index` below), each JOIN writes its
 * block's weights: weight[i] for every NEXT and the JOIN ending a branch,
 * div[join] the divisor, 0 for none (src/kernels/branch.h applies them).
 * FanInSum and FanInProd: weights 1, div 0. */
#define NTK_WIDTHS_MAXDEPTH 16
#define NTK_WIDTHS_MAXBRANCH 64
struct ntk_widths {
  size_t chan;
  int depth;
  size_t in[NTK_WIDTHS_MAXDEPTH];                           /* the width at each open block's input */
  int nend[NTK_WIDTHS_MAXDEPTH];                            /* its branches ended so far */
  size_t end_w[NTK_WIDTHS_MAXDEPTH][NTK_WIDTHS_MAXBRANCH];  /* their widths */
  size_t end_at[NTK_WIDTHS_MAXDEPTH][NTK_WIDTHS_MAXBRANCH]; /* the layers ending them */
  double *weight, *div;                                     /* optional: FanIn weights (above) */
  int rank;                                                 /* the data's axes (ntk_concat_axis); 0: 2, vectors */
};
void ntk_widths_init(struct ntk_widths *w, size_t chan);

/* Past layer l, layer `index` of the network (hw: the positions a Flatten
 * flattens). Returns 0, or -1 with ntk_error set for a FanInSum or
 * FanInProd whose branches end at different known widths (neural-tangents refuses it), or
 * a FanInConcat of different known widths with a branch of unknown width
 * (its weights are unknown). */
int ntk_widths_step(struct ntk_widths *w, const struct ntk_layer *l, size_t index, size_t hw);

/* LayerNorm layer l (layer `index` of its network) on data of `rank`
 * axes, the batch's included as stax counts them: 4 for images (N, H, W,
 * C), 3 for (N, L, C) sequences (held as L x 1 images), 2 for vectors
 * (a fully-connected network, or after the readout). Sets *over_h,
 * *over_w: whether the variances are averaged over the positions' rows
 * (H, or L), columns (W) before normalising (stax's axis, besides the
 * channels). Returns 0, or -1 with ntk_error set (NTK_ECONFIG) where stax
 * refuses the axes (the channels left out, an axis outside the rank) or
 * ntkd does (the batch axis: it couples the samples). */
int ntk_layernorm_axes(const struct ntk_layer *l, int rank, size_t index, int *over_h, int *over_w);

/* Aggregate layer l (layer `index`) on data of `rank` axes (as
 * ntk_layernorm_axes counts them): 0 where its aggregate_axis is every
 * spatial axis (None, or all of them written out: the one choice ntkd
 * computes), else -1 with ntk_error set (NTK_ECONFIG), naming the axes. */
int ntk_aggregate_axes(const struct ntk_layer *l, int rank, size_t index);

/* FanInConcat layer l (layer `index`) on data of `rank` axes (as
 * ntk_layernorm_axes counts them): 0 where it concatenates the channels
 * (the branches' kernels averaged), 1 along the rows (H, or L), 2 along
 * the columns (W): the branches' covariances then sit block-diagonally
 * over the concatenated positions (stax's _concat_kernels). Returns -1
 * with ntk_error set (NTK_ECONFIG) for an axis outside the rank or the
 * batch axis. */
int ntk_concat_axis(const struct ntk_layer *l, int rank, size_t index);

/* The parser's checks of neural-tangents' rules again, now that the
 * data's `rank` is known (as ntk_concat_axis counts it: 2 for vectors, 3
 * for (N, L, C), 4 for images): a FanInConcat along axis 1 or 2 joins the
 * channels of some data and a spatial axis of others, and only along a
 * spatial axis is its output Gaussian (a nonlinearity may follow it). */
ntk_status ntk_arch_check_rank(const struct ntk_arch *a, int rank);

/* The rank of a convolutional network's data (one_d: (N, L, C) sequences,
 * held as L x 1 images; w: the images' width): 3 for sequences, and for
 * images of width 1 read by 1-D layers; 4 for images. A 1-D conv or pooling
 * layer on images wider than 1 is refused, naming the layer (stax refuses
 * a size whose rank is not the data's; ntkd held such images as sequences
 * and blamed the first 2-D layer). Then ntk_arch_check_rank. */
ntk_status ntk_arch_data_rank(const struct ntk_arch *a, int one_d, int w, int *rank);

void ntk_arch_free(struct ntk_arch *arch);

/* True if every layer is one the fully-connected path computes
 * (Dense, nonlinearities, Identity, Flatten). */
int ntk_arch_is_fc(const struct ntk_arch *arch);

/* A float32 job computes a network of more nonlinear layers than this
 * (ntk_arch_float32_depth) on its data in float64 and rounds each value to
 * float32 once: each such layer pulls the correlations towards 1, where
 * float32's angle is known only to sqrt(u), and past ~64 layers of the
 * ReLU family the kernel leaves neural-tangents' 1e-5 (5.7e-2 off at
 * 1 000 ReLU layers, docs/MATH.md "Collinear inputs"). */
#define NTK_FLOAT32_MAX_NONLINEAR 64

/* The network's nonlinear layers (every branch's). */
size_t ntk_arch_nonlinear_layers(const struct ntk_arch *arch);

/* The same, each weighted by how fast float32's error grows through it
 * (measured): a Gelu counts 4, an ABRelu with a < 0 (Abs) 2, the others 1;
 * for the rule above. */
size_t ntk_arch_float32_depth(const struct ntk_arch *arch);

/* Whether a float32 job of `arch` computes in float64 and rounds each
 * value to float32 once: a float32 depth (ntk_arch_float32_depth) above
 * NTK_FLOAT32_MAX_NONLINEAR, a GlobalSelfAttention (it averages positions into outputs whose
 * cosines come within 1e-8 of 1: a Relu after it took float32's NTK 5e-4
 * off at 256 positions, a hunt), or a layer's scale whose square falls
 * below float32's normal range (ntk_arch_check_scales). `why` (cap bytes, may be NULL) gets the
 * reason, for messages: "65 nonlinear layers, more than 64". */
int ntk_arch_float32_widened(const struct ntk_arch *arch, char *why, size_t cap);

/* The scales that multiply a layer's variances, squared in the precision
 * of elem (4: float32, 8: float64): a Dense or Conv W_std, the a and b of
 * Erf and Sin, and the larger slope of ABRelu (Relu, LeakyRelu, Abs: its
 * maps take (a - b)^2 and a^2 + b^2). A square that is nonzero
 * but below the precision's smallest normal number keeps only a few bits
 * (none below its smallest subnormal), and the kernel after it the same
 * error, in range and unchecked: Dense(W_std=4e-23) on inputs scaled by
 * 1e8 gave a float32 NNGP 12 % off, float64 at W_std=1.3e-161 6e-3, both
 * with exit 0. NTK_ECONFIG naming the layer for such a scale (elem 4: the
 * CPU backend computes such a job in float64 instead, which is why
 * ntk_arch_float32_widened asks; elem 8 has no wider precision). */
ntk_status ntk_arch_check_scales(const struct ntk_arch *arch, int elem);
/* Whether a layer of `arch` is the nonlinearity `map_kind` (an ntk_map_kind). */
int ntk_arch_has_map(const struct ntk_arch *arch, int map_kind);

/* True if the layer maps every input to 0: a Dense or Conv with w_std = 0
 * and b_std = 0, a ReLU-family map with both slopes 0, an Erf, Sin, Exp or
 * Gaussian whose output is 0 whatever its input (a = 0, or b = 0 with no
 * shift c; Erf's c alone is a constant, not 0), a Polynomial of zeros. A
 * kernel of 0 after it is the network's value, not an underflow. */
int ntk_layer_vanishes(const struct ntk_layer *l);

/* Whether the value entering a layer is 0 by the network (a layer that
 * vanishes, above, on its path), walked layer by layer: zero-initialise,
 * read .zero before layer l, then ntk_vanish_step(v, l). A residual block
 * is 0 only where all its branches are (FanInSum, FanInConcat) or one is
 * (FanInProd): FanOut(2) parallel(Dense(W_std=0, b_std=0), Dense)
 * FanInSum carries the second branch, and a variance of 0 after it is an
 * underflow. Deeper blocks than NTK_BRANCH_MAXDEPTH: 0 assumed (lenient). */
struct ntk_vanish {
  int zero, depth;
  int in[16], all[16], any[16];
};
void ntk_vanish_step(struct ntk_vanish *v, const struct ntk_layer *l);

/* True if the layer's value depends on its input variances' ratios, not
 * their scale (Sign, RectifiedMonomial(0): the angle alone; LayerNorm
 * divides by the variance, 1/eps for a variance far below eps). It turns
 * a variance that lost its bits below the precision's normal range into
 * an O(1) value, which no check of the output can tell from a right one:
 * the variances entering it are judged instead (fc.c, cnn.c). */
int ntk_layer_scale_free(const struct ntk_layer *l);

/* True if the variances entering the layer are judged (fc.c, cnn.c): a
 * scale-free layer's, and those of a map computed from the angle between
 * the pair, c / sqrt(q q') (Relu, LeakyRelu, Abs, ABRelu with a != b,
 * RectifiedMonomial). A variance that lost its bits below the precision's
 * normal range, or underflowed to 0, gives that angle wrong: kernel_fn(x1,
 * x2) with x1's sample scaled by 1e-30 (float32, Relu, b_std = 0) came
 * back 164 % off with exit 0, its products with x2 in range (a hunt); the
 * same data against itself were refused by the diagonal's check, which a
 * cross block does not have. */
int ntk_layer_variance_judged(const struct ntk_layer *l);

/* The refusal of such a variance (NTK_ENONFINITE, exit 8), one text for
 * fc.c's samples and cnn.c's images: `who` names the sample or image
 * ("sample 3"), `where` the position or "", `what` the value; layer is
 * 0-based, elem the precision's bytes. */
ntk_status ntk_variance_refusal(const char *who, size_t layer, const struct ntk_layer *l, const char *where,
                                const char *what, int elem);

/* The same for a variance past the precision's range (inf or NaN: the
 * data's squares, or the layers before, overflowed). It was taken for an
 * underflow ("is 0 ... scale the data up": float32 data of 1e20 through two
 * Conv-Relu layers), whose advice makes it worse. */
ntk_status ntk_variance_overflow(const char *who, size_t layer, const struct ntk_layer *l, const char *where,
                                 double v, int elem);

/* Index layer l (layer `index`) on data of `rank` axes (3: (N, L, C), 4:
 * (N, H, W, C)): the positions it keeps along spatial axis `axis` (1 the
 * rows or L, 2 the columns) of n, as Python's slice does, into out (n
 * entries at most), their count into *m. Returns 0, or -1 with ntk_error
 * set (NTK_ECONFIG) for an idx stax's kernel_fn refuses or ntkd does (more
 * items than axes, an integer, which drops the axis, a batch or channel
 * item other than ':', a step of 0, no position kept). */
int ntk_index_axis(const struct ntk_layer *l, int rank, size_t index, int axis, size_t n, size_t *out, size_t *m);

/* Canonical text: every layer with all its parameters spelled out, so two
 * strings that denote the same network give the same text. Writes at most
 * `cap` bytes including the NUL; returns the length it needed. */
size_t ntk_arch_canonical(const struct ntk_arch *arch, char *buf, size_t cap);

/* The longest text of one layer, its NUL included: a Polynomial of 32
 * coefficients of up to 24 characters each and its separators is under
 * 900 bytes; every other layer under 300. A buffer of this size holds any
 * layer whole (a cut one would give two networks one job identity). */
#define NTK_LAYER_TEXT_MAX 2048

/* The same for one layer ("Dense(W_std=1.5, b_std=0)"); snprintf's contract. */
size_t ntk_arch_layer_canonical(const struct ntk_layer *layer, char *buf, size_t cap);

/* Layer i of arch, with its width and bias where the parameterisation is
 * standard (they matter there). */
size_t ntk_arch_layer_canonical_param(const struct ntk_arch *arch, size_t i, char *buf, size_t cap);

#endif
