/*
 * Key rings and credentials kept in a store, through the C API: a short
 * key ring rotation (sign, force, grace, removal) on a memory store, a
 * directory store whose published jwks.json matches what the API reads,
 * and the embedder's Secret-shaped storage through callbacks; a credential
 * rotation whose failed mint returned a credential (revoked before the
 * retry), a late mint report kept as a stray, owners that keep replicas
 * from minting one attempt twice, and the one bound of an advance on a
 * store that loses its writes; and bad input of every kind, answered with
 * a code, never a crash.
 *
 * Usage: keys_cred DIR   (DIR: a writable scratch directory)
 */
#include "check.h"

/* 2026-01-01T00:00:00Z */
#define T0 ((int64_t)1767225600)
#define HOUR ((int64_t)3600)
#define DAY ((int64_t)86400)

static int contains(pki_bytes haystack, const char *needle) {
  size_t n = strlen(needle), i;
  if (haystack.data == NULL || haystack.len < n) {
    return 0;
  }
  for (i = 0; i + n <= haystack.len; i++) {
    if (memcmp(haystack.data + i, needle, n) == 0) {
      return 1;
    }
  }
  return 0;
}

/* The buffer's text as a NUL-terminated copy (free it). */
static char *text_of(const pki_buffer *buffer) {
  pki_bytes b = pki_buffer_data(buffer);
  char *s = malloc(b.len + 1);
  if (s == NULL) {
    exit(2);
  }
  if (b.len > 0) {
    memcpy(s, b.data, b.len);
  }
  s[b.len] = '\0';
  return s;
}

static char *export_text(const pki_store *store, uint32_t output) {
  pki_buffer *buf = NULL;
  char *s;
  CHECK_OK(pki_document_read(store, PKI_KIND_KEYRING, LIT("keys"), output, T0, &buf));
  if (buf == NULL) {
    return NULL;
  }
  s = text_of(buf);
  pki_buffer_free(buf);
  return s;
}

/* One step of the ring at "keys"; `changed` and `next_check` (either may
 * be NULL) are written on success only. */
static pki_result ring_step(const pki_store *store, const char *input, size_t input_len,
                            int64_t now, bool *changed, int64_t *next_check) {
  pki_buffer *step = NULL;
  pki_result r = pki_document_step(store, PKI_KIND_KEYRING, LIT("keys"), input, input_len, now, &step);
  if (r == PKI_RESULT_OK) {
    if (changed != NULL) {
      *changed = step_changed(step);
    }
    if (next_check != NULL) {
      *next_check = step_next_wake(step);
    }
  }
  pki_buffer_free(step);
  return r;
}

/* Creates the ring at "keys" from `input`; returns the code. */
static pki_result ring_create(const pki_store *store, const char *input, size_t input_len) {
  pki_buffer *step = NULL;
  pki_result r = pki_document_create(store, PKI_KIND_KEYRING, LIT("keys"), input, input_len, T0, &step);
  pki_buffer_free(step);
  return r;
}

#define POLICY "{\"policy\": {\"grace_seconds\": 3600, \"lifetime_seconds\": 2592000}}"

