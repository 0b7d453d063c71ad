/* The GPU's CNN kernels (src/kernels/cnn_dev_impl.h) and their launch order
 * (src/backend/cuda/cnn_gpu.c), run by the host emulation, against the CPU
 * backend: every test architecture, float32 and float64, with one thread
 * per block (plain loops; every image on the device for the whole job) and
 * with three threads meeting at barriers (the block-stride loops and
 * barriers as a GPU runs them; each tile's images copied per tile), ragged
 * tiles and small batches. On a machine with a GPU, test_backend and
 * scripts/gpu_check.sh run the same kernels under CUDA. */
#include <math.h>
#include <stdint.h>
#include <string.h>


#include "backend/cuda/cnn_gpu.h"
#include "cnn_archs.h"
#include "kernels/cnn.h"
#include "refcase.h"
#include "testutil.h"

/* The host emulation, recording each kernel's launches: how many, the
 * SLICE3 variants (bit with_t + 2 capture) and the largest shared memory
 * a block of each kernel asks for. */
struct rec_exec {
  struct ntk_gpu_exec inner;
  unsigned launches[NTK_K_COUNT], slice3_variants;
  size_t smem[NTK_K_COUNT];
};
static int rec_alloc(void *ctx, void **p, size_t bytes, char *err, size_t cap) {
  struct rec_exec *r = ctx;
  return r->inner.alloc(r->inner.ctx, p, bytes, err, cap);
}
static void rec_release(void *ctx, void *p) {
  struct rec_exec *r = ctx;
  r->inner.release(r->inner.ctx, p);
}
static int rec_put(void *ctx, void *dev, const void *host, size_t bytes, char *err, size_t cap) {
  struct rec_exec *r = ctx;
  return r->inner.put(r->inner.ctx, dev, host, bytes, err, cap);
}
static int rec_get(void *ctx, void *host, const void *dev, size_t bytes, char *err, size_t cap) {
  struct rec_exec *r = ctx;
  return r->inner.get(r->inner.ctx, host, dev, bytes, err, cap);
}
static int rec_zero(void *ctx, void *dev, size_t bytes, char *err, size_t cap) {
  struct rec_exec *r = ctx;
  return r->inner.zero(r->inner.ctx, dev, bytes, err, cap);
}
static int rec_launch(void *ctx, int kernel, int elem, unsigned gx, unsigned gy, size_t smem,
                      const struct ntk_dev_args *a, char *err, size_t cap) {
  struct rec_exec *r = ctx;
  r->launches[kernel]++;
  if (smem > r->smem[kernel]) r->smem[kernel] = smem;
  if (kernel == NTK_K_SLICE3) r->slice3_variants |= 1u << ((a->with_t ? 1 : 0) + (a->capture ? 2 : 0));
  return r->inner.launch(r->inner.ctx, kernel, elem, gx, gy, smem, a, err, cap);
}
/* ex: the executor to pass on (it points at r). */
static void rec_init(struct rec_exec *r, struct ntk_gpu_exec *ex, unsigned threads) {
  memset(r, 0, sizeof *r);
  ntk_gpu_exec_host(&r->inner, threads);
  *ex = r->inner;
  ex->ctx = r;
  ex->alloc = rec_alloc;
  ex->release = rec_release;
  ex->put = rec_put;
  ex->get = rec_get;
  ex->zero = rec_zero;
  ex->launch = rec_launch;
}

/* Whole n x n matrices from tiles of edge `tile`: the CPU (ex NULL) or
 * the emulated GPU. Checks that diagonal tiles are exactly symmetric. */
static void matrices(const struct ntk_arch *arch, const struct ntk_dataset *ds, const struct ntk_gpu_exec *ex,
                     size_t tile, double *g, double *t) {
  ntk_cnn_t *c = NULL;
  ntk_cnn_gpu_t *gc = NULL;
  if (ex) ck_assert_msg(ntk_cnn_gpu_create(ex, arch, ds, &gc) == NTK_OK, "%s", ntk_error_message());
  else ck_assert_msg(ntk_cnn_create(arch, ds, NTK_CNN_AUTO, NULL, &c) == NTK_OK, "%s", ntk_error_message());
  struct ntk_tiling tg;
  ntk_tiling_init(&tg, ds->n, tile);
  size_t es = (size_t)ds->elem, n = ds->n;
  char *bg = malloc(tile * tile * es), *bt = malloc(tile * tile * es);
  for (uint64_t k = 0; k < tg.ntiles; k++) {
    struct ntk_tile tl = ntk_tiling_tile(&tg, k);
    ntk_status st = ex ? ntk_cnn_gpu_tile(gc, &tl, bg, bt) : ntk_cnn_tile(c, &tl, bg, bt);
    ck_assert_msg(st == NTK_OK, "%s", ntk_error_message());
    if (tl.bi == tl.bj)
      for (size_t i = 0; i < tl.rows; i++)
        for (size_t j = 0; j < i; j++)
          ck_assert(!memcmp(bg + (i * tl.cols + j) * es, bg + (j * tl.cols + i) * es, es) &&
                    !memcmp(bt + (i * tl.cols + j) * es, bt + (j * tl.cols + i) * es, es));
    scatter_tile(&tl, bg, bt, es, n, g, t);
  }
  free(bg);
  free(bt);
  ntk_cnn_free(c);
  ntk_cnn_gpu_free(gc);
}

