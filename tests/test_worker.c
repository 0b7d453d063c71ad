/* The worker engine without MPI, over a fake backend (an emulated device:
 * its compute_tile is whatever the test makes it):
 *  - the pipeline overlaps: compute_tile of tile k + 1 waits until the
 *    check and compression of tile k has started, and that compression
 *    (the engine's test hook) waits until compute_tile of tile k + 1 has
 *    started; each wait gives up after a timeout, which fails the test. An
 *    engine that compresses a tile before computing the next (no pipeline)
 *    fails it;
 *  - the pipelined engine gives the serial engine's payload bytes and
 *    checksums, tile for tile, and they decode to the backend's values;
 *  - a non-finite value is NTK_ENONFINITE for its tile (global row and
 *    column), in the pipeline as in the serial engine, and the tiles
 *    around it come back;
 *  - a failing compute_tile queues nothing and the next tiles go on;
 *    freeing an engine with tiles in its threads neither hangs nor leaks
 *    the backend's buffers (host_alloc / host_free).
 *  - a held buffer (a record written in the background) is one more:
 *    the engine still takes a tile while the caller keeps one taken,
 *    and its pipeline depth stays as it was;
 *  - the store file's background write (comm/comm.h, without MPI: POSIX)
 *    puts the bytes where a plain write would, one write at a time,
 *    falls back where O_DIRECT cannot take it, finishes on close, and
 *    reports a write past a file-size limit as the plain write does.
 * The message loop (stop, cancel, queued tiles handed back) needs MPI:
 * the e2e suites run it. */
#define _GNU_SOURCE /* O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/codec.h"
#include "job/config.h"
#include "store/store.h"
#include "worker/worker.h"
#include "testutil.h"

/* How long one side of the overlap test waits for the other. */
#define WAIT_S 5.0
#define MAXT 64

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int overlap;                 /* the overlap test's waits are on */
  int compute_started[MAXT];   /* per tile index */
  int compress_started[MAXT];
  int last;                    /* the overlap test's last tile index */
  int timeouts;                /* waits that gave up */
  int64_t nan_tile;            /* tile given a NaN (-1: none) */
  uint64_t nan_i, nan_j;       /* where, within the tile */
  int64_t fail_tile;           /* tile whose compute_tile fails (-1: none) */
  int allocs, frees;           /* host_alloc / host_free calls */
} fk = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}, {0}, 0, 0, -1, 0, 0, -1, 0, 0};

static void fake_reset(void) {
  pthread_mutex_lock(&fk.mu);
  fk.overlap = 0;
  memset(fk.compute_started, 0, sizeof fk.compute_started);
  memset(fk.compress_started, 0, sizeof fk.compress_started);
  fk.last = 0;
  fk.timeouts = 0;
  fk.nan_tile = -1;
  fk.fail_tile = -1;
  fk.allocs = fk.frees = 0;
  pthread_mutex_unlock(&fk.mu);
}

/* Wait (fk.mu held) until flag[k] is set; 0 after WAIT_S seconds, and
 * then the overlap test's waits are off (one failure is enough). */
static int wait_flag(const int *flag, int k) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)WAIT_S;
  while (!flag[k])
    if (pthread_cond_timedwait(&fk.cv, &fk.mu, &until) == ETIMEDOUT && !flag[k]) {
      fk.overlap = 0;
      return 0;
    }
  return 1;
}

struct fake_ctx {
  const struct ntk_problem *p;
};

static int fake_available(void) { return 1; }

static ntk_status fake_create(const struct ntk_problem *p, void **ctx) {
  struct fake_ctx *c = calloc(1, sizeof *c);
  if (!c) return ntk_error(NTK_ENOMEM, "out of memory");
  c->p = p;
  *ctx = c;
  return NTK_OK;
}

/* Kernel-like values that depend on the global row and column only. */
static double value(uint64_t r, uint64_t c, int which) {
  return 1.0 / (1.0 + (double)((r * 7 + c * 3) % 101)) + 0.25 * sin((double)(r * 13 + c)) + which;
}

