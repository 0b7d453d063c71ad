/* CNN kernels: the fast paths (same-position, diagonal slices) agree with
 * the general full-covariance path; neural-tangents reference values. */
#include <math.h>

#include "cnn_archs.h"
#include "kernels/arch.h"
#include "kernels/cnn.h"
#include "kernels/cnn_dev.h"
#include "kernels/fc.h"
#include "refcase.h"
#include "testutil.h"

/* Whole n x n matrices (nngp, ntk) with one tile of edge `tile`. */
static void compute(const struct ntk_arch *arch, const struct ntk_dataset *ds, ntk_cnn_path path, size_t tile,
                    double *g, double *t) {
  ntk_cnn_t *c;
  ck_assert_msg(ntk_cnn_create(arch, ds, path, NULL, &c) == NTK_OK, "%s", ntk_error_message());
  struct ntk_tiling tg;
  ntk_tiling_init(&tg, ds->n, tile);
  size_t es = (size_t)ds->elem, n = ds->n;
  char *bg = malloc(tile * tile * es), *bt = malloc(tile * tile * es);
  for (uint64_t k = 0; k < tg.ntiles; k++) {
    struct ntk_tile tl = ntk_tiling_tile(&tg, k);
    ck_assert_int_eq(ntk_cnn_tile(c, &tl, bg, bt), NTK_OK);
    scatter_tile(&tl, bg, bt, es, n, g, t);
  }
  free(bg);
  free(bt);
  ntk_cnn_free(c);
}

/* A CNN's variance entering a scale-free layer below the precision's
 * normal range is refused when the image's variances are computed (each
 * position judged, with or without the per-worker cache); at scale 1
 * the same network, with a blank band of rows (variance 0 there), computes. */
START_TEST(test_scale_free_underflow) {
  const char *nets[] = {"Conv(3, 2, SAME) Sign GlobalAvgPool Dense", "Conv(3, 2, SAME) LayerNorm Relu Flatten Dense",
                        "Conv(3, 2, SAME) Relu GlobalAvgPool Dense LayerNorm(eps=0) Dense"};
  for (size_t a = 0; a < 3; a++)
    for (int cache = 0; cache < 2; cache++) {
      struct ntk_dataset ds;
      random_images(&ds, 4, 5, 5, 2, 4, 3);
      for (size_t k = 0; k < 4 * ds.d; k++) ((float *)ds.x)[k] *= k % ds.d < 10 ? 0.0f : 1e-21f;
      if (!cache) setenv("NTKD_CNN_VAR_CACHE", "0", 1);
      struct ntk_arch arch;
      ck_assert_int_eq(test_arch_parse(nets[a], 1.3, 0.0, &arch), NTK_OK);
      ntk_cnn_t *c;
      ck_assert_int_eq(ntk_cnn_create(&arch, &ds, NTK_CNN_AUTO, NULL, &c), NTK_OK);
      struct ntk_tiling tg;
      ntk_tiling_init(&tg, ds.n, 2);
      float g[4], t[4];
      struct ntk_tile tl = ntk_tiling_tile(&tg, 0);
      ck_assert_int_eq(ntk_cnn_tile(c, &tl, g, t), NTK_ENONFINITE);
      ck_assert_msg(strstr(ntk_error_message(), "below float32's normal range"), "%s", ntk_error_message());
      ntk_cnn_free(c);
      for (size_t k = 0; k < 4 * ds.d; k++) ((float *)ds.x)[k] *= 1e21f;
      ck_assert_int_eq(ntk_cnn_create(&arch, &ds, NTK_CNN_AUTO, NULL, &c), NTK_OK);
      for (uint64_t k = 0; k < tg.ntiles; k++) {
        tl = ntk_tiling_tile(&tg, k);
        ck_assert_msg(ntk_cnn_tile(c, &tl, g, t) == NTK_OK, "%s: %s", nets[a], ntk_error_message());
      }
      ntk_cnn_free(c);
      unsetenv("NTKD_CNN_VAR_CACHE");
      ntk_arch_free(&arch);
      free(ds.x);
    }
}
END_TEST

/* The variances of an image scaled far below the range underflow to 0 at
 * every position (float32 x 1e-25, float64 x 1e-170): a 0 that is no
 * window of zeros, refused; Sign's NNGP was 0 instead of O(1), exit 0. A
 * blank band of rows keeps its 0s (the first test's scale 1). */
START_TEST(test_scale_free_position_underflow) {
  const char *nets[] = {"Conv(3, 1, SAME) Sign Conv(3, 1, SAME) Flatten Dense", "Conv(3, 2, SAME) LayerNorm Relu Flatten Dense"};
  for (size_t a = 0; a < 2; a++)
    for (int elem = 4; elem <= 8; elem += 4)
      for (int cache = 0; cache < 2; cache++) {
        struct ntk_dataset ds;
        random_images(&ds, 4, 5, 5, 2, elem, 3);
        for (size_t k = 0; k < 4 * ds.d; k++) {
          if (elem == 4) ((float *)ds.x)[k] *= k % ds.d < 10 ? 0.0f : 1e-25f;
          else ((double *)ds.x)[k] *= k % ds.d < 10 ? 0.0 : 1e-170;
        }
        if (!cache) setenv("NTKD_CNN_VAR_CACHE", "0", 1);
        struct ntk_arch arch;
        ck_assert_int_eq(test_arch_parse(nets[a], 1.3, 0.0, &arch), NTK_OK);
        ntk_cnn_t *c;
        ck_assert_int_eq(ntk_cnn_create(&arch, &ds, NTK_CNN_AUTO, NULL, &c), NTK_OK);
        struct ntk_tiling tg;
        ntk_tiling_init(&tg, ds.n, 2);
        double g[4], t[4];
        struct ntk_tile tl = ntk_tiling_tile(&tg, 0);
        ck_assert_msg(ntk_cnn_tile(c, &tl, g, t) == NTK_ENONFINITE, "%s elem %d cache %d: not refused", nets[a], elem,
                      cache);
        ck_assert_msg(strstr(ntk_error_message(), "underflowed: the window there is not all zeros"), "%s",
                      ntk_error_message());
        ntk_cnn_free(c);
        unsetenv("NTKD_CNN_VAR_CACHE");
        ntk_arch_free(&arch);
        free(ds.x);
      }
}
END_TEST

