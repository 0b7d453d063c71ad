/* Products of a large matrix with a few columns (skinny.h).
 *
 * OpenBLAS's gemm packs its large operand for every call, which at the
 * few columns CG runs costs as much as the product: a 2048 x 2048 float32
 * tile times 10 columns took 5.4 ms in sgemm (64-row chunks, both
 * products) on one core of an AVX-512 EPYC, 2.8 ms here; the
 * preconditioner's two float64 products with a 6 667 x 4 000 factor 96 ms
 * in dgemm, 41 ms here (docs/PERFORMANCE.md, 2026-12-04;
 * build/ntkd_bench_skinny). Here each block of 4 rows of the matrix is
 * read once: its elements are broadcast against the rows of x (y's row
 * sums) and the 4 rows of xt (added into yt's rows), the columns padded to
 * whole 64-byte vectors (16 float32 or 8 float64 lanes; 8 columns in 16
 * lanes still beat sgemm, 6 do not: NTK_SKINNY_MIN; the float64 ones beat
 * dgemm from 1 column), or, for 17-24 float32 and 9-12 and 17-20 float64
 * columns, to 32-byte ones where the core issues 64-byte FMAs as two
 * halves (f32_lanes, d_lanes). The products run on one thread: where a rank's
 * OpenBLAS has more, BLAS keeps them.
 *
 * This file alone is compiled with -ffp-contract=fast (CMakeLists.txt):
 * a*b + c is one fused multiply-add where the clone has FMA. CG's products
 * need no bit agreement between CPUs (BLAS kernels differ between them
 * too): the true residuals that decide convergence are float64 products
 * (cg.c). Sums run over at most BAND terms in the vectors' precision and
 * then go into float64: in float32, 2 048-term sums cost CG 5 % more
 * iterations than sgemm's (233 against 221), 256-term ones none (218,
 * 219; docs/PERFORMANCE.md).
 * AUTO takes the one-pass products only where they run as AVX-512 code:
 * their 64-byte (and 32-byte) vectors and 4-row blocks are sized for its
 * 32 registers;
 * compiled for AVX2 (16) they spill and run 20-30x slower than BLAS
 * (avx512() below). */
#include "solve/skinny.h"

#include <cblas.h>
#include <string.h>

#include "base/clock.h"
#include "base/cpuinit.h"
#include "base/defs.h"

#define ROWS 4   /* matrix rows per block: 4 x NV accumulators (or rows of xt) in registers */
#define BAND 256 /* terms per sum in the vectors' precision, then added in float64 */
#define CHUNK 64 /* tile rows per sgemm pair (the BLAS path): both products while in cache */

typedef float vf __attribute__((vector_size(64), aligned(4), may_alias));
typedef float vf8 __attribute__((vector_size(32), aligned(4), may_alias));
typedef double vd __attribute__((vector_size(64), aligned(8), may_alias));
typedef double vd4 __attribute__((vector_size(32), aligned(8), may_alias));

/* Rows [r0, r0 + R) of a (ld) against NV vectors V of W lanes per row of
 * x and xt (P = W NV lanes). DO_Y: y (float64, na columns) += the rows'
 * sums, BAND columns at a time; DO_YT: acc (cols rows of P) += the rows'
 * terms. */