static ntk_status fake_compute(void *ctx, const struct ntk_tile *t, void *nngp, void *ntk) {
  struct fake_ctx *c = ctx;
  int k = (int)t->index;
  pthread_mutex_lock(&fk.mu);
  if (k < MAXT) fk.compute_started[k] = 1;
  pthread_cond_broadcast(&fk.cv);
  /* The emulated device: tile k + 1 is not done before the compression
   * of tile k has started. */
  if (fk.overlap && k > 0 && k <= fk.last && !wait_flag(fk.compress_started, k - 1)) fk.timeouts++;
  int fail = (int64_t)t->index == fk.fail_tile;
  pthread_mutex_unlock(&fk.mu);
  if (fail) return ntk_error(NTK_EINTERNAL, "fake device failed on tile %llu", (unsigned long long)t->index);
  int elem = c->p->data->elem;
  for (int which = 0; which < 2; which++) {
    void *out = which ? ntk : nngp;
    if (!out) continue;
    for (uint64_t i = 0; i < t->rows; i++)
      for (uint64_t j = 0; j < t->cols; j++) {
        double v = value(t->r0 + i, t->c0 + j, which);
        if ((int64_t)t->index == fk.nan_tile && which == 1 && i == fk.nan_i && j == fk.nan_j) v = NAN;
        if (elem == 4)
          ((float *)out)[i * t->cols + j] = (float)v;
        else
          ((double *)out)[i * t->cols + j] = v;
      }
  }
  return NTK_OK;
}

static void fake_destroy(void *ctx) { free(ctx); }

static void *fake_host_alloc(void *ctx, size_t bytes) {
  (void)ctx;
  pthread_mutex_lock(&fk.mu);
  fk.allocs++;
  pthread_mutex_unlock(&fk.mu);
  return malloc(bytes);
}

static void fake_host_free(void *ctx, void *p) {
  (void)ctx;
  if (!p) return;
  pthread_mutex_lock(&fk.mu);
  fk.frees++;
  pthread_mutex_unlock(&fk.mu);
  free(p);
}

/* The compression side of the overlap: tile k's check and compression do
 * not start before compute_tile of tile k + 1 has. */
static void hook(void *arg, const struct ntk_tile *t) {
  (void)arg;
  int k = (int)t->index;
  pthread_mutex_lock(&fk.mu);
  if (k < MAXT) fk.compress_started[k] = 1;
  pthread_cond_broadcast(&fk.cv);
  if (fk.overlap && k < fk.last && !wait_flag(fk.compute_started, k + 1)) fk.timeouts++;
  pthread_mutex_unlock(&fk.mu);
}

#define FAKE(NAME, THREADS)                                                                                   \
  static const struct ntk_backend_ops NAME = {                                                                \
      .name = #NAME,                                                                                          \
      .available = fake_available,                                                                            \
      .create = fake_create,                                                                                  \
      .compute_tile = fake_compute,                                                                           \
      .destroy = fake_destroy,                                                                                \
      .compress_threads = THREADS,                                                                            \
      .host_alloc = fake_host_alloc,                                                                          \
      .host_free = fake_host_free,                                                                            \
  };
FAKE(fake_serial, 0)
FAKE(fake_pipe1, 1)
FAKE(fake_pipe2, 2)

struct setup {
  struct ntk_dataset ds;
  struct ntk_arch arch;
  struct ntk_problem p;
  struct ntk_tiling tiling;
};

static void setup_init(struct setup *s, size_t n, size_t tile, int elem, int kernels) {
  memset(s, 0, sizeof *s);
  s->ds.n = n;
  s->ds.d = 1;
  s->ds.elem = elem;
  s->p.arch = &s->arch;
  s->p.data = &s->ds;
  s->p.kernels = kernels;
  ntk_tiling_init(&s->tiling, n, tile);
}

/* One finished tile, copied out of the engine. */
struct got {
  uint64_t tile;
  ntk_status st;
  char err[512];
  unsigned char *payload;
  size_t len;
  uint64_t checksum;
  struct ntk_result_header h;
};

