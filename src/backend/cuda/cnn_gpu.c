/* CNN tiles on a GPU, over an executor (cnn_gpu.h): the launch order,
 * batches of pairs and buffers. The kernel bodies are cnn_dev_impl.h;
 * this file also compiles them for the host emulation the tests run.
 *
 * A tile goes in two steps, each a sequence of launches over a batch of
 * pairs (docs/GPU.md):
 *   1. the tile's images paired with themselves (a, a): each image's
 *      variances at every nonlinearity, written into its variance block on
 *      the device (a slice run first takes its zero offset alone, which is
 *      those variances; the rest only where a later layer or the tail
 *      needs more);
 *   2. the tile's pairs, reading the variance blocks.
 * Per batch: DIAG is one launch (a block per pair, all layers in shared
 * memory) and a readout. SLICE launches one grid of (offset, pair) blocks
 * per run of layers a slice carries (slice-local ones, and strided
 * convolutions and blocks: cnn.c's plan_chain) -- every layer of the run
 * on one slice in shared memory; SLICE3, for runs of slice-local layers
 * whose convolutions are all 3x3, packs four offsets into each block (h w
 * blocks of h w cells) -- and one grid-stride launch per layer that
 * couples offsets (pooling, CIRCULAR convolutions, blocks of unequal
 * strides) on each pair's full covariance in device memory;
 * a run into GlobalAvgPool leaves one partial sum per block, which the
 * readout adds up in a fixed order. */
#include "backend/cuda/cnn_gpu.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_maps.h"

/* ---- the kernel bodies, for the host ----------------------------------- */

#define DEV
/* A block's barrier: threads count in, the last one flips the phase; the
 * others spin a little, then yield (the emulation runs more threads than
 * the machine may have cores). */
struct host_barrier {
  atomic_uint count, phase;
  unsigned n;
};

static void host_barrier_wait(struct host_barrier *b) {
  unsigned phase = atomic_load(&b->phase);
  if (atomic_fetch_add(&b->count, 1) + 1 == b->n) {
    atomic_store(&b->count, 0);
    atomic_fetch_add(&b->phase, 1);
    return;
  }
  for (unsigned spin = 0; atomic_load(&b->phase) == phase; spin++)
    if (spin > 64) sched_yield();
}

#define BLK_SYNC(B) \
  do { \
    if ((B)->nt > 1) host_barrier_wait((struct host_barrier *)(B)->barrier); \
  } while (0)
/* SLICE3's strips by path, summed over every layer and block
 * (ntk_gpu_host_slice3_paths). */
static atomic_ulong host_s3_paths[3];
#define S3_TALLY(path) atomic_fetch_add_explicit(&host_s3_paths[(path)], 1, memory_order_relaxed)
#define EACH_PRECISION_FILE "kernels/cnn_dev_impl.h"
#include "kernels/each_precision.h"

void ntk_gpu_host_slice3_paths(unsigned long n[3]) {
  for (int k = 0; k < 3; k++) n[k] = atomic_exchange(&host_s3_paths[k], 0);
}

/* ---- the host executor ------------------------------------------------- */

struct host_launch {
  int kernel, elem;
  unsigned gx, gy, nt;
  const struct ntk_dev_args *a;
  void *sm;
  struct host_barrier bar;
};

struct host_thread {
  struct host_launch *L;
  unsigned tid;
};

static void host_block(struct host_launch *L, unsigned bx, unsigned by, unsigned tid) {
  struct ntk_blk B = {bx, by, L->gx, tid, L->nt, &L->bar};
  const struct ntk_dev_args *a = L->a;
  int f = L->elem == 4;
  switch (L->kernel) {
  case NTK_K_DIAG: f ? dv_diag_f(a, &B, L->sm, 0) : dv_diag_d(a, &B, L->sm, 0); break;
  case NTK_K_SLICE: f ? dv_slice_f(a, &B, L->sm, 0) : dv_slice_d(a, &B, L->sm, 0); break;
  case NTK_K_DIAG_ANY: f ? dv_diag_f(a, &B, L->sm, 1) : dv_diag_d(a, &B, L->sm, 1); break;
  case NTK_K_SLICE_ANY: f ? dv_slice_f(a, &B, L->sm, 1) : dv_slice_d(a, &B, L->sm, 1); break;
  case NTK_K_INPUT_FULL: f ? dv_input_full_f(a, &B) : dv_input_full_d(a, &B); break;
  case NTK_K_CONV_FULL: f ? dv_conv_full_f(a, &B) : dv_conv_full_d(a, &B); break;
  case NTK_K_POOL_FULL: f ? dv_pool_full_f(a, &B) : dv_pool_full_d(a, &B); break;
  case NTK_K_BRANCH_FULL: f ? dv_branch_full_f(a, &B) : dv_branch_full_d(a, &B); break;
  case NTK_K_READOUT: f ? dv_readout_f(a, &B, L->sm) : dv_readout_d(a, &B, L->sm); break;
  case NTK_K_SLICE3:
    f ? dv_slice3_f(a, &B, L->sm, a->with_t, a->capture) : dv_slice3_d(a, &B, L->sm, a->with_t, a->capture);
    break;
  default: break;
  }
}

/* One emulated thread: every block in turn, as a GPU would schedule them
 * one after another on one multiprocessor; the barrier after each block
 * keeps a fast thread from starting the next block's writes to shared
 * memory while others still read. */
