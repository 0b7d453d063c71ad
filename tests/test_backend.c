/* Backends: placement of ranks on GPUs and CPUs, the registry, and -- on a
 * machine with a GPU -- the CUDA backend's tiles against the CPU backend's
 * for every fully-connected kernel type and the convolutional networks of
 * tests/cnn_archs.h in float32 and float64.
 *   test_backend cpu   the parts that need no GPU (ctest: backend)
 *   test_backend gpu   the CUDA tiles only; exit 77 (skipped) without a
 *                      usable GPU (ctest: backend_gpu)
 *   test_backend       both (scripts/gpu_check.sh) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cnn_archs.h"
#include "backend/backend.h"
#include "job/config.h"
#include "refcase.h"
#include "testutil.h"

START_TEST(test_place) {
  /* auto: the first ngpus computing ranks of a node get one GPU each. */
  ck_assert_int_eq(ntk_backend_place(NTK_BACKEND_AUTO, 0, 2, 1), 0);
  ck_assert_int_eq(ntk_backend_place(NTK_BACKEND_AUTO, 1, 2, 1), 1);
  ck_assert_int_eq(ntk_backend_place(NTK_BACKEND_AUTO, 2, 2, 1), NTK_PLACE_CPU);
  ck_assert_int_eq(ntk_backend_place(NTK_BACKEND_AUTO, 0, 0, 1), NTK_PLACE_CPU);
  /* A network the GPU backend does not compute (CNN) stays on the CPU. */
  ck_assert_int_eq(ntk_backend_place(NTK_BACKEND_AUTO, 0, 2, 0), NTK_PLACE_CPU);
  /* cpu: never a GPU. */
  ck_assert_int_eq(ntk_backend_place(NTK_BACKEND_CPU, 0, 8, 1), NTK_PLACE_CPU);
  /* cuda: a GPU for every computing rank, or a refusal. */
  ck_assert_int_eq(ntk_backend_place(NTK_BACKEND_CUDA, 1, 2, 1), 1);
  ck_assert_int_eq(ntk_backend_place(NTK_BACKEND_CUDA, 2, 2, 1), NTK_PLACE_NO_GPU);
  ck_assert_int_eq(ntk_backend_place(NTK_BACKEND_CUDA, 0, 0, 1), NTK_PLACE_NO_GPU);
  ck_assert_int_eq(ntk_backend_place(NTK_BACKEND_CUDA, 0, 4, 0), NTK_PLACE_NO_GPU);
}
END_TEST

START_TEST(test_registry) {
  ck_assert_ptr_nonnull(ntk_backend_find("cpu"));
  ck_assert_ptr_null(ntk_backend_find("opencl"));
  const struct ntk_backend_ops *cuda = ntk_backend_find("cuda");
  ck_assert_int_eq(cuda != NULL, strstr(ntk_backend_names(), "cuda") != NULL);
  char why[256] = "";
  int n = ntk_backend_gpu_count(why, sizeof why);
  if (!n) ck_assert_msg(why[0], "no GPU but no reason given");
  if (cuda) ck_assert_int_eq(cuda->available() != 0, n > 0);
}
END_TEST

static void put_tile(double *m, size_t n, const struct ntk_tile *t, const void *v, int elem) {
  for (size_t i = 0; i < t->rows; i++)
    for (size_t j = 0; j < t->cols; j++)
      m[(t->r0 + i) * n + t->c0 + j] =
          elem == 4 ? ((const float *)v)[i * t->cols + j] : ((const double *)v)[i * t->cols + j];
}

/* The images the CUDA tiles of tests/cnn_archs.h are compared on: a shape
 * every network of the list takes (test_gpu_list_takes_the_images checks
 * that without a GPU; 8 x 7 made a FanInSum's branches 2 x 2 and 3 x 3). */
enum { GPU_IMAGES = 23, GPU_H = 6, GPU_W = 5, GPU_C = 3 };

/* Whether the GPU backend leaves `name` to the CPU: only the networks it is
 * known to refuse (ElementwiseNumerical: quadrature, backend_cuda.c). */

/* The CUDA backend's tiles against the CPU backend's on `ds`, for each
 * architecture: largest relative difference < 1e-5 (float32) or 1e-12
 * (float64), diagonal tiles exactly symmetric. */
