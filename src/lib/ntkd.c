/* The library's face (include/ntkd.h): networks, the kernels of any block
 * computed by the in-process pool (worker/pool.h) over the same engine and
 * backends as a job, and the store's reads. Only this file knows the
 * public types; it translates them to the internal ones and back. */
#include "ntkd.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "base/clocale.h"
#include "base/cpuinit.h"
#include "base/defs.h"
#include "base/status.h"
#include "base/tiling.h"
#include "kernels/arch.h"
#include "kernels/cnn.h"
#include "store/store.h"
#include "worker/pool.h"

const char *ntkd_version(void) { return NTKD_VERSION; }

/* When the library is loaded: OpenBLAS's kernels as the ntkd program
 * chooses them (base/cpuinit.h), so that a tile computed in this process
 * equals the program's bit for bit, at the program's speed. Loading is the
 * moment least likely to meet a BLAS call of the host program in flight. */
__attribute__((constructor)) static void choose_blas_kernels(void) { (void)ntk_cpu_fix_openblas_here(); }

/* ---- errors ------------------------------------------------------------------ */

static ntkd_status public_status(ntk_status st) {
  switch (st) {
  case NTK_OK: return NTKD_OK;
  case NTK_EUSAGE: return NTKD_ERROR_USAGE;
  case NTK_ECONFIG: return NTKD_ERROR_ARCH;
  case NTK_EINPUT:
  case NTK_EMISMATCH: return NTKD_ERROR_INPUT;
  case NTK_EIO:
  case NTK_ELOCKED: return NTKD_ERROR_IO;
  case NTK_ECORRUPT: return NTKD_ERROR_DAMAGED;
  case NTK_EINCOMPLETE: return NTKD_ERROR_INCOMPLETE;
  case NTK_ENOMEM: return NTKD_ERROR_MEMORY;
  case NTK_EINTERRUPTED: return NTKD_ERROR_CANCELLED;
  case NTK_ENONFINITE: return NTKD_ERROR_NONFINITE;
  case NTK_ECOMM:
  case NTK_EINTERNAL:
  case NTK_ESTALLED: return NTKD_ERROR_INTERNAL;
  }
  return NTKD_ERROR_INTERNAL;
}

/* The failure `st` (its message recorded) as the library returns it. */
static ntkd_status fail(ntk_status st) { return public_status(st); }

static ntkd_status usage(const char *fmt, const char *what) {
  ntk_error(NTK_EUSAGE, fmt, what);
  return NTKD_ERROR_USAGE;
}

const char *ntkd_status_name(ntkd_status s) {
  switch (s) {
  case NTKD_OK: return "ok";
  case NTKD_ERROR_USAGE: return "usage";
  case NTKD_ERROR_ARCH: return "arch";
  case NTKD_ERROR_INPUT: return "input";
  case NTKD_ERROR_NONFINITE: return "nonfinite";
  case NTKD_ERROR_CANCELLED: return "cancelled";
  case NTKD_ERROR_MEMORY: return "memory";
  case NTKD_ERROR_IO: return "io";
  case NTKD_ERROR_DAMAGED: return "damaged";
  case NTKD_ERROR_INCOMPLETE: return "incomplete";
  case NTKD_ERROR_DEVICE: return "device";
  case NTKD_ERROR_INTERNAL: return "internal";
  }
  return "unknown";
}

const char *ntkd_last_error(void) { return ntk_error_message(); }

/* The entry points that read or write numbers as text (arch strings, the
 * store's job text, messages) run `call` in the C locale (base/clocale.h)
 * and give the caller's back: a host's decimal comma never changes a number. */
#define RETURN_IN_C_LOCALE(type, call)       \
  do {                                       \
    locale_t prev_ = ntk_c_locale_enter();   \
    type r_ = (call);                        \
    ntk_c_locale_leave(prev_);               \
    return r_;                               \
  } while (0)

/* A call's status, its message "" after a success: what failed inside it
 * and was got over (a GPU looked for and not found) is not the caller's. */
static ntkd_status done(ntkd_status st) {
  if (st == NTKD_OK) ntk_error_clear();
  return st;
}

/* ---- networks ------------------------------------------------------------------ */

struct ntkd_net {
  struct ntk_arch arch;
};

void ntkd_net_options_init(ntkd_net_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->w_std = 1.0;
  o->b_std = 0.0;
  o->parameterization = NTKD_PARAM_NTK;
}

