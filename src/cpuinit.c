/* OpenBLAS kernel choice and threading (see include/ntkd/cpuinit.h). */
#include "ntkd/cpuinit.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

const char *ntk_cpu_blas_core(void) { return openblas_get_corename(); }

void ntk_cpu_single_thread(void) { openblas_set_num_threads(1); }

void ntk_cpu_fix_openblas(char **argv) {
#if defined(__x86_64__)
  if (getenv("OPENBLAS_CORETYPE") || getenv("NTKD_KEEP_BLAS_CORE")) return;
  const char *core = openblas_get_corename();
  if (!core) return;
  static const char *const avx512[] = {"skylakex", "cooperlake", "sapphirerapids"};
  static const char *const avx2[] = {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"};
  const char *want = NULL;
  const char *const *good = NULL;
  size_t ngood = 0;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
    want = "SkylakeX";
    good = avx512;
    ngood = 3;
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    want = "Haswell";
    good = avx2;
    ngood = 5;
  }
  if (!want) return;
  for (size_t i = 0; i < ngood; i++)
    if (!strcasecmp(core, good[i])) return;
  if (setenv("OPENBLAS_CORETYPE", want, 1)) return;
  execv("/proc/self/exe", argv);
  /* exec failed: carry on with the kernels we have. */
#else
  (void)argv;
#endif
}
