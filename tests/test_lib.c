/* The library through its public header alone (include/ntkd.h), linked
 * against libntkd.so: networks and their errors, the kernels of x1 against
 * itself and against x2, bit for bit the same whatever the threads, the
 * tile or the kernels asked for; cancellation; progress. */
#include <check.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ntkd.h"

/* Deterministic data on a coarse grid. */
static double *grid_data(size_t n, size_t d, unsigned seed) {
  double *x = malloc(n * d * sizeof *x);
  uint64_t s = seed * 2654435761u + 1;
  for (size_t i = 0; i < n * d; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (double)((int)(s >> 59) - 16) / 8.0;
  }
  return x;
}

static ntkd_net *net_of(const char *arch) {
  ntkd_net *net = NULL;
  ntkd_status st = ntkd_net_create(arch, NULL, &net);
  ck_assert_msg(st == NTKD_OK, "%s: %s", arch, ntkd_last_error());
  return net;
}

START_TEST(test_net_errors) {
  ntkd_net *net = (ntkd_net *)1;
  ck_assert_int_eq(ntkd_net_create("Dense Relu Relu Dense", NULL, &net), NTKD_ERROR_ARCH);
  /* "arch" once: the parser's message names it already */
  ck_assert_msg(!strncmp(ntkd_last_error(), "arch, layer 3 (Relu)", 20) && !strstr(ntkd_last_error(), "arch, arch"),
                "%s", ntkd_last_error());
  ck_assert_ptr_null(net);
  ck_assert_ptr_nonnull(strstr(ntkd_last_error(), "arch"));
  ck_assert_int_eq(ntkd_net_create("[Dense Relu]*100000000", NULL, &net), NTKD_ERROR_ARCH);
  ck_assert_ptr_nonnull(strstr(ntkd_last_error(), "100000"));
  ck_assert_int_eq(ntkd_net_create(NULL, NULL, &net), NTKD_ERROR_USAGE);
  ntkd_net_options o;
  ntkd_net_options_init(&o);
  o.parameterization = 7;
  ck_assert_int_eq(ntkd_net_create("Dense", &o, &net), NTKD_ERROR_USAGE);
  ntkd_net_free(NULL);
  /* The layer-list form is the same network as the string. */
  const char *layers[] = {"Dense(W_std=1.5, b_std=0.1)", "Relu", "Dense"};
  ntkd_net *a = NULL, *b = net_of("Dense(W_std=1.5, b_std=0.1) Relu Dense");
  ck_assert_int_eq(ntkd_net_create_layers(layers, 3, NULL, &a), NTKD_OK);
  char ta[512], tb[512];
  ck_assert_uint_lt(ntkd_net_describe(a, ta, sizeof ta), sizeof ta);
  ntkd_net_describe(b, tb, sizeof tb);
  ck_assert_str_eq(ta, tb);
  ck_assert_str_eq(ntkd_status_name(NTKD_ERROR_ARCH), "arch");
  ntkd_net_free(a);
  ntkd_net_free(b);
}
END_TEST

/* K(x, x) of `arch` on n samples of shape `shape`, with `threads` threads and `tile`. */
static void kernels(const char *arch, const double *x, size_t n, int ndim, const size_t *shape, const double *x2,
                    size_t n2, int threads, size_t tile, unsigned which, double *nngp, double *ntk) {
  ntkd_net *net = net_of(arch);
  ntkd_data a = {x, n, ndim, {shape[0], ndim > 1 ? shape[1] : 0, ndim > 2 ? shape[2] : 0}, NTKD_FLOAT64};
  ntkd_data b = a;
  b.x = x2;
  b.n = n2;
  ntkd_compute_options o;
  ntkd_compute_options_init(&o);
  o.threads = threads;
  o.tile = tile;
  ntkd_status st = ntkd_kernels(net, &a, x2 ? &b : NULL, which, nngp, ntk, &o);
  ck_assert_msg(st == NTKD_OK, "%s: %s", arch, ntkd_last_error());
  ntkd_net_free(net);
}

/* A host process in a locale whose decimal point is a comma (de_DE): made
 * here by localedef into a temporary LOCPATH when the system has none.
 * Returns 1 when this process is now in it. */
static int enter_comma_locale(char *dir, size_t cap) {
  dir[0] = '\0';
  if (setlocale(LC_ALL, "de_DE.UTF-8")) return 1;
  snprintf(dir, cap, "/tmp/ntkd-test-locale-XXXXXX");
  if (!mkdtemp(dir)) return 0;
  char cmd[256];
  snprintf(cmd, sizeof cmd, "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 >/dev/null 2>&1", dir);
  int made = system(cmd) == 0;
  setenv("LOCPATH", dir, 1);
  return made && setlocale(LC_ALL, "de_DE.UTF-8");
}

/* strtod and printf follow the locale: before libntkd's entry points ran
 * in C's, under de_DE "W_std=2**0.5" read 2**0 = 1, np.sqrt(2.25) read
 * sqrt(2), "W_std=1.5" was refused, and the canonical text had commas. */
START_TEST(test_host_locale_changes_no_number) {
  const char *arch = "Dense(64, W_std=2**0.5, b_std=0.1*3) Erf(a=0.5) Dense(1, W_std=np.sqrt(2.25), b_std=1.5)";
  size_t n = 7, shape[1] = {3};
  double *x = grid_data(n, shape[0], 11);
  double c_g[49], c_t[49], de_g[49], de_t[49];
  char c_text[512], de_text[512];
  ntkd_net *net = net_of(arch);
  ntkd_net_describe(net, c_text, sizeof c_text);
  ntkd_net_free(net);
  ck_assert_msg(strstr(c_text, "W_std=1.4142135623730951") && strstr(c_text, "W_std=1.5"), "%s", c_text);
  kernels(arch, x, n, 1, shape, NULL, 0, 2, 3, NTKD_NNGP | NTKD_NTK, c_g, c_t);
  char dir[64];
  int entered = enter_comma_locale(dir, sizeof dir);
  unsetenv("LOCPATH"); /* read when the locale was loaded; no later test's */
  /* scripts/install-deps.sh installs Debian's locales (localedef's sources) */
  ck_assert_msg(entered, "no de_DE locale, and localedef could not make one: run scripts/install-deps.sh");
  ck_assert_str_eq(localeconv()->decimal_point, ",");
  net = net_of(arch);
  ntkd_net_describe(net, de_text, sizeof de_text);
  ntkd_net_free(net);
  ck_assert_str_eq(de_text, c_text);
  kernels(arch, x, n, 1, shape, NULL, 0, 2, 3, NTKD_NNGP | NTKD_NTK, de_g, de_t);
  ck_assert_msg(!memcmp(de_g, c_g, sizeof c_g) && !memcmp(de_t, c_t, sizeof c_t), "kernels differ under de_DE");
  ck_assert_str_eq(localeconv()->decimal_point, ","); /* the caller's locale given back */
  setlocale(LC_ALL, "C");
  if (dir[0]) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
  }
  free(x);
}
END_TEST

