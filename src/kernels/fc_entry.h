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
  struct ntk_map map; /* NTK_LAYER_MAP, NTK_LAYER_LAYERNORM */
};

/* fc's network as nl = arch->n entry layers into out (NTK_ECONFIG for a
 * layer the entry loop has no case for, or blocks nested deeper than it
 * holds). */
ntk_status ntk_fc_entry_layers(const ntk_fc_t *fc, struct ntk_fc_entry_layer *out, size_t nl);

/* Entry (i, j) of a tile, i and j the samples' indices in the data: *g is
 * its input covariance on entry and its NNGP on return, *t its NTK (0 on
 * entry). var: (nl + 1) x n per-sample variances (ntk_fc_variances). self:
 * a sample with itself (then *g on entry is its variance). */
#define NTK_DEFINE_FC_ENTRY(T, SFX, MAP, RSQRT)                                                                  \
  static NTK_HD inline void ntk_fc_entry_##SFX(const struct ntk_fc_entry_layer *L, size_t nl, const T *var,     \
                                               size_t n, size_t i, size_t j, int self, T *g, T *t) {            \
    T gv = *g, tv = 0, stack[4 * NTK_FC_ENTRY_MAXDEPTH];                                                       \
    int depth = 0;                                                                                             \
    for (size_t l = 0; l < nl; l++) {                                                                          \
      const struct ntk_fc_entry_layer *y = &L[l];                                                              \
      const T *vl = var + l * n;                                                                               \
      T td, *s;                                                                                                \
      switch ((ntk_layer_kind)y->kind) {                                                                       \
      case NTK_LAYER_DENSE:                                                                                    \
        if (y->standard) {                                                                                     \
          tv = ((T)y->fan * gv + (T)y->one) + (T)y->w2 * tv;                                                   \
          gv = (T)y->w2 * gv + (T)y->b2;                                                                       \
        } else {                                                                                               \
          gv = (T)y->w2 * gv + (T)y->b2;                                                                       \
          tv = gv + (T)y->w2 * tv;                                                                             \
        }                                                                                                      \
        break;                                                                                                 \
      case NTK_LAYER_MAP:                                                                                      \
      case NTK_LAYER_LAYERNORM:                                                                                \
        gv = MAP(&y->map, gv, vl[i], vl[j], RSQRT(vl[i]), RSQRT(vl[j]), &td);                                  \
        tv *= td;                                                                                              \
        break;                                                                                                 \
      case NTK_LAYER_IDENTITY:                                                                                 \
      case NTK_LAYER_FLATTEN: break;                                                                           \
      case NTK_LAYER_FORK:                                                                                     \
        s = stack + 4 * depth++;                                                                               \
        s[0] = gv;                                                                                             \
        s[1] = tv;                                                                                             \
        break;                                                                                                 \
      case NTK_LAYER_NEXT:                                                                                     \
        s = stack + 4 * (depth - 1);                                                                           \
        s[2] = y->first ? (T)y->fanw * gv : s[2] + (T)y->fanw * gv;                                            \
        s[3] = y->first ? (T)y->fanw * tv : s[3] + (T)y->fanw * tv;                                            \
        gv = s[0];                                                                                             \
        tv = s[1];                                                                                             \
        break;                                                                                                 \
      case NTK_LAYER_JOIN:                                                                                     \
        s = stack + 4 * --depth;                                                                               \
        if (y->branches < 2) break;                                                                            \
        gv = s[2] + (T)y->fanw * gv;                                                                           \
        tv = s[3] + (T)y->fanw * tv;                                                                           \
        if (y->fandiv != 0) {                                                                                  \
          gv /= (T)y->fandiv;                                                                                  \
          tv /= (T)y->fandiv;                                                                                  \
        }                                                                                                      \
        break;                                                                                                 \
      case NTK_LAYER_CONV: /* ntk_fc_entry_layers refuses them */                                              \
      case NTK_LAYER_AVGPOOL:                                                                                  \
      case NTK_LAYER_GLOBALAVGPOOL:                                                                            \
      case NTK_LAYER_KINDS: gv = (T)NAN; break;                                                                \
      }                                                                                                        \
      if (self) gv = var[(l + 1) * n + i];                                                                     \
    }                                                                                                          \
    *g = gv;                                                                                                   \
    *t = tv;                                                                                                   \
  }

NTK_DEFINE_FC_ENTRY(float, f, ntk_mapf, ntk_rsqrtf)
NTK_DEFINE_FC_ENTRY(double, d, ntk_map, ntk_rsqrt)

#endif
