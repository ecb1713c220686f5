/*
 * Key rings and credentials kept in a store, through the C API: a short
 * key ring rotation (sign, force, grace, removal) on a memory store, a
 * directory store whose published jwks.json matches what the API reads,
 * and the embedder's Secret-shaped storage through callbacks; a credential
 * rotation whose failed mint returned a credential (revoked before the
 * retry), a late mint report kept as a stray, owners that keep replicas
 * from minting one attempt twice, and the one bound of `pki_cred_next`
 * on a store that loses its writes; and bad input of every kind, answered
 * with a code, never a crash.
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
  CHECK_OK(pki_keyring_store_export(store, output, &buf));
  if (buf == NULL) {
    return NULL;
  }
  s = text_of(buf);
  pki_buffer_free(buf);
  return s;
}

/* A key ring through one rotation on `store`; `label` names the store. */
static void keyring_rotation(const pki_store *store, const char *label) {
  pki_keyring_policy policy = pki_keyring_policy_default();
  pki_buffer *token = NULL, *json = NULL;
  pki_keyring *snapshot = NULL;
  char *first, *second, *jwks, *pem;
  bool changed = false;
  int64_t next_check = 0;

  printf("key ring on %s\n", label);
  policy.grace_seconds = HOUR;
  policy.lifetime_seconds = 30 * DAY;
  CHECK_CODE(pki_keyring_store_export(store, PKI_KEYRING_JWKS, &token),
             PKI_RESULT_NOT_INITIALIZED);
  CHECK(token == NULL);
  CHECK_CODE(pki_keyring_store_rotate(store, NULL, 0, NULL, 0, T0, &changed, &next_check),
             PKI_RESULT_NOT_INITIALIZED);
  CHECK_OK(pki_keyring_store_create(store, &policy, T0));
  CHECK_CODE(pki_keyring_store_create(store, &policy, T0), PKI_RESULT_ALREADY_INITIALIZED);
  first = export_text(store, PKI_KEYRING_ACTIVE_KID);
  CHECK_OK(pki_keyring_store_sign(store, BLIT("{\"sub\":\"a\"}"), T0, &token));
  if (token == NULL || first == NULL) {
    free(first);
    return;
  }
  CHECK_OK(pki_keyring_store_verify(store, pki_buffer_data(token).data,
                                    pki_buffer_data(token).len, T0));

  /* Nothing due: unchanged, next check at the end of the lifetime. */
  CHECK_OK(pki_keyring_store_rotate(store, NULL, 0, NULL, 0, T0 + 60, &changed, &next_check));
  CHECK(!changed && next_check == T0 + 30 * DAY);
  /* Forced once per reason; the old key stays accepted for the grace. */
  CHECK_OK(pki_keyring_store_rotate(store, LIT("drill"), NULL, 0, T0 + 60, &changed,
                                    &next_check));
  CHECK(changed && next_check == T0 + 60 + HOUR);
  CHECK_OK(pki_keyring_store_rotate(store, LIT("drill"), NULL, 0, T0 + 120, &changed, NULL));
  CHECK(!changed);
  second = export_text(store, PKI_KEYRING_ACTIVE_KID);
  CHECK(second != NULL && strcmp(first, second) != 0);
  jwks = export_text(store, PKI_KEYRING_JWKS);
  CHECK(jwks != NULL && strstr(jwks, first) != NULL && strstr(jwks, second) != NULL);
  free(jwks);
  CHECK_OK(pki_keyring_store_verify(store, pki_buffer_data(token).data,
                                    pki_buffer_data(token).len, T0 + 60 + HOUR - 1));
  /* Retiring a key in its grace, or an unknown one, is refused. */
  CHECK_CODE(pki_keyring_store_rotate(store, NULL, 0, first, strlen(first), T0 + 120, NULL, NULL),
             PKI_RESULT_KEYRING_RETIRE);
  CHECK_CODE(pki_keyring_store_rotate(store, NULL, 0, LIT("nobody"), T0 + 120, NULL, NULL),
             PKI_RESULT_KEYRING_RETIRE);
  /* The grace ends: the old key is removed, its tokens rejected. */
  CHECK_OK(pki_keyring_store_rotate(store, NULL, 0, NULL, 0, T0 + 60 + HOUR, &changed,
                                    &next_check));
  CHECK(changed && next_check == T0 + 60 + 30 * DAY);
  pem = export_text(store, PKI_KEYRING_PUBLIC_PEM);
  CHECK(pem != NULL && strstr(strstr(pem, "BEGIN PUBLIC KEY") + 1, "BEGIN PUBLIC KEY") == NULL);
  free(pem);
  jwks = export_text(store, PKI_KEYRING_JWKS);
  CHECK(jwks != NULL && strstr(jwks, first) == NULL);
  free(jwks);
  CHECK_CODE(pki_keyring_store_verify(store, pki_buffer_data(token).data,
                                      pki_buffer_data(token).len, T0 + 60 + HOUR),
             PKI_RESULT_TOKEN_UNKNOWN_KID);
  /* A snapshot reads like the store; the status names the forced reason. */
  CHECK_OK(pki_keyring_store_load(store, &snapshot));
  CHECK_CODE(pki_keyring_verify(snapshot, pki_buffer_data(token).data,
                                pki_buffer_data(token).len, T0 + 60 + HOUR),
             PKI_RESULT_TOKEN_UNKNOWN_KID);
  pki_keyring_free(snapshot);
  CHECK_OK(pki_keyring_store_status_json(store, T0 + 2 * HOUR, &json));
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

static void set_revision(pki_store_reply *reply, unsigned long version) {
  char text[32];
  int n = snprintf(text, sizeof text, "%lu", version);
  pki_store_reply_set_revision(reply, (const uint8_t *)text, (size_t)n);
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
  pki_store_reply_set_data(reply, f->data[i]);
  set_revision(reply, f->version[i]);
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
    set_revision(reply, f->version[i]);
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
  set_revision(reply, f->version[i]);
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
    CHECK_OK(pki_secret_get(f.data[slot], LIT("keys.key-ring.json"), &state));
    CHECK(contains(state, "\"kind\": \"key-ring\"") || contains(state, "\"kind\":\"key-ring\""));
    CHECK_OK(pki_secret_get(f.data[slot], LIT("keys.jwks.json"), &state));
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
  CHECK_OK(pki_store_open_dir(path, strlen(path), &store));
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
  uint32_t kind;
  uint64_t rotation;
  uint32_t attempt;
  int64_t wait_until;
  uint32_t wait_reason;
  char credential[64];
};

static struct action action_of(pki_cred_action *action) {
  struct action a;
  pki_bytes c;
  memset(&a, 0, sizeof a);
  if (action == NULL) {
    return a;
  }
  a.kind = pki_cred_action_kind(action);
  a.rotation = pki_cred_action_rotation(action);
  a.attempt = pki_cred_action_attempt(action);
  a.wait_until = pki_cred_action_wait_until(action);
  a.wait_reason = pki_cred_action_wait_reason(action);
  CHECK(pki_cred_action_next_wake(action) == a.wait_until);
  c = pki_cred_action_credential(action);
  if (c.len > 0 && c.len < sizeof a.credential) {
    memcpy(a.credential, c.data, c.len);
  }
  pki_cred_action_free(action);
  return a;
}

static struct action next(const pki_store *store, int64_t now) {
  pki_cred_action *action = NULL;
  CHECK_OK(pki_cred_next(store, LIT("db"), now, &action));
  return action_of(action);
}

static struct action next_as(const pki_store *store, const char *owner, int64_t now) {
  pki_cred_action *action = NULL;
  CHECK_OK(pki_cred_next_as(store, LIT("db"), owner, strlen(owner), now, &action));
  return action_of(action);
}

static void credentials(void) {
  pki_store *store = NULL;
  pki_buffer *json = NULL, *current = NULL;
  pki_cred_action *action = NULL;
  struct action a;

  CHECK_OK(pki_store_new_memory(&store));
  if (store == NULL) {
    return;
  }
  CHECK_CODE(pki_cred_create(store, LIT("db"), HOUR, HOUR), PKI_RESULT_INVALID_CREDENTIAL_POLICY);
  CHECK_CODE(pki_cred_create(store, LIT("No/Such"), HOUR, 60),
             PKI_RESULT_INVALID_CREDENTIAL_NAME);
  CHECK_CODE(pki_cred_next(store, LIT("db"), T0, &action), PKI_RESULT_NOT_INITIALIZED);
  CHECK(action == NULL);
  CHECK_OK(pki_cred_create(store, LIT("db"), HOUR, 60));
  CHECK_CODE(pki_cred_create(store, LIT("db"), HOUR, 60), PKI_RESULT_ALREADY_INITIALIZED);

  a = next(store, T0);
  CHECK(a.kind == PKI_CRED_ACTION_MINT && a.rotation == 1 && a.attempt == 1);
  /* The mint made "user-1:pw", then timed out: it must be revoked. */
  CHECK_OK(pki_cred_report_mint_failed_captured(store, LIT("db"), 1, 1, LIT("timed out"),
                                                BLIT("user-1:pw\n"), T0));
  a = next(store, T0 + 30);
  CHECK(a.kind == PKI_CRED_ACTION_REVOKE_STRAY && a.rotation == 1 && a.attempt == 1 &&
        strcmp(a.credential, "user-1:pw") == 0);
  CHECK_OK(pki_cred_status_json(store, LIT("db"), T0 + 30, &json));
  CHECK(json != NULL && contains(pki_buffer_data(json), "\"strays\":[{\"rotation\":1") &&
        !contains(pki_buffer_data(json), "user-1"));
  pki_buffer_free(json);
  CHECK_OK(pki_cred_report_stray_revoked(store, LIT("db"), 1, 1, T0 + 30));
  a = next(store, T0 + 30);
  CHECK(a.kind == PKI_CRED_ACTION_MINT && a.attempt == 2);
  /* A report of an attempt that never started is refused; a late report of
   * attempt 1 (another replica's mint, reported after the document moved
   * on) is kept as a stray and revoked: never dropped. */
  CHECK_CODE(pki_cred_report_minted(store, LIT("db"), 1, 9, BLIT("x"), T0 + 30),
             PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT);
  CHECK_OK(pki_cred_report_minted(store, LIT("db"), 1, 1, BLIT("x"), T0 + 30));
  CHECK_OK(pki_cred_report_minted(store, LIT("db"), 1, 2, BLIT("user-2:pw"), T0 + 30));
  a = next(store, T0 + 30);
  CHECK(a.kind == PKI_CRED_ACTION_REVOKE_STRAY && a.rotation == 1 && a.attempt == 1 &&
        strcmp(a.credential, "x") == 0);
  CHECK_OK(pki_cred_report_stray_revoked(store, LIT("db"), 1, 1, T0 + 30));
  CHECK_CODE(pki_cred_current(store, LIT("db"), NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_OK(pki_cred_current(store, LIT("db"), &current));
  CHECK(current != NULL && pki_buffer_data(current).len == 9);
  pki_buffer_free(current);

  /* One rotation: mint, grace, revoke of the old one. */
  a = next(store, T0 + 30 + HOUR);
  CHECK(a.kind == PKI_CRED_ACTION_MINT && a.rotation == 2 && a.attempt == 1);
  CHECK_OK(pki_cred_report_minted(store, LIT("db"), 2, 1, BLIT("user-3:pw"), T0 + 30 + HOUR));
  a = next(store, T0 + 30 + HOUR);
  CHECK(a.kind == PKI_CRED_ACTION_WAIT && a.wait_until == T0 + 90 + HOUR &&
        a.wait_reason == PKI_CRED_WAIT_GRACE);
  a = next(store, T0 + 90 + HOUR);
  CHECK(a.kind == PKI_CRED_ACTION_REVOKE && a.rotation == 1 &&
        strcmp(a.credential, "user-2:pw") == 0);
  CHECK_CODE(pki_cred_report_revoked(store, LIT("db"), 2, T0 + 90 + HOUR),
             PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT);
  CHECK_OK(pki_cred_report_revoked(store, LIT("db"), 1, T0 + 90 + HOUR));
  a = next(store, T0 + 90 + HOUR);
  CHECK(a.kind == PKI_CRED_ACTION_WAIT && a.wait_until == T0 + 30 + 2 * HOUR &&
        a.wait_reason == PKI_CRED_WAIT_EXPIRY);

  /* Two replicas with owners: the one that records the attempt mints it;
   * the other waits, and so does a caller without an owner. */
  a = next_as(store, "replica-a", T0 + 30 + 2 * HOUR);
  CHECK(a.kind == PKI_CRED_ACTION_MINT && a.rotation == 3 && a.wait_reason == 0);
  a = next_as(store, "replica-b", T0 + 30 + 2 * HOUR);
  CHECK(a.kind == PKI_CRED_ACTION_WAIT && a.wait_reason == PKI_CRED_WAIT_MINT_ELSEWHERE);
  a = next(store, T0 + 30 + 2 * HOUR);
  CHECK(a.kind == PKI_CRED_ACTION_WAIT && a.wait_reason == PKI_CRED_WAIT_MINT_ELSEWHERE);
  CHECK_CODE(pki_cred_next_as(store, LIT("db"), LIT("no spaces"), T0, &action),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK(action == NULL);

  /* Bad input: codes, no crash, nothing recorded. */
  CHECK_CODE(pki_cred_report_mint_failed_captured(NULL, LIT("db"), 3, 1, LIT("x"), NULL, 0, T0),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_cred_report_mint_failed_captured(store, LIT("db"), 3, 1, "\xff", 1, NULL, 0, T0),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_cred_report_stray_revoke_failed(store, LIT("db"), 7, 1, LIT("x"), T0),
             PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT);
  CHECK_CODE(pki_cred_report_stray_revoked(store, NULL, 2, 1, 1, T0), PKI_RESULT_NULL_PARAMETER);
  CHECK(pki_cred_action_kind(NULL) == 0 && pki_cred_action_credential(NULL).len == 0);
  CHECK(pki_cred_action_next_wake(NULL) == 0 && pki_cred_action_wait_reason(NULL) == 0);
  pki_cred_action_free(NULL);
  pki_store_free(store);
}

/* pki_cred_next on a store that acknowledges writes and keeps none: a step
 * is due again after each; it stops after PKI_CRED_ADVANCE_MAX_STEPS
 * writes, the bound the CLI's reconcile has too (one advance). */
static void credential_bound(void) {
  struct fake f;
  pki_store_callbacks cb;
  pki_store *store = NULL;
  pki_cred_action *action = NULL;
  int i;

  memset(&f, 0, sizeof f);
  memset(&cb, 0, sizeof cb);
  cb.get = fake_get;
  cb.put = fake_put;
  CHECK_OK(pki_store_new_callbacks(&cb, &f, &store));
  if (store == NULL) {
    return;
  }
  CHECK_OK(pki_cred_create(store, LIT("db"), HOUR, 60));
  CHECK(next(store, T0).kind == PKI_CRED_ACTION_MINT);
  CHECK_OK(pki_cred_report_minted(store, LIT("db"), 1, 1, BLIT("user-1:pw"), T0));
  /* Due: keep as old, then record the mint; each write is lost, so keeping
   * as old is due again and again. */
  f.forget = 1;
  f.puts = 0;
  CHECK_CODE(pki_cred_next(store, LIT("db"), T0 + HOUR, &action), PKI_RESULT_UNEXPECTED);
  CHECK(action == NULL);
  CHECK(f.puts == PKI_CRED_ADVANCE_MAX_STEPS);
  pki_store_free(store);
  for (i = 0; i < SLOTS; i++) {
    pki_secret_free(f.data[i]);
  }
}

/* ------------------------------------------------- bad key ring input */

static void keyring_misuse(void) {
  pki_store *store = NULL;
  pki_keyring_policy policy = pki_keyring_policy_default();
  pki_buffer *buf = NULL;
  pki_keyring *ring = NULL;
  bool changed = true;
  int64_t next_check = 42;

  CHECK_CODE(pki_keyring_store_create(NULL, NULL, T0), PKI_RESULT_NULL_PARAMETER);
  CHECK_OK(pki_store_new_memory(&store));
  if (store == NULL) {
    return;
  }
  policy.grace_seconds = 0;
  CHECK_CODE(pki_keyring_store_create(store, &policy, T0), PKI_RESULT_KEYRING_POLICY);
  policy = pki_keyring_policy_default();
  policy.key_type = 99;
  CHECK_CODE(pki_keyring_store_create(store, &policy, T0), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_keyring_store_import(store, BLIT("not a key"), NULL, T0),
             PKI_RESULT_KEYRING_IMPORT);
  CHECK_CODE(pki_keyring_store_import(store, NULL, 0, NULL, T0), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_keyring_store_load(store, &ring), PKI_RESULT_NOT_INITIALIZED);
  CHECK(ring == NULL);
  CHECK_OK(pki_keyring_store_create(store, NULL, T0));
  CHECK_CODE(pki_keyring_store_rotate(store, LIT(""), NULL, 0, T0, &changed, &next_check),
             PKI_RESULT_EMPTY_FORCED_REASON);
  CHECK_CODE(pki_keyring_store_rotate(store, "\xff", 1, NULL, 0, T0, &changed, &next_check),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_keyring_store_rotate(store, NULL, 0, NULL, 0, T0 - 1, &changed, &next_check),
             PKI_RESULT_KEYRING_CLOCK_BEHIND);
  CHECK(changed && next_check == 42); /* outputs untouched on failure */
  CHECK_CODE(pki_keyring_store_export(store, 99, &buf), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_keyring_store_export(store, PKI_KEYRING_JWKS, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK(buf == NULL);
  CHECK_CODE(pki_keyring_store_sign(store, BLIT("[1]"), T0, &buf), PKI_RESULT_TOKEN_MALFORMED);
  CHECK_CODE(pki_keyring_store_sign(store, BLIT("{}"), T0 - 1, &buf),
             PKI_RESULT_KEYRING_CLOCK_BEHIND);
  CHECK(buf == NULL);
  CHECK_CODE(pki_keyring_store_verify(store, BLIT("a.b"), T0), PKI_RESULT_TOKEN_MALFORMED);
  CHECK_CODE(pki_keyring_store_verify(store, NULL, 0, T0), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_keyring_store_status_json(store, T0, NULL), PKI_RESULT_NULL_PARAMETER);
  pki_store_free(store);
}

int main(int argc, char **argv) {
  pki_store *memory = NULL;
  if (argc != 2) {
    fprintf(stderr, "usage: keys_cred DIR\n");
    return 2;
  }
  CHECK_OK(pki_store_new_memory(&memory));
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
