/* Registry of compiled-in backends; the only place that knows whether the
 * CUDA backend exists. */
#include "ntkd/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_dev.h"

#ifdef NTKD_HAVE_CUDA
#include "cuda/fc_cuda.h"
int ntk_cuda_describe(char *buf, size_t cap); /* src/worker/cuda/device.cu */
int ntk_cuda_count(char *why, size_t cap);
#endif

static const struct ntk_backend_ops *const registry[] = {
    &ntk_backend_cpu,
#ifdef NTKD_HAVE_CUDA
    &ntk_backend_cuda,
#endif
};

const struct ntk_backend_ops *ntk_backend_find(const char *name) {
  for (size_t i = 0; i < sizeof registry / sizeof *registry; i++)
    if (!strcmp(registry[i]->name, name)) return registry[i];
  return NULL;
}

const char *ntk_backend_names(void) {
#ifdef NTKD_HAVE_CUDA
  return "cpu cuda";
#else
  return "cpu";
#endif
}

int ntk_backend_gpu_count(char *why, size_t cap) {
#ifdef NTKD_HAVE_CUDA
  char tmp[256];
  int n = ntk_cuda_count(tmp, sizeof tmp);
  if (!n && why) snprintf(why, cap, "%s", tmp);
  return n;
#else
  if (why) snprintf(why, cap, "this ntkd was built without CUDA");
  return 0;
#endif
}

int ntk_backend_gpu_computes(const struct ntk_arch *arch, const struct ntk_dataset *data, char *why, size_t cap) {
  if (!ntk_cnn_applies(arch, data)) return 1;
  struct ntk_dev_plan *P = malloc(sizeof *P);
  ntk_status st = P ? ntk_cnn_dev_plan(arch, data, P) : ntk_error(NTK_ENOMEM, "out of memory");
  free(P);
  if (st && why) snprintf(why, cap, "%s", ntk_error_message());
  return !st;
}

int ntk_backend_place(int pref, int slot, int ngpus, int gpu_arch) {
  if (pref == NTK_BACKEND_CPU) return NTK_PLACE_CPU;
  int gpu = gpu_arch && slot >= 0 && slot < ngpus;
  if (pref == NTK_BACKEND_CUDA) return gpu ? slot : NTK_PLACE_NO_GPU;
  return gpu ? slot : NTK_PLACE_CPU;
}

void ntk_backend_describe(char *buf, size_t cap) {
#ifdef NTKD_HAVE_CUDA
  char cuda[512];
  ntk_cuda_describe(cuda, sizeof cuda);
  snprintf(buf, cap, "cpu (OpenBLAS + vectorised C), cuda (fully-connected and convolutional networks); cuda: %s",
           cuda);
#else
  snprintf(buf, cap, "cpu (OpenBLAS + vectorised C); cuda: not compiled in");
#endif
}