static void *host_thread_main(void *arg) {
  struct host_thread *T = arg;
  struct host_launch *L = T->L;
  for (unsigned by = 0; by < L->gy; by++)
    for (unsigned bx = 0; bx < L->gx; bx++) {
      host_block(L, bx, by, T->tid);
      if (L->nt > 1) host_barrier_wait(&L->bar);
    }
  return NULL;
}

static int host_launch(void *ctx, int kernel, int elem, unsigned gx, unsigned gy, size_t smem,
                       const struct ntk_dev_args *a, char *err, size_t cap) {
  unsigned nt = (unsigned)(uintptr_t)ctx; /* the host executor's context is its thread count */
  struct host_launch L;
  memset(&L, 0, sizeof L);
  L.kernel = kernel;
  L.elem = elem;
  L.gx = gx;
  L.gy = gy;
  L.nt = nt;
  L.a = a;
  /* Shared memory starts as garbage (all bits set: NaN), as on a GPU. */
  L.sm = malloc(smem ? smem : 1);
  if (!L.sm) return snprintf(err, cap, "host emulation: out of memory"), 1;
  memset(L.sm, 0xff, smem);
  struct host_thread T[64]; /* ntk_gpu_exec_host caps the thread count at 64 */
  pthread_t th[64];
  if (nt == 1) {
    T[0] = (struct host_thread){&L, 0};
    host_thread_main(&T[0]);
  } else {
    atomic_init(&L.bar.count, 0);
    atomic_init(&L.bar.phase, 0);
    L.bar.n = nt;
    for (unsigned k = 0; k < nt; k++) {
      T[k] = (struct host_thread){&L, k};
      if (pthread_create(&th[k], NULL, host_thread_main, &T[k])) abort(); /* test-only path */
    }
    for (unsigned k = 0; k < nt; k++) pthread_join(th[k], NULL);
  }
  free(L.sm);
  return 0;
}

static int host_alloc(void *ctx, void **p, size_t bytes, char *err, size_t cap) {
  (void)ctx;
  *p = malloc(bytes ? bytes : 1);
  if (!*p) return snprintf(err, cap, "host emulation: out of memory (%zu bytes)", bytes), 1;
  memset(*p, 0xff, bytes); /* device memory is not zeroed either */
  return 0;
}
static void host_release(void *ctx, void *p) {
  (void)ctx;
  free(p);
}
static int host_copy(void *ctx, void *dst, const void *src, size_t bytes, char *err, size_t cap) {
  (void)ctx, (void)err, (void)cap;
  memcpy(dst, src, bytes);
  return 0;
}
static int host_zero(void *ctx, void *p, size_t bytes, char *err, size_t cap) {
  (void)ctx, (void)err, (void)cap;
  memset(p, 0, bytes);
  return 0;
}

void ntk_gpu_exec_host(struct ntk_gpu_exec *ex, unsigned threads) {
  if (threads < 1) threads = 1;
  if (threads > 64) threads = 64;
  memset(ex, 0, sizeof *ex);
  ex->ctx = (void *)(uintptr_t)threads;
  ex->name = "host emulation";
  ex->threads = threads;
  ex->smem_max = (size_t)1 << 20;
  ex->mem_budget = (size_t)256 << 20;
  ex->mem_free = (size_t)1 << 30; /* every test job fits the cache, unless a test lowers this */
  ex->alloc = host_alloc;
  ex->release = host_release;
  ex->put = host_copy;
  ex->get = host_copy;
  ex->zero = host_zero;
  ex->launch = host_launch;
}

/* ---- the driver ---------------------------------------------------------- */

struct ntk_cnn_gpu {
  struct ntk_gpu_exec ex;
  const struct ntk_dataset *data;
  struct ntk_dev_plan *plan; /* host copy */
  void *dplan;
  size_t es, d, fstride, bstride, noff_max, batch, per_pair;
  int chain;       /* slice runs carry strided Convs and blocks (the plan's chain), else slice-local ops alone */
  int need_full;
  int last_var;    /* the last op with a variance slot, -1 if none */
  int tail_nonlin; /* the tail has a nonlinearity: it reads the readout's variances */
  size_t smem_diag, smem_ro;
  /* device buffers, grown as tiles need */
  void *x, *var;
  size_t img_cap;
  unsigned char *have; /* job-wide cache: x and var hold every image, have[i] once var[i] is computed */
  void *pa, *pb, *fg, *ft, *ng, *nt, *part, *out, *bstack;
  size_t pair_cap;
  unsigned *hpa, *hpb; /* host staging */
  void *hout;
  /* The variance slots entering a scale-free layer (ntk_cnn_judged_slots,
   * in this block layout): each image's block is fetched once it is
   * computed and judged on the host, as the CPU judges its own. */
  const struct ntk_arch *arch;
  struct ntk_cnn_judged *judged;
  size_t njudged;
  void *hvar; /* one image's block */
  ntk_cnn_t *cpu; /* made at the first block with a 0 to judge: the CPU's block of that image, with its oracle */
  size_t *fresh; /* a tile's images whose blocks were just computed: device index, then sample */
  size_t fresh_cap;
  char err[512];
};

#define EX_TRY(call)                                                                  \
  do {                                                                                \
    if (call) return ntk_error(NTK_EINTERNAL, "%s: %s", g->ex.name, g->err);          \
  } while (0)

/* Bytes of shared memory of a SLICE block on an h x w covariance: six
 * bordered arrays (NNGP, NTK, their next values, two row-sum scratches),
 * the reduction's two doubles per thread, and 4 bordered arrays per depth
 * of the residual blocks in the run (cnn_dev_impl.h). */