/* For an FC network and a pooled CNN: K(x1, x2) is the x1 x x2 block of
 * K([x1; x2]), and every way of computing gives the same bits. */
static void block_consistency(const char *arch, int ndim, const size_t *shape) {
  size_t d = shape[0] * (ndim > 1 ? shape[1] : 1) * (ndim > 2 ? shape[2] : 1), n1 = 13, n2 = 9, n = n1 + n2;
  double *x = grid_data(n, d, 5);
  double *full_g = malloc(n * n * sizeof(double)), *full_t = malloc(n * n * sizeof(double));
  double *blk_g = malloc(n1 * n2 * sizeof(double)), *blk_t = malloc(n1 * n2 * sizeof(double));
  double *other = malloc(n * n * sizeof(double));
  kernels(arch, x, n, ndim, shape, NULL, 0, 2, 4, NTKD_NNGP | NTKD_NTK, full_g, full_t);
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < n; j++) {
      ck_assert(isfinite(full_g[i * n + j]) && isfinite(full_t[i * n + j]));
      ck_assert_msg(full_g[i * n + j] == full_g[j * n + i], "%s: not symmetric at (%zu, %zu)", arch, i, j);
    }
  kernels(arch, x, n1, ndim, shape, x + n1 * d, n2, 3, 5, NTKD_NNGP | NTKD_NTK, blk_g, blk_t);
  for (size_t i = 0; i < n1; i++)
    for (size_t j = 0; j < n2; j++) {
      ck_assert_msg(blk_g[i * n2 + j] == full_g[i * n + n1 + j], "%s: NNGP block (%zu, %zu)", arch, i, j);
      ck_assert_msg(blk_t[i * n2 + j] == full_t[i * n + n1 + j], "%s: NTK block (%zu, %zu)", arch, i, j);
    }
  /* One thread and another tile: the same bits; NNGP alone: the same NNGP. */
  kernels(arch, x, n, ndim, shape, NULL, 0, 1, 7, NTKD_NNGP, other, NULL);
  ck_assert_msg(!memcmp(other, full_g, n * n * sizeof(double)), "%s: NNGP differs with 1 thread, tile 7", arch);
  kernels(arch, x, n, ndim, shape, NULL, 0, 4, 32, NTKD_NTK, NULL, other);
  ck_assert_msg(!memcmp(other, full_t, n * n * sizeof(double)), "%s: NTK differs with 4 threads, one tile", arch);
  free(x), free(full_g), free(full_t), free(blk_g), free(blk_t), free(other);
}

START_TEST(test_fc_blocks) {
  size_t shape[1] = {6};
  block_consistency("Dense(W_std=1.5, b_std=0.1) Relu Dense(W_std=1.5) Erf Dense", 1, shape);
}
END_TEST

START_TEST(test_cnn_blocks) {
  size_t shape[3] = {4, 4, 2};
  block_consistency("Conv(8, (3, 3), padding='SAME', W_std=1.4) Relu AvgPool((2, 2)) Conv(8, (2, 2)) Relu "
                    "GlobalAvgPool Dense",
                    3, shape);
  size_t seq[2] = {5, 3}; /* 1-D: (length, channels) */
  block_consistency("Conv(4, (3,), padding='SAME') Relu Flatten Dense", 2, seq);
}
END_TEST

/* The copy of tiles into the result (src/lib/ntkd.c, put_tile: transposed in
 * 32 x 32 blocks): tiles of 45 and 70 cut across those blocks, raggedly; the
 * tiled results, mirrored and against x2, must be the bits of one tile. */
START_TEST(test_tile_copy_blocks) {
  const char *arch = "Dense(W_std=1.5, b_std=0.1) Relu Dense";
  size_t shape[1] = {5}, d = 5, n = 101, n1 = 64, n2 = n - n1;
  double *x = grid_data(n, d, 3);
  double *one_g = malloc(n * n * sizeof(double)), *one_t = malloc(n * n * sizeof(double));
  double *g = malloc(n * n * sizeof(double)), *t = malloc(n * n * sizeof(double));
  kernels(arch, x, n, 1, shape, NULL, 0, 1, 128, NTKD_NNGP | NTKD_NTK, one_g, one_t); /* one tile: no mirror */
  for (size_t tile = 45; tile <= 70; tile += 25) {
    kernels(arch, x, n, 1, shape, NULL, 0, 2, tile, NTKD_NNGP | NTKD_NTK, g, t);
    ck_assert_msg(!memcmp(g, one_g, n * n * sizeof(double)), "NNGP with tile %zu differs from one tile", tile);
    ck_assert_msg(!memcmp(t, one_t, n * n * sizeof(double)), "NTK with tile %zu differs from one tile", tile);
    kernels(arch, x, n1, 1, shape, x + n1 * d, n2, 2, tile, NTKD_NNGP | NTKD_NTK, g, t); /* n1 x n2 */
    for (size_t i = 0; i < n1; i++)
      for (size_t j = 0; j < n2; j++) {
        ck_assert_msg(g[i * n2 + j] == one_g[i * n + n1 + j], "NNGP (%zu, %zu) against x2, tile %zu", i, j, tile);
        ck_assert_msg(t[i * n2 + j] == one_t[i * n + n1 + j], "NTK (%zu, %zu) against x2, tile %zu", i, j, tile);
      }
  }
  free(x), free(one_g), free(one_t), free(g), free(t);
}
END_TEST

static int stop_at_first(void *arg, uint64_t done, uint64_t total) {
  int *calls = arg;
  ++*calls;
  ck_assert_uint_le(done, total);
  return 1;
}

struct seen {
  uint64_t last, total;
  int calls;
};
static int watch(void *arg, uint64_t done, uint64_t total) {
  struct seen *s = arg;
  ck_assert_uint_ge(done, s->last);
  s->last = done;
  s->total = total;
  s->calls++;
  return 0;
}

