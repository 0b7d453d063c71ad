/* The job file: a small INI reader of our own (line by line, with file:line
 * in every message and no limit on the length of a line or a value) and the
 * checks of every section, key and value. */
#include "job/config.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/arch.h"
#include "base/fsutil.h"
#include "base/numparse.h"
#include "job/data.h"

/* Bit numbers (in a uint64_t) for the keys seen, to catch duplicates. */
enum {
  SEEN_PATH, SEEN_FORMAT, SEEN_LAYOUT, SEEN_COUNT, SEEN_SCALE, SEEN_ARCH, SEEN_WSTD, SEEN_BSTD, SEEN_PARAM, SEEN_KERNEL,
  SEEN_PRECISION, SEEN_TILE, SEEN_OPATH, SEEN_LEVEL, SEEN_PROGRESS, SEEN_SYNC, SEEN_DIRECT, SEEN_LABELS, SEEN_LAYERS,
  SEEN_BATCH, SEEN_EPOCHS, SEEN_ALPHA, SEEN_BETA1, SEEN_BETA2, SEEN_EPS, SEEN_SEED, SEEN_FLUSH,
  SEEN_SNAPSHOT, SEEN_LOG, SEEN_VPATH, SEEN_VLABELS, SEEN_VCOUNT, SEEN_DEVICE, SEEN_TPATH, SEEN_TLABELS,
  SEEN_TCOUNT, SEEN_TTT, SEEN_RTIMEOUT, SEEN_RIDGE, SEEN_PRED, SEEN_BACKEND, SEEN_WTIMEOUT, SEEN_METHOD, SEEN_BLOCK, SEEN_GRID,
  SEEN_TOL, SEEN_MAXIT, SEEN_PRANK, SEEN_CGKERNEL, SEEN_CGPRODUCTS, SEEN_LOO, SEEN_VARIANCE, SEEN_CLASSES,
  SEEN_PATTERN, SEEN_TPATTERN,
};
#define HAS(c, key) (((c)->seen >> (key)) & 1u)

/* Sections in the order of messages; index = enum value. */
enum { SEC_DATA, SEC_MODEL, SEC_COMPUTE, SEC_OUTPUT, SEC_TEST, SEC_SOLVE, SEC_TRAIN, SEC_VALIDATION, NSECTIONS };
static const char *const section_names[NSECTIONS] = {"data", "model", "compute", "output", "test", "solve",
                                                     "train", "validation"};
#define SECTION_LIST "data, model, compute, output, test, solve, train, validation"

/* Longest value or key quoted in a message: values have no length limit. */
#define SHOWN 200

struct ctx {
  struct ntk_job *job;
  const char *name;      /* job file name, for messages */
  size_t dirlen;         /* its folder: the first dirlen bytes of name ('/' included), 0: none */
  int line;              /* line being read */
  uint64_t seen;
  int layout_line;           /* line of [data] layout, for refusing NCHW and NLC on files that are not .npy */
  int lines[NSECTIONS];  /* first line of each section, 0: absent */
  int key_line[64];      /* line of each key seen (by its SEEN_ bit), for checks across keys */
  ntk_status st;
};

static int fail(struct ctx *c, const char *section, const char *key, const char *fmt, const char *val) {
  char shown[SHOWN + 8], what[SHOWN + 400];
  if (strlen(val) > SHOWN) {
    snprintf(shown, sizeof shown, "%.*s...", SHOWN, val);
    val = shown;
  }
  snprintf(what, sizeof what, fmt, val);
  c->st = ntk_error(NTK_ECONFIG, "%s:%d: [%s] %.*s: %s", c->name, c->line, section, SHOWN, key, what);
  return 0;
}

static int out_of_memory(struct ctx *c) {
  c->st = ntk_error(NTK_ENOMEM, "%s:%d: out of memory", c->name, c->line);
  return 0;
}

static int resolve_path(struct ctx *c, const char *v, char *out) {
  int n = v[0] == '/' ? snprintf(out, NTK_PATH_MAX, "%s", v)
                      : snprintf(out, NTK_PATH_MAX, "%.*s%s", (int)c->dirlen, c->name, v);
  return n > 0 && n < NTK_PATH_MAX;
}

static int once(struct ctx *c, const char *section, const char *key, int bit) {
  if (HAS(c, bit)) return fail(c, section, key, "%s", "given twice");
  c->seen |= (uint64_t)1 << bit;
  c->key_line[bit] = c->line;
  return 1;
}

/* A key whose value is one path (given once, not empty), resolved against
 * the job file's folder into `out` (NTK_PATH_MAX bytes). */
static int path_key(struct ctx *c, const char *s, const char *k, const char *v, int bit, char *out) {
  if (!once(c, s, k, bit)) return 0;
  if (!*v) return fail(c, s, k, "%s", "empty");
  if (!resolve_path(c, v, out)) return fail(c, s, k, "%s", "too long");
  return 1;
}

/* The list parsers below cut their tokens from a heap copy of the value,
 * since a value may be of any length; each frees it on every way out. */

/* Whitespace-separated paths (CIFAR-10 batches) into `paths`. */
static int parse_paths(struct ctx *c, const char *s, const char *k, const char *v,
                       char paths[][NTK_PATH_MAX], int *n) {
  char *tmp = strdup(v);
  if (!tmp) return out_of_memory(c);
  int ok = 1;
  *n = 0;
  for (char *save, *tok = strtok_r(tmp, " \t", &save); ok && tok; tok = strtok_r(NULL, " \t", &save)) {
    if (*n == NTK_MAX_DATA_FILES) ok = fail(c, s, k, "%s", "more than 16 files");
    else if (!resolve_path(c, tok, paths[(*n)++])) ok = fail(c, s, k, "'%s' is too long", tok);
  }
  free(tmp);
  if (ok && !*n) ok = fail(c, s, k, "%s", "empty");
  return ok;
}

/* [train] layers: 2 to 16 sizes. */
static int parse_layers(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_train_opts *t = &c->job->train;
  char *tmp = strdup(v);
  if (!tmp) return out_of_memory(c);
  int ok = 1;
  t->nlayers = 0;
  for (char *save, *tok = strtok_r(tmp, " \t", &save); ok && tok; tok = strtok_r(NULL, " \t", &save)) {
    size_t n;
    if (t->nlayers == NTK_TRAIN_MAX_LAYERS) ok = fail(c, s, k, "%s", "more than 16 sizes");
    else if (!ntk_parse_size(tok, &n) || n == 0 || n > NTK_TRAIN_MAX_SIZE)
      ok = fail(c, s, k, "'%s' is not a layer size in 1..16777216", tok);
    else t->layers[t->nlayers++] = n;
  }
  free(tmp);
  if (!ok) return 0;
  if (t->nlayers < 2)
    return fail(c, s, k, "'%s' needs at least the input size and the number of classes, e.g. 784 1000 10", v);
  if (t->layers[t->nlayers - 1] < 2) return fail(c, s, k, "%s", "the last size (classes) must be at least 2");
  return 1;
}

