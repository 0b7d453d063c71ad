/* Writing the .npy header of a C-ordered 2-D array (the export format). */
#ifndef NTKD_NPY_H
#define NTKD_NPY_H

#include <stddef.h>

/* Format a version-1.0 .npy header for a (rows, cols) array of `elem`-byte
 * little-endian floats into buf; returns its length (a multiple of 64), or
 * 0 if cap is too small. Pure. */
size_t ntk_npy_header(char *buf, size_t cap, int elem, size_t rows, size_t cols);

#endif
