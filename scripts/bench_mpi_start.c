/* The MPI part of an ntkd job's wall time that no tile can shorten: run
 * under the same mpirun as the job, rank 0 prints the seconds MPI's start
 * and MPI_Finalize took, both through ntkd's own comm layer (so with the
 * settings it makes before MPI_Init: ob1 when every rank is on one node).
 * scripts/bench_fc.sh subtracts nothing: it prints this next to the job's
 * wall time and the ssyrk floor. */
#include <stdio.h>

#include "base/clock.h"
#include "comm/comm.h"

int main(int argc, char **argv) {
  double t0 = ntk_now();
  ntk_comm_t *world;
  if (ntk_comm_init(&argc, &argv, &world)) {
    fprintf(stderr, "ntkd_bench_mpi_start: %s\n", ntk_error_message());
    return 1;
  }
  double t1 = ntk_now();
  ntk_comm_agree(world, NTK_OK); /* every rank started */
  int rank = ntk_comm_rank(world);
  double t2 = ntk_now();
  ntk_comm_finalize();
  double t3 = ntk_now();
  if (rank == 0) printf("%.4f %.4f\n", t1 - t0, t3 - t2);
  return 0;
}