/* [solve] ridge: 1 to 32 values >= 0, separated by commas or whitespace
 * (a comma between two values: `1e-3,,1e-2` is a value left out). -0 is 0:
 * one predictions file name per value. */
static int parse_ridges(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_solve_opts *o = &c->job->solve;
  int value = 0; /* a value since the last comma */
  for (const char *p = v; *p; p++) {
    if (*p == ',' && !value) return fail(c, s, k, "'%s': a comma with no value before it", v);
    if (*p == ',') value = 0;
    else if (*p != ' ' && *p != '\t') value = 1;
  }
  if (strchr(v, ',') && !value) return fail(c, s, k, "'%s': a comma with no value after it", v);
  char *tmp = strdup(v);
  if (!tmp) return out_of_memory(c);
  int ok = 1;
  o->nridge = 0;
  for (char *save, *tok = strtok_r(tmp, " \t,", &save); ok && tok; tok = strtok_r(NULL, " \t,", &save)) {
    double r;
    if (o->nridge == NTK_MAX_RIDGES) ok = fail(c, s, k, "%s", "more than 32 values");
    else if (!ntk_parse_double(tok, &r) || r < 0) ok = fail(c, s, k, "'%s' is not a number >= 0", tok);
    else {
      for (size_t i = 0; ok && i < o->nridge; i++)
        if (o->ridge[i] == r) ok = fail(c, s, k, "'%s': that ridge is given twice", tok);
      if (ok) o->ridge[o->nridge++] = r == 0 ? 0.0 : r;
    }
  }
  free(tmp);
  if (ok && !o->nridge) ok = fail(c, s, k, "%s", "empty");
  return ok;
}

static int on_data(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_job *j = c->job;
  if (!strcmp(k, "path")) {
    if (!once(c, s, k, SEEN_PATH)) return 0;
    if (!parse_paths(c, s, k, v, j->data_path, &j->ndata)) return 0;
    j->data_line = c->line;
  } else if (!strcmp(k, "format")) {
    if (!once(c, s, k, SEEN_FORMAT)) return 0;
    if (!strcmp(v, "auto")) j->format = NTK_FORMAT_AUTO;
    else if (!strcmp(v, "npy")) j->format = NTK_FORMAT_NPY;
    else if (!strcmp(v, "idx")) j->format = NTK_FORMAT_IDX;
    else if (!strcmp(v, "cifar10")) j->format = NTK_FORMAT_CIFAR10;
    else return fail(c, s, k, "'%s' is not one of auto, npy, idx, cifar10", v);
  } else if (!strcmp(k, "layout")) {
    if (!once(c, s, k, SEEN_LAYOUT)) return 0;
    if (!strcmp(v, "NHWC")) j->layout = NTK_LAYOUT_NHWC;
    else if (!strcmp(v, "NCHW")) j->layout = NTK_LAYOUT_NCHW;
    else if (!strcmp(v, "NLC")) j->layout = NTK_LAYOUT_NLC;
    else return fail(c, s, k, "'%s' is not NHWC, NCHW or NLC", v);
    c->layout_line = c->line;
  } else if (!strcmp(k, "count")) {
    if (!once(c, s, k, SEEN_COUNT)) return 0;
    if (!ntk_parse_size(v, &j->count) || j->count == 0)
      return fail(c, s, k, "'%s' is not a positive integer", v);
  } else if (!strcmp(k, "scale")) {
    if (!once(c, s, k, SEEN_SCALE)) return 0;
    if (!ntk_parse_double(v, &j->scale) || j->scale == 0.0)
      return fail(c, s, k, "'%s' is not a finite non-zero number", v);
    j->has_scale = 1;
  } else if (!strcmp(k, "labels")) {
    if (!path_key(c, s, k, v, SEEN_LABELS, j->labels_path)) return 0;
    j->labels_line = c->line;
  } else if (!strcmp(k, "pattern")) {
    if (!path_key(c, s, k, v, SEEN_PATTERN, j->pattern_path)) return 0;
    j->pattern_line = c->line;
  } else if (!strcmp(k, "classes")) {
    if (!once(c, s, k, SEEN_CLASSES)) return 0;
    if (!ntk_parse_size(v, &j->classes) || j->classes < 2 || j->classes > NTK_LABELS_MAX)
      return fail(c, s, k, "'%s' is not a class count from 2 to 65536", v);
    j->classes_line = c->line;
  } else {
    return fail(c, s, k, "%s", "unknown key (path, format, layout, count, scale, labels, pattern, classes)");
  }
  return 1;
}

static int on_model(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_job *j = c->job;
  if (!strcmp(k, "arch")) {
    if (!once(c, s, k, SEEN_ARCH)) return 0;
    if (!(j->arch = strdup(v))) return out_of_memory(c);
    j->arch_line = c->line;
    j->arch_lines = 1;
  } else if (!strcmp(k, "w_std")) {
    if (!once(c, s, k, SEEN_WSTD)) return 0;
    if (!ntk_parse_double(v, &j->w_std) || j->w_std < 0) return fail(c, s, k, "'%s' is not a number >= 0", v);
  } else if (!strcmp(k, "b_std")) {
    if (!once(c, s, k, SEEN_BSTD)) return 0;
    if (!ntk_parse_double(v, &j->b_std) || j->b_std < 0) return fail(c, s, k, "'%s' is not a number >= 0", v);
    j->b_std_given = 1;
  } else if (!strcmp(k, "parameterization")) {
    if (!once(c, s, k, SEEN_PARAM)) return 0;
    if (!strcmp(v, "ntk")) j->standard = 0;
    else if (!strcmp(v, "standard")) j->standard = 1;
    else return fail(c, s, k, "'%s' is not ntk or standard", v);
  } else if (!strcmp(k, "kernel")) {
    if (!once(c, s, k, SEEN_KERNEL)) return 0;
    if (!strcmp(v, "nngp")) j->kernels = NTK_KERNEL_NNGP;
    else if (!strcmp(v, "ntk")) j->kernels = NTK_KERNEL_NNGP | NTK_KERNEL_NTK;
    else return fail(c, s, k, "'%s' is not nngp or ntk", v);
  } else {
    return fail(c, s, k, "%s", "unknown key (arch, w_std, b_std, parameterization, kernel)");
  }
  return 1;
}