#define BLOCK(V, W, R, NV, DO_Y, DO_YT)                                                        \
  do {                                                                                         \
    V xi[R][NV];                                                                               \
    for (int k = 0; k < (R); k++)                                                              \
      for (int v = 0; v < (NV); v++) xi[k][v] = (DO_YT) ? *(const V *)(xt + (r0 + k) * P + (W) * v) : (V){0}; \
    for (size_t c0 = 0; c0 < cols; c0 += BAND) {                                               \
      size_t c1 = cols - c0 < BAND ? cols : c0 + BAND;                                         \
      V sum[R][NV];                                                                            \
      for (int k = 0; k < (R); k++)                                                            \
        for (int v = 0; v < (NV); v++) sum[k][v] = (V){0};                                     \
      for (size_t c = c0; c < c1; c++) {                                                       \
        __typeof__(xi[0][0][0]) s[R];                                                          \
        for (int k = 0; k < (R); k++) s[k] = a[(r0 + k) * ld + c];                             \
        for (int v = 0; v < (NV); v++) {                                                       \
          if (DO_Y) {                                                                          \
            V xj = *(const V *)(x + c * P + (W) * v);                                          \
            for (int k = 0; k < (R); k++) sum[k][v] += s[k] * xj;                              \
          }                                                                                    \
          if (DO_YT) {                                                                         \
            V *o = (V *)(acc + c * P + (W) * v), u = *o;                                       \
            for (int k = 0; k < (R); k++) u += s[k] * xi[k][v];                                \
            *o = u;                                                                            \
          }                                                                                    \
        }                                                                                      \
      }                                                                                        \
      for (int k = 0; (DO_Y) && k < (R); k++)                                                  \
        for (size_t q = 0; q < na; q++) y[(r0 + k) * na + q] += (double)sum[k][q / (W)][q % (W)]; \
    }                                                                                          \
  } while (0)

/* NAME: y += a x (DO_Y) and yt += a^T xt (DO_YT) for a of element type T,
 * x and xt in rows of P = W NV lanes of V, acc: cols x P of scratch.
 * Inlined into the clones below, so that every target gets its own code
 * for each width. */
#define ONEPASS(NAME, T, V, W, NV, DO_Y, DO_YT) ONEPASS_MIXED(NAME, T, T, V, W, NV, DO_Y, DO_YT)
/* ... for a of element type TA, the vectors and sums of type T */
#define ONEPASS_MIXED(NAME, TA, T, V, W, NV, DO_Y, DO_YT)                                      \
  static inline __attribute__((always_inline)) void NAME(const TA *a, size_t rows, size_t cols, size_t ld,      \
                                                         const T *x, const T *xt, double *y, double *yt,       \
                                                         size_t na, T *acc) {                                  \
    const size_t P = (W) * (NV);                                                               \
    (void)x, (void)xt, (void)y, (void)yt, (void)acc;                                           \
    for (size_t b0 = 0; b0 < rows; b0 += BAND) {                                               \
      size_t b1 = rows - b0 < BAND ? rows : b0 + BAND, r0 = b0;                                \
      if (DO_YT) memset(acc, 0, cols * P * sizeof *acc);                                       \
      for (; r0 + ROWS <= b1; r0 += ROWS) BLOCK(V, W, ROWS, NV, DO_Y, DO_YT);                  \
      for (; r0 < b1; r0++) BLOCK(V, W, 1, NV, DO_Y, DO_YT);                                   \
      for (size_t c = 0; (DO_YT) && c < cols; c++)                                             \
        for (size_t q = 0; q < na; q++) yt[c * na + q] += (double)acc[c * P + q];              \
    }                                                                                          \
  }

/* float32 tiles: both products (off-diagonal tiles) or y alone (diagonal) */
ONEPASS(tile2_1, float, vf, 16, 1, 1, 1)
ONEPASS(tile2_2, float, vf, 16, 2, 1, 1)
ONEPASS(tile2_3, float, vf, 16, 3, 1, 1)
ONEPASS(tile1_1, float, vf, 16, 1, 1, 0)
ONEPASS(tile1_2, float, vf, 16, 2, 1, 0)
ONEPASS(tile1_3, float, vf, 16, 3, 1, 0)
/* ... in 8-lane vectors, for 17-24 columns (f32_lanes) */
ONEPASS(tile2_h3, float, vf8, 8, 3, 1, 1)
ONEPASS(tile1_h3, float, vf8, 8, 3, 1, 0)
/* float32 tiles in float64 arithmetic (mixed: true residuals, test
 * predictions); both products up to 24 columns, y alone up to 48 */
