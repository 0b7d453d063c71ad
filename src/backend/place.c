/* Where each rank of a job computes (docs/GPU.md, "Placement"): the pure
 * table of a node (ntk_backend_place_node) and, around it, what a kernel
 * job (run.c) and a training job (train/train.c) both do, written once:
 * each rank lists the GPUs it sees, the ranks of a node exchange the
 * lists, each works out its row, and the job agrees on the outcome and
 * says it. */
#include "backend/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Augmenting path from rank r (Kuhn): r takes a device it sees that is
 * free, or whose owner can move to another; devices in r's own order. */
static int augment(int r, int n, const struct ntk_gpu_view *v, const int *const *ids, int *owner, int *held,
                   unsigned char *seen) {
  for (int k = 0; k < v[r].n; k++) {
    int u = ids[r][k];
    if (u < 0 || seen[u]) continue;
    seen[u] = 1;
    if (owner[u] < 0 || augment(owner[u], n, v, ids, owner, held, seen)) {
      owner[u] = r;
      held[r] = k;
      return 1;
    }
  }
  return 0;
}

void ntk_backend_place_node(int pref, int gpu_arch, int n, const struct ntk_gpu_view *v, int *place,
                            struct ntk_place_summary *sum) {
  struct ntk_place_summary s = {0, 0, 0};
  /* Distinct UUIDs the computing ranks see, numbered in order of first
   * sight; ids[r][k] is the number of rank r's device k (-1: a repeat of
   * an earlier device in r's own list, never taken). */
  size_t cap = 0;
  for (int r = 0; r < n; r++)
    if (v[r].computes && v[r].n > 0) cap += (size_t)(v[r].n < NTK_GPU_MAX ? v[r].n : NTK_GPU_MAX);
  const unsigned char **uuid = malloc((cap ? cap : 1) * sizeof *uuid);
  int *idbuf = malloc((cap ? cap : 1) * sizeof *idbuf);
  const int **ids = calloc(n > 0 ? (size_t)n : 1, sizeof *ids);
  int *owner = malloc((cap ? cap : 1) * sizeof *owner), *held = malloc((n > 0 ? (size_t)n : 1) * sizeof *held);
  unsigned char *seen = malloc(cap ? cap : 1);
  int nomem = !uuid || !idbuf || !ids || !owner || !held || !seen;
  size_t used = 0;
  for (int r = 0; r < n; r++) {
    held[r] = -1;
    if (v[r].computes) s.computing++;
    if (nomem || !v[r].computes || v[r].n <= 0) continue;
    int *my = idbuf + used;
    ids[r] = my;
    int nd = v[r].n < NTK_GPU_MAX ? v[r].n : NTK_GPU_MAX;
    for (int k = 0; k < nd; k++) {
      int u = 0;
      while (u < s.distinct && memcmp(uuid[u], v[r].dev[k].uuid, NTK_GPU_UUID_BYTES)) u++;
      if (u == s.distinct) uuid[s.distinct++] = v[r].dev[k].uuid;
      for (int j = 0; j < k; j++)
        if (my[j] == u) u = -1;
      my[k] = u;
    }
    used += (size_t)nd;
  }
  int gpus = !nomem && pref != NTK_BACKEND_CPU && gpu_arch;
  if (gpus) {
    for (int u = 0; u < s.distinct; u++) owner[u] = -1;
    /* Greedy in slot order: the first device, in the rank's own order,
     * that no earlier rank took. */
    for (int r = 0; r < n; r++)
      for (int k = 0; ids[r] && k < v[r].n && k < NTK_GPU_MAX; k++) {
        int u = ids[r][k];
        if (u >= 0 && owner[u] < 0) {
          owner[u] = r;
          held[r] = k;
          break;
        }
      }
    /* Then the ranks left over, in slot order: an augmenting path each. */
    for (int r = 0; r < n; r++)
      if (ids[r] && held[r] < 0) {
        memset(seen, 0, (size_t)s.distinct);
        augment(r, n, v, ids, owner, held, seen);
      }
  }
  for (int r = 0; r < n; r++) {
    if (!v[r].computes) place[r] = NTK_PLACE_NONE;
    else if (gpus && held[r] >= 0) place[r] = held[r], s.on_gpu++;
    else place[r] = pref == NTK_BACKEND_CUDA ? NTK_PLACE_NO_GPU : NTK_PLACE_CPU;
  }
  free(uuid);
  free(idbuf);
  free(ids);
  free(owner);
  free(held);
  free(seen);
  if (sum) *sum = s;
}

