/* Recursive-descent parser for architecture strings such as
 *   "[Conv(3, 1, SAME) Relu]*20 GlobalAvgPool Dense(W_std=2, b_std=0.1)"
 * and the checks neural-tangents makes on a layer sequence. */
#include "kernels/arch.h"
#include "kernels/numerical.h"
#include "base/numparse.h"

#include <ctype.h>
#include <float.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Limits (docs/JOB-FILE.md, "Limits"): layers after expanding repeats,
 * and so repeat counts; nesting of brackets, serial(...) and blocks;
 * widths, filters, windows and strides; branches of a block. */
#define NTK_ARCH_MAX_LAYERS 100000
#define NTK_ARCH_MAX_DEPTH 16
#define NTK_ARCH_MAX_ARGS 20 /* GlobalSelfAttention has 19 parameters */
#define NTK_ARCH_MAX_SIZE 1000000
#define NTK_ARCH_MAX_BRANCHES 64

struct parser {
  const char *text;
  size_t pos;
  double w_std, b_std;
  int standard; /* the job's parameterisation: what a layer's parameterization= must say */
  int b_given;  /* the job wrote [model] b_std: a layer without its own has a bias, even at 0 */
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
  if (v->n >= NTK_ARCH_MAX_LAYERS)
    return perr(p, "more than %s layers, the limit of an arch string (repeats expanded)", "100000");
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

/* vec_push for a layer written at `start`: an error points there. */
static ntk_status push_at(struct parser *p, struct layer_vec *v, const struct ntk_layer *l, size_t start) {
  size_t end = p->pos;
  p->pos = start;
  ntk_status st = vec_push(p, v, l);
  if (!st) p->pos = end;
  return st;
}

/* One argument: either positional (key[0] == 0) or key=value. A value is
 * a word or number, a quoted string ('SAME', "SAME": the quotes dropped)
 * or a list of numbers in brackets or parentheses ([1, 2], (3, 3)); a list
 * may hold short strings too (stax's dimension_numbers). */
#define NTK_STR_(x) #x
#define NTK_STR(x) NTK_STR_(x) /* a limit in a message, as the number it is */
#define NTK_ARCH_MAX_LIST 32 /* a Polynomial's coefficients are the longest list */
struct arg {
  char key[24];
  char val[48];
  int is_list, nlist;
  int quoted;  /* 1: val was quoted, a string (never stax's Padding.SAME); -1: val is a constant expression's
                  value, never a keyword; 0: a word as written */
  int paren1;  /* (x): one value in parentheses without a comma, which Python reads as x itself; a list of
                  one (a 1-D size) where a size goes, as ntkd always read it, and x (val) elsewhere */
  int nstr;    /* how many of the list's values are strings: str[k], list[k] NAN */
  double list[NTK_ARCH_MAX_LIST];
  char str[NTK_ARCH_MAX_LIST][16];
  size_t pos;
};

static ntk_status read_word(struct parser *p, char *buf, size_t cap, int (*ok)(int)) {
  size_t n = 0, start = p->pos;
  while (p->text[p->pos] && ok((unsigned char)p->text[p->pos])) {
    if (n + 1 >= cap) {
      p->pos = start;
      char what[96];
      snprintf(what, sizeof what, "'%.*s...' is longer than %zu characters", 24, p->text + start, cap - 1);
      return perr(p, "%s", what);
    }
    buf[n++] = p->text[p->pos++];
  }
  buf[n] = '\0';
  return NTK_OK;
}

static int is_ident(int c) { return isalnum(c) || c == '_'; }
static int is_value(int c) { return isalnum(c) || c == '_' || c == '.' || c == '-' || c == '+'; }

/* Shortest decimal that reads back as exactly v: "0.05", not "0.050000000000000003". */
static void fmt_exact(char *buf, size_t cap, double v) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, cap, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

/* ---- constant expressions -------------------------------------------------------
 * What a notebook writes for a number: np.sqrt(2), 2**0.5, 1/3, -math.pi/4,
 * (1 + 2) * 3. Evaluated as Python evaluates them, in float64: literals
 * correctly rounded (strtod), + - * / as IEEE operations, ** the C
 * library's pow (as CPython's), sqrt correctly rounded. Python's ints are
 * exact, so int arithmetic with an operand or result beyond 2**53 is refused
 * rather than rounded; what Python refuses (1/0, 0**-1, a negative number
 * to a fractional power, a result too large) is refused too, each at its
 * column, and so is anything else found. */
#define NTK_EXPR_MAX_DEPTH 64
#define NTK_EXACT_INT 9007199254740992.0 /* 2**53 */

struct num {
  double v;
  int is_int; /* a Python int */
};

/* The modules a notebook takes sqrt, pi and e from. */
static const char *const num_modules[] = {"math.", "np.", "numpy.", "jnp.", "jax.numpy.", "onp."};

/* "np.sqrt" -> "sqrt" where the module is one of num_modules, else NULL. */
static const char *num_member(const char *name) {
  for (size_t i = 0; i < sizeof num_modules / sizeof num_modules[0]; i++) {
    size_t n = strlen(num_modules[i]);
    if (!strncmp(name, num_modules[i], n)) return name + n;
  }
  return NULL;
}

static int is_num_constant(const char *name) {
  if (*name == '-' || *name == '+') name++;
  const char *m = num_member(name);
  return m && (!strcmp(m, "pi") || !strcmp(m, "e"));
}

static ntk_status expr_at(struct parser *p, size_t at, const char *msg) {
  p->pos = at;
  return perr(p, "%s", msg);
}

/* "found 'x'", "found the end of the string": what stands at the parser's position. */
static void found(const struct parser *p, char *buf, size_t cap) {
  const char *t = p->text + p->pos;
  if (!*t) snprintf(buf, cap, "the end of the string");
  else if (is_ident((unsigned char)*t)) {
    size_t n = 0;
    while (n < 40 && (is_ident((unsigned char)t[n]) || t[n] == '.')) n++;
    snprintf(buf, cap, "'%.*s'", (int)n, t);
  } else snprintf(buf, cap, "'%c'", *t);
}

static ntk_status expr_expected(struct parser *p, const char *what) {
  char f[64], msg[160];
  found(p, f, sizeof f);
  snprintf(msg, sizeof msg, "expected %s in a constant expression, found %s", what, f);
  return perr(p, "%s", msg);
}

/* Python's int arithmetic is exact: in float64 only below 2**53. 2**53
 * itself is refused too: it is also what 2**53 + 1 rounds to, as a
 * result (2**53 + 1 + 1 would go on as 2**53, not 2**53 + 2) and as a
 * literal (9007199254740993 / 7 would divide 2**53). */
static ntk_status int_exact(struct parser *p, size_t at, double a, double b, struct num *r) {
  if (fabs(a) >= NTK_EXACT_INT || fabs(b) >= NTK_EXACT_INT || fabs(r->v) >= NTK_EXACT_INT)
    return expr_at(p, at, "integer arithmetic beyond 2**53, exact in Python and not in float64: write the "
                          "numbers as floats (1e20)");
  if (r->v == 0) r->v = 0.0; /* an int has no -0 */
  return NTK_OK;
}

static ntk_status num_finite(struct parser *p, size_t at, const struct num *r) {
  return isfinite(r->v) ? NTK_OK : expr_at(p, at, "the result is too large for float64 (Python: inf or OverflowError)");
}

static ntk_status expr_sum(struct parser *p, struct num *out, int depth);
static ntk_status expr_unary(struct parser *p, struct num *out, int depth);

/* A Python number literal: 2, 2.5, 2., .5, 1e-3. */
static ntk_status expr_number(struct parser *p, struct num *out) {
  const char *t = p->text;
  size_t at = p->pos, q = at;
  int is_int = 1;
  while (isdigit((unsigned char)t[q])) q++;
  if (t[q] == '.') {
    is_int = 0;
    for (q++; isdigit((unsigned char)t[q]);) q++;
  }
  if (t[q] == 'e' || t[q] == 'E') {
    size_t e = q + 1 + (t[q + 1] == '+' || t[q + 1] == '-');
    if (isdigit((unsigned char)t[e])) {
      is_int = 0;
      for (q = e; isdigit((unsigned char)t[q]);) q++;
    }
  }
  char buf[48];
  size_t len = q - at;
  if (len >= sizeof buf) return expr_at(p, at, "a number longer than 47 characters");
  memcpy(buf, t + at, len);
  buf[len] = '\0';
  char msg[160];
  if (is_int && len > 1 && buf[0] == '0' && strspn(buf, "0") < len) {
    snprintf(msg, sizeof msg, "'%s': an integer with a leading zero is a syntax error in Python", buf);
    return expr_at(p, at, msg);
  }
  if (is_ident((unsigned char)t[q])) { /* 2x, 1j, 1_000 */
    p->pos = q;
    return expr_expected(p, "an operator after a number");
  }
  char *end;
  out->v = strtod(buf, &end);
  out->is_int = is_int;
  p->pos = q;
  return num_finite(p, at, out);
}

/* A number, a constant (math.pi), a call (np.sqrt(2)) or a parenthesised expression. */
static ntk_status expr_atom(struct parser *p, struct num *out, int depth) {
  skip_ws(p);
  const char *t = p->text;
  size_t at = p->pos;
  if (depth > NTK_EXPR_MAX_DEPTH)
    return perr(p, "a constant expression nested too deeply (the limit: %s levels)", "64");
  if (t[at] == '(') {
    p->pos++;
    ntk_status st = expr_sum(p, out, depth + 1);
    if (st) return st;
    skip_ws(p);
    if (t[p->pos] != ')') return expr_expected(p, "')'");
    p->pos++;
    return NTK_OK;
  }
  if (isdigit((unsigned char)t[at]) || (t[at] == '.' && isdigit((unsigned char)t[at + 1]))) return expr_number(p, out);
  if (!isalpha((unsigned char)t[at]) && t[at] != '_') return expr_expected(p, "a number");
  char name[48];
  size_t n = 0;
  while (is_ident((unsigned char)t[p->pos]) || t[p->pos] == '.') {
    if (n + 1 < sizeof name) name[n++] = t[p->pos];
    p->pos++;
  }
  name[n] = '\0';
  const char *m = num_member(name);
  char msg[300];
  skip_ws(p);
  if (t[p->pos] == '(') {
    if (!m || strcmp(m, "sqrt")) {
      snprintf(msg, sizeof msg, "unknown function '%s' in a constant expression (np.sqrt, math.sqrt, jnp.sqrt)", name);
      return expr_at(p, at, msg);
    }
    p->pos++;
    struct num x;
    ntk_status st = expr_sum(p, &x, depth + 1);
    if (st) return st;
    skip_ws(p);
    if (t[p->pos] == ',') p->pos++, skip_ws(p); /* np.sqrt(2,) */
    if (t[p->pos] != ')') return expr_expected(p, "')'");
    p->pos++;
    if (x.v < 0) {
      char v[32];
      fmt_exact(v, sizeof v, x.v);
      snprintf(msg, sizeof msg, "%s(%s): the square root of a negative number (math: ValueError, numpy: nan)", name, v);
      return expr_at(p, at, msg);
    }
    out->v = sqrt(x.v);
    out->is_int = 0;
    return NTK_OK;
  }
  if (m && !strcmp(m, "pi")) out->v = NTK_PI;
  else if (m && !strcmp(m, "e")) out->v = 2.718281828459045; /* math.e, the double nearest e */
  else {
    snprintf(msg, sizeof msg, "unknown name '%s' in a constant expression (numbers, + - * / **, parentheses, "
             "np.sqrt(...), math.pi, math.e; also from numpy, jnp, jax.numpy)", name);
    return expr_at(p, at, msg);
  }
  out->is_int = 0;
  return NTK_OK;
}

/* atom ['**' unary]: right-associative, binding tighter than a unary minus on its left (-2**2 is -4). */
static ntk_status expr_power(struct parser *p, struct num *out, int depth) {
  ntk_status st = expr_atom(p, out, depth);
  if (st) return st;
  skip_ws(p);
  if (p->text[p->pos] != '*' || p->text[p->pos + 1] != '*') return NTK_OK;
  size_t at = p->pos;
  p->pos += 2;
  struct num e, a = *out;
  if ((st = expr_unary(p, &e, depth + 1))) return st;
  if (a.v == 0 && e.v < 0) return expr_at(p, at, "0 to a negative power (ZeroDivisionError in Python)");
  if (a.v < 0 && e.v != floor(e.v))
    return expr_at(p, at, "a negative number to a fractional power, which is complex in Python");
  out->v = pow(a.v, e.v);
  out->is_int = a.is_int && e.is_int && e.v >= 0;
  if (out->is_int) return int_exact(p, at, a.v, e.v, out);
  return num_finite(p, at, out);
}

static ntk_status expr_unary(struct parser *p, struct num *out, int depth) {
  skip_ws(p);
  char c = p->text[p->pos];
  if (c != '-' && c != '+') return expr_power(p, out, depth);
  if (depth > NTK_EXPR_MAX_DEPTH)
    return perr(p, "a constant expression nested too deeply (the limit: %s levels)", "64");
  p->pos++;
  ntk_status st = expr_unary(p, out, depth + 1);
  if (!st && c == '-') out->v = out->is_int && out->v == 0 ? 0.0 : -out->v;
  return st;
}

static ntk_status expr_term(struct parser *p, struct num *out, int depth) {
  ntk_status st = expr_unary(p, out, depth);
  for (;;) {
    if (st) return st;
    skip_ws(p);
    const char *t = p->text + p->pos;
    size_t at = p->pos;
    if (t[0] == '%' || t[0] == '@' || (t[0] == '/' && t[1] == '/')) {
      char msg[160];
      snprintf(msg, sizeof msg, "'%.*s' is not in ntkd's constant expressions (+ - * / **)", t[0] == '/' ? 2 : 1, t);
      return expr_at(p, at, msg);
    }
    if (t[0] != '*' && t[0] != '/') return NTK_OK;
    p->pos++;
    struct num b, a = *out;
    if ((st = expr_unary(p, &b, depth))) return st;
    if (t[0] == '/') {
      if (b.v == 0) return expr_at(p, at, "division by zero (ZeroDivisionError in Python)");
      out->v = a.v / b.v; /* Python's int / int: the quotient correctly rounded, as here below 2**53 */
      out->is_int = 0;
      if (a.is_int && b.is_int && (fabs(a.v) >= NTK_EXACT_INT || fabs(b.v) >= NTK_EXACT_INT))
        return int_exact(p, at, a.v, b.v, out);
    } else {
      out->v = a.v * b.v;
      out->is_int = a.is_int && b.is_int;
      if (out->is_int && (st = int_exact(p, at, a.v, b.v, out))) return st;
    }
    st = num_finite(p, at, out);
  }
}

static ntk_status expr_sum(struct parser *p, struct num *out, int depth) {
  ntk_status st = expr_term(p, out, depth);
  for (;;) {
    if (st) return st;
    skip_ws(p);
    char c = p->text[p->pos];
    size_t at = p->pos;
    if (c != '+' && c != '-') return NTK_OK;
    p->pos++;
    struct num b, a = *out;
    if ((st = expr_term(p, &b, depth))) return st;
    out->v = c == '+' ? a.v + b.v : a.v - b.v;
    out->is_int = a.is_int && b.is_int;
    if (out->is_int && (st = int_exact(p, at, a.v, b.v, out))) return st;
    st = num_finite(p, at, out);
  }
}

/* Does the word just read (ending at the parser's position) start a
 * constant expression rather than stand alone? Only where it could not
 * stand alone: an operator or a call follows it, or it holds one (1+2), or
 * it is a named constant. So every value ntkd read before reads the same. */
static int starts_expression(const struct parser *p, const char *word) {
  size_t q = p->pos;
  while (isspace((unsigned char)p->text[q])) q++;
  char c = p->text[q];
  double v;
  if (c == '*' || c == '/' || c == '%' || c == '(') return 1;
  if ((c == '+' || c == '-') && word[0]) return 1;
  if (word[0] && strspn(word, "+-") == strlen(word)) return 1; /* a sign alone: - 5, -(1), - np.pi */
  if (!word[0] || ntk_parse_double(word, &v)) return 0;
  return strpbrk(word + 1, "+-") != NULL || is_num_constant(word);
}

static int operator_follows(const struct parser *p) {
  size_t q = p->pos;
  while (isspace((unsigned char)p->text[q])) q++;
  return strchr("*/%+-", p->text[q]) && p->text[q];
}

/* A constant expression at the parser's position. */
static ntk_status read_expression(struct parser *p, struct num *out) {
  return expr_sum(p, out, 0);
}

/* A quoted string (the quotes dropped) into buf. */
static ntk_status read_quoted(struct parser *p, char *buf, size_t cap) {
  char q = p->text[p->pos++];
  ntk_status st = read_word(p, buf, cap, is_value);
  if (st) return st;
  if (p->text[p->pos] != q) return perr(p, "unterminated quoted value%s", "");
  p->pos++;
  return buf[0] ? NTK_OK : perr(p, "empty quoted value%s", "");
}

static ntk_status read_list(struct parser *p, struct arg *a) {
  char close = p->text[p->pos] == '[' ? ']' : ')';
  p->pos++;
  a->is_list = 1;
  a->nlist = 0;
  int comma = 0;
  snprintf(a->val, sizeof a->val, "a list");
  for (;;) {
    skip_ws(p);
    if (p->text[p->pos] == close) /* empty, or a trailing comma: (3,) */
      break;
    if (a->nlist == NTK_ARCH_MAX_LIST) return perr(p, "more than %s values in a list", NTK_STR(NTK_ARCH_MAX_LIST));
    size_t at = p->pos;
    char c = p->text[at];
    ntk_status st;
    if (c == '\'' || c == '"') { /* dimension_numbers=('NHWC', 'HWIO', 'NHWC') */
      if ((st = read_quoted(p, a->str[a->nlist], sizeof a->str[0]))) return st;
      a->list[a->nlist] = NAN;
      a->nstr++;
    } else {
      char word[48];
      if ((st = read_word(p, word, sizeof word, is_value))) return st;
      if (c == '(' || starts_expression(p, word)) {
        struct num n;
        p->pos = at;
        if ((st = read_expression(p, &n))) return st;
        a->list[a->nlist] = n.v;
      } else if (!ntk_parse_double(word, &a->list[a->nlist])) {
        p->pos = at;
        return perr(p, "expected a number in the list, got '%s'", word[0] ? word : p->text + p->pos);
      }
    }
    a->nlist++;
    comma = 0;
    skip_ws(p);
    if (p->text[p->pos] == ',') {
      p->pos++;
      comma = 1;
      continue;
    }
    if (p->text[p->pos] == close) break;
    return close == ']' ? perr(p, "expected ',' or ']' in a list%s", "") : perr(p, "expected ',' or ')' in a list%s", "");
  }
  p->pos++;
  a->paren1 = close == ')' && a->nlist == 1 && !comma;
  return NTK_OK;
}

/* A value: a list, a quoted string, a constant expression, or a word as
 * ntkd always read it (a number, SAME, None, True, Padding.SAME, ...). */
static ntk_status read_value(struct parser *p, struct arg *a) {
  size_t start = p->pos;
  char c = p->text[p->pos];
  a->is_list = a->quoted = a->paren1 = a->nstr = 0;
  ntk_status st;
  struct num n;
  if (c == '[' || c == '(') {
    if ((st = read_list(p, a)) || !a->paren1) return st;
    if (operator_follows(p)) { /* (1 + 2) * 3 */
      p->pos = start;
      a->is_list = a->paren1 = a->nstr = 0;
    } else {
      if (a->nstr) {
        snprintf(a->val, sizeof a->val, "%s", a->str[0]);
        a->quoted = 1;
      } else fmt_exact(a->val, sizeof a->val, a->list[0]);
      return NTK_OK;
    }
  } else if (c == '\'' || c == '"') {
    a->quoted = 1;
    return read_quoted(p, a->val, sizeof a->val);
  } else {
    if ((st = read_word(p, a->val, sizeof a->val, is_value)) || !starts_expression(p, a->val)) return st;
    p->pos = start;
  }
  if ((st = read_expression(p, &n))) return st;
  /* the value as text that reads back as the same double: an int as its digits */
  if (n.is_int) snprintf(a->val, sizeof a->val, "%.0f", n.v);
  else fmt_exact(a->val, sizeof a->val, n.v);
  a->quoted = -1; /* an expression: a value, never a keyword */
  return NTK_OK;
}

static ntk_status parse_args(struct parser *p, struct arg *args, int *nargs) {
  *nargs = 0;
  p->pos++; /* '(' */
  skip_ws(p);
  if (p->text[p->pos] == ')') {
    p->pos++;
    return NTK_OK;
  }
  for (;;) {
    skip_ws(p);
    if (*nargs && p->text[p->pos] == ')') { /* after a trailing comma, as Python allows */
      p->pos++;
      return NTK_OK;
    }
    if (*nargs == NTK_ARCH_MAX_ARGS) return perr(p, "too many arguments%s", "");
    struct arg *a = &args[(*nargs)++];
    a->pos = p->pos;
    a->key[0] = '\0';
    ntk_status st = read_value(p, a);
    if (st) return st;
    skip_ws(p);
    if (p->text[p->pos] == '=' && !a->is_list && a->quoted >= 0) {
      if (strlen(a->val) >= sizeof a->key) return perr(p, "unknown argument '%s'", a->val);
      strcpy(a->key, a->val);
      p->pos++;
      skip_ws(p);
      a->pos = p->pos;
      if ((st = read_value(p, a))) return st;
      skip_ws(p);
      for (int i = 0; i + 1 < *nargs; i++) /* Python: "keyword argument repeated", a SyntaxError */
        if (!strcmp(args[i].key, a->key)) {
          size_t at = p->pos;
          p->pos = a->pos;
          ntk_status e = perr(p, "%s given twice", a->key);
          p->pos = at;
          return e;
        }
    } else if (*nargs > 1 && args[*nargs - 2].key[0]) { /* Python: a SyntaxError */
      p->pos = a->pos;
      return perr(p, "a positional argument after a keyword argument%s", "");
    }
    if (!a->is_list && !a->val[0]) return perr(p, "expected a value%s", "");
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

/* A value as written, for messages: a number as it is, anything else
 * quoted, a long one cut. */
static void shown(char *buf, size_t cap, const char *text, size_t len) {
  char word[48];
  double v;
  snprintf(word, sizeof word, "%.*s%s", (int)(len > 40 ? 40 : len), text, len > 40 ? "..." : "");
  if (len <= 40 && ntk_parse_double(word, &v)) snprintf(buf, cap, "%s", word);
  else if (len && strspn(text, "0123456789") >= len) /* a long integer */
    snprintf(buf, cap, "%s", word);
  else snprintf(buf, cap, "'%s'", word);
}

/* Every integer of an arch string: text[0..len), at column `at`, must be an
 * integer in lo..hi. The message says what was written, what is allowed
 * and the limit: "Conv: filter must be an integer from 1 to 1000000, not
 * 0"; past hi, where hi is a limit of ntkd's (`limit` set, its reason
 * after it), "repeat count 100000000 is above the limit of 100000 ...".
 * Digits beyond any int are above hi, never wrapped. */
static ntk_status int_value(struct parser *p, size_t at, const char *what, const char *text, size_t len, long lo,
                            long hi, const char *limit, int *out) {
  size_t digits = strspn(text, "0123456789");
  int integer = digits && digits >= len;
  long v = 0;
  for (size_t i = 0; integer && i < len; i++) v = v > hi ? v : v * 10 + (text[i] - '0'); /* stops above hi */
  if (integer && v >= lo && v <= hi) {
    *out = (int)v;
    return NTK_OK;
  }
  p->pos = at;
  char msg[400], val[64];
  shown(val, sizeof val, text, len);
  if (integer && v > hi && limit)
    snprintf(msg, sizeof msg, "%s %s is above the limit of %ld%s", what, val, hi, limit);
  else if (!len)
    snprintf(msg, sizeof msg, "%s is missing: an integer from %ld to %ld", what, lo, hi);
  else
    snprintf(msg, sizeof msg, "%s must be an integer from %ld to %ld, not %s", what, lo, hi, val);
  return perr(p, "%s", msg);
}

/* "unknown argument KEY for LAYER", at the parser's position. */
static ntk_status unknown_argument(struct parser *p, const char *key, const char *layer) {
  char what[96];
  snprintf(what, sizeof what, "%.23s for %.23s", key, layer);
  return perr(p, "unknown argument %s", what);
}

/* A number argument >= lo: W_std, b_std, LayerNorm's eps. */
static ntk_status arg_double(struct parser *p, const struct arg *a, const char *layer, const char *key, double lo,
                             double *out) {
  if ((!a->is_list || a->paren1) && ntk_parse_double(a->val, out) && *out >= lo) return NTK_OK;
  p->pos = a->pos;
  char msg[300], val[64], low[32];
  fmt_exact(low, sizeof low, lo);
  if (a->is_list && !a->paren1) snprintf(val, sizeof val, "a list");
  else shown(val, sizeof val, a->val, strlen(a->val));
  snprintf(msg, sizeof msg, "%s: %s must be a number >= %s%s, not %s", layer, key, low,
           !strcmp(key, "b_std") ? " or None" : "", val);
  return perr(p, "%s", msg);
}

/* After a size past NTK_ARCH_MAX_SIZE. */
static const char size_limit[] = " (ntkd's limit on widths and sizes)";

/* An integer argument in lo..hi (widths, sizes): int_value on its text. */
static ntk_status arg_int(struct parser *p, const struct arg *a, const char *layer, const char *key, long lo, long hi,
                          int *out) {
  char what[64];
  snprintf(what, sizeof what, "%s: %s", layer, key);
  if (a->is_list && !a->paren1) {
    p->pos = a->pos;
    char msg[200];
    snprintf(msg, sizeof msg, "%s must be an integer from %ld to %ld, not a list", what, lo, hi);
    return perr(p, "%s", msg);
  }
  return int_value(p, a->pos, what, a->val, strlen(a->val), lo, hi, size_limit, out);
}

/* The stax module as a notebook names it: stax.Dense, nt.stax.Dense,
 * neural_tangents.stax.Dense. Returns the length of the prefix at s, 0 for none. */
static size_t stax_prefix(const char *s) {
  static const char *const prefixes[] = {"neural_tangents.stax.", "nt.stax.", "stax."};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (!strncmp(s, prefixes[i], strlen(prefixes[i]))) return strlen(prefixes[i]);
  return 0;
}

/* A name of stax's enum `type` (Padding, AttentionMechanism,
 * PositionalEmbedding) as written: 'SAME', SAME, Padding.SAME(.name|.value),
 * with or without a stax. (or jax.image.) prefix before the enum's name. Returns its index in names, or -1. */
static int arg_enum(const struct arg *a, const char *type, const char *const *names, int count) {
  if (a->is_list && !a->paren1) return -1; /* ('SAME') is 'SAME' to Python */
  const char *v = a->val;
  char name[48];
  size_t tl = strlen(type);
  size_t pre = stax_prefix(v) ? stax_prefix(v) : !strncmp(v, "jax.image.", 10) ? 10 : 0; /* ResizeMethod's module */
  if (!a->quoted && !strncmp(v + pre, type, tl) && v[pre + tl] == '.') {
    snprintf(name, sizeof name, "%s", v + pre + tl + 1);
    char *dot = strchr(name, '.');
    if (dot && (!strcmp(dot, ".name") || !strcmp(dot, ".value"))) *dot = '\0';
    v = name;
  }
  for (int k = 0; k < count; k++)
    if (!strcmp(v, names[k])) return k;
  return -1;
}

/* SAME, 'SAME', or stax's enum: Padding.SAME, stax.Padding.SAME, Padding.SAME.name (or .value). */
static ntk_status arg_padding(struct parser *p, const struct arg *a, ntk_padding *out) {
  static const char *const names[] = {"VALID", "SAME", "CIRCULAR"}; /* ntk_padding's order */
  int k = arg_enum(a, "Padding", names, 3);
  if (k >= 0) {
    *out = (ntk_padding)k;
    return NTK_OK;
  }
  p->pos = a->pos;
  return perr(p, "unknown padding '%s' (SAME, VALID or CIRCULAR)", a->val);
}

/* A size given as n, as stax's tuple (h, w), or as a 1-D (n,) for (N, L,
 * C) data, which ntkd holds as L x 1 images: (n, 1). Filters, windows,
 * strides: each an integer from 1 to NTK_ARCH_MAX_SIZE. */
static ntk_status arg_shape(struct parser *p, const struct arg *a, const char *layer, const char *key, int *h, int *w,
                            int *one_d) {
  if (!a->is_list) {
    ntk_status st = arg_int(p, a, layer, key, 1, NTK_ARCH_MAX_SIZE, h);
    if (!st) *w = *h;
    return st;
  }
  char what[64];
  snprintf(what, sizeof what, "%s: %s", layer, key);
  if (a->nstr) {
    p->pos = a->pos;
    return perr(p, "%s: a string in a list of sizes", what);
  }
  if (a->nlist != 1 && a->nlist != 2) {
    p->pos = a->pos;
    char msg[160];
    snprintf(msg, sizeof msg, "%s: expected n, (h, w) or, for 1-D data, (n,): %d values given", what, a->nlist);
    return perr(p, "%s", msg);
  }
  int v[2] = {1, 1};
  for (int k = 0; k < a->nlist; k++) { /* each as it reads back: 3, 3.5, -1, 1e+300 */
    char text[32];
    if (fabs(a->list[k]) < 1e15 && a->list[k] == floor(a->list[k])) snprintf(text, sizeof text, "%.0f", a->list[k]);
    else fmt_exact(text, sizeof text, a->list[k]);
    if (a->list[k] > NTK_ARCH_MAX_SIZE && a->list[k] == floor(a->list[k])) { /* 1e9, 1e+300: too large */
      p->pos = a->pos;
      char msg[200];
      snprintf(msg, sizeof msg, "%s %s is above the limit of %d%s", what, text, NTK_ARCH_MAX_SIZE, size_limit);
      return perr(p, "%s", msg);
    }
    ntk_status st = int_value(p, a->pos, what, text, strlen(text), 1, NTK_ARCH_MAX_SIZE, size_limit, &v[k]);
    if (st) return st;
  }
  *h = v[0];
  *w = v[1];
  if (a->nlist == 1) *one_d = 1;
  return NTK_OK;
}

/* b_std=None is stax's "no bias": 0. */
static ntk_status arg_bias(struct parser *p, const struct arg *a, const char *layer, double *out) {
  if (!a->is_list && !strcmp(a->val, "None")) {
    *out = 0.0;
    return NTK_OK;
  }
  return arg_double(p, a, layer, "b_std", 0.0, out);
}

/* stax's keywords that say where the data's axes are, or how a layer is
 * built at finite width: accepted where they match what ntkd computes (and
 * so change nothing), refused with the reason where they would change the
 * kernel. Returns 1 if `key` is one of them, *st set; 0 if not. */
static int stax_keyword(struct parser *p, const struct arg *a, const char *layer, const char *key, ntk_status *st) {
  double v = 0;
  int number = (!a->is_list || a->paren1) && ntk_parse_double(a->val, &v);
  char shown_val[64], msg[400];
  if (a->is_list && !a->paren1) { /* (2, 2) */
    size_t n = (size_t)snprintf(shown_val, sizeof shown_val, "(");
    for (int k = 0; k < a->nlist && n < 40; k++) {
      char one[32];
      if (a->nstr && isnan(a->list[k])) snprintf(one, sizeof one, "'%s'", a->str[k]);
      else fmt_exact(one, sizeof one, a->list[k]);
      n += (size_t)snprintf(shown_val + n, sizeof shown_val - n, "%s%s", k ? ", " : "", one);
    }
    if (n < sizeof shown_val) snprintf(shown_val + n, sizeof shown_val - n, "%s)", a->nlist == 1 ? "," : "");
  } else shown(shown_val, sizeof shown_val, a->val, strlen(a->val));
  *st = NTK_OK;
  msg[0] = '\0';
  if (!strcmp(key, "batch_axis") || !strcmp(key, "batch_axis_out")) {
    if (!number || v != 0)
      snprintf(msg, sizeof msg, "%s: %s=%s: ntkd's samples are on axis 0 (%s=0)", layer, key, shown_val, key);
  } else if (!strcmp(key, "channel_axis")) {
    if ((!number || v != -1) && strcmp(a->val, "None"))
      snprintf(msg, sizeof msg, "%s: channel_axis=%s: ntkd's channels are the last axis (channel_axis=-1)", layer,
               shown_val);
  } else if (!strcmp(key, "do_stabilize") || !strcmp(key, "approximate")) {
    if (a->is_list || (strcmp(a->val, "True") && strcmp(a->val, "False")))
      snprintf(msg, sizeof msg, "'%s' is not True or False", a->is_list ? "a list" : a->val);
  } else if (!strcmp(key, "parameterization")) {
    const char *job = p->standard ? "standard" : "ntk";
    if (a->is_list || (strcmp(a->val, "ntk") && strcmp(a->val, "standard")))
      snprintf(msg, sizeof msg, "%s: parameterization must be 'ntk' or 'standard', not %s", layer, shown_val);
    else if (strcmp(a->val, job))
      snprintf(msg, sizeof msg, "%s: parameterization='%s', and this job's is '%s': ntkd gives every layer one "
               "parameterization, [model] parameterization = %s (docs/JOB-FILE.md)", layer, a->val, job, a->val);
  } else if (!strcmp(key, "s")) { /* stax: applies under the standard parameterisation only */
    int ones = a->is_list && !a->nstr && a->nlist == 2 && a->list[0] == 1 && a->list[1] == 1;
    if (p->standard && !ones)
      snprintf(msg, sizeof msg, "%s: s=%s: ntkd computes the standard parameterisation with s=(1, 1) only", layer,
               shown_val);
  } else if (!strcmp(key, "dimension_numbers")) {
    /* stax's default for n spatial axes is ('N' S 'C', S 'IO', 'N' S 'C'), S n letters
     * (it names them 'AB'; 'HW' or 'W' as often): the layout ntkd computes */
    int ok = !strcmp(a->val, "None") && !a->is_list;
    if (a->is_list && a->nstr == 3 && a->nlist == 3) {
      const char *in = a->str[0], *w = a->str[1], *out = a->str[2];
      size_t n = strlen(in) - 2;
      ok = strlen(in) >= 3 && strlen(in) <= 4 && !strcmp(in, out) && in[0] == 'N' && in[n + 1] == 'C' &&
           strlen(w) == n + 2 && !strncmp(w, in + 1, n) && !strcmp(w + n, "IO") && !strpbrk(w, "NC") &&
           !memchr(in + 1, 'I', n) && !memchr(in + 1, 'O', n) && (n < 2 || in[1] != in[2]);
    }
    if (!ok)
      snprintf(msg, sizeof msg, "%s: dimension_numbers: ntkd's images are NHWC with HWIO filters (stax's default, "
               "None; for other data layouts, [data] layout)", layer);
  } else return 0;
  if (msg[0]) {
    p->pos = a->pos;
    *st = perr(p, "%s", msg);
  }
  return 1;
}

/* Which of stax_keyword's keywords Dense (row 0), Conv (1) and pooling (2) have. */
static int stax_keyword_of(const char *key, int row) {
  if (!strcmp(key, "batch_axis") || !strcmp(key, "channel_axis")) return row != 1;
  if (!strcmp(key, "parameterization") || !strcmp(key, "s")) return row <= 1;
  return !strcmp(key, "dimension_numbers") && row == 1;
}

/* Dense, Conv and AvgPool, in either syntax:
 *   ntkd's short forms  Dense, Conv(f, stride, padding), AvgPool(w, stride, padding)
 *                       (AvgPool's stride defaults to w);
 *   stax's forms        Dense(out_dim, W_std, b_std, ...), Conv(out_chan, (f, f),
 *                       strides, padding, W_std, b_std, ...), AvgPool((w, w),
 *                       strides, padding, normalize_edges, ...) (stride 1 by
 *                       default): every positional in stax's order,
 * told apart by `stax` (the layer written with a stax. prefix), a tuple
 * among the positionals or a stax keyword (filter_shape, window_shape,
 * out_chan, out_dim). Keywords W_std, b_std, stride / strides and padding
 * in both, and stax_keyword's. A width (out_dim, out_chan) is kept, and
 * means nothing in the NTK parameterisation. */
/* given[0..i-1] the parameters of the arguments before args[i]: refuses
 * args[i] naming one of them again, as Python does ("got multiple values
 * for argument"), and records it. */
static ntk_status once_param(struct parser *p, const char **given, int i, const char *key, const struct arg *a) {
  given[i] = key;
  for (int j = 0; j < i; j++)
    if (!strcmp(given[j], key)) {
      p->pos = a->pos;
      return perr(p, "%.23s given twice", key);
    }
  return NTK_OK;
}

/* A parameter's one name: stax's filter_shape, window_shape and strides
 * are ntkd's filter, window and stride. */
static const char *param_name(const char *key) {
  if (!strcmp(key, "filter_shape")) return "filter";
  if (!strcmp(key, "window_shape")) return "window";
  if (!strcmp(key, "strides")) return "stride";
  return key;
}

static ntk_status layer_args(struct parser *p, struct ntk_layer *l, const struct arg *args, int nargs, int stax) {
  int npos = 0, stride_given = 0;
  const struct arg *stax_spelt = NULL; /* stax's spelling: padding='...' or Padding.X, or a stax-only keyword */
  const char *given[NTK_ARCH_MAX_ARGS]; /* each argument's parameter: one given twice is refused */
  for (int i = 0; i < nargs; i++)
    if ((!args[i].key[0] && args[i].is_list) || !strcmp(args[i].key, "filter_shape") ||
        !strcmp(args[i].key, "window_shape") || !strcmp(args[i].key, "out_chan") || !strcmp(args[i].key, "out_dim"))
      stax = 1;
  if (l->kind == NTK_LAYER_DENSE) stax = 1; /* Dense(512): stax's out_dim */
  /* the positionals in each syntax: stax's are its signatures' (neural-tangents 0.6.5) */
  static const char *const pos_short[][3] = {{NULL}, {"filter", "stride", "padding"}, {"window", "stride", "padding"}};
  static const char *const pos_stax[][10] = {
      {"out_dim", "W_std", "b_std", "batch_axis", "channel_axis", "parameterization", "s", NULL},
      {"out_chan", "filter_shape", "strides", "padding", "W_std", "b_std", "dimension_numbers", "parameterization",
       "s", NULL},
      {"window_shape", "strides", "padding", "normalize_edges", "batch_axis", "channel_axis", NULL},
      {"window_shape", "strides", "padding", "batch_axis", "channel_axis", NULL}};
  int row = l->kind == NTK_LAYER_DENSE ? 0 : l->kind == NTK_LAYER_CONV ? 1 : 2;
  int stax_row = row == 2 && l->sum ? 3 : row; /* SumPool has no normalize_edges */
  for (int i = 0; i < nargs; i++) {
    const struct arg *a = &args[i];
    const char *key = a->key;
    if (!key[0]) { /* positional: its name in this syntax */
      const char *name = NULL;
      if (stax ? npos < 9 : npos < 3) name = stax ? pos_stax[stax_row][npos] : pos_short[row][npos];
      /* ntkd's Conv(3, SAME): padding may come second */
      if (!stax && row == 1 && npos == 1 && !a->is_list && !isdigit((unsigned char)a->val[0])) name = "padding";
      if (!name) {
        p->pos = a->pos;
        return perr(p, "too many positional arguments for %s", l->name);
      }
      npos++;
      key = name;
    }
    ntk_status st = once_param(p, given, i, param_name(key), a);
    if (st) return st;
    int dense_conv = l->kind == NTK_LAYER_DENSE || l->kind == NTK_LAYER_CONV;
    if (!strcmp(key, "W_std") && dense_conv) {
      st = arg_double(p, a, l->name, "W_std", 0.0, &l->w_std);
    } else if (!strcmp(key, "b_std") && dense_conv) {
      st = arg_bias(p, a, l->name, &l->b_std);
      l->bias = a->is_list || strcmp(a->val, "None"); /* stax: a number, even 0, is a bias parameter */
    } else if ((!strcmp(key, "out_dim") && row == 0) || (!strcmp(key, "out_chan") && row == 1)) {
      st = arg_int(p, a, l->name, key, 1, NTK_ARCH_MAX_SIZE, &l->width);
    } else if ((!strcmp(key, "filter") || !strcmp(key, "filter_shape")) && row == 1) {
      st = arg_shape(p, a, l->name, "filter", &l->filter, &l->filter_w, &l->one_d);
    } else if ((!strcmp(key, "window") || !strcmp(key, "window_shape")) && row == 2) {
      st = arg_shape(p, a, l->name, "window", &l->window, &l->window_w, &l->one_d);
    } else if ((!strcmp(key, "stride") || !strcmp(key, "strides")) && row > 0) {
      if (a->is_list || strcmp(a->val, "None")) { /* strides=None: the default */
        st = arg_shape(p, a, l->name, "stride", &l->stride, &l->stride_w, &l->one_d);
        stride_given = 1;
      }
    } else if (!strcmp(key, "padding") && row > 0) {
      st = arg_padding(p, a, &l->padding);
      if (a->key[0] && (a->quoted == 1 || strstr(a->val, "Padding.")) && !stax_spelt) stax_spelt = a;
    } else if (stax_keyword_of(key, row)) {
      stax_keyword(p, a, l->name, key, &st);
      if (!stax_spelt) stax_spelt = a; /* stax's own keywords: its syntax too */
    } else if (!strcmp(key, "normalize_edges") && row == 2 && !l->sum) {
      if (a->is_list || (strcmp(a->val, "True") && strcmp(a->val, "False"))) {
        p->pos = a->pos;
        return perr(p, "'%s' is not True or False", a->val);
      }
      l->normalize_edges = !strcmp(a->val, "True");
    } else {
      p->pos = a->pos;
      char what[96];
      snprintf(what, sizeof what, "%s for %s", a->key[0] ? a->key : a->val, l->name);
      return perr(p, a->key[0] ? "unknown argument %s" : "unexpected argument %s", what);
    }
    if (st) return st;
  }
  /* Conv(64, 3, padding='SAME'): stax's Conv(out_chan, filter_shape) to
   * anyone who writes stax (neural-tangents refuses the int filter, and
   * ntkd.stax reads it as a 1-D one), ntkd's 64 x 64 filter with stride 3
   * here. Two numbers and a Python string keyword mix the syntaxes: which
   * one is meant is refused rather than guessed (a helper's hunt ran such
   * a network as the 64 x 64 one); so are padding=Padding.SAME and stax's
   * own keywords (parameterization, dimension_numbers, s) there. */
  if (!stax && row == 1 && npos >= 2 && stax_spelt) {
    p->pos = stax_spelt->pos;
    return perr(p, "%s", "Conv(f, stride, padding='...') mixes ntkd's short form Conv(filter, stride, padding) "
                "with stax's keyword syntax (a quoted or Padding. padding, or a stax-only keyword); write "
                "stax's Conv(out_chan, (f, f), padding='SAME') (the filter a tuple) or ntkd's Conv(f, stride, SAME) "
                "(the padding unquoted or positional)");
  }
  /* AvgPool's stride: stax's default is 1, ntkd's short form's the window */
  if (row == 2 && !stride_given) l->stride = l->stride_w = stax ? 1 : 0;
  /* CIRCULAR pooling wraps, so every window is whole: stax divides by the
   * window's size whatever normalize_edges says (its kernel pools the
   * wrapped input VALID) */
  if (row == 2 && l->padding == NTK_PAD_CIRCULAR) l->normalize_edges = 0;
  return NTK_OK;
}

/* A parameter's value into its place in the map (lists are copied by the caller). */
static void set_slot(struct ntk_map *m, enum ntk_param_slot slot, double v) {
  switch (slot) {
  case NTK_SLOT_A: m->a = v; break;
  case NTK_SLOT_B: m->b = v; break;
  case NTK_SLOT_C: m->c = v; break;
  case NTK_SLOT_DEGREE: m->degree = (int)v; break;
  case NTK_SLOT_FLAG: m->flag = v != 0; break;
  case NTK_SLOT_COEF: break;
  case NTK_SLOT_NONE: break;
  }
}

/* Is v in the domain d of a number parameter? */
static int in_domain(const struct ntk_domain *d, double v) {
  return (d->lo_open ? v > d->lo : v >= d->lo) && v <= d->hi;
}

/* "> 0", ">= 0 and <= 1"; "" for any number. */
static void domain_text(const struct ntk_domain *d, char *buf, size_t cap) {
  char lo[32], hi[32];
  fmt_exact(lo, sizeof lo, d->lo);
  fmt_exact(hi, sizeof hi, d->hi);
  if (isinf(d->lo) && isinf(d->hi)) snprintf(buf, cap, "%s", "");
  else if (isinf(d->hi)) snprintf(buf, cap, "%s %s", d->lo_open ? ">" : ">=", lo);
  else if (isinf(d->lo)) snprintf(buf, cap, "<= %s", hi);
  else snprintf(buf, cap, "%s %s and <= %s", d->lo_open ? ">" : ">=", lo, hi);
}

/* A nonlinearity's arguments, by the table of src/kernels/layers.c: positional in
 * stax's order or by keyword, each once, the required ones present, each
 * in its domain. */
static ntk_status map_args(struct parser *p, struct ntk_layer *l, const struct ntk_map_name *nm, const struct arg *args,
                           int nargs, size_t start) {
  int np = 0, given[NTK_MAP_MAXPARAMS] = {0};
  size_t end = p->pos; /* after the arguments; errors point into them */
  while (np < NTK_MAP_MAXPARAMS && nm->params[np].key) np++;
  l->map = nm->fixed;
  for (int k = 0; k < np; k++) l->param[k] = nm->params[k].dflt;
  for (int i = 0, npos = 0; i < nargs; i++) {
    const struct arg *a = &args[i];
    int k = -1;
    if (!a->key[0]) {
      if (npos >= np) {
        p->pos = a->pos;
        return np ? perr(p, "too many arguments for %s", l->name) : perr(p, "%s takes no arguments", l->name);
      }
      k = npos++;
    } else {
      for (int j = 0; j < np; j++)
        if (!strcmp(a->key, nm->params[j].key)) k = j;
      if (k < 0) {
        p->pos = a->pos;
        return unknown_argument(p, a->key, l->name);
      }
    }
    if (given[k]++) {
      p->pos = a->pos;
      return perr(p, "%s given twice", nm->params[k].key);
    }
    const struct ntk_param *pm = &nm->params[k];
    double v = 0;
    p->pos = a->pos;
    char what[64];
    snprintf(what, sizeof what, "%s: %s", l->name, pm->key);
    switch (pm->type) {
    case NTK_PARAM_NUMBER: {
      int number = (!a->is_list || a->paren1) && ntk_parse_double(a->val, &v);
      if (number && in_domain(&pm->domain, v)) break;
      char msg[300], val[64], dom[96];
      domain_text(&pm->domain, dom, sizeof dom);
      if (a->is_list && !a->paren1) snprintf(val, sizeof val, "a list");
      else shown(val, sizeof val, a->val, strlen(a->val));
      if (number) snprintf(msg, sizeof msg, "%s must be %s, not %s", what, dom, val);
      else snprintf(msg, sizeof msg, "%s must be a number%s%s, not %s", what, dom[0] ? " " : "", dom, val);
      return perr(p, "%s", msg);
    }
    case NTK_PARAM_INT: {
      long lo = (long)pm->domain.lo, hi = (long)pm->domain.hi;
      int u;
      if (a->is_list) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s must be an integer from %ld to %ld, not a list", what, lo, hi);
        return perr(p, "%s", msg);
      }
      ntk_status st = int_value(p, a->pos, what, a->val, strlen(a->val), lo, hi, NULL, &u);
      if (st) return st;
      v = u;
      break;
    }
    case NTK_PARAM_BOOL:
      if (a->is_list || (strcmp(a->val, "True") && strcmp(a->val, "False")))
        return perr(p, "'%s' is not True or False", a->val);
      v = !strcmp(a->val, "True");
      break;
    case NTK_PARAM_LIST:
      if (!a->is_list || a->nstr) return perr(p, "%s wants a list of numbers, e.g. [1, 0, 2]", pm->key);
      if (a->nlist > NTK_MAP_MAXCOEF) return perr(p, "more than %s coefficients", NTK_STR(NTK_MAP_MAXCOEF));
      for (int c = 0; c < a->nlist; c++) {
        if (!isfinite(a->list[c])) return perr(p, "a coefficient is not finite%s", "");
        l->map.coef[c] = a->list[c];
      }
      l->map.degree = a->nlist;
      v = a->nlist;
      break;
    }
    l->param[k] = pm->slot == NTK_SLOT_NONE ? pm->dflt : v; /* changes nothing: the same layer either way */
    set_slot(&l->map, pm->slot, v);
  }
  for (int k = 0; k < np; k++) {
    if (given[k]) continue;
    p->pos = start;
    if (isnan(nm->params[k].dflt)) {
      char what[96];
      snprintf(what, sizeof what, "%s needs %s", l->name, nm->params[k].key);
      return perr(p, "%s", what);
    }
    set_slot(&l->map, nm->params[k].slot, nm->params[k].dflt); /* defaults go where values would */
  }
  char why[160] = "";
  if (nm->finish && !nm->finish(&l->map, why, sizeof why)) {
    p->pos = start;
    char what[200];
    snprintf(what, sizeof what, "%s: %s", l->name, why);
    return perr(p, "%s", what);
  }
  p->pos = end;
  return NTK_OK;
}

/* LayerNorm(axis=-1, eps=1e-12), stax's: axis an integer or a tuple of
 * them, each from -4 to 3 but the batch axis 0 (normalising over the batch
 * couples the samples); which spatial axes they name depends on the data's
 * rank, resolved by ntk_layernorm_axes when the data are known. */
/* Axes as written (an integer or a tuple of them, each -4..3) into a mask,
 * bit a + 4 for axis a: LayerNorm's axis, Aggregate's aggregate_axis.
 * `what` names the argument in messages, `forms` what it may be, `shapes`
 * the data whose axes they are. */
static ntk_status arg_axes(struct parser *p, const struct arg *a, const char *what, const char *forms,
                           const char *shapes, int *mask) {
  int count = a->is_list ? a->nlist : 1;
  *mask = 0;
  char msg[400];
  if (a->is_list && (a->nstr || !count)) {
    snprintf(msg, sizeof msg, "%s must be %s", what, forms);
    return perr(p, "%s", msg);
  }
  for (int k = 0; k < count; k++) {
    double v;
    int ok = a->is_list ? (v = a->list[k], 1) : ntk_parse_double(a->val, &v);
    char val[64];
    fmt_exact(val, sizeof val, ok ? v : 0);
    if (!ok || v != floor(v) || v < -4 || v > 3) {
      snprintf(msg, sizeof msg, "%s %s is not an axis of ntkd's data (-4 to 3: %s)", what, ok ? val : a->val, shapes);
      return perr(p, "%s", msg);
    }
    *mask |= 1 << ((int)v + 4);
  }
  return NTK_OK;
}

/* The axes of a mask (arg_axes) as a tuple's items, "-1" or "1, 2", into
 * buf; returns how many. */
static int fmt_axes(char *buf, size_t cap, int mask) {
  int k = 0, m = 0;
  buf[0] = '\0';
  for (int a = -4; a <= 3; a++)
    if (mask & 1 << (a + 4)) k += snprintf(buf + k, cap - (size_t)k, "%s%d", m++ ? ", " : "", a);
  return m;
}

static ntk_status layernorm_args(struct parser *p, struct ntk_layer *l, const struct arg *args, int nargs) {
  const char *given[NTK_ARCH_MAX_ARGS];
  size_t end = p->pos; /* after the arguments; errors point into them */
  l->map.kind = NTK_MAP_LAYERNORM;
  l->map.a = 1e-12;
  for (int i = 0, npos = 0; i < nargs; i++) {
    const struct arg *a = &args[i];
    static const char *const pos[] = {"axis", "eps", "batch_axis", "channel_axis"};
    const char *key = a->key[0] ? a->key : npos < 4 ? pos[npos] : NULL;
    if (!a->key[0]) npos++;
    p->pos = a->pos;
    if (!key) return perr(p, "too many positional arguments for %s", l->name);
    ntk_status twice = once_param(p, given, i, key, a);
    if (twice) return twice;
    ntk_status st;
    if (!strcmp(key, "batch_axis") || !strcmp(key, "channel_axis")) {
      if (stax_keyword(p, a, l->name, key, &st), st) return st;
    } else if (!strcmp(key, "axis")) {
      int mask;
      if ((st = arg_axes(p, a, "LayerNorm: axis", "an integer or a tuple of them, e.g. (1, 2, 3)",
                         "(N, H, W, C), (N, L, C) or (N, C)", &mask)))
        return st;
      if (mask & 1 << 4)
        return perr(p, "LayerNorm over the batch axis 0: each sample would be normalised by the whole batch's "
                       "statistics, and ntkd computes each pair of samples on its own%s", "");
      l->ln_axes = mask == 1 << 3 ? 0 : mask; /* (-1,): the default */
    } else if (!strcmp(key, "eps")) {
      if ((st = arg_double(p, a, l->name, "eps", 0.0, &l->map.a))) return st;
    } else {
      return unknown_argument(p, key, l->name);
    }
  }
  l->param[0] = l->map.a;
  p->pos = end;
  return NTK_OK;
}

int ntk_layernorm_axes(const struct ntk_layer *l, int rank, size_t index, int *over_h, int *over_w) {
  *over_h = *over_w = 0;
  if (!l->ln_axes) return 0;
  int channels = 0;
  for (int a = -4; a <= 3; a++) {
    if (!(l->ln_axes & 1 << (a + 4))) continue;
    int k = a < 0 ? a + rank : a;
    if (k < 0 || k >= rank) {
      ntk_error(NTK_ECONFIG, "arch, layer %zu (LayerNorm): axis %d is outside data of %d axes (%s)", index + 1, a,
                rank, rank == 2 ? "N, C: vectors, or after the readout" : rank == 3 ? "N, L, C" : "N, H, W, C");
      return -1;
    }
    if (k == 0) {
      ntk_error(NTK_ECONFIG, "arch, layer %zu (LayerNorm): axis %d is the batch axis of data of %d axes: each sample "
                "would be normalised by the whole batch's statistics, and ntkd computes each pair on its own",
                index + 1, a, rank);
      return -1;
    }
    if (k == rank - 1) channels = 1;
    else if (k == 1) *over_h = 1;
    else *over_w = 1;
  }
  if (!channels) {
    ntk_error(NTK_ECONFIG, "arch, layer %zu (LayerNorm): its axes leave the channels (axis -1) out; neural-tangents "
              "needs them for the infinite-width limit", index + 1);
    return -1;
  }
  return 0;
}

int ntk_aggregate_axes(const struct ntk_layer *l, int rank, size_t index) {
  if (!l->agg_axes) return 0;
  int mask = 0;
  for (int a = -4; a <= 3; a++) {
    if (!(l->agg_axes & 1 << (a + 4))) continue;
    int k = a < 0 ? a + rank : a;
    if (k < 0 || k >= rank) {
      ntk_error(NTK_ECONFIG, "arch, layer %zu (Aggregate): aggregate_axis %d is outside data of %d axes (%s)",
                index + 1, a, rank, rank == 3 ? "N, L, C" : "N, H, W, C");
      return -1;
    }
    mask |= 1 << k;
  }
  int spatial = ((1 << rank) - 1) & ~1 & ~(1 << (rank - 1));
  if (mask != spatial) {
    ntk_error(NTK_ECONFIG, "arch, layer %zu (Aggregate): ntkd aggregates over every spatial axis (aggregate_axis="
              "None: %s on data of %d axes), not over the batch, the channels or some of the spatial axes alone",
              index + 1, rank == 3 ? "(1,)" : "(1, 2)", rank);
    return -1;
  }
  return 0;
}

int ntk_concat_axis(const struct ntk_layer *l, int rank, size_t index) {
  if (!l->axis) return 0;
  int k = l->axis < 0 ? l->axis + rank : l->axis;
  if (k <= 0 || k >= rank) {
    ntk_error(NTK_ECONFIG, "arch, layer %zu (FanInConcat): axis %d is %s data of %d axes (%s)", index + 1, l->axis,
              k == 0 ? "the batch axis of" : "outside", rank,
              rank == 2 ? "N, C: vectors, or after the readout" : rank == 3 ? "N, L, C" : "N, H, W, C");
    return -1;
  }
  return k == rank - 1 ? 0 : k; /* 1: rows (H, or L), 2: columns (W) */
}

/* Dropout(rate, mode='train'), stax's: rate the keep rate, 0 < rate <= 1,
 * required; mode 'train' (the default) scales a sample's own entries by
 * 1/rate, 'test' is the identity (made an Identity layer here). */
static ntk_status dropout_args(struct parser *p, struct ntk_layer *l, const struct arg *args, int nargs,
                               size_t start) {
  const char *given[NTK_ARCH_MAX_ARGS];
  size_t end = p->pos; /* after the arguments; errors point into them */
  int have_rate = 0, test = 0;
  for (int i = 0, npos = 0; i < nargs; i++) {
    const struct arg *a = &args[i];
    static const char *const pos[] = {"rate", "mode"};
    const char *key = a->key[0] ? a->key : npos < 2 ? pos[npos] : NULL;
    if (!a->key[0]) npos++;
    p->pos = a->pos;
    if (!key) return perr(p, "too many positional arguments for %s", l->name);
    ntk_status twice = once_param(p, given, i, key, a);
    if (twice) return twice;
    if (!strcmp(key, "rate")) {
      double v = 0;
      int number = (!a->is_list || a->paren1) && ntk_parse_double(a->val, &v);
      if (!number || !(v > 0 && v <= 1)) {
        char val[64], msg[300];
        if (a->is_list && !a->paren1) snprintf(val, sizeof val, "a list");
        else shown(val, sizeof val, a->val, strlen(a->val));
        snprintf(msg, sizeof msg, "Dropout: rate must be > 0 and <= 1 (stax's keep rate: 1 keeps every unit), not %s",
                 val);
        return perr(p, "%s", msg);
      }
      l->rate = v;
      have_rate = 1;
    } else if (!strcmp(key, "mode")) {
      if (a->is_list || (strcmp(a->val, "train") && strcmp(a->val, "test")))
        return perr(p, "Dropout: mode must be 'train' or 'test', not %s", a->is_list ? "a list" : a->val);
      test = !strcmp(a->val, "test");
    } else {
      return unknown_argument(p, key, l->name);
    }
  }
  if (!have_rate) {
    p->pos = start;
    return perr(p, "%s needs its rate (the keep rate, in (0, 1]): Dropout(0.9)", l->name);
  }
  if (test) { /* stax's kernel in mode 'test': the input's */
    l->kind = NTK_LAYER_IDENTITY;
    snprintf(l->name, sizeof l->name, "Identity");
  }
  l->param[0] = l->rate;
  p->pos = end;
  return NTK_OK;
}

/* True or False, as written. */
static ntk_status arg_bool(struct parser *p, const struct arg *a, const char *layer, const char *key, int *out) {
  if (!a->is_list && !a->quoted && (!strcmp(a->val, "True") || !strcmp(a->val, "False"))) {
    *out = !strcmp(a->val, "True");
    return NTK_OK;
  }
  p->pos = a->pos;
  char msg[200], val[64];
  if (a->is_list) snprintf(val, sizeof val, "a list");
  else shown(val, sizeof val, a->val, strlen(a->val));
  snprintf(msg, sizeof msg, "%s: %s must be True or False, not %s", layer, key, val);
  return perr(p, "%s", msg);
}

/* GlobalSelfAttention(n_chan_out, n_chan_key, n_chan_val, n_heads,
 * linear_scaling=True, W_key_std=1, W_value_std=1, W_query_std=1,
 * W_out_std=1, b_std=None, attention_mechanism='SOFTMAX',
 * pos_emb_type='NONE', pos_emb_p_norm=2, pos_emb_decay_fn=None,
 * n_chan_pos_emb=None, W_pos_emb_std=1, val_pos_emb=False, batch_axis=0,
 * channel_axis=-1), stax's, with stax's defaults (not [model]'s W_std and
 * b_std). The widths are kept and change nothing in the limit; what
 * neural-tangents has no closed form for (linear_scaling=False but with
 * IDENTITY) and what ntkd does not compute (a decay function, a channel
 * count for the embeddings) is refused here, naming it. */
static ntk_status attention_args(struct parser *p, struct ntk_layer *l, const struct arg *args, int nargs,
                                 size_t start) {
  static const char *const pos[] = {"n_chan_out", "n_chan_key", "n_chan_val", "n_heads", "linear_scaling",
                                    "W_key_std", "W_value_std", "W_query_std", "W_out_std", "b_std",
                                    "attention_mechanism", "pos_emb_type", "pos_emb_p_norm", "pos_emb_decay_fn",
                                    "n_chan_pos_emb", "W_pos_emb_std", "val_pos_emb", "batch_axis", "channel_axis"};
  static const char *const mechs[] = {"SOFTMAX", "IDENTITY", "ABS", "RELU"}, *const embs[] = {"NONE", "SUM", "CONCAT"};
  enum { NPOS = (int)(sizeof pos / sizeof pos[0]) };
  const char *given[NTK_ARCH_MAX_ARGS];
  size_t end = p->pos; /* after the arguments; errors point into them */
  struct ntk_attention *t = &l->attn;
  memset(t, 0, sizeof *t);
  t->w_key = t->w_value = t->w_query = t->w_out = t->pos_std = 1.0;
  t->p_norm = 2.0;
  t->linear = 1;
  l->b_std = 0.0;
  l->w_std = 1.0;
  l->bias = 0;
  int have[4] = {0, 0, 0, 0}, *ints[4] = {&l->width, &t->n_chan_key, &t->n_chan_val, &t->n_heads};
  for (int i = 0, npos = 0; i < nargs; i++) {
    const struct arg *a = &args[i];
    const char *key = a->key[0] ? a->key : npos < NPOS ? pos[npos] : NULL;
    if (!a->key[0]) npos++;
    p->pos = a->pos;
    if (!key) return perr(p, "too many positional arguments for %s", l->name);
    ntk_status twice = once_param(p, given, i, key, a), st = NTK_OK;
    if (twice) return twice;
    int k = 0;
    while (k < NPOS && strcmp(key, pos[k])) k++;
    if (k < 4) {
      st = arg_int(p, a, l->name, key, 1, NTK_ARCH_MAX_SIZE, ints[k]);
      have[k] = 1;
    } else if (k == 4) {
      st = arg_bool(p, a, l->name, key, &t->linear);
    } else if (k >= 5 && k <= 8) {
      double *v[4] = {&t->w_key, &t->w_value, &t->w_query, &t->w_out};
      st = arg_double(p, a, l->name, key, 0.0, v[k - 5]);
    } else if (k == 9) {
      st = arg_bias(p, a, l->name, &l->b_std);
      l->bias = strcmp(a->val, "None") != 0;
    } else if (k == 10 || k == 11) {
      int e = k == 10 ? arg_enum(a, "AttentionMechanism", mechs, 4) : arg_enum(a, "PositionalEmbedding", embs, 3);
      if (e < 0)
        return perr(p, k == 10 ? "GlobalSelfAttention: attention_mechanism must be 'SOFTMAX', 'IDENTITY', 'ABS' or "
                                 "'RELU', not %s"
                               : "GlobalSelfAttention: pos_emb_type must be 'NONE', 'SUM' or 'CONCAT', not %s",
                    a->is_list ? "a list" : a->val);
      if (k == 10) t->mech = (ntk_attention_mech)e;
      else t->pos = (ntk_pos_emb)e;
    } else if (k == 12) {
      st = arg_double(p, a, l->name, key, 0.0, &t->p_norm);
    } else if (k == 13 || k == 14) {
      if (a->is_list || strcmp(a->val, "None"))
        return perr(p, k == 13 ? "GlobalSelfAttention: pos_emb_decay_fn must be None (one-hot positional "
                                 "embeddings, each position uncorrelated with the others): ntkd does not take a "
                                 "function of the distance%s"
                               : "GlobalSelfAttention: n_chan_pos_emb must be None (as many channels as the "
                                 "layer's input)%s", "");
    } else if (k == 15) {
      st = arg_double(p, a, l->name, key, 0.0, &t->pos_std);
    } else if (k == 16) {
      st = arg_bool(p, a, l->name, key, &t->val_pos);
    } else if (k == 17 || k == 18) {
      stax_keyword(p, a, l->name, key, &st);
    } else {
      return unknown_argument(p, key, l->name);
    }
    if (st) return st;
  }
  for (int k = 0; k < 4; k++)
    if (!have[k]) {
      p->pos = start;
      return perr(p, "GlobalSelfAttention needs n_chan_out, n_chan_key, n_chan_val and n_heads (widths; any "
                     "positive integers: the kernel is their limit), e.g. GlobalSelfAttention(64, 64, 64, 4)%s", "");
    }
  if (!t->linear && t->mech != NTK_ATTN_IDENTITY) {
    p->pos = start;
    return perr(p, "GlobalSelfAttention(linear_scaling=False) has a closed-form kernel only with "
                   "attention_mechanism='IDENTITY' (neural-tangents raises NotImplementedError too); not %s",
                mechs[t->mech]);
  }
  l->param[0] = l->b_std;
  p->pos = end;
  return NTK_OK;
}

/* ImageResize(shape, method, antialias=True, precision, batch_axis=0,
 * channel_axis=-1), stax's: shape the output's, one entry per axis of the
 * data, -1 where an axis keeps its size (the batch and the channels must);
 * method 'linear' (or 'bilinear', 'trilinear', 'triangle',
 * ResizeMethod.LINEAR) or 'nearest', the two neural-tangents' kernel_fn
 * computes; precision (jnp.einsum's) changes nothing here. */
static ntk_status resize_args(struct parser *p, struct ntk_layer *l, const struct arg *args, int nargs,
                              size_t start) {
  static const char *const pos[] = {"shape", "method", "antialias", "precision", "batch_axis", "channel_axis"};
  static const char *const methods[] = {"linear", "bilinear", "trilinear", "triangle", "nearest", "LINEAR",
                                        "NEAREST"};
  const char *given[NTK_ARCH_MAX_ARGS];
  size_t end = p->pos;
  int have_shape = 0, have_method = 0;
  l->antialias = 1;
  for (int i = 0, npos = 0; i < nargs; i++) {
    const struct arg *a = &args[i];
    const char *key = a->key[0] ? a->key : npos < 6 ? pos[npos] : NULL;
    if (!a->key[0]) npos++;
    p->pos = a->pos;
    if (!key) return perr(p, "too many positional arguments for %s", l->name);
    ntk_status twice = once_param(p, given, i, key, a), st = NTK_OK;
    if (twice) return twice;
    if (!strcmp(key, "shape")) {
      if (!a->is_list || a->nstr || (a->nlist != 3 && a->nlist != 4))
        return perr(p, "ImageResize: shape must be a tuple of 3 or 4 integers, one per axis of the data ((N, L, C) "
                       "or (N, H, W, C)), -1 where an axis keeps its size: (-1, 16, 16, -1)%s", "");
      for (int k = 0; k < a->nlist; k++) {
        double v = a->list[k];
        if (v != floor(v) || (v < 1 && v != -1) || v > NTK_ARCH_MAX_SIZE) {
          char val[32];
          fmt_exact(val, sizeof val, v);
          return perr(p, "ImageResize: shape entry %s is not -1 or an integer from 1 to 1000000", val);
        }
        l->resize[k] = (int)v;
      }
      l->resize_len = a->nlist;
      if (l->resize[0] != -1 || l->resize[a->nlist - 1] != -1)
        return perr(p, "ImageResize: shape must keep the batch and the channels (-1 first and last): stax's kernel "
                       "is not defined for a resized batch or channel axis%s", "");
      have_shape = 1;
    } else if (!strcmp(key, "method")) {
      int m = arg_enum(a, "ResizeMethod", methods, 7);
      if (m < 0 && !a->is_list && (strstr(a->val, "cubic") || strstr(a->val, "lanczos") || strstr(a->val, "CUBIC") ||
                                   strstr(a->val, "LANCZOS")))
        return perr(p, "ImageResize: method %s has no kernel in neural-tangents (its kernel_fn computes 'linear' and "
                       "'nearest' only)", a->val);
      if (m < 0)
        return perr(p, "ImageResize: method must be 'linear' (or 'bilinear', 'trilinear', 'triangle') or 'nearest', "
                       "not %s", a->is_list ? "a list" : a->val);
      l->nearest = m == 4 || m == 6;
      have_method = 1;
    } else if (!strcmp(key, "antialias")) {
      st = arg_bool(p, a, l->name, key, &l->antialias);
    } else if (!strcmp(key, "precision")) {
      /* jnp.einsum's precision: ntkd computes in the job's precision */
    } else if (!strcmp(key, "batch_axis") || !strcmp(key, "channel_axis")) {
      stax_keyword(p, a, l->name, key, &st);
    } else {
      return unknown_argument(p, key, l->name);
    }
    if (st) return st;
  }
  if (!have_shape || !have_method) {
    p->pos = start;
    return perr(p, "ImageResize needs its shape and method: ImageResize((-1, 16, 16, -1), 'linear')%s", "");
  }
  if (l->nearest) l->antialias = 1; /* ignored by 'nearest': one canonical text */
  p->pos = end;
  return NTK_OK;
}

/* An optional integer of an Index item at the parser's position: *has 1
 * and *v set if one is there. */
static ntk_status index_int(struct parser *p, int *has, long *v) {
  skip_ws(p);
  size_t at = p->pos;
  const char *s = p->text + at;
  size_t k = (*s == '-' || *s == '+') ? 1 : 0, digits = strspn(s + k, "0123456789");
  *has = digits > 0;
  if (!*has) return NTK_OK;
  if (digits > 9) return perr(p, "Index: %s is past ntkd's sizes", "an index");
  *v = strtol(s, NULL, 10);
  p->pos = at + k + digits;
  return NTK_OK;
}

/* Index(idx, batch_axis=0, channel_axis=-1), stax's, idx written as stax's
 * helper makes it: Slice[:, 1:5, ::2] (stax., nt.stax. or
 * neural_tangents.stax. before it), items start:stop:step or ... (an
 * integer removes its axis, which ntkd's layers do not follow: refused,
 * pointing to the slice of one). Read here from the text, Python's syntax
 * being beyond parse_args. */
static ntk_status index_args(struct parser *p, struct ntk_layer *l, size_t start) {
  if (p->text[p->pos] != '(') {
    p->pos = start;
    return perr(p, "Index needs its idx: Index(Slice[:, 1:5, ::2]) (stax's Slice helper)%s", "");
  }
  p->pos++;
  skip_ws(p);
  if (!strncmp(p->text + p->pos, "idx", 3) && !is_ident((unsigned char)p->text[p->pos + 3])) {
    p->pos += 3;
    skip_ws(p);
    if (p->text[p->pos] != '=') return perr(p, "Index: expected '=' after idx%s", "");
    p->pos++;
    skip_ws(p);
  }
  p->pos += stax_prefix(p->text + p->pos);
  if (strncmp(p->text + p->pos, "Slice", 5) || p->text[p->pos + 5 + strspn(p->text + p->pos + 5, " ")] != '[')
    return perr(p, "Index: idx must be written with stax's helper, Slice[...] (e.g. Slice[:, 1:5, ::2])%s", "");
  p->pos += 5;
  skip_ws(p);
  p->pos++; /* '[' */
  l->nslice = 0;
  for (;;) {
    skip_ws(p);
    if (p->text[p->pos] == ']' && l->nslice) break;
    if (l->nslice == NTK_INDEX_MAX) return perr(p, "Index: more than %s items in idx", NTK_STR(NTK_INDEX_MAX));
    struct ntk_slice *s = &l->slice[l->nslice++];
    memset(s, 0, sizeof *s);
    size_t at = p->pos;
    ntk_status st;
    if (!strncmp(p->text + p->pos, "...", 3)) {
      s->ellipsis = 1;
      p->pos += 3;
    } else {
      if ((st = index_int(p, &s->has_start, &s->start))) return st;
      skip_ws(p);
      if (p->text[p->pos] != ':') {
        p->pos = at;
        if (s->has_start)
          return perr(p, "Index: an integer index removes its axis, which ntkd's layers do not follow; a slice of "
                         "one keeps it (i:i+1, the same kernel before a readout)%s", "");
        return perr(p, "Index: expected a slice (start:stop:step), ... or ']' in idx%s", "");
      }
      p->pos++;
      if ((st = index_int(p, &s->has_stop, &s->stop))) return st;
      skip_ws(p);
      if (p->text[p->pos] == ':') {
        p->pos++;
        if ((st = index_int(p, &s->has_step, &s->step))) return st;
        if (s->has_step && s->step == 0) {
          p->pos = at;
          return perr(p, "Index: a slice step cannot be zero%s", "");
        }
      }
    }
    skip_ws(p);
    if (p->text[p->pos] == ',') {
      p->pos++;
      continue;
    }
    if (p->text[p->pos] == ']') break;
    return perr(p, "Index: expected ',' or ']' in idx%s", "");
  }
  p->pos++; /* ']' */
  int ellipses = 0;
  for (int k = 0; k < l->nslice; k++) ellipses += l->slice[k].ellipsis;
  if (ellipses > 1) return perr(p, "Index: idx has more than one Ellipsis (...)%s", "");
  for (;;) { /* batch_axis=0, channel_axis=-1 */
    skip_ws(p);
    if (p->text[p->pos] == ')') break;
    if (p->text[p->pos] != ',') return perr(p, "expected ',' or ')' in argument list%s", "");
    p->pos++;
    skip_ws(p);
    if (p->text[p->pos] == ')') break;
    char key[24];
    size_t at = p->pos;
    ntk_status st = read_word(p, key, sizeof key, is_ident);
    if (st) return st;
    skip_ws(p);
    if (p->text[p->pos] != '=' || (strcmp(key, "batch_axis") && strcmp(key, "channel_axis"))) {
      p->pos = at;
      return unknown_argument(p, key[0] ? key : "a positional", l->name);
    }
    p->pos++;
    skip_ws(p);
    struct arg a;
    memset(&a, 0, sizeof a);
    a.pos = p->pos;
    if ((st = read_value(p, &a))) return st;
    stax_keyword(p, &a, l->name, key, &st);
    if (st) return st;
  }
  p->pos++; /* ')' */
  return NTK_OK;
}

int ntk_index_axis(const struct ntk_layer *l, int rank, size_t index, int axis, size_t n, size_t *out, size_t *m) {
  const char *axes = rank == 3 ? "N, L, C" : "N, H, W, C";
  int items = 0, at = -1;
  for (int k = 0; k < l->nslice; k++) {
    if (l->slice[k].ellipsis) at = k;
    else items++;
  }
  if (items > rank) {
    ntk_error(NTK_ECONFIG, "arch, layer %zu (Index): idx has %d items, and the data %d axes (%s)", index + 1, items,
              rank, axes);
    return -1;
  }
  /* the item of each axis: those before the Ellipsis from the first axis, those after it up to the last */
  const struct ntk_slice *of[4] = {NULL, NULL, NULL, NULL};
  for (int k = 0; k < l->nslice; k++) {
    if (l->slice[k].ellipsis) continue;
    int ax = at < 0 || k < at ? k : rank - (l->nslice - k);
    of[ax] = &l->slice[k];
  }
  for (int ax = 0; ax < rank; ax += rank - 1) { /* the batch and the channels: whole */
    const struct ntk_slice *s = of[ax];
    if (s && (s->has_start || s->has_stop || (s->has_step && s->step != 1))) {
      ntk_error(NTK_ECONFIG, "arch, layer %zu (Index): idx indexes the %s axis; %s", index + 1,
                ax ? "channel" : "batch", ax ? "stax's kernel_fn refuses that (the channels are infinitely many)"
                : "ntkd computes every pair of the samples given (select them in the data)");
      return -1;
    }
  }
  const struct ntk_slice *s = axis < rank - 1 ? of[axis] : NULL;
  long len = (long)n, step = s && s->has_step ? s->step : 1, lo, hi;
  /* Python's slice.indices(n) */
  if (step > 0) {
    lo = s && s->has_start ? s->start : 0;
    hi = s && s->has_stop ? s->stop : len;
    if (lo < 0) lo += len;
    if (hi < 0) hi += len;
    lo = lo < 0 ? 0 : lo > len ? len : lo;
    hi = hi < 0 ? 0 : hi > len ? len : hi;
  } else {
    lo = s && s->has_start ? s->start : len - 1;
    hi = s && s->has_stop ? s->stop : -1 - len;
    if (lo < 0) lo += len;
    if (hi < 0) hi += len;
    lo = lo < -1 ? -1 : lo > len - 1 ? len - 1 : lo;
    hi = hi < -1 ? -1 : hi > len - 1 ? len - 1 : hi;
  }
  *m = 0;
  for (long i = lo; step > 0 ? i < hi : i > hi; i += step) out[(*m)++] = (size_t)i;
  if (!*m) {
    ntk_error(NTK_ECONFIG, "arch, layer %zu (Index): idx keeps no position of the %s axis of %zu", index + 1,
              axis == 1 ? (rank == 3 ? "L" : "H") : "W", n);
    return -1;
  }
  return 0;
}

/* ElementwiseNumerical(fn, deg, df=None), stax's. fn is one ntkd knows by
 * name (src/kernels/layers.c); one with a closed form becomes that map
 * (jnp.sin is Sin). deg, the Gauss-Hermite nodes stax would use, is checked
 * and changes nothing: ntkd's quadrature sizes its own panels (docs/MATH.md,
 * "Nonlinearities by quadrature"). df, a derivative given by hand, only as
 * None: ntkd differentiates the functions it knows itself. */
static ntk_status numerical_args(struct parser *p, struct ntk_layer *l, const struct arg *args, int nargs,
                                 size_t start) {
  size_t end = p->pos; /* after the arguments; errors point into them */
  static const char *const pos[] = {"fn", "deg", "df"};
  const struct arg *given[3] = {NULL, NULL, NULL};
  for (int i = 0, npos = 0; i < nargs; i++) {
    const struct arg *a = &args[i];
    int k = -1;
    if (!a->key[0]) k = npos < 3 ? npos++ : 3;
    else
      for (int j = 0; j < 3; j++)
        if (!strcmp(a->key, pos[j])) k = j;
    p->pos = a->pos;
    if (k == 3) return perr(p, "too many positional arguments for %s", l->name);
    if (k < 0) {
      return unknown_argument(p, a->key, l->name);
    }
    if (given[k]) return perr(p, "%s given twice", pos[k]);
    given[k] = a;
  }
  char known[200];
  ntk_numfn_known(known, sizeof known);
  if (!given[0]) {
    p->pos = start;
    return perr(p, "ElementwiseNumerical needs fn, one of %s (e.g. ElementwiseNumerical(jnp.tanh, deg=25))", known);
  }
  const struct arg *f = given[0];
  const char *closed = NULL;
  p->pos = f->pos;
  if (f->quoted && !f->is_list && ntk_numfn_find(f->val, &l->map, &closed)) {
    /* A known name in quotes: a string, which stax would not call. */
    char val[64];
    shown(val, sizeof val, f->val, strlen(f->val));
    return perr(p, "ElementwiseNumerical: fn is the string %s; as in stax it takes the function: write it unquoted "
                   "(jnp.tanh, Tanh, ...)", val);
  }
  if (f->is_list || f->quoted || !ntk_numfn_find(f->val, &l->map, &closed)) {
    char what[420], val[64];
    shown(val, sizeof val, f->val, strlen(f->val));
    snprintf(what, sizeof what, "fn %s (ntkd knows %s, from jax.nn, jnp or np, or as Tanh, Softplus, ...)",
             f->is_list ? "(a list)" : val, known);
    return perr(p, "ElementwiseNumerical: unknown %s", what);
  }
  int deg;
  ntk_status st;
  if (given[1] && given[1]->is_list) {
    p->pos = given[1]->pos;
    return perr(p, "ElementwiseNumerical: deg must be an integer from 1 to 1000000, not %s", "a list");
  }
  if (given[1] && (st = int_value(p, given[1]->pos, "ElementwiseNumerical: deg", given[1]->val, strlen(given[1]->val),
                                  1, 1000000, NULL, &deg)))
    return st;
  if (given[2] && (given[2]->is_list || strcmp(given[2]->val, "None"))) {
    p->pos = given[2]->pos;
    return perr(p, "ElementwiseNumerical: df must be None (ntkd differentiates %s itself)", f->val);
  }
  p->pos = end;
  if (!closed) return NTK_OK;
  snprintf(l->name, sizeof l->name, "%s", closed); /* the closed form, exactly */
  return map_args(p, l, ntk_map_name_find(closed), args, 0, start);
}

/* "Dense, Conv, ..., Relu, ...": every name the parser knows, for messages. */
static void known_names(char *buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "Dense, Conv, ConvLocal, ConvTranspose, Identity, AvgPool, SumPool, "
                                        "Flatten, GlobalAvgPool, GlobalSumPool, LayerNorm, Dropout, "
                                        "GlobalSelfAttention, ImageResize, Index, ElementwiseNumerical");
  size_t count;
  const struct ntk_map_name *nm = ntk_map_names(&count);
  for (size_t i = 0; i < count && n < cap; i++) n += (size_t)snprintf(buf + n, cap - n, ", %s", nm[i].name);
}

/* Flatten(batch_axis, batch_axis_out), GlobalAvgPool and GlobalSumPool(batch_axis,
 * channel_axis): stax's layout keywords only, where they say what ntkd computes. */
/* Aggregate(aggregate_axis=None, batch_axis=0, channel_axis=-1, to_dense=..., implementation='DENSE'): the
 * axes as a mask (resolved against the data by ntk_aggregate_axes); implementation either (a job's pattern
 * file is dense; Python's ntkd.stax makes a SPARSE pattern dense); to_dense is Python's only. */
static ntk_status aggregate_args(struct parser *p, struct ntk_layer *l, const struct arg *args, int nargs) {
  const char *given[NTK_ARCH_MAX_ARGS];
  size_t end = p->pos;
  for (int i = 0, npos = 0; i < nargs; i++) {
    const struct arg *a = &args[i];
    static const char *const pos[] = {"aggregate_axis", "batch_axis", "channel_axis", "to_dense", "implementation"};
    const char *key = a->key[0] ? a->key : npos < 5 ? pos[npos] : NULL;
    if (!a->key[0]) npos++;
    p->pos = a->pos;
    if (!key) return perr(p, "too many positional arguments for %s", l->name);
    ntk_status twice = once_param(p, given, i, key, a);
    if (twice) return twice;
    ntk_status st;
    if (!strcmp(key, "batch_axis") || !strcmp(key, "channel_axis")) {
      if (stax_keyword(p, a, l->name, key, &st), st) return st;
    } else if (!strcmp(key, "aggregate_axis")) {
      if (!a->is_list && !strcmp(a->val, "None")) continue;
      if ((st = arg_axes(p, a, "Aggregate: aggregate_axis", "None, an integer or a tuple of them, e.g. (1, 2)",
                         "(N, H, W, C) or (N, L, C)", &l->agg_axes)))
        return st;
    } else if (!strcmp(key, "implementation")) {
      static const char *const impls[] = {"DENSE", "SPARSE"};
      if (arg_enum(a, "AggregateImplementation", impls, 2) < 0)
        return perr(p, "Aggregate: implementation must be 'DENSE' or 'SPARSE', not %s",
                    a->is_list ? "a list" : a->val);
    } else if (!strcmp(key, "to_dense")) {
      if (a->is_list || strcmp(a->val, "None"))
        return perr(p, "Aggregate: to_dense is applied by Python (ntkd.stax); a job's [data] pattern file holds "
                       "the dense pattern itself, (N, V, V)%s", "");
    } else {
      return unknown_argument(p, key, l->name);
    }
  }
  p->pos = end;
  return NTK_OK;
}

static ntk_status layout_args(struct parser *p, const struct ntk_layer *l, const struct arg *args, int nargs) {
  const char *given[NTK_ARCH_MAX_ARGS];
  static const char *const flatten[] = {"batch_axis", "batch_axis_out"}, *const global[] = {"batch_axis",
                                                                                            "channel_axis"};
  const char *const *names = l->kind == NTK_LAYER_FLATTEN ? flatten : global;
  size_t end = p->pos;
  for (int i = 0, npos = 0; i < nargs; i++) {
    const struct arg *a = &args[i];
    const char *key = a->key[0] ? a->key : npos < 2 ? names[npos] : NULL;
    if (!a->key[0]) npos++;
    p->pos = a->pos;
    if (!key) return perr(p, "too many positional arguments for %s", l->name);
    ntk_status twice = once_param(p, given, i, key, a);
    if (twice) return twice;
    ntk_status st;
    if (strcmp(key, names[0]) && strcmp(key, names[1])) {
      return unknown_argument(p, key, l->name);
    }
    if (stax_keyword(p, a, l->name, key, &st), st) return st;
  }
  p->pos = end;
  return NTK_OK;
}

/* A layer before its name and arguments are read: the job's [model] stds,
 * strides of 1, VALID padding. */
static void layer_defaults(const struct parser *p, struct ntk_layer *l) {
  memset(l, 0, sizeof *l);
  l->w_std = p->w_std;
  l->b_std = p->b_std;
  l->bias = p->b_given; /* [model] b_std = 0 written: stax's b_std=0., a bias (used by Dense/Conv only) */
  l->stride = l->stride_w = 1;
  l->padding = NTK_PAD_VALID;
}

/* A layer; `stax`: written with a stax. prefix, its arguments in stax's order. */
static ntk_status parse_layer(struct parser *p, struct layer_vec *out, int stax) {
  size_t start = p->pos;
  char name[32];
  ntk_status st = read_word(p, name, sizeof name, is_ident);
  if (st) return st;
  if (!name[0]) return perr(p, "unexpected character '%.1s'", p->text + p->pos);
  struct ntk_layer l;
  layer_defaults(p, &l);
  int need_args = 0, max_pos = 0, numerical = 0;
  const struct ntk_map_name *nm = NULL;
  if (!strcmp(name, "Dense")) l.kind = NTK_LAYER_DENSE;
  else if (!strcmp(name, "Conv")) { l.kind = NTK_LAYER_CONV; need_args = 1; max_pos = 3; }
  else if (!strcmp(name, "ConvLocal")) { l.kind = NTK_LAYER_CONV; l.local = 1; need_args = 1; max_pos = 3; }
  else if (!strcmp(name, "ConvTranspose")) { l.kind = NTK_LAYER_CONV; l.transpose = 1; need_args = 1; max_pos = 3; }
  else if (!strcmp(name, "Identity")) l.kind = NTK_LAYER_IDENTITY;
  else if (!strcmp(name, "AvgPool")) { l.kind = NTK_LAYER_AVGPOOL; need_args = 1; max_pos = 2; l.stride = l.stride_w = 0; }
  else if (!strcmp(name, "Flatten")) l.kind = NTK_LAYER_FLATTEN;
  else if (!strcmp(name, "GlobalAvgPool")) l.kind = NTK_LAYER_GLOBALAVGPOOL;
  else if (!strcmp(name, "LayerNorm")) l.kind = NTK_LAYER_LAYERNORM;
  else if (!strcmp(name, "SumPool")) { l.kind = NTK_LAYER_AVGPOOL; l.sum = 1; need_args = 1; max_pos = 2; l.stride = l.stride_w = 0; }
  else if (!strcmp(name, "GlobalSumPool")) { l.kind = NTK_LAYER_GLOBALAVGPOOL; l.sum = 1; }
  else if (!strcmp(name, "Dropout")) l.kind = NTK_LAYER_DROPOUT;
  else if (!strcmp(name, "GlobalSelfAttention")) l.kind = NTK_LAYER_ATTENTION;
  else if (!strcmp(name, "ImageResize")) l.kind = NTK_LAYER_RESIZE;
  else if (!strcmp(name, "Index")) { l.kind = NTK_LAYER_RESIZE; l.index = 1; }
  else if (!strcmp(name, "Aggregate")) l.kind = NTK_LAYER_AGGREGATE;
  else if ((nm = ntk_map_name_find(name))) l.kind = NTK_LAYER_MAP;
  else if (!strcmp(name, "ElementwiseNumerical")) { l.kind = NTK_LAYER_MAP; numerical = 1; }
  else if (p->text[p->pos] == '.') { /* jax.example_libraries.stax.Dense, st.Dense */
    p->pos = start;
    return perr(p, "unknown layer '%s.': before a layer's name ntkd reads the prefixes stax., nt.stax. and "
                   "neural_tangents.stax.", name);
  } else {
    p->pos = start;
    char known[1024];
    known_names(known, sizeof known);
    char what[1100];
    snprintf(what, sizeof what, "'%s' (%s)", name, known);
    return perr(p, "unknown layer %s", what);
  }
  snprintf(l.name, sizeof l.name, "%.23s", name);
  if (l.index) {
    if ((st = index_args(p, &l, start))) return st;
    return push_at(p, out, &l, start);
  }
  struct arg args[NTK_ARCH_MAX_ARGS];
  int nargs = 0;
  if (numerical && p->text[p->pos] == '(') { /* a function by name only: say so before Python's syntax */
    size_t q = p->pos + 1;
    while (isspace((unsigned char)p->text[q])) q++;
    if (!strncmp(p->text + q, "lambda", 6) && !is_ident((unsigned char)p->text[q + 6])) {
      p->pos = q;
      return perr(p, "ElementwiseNumerical: fn must be a function ntkd knows by name (jnp.tanh, jax.nn.softplus, "
                     "...), not a lambda%s", "");
    }
  }
  if (p->text[p->pos] == '(' && (st = parse_args(p, args, &nargs))) return st;
  if (nm) {
    if ((st = map_args(p, &l, nm, args, nargs, start))) return st;
    return push_at(p, out, &l, start);
  }
  if (numerical) {
    if ((st = numerical_args(p, &l, args, nargs, start))) return st;
    return push_at(p, out, &l, start);
  }
  if (l.kind == NTK_LAYER_LAYERNORM) {
    if ((st = layernorm_args(p, &l, args, nargs))) return st;
    return push_at(p, out, &l, start);
  }
  if (l.kind == NTK_LAYER_FLATTEN || l.kind == NTK_LAYER_GLOBALAVGPOOL) {
    if ((st = layout_args(p, &l, args, nargs))) return st;
    return push_at(p, out, &l, start);
  }
  if (l.kind == NTK_LAYER_DROPOUT) {
    if ((st = dropout_args(p, &l, args, nargs, start))) return st;
    return push_at(p, out, &l, start);
  }
  if (l.kind == NTK_LAYER_ATTENTION) {
    if ((st = attention_args(p, &l, args, nargs, start))) return st;
    return push_at(p, out, &l, start);
  }
  if (l.kind == NTK_LAYER_RESIZE) {
    if ((st = resize_args(p, &l, args, nargs, start))) return st;
    return push_at(p, out, &l, start);
  }
  if (l.kind == NTK_LAYER_AGGREGATE) {
    if ((st = aggregate_args(p, &l, args, nargs))) return st;
    return push_at(p, out, &l, start);
  }
  if (nargs) {
    if (!max_pos && l.kind != NTK_LAYER_DENSE) {
      p->pos = start;
      return perr(p, "%s takes no arguments", name);
    }
    if ((st = layer_args(p, &l, args, nargs, stax))) return st;
    int have_required = l.kind == NTK_LAYER_CONV ? l.filter > 0 : l.kind == NTK_LAYER_AVGPOOL ? l.window > 0 : 1;
    if (!have_required) {
      p->pos = start;
      return perr(p, "%s needs its size argument", name);
    }
  } else if (need_args) {
    p->pos = start;
    return perr(p, "%s needs arguments, e.g. Conv(3), AvgPool(2)", name);
  }
  if (l.kind == NTK_LAYER_AVGPOOL && l.stride == 0) {
    l.stride = l.window;
    l.stride_w = l.window_w;
  }
  if (l.one_d) { /* (n,) sizes: the width stays 1; strides=2 means (2,) */
    if (l.filter_w > 1 || l.window_w > 1 || (l.stride_w > 1 && l.stride_w != l.stride)) {
      p->pos = start;
      return perr(p, "%s mixes 1-D sizes (n,) with 2-D ones", name);
    }
    l.stride_w = 1;
    if (l.kind == NTK_LAYER_CONV) l.filter_w = 1;
    else l.window_w = 1;
  }
  return push_at(p, out, &l, start);
}

static ntk_status parse_seq(struct parser *p, struct layer_vec *out, int depth, int ctx);
enum { CTX_TOP, CTX_GROUP, CTX_SERIAL, CTX_BRANCH };

static ntk_status parse_group(struct parser *p, struct layer_vec *out, int depth) {
  size_t start = p->pos;
  if (depth >= NTK_ARCH_MAX_DEPTH) return perr(p, "brackets nested too deeply (the limit: %s levels)", "16");
  p->pos++; /* '[' */
  struct layer_vec inner = {0, 0, NULL};
  ntk_status st = parse_seq(p, &inner, depth + 1, CTX_GROUP);
  if (st) goto done;
  if (p->text[p->pos] != ']') {
    p->pos = start;
    st = perr(p, "unclosed '['%s", "");
    goto done;
  }
  p->pos++;
  skip_ws(p);
  int count = 1, starred = p->text[p->pos] == '*';
  size_t npos = p->pos;
  if (starred) {
    p->pos++;
    skip_ws(p);
    npos = p->pos;
    size_t len = 0; /* what was written, of any length: 12, -1, 1.5, 1e9, x */
    while (p->text[npos + len] && is_value((unsigned char)p->text[npos + len])) len++;
    if ((st = int_value(p, npos, "repeat count", p->text + npos, len, 0, NTK_ARCH_MAX_LAYERS,
                        " (an arch string has at most 100000 layers, repeats expanded)", &count)))
      goto done;
    p->pos = npos + len;
  }
  if (inner.n == 0) {
    p->pos = start;
    st = perr(p, "empty group%s", "");
    goto done;
  }
  if (starred && count && inner.n > (NTK_ARCH_MAX_LAYERS - out->n) / (size_t)count) { /* before expanding */
    p->pos = npos;
    char what[200];
    snprintf(what, sizeof what, "repeat count %d makes a group of %zu layer%s %zu layers, at least %zu in all: above "
             "the limit of 100000 layers of an arch string (repeats expanded)", count, inner.n,
             inner.n == 1 ? "" : "s", inner.n * (size_t)count, out->n + inner.n * (size_t)count);
    st = perr(p, "%s", what);
    goto done;
  }
  for (int r = 0; r < count && !st; r++)
    for (size_t i = 0; i < inner.n && !st; i++) st = vec_push(p, out, &inner.v[i]);
done:
  free(inner.v);
  return st;
}

/* The word at the parser's position, without consuming it. */
static int peek_word(const struct parser *p, const char *w) {
  size_t n = strlen(w);
  return !strncmp(p->text + p->pos, w, n) && !is_ident((unsigned char)p->text[p->pos + n]);
}

static ntk_status push_marker(struct parser *p, struct layer_vec *out, ntk_layer_kind kind, int branches, int sum,
                              const char *name) {
  struct ntk_layer l;
  memset(&l, 0, sizeof l);
  l.kind = kind;
  l.branches = branches;
  l.sum = sum;
  snprintf(l.name, sizeof l.name, "%s", name);
  return vec_push(p, out, &l);
}

/* In a serial(...) or a list of layers, a comma may separate layers. */
static void skip_sep(struct parser *p, int commas) {
  skip_ws(p);
  if (commas && p->text[p->pos] == ',') {
    p->pos++;
    skip_ws(p);
  }
}

/* stax's residual pattern FanOut(n) parallel(b1, ..., bn) FanInSum (or
 * FanInConcat), flattened into FORK(n) b1 NEXT b2 ... NEXT bn JOIN: the
 * engines keep the block's input for each branch and sum (or average)
 * the branches' kernels at JOIN. A branch is any sequence of layers,
 * serial(...) or a nested block. `commas`: inside serial(...). */
/* A join word that takes no arguments (FanInSum, FanInProd), at p->pos:
 * the word and an empty "()" after it consumed. */
static ntk_status join_without_args(struct parser *p, const char *name) {
  size_t at = p->pos;
  p->pos += strlen(name);
  if (p->text[p->pos] != '(') return NTK_OK;
  struct arg args[NTK_ARCH_MAX_ARGS];
  int nargs;
  ntk_status st = parse_args(p, args, &nargs);
  if (st || !nargs) return st;
  p->pos = at;
  return perr(p, "%s takes no arguments", name);
}

static ntk_status parse_join(struct parser *p, struct layer_vec *out, int n, size_t fork);

static ntk_status parse_fanout(struct parser *p, struct layer_vec *out, int depth, int commas) {
  size_t start = p->pos;
  if (depth >= NTK_ARCH_MAX_DEPTH) return perr(p, "residual blocks nested too deeply (the limit: %s levels)", "16");
  char name[32];
  ntk_status st = read_word(p, name, sizeof name, is_ident);
  if (st) return st;
  int n = 0;
  if (p->text[p->pos] == '(') {
    struct arg args[NTK_ARCH_MAX_ARGS];
    int nargs;
    if ((st = parse_args(p, args, &nargs))) return st;
    if (nargs != 1 || args[0].is_list || (args[0].key[0] && strcmp(args[0].key, "num"))) {
      p->pos = start;
      return perr(p, "FanOut takes the number of branches, 1 to 64: FanOut(2)%s", "");
    }
    if ((st = int_value(p, args[0].pos, "FanOut: the number of branches", args[0].val, strlen(args[0].val), 1,
                        NTK_ARCH_MAX_BRANCHES, " (ntkd's limit)", &n)))
      return st;
  } else {
    p->pos = start;
    return perr(p, "FanOut needs its number of branches: FanOut(2)%s", "");
  }
  skip_sep(p, commas);
  p->pos += stax_prefix(p->text + p->pos);
  size_t fork = out->n;
  if (!peek_word(p, "parallel")) {
    /* FanOut(n) straight into a FanIn: n copies of the input, as stax takes it (its FanIn gets
     * the n kernels unchanged): the block of n Identity branches */
    if (!peek_word(p, "FanInSum") && !peek_word(p, "FanInProd") && !peek_word(p, "FanInConcat"))
      return perr(p, "FanOut(n) must be followed by parallel(...) with n branches, or by a FanIn%s", "");
    if ((st = push_marker(p, out, NTK_LAYER_FORK, n, 0, "FanOut"))) return st;
    struct ntk_layer id;
    layer_defaults(p, &id); /* as parse_layer reads "Identity" */
    id.kind = NTK_LAYER_IDENTITY;
    snprintf(id.name, sizeof id.name, "Identity");
    for (int b = 0; b < n; b++)
      if ((b && (st = push_marker(p, out, NTK_LAYER_NEXT, 0, 0, "parallel"))) || (st = vec_push(p, out, &id)))
        return st;
    return parse_join(p, out, n, fork);
  }
  size_t ppos = p->pos;
  p->pos += strlen("parallel");
  skip_ws(p);
  if (p->text[p->pos] != '(') return perr(p, "expected '(' after parallel%s", "");
  p->pos++;
  if ((st = push_marker(p, out, NTK_LAYER_FORK, n, 0, "FanOut"))) return st;
  int got = 0;
  for (;;) {
    size_t bstart = p->pos, before = out->n;
    if ((st = parse_seq(p, out, depth + 1, CTX_BRANCH))) return st;
    if (out->n == before) {
      p->pos = bstart;
      return perr(p, "an empty branch in parallel(...): write Identity for a shortcut%s", "");
    }
    got++;
    if (p->text[p->pos] == ',') {
      p->pos++;
      skip_ws(p);
      if (p->text[p->pos] == ')') { /* a trailing comma, as Python allows */
        p->pos++;
        break;
      }
      if ((st = push_marker(p, out, NTK_LAYER_NEXT, 0, 0, "parallel"))) return st;
      continue;
    }
    if (p->text[p->pos] == ')') {
      p->pos++;
      break;
    }
    return perr(p, "expected ',' or ')' in parallel(...)%s", "");
  }
  if (got != n) {
    p->pos = ppos;
    char what[96];
    snprintf(what, sizeof what, "parallel(...) has %d branches after FanOut(%d)", got, n);
    return perr(p, "%s", what);
  }
  skip_sep(p, commas);
  p->pos += stax_prefix(p->text + p->pos);
  return parse_join(p, out, n, fork);
}

/* The block's join at p->pos (FanInSum, FanInConcat(axis) or FanInProd), for the FORK(n) at
 * out->v[fork] and its branches. */
static ntk_status parse_join(struct parser *p, struct layer_vec *out, int n, size_t fork) {
  ntk_status st;
  if (peek_word(p, "FanInSum")) {
    if ((st = join_without_args(p, "FanInSum"))) return st;
    return push_marker(p, out, NTK_LAYER_JOIN, n, 1, "FanInSum");
  }
  if (peek_word(p, "FanInConcat")) {
    size_t at = p->pos;
    p->pos += strlen("FanInConcat");
    if (p->text[p->pos] == '(') {
      struct arg args[NTK_ARCH_MAX_ARGS];
      int nargs;
      if ((st = parse_args(p, args, &nargs))) return st;
      double ax = -1;
      if (nargs > 1 || (nargs == 1 && (args[0].is_list || (args[0].key[0] && strcmp(args[0].key, "axis")) ||
                                       !ntk_parse_double(args[0].val, &ax) || ax != floor(ax) || ax < -4 ||
                                       ax > 3))) {
        p->pos = at;
        return perr(p, "FanInConcat takes one argument, axis: an integer from -4 to 3 (-1, the channels, by "
                       "default)%s", "");
      }
      if (ax == 0) {
        p->pos = at;
        return perr(p, "FanInConcat along the batch axis 0: ntkd computes each pair of samples on its own "
                       "(neural-tangents warns that it gives inconsistent covariances)%s", "");
      }
      if ((st = push_marker(p, out, NTK_LAYER_JOIN, n, 0, "FanInConcat"))) return st;
      /* the block's own NEXTs too: each places its branch (cnn.c) */
      for (size_t k = fork, d = 0; k < out->n; k++) {
        ntk_layer_kind kind = out->v[k].kind;
        if (kind == NTK_LAYER_FORK) d++;
        if (d == 1 && (kind == NTK_LAYER_NEXT || kind == NTK_LAYER_JOIN)) out->v[k].axis = ax == -1 ? 0 : (int)ax;
        if (kind == NTK_LAYER_JOIN) d--;
      }
      return NTK_OK;
    }
    return push_marker(p, out, NTK_LAYER_JOIN, n, 0, "FanInConcat");
  }
  if (peek_word(p, "FanInProd")) {
    if ((st = join_without_args(p, "FanInProd"))) return st;
    if ((st = push_marker(p, out, NTK_LAYER_JOIN, n, 0, "FanInProd"))) return st;
    /* the block's own markers all say so: a NEXT multiplies its branch in */
    for (size_t k = fork, d = 0; k < out->n; k++) {
      ntk_layer_kind kind = out->v[k].kind;
      if (kind == NTK_LAYER_FORK) d++;
      if (d == 1 && ntk_layer_traits(kind)->branch) out->v[k].prod = 1;
      if (kind == NTK_LAYER_JOIN) d--;
    }
    return NTK_OK;
  }
  /* (neural-tangents returns a list of kernels for a block left open: a
   * network of several outputs, which ntkd does not compute) */
  skip_ws(p);
  return perr(p, "FanOut(n) parallel(...) must end in FanInSum, FanInProd or FanInConcat%s",
              p->text[p->pos] ? "" : " (a network of several outputs, one kernel per branch, is not computed: "
                                     "compute each branch's network alone)");
}

static ntk_status parse_seq(struct parser *p, struct layer_vec *out, int depth, int ctx) {
  int commas = ctx == CTX_SERIAL;
  for (;;) {
    skip_ws(p);
    char c = p->text[p->pos];
    if (!c) {
      if (ctx == CTX_TOP) return NTK_OK;
      return perr(p, ctx == CTX_GROUP ? "missing ']'%s" : "missing ')'%s", "");
    }
    if (c == ']') return ctx == CTX_GROUP ? NTK_OK : perr(p, "unmatched ']'%s", "");
    if (c == ')') return ctx == CTX_SERIAL || ctx == CTX_BRANCH ? NTK_OK : perr(p, "unmatched ')'%s", "");
    if (c == ',') {
      if (ctx == CTX_BRANCH) return NTK_OK;
      if (ctx == CTX_SERIAL) {
        p->pos++;
        continue;
      }
      return perr(p, "unexpected character ','%s (commas separate layers inside serial(...) only)", "");
    }
    ntk_status st;
    size_t prefix = stax_prefix(p->text + p->pos); /* stax.serial, stax.Dense: stax's reading */
    p->pos += prefix;
    if (c == '[') {
      st = parse_group(p, out, depth);
    } else if (peek_word(p, "serial")) {
      p->pos += strlen("serial");
      skip_ws(p);
      if (p->text[p->pos] != '(') return perr(p, "expected '(' after serial%s", "");
      p->pos++;
      if (depth >= NTK_ARCH_MAX_DEPTH) return perr(p, "brackets nested too deeply (the limit: %s levels)", "16");
      st = parse_seq(p, out, depth + 1, CTX_SERIAL);
      if (!st) p->pos++; /* ')' */
    } else if (peek_word(p, "FanOut")) {
      st = parse_fanout(p, out, depth, commas);
    } else if (peek_word(p, "parallel") || peek_word(p, "FanInSum") || peek_word(p, "FanInConcat") ||
               peek_word(p, "FanInProd")) {
      st = perr(p, "parallel(...), FanInSum, FanInProd and FanInConcat come in stax's residual pattern: FanOut(n) "
                   "parallel(b1, ..., bn) FanInSum%s", "");
    } else {
      st = parse_layer(p, out, prefix > 0);
    }
    if (st) return st;
  }
}

/* Whether FanInConcat layer l, after a readout or not (`flat`), joins
 * along a spatial axis on data of `rank` axes (ntk_concat_axis's count; 0:
 * not known yet). 1: spatial, 0: the channels (or an axis the data do not
 * have, which ntk_concat_axis refuses), -1: not known without the rank
 * (axis 1 is the rows of images and sequences, the channels of vectors;
 * axis 2 the columns of images, the channels of sequences). */
static int concat_spatial(const struct ntk_layer *l, int rank, int flat) {
  if (!l->axis || l->axis == 3) return 0; /* -1, and 3: the channels of images (other data have no axis 3) */
  int r = flat ? 2 : rank;
  if (!r) return l->axis < 0 ? 1 : -1; /* -2, -3, -4: spatial wherever they are not the batch axis */
  int k = l->axis < 0 ? l->axis + r : l->axis;
  return k > 0 && k < r - 1;
}

/* A 2-D conv or pooling layer (layer i) on (N, L, C) data: refused. The
 * sequences are held as L x 1 images, so a filter, window or stride wider
 * than 1 (Conv(8, (3, 3)), or a bare Conv(3, 1, SAME), which reads as 3 x 3)
 * would run as a 2-D layer over L x 1 images, its kernel not the 1-D
 * layer's (a 3 x 3 SAME filter: NNGP 0.25 where (3,) gives 0.75), and stax
 * refuses a filter whose rank is not the data's. (f, 1) and 1 x 1 sizes are
 * the 1-D layer's on L x 1 images and run. The error says what to write. */
static ntk_status refuse_2d_on_1d(const struct ntk_layer *l, size_t i) {
  static const char *const pad[] = {"VALID", "SAME", "CIRCULAR"};
  int conv = l->kind == NTK_LAYER_CONV;
  int fh = conv ? l->filter : l->window, fw = conv ? l->filter_w : l->window_w;
  char fix[160], strides[40] = "";
  if (conv) {
    if (l->stride != 1) snprintf(strides, sizeof strides, ", strides=(%d,)", l->stride);
    if (l->width) snprintf(fix, sizeof fix, "%s(%d, (%d,)%s, padding='%s')", l->name, l->width, fh, strides,
                           pad[l->padding]);
    else snprintf(fix, sizeof fix, "%s(filter_shape=(%d,)%s, padding='%s')", l->name, fh, strides, pad[l->padding]);
  } else { /* strides written: ntkd's short form and stax's default them differently */
    int edges = l->normalize_edges && l->padding == NTK_PAD_SAME;
    snprintf(fix, sizeof fix, "%s((%d,), strides=(%d,), padding='%s'%s)", l->sum ? "SumPool" : "AvgPool", fh,
             l->stride, pad[l->padding], edges ? ", normalize_edges=True" : "");
  }
  return ntk_error(NTK_ECONFIG,
                   "arch, layer %zu: %s is 2-D (%s (%d, %d), strides (%d, %d)) on (N, L, C) data ([data] layout = "
                   "NLC, or a network of 1-D layers), held as L x 1 images: ntkd would compute a 2-D layer over "
                   "them, not stax's 1-D one (stax refuses 2-D layers on sequences); write the 1-D form, %s, its "
                   "other arguments unchanged",
                   i + 1, l->name, conv ? "filter" : "window", fh, fw, l->stride, l->stride_w, fix);
}

/* neural-tangents' rules: a nonlinearity needs a Gaussian input, which only
 * a Dense or Conv layer produces (and Identity and pooling keep); nothing
 * spatial follows Flatten/GAP. `rank`: the data's axes as ntk_concat_axis
 * counts them, 0 while the network is parsed (then what depends on a
 * FanInConcat's axis 1 or 2 is left to ntk_arch_check_rank). */
static ntk_status validate(const struct ntk_arch *a, int rank) {
  if (a->n == 0) return ntk_error(NTK_ECONFIG, "arch: no layers");
  int gaussian = 0, flat = 0, depth = 0, fed = 0; /* fed: a Dense or Conv on the way here */
  /* per open block: its input's state, whether every branch so far ends Gaussian, any flat, any fed */
  int in_gauss[NTK_ARCH_MAX_DEPTH + 1], in_flat[NTK_ARCH_MAX_DEPTH + 1], in_fed[NTK_ARCH_MAX_DEPTH + 1];
  int all_gauss[NTK_ARCH_MAX_DEPTH + 1], any_flat[NTK_ARCH_MAX_DEPTH + 1], any_fed[NTK_ARCH_MAX_DEPTH + 1];
  for (size_t i = 0; i < a->n; i++) {
    const struct ntk_layer *l = &a->layers[i];
    const struct ntk_layer_traits *t = ntk_layer_traits(l->kind);
    if (t->branch) {
      if (l->kind == NTK_LAYER_FORK) {
        in_gauss[depth] = gaussian;
        in_flat[depth] = flat;
        in_fed[depth] = fed;
        all_gauss[depth] = 1;
        any_flat[depth] = 0;
        any_fed[depth] = 0;
        depth++;
        continue;
      }
      /* NEXT or JOIN: a branch ends */
      all_gauss[depth - 1] &= gaussian;
      any_flat[depth - 1] |= flat != in_flat[depth - 1];
      any_fed[depth - 1] |= fed;
      if (l->kind == NTK_LAYER_NEXT) {
        gaussian = in_gauss[depth - 1];
        flat = in_flat[depth - 1];
        fed = in_fed[depth - 1];
        continue;
      }
      depth--;
      fed = any_fed[depth]; /* the sum of a fed branch's NTK and 0 is not 0 */
      if (any_flat[depth])
        return ntk_error(NTK_ECONFIG, "arch, layer %zu (%s): a branch of a residual block contains a readout "
                         "(Flatten, GlobalAvgPool or GlobalSumPool), which ntkd does not compute inside a block: "
                         "put it after the block (the same kernel where every branch ends with the same readout "
                         "and the block with FanInSum)", i + 1, l->name);
      /* a sum of one branch is that branch, Gaussian or not (neural-tangents
       * takes it: FanOut(1) blocks) */
      if (l->sum && l->branches > 1 && !all_gauss[depth])
        return ntk_error(NTK_ECONFIG,
                         "arch, layer %zu (FanInSum): every branch must end Gaussian (with Dense, Conv, or "
                         "Identity or pooling of a Gaussian input), as neural-tangents requires",
                         i + 1);
      /* FanInConcat's output is not Gaussian in neural-tangents, nor a
       * product's of two or more branches (FanInProd takes any branches) */
      gaussian = ((l->sum || (l->prod && l->branches < 2)) && all_gauss[depth]);
      /* along a spatial axis neural-tangents needs Gaussian branches, and
       * the output is one; not known yet: Gaussian if the branches are */
      int spatial = l->sum || l->prod ? 0 : concat_spatial(l, rank, flat);
      /* an axis the data do not have, or their batch axis: said here, not
       * as the next nonlinearity's non-Gaussian input (rank known: ntk_arch_check_rank) */
      if (!l->sum && !l->prod && rank && ntk_concat_axis(l, flat ? 2 : rank, i) < 0) return NTK_ECONFIG;
      if (spatial < 0) gaussian = all_gauss[depth];
      if (spatial > 0) {
        if (!all_gauss[depth])
          return ntk_error(NTK_ECONFIG,
                           "arch, layer %zu (FanInConcat(axis=%d)): along a spatial axis every branch must end "
                           "Gaussian (with Dense, Conv, or Identity or pooling of a Gaussian input), as "
                           "neural-tangents requires; along the channels write FanInConcat or axis=-1",
                           i + 1, l->axis);
        gaussian = 1;
      }
      continue;
    }
    if (t->needs_gaussian && !gaussian)
      return ntk_error(NTK_ECONFIG,
                       "arch, layer %zu (%s): %s must follow Dense or Conv "
                       "(its input must be Gaussian)%s",
                       i + 1, l->name, t->nonlinear ? "a nonlinearity" : l->name,
                       i == 0 ? "; it cannot be the first layer" : "");
    /* neural-tangents' Dropout (train) scales the NTK, which before any
     * Dense or Conv is its input's scalar 0: its kernel_fn fails there
     * (it means to refuse Dropout on the input layer) */
    if (l->kind == NTK_LAYER_DROPOUT && !fed)
      return ntk_error(NTK_ECONFIG,
                       "arch, layer %zu (Dropout): Dropout must come after a Dense or Conv, as in "
                       "neural-tangents (which cannot apply it to the input layer)", i + 1);
    fed |= t->affine || l->kind == NTK_LAYER_ATTENTION; /* weights of its own: an NTK */
    if (rank == 3 && (l->kind == NTK_LAYER_CONV || l->kind == NTK_LAYER_AVGPOOL) && !l->one_d &&
        ((l->kind == NTK_LAYER_CONV ? l->filter_w : l->window_w) > 1 || l->stride_w > 1))
      return refuse_2d_on_1d(l, i);
    if (t->couples && flat)
      return ntk_error(NTK_ECONFIG, "arch, layer %zu (%s): spatial layer after Flatten or GlobalAvgPool", i + 1,
                       l->name);
    if (t->readout) flat = 1;
    gaussian = t->gaussian_out || (t->keeps_gaussian && gaussian);
  }
  return NTK_OK;
}

ntk_status ntk_arch_check_rank(const struct ntk_arch *a, int rank) { return validate(a, rank); }

ntk_status ntk_arch_data_rank(const struct ntk_arch *a, int one_d, int w, int *rank) {
  *rank = one_d ? 3 : 4;
  for (size_t i = 0; i < a->n; i++) {
    const struct ntk_layer *l = &a->layers[i];
    if (!l->one_d) continue;
    if (!one_d && w > 1) {
      int conv = l->kind == NTK_LAYER_CONV;
      return ntk_error(NTK_ECONFIG,
                       "arch, layer %zu: %s is 1-D (%s (%d,)) on (N, H, W, C) images %d wide: stax refuses a "
                       "1-D layer on images (ntkd takes it on (N, L, C) sequences, and on images of width 1 as "
                       "sequences); give it a 2-D %s, e.g. (%d, %d), or pass (N, L, C) sequences",
                       i + 1, l->name, conv ? "filter" : "window", conv ? l->filter : l->window, w,
                       conv ? "filter" : "window", conv ? l->filter : l->window, conv ? l->filter : l->window);
    }
    *rank = 3;
  }
  return validate(a, *rank);
}

/* Standard parameterisation: the widths the NTK needs. The last Dense or
 * Conv's own width never enters the kernel (only input widths do). */
static ntk_status validate_standard(const struct ntk_arch *a) {
  size_t last = a->n;
  for (size_t i = 0; i < a->n; i++)
    if (ntk_layer_traits(a->layers[i].kind)->affine) last = i;
  for (size_t i = 0; i < a->n; i++) {
    const struct ntk_layer *l = &a->layers[i];
    if (!ntk_layer_traits(l->kind)->affine || i == last || l->width > 0) continue;
    return ntk_error(NTK_ECONFIG,
                     "arch, layer %zu (%s): under parameterization = standard every Dense and Conv but the last "
                     "gives its width, as in stax: %s",
                     i + 1, l->name, l->kind == NTK_LAYER_DENSE ? "Dense(512, ...)" : "Conv(64, (3, 3), ...)");
  }
  return NTK_OK;
}

void ntk_widths_init(struct ntk_widths *w, size_t chan) {
  memset(w, 0, sizeof *w);
  w->chan = chan;
}

int ntk_widths_step(struct ntk_widths *w, const struct ntk_layer *l, size_t index, size_t hw) {
  int d = w->depth - 1;
  switch (l->kind) {
  case NTK_LAYER_DENSE:
  case NTK_LAYER_CONV:
  case NTK_LAYER_ATTENTION: w->chan = l->width > 0 ? (size_t)l->width : 0; break;
  case NTK_LAYER_FLATTEN: w->chan *= hw ? hw : 1; break;
  case NTK_LAYER_FORK:
    if (w->depth < NTK_WIDTHS_MAXDEPTH) {
      w->in[w->depth] = w->chan;
      w->nend[w->depth] = 0;
    }
    w->depth++;
    break;
  case NTK_LAYER_NEXT:
  case NTK_LAYER_JOIN: {
    if (d < 0 || d >= NTK_WIDTHS_MAXDEPTH) break; /* (the parser and the planners bound the nesting) */
    int b = w->nend[d];
    if (b < NTK_WIDTHS_MAXBRANCH) {
      w->end_w[d][b] = w->chan;
      w->end_at[d][b] = index;
      w->nend[d]++;
    }
    if (l->kind == NTK_LAYER_NEXT) {
      w->chan = w->in[d];
      break;
    }
    w->depth--;
    int nb = w->nend[d], unequal = 0, unknown = 0;
    size_t known = 0, total = 0;
    for (int k = 0; k < nb; k++) {
      size_t e = w->end_w[d][k];
      if (!e) unknown = 1;
      else if (!known) known = e;
      else if (e != known) unequal = 1;
      total += e;
    }
    /* the branches' shapes must be equal; the width stays (a FanInConcat
     * along a spatial axis: stax needs the other axes equal) */
    int cat = l->sum || l->prod ? 0 : ntk_concat_axis(l, w->rank ? w->rank : 2, index);
    if (cat < 0) return -1;
    int same = l->sum || l->prod || cat > 0;
    if (unequal && (same || unknown)) {
      ntk_error(NTK_ECONFIG, "arch, layer %zu (%s): its branches end at different widths%s", index + 1, l->name,
                cat > 0 ? ": neural-tangents' FanInConcat along a spatial axis needs the other axes equal"
                : same ? ": neural-tangents' FanInSum and FanInProd need equal shapes"
                       : ", and a branch without a width: FanInConcat weights each branch by its width, as stax "
                         "does, so give every branch's last Dense or Conv its width (Dense(64), Conv(64, (3, 3)))");
      return -1;
    }
    int weighted = !same && unequal;
    for (int k = 0; k < nb && w->weight; k++) w->weight[w->end_at[d][k]] = weighted ? (double)w->end_w[d][k] : 1.0;
    if (w->div) w->div[index] = same || nb < 2 ? 0.0 : weighted ? (double)total : (double)nb;
    w->chan = same ? known : unknown ? 0 : total;
    break;
  }
  case NTK_LAYER_MAP:
  case NTK_LAYER_IDENTITY:
  case NTK_LAYER_AVGPOOL:
  case NTK_LAYER_GLOBALAVGPOOL:
  case NTK_LAYER_LAYERNORM:
  case NTK_LAYER_DROPOUT:
  case NTK_LAYER_RESIZE:
  case NTK_LAYER_AGGREGATE:
  case NTK_LAYER_KINDS: break;
  }
  return 0;
}

ntk_status ntk_arch_parse(const char *text, double w_std, double b_std, struct ntk_arch *out) {
  return ntk_arch_parse_param(text, w_std, b_std, 0, out);
}

ntk_status ntk_arch_parse_param(const char *text, double w_std, double b_std, int standard, struct ntk_arch *out) {
  out->n = 0;
  out->layers = NULL;
  int b_given = !!(standard & NTK_ARCH_B_STD_GIVEN);
  standard &= ~NTK_ARCH_B_STD_GIVEN;
  out->standard = standard;
  if (!text) return ntk_error(NTK_ECONFIG, "arch: missing");
  struct parser p = {text, 0, w_std, b_std, standard, b_given};
  struct layer_vec v = {0, 0, NULL};
  ntk_status st = parse_seq(&p, &v, 0, CTX_TOP);
  if (st) {
    free(v.v);
    return st;
  }
  out->n = v.n;
  out->layers = v.v;
  for (size_t i = 0; i < out->n; i++) /* a bias: written as a number, or a b_std > 0 */
    out->layers[i].bias = out->layers[i].bias || out->layers[i].b_std > 0;
  if ((st = validate(out, 0)) || (standard && (st = validate_standard(out)))) ntk_arch_free(out);
  return st;
}

void ntk_arch_free(struct ntk_arch *arch) {
  if (!arch) return;
  free(arch->layers);
  arch->layers = NULL;
  arch->n = 0;
}

int ntk_arch_is_fc(const struct ntk_arch *arch) {
  for (size_t i = 0; i < arch->n; i++)
    if (ntk_layer_traits(arch->layers[i].kind)->spatial) return 0;
  return 1;
}

size_t ntk_arch_nonlinear_layers(const struct ntk_arch *arch) {
  size_t k = 0;
  for (size_t i = 0; i < arch->n; i++) k += ntk_layer_traits(arch->layers[i].kind)->nonlinear;
  return k;
}

/* How much of float32's error one nonlinear layer adds, in layers of the
 * ReLU family: measured float32 against float64 on the same data, 8
 * standard-normal samples, 4 scales (docs/MATH.md "Collinear inputs"):
 * Gelu 8.8e-6 at 32 layers and 4.2e-5 at 64, Abs 1.3e-5 and ABRelu(-0.5,
 * 1) 1.1e-5 at 64, where Relu, Erf, LeakyRelu(0.2), Sin, Cos, Gaussian,
 * Rbf, Gabor, ExpNormalized, tanh stay below 6e-6 (a hunt). */
static size_t float32_weight(const struct ntk_layer *l) {
  /* a FanInProd multiplies its branches' kernels: each doubles the relative error (1.2e-5 at 8 blocks, 4.8e-5
   * at 10, a hunt): 4 of them at most in float32 maps */
  if (l->kind == NTK_LAYER_JOIN && l->prod) return 16;
  if (!ntk_layer_traits(l->kind)->nonlinear) return 0;
  if (l->kind == NTK_LAYER_MAP && l->map.kind == NTK_MAP_GELU) return 4;
  /* slopes of opposite signs (Abs; ABRelu(1, -1) has Abs's kernel: it counted 1, a hunt) */
  if (l->kind == NTK_LAYER_MAP && l->map.kind == NTK_MAP_ABRELU && l->map.a * l->map.b < 0) return 2;
  return 1;
}

size_t ntk_arch_float32_depth(const struct ntk_arch *arch) {
  size_t k = 0;
  for (size_t i = 0; i < arch->n; i++) k += float32_weight(&arch->layers[i]);
  return k;
}

/* The first scale of ntk_arch_check_scales below `low` (the square root of
 * the precision's smallest normal number), as its message; 0 if none. */
static int small_scale(const struct ntk_arch *arch, int elem, char *msg, size_t cap) {
  const double low = elem == 4 ? 0x1p-63 : 0x1p-511;
  for (size_t i = 0; i < arch->n; i++) {
    const struct ntk_layer *l = &arch->layers[i];
    const char *names[2] = {"W_std", NULL};
    double v[2] = {l->w_std, 0.0};
    if (l->kind == NTK_LAYER_MAP && l->map.kind == NTK_MAP_ABRELU) {
      /* (a - b)^2 and a^2 + b^2: one tiny slope beside a normal one loses
       * nothing (LeakyRelu(1e-30)); both tiny do */
      names[0] = "max(|a|, |b|)";
      v[0] = fmax(fabs(l->map.a), fabs(l->map.b));
    } else if (l->kind == NTK_LAYER_MAP && (l->map.kind == NTK_MAP_ERF || l->map.kind == NTK_MAP_SIN)) {
      names[0] = "a", names[1] = "b";
      v[0] = l->map.a, v[1] = l->map.b;
    } else if (l->kind != NTK_LAYER_DENSE && l->kind != NTK_LAYER_CONV) {
      continue;
    }
    for (int k = 0; k < 2 && names[k]; k++)
      if (v[k] != 0.0 && fabs(v[k]) < low) {
        snprintf(msg, cap, "arch, layer %zu (%s): %s = %.3g: its square is below %s's normal range (%.3g), where it "
                 "keeps too few bits for the kernel", i + 1, l->name, names[k], v[k],
                 elem == 4 ? "float32" : "float64", elem == 4 ? (double)FLT_MIN : DBL_MIN);
        return 1;
      }
  }
  return 0;
}

ntk_status ntk_arch_check_scales(const struct ntk_arch *arch, int elem) {
  char msg[400];
  if (!small_scale(arch, elem, msg, sizeof msg)) return NTK_OK;
  return ntk_error(NTK_ECONFIG, "%s (docs/MATH.md, \"Range\"): scale it up and the inputs down", msg);
}

int ntk_arch_float32_widened(const struct ntk_arch *arch, char *why, size_t cap) {
  char msg[400];
  size_t layers = ntk_arch_nonlinear_layers(arch), depth = ntk_arch_float32_depth(arch);
  int deep = depth > NTK_FLOAT32_MAX_NONLINEAR;
  if (deep && depth == layers)
    snprintf(msg, sizeof msg, "%zu nonlinear layers, more than %d", layers, NTK_FLOAT32_MAX_NONLINEAR);
  else if (deep)
    snprintf(msg, sizeof msg, "a float32 depth of %zu, more than %d (%zu nonlinear layers; a Gelu counts 4, an Abs or "
             "ABRelu of slopes of opposite signs 2, a FanInProd 16)", depth, NTK_FLOAT32_MAX_NONLINEAR, layers);
  for (size_t i = 0; !deep && i < arch->n; i++)
    if (arch->layers[i].kind == NTK_LAYER_ATTENTION) {
      deep = 1;
      snprintf(msg, sizeof msg, "layer %zu, a GlobalSelfAttention: its outputs at different positions are nearly "
               "collinear, where float32 knows their angle to sqrt(u)", i + 1);
    }
  if (!deep && !small_scale(arch, 4, msg, sizeof msg)) return 0;
  if (why && cap) snprintf(why, cap, "%s", msg);
  return 1;
}

int ntk_arch_has_map(const struct ntk_arch *arch, int map_kind) {
  for (size_t i = 0; i < arch->n; i++)
    if (arch->layers[i].kind == NTK_LAYER_MAP && (int)arch->layers[i].map.kind == map_kind) return 1;
  return 0;
}

int ntk_layer_vanishes(const struct ntk_layer *l) {
  /* A bias alone (W_std = 0, b_std > 0) is the same Gaussian for every
   * sample, not 0: a variance of 0 after it is an underflow. */
  if (l->kind == NTK_LAYER_DENSE || l->kind == NTK_LAYER_CONV) return l->w_std == 0 && l->b_std == 0;
  if (l->kind == NTK_LAYER_ATTENTION) {
    /* no bias, and the values scaled by 0, or weights of 0 (all but SOFTMAX, whose weights are uniform then) */
    const struct ntk_attention *a = &l->attn;
    int no_weights = a->w_key * a->w_query == 0 && a->mech != NTK_ATTN_SOFTMAX;
    return l->b_std == 0 && (a->w_value * a->w_out == 0 || no_weights);
  }
  if (l->kind != NTK_LAYER_MAP) return 0;
  const struct ntk_map *m = &l->map;
  switch (m->kind) {
  case NTK_MAP_ABRELU: return m->a == 0 && m->b == 0;
  case NTK_MAP_ERF: return (m->a == 0 || m->b == 0) && m->c == 0; /* a erf(b x) + c: Erf(a=0, c=0.5) is 0.5 */
  case NTK_MAP_SIN: return m->a == 0 || (m->b == 0 && m->c == 0); /* a sin(b x + c) */
  case NTK_MAP_EXP:
  case NTK_MAP_GAUSSIAN: return m->a == 0;
  case NTK_MAP_POLYNOMIAL:
    for (int k = 0; k < m->degree; k++)
      if (m->coef[k] != 0) return 0;
    return 1;
  default: return 0;
  }
}

void ntk_vanish_step(struct ntk_vanish *v, const struct ntk_layer *l) {
  int d = v->depth - 1, over = v->depth > 16;
  switch (l->kind) {
  case NTK_LAYER_FORK:
    if (v->depth++ < 16) v->in[v->depth - 1] = v->zero, v->all[v->depth - 1] = 1, v->any[v->depth - 1] = 0;
    break;
  case NTK_LAYER_NEXT:
    if (d >= 0 && !over) {
      v->all[d] &= v->zero, v->any[d] |= v->zero;
      v->zero = v->in[d];
    }
    break;
  case NTK_LAYER_JOIN:
    if (d >= 0 && !over) v->zero = l->prod ? v->any[d] | v->zero : v->all[d] & v->zero;
    else v->zero = 1;
    if (v->depth > 0) v->depth--;
    break;
  default: v->zero |= ntk_layer_vanishes(l);
  }
}

int ntk_layer_scale_free(const struct ntk_layer *l) {
  if (l->kind == NTK_LAYER_LAYERNORM) return 1;
  if (l->kind != NTK_LAYER_MAP) return 0;
  return l->map.kind == NTK_MAP_SIGN || (l->map.kind == NTK_MAP_RECTMONO && l->map.degree == 0);
}

int ntk_layer_variance_judged(const struct ntk_layer *l) {
  if (ntk_layer_scale_free(l)) return 1;
  if (l->kind != NTK_LAYER_MAP) return 0;
  return (l->map.kind == NTK_MAP_ABRELU && l->map.a != l->map.b) || l->map.kind == NTK_MAP_RECTMONO;
}

ntk_status ntk_variance_refusal(const char *who, size_t layer, const struct ntk_layer *l, const char *where,
                                const char *what, int elem) {
  return ntk_error(NTK_ENONFINITE, "%s: its variance entering layer %zu (%s)%s is %s, below %s's normal range (%.3g): "
                   "%s's value %s, so it would come out %s from the few bits left, and wrong; %s", who, layer + 1,
                   l->name, where, what, elem == 4 ? "float32" : "float64", elem == 4 ? (double)FLT_MIN : DBL_MIN,
                   l->name,
                   ntk_layer_scale_free(l) ? "depends on the variances' ratios, not their size"
                                           : "is taken from the angle between the pair, c / sqrt(q q')",
                   ntk_layer_scale_free(l) ? "O(1)" : "off by any factor",
                   elem == 4 ? "use [compute] precision = float64, or scale the data up ([data] scale)"
                             : "scale the data up ([data] scale), or raise w_std or b_std before it");
}

ntk_status ntk_variance_overflow(const char *who, size_t layer, const struct ntk_layer *l, const char *where,
                                 double v, int elem) {
  return ntk_error(NTK_ENONFINITE, "%s: its variance entering layer %zu (%s)%s is %s: %s; %s", who, layer + 1,
                   l->name, where, isnan(v) ? "NaN" : "inf",
                   isnan(v) ? "a layer before it left the precision's range (an overflow) or is undefined there "
                              "(LayerNorm with eps = 0 on a variance of 0, Gaussian with b > 0 and large variances)"
                            : elem == 4 ? "past float32's range (3.4e38): the data's squares or the layers before it "
                                          "overflowed"
                                        : "past float64's range (1.8e308): the data's squares or the layers before it "
                                          "overflowed",
                   elem == 4 ? "use [compute] precision = float64, or scale the data down ([data] scale)"
                             : "scale the data down ([data] scale), or lower w_std or b_std before it");
}

static const char *pad_name(ntk_padding p) {
  return p == NTK_PAD_SAME ? "SAME" : p == NTK_PAD_CIRCULAR ? "CIRCULAR" : "VALID";
}

/* Appends to text (cap bytes) at *n; past the end the text stays cut at cap
 * - 1 (NTK_LAYER_TEXT_MAX is sized so that no layer gets there). */
static void put(char *text, size_t cap, size_t *n, const char *fmt, ...) {
  if (*n + 1 >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(text + *n, cap - *n, fmt, ap);
  va_end(ap);
  *n = w < 0 ? *n : *n + (size_t)w >= cap ? cap - 1 : *n + (size_t)w;
}

/* A nonlinearity: its name alone while every parameter is its default
 * (Relu, Erf), else all of them in stax's order (LeakyRelu(0.1),
 * Erf(2, 1, 0)). */
static int map_canonical(const struct ntk_layer *l, char *buf, size_t cap) {
  if (l->map.kind == NTK_MAP_NUMERICAL) return snprintf(buf, cap, "ElementwiseNumerical(%s)", ntk_numfn_name(l->map.degree));
  const struct ntk_map_name *nm = ntk_map_name_find(l->name);
  int np = 0, all_default = 1;
  /* A parameter without a slot (Gelu's approximate) changes nothing in the
   * kernel: never spelled out, so it leaves the job identity alone. */
  while (nm && np < NTK_MAP_MAXPARAMS && nm->params[np].key) {
    if (nm->params[np].slot != NTK_SLOT_NONE && !(l->param[np] == nm->params[np].dflt))
      all_default = 0; /* NAN (required) never equals */
    np++;
  }
  while (np > 0 && nm->params[np - 1].slot == NTK_SLOT_NONE) np--;
  if (all_default) return snprintf(buf, cap, "%s", l->name);
  char text[NTK_LAYER_TEXT_MAX];
  size_t n = 0;
  put(text, sizeof text, &n, "%s(", l->name);
  for (int k = 0; k < np; k++) {
    char v[32];
    const struct ntk_param *pm = &nm->params[k];
    if (k) put(text, sizeof text, &n, ", ");
    if (pm->type == NTK_PARAM_BOOL) {
      put(text, sizeof text, &n, "%s", l->param[k] != 0 ? "True" : "False");
    } else if (pm->type == NTK_PARAM_LIST) {
      put(text, sizeof text, &n, "[");
      for (int c = 0; c < l->map.degree; c++) {
        fmt_exact(v, sizeof v, l->map.coef[c]);
        put(text, sizeof text, &n, "%s%s", c ? ", " : "", v);
      }
      put(text, sizeof text, &n, "]");
    } else {
      fmt_exact(v, sizeof v, l->param[k]);
      put(text, sizeof text, &n, "%s", v);
    }
  }
  put(text, sizeof text, &n, ")");
  return snprintf(buf, cap, "%s", text);
}

/* A size as stax writes it: (h, w), or (h,) for 1-D data. */
static void fmt_size(char *buf, size_t cap, int h, int w, int one_d) {
  if (one_d) snprintf(buf, cap, "(%d,)", h);
  else snprintf(buf, cap, "(%d, %d)", h, w);
}

static size_t layer_canonical(const struct ntk_layer *l, int std, char *buf, size_t cap) {
  char w[32], b[32];
  fmt_exact(w, sizeof w, l->w_std);
  fmt_exact(b, sizeof b, l->b_std);
  int n = 0;
  const char *conv = l->local ? "ConvLocal" : l->transpose ? "ConvTranspose" : "Conv";
  switch (l->kind) {
  case NTK_LAYER_DENSE:
    if (std) n = snprintf(buf, cap, "Dense(%d, W_std=%s, b_std=%s)", l->width, w, l->bias ? b : "None");
    else n = snprintf(buf, cap, "Dense(W_std=%s, b_std=%s)", w, b);
    break;
  case NTK_LAYER_CONV:
    if (l->filter != l->filter_w || l->stride != l->stride_w || l->one_d) {
      char fs[48], ss[48];
      fmt_size(fs, sizeof fs, l->filter, l->filter_w, l->one_d);
      fmt_size(ss, sizeof ss, l->stride, l->stride_w, l->one_d);
      n = snprintf(buf, cap, "%s(%d, %s, %s, %s, W_std=%s, b_std=%s)", conv, std ? l->width : 1, fs, ss,
                   pad_name(l->padding), w, std && !l->bias ? "None" : b);
    } else if (std)
      n = snprintf(buf, cap, "%s(%d, (%d, %d), (%d, %d), %s, W_std=%s, b_std=%s)", conv, l->width, l->filter,
                   l->filter, l->stride, l->stride, pad_name(l->padding), w, l->bias ? b : "None");
    else
      n = snprintf(buf, cap, "%s(%d, %d, %s, W_std=%s, b_std=%s)", conv, l->filter, l->stride, pad_name(l->padding),
                   w, b);
    break;
  case NTK_LAYER_MAP:
    n = map_canonical(l, buf, cap);
    break;
  case NTK_LAYER_AVGPOOL:
    if (l->window != l->window_w || l->stride != l->stride_w || l->one_d) {
      char ws[48], ss[48];
      fmt_size(ws, sizeof ws, l->window, l->window_w, l->one_d);
      fmt_size(ss, sizeof ss, l->stride, l->stride_w, l->one_d);
      n = snprintf(buf, cap, "%s(%s, %s, %s%s)", l->sum ? "SumPool" : "AvgPool", ws, ss, pad_name(l->padding),
                   l->normalize_edges && l->padding == NTK_PAD_SAME ? ", normalize_edges=True" : "");
    } else if (l->padding == NTK_PAD_VALID) /* the text every VALID pooling had */
      n = snprintf(buf, cap, "%s(%d, %d)", l->sum ? "SumPool" : "AvgPool", l->window, l->stride);
    else
      n = snprintf(buf, cap, "%s(%d, %d, %s%s)", l->sum ? "SumPool" : "AvgPool", l->window, l->stride,
                   pad_name(l->padding), l->normalize_edges ? ", normalize_edges=True" : "");
    break;
  case NTK_LAYER_LAYERNORM:
    fmt_exact(w, sizeof w, l->map.a);
    if (l->ln_axes) { /* the axes as written, from -4 up */
      char ax[64];
      int m = fmt_axes(ax, sizeof ax, l->ln_axes);
      n = snprintf(buf, cap, "LayerNorm(axis=(%s%s), eps=%s)", ax, m == 1 ? "," : "", w);
    } else
      n = l->map.a == 1e-12 ? snprintf(buf, cap, "LayerNorm") : snprintf(buf, cap, "LayerNorm(eps=%s)", w);
    break;
  case NTK_LAYER_DROPOUT:
    fmt_exact(w, sizeof w, l->rate);
    n = snprintf(buf, cap, "Dropout(%s)", w);
    break;
  case NTK_LAYER_ATTENTION: {
    /* what the kernel takes: the stds, the mechanism, the embeddings (their
     * std and val_pos_emb only where there are some); the widths only
     * n_chan_out, and only under the standard parameterisation */
    static const char *const mechs[] = {"SOFTMAX", "IDENTITY", "ABS", "RELU"}, *const embs[] = {"NONE", "SUM",
                                                                                             "CONCAT"};
    const struct ntk_attention *t = &l->attn;
    char k[32], v[32], q[32], o[32], e[32];
    fmt_exact(k, sizeof k, t->w_key);
    fmt_exact(v, sizeof v, t->w_value);
    fmt_exact(q, sizeof q, t->w_query);
    fmt_exact(o, sizeof o, t->w_out);
    fmt_exact(e, sizeof e, t->pos_std);
    n = snprintf(buf, cap, "GlobalSelfAttention(%d, 1, 1, 1, linear_scaling=%s, W_key_std=%s, W_value_std=%s, "
                 "W_query_std=%s, W_out_std=%s, b_std=%s, attention_mechanism='%s', pos_emb_type='%s'",
                 std ? l->width : 1, t->linear ? "True" : "False", k, v, q, o, l->bias ? b : "None",
                 mechs[t->mech], embs[t->pos]);
    if (n >= 0 && (size_t)n < cap && t->pos != NTK_POS_NONE)
      n += snprintf(buf + n, cap - (size_t)n, ", W_pos_emb_std=%s, val_pos_emb=%s", e, t->val_pos ? "True" : "False");
    if (n >= 0 && (size_t)n < cap) n += snprintf(buf + n, cap - (size_t)n, ")");
    break;
  }
  case NTK_LAYER_RESIZE:
    if (l->index) { /* the items as written, each part as its number */
      n = snprintf(buf, cap, "Index(Slice[");
      for (int k = 0; k < l->nslice && n >= 0 && (size_t)n < cap; k++) {
        const struct ntk_slice *s = &l->slice[k];
        char from[24] = "", to[24] = "", by[24] = "";
        if (s->has_start) snprintf(from, sizeof from, "%ld", s->start);
        if (s->has_stop) snprintf(to, sizeof to, "%ld", s->stop);
        if (s->has_step) snprintf(by, sizeof by, ":%ld", s->step);
        n += s->ellipsis ? snprintf(buf + n, cap - (size_t)n, "%s...", k ? ", " : "")
                         : snprintf(buf + n, cap - (size_t)n, "%s%s:%s%s", k ? ", " : "", from, to, by);
      }
      if (n >= 0 && (size_t)n < cap) n += snprintf(buf + n, cap - (size_t)n, "])");
      break;
    }
    if (l->resize_len == 3)
      n = snprintf(buf, cap, "ImageResize((-1, %d, -1), '%s'%s)", l->resize[1], l->nearest ? "nearest" : "linear",
                   l->antialias ? "" : ", antialias=False");
    else
      n = snprintf(buf, cap, "ImageResize((-1, %d, %d, -1), '%s'%s)", l->resize[1], l->resize[2],
                   l->nearest ? "nearest" : "linear", l->antialias ? "" : ", antialias=False");
    break;
  case NTK_LAYER_AGGREGATE:
    if (l->agg_axes) { /* the axes as written: ntk_aggregate_axes checks them against the data */
      char ax[64];
      int m = fmt_axes(ax, sizeof ax, l->agg_axes);
      n = snprintf(buf, cap, "Aggregate(aggregate_axis=(%s%s))", ax, m == 1 ? "," : "");
    } else
      n = snprintf(buf, cap, "Aggregate");
    break;
  case NTK_LAYER_FORK:
    n = snprintf(buf, cap, "FanOut(%d) parallel(", l->branches);
    break;
  case NTK_LAYER_NEXT:
    n = snprintf(buf, cap, ",");
    break;
  case NTK_LAYER_JOIN:
    n = snprintf(buf, cap, ") %s", l->sum ? "FanInSum" : l->prod ? "FanInProd" : "FanInConcat");
    if (n >= 0 && (size_t)n < cap && !l->sum && !l->prod && l->axis)
      n += snprintf(buf + n, cap - (size_t)n, "(axis=%d)", l->axis);
    break;
  case NTK_LAYER_IDENTITY:
  case NTK_LAYER_FLATTEN:
  case NTK_LAYER_GLOBALAVGPOOL:
  case NTK_LAYER_KINDS:
    n = snprintf(buf, cap, "%s", l->name);
    break;
  }
  return n > 0 ? (size_t)n : 0;
}

size_t ntk_arch_layer_canonical(const struct ntk_layer *l, char *buf, size_t cap) {
  return layer_canonical(l, 0, buf, cap);
}

size_t ntk_arch_layer_canonical_param(const struct ntk_arch *arch, size_t i, char *buf, size_t cap) {
  return layer_canonical(&arch->layers[i], arch->standard, buf, cap);
}

size_t ntk_arch_canonical(const struct ntk_arch *arch, char *buf, size_t cap) {
  size_t len = 0;
  if (arch->standard) { /* the same layers under the other parameterisation are another network */
    const char *pre = "parameterization=standard:";
    if (cap > strlen(pre)) snprintf(buf, cap, "%s", pre);
    len = strlen(pre);
  }
  for (size_t i = 0; i < arch->n; i++) {
    char one[NTK_LAYER_TEXT_MAX];
    ntk_arch_layer_canonical_param(arch, i, one, sizeof one);
    size_t ol = strlen(one) + (len ? 1 : 0);
    if (len + ol < cap) snprintf(buf + len, cap - len, "%s%s", len ? " " : "", one);
    len += ol;
  }
  if (cap && len >= cap) buf[cap - 1] = '\0';
  if (cap && arch->n == 0) buf[0] = '\0';
  return len;
}
