/* The fully-connected layers on one kernel entry: what the GPU's FC kernel
 * (src/backend/cuda/fc_cuda.cu) runs per thread, compiled for the host too
 * so that test_kernel checks it against the CPU's tiles (src/kernels/fc.c)
 * bit for bit. The operations and their order are fc.c's: the affine maps
 * under either parameterisation, the maps of kernel_maps.h, branch.h's
 * FORK / NEXT / JOIN on a stack of scalars, and a sample paired with
 * itself set to its variance after every layer. */
#ifndef NTKD_FC_ENTRY_H
#define NTKD_FC_ENTRY_H

#include <math.h>
#include <stddef.h>

#include "kernels/fc.h"
#include "kernels/kernel_maps.h"

/* Two samples' twins (ntk_fc_twins): 1 if their rows are equal, -1 if one
 * is the other's negation, 0 if neither. */
static inline NTK_HD int ntk_twin_relation(size_t a, size_t b) {
  size_t x = a ^ b;
  if (x & ~NTK_TWIN_NEGATED) return 0;
  return x ? -1 : 1;
}

#define NTK_FC_ENTRY_MAXDEPTH 16 /* residual blocks nested (NTK_BRANCH_MAXDEPTH) */

/* One layer as the entry loop takes it, plain data (copied to the device
 * as it is). */
struct ntk_fc_entry_layer {
  int kind;           /* ntk_layer_kind */
  double w2, b2;      /* Dense: W_std^2, b_std^2 */
  int standard;       /* Dense under parameterization = standard: ntk' = (fan g + one) + W^2 t */
  double fan, one;
  double fanw, fandiv; /* NEXT, JOIN: the branch's FanIn weight; JOIN: the divisor (branch.h) */
  int first;          /* NEXT: it ends its block's first branch */
  int branches;       /* JOIN: the block's branch count */
  int prod;           /* NEXT, JOIN of a FanInProd block: products (branch.h) */
  struct ntk_map map; /* NTK_LAYER_MAP, NTK_LAYER_LAYERNORM */
  double drop;        /* NTK_LAYER_DROPOUT: 1/rate, a sample with itself's factor */
};

/* fc's network as nl = arch->n entry layers into out (NTK_ECONFIG for a
 * layer the entry loop has no case for, or blocks nested deeper than it
 * holds). */
ntk_status ntk_fc_entry_layers(const ntk_fc_t *fc, struct ntk_fc_entry_layer *out, size_t nl);

/* ntk_fc_entry_f, ntk_fc_entry_d (src/kernels/fc_entry_impl.h):
 * entry (i, j) of a tile, i and j the samples' indices in the data: *g is
 * its input covariance on entry and its NNGP on return, *t its NTK (0 on
 * entry). var: (nl + 1) x n per-sample variances (ntk_fc_variances). self:
 * a sample with itself (then *g on entry is its variance). */
#define EACH_PRECISION_FILE "kernels/fc_entry_impl.h"
#include "kernels/each_precision.h"

#endif