static size_t slice_smem(size_t h, size_t w, size_t pad, size_t nt, size_t es, int depth) {
  return (6 + 4 * (size_t)depth) * (h + 2 * pad) * (w + 2 * pad) * es + 2 * nt * sizeof(double);
}

/* The depths of branch stack the run of ops [k0, k1) uses: one past the
 * deepest block marker in it, 0 for none. */
static int run_depth(const struct ntk_dev_plan *P, int k0, int k1) {
  int d = 0;
  for (int k = k0; k < k1; k++)
    if (ntk_layer_traits((ntk_layer_kind)P->ops[k].kind)->branch && P->ops[k].depth + 1 > d) d = P->ops[k].depth + 1;
  return d;
}

/* SLICE3 (cnn_dev_impl.h): two buffers of (h + 3)(w + 3) (NNGP, NTK)
 * pairs, and the reduction's. */
static size_t slice3_smem(size_t h, size_t w, size_t nt, size_t es) {
  return 2 * (h + 3) * (w + 3) * 2 * es + 2 * nt * sizeof(double);
}

/* Whether the nonlinearities of ops [k0, k1) are all ABRelu or Erf(1, 1,
 * 0): then the plain DIAG and SLICE kernels, compiled for those alone,
 * take them; else their ANY variants (cnn_dev_impl.h, dv_nonlin). */
static int plain_maps(const struct ntk_dev_plan *P, int k0, int k1) {
  for (int k = k0; k < k1; k++) {
    const struct ntk_dev_op *o = &P->ops[k];
    if (o->var_off >= 0 && o->map.kind != NTK_MAP_ABRELU && !ntk_map_is_plain_erf(&o->map)) return 0;
  }
  return 1;
}

/* Whether the run of slice-local ops [k0, k1) takes SLICE3: every
 * convolution in it has f = 3, and every nonlinearity is ABRelu or
 * Erf(1, 1, 0), the maps it inlines (the other maps' code in the kernel
 * cost 3 registers, a third of the blocks per SM: scripts/gpu_model.py).
 * NTKD_GPU_SLICE3=0 keeps the generic SLICE kernel (for comparisons). */
static int run_is_slice3(const struct ntk_dev_plan *P, int k0, int k1) {
  const char *e = getenv("NTKD_GPU_SLICE3");
  if (e && !atoi(e)) return 0;
  for (int k = k0; k < k1; k++) {
    const struct ntk_dev_op *o = &P->ops[k];
    if (!o->slice_local) return 0; /* a strided Conv or block (plan_chain) */
    if (o->kind == NTK_LAYER_CONV && (o->fh != 3 || o->fw != 3)) return 0;
    if (ntk_layer_traits((ntk_layer_kind)o->kind)->branch) return 0; /* SLICE3 keeps no branch stack */
    if (o->standard) return 0; /* SLICE3 fuses the 'ntk' affine maps */
    if (o->var_off >= 0 && o->map.kind != NTK_MAP_ABRELU && !ntk_map_is_plain_erf(&o->map)) return 0;
  }
  return 1;
}

/* Whether a slice run carries op o: with g->chain what the CPU's slice
 * runs carry, strided Convs and blocks included (cnn.c's plan_chain: no
 * full covariance between them), else the slice-local ops alone. */
static int carried(const ntk_cnn_gpu_t *g, const struct ntk_dev_op *o) {
  return g->chain ? o->chain : o->slice_local;
}

/* The slice runs as g->chain makes them: the most shared memory a block
 * of one asks for, and the partial sums per pair (g->noff_max) a run into
 * GlobalAvgPool leaves. */
static void plan_runs(ntk_cnn_gpu_t *g, size_t nt, size_t *smem_slice) {
  const struct ntk_dev_plan *P = g->plan;
  size_t h = (size_t)P->H, w = (size_t)P->W, pad = (size_t)P->pad, es = g->es;
  *smem_slice = 0;
  g->noff_max = 1;
  for (int k = 0; k < P->nops; k++) {
    const struct ntk_dev_op *o = &P->ops[k];
    if (carried(g, o) && (k == 0 || !carried(g, &P->ops[k - 1]))) { /* a run starts */
      int k1 = k;
      while (k1 < P->nops && carried(g, &P->ops[k1])) k1++;
      size_t s = run_is_slice3(P, k, k1) ? slice3_smem(h, w, nt, es)
                                         : slice_smem(h, w, pad, nt, es, run_depth(P, k, k1));
      if (s > *smem_slice) *smem_slice = s;
      /* a run into GlobalAvgPool leaves a sum per offset */
      if (P->readout == NTK_LAYER_GLOBALAVGPOOL)
        g->noff_max = run_is_slice3(P, k, k1) ? h * w : (2 * h - 1) * (2 * w - 1);
    }
    h = (size_t)o->ho;
    w = (size_t)o->wo;
  }
  if (P->nops == 0 || !carried(g, &P->ops[P->nops - 1])) g->noff_max = 1; /* the readout reads fg */
}

/* Elements per pair of the full covariance buffers (fg, ft, ng, nt):
 * the largest (h w)^2 that a launch outside the slice runs reads or
 * writes, or that a run loads (not from the images) or stores (not into
 * GlobalAvgPool's sums), in run_batch's order. 0: one run from the images
 * into GlobalAvgPool, with no full covariance at all. */
