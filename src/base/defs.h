/* What every room of ntkd names: the limits of a path, the kernels a job
 * computes, where a rank computes. The ground floor: includes nothing. */
#ifndef NTKD_DEFS_H
#define NTKD_DEFS_H

#define NTK_PATH_MAX 1024

/* The kernels: a mask ("ntk" stores both). */
enum { NTK_KERNEL_NNGP = 1, NTK_KERNEL_NTK = 2 };

/* Where a rank computes: [compute] backend (tiles), [train] device. */
enum { NTK_BACKEND_AUTO, NTK_BACKEND_CPU, NTK_BACKEND_CUDA };
enum { NTK_TRAIN_DEVICE_AUTO, NTK_TRAIN_DEVICE_CPU, NTK_TRAIN_DEVICE_CUDA };

/* Layer sizes of a trained MLP, input and output included. */
#define NTK_TRAIN_MAX_LAYERS 16

/* A hot CPU loop compiled for x86-64-v4 (AVX-512), x86-64-v3 (AVX2 and
 * FMA) and baseline x86-64, the best picked at run time (GCC's
 * target_clones). Not under ASan or TSan: their run-time starts after
 * ifunc resolvers run. A build may define NTK_CLONES itself (empty: one
 * target, as tests/test_clones.c does). Whether the clones round alike is
 * each loop's own promise (src/kernels/kernel_maps.h: the maps do).
 * NTK_CLONES_V4 says whether the x86-64-v4 clone is built. */
#ifndef NTK_CLONES
#if defined(__x86_64__) && !defined(__CUDACC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define NTK_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define NTK_CLONES_V4 1 /* an x86-64-v4 clone exists, run where the CPU has it */
#else
#define NTK_CLONES
#endif
#endif

#endif
