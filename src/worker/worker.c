/* Worker side: the tile engine (backend + codec, with a check that every
 * value is finite) and the MPI message loop, in which a worker writes the
 * records of its tiles into the store at the offsets rank 0 grants. */
#include "ntkd/worker.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ntkd/codec.h"
#include "ntkd/comm.h"
#include "ntkd/config.h"
#include "ntkd/progress.h"
#include "ntkd/signals.h"
#include "ntkd/store.h"

/* A tile buffer of the engine: the raw values (from the backend's
 * host_alloc: pinned memory for the CUDA backend) and the record (room for
 * the store's record header, the payload, room for the padding; page
 * aligned, so that it can be written as it is). Owned by the calling thread while FREE or TAKEN (and
 * while compute_tile fills a FREE one), by one compression thread while
 * BUSY; every state change is under the engine's mutex. */
enum { SLOT_FREE, SLOT_QUEUED, SLOT_BUSY, SLOT_DONE, SLOT_TAKEN };

struct slot {
  unsigned char *raw; /* nngp then ntk */
  unsigned char *msg; /* record: NTK_STORE_RECORD_HEADER bytes, payload, padding */
  struct ntk_result_header h;
  int state;
  uint64_t seq; /* submission order: results are taken in it */
  struct ntk_tile t;
  double compute_s;
  ntk_status st; /* of the check and compression */
  char err[2048];
  size_t len;
  uint64_t checksum;
};

struct ntk_engine {
  const struct ntk_backend_ops *be;
  void *ctx;
  ntk_codec_t *codec; /* the calling thread's (ntk_engine_run, and submit without threads) */
  int elem, kernels;
  size_t raw_cap, msg_cap;
  int nthreads, nslots;
  struct slot *slots;
  ntk_codec_t **codecs; /* one per compression thread */
  pthread_t *threads;
  int started; /* threads running */
  pthread_mutex_t mu;
  pthread_cond_t work; /* a slot was queued, or closing */
  pthread_cond_t done; /* a slot is done */
  int closing;
  uint64_t next_seq;
  void (*hook)(void *arg, const struct ntk_tile *t);
  void *hook_arg;
};

static void finish_tile(ntk_engine_t *e, ntk_codec_t *codec, struct slot *s);

