/* Times CNN kernel entries: computes one tile of `n` random 32x32x3
 * images (or H W C given) and prints seconds per entry (pair), each pair
 * computed once (lower triangle). By default on one core with the CPU
 * backend's CNN path; --gpu: the CUDA backend on GPU 0 (its start-up
 * self-check not timed); --emu: the GPU kernels in the host emulation;
 * --plan: no computing at all, each GPU launch of the tile printed as a
 * JSON line (scripts/gpu_model.py reads the geometry from there, so the
 * model follows src/backend/cuda/cnn_gpu.c as it is).
 *   ntkd_bench_cnn [--gpu|--emu|--plan] [--check K] "ARCH" N [float32|float64] [H W C]
 * Per-image work (the (a, a) runs) is included, as in a real tile.
 * Then, untimed, the entries of the first K images (default 3, 0: none)
 * are computed again on the GENERAL path (the full covariance, layer by
 * layer: the reference the fast paths are tested against) and compared
 * with the timed ones, as nccl-tests checks every timed run: the largest
 * error relative to sqrt(K_ii K_jj) is printed, and above the bound
 * (float32 1e-5, float64 1e-10) the exit status is 1. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cnn_gpu.h"
#include "kernels/arch.h"
#include "backend/backend.h"
#include "kernels/cnn.h"
#include "base/cpuinit.h"
#include "base/clock.h"

/* --plan: an executor that records launches and computes nothing. Its
 * device pointers are dummies; the CUDA executor's block size and limits. */
#define PLAN_THREADS 256 /* NTK_CUDA_THREADS, src/backend/cuda/cnn_cuda.cu */
static struct ntk_dev_plan plan_ops;
static const char *const plan_kernels[NTK_K_COUNT] = {
    [NTK_K_DIAG] = "DIAG",           [NTK_K_SLICE] = "SLICE",         [NTK_K_INPUT_FULL] = "INPUT_FULL",
    [NTK_K_CONV_FULL] = "CONV_FULL", [NTK_K_POOL_FULL] = "POOL_FULL", [NTK_K_READOUT] = "READOUT",
    [NTK_K_SLICE3] = "SLICE3",       [NTK_K_BRANCH_FULL] = "BRANCH_FULL", [NTK_K_DIAG_ANY] = "DIAG_ANY",
    [NTK_K_SLICE_ANY] = "SLICE_ANY"};
_Static_assert(NTK_K_COUNT == 10, "a kernel without a name in plan_kernels");
static int plan_alloc(void *ctx, void **p, size_t bytes, char *err, size_t cap) {
  static uintptr_t next = 0x10000;
  (void)ctx, (void)err, (void)cap;
  *p = (void *)next;
  next += (bytes + 0xffff) & ~(uintptr_t)0xffff;
  return 0;
}
static void plan_release(void *ctx, void *p) { (void)ctx, (void)p; }
static int plan_copy(void *ctx, void *dst, const void *src, size_t bytes, char *err, size_t cap) {
  (void)ctx, (void)dst, (void)src, (void)bytes, (void)err, (void)cap;
  return 0;
}
static int plan_zero(void *ctx, void *p, size_t bytes, char *err, size_t cap) {
  (void)ctx, (void)p, (void)bytes, (void)err, (void)cap;
  return 0;
}
static int plan_launch(void *ctx, int kernel, int elem, unsigned gx, unsigned gy, size_t smem,
                       const struct ntk_dev_args *a, char *err, size_t cap) {
  (void)ctx, (void)err, (void)cap;
  printf("{\"kernel\": \"%s\", \"elem\": %d, \"gx\": %u, \"gy\": %u, \"threads\": %d, \"smem\": %zu, "
         "\"h\": %d, \"w\": %d, \"bh\": %d, \"bw\": %d, \"k0\": %d, \"k1\": %d, \"with_t\": %d, "
         "\"capture\": %d, \"self\": %d, \"to_part\": %d, \"noff\": %d, \"ops\": [",
         plan_kernels[kernel], elem, gx, gy, PLAN_THREADS, smem, a->h, a->w, a->bh, a->bw, a->k0, a->k1, a->with_t,
         a->capture, a->self, a->to_part, a->noff);
  int k1 = kernel == NTK_K_SLICE || kernel == NTK_K_SLICE3 ? a->k1 : a->k0 + 1;
  for (int k = a->k0; k < k1 && k < plan_ops.nops; k++) {
    int kind = plan_ops.ops[k].kind;
    printf("%s\"%s\"", k > a->k0 ? ", " : "",
           kind == NTK_LAYER_CONV  ? "CONV"
           : kind == NTK_LAYER_MAP ? (plan_ops.ops[k].map.kind == NTK_MAP_ABRELU ? "ABRELU"
                                      : ntk_map_is_plain_erf(&plan_ops.ops[k].map) ? "ERF"
                                                                                   : "MAP")
           : kind == NTK_LAYER_DENSE ? "DENSE"
                                     : "OTHER");
  }
  printf("]}\n");
  return 0;
}

