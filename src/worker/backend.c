/* Registry of compiled-in backends; the only place that knows whether the
 * CUDA backend exists. */
#include "ntkd/backend.h"

#include <string.h>

#ifdef NTKD_HAVE_CUDA
extern const struct ntk_backend_ops ntk_backend_cuda;
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