static void *compress_main(void *arg) {
  ntk_engine_t *e = ((void **)arg)[0];
  ntk_codec_t *codec = ((void **)arg)[1];
  free(arg);
  pthread_mutex_lock(&e->mu);
  for (;;) {
    struct slot *s = NULL;
    while (!e->closing) {
      for (int i = 0; i < e->nslots; i++)
        if (e->slots[i].state == SLOT_QUEUED && (!s || e->slots[i].seq < s->seq)) s = &e->slots[i];
      if (s) break;
      pthread_cond_wait(&e->work, &e->mu);
    }
    if (e->closing) break;
    s->state = SLOT_BUSY;
    pthread_mutex_unlock(&e->mu);
    finish_tile(e, codec, s);
    pthread_mutex_lock(&e->mu);
    s->state = SLOT_DONE;
    pthread_cond_broadcast(&e->done);
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
}

/* Compression threads: the backend's choice, or NTKD_COMPRESS_THREADS
 * (0-64) to try another (benchmarks; the pipelined message loop under the
 * CPU backend in the end-to-end tests). */
static int compress_threads(const struct ntk_backend_ops *be) {
  const char *v = getenv("NTKD_COMPRESS_THREADS");
  if (v && *v) {
    char *end;
    long n = strtol(v, &end, 10);
    if (!*end && n >= 0 && n <= 64) return (int)n;
    fprintf(stderr, "ntkd: NTKD_COMPRESS_THREADS=%s is not a number from 0 to 64: ignored\n", v);
  }
  return be->compress_threads > 0 ? (be->compress_threads < 64 ? be->compress_threads : 64) : 0;
}

ntk_status ntk_engine_create(const struct ntk_problem *p, const struct ntk_backend_ops *be, int level,
                             const struct ntk_tiling *tiling, ntk_engine_t **out) {
  *out = NULL;
  ntk_engine_t *e = calloc(1, sizeof *e);
  if (!e) return ntk_error(NTK_ENOMEM, "out of memory");
  e->be = be;
  e->elem = p->data->elem;
  e->kernels = p->kernels;
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->work, NULL);
  pthread_cond_init(&e->done, NULL);
  size_t edge = (size_t)(tiling->tile < tiling->n ? tiling->tile : tiling->n);
  e->raw_cap = edge * edge * (size_t)e->elem * ((p->kernels & NTK_KERNEL_NTK) ? 2 : 1);
  e->msg_cap = NTK_STORE_RECORD_HEADER + ntk_codec_bound(e->raw_cap) + NTK_STORE_HEADER_SIZE;
  e->nthreads = compress_threads(be);
  /* One buffer being computed while each thread compresses another. */
  e->nslots = e->nthreads + 1;
  e->slots = calloc((size_t)e->nslots, sizeof *e->slots);
  e->codecs = calloc((size_t)e->nthreads + 1, sizeof *e->codecs);
  e->threads = calloc((size_t)e->nthreads + 1, sizeof *e->threads);
  e->codec = ntk_codec_create(level);
  ntk_status st = NTK_OK;
  if (!e->slots || !e->codecs || !e->threads || !e->codec) st = ntk_error(NTK_ENOMEM, "out of memory");
  for (int i = 0; !st && i < e->nthreads; i++)
    if (!(e->codecs[i] = ntk_codec_create(level))) st = ntk_error(NTK_ENOMEM, "out of memory");
  if (!st) st = be->create(p, &e->ctx);
  for (int i = 0; !st && i < e->nslots; i++) {
    struct slot *s = &e->slots[i];
    s->raw = be->host_alloc ? be->host_alloc(e->ctx, e->raw_cap) : malloc(e->raw_cap);
    if (posix_memalign((void **)&s->msg, NTK_STORE_HEADER_SIZE, e->msg_cap)) s->msg = NULL;
    if (!s->raw || !s->msg)
      st = ntk_error(NTK_ENOMEM, "out of memory for tile buffers (%d x %zu bytes)", e->nslots, e->raw_cap + e->msg_cap);
  }
  for (int i = 0; !st && i < e->nthreads; i++) {
    void **arg = malloc(2 * sizeof *arg);
    if (!arg) {
      st = ntk_error(NTK_ENOMEM, "out of memory");
      break;
    }
    arg[0] = e;
    arg[1] = e->codecs[i];
    if (pthread_create(&e->threads[i], NULL, compress_main, arg)) {
      free(arg);
      st = ntk_error(NTK_EINTERNAL, "cannot start a compression thread");
      break;
    }
    e->started++;
  }
  if (st) {
    ntk_engine_free(e);
    return st;
  }
  *out = e;
  return NTK_OK;
}

void ntk_engine_free(ntk_engine_t *e) {
  if (!e) return;
  /* Threads finish the tile in hand and leave; queued ones are dropped. */
  pthread_mutex_lock(&e->mu);
  e->closing = 1;
  pthread_cond_broadcast(&e->work);
  pthread_mutex_unlock(&e->mu);
  for (int i = 0; i < e->started; i++) pthread_join(e->threads[i], NULL);
  for (int i = 0; e->slots && i < e->nslots; i++) {
    if (e->be->host_free)
      e->be->host_free(e->ctx, e->slots[i].raw);
    else
      free(e->slots[i].raw);
    free(e->slots[i].msg);
  }
  if (e->ctx) e->be->destroy(e->ctx);
  for (int i = 0; e->codecs && i < e->nthreads; i++) ntk_codec_free(e->codecs[i]);
  ntk_codec_free(e->codec);
  free(e->codecs);
  free(e->threads);
  free(e->slots);
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->work);
  pthread_cond_destroy(&e->done);
  free(e);
}

int ntk_engine_threads(const ntk_engine_t *e) { return e->nthreads; }

int ntk_engine_depth(const ntk_engine_t *e) { return e->nslots + 1; }

void ntk_engine_set_hook(ntk_engine_t *e, void (*hook)(void *arg, const struct ntk_tile *t), void *arg) {
  e->hook = hook;
  e->hook_arg = arg;
}

/* The first of `count` values that is not finite, or `count`. Each block
 * gets a branch-free pass (vectorised); only a block with a bad value is
 * searched. */
