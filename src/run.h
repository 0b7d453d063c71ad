/* Entry points of the ntkd commands. */
#ifndef NTKD_RUN_H
#define NTKD_RUN_H

#include "comm/comm.h"
#include "base/status.h"

/* `ntkd [run] JOB.conf [--overwrite]`: compute or resume a kernel job.
 * Collective over all ranks; returns the process exit code. */
int ntk_run_job(const ntk_comm_t *world, const char *conf_path, int overwrite);

/* `ntkd info|export|verify`: single-process commands on a store. */
int ntk_cmd_info(const char *store_path, int records); /* records: list every record and damaged region */
/* export: the block rows x cols ("A:B", ":B", "A:"; NULL: all) as .npy, or as
 * raw little-endian values without a header (raw_format). */
int ntk_cmd_export(const char *store_path, const char *out_path, const char *kernel, const char *rows,
                   const char *cols, int raw_format);
/* verify: collective over `world` (under mpirun each rank checks the
 * payloads of every size-th tile; rank 0 reports). */
int ntk_cmd_verify(const ntk_comm_t *world, const char *store_path);


#endif
