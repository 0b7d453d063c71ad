/* The tile engine (worker/engine.h): a backend, a check that every value
 * is finite, and the codec, with compression threads for a backend that
 * leaves the host's cores free. MPI-free. */
#include "worker/engine.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/codec.h"
#include "base/defs.h"
#include "base/fpbits.h"
#include "base/clock.h"
#include "base/signals.h"
#include "kernels/dataset.h"
#include "store/store.h"

/* A tile buffer of the engine: the raw values (from the backend's
 * host_alloc: pinned memory for the CUDA backend) and the record (room for
 * the store's record header, the payload, room for the padding; page
 * aligned, so that it can be written as it is). Owned by the calling thread while FREE or TAKEN (and
 * while compute_tile fills a FREE one), by one compression thread while
 * BUSY; every state change is under the engine's mutex. */
enum { SLOT_FREE, SLOT_QUEUED, SLOT_BUSY, SLOT_DONE, SLOT_TAKEN };

struct slot {
  unsigned char *raw; /* nngp then ntk */
  unsigned char *msg; /* record: NTK_STORE_RECORD_HEADER bytes, payload, padding */
  struct ntk_result_header h;
  int state;
  uint64_t seq; /* submission order: results are taken in it */
  struct ntk_tile t;
  double compute_s;
  int conts;     /* ntk_continued() when its compute began */
  ntk_status st; /* of the check and compression */
  char err[2048];
  size_t len;
  uint64_t checksum;
};

struct ntk_engine {
  const struct ntk_backend_ops *be;
  void *ctx;
  const struct ntk_arch *arch;       /* the problem's (it outlives the engine): a zero */
  const struct ntk_dataset *data;    /* self-entry's recomputation (zero_verdict) */
  int ntk_zero_ok;                   /* a zero NTK self-entry was 0 in float64 too (zero_verdict) */
  ntk_codec_t *codec; /* the calling thread's (ntk_engine_run, and submit without threads) */
  int elem, kernels;
  size_t raw_cap, msg_cap;
  int nthreads, nslots;
  struct slot *slots;
  ntk_codec_t **codecs; /* one per compression thread */
  pthread_t *threads;
  int started; /* threads running */
  pthread_mutex_t mu;
  pthread_cond_t work; /* a slot was queued, or closing */
  pthread_cond_t done; /* a slot is done */
  int closing;
  uint64_t next_seq;
  void (*hook)(void *arg, const struct ntk_tile *t);
  void *hook_arg;
};

static void finish_tile(ntk_engine_t *e, ntk_codec_t *codec, struct slot *s);

