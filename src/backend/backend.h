/* The device interface: what a CPU or GPU implementation provides, to the
 * tile engine (worker/engine.c) and to training (train/train.c) alike. A
 * backend gets a kernel problem once (architecture, data, which kernels)
 * and then fills tiles on request; or an MLP, whose gradient and Adam
 * steps it computes. The registry (backend.c) is the one place that knows
 * which backends were compiled in; placement (place.c) decides which
 * device each rank takes. MPI-free but for placement's exchange. */
#ifndef NTKD_BACKEND_H
#define NTKD_BACKEND_H

#include <stddef.h>

#include "base/defs.h"
#include "backend/mlp.h"
#include "kernels/arch.h"
#include "kernels/dataset.h"
#include "base/status.h"
#include "base/stop.h"
#include "comm/comm.h"
#include "base/tiling.h"

struct ntk_problem {
  const struct ntk_arch *arch;
  const struct ntk_dataset *data; /* precision = data->elem */
  int kernels;                    /* NTK_KERNEL_* mask */
  int device;                     /* GPU backends: the device this rank drives */
  int host_threads;               /* a device backend's engine: the compression threads its node's cores
                                     leave it (ntk_engine_host_threads); 0: the backend's compress_threads */
  /* Polled inside a tile: compute_tile returns NTK_EINTERRUPTED soon
   * after a flag is set (CPU: well within a second), its values then
   * garbage. Zero: never stopped, nothing counted. */
  struct ntk_stop stop;
};

struct ntk_backend_ops {
  const char *name;
  /* Non-zero if this backend can run in this process (a GPU is present...). */
  int (*available)(void);
  /* Prepare per-sample work (variances per layer, device copies). The
   * problem must outlive the context. NTK_EINTERRUPTED if its stop flag
   * is seen on the way (a deep network's variances over many samples). */
  ntk_status (*create)(const struct ntk_problem *p, void **ctx);
  /* Fill the rows x cols tile (row-major, elements of data->elem bytes) of
   * NNGP and, when asked, NTK (ntk may be NULL). Deterministic: the same
   * tile gives the same bits whatever other tiles were computed, and
   * whatever tile was stopped inside before (NTK_EINTERRUPTED: the
   * problem's stop flag was seen; nothing of the tile is usable). */
  ntk_status (*compute_tile)(void *ctx, const struct ntk_tile *t, void *nngp, void *ntk);
  void (*destroy)(void *ctx); /* accepts NULL */
  /* Worker pipeline (src/worker/engine.c): how many threads check and
   * compress earlier tiles while compute_tile runs on the next one. 0: the
   * engine checks and compresses each tile after computing it, on the
   * calling thread (the CPU backend: its compute uses every core already).
   * A device backend, whose compute leaves the host cores idle, says > 0. */
  int compress_threads;
  /* Optional (both or neither): the engine's tile buffers, which
   * compute_tile fills (the CUDA backend: pinned memory, so that its copies
   * back are asynchronous DMA). NULL: malloc / free. host_alloc returns
   * NULL on failure; host_free accepts NULL. */
  void *(*host_alloc)(void *ctx, size_t bytes);
  void (*host_free)(void *ctx, void *p);

  /* Training an MLP (train/train.c) on this device. `state` is the host's
   * p, m, v (m->nparams floats each), which mlp_create takes as the
   * device's starting point and mlp_adam leaves updated: the host's copy
   * stays the truth (snapshots, validation, checksums). Rank-local; a
   * failure's message names the device. */
  ntk_status (*mlp_create)(const struct ntk_mlp *m, size_t max_batch, int device, float *state, void **ctx);
  /* Into grad (m->nparams floats, host): the gradient of the summed loss
   * of b samples x (b x sizes[0]) with labels y; *loss the summed loss,
   * the correct predictions added to *correct (as ntk_mlp_grad). */
  ntk_status (*mlp_grad)(void *ctx, const float *x, const int32_t *y, size_t b, float *grad, double *loss,
                         size_t *correct);
  /* Adam's step t with the (reduced) gradient g times gscale, then the
   * host state updated. */
  ntk_status (*mlp_adam)(void *ctx, const struct ntk_adam *h, uint64_t t, float gscale, const float *g);
  void (*mlp_destroy)(void *ctx); /* accepts NULL */
};