START_TEST(test_paths_agree) {
  struct ntk_dataset ds;
  random_images(&ds, 21, 6, 5, 2, 8, 11); /* more images than a 16-lane batch */
  size_t n = ds.n;
  double *g0 = malloc(n * n * 8), *t0 = malloc(n * n * 8), *g1 = malloc(n * n * 8), *t1 = malloc(n * n * 8);
  for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
    struct ntk_arch arch;
    ck_assert_msg(test_arch_parse(archs[a], 1.3, 0.05, &arch) == NTK_OK, "%s", ntk_error_message());
    compute(&arch, &ds, NTK_CNN_GENERAL, n, g0, t0);
    ntk_cnn_t *c;
    ck_assert_int_eq(ntk_cnn_create(&arch, &ds, NTK_CNN_AUTO, NULL, &c), NTK_OK);
    ntk_cnn_path fast = ntk_cnn_get_path(c);
    ntk_cnn_free(c);
    compute(&arch, &ds, fast, 2, g1, t1); /* the fast path, with ragged 2-image tiles */
    double eg = ref_max_err(g1, 8, g0, n, 0), et = ref_max_err(t1, 8, t0, n, 0);
    ck_assert_msg(eg < 1e-13 && et < 1e-13, "%s: path %d vs general: nngp %.3g ntk %.3g", archs[a], fast, eg, et);
    compute(&arch, &ds, NTK_CNN_AUTO, 3, g1, t1); /* batched where it applies */
    eg = ref_max_err(g1, 8, g0, n, 0);
    et = ref_max_err(t1, 8, t0, n, 0);
    ck_assert_msg(eg < 1e-13 && et < 1e-13, "%s: auto vs general: nngp %.3g ntk %.3g", archs[a], eg, et);
    /* Without the per-worker variance cache (each tile recomputes its
     * images' variances): the same bits. */
    double *g2 = malloc(n * n * 8), *t2 = malloc(n * n * 8);
    setenv("NTKD_CNN_VAR_CACHE", "0", 1);
    compute(&arch, &ds, NTK_CNN_AUTO, 3, g2, t2);
    unsetenv("NTKD_CNN_VAR_CACHE");
    ck_assert_msg(!memcmp(g1, g2, n * n * 8) && !memcmp(t1, t2, n * n * 8), "%s: cache changes the bits", archs[a]);
    free(g2);
    free(t2);
    ntk_arch_free(&arch);
  }
  free(g0);
  free(t0);
  free(g1);
  free(t1);
  free(ds.x);
}
END_TEST

/* The batched code (16 images in SIMD lanes) gives the same bits as the
 * same path pair by pair, in both precisions: the ReLU map depends on a pair
 * (a, a) reproducing a's variances exactly, and the self runs that compute
 * those variances go pair by pair. */
static void check_batched_bits(int elem) {
  struct ntk_dataset ds;
  random_images(&ds, 19, 6, 5, 2, elem, 5);
  /* and edges of the maps' inputs: a blank image, one a thousand times
   * larger, and an image twice (angle 0 off the diagonal) */
  for (size_t k = 0; k < ds.d; k++) {
    if (elem == 4) {
      float *x = ds.x;
      x[3 * ds.d + k] = 0.0f;
      x[8 * ds.d + k] *= 1e3f;
      x[12 * ds.d + k] = x[2 * ds.d + k];
    } else {
      double *x = ds.x;
      x[3 * ds.d + k] = 0.0;
      x[8 * ds.d + k] *= 1e3;
      x[12 * ds.d + k] = x[2 * ds.d + k];
    }
  }
  size_t n = ds.n;
  double *g0 = malloc(n * n * 8), *t0 = malloc(n * n * 8), *g1 = malloc(n * n * 8), *t1 = malloc(n * n * 8);
  int batched_archs = 0;
  for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
    const char *text = archs[a];
    struct ntk_arch arch;
    ck_assert_msg(test_arch_parse(text, 1.3, 0.05, &arch) == NTK_OK, "%s", ntk_error_message());
    ntk_cnn_t *c;
    ck_assert_int_eq(ntk_cnn_create(&arch, &ds, NTK_CNN_AUTO, NULL, &c), NTK_OK);
    ntk_cnn_path fast = ntk_cnn_get_path(c);
    int batched = ntk_cnn_batched(c);
    ntk_cnn_free(c);
    compute(&arch, &ds, fast, 7, g0, t0);          /* an explicit path: pair by pair */
    compute(&arch, &ds, NTK_CNN_AUTO, 7, g1, t1);  /* batched where it applies */
    ck_assert_msg(!memcmp(g0, g1, n * n * 8) && !memcmp(t0, t1, n * n * 8), "%s (%s): batched and pair-by-pair differ",
                  text, elem == 4 ? "float32" : "float64");
    /* and the slice path against the full covariance (the reference path), to rounding */
    if (fast == NTK_CNN_SLICE) {
      double *g2 = malloc(n * n * 8), *t2 = malloc(n * n * 8);
      compute(&arch, &ds, NTK_CNN_GENERAL, 7, g2, t2);
      double worst = 0;
      for (size_t k = 0; k < n * n; k++) {
        double sc = fmax(1e-30, sqrt(fabs(g2[(k / n) * n + k / n] * g2[(k % n) * n + k % n])));
        worst = fmax(worst, fabs(g1[k] - g2[k]) / sc);
      }
      ck_assert_msg(worst < (elem == 4 ? 1e-5 : 1e-12), "%s (%s): slice vs general %g", text,
                    elem == 4 ? "float32" : "float64", worst);
      free(g2);
      free(t2);
    }
    batched_archs += batched;
    /* pooling between slice runs into GAP: the batched Myrtle path */
    if (strstr(text, "AvgPool(2) Conv(3, 1, SAME) Relu AvgPool(2)"))
      ck_assert_msg(batched, "%s: not batched", text);
    ntk_arch_free(&arch);
  }
  ck_assert_int_ge(batched_archs, 10);
  free(g0);
  free(t0);
  free(g1);
  free(t1);
  free(ds.x);
}

