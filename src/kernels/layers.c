/* The table of layer traits and the stax names of the nonlinearities.
 * Adding a nonlinearity: its map in src/kernels/kernel_maps.h (and a case
 * in each dispatcher there), its loop case in src/kernels/map_rows.c, and its
 * name here. */
#include "kernels/layers.h"

#include "kernels/numerical.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const struct ntk_layer_traits traits[NTK_LAYER_KINDS] = {
    [NTK_LAYER_DENSE] = {.name = "Dense", .affine = 1, .per_position = 1, .gaussian_out = 1},
    [NTK_LAYER_CONV] = {.name = "Conv", .affine = 1, .couples = 1, .spatial = 1, .gaussian_out = 1},
    [NTK_LAYER_MAP] = {.name = "nonlinearity", .nonlinear = 1, .needs_gaussian = 1, .per_position = 1, .var_slot = 1},
    [NTK_LAYER_IDENTITY] = {.name = "Identity", .per_position = 1, .keeps_gaussian = 1},
    [NTK_LAYER_AVGPOOL] = {.name = "AvgPool", .couples = 1, .spatial = 1, .keeps_gaussian = 1},
    /* As in neural-tangents: Flatten's output is not Gaussian, pooling's is. */
    [NTK_LAYER_FLATTEN] = {.name = "Flatten", .readout = 1},
    [NTK_LAYER_GLOBALAVGPOOL] = {.name = "GlobalAvgPool", .spatial = 1, .readout = 1, .keeps_gaussian = 1},
    /* neural-tangents: Gaussian in (else NotImplementedError), Gaussian out */
    [NTK_LAYER_LAYERNORM] = {.name = "LayerNorm", .needs_gaussian = 1, .per_position = 1, .var_slot = 1,
                             .keeps_gaussian = 1},
    [NTK_LAYER_FORK] = {.name = "FanOut", .per_position = 1, .keeps_gaussian = 1, .branch = 1},
    [NTK_LAYER_NEXT] = {.name = "parallel", .per_position = 1, .branch = 1},
    [NTK_LAYER_JOIN] = {.name = "FanIn", .per_position = 1, .branch = 1},
    /* neural-tangents: its output is not Gaussian (a Dense or Conv before the next nonlinearity) */
    [NTK_LAYER_DROPOUT] = {.name = "Dropout", .per_position = 1},
    /* neural-tangents: any input, a Gaussian output (its kernel_fn sets is_gaussian) */
    [NTK_LAYER_ATTENTION] = {.name = "GlobalSelfAttention", .couples = 1, .spatial = 1, .gaussian_out = 1},
    /* a linear map of the positions: Gaussian in, Gaussian out */
    [NTK_LAYER_RESIZE] = {.name = "ImageResize", .couples = 1, .spatial = 1, .keeps_gaussian = 1},
    /* each sample's own linear map of the positions: Gaussian in, Gaussian out */
    [NTK_LAYER_AGGREGATE] = {.name = "Aggregate", .couples = 1, .spatial = 1, .keeps_gaussian = 1},
};

const struct ntk_layer_traits *ntk_layer_traits(ntk_layer_kind k) {
  static const struct ntk_layer_traits none = {.name = "?"};
  return (unsigned)k < NTK_LAYER_KINDS ? &traits[k] : &none;
}

/* ---- nonlinearities ---------------------------------------------------------- */

#define REQUIRED NAN
/* Domains (struct ntk_domain). Most parameters are scales, shifts or slopes
 * of a real function f, and any finite value gives E[f(u) f(v)], a positive
 * semi-definite kernel (a value too large for the range gives a non-finite
 * tile, which is refused). The others: */
#define ANY {-INFINITY, INFINITY, 0}
/* Rbf's and ExpNormalized's gamma: the inverse squared length-scale of a
 * Gaussian kernel (stax: gamma = 1 / (2 l^2)), in the distance and in the
 * angle. Below 0 the kernel is not positive semi-definite and its NTK
 * factor 2 gamma k is negative; 0 is no length-scale, the constant kernel. */