static void check_against_cpu(int elem) {
  struct ntk_dataset ds;
  random_images(&ds, 13, 6, 5, 2, elem, 3);
  size_t n = ds.n;
  double *g0 = malloc(n * n * 8), *t0 = malloc(n * n * 8), *g1 = malloc(n * n * 8), *t1 = malloc(n * n * 8);
  /* float64 is the CPU's arithmetic per entry; only sums over many entries
   * run in another order. float32 the same, at float32's rounding: 1e-5 as
   * for a GPU (GlobalAvgPool of raw random images sums 900 products that
   * nearly cancel, 6e-6 apart between the CPU's order and the tree's). */
  double bound = elem == 4 ? 1e-5 : 1e-13, worst = 0;
  setenv("NTKD_GPU_MAX_BATCH", "7", 1); /* several batches per tile, ragged */
  for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
    if (strstr(archs[a], "ElementwiseNumerical")) continue; /* refused on GPUs (backend_cuda.c): CPU only */
    struct ntk_arch arch;
    ck_assert_msg(test_arch_parse(archs[a], 1.3, 0.05, &arch) == NTK_OK, "%s", ntk_error_message());
    if (gpu_refuses(archs[a])) { /* a ConvLocal's zeros, a ConvTranspose, attention: on CPUs only */
      struct ntk_dev_plan plan;
      ck_assert_msg(ntk_cnn_dev_plan(&arch, &ds, &plan) == NTK_ECONFIG &&
                        (strstr(ntk_error_message(), "Conv") || strstr(ntk_error_message(), "GlobalSelfAttention") ||
                         strstr(ntk_error_message(), "ImageResize")),
                    "%s: %s", archs[a], ntk_error_message());
      ntk_arch_free(&arch);
      continue;
    }
    matrices(&arch, &ds, NULL, 5, g0, t0);
    /* 3 threads (the block barriers) on every third network and every
     * residual one: each barrier beside other runnable processes costs a
     * scheduler period, and all of them ran the test past ctest's limit
     * on a loaded machine (a hunt: 20 times its idle minute). One thread
     * covers every network. */
    int three = a % 3 == 0 || strstr(archs[a], "FanOut");
    for (unsigned threads = 1; threads <= (three ? 3u : 1u); threads += 2) {
      struct ntk_gpu_exec ex;
      ntk_gpu_exec_host(&ex, threads);
      /* 3 threads: a device too small for the job-wide image cache, so
       * each tile copies its images and computes their variances. */
      if (threads == 3) /* (a residual network needs room for its branch stack per pair) */
        ex.mem_budget = ex.mem_free = (strstr(archs[a], "FanOut") ? 40000 : 7500) * (size_t)elem;
      matrices(&arch, &ds, &ex, 5, g1, t1);
      double eg = ref_max_err(g1, 8, g0, n, 0), et = ref_max_err(t1, 8, t0, n, 0);
      ck_assert_msg(eg < bound && et < bound, "%s, %s, %u threads: nngp %.3g ntk %.3g (bound %g)", archs[a],
                    elem == 4 ? "float32" : "float64", threads, eg, et, bound);
      worst = fmax(worst, fmax(eg, et));
    }
    ntk_arch_free(&arch);
  }
  unsetenv("NTKD_GPU_MAX_BATCH");
  printf("emulated GPU vs CPU, %s, %zu networks: largest relative difference %.3g (bound %g)\n",
         elem == 4 ? "float32" : "float64", sizeof archs / sizeof *archs, worst, bound);
  free(g0);
  free(t0);
  free(g1);
  free(t1);
  free(ds.x);
}

START_TEST(test_gpu_kernels_float32) { check_against_cpu(4); }
END_TEST

START_TEST(test_gpu_kernels_float64) { check_against_cpu(8); }
END_TEST

/* The sizes the benchmarks use: 32 x 32 x 3 images (1 024 positions, 3 969
 * offsets), a pooled Myrtle-style network and a CNTK-style one, float32,
 * emulated with 4 threads per block against the CPU. */