static size_t full_elems(const ntk_cnn_gpu_t *g) {
  const struct ntk_dev_plan *P = g->plan;
  size_t most = 0, h = (size_t)P->H, w = (size_t)P->W;
  int from_x = 1;
#define FULL_AT(n) (most = (n) * (n) > most ? (n) * (n) : most)
  for (int k = 0; k < P->nops;) {
    const struct ntk_dev_op *o = &P->ops[k];
    if (carried(g, o)) {
      int k1 = k;
      while (k1 < P->nops && carried(g, &P->ops[k1])) k1++;
      if (!from_x) FULL_AT(h * w);
      h = (size_t)P->ops[k1 - 1].ho;
      w = (size_t)P->ops[k1 - 1].wo;
      if (k1 < P->nops || P->readout != NTK_LAYER_GLOBALAVGPOOL) FULL_AT(h * w);
      from_x = 0;
      k = k1;
      continue;
    }
    FULL_AT(h * w); /* its input (INPUT_FULL's, for the first op) */
    h = (size_t)o->ho;
    w = (size_t)o->wo;
    FULL_AT(h * w);
    from_x = 0;
    k++;
  }
  if (from_x) FULL_AT(h * w); /* no spatial layers: the readout reads the input covariance */
#undef FULL_AT
  return most;
}

void ntk_cnn_gpu_free(ntk_cnn_gpu_t *g) {
  if (!g) return;
  void *dev[] = {g->dplan, g->x, g->var, g->pa, g->pb, g->fg, g->ft, g->ng, g->nt, g->part, g->out, g->bstack};
  for (size_t k = 0; k < sizeof dev / sizeof *dev; k++) g->ex.release(g->ex.ctx, dev[k]);
  free(g->plan);
  free(g->judged);
  ntk_cnn_free(g->cpu);
  free(g->hvar);
  free(g->fresh);
  free(g->have);
  free(g->hpa);
  free(g->hpb);
  free(g->hout);
  free(g);
}