/* Entry (i, j) of an n x n tile in double. */
static double at(const void *m, size_t i, size_t j, size_t n, int elem) {
  return elem == 4 ? (double)((const float *)m)[i * n + j] : ((const double *)m)[i * n + j];
}

/* The timed tile's entries among the first k images against the GENERAL
 * path on those images. Returns 1 past the bound. */
static int check_general(const struct ntk_arch *arch, const struct ntk_dataset *ds, size_t k, const void *g,
                         const void *t, size_t n) {
  struct ntk_dataset sub = *ds;
  sub.n = k;
  ntk_cnn_t *ref = NULL;
  struct ntk_tiling tg;
  ntk_tiling_init(&tg, k, k);
  struct ntk_tile tl = ntk_tiling_tile(&tg, 0);
  void *rg = malloc(k * k * (size_t)ds->elem), *rt = malloc(k * k * (size_t)ds->elem);
  if (!rg || !rt || ntk_cnn_create(arch, &sub, NTK_CNN_GENERAL, NULL, &ref) || ntk_cnn_tile(ref, &tl, rg, rt)) {
    fprintf(stderr, "check: the general path failed: %s\n", ntk_error_message());
    ntk_cnn_free(ref);
    free(rg);
    free(rt);
    return 1;
  }
  double worst = 0, bound = ds->elem == 4 ? 1e-5 : 1e-10;
  int finite = 1;
  for (size_t i = 0; i < k; i++)
    for (size_t j = 0; j <= i; j++)
      for (int which = 0; which < 2; which++) {
        const void *got = which ? t : g, *want = which ? rt : rg;
        double a = at(got, i, j, n, ds->elem), b = at(want, i, j, k, ds->elem);
        double sc = sqrt(fabs(at(want, i, i, k, ds->elem) * at(want, j, j, k, ds->elem)));
        finite &= isfinite(a) && isfinite(b);
        double e = fabs(a - b) / (sc > 1e-300 ? sc : 1e-300);
        if (!(e <= worst)) worst = e; /* NaN wins */
      }
  int bad = !finite || !(worst <= bound);
  fprintf(stderr, "check: %zu entries (NNGP and NTK) of the first %zu images against the general path: largest "
          "error %.2e relative to sqrt(K_ii K_jj) (bound %.0e)%s\n", k * (k + 1), k, worst, bound,
          bad ? ": FAILED" : "");
  ntk_cnn_free(ref);
  free(rg);
  free(rt);
  return bad;
}