START_TEST(test_progress_and_cancel) {
  size_t n = 64, d = 8;
  double *x = grid_data(n, d, 9), *k = malloc(n * n * sizeof *k);
  ntkd_net *net = net_of("[Dense Erf]*50 Dense");
  ntkd_data a = {x, n, 1, {d, 0, 0}, NTKD_FLOAT64};
  ntkd_compute_options o;
  ntkd_compute_options_init(&o);
  o.tile = 4;
  o.threads = 2;
  struct seen s = {0, 0, 0};
  o.progress = watch;
  o.progress_arg = &s;
  ck_assert_int_eq(ntkd_kernels(net, &a, NULL, NTKD_NNGP, k, NULL, &o), NTKD_OK);
  ck_assert_int_ge(s.calls, 1);
  ck_assert_uint_eq(s.last, s.total); /* the last call says all is done */
  int calls = 0;
  o.progress = stop_at_first;
  o.progress_arg = &calls;
  ck_assert_int_eq(ntkd_kernels(net, &a, NULL, NTKD_NNGP, k, NULL, &o), NTKD_ERROR_CANCELLED);
  ck_assert_int_eq(calls, 2); /* the first, which stops; the last word, which says how far it got */
  volatile int cancel = 1;
  o.progress = NULL;
  o.cancel = &cancel;
  ck_assert_int_eq(ntkd_kernels(net, &a, NULL, NTKD_NNGP, k, NULL, &o), NTKD_ERROR_CANCELLED);
  ck_assert_ptr_nonnull(strstr(ntkd_last_error(), "cancelled"));
  /* stopped before any tile (the flag set already, seen while the 50
   * layers' variances are computed): the last word all the same (it had
   * no call at all) */
  struct seen before = {0, 0, 0};
  o.progress = watch;
  o.progress_arg = &before;
  ck_assert_int_eq(ntkd_kernels(net, &a, NULL, NTKD_NNGP, k, NULL, &o), NTKD_ERROR_CANCELLED);
  ck_assert_int_ge(before.calls, 1);
  ck_assert_uint_eq(before.total, s.total); /* the entries a finished call counted */
  ntkd_net_free(net);
  free(x);
  free(k);
}
END_TEST

/* "About ten times a second": many small tiles each woke the waiting
 * thread, which called progress every time (5 865 calls a second, each
 * holding Python's GIL from ntkd.stax; a helper's hunt). Counted against
 * the call's own duration, with room for the first and last words. */
static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

START_TEST(test_progress_about_ten_times_a_second) {
  size_t n = 600, d = 10;
  double *x = grid_data(n, d, 5), *k = malloc(n * n * sizeof *k);
  ntkd_net *net = net_of("[Dense(W_std=1.5, b_std=0.1) Relu]*3 Dense");
  ntkd_data a = {x, n, 1, {d, 0, 0}, NTKD_FLOAT64};
  ntkd_compute_options o;
  ntkd_compute_options_init(&o);
  o.tile = 8;
  o.threads = 2;
  o.device = NTKD_DEVICE_CPU;
  struct seen s = {0, 0, 0};
  o.progress = watch;
  o.progress_arg = &s;
  double t0 = seconds_now();
  ck_assert_int_eq(ntkd_kernels(net, &a, NULL, NTKD_NNGP, k, NULL, &o), NTKD_OK);
  double took = seconds_now() - t0;
  ck_assert_msg(s.calls <= 20.0 * took + 3, "%d progress calls in %.3f s", s.calls, took);
  ck_assert_uint_eq(s.last, s.total);
  ntkd_net_free(net);
  free(x);
  free(k);
}
END_TEST

/* Stopping inside a tile (issue 27): a single tile that takes seconds,
 * stopped at the first report of entries done inside it, by the cancel
 * flag or by the progress callback's answer. The call must return
 * NTKD_ERROR_CANCELLED having computed far fewer entries than the tile
 * holds (counted by the last progress call, not timed), and leave no
 * value in the outputs. One case per path of the kernels. */
struct stopper {
  volatile int cancel;
  int by_flag;          /* stop by setting cancel, else by returning non-zero */
  uint64_t first, last, total;
};

static int stop_when_counting(void *arg, uint64_t done, uint64_t total) {
  struct stopper *s = arg;
  s->last = done;
  s->total = total;
  if (!done || s->first) return 0;
  s->first = done;
  if (s->by_flag) s->cancel = 1;
  return !s->by_flag;
}

static const struct slow_case {
  const char *arch, *path;
  size_t n, shape[3];
  int ndim, standard;
} slow_cases[] = {
    /* 1.5-3 s of CPU each computed whole, one thread, on this project's 2-core VM (2026-12-04), yet
     * each call stops at the first report, 0.1 s in: the size costs nothing and keeps the first
     * report far inside the tile on a faster or busier machine. At a quarter of these sizes the
     * batched cases took 0.2 s whole, and a CI run under load saw its first report at 55 %. */
    {"[Dense Erf]*300 Dense", "FC, bands of rows per layer", 1024, {8, 0, 0}, 1, 0},
    {"[Conv(8, (3, 3), padding='SAME') Relu]*10 GlobalAvgPool Dense", "CNN batched, one slice run", 96, {8, 8, 3}, 3, 0},
    {"[Conv(8, (3, 3), padding='SAME') Relu]*10 GlobalAvgPool Dense", "CNN pair by pair (standard)", 64, {8, 8, 3}, 3, 1},
    {"[Conv(8, (3, 3), padding='SAME') Relu]*10 Flatten Dense", "CNN batched, same-position", 160, {32, 32, 3}, 3, 0},
    {"[Conv(8, (3, 3), padding='SAME') Relu]*10 Flatten Dense", "CNN pair by pair, same-position", 128, {32, 32, 3}, 3, 1},
    {"[Conv(8, (3, 3), padding='SAME') Relu]*2 AvgPool((2, 2)) [Conv(8, (3, 3), padding='SAME') Relu]*2 "
     "GlobalAvgPool Dense", "CNN batched, runs joined by pooling", 64, {12, 12, 3}, 3, 0},
    {"Conv(8, (3, 3), strides=(2, 2), padding='SAME') Relu [Conv(8, (3, 3), padding='SAME') Relu]*10 "
     "GlobalAvgPool Dense", "CNN pair by pair, a full covariance then slices", 64, {16, 16, 3}, 3, 1},
};

