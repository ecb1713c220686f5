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

/* ---- Reading the JSON documents the API returns (step results, leaves,
 * snapshots): compact JSON as serde_json writes it. ---- */

/* The text of a buffer ("" for NULL). */
static inline const char *jtext(const pki_buffer *b) {
  pki_bytes d = pki_buffer_data(b);
  return d.data == NULL ? "" : (const char *)d.data;
}

/* The end of the JSON value at `p` (a string, an object, an array, a
 * number or a literal). */
static inline const char *json_skip(const char *p) {
  int depth = 0, in_string = 0;
  for (; *p != '\0'; p++) {
    if (in_string) {
      if (*p == '\\' && p[1] != '\0') {
        p++;
      } else if (*p == '"') {
        in_string = 0;
        if (depth == 0) {
          return p + 1;
        }
      }
    } else if (*p == '"') {
      in_string = 1;
    } else if (*p == '{' || *p == '[') {
      depth++;
    } else if (*p == '}' || *p == ']') {
      if (depth == 0) {
        return p;
      }
      if (--depth == 0) {
        return p + 1;
      }
    } else if (depth == 0 && (*p == ',' || *p == ' ')) {
      return p;
    }
  }
  return p;
}

/* The value of the member `name` of the JSON object at `json` (not of the
 * objects inside it); NULL when there is none. */
static inline const char *json_find(const char *json, const char *name) {
  const char *p = json == NULL ? NULL : strchr(json, '{');
  size_t n = strlen(name);
  if (p == NULL) {
    return NULL;
  }
  p++;
  while (*p == '"') {
    const char *key = p + 1;
    const char *colon = json_skip(p);
    const char *value = colon + 1;
    if (*colon != ':') {
      return NULL;
    }
    if ((size_t)(colon - 1 - key) == n && memcmp(key, name, n) == 0) {
      return value;
    }
    p = json_skip(value);
    if (*p != ',') {
      return NULL;
    }
    p++;
  }
  return NULL;
}

/* A malloc'd NUL-terminated copy of the raw JSON value of member `name`
 * ("null" when there is none); free it. */
