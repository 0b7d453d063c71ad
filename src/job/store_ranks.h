/* A store that every rank opened by its path (a solve, `ntkd verify` under
 * mpirun): the check that they opened the same one. A file renamed over
 * the path between two ranks' opens, or a job still appending to it, would
 * otherwise have the ranks solve or verify a mix of two files. Collective. */
#ifndef NTKD_STORE_RANKS_H
#define NTKD_STORE_RANKS_H

#include "comm/comm.h"
#include "store/store.h"

/* Every rank's store `s` (opened from `path`) against rank 0's: the same
 * store id and job hash, else NTK_ECORRUPT ("replaced while the ranks
 * opened it"); with `tiles`, also the same stored tiles, else NTK_ELOCKED
 * (a job is writing it). `undone` ends the message: what was not done
 * ("nothing was solved"). The rank that differs says so; rank 0 says that
 * another rank did. */
ntk_status ntk_store_same_on_ranks(const ntk_comm_t *comm, const char *path, ntk_store_t *s, int tiles,
                                   const char *undone);

/* Test setting (environment; never set it in production):
 *   NTKD_TEST_OPEN_LATE=S  the ranks other than 0 sleep S seconds before
 *                          they open the store (a solve, verify), so that
 *                          a test can replace the file (or signal a rank)
 *                          in between. Rank 0 says that it is set. */
void ntk_store_ranks_test_open_late(int rank);

#endif
