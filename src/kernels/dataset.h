/* What the kernels compute on: N samples of d features, as read (the
 * readers are job/data.c), in the working precision. */
#ifndef NTKD_DATASET_H
#define NTKD_DATASET_H

#include <stddef.h>

struct ntk_dataset {
  size_t n, d;       /* samples, features per sample (h*w*c for images) */
  size_t h, w, c;    /* image shape, NHWC order; h = w = 0 for flat data */
  int elem;          /* 4 (float) or 8 (double) */
  void *x;           /* n*d elements, owned; free with ntk_data_free() */
  size_t n_train;    /* regression jobs: rows 0..n_train-1 train, the rest test; 0: no split */
  int one_d;         /* (N, L, C) sequences held as L x 1 images (h = L, w = 1): a layer's axes count as
                        in a 3-D array (LayerNorm's axis); 0 for images and flat data */
};

#endif
