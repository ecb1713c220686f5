/*
 * A full rotation through the C API: create a signer, issue a serving
 * certificate, save and load the state (bytes and Secret-shaped blobs),
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

/* Reconciles the signer (freeing the old handle) and checks the events and
 * the exact time to reconcile again. */
static pki_signer *reconcile(pki_signer *signer, int64_t now, const char *forced,
                             size_t want_events, int64_t want_next_check,
                             int64_t *trusted_until) {
  pki_signer *next = NULL;
  pki_events *events = NULL;
  int64_t next_check = 0;
  pki_forced_rotation f;
  size_t i;
  memset(&f, 0, sizeof f);
  if (forced != NULL) {
    f.reason = forced;
    f.reason_len = strlen(forced);
  }
  CHECK_OK(pki_signer_reconcile(signer, NULL, now, forced ? &f : NULL, &next,
                                &events, &next_check));
  stop_if_failed();
  if (next_check != want_next_check) {
    fprintf(stderr, "next check at +%llds, want +%llds\n", (long long)(next_check - T0),
            (long long)(want_next_check - T0));
  }
  CHECK(next_check == want_next_check);
  CHECK(pki_events_len(events) == want_events);
  for (i = 0; i < pki_events_len(events); i++) {
    pki_event ev;
    CHECK_OK(pki_events_get(events, i, &ev));
    printf("event at +%lldd: %s\n", (long long)((now - T0) / DAY),
           (const char *)ev.message.data);
    CHECK(strlen((const char *)ev.message.data) == ev.message.len);
    if (ev.kind == PKI_EVENT_ROTATED && trusted_until != NULL) {
      CHECK(ev.has_previous_trusted_until);
      *trusted_until = ev.previous_trusted_until;
    }
  }
  /* An in-memory counter of the reconciles that changed something. */
  CHECK(pki_signer_generation(next) ==
        pki_signer_generation(signer) + (want_events > 0 ? 1 : 0));
  pki_events_free(events);
  pki_signer_free(signer);
  return next;
}

