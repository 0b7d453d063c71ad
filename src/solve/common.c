/* What the solve methods share: blocks of a kernel in float64 from the
 * store's tiles. See src/solve/solve_method.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/codec.h"
#include "base/rng.h"
#include "job/config.h"
#include "solve/solve.h"
#include "solve/solve_method.h"
#include "base/tiling.h"

const char *ntk_solve_kernel_name(int which) { return which == NTK_KERNEL_NTK ? "ntk" : "nngp"; }

ntk_status ntk_solve_read_block(ntk_store_t *s, int which, size_t r0, size_t r1, size_t c0, size_t c1,
                                double *out, size_t ld) {
  const struct ntk_store_info *in = ntk_store_get_info(s);
  const struct ntk_tiling *tg = ntk_store_tiling(s);
  size_t n = (size_t)in->n, T = in->tile, es = in->elem;
  if (r1 > n || c1 > n || r0 > r1 || c0 > c1)
    return ntk_error(NTK_EINPUT, "block [%zu, %zu) x [%zu, %zu) is outside the %zu x %zu matrix", r0, r1, c0, c1,
                     n, n);
  if (r0 == r1 || c0 == c1) return NTK_OK;
  size_t edge = T < n ? T : n;
  ntk_codec_t *codec = ntk_codec_create(1);
  char *raw = malloc(ntk_store_raw_bytes(s, &(struct ntk_tile){0, 0, 0, 0, edge, 0, edge}) + 1);
  char *v = malloc(edge * edge * es + 1);
  ntk_status st = codec && raw && v ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory");
  /* Every stored tile (I >= J) that meets the block directly or as the
   * transpose of a tile that meets it. */
  for (size_t I = r0 / T; I <= (r1 - 1) / T && !st; I++)
    for (size_t J = c0 / T; J <= (c1 - 1) / T && !st; J++) {
      size_t bi = I >= J ? I : J, bj = I >= J ? J : I; /* the stored tile */
      uint64_t idx = ntk_tiling_index(bi, bj);
      struct ntk_tile t = ntk_tiling_tile(tg, idx);
      size_t ra = I * T > r0 ? I * T : r0, rb = (I + 1) * T < r1 ? (I + 1) * T : r1;
      size_t ca = J * T > c0 ? J * T : c0, cb = (J + 1) * T < c1 ? (J + 1) * T : c1;
      if (!ntk_tiling_needed(tg, idx)) { /* test x test, not computed */
        for (size_t i = ra; i < rb; i++)
          for (size_t j = ca; j < cb; j++) out[(i - r0) * ld + (j - c0)] = NAN;
        continue;
      }
      if ((st = ntk_store_read_kernel(s, codec, idx, which, raw, v))) break;
      for (size_t i = ra; i < rb && !st; i++)
        for (size_t j = ca; j < cb; j++) {
          /* (i, j) in the stored tile: (i, j) itself, or (j, i) by symmetry */
          size_t ti = I >= J ? i - t.r0 : j - t.r0, tj = I >= J ? j - t.c0 : i - t.c0;
          size_t k = ti * (size_t)t.cols + tj;
          double x = es == 4 ? (double)((const float *)(const void *)v)[k] : ((const double *)(const void *)v)[k];
          if (!isfinite(x)) {
            st = ntk_error(NTK_EINPUT, "%s kernel entry (%zu, %zu) is %g: not a kernel that can be solved%s",
                           ntk_solve_kernel_name(which), i, j, x,
                           es == 4 ? "; the kernel exceeds float32: recompute it with [compute] precision = float64"
                                   : "");
            break;
          }
          out[(i - r0) * ld + (j - c0)] = x;
        }
    }
  free(v);
  free(raw);
  ntk_codec_free(codec);
  return st;
}

ntk_status ntk_solve_train_trace(ntk_store_t *s, int which, size_t ntr, double *trace) {
  const struct ntk_store_info *in = ntk_store_get_info(s);
  size_t T = in->tile;
  double *d = malloc((T < ntr ? T : ntr) * (T < ntr ? T : ntr) * sizeof *d + 1);
  ntk_status st = d ? NTK_OK : ntk_error(NTK_ENOMEM, "out of memory");
  *trace = 0;
  for (size_t b = 0; b < ntr && !st; b += T) {
    size_t e = b + T < ntr ? b + T : ntr;
    if ((st = ntk_solve_read_block(s, which, b, e, b, e, d, e - b))) break;
    for (size_t i = 0; i < e - b; i++) *trace += d[i * (e - b) + i];
  }
  free(d);
  return st;
}

/* A "KEY: N kB" line of a /proc file, in bytes; 0 if absent. */
static double proc_kb(const char *path, const char *key) {
  FILE *f = fopen(path, "r");
  char line[256], fmt[64];
  unsigned long long kb = 0;
  snprintf(fmt, sizeof fmt, "%s: %%llu kB", key);
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, fmt, &kb) == 1) break;
  if (f) fclose(f);
  return (double)kb * 1024.0;
}

double ntk_solve_mem_available(void) { return proc_kb("/proc/meminfo", "MemAvailable"); }
double ntk_solve_peak_rss(void) { return proc_kb("/proc/self/status", "VmHWM"); }

int ntk_solve_ridge_verdict(struct ntk_ridge_out *o, const char *kernel, double ridge, int info, size_t ntr) {
  if (!isfinite(o->reg)) { /* not ill-conditioned: the ridge is too large for float64 */
    o->failure = NTK_RIDGE_ILL;
    snprintf(o->why, sizeof o->why, "%s train kernel with ridge %g: the ridge times the mean of the kernel's "
             "diagonal overflows float64 (%g added to the diagonal): choose a smaller ridge", kernel, ridge, o->reg);
  } else if (info > 0) {
    o->failure = NTK_RIDGE_NOT_PD;
    snprintf(o->why, sizeof o->why, "%s train kernel with ridge %g (%.3g added to the diagonal) is not positive "
             "definite (Cholesky stopped at column %d of %zu): increase the ridge", kernel, ridge, o->reg, info, ntr);
  } else if (o->rcond < NTK_SOLVE_MIN_RCOND) {
    o->failure = NTK_RIDGE_ILL;
    snprintf(o->why, sizeof o->why, "%s train kernel with ridge %g is too ill-conditioned to solve (reciprocal "
             "condition number %.1e < %.0e): increase the ridge", kernel, ridge, o->rcond, NTK_SOLVE_MIN_RCOND);
  }
  return o->failure == NTK_RIDGE_OK;
}

double ntk_solve_sum_abs(const double *x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += fabs(x[i]);
  return s;
}

ntk_status ntk_solve_inverse_probe(ntk_status (*apply)(void *ctx, double *x), void *ctx, size_t n, double *x,
                                   double *est) {
  uint64_t state = 0x6e746b64636f6e64ull; /* fixed: the same start on every rank and in every run */
  for (size_t i = 0; i < n; i++) x[i] = (double)(ntk_splitmix64(&state) >> 11) * 0x1p-52 - 1.0; /* in [-1, 1) */
  for (int step = 0; step < NTK_SOLVE_PROBE_STEPS; step++) {
    double before = ntk_solve_sum_abs(x, n);
    if (!(before > 0) || !isfinite(before)) break;
    ntk_status st = apply(ctx, x);
    if (st) return st;
    double after = ntk_solve_sum_abs(x, n);
    if (isnan(after)) break;
    if (after / before > *est) *est = after / before; /* inf: singular to the working precision */
    if (!isfinite(after) || !(after > 0)) break;
    for (size_t i = 0; i < n; i++) x[i] /= after;
  }
  return NTK_OK;
}
