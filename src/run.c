/* `ntkd JOB.conf`: rank 0 reads and checks the job file, the data and the
 * store; every step ends with all ranks agreeing on its status before any
 * acts on it (HPL style), so a bad input stops every rank with one message
 * and the same exit code. Then rank 0 coordinates and the others work. */
#include "run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/arch.h"
#include "backend/backend.h"
#include "kernels/cnn.h"
#include "comm/comm.h"
#include "job/config.h"
#include "coordinator/coordinator.h"
#include "base/cpuinit.h"
#include "job/data.h"
#include "job/data_share.h"
#include "base/fsutil.h"
#include "base/signals.h"
#include "job/jobfiles.h"
#include "job/jobhash.h"
#include "store/lock.h"
#include "base/clock.h"
#include "solve/solve.h"
#include "store/store.h"
#include "base/magic.h"
#include "train/train.h"
#include "worker/worker.h"

/* Rank 0, holding the lock: resume the store of this job, refuse one of
 * another job (or anything that is not a store), or create it. */
static ntk_status open_store(const struct ntk_job *job, const struct ntk_store_info *want, const char *text,
                             int overwrite, ntk_store_t **out, int *created) {
  const char *path = job->out_path;
  int stale = ntk_clean_stale_tmp(path, NTK_MAGIC_STORE);
  if (stale) fprintf(stderr, "ntkd: removed %d temporary file%s left by a killed run\n", stale, stale == 1 ? "" : "s");
  struct stat sb;
  if (stat(path, &sb) == 0) {
    ntk_store_t *s = NULL;
    ntk_status st = ntk_store_open(path, NTK_STORE_READ, &s);
    int unusable = st == NTK_ECORRUPT || st == NTK_EINPUT;
    if (unusable && !overwrite)
      return ntk_error(NTK_EMISMATCH, "%s\n  %s exists and is not a usable ntkd store; use --overwrite "
                       "to replace it", ntk_error_message(), path);
    if (st && !unusable) return st;
    if (!st) {
      st = ntk_job_check_store(path, s, want, text, 0,
                               "use --overwrite to replace it, or set [output] path to a new file");
      ntk_store_close(s);
      if (st && !overwrite) return st;
      if (!st) {
        /* Resume: every payload checked, damage marked dead, the tail cut. */
        if ((st = ntk_store_resume(path, text, &s))) return st;
        const struct ntk_store_scan *sc = ntk_store_get_scan(s);
        fprintf(stderr, "ntkd: resuming %s: %llu of %llu tiles present", path,
                (unsigned long long)ntk_store_tiles_done(s), (unsigned long long)ntk_store_tiling(s)->needed);
        if (sc->regions)
          fprintf(stderr, ", %llu damaged region%s (%llu bytes) marked dead", (unsigned long long)sc->regions,
                  sc->regions == 1 ? "" : "s", (unsigned long long)sc->region_bytes);
        if (sc->damaged) fprintf(stderr, ", %llu damaged tiles to recompute", (unsigned long long)sc->damaged);
        if (sc->tail_bytes)
          fprintf(stderr, ", %llu bytes of %s tail cut", (unsigned long long)sc->tail_bytes,
                  sc->tail_damaged ? "damaged" : "torn");
        if (sc->header_damaged)
          fprintf(stderr, sc->header_damaged == 2 ? ", both damaged header copies rewritten" : ", a damaged header copy rewritten");
        fprintf(stderr, "\n");
        if (sc->index_damaged)
          fprintf(stderr, "ntkd: the index (%s.index) %s: not used; rebuilt from a scan of the records\n", path,
                  sc->index_problem);
        if (ntk_store_get_info(s)->tile != want->tile)
          fprintf(stderr, "ntkd: note: the store was started with tile = %u; keeping it (values are the "
                  "same for any tile size)\n", ntk_store_get_info(s)->tile);
        *out = s;
        return NTK_OK;
      }
    }
    fprintf(stderr, "ntkd: --overwrite: replacing %s\n", path);
  }
  ntk_status st = ntk_store_create(path, want, text, out);
  *created = !st;
  return st;
}