START_TEST(test_gpu_kernels_32x32) {
  /* elem 8: float64, whose SLICE blocks need the most shared memory: the
   * generic kernel's (a Conv(2) in the run) more than the 48 KiB a GPU
   * block gets without opting in (cnn_cuda.cu opts in). */
  static const struct {
    const char *arch;
    int elem;
  } big[] = {
      {"Conv(3, 1, SAME) Relu AvgPool(2) Conv(3, 1, SAME) Relu AvgPool(2) Conv(3, 1, SAME) Relu GlobalAvgPool Dense", 4},
      {"[Conv(3, 1, SAME) Relu]*2 GlobalAvgPool Dense", 4},
      {"[Conv(3, 1, SAME) Relu]*2 Flatten Dense", 4},
      {"[Conv(3, 1, SAME) Relu]*2 GlobalAvgPool Dense", 8},
      {"Conv(3, 1, SAME) Relu Conv(2, 1, SAME) Relu GlobalAvgPool Dense", 8},
      /* neural-tangents' README WideResNet (configs/wrn.conf): one SLICE run through its strided
       * blocks, on 225 offsets (the lattice of 4), then AvgPool on the 8 x 8 covariance */
      {"Conv(16, (3, 3), padding='SAME') FanOut(2) parallel(serial(Relu, Conv(16, (3, 3), (1, 1), padding='SAME'), "
       "Relu, Conv(16, (3, 3), padding='SAME')), Conv(16, (3, 3), (1, 1), padding='SAME')) FanInSum [FanOut(2) "
       "parallel(serial(Relu, Conv(16, (3, 3), (1, 1), padding='SAME'), Relu, Conv(16, (3, 3), padding='SAME')), "
       "Identity) FanInSum]*3 FanOut(2) parallel(serial(Relu, Conv(32, (3, 3), (2, 2), padding='SAME'), Relu, "
       "Conv(32, (3, 3), padding='SAME')), Conv(32, (3, 3), (2, 2), padding='SAME')) FanInSum [FanOut(2) "
       "parallel(serial(Relu, Conv(32, (3, 3), (1, 1), padding='SAME'), Relu, Conv(32, (3, 3), padding='SAME')), "
       "Identity) FanInSum]*3 FanOut(2) parallel(serial(Relu, Conv(64, (3, 3), (2, 2), padding='SAME'), Relu, "
       "Conv(64, (3, 3), padding='SAME')), Conv(64, (3, 3), (2, 2), padding='SAME')) FanInSum [FanOut(2) "
       "parallel(serial(Relu, Conv(64, (3, 3), (1, 1), padding='SAME'), Relu, Conv(64, (3, 3), padding='SAME')), "
       "Identity) FanInSum]*3 AvgPool((8, 8)) Flatten Dense(10, W_std=1.0, b_std=0.0)", 4},
  };
  struct ntk_dataset ds[2]; /* float64: two images, two emulated threads (CI time) */
  random_images(&ds[0], 4, 32, 32, 3, 4, 17);
  random_images(&ds[1], 2, 32, 32, 3, 8, 17);
  double *g0 = malloc(16 * 8), *t0 = malloc(16 * 8), *g1 = malloc(16 * 8), *t1 = malloc(16 * 8);
  for (size_t a = 0; a < sizeof big / sizeof *big; a++) {
    int elem = big[a].elem;
    const struct ntk_dataset *d = &ds[elem == 8];
    size_t n = d->n;
    struct ntk_arch arch;
    ck_assert_int_eq(ntk_arch_parse(big[a].arch, 1.4142135623730951, 0.0, &arch), NTK_OK);
    matrices(&arch, d, NULL, 3, g0, t0);
    struct rec_exec rec;
    struct ntk_gpu_exec ex;
    rec_init(&rec, &ex, elem == 4 ? 4 : 2);
    matrices(&arch, d, &ex, 3, g1, t1);
    double eg = ref_max_err(g1, 8, g0, n, 0), et = ref_max_err(t1, 8, t0, n, 0);
    size_t sm = rec.smem[NTK_K_SLICE] > rec.smem[NTK_K_SLICE3] ? rec.smem[NTK_K_SLICE] : rec.smem[NTK_K_SLICE3];
    printf("emulated GPU vs CPU, 32x32x3 %s, %s: nngp %.3g ntk %.3g (SLICE block %zu bytes of shared memory)\n",
           elem == 4 ? "float32" : "float64", big[a].arch, eg, et, sm);
    if (elem == 4) ck_assert_msg(eg == 0 && et == 0, "%s: nngp %.3g ntk %.3g", big[a].arch, eg, et);
    else ck_assert_msg(eg < 1e-13 && et < 1e-13, "%s: nngp %.3g ntk %.3g", big[a].arch, eg, et);
    if (strstr(big[a].arch, "FanOut")) /* no full covariance but the 8 x 8 one AvgPool reads */
      ck_assert_msg(rec.launches[NTK_K_SLICE] > 0 && rec.launches[NTK_K_CONV_FULL] + rec.launches[NTK_K_BRANCH_FULL] +
                    rec.launches[NTK_K_INPUT_FULL] == 0 && rec.launches[NTK_K_POOL_FULL] > 0,
                    "%u SLICE, %u CONV_FULL, %u BRANCH_FULL, %u INPUT_FULL launches", rec.launches[NTK_K_SLICE],
                    rec.launches[NTK_K_CONV_FULL], rec.launches[NTK_K_BRANCH_FULL], rec.launches[NTK_K_INPUT_FULL]);
    else if (strstr(big[a].arch, "Conv(2")) /* the generic SLICE kernel, past 48 KiB */
      ck_assert_msg(rec.launches[NTK_K_SLICE] > 0 && rec.smem[NTK_K_SLICE] > 48 << 10, "%zu", rec.smem[NTK_K_SLICE]);
    else if (strstr(big[a].arch, "GlobalAvgPool"))
      ck_assert(rec.launches[NTK_K_SLICE3] > 0 && rec.launches[NTK_K_SLICE] == 0);
    ntk_arch_free(&arch);
  }
  free(g0);
  free(t0);
  free(g1);
  free(t1);
  free(ds[0].x);
  free(ds[1].x);
}
END_TEST

/* SLICE3, the kernel for runs of 3x3 convolutions, in each of its cases:
 * a Conv with Relu, LeakyRelu/Abs or Erf folded in, other pointwise layers
 * after a Conv, a nonlinear tail (the self pairs then run every offset), a
 * band of offsets before Flatten (cells written back, the rest of a block
 * left out), a network whose other run takes the generic SLICE kernel;
 * three threads per block (block-stride loops over the strips), and for
 * float32 also one and 16 (one strip per thread, as on a GPU); NTK and
 * NNGP only. float32 equal to the CPU's bit for bit, float64 within 1e-13.
 * Strips take each of their paths: the fast one in one slice and across
 * the row between two slices, and cell by cell.
 * Removing SLICE3's one barrier per convolution makes this test fail
 * (checked), as a missing __syncthreads() would on a GPU. */
