/* A float or double classified by its bits: under DAZ (training's
 * flush_denormals) a subnormal compares, and converts, as 0, so the range
 * checks read the exponent field instead. */
#ifndef NTKD_FPBITS_H
#define NTKD_FPBITS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

enum { NTK_FP_NORMAL, NTK_FP_SUBNORMAL, NTK_FP_ZERO, NTK_FP_NONFINITE };

/* The class of the element at p (elem 4: float, 8: double); *value, unless
 * NULL, gets it as a double, a float subnormal widened bit for bit. */
static inline int ntk_fp_class(const void *p, int elem, double *value) {
  if (elem == 4) {
    uint32_t b;
    float f;
    memcpy(&b, p, sizeof b);
    memcpy(&f, p, sizeof f);
    uint32_t e = b >> 23 & 0xff, m = b & 0x7fffff;
    if (value) *value = e ? (double)f : (b >> 31 ? -1.0 : 1.0) * ldexp((double)m, -149);
    return e == 0xff ? NTK_FP_NONFINITE : e ? NTK_FP_NORMAL : m ? NTK_FP_SUBNORMAL : NTK_FP_ZERO;
  }
  uint64_t b;
  memcpy(&b, p, sizeof b);
  if (value) memcpy(value, p, sizeof *value);
  uint64_t e = b >> 52 & 0x7ff, m = b & 0xfffffffffffffull;
  return e == 0x7ff ? NTK_FP_NONFINITE : e ? NTK_FP_NORMAL : m ? NTK_FP_SUBNORMAL : NTK_FP_ZERO;
}

#endif
