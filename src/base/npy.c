/* .npy header writer; the reader lives with the other data readers. */
#include "base/npy.h"

#include <stdio.h>
#include <string.h>

size_t ntk_npy_header_nd(char *buf, size_t cap, int elem, int ndim, const size_t *shape) {
  char dict[320], dims[200] = "";
  size_t used = 0;
  for (int i = 0; i < ndim && i < 8; i++) {
    int w = snprintf(dims + used, sizeof dims - used, "%zu,%s", shape[i], i + 1 < ndim ? " " : "");
    if (w < 0 || (size_t)w >= sizeof dims - used) return 0;
    used += (size_t)w;
  }
  /* Python writes (n,) for one dimension and (a, b) for more. */
  if (ndim > 1 && used) dims[used - 1] = '\0';
  int n = snprintf(dict, sizeof dict, "{'descr': '<f%d', 'fortran_order': False, 'shape': (%s), }", elem, dims);
  if (n < 0 || (size_t)n >= sizeof dict) return 0;
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

size_t ntk_npy_header(char *buf, size_t cap, int elem, size_t rows, size_t cols) {
  size_t shape[2] = {rows, cols};
  return ntk_npy_header_nd(buf, cap, elem, 2, shape);
}