ntk_status ntk_cnn_gpu_create(const struct ntk_gpu_exec *ex, const struct ntk_arch *arch,
                              const struct ntk_dataset *data, ntk_cnn_gpu_t **out) {
  *out = NULL;
  ntk_cnn_gpu_t *g = calloc(1, sizeof *g);
  if (!g) return ntk_error(NTK_ENOMEM, "out of memory");
  g->ex = *ex;
  g->data = data;
  g->plan = malloc(sizeof *g->plan);
  if (!g->plan) {
    ntk_cnn_gpu_free(g);
    return ntk_error(NTK_ENOMEM, "out of memory");
  }
  ntk_status st = ntk_cnn_dev_plan(arch, data, g->plan);
  g->arch = arch;
  if (!st && !(g->judged = malloc((arch->n ? arch->n : 1) * sizeof *g->judged)))
    st = ntk_error(NTK_ENOMEM, "out of memory");
  if (!st) st = ntk_cnn_judged_slots(arch, data, g->judged, &g->njudged);
  if (st) {
    ntk_cnn_gpu_free(g);
    return st;
  }
  /* The GPU's variance slots hold NTK_DEV_VSLOT = 4 elements per position
   * (cnn_dev.h: the variance, its RSQRT and two products of the float
   * ABRelu map) where cnn.c plans 2: every offset doubles. Blocks start at
   * multiples of 4 elements: the kernels read a slot as one 16-byte load
   * (float) or two (double). */
  for (int k = 0; k < g->plan->nops; k++)
    if (g->plan->ops[k].var_off >= 0) g->plan->ops[k].var_off *= NTK_DEV_VSLOT / 2;
  g->plan->tail_off *= NTK_DEV_VSLOT / 2;
  g->plan->var_size *= NTK_DEV_VSLOT / 2;
  g->plan->var_size += (4 - g->plan->var_size % 4) % 4;
  for (size_t k = 0; k < g->njudged; k++) { /* the same slots in this layout */
    struct ntk_cnn_judged *j = &g->judged[k];
    size_t tail = (size_t)g->plan->tail_off; /* the tail's values stay one element each */
    if (j->tail) {
      j->off = tail + (j->off - tail / (NTK_DEV_VSLOT / 2));
    } else {
      j->off *= NTK_DEV_VSLOT / 2;
      j->step = NTK_DEV_VSLOT;
    }
  }
  if (g->njudged && !(g->hvar = malloc((size_t)g->plan->var_size * (size_t)data->elem))) {
    ntk_cnn_gpu_free(g);
    return ntk_error(NTK_ENOMEM, "out of memory");
  }
  for (int k = 0; k < g->plan->nops + g->plan->ntail; k++) { /* SLICE3's operands and fusions */
    struct ntk_dev_op *o = k < g->plan->nops ? &g->plan->ops[k] : &g->plan->tail[k - g->plan->nops];
    o->w2f = (float)o->w2;
    o->b2f = (float)o->b2;
    o->af = (float)o->map.a;
    o->bf = (float)o->map.b;
    if (k >= g->plan->nops) continue;
    int n = k + 1;
    while (n < g->plan->nops && g->plan->ops[n].kind != NTK_LAYER_CONV && g->plan->ops[n].slice_local) n++;
    o->next = n;
    const struct ntk_dev_op *nl = n == k + 2 ? &g->plan->ops[k + 1] : NULL;
    o->fuse = NTK_FUSE_NONE;
    if (o->kind == NTK_LAYER_CONV && nl && nl->var_off >= 0)
      o->fuse = ntk_map_is_plain_erf(&nl->map)                                         ? NTK_FUSE_ERF
                : nl->map.kind == NTK_MAP_ABRELU && nl->map.a == 0.0 && nl->map.b == 1.0 ? NTK_FUSE_RELU
                : nl->map.kind == NTK_MAP_ABRELU                                       ? NTK_FUSE_ABRELU
                                                                                       : NTK_FUSE_NONE;
  }
  const struct ntk_dev_plan *P = g->plan;
  size_t es = (size_t)data->elem, nt = ex->threads, HW = (size_t)P->H * P->W;
  g->es = es;
  g->d = data->d;
  /* Shared memory per block, and which buffers a pair needs. Slice runs
   * carry strided Convs and blocks unless their branch stacks take more
   * shared memory than the device gives (then the old runs, and the full
   * covariance between), or NTKD_GPU_CHAIN=0 (for comparisons). */
  size_t smem_slice = 0;
  const char *ce = getenv("NTKD_GPU_CHAIN");
  g->chain = P->path == NTK_CNN_SLICE && !(ce && !atoi(ce));
  plan_runs(g, nt, &smem_slice);
  if (g->chain && smem_slice > ex->smem_max) {
    g->chain = 0;
    plan_runs(g, nt, &smem_slice);
  }
  g->last_var = -1;
  for (int k = 0; k < P->nops; k++)
    if (P->ops[k].var_off >= 0) g->last_var = k;
  for (int k = 0; k < P->ntail; k++)
    g->tail_nonlin |= ntk_layer_traits((ntk_layer_kind)P->tail[k].kind)->var_slot;
  g->smem_diag = 4 * HW * es + 2 * nt * sizeof(double);
  g->smem_ro = 2 * nt * sizeof(double);
  size_t smem = P->path == NTK_CNN_DIAG ? g->smem_diag : smem_slice;
  if (smem > ex->smem_max) {
    ntk_cnn_gpu_free(g);
    return ntk_error(NTK_ECONFIG, "%zu x %zu images need %zu KiB of shared memory per block on the GPU, more than "
                     "the %zu KiB the device gives; use backend = cpu",
                     data->h, data->w, (smem + 1023) / 1024, ex->smem_max / 1024);
  }
  g->fstride = P->path == NTK_CNN_SLICE ? full_elems(g) : 0; /* (a WideResNet: 8 x 8's, not 32 x 32's) */
  g->need_full = g->fstride > 0;
  if (g->fstride > UINT_MAX) { /* the kernels index a pair's full covariance in 32 bits (ntk_dev_full_at) */
    size_t entries = g->fstride;
    ntk_cnn_gpu_free(g);
    return ntk_error(NTK_ECONFIG, "%zu x %zu images: a pair's full covariance (%zu entries) is more than the GPU "
                     "kernels index; use backend = cpu", data->h, data->w, entries);
  }
  /* residual blocks: the stack's arrays per pair and depth (the full
   * covariance between slice runs, or one value per position for DIAG) */
  g->bstride = !P->branch_depth ? 0 : P->path == NTK_CNN_DIAG ? HW : g->fstride;
  /* Bytes per pair in a batch (NTK included): full covariances, slice sums, result. */
  g->per_pair = 4 * (g->fstride + g->bstride * (size_t)P->branch_depth) * es + 2 * g->noff_max * sizeof(double) +
                2 * es + 2 * sizeof(unsigned); /* residual blocks: 4 per depth (the branch stack) */
  /* Every image and its variance block stay on the device for the whole
   * job when they take at most 60 % of the free memory and leave room for
   * a full batch (65 535 pairs, or as many as mem_budget holds) within 90 %
   * of it: each image's variances are then computed once per worker, not
   * once per tile. Batches take the rest of those 90 %, at most mem_budget. */
  size_t all = data->n * (g->d + (size_t)P->var_size) * es;
  size_t free_b = ex->mem_free ? ex->mem_free : 2 * ex->mem_budget, usable = free_b / 10 * 9;
  size_t full = g->per_pair * 65535 < ex->mem_budget ? g->per_pair * 65535 : ex->mem_budget;
  size_t cache = all <= free_b / 10 * 6 && all + full <= usable ? all : 0;
  size_t room = usable > cache ? usable - cache : 0, budget = room < ex->mem_budget ? room : ex->mem_budget;
  g->batch = budget / g->per_pair;
  if (g->batch > 65535) g->batch = 65535; /* the grid's y dimension */
  /* NTKD_GPU_MAX_BATCH (pairs): the tests use small batches to run many. */
  const char *mb = getenv("NTKD_GPU_MAX_BATCH");
  if (mb && strtoull(mb, NULL, 10) > 0 && strtoull(mb, NULL, 10) < g->batch) g->batch = (size_t)strtoull(mb, NULL, 10);
  if (g->batch < 1) {
    st = ntk_error(NTK_ECONFIG, "one pair of %zu x %zu images needs %zu MiB of GPU memory, more than the %zu MiB "
                   "budget; use backend = cpu", data->h, data->w, g->per_pair >> 20, budget >> 20);
    ntk_cnn_gpu_free(g);
    return st;
  }
  if (g->ex.alloc(g->ex.ctx, &g->dplan, sizeof *P, g->err, sizeof g->err) ||
      g->ex.put(g->ex.ctx, g->dplan, P, sizeof *P, g->err, sizeof g->err)) {
    st = ntk_error(NTK_EINTERNAL, "%s: %s", g->ex.name, g->err);
    ntk_cnn_gpu_free(g);
    return st;
  }
  if (cache && (g->have = calloc(data->n, 1)) != NULL) {
    if (g->ex.alloc(g->ex.ctx, &g->x, data->n * g->d * es, g->err, sizeof g->err) ||
        g->ex.alloc(g->ex.ctx, &g->var, data->n * (size_t)P->var_size * es, g->err, sizeof g->err) ||
        g->ex.put(g->ex.ctx, g->x, data->x, data->n * g->d * es, g->err, sizeof g->err)) {
      st = ntk_error(NTK_EINTERNAL, "%s: %s", g->ex.name, g->err);
      ntk_cnn_gpu_free(g);
      return st;
    }
    g->img_cap = data->n;
  }
  *out = g;
  return NTK_OK;
}

