/* Registry of compiled-in backends; the only place that knows whether the
 * CUDA backend exists. */
#include "ntkd/backend.h"

#include <string.h>

#include <stdio.h>

#ifdef NTKD_HAVE_CUDA
int ntk_cuda_describe(char *buf, size_t cap); /* src/worker/cuda/device.cu */
#endif

static const struct ntk_backend_ops *const registry[] = {
    &ntk_backend_cpu,
};

const struct ntk_backend_ops *ntk_backend_find(const char *name) {
  for (size_t i = 0; i < sizeof registry / sizeof *registry; i++)
    if (!strcmp(registry[i]->name, name)) return registry[i];
  return NULL;
}

const char *ntk_backend_names(void) { return "cpu"; }

void ntk_backend_describe(char *buf, size_t cap) {
#ifdef NTKD_HAVE_CUDA
  char cuda[512];
  ntk_cuda_describe(cuda, sizeof cuda);
  snprintf(buf, cap, "cpu (OpenBLAS + vectorised C); cuda: %s; the CUDA tile backend is not written yet", cuda);
#else
  snprintf(buf, cap, "cpu (OpenBLAS + vectorised C); cuda: not compiled in");
#endif
}