START_TEST(test_cancel_inside_a_tile) {
  const struct slow_case *c = &slow_cases[_i];
  size_t d = c->shape[0] * (c->ndim > 1 ? c->shape[1] : 1) * (c->ndim > 2 ? c->shape[2] : 1), n = c->n;
  double *x = grid_data(n, d, 3), *g = malloc(n * n * sizeof *g), *t = malloc(n * n * sizeof *t);
  for (size_t i = 0; i < n * n; i++) g[i] = t[i] = 1.0;
  ntkd_net_options no;
  ntkd_net_options_init(&no);
  no.parameterization = c->standard ? NTKD_PARAM_STANDARD : NTKD_PARAM_NTK;
  ntkd_net *net = NULL;
  ck_assert_msg(ntkd_net_create(c->arch, &no, &net) == NTKD_OK, "%s", ntkd_last_error());
  ntkd_data a = {x, n, c->ndim, {c->shape[0], c->shape[1], c->shape[2]}, NTKD_FLOAT64};
  struct stopper s = {0, (int)(_i % 2), 0, 0, 0};
  ntkd_compute_options o;
  ntkd_compute_options_init(&o);
  o.threads = 1;
  o.tile = n; /* one tile */
  o.progress = stop_when_counting;
  o.progress_arg = &s;
  o.cancel = &s.cancel;
  ntkd_status st = ntkd_kernels(net, &a, NULL, NTKD_NNGP | NTKD_NTK, g, t, &o);
  fprintf(stderr, "test_lib: %s (%s): stopped %s at %llu entries, returned with %llu of %llu computed\n", c->path,
          c->arch, s.by_flag ? "by the flag" : "by progress", (unsigned long long)s.first, (unsigned long long)s.last,
          (unsigned long long)s.total);
  ck_assert_msg(st == NTKD_ERROR_CANCELLED, "%s: %s (status %d: %s)", c->path, c->arch, st, ntkd_last_error());
  ck_assert_ptr_nonnull(strstr(ntkd_last_error(), "cancelled"));
  ck_assert_uint_eq(s.total, n * n);
  ck_assert_uint_gt(s.first, 0);
  ck_assert_uint_ge(s.last, s.first);
  /* What the stop promises, counted in entries rather than timed: it takes
   * effect soon after it is asked (a layer of one batch later), whenever the
   * first report comes, and the tile is not finished. */
  ck_assert_msg(s.last - s.first < s.total / 8, "%s: %llu entries computed after the stop at %llu (of %llu)", c->path,
                (unsigned long long)(s.last - s.first), (unsigned long long)s.first, (unsigned long long)s.total);
  ck_assert_msg(s.last < s.total / 2, "%s: %llu of %llu entries computed before the stop took effect", c->path,
                (unsigned long long)s.last, (unsigned long long)s.total);
  for (size_t i = 0; i < n * n; i++) ck_assert_msg(isnan(g[i]) && isnan(t[i]), "%s: entry %zu is a value", c->path, i);
  ntkd_net_free(net);
  free(x), free(g), free(t);
}
END_TEST

START_TEST(test_bad_arguments) {
  ntkd_net *net = net_of("Dense Relu Dense");
  double x[6] = {1, 2, 3, 4, 5, NAN}, k[9];
  ntkd_data a = {x, 3, 1, {2, 0, 0}, NTKD_FLOAT64};
  ck_assert_int_eq(ntkd_kernels(net, &a, NULL, NTKD_NNGP, k, NULL, NULL), NTKD_ERROR_INPUT);
  ck_assert_ptr_nonnull(strstr(ntkd_last_error(), "NaN"));
  x[5] = 6;
  ck_assert_int_eq(ntkd_kernels(net, &a, NULL, NTKD_NTK, k, NULL, NULL), NTKD_ERROR_USAGE); /* no NTK buffer */
  ck_assert_int_eq(ntkd_kernels(net, &a, NULL, 0, k, NULL, NULL), NTKD_ERROR_USAGE);
  ntkd_data b = a;
  b.dtype = NTKD_FLOAT32;
  ck_assert_int_eq(ntkd_kernels(net, &a, &b, NTKD_NNGP, k, NULL, NULL), NTKD_ERROR_USAGE);
  b = a;
  b.shape[0] = 3;
  ck_assert_int_eq(ntkd_kernels(net, &a, &b, NTKD_NNGP, k, NULL, NULL), NTKD_ERROR_USAGE);
  /* sizes whose byte counts wrap: refused before a value is read (the
   * data checked, copied and computed were those of the wrapped size) */
  ntkd_data huge = {x, ((size_t)1 << 62) + 1, 1, {2, 0, 0}, NTKD_FLOAT64}, one = {x, 1, 1, {2, 0, 0}, NTKD_FLOAT64};
  ck_assert_int_eq(ntkd_kernels(net, &huge, NULL, NTKD_NNGP, k, NULL, NULL), NTKD_ERROR_USAGE);
  ck_assert_int_eq(ntkd_kernels(net, &one, &huge, NTKD_NNGP, k, NULL, NULL), NTKD_ERROR_USAGE);
  huge.n = ((size_t)1 << 59) + 1; /* each array a size, [x1; x2] not */
  ntkd_data huge2 = huge;
  ck_assert_int_eq(ntkd_kernels(net, &huge, &huge2, NTKD_NNGP, k, NULL, NULL), NTKD_ERROR_USAGE);
  ck_assert_ptr_nonnull(strstr(ntkd_last_error(), "together"));
  huge.n = (size_t)1 << 31; /* the data a size, the n1 x n1 output not */
  ck_assert_int_eq(ntkd_kernels(net, &huge, NULL, NTKD_NNGP, k, NULL, NULL), NTKD_ERROR_USAGE);
  ck_assert_ptr_nonnull(strstr(ntkd_last_error(), "output"));
  /* a thread count past the tiles (options not made by the init function)
   * allocated and filled 16 bytes per thread asked for: 16 GB here */
  ntkd_compute_options many;
  ntkd_compute_options_init(&many);
  many.threads = 1 << 30;
  ck_assert_int_eq(ntkd_kernels(net, &one, NULL, NTKD_NNGP, k, NULL, &many), NTKD_OK);
  a.ndim = 4;
  ck_assert_int_eq(ntkd_kernels(net, &a, NULL, NTKD_NNGP, k, NULL, NULL), NTKD_ERROR_USAGE);
  ck_assert_int_eq(ntkd_kernels(NULL, &a, NULL, NTKD_NNGP, k, NULL, NULL), NTKD_ERROR_USAGE);
  ntkd_store *s = (ntkd_store *)1;
  ck_assert_int_eq(ntkd_store_open("/nonexistent/x.ntk", &s), NTKD_ERROR_USAGE);
  ck_assert_ptr_null(s);
  ntkd_store_close(NULL);
  ntkd_net_free(net);
}
END_TEST

/* A sample shape whose h w c wraps around size_t, each dimension in range:
 * (1229673, 3935371, 7623851) wrapped to 1 value per sample, and an FC
 * network returned NTKD_OK over the kernel of 1-value samples (a helper's
 * hunt); (2^32, 2^32) wrapped to 0. */
START_TEST(test_shapes_that_wrap) {
  ntkd_net *net = net_of("Dense Relu Dense");
  double x[4] = {1, 2, 3, 4}, k[4];
  ntkd_data img = {x, 2, 3, {1229673, 3935371, 7623851}, NTKD_FLOAT64};
  ck_assert_int_eq(ntkd_kernels(net, &img, NULL, NTKD_NNGP, k, NULL, NULL), NTKD_ERROR_USAGE);
  ck_assert_ptr_nonnull(strstr(ntkd_last_error(), "more than 2^32 values per sample"));
  ntkd_data seq = {x, 2, 2, {(size_t)1 << 32, (size_t)1 << 32, 0}, NTKD_FLOAT64};
  ck_assert_int_eq(ntkd_kernels(net, &seq, NULL, NTKD_NNGP, k, NULL, NULL), NTKD_ERROR_USAGE);
  ntkd_net_free(net);
}
END_TEST