static ntk_status grow_images(ntk_cnn_gpu_t *g, size_t images) {
  if (g->img_cap >= images) return NTK_OK;
  g->ex.release(g->ex.ctx, g->x);
  g->ex.release(g->ex.ctx, g->var);
  g->x = g->var = NULL;
  g->img_cap = 0;
  EX_TRY(g->ex.alloc(g->ex.ctx, &g->x, images * g->d * g->es, g->err, sizeof g->err));
  EX_TRY(g->ex.alloc(g->ex.ctx, &g->var, images * (size_t)g->plan->var_size * g->es, g->err, sizeof g->err));
  g->img_cap = images;
  return NTK_OK;
}

static ntk_status grow_pairs(ntk_cnn_gpu_t *g, size_t pairs) {
  if (g->pair_cap >= pairs) return NTK_OK;
  void **dev[] = {&g->pa, &g->pb, &g->fg, &g->ft, &g->ng, &g->nt, &g->part, &g->out, &g->bstack};
  for (size_t k = 0; k < sizeof dev / sizeof *dev; k++) {
    g->ex.release(g->ex.ctx, *dev[k]);
    *dev[k] = NULL;
  }
  g->pair_cap = 0;
  size_t es = g->es, full = pairs * g->fstride * es;
  EX_TRY(g->ex.alloc(g->ex.ctx, &g->pa, pairs * sizeof(unsigned), g->err, sizeof g->err));
  EX_TRY(g->ex.alloc(g->ex.ctx, &g->pb, pairs * sizeof(unsigned), g->err, sizeof g->err));
  if (full) {
    EX_TRY(g->ex.alloc(g->ex.ctx, &g->fg, full, g->err, sizeof g->err));
    EX_TRY(g->ex.alloc(g->ex.ctx, &g->ft, full, g->err, sizeof g->err));
    EX_TRY(g->ex.alloc(g->ex.ctx, &g->ng, full, g->err, sizeof g->err));
    EX_TRY(g->ex.alloc(g->ex.ctx, &g->nt, full, g->err, sizeof g->err));
  }
  if (g->bstride)
    EX_TRY(g->ex.alloc(g->ex.ctx, &g->bstack, 4 * pairs * g->bstride * es * (size_t)g->plan->branch_depth, g->err,
                       sizeof g->err));
  EX_TRY(g->ex.alloc(g->ex.ctx, &g->part, pairs * g->noff_max * 2 * sizeof(double), g->err, sizeof g->err));
  EX_TRY(g->ex.alloc(g->ex.ctx, &g->out, pairs * 2 * es, g->err, sizeof g->err));
  unsigned *a = realloc(g->hpa, pairs * sizeof *a), *b = a ? realloc(g->hpb, pairs * sizeof *b) : NULL;
  if (a) g->hpa = a;
  if (b) g->hpb = b;
  void *o = b ? realloc(g->hout, pairs * 2 * es) : NULL;
  if (o) g->hout = o;
  if (!o) return ntk_error(NTK_ENOMEM, "out of memory");
  g->pair_cap = pairs;
  return NTK_OK;
}

static ntk_status launch(ntk_cnn_gpu_t *g, int kernel, unsigned gx, unsigned gy, size_t smem,
                         const struct ntk_dev_args *a) {
  EX_TRY(g->ex.launch(g->ex.ctx, kernel, (int)g->es, gx, gy, smem, a, g->err, sizeof g->err));
  return NTK_OK;
}

/* Blocks for a grid-stride launch over `items`. */
static unsigned grid_for(const ntk_cnn_gpu_t *g, size_t items) {
  size_t b = (items + g->ex.threads - 1) / g->ex.threads;
  return (unsigned)(b > 65535 ? 65535 : (b ? b : 1));
}

/* A launch's output covariance (ng, nt) becomes the next one's input (fg, ft). */
static void swap_full(struct ntk_dev_args *A) {
  void *x = A->fg;
  A->fg = A->ng;
  A->ng = x;
  x = A->ft;
  A->ft = A->nt;
  A->nt = x;
}

