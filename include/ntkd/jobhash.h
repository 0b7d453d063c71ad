/* Identity of a job: a hash of everything that determines the matrix values
 * (network, kernels, precision, the data themselves), stored in the store
 * header so that a rerun with other data or another model is refused. */
#ifndef NTKD_JOBHASH_H
#define NTKD_JOBHASH_H

#include "ntkd/arch.h"
#include "ntkd/config.h"
#include "ntkd/data.h"
#include "ntkd/store.h"

/* Fill `info` (sizes, precision, kernels, tile, job hash, description) for
 * this job. Rank-local, pure apart from reading `data`. */
void ntk_job_identity(const struct ntk_job *job, const struct ntk_arch *arch, const struct ntk_dataset *data,
                      struct ntk_store_info *info);

#endif