static void cuda_against_cpu(const struct ntk_backend_ops *cuda, struct ntk_dataset *ds, const char *const *list,
                             size_t narchs, size_t tile) {
  size_t n = ds->n;
  int elem = ds->elem;
  for (size_t a = 0; a < narchs; a++) {
    const char *name = list[a];
    struct ntk_arch arch;
    ck_assert_int_eq(test_arch_parse(name, 1.3, 0.05, &arch), NTK_OK);
    char why[512] = "";
    if (gpu_refuses(name)) {
      ck_assert_msg(!ntk_backend_gpu_computes(&arch, ds, why, sizeof why), "%s: taken by the GPU", name);
      printf("cuda vs cpu, %s, %s: left to the CPU (%s)\n", elem == 4 ? "float32" : "float64", name, why);
      ntk_arch_free(&arch);
      continue;
    }
    struct ntk_problem p = {.arch = &arch, .data = ds, .kernels = NTK_KERNEL_NNGP | NTK_KERNEL_NTK, .device = 0};
    void *cc = NULL, *gc = NULL;
    ck_assert_int_eq(ntk_backend_cpu.create(&p, &cc), NTK_OK);
    ck_assert_msg(cuda->create(&p, &gc) == NTK_OK, "%s", ntk_error_message());
    struct ntk_tiling tg;
    ntk_tiling_init(&tg, n, tile); /* ragged */
    size_t cap = tile * tile * (size_t)elem;
    char *b[4];
    for (int i = 0; i < 4; i++) b[i] = malloc(cap);
    double *m[4];
    for (int i = 0; i < 4; i++) m[i] = calloc(n * n, sizeof(double));
    for (uint64_t idx = 0; idx < tg.ntiles; idx++) {
      struct ntk_tile t = ntk_tiling_tile(&tg, idx);
      ck_assert_int_eq(ntk_backend_cpu.compute_tile(cc, &t, b[0], b[1]), NTK_OK);
      ck_assert_msg(cuda->compute_tile(gc, &t, b[2], b[3]) == NTK_OK, "%s", ntk_error_message());
      for (int i = 0; i < 4; i++) put_tile(m[i], n, &t, b[i], elem);
      if (t.bi == t.bj) /* exactly symmetric, NNGP and NTK, like the CPU's */
        for (int k = 2; k < 4; k++)
          for (size_t i = 0; i < t.rows; i++)
            for (size_t j = 0; j < i; j++)
              ck_assert(!memcmp(b[k] + (i * t.cols + j) * (size_t)elem, b[k] + (j * t.cols + i) * (size_t)elem,
                                (size_t)elem));
    }
    /* relative to max(|K_ij|, sqrt(K_ii K_jj)), as against neural-tangents */
    double worst = fmax(ref_max_err(m[2], 8, m[0], n, 0), ref_max_err(m[3], 8, m[1], n, 0));
    for (int i = 0; i < 4; i++) free(m[i]);
    double bound = elem == 4 ? 1e-5 : 1e-12;
    printf("cuda vs cpu, %s, %s: largest relative difference %.3g (bound %g)\n", elem == 4 ? "float32" : "float64",
           name, worst, bound);
    ck_assert_msg(worst < bound, "%s %d: %g", name, elem, worst);
    for (int i = 0; i < 4; i++) free(b[i]);
    ntk_backend_cpu.destroy(cc);
    cuda->destroy(gc);
    ntk_arch_free(&arch);
  }
}

/* Why the CUDA tiles cannot be computed here: 1 and the reason in `why`,
 * or 0 where there is a usable GPU. */
static int no_gpu(char *why, size_t cap) {
  if (!ntk_backend_find("cuda")) {
    snprintf(why, cap, "CUDA not compiled in");
    return 1;
  }
  return ntk_backend_gpu_count(why, cap) == 0;
}