#define POSITIVE {0.0, INFINITY, 1}
/* Degrees: stax's Monomial computes 0 to 5 (NotImplementedError beyond);
 * RectifiedMonomial and Hermite any degree >= 0, here up to 1000 (ntkd's
 * limit: the values overflow long before, and the loops stay short). */
#define DEGREES(n) {0.0, n, 0}
#define ABC_PARAMS                                                                                      \
  {                                                                                                     \
    {"a", NTK_PARAM_NUMBER, NTK_SLOT_A, 1.0, ANY}, {"b", NTK_PARAM_NUMBER, NTK_SLOT_B, 1.0, ANY},       \
        {"c", NTK_PARAM_NUMBER, NTK_SLOT_C, 0.0, ANY}                                                   \
  }

#define STABILIZE {"do_stabilize", NTK_PARAM_BOOL, NTK_SLOT_NONE, 0.0, ANY}

/* stax: Cos(a, b, c) is Sin(a, b, c + pi/2). */
static int cos_phase(struct ntk_map *m, char *why, size_t cap) {
  (void)why, (void)cap;
  m->c += NTK_PI_2;
  return 1;
}

static const struct ntk_map_name names[] = {
    /* do_stabilize rescales stax's intermediate values only: the same kernel */
    {"Relu", {.kind = NTK_MAP_ABRELU, .a = 0, .b = 1}, {STABILIZE}, NULL},
    {"LeakyRelu",
     {.kind = NTK_MAP_ABRELU, .b = 1},
     {{"alpha", NTK_PARAM_NUMBER, NTK_SLOT_A, REQUIRED, ANY}, STABILIZE},
     NULL},
    {"Abs", {.kind = NTK_MAP_ABRELU, .a = -1, .b = 1}, {STABILIZE}, NULL},
    {"ABRelu",
     {.kind = NTK_MAP_ABRELU},
     {{"a", NTK_PARAM_NUMBER, NTK_SLOT_A, REQUIRED, ANY}, {"b", NTK_PARAM_NUMBER, NTK_SLOT_B, REQUIRED, ANY},
      STABILIZE},
     NULL},
    {"Erf", {.kind = NTK_MAP_ERF}, ABC_PARAMS, NULL},
    /* 0.5 erf(x / 2.4020563531719796) + 0.5, stax's constants. */
    {"Sigmoid_like", {.kind = NTK_MAP_ERF, .a = 0.5, .b = 1 / 2.4020563531719796, .c = 0.5}, {{0}}, NULL},
    /* approximate (tanh) changes only stax's finite-width apply_fn */
    {"Gelu", {.kind = NTK_MAP_GELU}, {{"approximate", NTK_PARAM_BOOL, NTK_SLOT_NONE, 0.0, ANY}}, NULL},
    {"Sin", {.kind = NTK_MAP_SIN}, ABC_PARAMS, NULL},
    {"Cos", {.kind = NTK_MAP_SIN}, ABC_PARAMS, cos_phase},
    {"Rbf", {.kind = NTK_MAP_RBF}, {{"gamma", NTK_PARAM_NUMBER, NTK_SLOT_A, 1.0, POSITIVE}}, NULL},
    {"Exp",
     {.kind = NTK_MAP_EXP},
     {{"a", NTK_PARAM_NUMBER, NTK_SLOT_A, 1.0, ANY}, {"b", NTK_PARAM_NUMBER, NTK_SLOT_B, 1.0, ANY}},
     NULL},
    {"ExpNormalized",
     {.kind = NTK_MAP_EXPNORM},
     {{"gamma", NTK_PARAM_NUMBER, NTK_SLOT_A, 1.0, POSITIVE},
      {"shift", NTK_PARAM_NUMBER, NTK_SLOT_B, -1.0, ANY},
      {"do_clip", NTK_PARAM_BOOL, NTK_SLOT_FLAG, 0.0, ANY}},
     NULL},
    /* b > 0 too: E[f^2] is finite while the input variances stay below
     * 1 / (4b), and beyond, the closed form is infinite (a refused tile). */
    {"Gaussian",
     {.kind = NTK_MAP_GAUSSIAN},
     {{"a", NTK_PARAM_NUMBER, NTK_SLOT_A, 1.0, ANY}, {"b", NTK_PARAM_NUMBER, NTK_SLOT_B, -1.0, ANY}},
     NULL},
    {"Sign", {.kind = NTK_MAP_SIGN}, {{0}}, NULL},
    {"Monomial",
     {.kind = NTK_MAP_MONOMIAL},
     {{"degree", NTK_PARAM_INT, NTK_SLOT_DEGREE, REQUIRED, DEGREES(5)}},
     NULL},
    {"RectifiedMonomial",
     {.kind = NTK_MAP_RECTMONO},
     {{"degree", NTK_PARAM_INT, NTK_SLOT_DEGREE, REQUIRED, DEGREES(1000)}},
     NULL},
    {"Polynomial", {.kind = NTK_MAP_POLYNOMIAL}, {{"coef", NTK_PARAM_LIST, NTK_SLOT_COEF, REQUIRED, ANY}}, NULL},
    {"Hermite", {.kind = NTK_MAP_HERMITE}, {{"degree", NTK_PARAM_INT, NTK_SLOT_DEGREE, REQUIRED, DEGREES(1000)}}, NULL},
    {"Gabor", {.kind = NTK_MAP_GABOR}, {{0}}, NULL},
};

