/*
 * Stores and the driver through the C API: a signer kept in memory, in the
 * embedder's Secret-shaped storage through callbacks (a fake API server with
 * resourceVersion), and in a directory whose published files `openssl
 * verify` checks. The time to step again is checked to the second.
 *
 * Usage: store DIR   (DIR: a writable scratch directory)
 */
#include <sys/stat.h>

#include "check.h"

/* 2026-01-01T00:00:00Z */
#define T0 ((int64_t)1767225600)
#define DAY ((int64_t)86400)
#define HOST "web.ns.svc"

static const char *dir;

static void stop_if_failed(void) {
  if (check_failures > 0) {
    fprintf(stderr, "stopping after the first failures\n");
    exit(check_summary("store"));
  }
}

static int bytes_equal(pki_bytes a, pki_bytes b) {
  return a.len == b.len && (a.len == 0 || memcmp(a.data, b.data, a.len) == 0);
}

static int contains(const char *haystack, const char *needle) {
  return strstr(haystack, needle) != NULL;
}

static const char *last_error(void) {
  static char msg[1024];
  size_t written = 0;
  msg[0] = '\0';
  pki_last_error(msg, sizeof msg, &written);
  return msg;
}

static void check_next_check(const pki_buffer *step, int64_t want) {
  int64_t got = step_next_wake(step);
  if (got != want) {
    fprintf(stderr, "next check at T0%+llds, want T0%+llds\n", (long long)(got - T0),
            (long long)(want - T0));
  }
  CHECK(got == want);
}

/* A forced rotation here comes days after the previous one, which cuts off
 * clients still holding the bundle of two rotations ago: allowed, for a
 * reason (checked refused without one below). */
#define DRILL "{\"forced\": {\"reason\": \"drill\"}, \"allow_trust_break\": \"test store\"}"
/* The signer of these tests. */
#define SERVICE_CA "{\"common_name\": \"service-ca\", \"key_type\": \"p256\"}"

/* Steps `key` with `input` (JSON text, NULL: the periodic step) and checks
 * what the step did; returns the step. */
static pki_buffer *step_ok(const pki_store *store, const char *key, const char *input,
                         int64_t now, int want_changed, size_t want_events,
                         uint32_t want_attempts, int64_t want_next_check) {
  pki_buffer *step = NULL;
  CHECK_OK(pki_document_step(store, PKI_KIND_SIGNER, key, strlen(key), input, input ? strlen(input) : 0, now,
                           &step));
  stop_if_failed();
  CHECK(step_changed(step) == (want_changed != 0));
  CHECK(step_events(step) == want_events);
  CHECK(step_attempts(step) == want_attempts);
  check_next_check(step, want_next_check);
  CHECK(pki_last_error_length() == 0);
  return step;
}

static int step_rotated(const pki_buffer *step) {
  return step_count(step, "rotated") > 0;
}

/* Creates the signer at `key`; returns its revision (to free). */
static pki_buffer *create(pki_store *store, const char *key) {
  pki_buffer *step = NULL;
  pki_buffer *rev = NULL;
  pki_bytes r;
  CHECK_OK(pki_document_create(store, PKI_KIND_SIGNER, key, strlen(key), LIT(SERVICE_CA), T0, &step));
  stop_if_failed();
  r = step_revision(step);
  CHECK(step_changed(step) && step_attempts(step) == 1 && step_events(step) == 0);
  /* Nothing is due before the CA is: one second after NotAfter - M. */
  check_next_check(step, T0 + 395 * DAY + 1);
  /* A revision as a buffer, as a load gives it. */
  {
    pki_signer *s = NULL;
    CHECK_OK(pki_signer_load(store, key, strlen(key), &s, &rev));
    CHECK(bytes_equal(pki_buffer_data(rev), r));
    pki_signer_free(s);
  }
  pki_buffer_free(step);
  return rev;
}

/* ---------------------------------------------------------------- memory */

