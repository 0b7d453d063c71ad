/* See cublas_dl.h. */
#include "backend/cuda/cublas_dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int ntk_cublas_load(struct ntk_cublas *b, char *err, size_t cap) {
  memset(b, 0, sizeof *b);
  char own[32];
  snprintf(own, sizeof own, "libcublas.so.%d", CUDART_VERSION / 1000);
  const char *names[] = {own, "libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"};
  /* Every failure is kept: the one that matters (a library found but not
   * loadable, say for a missing libcublasLt or an old driver) is often
   * not the last name tried. */
  size_t len = 0;
  if (cap) err[0] = 0;
  for (size_t i = 0; i < sizeof names / sizeof *names && !b->lib; i++) {
    if (i > 0 && !strcmp(names[i], own)) continue; /* tried first */
    b->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!b->lib && len < cap) {
      const char *why = dlerror();
      int n = snprintf(err + len, cap - len, "%sdlopen(%s): %s", len ? "; " : "", names[i], why ? why : "failed");
      if (n > 0) len += (size_t)n;
    }
  }
  if (!b->lib) return 1;
  b->create = (cublasStatus_t(*)(cublasHandle_t *))dlsym(b->lib, "cublasCreate_v2");
  b->destroy = (cublasStatus_t(*)(cublasHandle_t))dlsym(b->lib, "cublasDestroy_v2");
  *(void **)&b->sgemm = dlsym(b->lib, "cublasSgemm_v2");
  *(void **)&b->dgemm = dlsym(b->lib, "cublasDgemm_v2");
  *(void **)&b->ssyrk = dlsym(b->lib, "cublasSsyrk_v2");
  *(void **)&b->dsyrk = dlsym(b->lib, "cublasDsyrk_v2");
  *(void **)&b->set_stream = dlsym(b->lib, "cublasSetStream_v2");
  *(void **)&b->get_version = dlsym(b->lib, "cublasGetVersion_v2");
  *(void **)&b->set_math_mode = dlsym(b->lib, "cublasSetMathMode"); /* optional */
  if (!b->create || !b->destroy || !b->sgemm || !b->dgemm || !b->ssyrk || !b->dsyrk || !b->set_stream ||
      !b->get_version) {
    const char *why = dlerror();
    snprintf(err, cap, "dlsym(cublas*_v2) in the loaded libcublas: %s", why ? why : "symbol missing");
    dlclose(b->lib);
    b->lib = NULL;
    return 1;
  }
  return 0;
}

const char *ntk_cublas_status_name(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  default: return "cuBLAS status (unknown code)";
  }
}
