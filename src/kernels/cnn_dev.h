/* The CNN plan and kernel arguments as plain data, for the GPU kernels
 * (src/kernels/cnn_dev_impl.h) and their host emulation: the same structs
 * in C and in CUDA, copied to the device as they are. cnn.c fills the plan
 * from its own (ntk_cnn_dev_plan), so both backends take the same layer
 * sizes, paddings and offset bands. */
#ifndef NTKD_CNN_DEV_H
#define NTKD_CNN_DEV_H

#include <stddef.h>

#include "kernels/arch.h"
#include "kernels/cnn.h"
#include "kernels/dataset.h"
#include "kernels/kernel_maps.h"
#include "base/status.h"

#define NTK_DEV_MAXOPS 160 /* spatial layers */
#define NTK_DEV_MAXTAIL 32 /* layers after the readout */
#define NTK_DEV_MAXDEPTH 16 /* residual blocks nested (NTK_BRANCH_MAXDEPTH) */

struct ntk_dev_op {
  int kind;                  /* ntk_layer_kind */
  int hi, wi, ho, wo;        /* input and output sizes */
  int lo_h, lo_w, circular;  /* Conv padding before, CIRCULAR */
  int fh, fw, sh, sw;        /* Conv filter or AvgPool window, and strides, per dimension */
  int sum;                   /* SumPool: window sums, not means; JOIN: FanInSum (else FanInConcat) */
  int prod;                  /* FORK, NEXT, JOIN of a FanInProd block: products (branch.h) */
  int depth, first, branches; /* FORK, NEXT, JOIN: the block's stack slot, a NEXT ending the first branch, n */
  double fanw, fandiv;       /* NEXT, JOIN: the FanIn weight of the branch it ends; JOIN: the divisor (branch.h) */
  int norm_edges;            /* AvgPool SAME with normalize_edges: means over the cells inside */
  int slice_local;           /* stride-1 SAME Conv, Dense, nonlinearity, Identity */
  int chain;                 /* a SLICE run carries it: slice-local, or a strided Conv or block (cnn.c's plan_chain) */
  int bh, bw;                /* offsets of this op's input the readout needs */
  int mh, mw;                /* ... only their multiples of these (strided convolutions ahead) */
  int obh, obw, omh, omw;    /* Conv: the same for its output (CONV_FULL computes only those entries) */
  int var_off;               /* nonlinearity: its slot in an image's variance block, else -1 */
  double w2, b2;             /* W_std^2, b_std^2 */
  int standard;              /* Dense, Conv under parameterization = standard: the NTK takes fan and one */
  double fan, one;           /* standard: the fan-in, and 1 with a bias (cnn_impl.h's affine1) */
  struct ntk_map map;        /* a nonlinearity (var_off >= 0) */
  /* Filled in by cnn_gpu.c for the SLICE3 kernel: */
  float w2f, b2f, af, bf;    /* the same, rounded to float (the float kernels' operands; af, bf: ABRelu's slopes) */
  int next;                  /* the first op after this one that is a Conv or not slice-local (or nops) */
  int fuse;                  /* a Conv followed by exactly one nonlinearity before `next`: NTK_FUSE_* */
};

/* RELU: ABRelu(0, 1); ERF: Erf(1, 1, 0); the other maps are not fused. */
enum { NTK_FUSE_NONE, NTK_FUSE_RELU, NTK_FUSE_ABRELU, NTK_FUSE_ERF };

struct ntk_dev_plan {
  int H, W, C, pad;          /* input; slice border (largest slice-local filter - 1) */
  int path;                  /* NTK_CNN_DIAG or NTK_CNN_SLICE */
  int readout;               /* NTK_LAYER_FLATTEN or NTK_LAYER_GLOBALAVGPOOL */
  int readout_sum;           /* GlobalSumPool: a sum, not a mean */
  int out_h, out_w;          /* size at the readout */
  int nops, ntail;
  int var_size, tail_off;    /* elements of an image's variance block; the tail's slots */
  int branch_depth;          /* residual blocks: the deepest nesting (0: none) */
  struct ntk_dev_op ops[NTK_DEV_MAXOPS];
  struct ntk_dev_op tail[NTK_DEV_MAXTAIL];
};

/* The plan of `arch` on `data` that ntk_cnn_create(NTK_CNN_AUTO) makes,
 * flattened. NTK_ECONFIG if the network is not a CNN or has more layers
 * than the structs hold. */
ntk_status ntk_cnn_dev_plan(const struct ntk_arch *arch, const struct ntk_dataset *data, struct ntk_dev_plan *out);

