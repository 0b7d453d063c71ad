/* The CNN plan and kernel arguments as plain data, for the GPU kernels
 * (src/worker/cnn_dev_impl.h) and their host emulation: the same structs
 * in C and in CUDA, copied to the device as they are. cnn.c fills the plan
 * from its own (ntk_cnn_dev_plan), so both backends take the same layer
 * sizes, paddings and offset bands. */
#ifndef NTKD_CNN_DEV_H
#define NTKD_CNN_DEV_H

#include <stddef.h>

#include "ntkd/arch.h"
#include "ntkd/cnn.h"
#include "ntkd/data.h"
#include "ntkd/status.h"

#define NTK_DEV_MAXOPS 160 /* spatial layers */
#define NTK_DEV_MAXTAIL 32 /* layers after the readout */

struct ntk_dev_op {
  int kind;                  /* ntk_layer_kind */
  int hi, wi, ho, wo;        /* input and output sizes */
  int lo_h, lo_w, circular;  /* Conv padding before, CIRCULAR */
  int f, s;                  /* Conv filter or AvgPool window; stride */
  int slice_local;           /* stride-1 SAME Conv, Dense, nonlinearity, Identity */
  int bh, bw;                /* offsets of this op's input the readout needs */
  int var_off;               /* nonlinearity: its slot in an image's variance block, else -1 */
  double w2, b2, a, b;       /* W_std^2, b_std^2; ABRelu slopes */
};

struct ntk_dev_plan {
  int H, W, C, pad;          /* input; slice border (largest slice-local filter - 1) */
  int path;                  /* NTK_CNN_DIAG or NTK_CNN_SLICE */
  int readout;               /* NTK_LAYER_FLATTEN or NTK_LAYER_GLOBALAVGPOOL */
  int out_h, out_w;          /* size at the readout */
  int nops, ntail;
  int var_size, tail_off;    /* elements of an image's variance block; the tail's slots */
  struct ntk_dev_op ops[NTK_DEV_MAXOPS];
  struct ntk_dev_op tail[NTK_DEV_MAXTAIL];
};

/* The plan of `arch` on `data` that ntk_cnn_create(NTK_CNN_AUTO) makes,
 * flattened. NTK_ECONFIG if the network is not a CNN or has more layers
 * than the structs hold. */
ntk_status ntk_cnn_dev_plan(const struct ntk_arch *arch, const struct ntk_dataset *data, struct ntk_dev_plan *out);

/* Kernels (src/worker/cnn_dev_impl.h). */
enum {
  NTK_K_DIAG,       /* grid (np): a Flatten net without pooling, one pair per block */
  NTK_K_SLICE,      /* grid (noff, np): ops [k0, k1) on one offset of one pair */
  NTK_K_INPUT_FULL, /* grid-stride: the input covariance into fg (band of op 0) */
  NTK_K_CONV_FULL,  /* grid-stride: ops[k0] (a Conv) on fg into ng */
  NTK_K_POOL_FULL,  /* grid-stride: ops[k0] (an AvgPool) on fg into ng */
  NTK_K_READOUT,    /* grid (np): sum, normalise, the tail; out[pair] */
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
  int k0, k1;     /* SLICE: ops [k0, k1); full ops: ops[k0] */
  int h, w;       /* SLICE, INPUT_FULL, READOUT: the spatial size there */
  int bh, bw;     /* SLICE, INPUT_FULL: the offset band */
  int noff;       /* part entries per pair */
  int mode;       /* READOUT: NTK_RO_* */
  size_t fstride; /* elements per pair in fg, ft, ng, nt */
  void *fg, *ft, *ng, *nt;
  void *part;     /* [np][noff][2] doubles: sums of NNGP and NTK */
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

/* One block of a launch: its indices and, in the host emulation, the
 * barrier its threads meet at. */
struct ntk_blk {
  unsigned bx, by, gx, tid, nt;
  void *barrier;
};

#endif