/* A key ring through one rotation on `store`; `label` names the store. */
static void keyring_rotation(const pki_store *store, const char *label) {
  pki_buffer *token = NULL, *json = NULL, *state = NULL;
  pki_store *copy = NULL;
  pki_buffer *created = NULL;
  char *first, *second, *jwks, *pem;
  char retire[256];
  bool changed = false;
  int64_t next_check = 0;
  text input = {0};
  int n;

  printf("key ring on %s\n", label);
  CHECK_CODE(pki_document_read(store, PKI_KIND_KEYRING, LIT("keys"), PKI_KEYRING_JWKS, T0, &token),
             PKI_RESULT_NOT_INITIALIZED);
  CHECK(token == NULL);
  CHECK_CODE(ring_step(store, NULL, 0, T0, &changed, &next_check), PKI_RESULT_NOT_INITIALIZED);
  CHECK_OK(pki_document_create(store, PKI_KIND_KEYRING, LIT("keys"), LIT(POLICY), T0, &created));
  CHECK(step_changed(created) && step_next_wake(created) == T0 + 30 * DAY &&
        strstr(step_status_at(created), "\"active\"") != NULL);
  pki_buffer_free(created);
  CHECK_CODE(ring_create(store, LIT(POLICY)), PKI_RESULT_ALREADY_INITIALIZED);
  first = export_text(store, PKI_KEYRING_ACTIVE_KID);
  CHECK_OK(pki_keyring_sign(store, LIT("keys"), BLIT("{\"sub\":\"a\"}"), T0, &token));
  if (token == NULL || first == NULL) {
    free(first);
    return;
  }
  CHECK_OK(pki_keyring_verify(store, LIT("keys"), pki_buffer_data(token).data,
                              pki_buffer_data(token).len, T0));

  /* Nothing due: unchanged, next check at the end of the lifetime. */
  CHECK_OK(ring_step(store, NULL, 0, T0 + 60, &changed, &next_check));
  CHECK(!changed && next_check == T0 + 30 * DAY);
  /* Forced once per reason; the old key stays accepted for the grace. */
  CHECK_OK(ring_step(store, LIT("{\"forced\": \"drill\"}"), T0 + 60, &changed, &next_check));
  CHECK(changed && next_check == T0 + 60 + HOUR);
  CHECK_OK(ring_step(store, LIT("{\"forced\": \"drill\"}"), T0 + 120, &changed, NULL));
  CHECK(!changed);
  second = export_text(store, PKI_KEYRING_ACTIVE_KID);
  CHECK(second != NULL && strcmp(first, second) != 0);
  jwks = export_text(store, PKI_KEYRING_JWKS);
  CHECK(jwks != NULL && strstr(jwks, first) != NULL && strstr(jwks, second) != NULL);
  free(jwks);
  CHECK_OK(pki_keyring_verify(store, LIT("keys"), pki_buffer_data(token).data,
                              pki_buffer_data(token).len, T0 + 60 + HOUR - 1));
  /* Retiring a key in its grace, or an unknown one, is refused. */
  n = snprintf(retire, sizeof retire, "{\"retire\": [\"%s\"]}", first);
  CHECK_CODE(ring_step(store, retire, (size_t)n, T0 + 120, NULL, NULL),
             PKI_RESULT_KEYRING_RETIRE);
  CHECK_CODE(ring_step(store, LIT("{\"retire\": [\"nobody\"]}"), T0 + 120, NULL, NULL),
             PKI_RESULT_KEYRING_RETIRE);
  /* The grace ends: the old key is removed, its tokens rejected. */
  CHECK_OK(ring_step(store, NULL, 0, T0 + 60 + HOUR, &changed, &next_check));
  CHECK(changed && next_check == T0 + 60 + 30 * DAY);
  pem = export_text(store, PKI_KEYRING_PUBLIC_PEM);
  CHECK(pem != NULL && strstr(strstr(pem, "BEGIN PUBLIC KEY") + 1, "BEGIN PUBLIC KEY") == NULL);
  free(pem);
  jwks = export_text(store, PKI_KEYRING_JWKS);
  CHECK(jwks != NULL && strstr(jwks, first) == NULL);
  free(jwks);
  CHECK_CODE(pki_keyring_verify(store, LIT("keys"), pki_buffer_data(token).data,
                                pki_buffer_data(token).len, T0 + 60 + HOUR),
             PKI_RESULT_TOKEN_UNKNOWN_KID);
  /* A copy made from the saved state reads like the store; the status
   * names the forced reason. */
  CHECK_OK(pki_document_read(store, PKI_KIND_KEYRING, LIT("keys"), PKI_KEYRING_STATE, T0, &state));
  text_add(&input, LIT("{\"state\": "));
  text_add(&input, (const char *)pki_buffer_data(state).data, pki_buffer_data(state).len);
  text_add(&input, LIT("}"));
  CHECK_OK(pki_store_open(LIT("memory:"), NULL, 0, &copy));
  CHECK_OK(ring_create(copy, input.data, input.len));
  CHECK_CODE(pki_keyring_verify(copy, LIT("keys"), pki_buffer_data(token).data,
                                pki_buffer_data(token).len, T0 + 60 + HOUR),
             PKI_RESULT_TOKEN_UNKNOWN_KID);
  pki_store_free(copy);
  pki_buffer_free(state);
  text_free(&input);
  CHECK_OK(pki_document_read(store, PKI_KIND_KEYRING, LIT("keys"), PKI_KEYRING_STATUS, T0 + 2 * HOUR, &json));
  CHECK(json != NULL && contains(pki_buffer_data(json), "\"forced_reasons\":[\"drill\"]"));
  pki_buffer_free(json);
  pki_buffer_free(token);
  free(first);
  free(second);
}