START_TEST(test_gpu_slice3) {
  static const char *const nets[] = {
      "Conv(3, 1, SAME) LeakyRelu(0.1) Conv(3, 1, SAME) Abs GlobalAvgPool Dense",
      "Conv(3, 1, SAME, b_std=0.1) Erf Conv(3, 1, SAME) Relu GlobalAvgPool Dense Relu Dense",
      "Conv(3, 1, SAME) Relu Dense Conv(3, 1, SAME) Relu Dense(W_std=0.9) GlobalAvgPool",
      "Conv(3, 1, SAME) Relu Conv(3, 1, SAME) Relu AvgPool(2) Flatten Dense",
      "Conv(3, 1, SAME) Relu AvgPool(2, 1) Conv(2, 1, SAME) Relu GlobalAvgPool Dense",
  };
  unsigned variants = 0;
  for (int elem = 4; elem <= 8; elem += 4) {
    struct ntk_dataset ds;
    random_images(&ds, 5, 6, 5, 2, elem, 5);
    size_t n = ds.n;
    double *g0 = malloc(n * n * 8), *t0 = malloc(n * n * 8), *g1 = malloc(n * n * 8), *t1 = malloc(n * n * 8);
    setenv("NTKD_GPU_MAX_BATCH", "4", 1);
    for (size_t a = 0; a < sizeof nets / sizeof *nets; a++) {
      struct ntk_arch arch;
      ck_assert_msg(ntk_arch_parse(nets[a], 1.3, 0.05, &arch) == NTK_OK, "%s", ntk_error_message());
      matrices(&arch, &ds, NULL, 4, g0, t0);
      static const unsigned threads[] = {3, 1, 16}; /* float64: 3 only (CI time) */
      for (size_t k = 0; k < (elem == 4 ? 3u : 1u); k++) {
        struct rec_exec rec;
        struct ntk_gpu_exec ex;
        rec_init(&rec, &ex, threads[k]);
        unsigned long paths[3];
        ntk_gpu_host_slice3_paths(paths); /* from 0 */
        matrices(&arch, &ds, &ex, 4, g1, t1);
        /* 6 rows: the strip of rows 0-3 crosses row Di in blocks Di = 1 .. 3
         * and takes the fast path there (not before Flatten: the band's
         * blocks there hold one of the two slices only); rows 4-7 run past
         * the last row */
        ntk_gpu_host_slice3_paths(paths);
        ck_assert_msg(paths[0] > 0 && (paths[1] > 0 || strstr(nets[a], "Flatten")) && paths[2] > 0,
                      "%s, %u threads: SLICE3 strips by path %lu %lu %lu", nets[a], threads[k], paths[0], paths[1],
                      paths[2]);
        double eg = ref_max_err(g1, 8, g0, n, 0), et = ref_max_err(t1, 8, t0, n, 0);
        double bound = elem == 4 ? 0 : 1e-13;
        ck_assert_msg(eg <= bound && et <= bound, "%s, %s, %u threads: nngp %.3g ntk %.3g", nets[a],
                      elem == 4 ? "float32" : "float64", threads[k], eg, et);
        ck_assert_msg(rec.launches[NTK_K_SLICE3] > 0, "%s: no SLICE3 launch", nets[a]);
        variants |= rec.slice3_variants;
      }
      /* NNGP only: the same NNGP */
      ntk_cnn_gpu_t *gc;
      struct ntk_gpu_exec ex;
      ntk_gpu_exec_host(&ex, 3);
      ck_assert_int_eq(ntk_cnn_gpu_create(&ex, &arch, &ds, &gc), NTK_OK);
      struct ntk_tiling tg;
      ntk_tiling_init(&tg, ds.n, 4);
      for (uint64_t k = 0; k < tg.ntiles; k++) {
        struct ntk_tile tl = ntk_tiling_tile(&tg, k);
        double a2[16], b2[16], c2[16];
        ck_assert_int_eq(ntk_cnn_gpu_tile(gc, &tl, a2, b2), NTK_OK);
        ck_assert_int_eq(ntk_cnn_gpu_tile(gc, &tl, c2, NULL), NTK_OK);
        ck_assert(!memcmp(a2, c2, tl.rows * tl.cols * (size_t)elem));
      }
      ntk_cnn_gpu_free(gc);
      ntk_arch_free(&arch);
    }
    unsetenv("NTKD_GPU_MAX_BATCH");
    free(g0);
    free(t0);
    free(g1);
    free(t1);
    free(ds.x);
  }
  /* the pairs with the NTK, and the self pairs' variance capture */
  ck_assert_msg((variants & 0x2) && (variants & 0x4), "SLICE3 variants seen: %#x", variants);
}
END_TEST

/* The division-free cell index of the kernels: exact for every region
 * width a block can have, over more cells than shared memory holds. */
START_TEST(test_cell_index) {
  for (unsigned vw = 1; vw <= 300; vw++) {
    float inv = 1.0f / (float)vw;
    for (unsigned k = 0; k < (1u << 17); k++) {
      unsigned i, j;
      DV_CELL(k, vw, inv, i, j);
      if (i != k / vw || j != k % vw) ck_abort_msg("DV_CELL(%u, %u) = (%u, %u)", k, vw, i, j);
    }
  }
}
END_TEST

/* Residual blocks run inside the SLICE kernel's runs (a stack in shared
 * memory), with no BRANCH_FULL launch: those of stride-1 SAME layers, and
 * strided ones whose branches' strides multiply to the same number, which
 * the runs carry with their strided Convs (cnn.c's plan_chain): then no
 * CONV_FULL either, and into GlobalAvgPool no full covariance at all
 * (INPUT_FULL). A block of unequal strides still takes BRANCH_FULL, as
 * does every strided block with NTKD_GPU_CHAIN=0 (`full`: the launches
 * then) or when the chained runs' stacks would not fit the device's shared
 * memory. All against the CPU: float32 bit for bit, float64 to 1e-13. */