static ntkd_status net_create(const char *arch, const ntkd_net_options *options, ntkd_net **net) {
  if (!net) return usage("%s: no place for the network (net is NULL)", "ntkd_net_create");
  *net = NULL;
  if (!arch) return usage("%s: no architecture (arch is NULL)", "ntkd_net_create");
  ntkd_net_options o;
  ntkd_net_options_init(&o);
  if (options) o = *options;
  if (o.parameterization != NTKD_PARAM_NTK && o.parameterization != NTKD_PARAM_STANDARD)
    return usage("%s: parameterization is NTKD_PARAM_NTK or NTKD_PARAM_STANDARD", "ntkd_net_create");
  if (!isfinite(o.w_std) || !isfinite(o.b_std) || o.w_std < 0 || o.b_std < 0)
    return usage("%s: w_std and b_std must be finite numbers >= 0", "ntkd_net_create");
  ntkd_net *n = calloc(1, sizeof *n);
  if (!n) return fail(ntk_error(NTK_ENOMEM, "out of memory"));
  ntk_status st = ntk_arch_parse_param(arch, o.w_std, o.b_std, o.parameterization == NTKD_PARAM_STANDARD, &n->arch);
  if (st) {
    free(n);
    /* the parser's messages name the arch already ("arch, column 7: ..."); the others get it */
    if (!strncmp(ntk_error_message(), "arch", 4)) return fail(st);
    return fail(ntk_error(st, "arch, %s", ntk_error_message()));
  }
  *net = n;
  return NTKD_OK;
}

ntkd_status ntkd_net_create(const char *arch, const ntkd_net_options *options, ntkd_net **net) {
  RETURN_IN_C_LOCALE(ntkd_status, done(net_create(arch, options, net)));
}

ntkd_status ntkd_net_create_layers(const char *const *layers, size_t nlayers, const ntkd_net_options *options,
                                   ntkd_net **net) {
  if (!net) return usage("%s: no place for the network (net is NULL)", "ntkd_net_create_layers");
  *net = NULL;
  if (!layers && nlayers) return usage("%s: layers is NULL", "ntkd_net_create_layers");
  size_t len = 1;
  for (size_t i = 0; i < nlayers; i++) {
    if (!layers[i]) return usage("%s: a layer is NULL", "ntkd_net_create_layers");
    len += strlen(layers[i]) + 1;
  }
  char *text = malloc(len);
  if (!text) return fail(ntk_error(NTK_ENOMEM, "out of memory"));
  size_t at = 0;
  for (size_t i = 0; i < nlayers; i++) at += (size_t)sprintf(text + at, "%s%s", i ? " " : "", layers[i]);
  text[at] = '\0';
  ntkd_status st = ntkd_net_create(text, options, net);
  free(text);
  return st;
}

void ntkd_net_free(ntkd_net *net) {
  if (!net) return;
  ntk_arch_free(&net->arch);
  free(net);
}

static size_t net_describe(const ntkd_net *net, char *buf, size_t cap) {
  if (cap) buf[0] = '\0';
  if (!net) return 0;
  /* The whole text, then as much of it as fits: ntk_arch_canonical cuts
   * at a whole layer (the store's one-line description), snprintf does not. */
  size_t len = ntk_arch_canonical(&net->arch, NULL, 0);
  char *all = cap ? malloc(len + 1) : NULL;
  if (!all) return len; /* cap 0, or no memory: the length alone ("" written) */
  ntk_arch_canonical(&net->arch, all, len + 1);
  snprintf(buf, cap, "%s", all);
  free(all);
  return len;
}

size_t ntkd_net_describe(const ntkd_net *net, char *buf, size_t cap) {
  RETURN_IN_C_LOCALE(size_t, net_describe(net, buf, cap));
}

/* ---- kernels --------------------------------------------------------------------- */

void ntkd_compute_options_init(ntkd_compute_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->device = NTKD_DEVICE_AUTO;
}

/* The per-sample shape of `x` as the kernels take it: (d), images (h, w,
 * c), sequences (l, c) as l x 1 images. */