/* ------------------------------------------------- a callback store */

/* The embedder's Secret storage: a few keys, each with a version. */
#define SLOTS 4
struct fake {
  char keys[SLOTS][64];
  pki_secret *data[SLOTS];
  unsigned long version[SLOTS];
  unsigned long counter;
  int releases;
  int forget;       /* acknowledge writes without keeping them */
  unsigned puts;    /* writes asked for */
};

static int slot_of(struct fake *f, const char *key, size_t key_len, int create) {
  int i;
  if (key_len >= 64) {
    return -1;
  }
  for (i = 0; i < SLOTS; i++) {
    if (f->data[i] != NULL && strlen(f->keys[i]) == key_len &&
        memcmp(f->keys[i], key, key_len) == 0) {
      return i;
    }
  }
  if (!create) {
    return -1;
  }
  for (i = 0; i < SLOTS; i++) {
    if (f->data[i] == NULL) {
      memcpy(f->keys[i], key, key_len);
      f->keys[i][key_len] = '\0';
      return i;
    }
  }
  return -1;
}

/* Answers with `data` (NULL for a put) and the revision `version`. */
static void set_revision(pki_store_reply *reply, const pki_secret *data, unsigned long version) {
  char rev[32];
  int n = snprintf(rev, sizeof rev, "%lu", version);
  pki_store_reply_set(reply, data, (const uint8_t *)rev, (size_t)n);
}

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

static uint32_t fake_get(void *user_data, const char *key, size_t key_len,
                         pki_store_reply *reply) {
  struct fake *f = (struct fake *)user_data;
  int i = slot_of(f, key, key_len, 0);
  if (i < 0) {
    return PKI_RESULT_OK; /* not found */
  }
  set_revision(reply, f->data[i], f->version[i]);
  return PKI_RESULT_OK;
}

static uint32_t fake_put(void *user_data, const char *key, size_t key_len,
                         const uint8_t *expected, size_t expected_len, const pki_secret *data,
                         pki_store_reply *reply) {
  struct fake *f = (struct fake *)user_data;
  int i = slot_of(f, key, key_len, expected == NULL);
  char current[32];
  int n;
  f->puts++;
  if (f->forget && i >= 0 && f->data[i] != NULL) {
    set_revision(reply, NULL, f->version[i]);
    return PKI_RESULT_OK;
  }
  if (i < 0) {
    return expected == NULL ? PKI_RESULT_UNEXPECTED : PKI_RESULT_CONFLICT;
  }
  if (f->data[i] != NULL) {
    n = snprintf(current, sizeof current, "%lu", f->version[i]);
    if (expected == NULL || expected_len != (size_t)n || memcmp(expected, current, (size_t)n)) {
      return PKI_RESULT_CONFLICT;
    }
    pki_secret_free(f->data[i]);
  }
  f->data[i] = copy_secret(data);
  f->version[i] = ++f->counter;
  set_revision(reply, NULL, f->version[i]);
  return PKI_RESULT_OK;
}