static void *compress_main(void *arg) {
  ntk_engine_t *e = ((void **)arg)[0];
  ntk_codec_t *codec = ((void **)arg)[1];
  free(arg);
  pthread_mutex_lock(&e->mu);
  for (;;) {
    struct slot *s = NULL;
    while (!e->closing) {
      for (int i = 0; i < e->nslots; i++)
        if (e->slots[i].state == SLOT_QUEUED && (!s || e->slots[i].seq < s->seq)) s = &e->slots[i];
      if (s) break;
      pthread_cond_wait(&e->work, &e->mu);
    }
    if (e->closing) break;
    s->state = SLOT_BUSY;
    pthread_mutex_unlock(&e->mu);
    finish_tile(e, codec, s);
    pthread_mutex_lock(&e->mu);
    s->state = SLOT_DONE;
    pthread_cond_broadcast(&e->done);
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
}

int ntk_engine_host_threads(int online, int allowed, int cpu_workers, int device_workers, double memory,
                            double buffer) {
  if (device_workers < 1) return 0;
  int free_cores = online - (cpu_workers > 0 ? cpu_workers : 0);
  int share = free_cores / device_workers;
  if (share > allowed) share = allowed;
  /* a thread holds a tile buffer: a quarter of the memory among the device workers */
  double fit = buffer > 0 ? memory / 4 / device_workers / buffer - 1 : share;
  if (fit < share) share = fit > 0 ? (int)fit : 0;
  return share > 0 ? share : 0;
}

/* Compression threads: NTKD_COMPRESS_THREADS (0-64) to try another number
 * (benchmarks; the pipelined message loop under the CPU backend in the
 * end-to-end tests); else for a backend that has them (a device's) the
 * larger of its compress_threads and the cores its node leaves it
 * (p->host_threads), at most 64. */
static int compress_threads(const struct ntk_backend_ops *be, const struct ntk_problem *p) {
  const char *v = getenv("NTKD_COMPRESS_THREADS");
  if (v && *v) {
    char *end;
    long n = strtol(v, &end, 10);
    if (!*end && n >= 0 && n <= 64) return (int)n;
    fprintf(stderr, "ntkd: NTKD_COMPRESS_THREADS=%s is not a number from 0 to 64: ignored\n", v);
  }
  if (be->compress_threads <= 0) return 0;
  int n = p->host_threads > be->compress_threads ? p->host_threads : be->compress_threads;
  return n < 64 ? n : 64;
}

ntk_status ntk_engine_create(const struct ntk_problem *p, const struct ntk_backend_ops *be, int level,
                             const struct ntk_tiling *tiling, int held, ntk_engine_t **out) {
  *out = NULL;
  ntk_engine_t *e = calloc(1, sizeof *e);
  if (!e) return ntk_error(NTK_ENOMEM, "out of memory");
  e->be = be;
  e->elem = p->data->elem;
  e->kernels = p->kernels;
  e->arch = p->arch;
  e->data = p->data;
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->work, NULL);
  pthread_cond_init(&e->done, NULL);
  size_t edge = (size_t)(tiling->tile < tiling->n ? tiling->tile : tiling->n);
  e->raw_cap = edge * edge * (size_t)e->elem * ((p->kernels & NTK_KERNEL_NTK) ? 2 : 1);
  e->msg_cap = NTK_STORE_RECORD_HEADER + ntk_codec_bound(e->raw_cap) + NTK_STORE_HEADER_SIZE;
  e->nthreads = compress_threads(be, p);
  /* One buffer being computed while each thread compresses another, and
   * those the caller keeps taken meanwhile. */
  e->nslots = e->nthreads + 1 + (held > 0 ? held : 0);
  e->slots = calloc((size_t)e->nslots, sizeof *e->slots);
  e->codecs = calloc((size_t)e->nthreads + 1, sizeof *e->codecs);
  e->threads = calloc((size_t)e->nthreads + 1, sizeof *e->threads);
  e->codec = ntk_codec_create(level);
  ntk_status st = NTK_OK;
  if (!e->slots || !e->codecs || !e->threads || !e->codec) st = ntk_error(NTK_ENOMEM, "out of memory");
  for (int i = 0; !st && i < e->nthreads; i++)
    if (!(e->codecs[i] = ntk_codec_create(level))) st = ntk_error(NTK_ENOMEM, "out of memory");
  if (!st) st = be->create(p, &e->ctx);
  for (int i = 0; !st && i < e->nslots; i++) {
    struct slot *s = &e->slots[i];
    s->raw = be->host_alloc ? be->host_alloc(e->ctx, e->raw_cap) : malloc(e->raw_cap);
    if (posix_memalign((void **)&s->msg, NTK_STORE_HEADER_SIZE, e->msg_cap)) s->msg = NULL;
    if (!s->raw || !s->msg)
      st = ntk_error(NTK_ENOMEM, "out of memory for tile buffers (%d x %zu bytes)", e->nslots, e->raw_cap + e->msg_cap);
  }
  for (int i = 0; !st && i < e->nthreads; i++) {
    void **arg = malloc(2 * sizeof *arg);
    if (!arg) {
      st = ntk_error(NTK_ENOMEM, "out of memory");
      break;
    }
    arg[0] = e;
    arg[1] = e->codecs[i];
    if (pthread_create(&e->threads[i], NULL, compress_main, arg)) {
      free(arg);
      st = ntk_error(NTK_EINTERNAL, "cannot start a compression thread");
      break;
    }
    e->started++;
  }
  if (st) {
    ntk_engine_free(e);
    return st;
  }
  *out = e;
  return NTK_OK;
}