static ntkd_status sample_shape(const ntkd_data *x, const char *name, size_t *d, size_t *h, size_t *w, size_t *c) {
  if (!x->x && x->n) return usage("%s: no data (x is NULL)", name);
  if (x->dtype != NTKD_FLOAT32 && x->dtype != NTKD_FLOAT64)
    return usage("%s: dtype must be NTKD_FLOAT32 or NTKD_FLOAT64", name);
  if (x->ndim < 1 || x->ndim > 3) return usage("%s: ndim must be 1 (features), 2 (length, channels) or 3 (height, "
                                              "width, channels)", name);
  for (int i = 0; i < x->ndim; i++)
    if (!x->shape[i] || x->shape[i] > ((size_t)1 << 32)) return usage("%s: a dimension of its shape is 0 or above 2^32", name);
  *d = x->shape[0];
  *h = *w = *c = 0;
  if (x->ndim == 2) *h = x->shape[0], *w = 1, *c = x->shape[1];
  if (x->ndim == 3) *h = x->shape[0], *w = x->shape[1], *c = x->shape[2];
  size_t hw;
  if (x->ndim >= 2 && (__builtin_mul_overflow(*h, *w, &hw) || __builtin_mul_overflow(hw, *c, d)))
    return usage("%s: more than 2^32 values per sample", name);
  if (*d > ((size_t)1 << 32)) return usage("%s: more than 2^32 values per sample", name);
  /* n x d values of es bytes must be a size: a product that wraps would
   * check, copy and compute on the few bytes it wraps to */
  if (x->n > SIZE_MAX / (*d * (size_t)x->dtype)) return usage("%s: n samples of this shape are more bytes than a size_t holds", name);
  return NTKD_OK;
}

/* The first value of n samples of d values that is not finite, as an
 * error naming it; NTKD_OK if all are. */
static ntkd_status check_values(const ntkd_data *x, size_t d, const char *name) {
  size_t count = x->n * d;
  for (size_t i = 0; i < count; i++) {
    double v = x->dtype == NTKD_FLOAT32 ? (double)((const float *)x->x)[i] : ((const double *)x->x)[i];
    if (!isfinite(v)) {
      ntk_error(NTK_EINPUT, "%s: value %zu of sample %zu is %s", name, i % d, i / d, isnan(v) ? "NaN" : "inf");
      return NTKD_ERROR_INPUT;
    }
  }
  return NTKD_OK;
}

/* Where the results go: the caller's matrices, n1 x n2 row-major. */
struct sink {
  char *nngp, *ntk;
  size_t es, n1, n2;
  int symmetric, two; /* two: the tiles hold NTK after NNGP */
};

/* One element of es bytes (4 or 8): a copy of constant size either way,
 * so that no per-element call remains. */
static inline void put_elem(char *dst, const char *src, size_t es) {
  if (es == sizeof(float)) memcpy(dst, src, sizeof(float));
  else memcpy(dst, src, sizeof(double));
}

/* One kernel's tile v (rows x cols, row-major, elements of es bytes) into
 * out (n2 columns): at (r0, c0) when `place`; transposed, its column j as
 * row c0 + j from column t0, when `mirror`. Row by row for the first; the
 * transpose in 32 x 32 blocks, so that the rows it writes stay in cache. */
static void put_tile(char *out, size_t n2, const char *v, size_t es, uint64_t rows, uint64_t cols, uint64_t r0,
                     uint64_t c0, int place, int mirror, uint64_t t0) {
  if (place)
    for (uint64_t i = 0; i < rows; i++) memcpy(out + ((r0 + i) * n2 + c0) * es, v + i * cols * es, cols * es);
  if (!mirror) return;
  for (uint64_t ib = 0; ib < rows; ib += 32)
    for (uint64_t jb = 0; jb < cols; jb += 32) {
      uint64_t ie = ib + 32 < rows ? ib + 32 : rows, je = jb + 32 < cols ? jb + 32 : cols;
      for (uint64_t j = jb; j < je; j++) {
        char *dst = out + ((c0 + j) * n2 + t0) * es;
        for (uint64_t i = ib; i < ie; i++) put_elem(dst + i * es, v + (i * cols + j) * es, es);
      }
    }
}

/* Symmetric: the tile at its place and, off the diagonal, its mirror.
 * Against x2: the tile's rows are x2's samples (after x1's n1 in the
 * dataset), its columns x1's: transposed into the n1 x n2 result. */
static void deliver(void *arg, const struct ntk_tile *t, const void *vals) {
  const struct sink *k = arg;
  size_t one = (size_t)(t->rows * t->cols) * k->es;
  for (int which = 0; which < 2; which++) {
    char *out = which ? k->ntk : k->nngp;
    if (!out || (which && !k->two)) continue;
    const char *v = (const char *)vals + (which ? one : 0);
    int place = k->symmetric, mirror = !k->symmetric || t->bi != t->bj;
    uint64_t t0 = k->symmetric ? t->r0 : t->r0 - k->n1;
    put_tile(out, k->n2, v, k->es, t->rows, t->cols, t->r0, t->c0, place, mirror, t0);
  }
}

/* A run that did not finish (cancelled, failed): the tiles delivered
 * before are no result, so that no entry of the outputs could be taken for
 * one, every entry becomes NaN. */