START_TEST(test_batched_bits_float32) { check_batched_bits(4); }
END_TEST

START_TEST(test_batched_bits_float64) { check_batched_bits(8); }
END_TEST

/* The same on random networks the lists above do not hold: one to three
 * runs of stride-1 SAME convolutions (filters 1 to 3, even ones padded
 * low-first) and nonlinearities, joined by AvgPool or SumPool windows of 1
 * to 3 with strides 1 or 2, VALID or SAME (normalised edges or not), into
 * GlobalAvgPool, on random image sizes, channel counts, tiles and both
 * precisions; the batched kernels (one run: b_pair_slice, several:
 * b_pair_multi) against the same path pair by pair, bit for bit. */
static unsigned rnd_state = 12345;
static size_t rnd(size_t k) {
  rnd_state = rnd_state * 1103515245u + 12345u;
  return (size_t)((rnd_state >> 8) % k);
}
#define RND rnd

START_TEST(test_batched_bits_random) {
  static const char *const maps[] = {"Relu", "Erf", "LeakyRelu(0.2)", "Gelu", "Abs"};
  int batched_runs[4] = {0}, skipped = 0;
  for (int trial = 0; trial < 80; trial++) {
    char arch[1024] = "";
    size_t runs = 1 + RND(3);
    for (size_t r = 0; r < runs; r++) {
      for (size_t l = 1 + RND(2); l > 0; l--) {
        char b[64];
        snprintf(b, sizeof b, "Conv(%zu, 1, SAME) %s ", 1 + RND(3), maps[RND(5)]);
        strcat(arch, b);
      }
      if (r + 1 == runs) break;
      char b[96];
      size_t w = 1 + RND(3), st = 1 + RND(2);
      const char *pad = RND(2) ? "SAME" : "VALID";
      if (RND(3) == 0)
        snprintf(b, sizeof b, "AvgPool((%zu, %zu), (%zu, %zu), '%s', normalize_edges=True) ", w, w, st, st, pad);
      else
        snprintf(b, sizeof b, "%s(%zu, %zu, padding=%s) ", RND(4) ? "AvgPool" : "SumPool", w, st, pad);
      strcat(arch, b);
    }
    strcat(arch, RND(2) ? "GlobalAvgPool Dense" : "GlobalAvgPool Dense Relu Dense");
    int elem = RND(2) ? 4 : 8;
    struct ntk_dataset ds;
    random_images(&ds, 5 + RND(10), 4 + RND(6), 3 + RND(6), 1 + RND(3), elem, (unsigned)trial + 1);
    size_t n = ds.n, tile = 1 + RND(8);
    struct ntk_arch a;
    ck_assert_msg(ntk_arch_parse(arch, 1.3, 0.1, &a) == NTK_OK, "%s: %s", arch, ntk_error_message());
    ntk_cnn_t *c;
    if (ntk_cnn_create(&a, &ds, NTK_CNN_AUTO, NULL, &c) != NTK_OK) { /* a VALID window larger than its input */
      skipped++;
      free(ds.x);
      ntk_arch_free(&a);
      continue;
    }
    ntk_cnn_path path = ntk_cnn_get_path(c);
    batched_runs[runs] += ntk_cnn_batched(c);
    ntk_cnn_free(c);
    double *g0 = calloc(n * n, 8), *t0 = calloc(n * n, 8), *g1 = calloc(n * n, 8), *t1 = calloc(n * n, 8);
    compute(&a, &ds, path, tile, g0, t0);
    compute(&a, &ds, NTK_CNN_AUTO, tile, g1, t1);
    ck_assert_msg(!memcmp(g0, g1, n * n * 8) && !memcmp(t0, t1, n * n * 8),
                  "%s on %zu %zux%zux%zu images (%s), tile %zu: batched and pair-by-pair differ", arch, n, ds.h,
                  ds.w, ds.c, elem == 4 ? "float32" : "float64", tile);
    free(g0), free(t0), free(g1), free(t1), free(ds.x);
    ntk_arch_free(&a);
  }
  /* both batched shapes were exercised */
  ck_assert_int_le(skipped, 15);
  ck_assert_int_ge(batched_runs[1], 5);
  ck_assert_int_ge(batched_runs[2] + batched_runs[3], 10);
}
END_TEST

/* Every case of a reference file (ref_cnn.txt: neural-tangents' CNN
 * cases), on every path that applies, in both precisions, with whole and
 * ragged tiles. Float32 errors are taken relative to max(|K_ij|,
 * sqrt(K_ii K_jj)) as in test_kernel.c. */
static void check_reference_file(const char *file, int min_cases, int elem, double tol) {
  FILE *f = ref_open(file);
  struct ref_case c;
  int cases = 0, runs = 0;
  double worst = 0;
  while (ref_read_case(f, &c)) {
    struct ntk_arch arch;
    ck_assert_msg(ntk_arch_parse_param(c.arch, 1.0, 0.0, c.standard, &arch) == NTK_OK, "%s: %s", c.name, ntk_error_message());
    struct ntk_dataset ds = ref_dataset(&c, elem);
    ck_assert_msg(ntk_cnn_applies(&arch, &ds), "%s: not taken as a CNN", c.name);
    double *g = malloc(c.n * c.n * 8), *t = malloc(c.n * c.n * 8);
    /* AUTO is the batched code where it applies. */
    const ntk_cnn_path paths[] = {NTK_CNN_GENERAL, NTK_CNN_SLICE, NTK_CNN_DIAG, NTK_CNN_AUTO};
    for (int pi = 0; pi < 4; pi++) {
      ntk_cnn_t *probe;
      if (ntk_cnn_create(&arch, &ds, paths[pi], NULL, &probe) != NTK_OK) continue; /* path not valid here */
      ntk_cnn_free(probe);
      for (size_t tile = c.n; tile >= 2; tile -= c.n - 2 > 0 ? c.n - 2 : 1) {
        compute(&arch, &ds, paths[pi], tile, g, t);
        /* plain relative error in float64 */
        double e = fmax(ref_max_err(g, 8, c.nngp, c.n, elem == 8), ref_max_err(t, 8, c.ntk, c.n, elem == 8));
        ck_assert_msg(e < tol, "%s (%s, path %d, tile %zu): relative error %.3g >= %.0e", c.name,
                      elem == 4 ? "float32" : "float64", paths[pi], tile, e, tol);
        worst = fmax(worst, e);
        runs++;
        if (tile == 2) break;
      }
    }
    free(g);
    free(t);
    free(ds.x);
    ntk_arch_free(&arch);
    ref_free_case(&c);
    cases++;
  }
  fclose(f);
  ck_assert_int_ge(cases, min_cases);
  printf("%s (%s): %d cases, %d path/tile runs, max relative error %.3g (bound %.0e)\n", file,
         elem == 4 ? "float32" : "float64", cases, runs, worst, tol);
}