/* What the steps of a job share. */
struct run {
  const ntk_comm_t *comm;
  int rank, size;
  const char *conf;
  int overwrite;
  struct ntk_job *job;
  ntk_lock_t *lock;
  struct ntk_dataset data;
  ntk_data_share_t *shared;        /* one copy of the data per node */
  struct ntk_solve_labels labels;  /* a regression's: loaded once, kept for the solve */
  struct ntk_problem prob;
  int computes;                    /* this rank computes tiles (not the coordinator of several) */
  char nogpu[512];
  struct ntk_place_job pj;
  struct ntk_place place;
  ntk_store_t *store;              /* rank 0's */
  int store_created;               /* by this run: removed if the job stops with no record in it */
  ntk_worker_store_t *wstore;      /* a worker's */
  uint64_t tile;
  struct ntk_tiling tiling;
  ntk_engine_t *engine;
  int *depth;                      /* tiles each worker wants queued */
  double t_start, t_loaded, t_shared, t_ready;
};

/* 1. The job file: read on rank 0, parsed identically everywhere (the
 * network too: job->net). */
static ntk_status read_job(struct run *r) {
  char *text = NULL;
  size_t len = 0;
  ntk_status st = r->rank == 0 ? ntk_read_text_file(r->conf, &text, &len) : NTK_OK;
  if ((st = ntk_comm_agree_report(r->comm, st))) return st;
  uint64_t len64 = len;
  if ((st = ntk_comm_agree_report(r->comm, ntk_comm_bcast(r->comm, &len64, sizeof len64)))) return st;
  if (r->rank != 0 && !(text = calloc(1, (size_t)len64 + 1))) st = ntk_error(NTK_ENOMEM, "out of memory");
  if (!(st = ntk_comm_agree_report(r->comm, st)))
    st = ntk_comm_agree_report(r->comm, ntk_comm_bcast(r->comm, text, (size_t)len64));
  if (!st && !(r->job = calloc(1, sizeof *r->job))) st = ntk_comm_agree_report(r->comm, ntk_error(NTK_ENOMEM, "out of memory"));
  if (!st)
    st = ntk_comm_agree_report(r->comm, r->rank == 0 ? ntk_job_parse_string(text, r->conf, r->job)
                                                     : (ntk_job_parse_string(text, r->conf, r->job), NTK_OK));
  free(text);
  return st;
}

/* Before anything is read or written: no output may replace an input,
 * and one job at a time writes the store (or the training snapshot), for
 * its whole life, solve included. */
static ntk_status take_lock(struct run *r) {
  const struct ntk_job *job = r->job;
  ntk_status st = r->rank == 0 ? ntk_job_check_files(job) : NTK_OK;
  /* The solve's files too: a clash is found now, not after the tiles. */
  if (!st && r->rank == 0 && job->solve.enabled)
    st = ntk_solve_check_outputs(job->out_path, job, (uint32_t)job->kernels); /* names the job file's line */
  if (!st && r->rank == 0 && job->solve.enabled && (st = ntk_solve_check_ranks(job, r->size, ntk_comm_active())))
    st = ntk_error(st, "%s: %s", job->source, ntk_error_message());
  const char *owned = job->train.enabled ? job->train.snapshot : job->out_path;
  /* A path where no lock file can be made names its key's line (another
   * job's hold is about the file, not the line). */
  if (!st && r->rank == 0 && owned[0] &&
      (st = ntk_lock_acquire(owned, job->train.enabled ? "snapshot" : "store", &r->lock)) && st != NTK_ELOCKED)
    st = job->train.enabled ? ntk_job_error_at(job, job->train.snapshot_line, "[train] snapshot", st)
                            : ntk_job_error_at(job, job->out_path_line, "[output] path", st);
  return ntk_comm_agree_report(r->comm, st);
}