static void fake_release(void *user_data) { ((struct fake *)user_data)->releases++; }

static void callback_store(void) {
  struct fake f;
  pki_store_callbacks cb;
  pki_store *store = NULL;
  pki_bytes state;
  int i, slot;

  memset(&f, 0, sizeof f);
  memset(&cb, 0, sizeof cb);
  cb.get = fake_get;
  cb.put = fake_put;
  cb.release = fake_release;
  CHECK_OK(pki_store_new_callbacks(&cb, &f, &store));
  if (store == NULL) {
    return;
  }
  keyring_rotation(store, "callbacks");
  /* The ring is kept under "keys" with the key ring's Secret keys. */
  slot = slot_of(&f, LIT("keys"), 0);
  CHECK(slot >= 0);
  if (slot >= 0) {
    CHECK_OK(secret_get(f.data[slot], LIT("keys.key-ring.json"), &state));
    CHECK(contains(state, "\"kind\": \"key-ring\"") || contains(state, "\"kind\":\"key-ring\""));
    CHECK_OK(secret_get(f.data[slot], LIT("keys.jwks.json"), &state));
  }
  pki_store_free(store);
  CHECK(f.releases == 1);
  for (i = 0; i < SLOTS; i++) {
    pki_secret_free(f.data[i]);
  }
}

/* ------------------------------------------------- a directory store */

static char *read_file(const char *path) {
  FILE *fp = fopen(path, "rb");
  char *s;
  long n;
  if (fp == NULL) {
    return NULL;
  }
  fseek(fp, 0, SEEK_END);
  n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  s = malloc((size_t)n + 1);
  if (s == NULL || fread(s, 1, (size_t)n, fp) != (size_t)n) {
    fclose(fp);
    free(s);
    return NULL;
  }
  s[n] = '\0';
  fclose(fp);
  return s;
}

static void dir_store(const char *dir) {
  char path[1024], file[1100];
  pki_store *store = NULL;
  char *published, *exported;

  snprintf(path, sizeof path, "%s/ring", dir);
  CHECK_OK(pki_store_open(path, strlen(path), NULL, 0, &store));
  if (store == NULL) {
    return;
  }
  keyring_rotation(store, "a directory");
  snprintf(file, sizeof file, "%s/keys/jwks.json", path);
  published = read_file(file);
  exported = export_text(store, PKI_KEYRING_JWKS);
  CHECK(published != NULL && exported != NULL && strcmp(published, exported) == 0);
  free(published);
  free(exported);
  pki_store_free(store);
}

/* ------------------------------------------------- credentials */

struct action {
  pki_result result;
  uint32_t kind;
  uint64_t rotation;
  uint32_t attempt;
  int64_t wait_until;
  uint32_t wait_reason;
  char credential[64];
};

/* The step result's action kinds and wait reasons, as numbers. */
enum { ACTION_MINT = 1, ACTION_REVOKE, ACTION_WAIT, ACTION_REVOKE_STRAY };
enum { WAIT_EXPIRY = 1, WAIT_GRACE, WAIT_BACKOFF, WAIT_MINT_ELSEWHERE };

/* The number of `name` in `names` (1-based); 0 when absent. */
static uint32_t name_number(const char *name, const char *const *names, uint32_t n) {
  uint32_t i;
  for (i = 0; i < n; i++) {
    if (strcmp(name, names[i]) == 0) {
      return i + 1;
    }
  }
  return 0;
}

