/* Helpers shared by the unit tests: temporary folders and files. */
#ifndef NTKD_TESTUTIL_H
#define NTKD_TESTUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A fresh folder under $TMPDIR (or /tmp); the path is static per call site. */
static inline const char *tu_tmpdir(void) {
  static char dir[256];
  const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(dir, sizeof dir, "%s/ntkd-test-XXXXXX", base);
  /* Called from main(), outside any test: no ck_assert here. */
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    exit(EXIT_FAILURE);
  }
  return dir;
}

static inline void tu_write(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, len, f), len);
  ck_assert_int_eq(fclose(f), 0);
}

static inline void tu_path(char *out, size_t cap, const char *dir, const char *name) {
  snprintf(out, cap, "%s/%s", dir, name);
}

/* Run a suite; returns the process exit status. */
static inline int tu_run(Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