static void unfinished(const struct sink *k) {
  size_t count = k->n1 * k->n2;
  for (int which = 0; which < 2; which++) {
    void *out = which ? (k->two ? k->ntk : NULL) : k->nngp;
    if (!out) continue;
    if (k->es == 4)
      for (size_t i = 0; i < count; i++) ((float *)out)[i] = NAN;
    else
      for (size_t i = 0; i < count; i++) ((double *)out)[i] = NAN;
  }
}

/* OpenBLAS's thread count is the process's: the first of the calls that
 * overlap (from several threads) sets it to 1, and the last gives the
 * host's back, so that no call computes with the host's count restored
 * under it, nor leaves the host at 1. */
static pthread_mutex_t blas_mu = PTHREAD_MUTEX_INITIALIZER;
static int blas_calls, blas_host;
static int blas_most; /* the most threads that computed in one call so far: their OpenBLAS buffers are kept */

static int blas_held(void) {
  pthread_mutex_lock(&blas_mu);
  int n = blas_most;
  pthread_mutex_unlock(&blas_mu);
  return n;
}

static void blas_computed(int threads) {
  pthread_mutex_lock(&blas_mu);
  if (threads > blas_most) blas_most = threads;
  pthread_mutex_unlock(&blas_mu);
}

/* fork() while a call computes in another thread: the child has none of
 * the parent's calls, so its count starts again at 0, and the host's count
 * (which the child's OpenBLAS does not have: it got the 1) is given back at
 * the end of its first call. The mutex is held across the fork so that the
 * child's copy is not locked by a thread it does not have. (It kept the
 * count, and OpenBLAS at 1 thread for good.) */
static int blas_forked;
static _Thread_local int blas_mine; /* this thread's calls under way (a callback may call again) */
static void blas_fork_prepare(void) { pthread_mutex_lock(&blas_mu); }
static void blas_fork_parent(void) { pthread_mutex_unlock(&blas_mu); }
static void blas_fork_child(void) {
  /* The forking thread's own calls go on in the child (a fork from a
   * progress callback: starting it at 0, their end took the count to -1
   * and the host's count never came back); the other threads' do not. */
  if (blas_calls != blas_mine) {
    blas_calls = blas_mine;
    if (!blas_calls) blas_forked = 1;
  }
  pthread_mutex_unlock(&blas_mu);
}
__attribute__((constructor)) static void blas_fork_handlers(void) {
  (void)pthread_atfork(blas_fork_prepare, blas_fork_parent, blas_fork_child);
}

static void blas_single_enter(void) {
  pthread_mutex_lock(&blas_mu);
  blas_mine++;
  if (blas_calls++ == 0) {
    if (!blas_forked) blas_host = ntk_cpu_blas_threads();
    blas_forked = 0;
    ntk_cpu_set_blas_threads(1);
  }
  pthread_mutex_unlock(&blas_mu);
}

static void blas_single_leave(void) {
  pthread_mutex_lock(&blas_mu);
  blas_mine--;
  if (--blas_calls == 0) ntk_cpu_set_blas_threads(blas_host);
  pthread_mutex_unlock(&blas_mu);
}

/* The devices of the pool: GPUs first (auto: where the network runs on
 * them; one engine per distinct GPU), the other threads on the CPU. */
