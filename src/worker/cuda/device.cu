/* CUDA device discovery. The CUDA tile backend arrives with the GPU issue;
 * this unit wires the toolchain in and tells what a rank could use. It
 * links the static CUDA runtime, so ntkd runs where no CUDA is installed:
 * without a driver cudaGetDeviceCount fails and we report that. */
#include <cuda_runtime.h>
#include <stdio.h>

/* GPUs usable by this process; when none, why (the runtime's message). */
extern "C" int ntk_cuda_count(char *why, size_t cap) {
  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    snprintf(why, cap, "%s", cudaGetErrorString(rc));
    return 0;
  }
  if (n == 0) snprintf(why, cap, "no CUDA device");
  return n;
}

extern "C" int ntk_cuda_describe(char *buf, size_t cap) {
  char why[256];
  int n = ntk_cuda_count(why, sizeof why);
  if (!n) {
    snprintf(buf, cap, "compiled in; no usable GPU (%s)", why);
    return 0;
  }
  int len = snprintf(buf, cap, "compiled in; %d GPU%s", n, n == 1 ? "" : "s");
  for (int i = 0; i < n && len > 0 && (size_t)len < cap; i++) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, i) == cudaSuccess)
      len += snprintf(buf + len, cap - (size_t)len, "%s %s (sm_%d%d)", i ? "," : ":", p.name, p.major, p.minor);
  }
  return n;
}