#define DEFINE_FIND_NONFINITE(T, SFX, ABS, MAXV)                                                                \
  static size_t find_nonfinite_##SFX(const T *v, size_t count) {                                               \
    const size_t block = 4096;                                                                                  \
    for (size_t b = 0; b < count; b += block) {                                                                 \
      size_t end = count - b < block ? count : b + block;                                                       \
      int bad = 0;                                                                                              \
      for (size_t i = b; i < end; i++) bad |= !(ABS(v[i]) <= MAXV);                                             \
      if (bad)                                                                                                  \
        for (size_t i = b; i < end; i++)                                                                        \
          if (!(ABS(v[i]) <= MAXV)) return i;                                                                   \
    }                                                                                                           \
    return count;                                                                                               \
  }
DEFINE_FIND_NONFINITE(float, f, fabsf, FLT_MAX)
DEFINE_FIND_NONFINITE(double, d, fabs, DBL_MAX)

/* NTK_ENONFINITE naming the first non-finite entry of one kernel's
 * rows x cols values, if any. The data are checked finite when loaded, so
 * a value that is not comes from an intermediate that left the
 * precision's range (overflow, or an underflow to 0 later divided by), or
 * from a map outside its domain (Gaussian with b > 0 once 1 - 2 b q <= 0,
 * as in neural-tangents): the hint says what to change. */
static ntk_status check_finite(const struct ntk_tile *t, const void *vals, int elem, const char *kernel) {
  size_t count = (size_t)(t->rows * t->cols);
  size_t at = elem == 4 ? find_nonfinite_f(vals, count) : find_nonfinite_d(vals, count);
  if (at == count) return NTK_OK;
  double v = elem == 4 ? (double)((const float *)vals)[at] : ((const double *)vals)[at];
  const char *what = isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf";
  const char *hint = elem == 4 ? "the kernel exceeds float32; use [compute] precision = float64 (or a "
                                 "nonlinearity is undefined there: Gaussian with b > 0 and large variances; or LayerNorm with "
                                 "eps = 0 after a sample of zero variance)"
                               : "the kernel exceeds even the float64 range: the network is too deep for its "
                                 "w_std and b_std (the variances grow or shrink by a factor per layer), or a "
                                 "nonlinearity is undefined there (Gaussian with b > 0 and large variances), or a LayerNorm "
                                 "with eps = 0 divides by a sample's zero variance";
  return ntk_error(NTK_ENONFINITE, "%s entry (row %llu, column %llu) is %s: %s", kernel,
                   (unsigned long long)(t->r0 + at / t->cols), (unsigned long long)(t->c0 + at % t->cols), what,
                   hint);
}

/* Check, compress and checksum the tile computed into s->raw; the outcome
 * in s (a failure's message in s->err). Any thread, with its own codec. */
static void finish_tile(ntk_engine_t *e, ntk_codec_t *codec, struct slot *s) {
  double t0 = ntk_now();
  if (e->hook) e->hook(e->hook_arg, &s->t);
  const struct ntk_tile *t = &s->t;
  size_t one = (size_t)(t->rows * t->cols) * (size_t)e->elem;
  int two = (e->kernels & NTK_KERNEL_NTK) != 0;
  struct ntk_result_header h;
  unsigned char *body = s->msg + NTK_STORE_RECORD_HEADER;
  /* Never store a value that is not finite (NNGP first, then NTK). */
  ntk_status st = check_finite(t, s->raw, e->elem, "NNGP");
  if (!st && two) st = check_finite(t, s->raw + one, e->elem, "NTK");
  if (!st)
    st = ntk_codec_compress(codec, s->raw, one * (two ? 2 : 1), e->elem, body,
                            e->msg_cap - NTK_STORE_RECORD_HEADER - NTK_STORE_HEADER_SIZE, &s->len);
  s->st = st;
  if (st) {
    snprintf(s->err, sizeof s->err, "%s", ntk_error_message());
    return;
  }
  s->checksum = ntk_checksum(body, s->len);
  h.tile = t->index;
  h.len = s->len;
  h.checksum = s->checksum;
  h.seconds = s->compute_s + (ntk_now() - t0); /* the work, not the waits between */
  h.codec = (uint64_t)ntk_codec_id(codec);
  s->h = h;
}

static struct slot *free_slot(ntk_engine_t *e) {
  for (int i = 0; i < e->nslots; i++)
    if (e->slots[i].state == SLOT_FREE) return &e->slots[i];
  return NULL;
}

/* Compute tile t into slot s on the calling thread. */
static ntk_status compute_into(ntk_engine_t *e, struct slot *s, const struct ntk_tile *t) {
  double t0 = ntk_now();
  size_t one = (size_t)(t->rows * t->cols) * (size_t)e->elem;
  int two = (e->kernels & NTK_KERNEL_NTK) != 0;
  ntk_status st = e->be->compute_tile(e->ctx, t, s->raw, two ? s->raw + one : NULL);
  s->t = *t;
  s->compute_s = ntk_now() - t0;
  return st;
}

