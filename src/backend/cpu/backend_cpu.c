/* The CPU backend: OpenBLAS for the input covariance of fully-connected
 * networks (src/kernels/fc.c), pair-wise vectorised C for convolutional ones
 * (src/kernels/cnn.c). */
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
  ntk_status st = ntk_cnn_applies(p->arch, p->data) ? ntk_cnn_create(p->arch, p->data, NTK_CNN_AUTO, &c->cnn)
                                                    : ntk_fc_create(p->arch, p->data, &c->fc);
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
};