static void check_reference(int elem, double tol) {
  check_reference_file("ref_cnn.txt", 30, elem, tol);
  check_reference_file("ref_graph.txt", 8, elem, tol); /* graph networks (Aggregate): the general path */
}

/* Networks checked against the data they would run on (ntk_cnn_check):
 * 3 random images of 5 rows, 4 columns (1 for (N, L, C) data or a network
 * of 1-D convolutions) and 2 channels; `why` NULL: accepted, else refused
 * with a message containing it. */
struct data_net {
  const char *arch;
  int one_d;
  const char *why;
};

static void check_nets(const struct data_net *nets, size_t n) {
  for (size_t k = 0; k < n; k++) {
    struct ntk_dataset ds;
    random_images(&ds, 3, 5, nets[k].one_d || strstr(nets[k].arch, "(3,)") ? 1 : 4, 2, 8, 7);
    ds.one_d = nets[k].one_d;
    struct ntk_arch a;
    ck_assert_msg(ntk_arch_parse(nets[k].arch, 1.2, 0.1, &a) == NTK_OK, "%s: %s", nets[k].arch, ntk_error_message());
    ntk_status st = ntk_cnn_check(&a, &ds);
    if (!nets[k].why) ck_assert_msg(st == NTK_OK, "%s: %s", nets[k].arch, ntk_error_message());
    else
      ck_assert_msg((st == NTK_ECONFIG || (st == NTK_ENOMEM && strstr(nets[k].why, "largest image"))) &&
                        strstr(ntk_error_message(), nets[k].why),
                    "%s: %s", nets[k].arch, st ? ntk_error_message() : "accepted");
    ntk_arch_free(&a);
    free(ds.x);
  }
}

/* LayerNorm's axes against the data: the channels must be among them on
 * images, (N, L, C) data count three axes ([data] layout = NLC, or a
 * network of 1-D layers), and after the readout the data are vectors. */
START_TEST(test_layernorm_axes_data) {
  static const struct data_net nets[] = {
      {"Conv(3, 1, SAME) LayerNorm(axis=(1, 2, 3)) Relu GlobalAvgPool Dense", 0, NULL},
      {"Conv(3, 1, SAME) LayerNorm(axis=(1, 2)) Relu GlobalAvgPool Dense", 0, "leave the channels (axis -1) out"},
      {"Conv(16, (3,), padding='SAME') LayerNorm(axis=(1, 2)) Relu GlobalAvgPool Dense", 1, NULL},
      {"Conv(16, (3,), padding='SAME') LayerNorm(axis=(1, 2, 3)) Relu GlobalAvgPool Dense", 1,
       "axis 3 is outside data of 3 axes"},
      {"Conv(16, (3,), padding='SAME') LayerNorm(axis=(1, 2)) Relu GlobalAvgPool Dense", 0, NULL},
      {"Conv(3, 1, SAME) Relu GlobalAvgPool Dense LayerNorm(axis=(-2, -1)) Relu Dense", 0,
       "layer 5 (LayerNorm): axis -2 is the batch axis of data of 2 axes"},
      {"Conv(3, 1, SAME) Relu GlobalAvgPool Dense LayerNorm(axis=1) Relu Dense", 0, NULL},
  };
  check_nets(nets, sizeof nets / sizeof *nets);
}
END_TEST

/* ConvTranspose grows the image (5 x 4 here): up to 4 096 positions a
 * side; only the general path computes it, and no GPU. ConvLocal: not on
 * the slices. */