static int on_compute(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_job *j = c->job;
  if (!strcmp(k, "precision")) {
    if (!once(c, s, k, SEEN_PRECISION)) return 0;
    if (!strcmp(v, "float32")) j->precision = 4;
    else if (!strcmp(v, "float64")) j->precision = 8;
    else return fail(c, s, k, "'%s' is not float32 or float64", v);
  } else if (!strcmp(k, "tile")) {
    if (!once(c, s, k, SEEN_TILE)) return 0;
    if (!ntk_parse_size(v, &j->tile) || j->tile == 0 || j->tile > 16384)
      return fail(c, s, k, "'%s' is not an integer in 1..16384", v);
  } else if (!strcmp(k, "backend")) {
    if (!once(c, s, k, SEEN_BACKEND)) return 0;
    if (!strcmp(v, "auto")) j->backend = NTK_BACKEND_AUTO;
    else if (!strcmp(v, "cpu")) j->backend = NTK_BACKEND_CPU;
    else if (!strcmp(v, "cuda")) j->backend = NTK_BACKEND_CUDA;
    else return fail(c, s, k, "'%s' is not auto, cpu or cuda", v);
  } else if (!strcmp(k, "worker_timeout")) {
    if (!once(c, s, k, SEEN_WTIMEOUT)) return 0;
    if (!ntk_parse_double(v, &j->worker_timeout) || j->worker_timeout <= 0)
      return fail(c, s, k, "'%s' is not a positive number of seconds", v);
  } else {
    return fail(c, s, k, "%s", "unknown key (precision, tile, backend, worker_timeout)");
  }
  return 1;
}

static int on_output(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_job *j = c->job;
  if (!strcmp(k, "path")) {
    if (!path_key(c, s, k, v, SEEN_OPATH, j->out_path)) return 0;
    j->out_path_line = c->line;
  } else if (!strcmp(k, "level")) {
    if (!once(c, s, k, SEEN_LEVEL)) return 0;
    double d;
    if (!ntk_parse_double(v, &d) || d != floor(d) || d < -7 || d > 19)
      return fail(c, s, k, "'%s' is not an integer zstd level in -7..19", v);
    j->level = (int)d;
  } else if (!strcmp(k, "progress")) {
    if (!once(c, s, k, SEEN_PROGRESS)) return 0;
    if (!ntk_parse_double(v, &j->progress_interval) || j->progress_interval <= 0)
      return fail(c, s, k, "'%s' is not a positive number of seconds", v);
  } else if (!strcmp(k, "sync")) {
    if (!once(c, s, k, SEEN_SYNC)) return 0;
    if (!ntk_parse_double(v, &j->sync_interval) || j->sync_interval < 0)
      return fail(c, s, k, "'%s' is not a number of seconds >= 0", v);
  } else if (!strcmp(k, "direct_io")) {
    if (!once(c, s, k, SEEN_DIRECT)) return 0;
    if (strcmp(v, "yes") && strcmp(v, "no")) return fail(c, s, k, "'%s' is not yes or no", v);
    j->direct_io = !strcmp(v, "yes");
  } else {
    return fail(c, s, k, "%s", "unknown key (path, level, progress, sync, direct_io)");
  }
  return 1;
}

static int on_train(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_train_opts *t = &c->job->train;
  if (!strcmp(k, "layers")) {
    if (!once(c, s, k, SEEN_LAYERS)) return 0;
    if (!parse_layers(c, s, k, v)) return 0;
    t->layers_line = c->line;
  } else if (!strcmp(k, "batch")) {
    if (!once(c, s, k, SEEN_BATCH)) return 0;
    if (!ntk_parse_size(v, &t->batch) || t->batch == 0 || t->batch > NTK_TRAIN_MAX_SIZE)
      return fail(c, s, k, "'%s' is not an integer in 1..16777216", v);
    t->batch_line = c->line;
  } else if (!strcmp(k, "epochs")) {
    if (!once(c, s, k, SEEN_EPOCHS)) return 0;
    if (!ntk_parse_size(v, &t->epochs) || t->epochs == 0 || t->epochs > NTK_TRAIN_MAX_EPOCHS)
      return fail(c, s, k, "'%s' is not an integer in 1..1000000", v);
  } else if (!strcmp(k, "alpha")) {
    if (!once(c, s, k, SEEN_ALPHA)) return 0;
    /* The update runs in float32: a larger alpha is inf there, a smaller
     * one subnormal, which flush_denormals reads as 0: no parameter would
     * ever change, and the job would end "trained" (as eps below). */
    if (!ntk_parse_double(v, &t->alpha) || t->alpha < FLT_MIN || t->alpha > FLT_MAX)
      return fail(c, s, k, "'%s' is not a number in [1.18e-38, 3.4e38] (float32's normal range)", v);
  } else if (!strcmp(k, "beta1") || !strcmp(k, "beta2")) {
    int one = k[4] == '1';
    if (!once(c, s, k, one ? SEEN_BETA1 : SEEN_BETA2)) return 0;
    double *b = one ? &t->beta1 : &t->beta2;
    if (!ntk_parse_double(v, b) || *b < 0 || *b >= 1) return fail(c, s, k, "'%s' is not a number in [0, 1)", v);
  } else if (!strcmp(k, "eps")) {
    if (!once(c, s, k, SEEN_EPS)) return 0;
    /* Adam's step is m / (sqrt(v) + eps), about +-1 for any gradient
     * size; but v = g^2 in float32 is below 1.18e-38 (0 under
     * flush_denormals, subnormal or 0 without) once |g| < 1.1e-19, while
     * m ~ g stays a normal number. Then the step is m / eps: with eps =
     * 1e-38 parameters grew to 1e15 in 30 steps and the job ended "trained".
     * From 1e-15 on, m / eps stays below 1, a normal step, for such a
     * parameter: v < 1.18e-38 bounds |m| by about sqrt(1.18e-38 / (1 -
     * beta2)), 3.4e-18 for beta2 = 0.999, below 1e-15 up to beta2 = 1 -
     * 1.2e-8. (Below 1.18e-38 eps itself is 0 under FTZ: 0 / 0.) */
    if (!ntk_parse_double(v, &t->eps) || !(t->eps >= NTK_TRAIN_MIN_EPS) || t->eps > FLT_MAX)
      return fail(c, s, k, "'%s' is not a number in [1e-15, 3.4e38]: float32 squares a gradient below 1.1e-19 "
                  "to 0 (below its normal range), and a smaller eps then makes Adam's step m / eps, "
                  "far beyond alpha (docs/TRAINING.md, \"Subnormals\")", v);
  } else if (!strcmp(k, "seed")) {
    if (!once(c, s, k, SEEN_SEED)) return 0;
    size_t seed;
    if (!ntk_parse_size(v, &seed)) return fail(c, s, k, "'%s' is not a non-negative integer", v);
    t->seed = seed;
  } else if (!strcmp(k, "flush_denormals")) {
    if (!once(c, s, k, SEEN_FLUSH)) return 0;
    if (!strcmp(v, "true")) t->flush_denormals = 1;
    else if (!strcmp(v, "false")) t->flush_denormals = 0;
    else return fail(c, s, k, "'%s' is not true or false", v);
  } else if (!strcmp(k, "device")) {
    if (!once(c, s, k, SEEN_DEVICE)) return 0;
    if (!strcmp(v, "auto")) t->device = NTK_TRAIN_DEVICE_AUTO;
    else if (!strcmp(v, "cpu")) t->device = NTK_TRAIN_DEVICE_CPU;
    else if (!strcmp(v, "cuda")) t->device = NTK_TRAIN_DEVICE_CUDA;
    else return fail(c, s, k, "'%s' is not auto, cpu or cuda", v);
  } else if (!strcmp(k, "rank_timeout")) {
    if (!once(c, s, k, SEEN_RTIMEOUT)) return 0;
    /* At least 1 s: below it a healthy job's first snapshot (an fsync, not
     * yet seen in the run's own pace) was taken for a stopped rank, exit 9 */
    if (!ntk_parse_double(v, &t->rank_timeout) || !(t->rank_timeout >= 1) || !isfinite(t->rank_timeout))
      return fail(c, s, k, "'%s' is not a number of seconds of at least 1", v);
  } else if (!strcmp(k, "snapshot") || !strcmp(k, "log")) {
    int snap = k[0] == 's';
    if (!path_key(c, s, k, v, snap ? SEEN_SNAPSHOT : SEEN_LOG, snap ? t->snapshot : t->log)) return 0;
    *(snap ? &t->snapshot_line : &t->log_line) = c->line;
  } else {
    return fail(c, s, k, "%s", "unknown key (layers, batch, epochs, alpha, beta1, beta2, eps, seed, "
                "flush_denormals, device, rank_timeout, snapshot, log)");
  }
  return 1;
}

