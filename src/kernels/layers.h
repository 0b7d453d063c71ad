/* What each layer is, in one table: the planner (src/kernels/cnn.c), the
 * parser's validation (src/kernels/arch.c) and the engines read a layer's traits
 * here instead of testing kinds one by one; and the names stax gives its
 * nonlinearities, with their parameters (src/kernels/layers.c). Pure; no I/O. */
#ifndef NTKD_LAYERS_H
#define NTKD_LAYERS_H

#include <stddef.h>

#include "kernels/kernel_maps.h"

typedef enum ntk_layer_kind {
  NTK_LAYER_DENSE,
  NTK_LAYER_CONV,
  NTK_LAYER_MAP, /* an elementwise nonlinearity: struct ntk_map */
  NTK_LAYER_IDENTITY,
  NTK_LAYER_AVGPOOL,
  NTK_LAYER_FLATTEN,
  NTK_LAYER_GLOBALAVGPOOL,
  NTK_LAYER_LAYERNORM, /* over the channel axis: struct ntk_map of kind NTK_MAP_LAYERNORM */
  NTK_LAYER_FORK,      /* FanOut(n) parallel( : keep the input for each of n branches */
  NTK_LAYER_NEXT,      /* ',' in parallel(...): the next branch starts from the kept input */
  NTK_LAYER_JOIN,      /* ) FanInSum / FanInConcat: the branches' kernels summed / averaged */
  NTK_LAYER_DROPOUT,   /* Dropout(rate, mode='train'): a sample's own entries (same position) times 1/rate */
  NTK_LAYER_ATTENTION, /* GlobalSelfAttention: struct ntk_attention (arch.h); mixes every position with every
                          other, the full covariance only */
  NTK_LAYER_RESIZE,    /* ImageResize: the image resampled to another size (linear or nearest), a linear map of
                          the positions: the full covariance only */
  NTK_LAYER_AGGREGATE, /* Aggregate: a graph's nodes summed over their in-edges, the pattern of each sample given
                          with its data (struct ntk_dataset's pattern): the full covariance only */
  NTK_LAYER_KINDS /* the number of kinds */
} ntk_layer_kind;

struct ntk_layer_traits {
  const char *name;
  unsigned affine : 1;       /* nngp' = W^2 A(nngp) + b^2, ntk' = nngp' + W^2 A(ntk): Dense, Conv */
  unsigned nonlinear : 1;    /* a closed-form nonlinearity (its output is not Gaussian) */
  unsigned needs_gaussian : 1; /* its input must be Gaussian (neural-tangents refuses others) */
  unsigned per_position : 1; /* acts on each position alone (or not at all): Dense, maps, Identity */
  unsigned couples : 1;      /* mixes positions: Conv, AvgPool */
  unsigned var_slot : 1;     /* applies its struct ntk_map per entry, reading each image's own
                                variance at its input (a slot per image): maps, LayerNorm */
  unsigned spatial : 1;      /* needs image data: Conv, AvgPool, GlobalAvgPool */
  unsigned readout : 1;      /* ends the spatial part: Flatten, GlobalAvgPool */
  unsigned gaussian_out : 1; /* its output is Gaussian again (what a nonlinearity needs) */
  unsigned keeps_gaussian : 1; /* Gaussian out if Gaussian in: Identity, AvgPool */
  unsigned branch : 1;       /* a residual block's structure: FORK, NEXT, JOIN */
};

/* The traits of kind k (every kind below NTK_LAYER_KINDS has them). */
const struct ntk_layer_traits *ntk_layer_traits(ntk_layer_kind k);

/* ---- the nonlinearities' names --------------------------------------------- */

enum ntk_param_type {
  NTK_PARAM_NUMBER,  /* a real number */
  NTK_PARAM_INT,     /* a non-negative integer */
  NTK_PARAM_BOOL,    /* True or False */
  NTK_PARAM_LIST,    /* a list of numbers: [1, 0, 2] or (1, 0, 2) */
};

/* Where a parameter goes in struct ntk_map. */
enum ntk_param_slot { NTK_SLOT_A, NTK_SLOT_B, NTK_SLOT_C, NTK_SLOT_DEGREE, NTK_SLOT_COEF, NTK_SLOT_FLAG, NTK_SLOT_NONE };

/* The values a parameter may take (docs/JOB-FILE.md lists them): lo..hi,
 * lo itself excluded when lo_open. An NTK_PARAM_INT takes the integers in
 * lo..hi; an NTK_PARAM_LIST's coefficients are any finite numbers. */
struct ntk_domain {
  double lo, hi;
  int lo_open;
};

struct ntk_param {
  const char *key;           /* stax's keyword */
  enum ntk_param_type type;
  enum ntk_param_slot slot;
  double dflt;               /* NAN: required; else inside the domain */
  struct ntk_domain domain;  /* outside it the parser refuses the value, naming it */
};

#define NTK_MAP_MAXPARAMS 3

/* One stax name of a nonlinearity: Relu is ABRelu with (a, b) = (0, 1). */
struct ntk_map_name {
  const char *name;
  struct ntk_map fixed;                      /* the map before parameters */
  struct ntk_param params[NTK_MAP_MAXPARAMS]; /* in stax's positional order; key NULL ends */
  /* After the parameters: what stax derives from them (Cos: c + pi/2);
   * NULL for nothing. Returns 0 and a message for values stax refuses. */
  int (*finish)(struct ntk_map *m, char *why, size_t cap);
};

/* The name `name` (case-sensitive, as stax), or NULL. */
const struct ntk_map_name *ntk_map_name_find(const char *name);

/* All of them, in table order; *count set. */
const struct ntk_map_name *ntk_map_names(size_t *count);

/* ElementwiseNumerical's fn as written (jnp.tanh, jax.nn.softplus, Tanh):
 * 1 and either *closed, the name of the closed-form map it is (jnp.sin:
 * "Sin"), or *closed NULL and *map the quadrature's (kind
 * NTK_MAP_NUMERICAL); 0 for a function ntkd does not know. */
int ntk_numfn_find(const char *spelling, struct ntk_map *map, const char **closed);

/* "tanh, sigmoid, ...": the functions it knows, for messages; snprintf's
 * contract. */
size_t ntk_numfn_known(char *buf, size_t cap);

#endif
