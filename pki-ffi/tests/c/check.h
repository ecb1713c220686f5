/* Small assertion helpers shared by the C tests. */
#ifndef PKI_TEST_CHECK_H
#define PKI_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pki.h"

static int check_failures = 0;
static int check_count = 0;

static inline void print_last_error(void) {
  char msg[512];
  size_t written = 0;
  if (pki_last_error(msg, sizeof msg, &written) == PKI_RESULT_OK && written > 0) {
    fprintf(stderr, "    last error: %s\n", msg);
  }
}

/* Expects `expr` (a pki_result) to equal `want`. */
#define CHECK_CODE(expr, want)                                                   \
  do {                                                                           \
    pki_result got_ = (expr);                                                    \
    check_count++;                                                               \
    if (got_ != (pki_result)(want)) {                                            \
      check_failures++;                                                          \
      fprintf(stderr, "%s:%d: %s\n    returned %s, expected %s\n", __FILE__,     \
              __LINE__, #expr, pki_result_name(got_), pki_result_name(want));    \
      print_last_error();                                                        \
    }                                                                            \
  } while (0)

#define CHECK_OK(expr) CHECK_CODE(expr, PKI_RESULT_OK)

/* Expects a condition to hold. */
#define CHECK(cond)                                                              \
  do {                                                                           \
    check_count++;                                                               \
    if (!(cond)) {                                                               \
      check_failures++;                                                          \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);  \
    }                                                                            \
  } while (0)

/* A string literal as pointer + length. */
#define LIT(s) (s), (sizeof(s) - 1)
/* A string literal as bytes + length. */
#define BLIT(s) (const uint8_t *)(s), (sizeof(s) - 1)

/* Writes bytes to DIR/NAME; returns 0 on success. */
static inline int write_file(const char *dir, const char *name, pki_bytes bytes) {
  char path[1024];
  FILE *f;
  size_t n;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "wb");
  if (f == NULL) {
    fprintf(stderr, "cannot write %s\n", path);
    return 1;
  }
  n = bytes.len == 0 ? 0 : fwrite(bytes.data, 1, bytes.len, f);
  fclose(f);
  return n == bytes.len ? 0 : 1;
}

/* Prints the tally in the form test runners read, and returns the exit code. */
static inline int check_summary(const char *name) {
  printf("%s: %d passed, %d failed\n", name, check_count - check_failures,
         check_failures);
  return check_failures == 0 ? 0 : 1;
}

#endif
