/* Recursive-descent parser for architecture strings such as
 *   "[Conv(3, 1, SAME) Relu]*20 GlobalAvgPool Dense(W_std=2, b_std=0.1)"
 * and the checks neural-tangents makes on a layer sequence. */
#include "ntkd/arch.h"
#include "ntkd/numparse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTK_ARCH_MAX_LAYERS 100000
#define NTK_ARCH_MAX_DEPTH 16
#define NTK_ARCH_MAX_ARGS 8

struct parser {
  const char *text;
  size_t pos;
  double w_std, b_std;
};

struct layer_vec {
  size_t n, cap;
  struct ntk_layer *v;
};

static ntk_status perr(const struct parser *p, const char *fmt, const char *what) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, what);
  return ntk_error(NTK_ECONFIG, "arch, column %zu: %s", p->pos + 1, msg);
}

static void skip_ws(struct parser *p) {
  while (isspace((unsigned char)p->text[p->pos])) p->pos++;
}

static ntk_status vec_push(struct parser *p, struct layer_vec *v, const struct ntk_layer *l) {
  if (v->n >= NTK_ARCH_MAX_LAYERS) return perr(p, "more than %s layers", "100000");
  if (v->n == v->cap) {
    size_t cap = v->cap ? 2 * v->cap : 16;
    struct ntk_layer *nv = realloc(v->v, cap * sizeof *nv);
    if (!nv) return ntk_error(NTK_ENOMEM, "arch: out of memory");
    v->v = nv;
    v->cap = cap;
  }
  v->v[v->n++] = *l;
  return NTK_OK;
}

/* One argument: either positional (key[0] == 0) or key=value. */
struct arg {
  char key[16];
  char val[48];
  size_t pos;
};

static ntk_status read_word(struct parser *p, char *buf, size_t cap, int (*ok)(int)) {
  size_t n = 0;
  while (p->text[p->pos] && ok((unsigned char)p->text[p->pos])) {
    if (n + 1 >= cap) return perr(p, "token too long%s", "");
    buf[n++] = p->text[p->pos++];
  }
  buf[n] = '\0';
  return NTK_OK;
}

static int is_ident(int c) { return isalnum(c) || c == '_'; }
static int is_value(int c) { return isalnum(c) || c == '_' || c == '.' || c == '-' || c == '+'; }

static ntk_status parse_args(struct parser *p, struct arg *args, int *nargs) {
  *nargs = 0;
  p->pos++; /* '(' */
  skip_ws(p);
  if (p->text[p->pos] == ')') {
    p->pos++;
    return NTK_OK;
  }
  for (;;) {
    if (*nargs == NTK_ARCH_MAX_ARGS) return perr(p, "too many arguments%s", "");
    struct arg *a = &args[(*nargs)++];
    skip_ws(p);
    a->pos = p->pos;
    a->key[0] = '\0';
    ntk_status st = read_word(p, a->val, sizeof a->val, is_value);
    if (st) return st;
    skip_ws(p);
    if (p->text[p->pos] == '=') {
      if (strlen(a->val) >= sizeof a->key) return perr(p, "unknown argument '%s'", a->val);
      strcpy(a->key, a->val);
      p->pos++;
      skip_ws(p);
      if ((st = read_word(p, a->val, sizeof a->val, is_value))) return st;
      skip_ws(p);
    }
    if (!a->val[0]) return perr(p, "expected a value%s", "");
    if (p->text[p->pos] == ',') {
      p->pos++;
      continue;
    }
    if (p->text[p->pos] == ')') {
      p->pos++;
      return NTK_OK;
    }
    return perr(p, "expected ',' or ')' in argument list%s", "");
  }
}

/* A positive integer up to 10^6 (filter sizes, strides, repeat counts). */
static int parse_int(const char *s, int *out) {
  size_t v;
  if (!ntk_parse_size(s, &v) || v < 1 || v > 1000000) return 0;
  *out = (int)v;
  return 1;
}

static ntk_status arg_double(struct parser *p, const struct arg *a, double lo, double *out) {
  if (!ntk_parse_double(a->val, out) || *out < lo) {
    p->pos = a->pos;
    return perr(p, "'%s' is not a valid number here", a->val);
  }
  return NTK_OK;
}

static ntk_status arg_int(struct parser *p, const struct arg *a, int *out) {
  if (!parse_int(a->val, out)) {
    p->pos = a->pos;
    return perr(p, "'%s' is not a positive integer", a->val);
  }
  return NTK_OK;
}

