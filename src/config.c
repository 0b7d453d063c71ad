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

/* Bits for the keys seen, to catch duplicates. */
enum {
  SEEN_PATH = 1 << 0, SEEN_FORMAT = 1 << 1, SEEN_LAYOUT = 1 << 2, SEEN_COUNT = 1 << 3,
  SEEN_SCALE = 1 << 4, SEEN_ARCH = 1 << 5, SEEN_WSTD = 1 << 6, SEEN_BSTD = 1 << 7,
  SEEN_KERNEL = 1 << 8, SEEN_PRECISION = 1 << 9, SEEN_TILE = 1 << 10, SEEN_OPATH = 1 << 11,
  SEEN_LEVEL = 1 << 12, SEEN_PROGRESS = 1 << 13, SEEN_SYNC = 1 << 14,
};

struct ctx {
  struct ntk_job *job;
  struct reader *rd;
  const char *name;
  unsigned seen;
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

static int once(struct ctx *c, const char *section, const char *key, unsigned bit) {
  if (c->seen & bit) return fail(c, section, key, "%s", "given twice");
  c->seen |= bit;
  return 1;
}

static int on_data(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_job *j = c->job;
  if (!strcmp(k, "path")) {
    if (!once(c, s, k, SEEN_PATH)) return 0;
    /* Several files (CIFAR-10 batches) are separated by whitespace. */
    char tmp[NTK_PATH_MAX * 2];
    if (strlen(v) >= sizeof tmp) return fail(c, s, k, "%s", "too long");
    strcpy(tmp, v);
    j->ndata = 0;
    for (char *save, *tok = strtok_r(tmp, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
      if (j->ndata == NTK_MAX_DATA_FILES) return fail(c, s, k, "%s", "more than 16 files");
      if (!resolve_path(c, tok, j->data_path[j->ndata++])) return fail(c, s, k, "'%s' is too long", tok);
    }
    if (!j->ndata) return fail(c, s, k, "%s", "empty");
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
  } else {
    return fail(c, s, k, "%s", "unknown key (path, format, layout, count, scale)");
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
  } else {
    return fail(c, s, k, "%s", "unknown key (precision, tile)");
  }
  return 1;
}

static int on_output(struct ctx *c, const char *s, const char *k, const char *v) {
  struct ntk_job *j = c->job;
  if (!strcmp(k, "path")) {
    if (!once(c, s, k, SEEN_OPATH)) return 0;
    if (!*v) return fail(c, s, k, "%s", "empty");
    if (!resolve_path(c, v, j->out_path)) return fail(c, s, k, "%s", "too long");
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

static int handler(void *user, const char *section, const char *key, const char *value) {
  struct ctx *c = user;
  if (c->st) return 0;
  if (!strcmp(section, "data")) return on_data(c, section, key, value);
  if (!strcmp(section, "model")) return on_model(c, section, key, value);
  if (!strcmp(section, "compute")) return on_compute(c, section, key, value);
  if (!strcmp(section, "output")) return on_output(c, section, key, value);
  if (!*section) {
    c->st = ntk_error(NTK_ECONFIG, "%s:%d: key '%s' is outside any section", c->name, c->rd->line, key);
    return 0;
  }
  c->st = ntk_error(NTK_ECONFIG, "%s:%d: unknown section [%s] (data, model, compute, output)",
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
}

/* Section headers never reach the handler when a section is empty; catch
 * unknown ones here so "[comptue]" alone is still an error. */
static ntk_status check_sections(const char *text, const char *name) {
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
      const char *known[] = {"data", "model", "compute", "output"};
      int ok = 0;
      for (int i = 0; i < 4; i++) ok |= strlen(known[i]) == n && !strncmp(q + 1, known[i], n);
      if (!ok)
        return ntk_error(NTK_ECONFIG, "%s:%d: unknown section [%.*s] (data, model, compute, output)",
                         name, line, (int)n, q + 1);
    }
    p = e ? e + 1 : p + len;
  }
  return NTK_OK;
}

ntk_status ntk_job_parse_string(const char *text, const char *name, struct ntk_job *job) {
  ntk_job_defaults(job);
  snprintf(job->source, sizeof job->source, "%s", name);
  struct reader rd = {text, 0, 0};
  struct ctx c = {job, &rd, name, 0, NTK_OK, ""};
  const char *slash = strrchr(name, '/');
  if (slash && (size_t)(slash - name + 1) < sizeof c.dir) {
    memcpy(c.dir, name, (size_t)(slash - name + 1));
    c.dir[slash - name + 1] = '\0';
  }
  ntk_status st = check_sections(text, name);
  if (st) return st;
  int rc = ini_parse_stream(read_line, &rd, handler, &c);
  if (c.st) return c.st;
  if (rc > 0) return ntk_error(NTK_ECONFIG, "%s:%d: syntax error (expected 'key = value' or '[section]')", name, rc);
  if (rc < 0) return ntk_error(NTK_ECONFIG, "%s: could not be parsed", name);
  if (!(c.seen & SEEN_PATH)) return ntk_error(NTK_ECONFIG, "%s: [data] path is required", name);
  if (!(c.seen & SEEN_ARCH)) return ntk_error(NTK_ECONFIG, "%s: [model] arch is required", name);
  if (!(c.seen & SEEN_OPATH)) return ntk_error(NTK_ECONFIG, "%s: [output] path is required", name);
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
