/* Job-file parsing on top of libinih. inih's handler does not get the line
 * number, so we feed it through our own line reader that counts lines. */
#include "ntkd/config.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ntkd/arch.h"
#include "ntkd/backend.h"
#include "ntkd/numparse.h"

struct reader {
  const char *text;
  size_t pos;
  int line;
};

/* fgets-like reader for ini_parse_stream: one line per call. */
static char *read_line(char *buf, int size, void *stream) {
  struct reader *r = stream;
  if (!r->text[r->pos]) return NULL;
  int n = 0;
  while (r->text[r->pos] && n < size - 1) {
    char c = r->text[r->pos++];
    buf[n++] = c;
    if (c == '\n') break;
  }
  buf[n] = '\0';
  r->line++;
  return buf;
}

/* Bit numbers (in a uint64_t) for the keys seen, to catch duplicates. */
enum {
  SEEN_PATH, SEEN_FORMAT, SEEN_LAYOUT, SEEN_COUNT, SEEN_SCALE, SEEN_ARCH, SEEN_WSTD, SEEN_BSTD, SEEN_KERNEL,
  SEEN_PRECISION, SEEN_TILE, SEEN_OPATH, SEEN_LEVEL, SEEN_PROGRESS, SEEN_SYNC, SEEN_LABELS, SEEN_LAYERS,
  SEEN_BATCH, SEEN_EPOCHS, SEEN_ALPHA, SEEN_BETA1, SEEN_BETA2, SEEN_EPS, SEEN_SEED, SEEN_FLUSH,
  SEEN_SNAPSHOT, SEEN_LOG, SEEN_VPATH, SEEN_VLABELS, SEEN_VCOUNT, SEEN_DEVICE, SEEN_TPATH, SEEN_TLABELS,
  SEEN_TCOUNT, SEEN_TTT, SEEN_RIDGE, SEEN_PRED, SEEN_BACKEND, SEEN_WTIMEOUT,
};
#define HAS(c, key) (((c)->seen >> (key)) & 1u)

/* Sections in the order of messages; index = enum value. */
enum { SEC_DATA, SEC_MODEL, SEC_COMPUTE, SEC_OUTPUT, SEC_TEST, SEC_SOLVE, SEC_TRAIN, SEC_VALIDATION, NSECTIONS };
static const char *const section_names[NSECTIONS] = {"data", "model", "compute", "output", "test", "solve",
                                                     "train", "validation"};
#define SECTION_LIST "data, model, compute, output, test, solve, train, validation"

struct ctx {
  struct ntk_job *job;
  struct reader *rd;
  const char *name;
  uint64_t seen;
  int labels_line; /* line of [data] labels, for refusing it in a kernel job */
  ntk_status st;
  char dir[NTK_PATH_MAX]; /* folder of the job file, with trailing '/', or "" */
};

static int fail(struct ctx *c, const char *section, const char *key, const char *fmt, const char *val) {
  char what[600];
  snprintf(what, sizeof what, fmt, val);
  c->st = ntk_error(NTK_ECONFIG, "%s:%d: [%s] %s: %s", c->name, c->rd->line, section, key, what);
  return 0;
}

static int resolve_path(struct ctx *c, const char *v, char *out) {
  int n = v[0] == '/' ? snprintf(out, NTK_PATH_MAX, "%s", v)
                      : snprintf(out, NTK_PATH_MAX, "%s%s", c->dir, v);
  return n > 0 && n < NTK_PATH_MAX;
}