ntk_status ntk_engine_run(ntk_engine_t *e, const struct ntk_tile *t, const void **payload, size_t *len,
                          uint64_t *checksum) {
  if (ntk_engine_pending(e)) return ntk_error(NTK_EINTERNAL, "ntk_engine_run with tiles in the pipeline");
  ntk_status st = ntk_engine_submit(e, t);
  if (st) return st;
  struct ntk_engine_result r;
  if (!ntk_engine_take(e, -1, &r)) return ntk_error(NTK_EINTERNAL, "ntk_engine_run: the tile did not come back");
  ntk_engine_release(e, &r); /* the buffer keeps its bytes until the next submit */
  if (r.status) return r.status; /* message recorded by take */
  *len = r.len;
  *checksum = r.checksum;
  *payload = r.payload;
  return NTK_OK;
}

int ntk_engine_can_submit(ntk_engine_t *e) {
  pthread_mutex_lock(&e->mu);
  int ok = free_slot(e) != NULL;
  pthread_mutex_unlock(&e->mu);
  return ok;
}

int ntk_engine_pending(ntk_engine_t *e) {
  pthread_mutex_lock(&e->mu);
  int n = 0;
  for (int i = 0; i < e->nslots; i++) {
    int k = e->slots[i].state;
    n += k == SLOT_QUEUED || k == SLOT_BUSY || k == SLOT_DONE;
  }
  pthread_mutex_unlock(&e->mu);
  return n;
}

ntk_status ntk_engine_submit(ntk_engine_t *e, const struct ntk_tile *t) {
  pthread_mutex_lock(&e->mu);
  struct slot *s = free_slot(e);
  pthread_mutex_unlock(&e->mu);
  if (!s) return ntk_error(NTK_EINTERNAL, "ntk_engine_submit without a free tile buffer");
  /* Only this thread takes FREE slots: s stays ours while it computes. */
  ntk_status st = compute_into(e, s, t);
  if (st) return st;
  if (!e->nthreads) finish_tile(e, e->codec, s);
  pthread_mutex_lock(&e->mu);
  s->seq = e->next_seq++;
  s->state = e->nthreads ? SLOT_QUEUED : SLOT_DONE;
  pthread_cond_signal(&e->work);
  pthread_mutex_unlock(&e->mu);
  return NTK_OK;
}

int ntk_engine_take(ntk_engine_t *e, double wait, struct ntk_engine_result *r) {
  struct timespec until;
  if (wait > 0) {
    clock_gettime(CLOCK_REALTIME, &until);
    double ns = (double)until.tv_nsec + wait * 1e9;
    until.tv_sec += (time_t)(ns / 1e9);
    until.tv_nsec = (long)fmod(ns, 1e9);
  }
  pthread_mutex_lock(&e->mu);
  struct slot *s;
  for (;;) {
    s = NULL;
    for (int i = 0; i < e->nslots; i++) {
      int k = e->slots[i].state;
      if ((k == SLOT_QUEUED || k == SLOT_BUSY || k == SLOT_DONE) && (!s || e->slots[i].seq < s->seq))
        s = &e->slots[i];
    }
    if (!s || s->state == SLOT_DONE || wait == 0) break;
    if (wait < 0)
      pthread_cond_wait(&e->done, &e->mu);
    else if (pthread_cond_timedwait(&e->done, &e->mu, &until) == ETIMEDOUT)
      wait = 0; /* one last look */
  }
  int got = s && s->state == SLOT_DONE;
  if (got) s->state = SLOT_TAKEN;
  pthread_mutex_unlock(&e->mu);
  if (!got) return 0;
  memset(r, 0, sizeof *r);
  r->tile = s->t.index;
  r->slot = (int)(s - e->slots);
  r->status = s->st;
  if (s->st) {
    ntk_error(s->st, "%s", s->err);
    return 1;
  }
  r->header = s->h;
  r->record = s->msg;
  r->record_cap = e->msg_cap;
  r->payload = s->msg + NTK_STORE_RECORD_HEADER;
  r->len = s->len;
  r->checksum = s->checksum;
  return 1;
}

