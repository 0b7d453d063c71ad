/* .npy header writer; the reader lives with the other data readers. */
#include "ntkd/npy.h"

#include <stdio.h>
#include <string.h>

size_t ntk_npy_header(char *buf, size_t cap, int elem, size_t rows, size_t cols) {
  char dict[256];
  int n = snprintf(dict, sizeof dict, "{'descr': '<f%d', 'fortran_order': False, 'shape': (%zu, %zu), }",
                   elem, rows, cols);
  size_t total = 10 + (size_t)n + 1; /* preamble + dict + '\n' */
  total = (total + 63) / 64 * 64;
  if (total > cap || total - 10 > 65535) return 0;
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  size_t hlen = total - 10;
  buf[8] = (char)(hlen & 0xff);
  buf[9] = (char)(hlen >> 8);
  memcpy(buf + 10, dict, (size_t)n);
  memset(buf + 10 + n, ' ', total - 10 - (size_t)n - 1);
  buf[total - 1] = '\n';
  return total;
}
