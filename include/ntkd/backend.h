/* The worker backend interface: what a CPU or GPU implementation provides
 * to compute tiles. A backend gets the whole problem once (architecture,
 * data, which kernels) and then fills tiles on request. MPI-free. */
#ifndef NTKD_BACKEND_H
#define NTKD_BACKEND_H

#include <stddef.h>

#include "ntkd/arch.h"
#include "ntkd/data.h"
#include "ntkd/status.h"
#include "ntkd/tiling.h"

struct ntk_problem {
  const struct ntk_arch *arch;
  const struct ntk_dataset *data; /* precision = data->elem */
  int kernels;                    /* NTK_KERNEL_* mask */
  int device;                     /* GPU backends: the device this rank drives */
};

struct ntk_backend_ops {
  const char *name;
  /* Non-zero if this backend can run in this process (a GPU is present...). */
  int (*available)(void);
  /* Prepare per-sample work (variances per layer, device copies). The
   * problem must outlive the context. */
  ntk_status (*create)(const struct ntk_problem *p, void **ctx);
  /* Fill the rows x cols tile (row-major, elements of data->elem bytes) of
   * NNGP and, when asked, NTK (ntk may be NULL). Deterministic: the same
   * tile gives the same bits whatever other tiles were computed. */
  ntk_status (*compute_tile)(void *ctx, const struct ntk_tile *t, void *nngp, void *ntk);
  void (*destroy)(void *ctx); /* accepts NULL */
};

/* The backend called `name` ("cpu", "cuda") if compiled in, else NULL. */
const struct ntk_backend_ops *ntk_backend_find(const char *name);

/* Names of the compiled-in tile backends, space-separated. */
const char *ntk_backend_names(void);

/* One line for --version: the backends and what CUDA support was built and
 * finds at run time. */
void ntk_backend_describe(char *buf, size_t cap);

extern const struct ntk_backend_ops ntk_backend_cpu;
#ifdef NTKD_HAVE_CUDA
extern const struct ntk_backend_ops ntk_backend_cuda;
#endif

/* [compute] backend. */
enum { NTK_BACKEND_AUTO, NTK_BACKEND_CPU, NTK_BACKEND_CUDA };

/* GPUs this process can use (0 without CUDA compiled in or without a
 * driver); `why` (may be NULL) gets a reason when 0. */
int ntk_backend_gpu_count(char *why, size_t cap);

/* 1 if the GPU backend computes `arch` on `data` (every fully-connected
 * network; a CNN whose plan fits the GPU kernels' structs), else 0 with
 * the reason in `why` (may be NULL). Whether a device has the shared
 * memory the images need is only known when the backend starts there. */
int ntk_backend_gpu_computes(const struct ntk_arch *arch, const struct ntk_dataset *data, char *why, size_t cap);

/* Where a computing rank works. `slot` is its index among the computing
 * ranks of its node (0, 1, ...), `ngpus` the node's GPUs, `gpu_arch` 1 if
 * the network is one the GPU backend computes. Returns the GPU index
 * (>= 0), NTK_PLACE_CPU, or NTK_PLACE_NO_GPU when backend = cuda cannot
 * be honoured. auto: the first ngpus slots of a node drive one GPU each,
 * the others compute on the CPU. Pure. */
#define NTK_PLACE_CPU (-1)
#define NTK_PLACE_NO_GPU (-2)
int ntk_backend_place(int pref, int slot, int ngpus, int gpu_arch);

#endif
