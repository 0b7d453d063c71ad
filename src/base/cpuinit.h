/* Process set-up for the CPU numerics: OpenBLAS kernel selection and
 * threading. */
#ifndef NTKD_CPUINIT_H
#define NTKD_CPUINIT_H

#include "base/status.h"

/* Debian's OpenBLAS picks its kernels from the CPU model; on virtual CPUs
 * with an unknown model it falls back to Prescott (SSE3) kernels, 5-8x
 * slower than the AVX-512 ones the CPU supports. If OPENBLAS_CORETYPE is
 * unset and the choice is weaker than the CPU's flags allow, set it and
 * re-execute ntkd (before MPI starts). The same re-execution sets
 * OPENBLAS_NUM_THREADS=1 (if unset) when the address-space limit has room
 * for one OpenBLAS buffer but not for one per thread of its pool
 * (ntk_cpu_check_address_space). Call first thing in main(). */
void ntk_cpu_fix_openblas(char **argv);

/* The same choice inside a process that cannot re-execute (libntkd,
 * loaded into Python): OpenBLAS re-selects its kernels in place, for the
 * whole process, so that tiles computed here equal the program's bit for
 * bit. Call while no BLAS call runs (libntkd: when it is loaded). Returns
 * the kernels chosen, or NULL if it left OpenBLAS as it was. */
const char *ntk_cpu_fix_openblas_here(void);

/* One OpenBLAS thread per rank: parallelism comes from ranks, and a fixed
 * thread count keeps BLAS results bit-reproducible. */
void ntk_cpu_single_thread(void);

/* OpenBLAS's thread count now, and setting it (the library computes with
 * its own threads, one OpenBLAS thread each, and gives the count back). */
int ntk_cpu_blas_threads(void);
void ntk_cpu_set_blas_threads(int n);

/* The cores online on this machine, and in *allowed those this process
 * may run on (its affinity mask: fewer under mpirun's or SLURM's binding). */
int ntk_cpu_cores(int *allowed);

/* Whether this process's address-space limit (RLIMIT_AS: ulimit -v, a
 * batch system's h_vmem) leaves OpenBLAS room for its buffers, 128 MiB for
 * each of `threads` threads: when malloc refuses one, OpenBLAS 0.3.21
 * retries for ever (blas_memory_alloc), and a job would spin without end
 * at full CPU, deaf to stop signals, instead of failing. NTK_OK when there
 * is no limit or room; NTK_ENOMEM naming the limit otherwise. */
ntk_status ntk_cpu_check_address_space(int threads);

/* The same for `threads` threads of a process's own that each call
 * OpenBLAS (libntkd's pool), of which `held` hold their buffer already
 * (OpenBLAS keeps it for the process's life, for the next call): each
 * beyond those and beyond the first takes `per_thread` bytes more (its
 * stack, its malloc arena). */
ntk_status ntk_cpu_check_address_space_threads(int threads, int held, double per_thread);

/* One BLAS call, so that OpenBLAS takes its buffers now, while
 * ntk_cpu_check_address_space's room is there, not after the job's own
 * allocations have used it (it keeps them for the process's life). */
void ntk_cpu_reserve_blas(void);

/* The machine's physical memory in bytes (0 if unknown). */
double ntk_cpu_memory(void);

/* One OpenBLAS thread per online core: for the kernel-regression solve,
 * which runs on rank 0 alone after the tiles are done; at most
 * OPENBLAS_NUM_THREADS, and as many as the address-space limit holds. */
void ntk_cpu_all_threads(void);

/* Flush-to-zero and denormals-are-zero on (`on`) or off for the calling
 * thread. The MXCSR bits are per thread: every thread that does float
 * arithmetic must call it (threads created later inherit the creator's
 * bits; OpenBLAS's pool threads, made at load time, do not). Subnormal
 * operands cost ~100 cycles each on x86; Adam's m and v of parameters
 * whose gradient stays zero decay into them (docs/TRAINING.md). Rank-local;
 * a no-op off x86. */
void ntk_cpu_flush_denormals(int on);

/* 1 if the calling thread flushes subnormals (FTZ and DAZ both set). */
int ntk_cpu_flushing_denormals(void);

/* The OpenBLAS kernel family in use, e.g. "SkylakeX". */
const char *ntk_cpu_blas_core(void);

#endif
