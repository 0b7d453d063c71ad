/* CUDA device discovery: how many GPUs this process sees, what each one is
 * (name, UUID, PCI bus id: the placement of docs/GPU.md, "Placement"), and
 * which CUDA the binary carries and the driver supports. It links the
 * static CUDA runtime, so ntkd runs where no CUDA is installed: without a
 * driver cudaGetDeviceCount fails and we report that. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

/* "13.0" from 13000. */
static void version_text(int v, char *buf, size_t cap) { snprintf(buf, cap, "%d.%d", v / 1000, (v % 1000) / 10); }

/* The CUDA runtime linked in (cudaRuntimeGetVersion; CUDART_VERSION if
 * that fails) and the newest CUDA the driver supports (0: no driver). */
static void versions(int *runtime, int *driver) {
  *runtime = 0;
  *driver = 0;
  if (cudaRuntimeGetVersion(runtime) != cudaSuccess || *runtime <= 0) *runtime = CUDART_VERSION;
  if (cudaDriverGetVersion(driver) != cudaSuccess) *driver = 0;
}

/* GPUs usable by this process; when none, why (the runtime's message, or
 * plainly which CUDA the driver supports and which this ntkd needs), and
 * *failed = 1 if CUDA itself failed (no driver, a driver too old, ...)
 * rather than finding no device. */
extern "C" int ntk_cuda_list_count(int *failed, char *why, size_t cap) {
  int n = 0;
  *failed = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc == cudaErrorNoDevice) rc = cudaSuccess, n = 0;
  if (rc != cudaSuccess) {
    int rt, drv;
    versions(&rt, &drv);
    char have[16], need[16];
    version_text(drv, have, sizeof have);
    version_text(rt, need, sizeof need);
    *failed = 1;
    if (rc == cudaErrorInsufficientDriver && drv > 0)
      snprintf(why, cap, "the NVIDIA driver supports CUDA %s, this ntkd needs CUDA %s: update the driver or use a "
               "build made with an older CUDA (scripts/gpu_bundle.sh)", have, need);
    else if (rc == cudaErrorInsufficientDriver)
      snprintf(why, cap, "no NVIDIA driver found (libcuda.so.1 cannot be loaded)");
    else
      snprintf(why, cap, "%s", cudaGetErrorString(rc));
    return 0;
  }
  if (n == 0) snprintf(why, cap, "no CUDA device");
  return n;
}

extern "C" int ntk_cuda_count(char *why, size_t cap) {
  int failed;
  return ntk_cuda_list_count(&failed, why, cap);
}

/* Device `i` of this process: its UUID (16 bytes), PCI bus id and name.
 * 0 on success, else 1 with the runtime's message in why. Creates no
 * context (the coordinator lists its devices too and must not hold one). */
extern "C" int ntk_cuda_device_info(int i, unsigned char *uuid, char *pci, size_t pcicap, char *name,
                                    size_t namecap, char *why, size_t cap) {
  cudaDeviceProp p;
  cudaError_t rc = cudaGetDeviceProperties(&p, i);
  if (rc != cudaSuccess) {
    snprintf(why, cap, "cudaGetDeviceProperties(%d): %s", i, cudaGetErrorString(rc));
    return 1;
  }
  memcpy(uuid, p.uuid.bytes, 16);
  snprintf(pci, pcicap, "%04x:%02x:%02x.0", (unsigned)p.pciDomainID, (unsigned)p.pciBusID, (unsigned)p.pciDeviceID);
  snprintf(name, namecap, "%s", p.name);
  return 0;
}

extern "C" int ntk_cuda_describe(char *buf, size_t cap) {
  char why[512], rts[16], drvs[40];
  int rt, drv;
  int n = ntk_cuda_count(why, sizeof why);
  versions(&rt, &drv);
  version_text(rt, rts, sizeof rts);
  if (drv > 0) {
    char v[16];
    version_text(drv, v, sizeof v);
    snprintf(drvs, sizeof drvs, "driver supports CUDA %s", v);
  } else {
    snprintf(drvs, sizeof drvs, "no NVIDIA driver");
  }
  if (!n) {
    snprintf(buf, cap, "compiled in; no usable GPU (%s); CUDA runtime %s built in, %s", why, rts, drvs);
    return 0;
  }
  int len = snprintf(buf, cap, "compiled in; %d GPU%s", n, n == 1 ? "" : "s");
  for (int i = 0; i < n && len > 0 && (size_t)len < cap; i++) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, i) == cudaSuccess)
      len += snprintf(buf + len, cap - (size_t)len, "%s %s (sm_%d%d)", i ? "," : ":", p.name, p.major, p.minor);
  }
  if (len > 0 && (size_t)len < cap) snprintf(buf + len, cap - (size_t)len, "; CUDA runtime %s built in, %s", rts, drvs);
  return n;
}
