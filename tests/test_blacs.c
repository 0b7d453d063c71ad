/* The ScaLAPACK grid is built from the communicator it is given, not from
 * MPI_COMM_WORLD (issue 26, item 5). Run under mpirun -np 4 (ctest does):
 * the world is split into two halves of two ranks, each half builds a 2 x 1
 * grid over itself and sums its ranks with BLACS: each half must see only
 * its own two ranks. With the implicit world (Cblacs_get(-1, 0)) ranks 2
 * and 3 would find no place in a 2 x 1 grid. MPI test: CK_FORK=no. */
#include "comm/comm.h"
#include "testutil.h"

void Cdgsum2d(int ctxt, const char *scope, const char *top, int m, int n, double *a, int lda, int rdest, int cdest);

static ntk_comm_t *world;

START_TEST(test_grid_from_subcommunicator) {
  int rank = ntk_comm_rank(world), size = ntk_comm_size(world);
  ck_assert_msg(size == 4, "run under mpirun -np 4 (got %d ranks)", size);
  ntk_comm_t *half = NULL;
  ck_assert_int_eq(ntk_comm_split(world, rank / 2, &half), NTK_OK);
  struct ntk_blacs_grid g;
  ck_assert_msg(ntk_comm_blacs_grid(half, 2, 1, &g) == NTK_OK, "%s", ntk_error_message());
  double x = rank; /* summed over the grid's column: this half's two world ranks */
  Cdgsum2d(g.ctxt, "All", " ", 1, 1, &x, 1, -1, -1);
  double want = rank / 2 == 0 ? 0 + 1 : 2 + 3;
  ck_assert_msg(x == want, "rank %d: the grid summed %g, its half's ranks make %g", rank, x, want);
  ntk_comm_blacs_free(&g);
  /* A grid over the whole world still works, and a wrong shape is refused. */
  ck_assert_int_eq(ntk_comm_blacs_grid(world, 2, 2, &g), NTK_OK);
  x = 1;
  Cdgsum2d(g.ctxt, "All", " ", 1, 1, &x, 1, -1, -1);
  ck_assert(x == 4);
  ntk_comm_blacs_free(&g);
  ck_assert_int_eq(ntk_comm_blacs_grid(world, 3, 1, &g), NTK_EINTERNAL);
  ntk_comm_free(half);
}
END_TEST

int main(int argc, char **argv) {
  if (ntk_comm_init(&argc, &argv, &world)) return 1;
  Suite *s = suite_create("blacs");
  TCase *tc = tcase_create("blacs");
  tcase_add_test(tc, test_grid_from_subcommunicator);
  suite_add_tcase(s, tc);
  int rc = tu_run(s);
  ntk_comm_finalize();
  return rc;
}