/* 2. The data: loaded on rank 0 and held once per node (under mpirun
 * read straight into the node's shared window); a regression's labels
 * (a [test] job's too, for a later ntkd solve) checked now, not after
 * the tiles. */
static ntk_status load_data(struct run *r) {
  const struct ntk_job *job = r->job;
  r->t_start = ntk_now();
  ntk_status st;
  if (r->size > 1) {
    st = ntk_data_share_load(r->comm, job, &r->data, &r->shared, &r->t_loaded);
  } else {
    st = ntk_comm_agree_report(r->comm, ntk_data_load_job(job, job->precision, &r->data));
    r->t_loaded = ntk_now();
  }
  if (!st && job->solve.enabled)
    st = ntk_comm_agree_report(r->comm, r->rank == 0 ? ntk_solve_labels_load(job, r->data.n_train,
                                                                             r->data.n - r->data.n_train, &r->labels)
                                                     : NTK_OK);
  else if (!st && job->labels_path[0]) /* a [test] job's, for a later solve */
    st = ntk_comm_agree_report(r->comm, r->rank == 0 ? ntk_solve_labels_check(job, r->data.n_train,
                                                                              r->data.n - r->data.n_train)
                                                     : NTK_OK);
  r->t_shared = ntk_now();
  return st;
}

/* 3. Does the network fit the data? Checked on rank 0 before the store is
 * touched, so a bad job leaves no file behind. */
static ntk_status check_network(struct run *r) {
  /* The stop signals' flag: a signal stops a tile inside itself. */
  r->prob = (struct ntk_problem){.arch = r->job->net, .data = &r->data, .kernels = r->job->kernels, .device = -1,
                                .stop = {{ntk_stop_flag(), NULL}, NULL}};
  ntk_status st = NTK_OK;
  /* Messages that name a layer begin "arch, layer N" (as the parser's
   * do): "[model] arch, layer N: ...", not "[model] arch: arch, ...";
   * those about the whole network "arch: ..." ("[model] arch: ...", not
   * "[model] arch: arch: ..."). */
  if (r->rank == 0 && (st = ntk_backend_check(&r->prob))) {
    const char *m = ntk_error_message();
    int named = !strncmp(m, "arch, ", 6) || !strncmp(m, "arch: ", 6);
    st = ntk_error(st, "%s:%d: [model] %s%s", r->conf, r->job->arch_line, named ? "" : "arch: ", m);
  }
  return ntk_comm_agree_report(r->comm, st);
}

/* 4. Placement (docs/GPU.md, "Placement"): the computing ranks, in slot
 * order, take distinct physical GPUs (by UUID); the coordinator takes
 * none; the rest compute on the CPU (auto) or stop the job (cuda). */
static ntk_status place_ranks(struct run *r) {
  static const struct ntk_place_words words = {
      "[compute] backend", "backend", "there is no usable GPU", "computing rank",
      "Start at most one worker per GPU (on the coordinator's node one rank more: rank 0 only coordinates)",
      "worker", ""};
  r->pj = (struct ntk_place_job){r->job->backend, r->computes, 0, r->nogpu, r->conf, &words};
  r->pj.gpu_arch = ntk_backend_gpu_computes(r->job->net, &r->data, r->nogpu, sizeof r->nogpu);
  ntk_status st = ntk_place_ranks(r->comm, &r->pj, &r->place);
  if (!st && r->job->backend == NTK_BACKEND_AUTO) {
    if (r->rank == 0 && !r->place.tally[3] && strstr(ntk_backend_names(), "cuda"))
      fprintf(stderr, "ntkd: no usable GPU (%s): computing on the CPU\n", r->place.why);
    else if (r->rank == 0 && r->place.tally[3] && !r->pj.gpu_arch)
      fprintf(stderr, "ntkd: %s: computing on the CPU\n", r->nogpu);
    /* Where GPUs are in use, a rank whose driver fails says so itself. */
    if (r->computes && r->place.list_failed && r->place.tally[3] && r->pj.gpu_arch)
      fprintf(stderr, "ntkd: rank %d cannot list its GPUs (%s): computing on the CPU\n", r->rank, r->place.why);
  }
  return st;
}