static int on_validation(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_train_opts *t = &c->job->train;
  if (!strcmp(k, "path") || !strcmp(k, "labels")) {
    int path = k[0] == 'p';
    if (!path_key(c, s, k, v, path ? SEEN_VPATH : SEEN_VLABELS, path ? t->val_path : t->val_labels)) return 0;
    *(path ? &t->val_path_line : &t->val_labels_line) = c->line;
  } else if (!strcmp(k, "count")) {
    if (!once(c, s, k, SEEN_VCOUNT)) return 0;
    if (!ntk_parse_size(v, &t->val_count) || t->val_count == 0)
      return fail(c, s, k, "'%s' is not a positive integer", v);
  } else {
    return fail(c, s, k, "%s", "unknown key (path, labels, count)");
  }
  return 1;
}

static int on_test(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_test_opts *t = &c->job->test;
  if (!strcmp(k, "path")) {
    if (!once(c, s, k, SEEN_TPATH)) return 0;
    if (!parse_paths(c, s, k, v, t->path, &t->ndata)) return 0;
    t->path_line = c->line;
  } else if (!strcmp(k, "labels")) {
    if (!path_key(c, s, k, v, SEEN_TLABELS, t->labels)) return 0;
    t->labels_line = c->line;
  } else if (!strcmp(k, "pattern")) {
    if (!path_key(c, s, k, v, SEEN_TPATTERN, t->pattern)) return 0;
    t->pattern_line = c->line;
  } else if (!strcmp(k, "count")) {
    if (!once(c, s, k, SEEN_TCOUNT)) return 0;
    if (!ntk_parse_size(v, &t->count) || t->count == 0) return fail(c, s, k, "'%s' is not a positive integer", v);
  } else if (!strcmp(k, "test_test")) {
    if (!once(c, s, k, SEEN_TTT)) return 0;
    if (!strcmp(v, "yes")) t->test_test = 1;
    else if (!strcmp(v, "no")) t->test_test = 0;
    else return fail(c, s, k, "'%s' is not yes or no", v);
  } else {
    return fail(c, s, k, "%s", "unknown key (path, labels, pattern, count, test_test)");
  }
  return 1;
}

/* Position of `v` in the NULL-terminated `words`, or -1. */
static int word_index(const char *v, const char *const *words) {
  for (int i = 0; words[i]; i++)
    if (!strcmp(v, words[i])) return i;
  return -1;
}

/* "ROWS x COLS": two decimal integers without sign around an 'x', spaces
 * allowed beside it. strtoull with errno, as ntk_parse_size: sscanf's %d
 * wrapped numbers past int (4294967297 x 1 was read as 1 x 1). */
static int parse_grid(const char *v, unsigned long long *rows, unsigned long long *cols) {
  unsigned long long *out[2] = {rows, cols};
  for (int i = 0; i < 2; i++) {
    while (*v == ' ' || *v == '\t') v++;
    if (*v < '0' || *v > '9') return 0;
    char *end;
    errno = 0;
    *out[i] = strtoull(v, &end, 10);
    if (errno) return 0;
    v = end;
    while (*v == ' ' || *v == '\t') v++;
    if (i == 0 && *v++ != 'x') return 0;
  }
  return *v == '\0';
}

static int on_solve(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_solve_opts *o = &c->job->solve;
  if (!strcmp(k, "ridge")) {
    if (!once(c, s, k, SEEN_RIDGE)) return 0;
    if (!parse_ridges(c, s, k, v)) return 0;
    o->ridge_line = c->line;
  } else if (!strcmp(k, "predictions")) {
    if (!path_key(c, s, k, v, SEEN_PRED, o->predictions)) return 0;
    o->predictions_line = c->line;
  } else if (!strcmp(k, "method")) {
    if (!once(c, s, k, SEEN_METHOD)) return 0;
    int m = word_index(v, (const char *const[]){"auto", "lapack", "scalapack", "cg", NULL});
    if (m < 0) return fail(c, s, k, "'%s' is not auto, lapack, scalapack or cg", v);
    o->method = m;
  } else if (!strcmp(k, "block")) {
    if (!once(c, s, k, SEEN_BLOCK)) return 0;
    if (!ntk_parse_size(v, &o->block) || o->block == 0 || o->block > 16384)
      return fail(c, s, k, "'%s' is not a block size from 1 to 16384", v);
    o->block_line = c->line;
  } else if (!strcmp(k, "grid")) {
    if (!once(c, s, k, SEEN_GRID)) return 0;
    unsigned long long pr, pc;
    if (!parse_grid(v, &pr, &pc) || pr < 1 || pc < 1 || pr > 65536 || pc > 65536)
      return fail(c, s, k, "'%s' is not a process grid ROWS x COLS from 1 x 1 to 65536 x 65536, e.g. 2 x 3", v);
    o->grid_rows = (int)pr, o->grid_cols = (int)pc;
  } else if (!strcmp(k, "tolerance")) {
    if (!once(c, s, k, SEEN_TOL)) return 0;
    if (!ntk_parse_double(v, &o->tolerance) || !(o->tolerance > 0) || o->tolerance >= 1)
      return fail(c, s, k, "'%s' is not a relative residual in (0, 1)", v);
  } else if (!strcmp(k, "max_iterations")) {
    if (!once(c, s, k, SEEN_MAXIT)) return 0;
    if (!ntk_parse_size(v, &o->max_iterations) || o->max_iterations == 0 || o->max_iterations > 100000000)
      return fail(c, s, k, "'%s' is not a positive integer", v);
  } else if (!strcmp(k, "preconditioner_rank")) {
    if (!once(c, s, k, SEEN_PRANK)) return 0;
    if (!ntk_parse_size(v, &o->precond_rank) || o->precond_rank > 1000000)
      return fail(c, s, k, "'%s' is not an integer from 0 (none) to 1000000", v);
  } else if (!strcmp(k, "cg_kernel")) {
    if (!once(c, s, k, SEEN_CGKERNEL)) return 0;
    int m = word_index(v, (const char *const[]){"auto", "memory", "stream", NULL});
    if (m < 0) return fail(c, s, k, "'%s' is not auto, memory or stream", v);
    o->cg_kernel = m;
  } else if (!strcmp(k, "cg_products")) {
    if (!once(c, s, k, SEEN_CGPRODUCTS)) return 0;
    int m = word_index(v, (const char *const[]){"auto", "float32", "float64", NULL});
    if (m < 0) return fail(c, s, k, "'%s' is not auto, float32 or float64", v);
    o->cg_products = m;
  } else if (!strcmp(k, "loo")) {
    if (!once(c, s, k, SEEN_LOO)) return 0;
    int m = word_index(v, (const char *const[]){"no", "yes", NULL});
    if (m < 0) return fail(c, s, k, "'%s' is not yes or no", v);
    o->loo = m;
  } else if (!strcmp(k, "variance")) {
    if (!once(c, s, k, SEEN_VARIANCE)) return 0;
    int m = word_index(v, (const char *const[]){"no", "yes", "full", NULL});
    if (m < 0) return fail(c, s, k, "'%s' is not no, yes (the test variances) or full (the test covariance)", v);
    o->variance = m;
  } else {
    return fail(c, s, k, "%s", "unknown key (ridge, predictions, method, block, grid, tolerance, max_iterations, "
                "preconditioner_rank, cg_kernel, cg_products, loo, variance)");
  }
  return 1;
}