static ntkd_status pool_devices(const ntkd_compute_options *o, const struct ntk_arch *arch,
                                const struct ntk_dataset *data, struct ntk_pool_device **out, int *n) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = o->threads > 0 ? o->threads : (cores > 0 ? (int)cores : 1);
  /* Each thread's OpenBLAS calls take a buffer of 128 MiB, and under an
   * address-space limit (ulimit -v, RLIMIT_AS) a call that cannot get one
   * retries for ever (base/cpuinit.h): as many threads as the limit holds,
   * and an error where it holds none, never a call that spins. A thread
   * beyond the first also reserves its stack (8 MiB) and a malloc arena
   * (64 MiB): 2 threads spun at 600 MiB where 128 MiB each fitted. The
   * threads of an earlier call left theirs: only more threads need room. */
  const double per_thread = 72.0 * 1024 * 1024;
  int held = blas_held();
  while (threads > 1 && ntk_cpu_check_address_space_threads(threads, held, per_thread) != NTK_OK) threads--;
  if (ntk_cpu_check_address_space_threads(threads, held, per_thread) != NTK_OK) return fail(NTK_ENOMEM);
  struct ntk_pool_device *dev = calloc((size_t)threads, sizeof *dev);
  if (!dev) return fail(ntk_error(NTK_ENOMEM, "out of memory"));
  int k = 0;
  const struct ntk_backend_ops *cuda = ntk_backend_find("cuda");
  if (o->device != NTKD_DEVICE_CPU) {
    char why[512] = "this ntkd was built without CUDA";
    struct ntk_gpu_view *v = calloc(1, sizeof *v);
    int computes = v && cuda && ntk_backend_gpu_computes(arch, data, why, sizeof why);
    if (v && computes) {
      ntk_backend_gpu_list(0, v);
      v->computes = 1;
      for (int g = 0; g < v->n && k < threads; g++) { /* distinct physical GPUs, in this process's order */
        int seen = 0;
        for (int e = 0; e < g; e++) seen |= !memcmp(v->dev[e].uuid, v->dev[g].uuid, NTK_GPU_UUID_BYTES);
        if (!seen) dev[k++] = (struct ntk_pool_device){cuda, g};
      }
      if (v->n <= 0) snprintf(why, sizeof why, "%s", v->why);
    }
    free(v);
    if (o->device == NTKD_DEVICE_CUDA && !k) {
      free(dev);
      ntk_error(NTK_ECONFIG, "device = cuda, but no GPU computes this network here: %s", why);
      return NTKD_ERROR_DEVICE;
    }
  }
  if (o->device != NTKD_DEVICE_CUDA)
    for (const struct ntk_backend_ops *cpu = ntk_backend_find("cpu"); k < threads;) dev[k++] = (struct ntk_pool_device){cpu, -1};
  *out = dev;
  *n = k;
  return NTKD_OK;
}

/* The tiles: symmetric, the lower triangle of n x n; against x2, the
 * block x2 x x1 of the dataset [x1; x2]. */
static struct ntk_tile *make_tiles(size_t n1, size_t n2, int symmetric, uint64_t T, size_t *count) {
  uint64_t b1 = (n1 + T - 1) / T, b2 = (n2 + T - 1) / T;
  size_t n = symmetric ? (size_t)(b1 * (b1 + 1) / 2) : (size_t)(b1 * b2);
  struct ntk_tile *t = malloc((n ? n : 1) * sizeof *t);
  if (!t) return NULL;
  size_t k = 0;
  if (symmetric) {
    struct ntk_tiling tg;
    ntk_tiling_init(&tg, n1, T);
    for (uint64_t i = 0; i < tg.ntiles; i++) t[k++] = ntk_tiling_tile(&tg, i);
  } else {
    for (uint64_t i = 0; i < b2; i++)
      for (uint64_t j = 0; j < b1; j++) {
        uint64_t r0 = n1 + i * T, c0 = j * T;
        t[k] = (struct ntk_tile){k, b1 + i, j, r0, n1 + n2 - r0 < T ? n1 + n2 - r0 : T, c0, n1 - c0 < T ? n1 - c0 : T};
        k++;
      }
  }
  *count = k;
  return t;
}

/* The engines number the samples of [x1; x2]: a sample or an entry a
 * failure names is not the result's [row, column]; the message says how
 * the numbers map. */
static void joined_numbers(size_t n1) {
  ntk_error(NTK_ENONFINITE, "%s (the samples, rows and columns named count x1's samples and then x2's: x2's sample i "
            "is %zu + i; entry (row r, column c) with r >= %zu > c is the result's [c, r - %zu], one with r = c a "
            "sample with itself, which the result does not hold)", ntk_error_message(), n1, n1, n1);
}

/* Whether the n1 bytes at a and the n2 bytes at b share a byte. */
static int overlap(const void *a, size_t n1, const void *b, size_t n2) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return a && b && n1 && n2 && x < y + n2 && y < x + n1;
}

/* The outputs asked for may not share a byte with each other, nor, where
 * the engines read x1 in place (x1 against itself, no patterns: the data
 * are not copied), with x1: tiles written over the samples would be
 * computed from results (510 of 576 entries wrong). Against x2, or with
 * patterns, the samples are copied first. */
static ntkd_status check_overlaps(const ntkd_data *x1, const ntkd_data *x2, int graph, size_t d, unsigned kernels,
                                  const void *nngp, const void *ntk, const char *fn) {
  size_t es = (size_t)x1->dtype, n2 = x2 ? x2->n : x1->n, out = x1->n * n2 * es;
  const void *g = kernels & NTKD_NNGP ? nngp : NULL, *t = kernels & NTKD_NTK ? ntk : NULL;
  const char *names[2] = {"nngp", "ntk"};
  const void *outs[2] = {g, t};
  for (int k = 0; k < 2 && !x2 && !graph; k++) {
    if (outs[k] && overlap(outs[k], out, x1->x, x1->n * d * es)) {
      ntk_error(NTK_EUSAGE, "%s: the %s output overlaps x1 (the results would overwrite the samples they are "
                "computed from): give it a buffer of its own", fn, names[k]);
      return NTKD_ERROR_USAGE;
    }
  }
  if (overlap(g, out, t, out)) return usage("%s: the nngp and ntk outputs overlap: give each a buffer of its own", fn);
  return NTKD_OK;
}