START_TEST(test_gpu_blocks_in_slices) {
  static const struct {
    const char *arch;
    int full;  /* BRANCH_FULL launches expected without chained runs */
    int chain; /* ... with them: 0 none; 1 some (unequal strides); 2 none, and no full covariance */
  } nets[] = {
      {"Conv(3, 1, SAME) [FanOut(2) parallel(serial(Relu Conv(3, 1, SAME) Relu Conv(3, 1, SAME)), Identity) "
       "FanInSum]*2 Relu GlobalAvgPool Dense", 0, 2},
      {"Conv(4, (3, 3), padding=SAME) FanOut(2) parallel(serial(Relu Conv(8, (3, 3), padding=SAME) FanOut(2) "
       "parallel(serial(Erf Conv(8, (1, 3), padding=SAME)), Identity) FanInSum), Identity) FanInConcat "
       "Conv(3, 1, SAME) Relu AvgPool(2, 1) Flatten Dense", 0, 0},
      {"Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 2, SAME)), Conv(3, 2, SAME)) FanInSum "
       "FanOut(2) parallel(serial(Relu Conv(3, 1, SAME)), Identity) FanInSum Relu GlobalAvgPool Dense", 1, 2},
      {"Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 1, SAME)), Conv(1, 1, SAME)) FanInProd Conv(3, 1, SAME) Relu "
       "GlobalAvgPool Dense", 0, 2},
      {"Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 2, SAME)), Conv(3, 2, SAME)) FanInProd "
       "Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 1, SAME)), Identity) FanInProd Conv(3, 1, SAME) Relu "
       "GlobalAvgPool Dense", 1, 2},
      /* a WideResNet's stages: blocks of a strided 3x3 and a strided 1x1 shortcut, Erf inside (SLICE_ANY) */
      {"Conv(4, (3, 3), padding='SAME') FanOut(2) parallel(serial(Relu, Conv(4, (3, 3), (2, 2), padding='SAME'), "
       "Erf, Conv(4, (3, 3), padding='SAME')), Conv(4, (1, 1), (2, 2))) FanInSum FanOut(2) parallel(serial(Relu, "
       "Conv(4, (3, 3), (2, 2), padding='SAME'), Relu, Conv(4, (3, 3), padding='SAME')), Conv(4, (1, 1), (2, 2))) "
       "FanInSum Relu GlobalAvgPool Dense", 1, 2},
      /* nested strided blocks, rectangular strides, a VALID strided Conv whose far offsets fall off */
      {"Conv(3, 1, SAME) FanOut(2) parallel(serial(FanOut(2) parallel(Conv(3, 2, SAME), serial(Relu Conv(1, 2, SAME))) "
       "FanInSum Relu Conv(3, 1, SAME)), Conv(3, 2, SAME)) FanInSum Gelu Conv(4, (2, 2), strides=(2, 1), "
       "padding='SAME') Relu GlobalAvgPool Dense", 2, 2},
      {"Conv(3, 1, SAME) Relu Conv(3, 2, VALID) Relu Conv(2, 1, SAME) Relu GlobalAvgPool Dense", 0, 2},
      /* a branch ending in a stride-1 Conv at the smaller size, the next starting with two at the block
       * input's: they read zero borders that the NEXT restores (dv_slice_branch_strided) */
      {"Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 2, SAME) Relu Conv(3, 1, SAME)), serial(Conv(3, 1, "
       "SAME) Relu Conv(3, 1, SAME) Conv(1, 2, SAME))) FanInSum Relu GlobalAvgPool Dense", 1, 2},
      /* unequal strides (4 and 2): BRANCH_FULL either way */
      {"Conv(5, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 4, SAME)), Conv(3, 2, VALID)) FanInSum Relu "
       "Conv(3, 1, SAME) Relu GlobalAvgPool Dense", 1, 1},
      /* the standard parameterisation through a strided block, an AvgPool after it (a full covariance) */
      {"standard: Conv(4, (3, 3), padding=SAME) FanOut(2) parallel(serial(Relu Conv(4, (3, 3), strides=(2, 2), "
       "padding=SAME)), Conv(4, (1, 1), strides=(2, 2))) FanInSum Relu AvgPool(2, 1) Flatten Dense", 1, 0},
  };
  int fallbacks = 0;
  for (int elem = 4; elem <= 8; elem += 4) {
    struct ntk_dataset ds;
    random_images(&ds, 9, 6, 5, 2, elem, 11);
    size_t n = ds.n;
    double *g0 = malloc(n * n * 8), *t0 = malloc(n * n * 8), *g1 = malloc(n * n * 8), *t1 = malloc(n * n * 8);
    for (size_t a = 0; a < sizeof nets / sizeof *nets; a++) {
      struct ntk_arch arch;
      ck_assert_msg(test_arch_parse(nets[a].arch, 1.3, 0.05, &arch) == NTK_OK, "%s", ntk_error_message());
      matrices(&arch, &ds, NULL, 4, g0, t0);
      size_t smem[2] = {0, 0}; /* the largest SLICE-kind block: chained runs, unchained runs */
      for (int mode = 0; mode < 3; mode++) { /* chained runs; NTKD_GPU_CHAIN=0; shared memory for unchained ones only */
        struct rec_exec rec;
        struct ntk_gpu_exec ex;
        rec_init(&rec, &ex, 3);
        if (mode == 1) setenv("NTKD_GPU_CHAIN", "0", 1);
        if (mode == 2) ex.smem_max = smem[1];
        matrices(&arch, &ds, &ex, 4, g1, t1);
        unsetenv("NTKD_GPU_CHAIN");
        if (mode < 2)
          for (int kk = NTK_K_SLICE; kk < NTK_K_COUNT; kk++)
            if ((kk == NTK_K_SLICE || kk == NTK_K_SLICE3 || kk == NTK_K_SLICE_ANY) && rec.smem[kk] > smem[mode])
              smem[mode] = rec.smem[kk];
        double eg = ref_max_err(g1, 8, g0, n, 0), et = ref_max_err(t1, 8, t0, n, 0), bound = elem == 4 ? 0 : 1e-13;
        ck_assert_msg(eg <= bound && et <= bound, "%s, float%d, mode %d: nngp %.3g ntk %.3g", nets[a].arch, 8 * elem,
                      mode, eg, et);
        ck_assert_msg(rec.launches[NTK_K_SLICE] + rec.launches[NTK_K_SLICE_ANY] + rec.launches[NTK_K_SLICE3] > 0,
                      "%s: no SLICE launch", nets[a].arch);
        unsigned branch = rec.launches[NTK_K_BRANCH_FULL], conv = rec.launches[NTK_K_CONV_FULL];
        unsigned input = rec.launches[NTK_K_INPUT_FULL];
        /* mode 2: the chained runs are taken where they fit the unchained ones' shared memory */
        int chained = mode == 0 || (mode == 2 && smem[0] <= smem[1]);
        fallbacks += mode == 2 && !chained;
        if (chained && nets[a].chain != 1)
          ck_assert_msg(branch == 0 && (nets[a].chain != 2 || (conv == 0 && input == 0)),
                        "%s, mode %d: %u BRANCH_FULL, %u CONV_FULL, %u INPUT_FULL launches", nets[a].arch, mode,
                        branch, conv, input);
        else
          ck_assert_msg((branch > 0) == (nets[a].full > 0), "%s, mode %d: %u BRANCH_FULL launches", nets[a].arch,
                        mode, branch);
      }
      ntk_arch_free(&arch);
    }
    free(g0);
    free(t0);
    free(g1);
    free(t1);
    free(ds.x);
  }
  ck_assert_msg(fallbacks > 0, "no network fell back to unchained runs for want of shared memory");
}
END_TEST

/* NNGP only (ntk NULL): the same NNGP as with the NTK. */
START_TEST(test_gpu_nngp_only) {
  struct ntk_dataset ds;
  random_images(&ds, 6, 5, 5, 3, 8, 9);
  struct ntk_arch arch;
  ck_assert_int_eq(ntk_arch_parse("Conv(3, 1, SAME) Relu AvgPool(2, 1) Conv(3, 1, SAME) Relu GlobalAvgPool Dense",
                                  1.0, 0.0, &arch), NTK_OK);
  struct ntk_gpu_exec ex;
  ntk_gpu_exec_host(&ex, 2);
  ntk_cnn_gpu_t *gc;
  ck_assert_int_eq(ntk_cnn_gpu_create(&ex, &arch, &ds, &gc), NTK_OK);
  struct ntk_tiling tg;
  ntk_tiling_init(&tg, ds.n, 4);
  double a[16], b[16], c[16];
  for (uint64_t k = 0; k < tg.ntiles; k++) {
    struct ntk_tile tl = ntk_tiling_tile(&tg, k);
    ck_assert_int_eq(ntk_cnn_gpu_tile(gc, &tl, a, b), NTK_OK);
    ck_assert_int_eq(ntk_cnn_gpu_tile(gc, &tl, c, NULL), NTK_OK);
    ck_assert(!memcmp(a, c, tl.rows * tl.cols * sizeof(double)));
  }
  ntk_cnn_gpu_free(gc);
  ntk_arch_free(&arch);
  free(ds.x);
}
END_TEST