static ntk_status arg_padding(struct parser *p, const struct arg *a, ntk_padding *out) {
  if (!strcmp(a->val, "SAME")) *out = NTK_PAD_SAME;
  else if (!strcmp(a->val, "VALID")) *out = NTK_PAD_VALID;
  else if (!strcmp(a->val, "CIRCULAR")) *out = NTK_PAD_CIRCULAR;
  else {
    p->pos = a->pos;
    return perr(p, "unknown padding '%s' (SAME, VALID or CIRCULAR)", a->val);
  }
  return NTK_OK;
}

/* Dense and Conv: keyword W_std / b_std anywhere; Conv positionals f, stride, padding. */
static ntk_status layer_args(struct parser *p, struct ntk_layer *l, const struct arg *args,
                             int nargs, int max_positional) {
  int npos = 0;
  for (int i = 0; i < nargs; i++) {
    const struct arg *a = &args[i];
    ntk_status st = NTK_OK;
    if (!a->key[0]) {
      if (npos >= max_positional) {
        p->pos = a->pos;
        return perr(p, "too many positional arguments for %s", l->name);
      }
      npos++;
      if (l->kind == NTK_LAYER_CONV) {
        if (npos == 1) st = arg_int(p, a, &l->filter);
        else if (isdigit((unsigned char)a->val[0]) && npos == 2) st = arg_int(p, a, &l->stride);
        else st = arg_padding(p, a, &l->padding);
      } else if (l->kind == NTK_LAYER_AVGPOOL) {
        st = npos == 1 ? arg_int(p, a, &l->window) : arg_int(p, a, &l->stride);
      } else if (l->kind == NTK_LAYER_ABRELU) {
        st = arg_double(p, a, -INFINITY, &l->a);
      }
    } else if (!strcmp(a->key, "W_std") && (l->kind == NTK_LAYER_DENSE || l->kind == NTK_LAYER_CONV)) {
      st = arg_double(p, a, 0.0, &l->w_std);
    } else if (!strcmp(a->key, "b_std") && (l->kind == NTK_LAYER_DENSE || l->kind == NTK_LAYER_CONV)) {
      st = arg_double(p, a, 0.0, &l->b_std);
    } else if (!strcmp(a->key, "stride") && (l->kind == NTK_LAYER_CONV || l->kind == NTK_LAYER_AVGPOOL)) {
      st = arg_int(p, a, &l->stride);
    } else if (!strcmp(a->key, "padding") && l->kind == NTK_LAYER_CONV) {
      st = arg_padding(p, a, &l->padding);
    } else if (!strcmp(a->key, "alpha") && l->kind == NTK_LAYER_ABRELU && !strcmp(l->name, "LeakyRelu")) {
      st = arg_double(p, a, -INFINITY, &l->a);
      npos++;
    } else {
      p->pos = a->pos;
      char what[96];
      snprintf(what, sizeof what, "%s for %s", a->key, l->name);
      return perr(p, "unknown argument %s", what);
    }
    if (st) return st;
  }
  return NTK_OK;
}