static int (*const handlers[NSECTIONS])(struct ctx *, const char *, const char *, const char *) = {
    on_data, on_model, on_compute, on_output, on_test, on_solve, on_train, on_validation};

void ntk_job_defaults(struct ntk_job *job) {
  memset(job, 0, sizeof *job);
  job->arch = NULL;
  job->format = NTK_FORMAT_AUTO;
  job->layout = NTK_LAYOUT_NHWC;
  job->w_std = 1.0;
  job->b_std = 0.0;
  job->kernels = NTK_KERNEL_NNGP | NTK_KERNEL_NTK;
  job->precision = 4;
  job->tile = 1024;
  job->level = 1;
  job->direct_io = 1;
  job->progress_interval = 30.0;
  job->sync_interval = 1.0;
  job->worker_timeout = 1800.0;
  job->solve.loo = 1;
  job->solve.precond_rank = NTK_PRECOND_DEFAULT;
  /* Chainer's Adam defaults, and its train_mnist batch and epochs. */
  job->train.batch = 100;
  job->train.epochs = 20;
  job->train.alpha = 0.001;
  job->train.beta1 = 0.9;
  job->train.beta2 = 0.999;
  job->train.eps = 1e-8;
  job->train.flush_denormals = 1;
  job->train.rank_timeout = 1800.0;
}

void ntk_job_free(struct ntk_job *job) {
  if (!job) return;
  free(job->arch);
  job->arch = NULL;
  if (job->net) ntk_arch_free(job->net);
  free(job->net);
  job->net = NULL;
}

/* The INI syntax (docs/JOB-FILE.md). Whitespace: what may surround keys,
 * values and comments; '\r' makes CRLF files read like LF ones. */
