/* libFuzzer target: job-file text (and the arch strings inside it). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "job/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = '\0';
  struct ntk_job *job = malloc(sizeof *job);
  ntk_job_parse_string(text, "fuzz.conf", job);
  ntk_job_free(job);
  free(job);
  free(text);
  return 0;
}
