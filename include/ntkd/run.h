/* Entry points of the ntkd commands and the process-wide stop flag. */
#ifndef NTKD_RUN_H
#define NTKD_RUN_H

#include "ntkd/data.h"
#include "ntkd/status.h"

/* `ntkd [run] JOB.conf [--overwrite]`: compute or resume a kernel job.
 * Collective over all ranks; returns the process exit code. */
int ntk_run_job(const char *conf_path, int overwrite);

/* Collective: every rank gets the worst of the ranks' statuses (as
 * ntk_comm_agree); a rank whose own status is an error prints its message
 * first, so a failure is reported once, by the rank that saw it. */
ntk_status ntk_agree(ntk_status st);

/* `ntkd info|export|verify`: single-process commands on a store. */
int ntk_cmd_info(const char *store_path, int records); /* records: list every record and damaged region */
/* export: the block rows x cols ("A:B", ":B", "A:"; NULL: all) as .npy, or as
 * raw little-endian values without a header (raw_format). */
int ntk_cmd_export(const char *store_path, const char *out_path, const char *kernel, const char *rows,
                   const char *cols, int raw_format);
int ntk_cmd_verify(const char *store_path);

/* Collective: rank 0's dataset to every rank (the others allocate its
 * array, which they free with ntk_data_free). Errors are agreed on. */
ntk_status ntk_data_bcast(struct ntk_dataset *ds);

#endif
