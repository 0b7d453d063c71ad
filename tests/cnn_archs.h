/* What the CNN tests share: the convolutional networks they run (every
 * path: same-position, slices, bands before Flatten, pooling, strides,
 * CIRCULAR and VALID padding, a fully-connected tail with
 * nonlinearities), random images, and gathering tiles into whole
 * matrices. Used by test_cnn.c (fast paths against the general one) and
 * test_cnn_gpu.c (the GPU kernels, emulated, against the CPU). */
#ifndef NTKD_TEST_CNN_ARCHS_H
#define NTKD_TEST_CNN_ARCHS_H

#include <stdlib.h>

#include <string.h>

#include "kernels/arch.h"
#include "job/data.h"
#include "base/tiling.h"

/* Tile tl of NNGP bg and NTK bt (row-major, elements of es bytes) into the
 * n x n double matrices g and t, and mirrored above the diagonal. */
static inline void scatter_tile(const struct ntk_tile *tl, const void *bg, const void *bt, size_t es, size_t n,
                                double *g, double *t) {
  for (size_t i = 0; i < tl->rows; i++)
    for (size_t j = 0; j < tl->cols; j++) {
      size_t I = tl->r0 + i, J = tl->c0 + j, src = i * tl->cols + j;
      g[I * n + J] = g[J * n + I] = es == 4 ? ((const float *)bg)[src] : ((const double *)bg)[src];
      t[I * n + J] = t[J * n + I] = es == 4 ? ((const float *)bt)[src] : ((const double *)bt)[src];
    }
}

/* n random h x w x c images in [-1, 1), elements of `elem` bytes. */
static inline void random_images(struct ntk_dataset *ds, size_t n, size_t h, size_t w, size_t c, int elem,
                                 unsigned seed) {
  memset(ds, 0, sizeof *ds); /* no split, no pattern */
  ds->n = n;
  ds->h = h;
  ds->w = w;
  ds->c = c;
  ds->d = h * w * c;
  ds->elem = elem;
  ds->one_d = 0; /* images; a test sets (N, L, C) data itself */
  ds->x = malloc(n * ds->d * (size_t)elem);
  unsigned s = seed;
  for (size_t k = 0; k < n * ds->d; k++) {
    s = s * 1103515245u + 12345u;
    double v = (double)((s >> 8) & 0xffff) / 32768.0 - 1.0;
    if (elem == 4) ((float *)ds->x)[k] = (float)v;
    else ((double *)ds->x)[k] = v;
  }
}

/* Whether the GPU refuses a network of archs[] (ntk_backend_gpu_computes):
 * ElementwiseNumerical, ConvTranspose, GlobalSelfAttention, ImageResize, and a ConvLocal where a pooling
 * layer reads its zeros between positions. */
static inline int gpu_refuses(const char *arch) {
  return strstr(arch, "ElementwiseNumerical") || strstr(arch, "ConvTranspose") || strstr(arch, "GlobalSelfAttention") ||
         strstr(arch, "ImageResize") ||
         (strstr(arch, "ConvLocal") && strstr(arch, "Pool"));
}