static void take_one(ntk_engine_t *e, struct got *g) {
  struct ntk_engine_result r;
  ck_assert_int_eq(ntk_engine_take(e, -1, &r), 1);
  g->tile = r.tile;
  g->st = r.status;
  g->payload = NULL;
  if (r.status) {
    snprintf(g->err, sizeof g->err, "%s", ntk_error_message());
  } else {
    g->h = r.header;
    ck_assert_uint_eq(r.header.len, r.len);
    ck_assert_ptr_eq(r.payload, r.record + NTK_STORE_RECORD_HEADER);
    ck_assert_uint_eq((uintptr_t)r.record % NTK_STORE_HEADER_SIZE, 0);
    g->payload = malloc(r.len);
    memcpy(g->payload, r.payload, r.len);
    g->len = r.len;
    g->checksum = r.checksum;
  }
  ntk_engine_release(e, &r);
}

/* The worker's order of work, without MPI: submit each tile as soon as a
 * buffer is free, taking finished ones in between. got[k] is tile k. */
static void run_pipeline(ntk_engine_t *e, const struct setup *s, uint64_t ntiles, struct got *got) {
  uint64_t taken = 0;
  for (uint64_t k = 0; k < ntiles; k++) {
    while (!ntk_engine_can_submit(e)) take_one(e, &got[taken++]);
    struct ntk_tile t = ntk_tiling_tile(&s->tiling, k);
    ck_assert_int_eq(ntk_engine_submit(e, &t), NTK_OK);
  }
  while (ntk_engine_pending(e)) take_one(e, &got[taken++]);
  ck_assert_uint_eq(taken, ntiles);
  ck_assert_int_eq(ntk_engine_take(e, 0, &(struct ntk_engine_result){0}), 0);
  for (uint64_t k = 0; k < ntiles; k++) ck_assert_uint_eq(got[k].tile, k); /* submission order */
}

static void got_free(struct got *g, size_t n) {
  for (size_t i = 0; i < n; i++) free(g[i].payload);
}

START_TEST(test_overlap) {
  /* _i: 1 then 2 compression threads. */
  const struct ntk_backend_ops *be = _i ? &fake_pipe2 : &fake_pipe1;
  struct setup s;
  setup_init(&s, 100, 16, 4, NTK_KERNEL_NNGP | NTK_KERNEL_NTK);
  uint64_t ntiles = 12;
  fake_reset();
  fk.overlap = 1;
  fk.last = (int)ntiles - 1;
  ntk_engine_t *e;
  ck_assert_int_eq(ntk_engine_create(&s.p, be, 1, &s.tiling, 0, &e), NTK_OK);
  ck_assert_int_eq(ntk_engine_threads(e), _i ? 2 : 1);
  ntk_engine_set_hook(e, hook, NULL);
  struct got got[12];
  run_pipeline(e, &s, ntiles, got);
  ck_assert_msg(fk.timeouts == 0, "%d waits timed out: compute and compression did not overlap", fk.timeouts);
  for (uint64_t k = 0; k < ntiles; k++) {
    ck_assert_int_eq(got[k].st, NTK_OK);
    ck_assert_int_eq(fk.compress_started[k] && fk.compute_started[k], 1);
  }
  got_free(got, ntiles);
  ntk_engine_free(e);
  ck_assert_int_eq(fk.allocs, (_i ? 2 : 1) + 1);
  ck_assert_int_eq(fk.frees, fk.allocs);
}
END_TEST

/* A device engine's compression threads: the node's cores less one per
 * CPU worker, shared among its device workers, at most the cores this
 * rank may run on; never fewer than the backend's own number, none for a
 * backend without them, and NTKD_COMPRESS_THREADS above all. */
