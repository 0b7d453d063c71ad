/* One copy of the input per node: rank 0 -> node leaders (broadcast among
 * them) -> each node's shared window, read in place by its ranks. At
 * N = 60 000 Fashion-MNIST (188 MB) and 9 ranks on a node that is one copy
 * instead of nine (docs/PERFORMANCE.md). */
#include "job/data_share.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ntk_data_share {
  ntk_comm_t *node, *leaders; /* leaders: NULL on ranks that lead no node */
  ntk_comm_shared_t *window;
  void *base; /* the window's memory on this rank */
};

ntk_status ntk_data_share(const ntk_comm_t *world, struct ntk_dataset *ds, ntk_data_share_t **out) {
  *out = NULL;
  int rank = ntk_comm_rank(world);
  uint64_t dims[8] = {ds->n, ds->d, ds->h, ds->w, ds->c, (uint64_t)ds->elem, ds->n_train, (uint64_t)ds->one_d};
  ntk_status st = ntk_comm_agree_report(world, ntk_comm_bcast(world, dims, sizeof dims));
  if (st) return st;
  if (rank != 0) {
    ds->n = dims[0];
    ds->d = dims[1];
    ds->h = dims[2];
    ds->w = dims[3];
    ds->c = dims[4];
    ds->elem = (int)dims[5];
    ds->n_train = dims[6];
    ds->one_d = (int)dims[7];
    ds->x = NULL;
  }
  size_t bytes = ds->n * ds->d * (size_t)ds->elem;
  ntk_data_share_t *sh = calloc(1, sizeof *sh);
  st = sh ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory");
  if (!(st = ntk_comm_agree_report(world, st))) st = ntk_comm_split_node(world, &sh->node);
  if (!(st = ntk_comm_agree_report(world, st))) {
    int leads = ntk_comm_rank(sh->node) == 0;
    st = ntk_comm_split(world, leads ? 0 : -1, &sh->leaders);
  }
  void *base = NULL;
  if (!(st = ntk_comm_agree_report(world, st))) {
    ntk_status ast = ntk_comm_shared_alloc(sh->node, bytes, &sh->window, &base);
    /* Where a node cannot share (too little /dev/shm, a file-size limit),
     * every rank holds its own copy, as before: slower to start, as right. */
    char why[512] = "";
    if (ast) snprintf(why, sizeof why, "%s", ntk_error_message());
    double fails = ast ? 1 : 0;
    st = ntk_comm_agree_report(world, ntk_comm_sum_doubles(world, &fails, 1));
    if (!st && fails == 0) {
      sh->base = base;
    } else if (!st) {
      if (ast && ntk_comm_rank(sh->node) == 0) fprintf(stderr, "ntkd: rank %d: note: the data cannot be shared in node memory (%s): each rank holds "
                       "its own copy\n", rank, why);
      ntk_comm_shared_free(sh->window); /* collective over the node: every rank, allocated or not */
      sh->window = NULL;
      base = rank == 0 ? ds->x : malloc(bytes ? bytes : 1);
      st = base ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory for %zu x %zu data", ds->n, ds->d);
      if (!st) ds->x = base;
      if (!(st = ntk_comm_agree_report(world, st))) st = ntk_comm_agree_report(world, ntk_comm_bcast(world, base, bytes));
      if (st) {
        ntk_data_unshare(sh, ds);
        return st;
      }
      *out = sh;
      return NTK_OK;
    }
  }
  if (!st) {
    /* Rank 0 is the first leader (ranks keep world order), so it is the
     * leaders' rank 0, the root of their broadcast. */
    if (rank == 0) {
      if (bytes) memcpy(base, ds->x, bytes);
      free(ds->x);
    }
    ds->x = base;
    if (sh->leaders) st = ntk_comm_bcast(sh->leaders, base, bytes);
    st = ntk_comm_agree_report(world, st);
  }
  if (!st) st = ntk_comm_agree_report(world, ntk_comm_shared_fence(sh->window));
  double nodes = sh && sh->leaders ? 1 : 0;
  if (!st) st = ntk_comm_agree_report(world, ntk_comm_sum_doubles(world, &nodes, 1));
  if (!st && rank == 0)
    fprintf(stderr, "ntkd: data: one copy per node on %.0f node%s (%.1f MB each)\n", nodes, nodes == 1 ? "" : "s",
            (double)bytes / 1e6);
  if (st) {
    ntk_data_unshare(sh, ds);
    return st;
  }
  *out = sh;
  return NTK_OK;
}

void ntk_data_unshare(ntk_data_share_t *sh, struct ntk_dataset *ds) {
  if (!sh) {
    ntk_data_free(ds);
    return;
  }
  if (sh->base && ds->x == sh->base) ds->x = NULL; /* the window's memory, not ours to free */
  ntk_comm_shared_free(sh->window);
  ntk_comm_free(sh->leaders);
  ntk_comm_free(sh->node);
  free(sh);
  ntk_data_free(ds);
}