/* An advance of the credential "db" (`input` NULL, or with an owner). */
static struct action advance(const pki_store *store, const char *input, int64_t now) {
  struct action a;
  static const char *const kinds[] = {"mint", "revoke", "wait", "revoke_stray"};
  static const char *const reasons[] = {"expiry", "grace", "backoff", "mint_elsewhere"};
  pki_buffer *step = NULL;
  step_action_t action;
  memset(&a, 0, sizeof a);
  a.result = pki_document_step(store, PKI_KIND_CRED, LIT("db"), input, input ? strlen(input) : 0, now, &step);
  if (a.result != PKI_RESULT_OK) {
    return a;
  }
  CHECK(step_action(step, &action));
  a.kind = name_number(action.kind, kinds, 4);
  a.rotation = action.rotation;
  a.attempt = action.attempt;
  a.wait_until = step_next_wake(step);
  a.wait_reason = name_number(action.wait_reason, reasons, 4);
  if (action.credential_len > 0 && action.credential_len < sizeof a.credential) {
    memcpy(a.credential, action.credential, action.credential_len);
  }
  CHECK(a.kind != 0);
  pki_buffer_free(step);
  return a;
}

static struct action next(const pki_store *store, int64_t now) {
  struct action a = advance(store, NULL, now);
  CHECK_OK(a.result);
  return a;
}

static struct action next_as(const pki_store *store, const char *owner, int64_t now) {
  char input[256];
  struct action a;
  snprintf(input, sizeof input, "{\"advance\": {\"owner\": \"%s\"}}", owner);
  a = advance(store, input, now);
  CHECK_OK(a.result);
  return a;
}

/* A report (JSON text) about the credential "db"; the step is a report's:
 * no action. */
static pki_result report(const pki_store *store, const char *input, int64_t now) {
  pki_buffer *step = NULL;
  step_action_t action;
  pki_result r = pki_document_step(store, PKI_KIND_CRED, LIT("db"), input, strlen(input), now, &step);
  if (r == PKI_RESULT_OK) {
    CHECK(!step_action(step, &action));
  }
  pki_buffer_free(step);
  return r;
}

static pki_result cred_create(const pki_store *store, const char *name, const char *input) {
  pki_buffer *step = NULL;
  pki_result r = pki_document_create(store, PKI_KIND_CRED, name, strlen(name), input, strlen(input), T0, &step);
  pki_buffer_free(step);
  return r;
}