START_TEST(test_host_threads) {
  double gib = 1073741824.0, tile = 32 * 1048576.0; /* a float32 2 048-tile of NNGP and NTK */
  ck_assert_int_eq(ntk_engine_host_threads(16, 16, 0, 1, 128 * gib, tile), 16); /* backend = cuda, -np 2: the node's cores */
  ck_assert_int_eq(ntk_engine_host_threads(16, 16, 14, 1, 128 * gib, tile), 2); /* auto: 14 CPU workers beside it */
  ck_assert_int_eq(ntk_engine_host_threads(16, 16, 0, 4, 128 * gib, tile), 4);  /* 4 GPUs */
  ck_assert_int_eq(ntk_engine_host_threads(16, 1, 0, 1, 128 * gib, tile), 1);   /* bound to one core */
  ck_assert_int_eq(ntk_engine_host_threads(8, 8, 10, 1, 128 * gib, tile), 0);   /* oversubscribed: the backend's number */
  ck_assert_int_eq(ntk_engine_host_threads(16, 16, 3, 0, 128 * gib, tile), 0);  /* no device worker */
  /* memory: a float64 16 384-tile of both kernels is 4 GiB; a quarter of
   * 128 GiB holds 8 of them: 7 threads; of 16 GiB, one: none */
  ck_assert_int_eq(ntk_engine_host_threads(16, 16, 0, 1, 128 * gib, 4 * gib), 7);
  ck_assert_int_eq(ntk_engine_host_threads(16, 16, 0, 2, 128 * gib, 4 * gib), 3);
  ck_assert_int_eq(ntk_engine_host_threads(16, 16, 0, 1, 16 * gib, 4 * gib), 0);
  struct setup s;
  setup_init(&s, 40, 16, 4, NTK_KERNEL_NNGP);
  fake_reset();
  unsetenv("NTKD_COMPRESS_THREADS");
  const struct {
    const struct ntk_backend_ops *be;
    int host, want;
  } cases[] = {{&fake_pipe2, 5, 5}, {&fake_pipe2, 1, 2}, {&fake_pipe2, 0, 2}, {&fake_pipe2, 500, 64},
               {&fake_serial, 8, 0}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    s.p.host_threads = cases[k].host;
    ntk_engine_t *e;
    ck_assert_int_eq(ntk_engine_create(&s.p, cases[k].be, 1, &s.tiling, 0, &e), NTK_OK);
    ck_assert_msg(ntk_engine_threads(e) == cases[k].want, "case %zu: %d threads, want %d", k, ntk_engine_threads(e),
                  cases[k].want);
    ntk_engine_free(e);
  }
  setenv("NTKD_COMPRESS_THREADS", "3", 1);
  s.p.host_threads = 12;
  ntk_engine_t *e;
  ck_assert_int_eq(ntk_engine_create(&s.p, &fake_pipe2, 1, &s.tiling, 0, &e), NTK_OK);
  ck_assert_int_eq(ntk_engine_threads(e), 3);
  ntk_engine_free(e);
  unsetenv("NTKD_COMPRESS_THREADS");
}
END_TEST

/* The same test on the serial engine fails: here, its waits time out. */
START_TEST(test_overlap_needs_pipeline) {
  struct setup s;
  setup_init(&s, 40, 16, 4, NTK_KERNEL_NNGP);
  fake_reset();
  fk.overlap = 1;
  fk.last = 1;
  ntk_engine_t *e;
  ck_assert_int_eq(ntk_engine_create(&s.p, &fake_serial, 1, &s.tiling, 0, &e), NTK_OK);
  ck_assert_int_eq(ntk_engine_threads(e), 0);
  ntk_engine_set_hook(e, hook, NULL);
  struct got got[2];
  run_pipeline(e, &s, 2, got);
  /* Compression of 0 waited for compute of 1 in vain (it runs after). */
  ck_assert_int_eq(fk.timeouts, 1);
  got_free(got, 2);
  ntk_engine_free(e);
}
END_TEST

/* Payloads of the pipelined engine equal the serial engine's, bytes and
 * checksums, for float32 and float64, NNGP alone and with the NTK, ragged
 * edge tiles included; they decode to the backend's values. */
