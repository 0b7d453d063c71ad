/* Writing the .npy header of a C-ordered array (the export format). */
#ifndef NTKD_NPY_H
#define NTKD_NPY_H

#include <stddef.h>

/* Format a version-1.0 .npy header for a (rows, cols) array of `elem`-byte
 * little-endian floats into buf; returns its length (a multiple of 64), or
 * 0 if cap is too small. Pure. */
size_t ntk_npy_header(char *buf, size_t cap, int elem, size_t rows, size_t cols);

/* The same for an array of `ndim` (1..8) dimensions. */
size_t ntk_npy_header_nd(char *buf, size_t cap, int elem, int ndim, const size_t *shape);

#endif