static int once(struct ctx *c, const char *section, const char *key, int bit) {
  if (HAS(c, bit)) return fail(c, section, key, "%s", "given twice");
  c->seen |= (uint64_t)1 << bit;
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

/* Whitespace-separated paths (CIFAR-10 batches) into `paths`. */
static int parse_paths(struct ctx *c, const char *s, const char *k, const char *v,
                       char paths[][NTK_PATH_MAX], int *n) {
  char tmp[NTK_PATH_MAX * 2];
  if (strlen(v) >= sizeof tmp) return fail(c, s, k, "%s", "too long");
  strcpy(tmp, v);
  *n = 0;
  for (char *save, *tok = strtok_r(tmp, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
    if (*n == NTK_MAX_DATA_FILES) return fail(c, s, k, "%s", "more than 16 files");
    if (!resolve_path(c, tok, paths[(*n)++])) return fail(c, s, k, "'%s' is too long", tok);
  }
  if (!*n) return fail(c, s, k, "%s", "empty");
  return 1;
}

static int on_data(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_job *j = c->job;
  if (!strcmp(k, "path")) {
    if (!once(c, s, k, SEEN_PATH)) return 0;
    if (!parse_paths(c, s, k, v, j->data_path, &j->ndata)) return 0;
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
    else return fail(c, s, k, "'%s' is not NHWC or NCHW", v);
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
    c->labels_line = c->rd->line;
  } else {
    return fail(c, s, k, "%s", "unknown key (path, format, layout, count, scale, labels)");
  }
  return 1;
}

static int on_model(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_job *j = c->job;
  if (!strcmp(k, "arch")) {
    if (!once(c, s, k, SEEN_ARCH)) return 0;
    if (strlen(v) >= sizeof j->arch) return fail(c, s, k, "%s", "too long");
    strcpy(j->arch, v);
    j->arch_line = c->rd->line;
  } else if (!strcmp(k, "w_std")) {
    if (!once(c, s, k, SEEN_WSTD)) return 0;
    if (!ntk_parse_double(v, &j->w_std) || j->w_std < 0) return fail(c, s, k, "'%s' is not a number >= 0", v);
  } else if (!strcmp(k, "b_std")) {
    if (!once(c, s, k, SEEN_BSTD)) return 0;
    if (!ntk_parse_double(v, &j->b_std) || j->b_std < 0) return fail(c, s, k, "'%s' is not a number >= 0", v);
  } else if (!strcmp(k, "kernel")) {
    if (!once(c, s, k, SEEN_KERNEL)) return 0;
    if (!strcmp(v, "nngp")) j->kernels = NTK_KERNEL_NNGP;
    else if (!strcmp(v, "ntk")) j->kernels = NTK_KERNEL_NNGP | NTK_KERNEL_NTK;
    else return fail(c, s, k, "'%s' is not nngp or ntk", v);
  } else {
    return fail(c, s, k, "%s", "unknown key (arch, w_std, b_std, kernel)");
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
  } else {
    return fail(c, s, k, "%s", "unknown key (path, level, progress, sync)");
  }
  return 1;
}

static int on_train(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_train_opts *t = &c->job->train;
  if (!strcmp(k, "layers")) {
    if (!once(c, s, k, SEEN_LAYERS)) return 0;
    char tmp[1024];
    if (strlen(v) >= sizeof tmp) return fail(c, s, k, "%s", "too long");
    strcpy(tmp, v);
    t->nlayers = 0;
    for (char *save, *tok = strtok_r(tmp, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
      if (t->nlayers == NTK_TRAIN_MAX_LAYERS) return fail(c, s, k, "%s", "more than 16 sizes");
      size_t n;
      /* 2^24: far beyond any MLP this trains, and keeps size products in range. */
      if (!ntk_parse_size(tok, &n) || n == 0 || n > (1u << 24))
        return fail(c, s, k, "'%s' is not a layer size in 1..16777216", tok);
      t->layers[t->nlayers++] = n;
    }
    if (t->nlayers < 2)
      return fail(c, s, k, "'%s' needs at least the input size and the number of classes, e.g. 784 1000 10", v);
    if (t->layers[t->nlayers - 1] < 2) return fail(c, s, k, "%s", "the last size (classes) must be at least 2");
  } else if (!strcmp(k, "batch")) {
    if (!once(c, s, k, SEEN_BATCH)) return 0;
    if (!ntk_parse_size(v, &t->batch) || t->batch == 0 || t->batch > (1u << 24))
      return fail(c, s, k, "'%s' is not an integer in 1..16777216", v);
  } else if (!strcmp(k, "epochs")) {
    if (!once(c, s, k, SEEN_EPOCHS)) return 0;
    if (!ntk_parse_size(v, &t->epochs) || t->epochs == 0 || t->epochs > 1000000)
      return fail(c, s, k, "'%s' is not an integer in 1..1000000", v);
  } else if (!strcmp(k, "alpha")) {
    if (!once(c, s, k, SEEN_ALPHA)) return 0;
    if (!ntk_parse_double(v, &t->alpha) || t->alpha <= 0) return fail(c, s, k, "'%s' is not a number > 0", v);
  } else if (!strcmp(k, "beta1") || !strcmp(k, "beta2")) {
    int one = k[4] == '1';
    if (!once(c, s, k, one ? SEEN_BETA1 : SEEN_BETA2)) return 0;
    double *b = one ? &t->beta1 : &t->beta2;
    if (!ntk_parse_double(v, b) || *b < 0 || *b >= 1) return fail(c, s, k, "'%s' is not a number in [0, 1)", v);
  } else if (!strcmp(k, "eps")) {
    if (!once(c, s, k, SEEN_EPS)) return 0;
    if (!ntk_parse_double(v, &t->eps) || t->eps <= 0) return fail(c, s, k, "'%s' is not a number > 0", v);
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
  } else if (!strcmp(k, "snapshot") || !strcmp(k, "log")) {
    int snap = k[0] == 's';
    if (!path_key(c, s, k, v, snap ? SEEN_SNAPSHOT : SEEN_LOG, snap ? t->snapshot : t->log)) return 0;
  } else {
    return fail(c, s, k, "%s", "unknown key (layers, batch, epochs, alpha, beta1, beta2, eps, seed, "
                "flush_denormals, device, snapshot, log)");
  }
  return 1;
}

static int on_validation(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_train_opts *t = &c->job->train;
  if (!strcmp(k, "path") || !strcmp(k, "labels")) {
    int path = k[0] == 'p';
    if (!path_key(c, s, k, v, path ? SEEN_VPATH : SEEN_VLABELS, path ? t->val_path : t->val_labels)) return 0;
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
  } else if (!strcmp(k, "labels")) {
    if (!path_key(c, s, k, v, SEEN_TLABELS, t->labels)) return 0;
  } else if (!strcmp(k, "count")) {
    if (!once(c, s, k, SEEN_TCOUNT)) return 0;
    if (!ntk_parse_size(v, &t->count) || t->count == 0) return fail(c, s, k, "'%s' is not a positive integer", v);
  } else if (!strcmp(k, "test_test")) {
    if (!once(c, s, k, SEEN_TTT)) return 0;
    if (!strcmp(v, "yes")) t->test_test = 1;
    else if (!strcmp(v, "no")) t->test_test = 0;
    else return fail(c, s, k, "'%s' is not yes or no", v);
  } else {
    return fail(c, s, k, "%s", "unknown key (path, labels, count, test_test)");
  }
  return 1;
}

static int on_solve(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_solve_opts *o = &c->job->solve;
  if (!strcmp(k, "ridge")) {
    if (!once(c, s, k, SEEN_RIDGE)) return 0;
    char tmp[2048];
    if (strlen(v) >= sizeof tmp) return fail(c, s, k, "%s", "too long");
    strcpy(tmp, v);
    o->nridge = 0;
    for (char *save, *tok = strtok_r(tmp, " \t,", &save); tok; tok = strtok_r(NULL, " \t,", &save)) {
      if (o->nridge == NTK_MAX_RIDGES) return fail(c, s, k, "%s", "more than 32 values");
      double r;
      if (!ntk_parse_double(tok, &r) || r < 0) return fail(c, s, k, "'%s' is not a number >= 0", tok);
      o->ridge[o->nridge++] = r;
    }
    if (!o->nridge) return fail(c, s, k, "%s", "empty");
  } else if (!strcmp(k, "predictions")) {
    if (!path_key(c, s, k, v, SEEN_PRED, o->predictions)) return 0;
  } else {
    return fail(c, s, k, "%s", "unknown key (ridge, predictions)");
  }
  return 1;
}

static int handler(void *user, const char *section, const char *key, const char *value) {
  struct ctx *c = user;
  if (c->st) return 0;
  if (!strcmp(section, "data")) return on_data(c, section, key, value);
  if (!strcmp(section, "model")) return on_model(c, section, key, value);
  if (!strcmp(section, "compute")) return on_compute(c, section, key, value);
  if (!strcmp(section, "output")) return on_output(c, section, key, value);
  if (!strcmp(section, "test")) return on_test(c, section, key, value);
  if (!strcmp(section, "solve")) return on_solve(c, section, key, value);
  if (!strcmp(section, "train")) return on_train(c, section, key, value);
  if (!strcmp(section, "validation")) return on_validation(c, section, key, value);
  if (!*section) {
    c->st = ntk_error(NTK_ECONFIG, "%s:%d: key '%s' is outside any section", c->name, c->rd->line, key);
    return 0;
  }
  c->st = ntk_error(NTK_ECONFIG, "%s:%d: unknown section [%s] (" SECTION_LIST ")",
                    c->name, c->rd->line, section);
  return 0;
}

void ntk_job_defaults(struct ntk_job *job) {
  memset(job, 0, sizeof *job);
  job->format = NTK_FORMAT_AUTO;
  job->layout = NTK_LAYOUT_NHWC;
  job->w_std = 1.0;
  job->b_std = 0.0;
  job->kernels = NTK_KERNEL_NNGP | NTK_KERNEL_NTK;
  job->precision = 4;
  job->tile = 1024;
  job->level = 1;
  job->progress_interval = 30.0;
  job->sync_interval = 1.0;
  job->worker_timeout = 1800.0;
  /* Chainer's Adam defaults, and its train_mnist batch and epochs. */
  job->train.batch = 100;
  job->train.epochs = 20;
  job->train.alpha = 0.001;
  job->train.beta1 = 0.9;
  job->train.beta2 = 0.999;
  job->train.eps = 1e-8;
  job->train.flush_denormals = 1;
}

/* Section headers never reach the handler when a section is empty; catch
 * unknown ones here so "[comptue]" alone is still an error. Records the
 * first line of each known section (0: absent): an empty [train] still
 * makes a training job, and an empty [model] in one is still refused. */
static ntk_status check_sections(const char *text, const char *name, int *lines) {
  int line = 0;
  const char *p = text;
  while (*p) {
    line++;
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    const char *q = p;
    while (q < p + len && (*q == ' ' || *q == '\t')) q++;
    if (q < p + len && *q == '[') {
      const char *close = memchr(q, ']', len - (size_t)(q - p));
      if (!close) return ntk_error(NTK_ECONFIG, "%s:%d: section header without ']'", name, line);
      size_t n = (size_t)(close - q - 1);
      int found = -1;
      for (int i = 0; i < NSECTIONS; i++)
        if (strlen(section_names[i]) == n && !strncmp(q + 1, section_names[i], n)) found = i;
      if (found < 0)
        return ntk_error(NTK_ECONFIG, "%s:%d: unknown section [%.*s] (" SECTION_LIST ")",
                         name, line, (int)n, q + 1);
      if (!lines[found]) lines[found] = line;
    }
    p = e ? e + 1 : p + len;
  }
  return NTK_OK;
}

/* A training job takes its network from [train] layers and writes a log
 * and snapshots, not a store: a [model], [compute] or [output] section
 * would be silently ignored, so it is refused instead. */
static ntk_status check_training_job(struct ctx *c, const int *lines) {
  for (int i = SEC_MODEL; i <= SEC_SOLVE; i++)
    if (lines[i])
      return ntk_error(NTK_ECONFIG, "%s:%d: [%s] is for kernel jobs; a training job ([train]) takes its "
                       "network from [train] layers and has no [%s] section", c->name, lines[i],
                       section_names[i], section_names[i]);
  if (!HAS(c, SEEN_LABELS)) return ntk_error(NTK_ECONFIG, "%s: [data] labels is required for training", c->name);
  if (!HAS(c, SEEN_LAYERS)) return ntk_error(NTK_ECONFIG, "%s: [train] layers is required", c->name);
  if (!HAS(c, SEEN_VPATH)) return ntk_error(NTK_ECONFIG, "%s: [validation] path is required for training", c->name);
  if (!HAS(c, SEEN_VLABELS))
    return ntk_error(NTK_ECONFIG, "%s: [validation] labels is required for training", c->name);
  return NTK_OK;
}

ntk_status ntk_job_parse_string(const char *text, const char *name, struct ntk_job *job) {
  ntk_job_defaults(job);
  snprintf(job->source, sizeof job->source, "%s", name);
  struct reader rd = {text, 0, 0};
  struct ctx c = {job, &rd, name, 0, 0, NTK_OK, ""};
  const char *slash = strrchr(name, '/');
  if (slash && (size_t)(slash - name + 1) < sizeof c.dir) {
    memcpy(c.dir, name, (size_t)(slash - name + 1));
    c.dir[slash - name + 1] = '\0';
  }
  int lines[NSECTIONS] = {0};
  ntk_status st = check_sections(text, name, lines);
  if (st) return st;
  int rc = ini_parse_stream(read_line, &rd, handler, &c);
  if (c.st) return c.st;
  if (rc > 0) return ntk_error(NTK_ECONFIG, "%s:%d: syntax error (expected 'key = value' or '[section]')", name, rc);
  if (rc < 0) return ntk_error(NTK_ECONFIG, "%s: could not be parsed", name);
  if (!HAS(&c, SEEN_PATH)) return ntk_error(NTK_ECONFIG, "%s: [data] path is required", name);
  job->train.enabled = lines[SEC_TRAIN] != 0;
  if (job->train.enabled) return check_training_job(&c, lines);
  job->test.enabled = lines[SEC_TEST] != 0;
  job->solve.enabled = lines[SEC_SOLVE] != 0;
  if (job->test.enabled && !HAS(&c, SEEN_TPATH))
    return ntk_error(NTK_ECONFIG, "%s:%d: [test] path is required", name, lines[SEC_TEST]);
  if (job->solve.enabled) {
    if (!job->test.enabled)
      return ntk_error(NTK_ECONFIG, "%s:%d: [solve] needs a [test] section (path, labels) to predict",
                       name, lines[SEC_SOLVE]);
    if (!HAS(&c, SEEN_LABELS))
      return ntk_error(NTK_ECONFIG, "%s: [data] labels is required to solve ([solve])", name);
    if (!HAS(&c, SEEN_TLABELS))
      return ntk_error(NTK_ECONFIG, "%s: [test] labels is required to solve ([solve])", name);
    if (!HAS(&c, SEEN_RIDGE))
      return ntk_error(NTK_ECONFIG, "%s:%d: [solve] ridge is required (for example ridge = 1e-4, 1e-3, 1e-2)",
                       name, lines[SEC_SOLVE]);
  }
  if (c.labels_line && !job->test.enabled)
    return ntk_error(NTK_ECONFIG, "%s:%d: [data] labels: only a training job ([train]) or a kernel "
                     "regression ([test] and [solve]) reads labels", name, c.labels_line);
  if (lines[SEC_VALIDATION])
    return ntk_error(NTK_ECONFIG, "%s:%d: [validation] is only for a training job (with a [train] section)",
                     name, lines[SEC_VALIDATION]);
  if (!HAS(&c, SEEN_ARCH)) return ntk_error(NTK_ECONFIG, "%s: [model] arch is required", name);
  if (!HAS(&c, SEEN_OPATH)) return ntk_error(NTK_ECONFIG, "%s: [output] path is required", name);
  /* The arch is checked here too, so that its errors carry the file name. */
  struct ntk_arch arch;
  st = ntk_arch_parse(job->arch, job->w_std, job->b_std, &arch);
  if (st) return ntk_error(NTK_ECONFIG, "%s:%d: [model] %s", name, job->arch_line, ntk_error_message());
  ntk_arch_free(&arch);
  return NTK_OK;
}

ntk_status ntk_read_text_file(const char *path, char **text, size_t *len) {
  *text = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return ntk_error(NTK_EUSAGE, "%s: cannot open: %s", path, strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    if (n + 1 >= cap) {
      if (cap > (1u << 24)) {
        free(buf);
        fclose(f);
        return ntk_error(NTK_ECONFIG, "%s: larger than 16 MiB, not a job file", path);
      }
      char *nb = realloc(buf, cap *= 2);
      if (!nb) break;
      buf = nb;
    }
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0) break;
  }
  int err = ferror(f);
  fclose(f);
  if (!buf) return ntk_error(NTK_ENOMEM, "%s: out of memory", path);
  if (err) {
    free(buf);
    return ntk_error(NTK_EUSAGE, "%s: read error", path);
  }
  buf[n] = '\0';
  if (memchr(buf, '\0', n)) {
    free(buf);
    return ntk_error(NTK_ECONFIG, "%s: contains NUL bytes, not a job file", path);
  }
  *text = buf;
  if (len) *len = n;
  return NTK_OK;
}