/* A variance entering a scale-free layer below float32's normal range is
 * refused on the GPU path too: each image's block is fetched and judged as
 * the CPU judges its own (ntk_cnn_judge_vars); at scale 1, with a blank band
 * of rows, the same networks compute. */
START_TEST(test_gpu_scale_free_underflow) {
  const char *nets[] = {"Conv(3, 2, SAME) Sign GlobalAvgPool Dense", "Conv(3, 2, SAME) LayerNorm Relu Flatten Dense",
                        "Conv(3, 2, SAME) Relu GlobalAvgPool Dense LayerNorm(eps=0) Dense"};
  for (size_t a = 0; a < 3; a++) {
    struct ntk_dataset ds;
    random_images(&ds, 4, 5, 5, 2, 4, 3);
    for (size_t k = 0; k < 4 * ds.d; k++) ((float *)ds.x)[k] *= k % ds.d < 10 ? 0.0f : 1e-21f;
    struct ntk_arch arch;
    ck_assert_int_eq(ntk_arch_parse(nets[a], 1.3, 0.0, &arch), NTK_OK);
    struct ntk_gpu_exec ex;
    ntk_gpu_exec_host(&ex, 2);
    ntk_cnn_gpu_t *gc;
    ck_assert_msg(ntk_cnn_gpu_create(&ex, &arch, &ds, &gc) == NTK_OK, "%s: %s", nets[a], ntk_error_message());
    struct ntk_tiling tg;
    ntk_tiling_init(&tg, ds.n, 2);
    float g[4], t[4];
    struct ntk_tile tl = ntk_tiling_tile(&tg, 0);
    ck_assert_int_eq(ntk_cnn_gpu_tile(gc, &tl, g, t), NTK_ENONFINITE);
    ck_assert_msg(strstr(ntk_error_message(), "below float32's normal range"), "%s", ntk_error_message());
    ntk_cnn_gpu_free(gc);
    for (size_t k = 0; k < 4 * ds.d; k++) ((float *)ds.x)[k] *= 1e21f;
    ck_assert_int_eq(ntk_cnn_gpu_create(&ex, &arch, &ds, &gc), NTK_OK);
    for (uint64_t k = 0; k < tg.ntiles; k++) {
      tl = ntk_tiling_tile(&tg, k);
      ck_assert_msg(ntk_cnn_gpu_tile(gc, &tl, g, t) == NTK_OK, "%s: %s", nets[a], ntk_error_message());
    }
    ntk_cnn_gpu_free(gc);
    ntk_arch_free(&arch);
    free(ds.x);
  }
}
END_TEST

/* A Relu's input variances are judged too, and a 0 in the GPU's blocks
 * (which have no oracle) is told from a window of zeros by the CPU's block
 * of that image: one image of four scaled by 1e-30, its variance 0 in
 * float32, the others with two rows of zeros (windows of zeros, a 0 that
 * is right). In a tile off the diagonal (x1 against x2) the image's own
 * value is in no entry: it came back wrong with exit 0 (a hunt). */
START_TEST(test_gpu_relu_underflow) {
  struct ntk_dataset ds;
  random_images(&ds, 4, 5, 5, 2, 4, 3);
  for (size_t i = 0; i < 4; i++)
    for (size_t k = 0; k < 20; k++) ((float *)ds.x)[i * ds.d + k] = 0.0f; /* rows 0 and 1 */
  struct ntk_arch arch;
  ck_assert_int_eq(ntk_arch_parse("Conv(3, 2, SAME) Relu Conv(3, 2, SAME) Relu GlobalAvgPool Dense", 1.5, 0.0, &arch),
                   NTK_OK);
  struct ntk_gpu_exec ex;
  ntk_gpu_exec_host(&ex, 2);
  struct ntk_tiling tg;
  ntk_tiling_init(&tg, ds.n, 2);
  float g[4], t[4];
  ntk_cnn_gpu_t *gc;
  /* windows of zeros alone: every tile computes */
  ck_assert_int_eq(ntk_cnn_gpu_create(&ex, &arch, &ds, &gc), NTK_OK);
  for (uint64_t k = 0; k < tg.ntiles; k++) {
    struct ntk_tile tl = ntk_tiling_tile(&tg, k);
    ck_assert_msg(ntk_cnn_gpu_tile(gc, &tl, g, t) == NTK_OK, "tile %llu: %s", (unsigned long long)k,
                  ntk_error_message());
  }
  ntk_cnn_gpu_free(gc);
  for (size_t k = 0; k < ds.d; k++) ((float *)ds.x)[3 * ds.d + k] *= 1e-30f;
  ck_assert_int_eq(ntk_cnn_gpu_create(&ex, &arch, &ds, &gc), NTK_OK);
  struct ntk_tile off = ntk_tiling_tile(&tg, 1); /* rows 2, 3 against columns 0, 1 */
  ck_assert(off.bi == 1 && off.bj == 0);
  ck_assert_int_eq(ntk_cnn_gpu_tile(gc, &off, g, t), NTK_ENONFINITE);
  ck_assert_msg(strstr(ntk_error_message(), "image 3: its variance entering layer 2 (Relu)") &&
                strstr(ntk_error_message(), "underflowed: the window there is not all zeros"), "%s",
                ntk_error_message());
  ntk_cnn_gpu_free(gc);
  ntk_arch_free(&arch);
  free(ds.x);
}
END_TEST

