/* Registry of compiled-in backends; the only place that knows whether the
 * CUDA backend exists. */
#include "backend/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cnn.h"
#include "kernels/cnn_dev.h"
#include "kernels/fc.h"
#include "kernels/numerical.h"

#ifdef NTKD_HAVE_CUDA
#include "backend/cuda/fc_cuda.h"
int ntk_cuda_describe(char *buf, size_t cap); /* src/backend/cuda/device.cu */
int ntk_cuda_count(char *why, size_t cap);
int ntk_cuda_list_count(int *failed, char *why, size_t cap);
int ntk_cuda_device_info(int i, unsigned char *uuid, char *pci, size_t pcicap, char *name, size_t namecap, char *why,
                         size_t cap);
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

ntk_status ntk_backend_check(const struct ntk_problem *p) {
  return ntk_cnn_applies(p->arch, p->data) ? ntk_cnn_check(p->arch, p->data) : ntk_fc_check(p->arch, p->data);
}

int ntk_backend_gpu_computes(const struct ntk_arch *arch, const struct ntk_dataset *data, char *why, size_t cap) {
  for (size_t i = 0; i < arch->n; i++) /* no GPU code for its quadrature (src/kernels/numerical.c) */
    if (arch->layers[i].kind == NTK_LAYER_MAP && arch->layers[i].map.kind == NTK_MAP_NUMERICAL) {
      if (why)
        snprintf(why, cap, "layer %zu, ElementwiseNumerical(%s), is computed on CPUs only", i + 1,
                 ntk_numfn_name(arch->layers[i].map.degree));
      return 0;
    }
  char wide[512];
  if (data->elem == 4 && ntk_arch_float32_widened(arch, wide, sizeof wide)) { /* the CPU backend widens it */
    if (why) snprintf(why, cap, "a float32 job is computed in float64 and rounded, on CPUs only (%s)", wide);
    return 0;
  }
  if (!ntk_cnn_applies(arch, data)) return 1; /* the FC kernel: every FC network (src/kernels/fc_entry.h) */
  struct ntk_dev_plan *P = malloc(sizeof *P);
  ntk_status st = P ? ntk_cnn_dev_plan(arch, data, P) : ntk_error(NTK_ENOMEM, "out of memory");
  free(P);
  if (st && why) snprintf(why, cap, "%s", ntk_error_message());
  return !st;
}

/* ---- Placement ---------------------------------------------------------- */

/* NTKD_TEST_GPU_UUIDS (backend.h): rank `rank`'s entry as fake devices. */
static void test_list(const char *spec, int rank, struct ntk_gpu_view *v) {
  const char *e = spec;
  for (int i = 0; i < rank && e; i++) {
    e = strchr(e, ';');
    if (e) e++;
  }
  size_t len = e ? strcspn(e, ";") : 0;
  if (!e || len == 0) {
    snprintf(v->why, sizeof v->why, "no CUDA device (NTKD_TEST_GPU_UUIDS)");
    return;
  }
  if (len == 1 && e[0] == '!') {
    v->n = -1;
    snprintf(v->why, sizeof v->why, "the driver failed (NTKD_TEST_GPU_UUIDS)");
    return;
  }
  for (size_t at = 0; at <= len;) {
    size_t t = strcspn(e + at, ",;");
    if (at + t > len) t = len - at;
    int ok = t >= 1 && t <= NTK_GPU_UUID_BYTES;
    for (size_t k = 0; ok && k < t; k++) {
      char c = e[at + k];
      ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    }
    if (!ok) {
      v->n = -1;
      snprintf(v->why, sizeof v->why, "NTKD_TEST_GPU_UUIDS: bad device tag in the entry of rank %d", rank);
      return;
    }
    if (v->n < NTK_GPU_MAX) {
      struct ntk_gpu_info *d = &v->dev[v->n++];
      memcpy(d->uuid, e + at, t);
      snprintf(d->pci, sizeof d->pci, "test");
      snprintf(d->name, sizeof d->name, "test GPU %.*s", (int)t, e + at);
    }
    at += t + 1;
  }
}

void ntk_backend_gpu_list(int rank, struct ntk_gpu_view *v) {
  v->n = 0;
  v->why[0] = '\0';
  memset(v->dev, 0, sizeof v->dev);
  const char *spec = getenv("NTKD_TEST_GPU_UUIDS");
  if (spec) {
    if (rank == 0) fprintf(stderr, "ntkd: test setting NTKD_TEST_GPU_UUIDS=%s\n", spec);
    test_list(spec, rank, v);
    return;
  }
#ifdef NTKD_HAVE_CUDA
  char why[256] = "";
  int failed = 0, n = ntk_cuda_list_count(&failed, why, sizeof why);
  if (n <= 0) {
    /* No device at all is a normal CPU machine; a failing driver is not. */
    v->n = failed ? -1 : 0;
    snprintf(v->why, sizeof v->why, "%s", why);
    return;
  }
  for (int i = 0; i < n && i < NTK_GPU_MAX; i++) {
    struct ntk_gpu_info *d = &v->dev[i];
    if (ntk_cuda_device_info(i, d->uuid, d->pci, sizeof d->pci, d->name, sizeof d->name, why, sizeof why)) {
      v->n = -1;
      snprintf(v->why, sizeof v->why, "%s", why);
      return;
    }
    v->n = i + 1;
  }
#else
  snprintf(v->why, sizeof v->why, "this ntkd was built without CUDA");
#endif
}

void ntk_gpu_uuid_short(const unsigned char *u, char *buf, size_t cap) {
  snprintf(buf, cap, "GPU-%02x%02x%02x%02x", u[0], u[1], u[2], u[3]);
}

void ntk_backend_describe(char *buf, size_t cap) {
#ifdef NTKD_HAVE_CUDA
  char cuda[1024];
  ntk_cuda_describe(cuda, sizeof cuda);
  snprintf(buf, cap, "cpu (OpenBLAS + vectorised C), cuda (fully-connected and convolutional networks); cuda: %s",
           cuda);
#else
  snprintf(buf, cap, "cpu (OpenBLAS + vectorised C); cuda: not compiled in");
#endif
}