void ntk_engine_free(ntk_engine_t *e) {
  if (!e) return;
  /* Threads finish the tile in hand and leave; queued ones are dropped. */
  pthread_mutex_lock(&e->mu);
  e->closing = 1;
  pthread_cond_broadcast(&e->work);
  pthread_mutex_unlock(&e->mu);
  for (int i = 0; i < e->started; i++) pthread_join(e->threads[i], NULL);
  for (int i = 0; e->slots && i < e->nslots; i++) {
    if (e->be->host_free)
      e->be->host_free(e->ctx, e->slots[i].raw);
    else
      free(e->slots[i].raw);
    free(e->slots[i].msg);
  }
  if (e->ctx) e->be->destroy(e->ctx);
  for (int i = 0; e->codecs && i < e->nthreads; i++) ntk_codec_free(e->codecs[i]);
  ntk_codec_free(e->codec);
  free(e->codecs);
  free(e->threads);
  free(e->slots);
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->work);
  pthread_cond_destroy(&e->done);
  free(e);
}

int ntk_engine_threads(const ntk_engine_t *e) { return e->nthreads; }

int ntk_engine_depth(const ntk_engine_t *e) { return e->nthreads + 2; }

void ntk_engine_set_hook(ntk_engine_t *e, void (*hook)(void *arg, const struct ntk_tile *t), void *arg) {
  e->hook = hook;
  e->hook_arg = arg;
}

/* find_nonfinite_f and _d: the first of a kernel's values that is not finite. */
#define EACH_PRECISION_FILE "worker/engine_impl.h"
#include "kernels/each_precision.h"

/* NTK_ENONFINITE naming the first non-finite entry of one kernel's
 * rows x cols values, if any. The data are checked finite when loaded, so
 * a value that is not comes from an intermediate that left the
 * precision's range (overflow, or an underflow to 0 later divided by), or
 * from a map outside its domain (Gaussian with b > 0 once 1 - 2 b q <= 0,
 * as in neural-tangents): the hint says what to change. */
static ntk_status check_finite(const struct ntk_tile *t, const void *vals, int elem, const char *kernel) {
  size_t count = (size_t)(t->rows * t->cols);
  size_t at = elem == 4 ? find_nonfinite_f(vals, count) : find_nonfinite_d(vals, count);
  if (at == count) return NTK_OK;
  double v = elem == 4 ? (double)((const float *)vals)[at] : ((const double *)vals)[at];
  const char *what = isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf";
  const char *hint = elem == 4 ? "the kernel, or a variance inside the network, exceeds float32; use [compute] "
                                 "precision = float64 (or a "
                                 "nonlinearity is undefined there: Gaussian with b > 0 and large variances; or LayerNorm with "
                                 "eps = 0 after a sample of zero variance)"
                               : "the kernel, or a product of variances inside a map, exceeds even the float64 "
                                 "range: the inputs are too large (a variance past ~1e150), or the network is too deep "
                                 "for its w_std and b_std (the variances grow or shrink by a factor per layer), or a "
                                 "nonlinearity is undefined there (Gaussian with b > 0 and large variances), or a LayerNorm "
                                 "with eps = 0 divides by a sample's zero variance";
  return ntk_error(NTK_ENONFINITE, "%s entry (row %llu, column %llu) is %s: %s", kernel,
                   (unsigned long long)(t->r0 + at / t->cols), (unsigned long long)(t->c0 + at % t->cols), what,
                   hint);
}

/* Whether sample i has a value that is not 0, read from the bits: under
 * DAZ a subnormal compares equal to 0. */
/* A float32 value as a double from its bits (ntk_fp_class). */
static double widen(float f) {
  double v;
  (void)ntk_fp_class(&f, 4, &v);
  return v;
}

