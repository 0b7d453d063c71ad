/* The MPI part of an ntkd job's wall time that no tile can shorten: run
 * under the same mpirun as the job, rank 0 prints the seconds MPI_Init and
 * MPI_Finalize took (scripts/bench_fc.sh subtracts nothing: it prints
 * this next to the job's wall time and the ssyrk floor). */
#include <mpi.h>
#include <stdio.h>

#include "base/clock.h"

int main(int argc, char **argv) {
  double t0 = ntk_now();
  MPI_Init(&argc, &argv);
  double t1 = ntk_now();
  MPI_Barrier(MPI_COMM_WORLD);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double t2 = ntk_now();
  MPI_Finalize();
  double t3 = ntk_now();
  if (rank == 0) printf("%.4f %.4f\n", t1 - t0, t3 - t2);
  return 0;
}
