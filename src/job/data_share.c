/* One copy of the input per node: rank 0 -> node leaders (broadcast among
 * them) -> each node's shared window, read in place by its ranks. At
 * N = 60 000 Fashion-MNIST (188 MB) and 9 ranks on a node that is one copy
 * instead of nine (docs/PERFORMANCE.md).
 *
 * The steps, on every rank in this order:
 *   1. agree on rank 0's load so far, then broadcast the data's shape;
 *   2. open the window (split into nodes and leaders, allocate; where a
 *      node cannot share, every rank its own copy);
 *   3. (ntk_data_share_load: rank 0 reads the values straight into it)
 *      agree on the load, copy rank 0's values in where they are not
 *      there yet, broadcast among the leaders, fence. */
#include "job/data_share.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

struct ntk_data_share {
  ntk_comm_t *node, *leaders; /* leaders: NULL on ranks that lead no node */
  ntk_comm_shared_t *window;
  void *base; /* the window's memory on this rank */
};

/* Step 1. `load`: rank 0's status so far (others pass NTK_OK). */
static ntk_status announce(const ntk_comm_t *world, ntk_status load, struct ntk_dataset *ds) {
  ntk_status st = ntk_comm_agree_report(world, load);
  if (st) return st;
  uint64_t dims[9] = {ds->n, ds->d, ds->h, ds->w, ds->c, (uint64_t)ds->elem, ds->n_train, (uint64_t)ds->one_d,
                      ds->pattern};
  if ((st = ntk_comm_agree_report(world, ntk_comm_bcast(world, dims, sizeof dims)))) return st;
  if (ntk_comm_rank(world) != 0) {
    ds->n = dims[0];
    ds->d = dims[1];
    ds->h = dims[2];
    ds->w = dims[3];
    ds->c = dims[4];
    ds->elem = (int)dims[5];
    ds->n_train = dims[6];
    ds->one_d = (int)dims[7];
    ds->pattern = dims[8];
    ds->x = NULL;
  }
  return NTK_OK;
}

static size_t data_bytes(const struct ntk_dataset *ds) { return ds->n * ds->d * (size_t)ds->elem; }

/* Step 2: *out, with sh->base the node's window, or NULL where the ranks
 * hold a copy each (then *mine: this rank's memory for it; rank 0's own
 * values stay where they are, NULL). */
static ntk_status open_window(const ntk_comm_t *world, const struct ntk_dataset *ds, ntk_data_share_t **out,
                              void **mine) {
  *out = NULL;
  *mine = NULL;
  int rank = ntk_comm_rank(world);
  size_t bytes = data_bytes(ds);
  ntk_data_share_t *sh = calloc(1, sizeof *sh);
  ntk_status st = sh ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory");
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
      if (rank != 0 && !(*mine = malloc(bytes ? bytes : 1)))
        st = ntk_error(NTK_ENOMEM, "out of memory for %zu x %zu data", ds->n, ds->d);
      st = ntk_comm_agree_report(world, st);
    }
  }
  if (st) {
    free(*mine);
    *mine = NULL;
    if (sh) {
      ntk_comm_shared_free(sh->window);
      ntk_comm_free(sh->leaders);
      ntk_comm_free(sh->node);
      free(sh);
    }
    return st;
  }
  *out = sh;
  return NTK_OK;
}

/* Step 3. `load`: rank 0's status of its load into the window (NTK_OK
 * where it was agreed on in step 1). On failure everything is released
 * (ntk_data_unshare). */
static ntk_status fill(const ntk_comm_t *world, ntk_status load, struct ntk_dataset *ds, ntk_data_share_t *sh,
                       void *mine) {
  int rank = ntk_comm_rank(world);
  size_t bytes = data_bytes(ds);
  ntk_status st = ntk_comm_agree_report(world, load);
  if (!st && !sh->base) { /* a copy on every rank */
    if (rank != 0) ds->x = mine;
    mine = NULL;
    st = ntk_comm_agree_report(world, ntk_comm_bcast(world, ds->x, bytes));
  } else if (!st) {
    /* Rank 0 is the first leader (ranks keep world order), so it is the
     * leaders' rank 0, the root of their broadcast. */
    if (rank == 0 && ds->x != sh->base) {
      if (bytes) memcpy(sh->base, ds->x, bytes);
      free(ds->x);
    }
    ds->x = sh->base;
    if (sh->leaders) st = ntk_comm_bcast(sh->leaders, sh->base, bytes);
    st = ntk_comm_agree_report(world, st);
    if (!st) st = ntk_comm_agree_report(world, ntk_comm_shared_fence(sh->window));
  }
  free(mine);
  double nodes = sh->base && sh->leaders ? 1 : 0;
  if (!st && sh->base) st = ntk_comm_agree_report(world, ntk_comm_sum_doubles(world, &nodes, 1));
  if (!st && rank == 0 && sh->base)
    fprintf(stderr, "ntkd: data: one copy per node on %.0f node%s (%.1f MB each)\n", nodes, nodes == 1 ? "" : "s",
            (double)bytes / 1e6);
  if (st) ntk_data_unshare(sh, ds);
  return st;
}

ntk_status ntk_data_share(const ntk_comm_t *world, struct ntk_dataset *ds, ntk_data_share_t **out) {
  *out = NULL;
  ntk_status st = announce(world, NTK_OK, ds);
  ntk_data_share_t *sh = NULL;
  void *mine = NULL;
  if (!st) st = open_window(world, ds, &sh, &mine);
  if (!st) st = fill(world, NTK_OK, ds, sh, mine);
  if (!st) *out = sh;
  return st;
}

/* Rank 0's load asks for its values' memory once their shape is known
 * (ntk_data_load_to): steps 1 and 2 then, so that the values go straight
 * into the node's window. */
struct share_load {
  const ntk_comm_t *world;
  ntk_data_share_t *sh;
  int inside; /* steps 1 and 2 ran inside the load */
};

static ntk_status place(void *ctx, const struct ntk_dataset *shape, void **x) {
  struct share_load *L = ctx;
  struct ntk_dataset ds = *shape;
  void *mine = NULL; /* NULL on rank 0 */
  L->inside = 1;
  ntk_status st = announce(L->world, NTK_OK, &ds);
  if (!st) st = open_window(L->world, &ds, &L->sh, &mine);
  *x = st ? NULL : L->sh->base; /* no window: the loader's own memory, broadcast in step 3 */
  return st;
}

ntk_status ntk_data_share_load(const ntk_comm_t *world, const struct ntk_job *job, struct ntk_dataset *ds,
                               ntk_data_share_t **out, double *loaded) {
  *out = NULL;
  struct share_load L = {world, NULL, 0};
  ntk_status load = NTK_OK, st;
  void *mine = NULL;
  if (ntk_comm_rank(world) == 0) {
    const struct ntk_data_sink sink = {place, &L};
    load = ntk_data_load_to(job, job->precision, &sink, ds);
    if (L.inside && !L.sh) return load; /* steps 1 or 2 failed everywhere, agreed and reported */
  } else {
    memset(ds, 0, sizeof *ds);
  }
  /* The other ranks, and rank 0 where its load asked for no memory (a
   * compressed file, a [test] set) or failed before: steps 1 and 2 now. */
  if (!L.inside) {
    if (!(st = announce(world, load, ds))) st = open_window(world, ds, &L.sh, &mine);
    if (st) {
      ntk_data_free(ds);
      return st;
    }
    load = NTK_OK;
  }
  *loaded = ntk_now();
  if ((st = fill(world, load, ds, L.sh, mine))) return st;
  *out = L.sh;
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
