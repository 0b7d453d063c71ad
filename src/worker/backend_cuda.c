/* The CUDA backend: fully-connected networks on a GPU (src/worker/cuda/
 * fc_cuda.cu), with the per-sample variances from the CPU code (fc.c), so
 * both backends start every tile from the same numbers. CNN kernels on the
 * GPU are not written yet: create() refuses them, and placement keeps such
 * jobs on the CPU (backend = auto) or stops them (backend = cuda). Only
 * compiled with NTKD_HAVE_CUDA. */
#include <stdlib.h>

#include "cuda/fc_cuda.h"
#include "ntkd/backend.h"
#include "ntkd/cnn.h"
#include "ntkd/fc.h"

int ntk_cuda_count(char *why, size_t cap); /* cuda/device.cu */

struct cuda_ctx {
  ntk_fc_t *fc; /* host variances */
  ntk_fc_gpu_t *gpu;
};

static int cuda_available(void) {
  char why[256];
  return ntk_cuda_count(why, sizeof why) > 0;
}

static ntk_status cuda_create(const struct ntk_problem *p, void **ctx) {
  *ctx = NULL;
  if (ntk_cnn_applies(p->arch, p->data)) /* also Dense ... Flatten on images: per position */
    return ntk_error(NTK_ECONFIG, "the CUDA backend computes fully-connected networks; CNN kernels on the GPU "
                     "are not written yet (use backend = cpu or auto)");
  struct cuda_ctx *c = calloc(1, sizeof *c);
  if (!c) return ntk_error(NTK_ENOMEM, "out of memory");
  ntk_status st = ntk_fc_create(p->arch, p->data, &c->fc);
  char err[512];
  if (!st && ntk_fc_gpu_create(p->device, p->arch, p->data->n, p->data->d, p->data->elem, p->data->x,
                               ntk_fc_variances(c->fc), &c->gpu, err, sizeof err))
    st = ntk_error(NTK_EINTERNAL, "GPU %d: %s", p->device, err);
  if (st) {
    ntk_fc_free(c->fc);
    free(c);
    return st;
  }
  *ctx = c;
  return NTK_OK;
}

static ntk_status cuda_compute_tile(void *ctx, const struct ntk_tile *t, void *nngp, void *ntk) {
  struct cuda_ctx *c = ctx;
  char err[512];
  if (ntk_fc_gpu_tile(c->gpu, t, nngp, ntk, err, sizeof err))
    return ntk_error(NTK_EINTERNAL, "GPU tile %llu: %s", (unsigned long long)t->index, err);
  return NTK_OK;
}

static void cuda_destroy(void *ctx) {
  struct cuda_ctx *c = ctx;
  if (!c) return;
  ntk_fc_gpu_free(c->gpu);
  ntk_fc_free(c->fc);
  free(c);
}

const struct ntk_backend_ops ntk_backend_cuda = {
    .name = "cuda",
    .available = cuda_available,
    .create = cuda_create,
    .compute_tile = cuda_compute_tile,
    .destroy = cuda_destroy,
};
