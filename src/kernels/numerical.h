/* Nonlinearities without a closed-form kernel, as stax's
 * ElementwiseNumerical(fn, deg): their maps by adaptive quadrature in
 * double (src/kernels/numerical.c). A struct ntk_map of kind
 * NTK_MAP_NUMERICAL carries the function in `degree` (enum ntk_numfn) and
 * its alpha (Elu, Selu, Celu) in `a`. Host only: the GPU backends refuse
 * these maps before computing a tile. */
#ifndef NTKD_NUMERICAL_H
#define NTKD_NUMERICAL_H

#include "kernels/kernel_maps.h"

/* jax.nn.selu's constants. */
#define NTK_SELU_ALPHA 1.6732632423543772848170429916717
#define NTK_SELU_SCALE 1.0507009873554804934193349852946

enum ntk_numfn {
  NTK_FN_TANH,
  NTK_FN_SIGMOID,  /* 1 / (1 + e^-x), jax.nn.sigmoid */
  NTK_FN_SOFTPLUS, /* log(1 + e^x) */
  NTK_FN_SILU,     /* x sigmoid(x), jax.nn.silu and swish */
  NTK_FN_ELU,      /* x > 0 ? x : alpha (e^x - 1) */
  NTK_FN_SELU,     /* jax.nn.selu: scale * Elu with its fixed alpha and scale */
  NTK_FN_CELU,     /* x > 0 ? x : alpha (e^(x / alpha) - 1) */
  NTK_FN_COUNT
};

/* E[f(u) f(v)], and E[f'(u) f'(v)] in *tdot, for (u, v) of covariance
 * [[q11, q12], [q12, q22]], each within 1e-13 of its scale
 * sqrt(E f(u)^2 E f(v)^2) (sqrt(E f'(u)^2 E f'(v)^2)); NaN for inputs that
 * are not a covariance's (a negative or non-finite variance) or where the
 * quadrature does not converge, so that no tile is stored with it. */
double ntk_numerical_map(const struct ntk_map *m, double q12, double q11, double q22, double *tdot);

/* The same by nested quadrature for every function (ntk_numerical_map's
 * own way for the Elu family only): tests compare the two. */
double ntk_numerical_map_nested(const struct ntk_map *m, double q12, double q11, double q22, double *tdot);

/* "Tanh", "Softplus", ...: the canonical spelling of fn ("?" for none). */
const char *ntk_numfn_name(int fn);

#endif
