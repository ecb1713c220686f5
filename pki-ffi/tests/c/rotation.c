/*
 * A full rotation through the C API: create a signer in a memory store,
 * issue a serving certificate, save and load the state (bytes and
 * Secret-shaped blobs, then a new store created from the loaded state),
 * rotate automatically and then by force, re-issue the leaf, and check every
 * served chain (old/new) against every client bundle (old/new) with
 * pki_verify_chain and with `openssl verify`.
 *
 * Usage: rotation DIR   (DIR: a writable directory for the PEM files)
 */
#include "check.h"

/* 2026-01-01T00:00:00Z */
#define T0 ((int64_t)1767225600)
#define DAY ((int64_t)86400)
#define HOST "web.ns.svc"

static const char *dir;

static void stop_if_failed(void) {
  if (check_failures > 0) {
    fprintf(stderr, "stopping after the first failures\n");
    exit(check_summary("rotation"));
  }
}

/* The store the signer is kept in: a memory store, replaced by a new one
 * created from the round-tripped state (see round_trip). */
static pki_store *store;

/* Steps the signer in the store (freeing the old handle) and checks the
 * events and the exact time to step again; returns the signer now stored. */
static pki_signer *reconcile(pki_signer *signer, int64_t now, const char *forced,
                             size_t want_events, int64_t want_next_check,
                             int64_t *trusted_until) {
  pki_signer *next = NULL;
  pki_buffer *step = NULL;
  step_event_t ev;
  int64_t next_check;
  text input = {0};
  size_t i;
  if (forced != NULL) {
    /* A second rotation within M of the first breaks trust for clients
     * that still hold the bundle of two rotations ago: this drill says so. */
    text_add(&input, LIT("{\"forced\": {\"reason\": "));
    text_json(&input, forced, strlen(forced));
    text_add(&input, LIT("}, \"allow_trust_break\": \"drill\"}"));
  }
  CHECK_OK(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), input.data, input.len, now, &step));
  text_free(&input);
  stop_if_failed();
  next_check = step_next_wake(step);
  if (next_check != want_next_check) {
    fprintf(stderr, "next check at +%llds, want +%llds\n", (long long)(next_check - T0),
            (long long)(want_next_check - T0));
  }
  CHECK(next_check == want_next_check);
  CHECK(step_events(step) == want_events);
  for (i = 0; i < step_events(step); i++) {
    CHECK(step_event(step, i, &ev));
    printf("event at +%lldd: %s\n", (long long)((now - T0) / DAY), ev.message);
    CHECK(strlen(ev.message) > 0);
    if (strcmp(ev.kind, "rotated") == 0 && trusted_until != NULL) {
      CHECK(strstr(ev.json, "\"previous_trusted_until\":\"") != NULL);
      *trusted_until = json_time(ev.json, "previous_trusted_until");
    }
    free(ev.json);
  }
  /* Whether the step wrote: exactly when something happened. */
  CHECK(step_changed(step) == (want_events > 0));
  CHECK((next = stored_signer(store, "signer")) != NULL);
  pki_buffer_free(step);
  pki_signer_free(signer);
  return next;
}

/* The request of the leaf: a server certificate for HOST and 127.0.0.1. */
static const char req[] = "{\"kind\": \"server\", \"dns_names\": [\"" HOST
                          "\"], \"ip_addresses\": [\"127.0.0.1\"], "
                          "\"lifetime_seconds\": 31536000}";

/* Reconciles a leaf against the signer; `prev` may be NULL. */
static test_leaf *leaf_reconcile(const pki_signer *signer, int64_t now, const test_leaf *prev,
                                pki_leaf_reason want) {
  test_leaf *out = NULL;
  pki_bytes chain = leaf_chain_pem(prev);
  pki_bytes key = leaf_key_pem(prev);
  CHECK_OK(test_leaf_reconcile(signer, LIT(req), now, chain.data, chain.len, key.data,
                              key.len, &out));
  stop_if_failed();
  CHECK(leaf_reason_code(out) == want);
  printf("leaf at +%lldd: %s\n", (long long)((now - T0) / DAY),
         (const char *)leaf_reason_message(out).data);
  return out;
}