ntk_status ntk_backend_place_rank(int pref, int gpu_arch, int n, const struct ntk_gpu_view *v, int me,
                                  const char *host, int *place, struct ntk_place_summary *sum) {
  int *table = malloc((size_t)(n > 0 ? n : 1) * sizeof *table);
  if (!table) return ntk_error(NTK_ENOMEM, "out of memory");
  ntk_backend_place_node(pref, gpu_arch, n, v, table, sum);
  *place = table[me];
  free(table);
  if (*place >= 0) {
    const struct ntk_gpu_view *mine = &v[me];
    const struct ntk_gpu_info *d = &mine->dev[*place];
    char u[32];
    ntk_gpu_uuid_short(d->uuid, u, sizeof u);
    fprintf(stderr, "ntkd: rank %d on %s: GPU %d of the %d it sees: %s, %s, PCI %s\n", mine->rank, host, *place,
            mine->n, d->name, u, d->pci);
  }
  return NTK_OK;
}

int ntk_backend_place(int pref, int slot, int ngpus, int gpu_arch) {
  if (slot < 0) return NTK_PLACE_NONE;
  struct ntk_gpu_view *v = calloc((size_t)slot + 1, sizeof *v);
  int *place = malloc(((size_t)slot + 1) * sizeof *place);
  int out = pref == NTK_BACKEND_CUDA ? NTK_PLACE_NO_GPU : NTK_PLACE_CPU;
  if (v && place) {
    for (int r = 0; r <= slot; r++) {
      v[r].computes = 1;
      v[r].n = ngpus < NTK_GPU_MAX ? ngpus : NTK_GPU_MAX;
      for (int k = 0; k < v[r].n; k++) v[r].dev[k].uuid[0] = (unsigned char)(k + 1);
    }
    ntk_backend_place_node(pref, gpu_arch, slot + 1, v, place, NULL);
    out = place[slot];
  }
  free(v);
  free(place);
  return out;
}

/* The reason rank 0 gives for the job: its own, or when it only
 * coordinates, that of the first computing rank of its node. */
static void job_reason(const struct ntk_gpu_view *v, int n, int computes, char *why, size_t cap) {
  if (computes) return;
  for (int i = 0; i < n; i++)
    if (v[i].computes && v[i].n <= 0) {
      snprintf(why, cap, "rank %d: %s", v[i].rank, v[i].why);
      return;
    }
}