START_TEST(test_same_bytes) {
  int elem = _i & 1 ? 8 : 4;
  int kernels = _i & 2 ? NTK_KERNEL_NNGP : NTK_KERNEL_NNGP | NTK_KERNEL_NTK;
  struct setup s;
  setup_init(&s, 77, 24, elem, kernels); /* 4 x 4 blocks, the last 5 wide: 10 tiles */
  uint64_t ntiles = s.tiling.ntiles;
  ck_assert_uint_eq(ntiles, 10);
  fake_reset();
  ntk_engine_t *ser, *pipe;
  ck_assert_int_eq(ntk_engine_create(&s.p, &fake_serial, 3, &s.tiling, 0, &ser), NTK_OK);
  ck_assert_int_eq(ntk_engine_create(&s.p, &fake_pipe2, 3, &s.tiling, 0, &pipe), NTK_OK);
  struct got got[10];
  run_pipeline(pipe, &s, ntiles, got);
  ntk_codec_t *codec = ntk_codec_create(3);
  int two = kernels & NTK_KERNEL_NTK ? 2 : 1;
  for (uint64_t k = 0; k < ntiles; k++) {
    struct ntk_tile t = ntk_tiling_tile(&s.tiling, k);
    const void *payload;
    size_t len;
    uint64_t sum;
    ck_assert_int_eq(ntk_engine_run(ser, &t, &payload, &len, &sum), NTK_OK);
    ck_assert_int_eq(got[k].st, NTK_OK);
    ck_assert_uint_eq(got[k].len, len);
    ck_assert_mem_eq(got[k].payload, payload, len);
    ck_assert_uint_eq(got[k].checksum, sum);
    ck_assert_uint_eq(sum, ntk_checksum(payload, len));
    ck_assert_uint_eq(got[k].h.tile, k);
    ck_assert_uint_eq(got[k].h.len, len);
    ck_assert_uint_eq(got[k].h.checksum, sum);
    ck_assert(got[k].h.seconds >= 0);
    /* The store's reader gets the values back. */
    size_t count = (size_t)(t.rows * t.cols), raw = count * (size_t)elem * (size_t)two;
    unsigned char *v = malloc(raw);
    ck_assert_int_eq(ntk_codec_decompress(codec, got[k].payload, got[k].len, elem, v, raw), NTK_OK);
    for (int which = 0; which < two; which++)
      for (size_t q = 0; q < count; q += 7) {
        double want = value(t.r0 + q / t.cols, t.c0 + q % t.cols, which);
        double have = elem == 4 ? ((float *)v)[which * count + q] : ((double *)v)[which * count + q];
        ck_assert(elem == 4 ? have == (float)want : have == want);
      }
    free(v);
  }
  ntk_codec_free(codec);
  got_free(got, ntiles);
  ntk_engine_free(ser);
  ntk_engine_free(pipe);
  ck_assert_int_eq(fk.frees, fk.allocs);
}
END_TEST

/* A NaN in tile 4's NTK (row 3, column 5 of the tile): that tile alone is
 * NTK_ENONFINITE, naming the global entry, in both engines. */
START_TEST(test_nonfinite) {
  struct setup s;
  setup_init(&s, 80, 16, 4, NTK_KERNEL_NNGP | NTK_KERNEL_NTK);
  fake_reset();
  fk.nan_tile = 4;
  fk.nan_i = 3;
  fk.nan_j = 5;
  struct ntk_tile t4 = ntk_tiling_tile(&s.tiling, 4);
  char want[128];
  snprintf(want, sizeof want, "NTK entry (row %llu, column %llu) is NaN", (unsigned long long)(t4.r0 + 3),
           (unsigned long long)(t4.c0 + 5));
  ntk_engine_t *e;
  ck_assert_int_eq(ntk_engine_create(&s.p, &fake_pipe2, 1, &s.tiling, 0, &e), NTK_OK);
  struct got got[9];
  run_pipeline(e, &s, 9, got);
  for (uint64_t k = 0; k < 9; k++) {
    if (k != 4) {
      ck_assert_int_eq(got[k].st, NTK_OK);
      continue;
    }
    ck_assert_int_eq(got[k].st, NTK_ENONFINITE);
    ck_assert_msg(strstr(got[k].err, want), "message '%s' lacks '%s'", got[k].err, want);
  }
  got_free(got, 9);
  ntk_engine_free(e);
  /* The serial engine says the same. */
  ck_assert_int_eq(ntk_engine_create(&s.p, &fake_serial, 1, &s.tiling, 0, &e), NTK_OK);
  const void *payload;
  size_t len;
  uint64_t sum;
  ck_assert_int_eq(ntk_engine_run(e, &t4, &payload, &len, &sum), NTK_ENONFINITE);
  ck_assert_msg(strstr(ntk_error_message(), want), "message '%s' lacks '%s'", ntk_error_message(), want);
  ntk_engine_free(e);
}
END_TEST