START_TEST(test_cuda_matches_cpu) {
  const struct ntk_backend_ops *cuda = ntk_backend_find("cuda");
  char why[256] = "";
  if (no_gpu(why, sizeof why)) {
    printf("skipped: CUDA tiles against CPU tiles (%s)\n", why);
    return;
  }
  static const char *const fc[] = {
      "Dense Relu Dense", "Dense(W_std=1.5, b_std=0.1) Erf Dense Relu Dense", "Dense LeakyRelu(0.1) Dense Abs Dense",
      "Dense Identity Dense(b_std=0.3)", "[Dense(W_std=1.4) Relu]*10 Dense",
      /* residual blocks (a weighted FanInConcat) and standard parameterisation: fc_entry.h */
      "Dense(16) FanOut(3) parallel(serial(Relu, Dense(32)), Identity, serial(Erf, Dense(8))) FanInConcat Dense(8) "
      "Relu Dense",
      "Dense(8) [FanOut(2) parallel(serial(Relu Dense(8, W_std=1.5)), Identity) FanInSum]*3 Gelu Dense",
      "standard: Dense(64, W_std=1.5, b_std=0.1) Relu Dense(32, b_std=None) Erf Dense(16) Sin Dense"};
  size_t n = 700, d = 61;
  for (int elem = 4; elem <= 8; elem += 4) {
    struct ntk_dataset ds = {n, d, 0, 0, 0, elem, malloc(n * d * (size_t)elem), 0, 0, 0};
    srand(getenv("NTKD_TEST_SEED") ? (unsigned)atoi(getenv("NTKD_TEST_SEED")) : 7u); /* gpu_check.sh: a fresh seed */
    for (size_t k = 0; k < n * d; k++) {
      double v = (double)rand() / RAND_MAX * 2 - 1;
      if (elem == 4) ((float *)ds.x)[k] = (float)v;
      else ((double *)ds.x)[k] = v;
    }
    /* equal rows (ntk_fc_twins) in one tile and across tiles, and negated ones */
    for (size_t i = 0; i < 20; i++) memcpy((char *)ds.x + (600 + i) * d * elem, (char *)ds.x + i * d * elem, d * elem);
    memcpy((char *)ds.x + 100 * d * elem, (char *)ds.x + 7 * d * elem, d * elem);
    for (size_t k = 0; k < d; k++) {
      if (elem == 4) ((float *)ds.x)[101 * d + k] = ((float *)ds.x)[650 * d + k] = -((float *)ds.x)[8 * d + k];
      else ((double *)ds.x)[101 * d + k] = ((double *)ds.x)[650 * d + k] = -((double *)ds.x)[8 * d + k];
    }
    cuda_against_cpu(cuda, &ds, fc, sizeof fc / sizeof *fc, 256); /* 700 = 2 * 256 + 188 */
    free(ds.x);
    /* Convolutional networks: every path, on fresh 8 x 7 x 3 images. */
    struct ntk_dataset im;
    random_images(&im, GPU_IMAGES, GPU_H, GPU_W, GPU_C, elem, (unsigned)rand());
    cuda_against_cpu(cuda, &im, archs, sizeof archs / sizeof *archs, 8);
    free(im.x);
  }
}
END_TEST

/* Without a GPU: every network test_cuda_matches_cpu compares takes its
 * images on the CPU, and the GPU backend takes each but those it is known
 * to refuse, so that the comparison runs them all where a GPU is (an
 * image shape the list refused went unseen until a GPU ran it). */
START_TEST(test_gpu_list_takes_the_images) {
  for (int elem = 4; elem <= 8; elem += 4) {
    struct ntk_dataset im;
    random_images(&im, GPU_IMAGES, GPU_H, GPU_W, GPU_C, elem, 5);
    for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
      struct ntk_arch arch;
      ck_assert_int_eq(test_arch_parse(archs[a], 1.3, 0.05, &arch), NTK_OK);
      struct ntk_problem p = {.arch = &arch, .data = &im, .kernels = NTK_KERNEL_NNGP | NTK_KERNEL_NTK};
      void *cc = NULL;
      ck_assert_msg(ntk_backend_cpu.create(&p, &cc) == NTK_OK, "%s on %dx%dx%d: %s", archs[a], GPU_H, GPU_W, GPU_C,
                    ntk_error_message());
      ntk_backend_cpu.destroy(cc);
      char why[512] = "";
      int takes = ntk_backend_gpu_computes(&arch, &im, why, sizeof why);
      ck_assert_msg(takes == !gpu_refuses(archs[a]), "%s: GPU takes it %d (%s)", archs[a], takes, why);
      ntk_arch_free(&arch);
    }
    free(im.x);
  }
}
END_TEST