static void credentials(void) {
  pki_store *store = NULL;
  pki_buffer *json = NULL, *current = NULL;
  pki_buffer *step = NULL;
  struct action a;

  CHECK_OK(pki_store_open(LIT("memory:"), NULL, 0, &store));
  if (store == NULL) {
    return;
  }
  CHECK_CODE(cred_create(store, "db", "{\"expire_seconds\": 3600, \"grace_seconds\": 3600}"),
             PKI_RESULT_INVALID_CREDENTIAL_POLICY);
  CHECK_CODE(cred_create(store, "No/Such", "{\"expire_seconds\": 3600, \"grace_seconds\": 60}"),
             PKI_RESULT_INVALID_CREDENTIAL_NAME);
  CHECK_CODE(pki_document_step(store, PKI_KIND_CRED, LIT("db"), NULL, 0, T0, &step), PKI_RESULT_NOT_INITIALIZED);
  CHECK(step == NULL);
  CHECK_OK(pki_document_create(store, PKI_KIND_CRED, LIT("db"), LIT("{\"expire_seconds\": 3600, \"grace_seconds\": 60}"),
                           T0, &step));
  /* A new credential: a mint is due at once. */
  CHECK(step_changed(step) && step_next_wake(step) == T0 &&
        strstr(step_status_at(step), "\"name\":\"db\"") != NULL);
  pki_buffer_free(step);
  CHECK_CODE(cred_create(store, "db", "{\"expire_seconds\": 3600, \"grace_seconds\": 60}"),
             PKI_RESULT_ALREADY_INITIALIZED);

  a = next(store, T0);
  CHECK(a.kind == ACTION_MINT && a.rotation == 1 && a.attempt == 1);
  /* The mint made "user-1:pw", then timed out: it must be revoked. */
  CHECK_OK(report(store,
                  "{\"mint_failed\": {\"rotation\": 1, \"attempt\": 1, \"message\": \"timed out\", "
                  "\"captured\": \"user-1:pw\\n\"}}",
                  T0));
  a = next(store, T0 + 30);
  CHECK(a.kind == ACTION_REVOKE_STRAY && a.rotation == 1 && a.attempt == 1 &&
        strcmp(a.credential, "user-1:pw") == 0);
  CHECK_OK(pki_document_read(store, PKI_KIND_CRED, LIT("db"), PKI_CRED_STATUS, T0 + 30, &json));
  CHECK(json != NULL && contains(pki_buffer_data(json), "\"strays\":[{\"rotation\":1") &&
        !contains(pki_buffer_data(json), "user-1"));
  pki_buffer_free(json);
  CHECK_OK(report(store, "{\"stray_revoked\": {\"rotation\": 1, \"attempt\": 1}}", T0 + 30));
  a = next(store, T0 + 30);
  CHECK(a.kind == ACTION_MINT && a.attempt == 2);
  /* A report of an attempt that never started is refused; a late report of
   * attempt 1 (another replica's mint, reported after the document moved
   * on) is kept as a stray and revoked: never dropped. */
  CHECK_CODE(report(store, "{\"minted\": {\"rotation\": 1, \"attempt\": 9, \"credential\": \"x\"}}",
                    T0 + 30),
             PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT);
  CHECK_OK(report(store, "{\"minted\": {\"rotation\": 1, \"attempt\": 1, \"credential\": \"x\"}}",
                  T0 + 30));
  CHECK_OK(report(store,
                  "{\"minted\": {\"rotation\": 1, \"attempt\": 2, \"credential\": \"user-2:pw\"}}",
                  T0 + 30));
  a = next(store, T0 + 30);
  CHECK(a.kind == ACTION_REVOKE_STRAY && a.rotation == 1 && a.attempt == 1 &&
        strcmp(a.credential, "x") == 0);
  CHECK_OK(report(store, "{\"stray_revoked\": {\"rotation\": 1, \"attempt\": 1}}", T0 + 30));
  CHECK_CODE(pki_document_read(store, PKI_KIND_CRED, LIT("db"), PKI_CRED_CURRENT, T0, NULL),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_OK(pki_document_read(store, PKI_KIND_CRED, LIT("db"), PKI_CRED_CURRENT, T0, &current));
  CHECK(current != NULL && pki_buffer_data(current).len == 9);
  pki_buffer_free(current);

  /* One rotation: mint, grace, revoke of the old one. */
  a = next(store, T0 + 30 + HOUR);
  CHECK(a.kind == ACTION_MINT && a.rotation == 2 && a.attempt == 1);
  CHECK_OK(report(store,
                  "{\"minted\": {\"rotation\": 2, \"attempt\": 1, \"credential\": \"user-3:pw\"}}",
                  T0 + 30 + HOUR));
  a = next(store, T0 + 30 + HOUR);
  CHECK(a.kind == ACTION_WAIT && a.wait_until == T0 + 90 + HOUR &&
        a.wait_reason == WAIT_GRACE);
  a = next(store, T0 + 90 + HOUR);
  CHECK(a.kind == ACTION_REVOKE && a.rotation == 1 &&
        strcmp(a.credential, "user-2:pw") == 0);
  CHECK_CODE(report(store, "{\"revoked\": {\"rotation\": 2}}", T0 + 90 + HOUR),
             PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT);
  CHECK_OK(report(store, "{\"revoked\": {\"rotation\": 1}}", T0 + 90 + HOUR));
  a = next(store, T0 + 90 + HOUR);
  CHECK(a.kind == ACTION_WAIT && a.wait_until == T0 + 30 + 2 * HOUR &&
        a.wait_reason == WAIT_EXPIRY);

  /* Two replicas with owners: the one that records the attempt mints it;
   * the other waits, and so does a caller without an owner. */
  a = next_as(store, "replica-a", T0 + 30 + 2 * HOUR);
  CHECK(a.kind == ACTION_MINT && a.rotation == 3 && a.wait_reason == 0);
  a = next_as(store, "replica-b", T0 + 30 + 2 * HOUR);
  CHECK(a.kind == ACTION_WAIT && a.wait_reason == WAIT_MINT_ELSEWHERE);
  a = next(store, T0 + 30 + 2 * HOUR);
  CHECK(a.kind == ACTION_WAIT && a.wait_reason == WAIT_MINT_ELSEWHERE);
  step = NULL;
  CHECK_CODE(pki_document_step(store, PKI_KIND_CRED, LIT("db"), LIT("{\"advance\": {\"owner\": \"no spaces\"}}"), T0,
                           &step),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK(step == NULL);

  /* Bad input: codes, no crash, nothing recorded. */
  CHECK_CODE(pki_document_step(NULL, PKI_KIND_CRED, LIT("db"),
                           LIT("{\"mint_failed\": {\"rotation\": 3, \"attempt\": 1, \"message\": \"x\"}}"),
                           T0, &step),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(report(store,
                    "{\"mint_failed\": {\"rotation\": 3, \"attempt\": 1, \"message\": \"\xff\"}}",
                    T0),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(report(store,
                    "{\"stray_revoke_failed\": {\"rotation\": 7, \"attempt\": 1, \"message\": \"x\"}}",
                    T0),
             PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT);
  CHECK_CODE(pki_document_step(store, PKI_KIND_CRED, NULL, 2, LIT("{\"stray_revoked\": {\"rotation\": 1, \"attempt\": 1}}"),
                           T0, &step),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_document_step(store, PKI_KIND_CRED, LIT("db"), NULL, 0, T0, NULL),
             PKI_RESULT_NULL_PARAMETER);
  pki_buffer_free(NULL);
  pki_store_free(store);
}

/* An advance on a store that acknowledges writes and keeps none: a step
 * is due again after each; it stops after PKI_CRED_ADVANCE_MAX_STEPS
 * writes, the bound the CLI's reconcile has too (one advance). */
static void credential_bound(void) {
  struct fake f;
  pki_store_callbacks cb;
  pki_store *store = NULL;
  pki_buffer *step = NULL;
  int i;

  memset(&f, 0, sizeof f);
  memset(&cb, 0, sizeof cb);
  cb.get = fake_get;
  cb.put = fake_put;
  CHECK_OK(pki_store_new_callbacks(&cb, &f, &store));
  if (store == NULL) {
    return;
  }
  CHECK_OK(cred_create(store, "db", "{\"expire_seconds\": 3600, \"grace_seconds\": 60}"));
  CHECK(next(store, T0).kind == ACTION_MINT);
  CHECK_OK(report(store,
                  "{\"minted\": {\"rotation\": 1, \"attempt\": 1, \"credential\": \"user-1:pw\"}}",
                  T0));
  /* Due: keep as old, then record the mint; each write is lost, so keeping
   * as old is due again and again. */
  f.forget = 1;
  f.puts = 0;
  CHECK_CODE(pki_document_step(store, PKI_KIND_CRED, LIT("db"), NULL, 0, T0 + HOUR, &step), PKI_RESULT_UNEXPECTED);
  CHECK(step == NULL);
  CHECK(f.puts == PKI_CRED_ADVANCE_MAX_STEPS);
  pki_store_free(store);
  for (i = 0; i < SLOTS; i++) {
    pki_secret_free(f.data[i]);
  }
}

/* ------------------------------------------------- bad key ring input */

static void keyring_misuse(void) {
  pki_store *store = NULL;
  pki_buffer *buf = NULL;
  pki_buffer *step = NULL;
  bool changed = true;
  int64_t next_check = 42;

  CHECK_CODE(pki_document_create(NULL, PKI_KIND_KEYRING, LIT("keys"), NULL, 0, T0, &step), PKI_RESULT_NULL_PARAMETER);
  CHECK_OK(pki_store_open(LIT("memory:"), NULL, 0, &store));
  if (store == NULL) {
    return;
  }
  CHECK_CODE(ring_create(store, LIT("{\"policy\": {\"grace_seconds\": 0}}")),
             PKI_RESULT_KEYRING_POLICY);
  CHECK_CODE(ring_create(store, LIT("{\"policy\": {\"key_type\": \"p99\"}}")),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(ring_create(store, LIT("{\"policy\": {\"key_type\": \"p384\"}}")),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(ring_create(store, LIT("{\"import\": \"not a key\"}")), PKI_RESULT_KEYRING_IMPORT);
  CHECK_CODE(pki_document_create(store, PKI_KIND_KEYRING, NULL, 4, NULL, 0, T0, &step), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_document_read(store, PKI_KIND_KEYRING, LIT("keys"), PKI_KEYRING_STATE, T0, &buf),
             PKI_RESULT_NOT_INITIALIZED);
  CHECK(buf == NULL && step == NULL);
  CHECK_OK(ring_create(store, NULL, 0));
  CHECK_CODE(ring_step(store, LIT("{\"forced\": \"\"}"), T0, &changed, &next_check),
             PKI_RESULT_EMPTY_FORCED_REASON);
  CHECK_CODE(ring_step(store, LIT("{\"forced\": \"\xff\"}"), T0, &changed, &next_check),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(ring_step(store, NULL, 0, T0 - 1, &changed, &next_check),
             PKI_RESULT_KEYRING_CLOCK_BEHIND);
  CHECK(changed && next_check == 42); /* outputs untouched on failure */
  CHECK_CODE(pki_document_step(store, PKI_KIND_KEYRING, LIT("keys"), NULL, 0, T0, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_document_read(store, PKI_KIND_KEYRING, LIT("keys"), 99, T0, &buf), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_document_read(store, PKI_KIND_KEYRING, LIT("keys"), PKI_KEYRING_JWKS, T0, NULL),
             PKI_RESULT_NULL_PARAMETER);
  CHECK(buf == NULL);
  CHECK_CODE(pki_keyring_sign(store, LIT("keys"), BLIT("[1]"), T0, &buf),
             PKI_RESULT_TOKEN_MALFORMED);
  CHECK_CODE(pki_keyring_sign(store, LIT("keys"), BLIT("{}"), T0 - 1, &buf),
             PKI_RESULT_KEYRING_CLOCK_BEHIND);
  CHECK(buf == NULL);
  CHECK_CODE(pki_keyring_verify(store, LIT("keys"), BLIT("a.b"), T0), PKI_RESULT_TOKEN_MALFORMED);
  CHECK_CODE(pki_keyring_verify(store, LIT("keys"), NULL, 0, T0), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_document_read(store, PKI_KIND_KEYRING, LIT("keys"), PKI_KEYRING_STATUS, T0, NULL),
             PKI_RESULT_NULL_PARAMETER);
  pki_store_free(store);
}

int main(int argc, char **argv) {
  pki_store *memory = NULL;
  if (argc != 2) {
    fprintf(stderr, "usage: keys_cred DIR\n");
    return 2;
  }
  CHECK_OK(pki_store_open(LIT("memory:"), NULL, 0, &memory));
  if (memory != NULL) {
    keyring_rotation(memory, "memory");
    pki_store_free(memory);
  }
  callback_store();
  dir_store(argv[1]);
  credentials();
  credential_bound();
  keyring_misuse();
  return check_summary("keys_cred");
}