/* Sample i's NNGP (which 0) or NTK (1) with itself, computed by the CPU
 * backend on that sample alone, into *out: a double (elem 8: the float32
 * data widened bit for bit) or a float, in the job's float32 (elem 4). */
static ntk_status self_entry(const ntk_engine_t *e, size_t i, int which, int elem, void *out) {
  const struct ntk_dataset *ds = e->data;
  struct ntk_dataset one = *ds;
  one.n = 1;
  one.n_train = 0;
  one.elem = elem;
  void *x = malloc(ds->d * (size_t)elem);
  if (!x) return ntk_error(NTK_ENOMEM, "out of memory");
  for (size_t k = 0; k < ds->d; k++) {
    if (elem == 4) ((float *)x)[k] = ((const float *)ds->x)[i * ds->d + k]; /* the job's own float32 data */
    else ((double *)x)[k] = ds->elem == 4 ? widen(((const float *)ds->x)[i * ds->d + k])
                                          : ((const double *)ds->x)[i * ds->d + k];
  }
  one.x = x;
  struct ntk_problem p = {.arch = e->arch, .data = &one,
                          .kernels = which ? NTK_KERNEL_NNGP | NTK_KERNEL_NTK : NTK_KERNEL_NNGP};
  struct ntk_tile t = {.rows = 1, .cols = 1};
  void *ctx = NULL;
  unsigned char v[2 * sizeof(double)] = {0}; /* NNGP, then NTK, of elem bytes each */
  ntk_status st = ntk_backend_cpu.create(&p, &ctx);
  if (!st) st = ntk_backend_cpu.compute_tile(ctx, &t, v, which ? v + elem : NULL);
  memcpy(out, v + (which ? elem : 0), (size_t)elem);
  ntk_backend_cpu.destroy(ctx);
  free(x);
  return st;
}

/* Whether the network maps every input to 0 by a layer that does
 * (ntk_layer_vanishes) on the path to its output: in a residual block
 * every branch of a sum (ntk_vanish_step). Its zero kernel is its value;
 * FanOut(2) parallel(Dense(W_std=0, b_std=0), Dense) FanInSum Relu Dense
 * is not 0 by the network, and its 0 on data x 1e-170 was stored. */
static int arch_vanishes(const struct ntk_arch *arch) {
  struct ntk_vanish zv = {0};
  for (size_t i = 0; i < arch->n; i++) ntk_vanish_step(&zv, &arch->layers[i]);
  return zv.zero;
}

/* A sample's NNGP with itself that came out exactly 0 although the sample
 * is not all zeros. A 300-layer ReLU network at the default w_std = 1 halves
 * its variances per layer: its float32 kernel flushed to 0 everywhere and
 * was stored with exit 0. In a float32 job the entry is recomputed in
 * float64: a value there means float32's range was the cause. A 0 in
 * float64 too is refused as well: either the true value is below even
 * float64's range, or the network maps that sample to 0. A network with a
 * layer that maps everything to 0 (arch_vanishes: w_std = 0, ReLU slopes
 * 0) keeps its 0; any other is refused: a kernel that is 0 on a sample it
 * was given carries nothing of it (a strided layer that skips the
 * sample's only nonzero values would be refused too). The NTK (which 1)
 * can be 0 where the NNGP is not (a network that ends in Sign or a step,
 * whose derivative is 0): its 0 is refused only in a float32 job whose
 * float64 value is not 0 (without a Dense readout, which adds the NNGP to
 * it, an NTK can underflow alone). */