static void test_memory_store(void) {
  pki_store *store = NULL, *none = (pki_store *)(void *)&dir;
  pki_signer *loaded = NULL, *s = (pki_signer *)(void *)&dir;
  pki_buffer *created = NULL, *rev = NULL, *r = (pki_buffer *)(void *)&dir, *edge = NULL;
  pki_buffer *step, *quiet, *st = (pki_buffer *)(void *)&dir;
  pki_bundle *bundle = NULL;
  pki_bytes view;

  CHECK_CODE(pki_store_open(LIT("memory:"), NULL, 0, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_store_open(NULL, 7, NULL, 0, &none), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_store_open("", 0, NULL, 0, &none), PKI_RESULT_INVALID_ARGUMENT);
  CHECK(none == (pki_store *)(void *)&dir);
  CHECK_OK(pki_store_open(LIT("memory:"), NULL, 0, &store));
  stop_if_failed();

  /* Create once; a second create overwrites nothing. */
  CHECK_CODE(pki_signer_load(store, LIT("signer"), &s, NULL), PKI_RESULT_NOT_INITIALIZED);
  created = create(store, "signer");
  CHECK(pki_buffer_data(created).len > 0);
  CHECK_CODE(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"), LIT(SERVICE_CA), T0, &st),
             PKI_RESULT_ALREADY_INITIALIZED);
  CHECK(contains(last_error(), "already exists"));
  CHECK_CODE(pki_document_create(store, PKI_KIND_SIGNER, LIT("Bad Key"), LIT(SERVICE_CA), T0, &st),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_document_create(NULL, PKI_KIND_SIGNER, LIT("signer"), LIT(SERVICE_CA), T0, &st),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_document_create(store, PKI_KIND_SIGNER, NULL, 6, LIT(SERVICE_CA), T0, &st),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"), NULL, 5, T0, &st),
             PKI_RESULT_NULL_PARAMETER);
  CHECK(st == (pki_buffer *)(void *)&dir);
  edge = create(store, "edge");

  CHECK_OK(pki_signer_load(store, LIT("signer"), &loaded, &rev));
  CHECK(bytes_equal(pki_buffer_data(rev), pki_buffer_data(created)));
  CHECK(loaded != NULL);
  CHECK_CODE(pki_signer_load(store, LIT("signer"), NULL, &rev), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_load(store, LIT("missing"), &s, &r), PKI_RESULT_NOT_INITIALIZED);
  CHECK(s == (pki_signer *)(void *)&dir && r == (pki_buffer *)(void *)&dir);
  pki_buffer_free(rev);
  pki_signer_free(loaded);

  /* Nothing due ten days in: no write, the same revision, and the next
   * check is the first second the CA has less than M left: one second
   * after T0 + 790 - 395 days. */
  quiet = step_ok(store, "signer", NULL, T0 + 10 * DAY, 0, 0, 1, T0 + 395 * DAY + 1);
  CHECK(bytes_equal(step_revision(quiet), pki_buffer_data(created)));
  pki_buffer_free(quiet);

  /* The rotation: less than 395 days left at T0 + 396 days. The next check
   * comes from the new document: bridge B ends with the old CA at T0 + 790
   * days and is retired one second later (the new CA is due at T0 + 791
   * days, bridge A ends then too). */
  step = step_ok(store, "signer", NULL, T0 + 396 * DAY, 1, 1, 1, T0 + 790 * DAY + 1);
  CHECK(step_rotated(step));
  CHECK(!bytes_equal(step_revision(step), pki_buffer_data(created)));
  CHECK((loaded = stored_signer(store, "signer")) != NULL);
  CHECK_OK(pki_signer_bundle(loaded, &bundle));
  CHECK(pki_bundle_len(bundle) == 2); /* new CA, bridge A */
  pki_bundle_free(bundle);
  pki_signer_free(loaded);
  CHECK_CODE(pki_signer_load(store, LIT("signer"), NULL, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_load(NULL, LIT("signer"), &s, NULL), PKI_RESULT_NULL_PARAMETER);
  /* The status is `pki status --json`'s, of the new document. */
  CHECK(contains(step_status_at(step), "\"rotations\":1"));

  /* Stepping again at the same time finds nothing to do. */
  quiet = step_ok(store, "signer", NULL, T0 + 396 * DAY, 0, 0, 1, T0 + 790 * DAY + 1);
  CHECK(bytes_equal(step_revision(quiet), step_revision(step)));
  pki_buffer_free(quiet);
  pki_buffer_free(step);

  /* At the exact second the CA becomes due (NotAfter - M) the engine does
   * not rotate yet (it rotates when strictly less than M is left): the next
   * check is one second later, never `now`, and that step rotates. */
  quiet = step_ok(store, "edge", NULL, T0 + 395 * DAY, 0, 0, 1, T0 + 395 * DAY + 1);
  pki_buffer_free(quiet);
  step = step_ok(store, "edge", NULL, T0 + 395 * DAY + 1, 1, 1, 1, T0 + 790 * DAY + 1);
  CHECK(step_rotated(step));
  pki_buffer_free(step);

  /* Four days after a rotation, another cuts off clients that still hold
   * the first bundle: refused without a reason, naming until when, and
   * nothing written. */
  st = (pki_buffer *)(void *)&dir;
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), LIT("{\"forced\": {\"reason\": \"drill\"}}"),
                             T0 + 400 * DAY, &st),
             PKI_RESULT_TRUST_BREAK);
  CHECK(contains(last_error(), "until"));
  CHECK(st == (pki_buffer *)(void *)&dir);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"),
                             LIT("{\"forced\": {\"reason\": \"drill\"}, \"allow_trust_break\": \" \"}"),
                             T0 + 400 * DAY, &st),
             PKI_RESULT_INVALID_ARGUMENT);

  /* A forced rotation runs once per reason; the third CA is due first. */
  step = step_ok(store, "signer", DRILL, T0 + 400 * DAY, 1, 1, 1, T0 + 795 * DAY + 1);
  CHECK(step_rotated(step));
  pki_buffer_free(step);
  step = step_ok(store, "signer", DRILL, T0 + 401 * DAY, 0, 0, 1, T0 + 795 * DAY + 1);
  pki_buffer_free(step);

  /* Misuse: codes, and no output written. */
  CHECK_CODE(pki_document_step(NULL, PKI_KIND_SIGNER, LIT("signer"), NULL, 0, T0, &st), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, NULL, 6, NULL, 0, T0, &st), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), NULL, 0, T0, NULL),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("../signer"), NULL, 0, T0, &st),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("missing"), NULL, 0, T0, &st),
             PKI_RESULT_NOT_INITIALIZED);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), LIT("{\"policy\": {\"min_trust_seconds\": 0}}"),
                             T0 + 500 * DAY, &st),
             PKI_RESULT_INVALID_POLICY);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), LIT("{\"forced\": {\"reason\": \"\"}}"),
                             T0 + 500 * DAY, &st),
             PKI_RESULT_EMPTY_FORCED_REASON);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), NULL, 0, T0 - DAY, &st),
             PKI_RESULT_CLOCK_BEFORE_CA);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), NULL, 0, INT64_MIN, &st), PKI_RESULT_TIME);
  CHECK(st == (pki_buffer *)(void *)&dir);

  /* The buffer of NULL is empty; freeing NULL does nothing. */
  view = pki_buffer_data(NULL);
  CHECK(view.data == NULL && view.len == 0);
  pki_buffer_free(NULL);
  pki_store_free(NULL);

  pki_buffer_free(created);
  pki_buffer_free(edge);
  pki_store_free(store);
}

