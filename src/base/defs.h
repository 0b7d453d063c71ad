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

#endif
