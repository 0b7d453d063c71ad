/* Rank 0's dataset on every rank, one copy per node (docs/SCALING.md,
 * "One copy of the data per node"). The node's first rank (its leader)
 * holds the values in a node-shared window (ntk_comm_shared_alloc); rank 0
 * broadcasts them to the other leaders; the ranks of a node read the one
 * copy. */
#ifndef NTKD_DATA_SHARE_H
#define NTKD_DATA_SHARE_H

#include "comm/comm.h"
#include "job/data.h"
#include "base/status.h"

typedef struct ntk_data_share ntk_data_share_t;

/* Collective over `world`: rank 0's `ds` (loaded) becomes every rank's,
 * ds->x pointing into the node's window (read-only from now on; rank 0's
 * private copy is freed). Errors are agreed on and reported once
 * (ntk_comm_agree_report). Release with ntk_data_unshare, never with
 * ntk_data_free. */
ntk_status ntk_data_share(const ntk_comm_t *world, struct ntk_dataset *ds, ntk_data_share_t **out);

/* Collective over `world`: ntk_data_load_job of `job` on rank 0, in the
 * job's precision, shared as by ntk_data_share, with the values read
 * straight into the node's window where the loader can size it first (a
 * plain file, no [test] set): no second copy on rank 0, and no copying
 * (docs/PERFORMANCE.md). A failed load is reported once, by rank 0, and
 * agreed on. *loaded: when rank 0's load (another rank's window) was
 * ready, by ntk_now(). */
ntk_status ntk_data_share_load(const ntk_comm_t *world, const struct ntk_job *job, struct ntk_dataset *ds,
                               ntk_data_share_t **out, double *loaded);

/* Collective over the world again: the window released, ds->x NULL.
 * Accepts NULL (then ds->x is freed as by ntk_data_free). */
void ntk_data_unshare(ntk_data_share_t *sh, struct ntk_dataset *ds);

#endif