/* 5. The store (rank 0): resume, refuse, or create; its tile size is the
 * job's. The workers then open it too: they write their own tiles'
 * records (a worker on rank 0's node leaves the sync of its records to
 * rank 0's fdatasync, one page cache; elsewhere it syncs them itself). */
static ntk_status prepare_store(struct run *r) {
  const struct ntk_job *job = r->job;
  ntk_status st = NTK_OK;
  r->tile = job->tile;
  if (r->rank == 0) {
    struct ntk_store_info info;
    char *job_text = NULL;
    st = ntk_job_identity(job, job->net, &r->data, &info, &job_text);
    if (!st) st = open_store(job, &info, job_text, r->overwrite, &r->store, &r->store_created);
    free(job_text);
    if (!st) r->tile = ntk_store_get_info(r->store)->tile;
    if (!st && job->solve.enabled) st = ntk_solve_check_tile(job, r->tile); /* before any tile */
    char prec[512] = "float64", why[400];
    if (r->data.elem == 4 && ntk_arch_float32_widened(job->net, why, sizeof why)) /* the CPU backend's (arch.h) */
      snprintf(prec, sizeof prec, "float32 (computed in float64: %s)", why);
    else if (r->data.elem == 4)
      snprintf(prec, sizeof prec, "float32");
    if (!st)
      fprintf(stderr, "ntkd: %s: %zu samples x %zu features, %s, %s, tile %llu, %d rank%s\n", r->conf, r->data.n,
              r->data.d, info.kernels & NTK_KERNEL_NTK ? "NNGP+NTK" : "NNGP", prec, (unsigned long long)r->tile,
              r->size, r->size > 1 ? "s" : "");
  }
  st = ntk_comm_agree_report(r->comm, st);
  if (!st) st = ntk_comm_agree_report(r->comm, ntk_comm_bcast(r->comm, &r->tile, sizeof r->tile));
  if (st || r->size == 1) return st;
  struct ntk_store_info sinfo;
  memset(&sinfo, 0, sizeof sinfo);
  if (r->rank == 0) sinfo = *ntk_store_get_info(r->store);
  st = ntk_comm_agree_report(r->comm, ntk_comm_bcast(r->comm, &sinfo, sizeof sinfo));
  unsigned char none = 0;
  void *all = NULL;
  struct ntk_node_info node;
  if (!st) st = ntk_comm_agree_report(r->comm, ntk_comm_node_gather(r->comm, &none, 1, &all, &node));
  free(all);
  ntk_status ost = NTK_OK;
  if (!st && r->rank != 0)
    ost = ntk_worker_open_store(job->out_path, &sinfo, node.first_rank != 0, job->direct_io, &r->wstore);
  if (!st) st = ntk_comm_agree_report(r->comm, ost);
  return st;
}

/* 6. Each computing rank's engine on its device (auto: a GPU that fails
 * to start leaves its rank on the CPU), and each worker's pipeline depth,
 * which the coordinator keeps queued at it. */
