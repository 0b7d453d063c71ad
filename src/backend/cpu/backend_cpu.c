/* The CPU backend: OpenBLAS for the input covariance of fully-connected
 * networks (src/kernels/fc.c), pair-wise vectorised C for convolutional ones
 * (src/kernels/cnn.c); an MLP's training with its maths (mlp.c, adam.c). */
#include <stdlib.h>

#include "backend/backend.h"
#include "kernels/cnn.h"
#include "kernels/fc.h"

struct cpu_ctx {
  ntk_fc_t *fc;
  ntk_cnn_t *cnn;
};

static int cpu_available(void) { return 1; }

static ntk_status cpu_create(const struct ntk_problem *p, void **ctx) {
  *ctx = NULL;
  struct cpu_ctx *c = calloc(1, sizeof *c);
  if (!c) return ntk_error(NTK_ENOMEM, "out of memory");
  ntk_status st = ntk_cnn_applies(p->arch, p->data) ? ntk_cnn_create(p->arch, p->data, NTK_CNN_AUTO, &p->stop, &c->cnn)
                                                    : ntk_fc_create(p->arch, p->data, &p->stop, &c->fc);
  if (st) {
    free(c);
    return st;
  }
  *ctx = c;
  return NTK_OK;
}

static ntk_status cpu_compute_tile(void *ctx, const struct ntk_tile *t, void *nngp, void *ntk) {
  struct cpu_ctx *c = ctx;
  return c->cnn ? ntk_cnn_tile(c->cnn, t, nngp, ntk) : ntk_fc_tile(c->fc, t, nngp, ntk);
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