/* The first value of n patterns of v values that is not finite, as an
 * error naming it; NTKD_OK if all are. */
static ntkd_status check_pattern(const void *p, size_t n, size_t v, int dtype, const char *name) {
  for (size_t i = 0; i < n * v; i++) {
    double x = dtype == NTKD_FLOAT32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
    if (!isfinite(x)) {
      ntk_error(NTK_EINPUT, "%s: value %zu of sample %zu's pattern is %s", name, i % v, i / v, isnan(x) ? "NaN" : "inf");
      return NTKD_ERROR_INPUT;
    }
  }
  return NTKD_OK;
}

/* Sample rows of d features, each followed by its pattern of v values (v 0:
 * none), from x (n x d) and p (n x v) into dst. */
static void pack_rows(char *dst, const ntkd_data *x, const void *p, size_t d, size_t v, size_t es) {
  for (size_t i = 0; i < x->n; i++) {
    memcpy(dst + i * (d + v) * es, (const char *)x->x + i * d * es, d * es);
    if (v) memcpy(dst + (i * (d + v) + d) * es, (const char *)p + i * v * es, v * es);
  }
}

static ntkd_status compute_kernels(const ntkd_net *net, const ntkd_data *x1, const void *p1, const ntkd_data *x2,
                                   const void *p2, int graph, size_t positions, unsigned kernels, void *nngp,
                                   void *ntk, const ntkd_compute_options *options);

ntkd_status ntkd_kernels(const ntkd_net *net, const ntkd_data *x1, const ntkd_data *x2, unsigned kernels,
                         void *nngp, void *ntk, const ntkd_compute_options *options) {
  RETURN_IN_C_LOCALE(ntkd_status, done(compute_kernels(net, x1, NULL, x2, NULL, 0, 0, kernels, nngp, ntk, options)));
}

ntkd_status ntkd_kernels_graph(const ntkd_net *net, const ntkd_data *x1, const void *pattern1, const ntkd_data *x2,
                               const void *pattern2, size_t positions, unsigned kernels, void *nngp, void *ntk,
                               const ntkd_compute_options *options) {
  RETURN_IN_C_LOCALE(ntkd_status,
                     done(compute_kernels(net, x1, pattern1, x2, pattern2, 1, positions, kernels, nngp, ntk, options)));
}