START_TEST(test_transpose_and_local_data) {
  static const struct data_net nets[] = {
      /* 2560 x 2048: within the side limit, past any machine's memory (the full covariance: 2.7e13 entries) */
      {"[ConvTranspose(2, 2, SAME) Relu]*9 GlobalAvgPool Dense", 0, "largest image, 2560 x 2048 positions, needs"},
      {"[ConvTranspose(2, 2, SAME) Relu]*10 GlobalAvgPool Dense", 0,
       "layer 19: ConvTranspose makes 2560 x 2048 images 5120 x 4096, more than 4096 positions a side"},
      {"ConvTranspose(16, (3,), strides=(2,)) Relu GlobalAvgPool Dense", 1, NULL},
      {"ConvTranspose(16, (4093,), padding='CIRCULAR') Relu GlobalAvgPool Dense", 1,
       "layer 1: ConvTranspose makes sequences of 5 positions 4097 long before its CIRCULAR fold, more than 4096"},
      {"ConvTranspose(4, (40, 40), padding=CIRCULAR) Relu GlobalAvgPool Dense", 0, NULL},
      /* buffers past any machine's memory refused before they are allocated, naming the image; sizes past size_t */
      {"Conv(1) ImageResize((-1, 2000, 2000, -1), 'linear') Relu GlobalAvgPool Dense", 0,
       "largest image, 2000 x 2000 positions, needs covariance buffers of"},
      {"Conv(1) ImageResize((-1, 1000000, 1000000, -1), 'nearest') Relu GlobalAvgPool Dense", 0,
       "largest image, 1000000 x 1000000 positions"},
  };
  check_nets(nets, sizeof nets / sizeof *nets);
  struct ntk_dataset ds;
  random_images(&ds, 3, 5, 4, 2, 8, 1);
  const char *const archs_t[] = {"ConvTranspose(3, 2, SAME) Relu Flatten Dense", "ConvLocal(3, 1, SAME) Relu "
                                 "GlobalAvgPool Dense", "Conv(3, 1, SAME) GlobalSelfAttention(4, 4, 4, 1) Relu "
                                 "Flatten Dense", "Conv(3, 1, SAME) ImageResize((-1, 7, 2, -1), 'linear') Relu "
                                 "Flatten Dense"};
  const ntk_cnn_path refused[][2] = {{NTK_CNN_DIAG, NTK_CNN_SLICE}, {NTK_CNN_SLICE, NTK_CNN_SLICE},
                                     {NTK_CNN_DIAG, NTK_CNN_SLICE}, {NTK_CNN_DIAG, NTK_CNN_SLICE}};
  for (int k = 0; k < 4; k++) {
    struct ntk_arch a;
    ck_assert_int_eq(test_arch_parse(archs_t[k], 1.0, 0.0, &a), NTK_OK);
    ntk_cnn_t *c;
    for (int r = 0; r < 2; r++)
      ck_assert_int_eq(ntk_cnn_create(&a, &ds, refused[k][r], NULL, &c), NTK_ECONFIG);
    ck_assert_int_eq(ntk_cnn_create(&a, &ds, NTK_CNN_AUTO, NULL, &c), NTK_OK);
    ck_assert_int_eq(ntk_cnn_get_path(c), NTK_CNN_GENERAL);
    ntk_cnn_free(c);
    struct ntk_dev_plan plan;
    ck_assert_int_eq(ntk_cnn_dev_plan(&a, &ds, &plan), NTK_ECONFIG);
    ntk_arch_free(&a);
  }
  free(ds.x);
}
END_TEST

/* ds's rows followed by a V x V pattern each (V = h*w): `scale` times the
 * identity, sample `empty` (if < n) without edges. */
static void add_pattern(struct ntk_dataset *ds, double scale, size_t empty) {
  size_t v = ds->h * ds->w, d = ds->d + v * v, es = (size_t)ds->elem;
  char *x = calloc(ds->n * d, es);
  for (size_t i = 0; i < ds->n; i++) {
    memcpy(x + i * d * es, (char *)ds->x + i * ds->d * es, ds->d * es);
    for (size_t p = 0; p < v && i != empty; p++) {
      size_t k = i * d + ds->d + p * v + p;
      if (es == 4) ((float *)x)[k] = (float)scale;
      else ((double *)x)[k] = scale;
    }
  }
  free(ds->x);
  ds->x = x;
  ds->d = d;
  ds->pattern = v * v;
}

/* Aggregate (graph networks): the pattern against the network, the
 * general path only, no GPU; an identity pattern is the network without
 * the layer, bit for bit (its products by 1 and 0 are exact), and a
 * sample without edges has kernel 0 there (not refused as an underflow).
 * The values are checked against neural-tangents in check_reference
 * (ref_graph.txt). */
START_TEST(test_aggregate_data) {
  for (int elem = 4; elem <= 8; elem += 4) {
    struct ntk_dataset ds, plain;
    random_images(&ds, 5, 3, 2, 2, elem, 17);
    random_images(&plain, 5, 3, 2, 2, elem, 17);
    struct ntk_arch a, b, c2;
    ck_assert_int_eq(test_arch_parse("Conv(3, 1, SAME) Relu Aggregate Conv(3, 1, SAME) Relu Aggregate GlobalAvgPool "
                                     "Dense", 1.3, 0.1, &a), NTK_OK);
    ck_assert_int_eq(test_arch_parse("Conv(3, 1, SAME) Relu Conv(3, 1, SAME) Relu GlobalAvgPool Dense", 1.3, 0.1, &b),
                     NTK_OK);
    ntk_cnn_t *c;
    ck_assert_int_eq(ntk_cnn_create(&a, &plain, NTK_CNN_AUTO, NULL, &c), NTK_ECONFIG);
    ck_assert_msg(strstr(ntk_error_message(), "Aggregate layers need each sample's pattern"), "%s",
                  ntk_error_message());
    add_pattern(&ds, 1.0, SIZE_MAX);
    ck_assert_int_eq(ntk_cnn_create(&b, &ds, NTK_CNN_AUTO, NULL, &c), NTK_ECONFIG);
    ck_assert_msg(strstr(ntk_error_message(), "no Aggregate layer to read it"), "%s", ntk_error_message());
    ck_assert_int_eq(ntk_cnn_create(&a, &ds, NTK_CNN_SLICE, NULL, &c), NTK_ECONFIG);
    ck_assert_int_eq(ntk_cnn_create(&a, &ds, NTK_CNN_DIAG, NULL, &c), NTK_ECONFIG);
    struct ntk_dev_plan plan;
    ck_assert_int_eq(ntk_cnn_dev_plan(&a, &ds, &plan), NTK_ECONFIG);
    ck_assert_msg(strstr(ntk_error_message(), "do not compute an Aggregate"), "%s", ntk_error_message());
    size_t n = ds.n;
    double *g = malloc(n * n * 8), *t = malloc(n * n * 8), *g0 = malloc(n * n * 8), *t0 = malloc(n * n * 8);
    compute(&a, &ds, NTK_CNN_AUTO, 2, g, t);
    compute(&b, &plain, NTK_CNN_GENERAL, 2, g0, t0);
    ck_assert_mem_eq(g, g0, n * n * 8);
    ck_assert_mem_eq(t, t0, n * n * 8);
    /* twice the identity, sample 3 without edges: its kernel is 0 (no bias after the Aggregate) */
    free(ds.x);
    random_images(&ds, 5, 3, 2, 2, elem, 17);
    add_pattern(&ds, 2.0, 3);
    ck_assert_int_eq(test_arch_parse("Conv(3, 1, SAME) Relu Aggregate GlobalAvgPool Dense(b_std=0)", 1.3, 0.1, &c2),
                     NTK_OK);
    compute(&c2, &ds, NTK_CNN_AUTO, 3, g, t);
    for (size_t i = 0; i < n; i++) {
      ck_assert_msg(g[3 * n + i] == 0 && t[i * n + 3] == 0, "sample 3 has no edges: %g %g", g[3 * n + i], t[i * n + 3]);
      if (i != 3) ck_assert(g[i * n + i] > 0);
    }
    ntk_arch_free(&c2);
    /* a pattern of another size than the layers see: after a pooling, or two Aggregates on two sizes */
    ck_assert_int_eq(test_arch_parse("AvgPool(2, 1) Aggregate GlobalAvgPool Dense", 1.3, 0.1, &c2), NTK_OK);
    ck_assert_int_eq(ntk_cnn_create(&c2, &ds, NTK_CNN_AUTO, NULL, &c), NTK_ECONFIG);
    ck_assert_msg(strstr(ntk_error_message(), "the pattern has 36 values per sample and the network's Aggregate "
                         "layers see 2 positions"), "%s", ntk_error_message());
    ntk_arch_free(&c2);
    ck_assert_int_eq(test_arch_parse("Aggregate AvgPool(2, 1) Aggregate GlobalAvgPool Dense", 1.3, 0.1, &c2),
                     NTK_OK);
    ck_assert_int_eq(ntk_cnn_create(&c2, &ds, NTK_CNN_AUTO, NULL, &c), NTK_ECONFIG);
    ck_assert_msg(strstr(ntk_error_message(), "layer 3 (Aggregate): it aggregates 2 positions, an Aggregate before "
                         "it 6"), "%s", ntk_error_message());
    ntk_arch_free(&c2);
    free(g);
    free(t);
    free(g0);
    free(t0);
    ntk_arch_free(&a);
    ntk_arch_free(&b);
    free(ds.x);
    free(plain.x);
  }
}
END_TEST