const struct ntk_map_name *ntk_map_name_find(const char *name) {
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(names[i].name, name)) return &names[i];
  return NULL;
}

const struct ntk_map_name *ntk_map_names(size_t *count) {
  *count = sizeof names / sizeof names[0];
  return names;
}

/* ---- ElementwiseNumerical's functions --------------------------------------- */

/* The functions a notebook passes ElementwiseNumerical, by their names in
 * jax.nn / jax.numpy / numpy. Those with a closed form become that map
 * (jnp.sin is Sin, exactly); the others are computed by quadrature
 * (src/kernels/numerical.c) with jax.nn's default alpha. */
static const struct ntk_fn_name {
  const char *name;
  const char *closed; /* a map of the table above, or NULL */
  int fn;             /* enum ntk_numfn */
  double alpha;
} fns[] = {
    {"tanh", NULL, NTK_FN_TANH, 0},       {"sigmoid", NULL, NTK_FN_SIGMOID, 0},
    {"softplus", NULL, NTK_FN_SOFTPLUS, 0}, {"silu", NULL, NTK_FN_SILU, 0},
    {"swish", NULL, NTK_FN_SILU, 0},      {"elu", NULL, NTK_FN_ELU, 1.0},
    {"selu", NULL, NTK_FN_SELU, NTK_SELU_ALPHA}, {"celu", NULL, NTK_FN_CELU, 1.0},
    {"sin", "Sin", 0, 0},                 {"cos", "Cos", 0, 0},
    {"exp", "Exp", 0, 0},                 {"abs", "Abs", 0, 0},
    {"absolute", "Abs", 0, 0},            {"relu", "Relu", 0, 0},
    {"erf", "Erf", 0, 0},
};

/* The modules the functions are written from. */
static const char *const fn_modules[] = {"jax.nn.", "jax.numpy.", "jax.scipy.special.", "jnp.", "np.", "numpy.",
                                         "onp.", "nn.", "scipy.special.", "math.", "torch."};

int ntk_numfn_find(const char *spelling, struct ntk_map *map, const char **closed) {
  const char *name = spelling;
  for (size_t i = 0; i < sizeof fn_modules / sizeof fn_modules[0]; i++) {
    size_t n = strlen(fn_modules[i]);
    if (!strncmp(spelling, fn_modules[i], n)) {
      name = spelling + n;
      break;
    }
  }
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    /* jnp.tanh as written; Tanh, the short name, without a module */
    int same = name == spelling ? !strcasecmp(fns[i].name, name) : !strcmp(fns[i].name, name);
    if (!same) continue;
    *closed = fns[i].closed;
    memset(map, 0, sizeof *map);
    map->kind = NTK_MAP_NUMERICAL;
    map->degree = fns[i].fn;
    map->a = fns[i].alpha;
    return 1;
  }
  return 0;
}

size_t ntk_numfn_known(char *buf, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < sizeof fns / sizeof fns[0] && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", fns[i].name);
  return n;
}
