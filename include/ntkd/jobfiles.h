/* The files a job reads and writes, and the rule that an output never
 * replaces an input (not even with --overwrite): `[output] path` set to
 * the data, `[train] log` set to the labels, `log` equal to `snapshot`
 * are refused before anything is opened. Rank-local. */
#ifndef NTKD_JOBFILES_H
#define NTKD_JOBFILES_H

#include <stddef.h>

#include "ntkd/config.h"
#include "ntkd/fsutil.h"

/* At most this many inputs: the job file, data, labels, test or validation files. */
#define NTK_JOB_MAX_INPUTS (2 * NTK_MAX_DATA_FILES + 4)

/* The job's input files (the job file itself included) into `in`; returns
 * how many. The names are the job-file keys ("[data] path"). */
size_t ntk_job_inputs(const struct ntk_job *job, struct ntk_named_path *in);

/* Check the job's outputs ([output] path of a kernel job; [train]
 * snapshot and log of a training job) against its inputs and each other,
 * and that an existing store or snapshot path is a regular file.
 * NTK_EUSAGE (or NTK_EINPUT for a FIFO, device, socket) with a message. */
ntk_status ntk_job_check_files(const struct ntk_job *job);

#endif
