/* Worker side: the tile engine (backend + codec, with a check that every
 * value is finite) and the MPI message loop. */
#include "ntkd/worker.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntkd/codec.h"
#include "ntkd/comm.h"
#include "ntkd/config.h"
#include "ntkd/progress.h"
#include "ntkd/signals.h"

struct ntk_engine {
  const struct ntk_backend_ops *be;
  void *ctx;
  ntk_codec_t *codec;
  int elem, kernels;
  size_t raw_cap;
  unsigned char *raw;  /* nngp then ntk */
  unsigned char *msg;  /* result header + payload */
  size_t msg_cap;
};

ntk_status ntk_engine_create(const struct ntk_problem *p, const struct ntk_backend_ops *be, int level,
                             const struct ntk_tiling *tiling, ntk_engine_t **out) {
  *out = NULL;
  ntk_engine_t *e = calloc(1, sizeof *e);
  if (!e) return ntk_error(NTK_ENOMEM, "out of memory");
  e->be = be;
  e->elem = p->data->elem;
  e->kernels = p->kernels;
  size_t edge = (size_t)(tiling->tile < tiling->n ? tiling->tile : tiling->n);
  e->raw_cap = edge * edge * (size_t)e->elem * ((p->kernels & NTK_KERNEL_NTK) ? 2 : 1);
  e->msg_cap = sizeof(struct ntk_result_header) + ntk_codec_bound(e->raw_cap);
  e->raw = malloc(e->raw_cap);
  e->msg = malloc(e->msg_cap);
  e->codec = ntk_codec_create(level);
  ntk_status st = NTK_OK;
  if (!e->raw || !e->msg || !e->codec) st = ntk_error(NTK_ENOMEM, "out of memory for tile buffers");
  if (!st) st = be->create(p, &e->ctx);
  if (st) {
    ntk_engine_free(e);
    return st;
  }
  *out = e;
  return NTK_OK;
}

void ntk_engine_free(ntk_engine_t *e) {
  if (!e) return;
  if (e->ctx) e->be->destroy(e->ctx);
  ntk_codec_free(e->codec);
  free(e->raw);
  free(e->msg);
  free(e);
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
 * rows x cols values, if any. The data are checked finite when loaded and
 * every layer map is finite on finite inputs, so a value that is not comes
 * from an intermediate that left the precision's range (overflow, or an
 * underflow to 0 later divided by): the hint says what to change. */
static ntk_status check_finite(const struct ntk_tile *t, const void *vals, int elem, const char *kernel) {
  size_t count = (size_t)(t->rows * t->cols);
  size_t at = elem == 4 ? find_nonfinite_f(vals, count) : find_nonfinite_d(vals, count);
  if (at == count) return NTK_OK;
  double v = elem == 4 ? (double)((const float *)vals)[at] : ((const double *)vals)[at];
  const char *what = isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf";
  const char *hint = elem == 4 ? "the kernel exceeds float32; use [compute] precision = float64"
                               : "the kernel exceeds even the float64 range: the network is too deep for its "
                                 "w_std and b_std (the variances grow or shrink by a factor per layer)";
  return ntk_error(NTK_ENONFINITE, "%s entry (row %llu, column %llu) is %s: %s", kernel,
                   (unsigned long long)(t->r0 + at / t->cols), (unsigned long long)(t->c0 + at % t->cols), what,
                   hint);
}

ntk_status ntk_engine_run(ntk_engine_t *e, const struct ntk_tile *t, const void **payload, size_t *len,
                          uint64_t *checksum) {
  double t0 = ntk_now();
  size_t one = (size_t)(t->rows * t->cols) * (size_t)e->elem;
  int two = (e->kernels & NTK_KERNEL_NTK) != 0;
  ntk_status st = e->be->compute_tile(e->ctx, t, e->raw, two ? e->raw + one : NULL);
  if (st) return st;
  /* Never store a value that is not finite (NNGP first, then NTK). */
  if ((st = check_finite(t, e->raw, e->elem, "NNGP"))) return st;
  if (two && (st = check_finite(t, e->raw + one, e->elem, "NTK"))) return st;
  struct ntk_result_header h;
  unsigned char *body = e->msg + sizeof h;
  st = ntk_codec_compress(e->codec, e->raw, one * (two ? 2 : 1), e->elem, body, e->msg_cap - sizeof h, len);
  if (st) return st;
  *checksum = ntk_checksum(body, *len);
  h.tile = t->index;
  h.len = *len;
  h.checksum = *checksum;
  h.seconds = ntk_now() - t0;
  memcpy(e->msg, &h, sizeof h);
  *payload = body;
  return NTK_OK;
}