int main(int argc, char **argv) {
  ntk_cpu_fix_openblas(argv);
  const char *mode = "cpu";
  if (argc > 1 && (!strcmp(argv[1], "--gpu") || !strcmp(argv[1], "--emu") || !strcmp(argv[1], "--plan"))) {
    mode = argv[1] + 2;
    argv++;
    argc--;
  }
  size_t check = 3;
  if (argc > 2 && !strcmp(argv[1], "--check")) {
    check = (size_t)atol(argv[2]);
    argv += 2;
    argc -= 2;
  }
  if (argc < 3) {
    fprintf(stderr, "usage: ntkd_bench_cnn [--gpu|--emu|--plan] [--check K] ARCH N [float32|float64] [H W C]\n");
    return 2;
  }
  size_t n = (size_t)atol(argv[2]);
  int elem = argc > 3 && !strcmp(argv[3], "float64") ? 8 : 4;
  size_t h = argc > 6 ? (size_t)atol(argv[4]) : 32, w = argc > 6 ? (size_t)atol(argv[5]) : 32,
         c = argc > 6 ? (size_t)atol(argv[6]) : 3;
  struct ntk_arch arch;
  if (ntk_arch_parse(argv[1], 1.4142135623730951, 0.0, &arch)) {
    fprintf(stderr, "%s\n", ntk_error_message());
    return 2;
  }
  struct ntk_dataset ds = {n, h * w * c, h, w, c, elem, malloc(n * h * w * c * (size_t)elem), 0, 0, 0};
  unsigned s = 1;
  for (size_t k = 0; k < n * ds.d; k++) {
    s = s * 1103515245u + 12345u;
    double v = (double)((s >> 8) & 0xffff) / 65536.0;
    if (elem == 4) ((float *)ds.x)[k] = (float)v;
    else ((double *)ds.x)[k] = v;
  }
  struct ntk_tiling tg;
  ntk_tiling_init(&tg, n, n);
  struct ntk_tile t = ntk_tiling_tile(&tg, 0);
  void *g = malloc(n * n * (size_t)elem), *k = malloc(n * n * (size_t)elem);
  ntk_cnn_t *cnn = NULL;
  ntk_cnn_gpu_t *emu = NULL;
  struct ntk_gpu_exec ex;
  const struct ntk_backend_ops *gpu = NULL;
  struct ntk_problem prob = {.arch = &arch, .data = &ds, .kernels = NTK_KERNEL_NNGP | NTK_KERNEL_NTK, .device = 0};
  /* The CPU path polls two flags and counts entries as the library's
   * pool has it (base/stop.h), so that a before/after timing includes
   * the polls' cost; nothing sets them. */
  static volatile int never_a, never_b;
  uint64_t counted = 0;
  struct ntk_stop stop = {{&never_a, &never_b}, &counted};
  void *gctx = NULL;
  ntk_status st;
  if (!strcmp(mode, "gpu")) {
    gpu = ntk_backend_find("cuda");
    st = gpu ? gpu->create(&prob, &gctx) : ntk_error(NTK_ECONFIG, "this build has no CUDA backend");
  } else if (!strcmp(mode, "emu")) {
    ntk_gpu_exec_host(&ex, 1);
    st = ntk_cnn_gpu_create(&ex, &arch, &ds, &emu);
  } else if (!strcmp(mode, "plan")) {
    ntk_gpu_exec_host(&ex, 1);
    ex.name = "launch plan";
    ex.threads = PLAN_THREADS;
    ex.smem_max = 227 << 10;          /* sm_90's opt-in limit */
    ex.mem_budget = (size_t)16 << 30; /* ntk_gpu_exec_cuda's cap */
    ex.mem_free = (size_t)140 << 30;  /* an H200's free memory */
    ex.alloc = plan_alloc;
    ex.release = plan_release;
    ex.put = plan_copy;
    ex.get = plan_copy;
    ex.zero = plan_zero;
    ex.launch = plan_launch;
    st = ntk_cnn_dev_plan(&arch, &ds, &plan_ops);
    if (!st) st = ntk_cnn_gpu_create(&ex, &arch, &ds, &emu);
  } else {
    st = ntk_cnn_create(&arch, &ds, NTK_CNN_AUTO, &stop, &cnn);
  }
  if (st) {
    fprintf(stderr, "%s\n", ntk_error_message());
    return 2;
  }
  double t0 = ntk_now();
  st = gpu ? gpu->compute_tile(gctx, &t, g, k) : emu ? ntk_cnn_gpu_tile(emu, &t, g, k) : ntk_cnn_tile(cnn, &t, g, k);
  double sec = ntk_now() - t0, pairs = (double)n * (double)(n + 1) / 2.0;
  if (st) {
    fprintf(stderr, "%s\n", ntk_error_message());
    return 1;
  }
  const char *names[] = {"auto", "diag", "slice", "general"};
  printf("%.6e\n", sec / pairs);
  fprintf(stderr, "%s: %zu images %zux%zux%zu %s, %s%s: %.3f s for %.0f entries: %.3g s per entry%s\n", argv[1],
          n, h, w, c, elem == 4 ? "float32" : "float64", cnn ? names[ntk_cnn_get_path(cnn)] : mode,
          cnn && ntk_cnn_batched(cnn) ? " batched" : "", sec, pairs, sec / pairs, cnn ? " on one core" : "");
  int bad = 0;
  if (strcmp(mode, "plan") && check) bad = check_general(&arch, &ds, check < n ? check : n, g, k, n);
  if (gpu) gpu->destroy(gctx);
  ntk_cnn_gpu_free(emu);
  ntk_cnn_free(cnn);
  ntk_arch_free(&arch);
  free(ds.x);
  free(g);
  free(k);
  return bad;
}