/* Whether the network of `p` computes on its data (a fully-connected or a
 * convolutional network that fits the data's shape, widths that agree):
 * what every backend's create would refuse, said before anything is
 * computed or written, without the per-sample work. NTK_ECONFIG with the
 * reason. Pure. */
ntk_status ntk_backend_check(const struct ntk_problem *p);

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


/* GPUs this process can use (0 without CUDA compiled in or without a
 * driver); `why` (may be NULL) gets a reason when 0. */
int ntk_backend_gpu_count(char *why, size_t cap);

/* 1 if the GPU backend computes `arch` on `data` (every fully-connected
 * network; a CNN whose plan fits the GPU kernels' structs; neither with an
 * ElementwiseNumerical map, computed on CPUs only), else 0 with
 * the reason in `why` (may be NULL). Whether a device has the shared
 * memory the images need is only known when the backend starts there. */
int ntk_backend_gpu_computes(const struct ntk_arch *arch, const struct ntk_dataset *data, char *why, size_t cap);

/* Where a computing rank works ([compute] backend, [train] device;
 * docs/GPU.md, "Placement"). Each rank lists the GPUs it can see, with
 * their UUIDs; the ranks of a node exchange the lists (run.c, train.c
 * through ntk_comm_node_gather) and every rank evaluates the same pure
 * function of them, so all agree on the node's table without a leader. */
#define NTK_PLACE_CPU (-1)    /* computes on the CPU */
#define NTK_PLACE_NO_GPU (-2) /* backend = cuda and no GPU is left for it: an error */
#define NTK_PLACE_NONE (-3)   /* does not compute (the coordinator of a multi-rank kernel job) */
#define NTK_GPU_MAX 32        /* devices listed per rank; more are ignored */
#define NTK_GPU_UUID_BYTES 16

struct ntk_gpu_info {
  unsigned char uuid[NTK_GPU_UUID_BYTES]; /* cudaDeviceProp.uuid: the physical GPU */
  char pci[24];                           /* PCI bus id, "0000:3b:00.0" (messages only) */
  char name[64];                          /* "NVIDIA H200" */
};

/* What one rank of a node sees. Plain bytes: exchanged between ranks. */
struct ntk_gpu_view {
  int rank;     /* world rank (set by the caller) */
  int computes; /* 1 if the rank computes (set by the caller) */
  int n;        /* devices listed, in this rank's own CUDA index order; -1: listing failed */
  char why[256]; /* n <= 0: why (the driver's or runtime's message) */
  struct ntk_gpu_info dev[NTK_GPU_MAX];
};

/* List the devices this process sees into v->n, v->why, v->dev (rank and
 * computes untouched). Without CUDA compiled in: none. Test setting:
 * NTKD_TEST_GPU_UUIDS replaces the listing (no CUDA call at all):
 * semicolon-separated entries, entry i for world rank `rank` = i, each a
 * comma-separated list of device tags (1 to 16 characters from
 * [A-Za-z0-9_-]; equal tags are the same physical GPU), empty for no
 * device, "!" for a driver that fails; ranks past the last entry see no
 * device. Announced on stderr by rank 0. Never set it in production. */
void ntk_backend_gpu_list(int rank, struct ntk_gpu_view *v);

/* "GPU-1a2b3c4d": the first 4 bytes of a UUID, as nvidia-smi -L starts it. */
void ntk_gpu_uuid_short(const unsigned char *uuid, char *buf, size_t cap);

struct ntk_place_summary {
  int computing; /* computing ranks of the node */
  int distinct;  /* distinct GPUs (UUIDs) the computing ranks see together */
  int on_gpu;    /* computing ranks given a GPU */
};