static inline char *json_dup(const char *json, const char *name) {
  const char *v = json_find(json, name);
  size_t n = v == NULL ? 4 : (size_t)(json_skip(v) - v);
  char *out = malloc(n + 1);
  if (out == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  memcpy(out, v == NULL ? "null" : v, n);
  out[n] = '\0';
  return out;
}

/* Member `name` as an integer; 0 when there is none. */
static inline int64_t json_int(const char *json, const char *name) {
  const char *v = json_find(json, name);
  return v == NULL ? 0 : (int64_t)strtoll(v, NULL, 10);
}

/* Member `name` is `true`. */
static inline int json_true(const char *json, const char *name) {
  const char *v = json_find(json, name);
  return v != NULL && strncmp(v, "true", 4) == 0;
}

/* Copies member `name`, a string, into `out` with its escapes decoded
 * (\n, \", \\, \/; \uXXXX below 0x80); 0 when there is none or it does
 * not fit. */
static inline int json_str(const char *json, const char *name, char *out, size_t cap) {
  const char *v = json_find(json, name);
  size_t n = 0;
  if (v == NULL || *v != '"') {
    return 0;
  }
  for (v++; *v != '"' && *v != '\0'; v++) {
    char c = *v;
    if (c == '\\') {
      v++;
      c = *v == 'n' ? '\n' : *v == 't' ? '\t' : *v == 'r' ? '\r' : *v;
      if (*v == 'u') {
        char hex[5] = {0};
        memcpy(hex, v + 1, 4);
        c = (char)strtol(hex, NULL, 16);
        v += 4;
      }
    }
    if (n + 1 >= cap) {
      return 0;
    }
    out[n++] = c;
  }
  out[n] = '\0';
  return 1;
}

/* A malloc'd copy of member `name`, a string, decoded (as json_str);
 * NULL when there is none. Free it. */
static inline char *json_str_dup(const char *json, const char *name) {
  const char *v = json_find(json, name);
  size_t cap = v == NULL ? 0 : (size_t)(json_skip(v) - v) + 1;
  char *out = v == NULL ? NULL : malloc(cap);
  if (out != NULL && !json_str(json, name, out, cap)) {
    free(out);
    out = NULL;
  }
  return out;
}

/* The `index`th element of the array member `name`; NULL past the end. */
static inline const char *json_item(const char *json, const char *name, size_t index) {
  const char *p = json_find(json, name);
  size_t i;
  if (p == NULL || *p != '[') {
    return NULL;
  }
  p++;
  for (i = 0; *p != ']' && *p != '\0'; i++) {
    if (i == index) {
      return p;
    }
    p = json_skip(p);
    if (*p == ',') {
      p++;
    }
  }
  return NULL;
}

/* The step result of pki_document_create / pki_document_step (a JSON
 * document, pki-rotate's StepResult), read as the old getters did. */
static inline int step_changed(const pki_buffer *s) { return json_true(jtext(s), "changed"); }
static inline int step_idle(const pki_buffer *s) { return json_true(jtext(s), "idle"); }
static inline int step_by_parts(const pki_buffer *s) { return json_true(jtext(s), "by_parts"); }
static inline int64_t step_next_wake(const pki_buffer *s) { return json_int(jtext(s), "next_wake"); }
static inline uint32_t step_attempts(const pki_buffer *s) {
  return (uint32_t)json_int(jtext(s), "attempts");
}
/* The revision as a view into the step's buffer (its JSON string's
 * bytes, which need no escapes: revisions are digits and letters). */
static inline pki_bytes step_revision(const pki_buffer *s) {
  const char *v = json_find(jtext(s), "revision");
  pki_bytes b;
  b.data = NULL;
  b.len = 0;
  if (v != NULL && *v == '"') {
    b.data = (const uint8_t *)v + 1;
    b.len = (size_t)(json_skip(v) - v) - 2;
  }
  return b;
}
/* The revision as a NUL-terminated copy (up to 255 bytes). */
typedef struct {
  char text[256];
} step_revision_t;
static inline step_revision_t step_revision_text(const pki_buffer *s) {
  step_revision_t r;
  if (!json_str(jtext(s), "revision", r.text, sizeof r.text)) {
    r.text[0] = '\0';
  }
  return r;
}
/* The status of a step, from its start to the end of the step's JSON
 * (what follows it is at most the credential action): for substring
 * checks. "" when there is none. */
static inline const char *step_status_at(const pki_buffer *s) {
  const char *v = json_find(jtext(s), "status");
  return v == NULL ? "" : v;
}
/* The status as JSON text, malloc'd ("null" when none); free it. */
static inline char *step_status(const pki_buffer *s) { return json_dup(jtext(s), "status"); }

/* The number of events of a step. */
static inline size_t step_events(const pki_buffer *s) {
  size_t n = 0;
  while (json_item(jtext(s), "events", n) != NULL) {
    n++;
  }
  return n;
}

/* One event: its kind, message and whole JSON object (malloc'd). */
typedef struct {
  char kind[64];
  char message[1024];
  char *json;
} step_event_t;

/* Reads event `index` into `ev` (free ev->json); 0 past the end. */
static inline int step_event(const pki_buffer *s, size_t index, step_event_t *ev) {
  const char *item = json_item(jtext(s), "events", index);
  size_t n;
  if (item == NULL) {
    return 0;
  }
  n = (size_t)(json_skip(item) - item);
  ev->json = malloc(n + 1);
  if (ev->json == NULL) {
    exit(2);
  }
  memcpy(ev->json, item, n);
  ev->json[n] = '\0';
  if (!json_str(ev->json, "kind", ev->kind, sizeof ev->kind)) {
    ev->kind[0] = '\0';
  }
  if (!json_str(ev->json, "message", ev->message, sizeof ev->message)) {
    ev->message[0] = '\0';
  }
  return 1;
}

/* How many events of a step are of `kind` ("rotated", "minted"…). */
static inline size_t step_count(const pki_buffer *s, const char *kind) {
  size_t i, n = 0;
  step_event_t ev;
  for (i = 0; step_event(s, i, &ev); i++) {
    n += strcmp(ev.kind, kind) == 0;
    free(ev.json);
  }
  return n;
}

/* Decodes standard base64 into `out`; the number of bytes, or -1. */
static inline long base64_decode(const char *in, unsigned char *out, size_t cap) {
  static const char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  unsigned long acc = 0;
  int bits = 0;
  size_t n = 0;
  for (; *in != '\0' && *in != '='; in++) {
    const char *at = strchr(alphabet, *in);
    if (at == NULL) {
      return -1;
    }
    acc = (acc << 6) | (unsigned long)(at - alphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (n >= cap) {
        return -1;
      }
      out[n++] = (unsigned char)((acc >> bits) & 0xff);
    }
  }
  return (long)n;
}

/* The embedder's next action after a credential advance (the step
 * result's `action`). */
typedef struct {
  char kind[32];        /* "mint", "revoke", "wait", "revoke_stray" */
  uint64_t rotation;
  uint32_t attempt;
  char wait_reason[32]; /* "expiry", "grace", "backoff", "mint_elsewhere"; "" */
  unsigned char credential[4096];
  size_t credential_len;
} step_action_t;

/* Reads the action of a step into `a`; 0 when the step has none. */
static inline int step_action(const pki_buffer *s, step_action_t *a) {
  char *action = json_dup(jtext(s), "action");
  char *b64;
  int ok = action[0] == '{';
  memset(a, 0, sizeof *a);
  if (ok) {
    ok = json_str(action, "kind", a->kind, sizeof a->kind);
    a->rotation = (uint64_t)json_int(action, "rotation");
    a->attempt = (uint32_t)json_int(action, "attempt");
    if (!json_str(action, "wait_reason", a->wait_reason, sizeof a->wait_reason)) {
      a->wait_reason[0] = '\0';
    }
    b64 = json_str_dup(action, "credential_base64");
    if (b64 != NULL) {
      long n = base64_decode(b64, a->credential, sizeof a->credential);
      ok = ok && n >= 0;
      a->credential_len = n < 0 ? 0 : (size_t)n;
      free(b64);
    }
  }
  free(action);
  return ok;
}

/* The signer now stored at `key` (what a signer's step used to hold). */
static inline pki_signer *stored_signer(const pki_store *store, const char *key) {
  pki_signer *signer = NULL;
  if (pki_signer_load(store, key, strlen(key), &signer, NULL) != PKI_RESULT_OK) {
    fprintf(stderr, "cannot load the signer at %s\n", key);
    print_last_error();
  }
  return signer;
}

/* A leaf from pki_leaf_reconcile's JSON, read as the old getters did. */
typedef struct {
  char *chain_pem;
  char *key_pem;
  int64_t not_after, refresh_at;
  uint32_t reason_code;
  char reason_message[512];
} test_leaf;

/* A view of malloc'd text (NULL: empty). */
static inline pki_bytes text_view(const char *t) {
  pki_bytes b;
  b.data = (const uint8_t *)t;
  b.len = t == NULL ? 0 : strlen(t);
  return b;
}

static inline pki_bytes leaf_chain_pem(const test_leaf *l) {
  return text_view(l == NULL ? NULL : l->chain_pem);
}
static inline pki_bytes leaf_key_pem(const test_leaf *l) {
  return text_view(l == NULL ? NULL : l->key_pem);
}
static inline pki_bytes leaf_reason_message(const test_leaf *l) {
  return text_view(l == NULL ? NULL : l->reason_message);
}
static inline pki_leaf_reason leaf_reason_code(const test_leaf *l) {
  return l == NULL ? PKI_LEAF_UP_TO_DATE : (pki_leaf_reason)l->reason_code;
}
static inline int64_t leaf_not_after(const test_leaf *l) { return l == NULL ? 0 : l->not_after; }
static inline int64_t leaf_refresh_at(const test_leaf *l) { return l == NULL ? 0 : l->refresh_at; }

static inline void leaf_free(test_leaf *l) {
  if (l != NULL) {
    if (l->key_pem != NULL) {
      memset(l->key_pem, 0, strlen(l->key_pem));
    }
    free(l->chain_pem);
    free(l->key_pem);
    free(l);
  }
}

/* pki_leaf_reconcile, its JSON read into a test_leaf (NULL `out_leaf` is
 * passed on as NULL). */
static inline pki_result test_leaf_reconcile(const pki_signer *signer, const char *request,
                                             size_t request_len, int64_t now,
                                             const uint8_t *prev_chain, size_t prev_chain_len,
                                             const uint8_t *prev_key, size_t prev_key_len,
                                             test_leaf **out_leaf) {
  static int sentinel;
  pki_buffer *json = (pki_buffer *)(void *)&sentinel;
  pki_result r = pki_leaf_reconcile(signer, request, request_len, now, prev_chain, prev_chain_len,
                                    prev_key, prev_key_len, out_leaf == NULL ? NULL : &json);
  test_leaf *l;
  if (r != PKI_RESULT_OK || out_leaf == NULL) {
    /* The output is written on success only. */
    CHECK(json == (pki_buffer *)(void *)&sentinel);
    return r;
  }
  l = calloc(1, sizeof *l);
  if (l == NULL) {
    exit(2);
  }
  l->chain_pem = json_str_dup(jtext(json), "chain_pem");
  l->key_pem = json_str_dup(jtext(json), "key_pem");
  l->not_after = json_int(jtext(json), "not_after");
  l->refresh_at = json_int(jtext(json), "refresh_at");
  l->reason_code = (uint32_t)json_int(jtext(json), "reason_code");
  if (!json_str(jtext(json), "reason_message", l->reason_message, sizeof l->reason_message)) {
    l->reason_message[0] = '\0';
  }
  pki_buffer_free(json);
  *out_leaf = l;
  return r;
}

/* A snapshot from pki_snapshot_load's JSON. */
typedef struct {
  char *chain_pem, *key_pem, *bundle_pem, *fingerprint;
} test_snapshot;

static inline pki_bytes snapshot_chain_pem(const test_snapshot *s) {
  return text_view(s == NULL ? NULL : s->chain_pem);
}
static inline pki_bytes snapshot_key_pem(const test_snapshot *s) {
  return text_view(s == NULL ? NULL : s->key_pem);
}
static inline pki_bytes snapshot_bundle_pem(const test_snapshot *s) {
  return text_view(s == NULL ? NULL : s->bundle_pem);
}
static inline pki_bytes snapshot_fingerprint(const test_snapshot *s) {
  return text_view(s == NULL ? NULL : s->fingerprint);
}

static inline void snapshot_free(test_snapshot *s) {
  if (s != NULL) {
    if (s->key_pem != NULL) {
      memset(s->key_pem, 0, strlen(s->key_pem));
    }
    free(s->chain_pem);
    free(s->key_pem);
    free(s->bundle_pem);
    free(s->fingerprint);
    free(s);
  }
}

/* pki_snapshot_load, its JSON read into a test_snapshot (NULL
 * `out_snapshot` is passed on as NULL). */
static inline pki_result test_snapshot_load(const char *cert, size_t cert_len, const char *key,
                                            size_t key_len, const char *bundle, size_t bundle_len,
                                            test_snapshot **out_snapshot) {
  static int sentinel;
  pki_buffer *json = (pki_buffer *)(void *)&sentinel;
  pki_result r = pki_snapshot_load(cert, cert_len, key, key_len, bundle, bundle_len,
                                   out_snapshot == NULL ? NULL : &json);
  test_snapshot *s;
  if (r != PKI_RESULT_OK || out_snapshot == NULL) {
    /* The output is written on success only. */
    CHECK(json == (pki_buffer *)(void *)&sentinel);
    return r;
  }
  s = calloc(1, sizeof *s);
  if (s == NULL) {
    exit(2);
  }
  s->chain_pem = json_str_dup(jtext(json), "chain_pem");
  s->key_pem = json_str_dup(jtext(json), "key_pem");
  s->bundle_pem = json_str_dup(jtext(json), "bundle_pem");
  s->fingerprint = json_str_dup(jtext(json), "fingerprint");
  pki_buffer_free(json);
  *out_snapshot = s;
  return r;
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
