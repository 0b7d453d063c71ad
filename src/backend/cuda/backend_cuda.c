/* The CUDA backend. Fully-connected networks: src/backend/cuda/fc_cuda.cu,
 * with the per-sample variances from the CPU code (fc.c), so both backends
 * start every tile from the same numbers. Convolutional networks (Flatten,
 * pooling, GlobalAvgPool): src/backend/cuda/cnn_gpu.c over the CUDA executor of
 * src/backend/cuda/cnn_cuda.cu, each image's variances computed on the GPU.
 * Only compiled with NTKD_HAVE_CUDA. */
#include <math.h>
#include <stdlib.h>

#include "backend/cuda/cnn_gpu.h"
#include "backend/cuda/fc_cuda.h"
#include "backend/cuda/mlp_gpu.h"
#include "kernels/fc_entry.h"
#include "backend/backend.h"
#include "kernels/cnn.h"
#include "kernels/fc.h"

int ntk_cuda_count(char *why, size_t cap); /* cuda/device.cu */

struct cuda_ctx {
  const struct ntk_problem *p;
  ntk_fc_t *fc; /* fully-connected: host variances */
  ntk_fc_gpu_t *gpu;
  struct ntk_gpu_exec ex; /* convolutional */
  int have_ex;
  ntk_cnn_gpu_t *cnn;
  /* The engine's tile buffers that are pinned (host_alloc); others came
   * from malloc when pinning failed. */
  void *pinned[64];
  int npinned;
};

static ntk_status gpu_tile(struct cuda_ctx *c, const struct ntk_tile *t, void *nngp, void *ntk) {
  if (c->cnn) {
    ntk_status st = ntk_cnn_gpu_tile(c->cnn, t, nngp, ntk);
    if (st) st = ntk_error(st, "GPU %d, tile %llu: %s", c->p->device, (unsigned long long)t->index, ntk_error_message());
    return st;
  }
  char err[512];
  if (ntk_fc_gpu_tile(c->gpu, t, nngp, ntk, err, sizeof err))
    return ntk_error(NTK_EINTERNAL, "GPU %d, tile %llu: %s", c->p->device, (unsigned long long)t->index, err);
  return NTK_OK;
}

/* The same tile from the CPU code. */
static ntk_status cpu_tile(struct cuda_ctx *c, const struct ntk_tile *t, void *nngp, void *ntk) {
  if (!c->cnn) return ntk_fc_tile(c->fc, t, nngp, ntk);
  ntk_cnn_t *cpu;
  ntk_status st = ntk_cnn_create(c->p->arch, c->p->data, NTK_CNN_AUTO, &c->p->stop, &cpu);
  if (!st) st = ntk_cnn_tile(cpu, t, nngp, ntk);
  ntk_cnn_free(cpu);
  return st;
}

static int cuda_available(void) {
  char why[256];
  return ntk_cuda_count(why, sizeof why) > 0;
}

/* Start-up self-check: the first diagonal tile from the GPU against the
 * CPU code, NNGP and NTK, relative to max(|K_ij|, sqrt(K_ii K_jj)); up to
 * 64 samples for a fully-connected network, 4 images for a CNN (a few CPU
 * pairs of a deep CNN take a second). A GPU that disagrees is not used:
 * with backend = auto the rank computes on the CPU instead (run.c), with
 * cuda the job stops. */
