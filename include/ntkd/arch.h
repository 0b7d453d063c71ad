/* Architecture strings in neural-tangents' stax vocabulary, parsed into a
 * flat list of layers, and the validity rules stax enforces. Pure; no I/O. */
#ifndef NTKD_ARCH_H
#define NTKD_ARCH_H

#include <stddef.h>

#include "ntkd/status.h"

typedef enum ntk_layer_kind {
  NTK_LAYER_DENSE,
  NTK_LAYER_CONV,
  NTK_LAYER_ABRELU, /* Relu, LeakyRelu(a), Abs: a*min(x,0) + b*max(x,0) */
  NTK_LAYER_ERF,
  NTK_LAYER_IDENTITY,
  NTK_LAYER_AVGPOOL,
  NTK_LAYER_FLATTEN,
  NTK_LAYER_GLOBALAVGPOOL,
} ntk_layer_kind;

typedef enum ntk_padding {
  NTK_PAD_VALID,
  NTK_PAD_SAME,
  NTK_PAD_CIRCULAR,
} ntk_padding;

struct ntk_layer {
  ntk_layer_kind kind;
  double w_std, b_std;  /* Dense, Conv */
  double a, b;          /* ABRelu slopes for x<0 and x>0 */
  int filter, stride;   /* Conv: filter edge; Conv, AvgPool: stride */
  int window;           /* AvgPool window edge */
  ntk_padding padding;  /* Conv */
  char name[16];        /* spelling used in the string: Relu, LeakyRelu, Abs, ... */
};

struct ntk_arch {
  size_t n;
  struct ntk_layer *layers; /* owned; free with ntk_arch_free() */
};

/* Parse `text`. Layers without W_std/b_std get `w_std`/`b_std`. On error
 * returns NTK_ECONFIG with a message naming the column and the problem.
 * Rank-local. The caller frees `out` with ntk_arch_free(). */
ntk_status ntk_arch_parse(const char *text, double w_std, double b_std,
                          struct ntk_arch *out);

void ntk_arch_free(struct ntk_arch *arch);

/* True if every layer is one the fully-connected path computes
 * (Dense, nonlinearities, Identity, Flatten). */
int ntk_arch_is_fc(const struct ntk_arch *arch);

/* Canonical text: every layer with all its parameters spelled out, so two
 * strings that denote the same network give the same text. Writes at most
 * `cap` bytes including the NUL; returns the length it needed. */
size_t ntk_arch_canonical(const struct ntk_arch *arch, char *buf, size_t cap);

/* The same for one layer ("Dense(W_std=1.5, b_std=0)"); snprintf's contract. */
size_t ntk_arch_layer_canonical(const struct ntk_layer *layer, char *buf, size_t cap);

#endif