ntk_status ntk_place_ranks(const ntk_comm_t *comm, const struct ntk_place_job *j, struct ntk_place *p) {
  int rank = ntk_comm_rank(comm);
  memset(p, 0, sizeof *p);
  p->device = j->computes ? NTK_PLACE_CPU : NTK_PLACE_NONE;
  if (j->pref == NTK_BACKEND_CPU) return NTK_OK;
  struct ntk_gpu_view *view = calloc(1, sizeof *view);
  if (view) {
    view->rank = rank;
    view->computes = j->computes;
    ntk_backend_gpu_list(rank, view);
    snprintf(p->why, sizeof p->why, "%s", view->why);
    p->list_failed = view->n < 0;
  }
  ntk_status st = ntk_comm_agree_report(comm, view ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory"));
  void *all = NULL;
  struct ntk_node_info node;
  if (!st) st = ntk_comm_agree_report(comm, ntk_comm_node_gather(comm, view, sizeof *view, &all, &node));
  ntk_status pst = NTK_OK;
  const struct ntk_place_words *w = j->words;
  if (!st) {
    const struct ntk_gpu_view *v = all;
    job_reason(v, node.size, j->computes, p->why, sizeof p->why);
    struct ntk_place_summary sum = {0, 0, 0};
    int place = p->device;
    pst = ntk_backend_place_rank(j->pref, j->gpu_arch, node.size, v, node.index, node.host, &place, &sum);
    if (node.index == 0) p->tally[2] = 1, p->tally[3] = sum.distinct;
    if (pst) {
      place = j->computes ? NTK_PLACE_CPU : NTK_PLACE_NONE;
    } else if (place >= 0) {
      p->tally[0] = 1;
    } else if (place == NTK_PLACE_NO_GPU && !sum.distinct) {
      char none[64];
      snprintf(none, sizeof none, w->none, rank);
      pst = ntk_error(NTK_ECONFIG, "%s: %s = cuda, but %s: %s", j->source, w->key, none, view->why);
    } else if (place == NTK_PLACE_NO_GPU && !j->gpu_arch) {
      pst = ntk_error(NTK_ECONFIG, "%s: %s = cuda: %s (%s = auto computes it on the CPU)", j->source, w->key,
                      j->nogpu, w->setting);
    } else if (place == NTK_PLACE_NO_GPU) {
      char mine[400];
      if (view->n < 0) snprintf(mine, sizeof mine, "; this rank cannot list its GPUs: %s", view->why);
      else snprintf(mine, sizeof mine, "; this rank sees %d of them, all taken by the ranks before it", view->n);
      pst = ntk_error(NTK_ECONFIG, "%s: %s = cuda, but rank %d gets no GPU: node %s has %d distinct GPU%s visible "
                      "to its %d %s%s%s. %s, let each rank see GPUs of its own, or use %s = auto to put the rest "
                      "on the CPU", j->source, w->key, rank, node.host, sum.distinct, sum.distinct == 1 ? "" : "s",
                      sum.computing, w->peers, sum.computing == 1 ? "" : "s", mine, w->advice, w->setting);
    }
    p->device = place;
  }
  free(all);
  free(view);
  if (!st) st = ntk_comm_agree_report(comm, pst); /* each rank that cannot be placed says why */
  if (!st) st = ntk_comm_agree_report(comm, ntk_comm_sum_doubles(comm, p->tally + 2, 2));
  return st;
}

ntk_status ntk_place_started(const ntk_comm_t *comm, const struct ntk_place_job *j, struct ntk_place *p, int on_gpu,
                             int units) {
  if (j->pref == NTK_BACKEND_CPU) return NTK_OK;
  const struct ntk_place_words *w = j->words;
  p->tally[1] = on_gpu; /* counted once started: a GPU that failed to start is not one */
  ntk_status st = ntk_comm_agree_report(comm, ntk_comm_sum_doubles(comm, p->tally, 2));
  if (!st && ntk_comm_rank(comm) == 0 && p->tally[3] > 0) {
    int placed = (int)p->tally[0], gpus = (int)p->tally[1];
    /* One write: mpirun forwards the ranks' stderr, and another rank's line
     * may otherwise land inside this one. */
    char line[512], fell[96] = "";
    if (placed > gpus)
      snprintf(fell, sizeof fell, "; %d GPU %s%s fell back to the CPU", placed - gpus, w->unit,
               placed - gpus == 1 ? "" : "s");
    snprintf(line, sizeof line, "ntkd: placement: %d of %d %s%s %son GPUs (CUDA), %d on the CPU; %d distinct GPU%s "
             "seen on %d node%s%s\n", gpus, units, w->unit, units == 1 ? "" : "s", w->verb, units - gpus,
             (int)p->tally[3], p->tally[3] == 1 ? "" : "s", (int)p->tally[2], p->tally[2] == 1 ? "" : "s", fell);
    fputs(line, stderr);
  }
  return st;
}