/* The full covariance's device layout (ntk_dev_full_at, cnn_dev.h): for
 * every size up to 16 x 16 and a few wide or tall ones, element r and the
 * entry (p, q) ntk_dev_full_cell finds there map back to r, every element
 * is one entry's (a bijection of the hw x hw entries), a slice's cells are
 * hw consecutive elements from ntk_dev_full_slice, in p's order, and the
 * diagonal is the first slice (the FLATTEN readout reads it there). */
START_TEST(test_full_layout) {
  static const unsigned odd[][2] = {{1, 1}, {1, 37}, {37, 1}, {2, 63}, {63, 2}, {32, 32}, {5, 48}};
  size_t sizes = 16 * 16 + sizeof odd / sizeof *odd;
  for (size_t z = 0; z < sizes; z++) {
    unsigned h = z < 256 ? (unsigned)(z / 16 + 1) : odd[z - 256][0];
    unsigned w = z < 256 ? (unsigned)(z % 16 + 1) : odd[z - 256][1];
    unsigned hw = h * w, n = hw * hw;
    unsigned char *seen = calloc(n, 1);
    ck_assert_ptr_nonnull(seen);
    for (unsigned r = 0; r < n; r++) { /* plain tests per element, one assertion on the first failure */
      unsigned pi, pj, qi, qj;
      ntk_dev_full_cell(r, h, w, &pi, &pj, &qi, &qj);
      int ok = pi < h && pj < w && qi < h && qj < w;
      unsigned at = ok ? ntk_dev_full_at(pi, pj, qi, qj, h, w) : n;
      ok = ok && at == r && !seen[at];
      ok = ok && at == ntk_dev_full_slice((int)pi - (int)qi, (int)pj - (int)qj, h, w) + pi * w + pj;
      ok = ok && (pi != qi || pj != qj || at == pi * w + pj);
      if (!ok)
        ck_abort_msg("%u x %u: element %u holds (%u, %u) (%u, %u), placed at %u (or seen before)", h, w, r, pi, pj,
                     qi, qj, at);
      seen[at] = 1;
    }
    free(seen);
  }
}
END_TEST

/* Refusals: a network that is not a CNN; images too large for the
 * device's shared memory; a pair larger than the memory budget. Each says
 * what to do. */
START_TEST(test_gpu_refusals) {
  struct ntk_dataset ds;
  random_images(&ds, 4, 32, 32, 3, 4, 1);
  struct ntk_arch arch;
  struct ntk_gpu_exec ex;
  ntk_cnn_gpu_t *gc = NULL;
  ntk_gpu_exec_host(&ex, 1);
  ck_assert_int_eq(ntk_arch_parse("Dense Relu Dense", 1.0, 0.0, &arch), NTK_OK);
  ds.h = 0; /* flat data */
  ck_assert_int_eq(ntk_cnn_gpu_create(&ex, &arch, &ds, &gc), NTK_ECONFIG);
  ck_assert_ptr_null(gc);
  ds.h = 32;
  ntk_arch_free(&arch);
  ck_assert_int_eq(ntk_arch_parse("Conv(3, 1, SAME) Relu Conv(3, 1, SAME) Relu GlobalAvgPool", 1.0, 0.0, &arch),
                   NTK_OK);
  ex.smem_max = 16 << 10; /* a 32 x 32 float32 slice block needs 6 arrays of 34 x 34 floats: 27 KiB */
  ck_assert_int_eq(ntk_cnn_gpu_create(&ex, &arch, &ds, &gc), NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "shared memory") && strstr(ntk_error_message(), "backend = cpu"), "%s",
                ntk_error_message());
  ex.smem_max = 48 << 10;
  ck_assert_int_eq(ntk_cnn_gpu_create(&ex, &arch, &ds, &gc), NTK_OK);
  ntk_cnn_gpu_free(gc);
  gc = NULL;
  ntk_arch_free(&arch);
  ck_assert_int_eq(ntk_arch_parse("Conv(3, 1, SAME) Relu AvgPool(2) Conv(3, 1, SAME) Relu GlobalAvgPool", 1.0, 0.0,
                                  &arch), NTK_OK);
  ex.mem_budget = 8 << 20; /* a pair's full covariances: 4 x 4 MiB */
  /* Dropout (mode='train') scales a sample paired with itself, which the GPU's pairs do not tell apart */
  struct ntk_arch drop;
  ck_assert_int_eq(ntk_arch_parse("Conv(3, 1, SAME) Relu Conv(3, 1, SAME) Dropout(0.5) GlobalAvgPool Dense", 1.0, 0.0,
                                  &drop), NTK_OK);
  ck_assert_int_eq(ntk_cnn_gpu_create(&ex, &drop, &ds, &gc), NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "layer 4: the GPU's CNN kernels do not compute Dropout") &&
                strstr(ntk_error_message(), "backend = cpu"), "%s", ntk_error_message());
  ck_assert_ptr_null(gc);
  ntk_arch_free(&drop);
  /* LayerNorm over positions: the slots hold means the GPU's capture passes do not take */
  ck_assert_int_eq(ntk_arch_parse("Conv(3, 1, SAME) LayerNorm(axis=(1, 2, 3)) Relu GlobalAvgPool Dense", 1.0, 0.0,
                                  &drop), NTK_OK);
  ck_assert_int_eq(ntk_cnn_gpu_create(&ex, &drop, &ds, &gc), NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "layer 2: the GPU's CNN kernels do not compute LayerNorm over positions "
                "(its variances averaged over the rows and columns)") &&
                strstr(ntk_error_message(), "backend = cpu"), "%s", ntk_error_message());
  ck_assert_ptr_null(gc);
  ntk_arch_free(&drop);
  ck_assert_int_eq(ntk_cnn_gpu_create(&ex, &arch, &ds, &gc), NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "budget"), "%s", ntk_error_message());
  ck_assert_ptr_null(gc);
  free(ds.x);
  /* A pair's full covariance past 2^32 entries (256 x 300 positions, pooled), which the kernels index in 32 bits
   * (ntk_dev_full_at). No device's shared memory holds such a slice block today (1.2 MiB); an executor that did would
   * meet this refusal. */
  random_images(&ds, 2, 256, 300, 1, 4, 1);
  ntk_gpu_exec_host(&ex, 1);
  ex.smem_max = 4 << 20;
  ck_assert_int_eq(ntk_cnn_gpu_create(&ex, &arch, &ds, &gc), NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "more than the GPU kernels index") &&
                strstr(ntk_error_message(), "backend = cpu"), "%s", ntk_error_message());
  ck_assert_ptr_null(gc);
  ntk_arch_free(&arch);
  free(ds.x);
}
END_TEST