/* ------------------------------------------------------------- callbacks */

/* The API server's Secret of one key, with a resourceVersion. */
struct fake_secrets {
  pki_secret *data;       /* NULL: no Secret */
  unsigned long version;  /* the stored Secret's resourceVersion */
  unsigned long counter;  /* last resourceVersion handed out */
  int interfere;          /* writes by another replica before our put; -1: always */
  int broken;             /* puts fail like an unreachable API server */
  int bad_get;            /* get answers a revision without data */
  int gets, puts, conflicts, releases;
};

static pki_secret *copy_secret(const pki_secret *src) {
  pki_secret *copy = NULL;
  size_t i;
  if (pki_secret_new(&copy) != PKI_RESULT_OK) {
    return NULL;
  }
  for (i = 0; i < pki_secret_len(src); i++) {
    pki_bytes k, v;
    if (pki_secret_entry(src, i, &k, &v) != PKI_RESULT_OK ||
        pki_secret_set(copy, (const char *)k.data, k.len, v.data, v.len) != PKI_RESULT_OK) {
      pki_secret_free(copy);
      return NULL;
    }
  }
  return copy;
}

/* Answers with `data` (NULL for a put) and the revision `version`. */
static void set_revision(pki_store_reply *reply, const pki_secret *data, unsigned long version) {
  char text[32];
  int n = snprintf(text, sizeof text, "%lu", version);
  pki_store_reply_set(reply, data, (const uint8_t *)text, (size_t)n);
}