ONEPASS_MIXED(mtile2_1, float, double, vd, 8, 1, 1, 1)
ONEPASS_MIXED(mtile2_2, float, double, vd, 8, 2, 1, 1)
ONEPASS_MIXED(mtile2_3, float, double, vd, 8, 3, 1, 1)
ONEPASS_MIXED(mtile1_1, float, double, vd, 8, 1, 1, 0)
ONEPASS_MIXED(mtile1_2, float, double, vd, 8, 2, 1, 0)
ONEPASS_MIXED(mtile1_3, float, double, vd, 8, 3, 1, 0)
ONEPASS_MIXED(mtile1_4, float, double, vd, 8, 4, 1, 0)
ONEPASS_MIXED(mtile1_5, float, double, vd, 8, 5, 1, 0)
ONEPASS_MIXED(mtile1_6, float, double, vd, 8, 6, 1, 0)
/* float64: A x and A^T xt apart */
ONEPASS(ax_1, double, vd, 8, 1, 1, 0)
ONEPASS(ax_2, double, vd, 8, 2, 1, 0)
ONEPASS(ax_3, double, vd, 8, 3, 1, 0)
ONEPASS(ax_4, double, vd, 8, 4, 1, 0)
ONEPASS(ax_5, double, vd, 8, 5, 1, 0)
ONEPASS(ax_6, double, vd, 8, 6, 1, 0)
ONEPASS(atx_1, double, vd, 8, 1, 0, 1)
ONEPASS(atx_2, double, vd, 8, 2, 0, 1)
ONEPASS(atx_3, double, vd, 8, 3, 0, 1)
ONEPASS(atx_4, double, vd, 8, 4, 0, 1)
ONEPASS(atx_5, double, vd, 8, 5, 0, 1)
ONEPASS(atx_6, double, vd, 8, 6, 0, 1)
/* ... in 4-lane vectors, for 9-12 and 17-20 columns (d_lanes) */
ONEPASS(ax_q3, double, vd4, 4, 3, 1, 0)
ONEPASS(ax_q5, double, vd4, 4, 5, 1, 0)
ONEPASS(atx_q3, double, vd4, 4, 3, 0, 1)
ONEPASS(atx_q5, double, vd4, 4, 5, 0, 1)

static size_t round_up(size_t na, size_t w) { return (na + w - 1) / w * w; }

/* Seconds for 16 independent chains of `it` multiply-adds on 64-byte
 * (wide) or 32-byte vectors. */
#define FMA_CHAINS(V)                                                                            \
  do {                                                                                           \
    V acc[16], m;                                                                                \
    for (size_t l = 0; l < sizeof m / sizeof m[0]; l++) m[l] = 0.999f;                           \
    for (int k = 0; k < 16; k++) acc[k] = m;                                                     \
    double t = ntk_now();                                                                        \
    for (int i = 0; i < it; i++)                                                                 \
      for (int k = 0; k < 16; k++) acc[k] = acc[k] * m + m;                                      \
    __asm__ volatile("" : : "r"(acc) : "memory"); /* the chains done before the clock is read */  \
    t = ntk_now() - t;                                                                           \
    for (int k = 1; k < 16; k++) acc[0] += acc[k];                                               \
    for (size_t l = 0; l < sizeof m / sizeof m[0]; l++) fma_sink += acc[0][l]; /* all used */   \
    return t;                                                                                    \
  } while (0)
static volatile float fma_sink;
NTK_CLONES static double fma_chains(int wide, int it) {
  if (wide) FMA_CHAINS(vf);
  FMA_CHAINS(vf8);
}

/* Whether this core issues a 64-byte multiply-add as two 32-byte halves
 * (AMD's Zen 4, and the project's AVX-512 EPYC VMs: 16 chains of 64-byte
 * FMAs take 2.00x the time of 32-byte ones there, the same lanes per
 * cycle), found once by timing both (best of 5 of ~10 us each). Where it
 * does, padding columns to 32-byte vectors costs fewer issue slots than
 * padding to 64-byte ones; on a core with full 64-byte units it would
 * cost more. Only speed depends on it: each column's sums run in the same
 * order in either layout. */
