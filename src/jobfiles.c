/* A job's files: see include/ntkd/jobfiles.h. */
#include "ntkd/jobfiles.h"

size_t ntk_job_inputs(const struct ntk_job *job, struct ntk_named_path *in) {
  size_t n = 0;
  in[n++] = (struct ntk_named_path){"the job file", job->source};
  for (int i = 0; i < job->ndata; i++) in[n++] = (struct ntk_named_path){"[data] path", job->data_path[i]};
  in[n++] = (struct ntk_named_path){"[data] labels", job->labels_path};
  if (job->train.enabled) {
    in[n++] = (struct ntk_named_path){"[validation] path", job->train.val_path};
    in[n++] = (struct ntk_named_path){"[validation] labels", job->train.val_labels};
  } else if (job->test.enabled) {
    for (int i = 0; i < job->test.ndata; i++) in[n++] = (struct ntk_named_path){"[test] path", job->test.path[i]};
    in[n++] = (struct ntk_named_path){"[test] labels", job->test.labels};
  }
  return n;
}

ntk_status ntk_job_check_files(const struct ntk_job *job) {
  struct ntk_named_path in[NTK_JOB_MAX_INPUTS], out[2];
  size_t nin = ntk_job_inputs(job, in), nout = 0;
  if (job->train.enabled) {
    out[nout++] = (struct ntk_named_path){"[train] snapshot", job->train.snapshot};
    out[nout++] = (struct ntk_named_path){"[train] log", job->train.log};
  } else {
    out[nout++] = (struct ntk_named_path){"[output] path", job->out_path};
  }
  ntk_status st = ntk_check_outputs(in, nin, out, nout);
  /* The store and the snapshot are replaced by rename: never over a FIFO,
   * a device or a socket, whatever the flags. */
  if (!st && !job->train.enabled) st = ntk_check_regular(job->out_path, "[output] path");
  if (!st && job->train.enabled && job->train.snapshot[0]) st = ntk_check_regular(job->train.snapshot, "[train] snapshot");
  if (st) return ntk_error(st, "%s: %s", job->source, ntk_error_message());
  return NTK_OK;
}
