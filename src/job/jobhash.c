/* Job identity: the job text, its XXH3-128, and how two texts differ. */
#include "job/jobhash.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "kernels/cnn.h"
#include "kernels/fc.h"

/* A growing string. */
struct text {
  char *p;
  size_t len, cap;
  int failed;
};

static void add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct text *t, const char *fmt, ...) {
  if (t->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->failed = 1;
      return;
    }
    if ((size_t)n < t->cap - t->len) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = 2 * t->cap + (size_t)n + 1;
    char *p = realloc(t->p, cap);
    if (!p) {
      t->failed = 1;
      return;
    }
    t->p = p;
    t->cap = cap;
  }
}

static void hex(const uint8_t *b, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
}

ntk_status ntk_job_identity(const struct ntk_job *job, const struct ntk_arch *arch, const struct ntk_dataset *data,
                            struct ntk_store_info *info, char **text) {
  *text = NULL;
  memset(info, 0, sizeof *info);
  info->n = data->n;
  info->d = data->d;
  info->tile = (uint32_t)job->tile;
  info->elem = (uint32_t)data->elem;
  info->kernels = (uint32_t)job->kernels;
  info->n_train = data->n_train;
  info->test_test = data->n_train && job->test.test_test;

  /* The data values, hashed on their own so that the text can say "the
   * data differ" without holding them. */
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(data->x, data->n * data->d * (size_t)data->elem));
  char data_hex[33];
  hex(c.digest, 16, data_hex);

  struct text t = {malloc(4096), 0, 4096, 0};
  if (!t.p) return ntk_error(NTK_ENOMEM, "out of memory");
  t.p[0] = '\0';
  add(&t, "ntkd job = 2\nsamples = %zu\nfeatures = %zu\nimage = %zu x %zu x %zu\nprecision = %s\nkernels = %s\n",
      data->n, data->d, data->h, data->w, data->c, data->elem == 4 ? "float32" : "float64",
      job->kernels & NTK_KERNEL_NTK ? "nngp+ntk" : "nngp");
  add(&t, "train samples = %zu\ntest x test = %s\ndata values = %s\nlayers = %zu\n", data->n_train,
      info->test_test ? "yes" : "no", data_hex, arch->n);
  /* Images one pixel wide that a CNN reads as 2-D (rank 4): the same image
   * line, values and layers as (N, L, C) sequences ([data] layout = NLC,
   * rank 3; or such images read by 1-D layers), whose rank-dependent
   * layers (LayerNorm's axes) compute other numbers: a store begun by one
   * was finished by the other, exit 0 (a hunt, 2026-12-07). Said for the
   * rank-4 reading alone (absent: sequences, and every older store of
   * them; an older store of rank-4 images one wide is refused once). */
  int rank = 0;
  if (data->w == 1 && ntk_cnn_applies(arch, data) && !ntk_arch_data_rank(arch, data->one_d, 1, &rank) && rank == 4)
    add(&t, "data rank = 4 (images one pixel wide, not (N, L, C) sequences)\n");
  if (arch->standard) add(&t, "parameterization = standard\n"); /* absent: ntk, as every older store */
  /* A float32 job computed in float64 (kernels/arch.h; absent: in its own
   * precision): a store of such a network begun by an ntkd that ran float32
   * maps holds other numbers, and resuming it would mix the two. */
  if (data->elem == 4 && ntk_arch_float32_widened(arch, NULL, 0))
    add(&t, "arithmetic = float64, rounded to float32 once\n");
  else {
    /* The float Gelu map's angle from ntkd's own atan2 (kernel_maps.h;
     * absent: libm's atan2f, up to 3e-7 apart, and another on a GPU): a
     * float32 Gelu store begun by an older ntkd would mix the two. */
    if (data->elem == 4 && ntk_arch_has_map(arch, NTK_MAP_GELU)) add(&t, "gelu angle = ntkd's atan2\n");
    /* The float ReLU-family map's angle from one polynomial in |cos|
     * (kernel_maps.h, ntk_acos_over_sinf; absent: an arcsine after a
     * rotation by pi/8, before 2026-12-05, up to 4e-7 apart): a float32
     * Relu, LeakyRelu, ABRelu or Abs store begun by an older ntkd would mix
     * the two. */
    if (data->elem == 4 && ntk_arch_has_map(arch, NTK_MAP_ABRELU)) add(&t, "relu angle = acos polynomial\n");
  }
  /* The Gelu map from power-of-two-scaled variances and O(1) ratios
   * (kernel_maps.h; absent: the closed form's products of q^3 and q^4,
   * before 2026-12-07, a rounding or so apart where those are in range):
   * a Gelu store begun by an older ntkd would mix the two. */
  if (ntk_arch_has_map(arch, NTK_MAP_GELU)) add(&t, "gelu = scaled variances\n");
  /* RectifiedMonomial(0) at a zero variance is f(0) E[f(v)] (kernel_maps.h;
   * absent: the angle formula's 1/4, before 2026-12-05): a store begun by an
   * older ntkd holds other numbers for zero samples, or a CNN's blank
   * regions, with b_std = 0, and resuming it would mix the two. */
  for (size_t l = 0; l < arch->n; l++)
    if (arch->layers[l].kind == NTK_LAYER_MAP && arch->layers[l].map.kind == NTK_MAP_RECTMONO &&
        arch->layers[l].map.degree == 0) {
      add(&t, "rectified monomial 0 at a zero variance = f(0) E[f]\n");
      break;
    }
  /* Equal rows of a fully-connected network's data are one sample
   * (ntk_fc_twins; absent: no two rows equal, or a CNN): a store of such
   * data begun by an ntkd that took their pairs' input covariance from the
   * rows' product holds other numbers there (4e-5 apart in float32), and
   * resuming it would mix the two. */
  if (!ntk_cnn_applies(arch, data)) {
    size_t *twin;
    ntk_status st = ntk_fc_data_twins(data, &twin);
    if (st) {
      free(t.p);
      return st;
    }
    /* Only a pair the store holds: a test sample equal only to test
     * samples pairs in test x test, not computed without test_test, and a
     * store of it begun by an older ntkd holds the same numbers (a row's
     * twin is its first copy, so a train copy comes first). */
    int held[2] = {0, 0}; /* an equal pair, a negated pair */
    for (size_t i = 0; twin && i < data->n; i++) {
      size_t q = twin[i] & ~NTK_TWIN_NEGATED;
      if (q != i && (!data->n_train || q < data->n_train || info->test_test)) held[q != twin[i]] = 1;
    }
    if (held[0]) add(&t, "equal rows = one sample\n");
    /* A sample and its negation, the same at an angle of pi (an older ntkd
     * took their product too) */
    if (held[1]) add(&t, "negated rows = one sample negated\n");
    free(twin);
  }
  for (size_t i = 0; i < arch->n; i++) {
    char one[NTK_LAYER_TEXT_MAX];
    ntk_arch_layer_canonical_param(arch, i, one, sizeof one);
    add(&t, "layer %zu = %s\n", i + 1, one);
  }
  /* Under ntk parameterisation a layer line leaves out the width written in
   * Dense(64) or Conv(64, ...), yet a FanInConcat weights its branches by
   * their widths (ntk_widths_step): Dense(64) / Dense(128) branches and
   * Dense(128) / Dense(64) ones are other numbers with the same layer
   * lines. So a network with a FanInConcat lists every width written up to
   * its last FanInConcat, in order ("-": none written); without one (or
   * under standard, whose layer lines hold them) the widths change nothing
   * and the line is absent, as in every older store. */
  if (!arch->standard) {
    size_t concat = 0; /* past the last FanInConcat, no width enters the kernel */
    int written = 0;
    for (size_t i = 0; i < arch->n; i++) {
      const struct ntk_layer *l = &arch->layers[i];
      if (l->kind == NTK_LAYER_JOIN && !l->sum && !l->prod) concat = i + 1;
    }
    for (size_t i = 0; i < concat; i++) {
      const struct ntk_layer *l = &arch->layers[i];
      if ((l->kind == NTK_LAYER_DENSE || l->kind == NTK_LAYER_CONV) && l->width > 0) written = 1;
    }
    if (written) {
      add(&t, "widths =");
      for (size_t i = 0; i < concat; i++) {
        const struct ntk_layer *l = &arch->layers[i];
        if (l->kind != NTK_LAYER_DENSE && l->kind != NTK_LAYER_CONV) continue;
        if (l->width > 0) add(&t, " %d", l->width);
        else add(&t, " -");
      }
      add(&t, "\n");
    }
  }
  if (t.failed) {
    free(t.p);
    return ntk_error(NTK_ENOMEM, "out of memory for the job description");
  }
  XXH128_canonicalFromHash(&c, XXH3_128bits(t.p, t.len));
  memcpy(info->job_hash, c.digest, 16);

  /* The one-line summary `info` shows: cut to fit, the text above is whole. */
  char canon[401];
  size_t need = ntk_arch_canonical(arch, canon, sizeof canon);
  snprintf(info->description, sizeof info->description,
           "kernel=%s precision=%s n=%zu d=%zu data=%.200s%s%s%.200s arch=%.400s%s",
           job->kernels & NTK_KERNEL_NTK ? "nngp+ntk" : "nngp", data->elem == 4 ? "float32" : "float64", data->n,
           data->d, job->data_path[0], job->ndata > 1 ? " (+more)" : "", data->n_train ? " test=" : "",
           data->n_train ? job->test.path[0] : "", canon, need >= sizeof canon ? " ..." : "");
  *text = t.p;
  return NTK_OK;
}

