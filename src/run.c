/* `ntkd JOB.conf`: rank 0 reads and checks the job file, the data and the
 * store; every step ends with all ranks agreeing on its status before any
 * acts on it (HPL style), so a bad input stops every rank with one message
 * and the same exit code. Then rank 0 coordinates and the others work. */
#include "ntkd/run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ntkd/arch.h"
#include "ntkd/backend.h"
#include "ntkd/cnn.h"
#include "ntkd/comm.h"
#include "ntkd/config.h"
#include "ntkd/coordinator.h"
#include "ntkd/cpuinit.h"
#include "ntkd/data.h"
#include "ntkd/data_share.h"
#include "ntkd/fsutil.h"
#include "ntkd/jobfiles.h"
#include "ntkd/jobhash.h"
#include "ntkd/lock.h"
#include "ntkd/progress.h"
#include "ntkd/solve.h"
#include "ntkd/store.h"
#include "ntkd/train.h"
#include "ntkd/worker.h"

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
  struct ntk_arch arch = {0};
  if (!st) {
    ntk_status a = ntk_job_arch(job, &arch);
    st = ntk_comm_agree_report(comm, rank == 0 ? a : NTK_OK);
  }

  double t_start = ntk_now(), t_loaded = 0, t_shared = 0, t_ready = 0;
  /* 2. The data: loaded on rank 0, broadcast to the workers. */
  struct ntk_dataset data;
  memset(&data, 0, sizeof data);
  if (!st) st = ntk_comm_agree_report(comm, rank == 0 ? ntk_data_load_job(job, job->precision, &data) : NTK_OK);
  /* Labels of a regression are checked now, not after the tiles. */
  if (!st && job->solve.enabled)
    st = ntk_comm_agree_report(comm, rank == 0 ? ntk_solve_check_labels(job, data.n_train, data.n - data.n_train) : NTK_OK);
  t_loaded = ntk_now();
  ntk_data_share_t *shared = NULL; /* one copy of the data per node */
  if (!st && size > 1) st = ntk_data_share(comm, &data, &shared);

  t_shared = ntk_now();
  /* 3. Does the network fit the data? Checked on rank 0 before the store
   * is touched, so a bad job leaves no file behind. */
  struct ntk_problem prob = {&arch, &data, job->kernels, -1};
  const struct ntk_backend_ops *backend = ntk_backend_find("cpu");
  if (!st) {
    ntk_status pst = NTK_OK;
    if (rank == 0) {
      void *probe = NULL;
      pst = backend->create(&prob, &probe);
      backend->destroy(probe);
      if (pst) pst = ntk_error(pst, "%s:%d: [model] arch: %s", conf_path, job->arch_line, ntk_error_message());
    }
    st = ntk_comm_agree_report(comm, pst);
  }

  /* 4. Placement (docs/GPU.md, "Placement"): each rank lists the GPUs it
   * sees, the ranks of a node exchange the lists, and each works out the
   * node's table with the same pure function: the computing ranks, in slot
   * order, take distinct physical GPUs (by UUID); the coordinator takes
   * none; the rest compute on the CPU (auto) or stop the job (cuda). */
  int computes = size == 1 || rank != 0, place = computes ? NTK_PLACE_CPU : NTK_PLACE_NONE;
  double tally[4] = {0, 0, 0, 0}; /* GPU workers placed, started; nodes; distinct GPUs over nodes */
  char mywhy[320] = "";           /* why this rank (or, on rank 0, the first computing one) sees no GPU */
  int list_failed = 0;            /* this rank could not list its GPUs */
  if (!st && job->backend != NTK_BACKEND_CPU) {
    struct ntk_gpu_view *view = calloc(1, sizeof *view);
    if (view) {
      view->rank = rank;
      view->computes = computes;
      ntk_backend_gpu_list(rank, view);
      snprintf(mywhy, sizeof mywhy, "%s", view->why);
      list_failed = view->n < 0;
    }
    st = ntk_comm_agree_report(comm, view ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory"));
    void *all = NULL;
    struct ntk_node_info node;
    if (!st) st = ntk_comm_agree_report(comm, ntk_comm_node_gather(comm, view, sizeof *view, &all, &node));
    char nogpu[512] = "";
    int gpu_arch = ntk_backend_gpu_computes(&arch, &data, nogpu, sizeof nogpu);
    ntk_status pst = NTK_OK;
    if (!st) {
      const struct ntk_gpu_view *v = all;
      /* Rank 0 speaks for the job below: when it only coordinates, the
       * reason it gives is that of the first computing rank of its node. */
      if (!computes)
        for (int i = 0; i < node.size; i++)
          if (v[i].computes && v[i].n <= 0) {
            snprintf(mywhy, sizeof mywhy, "rank %d: %s", v[i].rank, v[i].why);
            break;
          }
      struct ntk_place_summary sum = {0, 0, 0};
      pst = ntk_backend_place_rank(job->backend, gpu_arch, node.size, v, node.index, node.host, &place, &sum);
      if (node.index == 0) tally[2] = 1, tally[3] = sum.distinct;
      if (pst) {
        place = computes ? NTK_PLACE_CPU : NTK_PLACE_NONE;
      } else if (place >= 0) {
        tally[0] = 1;
      } else if (place == NTK_PLACE_NO_GPU && !sum.distinct) {
        pst = ntk_error(NTK_ECONFIG, "%s: [compute] backend = cuda, but there is no usable GPU: %s", conf_path,
                        view->why);
      } else if (place == NTK_PLACE_NO_GPU && !gpu_arch) {
        pst = ntk_error(NTK_ECONFIG, "%s: [compute] backend = cuda: %s (backend = auto computes it on the CPU)",
                        conf_path, nogpu);
      } else if (place == NTK_PLACE_NO_GPU) {
        char mine[400];
        if (view->n < 0) snprintf(mine, sizeof mine, "; this rank cannot list its GPUs: %s", view->why);
        else snprintf(mine, sizeof mine, "; this rank sees %d of them, all taken by the ranks before it", view->n);
        pst = ntk_error(NTK_ECONFIG, "%s: [compute] backend = cuda, but rank %d gets no GPU: node %s has %d "
                        "distinct GPU%s visible to its %d computing rank%s%s. Start at most one worker per GPU "
                        "(on the coordinator's node one rank more: rank 0 only coordinates), let each rank see "
                        "GPUs of its own, or use backend = auto to put the rest on the CPU",
                        conf_path, rank, node.host, sum.distinct, sum.distinct == 1 ? "" : "s", sum.computing,
                        sum.computing == 1 ? "" : "s", mine);
      }
    }
    free(all);
    free(view);
    if (!st) st = ntk_comm_agree_report(comm, pst); /* each rank that cannot be placed says why */
    if (!st) st = ntk_comm_agree_report(comm, ntk_comm_sum_doubles(comm, tally + 2, 2));
    if (!st && rank == 0 && job->backend == NTK_BACKEND_AUTO) {
      if (!tally[3] && strstr(ntk_backend_names(), "cuda"))
        fprintf(stderr, "ntkd: no usable GPU (%s): computing on the CPU\n", mywhy);
      else if (tally[3] && !gpu_arch)
        fprintf(stderr, "ntkd: %s: computing on the CPU\n", nogpu);
    }
    /* Where GPUs are in use, a rank whose driver fails says so itself. */
    if (!st && computes && list_failed && tally[3] && gpu_arch && job->backend == NTK_BACKEND_AUTO)
      fprintf(stderr, "ntkd: rank %d cannot list its GPUs (%s): computing on the CPU\n", rank, mywhy);
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
      st = ntk_job_identity(job, &arch, &data, &info, &job_text);
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
    if (computes && place >= 0) {
      prob.device = place;
      const struct ntk_backend_ops *cuda = ntk_backend_find("cuda");
      est = cuda ? ntk_engine_create(&prob, cuda, job->level, &tiling, &engine)
                 : ntk_error(NTK_ECONFIG, "this ntkd was built without CUDA");
      if (est && job->backend == NTK_BACKEND_AUTO) { /* auto: a GPU that fails to start is not fatal */
        fprintf(stderr, "ntkd: rank %d: %s: computing on the CPU instead\n", rank, ntk_error_message());
        place = NTK_PLACE_CPU;
        est = ntk_engine_create(&prob, backend, job->level, &tiling, &engine);
      }
    } else if (computes) {
      est = ntk_engine_create(&prob, backend, job->level, &tiling, &engine);
    }
    st = ntk_comm_agree_report(comm, est);
    /* Counted once the engines exist: a GPU that failed to start is not one. */
    tally[1] = computes && place >= 0;
    if (!st) st = ntk_comm_agree_report(comm, ntk_comm_sum_doubles(comm, tally, 2));
    if (!st && rank == 0 && tally[3] > 0) {
      int workers = size == 1 ? 1 : size - 1, placed = (int)tally[0], on_gpu = (int)tally[1];
      fprintf(stderr, "ntkd: placement: %d of %d worker%s on GPUs (CUDA), %d on the CPU; %d distinct GPU%s seen "
              "on %d node%s", on_gpu, workers, workers == 1 ? "" : "s", workers - on_gpu, (int)tally[3],
              tally[3] == 1 ? "" : "s", (int)tally[2], tally[2] == 1 ? "" : "s");
      if (placed > on_gpu)
        fprintf(stderr, "; %d GPU worker%s fell back to the CPU", placed - on_gpu, placed - on_gpu == 1 ? "" : "s");
      fprintf(stderr, "\n");
    }
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
    st = ntk_solve(comm, job->out_path, job, NULL, 0, NULL); /* collective; prints its own errors */
  }
  if ((closed = ntk_store_close(store)) && !st) {
    fprintf(stderr, "ntkd: error: %s\n", ntk_error_message());
    st = closed;
  }
  ntk_engine_free(engine);
  free(depth);
  ntk_data_unshare(shared, &data);
  ntk_arch_free(&arch);
  ntk_lock_release(lock);
  ntk_job_free(job);
  free(job);
  return ntk_status_exit_code(st);
}