void ntk_engine_release(ntk_engine_t *e, const struct ntk_engine_result *r) {
  pthread_mutex_lock(&e->mu);
  if (r->slot >= 0 && r->slot < e->nslots && e->slots[r->slot].state == SLOT_TAKEN) e->slots[r->slot].state = SLOT_FREE;
  pthread_mutex_unlock(&e->mu);
}

/* Take a waiting CANCEL message, if any. */
static int take_cancel(const ntk_comm_t *comm) {
  if (!ntk_comm_probe(comm, 0, NTK_TAG_CANCEL)) return 0;
  ntk_comm_recv(comm, 0, NTK_TAG_CANCEL, NULL, 0);
  return 1;
}

/* Report failure `st` (its message recorded) to the coordinator: the
 * status, then the text. */
static ntk_status send_fail(const ntk_comm_t *comm, ntk_status st) {
  unsigned char buf[sizeof(int32_t) + 2048];
  int32_t code = (int32_t)st;
  memcpy(buf, &code, sizeof code);
  int n = snprintf((char *)buf + sizeof code, sizeof buf - sizeof code, "%s", ntk_error_message());
  size_t len = n < 0 ? 0 : (size_t)n < sizeof buf - sizeof code ? (size_t)n : sizeof buf - sizeof code - 1;
  return ntk_comm_send(comm, 0, NTK_TAG_FAIL, buf, sizeof code + len + 1);
}

/* How long a worker whose messages failed waits for the coordinator's
 * acknowledgement before it ends the job itself. The coordinator answers
 * within a poll (0.25 s) unless its disk holds it up. */
#define NTK_ACK_WAIT 60.0

/* A message of this worker failed (`st`, message recorded): it cannot be
 * relied on to serve tiles or to take part in a collective any more. It
 * tells the coordinator, which counts it out, stores what the others still
 * return, syncs and ends every rank (ntk_comm_abort); the coordinator's
 * stop is the acknowledgement, after which this returns `st` (and the rank
 * waits to be ended). Without one (the coordinator cannot be reached) this
 * rank ends the job itself rather than hang. */
static ntk_status comm_failed(const ntk_comm_t *comm, ntk_status st) {
  char msg[2048];
  snprintf(msg, sizeof msg, "%s", ntk_error_message());
  if (!send_fail(comm, st)) {
    double until = ntk_now() + NTK_ACK_WAIT;
    int from, tag;
    size_t bytes;
    while (ntk_now() < until && ntk_comm_poll(comm, 0, &from, &tag, &bytes, until - ntk_now())) {
      uint64_t index = 0;
      if (bytes > sizeof index || ntk_comm_recv(comm, 0, tag, &index, bytes)) break;
      if (tag == NTK_TAG_WORK && bytes == sizeof index && index == NTK_WORK_STOP) return ntk_error(st, "%s", msg);
      /* Work still queued, or a cancel: dropped; the coordinator has counted
       * this rank out, its tiles stay missing for a rerun. */
    }
  }
  fprintf(stderr, "ntkd: rank %d: %s\nntkd: rank %d: the coordinator does not answer: ending the job (rerun to "
          "resume)\n", ntk_comm_rank(comm), msg, ntk_comm_rank(comm));
  ntk_comm_abort(ntk_status_exit_code(st));
}

struct ntk_worker_store {
  ntk_comm_file_t *f;
  struct ntk_store_info info;
  struct ntk_tiling tiling;
  int sync_own; /* on another node than rank 0: sync each record before reporting it */
};

ntk_status ntk_worker_open_store(const char *path, const struct ntk_store_info *info, int sync_own, int direct,
                                 ntk_worker_store_t **out) {
  *out = NULL;
  ntk_worker_store_t *ws = calloc(1, sizeof *ws);
  unsigned char *h = malloc(NTK_STORE_HEADER_SIZE);
  ntk_status st = ws && h ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory");
  if (!st) {
    ws->info = *info;
    ws->sync_own = sync_own;
    ntk_store_tiling_of(info, &ws->tiling);
    st = ntk_comm_file_open(path, direct, &ws->f);
  }
  if (!st) st = ntk_comm_file_read_at(ws->f, 0, h, NTK_STORE_HEADER_SIZE);
  /* The file this rank opened must be the store rank 0 opened (the same
   * path on another node may be another file). */
  if (!st && !ntk_store_header_names(h, info))
    st = ntk_error(NTK_EMISMATCH, "%s: the file this rank opened is not the job's store (another store, or a "
                   "different file at this path on this node)", path);
  free(h);
  if (st) {
    ntk_worker_close_store(ws);
    return st;
  }
  *out = ws;
  return NTK_OK;
}