static ntk_status start_engines(struct run *r) {
  const struct ntk_job *job = r->job;
  const struct ntk_backend_ops *cpu = ntk_backend_find("cpu");
  ntk_tiling_init(&r->tiling, r->data.n, r->tile);
  /* A GPU worker compresses on the cores its node leaves it: each rank of
   * the node says what it computes on (0 nothing, 1 the CPU, 2 a GPU). */
  unsigned char role = !r->computes ? 0 : r->place.device >= 0 ? 2 : 1, *roles = NULL;
  struct ntk_node_info node;
  ntk_status st = ntk_comm_agree_report(r->comm, ntk_comm_node_gather(r->comm, &role, 1, (void **)&roles, &node));
  if (st) return st;
  int cpu_workers = 0, gpu_workers = 0, online = 0, allowed = 0;
  for (int k = 0; k < node.size; k++) {
    cpu_workers += roles[k] == 1;
    gpu_workers += roles[k] == 2;
  }
  free(roles);
  if (role == 2) {
    online = ntk_cpu_cores(&allowed);
    double edge = (double)(r->tile < r->data.n ? r->tile : r->data.n);
    /* an engine slot: a tile's values and its compressed record, about as large */
    double buffer = 2 * edge * edge * r->data.elem * (r->job->kernels & NTK_KERNEL_NTK ? 2 : 1);
    r->prob.host_threads = ntk_engine_host_threads(online, allowed, cpu_workers, gpu_workers, ntk_cpu_memory(), buffer);
  }
  /* A worker keeps a tile's record while it is written in the background
   * (worker/serve.c): a buffer more. */
  int held = r->size > 1;
  if (r->computes && r->place.device >= 0) {
    r->prob.device = r->place.device;
    const struct ntk_backend_ops *cuda = ntk_backend_find("cuda");
    st = cuda ? ntk_engine_create(&r->prob, cuda, job->level, &r->tiling, held, &r->engine)
              : ntk_error(NTK_ECONFIG, "this ntkd was built without CUDA");
    if (!st)
      fprintf(stderr, "ntkd: rank %d: %d compression threads (%s: %d cores online, %d allowed to this rank, %d CPU and "
              "%d GPU workers)\n", r->rank, ntk_engine_threads(r->engine), node.host, online, allowed, cpu_workers,
              gpu_workers);
    if (st && st != NTK_EINTERRUPTED && job->backend == NTK_BACKEND_AUTO) {
      fprintf(stderr, "ntkd: rank %d: %s: computing on the CPU instead\n", r->rank, ntk_error_message());
      r->place.device = NTK_PLACE_CPU;
      st = ntk_engine_create(&r->prob, cpu, job->level, &r->tiling, held, &r->engine);
    }
  } else if (r->computes) {
    st = ntk_engine_create(&r->prob, cpu, job->level, &r->tiling, held, &r->engine);
  }
  st = ntk_comm_agree_report(r->comm, st);
  if (!st)
    st = ntk_place_started(r->comm, &r->pj, &r->place, r->computes && r->place.device >= 0, r->size == 1 ? 1 : r->size - 1);
  if (st) return st;
  double *d = calloc((size_t)r->size, sizeof *d);
  r->depth = calloc((size_t)r->size, sizeof *r->depth);
  st = ntk_comm_agree_report(r->comm, d && r->depth ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory"));
  if (!st && r->engine) d[r->rank] = ntk_engine_depth(r->engine);
  if (!st) st = ntk_comm_agree_report(r->comm, ntk_comm_sum_doubles(r->comm, d, (size_t)r->size));
  for (int k = 0; !st && k < r->size; k++) r->depth[k] = (int)d[k];
  free(d);
  return st;
}

/* 7. The tiles: rank 0 coordinates (and computes, alone), the others work. */
static ntk_status compute_tiles(struct run *r) {
  r->t_ready = ntk_now();
  ntk_status result = r->rank == 0 ? ntk_coordinator_run(r->comm, r->store, r->size == 1 ? r->engine : NULL, r->job,
                                                         r->depth)
                                   : ntk_worker_serve(r->comm, r->engine, &r->tiling, r->wstore,
                                                      r->job->worker_timeout);
  if (result && result != NTK_EINTERRUPTED)
    fprintf(stderr, "ntkd: %s%s\n", r->rank ? "worker: " : "error: ", ntk_error_message());
  else if (result)
    fprintf(stderr, "ntkd: %s\n", ntk_error_message());
  return ntk_comm_agree(r->comm, result);
}

/* After the tiles: the store synced (closed, and its file lock released,
 * only once the solve, which reads it, is done) and the times said. */
static ntk_status finish_tiles(struct run *r, ntk_status st) {
  ntk_worker_close_store(r->wstore);
  r->wstore = NULL;
  ntk_status synced = r->store ? ntk_store_sync(r->store) : NTK_OK;
  if (synced && !st) {
    fprintf(stderr, "ntkd: error: %s\n", ntk_error_message());
    st = synced;
  }
  if (!st && r->rank == 0) {
    fprintf(stderr, "ntkd: times: load data %.2f s, share %.2f s, store and set-up %.2f s, tiles %.2f s\n",
            r->t_loaded - r->t_start, r->t_shared - r->t_loaded, r->t_ready - r->t_shared, ntk_now() - r->t_ready);
    fprintf(stderr, "ntkd: result in %s\n", r->job->out_path);
  }
  return st;
}

/* 8. Kernel regression: every rank takes part (the method decides how:
 * src/solve/, docs/SOLVE.md), through the writer's own handle of the
 * store and the labels loaded in step 2. */
static ntk_status solve(struct run *r) {
  ntk_cpu_single_thread();
  return ntk_solve(r->comm, r->job->out_path, r->store, r->job, &r->labels, NULL, 0, NULL); /* prints its own errors */
}

/* Everything the steps made, in reverse; the store's close is its last
 * fsync. */
static ntk_status release(struct run *r, ntk_status st) {
  int removed = 0;
  /* A job stopped between its new store and its first record (a sample
   * refused by the engine's checks, a first tile refused) leaves no file
   * behind, as one stopped before its store does: else the rerun with the
   * cure meets "a store of another job". ntk_store_discard keeps a store
   * with anything in it, on disk or reserved. */
  ntk_status closed = st && r->store_created ? ntk_store_discard(r->store, &removed) : ntk_store_close(r->store);
  if (removed) fprintf(stderr, "ntkd: removed %s, created by this run with no tile in it\n", r->job->out_path);
  if (closed && !st) {
    fprintf(stderr, "ntkd: error: %s\n", ntk_error_message());
    st = closed;
  }
  ntk_worker_close_store(r->wstore);
  ntk_solve_labels_free(&r->labels);
  ntk_engine_free(r->engine);
  free(r->depth);
  ntk_data_unshare(r->shared, &r->data);
  ntk_lock_release(r->lock);
  ntk_job_free(r->job);
  free(r->job);
  return st;
}

int ntk_run_job(const ntk_comm_t *comm, const char *conf_path, int overwrite) {
  struct run r;
  memset(&r, 0, sizeof r);
  r.comm = comm;
  r.rank = ntk_comm_rank(comm);
  r.size = ntk_comm_size(comm);
  r.conf = conf_path;
  r.overwrite = overwrite;
  r.computes = r.size == 1 || r.rank != 0;
  r.place.device = r.computes ? NTK_PLACE_CPU : NTK_PLACE_NONE;
  ntk_cpu_single_thread();
  ntk_status st = read_job(&r);
  if (!st) st = take_lock(&r);
  if (!st && r.job->train.enabled) /* a [train] section: an MLP to train, not a kernel */
    st = ntk_train_run(comm, r.job, overwrite);
  else {
    if (!st) st = load_data(&r);
    if (!st) st = check_network(&r);
    if (!st) st = place_ranks(&r);
    if (!st) st = prepare_store(&r);
    if (!st) st = start_engines(&r);
    if (!st) st = compute_tiles(&r);
    if (r.job) st = finish_tiles(&r, st);
    if (!st && r.job->solve.enabled) st = solve(&r);
  }
  return ntk_status_exit_code(release(&r, st));
}
