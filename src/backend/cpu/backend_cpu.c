/* The CPU backend: OpenBLAS for the input covariance of fully-connected
 * networks (src/kernels/fc.c), pair-wise vectorised C for convolutional ones
 * (src/kernels/cnn.c); an MLP's training with its maths (mlp.c, adam.c). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "kernels/arch.h"
#include "kernels/cnn.h"
#include "kernels/fc.h"

struct cpu_ctx {
  ntk_fc_t *fc;
  ntk_cnn_t *cnn;
  /* A float32 job computed in float64 (ntk_arch_float32_widened, kernels/
   * arch.h): the kernels run on its data in float64 (wide.x), and
   * each value of a tile (wbuf, NNGP then NTK) is rounded to float32 once. */
  struct ntk_dataset wide;
  int wide_shared; /* wide.x is the process's shared copy (widen_data) */
  double *wbuf;
  size_t wcap; /* entries per kernel wbuf holds */
};

/* One float64 copy of a dataset per process, shared by the contexts that
 * compute on it (the library's pool creates one per core): counted, keyed
 * by the float32 data's address and size, which cannot change while a
 * context on them lives. Another dataset meanwhile gets a copy of its own. */
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  const void *src;
  size_t count;
  double *x;
  int refs;
} shared;

/* The float32 data as float64, into c->wide: the problem's data from now on. */
static ntk_status widen_data(struct cpu_ctx *c, const struct ntk_dataset *data) {
  size_t count = data->n * data->d;
  if (data->d && count / data->d != data->n) return ntk_error(NTK_ENOMEM, "the data are too large to widen");
  c->wide = *data;
  c->wide.elem = 8;
  pthread_mutex_lock(&shared_lock);
  if (shared.refs && shared.src == data->x && shared.count == count) {
    c->wide.x = shared.x;
    shared.refs++;
    c->wide_shared = 1;
    pthread_mutex_unlock(&shared_lock);
    return NTK_OK;
  }
  double *w = count <= SIZE_MAX / sizeof(double) ? malloc((count ? count : 1) * sizeof(double)) : NULL;
  if (w) {
    const float *x = data->x;
    for (size_t k = 0; k < count; k++) w[k] = x[k];
    if (!shared.refs) {
      shared.src = data->x, shared.count = count, shared.x = w, shared.refs = 1;
      c->wide_shared = 1;
    }
  }
  pthread_mutex_unlock(&shared_lock);
  c->wide.x = w;
  if (!w)
    return ntk_error(NTK_ENOMEM, "out of memory for the data in float64 (%.3g GB; a float32 job of more than %d "
                     "nonlinear layers, or with a scale whose float32 square is subnormal, computes in float64: "
                     "docs/MATH.md)", (double)count * 8 / 1e9, NTK_FLOAT32_MAX_NONLINEAR);
  return NTK_OK;
}

/* c's float64 data released: the shared copy when its last context goes. */
static void release_wide(struct cpu_ctx *c) {
  if (!c->wide_shared) {
    free(c->wide.x);
  } else {
    pthread_mutex_lock(&shared_lock);
    if (--shared.refs == 0) {
      free(shared.x);
      shared.src = NULL, shared.x = NULL, shared.count = 0;
    }
    pthread_mutex_unlock(&shared_lock);
  }
  c->wide.x = NULL;
  c->wide_shared = 0;
}

static int cpu_available(void) { return 1; }

static ntk_status cpu_create(const struct ntk_problem *p, void **ctx) {
  *ctx = NULL;
  struct cpu_ctx *c = calloc(1, sizeof *c);
  if (!c) return ntk_error(NTK_ENOMEM, "out of memory");
  const struct ntk_dataset *data = p->data;
  ntk_status st = NTK_OK;
  if (data->elem == 4 && ntk_arch_float32_widened(p->arch, NULL, 0)) {
    st = widen_data(c, data);
    data = &c->wide;
  }
  if (!st)
    st = ntk_cnn_applies(p->arch, data) ? ntk_cnn_create(p->arch, data, NTK_CNN_AUTO, &p->stop, &c->cnn)
                                        : ntk_fc_create(p->arch, data, &p->stop, &c->fc);
  if (st) {
    if (c->wide.x) release_wide(c);
    free(c);
    return st;
  }
  *ctx = c;
  return NTK_OK;
}

