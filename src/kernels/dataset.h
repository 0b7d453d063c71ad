/* What the kernels compute on: N samples of d features, as read (the
 * readers are job/data.c), in the working precision. */
#ifndef NTKD_DATASET_H
#define NTKD_DATASET_H

#include <stddef.h>
#include <stdint.h>

struct ntk_dataset {
  size_t n, d;       /* samples, values per sample: its features (h*w*c for images), then its pattern */
  size_t h, w, c;    /* image shape, NHWC order; h = w = 0 for flat data */
  int elem;          /* 4 (float) or 8 (double) */
  void *x;           /* n*d elements, owned; free with ntk_data_free() */
  size_t n_train;    /* regression jobs: rows 0..n_train-1 train, the rest test; 0: no split */
  int one_d;         /* (N, L, C) sequences held as L x 1 images (h = L, w = 1): a layer's axes count as
                        in a 3-D array (LayerNorm's axis); 0 for images and flat data */
  size_t pattern;    /* a graph's pattern, for its Aggregate layers: each sample's row holds V x V more values
                        after its h*w*c features, V the positions the Aggregates see (h w, or fewer after a
                        pooling: the CNN plan checks it), pattern[i][j] the weight of the edge from position i to
                        j (neural-tangents' dense pattern, the sample's axis left out); 0: none (d = h*w*c) */
};

static inline int ntk_dataset_any_nonzero_(const struct ntk_dataset *ds, size_t i, size_t from, size_t to) {
  if (ds->elem == 4) {
    const uint32_t *b = (const uint32_t *)((const float *)ds->x + i * ds->d);
    for (size_t k = from; k < to; k++)
      if (b[k] & 0x7fffffffu) return 1;
  } else {
    const uint64_t *b = (const uint64_t *)((const double *)ds->x + i * ds->d);
    for (size_t k = from; k < to; k++)
      if (b[k] & 0x7fffffffffffffffull) return 1;
  }
  return 0;
}

/* Whether sample i has a value that is not +-0 (by the bits: a subnormal
 * counts, as it does under DAZ too): among its features, and, where it has
 * a pattern, among its pattern's too (a graph without edges aggregates to
 * 0, which is then its value). */
static inline int ntk_dataset_sample_nonzero(const struct ntk_dataset *ds, size_t i) {
  size_t f = ds->d - ds->pattern;
  return ntk_dataset_any_nonzero_(ds, i, 0, f) && (!ds->pattern || ntk_dataset_any_nonzero_(ds, i, f, ds->d));
}

#endif