/* An output sharing bytes with the samples of x1 against itself: the
 * engines read x1 in place while finished tiles are written, so later
 * tiles read kernel values as data (510 of 576 entries wrong, NTKD_OK).
 * Refused, as two outputs over each other. Against x2 the samples are
 * copied first: an output over them computes the same values. */
START_TEST(test_overlapping_buffers_refused) {
  enum { N = 24 };
  ntkd_net *net = net_of("Dense(W_std=1.5, b_std=0.1) Relu Dense");
  double *x = grid_data(N, N, 9), *both = malloc(2 * N * N * sizeof *both), *k = malloc(N * N * sizeof *k);
  ntkd_data a = {both, N, 1, {N, 0, 0}, NTKD_FLOAT64};
  ntkd_compute_options o;
  ntkd_compute_options_init(&o);
  o.tile = 4;
  memcpy(both, x, N * N * sizeof *x);
  ck_assert_int_eq(ntkd_kernels(net, &a, NULL, NTKD_NNGP, both, NULL, &o), NTKD_ERROR_USAGE);
  ck_assert_msg(strstr(ntkd_last_error(), "nngp output overlaps x1"), "%s", ntkd_last_error());
  ck_assert_msg(!memcmp(both, x, N * N * sizeof *x), "the samples were written over"); /* refused before */
  ck_assert_int_eq(ntkd_kernels(net, &a, NULL, NTKD_NTK | NTKD_NNGP, k, both + N * N - 1, &o), NTKD_ERROR_USAGE);
  ck_assert_msg(strstr(ntkd_last_error(), "ntk output overlaps x1"), "%s", ntkd_last_error());
  ntkd_data b = {x, N, 1, {N, 0, 0}, NTKD_FLOAT64};
  double *want = malloc(N * N * sizeof *want);
  ck_assert_int_eq(ntkd_kernels(net, &b, &a, NTKD_NNGP, want, NULL, &o), NTKD_OK);
  ck_assert_int_eq(ntkd_kernels(net, &b, &a, NTKD_NNGP, both, NULL, &o), NTKD_OK); /* over x2 */
  ck_assert_msg(!memcmp(both, want, N * N * sizeof *want), "an output over x2 differs");
  memcpy(both, x, N * N * sizeof *x);
  ck_assert_int_eq(ntkd_kernels(net, &b, NULL, NTKD_NNGP | NTKD_NTK, k, k + 1, &o), NTKD_ERROR_USAGE);
  ck_assert_msg(strstr(ntkd_last_error(), "nngp and ntk outputs overlap"), "%s", ntkd_last_error());
  /* an output not asked for may be anything; the one asked for, beside the data, computes */
  ck_assert_int_eq(ntkd_kernels(net, &a, NULL, NTKD_NNGP, both + N * N, both, &o), NTKD_OK);
  ck_assert_str_eq(ntkd_last_error(), ""); /* a success leaves no message (a GPU looked for, say) */
  kernels("Dense(W_std=1.5, b_std=0.1) Relu Dense", x, N, 1, (size_t[]){N}, NULL, 0, 2, 4, NTKD_NNGP, k, NULL);
  ck_assert_msg(!memcmp(both + N * N, k, N * N * sizeof *k), "the kernel beside its data differs");
  free(x), free(both), free(k), free(want);
  ntkd_net_free(net);
}
END_TEST

/* OpenBLAS's thread count is the process's. Two overlapping calls from two
 * threads, ordered by their progress callbacks (A starts, B starts, A
 * returns, B returns): B saved A's 1 and gave it back last, the host's
 * OpenBLAS single-threaded for good, and B computed with the host's count
 * put back under it by A (a helper's hunt). */
extern int openblas_get_num_threads(void);
extern void openblas_set_num_threads(int);
static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t order_cv = PTHREAD_COND_INITIALIZER;
static int a_in, b_in, a_out, b_saw = -1;

static void wait_flag(int *flag) {
  pthread_mutex_lock(&order_mu);
  while (!*flag) pthread_cond_wait(&order_cv, &order_mu);
  pthread_mutex_unlock(&order_mu);
}

static void set_flag(int *flag) {
  pthread_mutex_lock(&order_mu);
  *flag = 1;
  pthread_cond_broadcast(&order_cv);
  pthread_mutex_unlock(&order_mu);
}

static int progress_a(void *arg, uint64_t done, uint64_t total) {
  (void)arg, (void)done, (void)total;
  if (!a_in) set_flag(&a_in), wait_flag(&b_in);
  return 0;
}

static int progress_b(void *arg, uint64_t done, uint64_t total) {
  (void)arg, (void)done, (void)total;
  if (!b_in) set_flag(&b_in), wait_flag(&a_out), b_saw = openblas_get_num_threads();
  return 0;
}

static ntkd_net *overlap_net;

static void *overlapping_call(void *progress) {
  double x[8 * 4], k[64];
  for (int i = 0; i < 32; i++) x[i] = ((i * 7) % 11 - 5) / 4.0;
  ntkd_data a = {x, 8, 1, {4, 0, 0}, NTKD_FLOAT64};
  ntkd_compute_options o;
  ntkd_compute_options_init(&o);
  o.threads = 1;
  o.progress = (ntkd_progress_fn)progress;
  return (void *)(intptr_t)ntkd_kernels(overlap_net, &a, NULL, NTKD_NNGP, k, NULL, &o);
}

START_TEST(test_overlapping_calls_keep_blas_threads) {
  overlap_net = net_of("Dense Relu Dense");
  int host = openblas_get_num_threads();
  openblas_set_num_threads(3);
  pthread_t ta, tb;
  void *ra, *rb;
  ck_assert_int_eq(pthread_create(&ta, NULL, overlapping_call, (void *)progress_a), 0);
  wait_flag(&a_in);
  ck_assert_int_eq(pthread_create(&tb, NULL, overlapping_call, (void *)progress_b), 0);
  pthread_join(ta, &ra);
  set_flag(&a_out);
  pthread_join(tb, &rb);
  ck_assert_int_eq((int)(intptr_t)ra, NTKD_OK);
  ck_assert_int_eq((int)(intptr_t)rb, NTKD_OK);
  ck_assert_int_eq(b_saw, 1);                         /* B's tiles on one OpenBLAS thread, A returned or not */
  ck_assert_int_eq(openblas_get_num_threads(), 3);    /* the host's count back */
  openblas_set_num_threads(host);
  ntkd_net_free(overlap_net);
}
END_TEST

