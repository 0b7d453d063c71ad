/* The CPU backend: OpenBLAS for the input covariance, vectorised C for the
 * layer maps (src/worker/fc.c). */
#include "ntkd/backend.h"
#include "ntkd/fc.h"

static int cpu_available(void) { return 1; }

static ntk_status cpu_create(const struct ntk_problem *p, void **ctx) {
  ntk_fc_t *fc;
  ntk_status st = ntk_fc_create(p->arch, p->data, &fc);
  *ctx = fc;
  return st;
}

static ntk_status cpu_compute_tile(void *ctx, const struct ntk_tile *t, void *nngp, void *ntk) {
  return ntk_fc_tile(ctx, t, nngp, ntk);
}

static void cpu_destroy(void *ctx) { ntk_fc_free(ctx); }

const struct ntk_backend_ops ntk_backend_cpu = {
    .name = "cpu",
    .available = cpu_available,
    .create = cpu_create,
    .compute_tile = cpu_compute_tile,
    .destroy = cpu_destroy,
};
