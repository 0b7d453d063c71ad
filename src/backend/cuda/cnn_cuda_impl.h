/* The CUDA kernels of src/backend/cuda/cnn_cuda.cu, written once for both
 * precisions: cnn_cuda.cu includes this file through each_precision.h
 * (REAL; each name below becomes name_f / name_d). Each kernel is one
 * block function of src/kernels/cnn_dev_impl.h on the block it runs as
 * (BLK). */

/* The per-precision names this file defines (each_precision.h), ... */
#define k_diag SFX(k_diag)
#define k_slice SFX(k_slice)
#define k_diag_any SFX(k_diag_any)
#define k_slice_any SFX(k_slice_any)
#define k_input_full SFX(k_input_full)
#define k_conv_full SFX(k_conv_full)
#define k_pool_full SFX(k_pool_full)
#define k_branch_full SFX(k_branch_full)
#define k_readout SFX(k_readout)
#define k_slice3 SFX(k_slice3)
#define k_slice3_b4 SFX(k_slice3_b4)
/* ... and those of cnn_dev_impl.h they run. */
#define dv_diag SFX(dv_diag)
#define dv_slice SFX(dv_slice)
#define dv_input_full SFX(dv_input_full)
#define dv_conv_full SFX(dv_conv_full)
#define dv_pool_full SFX(dv_pool_full)
#define dv_branch_full SFX(dv_branch_full)
#define dv_readout SFX(dv_readout)
#define dv_slice3 SFX(dv_slice3)

__global__ static void k_diag(struct ntk_dev_args a) {
  extern __shared__ double sm_[];
  struct ntk_blk B = BLK;
  dv_diag(&a, &B, (REAL *)sm_, 0);
}

__global__ static void k_slice(struct ntk_dev_args a) {
  extern __shared__ double sm_[];
  struct ntk_blk B = BLK;
  dv_slice(&a, &B, (REAL *)sm_, 0);
}

__global__ static void k_diag_any(struct ntk_dev_args a) {
  extern __shared__ double sm_[];
  struct ntk_blk B = BLK;
  dv_diag(&a, &B, (REAL *)sm_, 1);
}

__global__ static void k_slice_any(struct ntk_dev_args a) {
  extern __shared__ double sm_[];
  struct ntk_blk B = BLK;
  dv_slice(&a, &B, (REAL *)sm_, 1);
}

__global__ static void k_input_full(struct ntk_dev_args a) {
  struct ntk_blk B = BLK;
  dv_input_full(&a, &B);
}

__global__ static void k_conv_full(struct ntk_dev_args a) {
  struct ntk_blk B = BLK;
  dv_conv_full(&a, &B);
}

__global__ static void k_pool_full(struct ntk_dev_args a) {
  struct ntk_blk B = BLK;
  dv_pool_full(&a, &B);
}

__global__ static void k_branch_full(struct ntk_dev_args a) {
  struct ntk_blk B = BLK;
  dv_branch_full(&a, &B);
}

__global__ static void k_readout(struct ntk_dev_args a) {
  extern __shared__ double sm_[];
  struct ntk_blk B = BLK;
  dv_readout(&a, &B, (REAL *)sm_);
}

/* SLICE3 with the NTK (WT) and the variance capture (CAP) as constants:
 * four kernels per precision, each with only its own code. The arguments
 * stay in the constant bank (__grid_constant__), read in place. */
template <int WT, int CAP>
__global__ static void k_slice3(const __grid_constant__ struct ntk_dev_args a) {
  extern __shared__ __align__(16) double sm3_[]; /* (NNGP, NTK) pairs: float2 or double2 */
  struct ntk_blk B = BLK;
  dv_slice3(&a, &B, (REAL *)sm3_, WT, CAP);
}

/* The same code held to 64 registers a thread, so that 4 blocks (32 warps)
 * fit on a multiprocessor where k_slice3's 80 fit 3 (24 warps), at the
 * price of spills to a stack frame: on an H200 CNTK-GAP-21 takes 0.945 of
 * k_slice3's time in float32 and 0.76 in float64, its float32 tiles still
 * the CPU's bits (docs/GPU.md, 2026-12-04). The default (cnn_cuda.cu). */
template <int WT, int CAP>
__global__ static void __launch_bounds__(NTK_CUDA_THREADS, 4)
    k_slice3_b4(const __grid_constant__ struct ntk_dev_args a) {
  extern __shared__ __align__(16) double sm3_[];
  struct ntk_blk B = BLK;
  dv_slice3(&a, &B, (REAL *)sm3_, WT, CAP);
}

#undef k_diag
#undef k_slice
#undef k_diag_any
#undef k_slice_any
#undef k_input_full
#undef k_conv_full
#undef k_pool_full
#undef k_branch_full
#undef k_readout
#undef k_slice3
#undef k_slice3_b4
#undef dv_diag
#undef dv_slice
#undef dv_input_full
#undef dv_conv_full
#undef dv_pool_full
#undef dv_branch_full
#undef dv_readout
#undef dv_slice3