static int is_key(const char *key, size_t key_len) {
  return key_len == 6 && memcmp(key, "signer", 6) == 0 && key[key_len] == '\0';
}

static uint32_t fake_get(void *user_data, const char *key, size_t key_len,
                         pki_store_reply *reply) {
  struct fake_secrets *f = (struct fake_secrets *)user_data;
  pki_bytes unused;
  f->gets++;
  /* A failing call inside a callback must not leak its message into the
   * caller's last error. */
  if (f->data != NULL) {
    pki_secret_entry(f->data, 100000, &unused, &unused);
  }
  if (!is_key(key, key_len) || f->data == NULL) {
    return PKI_RESULT_OK; /* not found */
  }
  if (!f->bad_get) {
    set_revision(reply, f->data, f->version);
  } else {
    /* Data without a revision cannot be said: a revision without data. */
    set_revision(reply, NULL, f->version);
  }
  return PKI_RESULT_OK;
}

static uint32_t fake_put(void *user_data, const char *key, size_t key_len,
                         const uint8_t *expected, size_t expected_len, const pki_secret *data,
                         pki_store_reply *reply) {
  struct fake_secrets *f = (struct fake_secrets *)user_data;
  char current[32];
  int n;
  f->puts++;
  if (f->broken) {
    pki_store_reply_set_message(reply, LIT("dial tcp 10.0.0.1:6443: connection refused"));
    return PKI_RESULT_UNEXPECTED;
  }
  if (!is_key(key, key_len)) {
    pki_store_reply_set_message(reply, LIT("this fake keeps one key"));
    return PKI_RESULT_UNEXPECTED;
  }
  if (f->interfere != 0 && f->data != NULL) {
    /* Another replica updates the Secret between our read and our write. */
    f->version = ++f->counter;
    if (f->interfere > 0) {
      f->interfere--;
    }
  }
  n = snprintf(current, sizeof current, "%lu", f->version);
  if (f->data == NULL ? expected != NULL
                      : (expected == NULL || expected_len != (size_t)n ||
                         memcmp(expected, current, (size_t)n) != 0 ||
                         expected[expected_len] != '\0')) {
    f->conflicts++;
    if (f->data != NULL) {
      set_revision(reply, NULL, f->version);
    }
    return PKI_RESULT_CONFLICT;
  }
  pki_secret_free(f->data);
  f->data = copy_secret(data);
  f->version = ++f->counter;
  /* Data in a put's answer is refused: the caller keeps its own. */
  if (pki_store_reply_set(reply, data, (const uint8_t *)"1", 1) != PKI_RESULT_INVALID_ARGUMENT) {
    return PKI_RESULT_UNEXPECTED;
  }
  set_revision(reply, NULL, f->version);
  return PKI_RESULT_OK;
}

static void fake_release(void *user_data) {
  ((struct fake_secrets *)user_data)->releases++;
}