static size_t count_certs(pki_bytes pem) {
  size_t n = 0;
  const char *p = (const char *)pem.data;
  while ((p = strstr(p, "-----BEGIN CERTIFICATE-----")) != NULL) {
    n++;
    p++;
  }
  return n;
}

/* Writes the chain and bundle of one side to DIR/<side>-chain.pem and -bundle.pem. */
static void save_side(const char *side, const test_leaf *leaf, const pki_bundle *bundle) {
  char name[64];
  pki_buffer *pem = NULL;
  snprintf(name, sizeof name, "%s-chain.pem", side);
  CHECK(write_file(dir, name, leaf_chain_pem(leaf)) == 0);
  CHECK_OK(pki_bundle_export(bundle, PKI_BUNDLE_PEM, &pem));
  snprintf(name, sizeof name, "%s-bundle.pem", side);
  CHECK(write_file(dir, name, pki_buffer_data(pem)) == 0);
  pki_buffer_free(pem);
}

/* One cell of the trust matrix, by both verifiers. */
static void check_cell(const char *chain_side, const test_leaf *leaf,
                       const char *bundle_side, const pki_bundle *bundle, int64_t at) {
  pki_buffer *path = NULL;
  pki_bytes chain = leaf_chain_pem(leaf);
  char cmd[2048];
  int rc;
  pki_result r = pki_verify_chain(bundle, chain.data, chain.len, at,
                                  PKI_PURPOSE_SERVER_AUTH, LIT(HOST), &path);
  if (r != PKI_RESULT_OK) {
    fprintf(stderr, "%s chain x %s bundle at +%lldd:\n", chain_side, bundle_side,
            (long long)((at - T0) / DAY));
  }
  CHECK_OK(r);
  CHECK(count_certs(pki_buffer_data(path)) >= 2);
  pki_buffer_free(path);

  snprintf(cmd, sizeof cmd,
           "openssl verify -attime %lld -purpose sslserver -verify_hostname " HOST
           " -CAfile '%s/%s-bundle.pem' -untrusted '%s/%s-chain.pem' '%s/%s-chain.pem'"
           " > /dev/null",
           (long long)at, dir, bundle_side, dir, chain_side, dir, chain_side);
  rc = system(cmd);
  if (rc != 0) {
    fprintf(stderr, "openssl: %s chain x %s bundle at +%lldd failed: %s\n", chain_side,
            bundle_side, (long long)((at - T0) / DAY), cmd);
  }
  CHECK(rc == 0);
}

static void check_matrix(const test_leaf *old_leaf, const pki_bundle *old_bundle,
                         const test_leaf *new_leaf, const pki_bundle *new_bundle,
                         int64_t at) {
  save_side("old", old_leaf, old_bundle);
  save_side("new", new_leaf, new_bundle);
  check_cell("old", old_leaf, "old", old_bundle, at);
  check_cell("old", old_leaf, "new", new_bundle, at);
  check_cell("new", new_leaf, "old", old_bundle, at);
  check_cell("new", new_leaf, "new", new_bundle, at);
}

/* Saves as state bytes and as Secret-shaped blobs, loads both, and checks
 * that the three states are the same bytes; then keeps the signer loaded
 * from the Secret in a new memory store, created from its state. */
