/* The files a job reads and writes, and the rule that an output never
 * replaces an input (not even with --overwrite): `[output] path` set to
 * the data, `[train] log` set to the labels, `log` equal to `snapshot`
 * are refused before anything is opened. Rank-local. */
#ifndef NTKD_JOBFILES_H
#define NTKD_JOBFILES_H

#include <stddef.h>

#include "base/fsutil.h"
#include "base/magic.h"
#include "job/config.h"

/* At most this many inputs: the job file, data, labels, patterns, test or validation files. */
#define NTK_JOB_MAX_INPUTS (2 * NTK_MAX_DATA_FILES + 6)

/* The job's input files (the job file itself included) into `in`; returns
 * how many. The names are the job-file keys ("[data] path"). */
size_t ntk_job_inputs(const struct ntk_job *job, struct ntk_named_path *in);

/* Check the job's outputs ([output] path of a kernel job; [train]
 * snapshot and log of a training job) as ntk_check_output_files does,
 * and that a store's or snapshot's name leaves room for PATH.index and
 * PATH.lock. NTK_EUSAGE (or NTK_EINPUT for a FIFO, device, socket) with a
 * message naming the job file. */
ntk_status ntk_job_check_files(const struct ntk_job *job);

/* The kinds of the files ntkd keeps (NTK_FILE_*) are base/magic.h's. */

/* Which of those `path` is (by its first bytes, else by its name), or
 * NTK_FILE_OTHER: absent, unreadable, or not one of ntkd's files. */
int ntk_file_kind(const char *path);

/* The rule for every output of every command (the store, export, the
 * predictions and variance files, a snapshot, a log): none is one of the
 * inputs or another output (ntk_check_outputs), none is anything but a
 * regular file where it exists, and none replaces one of ntkd's own files
 * (a store, its index or lock, a snapshot, a temporary file) other than
 * its own kind (ntk_named_path.own). NTK_EUSAGE with the reason. */
ntk_status ntk_check_output_files(const struct ntk_named_path *in, size_t nin, const struct ntk_named_path *out,
                                  size_t nout);

#endif