/* Every launch for the np pairs staged in hpa/hpb; results in g->out. */
static ntk_status run_batch(ntk_cnn_gpu_t *g, size_t np, int self, int with_t) {
  const struct ntk_dev_plan *P = g->plan;
  size_t es = g->es, nt = g->ex.threads;
  /* A self batch is there for the variances: with no nonlinearity at all
   * it has nothing to do. */
  if (self && g->last_var < 0 && !g->tail_nonlin) return NTK_OK;
  EX_TRY(g->ex.put(g->ex.ctx, g->pa, g->hpa, np * sizeof(unsigned), g->err, sizeof g->err));
  EX_TRY(g->ex.put(g->ex.ctx, g->pb, g->hpb, np * sizeof(unsigned), g->err, sizeof g->err));
  struct ntk_dev_args A;
  memset(&A, 0, sizeof A);
  A.P = g->dplan;
  A.x = g->x;
  A.var = g->var;
  A.pa = g->pa;
  A.pb = g->pb;
  A.np = (unsigned)np;
  A.with_t = with_t;
  A.self = self;
  A.fstride = g->fstride;
  A.fg = g->fg;
  A.ft = with_t ? g->ft : NULL;
  A.ng = g->ng;
  A.nt = with_t ? g->nt : NULL;
  A.part = g->part;
  A.out = g->out;
  A.bstack = g->bstack;
  A.bstride = g->bstride;
  ntk_status st;
  if (P->path == NTK_CNN_DIAG) {
    int kern = plain_maps(P, 0, P->nops) ? NTK_K_DIAG : NTK_K_DIAG_ANY;
    if ((st = launch(g, kern, (unsigned)np, 1, g->smem_diag, &A))) return st;
    A.mode = NTK_RO_PART;
    A.noff = 1;
  } else {
    if (g->need_full) {
      EX_TRY(g->ex.zero(g->ex.ctx, g->fg, np * g->fstride * es, g->err, sizeof g->err));
      if (with_t) EX_TRY(g->ex.zero(g->ex.ctx, g->ft, np * g->fstride * es, g->err, sizeof g->err));
    }
    int from_x = 1, to_part = 0, h = P->H, w = P->W;
    for (int k = 0; k < P->nops;) {
      const struct ntk_dev_op *o = &P->ops[k];
      if (carried(g, o)) {
        int k1 = k;
        while (k1 < P->nops && carried(g, &P->ops[k1])) k1++;
        int to_gap = k1 == P->nops && P->readout == NTK_LAYER_GLOBALAVGPOOL;
        A.k0 = k;
        A.k1 = k1;
        A.h = h;
        A.w = w;
        A.bh = o->bh < h - 1 ? o->bh : h - 1;
        A.bw = o->bw < w - 1 ? o->bw : w - 1;
        int s3 = run_is_slice3(P, k, k1);
        /* SLICE: the band's multiples of the lattice (strides ahead) alone;
         * SLICE3 wraps its offsets: all of them */
        A.mh = s3 || o->mh < 1 ? 1 : o->mh;
        A.mw = s3 || o->mw < 1 ? 1 : o->mw;
        A.bh -= A.bh % A.mh;
        A.bw -= A.bw % A.mw;
        A.from_x = from_x;
        int kern = s3 ? NTK_K_SLICE3 : plain_maps(P, k, k1) ? NTK_K_SLICE : NTK_K_SLICE_ANY;
        size_t smem = s3 ? slice3_smem((size_t)h, (size_t)w, nt, es)
                         : slice_smem((size_t)h, (size_t)w, (size_t)P->pad, nt, es, run_depth(P, k, k1));
        if (self) { /* the zero offset first: the variances the other offsets read */
          A.capture = 1;
          A.to_part = 0;
          if ((st = launch(g, kern, 1, (unsigned)np, smem, &A))) return st;
          A.capture = 0;
          /* Every variance is captured and the tail reads none: the self
           * pairs' own values are not used (as the CPU's self_vars_only). */
          if (k1 > g->last_var && !g->tail_nonlin) return NTK_OK;
        }
        A.to_part = to_gap;
        A.moved = P->ops[k1 - 1].ho != h || P->ops[k1 - 1].wo != w; /* strided Convs in the run */
        if (s3) { /* wrapped offsets: one block per (Di, Dj) of the band */
          int ndi = 2 * A.bh + 1 < h ? 2 * A.bh + 1 : h, ndj = 2 * A.bw + 1 < w ? 2 * A.bw + 1 : w;
          A.noff = ndi * ndj;
        } else {
          A.noff = (2 * (A.bh / A.mh) + 1) * (2 * (A.bw / A.mw) + 1);
        }
        if ((st = launch(g, kern, (unsigned)A.noff, (unsigned)np, smem, &A))) return st;
        if (A.moved && !to_gap) swap_full(&A); /* its result went to ng, nt */
        A.moved = 0;
        from_x = 0;
        to_part = to_gap;
        h = P->ops[k1 - 1].ho; /* a strided Conv in the run changed the size */
        w = P->ops[k1 - 1].wo;
        k = k1;
        continue;
      }
      if (from_x) { /* the input covariance, on the band the first op needs */
        A.bh = P->ops[0].bh;
        A.bw = P->ops[0].bw;
        size_t hw = (size_t)P->H * P->W;
        if ((st = launch(g, NTK_K_INPUT_FULL, grid_for(g, np * hw * hw), 1, 0, &A))) return st;
        from_x = 0;
      }
      A.k0 = k;
      if (o->kind == NTK_LAYER_FORK || o->kind == NTK_LAYER_NEXT || o->kind == NTK_LAYER_JOIN) {
        size_t a = (size_t)o->hi * o->wi, b = (size_t)o->ho * o->wo, m = a > b ? a : b; /* in place on fg, ft */
        if ((st = launch(g, NTK_K_BRANCH_FULL, grid_for(g, np * m * m), 1, 0, &A))) return st;
        h = o->ho;
        w = o->wo;
        k++;
        continue;
      }
      size_t hwo = (size_t)o->ho * o->wo;
      int kern = o->kind == NTK_LAYER_CONV ? NTK_K_CONV_FULL : NTK_K_POOL_FULL;
      if ((st = launch(g, kern, grid_for(g, np * hwo * hwo), 1, 0, &A))) return st;
      swap_full(&A);
      h = o->ho;
      w = o->wo;
      k++;
    }
    if (from_x) { /* no spatial layers: the readout reads the input covariance */
      A.bh = P->H - 1;
      A.bw = P->W - 1;
      size_t hw = (size_t)P->H * P->W;
      if ((st = launch(g, NTK_K_INPUT_FULL, grid_for(g, np * hw * hw), 1, 0, &A))) return st;
    }
    A.mode = to_part ? NTK_RO_PART : P->readout == NTK_LAYER_GLOBALAVGPOOL ? NTK_RO_FULL_GAP : NTK_RO_FULL_FLAT;
  }
  A.h = P->out_h;
  A.w = P->out_w;
  return launch(g, NTK_K_READOUT, (unsigned)np, 1, g->smem_ro, &A);
}