/* The placement table of one node. `v` holds its `n` ranks in slot order
 * (node-local rank order = world rank order); `gpu_arch` is 1 if the GPU
 * backend computes the network. place[i] gets rank i's device as an index
 * into ITS OWN list (v[i].dev; the CUDA index in that process), or
 * NTK_PLACE_CPU, NTK_PLACE_NO_GPU, NTK_PLACE_NONE. Rule: a rank that does
 * not compute takes nothing; with backend = cpu, or a network the GPU
 * backend does not compute, nobody takes a GPU; otherwise each computing
 * rank, in slot order, takes the first device in its own order whose UUID
 * no earlier rank took, and then each rank left without one may take a
 * device from an earlier rank that can move to another device it sees
 * (an augmenting path, tried in slot order and each rank's own order):
 * the result is a maximum matching of ranks to distinct physical GPUs,
 * equal to the plain greedy one whenever that places everybody. Ranks
 * left over compute on the CPU under auto and are NTK_PLACE_NO_GPU under
 * cuda. Deterministic and pure; `sum` may be NULL. */
void ntk_backend_place_node(int pref, int gpu_arch, int n, const struct ntk_gpu_view *v, int *place,
                            struct ntk_place_summary *sum);

/* Rank `me`'s row of the table of its node (`v`, `n` ranks gathered on
 * host `host`): *place as ntk_backend_place_node gives it, *sum the node's
 * summary. A rank that gets a GPU says which, in one line on stderr
 * (docs/GPU.md, "Placement"). NTK_ENOMEM if the table cannot be made. */
ntk_status ntk_backend_place_rank(int pref, int gpu_arch, int n, const struct ntk_gpu_view *v, int me,
                                  const char *host, int *place, struct ntk_place_summary *sum);

/* The old per-slot form, kept for its callers: the table's answer for
 * computing rank `slot` of a node whose computing ranks all see the same
 * `ngpus` GPUs in the same order. */
int ntk_backend_place(int pref, int slot, int ngpus, int gpu_arch);

/* The placement of a job's ranks, around that table: what a kernel job
 * and a training job both do. `words` says it in the job's terms. */
struct ntk_place_words {
  const char *key;     /* "[compute] backend", "[train] device" */
  const char *setting; /* "backend", "device" */
  const char *none;    /* a GPU-less rank under cuda: "there is no usable GPU", "rank %d has no usable GPU" */
  const char *peers;   /* the ranks a node's GPUs are for: "computing rank", "rank" */
  const char *advice;  /* what to do when GPUs are too few: "Start at most one worker per GPU (...)" */
  const char *unit;    /* what the summary counts: "worker", "rank" */
  const char *verb;    /* "" ("3 of 3 workers on GPUs"), "train " ("3 of 3 ranks train on GPUs") */
};
struct ntk_place_job {
  int pref;            /* NTK_BACKEND_AUTO | CPU | CUDA */
  int computes;        /* this rank computes (rank 0 of a multi-rank kernel job only coordinates) */
  int gpu_arch;        /* the GPU backend computes the job (ntk_backend_gpu_computes) */
  const char *nogpu;   /* if not: why */
  const char *source;  /* the job file, for messages */
  const struct ntk_place_words *words;
};
struct ntk_place {
  int device;      /* this rank's GPU (an index into its own list), NTK_PLACE_CPU or NTK_PLACE_NONE */
  int list_failed; /* this rank could not list its GPUs */
  char why[320];   /* why it (rank 0 when it only coordinates: its node's first computing rank) has no GPU */
  double tally[4]; /* summed over the ranks: placed on a GPU, started on one, nodes, distinct GPUs */
};

/* Where this rank computes: each rank lists its GPUs, the ranks of a node
 * exchange the lists and each takes its row of the node's table (a rank
 * given a GPU says which); a rank that cannot be placed under cuda says
 * why and the job stops (NTK_ECONFIG on every rank). With pref = cpu
 * nothing is asked. Collective over comm. */
ntk_status ntk_place_ranks(const ntk_comm_t *comm, const struct ntk_place_job *j, struct ntk_place *p);

/* After each rank tried to start on its device (`on_gpu`: it did): rank 0
 * says how `units` ranks ended up placed where GPUs were seen.
 * Collective over comm. */
ntk_status ntk_place_started(const ntk_comm_t *comm, const struct ntk_place_job *j, struct ntk_place *p, int on_gpu,
                             int units);

#endif
