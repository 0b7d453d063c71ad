/* libFuzzer target: architecture strings, and the canonical text of
 * whatever parses. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/arch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = '\0';
  struct ntk_arch a;
  if (ntk_arch_parse(text, 1.0, 0.0, &a) == NTK_OK) {
    char buf[256];
    ntk_arch_canonical(&a, buf, sizeof buf);
    ntk_arch_is_fc(&a);
    ntk_arch_free(&a);
  }
  free(text);
  return 0;
}
