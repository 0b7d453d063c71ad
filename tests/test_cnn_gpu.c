/* The GPU's CNN kernels (src/worker/cnn_dev_impl.h) and their launch order
 * (src/worker/cnn_gpu.c), run by the host emulation, against the CPU
 * backend: every test architecture, float32 and float64, with one thread
 * per block (plain loops; every image on the device for the whole job) and
 * with three threads meeting at barriers (the block-stride loops and
 * barriers as a GPU runs them; each tile's images copied per tile), ragged
 * tiles and small batches. On a machine with a GPU, test_backend and
 * scripts/gpu_check.sh run the same kernels under CUDA. */
#include <math.h>
#include <string.h>

#include "../src/worker/cnn_gpu.h"
#include "cnn_archs.h"
#include "ntkd/cnn.h"
#include "refcase.h"
#include "testutil.h"

/* Whole n x n matrices from tiles of edge `tile`: the CPU (ex NULL) or
 * the emulated GPU. Checks that diagonal tiles are exactly symmetric. */
static void matrices(const struct ntk_arch *arch, const struct ntk_dataset *ds, const struct ntk_gpu_exec *ex,
                     size_t tile, double *g, double *t) {
  ntk_cnn_t *c = NULL;
  ntk_cnn_gpu_t *gc = NULL;
  if (ex) ck_assert_msg(ntk_cnn_gpu_create(ex, arch, ds, &gc) == NTK_OK, "%s", ntk_error_message());
  else ck_assert_msg(ntk_cnn_create(arch, ds, NTK_CNN_AUTO, &c) == NTK_OK, "%s", ntk_error_message());
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
    struct ntk_arch arch;
    ck_assert_msg(ntk_arch_parse(archs[a], 1.3, 0.05, &arch) == NTK_OK, "%s", ntk_error_message());
    matrices(&arch, &ds, NULL, 5, g0, t0);
    for (unsigned threads = 1; threads <= 3; threads += 2) {
      struct ntk_gpu_exec ex;
      ntk_gpu_exec_host(&ex, threads);
      /* 3 threads: a budget too small for the job-wide image cache, so
       * each tile copies its images and computes their variances. */
      if (threads == 3) ex.mem_budget = 7500 * (size_t)elem;
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
  static const char *const big[] = {
      "Conv(3, 1, SAME) Relu AvgPool(2) Conv(3, 1, SAME) Relu AvgPool(2) Conv(3, 1, SAME) Relu GlobalAvgPool Dense",
      "[Conv(3, 1, SAME) Relu]*2 GlobalAvgPool Dense",
      "[Conv(3, 1, SAME) Relu]*2 Flatten Dense",
  };
  struct ntk_dataset ds;
  random_images(&ds, 4, 32, 32, 3, 4, 17);
  size_t n = ds.n;
  double *g0 = malloc(n * n * 8), *t0 = malloc(n * n * 8), *g1 = malloc(n * n * 8), *t1 = malloc(n * n * 8);
  for (size_t a = 0; a < sizeof big / sizeof *big; a++) {
    struct ntk_arch arch;
    ck_assert_int_eq(ntk_arch_parse(big[a], 1.4142135623730951, 0.0, &arch), NTK_OK);
    matrices(&arch, &ds, NULL, 3, g0, t0);
    struct ntk_gpu_exec ex;
    ntk_gpu_exec_host(&ex, 4);
    matrices(&arch, &ds, &ex, 3, g1, t1);
    double eg = ref_max_err(g1, 8, g0, n, 0), et = ref_max_err(t1, 8, t0, n, 0);
    printf("emulated GPU vs CPU, 32x32x3 float32, %s: nngp %.3g ntk %.3g\n", big[a], eg, et);
    ck_assert_msg(eg < 1e-5 && et < 1e-5, "%s: nngp %.3g ntk %.3g", big[a], eg, et);
    ntk_arch_free(&arch);
  }
  free(g0);
  free(t0);
  free(g1);
  free(t1);
  free(ds.x);
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
  ck_assert_int_eq(ntk_cnn_gpu_create(&ex, &arch, &ds, &gc), NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "budget"), "%s", ntk_error_message());
  ck_assert_ptr_null(gc);
  ntk_arch_free(&arch);
  free(ds.x);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cnn_gpu");
  TCase *tc = tcase_create("cnn_gpu");
  tcase_set_timeout(tc, 900);
  tcase_add_test(tc, test_gpu_kernels_float32);
  tcase_add_test(tc, test_gpu_kernels_float64);
  tcase_add_test(tc, test_gpu_kernels_32x32);
  tcase_add_test(tc, test_cell_index);
  tcase_add_test(tc, test_gpu_nngp_only);
  tcase_add_test(tc, test_gpu_refusals);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