/* The GPU's float ABRelu map on variance slots (ntk_dev_abreluf_vu on
 * (q, r, v, u) as ntk_dev_vslotf fills them, cnn_dev.h) against the shared
 * map ntk_abreluf_r, bit for bit, value and tdot: random variances and
 * covariances over the whole float range (raw bit patterns too, so
 * subnormal, inf and NaN), correlations near +-1, the exact angle-0 case
 * of a pair with itself (q12 = q11 = q22), and edge values; with Relu,
 * LeakyRelu, Abs and a general ABRelu. Also the domain the GPU's square
 * root assumes (ntk_dev_sqrtf_map): the clamped det is +-0, NaN or in
 * [2^-101, FLT_MAX]. */
static uint64_t vs_rng = 0x9e3779b97f4a7c15ull;
static uint32_t vs_next(void) {
  vs_rng ^= vs_rng << 13;
  vs_rng ^= vs_rng >> 7;
  vs_rng ^= vs_rng << 17;
  return (uint32_t)(vs_rng >> 16);
}
static float vs_float(void) {
  static const float edge[] = {0.0f,    -0.0f,     0x1p-149f, 1e-40f,   0x1p-126f, 1e-20f, 1.0f,
                               1.5f,    2.0f,      1e19f,     1e38f,    3.4028235e38f, INFINITY, -1.0f,
                               -1e-30f, -INFINITY, NAN,       0x1p-75f, 0x1p63f};
  uint32_t k = vs_next() % 8, u = vs_next();
  float x;
  if (k == 0) return edge[u % (sizeof edge / sizeof *edge)];
  if (k == 1) { /* any bit pattern */
    memcpy(&x, &u, sizeof x);
    return x;
  }
  /* positive, log-uniform over the whole range, subnormal included */
  u = (u % (0x7f7fffffu - 1u)) + 1u;
  memcpy(&x, &u, sizeof x);
  return x;
}
START_TEST(test_gpu_relu_slots) {
  static const float ab[][2] = {{0.0f, 1.0f}, {0.1f, 1.0f}, {-1.0f, 1.0f}, {0.5f, 2.0f}};
  long n = 0, zero_angle = 0;
  for (int it = 0; it < 1500000; it++) {
    float q11 = vs_float(), q22 = it % 5 == 0 ? q11 : vs_float(), q12;
    uint32_t kind = vs_next() % 6;
    if (kind == 0) q12 = vs_float();
    else if (kind == 1) q12 = q11; /* with itself when q22 == q11: the angle 0 */
    else if (kind == 2) q12 = -q11;
    else { /* a correlation, near +-1 often */
      float rho = kind == 3 ? 1.0f - (float)(vs_next() % 1000) * 1e-7f : (float)(vs_next() % 2001) / 1000.0f - 1.0f;
      q12 = rho * sqrtf(q11) * sqrtf(q22);
    }
    float s1[4], s2[4];
    ntk_dev_vslotf(q11, s1);
    ntk_dev_vslotf(q22, s2);
    const float *p = ab[it % 4];
    float t_ref, t_dev;
    float g_ref = ntk_abreluf_r(p[0], p[1], q12, q11, q22, ntk_rsqrtf(q11), ntk_rsqrtf(q22), &t_ref);
    float g_dev = ntk_dev_abreluf_vu(p[0], p[1], q12, s1[1], s1[2], s1[3], s2[1], s2[2], s2[3], &t_dev);
    uint32_t a1, a2, b1, b2;
    memcpy(&a1, &g_ref, 4);
    memcpy(&a2, &g_dev, 4);
    memcpy(&b1, &t_ref, 4);
    memcpy(&b2, &t_dev, 4);
    ck_assert_msg(a1 == a2 && b1 == b2,
                  "a %g b %g q12 %a q11 %a q22 %a: map %a (tdot %a), slots %a (tdot %a)", (double)p[0],
                  (double)p[1], (double)q12, (double)q11, (double)q22, (double)g_ref, (double)t_ref, (double)g_dev,
                  (double)t_dev);
    /* the square root's domain, with the map's own det */
    float c = q12 * s1[1] * s2[1], det = s1[3] * s2[3] - c * c, x = det < 0.0f ? 0.0f : det;
    ck_assert_msg(x == 0.0f || isnan(x) || (x >= 0x1p-101f && x <= 3.4028235e38f),
                  "det %a for q12 %a q11 %a q22 %a", (double)x, (double)q12, (double)q11, (double)q22);
    if (q12 == q11 && q11 == q22 && q11 > 0.0f && q11 < INFINITY) {
      ck_assert_msg(x == 0.0f, "angle 0: det %a at q %a", (double)x, (double)q11);
      zero_angle++;
    }
    n++;
  }
  ck_assert_int_gt(zero_angle, 1000);
  ck_assert_int_eq(n, 1500000);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cnn_gpu");
  TCase *tc = tcase_create("cnn_gpu");
  tcase_set_timeout(tc, 900);
  tcase_add_test(tc, test_gpu_kernels_float32);
  tcase_add_test(tc, test_gpu_kernels_float64);
  tcase_add_test(tc, test_gpu_kernels_32x32);
  tcase_add_test(tc, test_gpu_slice3);
  tcase_add_test(tc, test_cell_index);
  tcase_add_test(tc, test_gpu_relu_slots);
  tcase_add_test(tc, test_gpu_nngp_only);
  tcase_add_test(tc, test_gpu_blocks_in_slices);
  tcase_add_test(tc, test_gpu_refusals);
  tcase_add_test(tc, test_full_layout);
  tcase_add_test(tc, test_gpu_scale_free_underflow);
  tcase_add_test(tc, test_gpu_relu_underflow);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