/* Reconciles a leaf against the signer; `prev` may be NULL. */
static pki_leaf *leaf_reconcile(const pki_signer *signer, const pki_leaf_request *req,
                                int64_t now, const pki_leaf *prev,
                                pki_leaf_reason want) {
  pki_leaf *out = NULL;
  pki_bytes chain = pki_leaf_chain_pem(prev);
  pki_bytes key = pki_leaf_key_pem(prev);
  CHECK_OK(pki_leaf_reconcile(signer, req, now, chain.data, chain.len, key.data,
                              key.len, &out));
  stop_if_failed();
  CHECK(pki_leaf_reason_code(out) == want);
  printf("leaf at +%lldd: %s\n", (long long)((now - T0) / DAY),
         (const char *)pki_leaf_reason_message(out).data);
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
static void save_side(const char *side, const pki_leaf *leaf, const pki_bundle *bundle) {
  char name[64];
  pki_buffer *pem = NULL;
  snprintf(name, sizeof name, "%s-chain.pem", side);
  CHECK(write_file(dir, name, pki_leaf_chain_pem(leaf)) == 0);
  CHECK_OK(pki_bundle_to_pem(bundle, &pem));
  snprintf(name, sizeof name, "%s-bundle.pem", side);
  CHECK(write_file(dir, name, pki_buffer_data(pem)) == 0);
  pki_buffer_free(pem);
}

/* One cell of the trust matrix, by both verifiers. */
static void check_cell(const char *chain_side, const pki_leaf *leaf,
                       const char *bundle_side, const pki_bundle *bundle, int64_t at) {
  pki_buffer *path = NULL;
  pki_bytes chain = pki_leaf_chain_pem(leaf);
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

static void check_matrix(const pki_leaf *old_leaf, const pki_bundle *old_bundle,
                         const pki_leaf *new_leaf, const pki_bundle *new_bundle,
                         int64_t at) {
  save_side("old", old_leaf, old_bundle);
  save_side("new", new_leaf, new_bundle);
  check_cell("old", old_leaf, "old", old_bundle, at);
  check_cell("old", old_leaf, "new", new_bundle, at);
  check_cell("new", new_leaf, "old", old_bundle, at);
  check_cell("new", new_leaf, "new", new_bundle, at);
}

/* Saves as state bytes and as Secret-shaped blobs, loads both, and checks
 * that the three states are the same bytes. */
static pki_signer *round_trip(pki_signer *signer, int has_bridge) {
  pki_buffer *state = NULL, *state2 = NULL, *state3 = NULL;
  pki_signer *from_state = NULL, *from_secret = NULL;
  pki_secret *secret = NULL, *copy = NULL;
  pki_bytes value, key;
  size_t i;

  CHECK_OK(pki_signer_to_state(signer, &state));
  CHECK_OK(pki_signer_from_state(pki_buffer_data(state).data, pki_buffer_data(state).len,
                                 &from_state));
  CHECK_OK(pki_signer_to_secret(from_state, &secret));
  CHECK_OK(pki_secret_get(secret, LIT("tls.crt"), &value));
  CHECK_OK(pki_secret_get(secret, LIT("tls.key"), &value));
  CHECK(strstr((const char *)value.data, "PRIVATE KEY") != NULL);
  CHECK_OK(pki_secret_get(secret, LIT("ca-bundle.crt"), &value));
  CHECK_OK(pki_secret_get(secret, LIT("pki-state.json"), &value));
  CHECK_CODE(pki_secret_get(secret, LIT("intermediate-ca.crt"), &value),
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

  pki_buffer_free(state);
  pki_buffer_free(state2);
  pki_buffer_free(state3);
  pki_secret_free(secret);
  pki_secret_free(copy);
  pki_signer_free(from_state);
  pki_signer_free(signer);
  return from_secret;
}

static pki_bundle *bundle_of(const pki_signer *signer) {
  pki_bundle *b = NULL;
  CHECK_OK(pki_signer_bundle(signer, &b));
  return b;
}

int main(int argc, char **argv) {
  pki_policy policy = pki_policy_default();
  pki_signer *signer = NULL;
  pki_leaf_builder *builder = NULL;
  pki_leaf_request *req = NULL;
  pki_leaf *leaf0, *leaf1, *leaf2, *leaf3, *same;
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

  CHECK(policy.lifetime_seconds == 790 * DAY && policy.min_trust_seconds == 395 * DAY);
  CHECK_OK(pki_signer_new(LIT("service-ca"), PKI_KEY_TYPE_P256, &policy, T0, &signer));
  stop_if_failed();

  CHECK_OK(pki_leaf_builder_new(PKI_LEAF_KIND_SERVER, &builder));
  CHECK_OK(pki_leaf_builder_add_dns_name(builder, LIT(HOST)));
  CHECK_OK(pki_leaf_builder_add_ip_address(builder, LIT("127.0.0.1")));
  CHECK_OK(pki_leaf_builder_set_lifetime(builder, 365 * DAY));
  CHECK_OK(pki_leaf_builder_build(builder, &req));
  pki_leaf_builder_free(builder);
  stop_if_failed();

  /* First issue, then nothing to do a day later. */
  leaf0 = leaf_reconcile(signer, req, T0, NULL, PKI_LEAF_NOT_YET_ISSUED);
  CHECK(count_certs(pki_leaf_chain_pem(leaf0)) == 1);
  same = leaf_reconcile(signer, req, T0 + DAY, leaf0, PKI_LEAF_UP_TO_DATE);
  CHECK(pki_leaf_chain_pem(same).len == pki_leaf_chain_pem(leaf0).len);
  CHECK(memcmp(pki_leaf_key_pem(same).data, pki_leaf_key_pem(leaf0).data,
               pki_leaf_key_pem(leaf0).len) == 0);
  pki_leaf_free(same);

  signer = round_trip(signer, 0);
  CHECK(pki_signer_generation(signer) == 0); /* loaded */
  /* Nothing due: the next thing is the rotation, due once less than M = 395
   * days of the CA's 790 are left: one second after T0 + 395 days. The CA
   * was issued at T0 (NotBefore is backdated 5 minutes, NotAfter is T0 + 790
   * days exactly). */
  signer = reconcile(signer, T0 + 10 * DAY, NULL, 0, T0 + 395 * DAY + 1, NULL);

  /* Near the end of its life the leaf is renewed, still by the first CA. */
  leaf1 = leaf_reconcile(signer, req, T0 + 390 * DAY, leaf0, PKI_LEAF_NEAR_EXPIRY);
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

  CHECK_OK(pki_signer_check_lineage(signer, pki_leaf_chain_pem(leaf1).data,
                                    pki_leaf_chain_pem(leaf1).len, &lineage, &reason));
  CHECK(!lineage.issued_by && lineage.rule == PKI_LINEAGE_KEY_IDENTIFIER_MISMATCH);
  printf("lineage of the old leaf: %s\n", (const char *)pki_buffer_data(reason).data);
  pki_buffer_free(reason);

  leaf2 = leaf_reconcile(signer, req, t_rotate, leaf1, PKI_LEAF_WRONG_ISSUER);
  CHECK(count_certs(pki_leaf_chain_pem(leaf2)) == 2);
  CHECK_OK(pki_signer_check_lineage(signer, pki_leaf_chain_pem(leaf2).data,
                                    pki_leaf_chain_pem(leaf2).len, &lineage, NULL));
  CHECK(lineage.issued_by && lineage.rule == PKI_LINEAGE_KEY_IDENTIFIER_MATCH);

  /* Old/new chain x old/new bundle, at the rotation and near the end of the
   * old leaf's life (the old CA stays trusted until `trusted_until`). */
  check_matrix(leaf1, bundle1, leaf2, bundle2, t_rotate + 3600);
  check_matrix(leaf1, bundle1, leaf2, bundle2, pki_leaf_not_after(leaf1) - DAY);

  /* A forced rotation runs once per reason. */
  /* After it the third CA is due first: t_forced + 395 days + 1 s (bridge A and
   * bridge B now last until the second CA's NotAfter, t_rotate + 790 days). */
  signer = reconcile(signer, t_forced, "key-compromise-drill", 1, t_forced + 395 * DAY + 1,
                     &trusted_until);
  signer = reconcile(signer, t_forced + DAY, "key-compromise-drill", 0, t_forced + 395 * DAY + 1,
                     NULL);
  bundle3 = bundle_of(signer);
  leaf3 = leaf_reconcile(signer, req, t_forced + DAY, leaf2, PKI_LEAF_WRONG_ISSUER);
  check_matrix(leaf2, bundle2, leaf3, bundle3, t_forced + 2 * DAY);
  signer = round_trip(signer, 1);

  pki_leaf_free(leaf0);
  pki_leaf_free(leaf1);
  pki_leaf_free(leaf2);
  pki_leaf_free(leaf3);
  pki_bundle_free(bundle1);
  pki_bundle_free(bundle2);
  pki_bundle_free(bundle3);
  pki_leaf_request_free(req);
  pki_signer_free(signer);
  return check_summary("rotation");
}
