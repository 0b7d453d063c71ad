/* Products of a large matrix with a few columns, for conjugate gradients
 * (src/solve/cg.c): a held float32 kernel tile times the iterations'
 * columns in float32 (cg_products = float32) or in float64 arithmetic
 * (the true residuals, the test predictions, cg_products = float64), and
 * the preconditioner's float64 factor L and per-ridge inverses times
 * them. At the 8-48 columns CG
 * runs (10 classes per ridge, fewer as ridges converge) OpenBLAS packs
 * the large matrix for each product; these read it once, its elements
 * broadcast against rows of the columns padded to whole SIMD vectors
 * (skinny.c). Vectors are row-major, na columns. */
#ifndef NTKD_SKINNY_H
#define NTKD_SKINNY_H

#include <stddef.h>

/* The columns the one-pass products are for: at most 48 (above, BLAS is
 * efficient on its own), and for the float32 tile at least 8 (below, its
 * 16 lanes mostly idle, it loses to sgemm: 0.84x at 6 columns, 1.6x at 8;
 * the float64 products beat dgemm 1.7-3.4x from 1 column on;
 * docs/PERFORMANCE.md, 2026-12-04; build/ntkd_bench_skinny). */
#define NTK_SKINNY_MIN 8
#define NTK_SKINNY_MAX 48

/* Whether the one-pass products take na columns here (f32: the float32
 * tile's, else the float64 ones): na within the bounds above, OpenBLAS on
 * one thread (as with a CG rank per core; where a rank's OpenBLAS has
 * more threads, BLAS keeps them), and AVX-512 code running them (their
 * x86-64-v4 clone on a CPU that has it; compiled for AVX2 they are 20-30x
 * slower than BLAS). */
int ntk_skinny_takes(size_t na, int f32);

/* How: AUTO (ntk_skinny_takes decides), or one of the two (benchmarks,
 * tests; ONEPASS past NTK_SKINNY_MAX is BLAS). */
enum { NTK_SKINNY_AUTO, NTK_SKINNY_ONEPASS, NTK_SKINNY_BLAS };

/* Bytes of scratch for the products below (f32: 1 for ntk_skinny_tile,
 * NTK_SKINNY_MIXED for ntk_skinny_tile64, 0 for ntk_skinny_ax and _atx) on
 * matrices of at most `rows` rows and `cols` columns, with at most ncols
 * columns. */
#define NTK_SKINNY_MIXED 2
size_t ntk_skinny_scratch(size_t rows, size_t cols, size_t ncols, int f32);

/* y += A x and, with xt, yt += A^T xt, for a float32 tile A (rows x cols,
 * row stride ld; x: cols x na, xt and y: rows x na, yt: cols x na, all
 * float64). The products are float32: the vectors rounded to float32,
 * multiply-adds fused where the CPU has FMA (rounding like sgemm's, not
 * the same bits on every CPU); the one-pass product's float32 sums run
 * over at most 256 terms before they are added in float64 (sgemm's over a
 * tile's row). */
void ntk_skinny_tile(const float *a, size_t rows, size_t cols, size_t ld, const double *x, const double *xt,
                     double *y, double *yt, size_t na, void *scratch, int how);

/* The same sums as ntk_skinny_tile in float64 arithmetic: y += A x and,
 * with xt, yt += A^T xt, for a float32 tile A (CG's true residuals and
 * its test predictions). The one-pass product where ntk_skinny_takes(na,
 * 0) and na <= 24 (with xt) or 48; else each 64 rows converted to float64
 * and multiplied by dgemm. */
void ntk_skinny_tile64(const float *a, size_t rows, size_t cols, size_t ld, const double *x, const double *xt,
                       double *y, double *yt, size_t na, void *scratch, int how);
/* Float64 A (rows x cols, ld): y = A x (x: cols x na, y: rows x na) and
 * yt = A^T xt (xt: rows x na, yt: cols x na), each overwritten. */
void ntk_skinny_ax(const double *a, size_t rows, size_t cols, size_t ld, const double *x, double *y, size_t na,
                   void *scratch, int how);
void ntk_skinny_atx(const double *a, size_t rows, size_t cols, size_t ld, const double *xt, double *yt, size_t na,
                    void *scratch, int how);

/* Tests and benchmarks (NTKD_BENCH_SKINNY_HALF): the one-pass products
 * pad 17-24 float32 and 9-12, 17-20 float64 columns to 32-byte vectors
 * (h = 1) or never (0), instead of what this core's timing says (-1:
 * time it again). Results are the same bits either way. */
void ntk_skinny_set_half(int h);
#endif