/* fork() while a call computes in another thread: the child has no call
 * of its own running, and after its first call returns OpenBLAS has the
 * host's count again (it kept the parent's count of calls, and 1 thread
 * for good; a helper's hunt). */
static int hold_for_fork(void *arg, uint64_t done, uint64_t total) {
  (void)arg, (void)done, (void)total;
  if (!a_in) set_flag(&a_in), wait_flag(&a_out);
  return 0;
}

START_TEST(test_fork_during_a_call_gives_the_child_its_threads) {
  overlap_net = net_of("Dense Relu Dense");
  int host = openblas_get_num_threads();
  openblas_set_num_threads(3);
  pthread_t ta;
  void *ra;
  a_in = a_out = 0;
  ck_assert_int_eq(pthread_create(&ta, NULL, overlapping_call, (void *)hold_for_fork), 0);
  wait_flag(&a_in); /* the call is computing (OpenBLAS at 1) */
  pid_t child = fork();
  if (child == 0) {
    alarm(60);
    double x[8 * 4], k[64];
    for (int i = 0; i < 32; i++) x[i] = (i % 5) - 2.0;
    ntkd_data a = {x, 8, 1, {4, 0, 0}, NTKD_FLOAT64};
    int st = ntkd_kernels(overlap_net, &a, NULL, NTKD_NNGP, k, NULL, NULL);
    _exit(st != NTKD_OK ? 2 : openblas_get_num_threads() != 3 ? 3 : 0);
  }
  ck_assert_int_gt(child, 0);
  int status = 0;
  ck_assert_int_eq(waitpid(child, &status, 0), child);
  set_flag(&a_out);
  pthread_join(ta, &ra);
  ck_assert_int_eq((int)(intptr_t)ra, NTKD_OK);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "the forked child: %s %d (2: its call failed, 3: OpenBLAS not at the host's 3 threads after it)",
                WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  ck_assert_int_eq(openblas_get_num_threads(), 3);
  openblas_set_num_threads(host);
  ntkd_net_free(overlap_net);
}
END_TEST

/* fork() from the call's own progress callback (its first word, before
 * any tile): the child goes on with that call, so its count of calls is
 * 1, not 0 (which the call's end took to -1: OpenBLAS at 1 thread in the
 * child for good; the review). */
static pid_t callback_child;
static int fork_at_first_word(void *arg, uint64_t done, uint64_t total) {
  (void)arg, (void)done, (void)total;
  if (!callback_child) callback_child = fork(); /* the child sees 0 and forks no more: it is child 0 */
  if (callback_child == 0) callback_child = -1;  /* (in the child) */
  return 0;
}

START_TEST(test_fork_in_a_callback_keeps_the_call_counted) {
  double x[16 * 4], k[256];
  for (int i = 0; i < 64; i++) x[i] = (i % 7) - 3.0;
  ntkd_net *net = net_of("Dense Relu Dense");
  ntkd_data a = {x, 16, 1, {4, 0, 0}, NTKD_FLOAT64};
  int host = openblas_get_num_threads();
  openblas_set_num_threads(3);
  ntkd_compute_options o;
  ntkd_compute_options_init(&o);
  o.threads = 2;
  o.tile = 4;
  o.device = NTKD_DEVICE_CPU;
  o.progress = fork_at_first_word;
  callback_child = 0;
  int st = ntkd_kernels(net, &a, NULL, NTKD_NNGP, k, NULL, &o);
  int after = openblas_get_num_threads();
  int st2 = ntkd_kernels(net, &a, NULL, NTKD_NNGP, k, NULL, NULL);
  int after2 = openblas_get_num_threads();
  if (callback_child == -1) /* the child: both calls done, the host's 3 back after each */
    _exit(st != NTKD_OK || st2 != NTKD_OK ? 2 : after != 3 || after2 != 3 ? 3 : 0);
  ck_assert_int_gt(callback_child, 0);
  int status = 0;
  ck_assert_int_eq(waitpid(callback_child, &status, 0), callback_child);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "the child forked in the callback: %s %d (2: a call failed, 3: OpenBLAS not at the host's 3 after it)",
                WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  ck_assert_int_eq(st, NTKD_OK);
  ck_assert_int_eq(after, 3);
  ck_assert_int_eq(after2, 3);
  openblas_set_num_threads(host);
  ntkd_net_free(net);
}
END_TEST

/* ntkd_net_describe keeps snprintf's contract whatever the cap: a first
 * layer that did not fit left the caller's old bytes before the NUL. */
START_TEST(test_describe_truncates_as_snprintf) {
  ntkd_net *net = net_of("Dense(W_std=1.5, b_std=0.1) Relu Dense");
  char full[256], buf[16];
  size_t len = ntkd_net_describe(net, full, sizeof full);
  ck_assert_uint_eq(len, strlen(full));
  for (size_t cap = 0; cap <= sizeof buf; cap++) {
    memset(buf, 'X', sizeof buf);
    ck_assert_uint_eq(ntkd_net_describe(net, buf, cap), len);
    if (!cap) ck_assert_int_eq(buf[0], 'X'); /* nothing written */
    else ck_assert_msg(strlen(buf) == cap - 1 && !strncmp(buf, full, cap - 1), "cap %zu: '%s'", cap, buf);
  }
  ntkd_net_free(net);
}
END_TEST

/* ntkd_kernels_graph: each sample's V x V pattern. An identity pattern
 * gives the network without its Aggregate (to rounding: that network is
 * computed on another path); against x2, the joined set's entries bit for
 * bit; the arguments' checks. */
