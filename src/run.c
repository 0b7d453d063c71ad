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
#include "job/jobfiles.h"
#include "job/jobhash.h"
#include "store/lock.h"
#include "base/clock.h"
#include "solve/solve.h"
#include "store/store.h"
#include "train/train.h"
#include "worker/worker.h"

/* Rank 0, holding the lock: resume the store of this job, refuse one of
 * another job (or anything that is not a store), or create it. */
static ntk_status open_store(const struct ntk_job *job, const struct ntk_store_info *want, const char *text,
                             int overwrite, ntk_store_t **out) {
  const char *path = job->out_path;
  int stale = ntk_clean_stale_tmp(path);
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
      st = ntk_job_check_store(path, s, want, text, "use --overwrite to replace it, or set [output] path to a new file");
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
        if (sc->header_damaged) fprintf(stderr, ", a damaged header copy rewritten");
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
  return ntk_store_create(path, want, text, out);
}


int ntk_run_job(const ntk_comm_t *comm, const char *conf_path, int overwrite) {
  int rank = ntk_comm_rank(comm), size = ntk_comm_size(comm);
  ntk_cpu_single_thread();

  /* 1. The job file: read on rank 0, parsed identically everywhere. */
  char *text = NULL;
  size_t len = 0;
  ntk_status st = rank == 0 ? ntk_read_text_file(conf_path, &text, &len) : NTK_OK;
  if ((st = ntk_comm_agree_report(comm, st))) return ntk_status_exit_code(st);
  uint64_t len64 = len;
  if ((st = ntk_comm_agree_report(comm, ntk_comm_bcast(comm, &len64, sizeof len64)))) return ntk_status_exit_code(st);
  if (rank != 0 && !(text = calloc(1, (size_t)len64 + 1))) st = ntk_error(NTK_ENOMEM, "out of memory");
  if (!(st = ntk_comm_agree_report(comm, st))) st = ntk_comm_agree_report(comm, ntk_comm_bcast(comm, text, (size_t)len64));
  struct ntk_job *job = calloc(1, sizeof *job);
  if (!st && !job) st = ntk_comm_agree_report(comm, ntk_error(NTK_ENOMEM, "out of memory"));
  if (!st) st = ntk_comm_agree_report(comm, rank == 0 ? ntk_job_parse_string(text, conf_path, job)
                                : (ntk_job_parse_string(text, conf_path, job), NTK_OK));
  free(text);
  /* Before anything is read or written: no output may replace an input,
   * and one job at a time writes the store (or the training snapshot), for
   * its whole life, solve included. */
  ntk_lock_t *lock = NULL;
  if (!st) {
    ntk_status fst = rank == 0 ? ntk_job_check_files(job) : NTK_OK;
    const char *owned = job->train.enabled ? job->train.snapshot : job->out_path;
    if (!fst && rank == 0 && owned[0])
      fst = ntk_lock_acquire(owned, job->train.enabled ? "snapshot" : "store", &lock);
    st = ntk_comm_agree_report(comm, fst);
  }
  if (!st && job->train.enabled) { /* a [train] section: an MLP to train, not a kernel */
    st = ntk_train_run(comm, job, overwrite);
    ntk_lock_release(lock);
    ntk_job_free(job);
    free(job);
    return ntk_status_exit_code(st);
  }
  const struct ntk_arch *arch = job->net; /* parsed with the job file */


  double t_start = ntk_now(), t_loaded = 0, t_shared = 0, t_ready = 0;
  /* 2. The data: loaded on rank 0, broadcast to the workers. */
  struct ntk_dataset data;
  memset(&data, 0, sizeof data);
  if (!st) st = ntk_comm_agree_report(comm, rank == 0 ? ntk_data_load_job(job, job->precision, &data) : NTK_OK);
  struct ntk_solve_labels labels = {0}; /* a regression's: loaded once, kept for the solve */
  /* Labels of a regression are checked now, not after the tiles. */
  if (!st && job->solve.enabled)
    st = ntk_comm_agree_report(comm, rank == 0 ? ntk_solve_labels_load(job, data.n_train, data.n - data.n_train, &labels)
                                              : NTK_OK);
  t_loaded = ntk_now();
  ntk_data_share_t *shared = NULL; /* one copy of the data per node */
  if (!st && size > 1) st = ntk_data_share(comm, &data, &shared);

  t_shared = ntk_now();
  /* 3. Does the network fit the data? Checked on rank 0 before the store
   * is touched, so a bad job leaves no file behind. */
  struct ntk_problem prob = {arch, &data, job->kernels, -1};
  const struct ntk_backend_ops *backend = ntk_backend_find("cpu");
  if (!st) {
    ntk_status pst = NTK_OK;
    if (rank == 0 && (pst = ntk_backend_check(&prob)))
      pst = ntk_error(pst, "%s:%d: [model] arch: %s", conf_path, job->arch_line, ntk_error_message());
    st = ntk_comm_agree_report(comm, pst);
  }

  /* 4. Placement (docs/GPU.md, "Placement"): the computing ranks, in slot
   * order, take distinct physical GPUs (by UUID); the coordinator takes
   * none; the rest compute on the CPU (auto) or stop the job (cuda). */
  static const struct ntk_place_words words = {
      "[compute] backend", "backend", "there is no usable GPU", "computing rank",
      "Start at most one worker per GPU (on the coordinator's node one rank more: rank 0 only coordinates)",
      "worker", ""};
  char nogpu[512] = "";
  int computes = size == 1 || rank != 0;
  struct ntk_place_job pj = {job->backend, computes, 0, nogpu, conf_path, &words};
  struct ntk_place place = {computes ? NTK_PLACE_CPU : NTK_PLACE_NONE, 0, "", {0, 0, 0, 0}};
  if (!st) {
    pj.gpu_arch = ntk_backend_gpu_computes(arch, &data, nogpu, sizeof nogpu);
    st = ntk_place_ranks(comm, &pj, &place);
  }
  if (!st && job->backend == NTK_BACKEND_AUTO) {
    if (rank == 0 && !place.tally[3] && strstr(ntk_backend_names(), "cuda"))
      fprintf(stderr, "ntkd: no usable GPU (%s): computing on the CPU\n", place.why);
    else if (rank == 0 && place.tally[3] && !pj.gpu_arch)
      fprintf(stderr, "ntkd: %s: computing on the CPU\n", nogpu);
    /* Where GPUs are in use, a rank whose driver fails says so itself. */
    if (computes && place.list_failed && place.tally[3] && pj.gpu_arch)
      fprintf(stderr, "ntkd: rank %d cannot list its GPUs (%s): computing on the CPU\n", rank, place.why);
  }

  /* 5. The store (rank 0): resume, refuse, or create. The workers then
   * open it too: they write their own tiles' records. */
  ntk_store_t *store = NULL;
  ntk_worker_store_t *wstore = NULL;
  struct ntk_store_info sinfo;
  memset(&sinfo, 0, sizeof sinfo);
  uint64_t tile = job->tile;
  if (!st) {
    if (rank == 0) {
      struct ntk_store_info info;
      char *job_text = NULL;
      st = ntk_job_identity(job, arch, &data, &info, &job_text);
      if (!st) st = open_store(job, &info, job_text, overwrite, &store);
      free(job_text);
      if (!st) tile = ntk_store_get_info(store)->tile;
      if (!st)
        fprintf(stderr, "ntkd: %s: %zu samples x %zu features, %s, %s, tile %llu, %d rank%s\n", conf_path,
                data.n, data.d, info.kernels & NTK_KERNEL_NTK ? "NNGP+NTK" : "NNGP",
                data.elem == 4 ? "float32" : "float64", (unsigned long long)tile, size, size > 1 ? "s" : "");
    }
    st = ntk_comm_agree_report(comm, st);
    if (!st) st = ntk_comm_agree_report(comm, ntk_comm_bcast(comm, &tile, sizeof tile));
    if (!st && size > 1) {
      if (rank == 0) sinfo = *ntk_store_get_info(store);
      st = ntk_comm_agree_report(comm, ntk_comm_bcast(comm, &sinfo, sizeof sinfo));
      /* A worker on rank 0's node leaves the sync of its records to rank 0's
       * fdatasync (one page cache); elsewhere it syncs them itself. */
      unsigned char none = 0;
      void *all = NULL;
      struct ntk_node_info node;
      if (!st) st = ntk_comm_agree_report(comm, ntk_comm_node_gather(comm, &none, 1, &all, &node));
      free(all);
      ntk_status ost = NTK_OK;
      if (!st && rank != 0) ost = ntk_worker_open_store(job->out_path, &sinfo, node.first_rank != 0, job->direct_io, &wstore);
      if (!st) st = ntk_comm_agree_report(comm, ost);
    }
  }

  /* 6. Compute. */
  struct ntk_tiling tiling;
  ntk_tiling_init(&tiling, data.n, tile);
  ntk_engine_t *engine = NULL;
  if (!st) {
    ntk_status est = NTK_OK;
    if (computes && place.device >= 0) {
      prob.device = place.device;
      const struct ntk_backend_ops *cuda = ntk_backend_find("cuda");
      est = cuda ? ntk_engine_create(&prob, cuda, job->level, &tiling, &engine)
                 : ntk_error(NTK_ECONFIG, "this ntkd was built without CUDA");
      if (est && job->backend == NTK_BACKEND_AUTO) { /* auto: a GPU that fails to start is not fatal */
        fprintf(stderr, "ntkd: rank %d: %s: computing on the CPU instead\n", rank, ntk_error_message());
        place.device = NTK_PLACE_CPU;
        est = ntk_engine_create(&prob, backend, job->level, &tiling, &engine);
      }
    } else if (computes) {
      est = ntk_engine_create(&prob, backend, job->level, &tiling, &engine);
    }
    st = ntk_comm_agree_report(comm, est);
    if (!st) st = ntk_place_started(comm, &pj, &place, computes && place.device >= 0, size == 1 ? 1 : size - 1);
  }
  /* How many tiles each worker wants queued (its pipeline's depth), for
   * the coordinator. */
  int *depth = NULL;
  if (!st) {
    double *d = calloc((size_t)size, sizeof *d);
    depth = calloc((size_t)size, sizeof *depth);
    st = ntk_comm_agree_report(comm, d && depth ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory"));
    if (!st && engine) d[rank] = ntk_engine_depth(engine);
    if (!st) st = ntk_comm_agree_report(comm, ntk_comm_sum_doubles(comm, d, (size_t)size));
    for (int k = 0; !st && k < size; k++) depth[k] = (int)d[k];
    free(d);
  }
  ntk_status result = NTK_OK;
  t_ready = ntk_now();
  if (!st) {
    if (rank == 0) result = ntk_coordinator_run(comm, store, size == 1 ? engine : NULL, job, depth);
    else result = ntk_worker_serve(comm, engine, &tiling, wstore);
    if (result && result != NTK_EINTERRUPTED) fprintf(stderr, "ntkd: %s%s\n", rank ? "worker: " : "error: ",
                                                      ntk_error_message());
    else if (result) fprintf(stderr, "ntkd: %s\n", ntk_error_message());
    st = ntk_comm_agree(comm, result);
  }
  ntk_worker_close_store(wstore);
  /* Synced now; closed (and its file lock released) only once the solve,
   * which reads it, is done. */
  ntk_status closed = store ? ntk_store_sync(store) : NTK_OK;
  if (closed && !st) {
    fprintf(stderr, "ntkd: error: %s\n", ntk_error_message());
    st = closed;
  }
  if (!st && rank == 0) {
    fprintf(stderr, "ntkd: times: load data %.2f s, share %.2f s, store and set-up %.2f s, tiles %.2f s\n",
            t_loaded - t_start, t_shared - t_loaded, t_ready - t_shared, ntk_now() - t_ready);
    fprintf(stderr, "ntkd: result in %s\n", job->out_path);
  }
  /* 7. Kernel regression: every rank takes part (the method decides how:
   * src/solve/, docs/SOLVE.md). */
  if (!st && job->solve.enabled) {
    ntk_cpu_single_thread();
    /* Through the writer's own handle: the store is opened once. */
    st = ntk_solve(comm, job->out_path, store, job, &labels, NULL, 0, NULL); /* collective; prints its own errors */
  }
  if ((closed = ntk_store_close(store)) && !st) {
    fprintf(stderr, "ntkd: error: %s\n", ntk_error_message());
    st = closed;
  }
  ntk_solve_labels_free(&labels);
  ntk_engine_free(engine);
  free(depth);
  ntk_data_unshare(shared, &data);
    ntk_lock_release(lock);
  ntk_job_free(job);
  free(job);
  return ntk_status_exit_code(st);
}