/* The line starting at s as key and value ("layer 3" and "Relu" of
 * "layer 3 = Relu"); 0 at the end of the text. *next: the line after it. */
static int line_here(const char *s, const char **key, int *klen, const char **val, int *vlen, const char **next) {
  if (!*s) return 0;
  const char *nl = strchr(s, '\n');
  size_t len = nl ? (size_t)(nl - s) : strlen(s);
  const char *eq = memchr(s, '=', len);
  *key = s;
  *klen = eq ? (int)(eq - s) - (eq > s && eq[-1] == ' ') : (int)len;
  *val = eq ? eq + 1 + (eq[1] == ' ') : s + len;
  *vlen = (int)(s + len - *val);
  *next = nl ? nl + 1 : s + len;
  return 1;
}

/* Whether text s has a line whose key is key[0..klen). */
static int has_key(const char *s, const char *key, int klen) {
  const char *k, *v;
  int kl, vl;
  for (; line_here(s, &k, &kl, &v, &vl, &s);)
    if (kl == klen && !memcmp(k, key, (size_t)klen)) return 1;
  return 0;
}

/* The lines a newer ntkd writes where it computes some entries otherwise
 * than the ntkd before it did (see job_text): a store that lacks one was
 * computed by that older ntkd, not for other data or another model.
 * `rounding`: the older entries differ from the newer only by the
 * rounding of another formula, both as accurate (the float32 maps' angles,
 * Gelu's scaled form), so a
 * complete store of that version may be read (solved) as it is; the
 * others mark entries the older ntkd computed less accurately or wrongly. */