static void test_callback_store(void) {
  struct fake_secrets f;
  pki_store_callbacks cb;
  pki_store *store = NULL, *s = (pki_store *)(void *)&dir;
  pki_signer *loaded = NULL;
  pki_buffer *step = NULL, *st = (pki_buffer *)(void *)&dir;
  pki_buffer *rev = NULL;
  pki_bytes before, after;
  pki_result r;
  int puts;

  memset(&f, 0, sizeof f);
  memset(&cb, 0, sizeof cb);
  CHECK_CODE(pki_store_new_callbacks(NULL, &f, &store), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_store_new_callbacks(&cb, &f, &s), PKI_RESULT_NULL_PARAMETER);
  cb.get = fake_get;
  CHECK_CODE(pki_store_new_callbacks(&cb, &f, &s), PKI_RESULT_NULL_PARAMETER);
  cb.put = fake_put;
  cb.release = fake_release;
  CHECK_CODE(pki_store_new_callbacks(&cb, &f, NULL), PKI_RESULT_NULL_PARAMETER);
  cb.location = "secrets in namespace kube-system";
  cb.location_len = strlen(cb.location);
  CHECK(s == (pki_store *)(void *)&dir && f.releases == 0);
  CHECK_OK(pki_store_new_callbacks(&cb, &f, &store));
  stop_if_failed();

  CHECK_CODE(pki_signer_load(store, LIT("signer"), &loaded, NULL), PKI_RESULT_NOT_INITIALIZED);
  CHECK(contains(last_error(), "kube-system"));
  rev = create(store, "signer");
  CHECK(f.data != NULL && f.version == 1);
  CHECK(strcmp((const char *)pki_buffer_data(rev).data, "1") == 0);
  CHECK_CODE(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"), LIT(SERVICE_CA), T0, &st),
             PKI_RESULT_ALREADY_INITIALIZED);
  stop_if_failed();

  /* The Secret holds the documented keys. */
  {
    pki_bytes v;
    CHECK_OK(secret_get(f.data, LIT("tls.crt"), &v));
    CHECK_OK(secret_get(f.data, LIT("tls.key"), &v));
    CHECK_OK(secret_get(f.data, LIT("ca-bundle.crt"), &v));
    CHECK_OK(secret_get(f.data, LIT("pki-state.json"), &v));
  }

  /* Another replica writes between our read and our write at the rotation
   * point: the lost write is retried from a fresh read, and the rotation
   * happens once. The next check is the new document's, to the second. */
  f.conflicts = 0; /* the second create above lost one */
  f.interfere = 1;
  step = step_ok(store, "signer", NULL, T0 + 396 * DAY, 1, 1, 2, T0 + 790 * DAY + 1);
  CHECK(step_rotated(step));
  CHECK(f.conflicts == 1);
  {
    char want[32];
    snprintf(want, sizeof want, "%lu", f.version);
    CHECK(strcmp(step_revision_text(step).text, want) == 0);
  }
  pki_buffer_free(step);
  CHECK_OK(secret_get(f.data, LIT("tls.crt"), &before));

  /* Writers that always get there first: PKI_RESULT_CONFLICT after the
   * driver's 8 attempts, not PKI_RESULT_STORE; nothing written. */
  f.interfere = -1;
  puts = f.puts;
  r = pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), LIT(DRILL), T0 + 400 * DAY, &st);
  CHECK_CODE(r, PKI_RESULT_CONFLICT);
  CHECK(r != PKI_RESULT_STORE);
  CHECK(contains(last_error(), "8 attempts"));
  CHECK(f.puts - puts == 8);
  CHECK(st == (pki_buffer *)(void *)&dir);
  CHECK_OK(secret_get(f.data, LIT("tls.crt"), &after));
  CHECK(bytes_equal(before, after));

  /* A broken backend: PKI_RESULT_STORE with the backend's message, and no
   * retry. */
  f.interfere = 0;
  f.broken = 1;
  puts = f.puts;
  r = pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), LIT(DRILL), T0 + 400 * DAY, &st);
  CHECK_CODE(r, PKI_RESULT_STORE);
  CHECK(contains(last_error(), "connection refused"));
  CHECK(contains(last_error(), "kube-system"));
  CHECK(f.puts - puts == 1);
  f.broken = 0;

  /* A get that answers a revision without data is a broken backend too
   * (data without a revision cannot be answered at all). */
  f.bad_get = 1;
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), NULL, 0, T0 + 400 * DAY, &st),
             PKI_RESULT_STORE);
  CHECK(contains(last_error(), "without data"));
  f.bad_get = 0;
  CHECK(st == (pki_buffer *)(void *)&dir);

  /* Healthy again: the forced rotation goes through. */
  step = step_ok(store, "signer", DRILL, T0 + 400 * DAY, 1, 1, 1, T0 + 795 * DAY + 1);
  pki_buffer_free(step);
  CHECK_OK(pki_signer_load(store, LIT("signer"), &loaded, NULL));
  pki_signer_free(loaded);

  pki_buffer_free(rev);
  CHECK(f.releases == 0);
  pki_store_free(store);
  CHECK(f.releases == 1);
  pki_secret_free(f.data);
}

