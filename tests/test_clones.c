/* Every CPU clone of the map loops gives the same bits (issue 15: FMAs
 * without giving up bit-identity). tests/CMakeLists.txt compiles
 * src/kernels/map_rows.c (both loop shapes) once per target the clones cover (baseline x86-64,
 * x86-64-v3, x86-64-v4), under the project's flags, as ntk_map_rows_f_TARGET
 * and ntk_map_rows_d_TARGET. Each runs (where this CPU has its
 * instructions) on the same inputs, random and at the edges, and must
 * match the scalar dispatchers ntk_mapf / ntk_map of this file bit for
 * bit: the float maps' explicit fmaf calls are one vfmadd in the v3 and v4
 * loops and libm's correctly rounded fmaf in the baseline ones. */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel_maps.h"
#include "testutil.h"

#define DECL(V)                                                                                                    \
  void ntk_map_rows_f_##V(const struct ntk_map *restrict m, float *restrict g, float *restrict t, size_t rows,    \
                          size_t cols, const float *restrict qa, const float *restrict ra, const float *restrict qb, \
                          const float *restrict rb, size_t qb_row);                                               \
  void ntk_map_rows_d_##V(const struct ntk_map *restrict m, double *restrict g, double *restrict t, size_t rows,  \
                          size_t cols, const double *restrict qa, const double *restrict ra,                      \
                          const double *restrict qb, const double *restrict rb, size_t qb_row);           \
  void ntk_map_pairs_f_##V(const struct ntk_map *restrict m, float *restrict g, float *restrict t, size_t n,       \
                           const float *restrict qa, const float *restrict ra, const float *restrict qb,          \
                           const float *restrict rb);                                                             \
  void ntk_map_pairs_d_##V(const struct ntk_map *restrict m, double *restrict g, double *restrict t, size_t n,    \
                           const double *restrict qa, const double *restrict ra, const double *restrict qb,       \
                           const double *restrict rb);
DECL(generic)
DECL(v3)
DECL(v4)

typedef void (*rows_f)(const struct ntk_map *, float *, float *, size_t, size_t, const float *, const float *,
                       const float *, const float *, size_t);
typedef void (*rows_d)(const struct ntk_map *, double *, double *, size_t, size_t, const double *, const double *,
                       const double *, const double *, size_t);
typedef void (*pairs_f)(const struct ntk_map *, float *, float *, size_t, const float *, const float *, const float *,
                        const float *);
typedef void (*pairs_d)(const struct ntk_map *, double *, double *, size_t, const double *, const double *,
                        const double *, const double *);
static const struct {
  const char *name, *cpu; /* cpu: the __builtin_cpu_supports level it needs, NULL for none */
  rows_f f;
  rows_d d;
  pairs_f pf;
  pairs_d pd;
} targets[] = {
    {"x86-64", NULL, ntk_map_rows_f_generic, ntk_map_rows_d_generic, ntk_map_pairs_f_generic, ntk_map_pairs_d_generic},
    {"x86-64-v3", "x86-64-v3", ntk_map_rows_f_v3, ntk_map_rows_d_v3, ntk_map_pairs_f_v3, ntk_map_pairs_d_v3},
    {"x86-64-v4", "x86-64-v4", ntk_map_rows_f_v4, ntk_map_rows_d_v4, ntk_map_pairs_f_v4, ntk_map_pairs_d_v4}};
#define NTARGETS (sizeof targets / sizeof targets[0])

static int runs_here(const char *cpu) {
  __builtin_cpu_init();
  if (!cpu) return 1;
  if (!strcmp(cpu, "x86-64-v3")) return __builtin_cpu_supports("x86-64-v3");
  return __builtin_cpu_supports("x86-64-v4");
}

static struct ntk_map mk(ntk_map_kind kind, double a, double b, double c) {
  struct ntk_map m = {kind, 0, 0, a, b, c, {0}};
  return m;
}

/* The nonlinearities whose loops vectorise (the others go through the
 * scalar dispatcher inside the loop, compared all the same). */
static struct ntk_map maps_under_test(int i) {
  switch (i) {
  case 0: return mk(NTK_MAP_ABRELU, 0.0, 1.0, 0.0);  /* Relu */
  case 1: return mk(NTK_MAP_ABRELU, 0.1, 1.0, 0.0);  /* LeakyRelu(0.1) */
  case 2: return mk(NTK_MAP_ABRELU, -1.0, 1.0, 0.0); /* Abs */
  case 3: return mk(NTK_MAP_ERF, 1.0, 1.0, 0.0);     /* Erf */
  case 4: return mk(NTK_MAP_ERF, 2.0, 0.5, 0.3);     /* Erf(a, b, c) */
  case 5: return mk(NTK_MAP_GELU, 0, 0, 0);
  default: return mk(NTK_MAP_SIN, 1.0, 1.5, 0.2);
  }
}
#define NMAPS 7

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform(void) { /* [0, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

#define ROWS 41

/* The same bits; any NaN matches any NaN (a NaN's sign and payload follow
 * the instructions, and a tile with one is refused, never stored). A float
 * widens to double exactly, so one comparison serves both precisions. */
static int same(double a, double b) { return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a); }

/* Row i's variance and the column variances: log-uniform over `decades`
 * around 1, with edge cells: zero, subnormal, huge, inf, NaN, and pairs of
 * a sample with itself (q12 = q11 = q22, the angle exactly 0). */