static ntk_status zero_verdict(ntk_engine_t *e, size_t s, int which) {
  if (!ntk_dataset_sample_nonzero(e->data, s)) return NTK_OK; /* a sample of zeros: 0 may be its value */
  /* The NTK comes here from float32 jobs only (judge_self). Its 0 is right
   * where the network ends in Sign or a step, but a network that ends in a
   * nonlinearity without a Dense readout (Dense Erf(1, 1e-25, 1)) has an
   * NTK far below its NNGP, which float32 flushed to 0 with exit 0. It is
   * recomputed in float64 once: a 0 there too is the network's, and so for
   * every sample (ntk_zero_ok). */
  if (which && __atomic_load_n(&e->ntk_zero_ok, __ATOMIC_RELAXED)) return NTK_OK;
  if (e->elem == 4) {
    double w;
    ntk_status st = self_entry(e, s, which, 8, &w);
    if (st) return st;
    if (w != 0)
      return ntk_error(NTK_ENONFINITE, "%s entry (row %zu, column %zu) is 0 in float32 but %.3g in float64: below "
                       "float32's range (%.3g), nothing of it is left; use [compute] precision = float64%s",
                       which ? "NTK" : "NNGP", s, s, w, (double)FLT_MIN,
                       which ? "" : " (or scale the data up: [data] scale; or raise w_std or b_std, if the network's "
                                    "variances shrink per layer)");
    if (which) {
      __atomic_store_n(&e->ntk_zero_ok, 1, __ATOMIC_RELAXED);
      return NTK_OK;
    }
  }
  if (arch_vanishes(e->arch)) return NTK_OK; /* and 0 in float64 too: its value */
  /* A graph's own structure maps samples to 0 exactly: a directed graph
   * without self-loops shallower than the network's Aggregates, edges that
   * read only zeros, signed weights that cancel (a Laplacian on nodes that
   * all look alike). neural-tangents returns that 0, and one such graph
   * among thousands would otherwise end the job (a hunt). Its 0 in float64
   * is its value; an underflow through depth is refused where it enters a
   * nonlinearity (the variance judge), and a float32 0 that float64 does
   * not share above. */
  for (size_t i = 0; i < e->arch->n; i++)
    if (e->arch->layers[i].kind == NTK_LAYER_AGGREGATE) return NTK_OK;
  return ntk_error(NTK_ENONFINITE, "NNGP entry (row %zu, column %zu) is 0 although sample %zu is not all zeros: its "
                   "true value is below float64's range (%.3g: the network is too deep for its w_std and b_std, its "
                   "variances shrink by a factor per layer; raise b_std or w_std), or the network maps the sample to 0 "
                   "(its nonzero values fall where a layer does not look)", s, s, s, DBL_MIN);
}

/* A sample's value with itself, v (in the job's precision), judged: a
 * subnormal is refused, a 0 goes to zero_verdict. A subnormal's true value
 * is not 0 (that would be 0) but below the precision's normal range, and
 * it has kept only the few bits a subnormal has: a float32 job on inputs
 * scaled by 1e-21 stored such a diagonal with exit 0, and its regression's
 * predictions were 5 % off. */
static ntk_status judge_self(ntk_engine_t *e, size_t s, int which, const void *p, const char *kernel) {
  int elem = e->elem;
  /* Classified by the bits (ntk_fp_class); the float32 value widened bit
   * for bit for the message. */
  double v;
  int cls = ntk_fp_class(p, elem, &v), zero = cls == NTK_FP_ZERO, sub = cls == NTK_FP_SUBNORMAL;
  if (zero && (which == 0 || elem == 4)) return zero_verdict(e, s, which);
  if (!sub) return NTK_OK;
  const char *hint = elem == 4 ? "use [compute] precision = float64 (or scale the data up: [data] scale)"
                               : "the network is too deep for its w_std and b_std (the variances shrink by a "
                                 "factor per layer), or the data are too small: scale them up ([data] scale)";
  return ntk_error(NTK_ENONFINITE, "%s entry (row %zu, column %zu) is %.3g, below %s's normal range (%.3g): only a "
                   "few of its bits are left; %s", kernel, s, s, v, elem == 4 ? "float32" : "float64",
                   elem == 4 ? (double)FLT_MIN : DBL_MIN, hint);
}

/* The underflow twin of check_finite: NTK_ENONFINITE naming the first
 * entry of a sample with itself (the diagonal of a diagonal tile) that
 * judge_self refuses. Another entry may be that small and right (a pair
 * of nearly orthogonal samples). */
