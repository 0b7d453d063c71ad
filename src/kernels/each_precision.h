/* Includes EACH_PRECISION_FILE twice, once per precision, with the names
 * code written for both expects: REAL, SFX(x) (x##_f or x##_d), and the
 * matching maps of src/kernels/kernel_maps.h (ABRELU_R, RSQRT, ERF, and
 * MAP, the dispatcher over every nonlinearity; MAP_ROWS and MAP_PAIRS,
 * its vectorised loops, src/kernels/map_rows.h).
 * Used by cnn.c (the CPU kernels), cnn_gpu.c and cuda/cnn_cuda.cu (the GPU
 * kernel bodies). No include guard: included once per file it expands. */
#define REAL float
#define SFX(x) x##_f
#define ABRELU_R ntk_abreluf_r
#define RSQRT ntk_rsqrtf
#define ERF ntk_erff
#define MAP ntk_mapf
#define MAP_ROWS ntk_map_rows_f
#define MAP_PAIRS ntk_map_pairs_f
#include EACH_PRECISION_FILE
#undef REAL
#undef SFX
#undef ABRELU_R
#undef RSQRT
#undef ERF
#undef MAP
#undef MAP_ROWS
#undef MAP_PAIRS
#define REAL double
#define SFX(x) x##_d
#define ABRELU_R ntk_abrelu_r
#define RSQRT ntk_rsqrt
#define ERF ntk_erf
#define MAP ntk_map
#define MAP_ROWS ntk_map_rows_d
#define MAP_PAIRS ntk_map_pairs_d
#include EACH_PRECISION_FILE
#undef REAL
#undef SFX
#undef ABRELU_R
#undef RSQRT
#undef ERF
#undef MAP
#undef MAP_ROWS
#undef MAP_PAIRS
#undef EACH_PRECISION_FILE
