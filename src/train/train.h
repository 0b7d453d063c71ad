/* Training an MLP (ReLU hidden layers, softmax cross-entropy) with Adam,
 * data-parallel over the ranks (docs/TRAINING.md). The network, the loss,
 * Adam and the random numbers are pure functions on plain arrays: no MPI,
 * no I/O, no globals. ntk_train_run is the loop that shards, reduces,
 * snapshots and logs. */
#ifndef NTKD_TRAIN_H
#define NTKD_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "job/config.h"
#include "base/status.h"

/* ---- the network (src/train/mlp.c) ---------------------------------------- */

/* Layer sizes and where each layer's parameters lie in one flat float
 * vector: W_0 (sizes[0] x sizes[1], row-major), b_0 (sizes[1]), W_1, b_1,
 * ... One flat vector is what one allreduce and one Adam loop take. */
struct ntk_mlp {
  size_t nsizes; /* input, hidden..., classes */
  size_t sizes[NTK_TRAIN_MAX_LAYERS];
  size_t w_off[NTK_TRAIN_MAX_LAYERS], b_off[NTK_TRAIN_MAX_LAYERS];
  size_t nparams;
};

/* Fill the offsets for `nsizes` (2..NTK_TRAIN_MAX_LAYERS) layer sizes. Pure. */
void ntk_mlp_init(struct ntk_mlp *m, const size_t *sizes, size_t nsizes);

/* Initial parameters from `seed`: LeCun normal weights (std 1/sqrt(fan_in),
 * Chainer's default for Linear), zero biases. Deterministic. Pure. */
void ntk_mlp_init_params(const struct ntk_mlp *m, uint64_t seed, float *params);

/* Floats of scratch space ntk_mlp_grad and ntk_mlp_eval need for `batch` samples. */
size_t ntk_mlp_work_floats(const struct ntk_mlp *m, size_t batch);

/* Forward and backward pass over `b` samples x (b x sizes[0], row-major)
 * with labels y: writes the gradient of the *sum* of the b losses into
 * grad (nparams floats), adds the number of correct predictions to
 * *correct and returns the summed loss. The caller divides by the global
 * batch. b may be 0 (grad is zeroed). `work` has ntk_mlp_work_floats(b)
 * floats. Rank-local, pure apart from OpenBLAS (cblas_sgemm). */
double ntk_mlp_grad(const struct ntk_mlp *m, const float *params, const float *x, const int32_t *y, size_t b,
                    float *work, float *grad, size_t *correct);

/* Forward pass only: summed loss of b samples, correct ones added to *correct. */
double ntk_mlp_eval(const struct ntk_mlp *m, const float *params, const float *x, const int32_t *y, size_t b,
                    float *work, size_t *correct);

/* Softmax cross-entropy of b rows of k logits against labels y: returns the
 * summed loss, adds correct argmax predictions to *correct, and (unless
 * dlogits is NULL) writes softmax - onehot, the gradient of each row's
 * loss. Pure. */
double ntk_softmax_xent(const float *logits, const int32_t *y, size_t b, size_t k, float *dlogits,
                        size_t *correct);

/* ---- Adam (src/train/adam.c) ---------------------------------------------- */

struct ntk_adam {
  double alpha, beta1, beta2, eps;
};

/* Step t (1, 2, ...) of Adam in Chainer's form on n parameters, with the
 * gradient g * gscale:
 *   m += (1 - beta1) (g - m);  v += (1 - beta2) (g^2 - v);
 *   p -= alpha sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + eps).
 * Float arithmetic: whether subnormal m and v are flushed is decided by
 * the calling thread's FTZ/DAZ bits (ntk_cpu_flush_denormals). Pure. */
void ntk_adam_update(const struct ntk_adam *h, uint64_t t, float gscale, float *p, float *m, float *v,
                     const float *g, size_t n);

/* Index of the first value of x[0..n) that is not finite (NaN, +-inf), or
 * n if all are. Pure. */
size_t ntk_train_first_nonfinite(const float *x, size_t n);

/* Whether p, m, v (n floats each) hold a value no Adam run on finite
 * gradients holds: one not finite, or v < 0. Returns 0, or 1 with which
 * value in why ("Adam's v 17 of 163 is inf (...)"). Pure. */
int ntk_adam_state_problem(const float *p, const float *m, const float *v, size_t n, char *why, size_t cap);

#ifdef NTKD_HAVE_CUDA
/* The same update on device arrays (src/backend/cuda/adam.cu, compiled with
 * -ftz=true). Returns 0 or a cudaError_t value; rank-local. */
int ntk_adam_update_cuda(const struct ntk_adam *h, uint64_t t, float gscale, float *p, float *m, float *v,
                         const float *g, size_t n);

/* ---- GPU ranks (src/backend/cuda/mlp_gpu.cu) --------------------------------- */

/* An MLP on one GPU: parameters and Adam's moments on the device, sgemm
 * from cuBLAS (loaded with dlopen). All functions are rank-local and
 * return 0, or 1 with a message (the CUDA or cuBLAS error) in err. */
typedef struct ntk_mlp_gpu ntk_mlp_gpu_t;

/* GPUs visible to this process (0 without a driver). */
int ntk_mlp_gpu_devices(void);

/* Upload state (p, m, v: nparams floats each) to GPU `device`, with room
 * for batches of up to max_batch samples. Free with ntk_mlp_gpu_free (also
 * after a failed create). */
int ntk_mlp_gpu_create(const struct ntk_mlp *m, size_t max_batch, int device, const float *state,
                       ntk_mlp_gpu_t **out, char *err, size_t cap);
void ntk_mlp_gpu_free(ntk_mlp_gpu_t *g);

/* As ntk_mlp_grad, with the device's parameters. */
int ntk_mlp_gpu_grad(ntk_mlp_gpu_t *g, const float *x, const int32_t *y, size_t b, float *grad, double *loss,
                     size_t *correct, char *err, size_t cap);

/* Adam step t with the (reduced) host gradient g on the device; p, m, v
 * are then copied back into the host's state block. */
int ntk_mlp_gpu_adam(ntk_mlp_gpu_t *gpu, const struct ntk_adam *h, uint64_t t, float gscale, const float *g,
                     float *state, char *err, size_t cap);
#endif

/* ---- random numbers (src/train/mlp.c) ------------------------------------- */

/* splitmix64: the next value of the generator whose state is *s. Pure. */
uint64_t ntk_splitmix64(uint64_t *s);

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
};

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
 * info->nparams floats each. Nothing is written for a header that
 * ntk_snapshot_check refuses (NTK_EINTERNAL) or a state that
 * ntk_adam_state_problem refuses (NTK_ENONFINITE): the reader would refuse
 * either. Rank-local (rank 0). Errors: NTK_EIO. */
ntk_status ntk_snapshot_write(const char *path, const struct ntk_snapshot_info *info, const float *p,
                              const float *m, const float *v);

/* Read and check a snapshot: magic, version, checksums, every header field
 * (ntk_snapshot_check) and the state (ntk_adam_state_problem), so a forged
 * file with resealed checksums is refused too. *state gets 3 * nparams
 * floats (p, m, v), which the caller frees. Errors: NTK_EIO (cannot read),
 * NTK_ECORRUPT (not a snapshot, damaged, truncated, impossible values,
 * naming the field). Rank-local. */
ntk_status ntk_snapshot_read(const char *path, struct ntk_snapshot_info *info, float **state);

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