static ntk_status check_diagonal(ntk_engine_t *e, const struct ntk_tile *t, const void *vals, int which,
                                 const char *kernel) {
  if (t->r0 != t->c0) return NTK_OK;
  size_t n = (size_t)(t->rows < t->cols ? t->rows : t->cols);
  for (size_t i = 0; i < n; i++) {
    size_t at = i * (size_t)t->cols + i;
    ntk_status st = judge_self(e, (size_t)t->r0 + i, which, (const char *)vals + at * (size_t)e->elem, kernel);
    if (st) return st;
  }
  return NTK_OK;
}

/* A tile off the diagonal holds no sample's value with itself: the block
 * x2 x x1 of a library call (kernel_fn(x1, x2)), or a [test] row against
 * the training set. A 300-layer ReLU network's kernel_fn(x1, x2) came back
 * all zeros where kernel_fn(x1) raised. So a row or column of such a tile
 * that is all 0 while its sample is not has that sample's self-entry
 * computed here (the CPU, the job's precision) and judged as the diagonal
 * is; a normal value means the zeros are right (orthogonal samples). Rare:
 * a zero line, not a tile, costs the one entry. */
static ntk_status check_zero_lines(ntk_engine_t *e, const struct ntk_tile *t, const void *vals, int which,
                                   const char *kernel) {
  if (t->r0 == t->c0 || (which == 1 && e->elem == 8)) return NTK_OK;
  size_t rows = (size_t)t->rows, cols = (size_t)t->cols;
  /* Which lines hold a value that is not +-0: OR of the bits without the
   * sign, one pass that vectorises (a subnormal counts as a value). */
  uint64_t *colnz = calloc(cols, sizeof *colnz), *rownz = calloc(rows, sizeof *rownz);
  ntk_status st = colnz && rownz ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory");
  for (size_t i = 0; i < rows && !st; i++) {
    uint64_t any = 0;
    if (e->elem == 4) {
      const uint32_t *r = (const uint32_t *)vals + i * cols;
      for (size_t j = 0; j < cols; j++) {
        uint64_t b = r[j] & 0x7fffffffu;
        any |= b;
        colnz[j] |= b;
      }
    } else {
      const uint64_t *r = (const uint64_t *)vals + i * cols;
      for (size_t j = 0; j < cols; j++) {
        uint64_t b = r[j] & 0x7fffffffffffffffull;
        any |= b;
        colnz[j] |= b;
      }
    }
    rownz[i] = any;
  }
  /* Rows, then columns; an NTK of 0 the network makes (Sign) ends the
   * search (zero_verdict sets ntk_zero_ok). */
  for (size_t k = 0; k < rows + cols && !st; k++) {
    if (which == 1 && __atomic_load_n(&e->ntk_zero_ok, __ATOMIC_RELAXED)) break;
    size_t smp = k < rows ? (size_t)t->r0 + k : (size_t)t->c0 + (k - rows);
    if ((k < rows ? rownz[k] : colnz[k - rows]) || !ntk_dataset_sample_nonzero(e->data, smp)) continue;
    union { double d; float f; } v; /* the job's element */
    st = self_entry(e, smp, which, e->elem, &v);
    if (!st) st = judge_self(e, smp, which, &v, kernel);
  }
  free(colnz);
  free(rownz);
  return st;
}

/* Every value of a computed tile finite, and no sample's value with itself
 * subnormal or a refused 0 (on the diagonal, or behind a line of zeros):
 * NNGP first, then NTK. */
static ntk_status check_tile(ntk_engine_t *e, const struct ntk_tile *t, const unsigned char *raw) {
  size_t one = (size_t)(t->rows * t->cols) * (size_t)e->elem;
  ntk_status st = check_finite(t, raw, e->elem, "NNGP");
  if (!st && (e->kernels & NTK_KERNEL_NTK)) st = check_finite(t, raw + one, e->elem, "NTK");
  if (!st) st = check_diagonal(e, t, raw, 0, "NNGP");
  if (!st && (e->kernels & NTK_KERNEL_NTK)) st = check_diagonal(e, t, raw + one, 1, "NTK");
  if (!st) st = check_zero_lines(e, t, raw, 0, "NNGP");
  if (!st && (e->kernels & NTK_KERNEL_NTK)) st = check_zero_lines(e, t, raw + one, 1, "NTK");
  return st;
}