/* compute_tile fails on tile 2: submit returns its status, nothing is
 * queued, the buffer stays free and the following tiles go on. */
START_TEST(test_compute_failure) {
  struct setup s;
  setup_init(&s, 64, 16, 8, NTK_KERNEL_NNGP | NTK_KERNEL_NTK);
  fake_reset();
  fk.fail_tile = 2;
  ntk_engine_t *e;
  ck_assert_int_eq(ntk_engine_create(&s.p, &fake_pipe1, 1, &s.tiling, 0, &e), NTK_OK);
  struct got got[5];
  int n = 0;
  for (uint64_t k = 0; k < 6; k++) {
    while (!ntk_engine_can_submit(e)) take_one(e, &got[n++]);
    struct ntk_tile t = ntk_tiling_tile(&s.tiling, k);
    int before = ntk_engine_pending(e);
    ntk_status st = ntk_engine_submit(e, &t);
    if (k == 2) {
      ck_assert_int_eq(st, NTK_EINTERNAL);
      ck_assert_ptr_nonnull(strstr(ntk_error_message(), "fake device failed on tile 2"));
      ck_assert_int_eq(ntk_engine_pending(e), before);
      ck_assert_int_eq(ntk_engine_can_submit(e), 1);
    } else {
      ck_assert_int_eq(st, NTK_OK);
    }
  }
  while (ntk_engine_pending(e)) take_one(e, &got[n++]);
  ck_assert_int_eq(n, 5);
  uint64_t want[] = {0, 1, 3, 4, 5};
  for (int i = 0; i < 5; i++) {
    ck_assert_uint_eq(got[i].tile, want[i]);
    ck_assert_int_eq(got[i].st, NTK_OK);
  }
  got_free(got, 5);
  ntk_engine_free(e);
}
END_TEST

/* Freed with tiles queued and one in a thread (its hook holds it until
 * released): ntk_engine_free joins the threads and frees every buffer. */
static int held_free;
static void hold_hook(void *arg, const struct ntk_tile *t) {
  (void)arg;
  (void)t;
  pthread_mutex_lock(&fk.mu);
  fk.compress_started[0]++;
  pthread_cond_broadcast(&fk.cv);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)WAIT_S;
  while (!held_free)
    if (pthread_cond_timedwait(&fk.cv, &fk.mu, &until) == ETIMEDOUT) break; /* (a broken engine) */
  pthread_mutex_unlock(&fk.mu);
}

static void *release_later(void *arg) {
  (void)arg;
  struct timespec d = {0, 50 * 1000 * 1000};
  nanosleep(&d, NULL);
  pthread_mutex_lock(&fk.mu);
  held_free = 1;
  pthread_cond_broadcast(&fk.cv);
  pthread_mutex_unlock(&fk.mu);
  return NULL;
}

START_TEST(test_free_busy) {
  struct setup s;
  setup_init(&s, 64, 16, 4, NTK_KERNEL_NNGP);
  fake_reset();
  held_free = 0;
  ntk_engine_t *e;
  ck_assert_int_eq(ntk_engine_create(&s.p, &fake_pipe2, 1, &s.tiling, 0, &e), NTK_OK);
  ntk_engine_set_hook(e, hold_hook, NULL);
  for (uint64_t k = 0; k < 3; k++) {
    ck_assert_int_eq(ntk_engine_can_submit(e), 1);
    struct ntk_tile t = ntk_tiling_tile(&s.tiling, k);
    ck_assert_int_eq(ntk_engine_submit(e, &t), NTK_OK);
  }
  ck_assert_int_eq(ntk_engine_can_submit(e), 0);
  ck_assert_int_eq(ntk_engine_pending(e), 3);
  ck_assert_int_eq(ntk_engine_take(e, 0.01, &(struct ntk_engine_result){0}), 0); /* none done: held */
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, release_later, NULL), 0);
  ntk_engine_free(e);
  pthread_join(th, NULL);
  ck_assert_int_eq(fk.allocs, 3);
  ck_assert_int_eq(fk.frees, 3);
}
END_TEST