static const char *const archs[] = {
    "Conv(3, 1, SAME) Gabor Conv(3, 1, SAME, W_std=1.5) Gabor GlobalAvgPool Dense Gabor Dense", /* a map of stax's */
    "Conv(3, 1, SAME) Relu Conv(3, 1, SAME) Erf GlobalAvgPool Dense",
    "Conv(3, 1, SAME, W_std=1.5, b_std=0.1) Relu Conv(2, 1, SAME) Relu GlobalAvgPool Dense Relu Dense",
    "Conv(3, 1, SAME) Relu AvgPool(2) Conv(3, 1, SAME) Relu GlobalAvgPool Dense",
    "Conv(3, 2, SAME) Relu Conv(3, 1, VALID) Abs GlobalAvgPool Dense",
    "Conv(3, 1, CIRCULAR) LeakyRelu(0.1) Conv(3, 1, SAME) Relu GlobalAvgPool",
    "Conv(3, 1, SAME) Relu Conv(3, 1, SAME) Relu Flatten Dense",
    "Conv(3, 2, VALID) Erf Conv(2, 1, CIRCULAR) Relu Flatten Dense(b_std=0.2) Erf Dense",
    "Dense Relu Conv(3, 1, SAME) Relu Flatten Dense",
    "Conv(3, 1, SAME) Relu AvgPool(2, 1) Conv(3, 1, SAME) Relu Flatten Dense",
    /* pooling before Flatten: the SLICE path computes only a band of offsets */
    "Conv(3, 1, SAME) Relu AvgPool(2) Conv(3, 1, SAME) Relu AvgPool(2, 1) Flatten Dense",
    "Conv(3, 1, SAME) Relu AvgPool(2, 1) Conv(3, 2, SAME) Relu Flatten Dense",
    "Conv(3, 1, SAME) Erf AvgPool(2, 1) Conv(3, 1, CIRCULAR) Relu Flatten Dense",
    "AvgPool(3, 1) Conv(2, 1, SAME) Relu AvgPool(2, 1) Flatten Dense",
    /* no spatial layer at all; Dense and Identity inside a slice run */
    "GlobalAvgPool Dense(b_std=0) Relu Dense",
    "Dense(W_std=1.2) Relu Conv(3, 1, SAME) Identity Erf GlobalAvgPool Dense",
    /* the maps beyond ABRelu and Erf(1, 1, 0): not fused on the GPU, the generic loops on the CPU */
    "Conv(3, 1, SAME) Gelu Conv(3, 1, SAME) ABRelu(-0.3, 1.7) GlobalAvgPool Dense Erf(1.5, 0.7, 0.2) Dense",
    "Conv(3, 1, VALID) Sigmoid_like Conv(2, 1, SAME) Gelu Flatten Dense Gelu Dense",
    "Conv(3, 1, SAME) Sin(1.2, 0.8, 0.3) Conv(3, 1, SAME) Polynomial([0.2, 1, -0.4]) GlobalAvgPool Dense Sign Dense",
    "Conv(3, 1, SAME, W_std=0.8) Exp(0.7, 0.5) AvgPool(2) Conv(3, 1, SAME) Monomial(2) Flatten Dense "
    "ExpNormalized(1.1, -0.9) Dense",
    "Conv(3, 1, SAME) LayerNorm Relu Conv(3, 1, SAME) LayerNorm(eps=0.5) Erf GlobalAvgPool Dense LayerNorm Dense",
    "Conv(3, 1, SAME) Relu SumPool(2, 1) Conv(3, 1, SAME) Relu GlobalSumPool Dense",
    "Conv(3, 1, SAME) Relu Conv(3, 1, SAME) Relu GlobalSumPool Dense Relu Dense",
    "Conv(3, 1, SAME) Relu AvgPool((3, 3), (2, 2), 'SAME', normalize_edges=True) Conv(2, 1, SAME) Relu "
    "AvgPool(2, 1, padding=SAME) Flatten Dense",
    /* residual blocks: on the GPU, FORK, NEXT and JOIN run on the full covariance between slice runs */
    "Conv(3, 1, SAME) [FanOut(2) parallel(serial(Relu Conv(3, 1, SAME) Relu Conv(3, 1, SAME)), Identity) FanInSum]*2 "
    "Relu GlobalAvgPool Dense",
    "Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 2, SAME)), Conv(3, 2, SAME)) FanInSum "
    "FanOut(3) parallel(Identity, serial(Erf Conv(3, 1, SAME)), Conv(1)) FanInConcat GlobalAvgPool Dense",
    "Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 1, SAME) Relu Conv(3, 1, SAME)), Identity) FanInSum "
    "Relu AvgPool(2, 1) Flatten Dense",
    /* WideResNet-shaped: strided blocks after a slice run, so that the runs compute only the multiples
     * of 4 and 2 of their offsets (cnn_op.mh, mw), the readout an AvgPool over the last 2 x 2 */
    "Conv(4, (3, 3), padding='SAME') FanOut(2) parallel(serial(Relu, Conv(4, (3, 3), padding='SAME'), Relu, "
    "Conv(4, (3, 3), padding='SAME')), Identity) FanInSum FanOut(2) parallel(serial(Relu, Conv(4, (3, 3), (2, 2), "
    "padding='SAME'), Erf, Conv(4, (3, 3), padding='SAME')), Conv(4, (3, 3), (2, 2), padding='SAME')) FanInSum "
    "FanOut(2) parallel(serial(Relu, Conv(4, (3, 3), (2, 2), padding='SAME'), Relu, Conv(4, (3, 3), "
    "padding='SAME')), Conv(4, (1, 1), (2, 2))) FanInSum Relu AvgPool((2, 2)) Flatten Dense",
    /* Offset lattices (cnn_op.mh, mw) of other shapes: rectangular strides (lattice 2 x 3 before them,
     * Gelu: the GPU's SLICE_ANY kernel), branches of strides 4 and 2 (the block's input takes their gcd,
     * 2), a FanInProd of a strided and a CIRCULAR branch, three strided stages (lattice 8 past the image),
     * nested strided blocks, a stride past the filter (1 x 1 stride 3), and the standard parameterisation */
    "Conv(3, 1, SAME) Gelu Conv(4, (3, 3), strides=(2, 1), padding='SAME') Relu Conv(4, (2, 2), strides=(1, 3), "
    "padding='SAME') Erf GlobalAvgPool Dense",
    "Conv(5, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 4, SAME)), Conv(3, 2, VALID)) FanInSum Relu "
    "Conv(3, 1, SAME) Relu GlobalAvgPool Dense",
    "Conv(3, 1, SAME) FanOut(2) parallel(serial(Erf Conv(3, 2, SAME)), Conv(1, 2, CIRCULAR)) FanInProd "
    "Conv(3, 1, SAME) Relu AvgPool(2, 1) Flatten Dense",
    "Conv(3, 1, SAME) Gelu [Conv(3, 2, SAME) Relu]*3 GlobalAvgPool Dense",
    "Conv(3, 1, SAME) FanOut(2) parallel(serial(FanOut(2) parallel(Conv(3, 2, SAME), serial(Relu Conv(1, 2, SAME))) "
    "FanInSum Relu Conv(3, 1, SAME)), Conv(3, 2, SAME)) FanInSum Gelu Conv(4, (2, 2), strides=(2, 1), "
    "padding='SAME') Relu GlobalAvgPool Dense",
    "Conv(2, 1, SAME) Relu Conv(1, 3, SAME) Gelu Conv(2, 1, SAME) Relu GlobalSumPool Dense",
    /* a strided block's first branch ending at the smaller size, the next starting with stride-1
     * convolutions at the block input's: the borders a NEXT restores (slice_branch) */
    "Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 2, SAME) Relu Conv(3, 1, SAME)), serial(Conv(3, 1, "
    "SAME) Relu Conv(3, 1, SAME) Conv(1, 2, SAME))) FanInSum Relu GlobalAvgPool Dense",
    "standard: Conv(4, (3, 3), padding=SAME) Gelu Conv(4, (3, 3), strides=(2, 1), padding=SAME) Relu "
    "Conv(4, (1, 1), strides=(1, 2)) Relu GlobalAvgPool Dense",
    /* 33 strided stages: the first one's output lattice 2^32, which as an int was 0 (the GPU's CONV_FULL
     * divided by it); a lattice past the size is kept as the size */
    "Conv(3, 1, SAME) [Conv(3, 2, SAME) Relu]*33 GlobalAvgPool Dense",
    /* FanInConcat of unequal widths (weighted by them, as stax), and residual blocks after the readout */
    "Conv(4, (3, 3), padding=SAME) FanOut(3) parallel(serial(Relu Conv(8, (3, 3), padding=SAME)), Identity, "
    "serial(Erf Conv(2, (1, 1)))) FanInConcat Conv(3, 1, SAME) Relu GlobalAvgPool Dense",
    "Conv(3, 1, SAME) Relu AvgPool(2, 1) Flatten Dense(8) FanOut(2) parallel(serial(Relu Dense(8)), Identity) "
    "FanInSum Relu Dense",
    "Conv(3, 1, SAME) Relu GlobalAvgPool Dense(4) FanOut(2) parallel(serial(Erf Dense(12)), Identity) FanInConcat "
    "Dense Relu Dense",
    /* Myrtle-style: runs joined by pooling into GAP, batched on the CPU
     * (b_pair_multi): two poolings, overlapping windows, SAME windows
     * normalised at the edges */
    "Conv(3, 1, SAME) Relu AvgPool(2) Conv(3, 1, SAME) Relu AvgPool(2) Conv(3, 1, SAME) Relu GlobalAvgPool Dense",
    "Conv(3, 1, SAME) Relu AvgPool(3, 2) Conv(3, 1, SAME) Erf GlobalAvgPool Dense Relu Dense",
    "Conv(3, 1, SAME) Relu AvgPool((3, 3), (2, 2), 'SAME', normalize_edges=True) Conv(2, 1, SAME) Relu "
    "GlobalAvgPool Dense",
    /* residual blocks on the same-position path (Flatten without pooling; a strided block) */
    "Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 1, VALID)), Conv(3, 1, VALID)) FanInSum Relu Flatten "
    "Dense",
    "Conv(4, (3, 3), padding=SAME) FanOut(3) parallel(serial(Relu Conv(4, (3, 3), strides=(2, 2), padding=SAME)), "
    "Conv(8, (1, 1), strides=(2, 2)), serial(Erf Conv(2, (3, 3), strides=(2, 2), padding=SAME))) FanInConcat "
    "Conv(3, 1, SAME) Relu Flatten Dense",
    /* ConvLocal (unshared weights, zero between positions): as a Conv on the same-position path, and on the
     * general one with a strided ConvLocal, pooling and GlobalAvgPool (the GPU refuses these) */
    "ConvLocal(3, 1, SAME, b_std=0.1) Relu Conv(3, 2, VALID) Erf ConvLocal(2, 1, CIRCULAR) Relu Flatten Dense",
    "Conv(3, 1, SAME) Relu ConvLocal(4, (2, 2), strides=(2, 1), b_std=0.2) Relu AvgPool(2, 1) ConvLocal(2, 1, SAME) "
    "Erf GlobalAvgPool Dense",
    /* ConvTranspose (the general path only; the image grows) */
    "ConvTranspose(2, 2, SAME, b_std=0.1) Relu Conv(3, 2, VALID) Erf ConvTranspose(3, 1, CIRCULAR) Relu Flatten Dense",
    /* GlobalSelfAttention (the general path only; every position with every other) */
    "Conv(3, 1, SAME) Relu GlobalSelfAttention(4, 4, 4, 2, pos_emb_type='SUM', b_std=0.1) Relu AvgPool(2, 1) "
    "GlobalSelfAttention(4, 4, 4, 1, False, attention_mechanism='IDENTITY') Erf GlobalAvgPool Dense",
    /* ImageResize (the general path only): up, down, one axis kept, through a residual branch; a long thin
     * resize whose passes hold more than the input's and output's covariances (plan_resize's resize_cells) */
    "Conv(3, 1, SAME) ImageResize((-1, 9, 3, -1), 'linear') Relu Conv(2, 1, SAME) FanOut(2) parallel(Identity, "
    "serial(ImageResize((-1, 4, 5, -1), 'nearest'), ImageResize((-1, 9, 3, -1), 'linear', antialias=False))) "
    "FanInSum Relu GlobalAvgPool Dense",
    "Conv(3, 1, SAME) ImageResize((-1, 1, 12, -1), 'linear') Erf Conv(1) ImageResize((-1, 12, 1, -1), 'linear') Relu "
    "Flatten Dense",
    /* FanInProd: a slice-local block, a strided one (the full covariance), the same-position path, the tail */
    "Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 1, SAME)), Conv(1, 1, SAME)) FanInProd Conv(3, 1, SAME) Relu "
    "GlobalAvgPool Dense",
    "Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 2, SAME)), Conv(3, 2, SAME)) FanInProd AvgPool(2, 1) "
    "Flatten Dense",
    "Conv(3, 1, VALID) FanOut(3) parallel(serial(Erf Conv(1)), Conv(1), Identity) FanInProd Flatten Dense Relu Dense",
    "Conv(3, 1, SAME) Relu GlobalAvgPool Dense(4) FanOut(2) parallel(serial(Erf Dense(4)), Identity) FanInProd "
    "Dense Relu Dense",
    /* CIRCULAR pooling: wrapped windows on the full covariance; uneven padding, a window wider than its input */
    "Conv(3, 1, SAME) Relu AvgPool((3, 3), (2, 2), CIRCULAR) Conv(3, 1, SAME) Relu SumPool(2, 1, CIRCULAR) "
    "Conv(3, 1, SAME) Relu GlobalAvgPool Dense",
    "Conv(3, 1, VALID) Relu AvgPool((5, 2), (1, 1), CIRCULAR) Flatten Dense",
    /* rectangular filters, windows and strides, and 1-D-shaped ones */
    "Conv(4, (3, 5), strides=(1, 2), padding=SAME) Relu Conv(4, (2, 3), padding=SAME) Relu GlobalAvgPool Dense",
    "Conv(4, (1, 3), padding=SAME) Relu AvgPool((2, 1), strides=(1, 1)) Conv(4, (3, 1)) Relu Flatten Dense",
    "Conv(4, (1, 3), padding=SAME) Relu AvgPool((2, 1), strides=(2, 1)) Conv(4, (3, 1), padding=SAME) Relu "
    "GlobalAvgPool Dense",
    "Conv(4, (3, 1), padding=CIRCULAR) Erf Conv(4, (2, 3), strides=(2, 1)) Relu Flatten Dense",
    "Conv(4, (1, 3), padding=SAME) Relu AvgPool((3, 2), strides=(2, 1), padding=SAME, normalize_edges=True) "
    "Conv(4, (3, 3), padding=SAME) Relu Flatten Dense",
    /* ElementwiseNumerical: by quadrature, per entry through the generic loops */
    "Conv(3, 1, SAME) ElementwiseNumerical(jnp.tanh, 9) Conv(3, 1, SAME) Relu GlobalAvgPool Dense "
    "ElementwiseNumerical(jax.nn.silu) Dense",
    /* standard parameterisation: the NTK's affine maps take the fan-ins */
    "standard: Conv(8, (3, 3), padding=SAME, W_std=1.5, b_std=0.1) Relu Conv(4, (3, 3), padding=SAME) Erf "
    "GlobalAvgPool Dense(8) Relu Dense",
    "standard: Conv(6, (3, 3), b_std=0.2) Relu Dense(5, b_std=None) Conv(4, (2, 2), padding=SAME, b_std=None) Relu "
    "Flatten Dense(8) Gelu Dense",
    "standard: Conv(8, (3, 3), strides=(2, 2), padding=SAME) Relu AvgPool((2, 2), strides=(1, 1)) "
    "Conv(4, (3, 2), padding=SAME) Relu Flatten Dense",
    "standard: Conv(4, (3, 3), padding=SAME) FanOut(2) parallel(serial(Relu, Conv(8, (3, 3), padding=SAME), Relu, "
    "Conv(4, (3, 3), padding=SAME)), Identity) FanInSum Relu GlobalAvgPool Dense(6) FanOut(2) parallel(serial(Relu, "
    "Dense(12)), Identity) FanInConcat Dense",
    /* strided and VALID convolutions inside the slice runs (plan_chain): offsets falling off a VALID output,
     * a slice-local block inside a strided one, a strided block inside a strided one, a three-way FanInProd,
     * unequal stride products (no chain), LayerNorm after strided and VALID convolutions (not Dropout nor
     * LayerNorm over positions: the GPU's kernels refuse them) */
    "Conv(3, 1, VALID) Relu Conv(2, 2, VALID) Relu Conv(1, 1, SAME) Erf GlobalAvgPool Dense",
    "Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 2, SAME) FanOut(2) parallel(serial(Relu "
    "Conv(3, 1, SAME)), Identity) FanInSum), Conv(1, 2, SAME)) FanInSum Conv(1) Relu GlobalAvgPool Dense",
    "Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 2, SAME)), "
    "Conv(1, 2, SAME)) FanInSum Conv(1) Relu Conv(2, 1, SAME)), Conv(3, 2, SAME)) FanInSum Conv(1) Relu Flatten Dense",
    "Conv(3, 1, SAME) FanOut(3) parallel(serial(Relu Conv(3, 2, SAME)), Conv(1, 2, SAME), serial(Relu "
    "Conv(1, 2, VALID))) FanInProd Conv(1) Relu Flatten Dense",
    "Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 2, SAME)), Conv(4, (4, 3), padding=VALID)) FanInSum "
    "Conv(1) Relu GlobalAvgPool Dense",
    "Conv(3, 2, SAME) Relu Conv(3, 1, VALID) LayerNorm Erf Conv(1) Relu GlobalAvgPool "
    "Dense",
    "standard: Conv(4, (3, 3), strides=(2, 1), padding=SAME) Relu Conv(4, (2, 2), padding=VALID) Relu "
    "Conv(4, (1, 1), strides=(1, 3)) Relu GlobalAvgPool Dense",
};

/* An entry of the lists above: "standard: " in front asks for
 * parameterization = standard; layers without W_std, b_std get w, b. */
static inline ntk_status test_arch_parse(const char *text, double w, double b, struct ntk_arch *arch) {
  int standard = !strncmp(text, "standard: ", 10);
  return ntk_arch_parse_param(standard ? text + 10 : text, w, b, standard, arch);
}

#endif
