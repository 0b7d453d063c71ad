/* Worker side: the tile engine (backend + codec) and the MPI message loop. */
#include "ntkd/worker.h"

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

ntk_status ntk_engine_run(ntk_engine_t *e, const struct ntk_tile *t, const void **payload, size_t *len,
                          uint64_t *checksum) {
  double t0 = ntk_now();
  size_t one = (size_t)(t->rows * t->cols) * (size_t)e->elem;
  int two = (e->kernels & NTK_KERNEL_NTK) != 0;
  ntk_status st = e->be->compute_tile(e->ctx, t, e->raw, two ? e->raw + one : NULL);
  if (st) return st;
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
      return ntk_error(NTK_ECOMM, "worker %d: unexpected message (tag %d, %zu bytes)", ntk_comm_rank(), tag, bytes);
    ntk_status st = ntk_comm_recv(0, NTK_TAG_WORK, &index, sizeof index);
    if (st) return st;
    if (index == NTK_WORK_STOP) {
      take_cancel(); /* one may still be in flight: leave nothing unreceived */
      return NTK_OK;
    }
    if (index >= tiling->ntiles)
      return ntk_error(NTK_ECOMM, "worker %d: tile %llu out of range", ntk_comm_rank(), (unsigned long long)index);
    /* Stopping (our signal, or the coordinator's cancel): hand queued tiles
     * back uncomputed, so that every rank exits after at most one tile. */
    cancelled |= take_cancel();
    if (cancelled || ntk_stop_requested()) {
      if (ntk_stop_requested() && !told_interrupt) {
        told_interrupt = 1;
        ntk_comm_send(0, NTK_TAG_INTERRUPT, NULL, 0);
      }
      if ((st = ntk_comm_send(0, NTK_TAG_SKIP, &index, sizeof index))) return st;
      continue;
    }
    struct ntk_tile t = ntk_tiling_tile(tiling, index);
    const void *payload;
    size_t len;
    uint64_t sum;
    st = ntk_engine_run(e, &t, &payload, &len, &sum);
    if (st) {
      const char *msg = ntk_error_message();
      ntk_comm_send(0, NTK_TAG_FAIL, msg, strlen(msg) + 1);
      /* Keep serving: the coordinator answers a failure with stop. */
      continue;
    }
    st = ntk_comm_send(0, NTK_TAG_RESULT, e->msg, sizeof(struct ntk_result_header) + len);
    if (st) return st;
    if (ntk_stop_requested() && !told_interrupt) {
      told_interrupt = 1;
      ntk_comm_send(0, NTK_TAG_INTERRUPT, NULL, 0);
    }
  }
}