START_TEST(test_held_buffer) {
  struct setup s;
  setup_init(&s, 64, 16, 4, NTK_KERNEL_NNGP);
  fake_reset();
  for (int held = 0; held < 2; held++) {
    ntk_engine_t *e;
    ck_assert_int_eq(ntk_engine_create(&s.p, &fake_serial, 1, &s.tiling, held, &e), NTK_OK);
    ck_assert_int_eq(ntk_engine_depth(e), 2); /* the one computed, the next in the inbox */
    struct ntk_tile t = ntk_tiling_tile(&s.tiling, 0);
    ck_assert_int_eq(ntk_engine_submit(e, &t), NTK_OK);
    struct ntk_engine_result r;
    ck_assert_int_eq(ntk_engine_take(e, -1, &r), 1);
    ck_assert_int_eq(r.status, NTK_OK);
    /* r kept taken: another tile only with the held buffer */
    ck_assert_int_eq(ntk_engine_can_submit(e), held);
    if (held) {
      struct ntk_tile t1 = ntk_tiling_tile(&s.tiling, 1);
      ck_assert_int_eq(ntk_engine_submit(e, &t1), NTK_OK);
      ck_assert_int_eq(ntk_engine_can_submit(e), 0);
      struct ntk_engine_result r1;
      ck_assert_int_eq(ntk_engine_take(e, -1, &r1), 1);
      ck_assert_int_eq(r1.tile, 1);
      ck_assert_ptr_ne(r1.record, r.record); /* the kept record untouched */
      ntk_engine_release(e, &r1);
    }
    ntk_engine_release(e, &r);
    ck_assert_int_eq(ntk_engine_can_submit(e), 1);
    ntk_engine_free(e);
  }
}
END_TEST

/* The background write's file: in the current folder (the build tree, on
 * a disk), 1 MiB of zeros. */
#define BG_FILE "test_worker_bg.bin"
#define BG_CHUNK ((size_t)64 << 10)

static unsigned char *bg_buffer(unsigned seed) {
  unsigned char *b;
  ck_assert_int_eq(posix_memalign((void **)&b, 4096, BG_CHUNK), 0);
  for (size_t i = 0; i < BG_CHUNK; i++) b[i] = (unsigned char)(i * 31u + seed * 7u + (i >> 9));
  return b;
}

static void bg_make_file(void) {
  FILE *f = fopen(BG_FILE, "wb");
  ck_assert_ptr_nonnull(f);
  static unsigned char zero[BG_CHUNK];
  for (int k = 0; k < 16; k++) ck_assert_uint_eq(fwrite(zero, 1, BG_CHUNK, f), BG_CHUNK);
  ck_assert_int_eq(fclose(f), 0);
}

static void bg_check_at(uint64_t off, const unsigned char *want) {
  FILE *f = fopen(BG_FILE, "rb");
  ck_assert_ptr_nonnull(f);
  unsigned char *got = malloc(BG_CHUNK);
  ck_assert_int_eq(fseek(f, (long)off, SEEK_SET), 0);
  ck_assert_uint_eq(fread(got, 1, BG_CHUNK, f), BG_CHUNK);
  ck_assert_int_eq(memcmp(got, want, BG_CHUNK), 0);
  free(got);
  fclose(f);
}