static int known_half = -1;
void ntk_skinny_set_half(int h) { __atomic_store_n(&known_half, h, __ATOMIC_RELAXED); }
static int half_vectors(void) {
  int h = __atomic_load_n(&known_half, __ATOMIC_RELAXED);
  if (h >= 0) return h;
  double wide = 1e9, half = 1e9;
  for (int r = 0; r < 5; r++) {
    double w = fma_chains(1, 2000), n = fma_chains(0, 2000);
    wide = w < wide ? w : wide, half = n < half ? n : half;
  }
  int unknown = -1; /* the first answer stored is everyone's */
  h = wide > 1.5 * half; /* two halves: about 2x; full width: about 1x */
  return __atomic_compare_exchange_n(&known_half, &unknown, h, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED) ? h : unknown;
}

/* The float32 lanes per row of x for na columns: whole 16-lane vectors,
 * but 24 for 17-24 columns (three of 8 lanes) where 16 lanes issue as two
 * halves: 20 columns in 24 lanes took 0.79x the time of 32 there
 * (2 048^2 tile, both products; build/ntkd_bench_skinny). 33-40 columns in
 * five 8-lane vectors measured 0.95x: not kept (their 4-row blocks run out
 * of registers). */
static size_t f32_lanes(size_t na) {
  return na > 16 && na <= 24 && half_vectors() ? 24 : round_up(na, 16);
}

/* The float64 lanes likewise: whole 8-lane vectors, but 12 for 9-12
 * columns and 20 for 17-20 (4-lane vectors) where 8 lanes issue as two
 * halves. L's products are mostly bound by memory: at 10 and 20 columns
 * they took 0.91-0.97x the time they took in 16 and 24 lanes (6 667 x
 * 4 000, build/ntkd_bench_skinny). */
static size_t d_lanes(size_t na) {
  int q = (na > 8 && na <= 12) || (na > 16 && na <= 20);
  return q && half_vectors() ? round_up(na, 4) : round_up(na, 8);
}

#define ARGS a, rows, cols, ld, x, xt, y, yt, na, acc
/* P: the lanes per row of x and xt, f32_lanes(na) as the caller padded
 * them (the onepass functions, d_onepass alike). */
NTK_CLONES static void tile_onepass(const float *a, size_t rows, size_t cols, size_t ld, const float *x,
                                    const float *xt, double *y, double *yt, size_t na, size_t P, float *acc) {
  if (P == 24) {
    if (yt) tile2_h3(ARGS);
    else tile1_h3(ARGS);
    return;
  }
  size_t nv = P / 16;
  if (yt) {
    if (nv == 1) tile2_1(ARGS);
    else if (nv == 2) tile2_2(ARGS);
    else tile2_3(ARGS);
  } else {
    if (nv == 1) tile1_1(ARGS);
    else if (nv == 2) tile1_2(ARGS);
    else tile1_3(ARGS);
  }
}

NTK_CLONES static void d_onepass(const double *a, size_t rows, size_t cols, size_t ld, const double *x,
                                 const double *xt, double *y, double *yt, size_t na, size_t P, double *acc) {
  if (P == 12 || P == 20) { /* d_lanes' 4-lane layouts, the only P not a multiple of 8 */
    if (y) {
      if (P == 12) ax_q3(ARGS);
      else ax_q5(ARGS);
    } else {
      if (P == 12) atx_q3(ARGS);
      else atx_q5(ARGS);
    }
    return;
  }
  size_t nv = P / 8;
  if (y) {
    switch (nv) {
    case 1: ax_1(ARGS); break;
    case 2: ax_2(ARGS); break;
    case 3: ax_3(ARGS); break;
    case 4: ax_4(ARGS); break;
    case 5: ax_5(ARGS); break;
    default: ax_6(ARGS);
    }
  } else {
    switch (nv) {
    case 1: atx_1(ARGS); break;
    case 2: atx_2(ARGS); break;
    case 3: atx_3(ARGS); break;
    case 4: atx_4(ARGS); break;
    case 5: atx_5(ARGS); break;
    default: atx_6(ARGS);
    }
  }
}

