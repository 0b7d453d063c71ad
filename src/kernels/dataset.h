/* What the kernels compute on: N samples of d features, as read (the
 * readers are job/data.c), in the working precision. */
#ifndef NTKD_DATASET_H
#define NTKD_DATASET_H

#include <stddef.h>
#include <stdint.h>

struct ntk_dataset {
  size_t n, d;       /* samples, features per sample (h*w*c for images) */
  size_t h, w, c;    /* image shape, NHWC order; h = w = 0 for flat data */
  int elem;          /* 4 (float) or 8 (double) */
  void *x;           /* n*d elements, owned; free with ntk_data_free() */
  size_t n_train;    /* regression jobs: rows 0..n_train-1 train, the rest test; 0: no split */
  int one_d;         /* (N, L, C) sequences held as L x 1 images (h = L, w = 1): a layer's axes count as
                        in a 3-D array (LayerNorm's axis); 0 for images and flat data */
};

/* Whether sample i has a value that is not +-0 (by the bits: a subnormal
 * counts, as it does under DAZ too). */
static inline int ntk_dataset_sample_nonzero(const struct ntk_dataset *ds, size_t i) {
  if (ds->elem == 4) {
    const uint32_t *b = (const uint32_t *)((const float *)ds->x + i * ds->d);
    for (size_t k = 0; k < ds->d; k++)
      if (b[k] & 0x7fffffffu) return 1;
  } else {
    const uint64_t *b = (const uint64_t *)((const double *)ds->x + i * ds->d);
    for (size_t k = 0; k < ds->d; k++)
      if (b[k] & 0x7fffffffffffffffull) return 1;
  }
  return 0;
}

#endif