void ntk_worker_close_store(ntk_worker_store_t *ws) {
  if (!ws) return;
  ntk_comm_file_close(ws->f);
  free(ws);
}

/* Finished tile r: ask rank 0 where its record goes, write it there (and
 * sync it when this rank is on another node), report it written. A write
 * that fails is reported with its error; rank 0 marks the region dead and
 * stops the job (the other tiles are kept). A failure of a message is
 * returned (the caller ends with comm_failed). */
static ntk_status write_tile(const ntk_comm_t *comm, ntk_worker_store_t *ws, struct ntk_engine_result *r) {
  ntk_status st = ntk_comm_send(comm, 0, NTK_TAG_RESULT, &r->header, sizeof r->header);
  struct ntk_store_grant g;
  if (!st) st = ntk_comm_recv(comm, 0, NTK_TAG_GRANT, &g, sizeof g);
  if (st) return st;
  if (g.offset && (g.tile != r->tile || g.len != r->len || g.checksum != r->checksum || g.codec != r->header.codec ||
                   g.extent != ntk_store_extent(&ws->info, r->len) || g.extent > r->record_cap))
    return ntk_error(NTK_ECOMM, "worker %d: a grant that does not match tile %llu", ntk_comm_rank(comm),
                     (unsigned long long)r->tile);
  unsigned char msg[sizeof g + sizeof(int32_t) + 2048];
  int32_t code = 0;
  size_t len = sizeof g + sizeof code;
  if (g.offset) { /* else: rank 0 does not want it (stopping after a failure) */
    struct ntk_tile t = ntk_tiling_tile(&ws->tiling, g.tile);
    ntk_store_encode_record(&ws->info, &t, &g, r->record);
    memset(r->record + NTK_STORE_RECORD_HEADER + r->len, 0, (size_t)(g.extent - NTK_STORE_RECORD_HEADER - r->len));
    ntk_status wst = ntk_comm_file_write_at(ws->f, g.offset, r->record, (size_t)g.extent);
    if (!wst && ws->sync_own) wst = ntk_comm_file_sync(ws->f);
    if (wst) {
      code = (int32_t)wst;
      int n = snprintf((char *)msg + len, sizeof msg - len, "%s", ntk_error_message());
      len += n < 0 ? 1 : (size_t)n < sizeof msg - len ? (size_t)n + 1 : sizeof msg - len;
      msg[sizeof msg - 1] = '\0';
    }
  }
  memcpy(msg, &g, sizeof g);
  memcpy(msg + sizeof g, &code, sizeof code);
  return ntk_comm_send(comm, 0, NTK_TAG_WRITTEN, msg, len);
}

/* Finished tile r: its record written (or its failure sent to the
 * coordinator), its buffer freed. */
static ntk_status send_done(const ntk_comm_t *comm, ntk_engine_t *e, struct ntk_engine_result *r, int *told_interrupt,
                            ntk_worker_store_t *ws) {
  ntk_status st;
  if (r->status) /* message recorded by ntk_engine_take. Keep serving: the coordinator answers with stop. */
    st = send_fail(comm, r->status);
  else
    st = write_tile(comm, ws, r);
  ntk_engine_release(e, r);
  if (st) return st;
  if (ntk_stop_requested() && !*told_interrupt) {
    *told_interrupt = 1;
    return ntk_comm_send(comm, 0, NTK_TAG_INTERRUPT, NULL, 0);
  }
  return NTK_OK;
}

/* Hand tile `index` back uncomputed (stopping: our signal, or the
 * coordinator's cancel), first telling the coordinator of our signal, once. */
static ntk_status hand_back(const ntk_comm_t *comm, uint64_t index, int *told_interrupt) {
  if (ntk_stop_requested() && !*told_interrupt) {
    *told_interrupt = 1;
    ntk_status st = ntk_comm_send(comm, 0, NTK_TAG_INTERRUPT, NULL, 0);
    if (st) return st;
  }
  return ntk_comm_send(comm, 0, NTK_TAG_SKIP, &index, sizeof index);
}

/* Tile numbers received and not computed yet, oldest first. */
struct tile_queue {
  uint64_t *v;
  size_t n, cap;
};

