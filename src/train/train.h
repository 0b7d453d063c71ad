/* Training an MLP (ReLU hidden layers, softmax cross-entropy) with Adam,
 * data-parallel over the ranks (docs/TRAINING.md). The network, the loss,
 * Adam and the random numbers are pure functions on plain arrays: no MPI,
 * no I/O, no globals. ntk_train_run is the loop that shards, reduces,
 * snapshots and logs. */
#ifndef NTKD_TRAIN_H
#define NTKD_TRAIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "backend/mlp.h"
#include "comm/comm.h"
#include "job/config.h"
#include "base/status.h"

/* ---- the shuffle (src/train/train.c) ----------------------------------------- */

/* The order in which epoch `epoch` visits samples 0..n-1: a Fisher-Yates
 * shuffle seeded from (seed, epoch) only, so every rank, and a resumed run,
 * computes the same one. Pure. */
void ntk_train_permutation(uint64_t seed, uint64_t epoch, size_t n, uint32_t *perm);

/* ---- snapshots (src/train/snapshot.c) -------------------------------------- */

/* What a snapshot holds besides parameters and Adam's m and v. The
 * identity fields must match for a resume; the rest is the position. */
struct ntk_snapshot_info {
  /* identity */
  uint64_t nsizes, sizes[NTK_TRAIN_MAX_LAYERS];
  uint64_t n_train, batch, seed, data_hash;
  /* position: `epoch` epochs finished, `step` steps of the next one done */
  uint64_t epoch, step, t; /* t: Adam steps so far */
  double loss_sum, correct; /* training loss and hits of the partial epoch */
  double elapsed;           /* seconds of training so far, over all runs */
  uint64_t nparams;
  /* [train] log, as this job wrote it (docs/TRAINING.md, "Snapshots"): whether
   * these fields know it (NTK_SNAP_LOG_*), the first epoch whose line it
   * holds (its lines are first..epoch) and the chain of those lines' XXH3s
   * (ntk_train_log_chain), after a head of log_head bytes kept unchecked
   * from a log of an ntkd before these fields. Zero in that ntkd's snapshots. */
  uint64_t log_state, log_first, log_sum, log_head;
};

#define NTK_SNAP_LOG_UNKNOWN 0 /* written before the log was recorded: its lines are taken as they are */
#define NTK_SNAP_LOG_NONE 1    /* trained without a log */
#define NTK_SNAP_LOG_CHAIN 2   /* log_first and log_sum hold */

/* The log chain after one more line (its bytes, the newline included):
 * XXH3 of the previous chain's 8 bytes and the line. 0 before any. Pure. */
uint64_t ntk_train_log_chain(uint64_t prev, const char *line, size_t len);

/* Whether a snapshot's header is one a training run writes: each field
 * within its bounds and consistent with the others (the layer sizes and the
 * parameter count; samples, batch and the step within the epoch; Adam's
 * t = epochs x steps per epoch + steps, one Adam step per batch; the
 * partial epoch's loss and hits; seconds trained). Fields that must match
 * the job resuming it (layers, data, batch, seed, epochs) are the caller's.
 * Returns 0, or 1 with the field, its value and what was expected in why.
 * Pure. */
int ntk_snapshot_check(const struct ntk_snapshot_info *s, char *why, size_t cap);

/* Write path atomically: a temporary file, fsync, rename, fsync of the
 * folder, so `path` is always the old or the new snapshot. p, m, v have
 * info->nparams floats each. held (unless NULL) gets the new file open
 * and locked (ntk_lock_file) before it takes the name, for the caller to
 * keep while it runs and close: no moment where the file at the name is
 * unlocked. in_place (unless NULL) is asked, with ctx, just before the new
 * file takes the name (after its fsync, the long part): an error from it
 * stops the write there, nothing replaced. The new file takes the name
 * only over the file `replaces` holds open (-1: only where none is),
 * atomically (ntk_rename_over: another writer's file put there after
 * in_place's check is never replaced; in_place then says what happened);
 * NTK_SNAPSHOT_ANY: over whatever is there. Nothing is written for a header that
 * ntk_snapshot_check refuses (NTK_EINTERNAL) or a state that
 * ntk_adam_state_problem refuses (NTK_ENONFINITE): the reader would refuse
 * either. Rank-local (rank 0). Errors: NTK_EIO. */
#define NTK_SNAPSHOT_ANY (-2)
ntk_status ntk_snapshot_write(const char *path, const struct ntk_snapshot_info *info, const float *p,
                              const float *m, const float *v, int *held, int replaces,
                              ntk_status (*in_place)(const void *ctx), const void *ctx);

/* Read and check a snapshot: magic, version, checksums, every header field
 * (ntk_snapshot_check) and the state (ntk_adam_state_problem), so a forged
 * file with resealed checksums is refused too. *state gets 3 * nparams
 * floats (p, m, v), which the caller frees. Errors: NTK_EIO (cannot read),
 * NTK_ECORRUPT (not a snapshot, damaged, truncated, impossible values,
 * naming the field). *read (unless NULL) gets the stat of the file read,
 * once it opened. Rank-local. */
ntk_status ntk_snapshot_read(const char *path, struct ntk_snapshot_info *info, float **state, struct stat *read);

/* ---- the loop (src/train/train.c) ----------------------------------------- */

/* Train the job's MLP: load and share data, resume from the snapshot or
 * initialise, then epochs of data-parallel Adam with a table on stdout,
 * JSON lines in [train] log and a snapshot after every epoch. Collective;
 * every rank returns the same status: NTK_EINTERRUPTED after a signal (a
 * snapshot was written), NTK_EMISMATCH for a snapshot of another job (or a
 * damaged one, or one of more epochs) without `overwrite`, NTK_ENONFINITE
 * when a loss, gradient or state is not finite (training diverged; the log
 * and snapshot keep the last finite epoch). */
ntk_status ntk_train_run(const ntk_comm_t *world, const struct ntk_job *job, int overwrite);

#endif