static int is_blank(char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\f' || ch == '\v'; }

static char *trim(char *s) {
  while (is_blank(*s)) s++;
  size_t n = strlen(s);
  while (n && is_blank(s[n - 1])) s[--n] = '\0';
  return s;
}

/* Cut `s` (not empty, not starting with whitespace) at its inline comment:
 * '#' or ';' after whitespace. A '#' or ';' inside a word is kept. */
static void cut_comment(char *s) {
  for (char *p = s + 1; *p; p++)
    if ((*p == '#' || *p == ';') && is_blank(p[-1])) {
      *p = '\0';
      return;
    }
}

static ntk_status syntax_error(const struct ctx *c) {
  return ntk_error(NTK_ECONFIG, "%s:%d: syntax error (expected 'key = value' or '[section]')", c->name, c->line);
}

/* Brackets '(' and '[' opened and not closed in s, outside quotes (a
 * quote ends with its line, as a Python string does). */
static int open_brackets(const char *s) {
  int depth = 0;
  char quote = 0;
  for (; *s; s++) {
    if (quote) quote = *s == quote ? 0 : quote;
    else if (*s == '\'' || *s == '"') quote = *s;
    else if (*s == '(' || *s == '[') depth++;
    else if (*s == ')' || *s == ']') depth--;
  }
  return depth;
}

/* The next line of the file, from *line on: counted, cut off at its end
 * (*line then points past it, or is NULL at the end of the file), trimmed,
 * its comment cut. "" for a blank line or a comment line. */
static char *take_line(struct ctx *c, char **line) {
  char *s = *line, *nl = strchr(s, '\n');
  c->line++;
  *line = nl ? nl + 1 : NULL;
  if (nl) *nl = '\0';
  s = trim(s);
  if (!*s || *s == '#' || *s == ';') return s + strlen(s);
  cut_comment(s);
  return trim(s);
}

/* The section [name] names (name trimmed), or -1. */
static int section_index(const char *name, size_t len) {
  while (len && is_blank(*name)) name++, len--;
  while (len && is_blank(name[len - 1])) len--;
  for (int i = 0; i < NSECTIONS; i++)
    if (len == strlen(section_names[i]) && !strncmp(name, section_names[i], len)) return i;
  return -1;
}

/* `arch` may span lines as a notebook writes stax.serial(...): while a
 * bracket is open, the next lines (their comments cut, blank ones and
 * comment lines skipped) are joined to the value with one space. Returns
 * the joined value (malloc'd) and advances *next and c->line past the
 * lines taken; NULL with c->st set when the file or a section header comes
 * first. */
static char *join_lines(struct ctx *c, const char *value, char **next) {
  int first = c->line;
  size_t len = strlen(value), cap = len + 1;
  char *out = malloc(cap);
  if (!out) {
    c->st = ntk_error(NTK_ENOMEM, "%s:%d: out of memory", c->name, c->line);
    return NULL;
  }
  memcpy(out, value, len + 1);
  /* counted line by line: over the whole value each time, 60 000 lines took 42 s */
  for (int depth = open_brackets(value); depth > 0;) {
    if (!*next) {
      c->st = ntk_error(NTK_ECONFIG, "%s:%d: [model] arch: a bracket opened on this line is not closed by the "
                        "end of the file", c->name, first);
      free(out);
      return NULL;
    }
    char *s = take_line(c, next);
    size_t n = strlen(s);
    if (!n) continue;
    if (*s == '[' && s[n - 1] == ']') {
      if (section_index(s + 1, n - 2) >= 0) {
        c->st = ntk_error(NTK_ECONFIG, "%s:%d: [model] arch: a bracket opened on line %d is not closed before "
                          "this section header", c->name, c->line, first);
        free(out);
        return NULL;
      }
    }
    if (len + 1 + n + 1 > cap) {
      cap = 2 * (len + 1 + n + 1);
      char *grown = realloc(out, cap);
      if (!grown) {
        free(out);
        c->st = ntk_error(NTK_ENOMEM, "%s:%d: out of memory", c->name, c->line);
        return NULL;
      }
      out = grown;
    }
    out[len++] = ' ';
    memcpy(out + len, s, n + 1);
    len += n;
    depth += open_brackets(s);
  }
  return out;
}

/* Reads `text` (a private copy, cut up in place) line by line, handing every
 * key to its section's handler. Stops at the first error. */
static ntk_status read_lines(struct ctx *c, char *text) {
  int section = -1; /* no header yet */
  if (!strncmp(text, "\xEF\xBB\xBF", 3)) text += 3; /* a UTF-8 byte order mark, as some editors write */
  for (char *next = text; next;) {
    char *s = take_line(c, &next);
    if (!*s) continue;
    if (*s == '[') {
      char *close = strchr(s, ']');
      if (!close) return ntk_error(NTK_ECONFIG, "%s:%d: section header without ']'", c->name, c->line);
      if (close[1]) return syntax_error(c);
      *close = '\0';
      const char *name = trim(s + 1);
      section = section_index(name, strlen(name));
      if (section < 0)
        return ntk_error(NTK_ECONFIG, "%s:%d: unknown section [%.*s] (" SECTION_LIST ")", c->name, c->line,
                         SHOWN, name);
      if (!c->lines[section]) c->lines[section] = c->line;
      continue;
    }
    char *eq = strchr(s, '=');
    if (!eq || eq == s) return syntax_error(c);
    *eq = '\0';
    const char *key = trim(s), *value = trim(eq + 1);
    if (section < 0)
      return ntk_error(NTK_ECONFIG, "%s:%d: key '%.*s' is outside any section", c->name, c->line, SHOWN, key);
    char *joined = NULL;
    int first = c->line, last = c->line;
    if (section == SEC_MODEL && !strcmp(key, "arch") && open_brackets(value) > 0) {
      if (!(joined = join_lines(c, value, &next))) return c->st;
      value = joined;
      last = c->line;
      c->line = first; /* the value's messages name the line of its key */
    }
    int ok = handlers[section](c, section_names[section], key, value);
    if (ok && joined) c->job->arch_lines = last - first + 1;
    free(joined);
    c->line = last;
    if (!ok) return c->st;
  }
  return NTK_OK;
}

/* The arch string is parsed here, once, so that its errors carry file and
 * line; the job keeps the network (job->net). */
static ntk_status parse_arch(const struct ctx *c) {
  struct ntk_job *job = c->job;
  if (!job->arch) return NTK_OK;
  struct ntk_arch *net = calloc(1, sizeof *net);
  if (!net) return ntk_error(NTK_ENOMEM, "out of memory");
  ntk_status st = ntk_arch_parse_param(job->arch, job->w_std, job->b_std,
                                       job->standard | (job->b_std_given ? NTK_ARCH_B_STD_GIVEN : 0), net);
  /* (N, L, C) data: the network's axes are known without the data (a 2-D
   * layer on sequences, a concatenation axis they lack), so `ntkd check`
   * refuses what the run would (it said OK to Conv(3, 1, SAME) on NLC). */
  if (!st && job->layout == NTK_LAYOUT_NLC && ntk_arch_check_rank(net, 3)) {
    st = NTK_ECONFIG;
    ntk_arch_free(net);
  }
  if (st) {
    free(net);
    return ntk_error(st, "%s:%d: [model] %s%s", c->name, job->arch_line, ntk_error_message(),
                     job->arch_lines > 1 ? " (the column counts in the value's lines joined by single spaces)" : "");
  }
  job->net = net;
  return NTK_OK;
}

/* A training job takes its network from [train] layers and writes a log
 * and snapshots, not a store: a [model], [compute] or [output] section
 * would be silently ignored, so it is refused instead. */
static ntk_status check_training_job(const struct ctx *c) {
  for (int i = SEC_MODEL; i <= SEC_SOLVE; i++)
    if (c->lines[i])
      return ntk_error(NTK_ECONFIG, "%s:%d: [%s] is for kernel jobs; a training job ([train]) takes its "
                       "network from [train] layers and has no [%s] section", c->name, c->lines[i],
                       section_names[i], section_names[i]);
  if (!HAS(c, SEEN_LABELS)) return ntk_error(NTK_ECONFIG, "%s: [data] labels is required for training", c->name);
  if (HAS(c, SEEN_PATTERN))
    return ntk_error(NTK_ECONFIG, "%s:%d: [data] pattern is for kernel jobs whose network has Aggregate layers; a "
                     "training job's MLP reads no graph", c->name, c->job->pattern_line);
  if (!HAS(c, SEEN_LAYERS)) return ntk_error(NTK_ECONFIG, "%s: [train] layers is required", c->name);
  if (!HAS(c, SEEN_VPATH)) return ntk_error(NTK_ECONFIG, "%s: [validation] path is required for training", c->name);
  if (!HAS(c, SEEN_VLABELS))
    return ntk_error(NTK_ECONFIG, "%s: [validation] labels is required for training", c->name);
  size_t last = c->job->train.layers[c->job->train.nlayers - 1];
  if (c->job->classes && c->job->classes != last)
    return ntk_error(NTK_ECONFIG, "%s:%d: [data] classes = %zu, but [train] layers ends in %zu classes", c->name,
                     c->job->classes_line, c->job->classes, last);
  return NTK_OK;
}

/* [solve] keys against the method and the job: what the job file alone
 * decides is refused now, at its line, not after every tile (float32
 * products of a float64 kernel), and a key the chosen method never reads
 * is refused, not ignored. (The block against the tile is the store's to
 * decide: a resume keeps the store's tile; ntk_solve_check_tile.) */
static ntk_status solve_keys(const struct ctx *c) {
  const struct ntk_job *job = c->job;
  const struct ntk_solve_opts *o = &job->solve;
  enum { SC = 1 << NTK_SOLVE_SCALAPACK, CG = 1 << NTK_SOLVE_CG };
  static const struct {
    int bit;
    const char *key;
    unsigned methods;
    const char *by;
  } keys[] = {{SEEN_BLOCK, "block", SC, "scalapack"},        {SEEN_GRID, "grid", SC, "scalapack"},
              {SEEN_TOL, "tolerance", CG, "cg"},             {SEEN_MAXIT, "max_iterations", CG, "cg"},
              {SEEN_PRANK, "preconditioner_rank", CG, "cg"}, {SEEN_CGKERNEL, "cg_kernel", CG, "cg"},
              {SEEN_CGPRODUCTS, "cg_products", CG, "cg"}};
  static const char *const method_words[] = {"auto", "lapack", "scalapack", "cg"};
  if (o->method != NTK_SOLVE_AUTO)
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
      if (HAS(c, keys[i].bit) && !(keys[i].methods & (1u << o->method)))
        return ntk_error(NTK_ECONFIG, "%s:%d: [solve] %s is read by method = %s (or auto), and method = %s (line %d) "
                         "never reads it: remove it, or choose that method", c->name, c->key_line[keys[i].bit],
                         keys[i].key, keys[i].by, method_words[o->method], c->key_line[SEEN_METHOD]);
  if (o->cg_products == NTK_CG_PRODUCTS_FLOAT32 && job->precision != 4)
    return ntk_error(NTK_ECONFIG, "%s:%d: [solve] cg_products = float32 needs a float32 kernel, and [compute] precision "
                     "is float64 (use auto or float64)", c->name, c->key_line[SEEN_CGPRODUCTS]);
  return NTK_OK;
}

/* What a whole job needs and refuses, across sections. */
static ntk_status check_job(const struct ctx *c) {
  const char *name = c->name;
  const struct ntk_job *job = c->job;
  if (!HAS(c, SEEN_PATH)) return ntk_error(NTK_ECONFIG, "%s: [data] path is required", name);
  if (job->train.enabled) return check_training_job(c);
  if (job->test.enabled && !HAS(c, SEEN_TPATH))
    return ntk_error(NTK_ECONFIG, "%s:%d: [test] path is required", name, c->lines[SEC_TEST]);
  /* a graph network reads every sample's pattern: both sets have them, or neither */
  if (job->test.enabled && HAS(c, SEEN_PATTERN) != HAS(c, SEEN_TPATTERN))
    return ntk_error(NTK_ECONFIG, "%s:%d: %s: the [data] and [test] samples both have patterns (a graph network's), "
                     "or neither does", name, HAS(c, SEEN_PATTERN) ? job->pattern_line : c->lines[SEC_TEST],
                     HAS(c, SEEN_PATTERN) ? "[data] pattern is given and [test] pattern is not"
                                          : "[test] pattern is given and [data] pattern is not");
  if (job->solve.enabled) {
    if (!job->test.enabled)
      return ntk_error(NTK_ECONFIG, "%s:%d: [solve] needs a [test] section (path, labels) to predict",
                       name, c->lines[SEC_SOLVE]);
    if (!HAS(c, SEEN_LABELS))
      return ntk_error(NTK_ECONFIG, "%s: [data] labels is required to solve ([solve])", name);
    if (!HAS(c, SEEN_TLABELS))
      return ntk_error(NTK_ECONFIG, "%s: [test] labels is required to solve ([solve])", name);
    if (!HAS(c, SEEN_RIDGE))
      return ntk_error(NTK_ECONFIG, "%s:%d: [solve] ridge is required (for example ridge = 1e-4, 1e-3, 1e-2)",
                       name, c->lines[SEC_SOLVE]);
    if (job->solve.variance && !job->test.test_test)
      return ntk_error(NTK_ECONFIG, "%s:%d: [solve] variance needs the test x test kernel: add test_test = yes "
                       "to [test]", name, c->key_line[SEEN_VARIANCE]);
    if (job->solve.variance && job->solve.method != NTK_SOLVE_AUTO && job->solve.method != NTK_SOLVE_LAPACK)
      return ntk_error(NTK_ECONFIG, "%s:%d: [solve] variance is computed by method = lapack only", name,
                       c->key_line[SEEN_VARIANCE]);
    /* asked for by name, not the default: cg would leave it out silently */
    if (HAS(c, SEEN_LOO) && job->solve.loo && job->solve.method == NTK_SOLVE_CG)
      return ntk_error(NTK_ECONFIG, "%s:%d: [solve] loo = yes is computed by methods lapack and scalapack, not cg "
                       "(set loo = no, or another method)", name, c->key_line[SEEN_LOO]);
    ntk_status st = solve_keys(c);
    if (st) return st;
  }
  if (job->labels_line && !job->test.enabled)
    return ntk_error(NTK_ECONFIG, "%s:%d: [data] labels: only a training job ([train]) or a kernel "
                     "regression (a [test] section, with [solve] or solved later) reads labels", name, job->labels_line);
  /* [test] without [solve]: a kernel solved later (ntkd solve). Its labels,
   * where given, are read and checked now (they were never opened: a path
   * naming nothing ran with exit 0), both or neither. */
  if (job->test.enabled && !job->solve.enabled && !job->labels_line != !job->test.labels_line)
    return ntk_error(NTK_ECONFIG, "%s:%d: %s labels is given and %s labels is not: the solve reads both (give "
                     "both, to check them now for a later ntkd solve, or neither)", name,
                     job->labels_line ? job->labels_line : job->test.labels_line, job->labels_line ? "[data]" : "[test]",
                     job->labels_line ? "[test]" : "[data]");
  if (job->classes_line && !job->labels_line)
    return ntk_error(NTK_ECONFIG, "%s:%d: [data] classes: states the class count of labels, and this job has no "
                     "[data] labels", name, job->classes_line);
  if (c->lines[SEC_VALIDATION])
    return ntk_error(NTK_ECONFIG, "%s:%d: [validation] is only for a training job (with a [train] section)",
                     name, c->lines[SEC_VALIDATION]);
  if (!HAS(c, SEEN_ARCH)) return ntk_error(NTK_ECONFIG, "%s: [model] arch is required", name);
  if (!HAS(c, SEEN_OPATH)) return ntk_error(NTK_ECONFIG, "%s: [output] path is required", name);
  return NTK_OK;
}

/* Several files in one path are CIFAR-10 batches; data.c refuses a list in
 * another format, which the job file already shows (`ntkd check` said OK to
 * `path = a.npy b.npy`, and the run then stopped). */
static ntk_status several_files(const struct ctx *c) {
  const struct ntk_job *job = c->job;
  const struct {
    int n, line;
    const char *first, *section;
  } lists[] = {{job->ndata, job->data_line, job->data_path[0], "data"},
               {job->test.ndata, job->test.path_line, job->test.path[0], "test"}};
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
    if (lists[i].n < 2) continue;
    ntk_data_format f = job->format == NTK_FORMAT_AUTO ? ntk_data_guess_format(lists[i].first) : job->format;
    if (f != NTK_FORMAT_CIFAR10)
      return ntk_error(NTK_ECONFIG, "%s:%d: [%s] path lists %d files (spaces separate them; quotes do not join "
                       "them: a file whose name has a space needs a link without one); several files are only "
                       "supported for CIFAR-10 batches (.bin, or [data] format = cifar10)", c->name, lists[i].line,
                       lists[i].section, lists[i].n);
  }
  return NTK_OK;
}

