/* Residual blocks' FORK, NEXT and JOIN (src/kernels/branch.h), written once
 * for both precisions: branch.h includes this file through
 * each_precision.h. One open block: 4 arrays of `cap` elements (input g,
 * t; sum g, t). A branch may change the size (a strided block): n_in
 * values at the block's input, n values at a branch's end. */
#define branch_fork SFX(branch_fork)
#define branch_next SFX(branch_next)
#define branch_join SFX(branch_join)

static inline void branch_fork(REAL *slot, size_t cap, size_t n_in, const REAL *g, const REAL *t) {
  memcpy(slot, g, n_in * sizeof(REAL));
  if (t) memcpy(slot + cap, t, n_in * sizeof(REAL));
}

static inline void branch_next(REAL *slot, size_t cap, size_t n, size_t n_in, int first, int prod, REAL w, REAL *g,
                               REAL *t) {
  REAL *sg = slot + 2 * cap, *st = slot + 3 * cap;
  if (prod && !first) { /* the product rule, t first: it reads the product before this branch */
    if (t)
      for (size_t k = 0; k < n; k++) st[k] = st[k] * g[k] + sg[k] * t[k];
    for (size_t k = 0; k < n; k++) sg[k] *= g[k];
  } else {
    for (size_t k = 0; k < n; k++) sg[k] = first ? w * g[k] : sg[k] + w * g[k];
    if (t)
      for (size_t k = 0; k < n; k++) st[k] = first ? w * t[k] : st[k] + w * t[k];
  }
  memcpy(g, slot, n_in * sizeof(REAL));
  if (t) memcpy(t, slot + cap, n_in * sizeof(REAL));
}

static inline void branch_join(const REAL *slot, size_t cap, size_t n, int nb, int prod, REAL w, REAL div, REAL *g,
                               REAL *t) {
  const REAL *sg = slot + 2 * cap, *st = slot + 3 * cap;
  if (nb < 2) return;
  if (prod) {
    if (t)
      for (size_t k = 0; k < n; k++) t[k] = st[k] * g[k] + sg[k] * t[k];
    for (size_t k = 0; k < n; k++) g[k] = sg[k] * g[k];
    return;
  }
  for (size_t k = 0; k < n; k++) g[k] = sg[k] + w * g[k];
  if (t)
    for (size_t k = 0; k < n; k++) t[k] = st[k] + w * t[k];
  if (div != 0) {
    for (size_t k = 0; k < n; k++) g[k] /= div;
    if (t)
      for (size_t k = 0; k < n; k++) t[k] /= div;
  }
}

#undef branch_fork
#undef branch_next
#undef branch_join