START_TEST(test_graph_kernels) {
  enum { N = 4, M = 3, L = 5, C = 2, V = L };
  double *x = grid_data(N, L * C, 3), *x2 = grid_data(M, L * C, 4), p[N * V * V] = {0}, p2[M * V * V] = {0};
  for (size_t i = 0; i < N; i++)
    for (size_t v = 0; v < V; v++) p[i * V * V + v * V + v] = 1;
  for (size_t i = 0; i < M * V * V; i++) p2[i] = (double)((i * 7) % 5 == 0); /* some edges */
  ntkd_net *g = net_of("Dense(W_std=1.3, b_std=0.1) Relu Aggregate Dense(W_std=1.2) Relu GlobalAvgPool Dense");
  ntkd_net *f = net_of("Dense(W_std=1.3, b_std=0.1) Relu Dense(W_std=1.2) Relu GlobalAvgPool Dense");
  ntkd_data a = {x, N, 2, {L, C, 0}, NTKD_FLOAT64}, b = {x2, M, 2, {L, C, 0}, NTKD_FLOAT64};
  double kg[N * N], kt[N * N], fg[N * N], ft[N * N], cross[M * N], cross_t[M * N];
  ck_assert_msg(ntkd_kernels_graph(g, &a, p, NULL, NULL, 0, NTKD_NNGP | NTKD_NTK, kg, kt, NULL) == NTKD_OK, "%s",
                ntkd_last_error());
  ck_assert_int_eq(ntkd_kernels(f, &a, NULL, NTKD_NNGP | NTKD_NTK, fg, ft, NULL), NTKD_OK);
  for (size_t i = 0; i < N * N; i++)
    ck_assert_msg(fabs(kg[i] - fg[i]) <= 1e-14 * fabs(fg[i]) && fabs(kt[i] - ft[i]) <= 1e-14 * fabs(ft[i]),
                  "entry %zu: %.17g %.17g, %.17g %.17g", i, kg[i], fg[i], kt[i], ft[i]);
  /* against x2: the same entries as the joined set's (x2's pattern its own) */
  ck_assert_int_eq(ntkd_kernels_graph(g, &a, p, &b, p2, 0, NTKD_NNGP | NTKD_NTK, cross, cross_t, NULL), NTKD_OK);
  double xx[(N + M) * L * C], pp[(N + M) * V * V], all[(N + M) * (N + M)], all_t[(N + M) * (N + M)];
  memcpy(xx, x, sizeof(double) * N * L * C);
  memcpy(xx + N * L * C, x2, sizeof(double) * M * L * C);
  memcpy(pp, p, sizeof p);
  memcpy(pp + N * V * V, p2, sizeof p2);
  ntkd_data both = {xx, N + M, 2, {L, C, 0}, NTKD_FLOAT64};
  ck_assert_int_eq(ntkd_kernels_graph(g, &both, pp, NULL, NULL, 0, NTKD_NNGP | NTKD_NTK, all, all_t, NULL), NTKD_OK);
  for (size_t i = 0; i < N; i++)
    for (size_t j = 0; j < M; j++) {
      ck_assert(cross[i * M + j] == all[(N + j) * (N + M) + i]);
      ck_assert(cross_t[i * M + j] == all_t[(N + j) * (N + M) + i]);
    }
  ck_assert(cross[0 * M + 1] != fg[0]); /* the edges changed something */
  /* the checks */
  ck_assert_int_eq(ntkd_kernels_graph(g, &a, NULL, NULL, NULL, 0, NTKD_NNGP, kg, NULL, NULL), NTKD_ERROR_USAGE);
  ck_assert_int_eq(ntkd_kernels_graph(g, &a, p, &b, NULL, 0, NTKD_NNGP, cross, NULL, NULL), NTKD_ERROR_USAGE);
  ck_assert_int_eq(ntkd_kernels_graph(g, &a, p, NULL, p2, 0, NTKD_NNGP, kg, NULL, NULL), NTKD_ERROR_USAGE);
  ck_assert_int_eq(ntkd_kernels(g, &a, NULL, NTKD_NNGP, kg, NULL, NULL), NTKD_ERROR_ARCH);
  ck_assert_ptr_nonnull(strstr(ntkd_last_error(), "need each sample's pattern"));
  ck_assert_int_eq(ntkd_kernels_graph(f, &a, p, NULL, NULL, 0, NTKD_NNGP, kg, NULL, NULL), NTKD_ERROR_ARCH);
  ck_assert_ptr_nonnull(strstr(ntkd_last_error(), "no Aggregate layer"));
  /* positions: the pattern's V, which the network's plan checks against what its Aggregates see */
  ck_assert_int_eq(ntkd_kernels_graph(g, &a, p, NULL, NULL, 4, NTKD_NNGP, kg, NULL, NULL), NTKD_ERROR_ARCH);
  ck_assert_ptr_nonnull(strstr(ntkd_last_error(), "the pattern has 16 values per sample and the network's Aggregate "
                                                  "layers see 5 positions"));
  ck_assert_int_eq(ntkd_kernels_graph(g, &a, p, NULL, NULL, 65537, NTKD_NNGP, kg, NULL, NULL), NTKD_ERROR_USAGE);
  ck_assert_int_eq(ntkd_kernels_graph(g, &a, p, NULL, NULL, 5, NTKD_NNGP, kg, NULL, NULL), NTKD_OK);
  ntkd_data flat = {x, N, 1, {L * C, 0, 0}, NTKD_FLOAT64};
  ck_assert_int_eq(ntkd_kernels_graph(g, &flat, p, NULL, NULL, 0, NTKD_NNGP, kg, NULL, NULL), NTKD_ERROR_USAGE);
  p[N * V * V - 1] = INFINITY;
  ck_assert_int_eq(ntkd_kernels_graph(g, &a, p, NULL, NULL, 0, NTKD_NNGP, kg, NULL, NULL), NTKD_ERROR_INPUT);
  ck_assert_ptr_nonnull(strstr(ntkd_last_error(), "pattern1: value 24 of sample 3's pattern is inf"));
  ntkd_net_free(g);
  ntkd_net_free(f);
  free(x);
  free(x2);
}
END_TEST

/* A leading dimension whose byte offsets wrap: the second row of a block
 * read with ld = SIZE_MAX / 4 (float64) went to out - 8, before the
 * caller's buffer, and the read returned NTKD_OK. */
START_TEST(test_store_read_ld_wraps) {
  const char *store_path = getenv("NTKD_TEST_STORE");
  ck_assert_msg(store_path && *store_path, "NTKD_TEST_STORE: a finished store (tests/lib_store.sh)");
  ntkd_store *s;
  ck_assert_int_eq(ntkd_store_open(store_path, &s), NTKD_OK);
  ntkd_store_info info;
  ck_assert_int_eq(ntkd_store_get_info(s, &info), NTKD_OK);
  double buf[4] = {7, 7, 7, 7};
  size_t wraps = SIZE_MAX / (size_t)info.dtype + 1; /* (ld * dtype) wraps to 0 */
  ck_assert_int_eq(ntkd_store_read(s, NTKD_NNGP, 0, 2, 0, 1, buf + 2, wraps - 1), NTKD_ERROR_USAGE);
  ck_assert_msg(buf[0] == 7 && buf[1] == 7 && buf[3] == 7, "written outside the block: %g %g %g", buf[0], buf[1], buf[3]);
  ck_assert_int_eq(ntkd_store_read(s, NTKD_NNGP, 0, 2, 0, 1, buf, 2), NTKD_OK); /* a true ld still reads */
  ntkd_store_close(s);
}
END_TEST

/* Bytes malloc holds for the program now (every arena, mmapped chunks
 * too); 0 where glibc's mallinfo2 is not there. */
static size_t heap_in_use(void) {
#ifdef __GLIBC__
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
#else
  return 0;
#endif
}