/* Take a waiting CANCEL message, if any. */
static int take_cancel(void) {
  if (!ntk_comm_probe(0, NTK_TAG_CANCEL)) return 0;
  ntk_comm_recv(0, NTK_TAG_CANCEL, NULL, 0);
  return 1;
}

/* Report failure `st` (its message recorded) to the coordinator: the
 * status, then the text. */
static ntk_status send_fail(ntk_status st) {
  unsigned char buf[sizeof(int32_t) + 2048];
  int32_t code = (int32_t)st;
  memcpy(buf, &code, sizeof code);
  int n = snprintf((char *)buf + sizeof code, sizeof buf - sizeof code, "%s", ntk_error_message());
  size_t len = n < 0 ? 0 : (size_t)n < sizeof buf - sizeof code ? (size_t)n : sizeof buf - sizeof code - 1;
  return ntk_comm_send(0, NTK_TAG_FAIL, buf, sizeof code + len + 1);
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
static ntk_status comm_failed(ntk_status st) {
  char msg[2048];
  snprintf(msg, sizeof msg, "%s", ntk_error_message());
  if (!send_fail(st)) {
    double until = ntk_now() + NTK_ACK_WAIT;
    int from, tag;
    size_t bytes;
    while (ntk_now() < until && ntk_comm_poll(0, &from, &tag, &bytes, until - ntk_now())) {
      uint64_t index = 0;
      if (bytes > sizeof index || ntk_comm_recv(0, tag, &index, bytes)) break;
      if (tag == NTK_TAG_WORK && bytes == sizeof index && index == NTK_WORK_STOP) return ntk_error(st, "%s", msg);
      /* Work still queued, or a cancel: dropped; the coordinator has counted
       * this rank out, its tiles stay missing for a rerun. */
    }
  }
  fprintf(stderr, "ntkd: rank %d: %s\nntkd: rank %d: the coordinator does not answer: ending the job (rerun to "
          "resume)\n", ntk_comm_rank(), msg, ntk_comm_rank());
  ntk_comm_abort(ntk_status_exit_code(st));
}

ntk_status ntk_worker_serve(ntk_engine_t *e, const struct ntk_tiling *tiling) {
  int told_interrupt = 0, cancelled = 0;
  for (;;) {
    int from, tag;
    size_t bytes;
    if (!ntk_comm_poll(0, &from, &tag, &bytes, 0.5)) continue;
    if (tag == NTK_TAG_CANCEL) {
      cancelled |= take_cancel();
      continue;
    }
    uint64_t index;
    if (tag != NTK_TAG_WORK || bytes != sizeof index)
      return comm_failed(ntk_error(NTK_ECOMM, "worker %d: unexpected message (tag %d, %zu bytes)", ntk_comm_rank(),
                                   tag, bytes));
    ntk_status st = ntk_comm_recv(0, NTK_TAG_WORK, &index, sizeof index);
    if (st) return comm_failed(st);
    if (index == NTK_WORK_STOP) {
      take_cancel(); /* one may still be in flight: leave nothing unreceived */
      return NTK_OK;
    }
    if (index >= tiling->ntiles)
      return comm_failed(ntk_error(NTK_ECOMM, "worker %d: tile %llu out of range", ntk_comm_rank(),
                                   (unsigned long long)index));
    /* Stopping (our signal, or the coordinator's cancel): hand queued tiles
     * back uncomputed, so that every rank exits after at most one tile. */
    cancelled |= take_cancel();
    if (cancelled || ntk_stop_requested()) {
      if (ntk_stop_requested() && !told_interrupt) {
        told_interrupt = 1;
        if ((st = ntk_comm_send(0, NTK_TAG_INTERRUPT, NULL, 0))) return comm_failed(st);
      }
      if ((st = ntk_comm_send(0, NTK_TAG_SKIP, &index, sizeof index))) return comm_failed(st);
      continue;
    }
    struct ntk_tile t = ntk_tiling_tile(tiling, index);
    const void *payload;
    size_t len;
    uint64_t sum;
    st = ntk_engine_run(e, &t, &payload, &len, &sum);
    if (st) {
      /* Keep serving: the coordinator answers a failure with stop. */
      if ((st = send_fail(st))) return comm_failed(st);
      continue;
    }
    st = ntk_comm_send(0, NTK_TAG_RESULT, e->msg, sizeof(struct ntk_result_header) + len);
    if (st) return comm_failed(st);
    if (ntk_stop_requested() && !told_interrupt) {
      told_interrupt = 1;
      if ((st = ntk_comm_send(0, NTK_TAG_INTERRUPT, NULL, 0))) return comm_failed(st);
    }
  }
}