static const struct {
  const char *key;
  int rounding;
} version_keys[] = {{"arithmetic", 0}, {"equal rows", 0}, {"negated rows", 0}, {"gelu angle", 1},
                    {"relu angle", 1}, {"rectified monomial 0 at a zero variance", 0}, {"gelu", 1}};

/* The index of key[0..len) in version_keys, or -1. */
static int version_key(const char *key, int len) {
  for (size_t v = 0; v < sizeof version_keys / sizeof *version_keys; v++)
    if ((size_t)len == strlen(version_keys[v].key) && !memcmp(key, version_keys[v].key, (size_t)len)) return (int)v;
  return -1;
}

int ntk_job_text_diff(const char *have, const char *want, char *out, size_t cap) {
  out[0] = '\0';
  if (!*have) {
    snprintf(out, cap, "the job text kept in the store is damaged, so only its hash can be compared");
    return 0;
  }
  size_t ndiff = 0;
  int all_version = 1, all_rounding = 1;
  const char *ka = "", *va = "", *vb = "";
  int kla = 0, vla = 0, vlb = 0, ha = 0, hb = 0;
  /* Both texts line by line, in one pass. A line only one text has
   * (parameterization, arithmetic, widths, equal rows: written only where
   * they apply) is one difference, named by its key, and the texts are
   * compared on from the line after it: counted by position, one such line
   * made every line after it differ (62 for a 60-layer network), and the
   * first difference named the line of the other text that happened to
   * stand there. */
  for (const char *a = have, *b = want;;) {
    const char *k1 = "", *v1 = "", *k2 = "", *v2 = "", *na = a, *nb = b;
    int kl1 = 0, vl1 = 0, kl2 = 0, vl2 = 0;
    int h1 = line_here(a, &k1, &kl1, &v1, &vl1, &na), h2 = line_here(b, &k2, &kl2, &v2, &vl2, &nb);
    if (!h1 && !h2) break;
    int only1 = 0, only2 = 0;
    if (h1 && h2) {
      if (kl1 == kl2 && vl1 == vl2 && !memcmp(k1, k2, (size_t)kl1) && !memcmp(v1, v2, (size_t)vl1)) {
        a = na, b = nb;
        continue;
      }
      if (kl1 != kl2 || memcmp(k1, k2, (size_t)kl1)) {
        if (!has_key(have, k2, kl2)) only2 = 1;
        else if (!has_key(want, k1, kl1)) only1 = 1;
      }
    } else {
      only1 = h1, only2 = h2;
    }
    /* Each difference a line a newer ntkd writes (version_keys), present in
     * one text only: the same job by another version (a float32 Gelu store
     * of before 2026-12-04 lacks two such lines). */
    {
      const char *kk = only2 ? k2 : k1;
      int kkl = only2 ? kl2 : kl1, v = version_key(kk, kkl);
      if (v < 0 || !(only1 || only2)) all_version = 0;
      else if (!version_keys[v].rounding) all_rounding = 0;
    }
    if (!ndiff++) {
      ha = !only2, hb = !only1;
      ka = only2 ? k2 : k1, kla = only2 ? kl2 : kl1;
      va = v1, vla = vl1, vb = v2, vlb = vl2;
    }
    if (!only2) a = na;
    if (!only1) b = nb;
  }
  if (!ndiff) return 0;
  const char *why = "";
  if (version_key(ka, kla) >= 0) /* the first difference explained, whatever the others */
    why = ha ? "; this store was written by a newer ntkd, which computes these entries otherwise"
             : "; this store was written by an older ntkd, which computed these entries otherwise "
               "(docs/STORE-FORMAT.md): compute it again (--overwrite)";
  /* Long values (a Polynomial of 32 coefficients, 700 characters) are shown
   * from a little before where they part, 120 characters of each: whole,
   * the message cut this job's off before its difference. */
  int skip = 0, show = 120;
  if (ha && hb && (vla > 160 || vlb > 160)) {
    int p = 0;
    while (p < vla && p < vlb && va[p] == vb[p]) p++;
    skip = p > 40 ? p - 40 : 0;
  } else {
    show = vla > vlb ? vla : vlb;
  }
  int sa = vla - skip < show ? vla - skip : show, sb = vlb - skip < show ? vlb - skip : show;
  const char *pre = skip ? "..." : "";
  snprintf(out, cap, "%.*s: the store has %s%.*s%s, this job %s%.*s%s (%zu line%s of the job description differ%s)%s",
           kla, ka, ha ? pre : "", ha ? sa : 7, ha ? va + skip : "no line", ha && skip + sa < vla ? "..." : "",
           hb ? pre : "", hb ? sb : 7, hb ? vb + skip : "no line", hb && skip + sb < vlb ? "..." : "", ndiff,
           ndiff == 1 ? "" : "s", ndiff == 1 ? "s" : "", why);
  return all_version ? 1 + all_rounding : 0;
}

ntk_status ntk_job_check_store(const char *path, const ntk_store_t *s, const struct ntk_store_info *want,
                               const char *want_text, int reading, const char *advice) {
  const struct ntk_store_info *have = ntk_store_get_info(s);
  if (!memcmp(have->job_hash, want->job_hash, 16)) return NTK_OK;
  char where[1024];
  int version = ntk_job_text_diff(ntk_store_job_text(s), want_text, where, sizeof where);
  if (version == 2 && reading) { /* the same values to another formula's rounding: read as they are */
    fprintf(stderr, "ntkd: note: %s was computed for this job by an ntkd of another version, whose entries differ "
            "from this one's only by rounding (another formula for a map, docs/STORE-FORMAT.md); "
            "read as it is\n", path);
    return NTK_OK;
  }
  return ntk_error(NTK_EMISMATCH, "%s was computed %s:\n  first difference: %s\n  store: %s\n  job:   %s\n  %s", path,
                   version ? "for this job by an ntkd of another version, which computes some entries otherwise"
                           : "for another job (different data, model, kernel or precision)",
                   where[0] ? where : "the job descriptions agree but the hashes differ", have->description,
                   want->description, advice);
}