/* One round of every kind of call (issue 27: "1 000 calls in a loop leak
 * nothing"): networks made and freed, blocks of an FC and a CNN network
 * with both kernels, errors (an architecture ntkd cannot read, shapes that
 * disagree, a cancelled call, a store that is not there) and a store
 * opened, read and closed. */
static void one_round(const char *store_path, const double *x, const double *img) {
  double g[64], t[64];
  ntkd_net *fc = NULL, *cnn = NULL, *bad = (ntkd_net *)1;
  ck_assert_int_eq(ntkd_net_create("Dense(W_std=1.5, b_std=0.1) Erf Dense", NULL, &fc), NTKD_OK);
  ck_assert_int_eq(ntkd_net_create("Conv(4, (3, 3), padding='SAME') Relu GlobalAvgPool Dense", NULL, &cnn), NTKD_OK);
  ntkd_compute_options o;
  ntkd_compute_options_init(&o);
  o.threads = 2;
  o.tile = 2;
  ntkd_data a = {x, 5, 1, {4, 0, 0}, NTKD_FLOAT64}, b = {x + 20, 3, 1, {4, 0, 0}, NTKD_FLOAT64};
  ck_assert_int_eq(ntkd_kernels(fc, &a, NULL, NTKD_NNGP | NTKD_NTK, g, t, &o), NTKD_OK);
  ck_assert_int_eq(ntkd_kernels(fc, &a, &b, NTKD_NNGP | NTKD_NTK, g, t, &o), NTKD_OK);
  ntkd_data im = {img, 3, 3, {4, 4, 2}, NTKD_FLOAT64};
  ck_assert_int_eq(ntkd_kernels(cnn, &im, NULL, NTKD_NNGP | NTKD_NTK, g, t, &o), NTKD_OK);
  /* errors */
  ck_assert_int_eq(ntkd_net_create("Dense Relu Relu(", NULL, &bad), NTKD_ERROR_ARCH);
  ck_assert_int_eq(ntkd_kernels(cnn, &a, NULL, NTKD_NNGP, g, NULL, &o), NTKD_ERROR_ARCH); /* vectors into a CNN */
  b.shape[0] = 3;
  ck_assert_int_eq(ntkd_kernels(fc, &a, &b, NTKD_NNGP, g, NULL, &o), NTKD_ERROR_USAGE);
  volatile int cancel = 1;
  o.cancel = &cancel;
  ck_assert_int_eq(ntkd_kernels(fc, &a, NULL, NTKD_NNGP | NTKD_NTK, g, t, &o), NTKD_ERROR_CANCELLED);
  o.cancel = NULL;
  int calls = 0;
  o.progress = stop_at_first;
  o.progress_arg = &calls;
  ck_assert_int_eq(ntkd_kernels(cnn, &im, NULL, NTKD_NTK, NULL, t, &o), NTKD_ERROR_CANCELLED);
  ntkd_store *s = (ntkd_store *)1;
  ck_assert_int_eq(ntkd_store_open("/nonexistent/x.ntk", &s), NTKD_ERROR_USAGE);
  /* a store */
  ck_assert_int_eq(ntkd_store_open(store_path, &s), NTKD_OK);
  ntkd_store_info info;
  ck_assert_int_eq(ntkd_store_get_info(s, &info), NTKD_OK);
  ck_assert_uint_ge(info.n, 8);
  ck_assert_int_eq(ntkd_store_read(s, NTKD_NTK, 0, 8, 0, 8, g, 8), NTKD_OK);
  ck_assert_int_eq(ntkd_store_read(s, NTKD_NNGP, 2, 5, 1, 4, t, 3), NTKD_OK);
  ntkd_store_close(s);
  ntkd_net_free(fc);
  ntkd_net_free(cnn);
}

/* The rounds: LeakSanitizer (scripts/test-sanitize.sh runs this under
 * ASan) and valgrind (scripts/leak-check.sh) fail on anything a round
 * leaks. In the plain build, malloc's bytes in use must not grow between
 * round 100 and the last (NTKD_TEST_ROUNDS, default 1000) by more than a
 * few bytes a round. */
START_TEST(test_calls_in_a_loop_leak_nothing) {
  const char *store_path = getenv("NTKD_TEST_STORE");
  ck_assert_msg(store_path && *store_path, "NTKD_TEST_STORE: a finished store of at least 8 samples (ctest makes one "
                "with tests/lib_store.sh)");
  int rounds = getenv("NTKD_TEST_ROUNDS") ? atoi(getenv("NTKD_TEST_ROUNDS")) : 1000;
  double *x = grid_data(8, 4, 11), *img = grid_data(3, 32, 12);
  size_t warm = 0;
  for (int r = 0; r < rounds; r++) {
    if (r == 100) warm = heap_in_use();
    one_round(store_path, x, img);
  }
  size_t end = heap_in_use();
  fprintf(stderr, "test_lib: %d rounds; malloc's bytes in use after round 100: %zu, after the last: %zu\n", rounds,
          warm, end);
  if (rounds > 100) ck_assert_msg(end <= warm + 4096, "%zu bytes more in use after round %d than after round 100", end - warm,
                                  rounds);
  free(x);
  free(img);
}
END_TEST

int main(void) {
  Suite *s = suite_create("lib");
  TCase *tc = tcase_create("lib");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_net_errors);
  tcase_add_test(tc, test_fc_blocks);
  tcase_add_test(tc, test_cnn_blocks);
  tcase_add_test(tc, test_tile_copy_blocks);
  tcase_add_test(tc, test_progress_and_cancel);
  tcase_add_test(tc, test_progress_about_ten_times_a_second);
  tcase_add_test(tc, test_bad_arguments);
  tcase_add_test(tc, test_graph_kernels);
  tcase_add_test(tc, test_store_read_ld_wraps);
  tcase_add_test(tc, test_host_locale_changes_no_number);
  tcase_add_test(tc, test_shapes_that_wrap);
  tcase_add_test(tc, test_overlapping_buffers_refused);
  tcase_add_test(tc, test_overlapping_calls_keep_blas_threads);
  tcase_add_test(tc, test_fork_during_a_call_gives_the_child_its_threads);
  tcase_add_test(tc, test_fork_in_a_callback_keeps_the_call_counted);
  tcase_add_test(tc, test_describe_truncates_as_snprintf);
  tcase_add_loop_test(tc, test_cancel_inside_a_tile, 0, (int)(sizeof slow_cases / sizeof *slow_cases));
  suite_add_tcase(s, tc);
  /* Its own case, so that scripts/leak-check.sh can run it alone
   * (CK_RUN_CASE=leak) under valgrind. */
  TCase *leak = tcase_create("leak");
  tcase_set_timeout(leak, 1800);
  tcase_add_test(leak, test_calls_in_a_loop_leak_nothing);
  suite_add_tcase(s, leak);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
