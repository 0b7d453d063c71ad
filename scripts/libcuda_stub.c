/* A stand-in for the NVIDIA driver's libcuda.so.1, for
 * scripts/gpu_rehearse.sh: a driver of CUDA version NTKD_STUB_DRIVER
 * (default 12020, an R535 driver) on a machine without a GPU. The CUDA
 * runtime (linked statically into ntkd) loads it with dlopen, asks for its
 * entry points through cuGetProcAddress, checks the version, then calls
 * cuInit: here that fails with CUDA_ERROR_NO_DEVICE, so a runtime that got
 * past its version check reports "no CUDA-capable device", while one that
 * needs a newer driver reports "insufficient driver" before that.
 * Every call is logged to stderr when NTKD_STUB_LOG=1 (how the entry
 * points a runtime needs were found), and every entry point asked for and
 * not provided is logged as "missing".
 *   cc -shared -fPIC -o libcuda.so.1 scripts/libcuda_stub.c */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_NOT_INITIALIZED = 3, CUDA_ERROR_NO_DEVICE = 100,
       CUDA_ERROR_NOT_FOUND = 500 };

static int logging(void) {
  const char *e = getenv("NTKD_STUB_LOG");
  return e && *e == '1';
}
#define LOG(...)                                                                                                  \
  do {                                                                                                            \
    if (logging()) fprintf(stderr, "libcuda stub: " __VA_ARGS__);                                                 \
  } while (0)

static int driver_version(void) {
  const char *e = getenv("NTKD_STUB_DRIVER");
  return e && *e ? atoi(e) : 12020;
}

CUresult cuDriverGetVersion(int *v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = driver_version();
  LOG("cuDriverGetVersion -> %d\n", *v);
  return CUDA_SUCCESS;
}
CUresult cuInit(unsigned flags) {
  LOG("cuInit(%u) -> CUDA_ERROR_NO_DEVICE\n", flags);
  return CUDA_ERROR_NO_DEVICE;
}
CUresult cuDeviceGetCount(int *n) {
  if (n) *n = 0;
  LOG("cuDeviceGetCount -> 0, CUDA_ERROR_NOT_INITIALIZED\n");
  return CUDA_ERROR_NOT_INITIALIZED;
}
CUresult cuGetErrorString(CUresult e, const char **s) {
  LOG("cuGetErrorString(%d)\n", e);
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  *s = e == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected (libcuda stub)"
       : e == CUDA_ERROR_NOT_INITIALIZED ? "initialization error (libcuda stub)"
                                         : "unknown error (libcuda stub)";
  return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult e, const char **s) {
  LOG("cuGetErrorName(%d)\n", e);
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  *s = e == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
  return CUDA_SUCCESS;
}
/* The runtime asks for private tables by UUID; there are none here. */
CUresult cuGetExportTable(const void **table, const void *uuid) {
  (void)uuid;
  LOG("cuGetExportTable -> CUDA_ERROR_NOT_FOUND\n");
  if (table) *table = NULL;
  return CUDA_ERROR_NOT_FOUND;
}

struct entry {
  const char *name;
  void *fn;
};
static const struct entry entries[] = {
    {"cuDriverGetVersion", (void *)cuDriverGetVersion},
    {"cuInit", (void *)cuInit},
    {"cuDeviceGetCount", (void *)cuDeviceGetCount},
    {"cuGetErrorString", (void *)cuGetErrorString},
    {"cuGetErrorName", (void *)cuGetErrorName},
    {"cuGetExportTable", (void *)cuGetExportTable},
};

CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags);
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status);

static CUresult lookup(const char *sym, void **pfn, int ver, unsigned long long flags, int *status) {
  if (!sym || !pfn) return CUDA_ERROR_INVALID_VALUE;
  /* The runtime asks for cuGetProcAddress itself: the 12.0 form has the
   * status argument. */
  if (!strcmp(sym, "cuGetProcAddress")) {
    *pfn = ver >= 12000 ? (void *)cuGetProcAddress_v2 : (void *)cuGetProcAddress;
    if (status) *status = 0;
    LOG("cuGetProcAddress(%s, %d, %llu) -> provided\n", sym, ver, flags);
    return CUDA_SUCCESS;
  }
  for (size_t i = 0; i < sizeof entries / sizeof *entries; i++)
    if (!strcmp(sym, entries[i].name)) {
      *pfn = entries[i].fn;
      if (status) *status = 0; /* CU_GET_PROC_ADDRESS_SUCCESS */
      LOG("cuGetProcAddress(%s, %d, %llu) -> provided\n", sym, ver, flags);
      return CUDA_SUCCESS;
    }
  *pfn = NULL;
  if (status) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
  LOG("cuGetProcAddress(%s, %d, %llu) -> missing\n", sym, ver, flags);
  return CUDA_ERROR_NOT_FOUND;
}
CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags) {
  return lookup(sym, pfn, ver, flags, NULL);
}
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status) {
  return lookup(sym, pfn, ver, flags, status);
}