NTK_CLONES static void mtile_onepass(const float *a, size_t rows, size_t cols, size_t ld, const double *x,
                                     const double *xt, double *y, double *yt, size_t na, size_t P, double *acc) {
  size_t nv = P / 8;
  if (yt) {
    if (nv == 1) mtile2_1(ARGS);
    else if (nv == 2) mtile2_2(ARGS);
    else mtile2_3(ARGS);
    return;
  }
  switch (nv) {
  case 1: mtile1_1(ARGS); break;
  case 2: mtile1_2(ARGS); break;
  case 3: mtile1_3(ARGS); break;
  case 4: mtile1_4(ARGS); break;
  case 5: mtile1_5(ARGS); break;
  default: mtile1_6(ARGS);
  }
}
#undef ARGS

/* out: n rows of P lanes, the first na of each of x's rows (n x na), the
 * rest 0. */
#define PAD(NAME, T)                                                                           \
  static void NAME(const double *x, size_t n, size_t na, T *out, size_t P) {                   \
    for (size_t i = 0; i < n; i++) {                                                           \
      for (size_t q = 0; q < na; q++) out[i * P + q] = (T)x[i * na + q];                       \
      for (size_t q = na; q < P; q++) out[i * P + q] = 0;                                      \
    }                                                                                          \
  }
PAD(pad_f, float)
PAD(pad_d, double)

/* y (n x na) += v's n rows of na floats. */
static void add_rows(double *y, size_t n, size_t na, const float *v) {
  for (size_t i = 0; i < n * na; i++) y[i] += (double)v[i];
}

/* Whether the one-pass products run as AVX-512 code here: this file is
 * compiled for it, or its x86-64-v4 clone is built and the CPU runs it.
 * Elsewhere (the v3 and baseline clones, sanitizer builds) their blocks
 * spill: the AVX2 clone measured 20-30x slower than OpenBLAS's Haswell
 * kernels (docs/PERFORMANCE.md, 2026-12-04). */
static int avx512(void) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
  return 1;
#elif defined(NTK_CLONES_V4)
  __builtin_cpu_init();
  return __builtin_cpu_supports("x86-64-v4");
#else
  return 0;
#endif
}

int ntk_skinny_takes(size_t na, int f32) {
  return na >= (f32 ? NTK_SKINNY_MIN : 1) && na <= NTK_SKINNY_MAX && ntk_cpu_blas_threads() == 1 && avx512();
}

static int onepass(int how, size_t na, int f32) {
  if (na > NTK_SKINNY_MAX) return 0;
  return how == NTK_SKINNY_ONEPASS || (how == NTK_SKINNY_AUTO && ntk_skinny_takes(na, f32));
}

/* The widest the mixed one-pass products go: both products (registers for
 * xt's rows and the sums), y alone. */
#define MIXED_BOTH_MAX 24

size_t ntk_skinny_scratch(size_t rows, size_t cols, size_t ncols, int f32) {
  if (f32 == NTK_SKINNY_MIXED) { /* x, xt and yt's sums in rows of float64 lanes, or CHUNK converted rows */
    size_t one = (2 * cols + rows) * round_up(ncols, 8), chunk = CHUNK * cols;
    return (one > chunk ? one : chunk) * sizeof(double);
  }
  if (f32) { /* x, xt, y, yt in rows of float32 lanes (or sgemm's ncols) */
    size_t P = ncols > NTK_SKINNY_MAX ? ncols : round_up(ncols, 16);
    return 2 * (rows + cols) * P * sizeof(float);
  }
  return (rows + cols) * round_up(ncols, 8) * sizeof(double); /* x or xt, and yt's float64 sums */
}

