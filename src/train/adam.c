/* Adam's update (Chainer's form, which is where the subnormal slowdown was
 * reported). A plain loop the compiler vectorises; whether subnormals are
 * flushed is the calling thread's MXCSR, set by ntk_cpu_flush_denormals. */
#include <math.h>

#include "ntkd/train.h"

void ntk_adam_update(const struct ntk_adam *h, uint64_t t, float gscale, float *p, float *m, float *v,
                     const float *g, size_t n) {
  /* The bias corrections in double: beta^t for large t is tiny, and one
   * rounding here per step keeps every rank's lr bit-identical. */
  double fix1 = 1.0 - pow(h->beta1, (double)t), fix2 = 1.0 - pow(h->beta2, (double)t);
  float lr = (float)(h->alpha * sqrt(fix2) / fix1);
  float a1 = (float)(1.0 - h->beta1), a2 = (float)(1.0 - h->beta2), eps = (float)h->eps;
  for (size_t i = 0; i < n; i++) {
    float gi = g[i] * gscale;
    m[i] += a1 * (gi - m[i]);
    v[i] += a2 * (gi * gi - v[i]);
    p[i] -= lr * m[i] / (sqrtf(v[i]) + eps);
  }
}
