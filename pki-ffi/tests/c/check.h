/* Small assertion helpers shared by the C tests. */
#ifndef PKI_TEST_CHECK_H
#define PKI_TEST_CHECK_H

#include <stdarg.h>
#include <stdint.h>
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

/* A growing NUL-terminated text, to write the JSON inputs of the API. */
typedef struct {
  char *data;
  size_t len, cap;
} text;

static inline void text_add(text *t, const char *s, size_t n) {
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap == 0 ? 256 : t->cap;
    char *data;
    while (cap < t->len + n + 1) {
      cap *= 2;
    }
    data = realloc(t->data, cap);
    if (data == NULL) {
      fprintf(stderr, "out of memory\n");
      exit(2);
    }
    t->data = data;
    t->cap = cap;
  }
  memcpy(t->data + t->len, s, n);
  t->len += n;
  t->data[t->len] = '\0';
}

/* Appends printf-style text. */
static inline void text_fmt(text *t, const char *fmt, ...) {
  char buf[1024];
  int n;
  va_list ap;
  va_start(ap, fmt);
  n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof buf) {
    fprintf(stderr, "text_fmt: too long\n");
    exit(2);
  }
  text_add(t, buf, (size_t)n);
}

/* Appends `n` bytes as a JSON string literal (quotes included): what PEM
 * and other text need to travel inside a JSON input. */
static inline void text_json(text *t, const void *s, size_t n) {
  const unsigned char *p = s;
  size_t i;
  text_add(t, "\"", 1);
  for (i = 0; i < n; i++) {
    char esc[8];
    if (p[i] == '"' || p[i] == '\\') {
      esc[0] = '\\';
      esc[1] = (char)p[i];
      text_add(t, esc, 2);
    } else if (p[i] == '\n') {
      text_add(t, "\\n", 2);
    } else if (p[i] < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", p[i]);
      text_add(t, esc, 6);
    } else {
      text_add(t, (const char *)p + i, 1);
    }
  }
  text_add(t, "\"", 1);
}

static inline void text_free(text *t) {
  free(t->data);
  t->data = NULL;
  t->len = t->cap = 0;
}

/* Finds the entry `key` of a secret by its entries. */
static inline pki_result secret_get(const pki_secret *secret, const char *key, size_t key_len,
                                    pki_bytes *out) {
  size_t i;
  pki_bytes k, v;
  pki_result r = PKI_RESULT_OK;
  for (i = 0; (r = pki_secret_entry(secret, i, &k, &v)) == PKI_RESULT_OK; i++) {
    if (k.len == key_len && memcmp(k.data, key, key_len) == 0) {
      *out = v;
      return PKI_RESULT_OK;
    }
  }
  return r;
}

/* The number of events of a step. */
static inline size_t step_events(const pki_step *step) { return pki_step_events_len(step); }

/* How many events of a step are of `kind` ("rotated", "minted"…). */
static inline size_t step_count(const pki_step *step, const char *kind) {
  size_t i, n = 0;
  pki_event ev;
  for (i = 0; i < pki_step_events_len(step); i++) {
    if (pki_step_event(step, i, &ev) == PKI_RESULT_OK) {
      n += strcmp((const char *)ev.kind.data, kind) == 0;
    }
  }
  return n;
}

/* Copies the string value of the first `"name":"…"` of compact JSON into
 * `out` (escapes left as they are); 0 when there is none. */
static inline int json_string(const char *json, const char *name, char *out, size_t cap) {
  char pattern[128];
  const char *p, *end;
  snprintf(pattern, sizeof pattern, "\"%s\":\"", name);
  p = json == NULL ? NULL : strstr(json, pattern);
  if (p == NULL) {
    return 0;
  }
  p += strlen(pattern);
  for (end = p; *end != '\0' && *end != '"'; end++) {
    if (*end == '\\' && end[1] != '\0') {
      end++;
    }
  }
  if ((size_t)(end - p) >= cap) {
    return 0;
  }
  memcpy(out, p, (size_t)(end - p));
  out[end - p] = '\0';
  return 1;
}

/* The Unix time of an RFC 3339 UTC field (`"name":"2026-01-01T00:00:00Z"`)
 * of compact JSON; 0 when there is none. */
static inline int64_t json_time(const char *json, const char *name) {
  char value[64];
  int y, mo, d, h, mi, s;
  int64_t era, yoe, doy, doe, days;
  if (!json_string(json, name, value, sizeof value) ||
      sscanf(value, "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &s) != 6) {
    return 0;
  }
  /* Days from the civil date (H. Hinnant's algorithm). */
  y -= mo <= 2;
  era = (y >= 0 ? y : y - 399) / 400;
  yoe = y - era * 400;
  doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  days = era * 146097 + doe - 719468;
  return days * 86400 + h * 3600 + mi * 60 + s;
}

/* Prints the tally in the form test runners read, and returns the exit code. */
static inline int check_summary(const char *name) {
  printf("%s: %d passed, %d failed\n", name, check_count - check_failures,
         check_failures);
  return check_failures == 0 ? 0 : 1;
}

#endif
