/* The check that every rank opened the same store (store_ranks.h). */
#include "job/store_ranks.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/codec.h"
#include "base/status.h"
#include "store/le.h"

ntk_status ntk_store_same_on_ranks(const ntk_comm_t *comm, const char *path, ntk_store_t *s, int tiles,
                                   const char *undone) {
  const struct ntk_store_info *in = ntk_store_get_info(s);
  uint8_t mine[48], first[48];
  memset(mine, 0, sizeof mine);
  memcpy(mine, in->store_id, 16);
  memcpy(mine + 16, in->job_hash, 16);
  ntk_status st = NTK_OK;
  if (tiles) { /* the tiles this rank's open found: how many, and a checksum of their sorted list */
    uint64_t *have = NULL;
    size_t n = 0;
    st = ntk_store_stored_tiles(s, &have, &n);
    if (!st) {
      ntk_put64(mine + 32, (uint64_t)n);
      ntk_put64(mine + 40, ntk_checksum(have, n * sizeof *have));
    }
    free(have);
  }
  if ((st = ntk_comm_agree_report(comm, st))) return st;
  memcpy(first, mine, sizeof first);
  if ((st = ntk_comm_agree_report(comm, ntk_comm_bcast(comm, first, sizeof first)))) return st;
  int rank = ntk_comm_rank(comm), id = memcmp(first, mine, 16) != 0, job = memcmp(first + 16, mine + 16, 16) != 0;
  int set = memcmp(first + 32, mine + 32, 16) != 0;
  ntk_status local = NTK_OK;
  if (id || job)
    local = ntk_error(NTK_ECORRUPT, "%s: rank %d opened another store than rank 0 (%s): the file was replaced while "
                      "the ranks opened it; %s: run it again once nothing replaces it", path, rank,
                      job ? "of another job" : "another store id, the same job", undone);
  else if (set)
    local = ntk_error(NTK_ELOCKED, "%s: rank %d found %llu stored tiles, rank 0 %llu (or other ones): a job is writing "
                      "the store while the ranks open it; %s: run it again once the job has finished, or with one "
                      "process", path, rank, (unsigned long long)ntk_get64(mine + 32),
                      (unsigned long long)ntk_get64(first + 32), undone);
  st = ntk_comm_agree_report(comm, local);
  if ((st == NTK_ECORRUPT || st == NTK_ELOCKED) && !local && rank == 0)
    fprintf(stderr, "ntkd: error: %s %s while the ranks opened it: another rank opened %s (its message says "
            "which); %s\n", path, st == NTK_ELOCKED ? "changed" : "was replaced",
            st == NTK_ELOCKED ? "it with other tiles" : "a different store", undone);
  return st;
}

void ntk_store_ranks_test_open_late(int rank) {
  const char *v = getenv("NTKD_TEST_OPEN_LATE");
  if (!v) return;
  if (rank == 0) fprintf(stderr, "ntkd: test setting NTKD_TEST_OPEN_LATE=%s\n", v);
  double left = atof(v);
  if (rank != 0 && left > 0) ntk_sleep(left, NULL);
}