static ntkd_status compute_kernels(const ntkd_net *net, const ntkd_data *x1, const void *p1, const ntkd_data *x2,
                                   const void *p2, int graph, size_t positions, unsigned kernels, void *nngp,
                                   void *ntk, const ntkd_compute_options *options) {
  const char *fn = graph ? "ntkd_kernels_graph" : "ntkd_kernels";
  if (!net || !x1) return usage("%s: net and x1 are needed", fn);
  if (!kernels || (kernels & ~(unsigned)(NTKD_NNGP | NTKD_NTK)))
    return usage("%s: kernels is NTKD_NNGP, NTKD_NTK or both", fn);
  if (((kernels & NTKD_NNGP) && !nngp) || ((kernels & NTKD_NTK) && !ntk))
    return usage("%s: no output buffer for a kernel asked for", fn);
  ntkd_compute_options o;
  ntkd_compute_options_init(&o);
  if (options) o = *options;
  if (o.threads < 0 || o.device < NTKD_DEVICE_AUTO || o.device > NTKD_DEVICE_CUDA)
    return usage("%s: threads must be >= 0 and device NTKD_DEVICE_AUTO, _CPU or _CUDA", fn);
  size_t d, h, w, c, d2, h2, w2, c2;
  ntkd_status ps = sample_shape(x1, "x1", &d, &h, &w, &c);
  if (!ps && x2) ps = sample_shape(x2, "x2", &d2, &h2, &w2, &c2);
  if (ps) return ps;
  if (x2 && (x2->dtype != x1->dtype || x2->ndim != x1->ndim || d2 != d || h2 != h || w2 != w || c2 != c))
    return usage("%s: x2 must have x1's dtype and per-sample shape", fn);
  size_t row = d * (size_t)x1->dtype; /* both arrays together ([x1; x2]) and each output, n1 x n2 */
  if (x2 && x2->n > SIZE_MAX / row - x1->n) return usage("%s: x1 and x2 together are more bytes than a size_t holds", fn);
  if (x1->n && (x2 ? x2->n : x1->n) > SIZE_MAX / (size_t)x1->dtype / x1->n)
    return usage("%s: an n1 x n2 output is more bytes than a size_t holds", fn);
  if ((ps = check_values(x1, d, "x1")) || (x2 && (ps = check_values(x2, d, "x2")))) return ps;
  if ((ps = check_overlaps(x1, x2, graph, d, kernels, nngp, ntk, fn))) return ps;
  /* a graph's patterns: positions x positions values per sample, after its features in the engines' rows */
  size_t v = 0;
  if (graph) {
    if (!p1 || (x2 && !p2)) return usage("%s: a pattern for x1, and for x2 where it is given", fn);
    if (!x2 && p2) return usage("%s: pattern2 without x2 (x1 against itself takes pattern1 for both)", fn);
    if (x1->ndim < 2) return usage("%s: a pattern needs samples of shape (length, channels) or (height, width, "
                                   "channels)", fn);
    if (!positions) positions = h * w; /* the sample's own */
    if (positions > ((size_t)1 << 16)) return usage("%s: more than 65536 positions to aggregate", fn);
    v = positions * positions;
    if ((x1->n && x1->n > SIZE_MAX / (d + v) / (size_t)x1->dtype) ||
        (x2 && x2->n > SIZE_MAX / ((d + v) * (size_t)x1->dtype) - x1->n))
      return usage("%s: the samples with their patterns are more bytes than a size_t holds", fn);
    if ((ps = check_pattern(p1, x1->n, v, x1->dtype, "pattern1")) ||
        (x2 && (ps = check_pattern(p2, x2->n, v, x1->dtype, "pattern2"))))
      return ps;
  }
  size_t n1 = x1->n, n2 = x2 ? x2->n : x1->n, es = (size_t)x1->dtype;
  if (!n1 || !n2) return NTKD_OK;

  /* The dataset the engines compute on: x1, or [x1; x2] (each row with its pattern). */
  struct ntk_dataset data = {n1 + (x2 ? n2 : 0), d + v, h, w, c, (int)es, (void *)x1->x, 0, x1->ndim == 2, v};
  char *both = NULL;
  if (x2 || v) {
    if (!(both = malloc((n1 + (x2 ? n2 : 0)) * (d + v) * es)))
      return fail(ntk_error(NTK_ENOMEM, "out of memory for the data"));
    pack_rows(both, x1, p1, d, v, es);
    if (x2) pack_rows(both + n1 * (d + v) * es, x2, p2, d, v, es);
    data.x = both;
  }
  int mask = NTK_KERNEL_NNGP | ((kernels & NTKD_NTK) ? NTK_KERNEL_NTK : 0);
  struct ntk_problem prob = {.arch = &net->arch, .data = &data, .kernels = mask, .device = -1, .stop = {{o.cancel, NULL}, NULL}};
  int cnn = ntk_cnn_applies(&net->arch, &data);
  uint64_t T = o.tile ? o.tile : cnn ? 16 : 512;
  if (T > NTK_STORE_MAX_TILE) T = NTK_STORE_MAX_TILE;
  struct ntk_tiling tiling;
  ntk_tiling_init(&tiling, data.n, T);
  size_t ntiles = 0;
  struct ntk_tile *tiles = make_tiles(n1, n2, !x2, T, &ntiles);
  struct ntk_pool_device *dev = NULL;
  int ndev = 0;
  ntk_pool_t *pool = NULL;
  ntkd_status out = tiles ? NTKD_OK : fail(ntk_error(NTK_ENOMEM, "out of memory"));
  /* No more threads than tiles: a count past them (options not made by
   * ntkd_compute_options_init) would only allocate. */
  if (o.threads > 0 && (size_t)o.threads > ntiles) o.threads = ntiles ? (int)ntiles : 1;
  if (!out) out = pool_devices(&o, &net->arch, &data, &dev, &ndev);
  /* Each thread computes with one OpenBLAS thread, as each rank of a job
   * does (and gets the same bits); the count is given back after. */
  blas_single_enter();
  if (!out) {
    int nthreads = ndev < (int)ntiles ? ndev : (int)ntiles;
    ntk_status st = ntk_pool_create(&prob, dev, nthreads, &tiling, &pool);
    if (!st) blas_computed(nthreads);
    if (st == NTK_ENONFINITE && x2) joined_numbers(n1);
    if (st == NTK_EINTERRUPTED) /* the samples' variances of a deep network take a while */
      out = fail(ntk_error(st, "cancelled before the first tile: %s", ntk_error_message()));
    else if (st)
      out = fail(ntk_error(st, "%s", ntk_error_message()));
  }
  struct sink k = {kernels & NTKD_NNGP ? nngp : NULL, kernels & NTKD_NTK ? ntk : NULL, es, n1, n2, !x2,
                   (mask & NTK_KERNEL_NTK) != 0};
  if (!out) {
    ntk_status st = ntk_pool_run(pool, tiles, ntiles, deliver, &k, o.progress, o.progress_arg);
    if (st == NTK_ENONFINITE && x2) joined_numbers(n1);
    if (st) out = fail(st);
  } else if (o.progress && tiles) {
    /* Stopped or failed before the tiles ran (a cancel during the
     * variances, a network that does not fit): the last word all the same */
    (void)o.progress(o.progress_arg, 0, ntk_tiles_entries(tiles, ntiles));
  }
  /* Whatever stopped it (a cancel, before or inside a tile, a network
   * that does not fit the data, a failure): nothing in the outputs is a
   * result. */
  if (out) unfinished(&k);
  blas_single_leave();
  ntk_pool_free(pool);
  free(dev);
  free(tiles);
  free(both);
  return out;
}