/* FanInConcat along a spatial axis (issue 29): the axis against the data,
 * the shapes stax needs, Gaussian branches, the general path only, and
 * the GPU's and the fully-connected engine's refusals. The values are
 * checked against neural-tangents in check_reference (cnn_concat_*). */
START_TEST(test_concat_axis_data) {
  static const struct data_net nets[] = {
      {"Conv(1) FanOut(2) parallel(Conv(3, 1, SAME), Identity) FanInConcat(axis=1) Relu GlobalAvgPool Dense", 0,
       NULL},
      {"Conv(1) FanOut(2) parallel(Conv(3, 1, SAME), Identity) FanInConcat(axis=2) Relu Flatten Dense", 0, NULL},
      {"Conv(1) FanOut(2) parallel(Conv(16, (3,), padding='SAME'), Identity) FanInConcat(axis=2) GlobalAvgPool Dense",
       1, NULL}, /* the channels of (N, L, C) data */
      {"Conv(1) FanOut(2) parallel(Conv(3), Identity) FanInConcat(axis=1) GlobalAvgPool Dense", 0,
       "the other must be equal"},
      {"Conv(1) FanOut(2) parallel(Conv(3, 1, SAME), Identity) FanInConcat(axis=-4) GlobalAvgPool Dense", 0,
       "axis -4 is the batch axis of data of 4 axes"},
      {"Conv(1) FanOut(2) parallel(Conv(16, (3,), padding='SAME'), Identity) FanInConcat(axis=3) GlobalAvgPool Dense",
       1, "axis 3 is outside data of 3 axes"},
      {"Conv(3, (3, 3), padding='SAME') FanOut(2) parallel(Conv(16, (3, 3), padding='SAME'), Conv(8, (1, 1))) "
       "FanInConcat(axis=1) GlobalAvgPool Dense(1)", 0, "the other axes equal"},
      {"Conv(3, 1, SAME) Relu GlobalAvgPool Dense FanOut(2) parallel(Dense, Identity) FanInConcat(axis=-2) Dense",
       0, "(FanInConcat): axis -2 is the batch axis of data of 2 axes"},
      /* axis 1 or 2 is known to be spatial or the channels only against the data: along the rows of images
       * every branch must end Gaussian; the channels of (N, L, C) data (axis 2) or of the vectors after a
       * readout (axis 1: known while parsing, test_arch.c) make no Gaussian output, so no nonlinearity may
       * follow (a wrong kernel once) */
      {"Conv(3) FanOut(2) parallel(Relu, Identity) FanInConcat(axis=1) Flatten Dense", 0,
       "every branch must end Gaussian"},
      {"Conv(1) FanOut(2) parallel(Conv(16, (3,), padding='SAME'), Identity) FanInConcat(axis=2) Relu GlobalAvgPool "
       "Dense", 1, "layer 7 (Relu): a nonlinearity must follow Dense or Conv"},
      {"Conv(3, 1, SAME) Relu GlobalAvgPool Dense FanOut(2) parallel(Relu, Dense) FanInConcat(axis=1) Dense", 0, NULL},
      /* the batch axis named where a nonlinearity or LayerNorm follows (once "must follow Dense or Conv") */
      {"Conv(1) FanOut(2) parallel(Conv(3, 1, SAME), Identity) FanInConcat(axis=-4) Relu GlobalAvgPool Dense", 0,
       "layer 6 (FanInConcat): axis -4 is the batch axis of data of 4 axes"},
      {"Conv(1) FanOut(2) parallel(Conv(16, (3,), padding='SAME'), Identity) FanInConcat(axis=-3) LayerNorm "
       "GlobalAvgPool Dense", 1, "layer 6 (FanInConcat): axis -3 is the batch axis of data of 3 axes"},
  };
  check_nets(nets, sizeof nets / sizeof *nets);
  /* the general path only, and not on the GPU */
  struct ntk_dataset ds;
  random_images(&ds, 3, 5, 4, 2, 8, 7);
  struct ntk_arch a;
  ck_assert(ntk_arch_parse("Conv(1) FanOut(2) parallel(Conv(3, 1, SAME), Identity) FanInConcat(axis=1) Relu "
                           "GlobalAvgPool Dense", 1.2, 0.1, &a) == NTK_OK);
  ntk_cnn_t *c = NULL;
  ck_assert(ntk_cnn_create(&a, &ds, NTK_CNN_SLICE, NULL, &c) == NTK_ECONFIG);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "general path only"));
  ck_assert(ntk_cnn_create(&a, &ds, NTK_CNN_AUTO, NULL, &c) == NTK_OK);
  ntk_cnn_free(c);
  struct ntk_dev_plan plan;
  ck_assert(ntk_cnn_dev_plan(&a, &ds, &plan) == NTK_ECONFIG);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "FanInConcat along a spatial axis"));
  ntk_arch_free(&a);
  free(ds.x);
  /* the batch axis; a non-Gaussian branch (neural-tangents refuses both) */
  ck_assert(ntk_arch_parse("Conv(3) FanOut(2) parallel(Relu, Identity) FanInConcat(axis=0) Flatten Dense", 1, 0, &a) ==
            NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "batch axis 0"), "%s", ntk_error_message());
  ck_assert(ntk_arch_parse("Conv(3) FanOut(2) parallel(Relu, Identity) FanInConcat(axis=-2) Flatten Dense", 1, 0, &a) ==
            NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "every branch must end Gaussian"), "%s", ntk_error_message());
  /* vectors: axis 1 is their channels, -2 their batch */
  struct ntk_dataset v = {0};
  double x[6] = {1, 2, 3, 4, 5, 6};
  v.n = 3;
  v.d = 2;
  v.elem = 8;
  v.x = x;
  ck_assert(ntk_arch_parse("Dense FanOut(2) parallel(Dense, Identity) FanInConcat(axis=1) Dense", 1, 0, &a) == NTK_OK);
  ck_assert_msg(ntk_fc_check(&a, &v) == NTK_OK, "%s", ntk_error_message());
  ntk_arch_free(&a);
  ck_assert(ntk_arch_parse("Dense FanOut(2) parallel(Dense, Identity) FanInConcat(axis=-2) Dense", 1, 0, &a) == NTK_OK);
  ck_assert(ntk_fc_check(&a, &v) == NTK_ECONFIG);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "batch axis"));
  ntk_arch_free(&a);
  /* ... also when a nonlinearity follows: the axis is named, not the
   * nonlinearity's input (hunt3) */
  ck_assert(ntk_arch_parse("Dense FanOut(2) parallel(Dense, Dense) FanInConcat(axis=-2) Erf Dense", 1, 0, &a) == NTK_OK);
  ck_assert(ntk_fc_check(&a, &v) == NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "layer 6 (FanInConcat): axis -2 is the batch axis of data of 2 axes"), "%s",
                ntk_error_message());
  ntk_arch_free(&a);
  /* axis 1 of vectors: the channels, whose concatenation is not Gaussian */
  ck_assert(ntk_arch_parse("Dense FanOut(2) parallel(Dense, Dense(3)) FanInConcat(axis=1) Erf Dense", 1, 0, &a) == NTK_OK);
  ck_assert(ntk_fc_check(&a, &v) == NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "layer 7 (Erf): a nonlinearity must follow"), "%s", ntk_error_message());
  ntk_arch_free(&a);
  ck_assert(ntk_arch_parse("Dense FanOut(2) parallel(Relu, Dense) FanInConcat(axis=1) Dense", 1, 0, &a) == NTK_OK);
  ck_assert_msg(ntk_fc_check(&a, &v) == NTK_OK, "%s", ntk_error_message());
  ntk_arch_free(&a);
}
END_TEST

