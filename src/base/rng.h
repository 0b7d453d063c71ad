/* splitmix64: the small generator of ntkd's random streams (an MLP's
 * initial weights, the training shuffle). Pure. */
#ifndef NTKD_RNG_H
#define NTKD_RNG_H

#include <stdint.h>

/* The next value of the generator whose state is *s. */
static inline uint64_t ntk_splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

#endif