/* [data] layout = NCHW or NLC says how to read a .npy array; the IDX and
 * CIFAR-10 readers have their own fixed order (IDX: (N, H, W, C) or
 * (N, H, W); CIFAR-10: converted from its channel-major records) and took no
 * notice of it, so a 4-D IDX file of NCHW images was silently read as NHWC.
 * Refused for every data file of the job that is not a .npy. */
static ntk_status layout_npy_only(const struct ctx *c) {
  const struct ntk_job *job = c->job;
  if (job->layout == NTK_LAYOUT_NHWC) return NTK_OK;
  const char *paths[2 * NTK_MAX_DATA_FILES + 1];
  int n = 0;
  for (int i = 0; i < job->ndata; i++) paths[n++] = job->data_path[i];
  for (int i = 0; i < job->test.ndata; i++) paths[n++] = job->test.path[i];
  if (job->train.val_path[0]) paths[n++] = job->train.val_path;
  for (int i = 0; i < n; i++) {
    ntk_data_format f = job->format == NTK_FORMAT_AUTO ? ntk_data_guess_format(paths[i]) : job->format;
    if (f != NTK_FORMAT_NPY)
      return ntk_error(NTK_ECONFIG, "%s:%d: [data] layout = %s applies to .npy arrays only; %s is read as %s, "
                       "in its own order (remove layout, or convert the file to .npy)", c->name, c->layout_line,
                       job->layout == NTK_LAYOUT_NCHW ? "NCHW" : "NLC", paths[i],
                       f == NTK_FORMAT_IDX ? "an IDX file" : "CIFAR-10 batches");
  }
  return NTK_OK;
}

