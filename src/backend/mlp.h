/* The MLP ntkd trains (ReLU hidden layers, softmax cross-entropy) and
 * Adam's constants, as every device computes them: the layout of its
 * parameters in one flat vector, and the CPU's maths (backend/cpu/mlp.c,
 * adam.c), pure functions on plain arrays that the tests check directly
 * and the GPU's (backend/cuda/mlp_gpu.cu) reproduces. Devices train
 * through the backend interface (backend/backend.h). */
#ifndef NTKD_MLP_H
#define NTKD_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "base/defs.h"

/* ---- the network (backend/cpu/mlp.c) ---------------------------------------- */

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

/* ---- Adam (backend/cpu/adam.c) ---------------------------------------------- */

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


#endif
