/* libFuzzer target: the .npy, IDX and CIFAR-10 readers. The first byte
 * picks the format (and the layout), the rest is the file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static char path[64];
  if (!path[0]) snprintf(path, sizeof path, "/tmp/ntkd-fuzz-data-%ld", (long)getpid());
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  fwrite(data + 1, 1, size - 1, f);
  fclose(f);
  struct ntk_job *job = calloc(1, sizeof *job);
  ntk_job_defaults(job);
  job->ndata = 1;
  snprintf(job->data_path[0], sizeof job->data_path[0], "%s", path);
  job->format = (ntk_data_format)(1 + data[0] % 3); /* npy, idx, cifar10 */
  job->layout = (data[0] >> 2) & 1 ? NTK_LAYOUT_NCHW : NTK_LAYOUT_NHWC;
  job->count = (data[0] >> 3) & 1 ? 2 : 0;
  struct ntk_dataset ds;
  if (ntk_data_load(job, (data[0] >> 4) & 1 ? 8 : 4, &ds) == NTK_OK) ntk_data_free(&ds);
  int32_t *labels = NULL;
  if (ntk_labels_load(path, 3, 0, 10, &labels) == NTK_OK) free(labels);
  free(job);
  return 0;
}