/* A 2-D conv or pooling layer on (N, L, C) data ([data] layout = NLC, a
 * 3-D array in Python), which ntkd holds as L x 1 images: a filter, window
 * or stride wider than 1 once ran as a 2-D layer over the L x 1 image,
 * exit 0 (a 3 x 3 SAME filter: NNGP 0.25 where the 1-D (3,) gives 0.75),
 * where stax refuses it; now refused, naming the layer and its 1-D form.
 * (f, 1) and 1 x 1 sizes are the 1-D layer's and compute its numbers; on
 * genuine H x 1 images (NHWC) 2-D layers still run. */
START_TEST(test_2d_layers_on_1d_data) {
  static const struct data_net nets[] = {
      {"Conv(8, (3, 3), padding='SAME') Relu GlobalAvgPool Dense(1)", 1,
       "arch, layer 1: Conv is 2-D (filter (3, 3), strides (1, 1)) on (N, L, C) data"},
      {"Conv(8, (3, 3), padding='SAME') Relu GlobalAvgPool Dense(1)", 1,
       "write the 1-D form, Conv(8, (3,), padding='SAME'), its other arguments unchanged"},
      /* ntkd's short form: a bare size is square */
      {"Conv(3, 1, SAME) Relu GlobalAvgPool Dense", 1, "write the 1-D form, Conv(filter_shape=(3,), padding='SAME')"},
      {"Conv(8, (3,), padding='SAME') AvgPool((2, 2)) Relu GlobalAvgPool Dense(1)", 1,
       "layer 2: AvgPool is 2-D (window (2, 2), strides (1, 1)) on (N, L, C) data"},
      {"Conv(8, (3,), padding='SAME') AvgPool((2, 2)) Relu GlobalAvgPool Dense(1)", 1,
       "AvgPool((2,), strides=(1,), padding='VALID')"},
      {"Conv(8, (3,)) SumPool(2, 1, SAME) Relu GlobalAvgPool Dense(1)", 1,
       "layer 2: SumPool is 2-D (window (2, 2), strides (1, 1))"},
      {"Conv(8, (3,)) AvgPool(2) Relu GlobalAvgPool Dense(1)", 1, "AvgPool((2,), strides=(2,), padding='VALID')"},
      /* a stride across the width; in a residual branch */
      {"Conv(8, (3, 1), strides=(2, 2), padding='SAME') Relu GlobalAvgPool Dense(1)", 1,
       "layer 1: Conv is 2-D (filter (3, 1), strides (2, 2))"},
      {"Conv(8, (3, 1), strides=(2, 2), padding='SAME') Relu GlobalAvgPool Dense(1)", 1,
       "Conv(8, (3,), strides=(2,), padding='SAME')"},
      {"Conv(1) FanOut(2) parallel(Conv(3, 1, SAME), Identity) FanInSum Relu GlobalAvgPool Dense", 1,
       "layer 3: Conv is 2-D (filter (3, 3)"},
      /* a network of 1-D layers makes the data (N, L, C) too (the images here are 5 x 1) */
      {"Conv(8, (3,), padding='SAME') Conv(8, (3, 3), padding='SAME') Relu GlobalAvgPool Dense(1)", 0,
       "layer 2: Conv is 2-D (filter (3, 3), strides (1, 1)) on (N, L, C) data"},
      /* (f, 1) and 1 x 1: the 1-D layer's */
      {"Conv(8, (3, 1), strides=(2, 1), padding='SAME') Relu Conv(1) AvgPool((2, 1)) Conv(8, (1, 1)) Relu "
       "GlobalAvgPool Dense(1)", 1, NULL},
      {"Conv(8, (3,), padding='SAME') Conv(1) Relu GlobalAvgPool Dense(1)", 1, NULL},
  };
  check_nets(nets, sizeof nets / sizeof *nets);
  struct ntk_dataset ds;
  struct ntk_arch a;
  /* every path and the GPU's plan refuse it */
  random_images(&ds, 3, 5, 1, 2, 8, 7);
  ds.one_d = 1;
  ck_assert(ntk_arch_parse("Conv(8, (3, 3), padding='SAME') Relu GlobalAvgPool Dense(1)", 1.2, 0.1, &a) == NTK_OK);
  ntk_cnn_path paths[] = {NTK_CNN_AUTO, NTK_CNN_GENERAL, NTK_CNN_SLICE};
  for (size_t k = 0; k < 3; k++) {
    ntk_cnn_t *c = NULL;
    ck_assert(ntk_cnn_create(&a, &ds, paths[k], NULL, &c) == NTK_ECONFIG);
    ck_assert_msg(strstr(ntk_error_message(), "on (N, L, C) data"), "%s", ntk_error_message());
  }
  struct ntk_dev_plan plan;
  ck_assert(ntk_cnn_dev_plan(&a, &ds, &plan) == NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "on (N, L, C) data"), "%s", ntk_error_message());
  /* ... but a 5 x 1 image (NHWC) takes it, as stax does */
  ds.one_d = 0;
  ck_assert_msg(ntk_cnn_check(&a, &ds) == NTK_OK, "%s", ntk_error_message());
  ntk_arch_free(&a);
  /* (f, 1) and 1 x 1 sizes compute the 1-D network's numbers, bit for bit */
  ds.one_d = 1;
  struct ntk_arch b;
  ck_assert(ntk_arch_parse("Conv(8, (3, 1), padding='SAME') Relu Conv(8, (1, 1)) Relu AvgPool((2, 1), strides=(2, 1)) "
                           "GlobalAvgPool Dense(1)", 1.2, 0.1, &a) == NTK_OK);
  ck_assert(ntk_arch_parse("Conv(8, (3,), padding='SAME') Relu Conv(8, (1,)) Relu AvgPool((2,), strides=(2,)) "
                           "GlobalAvgPool Dense(1)", 1.2, 0.1, &b) == NTK_OK);
  size_t n = ds.n;
  double g0[9], t0[9], g1[9], t1[9];
  compute(&a, &ds, NTK_CNN_AUTO, n, g0, t0);
  compute(&b, &ds, NTK_CNN_AUTO, n, g1, t1);
  ck_assert(!memcmp(g0, g1, sizeof g0) && !memcmp(t0, t1, sizeof t0));
  ck_assert(g0[0] > 0 && t0[0] > g0[0]);
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  free(ds.x);
}
END_TEST

