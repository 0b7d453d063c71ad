/* Strict number parsing for the job file and architecture strings: the
 * whole text must be the number. Pure. */
#ifndef NTKD_NUMPARSE_H
#define NTKD_NUMPARSE_H

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A finite decimal double, nothing after it. Returns 1 and sets *out, else
 * 0. A subnormal (5e-324) is a value like any other, though strtod flags it
 * ERANGE; overflow and underflow to 0 are not. strtod's hexadecimal form
 * (0x1p-3) is refused, as the integer keys refuse it: "level = 0x1" must not
 * read as 1 where "tile = 0x10" is an error. */
static inline int ntk_parse_double(const char *s, double *out) {
  char *end;
  if (strpbrk(s, "xX")) return 0;
  errno = 0;
  double v = strtod(s, &end);
  int subnormal = errno == ERANGE && v != 0.0 && fabs(v) < 1.0;
  if (end == s || *end || (errno && !subnormal) || !isfinite(v)) return 0;
  *out = v;
  return 1;
}

/* x in the fewest significant digits (%g style) that read back as x:
 * "0.1" for 0.1, where %.17g gives 0.10000000000000001. Writes to buf
 * (32 bytes are always enough) and returns it. */
static inline const char *ntk_fmt_double(double x, char *buf, size_t cap) {
  for (int p = 1; p <= 17; p++) {
    snprintf(buf, cap, "%.*g", p, x);
    if (strtod(buf, NULL) == x) break;
  }
  return buf;
}

/* A non-negative decimal integer without sign, nothing after it. */
static inline int ntk_parse_size(const char *s, size_t *out) {
  char *end;
  if (*s == '-' || *s == '+') return 0;
  errno = 0;
  unsigned long long u = strtoull(s, &end, 10);
  if (end == s || *end || errno) return 0;
  *out = (size_t)u;
  return 1;
}

#endif