static ntk_status self_check(struct cuda_ctx *c, const struct ntk_problem *p) {
  struct ntk_tiling tg;
  ntk_tiling_init(&tg, p->data->n, c->cnn ? 4 : 64);
  struct ntk_tile t = ntk_tiling_tile(&tg, 0);
  size_t es = (size_t)p->data->elem, cnt = (size_t)(t.rows * t.cols);
  char *b = malloc(4 * cnt * es + 1);
  if (!b) return ntk_error(NTK_ENOMEM, "out of memory");
  ntk_status st = cpu_tile(c, &t, b, b + cnt * es);
  if (!st) st = gpu_tile(c, &t, b + 2 * cnt * es, b + 3 * cnt * es);
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

static void ctx_free(struct cuda_ctx *c) {
  if (!c) return;
  ntk_cnn_gpu_free(c->cnn); /* before its executor */
  if (c->have_ex) ntk_gpu_exec_cuda_free(&c->ex);
  ntk_fc_gpu_free(c->gpu);
  ntk_fc_free(c->fc);
  free(c);
}

static ntk_status cuda_create(const struct ntk_problem *p, void **ctx) {
  *ctx = NULL;
  struct cuda_ctx *c = calloc(1, sizeof *c);
  if (!c) return ntk_error(NTK_ENOMEM, "out of memory");
  c->p = p;
  ntk_status st = NTK_OK;
  char err[512];
  if (ntk_cnn_applies(p->arch, p->data)) { /* also Dense ... Flatten on images: per position */
    if (ntk_gpu_exec_cuda(&c->ex, p->device, err, sizeof err))
      st = ntk_error(NTK_EINTERNAL, "GPU %d: %s", p->device, err);
    else
      c->have_ex = 1;
    if (!st) st = ntk_cnn_gpu_create(&c->ex, p->arch, p->data, &c->cnn);
  } else {
    size_t nl = p->arch->n;
    struct ntk_fc_entry_layer *layers = calloc(nl ? nl : 1, sizeof *layers);
    st = layers ? ntk_fc_create(p->arch, p->data, &p->stop, &c->fc) : ntk_error(NTK_ENOMEM, "out of memory");
    if (!st) st = ntk_fc_entry_layers(c->fc, layers, nl);
    if (!st && ntk_fc_gpu_create(p->device, layers, nl, p->data->n, p->data->d, p->data->elem, p->data->x,
                                 ntk_fc_variances(c->fc), ntk_fc_twins(c->fc), &c->gpu, err, sizeof err))
      st = ntk_error(NTK_EINTERNAL, "GPU %d: %s", p->device, err);
    free(layers);
  }
  if (!st) st = self_check(c, p);
  if (st) {
    ctx_free(c);
    return st;
  }
  *ctx = c;
  return NTK_OK;
}

/* A stop is polled before the tile only: the GPU's kernels run a tile
 * whole (untested here: no GPU in the test environment; a tile of a deep
 * CNN takes seconds there). */
static ntk_status cuda_compute_tile(void *ctx, const struct ntk_tile *t, void *nngp, void *ntk) {
  struct cuda_ctx *c = ctx;
  if (ntk_stop_seen(&c->p->stop))
    return ntk_error(NTK_EINTERRUPTED, "stopped before tile %llu (GPU %d)", (unsigned long long)t->index, c->p->device);
  return gpu_tile(c, t, nngp, ntk);
}

static void cuda_destroy(void *ctx) { ctx_free(ctx); }

/* The engine's tile buffers: pinned, so that the copies back are DMA at
 * the link's full rate (and asynchronous on the tile's stream); malloc if
 * the pinned memory is refused (a tile buffer of a 16384-sample float64
 * tile is 4 GiB). */
static void *cuda_host_alloc(void *ctx, size_t bytes) {
  struct cuda_ctx *c = ctx;
  int room = c->npinned < (int)(sizeof c->pinned / sizeof *c->pinned);
  void *p = room ? ntk_fc_gpu_host_alloc(c->p->device, bytes) : NULL;
  if (p) {
    c->pinned[c->npinned++] = p;
    return p;
  }
  return malloc(bytes ? bytes : 1);
}

static void cuda_host_free(void *ctx, void *p) {
  struct cuda_ctx *c = ctx;
  if (!p) return;
  for (int i = 0; i < c->npinned; i++)
    if (c->pinned[i] == p) {
      ntk_fc_gpu_host_free(p);
      c->pinned[i] = c->pinned[--c->npinned];
      return;
    }
  free(p);
}

/* Training: the MLP on the device (mlp_gpu.cu); p, m, v copied back into
 * the host state after each Adam step. */
struct cuda_mlp {
  ntk_mlp_gpu_t *gpu;
  float *state;
  int device;
};

static ntk_status cuda_mlp_create(const struct ntk_mlp *m, size_t max_batch, int device, float *state, void **ctx) {
  struct cuda_mlp *c = calloc(1, sizeof *c);
  if (!c) return ntk_error(NTK_ENOMEM, "out of memory");
  char err[512];
  c->state = state;
  c->device = device;
  if (ntk_mlp_gpu_create(m, max_batch ? max_batch : 1, device, state, &c->gpu, err, sizeof err)) {
    ntk_mlp_gpu_free(c->gpu);
    free(c);
    return ntk_error(NTK_EINTERNAL, "GPU %d: %s", device, err);
  }
  *ctx = c;
  return NTK_OK;
}

static ntk_status cuda_mlp_grad(void *ctx, const float *x, const int32_t *y, size_t b, float *grad, double *loss,
                                size_t *correct) {
  struct cuda_mlp *c = ctx;
  char err[512];
  if (ntk_mlp_gpu_grad(c->gpu, x, y, b, grad, loss, correct, err, sizeof err))
    return ntk_error(NTK_EINTERNAL, "GPU %d: gradient: %s", c->device, err);
  return NTK_OK;
}

static ntk_status cuda_mlp_adam(void *ctx, const struct ntk_adam *h, uint64_t t, float gscale, const float *g) {
  struct cuda_mlp *c = ctx;
  char err[512];
  if (ntk_mlp_gpu_adam(c->gpu, h, t, gscale, g, c->state, err, sizeof err))
    return ntk_error(NTK_EINTERNAL, "GPU %d: Adam: %s", c->device, err);
  return NTK_OK;
}

static void cuda_mlp_destroy(void *ctx) {
  struct cuda_mlp *c = ctx;
  if (c) ntk_mlp_gpu_free(c->gpu);
  free(c);
}

const struct ntk_backend_ops ntk_backend_cuda = {
    .name = "cuda",
    .available = cuda_available,
    .create = cuda_create,
    .compute_tile = cuda_compute_tile,
    .destroy = cuda_destroy,
    /* The host cores are free while the GPU computes: check and compress
     * earlier tiles on them. Two by default (NTKD_COMPRESS_THREADS sets
     * another count); the worker asks the coordinator for a queue as deep
     * as its pipeline (ntk_engine_depth). */
    .compress_threads = 2,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .mlp_create = cuda_mlp_create,
    .mlp_grad = cuda_mlp_grad,
    .mlp_adam = cuda_mlp_adam,
    .mlp_destroy = cuda_mlp_destroy,
};
