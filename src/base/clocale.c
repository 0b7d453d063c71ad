/* The C locale for the calling thread (clocale.h). */
#include "base/clocale.h"

#include <pthread.h>

static locale_t c_locale;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Made once and kept for the process's life: a thread may be in it. */
static void make_c_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

locale_t ntk_c_locale_enter(void) {
  pthread_once(&once, make_c_locale);
  return c_locale ? uselocale(c_locale) : (locale_t)0;
}

void ntk_c_locale_leave(locale_t prev) {
  if (prev) uselocale(prev);
}