/* Kernels (src/kernels/cnn_dev_impl.h). */
enum {
  NTK_K_DIAG,       /* grid (np): a Flatten net without pooling, one pair per block */
  NTK_K_SLICE,      /* grid (noff, np): ops [k0, k1) on one offset of one pair */
  NTK_K_INPUT_FULL, /* grid-stride: the input covariance into fg (band of op 0) */
  NTK_K_CONV_FULL,  /* grid-stride: ops[k0] (a Conv) on fg into ng */
  NTK_K_POOL_FULL,  /* grid-stride: ops[k0] (an AvgPool) on fg into ng */
  NTK_K_READOUT,    /* grid (np): sum, normalise, the tail; out[pair] */
  NTK_K_SLICE3,     /* grid (nDi * nDj, np): ops [k0, k1), all Conv f = 3, on one wrapped offset (four slices) */
  NTK_K_BRANCH_FULL, /* grid-stride: ops[k0] (a residual block's FORK, NEXT or JOIN) on fg, ft in place */
  NTK_K_DIAG_ANY,   /* DIAG and SLICE compiled for every map (dv_nonlin's `any`); the plain */
  NTK_K_SLICE_ANY,  /* variants only for ABRelu and Erf(1, 1, 0) */
  NTK_K_COUNT
};

enum { NTK_RO_PART, NTK_RO_FULL_GAP, NTK_RO_FULL_FLAT }; /* readout sources */

/* Arguments of every kernel (by value; device pointers). Pair k of a batch
 * is images pa[k], pb[k] of the tile's image array x (H*W*C each) and
 * their variance blocks in var (var_size each). */
struct ntk_dev_args {
  const struct ntk_dev_plan *P;
  const void *x;
  void *var;
  const unsigned *pa, *pb;
  unsigned np;
  int with_t;     /* NTK too */
  int self;       /* pa == pb: fill in the variance blocks on the way */
  int capture;    /* SLICE: the zero offset only, to capture the variances */
  int from_x;     /* SLICE: the run starts from the images, not fg */
  int to_part;    /* SLICE: each slice's sums into part (GlobalAvgPool), else back into fg */
  int moved;      /* SLICE: the run changes the size (strided Convs): its result into ng, nt, not fg */
  int k0, k1;     /* SLICE: ops [k0, k1); full ops: ops[k0] */
  int h, w;       /* SLICE, INPUT_FULL, READOUT: the spatial size there */
  int bh, bw;     /* SLICE, INPUT_FULL: the offset band */
  int mh, mw;     /* SLICE: on it, the lattice of offsets computed (multiples of these); bh, bw multiples too */
  int noff;       /* part entries per pair */
  int mode;       /* READOUT: NTK_RO_* */
  size_t fstride; /* elements per pair in fg, ft, ng, nt */
  void *fg, *ft, *ng, *nt;
  void *part;     /* [np][noff][2] doubles: sums of NNGP and NTK */
  void *bstack;   /* residual blocks: per pair and depth 4 x bstride elements (src/kernels/branch.h's layout) */
  size_t bstride; /* BRANCH_FULL: fstride; DIAG: the positions of the input */
  void *out;      /* [np][2]: nngp, ntk */
};

/* Cell k of a region vw wide: row k / vw, column k % vw, from a float
 * reciprocal instead of an integer division (dozens of instructions on a
 * GPU). Exact while k < 2^22: (k + 0.5) / vw is at least 0.5 / vw from an
 * integer, and the two roundings move it by less than (k + 0.5) 2^-23 / vw. */
#define DV_CELL(k, vw, inv, i, j)                    \
  do {                                               \
    (i) = (unsigned)(((float)(k) + 0.5f) * (inv));   \
    (j) = (k) - (i) * (vw);                          \
  } while (0)

/* An (NNGP, NTK) pair of shared-memory cells, or a (variance, its
 * ntk_rsqrt) pair of a variance slot: one 8- or 16-byte load. */
#ifdef __CUDACC__
typedef float2 dv_pair_f;
typedef double2 dv_pair_d;
typedef float4 dv_quad_f;
typedef struct __align__(16) {
  double x, y, z, w;
} dv_quad_d;
#define DV_INLINE __forceinline__
#define DV_RESTRICT __restrict__
#else
typedef struct {
  _Alignas(8) float x;
  float y;
} dv_pair_f;
typedef struct {
  _Alignas(16) double x;
  double y;
} dv_pair_d;
typedef struct {
  _Alignas(16) float x;
  float y, z, w;
} dv_quad_f;
typedef struct {
  _Alignas(16) double x;
  double y, z, w;
} dv_quad_d;
#define DV_INLINE inline
#define DV_RESTRICT restrict
#endif

/* A position's variance slot on the GPU, (q, r, v, u): the variance q,
 * r = RSQRT(q), v = q r and u = v r, in four elements (one 16-byte load
 * in float). v and u are the first two products of ntk_abreluf_r, per
 * image and position: written once by the capture pass instead of once
 * per entry. dv_quad_f/_d: one slot. */
#define NTK_DEV_VSLOT 4

/* The full covariance of a pair on the device (fg, ft, ng, nt; h x w
 * positions in either image), by wrapped offset: entry (p, q), p = (pi, pj)
 * in image a and q = (qi, qj) in image b, at D hw + p, where
 * D = ((pi - qi) mod h) w + ((pj - qj) mod w). The cells of one offset, a
 * slice block's, are then hw consecutive elements in p's order: a warp's
 * 32 cells of a row are one 128-byte line in float32 (with p hw + q, each
 * was a 32-byte sector of its own, and Myrtle's first slice run spent
 * most of its time storing them). A bijection of the hw x hw entries, so
 * elementwise kernels (BRANCH_FULL) take it as they find it.
 * test_full_layout checks that ntk_dev_full_at and ntk_dev_full_cell are
 * inverse bijections. */