/* -------------------------------------------------------------- directory */

static char *read_file(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  char *buf;
  long size;
  if (fp == NULL || fseek(fp, 0, SEEK_END) != 0 || (size = ftell(fp)) < 0 ||
      fseek(fp, 0, SEEK_SET) != 0) {
    fprintf(stderr, "cannot read %s\n", path);
    if (fp != NULL) {
      fclose(fp);
    }
    return NULL;
  }
  buf = (char *)malloc((size_t)size + 1);
  if (buf != NULL && fread(buf, 1, (size_t)size, fp) != (size_t)size) {
    free(buf);
    buf = NULL;
  }
  fclose(fp);
  if (buf != NULL) {
    buf[size] = '\0';
    *len = (size_t)size;
  }
  return buf;
}

/* Copies a published file to DIR/NAME (what a consumer loaded earlier). */
static void keep_copy(const char *published, const char *name) {
  char path[1024];
  size_t len = 0;
  char *data;
  pki_bytes b;
  snprintf(path, sizeof path, "%s/store/%s", dir, published);
  data = read_file(path, &len);
  CHECK(data != NULL);
  if (data == NULL) {
    return;
  }
  b.data = (const uint8_t *)data;
  b.len = len;
  CHECK(write_file(dir, name, b) == 0);
  free(data);
}

/* openssl verify of CHAIN (leaf first, then intermediates) against BUNDLE. */
static void openssl_verify(const char *chain, const char *bundle, int64_t at) {
  char cmd[4096];
  int rc;
  snprintf(cmd, sizeof cmd,
           "openssl verify -attime %lld -purpose sslserver -verify_hostname " HOST
           " -CAfile '%s/%s' -untrusted '%s/%s' '%s/%s' > /dev/null",
           (long long)at, dir, bundle, dir, chain, dir, chain);
  rc = system(cmd);
  if (rc != 0) {
    fprintf(stderr, "openssl: %s x %s failed: %s\n", chain, bundle, cmd);
  }
  CHECK(rc == 0);
}

/* Asks the signer to keep the server leaf NAME for HOST, for 365 days. */
#define LEAF(name)                                                                      \
  "{\"leaves\": [{\"request\": {\"name\": \"" name "\", \"kind\": \"server\", "      \
  "\"dns_names\": [\"" HOST "\"], \"lifetime_seconds\": 31536000}}]}"