static pki_signer *round_trip(pki_signer *signer, int has_bridge) {
  pki_buffer *state = NULL, *state2 = NULL, *state3 = NULL;
  pki_signer *from_state = NULL, *from_secret = NULL, *stored = NULL;
  pki_secret *secret = NULL, *copy = NULL;
  pki_bytes value, key;
  pki_buffer *created = NULL;
  text input = {0};
  size_t i;

  CHECK_OK(pki_signer_to_state(signer, &state));
  CHECK_OK(pki_signer_from_state(pki_buffer_data(state).data, pki_buffer_data(state).len,
                                 &from_state));
  CHECK_OK(pki_signer_to_secret(from_state, &secret));
  CHECK_OK(secret_get(secret, LIT("tls.crt"), &value));
  CHECK_OK(secret_get(secret, LIT("tls.key"), &value));
  CHECK(strstr((const char *)value.data, "PRIVATE KEY") != NULL);
  CHECK_OK(secret_get(secret, LIT("ca-bundle.crt"), &value));
  CHECK_OK(secret_get(secret, LIT("pki-state.json"), &value));
  CHECK_CODE(secret_get(secret, LIT("intermediate-ca.crt"), &value),
             has_bridge ? PKI_RESULT_OK : PKI_RESULT_NOT_FOUND);

  /* Copy entry by entry, as a controller copies Secret.Data. */
  CHECK_OK(pki_secret_new(&copy));
  for (i = 0; i < pki_secret_len(secret); i++) {
    CHECK_OK(pki_secret_entry(secret, i, &key, &value));
    CHECK_OK(pki_secret_set(copy, (const char *)key.data, key.len, value.data, value.len));
  }
  CHECK(pki_secret_len(copy) == pki_secret_len(secret));
  CHECK_OK(pki_signer_from_secret(copy, &from_secret));
  stop_if_failed();

  CHECK_OK(pki_signer_to_state(from_state, &state2));
  CHECK_OK(pki_signer_to_state(from_secret, &state3));
  CHECK(pki_buffer_data(state).len == pki_buffer_data(state2).len &&
        memcmp(pki_buffer_data(state).data, pki_buffer_data(state2).data,
               pki_buffer_data(state).len) == 0);
  CHECK(pki_buffer_data(state).len == pki_buffer_data(state3).len &&
        memcmp(pki_buffer_data(state).data, pki_buffer_data(state3).data,
               pki_buffer_data(state).len) == 0);

  /* The loaded state, kept in a new store, is the signer from now on. */
  text_add(&input, LIT("{\"state\": "));
  text_add(&input, (const char *)pki_buffer_data(state3).data, pki_buffer_data(state3).len);
  text_add(&input, LIT("}"));
  pki_store_free(store);
  store = NULL;
  CHECK_OK(pki_store_open(LIT("memory:"), NULL, 0, &store));
  CHECK_OK(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"), input.data, input.len, T0, &created));
  CHECK(step_changed(created));
  CHECK((stored = stored_signer(store, "signer")) != NULL);
  stop_if_failed();
  pki_buffer_free(created);
  text_free(&input);

  pki_buffer_free(state);
  pki_buffer_free(state2);
  pki_buffer_free(state3);
  pki_secret_free(secret);
  pki_secret_free(copy);
  pki_signer_free(from_state);
  pki_signer_free(from_secret);
  pki_signer_free(signer);
  return stored;
}

static pki_bundle *bundle_of(const pki_signer *signer) {
  pki_bundle *b = NULL;
  CHECK_OK(pki_signer_bundle(signer, &b));
  return b;
}

int main(int argc, char **argv) {
  pki_signer *signer = NULL;
  pki_buffer *created = NULL;
  pki_buffer *state = NULL;
  test_leaf *leaf0, *leaf1, *leaf2, *leaf3, *same;
  pki_bundle *bundle1, *bundle2, *bundle3;
  pki_lineage lineage;
  pki_buffer *reason = NULL;
  int64_t trusted_until = 0, t_rotate = T0 + 396 * DAY, t_forced = T0 + 400 * DAY;

  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  dir = argv[1];
  printf("pki %s\n", pki_version());

  CHECK_OK(pki_store_open(LIT("memory:"), NULL, 0, &store));
  CHECK_OK(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"),
                             LIT("{\"common_name\": \"service-ca\", \"key_type\": \"p256\"}"),
                             T0, &created));
  stop_if_failed();
  CHECK((signer = stored_signer(store, "signer")) != NULL);
  pki_buffer_free(created);
  /* The default policy: D = 790 days, M = 395 days. */
  CHECK_OK(pki_signer_to_state(signer, &state));
  CHECK(strstr((const char *)pki_buffer_data(state).data, "\"lifetime\": \"790d\"") != NULL &&
        strstr((const char *)pki_buffer_data(state).data, "\"min_trust\": \"395d\"") != NULL);
  pki_buffer_free(state);
  stop_if_failed();

  /* First issue, then nothing to do a day later. */
  leaf0 = leaf_reconcile(signer, T0, NULL, PKI_LEAF_NOT_YET_ISSUED);
  CHECK(count_certs(leaf_chain_pem(leaf0)) == 1);
  same = leaf_reconcile(signer, T0 + DAY, leaf0, PKI_LEAF_UP_TO_DATE);
  CHECK(leaf_chain_pem(same).len == leaf_chain_pem(leaf0).len);
  CHECK(memcmp(leaf_key_pem(same).data, leaf_key_pem(leaf0).data,
               leaf_key_pem(leaf0).len) == 0);
  leaf_free(same);

  signer = round_trip(signer, 0);
  CHECK(signer != NULL); /* loaded, and kept in the new store */
  /* Nothing due: the next thing is the rotation, due once less than M = 395
   * days of the CA's 790 are left: one second after T0 + 395 days. The CA
   * was issued at T0 (NotBefore is backdated 5 minutes, NotAfter is T0 + 790
   * days exactly). */
  signer = reconcile(signer, T0 + 10 * DAY, NULL, 0, T0 + 395 * DAY + 1, NULL);

  /* Near the end of its life the leaf is renewed, still by the first CA. */
  leaf1 = leaf_reconcile(signer, T0 + 390 * DAY, leaf0, PKI_LEAF_NEAR_EXPIRY);
  bundle1 = bundle_of(signer);

  /* Automatic rotation: less than M = 395 days left. The next check is the
   * new document's: bridge B (new CA signed by the old key) ends with the old
   * CA at T0 + 790 days and is retired one second later, before the new CA
   * is due (t_rotate + 395 days) and before bridge A ends (T0 + 791 days).
   * Not `now`: that was the bug of reading the old document's time. */
  signer = reconcile(signer, t_rotate, NULL, 1, T0 + 790 * DAY + 1, &trusted_until);
  CHECK(trusted_until == t_rotate + 395 * DAY);
  signer = round_trip(signer, 1);
  bundle2 = bundle_of(signer);
  CHECK(pki_bundle_len(bundle2) == 2);

  CHECK_OK(pki_signer_check_lineage(signer, leaf_chain_pem(leaf1).data,
                                    leaf_chain_pem(leaf1).len, &lineage, &reason));
  CHECK(!lineage.issued_by && lineage.rule == PKI_LINEAGE_KEY_IDENTIFIER_MISMATCH);
  printf("lineage of the old leaf: %s\n", (const char *)pki_buffer_data(reason).data);
  pki_buffer_free(reason);

  leaf2 = leaf_reconcile(signer, t_rotate, leaf1, PKI_LEAF_WRONG_ISSUER);
  CHECK(count_certs(leaf_chain_pem(leaf2)) == 2);
  CHECK_OK(pki_signer_check_lineage(signer, leaf_chain_pem(leaf2).data,
                                    leaf_chain_pem(leaf2).len, &lineage, NULL));
  CHECK(lineage.issued_by && lineage.rule == PKI_LINEAGE_KEY_IDENTIFIER_MATCH);

  /* Old/new chain x old/new bundle, at the rotation and near the end of the
   * old leaf's life (the old CA stays trusted until `trusted_until`). */
  check_matrix(leaf1, bundle1, leaf2, bundle2, t_rotate + 3600);
  check_matrix(leaf1, bundle1, leaf2, bundle2, leaf_not_after(leaf1) - DAY);

  /* A forced rotation runs once per reason. */
  /* After it the third CA is due first: t_forced + 395 days + 1 s (bridge A and
   * bridge B now last until the second CA's NotAfter, t_rotate + 790 days). */
  signer = reconcile(signer, t_forced, "key-compromise-drill", 1, t_forced + 395 * DAY + 1,
                     &trusted_until);
  signer = reconcile(signer, t_forced + DAY, "key-compromise-drill", 0, t_forced + 395 * DAY + 1,
                     NULL);
  bundle3 = bundle_of(signer);
  leaf3 = leaf_reconcile(signer, t_forced + DAY, leaf2, PKI_LEAF_WRONG_ISSUER);
  check_matrix(leaf2, bundle2, leaf3, bundle3, t_forced + 2 * DAY);
  signer = round_trip(signer, 1);

  leaf_free(leaf0);
  leaf_free(leaf1);
  leaf_free(leaf2);
  leaf_free(leaf3);
  pki_bundle_free(bundle1);
  pki_bundle_free(bundle2);
  pki_bundle_free(bundle3);
  pki_signer_free(signer);
  pki_store_free(store);
  return check_summary("rotation");
}