static inline NTK_HD unsigned ntk_dev_full_at(unsigned pi, unsigned pj, unsigned qi, unsigned qj, unsigned h,
                                              unsigned w) {
  unsigned di = pi >= qi ? pi - qi : pi + h - qi, dj = pj >= qj ? pj - qj : pj + w - qj;
  return (di * w + dj) * (h * w) + pi * w + pj;
}

/* The entry at element r of that layout: the positions (pi, pj), (qi, qj). */
static inline NTK_HD void ntk_dev_full_cell(unsigned r, unsigned h, unsigned w, unsigned *pi, unsigned *pj,
                                            unsigned *qi, unsigned *qj) {
  unsigned hw = h * w, D = r / hw, p = r - D * hw, di = D / w, dj = D - di * w;
  *pi = p / w;
  *pj = p - *pi * w;
  *qi = *pi >= di ? *pi - di : *pi + h - di;
  *qj = *pj >= dj ? *pj - dj : *pj + w - dj;
}

/* The wrapped offset's first element, D hw, of an offset (di, dj) with
 * -h < di < h, -w < dj < w. */
static inline NTK_HD unsigned ntk_dev_full_slice(int di, int dj, unsigned h, unsigned w) {
  unsigned Di = di < 0 ? (unsigned)(di + (int)h) : (unsigned)di;
  unsigned Dj = dj < 0 ? (unsigned)(dj + (int)w) : (unsigned)dj;
  return (Di * w + Dj) * (h * w);
}

/* sqrtf(x) where x is +-0, NaN, negative or in [2^-101, FLT_MAX], the
 * inputs ntk_dev_abreluf_vu can give it. On a GPU that is the fast path
 * of the IEEE square root CUDA compiles sqrtf to under -prec-sqrt=true
 * (MUFU.RSQ, two FTZ products, two FMAs: correctly rounded on that range)
 * without its range check and slow-path call, and +-0 back as they are
 * (sqrtf(+-0) = +-0). Below 2^-101 (subnormal included) and at +inf it
 * would differ from sqrtf; the map's det never is there: it is
 * u11 u22 - c^2 with u = 1 to a few ulp (or +-0 or NaN, for a variance
 * <= 0 or inf), so a nonzero det is >= 2^-24 (Sterbenz: the two products
 * are within a factor 2, on a grid of 2^-25) or NaN, and never above
 * ~1 + 2^-20; negative ones are clamped to 0 before (tests/test_cnn_gpu.c
 * checks that domain on the map's inputs). Checked on an H200 against
 * sqrtf for all 2^32 bit patterns: equal on the whole domain (docs/GPU.md,
 * "The CNN kernels"). On the host: sqrtf. */
static inline NTK_HD float ntk_dev_sqrtf_map(float x) {
#ifdef __CUDA_ARCH__
  float s;
  asm("{\n\t.reg .f32 r, y, h, e;\n\t"
      "rsqrt.approx.ftz.f32 r, %1;\n\t"
      "mul.ftz.f32 y, %1, r;\n\t"
      "mul.ftz.f32 h, r, 0f3F000000;\n\t"
      "neg.f32 e, y;\n\t"
      "fma.rn.f32 e, e, y, %1;\n\t"
      "fma.rn.f32 %0, e, h, y;\n\t}"
      : "=f"(s)
      : "f"(x));
  return x == 0.0f ? x : s;
#else
  return sqrtf(x);
#endif
}

/* ntk_abreluf_r (src/kernels/kernel_maps.h) on slots A = (q11, r11, v11,
 * u11) and B = (q22, r22, v22, u22) as above: its first two lines (v = q r,
 * u = v r) are what the slot holds, its third is repeated here, and the
 * rest is ntk_abreluf_angle itself, so the same bits for every input when
 * A and B were filled from q11, q22 as the capture pass does. tests/test_cnn_gpu.c compares the two
 * on random, edge (zero, negative, subnormal, huge, inf, NaN) and
 * angle-0 inputs. */
static inline NTK_HD float ntk_dev_abreluf_vu(float a, float b, float q12, float r11, float v11, float u11,
                                              float r22, float v22, float u22, float *tdot) {
  float c = q12 * r11 * r22, det = u11 * u22 - c * c;
  return ntk_abreluf_angle(a, b, q12, c, ntk_dev_sqrtf_map(det < 0.0f ? 0.0f : det), v11, v22, tdot);
}

/* The slot of variance q, as the capture pass fills it. */
static inline NTK_HD void ntk_dev_vslotf(float q, float *slot) {
  slot[0] = q;
  slot[1] = ntk_rsqrtf(q);
  slot[2] = slot[0] * slot[1];
  slot[3] = slot[2] * slot[1];
}

/* One block of a launch: its indices and, in the host emulation, the
 * barrier its threads meet at. */
struct ntk_blk {
  unsigned bx, by, gx, tid, nt;
  void *barrier;
};

#endif