static ntk_status parse(const char *text, const char *name, int whole, struct ntk_job *job) {
  ntk_job_defaults(job);
  /* The job file's name is an input no output may replace: cut short it
   * would name another file (or none), and the check would miss it. */
  if (strlen(name) >= sizeof job->source)
    return ntk_error(NTK_EUSAGE, "%s: path too long (a job file's path may have at most %zu bytes)", name,
                     sizeof job->source - 1);
  snprintf(job->source, sizeof job->source, "%s", name);
  struct ctx c = {.job = job, .name = name, .st = NTK_OK};
  const char *slash = strrchr(name, '/');
  c.dirlen = slash ? (size_t)(slash - name + 1) : 0;
  char *copy = strdup(text);
  ntk_status st = copy ? read_lines(&c, copy) : ntk_error(NTK_ENOMEM, "%s: out of memory", name);
  free(copy);
  /* An empty [train] still makes a training job (and an empty [model] in
   * one is still refused). */
  job->train.enabled = c.lines[SEC_TRAIN] != 0;
  job->test.enabled = c.lines[SEC_TEST] != 0;
  job->solve.enabled = c.lines[SEC_SOLVE] != 0;
  if (!st && whole) st = check_job(&c);
  if (!st) st = several_files(&c);
  if (!st) st = layout_npy_only(&c);
  if (!st) st = parse_arch(&c);
  if (st) ntk_job_free(job); /* a job that failed owns nothing */
  return st;
}

ntk_status ntk_job_parse_string(const char *text, const char *name, struct ntk_job *job) {
  return parse(text, name, 1, job);
}

ntk_status ntk_job_parse_fragment(const char *text, const char *name, struct ntk_job *job) {
  return parse(text, name, 0, job);
}

void ntk_job_summary(const struct ntk_job *job, char *buf, size_t cap) {
  char files[96];
  snprintf(files, sizeof files, "%d data file%s", job->ndata, job->ndata == 1 ? "" : "s");
  if (job->count) snprintf(files + strlen(files), sizeof files - strlen(files), " (first %zu samples)", job->count);
  if (job->train.enabled) {
    const struct ntk_train_opts *t = &job->train;
    int n = snprintf(buf, cap, "training job: %s, MLP ", files);
    for (size_t i = 0; i < t->nlayers && n >= 0 && (size_t)n < cap; i++)
      n += snprintf(buf + n, cap - (size_t)n, "%s%zu", i ? "-" : "", t->layers[i]);
    if (n >= 0 && (size_t)n < cap)
      snprintf(buf + n, cap - (size_t)n, ", batch %zu, %zu epochs, snapshot %s", t->batch, t->epochs,
               t->snapshot[0] ? t->snapshot : "none");
    return;
  }
  size_t layers = job->net ? job->net->n : 0;
  char test[128] = "";
  if (job->test.enabled)
    snprintf(test, sizeof test, ", test set of %d file%s%s", job->test.ndata, job->test.ndata == 1 ? "" : "s",
             job->test.test_test ? " (test x test too)" : "");
  if (job->solve.enabled)
    snprintf(test + strlen(test), sizeof test - strlen(test), ", solved at %zu ridge%s", job->solve.nridge,
             job->solve.nridge == 1 ? "" : "s");
  snprintf(buf, cap, "kernel job: %s, %zu layer%s, %s, %s, tile %zu%s, store %s", files, layers, layers == 1 ? "" : "s",
           job->kernels & NTK_KERNEL_NTK ? "NNGP and NTK" : "NNGP", job->precision == 8 ? "float64" : "float32",
           job->tile, test, job->out_path);
}

ntk_status ntk_job_error_at(const struct ntk_job *job, int line, const char *key, ntk_status st) {
  const char *m = ntk_error_message();
  size_t n = strlen(job->source);
  if (!st || (n && !strncmp(m, job->source, n) && m[n] == ':')) return st;
  if (line <= 0 || !n) return ntk_error(st, "%s: %s", key, m);
  return ntk_error(st, "%s:%d: %s: %s", job->source, line, key, m);
}

ntk_status ntk_read_text_file(const char *path, char **text, size_t *len) {
  enum { TEXT_MAX = 1 << 24 };
  *text = NULL;
  int fd;
  /* A FIFO or a device is refused before it can block. */
  ntk_status st = ntk_open_regular(path, O_RDONLY, NULL, &fd);
  if (st == NTK_EIO) st = ntk_error(NTK_EUSAGE, "%s", ntk_error_message()); /* unreadable: as a missing one */
  if (st) return st;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  int err = 0;
  while (buf && n <= TEXT_MAX) {
    if (n + 1 >= cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
    }
    ssize_t r = read(fd, buf + n, cap - n - 1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) err = errno;
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  if (!buf) return ntk_error(NTK_ENOMEM, "%s: out of memory", path);
  if (err) {
    free(buf);
    return ntk_error(NTK_EUSAGE, "%s: read error: %s", path, strerror(err));
  }
  size_t at = n > TEXT_MAX ? 0 : (buf[n] = '\0', strlen(buf));
  if (n > TEXT_MAX || at < n) { /* one of ntkd's own files given for a job file (of any size), or a binary file */
    int kind = ntk_file_kind_by_content(path, 0), line = 1;
    for (size_t i = 0; i < at; i++) line += buf[i] == '\n';
    free(buf);
    if (kind != NTK_FILE_OTHER)
      return ntk_error(NTK_ECONFIG, "%s: is %s, not a job file (`ntkd info` shows a store's job)", path,
                       ntk_file_kind_name(kind));
    if (n > TEXT_MAX) return ntk_error(NTK_ECONFIG, "%s: larger than 16 MiB, not a job file", path);
    return ntk_error(NTK_ECONFIG, "%s:%d: a NUL byte (byte %zu): a binary file, not a job file", path, line, at);
  }
  *text = buf;
  if (len) *len = n;
  return NTK_OK;
}
