/* The CUDA backend: fully-connected networks on a GPU (src/worker/cuda/
 * fc_cuda.cu), with the per-sample variances from the CPU code (fc.c), so
 * both backends start every tile from the same numbers. CNN kernels on the
 * GPU are not written yet: create() refuses them, and placement keeps such
 * jobs on the CPU (backend = auto) or stops them (backend = cuda). Only
 * compiled with NTKD_HAVE_CUDA. */
#include <math.h>
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

/* Start-up self-check: the first diagonal tile (up to 64 samples) from the
 * GPU against the CPU path, NNGP and NTK, relative to max(|K_ij|,
 * sqrt(K_ii K_jj)). A GPU that disagrees is not used: with backend = auto
 * the rank computes on the CPU instead (run.c), with cuda the job stops. */
static ntk_status self_check(struct cuda_ctx *c, const struct ntk_problem *p) {
  struct ntk_tiling tg;
  ntk_tiling_init(&tg, p->data->n, 64);
  struct ntk_tile t = ntk_tiling_tile(&tg, 0);
  size_t es = (size_t)p->data->elem, cnt = (size_t)(t.rows * t.cols);
  char *b = malloc(4 * cnt * es + 1), err[512];
  if (!b) return ntk_error(NTK_ENOMEM, "out of memory");
  ntk_status st = ntk_fc_tile(c->fc, &t, b, b + cnt * es);
  if (!st && ntk_fc_gpu_tile(c->gpu, &t, b + 2 * cnt * es, b + 3 * cnt * es, err, sizeof err))
    st = ntk_error(NTK_EINTERNAL, "GPU %d: %s", p->device, err);
  double worst = 0;
  for (int k = 0; k < 2 && !st; k++) {
    const char *cpu = b + (size_t)k * cnt * es, *gpu = b + (size_t)(k + 2) * cnt * es;
#define AT(buf, i) (es == 4 ? (double)((const float *)(const void *)(buf))[i] : ((const double *)(const void *)(buf))[i])
    for (size_t i = 0; i < t.rows; i++)
      for (size_t j = 0; j < t.cols; j++) {
        double ref = AT(cpu, i * t.cols + j), got = AT(gpu, i * t.cols + j);
        double scale = fmax(fabs(ref), sqrt(fabs(AT(cpu, i * t.cols + i) * AT(cpu, j * t.cols + j))));
        double e = fabs(got - ref) / (scale > 0 ? scale : 1);
        if (!(e <= worst)) worst = e;
      }
#undef AT
  }
  double bound = es == 4 ? 1e-4 : 1e-10;
  free(b);
  if (!st && !(worst <= bound))
    st = ntk_error(NTK_EINTERNAL, "GPU %d self-check: the first tile differs from the CPU's by %.3g (bound %g); "
                   "not using this GPU (please report it, with the output of scripts/gpu_check.sh)",
                   p->device, worst, bound);
  return st;
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
  if (!st) st = self_check(c, p);
  if (st) {
    ntk_fc_gpu_free(c->gpu);
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