static ntk_status parse_layer(struct parser *p, struct layer_vec *out) {
  size_t start = p->pos;
  char name[32];
  ntk_status st = read_word(p, name, sizeof name, is_ident);
  if (st) return st;
  if (!name[0]) return perr(p, "unexpected character '%.1s'", p->text + p->pos);
  struct ntk_layer l;
  memset(&l, 0, sizeof l);
  l.w_std = p->w_std;
  l.b_std = p->b_std;
  l.stride = 1;
  l.padding = NTK_PAD_VALID;
  int need_args = 0, max_pos = 0;
  if (!strcmp(name, "Dense")) l.kind = NTK_LAYER_DENSE;
  else if (!strcmp(name, "Conv")) { l.kind = NTK_LAYER_CONV; need_args = 1; max_pos = 3; }
  else if (!strcmp(name, "Relu")) { l.kind = NTK_LAYER_ABRELU; l.a = 0; l.b = 1; }
  else if (!strcmp(name, "LeakyRelu")) { l.kind = NTK_LAYER_ABRELU; l.b = 1; need_args = 1; max_pos = 1; }
  else if (!strcmp(name, "Abs")) { l.kind = NTK_LAYER_ABRELU; l.a = -1; l.b = 1; }
  else if (!strcmp(name, "Erf")) l.kind = NTK_LAYER_ERF;
  else if (!strcmp(name, "Identity")) l.kind = NTK_LAYER_IDENTITY;
  else if (!strcmp(name, "AvgPool")) { l.kind = NTK_LAYER_AVGPOOL; need_args = 1; max_pos = 2; l.stride = 0; }
  else if (!strcmp(name, "Flatten")) l.kind = NTK_LAYER_FLATTEN;
  else if (!strcmp(name, "GlobalAvgPool")) l.kind = NTK_LAYER_GLOBALAVGPOOL;
  else {
    p->pos = start;
    return perr(p, "unknown layer '%s' (Dense, Conv, Relu, LeakyRelu, Abs, Erf, Identity, "
                   "AvgPool, Flatten, GlobalAvgPool)", name);
  }
  snprintf(l.name, sizeof l.name, "%.15s", name);
  if (p->text[p->pos] == '(') {
    struct arg args[NTK_ARCH_MAX_ARGS];
    int nargs;
    if ((st = parse_args(p, args, &nargs))) return st;
    if (nargs && !max_pos && l.kind != NTK_LAYER_DENSE) {
      p->pos = start;
      return perr(p, "%s takes no arguments", name);
    }
    if ((st = layer_args(p, &l, args, nargs, max_pos))) return st;
    int have_required = l.kind == NTK_LAYER_CONV ? l.filter > 0
                        : l.kind == NTK_LAYER_AVGPOOL ? l.window > 0
                        : 1;
    if (l.kind == NTK_LAYER_ABRELU && need_args && nargs == 0) have_required = 0;
    if (!have_required) {
      p->pos = start;
      return perr(p, "%s needs its size argument", name);
    }
  } else if (need_args) {
    p->pos = start;
    return perr(p, "%s needs arguments, e.g. Conv(3), LeakyRelu(0.1), AvgPool(2)", name);
  }
  if (l.kind == NTK_LAYER_AVGPOOL && l.stride == 0) l.stride = l.window;
  return vec_push(p, out, &l);
}

static ntk_status parse_seq(struct parser *p, struct layer_vec *out, int depth, int in_group);

static ntk_status parse_group(struct parser *p, struct layer_vec *out, int depth) {
  size_t start = p->pos;
  if (depth >= NTK_ARCH_MAX_DEPTH) return perr(p, "brackets nested too deeply%s", "");
  p->pos++; /* '[' */
  struct layer_vec inner = {0, 0, NULL};
  ntk_status st = parse_seq(p, &inner, depth + 1, 1);
  if (st) goto done;
  if (p->text[p->pos] != ']') {
    p->pos = start;
    st = perr(p, "unclosed '['%s", "");
    goto done;
  }
  p->pos++;
  skip_ws(p);
  int count = 1;
  if (p->text[p->pos] == '*') {
    p->pos++;
    skip_ws(p);
    char num[16];
    size_t npos = p->pos;
    if ((st = read_word(p, num, sizeof num, is_ident))) goto done;
    if (!parse_int(num, &count) && strcmp(num, "0")) {
      p->pos = npos;
      st = perr(p, "repeat count '%s' is not a non-negative integer", num);
      goto done;
    }
    if (!strcmp(num, "0")) count = 0;
  }
  if (inner.n == 0) {
    p->pos = start;
    st = perr(p, "empty group%s", "");
    goto done;
  }
  for (int r = 0; r < count && !st; r++)
    for (size_t i = 0; i < inner.n && !st; i++) st = vec_push(p, out, &inner.v[i]);
done:
  free(inner.v);
  return st;
}

static ntk_status parse_seq(struct parser *p, struct layer_vec *out, int depth, int in_group) {
  for (;;) {
    skip_ws(p);
    char c = p->text[p->pos];
    if (!c) return in_group ? perr(p, "missing ']'%s", "") : NTK_OK;
    if (c == ']') return in_group ? NTK_OK : perr(p, "unmatched ']'%s", "");
    ntk_status st = c == '[' ? parse_group(p, out, depth) : parse_layer(p, out);
    if (st) return st;
  }
}

static int is_nonlinear(ntk_layer_kind k) { return k == NTK_LAYER_ABRELU || k == NTK_LAYER_ERF; }

/* neural-tangents' rules: a nonlinearity needs a Gaussian input, which only
 * a Dense or Conv layer produces; nothing spatial follows Flatten/GAP. */
