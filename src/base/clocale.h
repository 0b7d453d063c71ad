/* The C locale for the calling thread. strtod, printf and the ctype
 * functions follow the locale, and a host process (a Python program that
 * called locale.setlocale(LC_ALL, "de_DE.UTF-8"), a Qt application) may
 * have set one whose decimal point is a comma: strtod("2**0.5") would read
 * 0 and the arch's number would change. The program never calls setlocale
 * and runs in C; libntkd's entry points and the threads it starts run in
 * C through these, whatever the host's locale. */
#ifndef NTKD_CLOCALE_H
#define NTKD_CLOCALE_H

#include <locale.h>

/* Puts this thread in the C locale; returns the locale to restore (0 when
 * the C locale object could not be made: nothing changed). */
locale_t ntk_c_locale_enter(void);

/* Gives this thread back `prev` from ntk_c_locale_enter. */
void ntk_c_locale_leave(locale_t prev);

#endif
