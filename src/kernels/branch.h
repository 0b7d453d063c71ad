/* Residual blocks in the engines: FanOut(n) parallel(b1, ..., bn) FanInSum
 * (or FanInConcat) arrives flattened as FORK b1 NEXT ... NEXT bn JOIN
 * (src/kernels/arch.c). A stack keeps, per open block, the block's input and the
 * weighted sum of the branches finished so far, for any array of n values
 * (an FC tile, a CNN pair's covariance, a per-sample variance row):
 *   FORK  save the input;
 *   NEXT  add w times the branch's result to the sum (the first: copy),
 *         restore the input;
 *   JOIN  result = sum + w times the last branch, then divided by div
 *         unless div is 0.
 * w and div come from ntk_widths_step (src/kernels/arch.h): FanInSum
 * w = 1, div = 0; FanInConcat div = the sum of the weights, w = 1 for
 * equal widths and each branch's width otherwise, as stax weights a
 * channel concatenation. w = 1 is exact, so a sum rounds as it did
 * unweighted. The additions go left to right, so every engine and the
 * variances round alike. Pure; no I/O. */
#ifndef NTKD_BRANCH_H
#define NTKD_BRANCH_H

#include <stddef.h>
#include <string.h>

#define NTK_BRANCH_MAXDEPTH 16

/* One open block: 4 arrays of `cap` elements (input g, t; sum g, t).
 * A branch may change the size (a strided block): n_in values at the
 * block's input, n values at a branch's end. */
#define DEFINE_BRANCH(T, SFX)                                                                                  \
  static inline void branch_fork_##SFX(T *slot, size_t cap, size_t n_in, const T *g, const T *t) {            \
    memcpy(slot, g, n_in * sizeof(T));                                                                       \
    if (t) memcpy(slot + cap, t, n_in * sizeof(T));                                                          \
  }                                                                                                          \
  static inline void branch_next_##SFX(T *slot, size_t cap, size_t n, size_t n_in, int first, T w, T *g, T *t) { \
    T *sg = slot + 2 * cap, *st = slot + 3 * cap;                                                            \
    for (size_t k = 0; k < n; k++) sg[k] = first ? w * g[k] : sg[k] + w * g[k];                             \
    if (t)                                                                                                   \
      for (size_t k = 0; k < n; k++) st[k] = first ? w * t[k] : st[k] + w * t[k];                           \
    memcpy(g, slot, n_in * sizeof(T));                                                                       \
    if (t) memcpy(t, slot + cap, n_in * sizeof(T));                                                          \
  }                                                                                                          \
  static inline void branch_join_##SFX(const T *slot, size_t cap, size_t n, int nb, T w, T div, T *g, T *t) { \
    const T *sg = slot + 2 * cap, *st = slot + 3 * cap;                                                      \
    if (nb < 2) return;                                                                                      \
    for (size_t k = 0; k < n; k++) g[k] = sg[k] + w * g[k];                                                  \
    if (t)                                                                                                   \
      for (size_t k = 0; k < n; k++) t[k] = st[k] + w * t[k];                                                \
    if (div != 0) {                                                                                          \
      for (size_t k = 0; k < n; k++) g[k] /= div;                                                            \
      if (t)                                                                                                 \
        for (size_t k = 0; k < n; k++) t[k] /= div;                                                          \
    }                                                                                                        \
  }

DEFINE_BRANCH(float, f)
DEFINE_BRANCH(double, d)

#endif
