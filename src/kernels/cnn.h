/* Convolutional kernels on the CPU (Conv, AvgPool, Flatten, GlobalAvgPool
 * with Dense and the nonlinearities), pair by pair, in memory bounded by the
 * image size and the tile, never by N. MPI-free, no I/O. */
#ifndef NTKD_CNN_H
#define NTKD_CNN_H

#include "kernels/arch.h"
#include "kernels/dataset.h"
#include "base/status.h"
#include "base/stop.h"
#include "base/tiling.h"

typedef enum ntk_cnn_path {
  NTK_CNN_AUTO = 0,
  NTK_CNN_DIAG,    /* Flatten readout, no pooling: only same-position entries */
  NTK_CNN_SLICE,   /* runs of stride-1 SAME convs per diagonal slice, fused */
  NTK_CNN_GENERAL, /* the full spatial covariance, layer by layer */
} ntk_cnn_path;

typedef struct ntk_cnn ntk_cnn_t;

/* True if `arch` on `data` needs the CNN path: the data are images and the
 * network has Conv, AvgPool, GlobalAvgPool, or a Flatten after its first
 * layer (a Dense before Flatten acts per position, as in stax). */
int ntk_cnn_applies(const struct ntk_arch *arch, const struct ntk_dataset *data);

/* Whether `arch` computes on `data` as a convolutional network: its plan
 * (every layer against the image's size), what ntk_cnn_create refuses,
 * without its buffers. NTK_ECONFIG with the reason. Pure. */
ntk_status ntk_cnn_check(const struct ntk_arch *arch, const struct ntk_dataset *data);

/* Plan the computation; `path` NTK_CNN_AUTO picks the fastest valid one.
 * Errors (NTK_ECONFIG): no readout, flat data, an impossible layer size.
 * `arch`, `data` and `stop` (may be NULL) must outlive the context. Its
 * tiles poll stop's flags inside each pair (per layer, per offset of a
 * slice run, per row of a full covariance) and count their finished
 * entries into it. Rank-local. */
ntk_status ntk_cnn_create(const struct ntk_arch *arch, const struct ntk_dataset *data, ntk_cnn_path path,
                          const struct ntk_stop *stop, ntk_cnn_t **out);
void ntk_cnn_free(ntk_cnn_t *c);

/* The path the plan uses. */
ntk_cnn_path ntk_cnn_get_path(const ntk_cnn_t *c);

/* Whether tiles go 16 images at a time in SIMD lanes (the batched kernels,
 * src/kernels/cnn_batch_impl.h) rather than pair by pair. */
int ntk_cnn_batched(const ntk_cnn_t *c);

/* Fill tile t (rows x cols, row-major, the data's precision); ntk may be
 * NULL. Per-image self-covariances are computed for the tile's images only.
 * NTK_EINTERRUPTED (the values then garbage) when the stop flag is seen. */
ntk_status ntk_cnn_tile(ntk_cnn_t *c, const struct ntk_tile *t, void *nngp, void *ntk);

/* A slot of an image's variance block (the CPU's and the GPU's layout,
 * ntk_dev_plan's var_off and tail_off) that enters a scale-free layer
 * or an angle map (ntk_layer_variance_judged: Sign, LayerNorm, Relu...): `count`
 * values at `off`, positions row-major `w` wide, or one value after the
 * readout (tail); `layer` its index in the arch. */
struct ntk_cnn_judged {
  size_t off, count, w, layer;
  size_t step; /* elements from one position's variance to the next: 1 (the GPU's blocks: NTK_DEV_VSLOT) */
  int tail;
};

/* The slots of `arch` on `data` to judge, into out (arch->n entries at
 * most); *n their number. */
ntk_status ntk_cnn_judged_slots(const struct ntk_arch *arch, const struct ntk_dataset *data,
                                struct ntk_cnn_judged *out, size_t *n);

/* One image's variance block (the data's precision) at those slots: a
 * variance below the precision's normal range has kept only a few bits and
 * the layer would make an O(1) value of it, wrong with nothing in the
 * output to show it. A 0 is the image's value where the image is zeros or
 * a layer on the path maps everything to 0 (ntk_vanish_step); at a
 * position, also where the window sees only zeros (a border, a blank
 * region): where `oracle`, the block of the image with each nonzero value
 * set to 1, is 0 too. Without an oracle (NULL) such a 0 is kept and *need
 * (unless NULL) set. NTK_ENONFINITE naming the image, layer, position and
 * value (exit 8). */
ntk_status ntk_cnn_judge_vars(const struct ntk_arch *arch, const struct ntk_dataset *data,
                              const struct ntk_cnn_judged *slots, size_t n, const void *block, size_t image,
                              const void *oracle, int *need);

/* Image `image`'s variance block computed by the CPU and judged with its
 * oracle (ntk_cnn_judge_vars): for a block judged without one (the GPU's)
 * that had a 0 where a window of zeros and an underflow look alike. */
ntk_status ntk_cnn_judge_image(ntk_cnn_t *c, size_t image);

#endif