/* Which networks the GPU backend takes, decided without a device. */
START_TEST(test_gpu_computes) {
  struct ntk_dataset flat = {10, 12, 0, 0, 0, 4, NULL, 0, 0, 0}, img = {10, 48, 4, 4, 3, 4, NULL, 0, 0, 0};
  struct ntk_arch arch;
  char why[512] = "";
  ck_assert_int_eq(ntk_arch_parse("Dense Relu Dense", 1.0, 0.0, &arch), NTK_OK);
  ck_assert_int_eq(ntk_backend_gpu_computes(&arch, &flat, why, sizeof why), 1);
  ntk_arch_free(&arch);
  ck_assert_int_eq(ntk_arch_parse("Conv(3, 1, SAME) Relu AvgPool(2) GlobalAvgPool Dense", 1.0, 0.0, &arch), NTK_OK);
  ck_assert_int_eq(ntk_backend_gpu_computes(&arch, &img, why, sizeof why), 1);
  ntk_arch_free(&arch);
  /* More spatial layers than the kernels' plan holds: refused, saying so. */
  ck_assert_int_eq(ntk_arch_parse("[Conv(3, 1, SAME) Relu]*81 GlobalAvgPool", 1.0, 0.0, &arch), NTK_OK);
  img.elem = 8; /* (in float32, 81 nonlinear layers are the CPU's anyway: test_deep_float32) */
  ck_assert_int_eq(ntk_backend_gpu_computes(&arch, &img, why, sizeof why), 0);
  img.elem = 4;
  ck_assert_msg(strstr(why, "at most 160 layers"), "%s", why);
  ntk_arch_free(&arch);
  /* FC residual networks under standard parameterisation: the FC kernel's entry walk */
  ck_assert_int_eq(ntk_arch_parse_param("Dense(8) FanOut(2) parallel(serial(Relu, Dense(8)), Identity) FanInSum "
                                        "Relu Dense", 1.0, 0.0, 1, &arch), NTK_OK);
  ck_assert_int_eq(ntk_backend_gpu_computes(&arch, &flat, why, sizeof why), 1);
  ntk_arch_free(&arch);
  /* a residual network on the same-position path (the DIAG kernel's branch stack) */
  ck_assert_int_eq(ntk_arch_parse("Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 1, SAME)), Identity) "
                                  "FanInSum Relu Flatten Dense", 1.0, 0.0, &arch), NTK_OK);
  ck_assert_int_eq(ntk_backend_gpu_computes(&arch, &img, why, sizeof why), 1);
  ntk_arch_free(&arch);
}
END_TEST

/* A float32 job of more than NTK_FLOAT32_MAX_NONLINEAR nonlinear layers
 * is computed in float64 and rounded once: its tiles are the float64
 * tiles of the same data rounded, bit for bit (FC and CNN), where float32
 * maps had left neural-tangents' 1e-5 (5.7e-2 at 1 000 ReLU layers); at 64
 * layers it still runs in float32. The GPU leaves such a job to the CPU. */
static void deep_tiles(const char *net, struct ntk_dataset *ds32, int *same) {
  struct ntk_dataset ds64 = *ds32;
  size_t count = ds32->n * ds32->d, n = ds32->n;
  ds64.elem = 8;
  ds64.x = malloc(count * 8);
  for (size_t k = 0; k < count; k++) ((double *)ds64.x)[k] = ((const float *)ds32->x)[k];
  struct ntk_arch arch;
  ck_assert_msg(test_arch_parse(net, 1.4142135623730951, 0.0, &arch) == NTK_OK, "%s", ntk_error_message());
  float *g32 = malloc(n * n * 4), *t32 = malloc(n * n * 4);
  double *g64 = malloc(n * n * 8), *t64 = malloc(n * n * 8);
  struct ntk_tile t = {.rows = n, .cols = n};
  void *cc;
  struct ntk_problem p = {.arch = &arch, .data = ds32, .kernels = NTK_KERNEL_NNGP | NTK_KERNEL_NTK};
  ck_assert_int_eq(ntk_backend_cpu.create(&p, &cc), NTK_OK);
  ck_assert_int_eq(ntk_backend_cpu.compute_tile(cc, &t, g32, t32), NTK_OK);
  ntk_backend_cpu.destroy(cc);
  p.data = &ds64;
  ck_assert_int_eq(ntk_backend_cpu.create(&p, &cc), NTK_OK);
  ck_assert_int_eq(ntk_backend_cpu.compute_tile(cc, &t, g64, t64), NTK_OK);
  ntk_backend_cpu.destroy(cc);
  *same = 1;
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j <= i; j++) { /* a diagonal tile: its lower triangle */
      size_t k = i * n + j;
      *same &= g32[k] == (float)g64[k] && t32[k] == (float)t64[k];
    }
  free(g32);
  free(t32);
  free(g64);
  free(t64);
  free(ds64.x);
  ntk_arch_free(&arch);
}