static int queue_push(struct tile_queue *q, uint64_t index) {
  if (q->n == q->cap) {
    size_t cap = q->cap ? 2 * q->cap : 8;
    uint64_t *v = realloc(q->v, cap * sizeof *v);
    if (!v) return 0;
    q->v = v;
    q->cap = cap;
  }
  q->v[q->n++] = index;
  return 1;
}

static uint64_t queue_pop(struct tile_queue *q) {
  uint64_t index = q->v[0];
  memmove(q->v, q->v + 1, --q->n * sizeof *q->v);
  return index;
}

/* The loop of ntk_worker_serve; the queue is freed by the caller. MPI
 * stays on this thread: the compression threads only fill buffers that
 * this loop sends. Each turn: send every finished tile; then compute the
 * oldest received tile if a buffer is free (compute_tile runs here while
 * the threads compress earlier tiles); else look at messages, waiting up
 * to 1 ms on the pipeline first when tiles are in it. */
static ntk_status serve(const ntk_comm_t *comm, ntk_engine_t *e, const struct ntk_tiling *tiling, struct tile_queue *q,
                        ntk_worker_store_t *ws) {
  int told_interrupt = 0, cancelled = 0;
  ntk_status st;
  for (;;) {
    int ready = q->n > 0 && ntk_engine_can_submit(e);
    struct ntk_engine_result r;
    for (double wait = ready ? 0 : 0.001; ntk_engine_take(e, wait, &r); wait = 0)
      if ((st = send_done(comm, e, &r, &told_interrupt, ws))) return comm_failed(comm, st);
    if (ready) {
      uint64_t index = queue_pop(q);
      /* Stopping (our signal, or the coordinator's cancel): hand queued
       * tiles back uncomputed, so that every rank exits after the tiles
       * already computed. */
      cancelled |= take_cancel(comm);
      if (cancelled || ntk_stop_requested()) {
        if ((st = hand_back(comm, index, &told_interrupt))) return comm_failed(comm, st);
        continue;
      }
      struct ntk_tile t = ntk_tiling_tile(tiling, index);
      /* A failure is reported and the loop goes on: the coordinator
       * answers a failure with stop. */
      if ((st = ntk_engine_submit(e, &t)) && (st = send_fail(comm, st))) return comm_failed(comm, st);
      continue;
    }
    int from, tag;
    size_t bytes;
    /* Idle (nothing in the pipeline or queued): wait for a message. */
    if (!ntk_comm_poll(comm, 0, &from, &tag, &bytes, ntk_engine_pending(e) || q->n ? 0 : 0.5)) continue;
    if (tag == NTK_TAG_CANCEL) {
      cancelled |= take_cancel(comm);
      continue;
    }
    uint64_t index;
    if (tag != NTK_TAG_WORK || bytes != sizeof index)
      return comm_failed(comm, ntk_error(NTK_ECOMM, "worker %d: unexpected message (tag %d, %zu bytes)", ntk_comm_rank(comm),
                                   tag, bytes));
    st = ntk_comm_recv(comm, 0, NTK_TAG_WORK, &index, sizeof index);
    if (st) return comm_failed(comm, st);
    if (index == NTK_WORK_STOP) {
      take_cancel(comm); /* one may still be in flight: leave nothing unreceived */
      /* The coordinator stops a worker once every tile it sent is
       * answered, so nothing is left here; were anything, it is dropped. */
      while (ntk_engine_take(e, -1, &r)) ntk_engine_release(e, &r);
      return NTK_OK;
    }
    if (index >= tiling->ntiles)
      return comm_failed(comm, ntk_error(NTK_ECOMM, "worker %d: tile %llu out of range", ntk_comm_rank(comm),
                                   (unsigned long long)index));
    cancelled |= take_cancel(comm);
    if (cancelled || ntk_stop_requested()) {
      if ((st = hand_back(comm, index, &told_interrupt))) return comm_failed(comm, st);
      continue;
    }
    if (!queue_push(q, index))
      return comm_failed(comm, ntk_error(NTK_ECOMM, "worker %d: out of memory for its tile queue", ntk_comm_rank(comm)));
  }
}

ntk_status ntk_worker_serve(const ntk_comm_t *comm, ntk_engine_t *e, const struct ntk_tiling *tiling,
                            ntk_worker_store_t *ws) {
  struct tile_queue q = {0};
  ntk_status st = serve(comm, e, tiling, &q, ws);
  free(q.v);
  return st;
}
