/* Identity of a job: everything that determines the matrix values
 * (sizes, image shape, precision, kernels, the train/test split, a hash of
 * the data values themselves, every layer with all its parameters), as a
 * text of one `key = value` line per fact, whatever the job's length, and
 * the XXH3-128 of that text. The store keeps both, so that a rerun with
 * other data or another model is refused with where the two jobs differ. */
#ifndef NTKD_JOBHASH_H
#define NTKD_JOBHASH_H

#include <stddef.h>

#include "kernels/arch.h"
#include "job/config.h"
#include "job/data.h"
#include "store/store.h"

/* Fill `info` (sizes, precision, kernels, tile, job hash, description) for
 * this job and return its job text in *text (malloc'd, the caller frees).
 * Rank-local. */
ntk_status ntk_job_identity(const struct ntk_job *job, const struct ntk_arch *arch, const struct ntk_dataset *data,
                            struct ntk_store_info *info, char **text);

/* Where two job texts first differ, for a message: "layer 20000: the
 * store has Dense(W_std=1.5, b_std=0), this job Dense(W_std=1.4, b_std=0)
 * (3 lines of the job description differ)", a line only one text has
 * counted once. Writes "" if they are equal. Returns 1 when every
 * difference is a line an ntkd of another version writes (the same job,
 * some entries computed otherwise), 2 when all of those mark entries that
 * differ only by rounding (another formula, as accurate), else 0. */
int ntk_job_text_diff(const char *store_text, const char *job_text, char *out, size_t cap);

/* NTK_OK if the open store `s` at `path` was computed by this job (same job
 * hash), or, when `reading` (a solve, not a resume that would add tiles),
 * by an ntkd of another version whose entries differ only by rounding
 * (saying so on stderr); else NTK_EMISMATCH with the store's and the job's
 * description and the first difference, followed by `advice`. */
ntk_status ntk_job_check_store(const char *path, const ntk_store_t *s, const struct ntk_store_info *want,
                               const char *want_text, int reading, const char *advice);

#endif