/* Check, compress and checksum the tile computed into s->raw; the outcome
 * in s (a failure's message in s->err). Any thread, with its own codec. */
static void finish_tile(ntk_engine_t *e, ntk_codec_t *codec, struct slot *s) {
  double t0 = ntk_now();
  if (e->hook) e->hook(e->hook_arg, &s->t);
  const struct ntk_tile *t = &s->t;
  size_t one = (size_t)(t->rows * t->cols) * (size_t)e->elem;
  int two = (e->kernels & NTK_KERNEL_NTK) != 0;
  struct ntk_result_header h;
  unsigned char *body = s->msg + NTK_STORE_RECORD_HEADER;
  /* Never store a value that is not finite. */
  ntk_status st = check_tile(e, t, s->raw);
  if (!st)
    st = ntk_codec_compress(codec, s->raw, one * (two ? 2 : 1), e->elem, body,
                            e->msg_cap - NTK_STORE_RECORD_HEADER - NTK_STORE_HEADER_SIZE, &s->len);
  s->st = st;
  if (st) {
    snprintf(s->err, sizeof s->err, "%s", ntk_error_message());
    return;
  }
  s->checksum = ntk_checksum(body, s->len);
  h.tile = t->index;
  h.len = s->len;
  h.checksum = s->checksum;
  h.seconds = s->compute_s + (ntk_now() - t0); /* the work, not the waits between */
  /* A tile during which the process was stopped (a suspend of the job)
   * says 0: its time is not the work's, and the coordinator's stall limit,
   * 3x the slowest tile, would be 3x the suspend for the rest of the run. */
  if (ntk_continued() != s->conts) h.seconds = 0;
  h.codec = (uint64_t)ntk_codec_id(codec);
  s->h = h;
}

static struct slot *free_slot(ntk_engine_t *e) {
  for (int i = 0; i < e->nslots; i++)
    if (e->slots[i].state == SLOT_FREE) return &e->slots[i];
  return NULL;
}

/* Compute tile t into slot s on the calling thread. */
static ntk_status compute_into(ntk_engine_t *e, struct slot *s, const struct ntk_tile *t) {
  double t0 = ntk_now();
  s->conts = ntk_continued();
  size_t one = (size_t)(t->rows * t->cols) * (size_t)e->elem;
  int two = (e->kernels & NTK_KERNEL_NTK) != 0;
  ntk_status st = e->be->compute_tile(e->ctx, t, s->raw, two ? s->raw + one : NULL);
  s->t = *t;
  s->compute_s = ntk_now() - t0;
  return st;
}

ntk_status ntk_engine_compute(ntk_engine_t *e, const struct ntk_tile *t, const void **vals) {
  *vals = NULL;
  if (ntk_engine_pending(e)) return ntk_error(NTK_EINTERNAL, "ntk_engine_compute with tiles in the pipeline");
  struct slot *s = &e->slots[0]; /* every slot is free: this thread's */
  ntk_status st = compute_into(e, s, t);
  if (!st) st = check_tile(e, t, s->raw);
  if (!st) *vals = s->raw;
  return st;
}

ntk_status ntk_engine_run(ntk_engine_t *e, const struct ntk_tile *t, const void **payload, size_t *len,
                          uint64_t *checksum) {
  if (ntk_engine_pending(e)) return ntk_error(NTK_EINTERNAL, "ntk_engine_run with tiles in the pipeline");
  ntk_status st = ntk_engine_submit(e, t);
  if (st) return st;
  struct ntk_engine_result r;
  if (!ntk_engine_take(e, -1, &r)) return ntk_error(NTK_EINTERNAL, "ntk_engine_run: the tile did not come back");
  ntk_engine_release(e, &r); /* the buffer keeps its bytes until the next submit */
  if (r.status) return r.status; /* message recorded by take */
  *len = r.len;
  *checksum = r.checksum;
  *payload = r.payload;
  return NTK_OK;
}