START_TEST(test_deep_float32) {
  struct ntk_dataset flat = {6, 8, 0, 0, 0, 4, malloc(48 * 4), 0, 0, 0}, img;
  for (size_t k = 0; k < 48; k++) ((float *)flat.x)[k] = (float)sin(0.7 * (double)k + 0.3);
  random_images(&img, 4, 4, 4, 2, 4, 9);
  int same;
  deep_tiles("[Dense Relu]*65 Dense", &flat, &same);
  ck_assert_msg(same, "65 ReLU layers, float32: not the float64 tile rounded");
  deep_tiles("[Dense Erf]*1000 Dense", &flat, &same);
  ck_assert_msg(same, "1000 Erf layers, float32: not the float64 tile rounded");
  deep_tiles("[Conv(3, 1, SAME) Relu]*65 GlobalAvgPool Dense", &img, &same);
  ck_assert_msg(same, "a CNN of 65 ReLU layers, float32: not the float64 tile rounded");
  deep_tiles("[Dense Relu]*64 Dense", &flat, &same);
  ck_assert_msg(!same, "64 ReLU layers, float32: computed in float64 (the rule is more than 64)");
  /* Contexts on the same data share one float64 copy (the library's pool:
   * one per core): each still computes after the others are gone. */
  {
    struct ntk_arch deep;
    ck_assert_int_eq(ntk_arch_parse("[Dense Erf]*70 Dense", 1.0, 0.0, &deep), NTK_OK);
    struct ntk_problem p = {.arch = &deep, .data = &flat, .kernels = NTK_KERNEL_NNGP | NTK_KERNEL_NTK};
    struct ntk_tile t = {.rows = 6, .cols = 6};
    void *cx[3];
    float g[3][36], w[3][36];
    for (int k = 0; k < 3; k++) ck_assert_int_eq(ntk_backend_cpu.create(&p, &cx[k]), NTK_OK);
    ck_assert_int_eq(ntk_backend_cpu.compute_tile(cx[0], &t, g[0], w[0]), NTK_OK);
    ntk_backend_cpu.destroy(cx[0]);
    ck_assert_int_eq(ntk_backend_cpu.compute_tile(cx[1], &t, g[1], w[1]), NTK_OK);
    ntk_backend_cpu.destroy(cx[1]);
    ck_assert_int_eq(ntk_backend_cpu.compute_tile(cx[2], &t, g[2], w[2]), NTK_OK);
    ntk_backend_cpu.destroy(cx[2]);
    ck_assert(!memcmp(g[0], g[1], sizeof g[0]) && !memcmp(g[0], g[2], sizeof g[0]));
    ck_assert(!memcmp(w[0], w[1], sizeof w[0]) && !memcmp(w[0], w[2], sizeof w[0]));
    ntk_arch_free(&deep);
  }
  struct ntk_arch arch;
  char why[512] = "";
  ck_assert_int_eq(ntk_arch_parse("[Dense Relu]*65 Dense", 1.0, 0.0, &arch), NTK_OK);
  ck_assert_int_eq(ntk_backend_gpu_computes(&arch, &flat, why, sizeof why), 0);
  ck_assert_msg(strstr(why, "65 nonlinear layers"), "%s", why);
  flat.elem = 8;
  ck_assert_int_eq(ntk_backend_gpu_computes(&arch, &flat, why, sizeof why), 1);
  ntk_arch_free(&arch);
  /* A scale whose float32 square is subnormal: float64 too (kernels/arch.h) */
  ck_assert_int_eq(ntk_arch_parse("Dense(1, W_std=1e-20) Relu Dense", 1.0, 0.0, &arch), NTK_OK);
  flat.elem = 4;
  ck_assert_int_eq(ntk_backend_gpu_computes(&arch, &flat, why, sizeof why), 0);
  ck_assert_msg(strstr(why, "layer 1 (Dense): W_std = 1e-20: its square is below float32's normal range"), "%s", why);
  flat.elem = 8;
  ck_assert_int_eq(ntk_backend_gpu_computes(&arch, &flat, why, sizeof why), 1);
  ntk_arch_free(&arch);
  free(flat.x);
  free(img.x);
}
END_TEST

int main(int argc, char **argv) {
  const char *part = argc > 1 ? argv[1] : "all";
  int cpu = !strcmp(part, "cpu") || !strcmp(part, "all"), gpu = !strcmp(part, "gpu") || !strcmp(part, "all");
  if (!cpu && !gpu) {
    fprintf(stderr, "usage: test_backend [cpu|gpu]\n");
    return 2;
  }
  char why[256] = "";
  if (!cpu && no_gpu(why, sizeof why)) {
    printf("skipped: CUDA tiles against CPU tiles (%s)\n", why);
    return 77;
  }
  Suite *s = suite_create("backend");
  TCase *tc = tcase_create("backend");
  tcase_set_timeout(tc, 600);
  if (cpu) {
    tcase_add_test(tc, test_place);
    tcase_add_test(tc, test_registry);
    tcase_add_test(tc, test_gpu_computes);
    tcase_add_test(tc, test_gpu_list_takes_the_images);
    tcase_add_test(tc, test_deep_float32);
  }
  if (gpu) tcase_add_test(tc, test_cuda_matches_cpu);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