static double variance(size_t k, double decades) {
  switch (k % 23) {
  case 3: return 0.0;
  case 7: return 1e-41;
  case 11: return 3e37;
  case 13: return INFINITY;
  case 17: return NAN;
  default: return pow(10.0, (uniform() * 2.0 - 1.0) * decades);
  }
}

/* check_f / check_d: fill rows x cols entries (a sample with itself in
 * column 1 where the columns have a variance per row, cosines of +-1 in
 * every fifth), run every target's loops in both shapes (rows x cols, then
 * the same entries one pair each) and compare with the scalar map. */
#define DEFINE_CHECK(T, SFX, NAME, RSQRT, SCALAR, ROWS_FN, PAIRS_FN)                                             \
  static void check_##SFX(const struct ntk_map *m, size_t cols, size_t qb_row, double decades) {                \
    size_t n = ROWS * cols, nb = qb_row ? n : cols;                                                             \
    T *qa = malloc(ROWS * sizeof *qa), *ra = malloc(ROWS * sizeof *ra), *qb = malloc(nb * sizeof *qb),          \
      *rb = malloc(nb * sizeof *rb), *g0 = malloc(n * sizeof *g0), *t0 = malloc(n * sizeof *t0),                \
      *ge = malloc(n * sizeof *ge), *te = malloc(n * sizeof *te), *g = malloc(n * sizeof *g),                   \
      *t = malloc(n * sizeof *t), *pqa = malloc(n * sizeof *pqa), *pra = malloc(n * sizeof *pra),               \
      *pqb = malloc(n * sizeof *pqb), *prb = malloc(n * sizeof *prb);                                           \
    for (size_t i = 0; i < ROWS; i++) qa[i] = (T)variance(i, decades), ra[i] = RSQRT(qa[i]);                    \
    for (size_t k = 0; k < nb; k++) qb[k] = (T)variance(k + 5, decades), rb[k] = RSQRT(qb[k]);                  \
    if (qb_row) /* column 1: a sample with itself */                                                           \
      for (size_t i = 0; i < ROWS; i++) qb[i * qb_row + 1] = qa[i], rb[i * qb_row + 1] = ra[i];                \
    for (size_t i = 0; i < ROWS; i++)                                                                           \
      for (size_t j = 0; j < cols; j++) {                                                                       \
        size_t k = i * cols + j, b = i * qb_row + j;                                                            \
        double c = j % 5 == 0 ? (j % 10 ? 1.0 : -1.0) : uniform() * 2.0 - 1.0;                                  \
        g0[k] = qb_row && j == 1 ? qa[i] : (T)(c * sqrt((double)qa[i] * (double)qb[b]));                        \
        t0[k] = (T)(0.5 + uniform());                                                                           \
        pqa[k] = qa[i], pra[k] = ra[i], pqb[k] = qb[b], prb[k] = rb[b];                                         \
        T td;                                                                                                   \
        ge[k] = SCALAR(m, g0[k], qa[i], qb[b], ra[i], rb[b], &td);                                              \
        te[k] = t0[k] * td;                                                                                     \
      }                                                                                                         \
    for (size_t v = 0; v < NTARGETS; v++) {                                                                     \
      if (!runs_here(targets[v].cpu)) {                                                                         \
        fprintf(stderr, "test_clones: this CPU has no %s; its loops are not run\n", targets[v].name);          \
        continue;                                                                                               \
      }                                                                                                         \
      for (int shape = 0; shape < 2; shape++) {                                                                 \
        memcpy(g, g0, n * sizeof *g);                                                                           \
        memcpy(t, t0, n * sizeof *t);                                                                           \
        if (shape) targets[v].PAIRS_FN(m, g, t, n, pqa, pra, pqb, prb);                                         \
        else targets[v].ROWS_FN(m, g, t, ROWS, cols, qa, ra, qb, rb, qb_row);                                   \
        for (size_t k = 0; k < n; k++)                                                                          \
          if (!same(g[k], ge[k]) || !same(t[k], te[k]))                                                         \
            ck_abort_msg(NAME " map %d on %s (%s), cols %zu, entry %zu: (%a, %a), the scalar map (%a, %a)",    \
                         (int)m->kind, targets[v].name, shape ? "pairs" : "rows", cols, k, (double)g[k],        \
                         (double)t[k], (double)ge[k], (double)te[k]);                                           \
      }                                                                                                         \
    }                                                                                                           \
    free(qa), free(ra), free(qb), free(rb), free(g0), free(t0), free(ge), free(te), free(g), free(t);           \
    free(pqa), free(pra), free(pqb), free(prb);                                                                 \
  }
DEFINE_CHECK(float, f, "float", ntk_rsqrtf, ntk_mapf, f, pf)
DEFINE_CHECK(double, d, "double", ntk_rsqrt, ntk_map, d, pd)

/* The batched CNN shape (16 lanes, a variance per lane) and the FC shape
 * (one set of column variances), near 1 and over float32's whole range. */
START_TEST(test_clones_float) {
  struct ntk_map m = maps_under_test(_i);
  check_f(&m, 16, 16, 3.0);
  check_f(&m, 16, 16, 35.0);
  check_f(&m, 13, 0, 3.0);
  check_f(&m, 13, 0, 35.0);
}
END_TEST

START_TEST(test_clones_double) {
  struct ntk_map m = maps_under_test(_i);
  check_d(&m, 16, 16, 3.0);
  check_d(&m, 13, 0, 200.0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("clones");
  TCase *tc = tcase_create("clones");
  tcase_add_loop_test(tc, test_clones_float, 0, NMAPS);
  tcase_add_loop_test(tc, test_clones_double, 0, NMAPS);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