int ntk_engine_can_submit(ntk_engine_t *e) {
  pthread_mutex_lock(&e->mu);
  int ok = free_slot(e) != NULL;
  pthread_mutex_unlock(&e->mu);
  return ok;
}

int ntk_engine_pending(ntk_engine_t *e) {
  pthread_mutex_lock(&e->mu);
  int n = 0;
  for (int i = 0; i < e->nslots; i++) {
    int k = e->slots[i].state;
    n += k == SLOT_QUEUED || k == SLOT_BUSY || k == SLOT_DONE;
  }
  pthread_mutex_unlock(&e->mu);
  return n;
}

ntk_status ntk_engine_submit(ntk_engine_t *e, const struct ntk_tile *t) {
  pthread_mutex_lock(&e->mu);
  struct slot *s = free_slot(e);
  pthread_mutex_unlock(&e->mu);
  if (!s) return ntk_error(NTK_EINTERNAL, "ntk_engine_submit without a free tile buffer");
  /* Only this thread takes FREE slots: s stays ours while it computes. */
  ntk_status st = compute_into(e, s, t);
  if (st) return st;
  if (!e->nthreads) finish_tile(e, e->codec, s);
  pthread_mutex_lock(&e->mu);
  s->seq = e->next_seq++;
  s->state = e->nthreads ? SLOT_QUEUED : SLOT_DONE;
  pthread_cond_signal(&e->work);
  pthread_mutex_unlock(&e->mu);
  return NTK_OK;
}

int ntk_engine_take(ntk_engine_t *e, double wait, struct ntk_engine_result *r) {
  struct timespec until;
  if (wait > 0) {
    clock_gettime(CLOCK_REALTIME, &until);
    double ns = (double)until.tv_nsec + wait * 1e9;
    until.tv_sec += (time_t)(ns / 1e9);
    until.tv_nsec = (long)fmod(ns, 1e9);
  }
  pthread_mutex_lock(&e->mu);
  struct slot *s;
  for (;;) {
    s = NULL;
    for (int i = 0; i < e->nslots; i++) {
      int k = e->slots[i].state;
      if ((k == SLOT_QUEUED || k == SLOT_BUSY || k == SLOT_DONE) && (!s || e->slots[i].seq < s->seq))
        s = &e->slots[i];
    }
    if (!s || s->state == SLOT_DONE || wait == 0) break;
    if (wait < 0)
      pthread_cond_wait(&e->done, &e->mu);
    else if (pthread_cond_timedwait(&e->done, &e->mu, &until) == ETIMEDOUT)
      wait = 0; /* one last look */
  }
  int got = s && s->state == SLOT_DONE;
  if (got) s->state = SLOT_TAKEN;
  pthread_mutex_unlock(&e->mu);
  if (!got) return 0;
  memset(r, 0, sizeof *r);
  r->tile = s->t.index;
  r->slot = (int)(s - e->slots);
  r->status = s->st;
  if (s->st) {
    ntk_error(s->st, "%s", s->err);
    return 1;
  }
  r->header = s->h;
  r->record = s->msg;
  r->record_cap = e->msg_cap;
  r->payload = s->msg + NTK_STORE_RECORD_HEADER;
  r->len = s->len;
  r->checksum = s->checksum;
  return 1;
}

void ntk_engine_release(ntk_engine_t *e, const struct ntk_engine_result *r) {
  pthread_mutex_lock(&e->mu);
  if (r->slot >= 0 && r->slot < e->nslots && e->slots[r->slot].state == SLOT_TAKEN) e->slots[r->slot].state = SLOT_FREE;
  pthread_mutex_unlock(&e->mu);
}