static void test_dir_store(void) {
  char path[1024];
  struct stat st;
  pki_store *store = NULL, *again = NULL;
  pki_signer *s = NULL;
  pki_buffer *step, *refused = NULL;
  pki_buffer *rev = NULL;
  int64_t t_rotate = T0 + 395 * DAY + 1;

  snprintf(path, sizeof path, "%s/store", dir);
  CHECK_CODE(pki_store_open(NULL, 3, NULL, 0, &store), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_store_open("", 0, NULL, 0, &store), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_OK(pki_store_open(path, strlen(path), NULL, 0, &store));

  rev = create(store, "signer");
  pki_buffer_free(rev);
  rev = NULL;
  stop_if_failed();
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), LIT(LEAF("Web!")), T0, &refused),
             PKI_RESULT_INVALID_LEAF_NAME);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"),
                             LIT("{\"leaves\": [{\"request\": {\"name\": \"web\"}}]}"), T0, &refused),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK(refused == NULL);

  /* A controller that steps exactly when told. The first step asks for the
   * leaf the document keeps and issues it; its refresh time is the next
   * check: NotAfter - 20% of its lifetime, and its lifetime is 365 days plus
   * the 5 minutes NotBefore is backdated, so T0 + 365 days - 73 days - 60 s. */
  step = step_ok(store, "signer", LEAF("web"), T0, 1, 1, 1, T0 + 292 * DAY - 60);
  pki_buffer_free(step);
  /* The leaf is renewed; the CA's rotation comes next, at the first second
   * less than M is left: T0 + 395 days + 1 s. */
  step = step_ok(store, "signer", NULL, T0 + 292 * DAY - 60, 1, 1, 1, t_rotate);
  pki_buffer_free(step);
  keep_copy("ca-bundle.crt", "old-bundle.pem");
  keep_copy("certs/web/tls.crt", "old-chain.pem");

  /* The rotation re-issues the leaf under the new CA (with bridge B); the
   * new leaf's refresh comes first: t_rotate + 292 days - 60 s. */
  step = step_ok(store, "signer", NULL, t_rotate, 1, 2, 1, t_rotate + 292 * DAY - 60);
  CHECK(step_rotated(step));
  keep_copy("ca-bundle.crt", "new-bundle.pem");
  keep_copy("certs/web/tls.crt", "new-chain.pem");

  /* Old and new chains against old and new bundles, as consumers that did
   * or did not reload see them: every cell verifies with openssl. */
  openssl_verify("old-chain.pem", "old-bundle.pem", t_rotate + 3600);
  openssl_verify("old-chain.pem", "new-bundle.pem", t_rotate + 3600);
  openssl_verify("new-chain.pem", "old-bundle.pem", t_rotate + 3600);
  openssl_verify("new-chain.pem", "new-bundle.pem", t_rotate + 3600);
  /* And a day before the old leaf expires (T0 + 657 days - 60 s). */
  openssl_verify("old-chain.pem", "new-bundle.pem", T0 + 656 * DAY);
  openssl_verify("new-chain.pem", "old-bundle.pem", T0 + 656 * DAY);

  /* Keys are readable by the owner only. */
  snprintf(path, sizeof path, "%s/store/signer/tls.key", dir);
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
  snprintf(path, sizeof path, "%s/store/certs/web/tls.key", dir);
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);

  /* Another handle on the directory (another process, say) reads what the
   * step wrote, at the step's revision. */
  snprintf(path, sizeof path, "%s/store", dir);
  CHECK_OK(pki_store_open(path, strlen(path), NULL, 0, &again));
  CHECK_OK(pki_signer_load(again, LIT("signer"), &s, &rev));
  CHECK(bytes_equal(pki_buffer_data(rev), step_revision(step)));
  pki_buffer_free(rev);
  pki_signer_free(s);
  pki_store_free(again);
  pki_buffer_free(step);

  /* A leaf change while the store's summary says nothing else is due goes
   * over the document's head and that leaf only (`unless_idle` with
   * `leaves`): the step says so, its status names that leaf alone, the
   * promise still ends at web's refresh, and the new chain verifies with
   * openssl against the bundles of before and after the rotation. */
  step = step_ok(store, "signer",
                 "{\"unless_idle\": true, \"leaves\": [{\"request\": {\"name\": \"api\", "
                 "\"kind\": \"server\", \"dns_names\": [\"" HOST "\"], "
                 "\"lifetime_seconds\": 31536000}}]}",
                 t_rotate + 3600, 1, 1, 1, t_rotate + 292 * DAY - 60);
  CHECK(step_by_parts(step) && !step_idle(step));
  {
    const char *status = step_status_at(step);
    CHECK(contains(status, "\"api\"") && !contains(status, "\"web\""));
  }
  pki_buffer_free(step);
  keep_copy("certs/api/tls.crt", "api-chain.pem");
  openssl_verify("api-chain.pem", "new-bundle.pem", t_rotate + 7200);
  openssl_verify("api-chain.pem", "old-bundle.pem", t_rotate + 7200);
  /* The periodic step after it has nothing to do, and web is still kept. */
  step = step_ok(store, "signer", "{\"unless_idle\": true}", t_rotate + 7200, 0, 0, 1,
                 t_rotate + 292 * DAY - 60);
  CHECK(step_idle(step) && !step_by_parts(step));
  pki_buffer_free(step);
  snprintf(path, sizeof path, "%s/store/certs/web/tls.key", dir);
  CHECK(stat(path, &st) == 0);

  pki_store_free(store);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  dir = argv[1];
  test_memory_store();
  test_callback_store();
  test_dir_store();
  return check_summary("store");
}