/* ---- stores ------------------------------------------------------------------------ */

struct ntkd_store {
  ntk_store_t *s;
};

static ntkd_status store_open(const char *path, ntkd_store **store) {
  if (!store) return usage("%s: no place for the store (store is NULL)", "ntkd_store_open");
  *store = NULL;
  if (!path) return usage("%s: no path", "ntkd_store_open");
  ntkd_store *h = calloc(1, sizeof *h);
  if (!h) return fail(ntk_error(NTK_ENOMEM, "out of memory"));
  ntk_status st = ntk_store_open(path, NTK_STORE_READ, &h->s);
  if (st) {
    free(h);
    return fail(st);
  }
  *store = h;
  return NTKD_OK;
}

ntkd_status ntkd_store_open(const char *path, ntkd_store **store) {
  RETURN_IN_C_LOCALE(ntkd_status, done(store_open(path, store)));
}

void ntkd_store_close(ntkd_store *store) {
  if (!store) return;
  ntk_store_close(store->s);
  free(store);
}

static ntkd_status store_get_info(const ntkd_store *store, ntkd_store_info *info) {
  if (!store || !info) return usage("%s: store and info are needed", "ntkd_store_get_info");
  const struct ntk_store_info *in = ntk_store_get_info(store->s);
  memset(info, 0, sizeof *info);
  info->n = in->n;
  info->n_train = in->n_train;
  info->test_test = in->test_test;
  info->dtype = (int)in->elem;
  info->kernels = (in->kernels & NTK_KERNEL_NNGP ? NTKD_NNGP : 0u) | (in->kernels & NTK_KERNEL_NTK ? NTKD_NTK : 0u);
  info->tile = in->tile;
  info->tiles = ntk_store_tiling(store->s)->needed;
  info->tiles_done = ntk_store_tiles_done(store->s);
  info->damaged = ntk_store_is_damaged(store->s);
  snprintf(info->description, sizeof info->description, "%s", in->description);
  return NTKD_OK;
}

ntkd_status ntkd_store_get_info(const ntkd_store *store, ntkd_store_info *info) {
  RETURN_IN_C_LOCALE(ntkd_status, done(store_get_info(store, info)));
}

static ntkd_status store_read(ntkd_store *store, unsigned kernel, uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1,
                              void *out, size_t ld) {
  if (!store || (!out && r1 > r0 && c1 > c0)) return usage("%s: store and out are needed", "ntkd_store_read");
  if (kernel != NTKD_NNGP && kernel != NTKD_NTK) return usage("%s: kernel is NTKD_NNGP or NTKD_NTK", "ntkd_store_read");
  ntk_status st = ntk_store_read_block(store->s, kernel == NTKD_NTK ? NTK_KERNEL_NTK : NTK_KERNEL_NNGP, r0, r1, c0, c1,
                                       out, ld);
  return st ? fail(st) : NTKD_OK;
}

ntkd_status ntkd_store_read(ntkd_store *store, unsigned kernel, uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1,
                            void *out, size_t ld) {
  RETURN_IN_C_LOCALE(ntkd_status, done(store_read(store, kernel, r0, r1, c0, c1, out, ld)));
}
