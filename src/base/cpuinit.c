/* OpenBLAS kernel choice and threading (see src/base/cpuinit.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "base/cpuinit.h"

#include <sched.h>
#include <sys/resource.h>

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <pmmintrin.h>
#include <xmmintrin.h>
#define NTK_HAVE_MXCSR 1
#endif

#include "base/signals.h"

const char *ntk_cpu_blas_core(void) { return openblas_get_corename(); }

void ntk_cpu_single_thread(void) { openblas_set_num_threads(1); }

int ntk_cpu_blas_threads(void) { return openblas_get_num_threads(); }

void ntk_cpu_set_blas_threads(int n) { openblas_set_num_threads(n > 0 ? n : 1); }

int ntk_cpu_cores(int *allowed) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  int online = n > 0 ? (int)n : 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  int a = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  *allowed = a > 0 ? a : online; /* more than CPU_SETSIZE cores, or no answer: all */
  return online;
}

ntk_status ntk_cpu_check_address_space(int threads) { return ntk_cpu_check_address_space_threads(threads, 0, 0); }

ntk_status ntk_cpu_check_address_space_threads(int threads, int held, double per_thread) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return NTK_OK;
  double used = 0, page = (double)sysconf(_SC_PAGESIZE), mib = 1024.0 * 1024.0;
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long pages = 0;
  if (f && fscanf(f, "%llu", &pages) == 1) used = (double)pages * page;
  if (f) fclose(f);
  /* a buffer of 128 MiB and a page per thread (Debian's x86-64 build) not
   * holding one yet, what else a thread beyond the first takes, and 16 MiB
   * for ntkd's own first allocations */
  int t = threads > 0 ? threads : 1, more = t > held ? t - held : 0, others = t - (held > 1 ? held : 1);
  double need = more * (128.0 * mib + page) + (others > 0 ? others : 0) * per_thread + 16.0 * mib;
  double limit = (double)rl.rlim_cur;
  if (limit >= used + need) return NTK_OK;
  return ntk_error(NTK_ENOMEM,
                   "the address-space limit (ulimit -v) is %.0f MiB and %.0f MiB of it are in use; OpenBLAS "
                   "takes 128 MiB for each of its %d thread(s) and never returns when it cannot (it retries for "
                   "ever); give this process at least %.0f MiB more address space (ulimit -v, or the batch "
                   "system's virtual-memory request), or no limit",
                   limit / mib, used / mib, t, (used + need - limit) / mib);
}

void ntk_cpu_reserve_blas(void) {
  enum { n = 256 }; /* above OpenBLAS's small-matrix kernels, which take no buffer */
  static double a[n * n], c[n * n];
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, a, n, 0.0, c, n);
}

double ntk_cpu_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (double)pages * (double)size : 0;
}

void ntk_cpu_all_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  int k = n > 0 ? (int)n : 1;
  /* Not more than OPENBLAS_NUM_THREADS (the user's, or the one ntkd set
   * itself under ulimit -v: ntk_cpu_fix_openblas), nor than the address
   * space holds: a thread OpenBLAS cannot give its buffer retries for
   * ever (a solve under ulimit -v spun in dpotrf until killed). */
  const char *env = getenv("OPENBLAS_NUM_THREADS");
  int cap = env ? atoi(env) : 0;
  if (cap >= 1 && cap < k) k = cap;
  while (k > 1 && ntk_cpu_check_address_space(k) != NTK_OK) k--;
  openblas_set_num_threads(k);
}

void ntk_cpu_flush_denormals(int on) {
#ifdef NTK_HAVE_MXCSR
  /* FTZ: results that would be subnormal become 0. DAZ: subnormal inputs
   * read as 0. Both, since a subnormal can also arrive from memory (a
   * snapshot written without the fix, data). */
  _MM_SET_FLUSH_ZERO_MODE(on ? _MM_FLUSH_ZERO_ON : _MM_FLUSH_ZERO_OFF);
  _MM_SET_DENORMALS_ZERO_MODE(on ? _MM_DENORMALS_ZERO_ON : _MM_DENORMALS_ZERO_OFF);
#else
  (void)on;
#endif
}

int ntk_cpu_flushing_denormals(void) {
#ifdef NTK_HAVE_MXCSR
  return _MM_GET_FLUSH_ZERO_MODE() == _MM_FLUSH_ZERO_ON && _MM_GET_DENORMALS_ZERO_MODE() == _MM_DENORMALS_ZERO_ON;
#else
  return 0;
#endif
}

/* The OpenBLAS kernels this CPU's flags allow when OpenBLAS chose weaker
 * ones (an unknown, virtual CPU model makes it fall back to Prescott),
 * else NULL. Not when OPENBLAS_CORETYPE or NTKD_KEEP_BLAS_CORE is set. */
static const char *better_blas_core(void) {
#if defined(__x86_64__)
  if (getenv("OPENBLAS_CORETYPE") || getenv("NTKD_KEEP_BLAS_CORE")) return NULL;
  const char *core = openblas_get_corename();
  if (!core) return NULL;
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
  if (!want) return NULL;
  for (size_t i = 0; i < ngood; i++)
    if (!strcasecmp(core, good[i])) return NULL;
  return want;
#else
  return NULL;
#endif
}

void ntk_cpu_fix_openblas(char **argv) {
  const char *want = better_blas_core();
  /* An address-space limit with room for one OpenBLAS buffer but not one
   * per thread of its pool (made when the library loaded, each thread may
   * take its own): with one thread it runs (ntkd computes with one BLAS
   * thread per rank; a solve on rank 0 then runs on one core). */
  int pool = openblas_get_num_threads();
  int one = !getenv("OPENBLAS_NUM_THREADS") && pool > 1 && ntk_cpu_check_address_space(pool) != NTK_OK;
  if (!want && !one) return;
  if (want && setenv("OPENBLAS_CORETYPE", want, 1)) return;
  if (one) {
    /* also with no room for one: without a pool, OpenBLAS's destructor
     * does not spin at exit, and the commands without BLAS (info, verify,
     * export) end; main refuses the others */
    if (setenv("OPENBLAS_NUM_THREADS", "1", 1)) return;
    if (ntk_cpu_check_address_space(1) == NTK_OK)
      fprintf(stderr, "ntkd: note: the address-space limit (ulimit -v) leaves room for one OpenBLAS thread, not "
                      "%d: running with OPENBLAS_NUM_THREADS=1\n", pool);
  }
  /* Stop signals stay blocked across the exec (pending, not lost) until
   * the new image's main() has its handlers in place. */
  ntk_signals_block();
  /* a stop signal already taken (its flag set, its alarm armed) would be
   * forgotten by the new image while the alarm lived on: no exec then */
  if (ntk_stop_requested()) {
    ntk_signals_install();
    return;
  }
  execv("/proc/self/exe", argv);
  ntk_signals_install();
  /* exec failed: carry on with the kernels we have. */
}

/* OpenBLAS's kernel selection, exported by its DYNAMIC_ARCH builds (as
 * Debian's); weak, so that an OpenBLAS without them links and is left as
 * it chose. quit forgets the choice, init makes it again from
 * OPENBLAS_CORETYPE. */
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));

const char *ntk_cpu_fix_openblas_here(void) {
  const char *want = better_blas_core();
  if (!want || !gotoblas_dynamic_init || !gotoblas_dynamic_quit || setenv("OPENBLAS_CORETYPE", want, 1)) return NULL;
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
  return want;
}
