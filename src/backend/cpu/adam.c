/* Adam's update (Chainer's form, which is where the subnormal slowdown was
 * reported). A plain loop the compiler vectorises; whether subnormals are
 * flushed is the calling thread's MXCSR, set by ntk_cpu_flush_denormals. */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "backend/mlp.h"

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

size_t ntk_train_first_nonfinite(const float *x, size_t n) {
  /* Blocks of 1024 without a branch (vectorised), then the block again to
   * find the first: the common case, all finite, is one pass. */
  for (size_t b = 0; b < n; b += 1024) {
    size_t end = n - b < 1024 ? n : b + 1024;
    int bad = 0;
    for (size_t i = b; i < end; i++) bad |= !(fabsf(x[i]) <= FLT_MAX);
    if (bad)
      for (size_t i = b; i < end; i++)
        if (!(fabsf(x[i]) <= FLT_MAX)) return i;
  }
  return n;
}

int ntk_adam_state_problem(const float *p, const float *m, const float *v, size_t n, char *why, size_t cap) {
  const float *arr[3] = {p, m, v};
  static const char *const name[3] = {"parameter", "Adam's m", "Adam's v"};
  for (int a = 0; a < 3; a++) {
    size_t i = ntk_train_first_nonfinite(arr[a], n);
    /* v is a running mean of squares: never below 0 (-0 under FTZ is fine). */
    if (a == 2)
      for (size_t j = 0; j < i; j++)
        if (v[j] < 0) {
          i = j;
          break;
        }
    if (i < n) {
      float x = arr[a][i];
      char val[32];
      if (isnan(x)) snprintf(val, sizeof val, "NaN");
      else snprintf(val, sizeof val, "%g", (double)x); /* inf, -inf or a number < 0 */
      snprintf(why, cap, "%s %zu of %zu is %s (expected a finite number%s)", name[a], i, n, val,
               a == 2 ? " >= 0" : "");
      return 1;
    }
  }
  return 0;
}
