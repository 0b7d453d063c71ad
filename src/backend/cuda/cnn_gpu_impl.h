/* The per-precision part of src/backend/cuda/cnn_gpu.c, written once:
 * cnn_gpu.c includes this file through each_precision.h (REAL; store
 * becomes store_f / store_d). */

#define store SFX(store)

/* The np results o (NNGP, NTK pairs) of a batch of pairs pa[k], pb[k]
 * (tile coordinates) into the tile's nngp and ntk (NULL: none), mirrored
 * on a diagonal tile. */
static void store(const REAL *o, size_t np, const unsigned *pa, const unsigned *pb, size_t cols, int diag,
                  REAL *nngp, REAL *ntk) {
  for (size_t k = 0; k < np; k++) {
    size_t i = pa[k], j = pb[k];
    nngp[i * cols + j] = o[2 * k];
    if (ntk) ntk[i * cols + j] = o[2 * k + 1];
    if (diag) {
      nngp[j * cols + i] = o[2 * k];
      if (ntk) ntk[j * cols + i] = o[2 * k + 1];
    }
  }
}

#undef store