static ntk_status validate(const struct ntk_arch *a) {
  if (a->n == 0) return ntk_error(NTK_ECONFIG, "arch: no layers");
  int gaussian = 0, flat = 0;
  for (size_t i = 0; i < a->n; i++) {
    const struct ntk_layer *l = &a->layers[i];
    if (is_nonlinear(l->kind)) {
      if (!gaussian)
        return ntk_error(NTK_ECONFIG,
                         "arch, layer %zu (%s): a nonlinearity must follow Dense or Conv "
                         "(its input must be Gaussian)%s",
                         i + 1, l->name, i == 0 ? "; it cannot be the first layer" : "");
      gaussian = 0;
    } else if (l->kind == NTK_LAYER_DENSE) {
      gaussian = 1;
    } else if (l->kind == NTK_LAYER_CONV || l->kind == NTK_LAYER_AVGPOOL) {
      if (flat)
        return ntk_error(NTK_ECONFIG, "arch, layer %zu (%s): spatial layer after Flatten or GlobalAvgPool",
                         i + 1, l->name);
      if (l->kind == NTK_LAYER_CONV) gaussian = 1;
    } else if (l->kind == NTK_LAYER_FLATTEN || l->kind == NTK_LAYER_GLOBALAVGPOOL) {
      flat = 1;
      /* As in neural-tangents: Flatten's output is not Gaussian, pooling's is. */
      if (l->kind == NTK_LAYER_FLATTEN) gaussian = 0;
    }
  }
  return NTK_OK;
}

ntk_status ntk_arch_parse(const char *text, double w_std, double b_std, struct ntk_arch *out) {
  out->n = 0;
  out->layers = NULL;
  if (!text) return ntk_error(NTK_ECONFIG, "arch: missing");
  struct parser p = {text, 0, w_std, b_std};
  struct layer_vec v = {0, 0, NULL};
  ntk_status st = parse_seq(&p, &v, 0, 0);
  if (st) {
    free(v.v);
    return st;
  }
  out->n = v.n;
  out->layers = v.v;
  if ((st = validate(out))) ntk_arch_free(out);
  return st;
}

void ntk_arch_free(struct ntk_arch *arch) {
  if (!arch) return;
  free(arch->layers);
  arch->layers = NULL;
  arch->n = 0;
}

int ntk_arch_is_fc(const struct ntk_arch *arch) {
  for (size_t i = 0; i < arch->n; i++) {
    ntk_layer_kind k = arch->layers[i].kind;
    if (k == NTK_LAYER_CONV || k == NTK_LAYER_AVGPOOL || k == NTK_LAYER_GLOBALAVGPOOL) return 0;
  }
  return 1;
}

/* Shortest decimal that reads back as exactly v: "0.05", not "0.050000000000000003". */
static void fmt_exact(char *buf, size_t cap, double v) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, cap, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

static const char *pad_name(ntk_padding p) {
  return p == NTK_PAD_SAME ? "SAME" : p == NTK_PAD_CIRCULAR ? "CIRCULAR" : "VALID";
}

size_t ntk_arch_layer_canonical(const struct ntk_layer *l, char *buf, size_t cap) {
  char w[32], b[32];
  fmt_exact(w, sizeof w, l->w_std);
  fmt_exact(b, sizeof b, l->b_std);
  int n;
  switch (l->kind) {
  case NTK_LAYER_DENSE:
    n = snprintf(buf, cap, "Dense(W_std=%s, b_std=%s)", w, b);
    break;
  case NTK_LAYER_CONV:
    n = snprintf(buf, cap, "Conv(%d, %d, %s, W_std=%s, b_std=%s)", l->filter, l->stride, pad_name(l->padding), w, b);
    break;
  case NTK_LAYER_ABRELU:
    fmt_exact(w, sizeof w, l->a);
    if (!strcmp(l->name, "LeakyRelu")) n = snprintf(buf, cap, "LeakyRelu(%s)", w);
    else n = snprintf(buf, cap, "%s", l->name);
    break;
  case NTK_LAYER_AVGPOOL:
    n = snprintf(buf, cap, "AvgPool(%d, %d)", l->window, l->stride);
    break;
  default:
    n = snprintf(buf, cap, "%s", l->name);
    break;
  }
  return n > 0 ? (size_t)n : 0;
}

size_t ntk_arch_canonical(const struct ntk_arch *arch, char *buf, size_t cap) {
  size_t len = 0;
  for (size_t i = 0; i < arch->n; i++) {
    char one[160];
    ntk_arch_layer_canonical(&arch->layers[i], one, sizeof one);
    size_t ol = strlen(one) + (i ? 1 : 0);
    if (len + ol < cap) snprintf(buf + len, cap - len, "%s%s", i ? " " : "", one);
    len += ol;
  }
  if (cap && len >= cap) buf[cap - 1] = '\0';
  if (cap && arch->n == 0) buf[0] = '\0';
  return len;
}