void ntk_skinny_tile(const float *a, size_t rows, size_t cols, size_t ld, const double *x, const double *xt,
                     double *y, double *yt, size_t na, void *scratch, int how) {
  if (!na || !rows || !cols) return; /* nothing to add */
  if (!xt) yt = NULL;
  int one = onepass(how, na, 1);
  size_t P = one ? f32_lanes(na) : na;
  float *x32 = scratch, *xt32 = x32 + cols * P, *y32 = xt32 + rows * P, *yt32 = y32 + rows * P;
  pad_f(x, cols, na, x32, P);
  if (yt) pad_f(xt, rows, na, xt32, P);
  if (one) {
    tile_onepass(a, rows, cols, ld, x32, xt32, y, yt, na, P, yt32);
    return;
  }
  if (yt) memset(yt32, 0, cols * na * sizeof *yt32);
  int ina = (int)na;
  for (size_t i0 = 0; i0 < rows; i0 += CHUNK) {
    int nr = (int)(rows - i0 < CHUNK ? rows - i0 : CHUNK);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, ina, (int)cols, 1.0f, a + i0 * ld, (int)ld, x32, ina,
                0.0f, y32 + i0 * na, ina);
    if (yt)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)cols, ina, nr, 1.0f, a + i0 * ld, (int)ld,
                  xt32 + i0 * na, ina, 1.0f, yt32, ina);
  }
  add_rows(y, rows, na, y32);
  if (yt) add_rows(yt, cols, na, yt32);
}

void ntk_skinny_tile64(const float *a, size_t rows, size_t cols, size_t ld, const double *x, const double *xt,
                       double *y, double *yt, size_t na, void *scratch, int how) {
  if (!na || !rows || !cols) return; /* nothing to add */
  if (!xt) yt = NULL;
  if (na <= (yt ? MIXED_BOTH_MAX : NTK_SKINNY_MAX) && onepass(how, na, 0)) {
    size_t P = round_up(na, 8);
    double *xp = scratch, *xtp = xp + cols * P, *acc = xtp + rows * P;
    pad_d(x, cols, na, xp, P);
    if (yt) pad_d(xt, rows, na, xtp, P);
    mtile_onepass(a, rows, cols, ld, xp, xtp, y, yt, na, P, acc);
    return;
  }
  /* BLAS: CHUNK rows converted to float64, both products while in cache */
  double *conv = scratch;
  int ina = (int)na;
  for (size_t i0 = 0; i0 < rows; i0 += CHUNK) {
    size_t nr = rows - i0 < CHUNK ? rows - i0 : CHUNK;
    for (size_t i = 0; i < nr; i++)
      for (size_t j = 0; j < cols; j++) conv[i * cols + j] = (double)a[(i0 + i) * ld + j];
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nr, ina, (int)cols, 1.0, conv, (int)cols, x, ina, 1.0,
                y + i0 * na, ina);
    if (yt)
      cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)cols, ina, (int)nr, 1.0, conv, (int)cols,
                  xt + i0 * na, ina, 1.0, yt, ina);
  }
}

void ntk_skinny_ax(const double *a, size_t rows, size_t cols, size_t ld, const double *x, double *y, size_t na,
                   void *scratch, int how) {
  if (!na || !rows) return;
  if (!cols) {
    memset(y, 0, rows * na * sizeof *y);
    return;
  }
  if (!onepass(how, na, 0)) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)na, (int)cols, 1.0, a, (int)ld, x, (int)na,
                0.0, y, (int)na);
    return;
  }
  size_t P = d_lanes(na);
  double *xp = scratch;
  pad_d(x, cols, na, xp, P);
  memset(y, 0, rows * na * sizeof *y);
  d_onepass(a, rows, cols, ld, xp, NULL, y, NULL, na, P, NULL);
}

void ntk_skinny_atx(const double *a, size_t rows, size_t cols, size_t ld, const double *xt, double *yt, size_t na,
                    void *scratch, int how) {
  if (!na || !cols) return;
  if (!rows) {
    memset(yt, 0, cols * na * sizeof *yt);
    return;
  }
  if (!onepass(how, na, 0)) {
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)cols, (int)na, (int)rows, 1.0, a, (int)ld, xt,
                (int)na, 0.0, yt, (int)na);
    return;
  }
  size_t P = d_lanes(na);
  double *xp = scratch, *acc = xp + rows * P;
  pad_d(xt, rows, na, xp, P);
  memset(yt, 0, cols * na * sizeof *yt);
  d_onepass(a, rows, cols, ld, NULL, xp, NULL, yt, na, P, acc);
}
