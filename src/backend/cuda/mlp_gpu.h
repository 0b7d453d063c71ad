/* The GPU's MLP (mlp_gpu.cu) and Adam (adam.cu): internal to the CUDA
 * backend, which trains through them (backend_cuda.c). */
#ifndef NTKD_MLP_GPU_H
#define NTKD_MLP_GPU_H

#include "backend/mlp.h"

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