START_TEST(test_background_write) {
  bg_make_file();
  int fd = open(BG_FILE, O_RDWR | O_DIRECT);
  int direct = fd >= 0; /* whether this file system takes O_DIRECT at all */
  if (fd >= 0) close(fd);
  ntk_comm_file_t *f;
  ck_assert_int_eq(ntk_comm_file_open(BG_FILE, 1, &f), NTK_OK);
  ntk_status st = NTK_EINTERNAL;
  ck_assert_int_eq(ntk_comm_file_write_wait(f, 0, &st), 1); /* none started */
  ck_assert_int_eq(st, NTK_OK);
  unsigned char *a = bg_buffer(1), *b = bg_buffer(2), *c = bg_buffer(3);
  /* Not aligned: never in the background. */
  ck_assert_int_eq(ntk_comm_file_write_start(f, 100, a, BG_CHUNK), 0);
  ck_assert_int_eq(ntk_comm_file_write_start(f, 0, a, BG_CHUNK - 512), 0);
  int started = ntk_comm_file_write_start(f, 3 * BG_CHUNK, a, BG_CHUNK);
  ck_assert_int_eq(started, direct);
  if (started) {
    /* one at a time: a second one is refused until the first is waited for */
    ck_assert_int_eq(ntk_comm_file_write_start(f, 5 * BG_CHUNK, b, BG_CHUNK), 0);
    st = NTK_EINTERNAL;
    ck_assert_int_eq(ntk_comm_file_write_wait(f, -1, &st), 1);
    ck_assert_int_eq(st, NTK_OK);
    ck_assert_int_eq(ntk_comm_file_write_wait(f, 0, &st), 1); /* waited for: nothing left */
    ck_assert_int_eq(ntk_comm_file_write_start(f, 5 * BG_CHUNK, b, BG_CHUNK), 1);
    for (int k = 0; k < 2000 && !ntk_comm_file_write_wait(f, 0.001, &st); k++) {}
    ck_assert_int_eq(st, NTK_OK);
    /* left running at close: written before the file goes */
    ck_assert_int_eq(ntk_comm_file_write_start(f, 7 * BG_CHUNK, c, BG_CHUNK), 1);
  } else {
    ck_assert_int_eq(ntk_comm_file_write_at(f, 3 * BG_CHUNK, a, BG_CHUNK), NTK_OK);
    ck_assert_int_eq(ntk_comm_file_write_at(f, 5 * BG_CHUNK, b, BG_CHUNK), NTK_OK);
    ck_assert_int_eq(ntk_comm_file_write_at(f, 7 * BG_CHUNK, c, BG_CHUNK), NTK_OK);
  }
  ntk_comm_file_close(f);
  bg_check_at(3 * BG_CHUNK, a);
  bg_check_at(5 * BG_CHUNK, b);
  bg_check_at(7 * BG_CHUNK, c);
  static unsigned char zero[BG_CHUNK];
  bg_check_at(4 * BG_CHUNK, zero);
  free(a);
  free(b);
  free(c);

  /* Past a file-size limit (in a child: the limit stays there): the wait
   * says what a plain write says. */
  if (direct) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
      signal(SIGXFSZ, SIG_IGN);
      struct rlimit rl = {BG_CHUNK * 20, BG_CHUNK * 20};
      if (setrlimit(RLIMIT_FSIZE, &rl)) _exit(10);
      ntk_comm_file_t *g;
      if (ntk_comm_file_open(BG_FILE, 1, &g)) _exit(11);
      unsigned char *d = bg_buffer(4);
      if (ntk_comm_file_write_start(g, BG_CHUNK * 40, d, BG_CHUNK) != 1) _exit(12);
      ntk_status w = NTK_OK;
      if (ntk_comm_file_write_wait(g, -1, &w) != 1) _exit(13);
      if (w != NTK_EIO) _exit(14);
      if (!strstr(ntk_error_message(), "file-size limit")) _exit(15);
      ntk_comm_file_close(g);
      _exit(0);
    }
    int wst = 0;
    ck_assert_int_eq(waitpid(pid, &wst, 0), pid);
    ck_assert_msg(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "the child's check %d failed", WEXITSTATUS(wst));
  }
  unlink(BG_FILE);
}
END_TEST

int main(void) {
  Suite *s = suite_create("worker");
  TCase *tc = tcase_create("engine");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_overlap, 0, 2);
  tcase_add_test(tc, test_overlap_needs_pipeline);
  tcase_add_test(tc, test_host_threads);
  tcase_add_loop_test(tc, test_same_bytes, 0, 4);
  tcase_add_test(tc, test_nonfinite);
  tcase_add_test(tc, test_compute_failure);
  tcase_add_test(tc, test_free_busy);
  tcase_add_test(tc, test_held_buffer);
  tcase_add_test(tc, test_background_write);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
