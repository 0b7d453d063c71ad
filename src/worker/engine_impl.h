/* The per-precision part of src/worker/engine.c, written once: engine.c
 * includes this file through each_precision.h (REAL, FABS, REAL_MAX;
 * find_nonfinite becomes find_nonfinite_f / _d). */

#define find_nonfinite SFX(find_nonfinite)

/* The first of `count` values that is not finite, or `count`. Each block
 * gets a branch-free pass (vectorised); only a block with a bad value is
 * searched. */
static size_t find_nonfinite(const REAL *v, size_t count) {
  const size_t block = 4096;
  for (size_t b = 0; b < count; b += block) {
    size_t end = count - b < block ? count : b + block;
    int bad = 0;
    for (size_t i = b; i < end; i++) bad |= !(FABS(v[i]) <= REAL_MAX);
    if (bad)
      for (size_t i = b; i < end; i++)
        if (!(FABS(v[i]) <= REAL_MAX)) return i;
  }
  return count;
}

#undef find_nonfinite
