/* Reader for the neural-tangents reference files tests/data/ref_*.txt
 * (written by scripts/nt_reference.py). */
#ifndef NTKD_REFCASE_H
#define NTKD_REFCASE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/data.h"
#include "testutil.h"

struct ref_case {
  char name[128];
  char arch[8192];
  size_t n, d, h, w, c; /* h = w = c = 0 for flat inputs */
  int standard;         /* parameterization standard (else ntk) */
  size_t pattern;       /* a graph case's pattern values per sample, (h w)^2; 0: none */
  double *x, *p, *nngp, *ntk;
};

static inline int ref_read_matrix(FILE *f, const char *label, double *out, size_t count) {
  char word[64];
  if (fscanf(f, "%63s", word) != 1 || strcmp(word, label)) return 0;
  for (size_t i = 0; i < count; i++)
    if (fscanf(f, "%lf", &out[i]) != 1) return 0;
  return 1;
}

static inline FILE *ref_open(const char *file) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", getenv("NTKD_TEST_DATA") ? getenv("NTKD_TEST_DATA") : "tests/data", file);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  return f;
}

/* Next case; 0 at the end. */
static inline int ref_read_case(FILE *f, struct ref_case *c) {
  char line[8192];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "case ", 5)) continue;
    sscanf(line + 5, "%127s", c->name);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert(!strncmp(line, "arch ", 5));
    line[strcspn(line, "\n")] = '\0';
    snprintf(c->arch, sizeof c->arch, "%s", line + 5);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    c->standard = 0;
    if (!strncmp(line, "parameterization standard", 25)) { /* else 'ntk', stax's default */
      c->standard = 1;
      ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    }
    size_t v[4] = {0};
    int got = sscanf(line, "shape %zu %zu %zu %zu", &v[0], &v[1], &v[2], &v[3]);
    ck_assert(got == 2 || got == 4);
    c->n = v[0];
    c->h = got == 4 ? v[1] : 0;
    c->w = got == 4 ? v[2] : 0;
    c->c = got == 4 ? v[3] : 0;
    c->d = got == 4 ? v[1] * v[2] * v[3] : v[1];
    c->x = malloc(c->n * c->d * sizeof(double));
    c->nngp = malloc(c->n * c->n * sizeof(double));
    c->ntk = malloc(c->n * c->n * sizeof(double));
    ck_assert(ref_read_matrix(f, "x", c->x, c->n * c->d));
    /* a graph case (ref_graph.txt): each sample's pattern before the kernels */
    c->pattern = 0;
    c->p = NULL;
    long at = ftell(f);
    char word[16];
    size_t nv = 0;
    ck_assert_int_eq(fscanf(f, "%15s", word), 1);
    if (strcmp(word, "pattern")) fseek(f, at, SEEK_SET);
    else { /* "pattern V": V the positions the Aggregates see */
      ck_assert_int_eq(fscanf(f, "%zu", &nv), 1);
      c->pattern = nv * nv;
      c->p = malloc(c->n * c->pattern * sizeof(double));
      for (size_t i = 0; i < c->n * c->pattern; i++) ck_assert_int_eq(fscanf(f, "%lf", &c->p[i]), 1);
    }
    ck_assert(ref_read_matrix(f, "nngp", c->nngp, c->n * c->n));
    ck_assert(ref_read_matrix(f, "ntk", c->ntk, c->n * c->n));
    return 1;
  }
  return 0;
}

static inline void ref_free_case(struct ref_case *c) {
  free(c->x);
  free(c->p);
  free(c->nngp);
  free(c->ntk);
}

/* The case's inputs as a dataset in precision elem (caller frees x): each
 * sample's values, then its pattern's where it has one. */
static inline struct ntk_dataset ref_dataset(const struct ref_case *c, int elem) {
  size_t d = c->d + c->pattern;
  struct ntk_dataset ds = {c->n, d, c->h, c->w, c->c, elem, malloc(c->n * d * (size_t)elem), 0, 0, c->pattern};
  for (size_t i = 0; i < c->n; i++)
    for (size_t k = 0; k < d; k++) {
      double v = k < c->d ? c->x[i * c->d + k] : c->p[i * c->pattern + k - c->d];
      if (elem == 4) ((float *)ds.x)[i * d + k] = (float)v;
      else ((double *)ds.x)[i * d + k] = v;
    }
  return ds;
}

/* Largest error of the n x n matrix `got` (elements of got_elem bytes:
 * 4 float, 8 double) against `ref`. With `plain`, the relative error
 * |got - ref| / |ref|. Otherwise relative to max(|ref_ij|,
 * sqrt(ref_ii ref_jj)): an entry much smaller than its inputs' variances
 * (cancellation) carries float32's absolute rounding of those terms. The
 * plain error is never smaller. NaN propagates. */
static inline double ref_max_err(const void *got, int got_elem, const double *ref, size_t n, int plain) {
  double worst = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < n; j++) {
      size_t k = i * n + j;
      if (isnan(ref[k])) continue; /* stax's own NaN (a RectifiedMonomial's diagonal NTK): not compared */
      double v = got_elem == 4 ? ((const float *)got)[k] : ((const double *)got)[k];
      double scale = fabs(ref[k]), diag = sqrt(fabs(ref[i * n + i] * ref[j * n + j]));
      if (isnan(diag)) { /* no reference diagonal: the computed one sets the scale (it is checked on its own) */
        double gi = got_elem == 4 ? ((const float *)got)[i * n + i] : ((const double *)got)[i * n + i];
        double gj = got_elem == 4 ? ((const float *)got)[j * n + j] : ((const double *)got)[j * n + j];
        diag = sqrt(fabs(gi * gj));
      }
      if (!plain) scale = fmax(scale, diag);
      double e = v == ref[k] ? 0.0 : fabs(v - ref[k]) / scale; /* exact zeros (Sign's NTK) compare as equal */
      if (isnan(e)) return NAN; /* a NaN computed: the worst, and no later finite error may replace it */
      if (e > worst) worst = e;
    }
  return worst;
}

#endif
