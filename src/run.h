/* Entry points of the ntkd commands. */
#ifndef NTKD_RUN_H
#define NTKD_RUN_H

#include "comm/comm.h"
#include "base/status.h"

/* `ntkd [run] JOB.conf [--overwrite]`: compute or resume a kernel job.
 * Collective over all ranks; returns the process exit code. */
int ntk_run_job(const ntk_comm_t *world, const char *conf_path, int overwrite);

#endif