static ntk_status cpu_compute_tile(void *ctx, const struct ntk_tile *t, void *nngp, void *ntk) {
  struct cpu_ctx *c = ctx;
  if (!c->wide.x) return c->cnn ? ntk_cnn_tile(c->cnn, t, nngp, ntk) : ntk_fc_tile(c->fc, t, nngp, ntk);
  size_t count = t->rows * t->cols;
  if (c->wcap < count) {
    double *b = malloc(2 * count * sizeof *b);
    if (!b) return ntk_error(NTK_ENOMEM, "out of memory for a tile in float64");
    free(c->wbuf);
    c->wbuf = b;
    c->wcap = count;
  }
  double *g = c->wbuf, *w = ntk ? c->wbuf + count : NULL;
  ntk_status st = c->cnn ? ntk_cnn_tile(c->cnn, t, g, w) : ntk_fc_tile(c->fc, t, g, w);
  if (st) return st;
  /* Rounded once: a value beyond float32 becomes inf, which the worker
   * refuses (exit 8), as it would have come out of float32 maps. */
  for (size_t k = 0; k < count; k++) ((float *)nngp)[k] = (float)g[k];
  for (size_t k = 0; w && k < count; k++) ((float *)ntk)[k] = (float)w[k];
  return NTK_OK;
}

/* Training: the host state is the device's. */
struct cpu_mlp {
  struct ntk_mlp m;
  float *state, *work;
};

static ntk_status cpu_mlp_create(const struct ntk_mlp *m, size_t max_batch, int device, float *state, void **ctx) {
  (void)device;
  struct cpu_mlp *c = calloc(1, sizeof *c);
  if (c) c->work = malloc(ntk_mlp_work_floats(m, max_batch ? max_batch : 1) * sizeof *c->work);
  if (!c || !c->work) {
    free(c);
    return ntk_error(NTK_ENOMEM, "out of memory for the MLP's work space");
  }
  c->m = *m;
  c->state = state;
  *ctx = c;
  return NTK_OK;
}

static ntk_status cpu_mlp_grad(void *ctx, const float *x, const int32_t *y, size_t b, float *grad, double *loss,
                               size_t *correct) {
  struct cpu_mlp *c = ctx;
  *loss = ntk_mlp_grad(&c->m, c->state, x, y, b, c->work, grad, correct);
  return NTK_OK;
}

static ntk_status cpu_mlp_adam(void *ctx, const struct ntk_adam *h, uint64_t t, float gscale, const float *g) {
  struct cpu_mlp *c = ctx;
  size_t n = c->m.nparams;
  ntk_adam_update(h, t, gscale, c->state, c->state + n, c->state + 2 * n, g, n);
  return NTK_OK;
}

static void cpu_mlp_destroy(void *ctx) {
  struct cpu_mlp *c = ctx;
  if (c) free(c->work);
  free(c);
}

static void cpu_destroy(void *ctx) {
  struct cpu_ctx *c = ctx;
  if (!c) return;
  ntk_fc_free(c->fc);
  ntk_cnn_free(c->cnn);
  if (c->wide.x) release_wide(c);
  free(c->wbuf);
  free(c);
}

const struct ntk_backend_ops ntk_backend_cpu = {
    .name = "cpu",
    .available = cpu_available,
    .create = cpu_create,
    .compute_tile = cpu_compute_tile,
    .destroy = cpu_destroy,
    /* Its compute uses every core the rank has (OpenBLAS threads, or one
     * core per rank with one rank per core): compressing beside it would
     * only take cores from it. The engine compresses after each tile. */
    .compress_threads = 0,
    .mlp_create = cpu_mlp_create,
    .mlp_grad = cpu_mlp_grad,
    .mlp_adam = cpu_mlp_adam,
    .mlp_destroy = cpu_mlp_destroy,
};