/* store_f and store_d: a batch's results into the tile. */
#define EACH_PRECISION_FILE "backend/cuda/cnn_gpu_impl.h"
#include "kernels/each_precision.h"

ntk_status ntk_cnn_gpu_tile(ntk_cnn_gpu_t *g, const struct ntk_tile *t, void *nngp, void *ntk) {
  size_t rows = t->rows, cols = t->cols, es = g->es;
  int diag = t->bi == t->bj;
  /* Device image indices of the tile's row i and column j: r0 + i and
   * c0 + j in the job-wide cache, else the tile's own copy (rows, then
   * the columns of an off-diagonal tile). */
  size_t rbase = g->have ? t->r0 : 0, cbase = g->have ? t->c0 : diag ? 0 : rows;
  size_t nimg = rows + (diag ? 0 : cols);
  size_t npairs = diag ? rows * (rows + 1) / 2 : rows * cols;
  size_t want = npairs > nimg ? npairs : nimg;
  ntk_status st = g->have ? NTK_OK : grow_images(g, nimg);
  if (!st) st = grow_pairs(g, want < g->batch ? want : g->batch);
  if (st) return st;
  if (!g->have) {
    const char *x = g->data->x;
    EX_TRY(g->ex.put(g->ex.ctx, g->x, x + t->r0 * g->d * es, rows * g->d * es, g->err, sizeof g->err));
    if (!diag)
      EX_TRY(g->ex.put(g->ex.ctx, (char *)g->x + rows * g->d * es, x + t->c0 * g->d * es, cols * g->d * es, g->err,
                       sizeof g->err));
  }
  /* 1. each image not yet done with itself: its variance block */
  if (g->njudged && g->fresh_cap < nimg) {
    size_t *f = realloc(g->fresh, 2 * nimg * sizeof *f);
    if (!f) return ntk_error(NTK_ENOMEM, "out of memory");
    g->fresh = f;
    g->fresh_cap = nimg;
  }
  size_t np = 0, nfresh = 0;
  for (size_t k = 0; k < nimg; k++) {
    size_t img = k < rows ? rbase + k : cbase + (k - rows), global = k < rows ? t->r0 + k : t->c0 + (k - rows);
    if (g->have) {
      if (g->have[global]) continue;
      g->have[global] = 1;
    }
    if (g->njudged) {
      g->fresh[2 * nfresh] = img;
      g->fresh[2 * nfresh++ + 1] = global;
    }
    g->hpa[np] = g->hpb[np] = (unsigned)img;
    if (++np == g->pair_cap) {
      if ((st = run_batch(g, np, 1, 0))) return st;
      np = 0;
    }
  }
  if (np && (st = run_batch(g, np, 1, 0))) return st;
  /* the blocks of scale-free layers' inputs, judged (ntk_cnn_judge_vars) */
  for (size_t k = 0; k < nfresh; k++) {
    size_t vbytes = (size_t)g->plan->var_size * es;
    EX_TRY(g->ex.get(g->ex.ctx, g->hvar, (const char *)g->var + g->fresh[2 * k] * vbytes, vbytes, g->err,
                     sizeof g->err));
    /* A 0 there is a window of zeros or a variance that underflowed (an
     * image of x1 at 1e-30 against x2: its Relu's inputs); these blocks
     * have no oracle to tell, so the CPU computes that image's block with
     * its own (a few layers of one image's variances). */
    int need = 0;
    size_t img = g->fresh[2 * k + 1];
    st = ntk_cnn_judge_vars(g->arch, g->data, g->judged, g->njudged, g->hvar, img, NULL, &need);
    if (!st && need && !g->cpu) st = ntk_cnn_create(g->arch, g->data, NTK_CNN_AUTO, NULL, &g->cpu);
    if (!st && need) st = ntk_cnn_judge_image(g->cpu, img);
    if (st) {
      if (g->have) g->have[g->fresh[2 * k + 1]] = 0; /* not a block to keep */
      return st;
    }
  }
  /* 2. the pairs, in batches */
  size_t i = 0, j = 0;
  while (i < rows) {
    np = 0;
    for (; i < rows && np < g->pair_cap; np++) {
      g->hpa[np] = (unsigned)(rbase + i);
      g->hpb[np] = (unsigned)(cbase + j);
      if (++j == (diag ? i + 1 : cols)) {
        j = 0;
        i++;
      }
    }
    if ((st = run_batch(g, np, 0, ntk != NULL))) return st;
    EX_TRY(g->ex.get(g->ex.ctx, g->hout, g->out, np * 2 * es, g->err, sizeof g->err));
    for (size_t k = 0; k < np; k++) { /* tile coordinates */
      g->hpa[k] -= (unsigned)rbase;
      g->hpb[k] -= (unsigned)cbase;
    }
    if (es == 4) store_f(g->hout, np, g->hpa, g->hpb, cols, diag, nngp, ntk);
    else store_d(g->hout, np, g->hpa, g->hpb, cols, diag, nngp, ntk);
  }
  return NTK_OK;
}