START_TEST(test_reference_float64) { check_reference(8, 1e-10); }
END_TEST

START_TEST(test_reference_float32) { check_reference(4, 1e-5); }
END_TEST

/* The spatial-FanInConcat network of cnn_concat_cols_strided_flat with Erf
 * in the branch and/or Gelu after the join, against the independent
 * 40-digit full-covariance reference of scripts/concat_reference.py
 * (tests/data/ref_concat.txt), not neural-tangents: its NTK diagonal is off
 * by up to 6.4e-10 there (its diagonal_spatial path rounds nngp[i,i] and
 * cov1[i] differently after Erf/Gelu, and the last Relu's angle amplifies
 * the ulp). */
START_TEST(test_concat_independent_float64) { check_reference_file("ref_concat.txt", 4, 8, 1e-12); }
END_TEST

START_TEST(test_concat_independent_float32) { check_reference_file("ref_concat.txt", 4, 4, 1e-5); }
END_TEST

int main(void) {
  Suite *s = suite_create("cnn");
  TCase *tc = tcase_create("cnn");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_paths_agree);
  tcase_add_test(tc, test_batched_bits_float32);
  tcase_add_test(tc, test_batched_bits_float64);
  tcase_add_test(tc, test_batched_bits_random);
  tcase_add_test(tc, test_layernorm_axes_data);
  tcase_add_test(tc, test_concat_axis_data);
  tcase_add_test(tc, test_transpose_and_local_data);
  tcase_add_test(tc, test_aggregate_data);
  tcase_add_test(tc, test_2d_layers_on_1d_data);
  tcase_add_test(tc, test_reference_float64);
  tcase_add_test(tc, test_reference_float32);
  tcase_add_test(tc, test_concat_independent_float64);
  tcase_add_test(tc, test_concat_independent_float32);
  tcase_add_test(tc, test_scale_free_underflow);
  tcase_add_test(tc, test_scale_free_position_underflow);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
