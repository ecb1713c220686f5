/*
 * Misuse of the C API: NULL for every pointer, zero lengths, garbage bytes,
 * truncated PEM, bad enum values, freeing NULL, using a consumed builder.
 * Every call must return its documented code (never crash), outputs must not
 * be written on failure, and ASan/LSan/UBSan must report nothing.
 */
#include <stdint.h>

#include "check.h"

/* 2026-01-01T00:00:00Z */
#define T0 ((int64_t)1767225600)
#define DAY ((int64_t)86400)

/* Fails with some code other than OK and PANIC. */
#define CHECK_FAILS(expr)                                                        \
  do {                                                                           \
    pki_result got_ = (expr);                                                    \
    check_count++;                                                               \
    if (got_ == PKI_RESULT_OK || got_ == PKI_RESULT_PANIC) {                     \
      check_failures++;                                                          \
      fprintf(stderr, "%s:%d: %s returned %s\n", __FILE__, __LINE__, #expr,      \
              pki_result_name(got_));                                            \
    }                                                                            \
    check_count++;                                                               \
    if (pki_last_error_length() == 0) {                                          \
      check_failures++;                                                          \
      fprintf(stderr, "%s:%d: %s left no error message\n", __FILE__, __LINE__,   \
              #expr);                                                            \
    }                                                                            \
  } while (0)

static const uint8_t garbage[] = {0xff, 0xfe, 0x00, 0x13, 0x37, 0x80, 0xc3, 0x28,
                                  '-',  '-',  '-',  '-',  '-',  'B',  'E',  'G'};
static const char not_utf8[] = {'a', (char)0xc3, (char)0x28};
static const char bad_der_pem[] =
    "-----BEGIN CERTIFICATE-----\nAAECAwQFBgcICQ==\n-----END CERTIFICATE-----\n";
static const char key_label_pem[] =
    "-----BEGIN PRIVATE KEY-----\nAAECAwQFBgcICQ==\n-----END PRIVATE KEY-----\n";

/* Sentinels: outputs must keep these values when a call fails. */
static int dummy;
#define SENTINEL(type) ((type *)(void *)&dummy)

static void test_last_error(void) {
  char buf[8];
  size_t written = 99;
  pki_bundle *out = NULL;

  CHECK(strcmp(pki_result_name(PKI_RESULT_OK), "PKI_RESULT_OK") == 0);
  CHECK(strcmp(pki_result_name(PKI_RESULT_VERIFY_EXPIRED), "PKI_RESULT_VERIFY_EXPIRED") == 0);
  CHECK(strcmp(pki_result_name(123456), "PKI_RESULT_UNKNOWN") == 0);
  CHECK(pki_version() != NULL && strlen(pki_version()) > 0);

  CHECK_CODE(pki_bundle_from_pem(NULL, 10, &out), PKI_RESULT_NULL_PARAMETER);
  CHECK(pki_last_error_length() > sizeof buf);
  CHECK_CODE(pki_last_error(NULL, sizeof buf, &written), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_last_error(buf, sizeof buf, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_last_error(buf, 0, &written), PKI_RESULT_INVALID_ARGUMENT);
  CHECK(written == 99);
  /* Truncated to the buffer, NUL-terminated; reading does not clear it. */
  CHECK_OK(pki_last_error(buf, sizeof buf, &written));
  CHECK(written == sizeof buf - 1 && buf[sizeof buf - 1] == '\0');
  CHECK(strncmp(buf, "paramet", 7) == 0);
  CHECK(pki_last_error_length() > 0);
  /* A successful call clears it. */
  CHECK_OK(pki_bundle_from_pem((const uint8_t *)"", 0, &out) == PKI_RESULT_NO_PEM_BLOCK
               ? PKI_RESULT_OK
               : PKI_RESULT_UNEXPECTED);
  CHECK(pki_last_error_length() > 0);
  CHECK(strlen(pki_policy_default().lifetime_seconds > 0 ? "x" : "") == 1);
}

/* Frees of NULL do nothing; getters of NULL give empty values. */
static void test_null_frees_and_getters(void) {
  pki_bytes b;
  pki_buffer_free(NULL);
  pki_bundle_free(NULL);
  pki_signer_free(NULL);
  pki_events_free(NULL);
  pki_secret_free(NULL);
  pki_leaf_builder_free(NULL);
  pki_leaf_request_free(NULL);
  pki_leaf_free(NULL);
  b = pki_buffer_data(NULL);
  CHECK(b.data == NULL && b.len == 0);
  b = pki_leaf_chain_pem(NULL);
  CHECK(b.data == NULL && b.len == 0);
  b = pki_leaf_key_pem(NULL);
  CHECK(b.data == NULL && b.len == 0);
  b = pki_leaf_reason_message(NULL);
  CHECK(b.data == NULL && b.len == 0);
  CHECK(pki_leaf_reason_code(NULL) == PKI_LEAF_UP_TO_DATE);
  CHECK(pki_leaf_not_after(NULL) == 0 && pki_leaf_refresh_at(NULL) == 0);
  CHECK(pki_bundle_len(NULL) == 0);
  CHECK(pki_events_len(NULL) == 0);
  CHECK(pki_secret_len(NULL) == 0);
  CHECK(pki_signer_generation(NULL) == 0);
}

static void test_signer(pki_signer **out_signer, pki_leaf_request **out_req) {
  pki_policy policy = pki_policy_default(), bad;
  pki_signer *s = SENTINEL(pki_signer), *signer = NULL, *next = SENTINEL(pki_signer);
  pki_events *ev = SENTINEL(pki_events);
  pki_buffer *buf = SENTINEL(pki_buffer), *state = NULL;
  pki_bundle *bundle = SENTINEL(pki_bundle);
  pki_forced_rotation forced;
  pki_event event;
  int64_t next_check = 42;
  pki_policy got;
  size_t half;

  CHECK_CODE(pki_signer_new(NULL, 4, PKI_KEY_TYPE_P256, NULL, T0, &s),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_new(LIT("ca"), PKI_KEY_TYPE_P256, NULL, T0, NULL),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_new(not_utf8, sizeof not_utf8, PKI_KEY_TYPE_P256, NULL, T0, &s),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_FAILS(pki_signer_new("", 0, PKI_KEY_TYPE_P256, NULL, T0, &s));
  CHECK_CODE(pki_signer_new(LIT("ca"), 17, NULL, T0, &s), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_signer_new(LIT("ca"), PKI_KEY_TYPE_P256, NULL, INT64_MAX, &s),
             PKI_RESULT_TIME);
  bad = policy;
  bad.lifetime_seconds = 0;
  CHECK_CODE(pki_signer_new(LIT("ca"), PKI_KEY_TYPE_P256, &bad, T0, &s),
             PKI_RESULT_INVALID_POLICY);
  bad = policy;
  bad.min_trust_seconds = policy.lifetime_seconds - DAY;
  CHECK_CODE(pki_signer_new(LIT("ca"), PKI_KEY_TYPE_P256, &bad, T0, &s),
             PKI_RESULT_INVALID_POLICY);
  bad = policy;
  bad.reload_interval_seconds = policy.min_trust_seconds;
  CHECK_CODE(pki_signer_new(LIT("ca"), PKI_KEY_TYPE_P256, &bad, T0, &s),
             PKI_RESULT_INVALID_POLICY);
  bad = policy;
  bad.leaf_refresh_fraction = 1.5;
  CHECK_CODE(pki_signer_new(LIT("ca"), PKI_KEY_TYPE_P256, &bad, T0, &s),
             PKI_RESULT_INVALID_REFRESH_FRACTION);
  CHECK(s == SENTINEL(pki_signer));

  CHECK_OK(pki_signer_new(LIT("misuse-ca"), PKI_KEY_TYPE_P256, NULL, T0, &signer));
  if (signer == NULL) {
    exit(check_summary("misuse"));
  }
  CHECK_OK(pki_signer_policy(signer, &got));
  CHECK(got.lifetime_seconds == policy.lifetime_seconds &&
        got.leaf_refresh_fraction == policy.leaf_refresh_fraction);
  CHECK_CODE(pki_signer_policy(NULL, &got), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_policy(signer, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_bundle(NULL, &bundle), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_bundle(signer, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK(bundle == SENTINEL(pki_bundle));

  /* State bytes. */
  CHECK_CODE(pki_signer_to_state(NULL, &buf), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_to_state(signer, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK(buf == SENTINEL(pki_buffer));
  CHECK_OK(pki_signer_to_state(signer, &state));
  CHECK_CODE(pki_signer_from_state(NULL, 10, &s), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_from_state(pki_buffer_data(state).data, pki_buffer_data(state).len,
                                   NULL),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_from_state(garbage, 0, &s), PKI_RESULT_CORRUPT_STATE);
  CHECK_CODE(pki_signer_from_state(garbage, sizeof garbage, &s), PKI_RESULT_CORRUPT_STATE);
  CHECK_CODE(pki_signer_from_state((const uint8_t *)"{\"version\": 99}", 15, &s),
             PKI_RESULT_UNSUPPORTED_STATE_VERSION);
  CHECK_CODE(pki_signer_from_state((const uint8_t *)"{\"version\": 1}", 14, &s),
             PKI_RESULT_CORRUPT_STATE);
  half = pki_buffer_data(state).len / 2;
  CHECK_CODE(pki_signer_from_state(pki_buffer_data(state).data, half, &s),
             PKI_RESULT_CORRUPT_STATE);
  CHECK(s == SENTINEL(pki_signer));
  pki_buffer_free(state);

  /* Reconcile. */
  memset(&forced, 0, sizeof forced);
  CHECK_CODE(pki_signer_reconcile(NULL, NULL, T0, NULL, &next, &ev, &next_check),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_reconcile(signer, NULL, T0, NULL, NULL, &ev, &next_check),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_reconcile(signer, NULL, T0, NULL, &next, NULL, &next_check),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_reconcile(signer, NULL, T0, NULL, &next, &ev, NULL),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_reconcile(signer, NULL, T0, &forced, &next, &ev, &next_check),
             PKI_RESULT_NULL_PARAMETER);
  forced.reason = "";
  CHECK_CODE(pki_signer_reconcile(signer, NULL, T0, &forced, &next, &ev, &next_check),
             PKI_RESULT_EMPTY_FORCED_REASON);
  forced.reason = not_utf8;
  forced.reason_len = sizeof not_utf8;
  CHECK_CODE(pki_signer_reconcile(signer, NULL, T0, &forced, &next, &ev, &next_check),
             PKI_RESULT_INVALID_ARGUMENT);
  forced.reason = "drill";
  forced.reason_len = 5;
  forced.grace_seconds = -DAY;
  CHECK_CODE(pki_signer_reconcile(signer, NULL, T0, &forced, &next, &ev, &next_check),
             PKI_RESULT_INVALID_GRACE);
  CHECK_CODE(pki_signer_reconcile(signer, NULL, T0 - DAY, NULL, &next, &ev, &next_check),
             PKI_RESULT_CLOCK_BEFORE_CA);
  CHECK_CODE(pki_signer_reconcile(signer, NULL, INT64_MIN, NULL, &next, &ev, &next_check),
             PKI_RESULT_TIME);
  bad = policy;
  bad.min_trust_seconds = 0;
  CHECK_CODE(pki_signer_reconcile(signer, &bad, T0, NULL, &next, &ev, &next_check),
             PKI_RESULT_INVALID_POLICY);
  CHECK(next == SENTINEL(pki_signer) && ev == SENTINEL(pki_events) && next_check == 42);

  /* Events. */
  CHECK_OK(pki_signer_reconcile(signer, NULL, T0 + DAY, NULL, &next, &ev, &next_check));
  CHECK(pki_events_len(ev) == 0);
  CHECK_CODE(pki_events_get(ev, 0, &event), PKI_RESULT_NOT_FOUND);
  CHECK_CODE(pki_events_get(NULL, 0, &event), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_events_get(ev, 0, NULL), PKI_RESULT_NULL_PARAMETER);
  pki_events_free(ev);
  pki_signer_free(next);

  /* A request for the leaf tests. */
  {
    pki_leaf_builder *b = NULL;
    CHECK_OK(pki_leaf_builder_new(PKI_LEAF_KIND_SERVER, &b));
    CHECK_OK(pki_leaf_builder_add_dns_name(b, LIT("misuse.example")));
    CHECK_OK(pki_leaf_builder_build(b, out_req));
    pki_leaf_builder_free(b);
  }
  *out_signer = signer;
}

static void test_builder(void) {
  pki_leaf_builder *b = SENTINEL(pki_leaf_builder);
  pki_leaf_request *req = SENTINEL(pki_leaf_request), *req2 = SENTINEL(pki_leaf_request);

  CHECK_CODE(pki_leaf_builder_new(PKI_LEAF_KIND_SERVER, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_leaf_builder_new(3, &b), PKI_RESULT_INVALID_ARGUMENT);
  CHECK(b == SENTINEL(pki_leaf_builder));
  CHECK_OK(pki_leaf_builder_new(PKI_LEAF_KIND_CLIENT, &b));

  CHECK_CODE(pki_leaf_builder_add_dns_name(NULL, LIT("a")), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_leaf_builder_add_dns_name(b, NULL, 1), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_leaf_builder_add_dns_name(b, "", 0), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_leaf_builder_add_dns_name(b, not_utf8, sizeof not_utf8),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_leaf_builder_add_ip_address(NULL, LIT("::1")), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_leaf_builder_add_ip_address(b, NULL, 3), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_leaf_builder_add_ip_address(b, LIT("300.1.1.1")), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_leaf_builder_add_ip_address(b, "", 0), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_leaf_builder_set_lifetime(NULL, DAY), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_leaf_builder_set_lifetime(b, 0), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_leaf_builder_set_lifetime(b, -DAY), PKI_RESULT_INVALID_ARGUMENT);
  /* No names: refused, and the builder is not consumed. */
  CHECK_CODE(pki_leaf_builder_build(b, &req), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_leaf_builder_build(NULL, &req), PKI_RESULT_NULL_PARAMETER);
  CHECK(req == SENTINEL(pki_leaf_request));
  CHECK_OK(pki_leaf_builder_add_ip_address(b, LIT("::1")));
  CHECK_CODE(pki_leaf_builder_build(b, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_OK(pki_leaf_builder_build(b, &req));

  /* Consumed: every use but free returns BUILDER_CONSUMED. */
  CHECK_CODE(pki_leaf_builder_add_dns_name(b, LIT("late.example")), PKI_RESULT_BUILDER_CONSUMED);
  CHECK_CODE(pki_leaf_builder_add_ip_address(b, LIT("10.0.0.1")), PKI_RESULT_BUILDER_CONSUMED);
  CHECK_CODE(pki_leaf_builder_set_lifetime(b, DAY), PKI_RESULT_BUILDER_CONSUMED);
  CHECK_CODE(pki_leaf_builder_build(b, &req2), PKI_RESULT_BUILDER_CONSUMED);
  CHECK(req2 == SENTINEL(pki_leaf_request));
  pki_leaf_builder_free(b);
  pki_leaf_request_free(req);
}

static void test_leaf(const pki_signer *signer, const pki_leaf_request *req) {
  pki_leaf *a = NULL, *b = NULL, *out = SENTINEL(pki_leaf);
  pki_bytes chain, key, other_key;
  size_t half;

  CHECK_CODE(pki_leaf_reconcile(NULL, req, T0, NULL, 0, NULL, 0, &out),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_leaf_reconcile(signer, NULL, T0, NULL, 0, NULL, 0, &out),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_leaf_reconcile(signer, req, T0, NULL, 0, NULL, 0, NULL),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_leaf_reconcile(signer, req, T0 - DAY, NULL, 0, NULL, 0, &out),
             PKI_RESULT_ISSUANCE);
  CHECK(out == SENTINEL(pki_leaf));

  CHECK_OK(pki_leaf_reconcile(signer, req, T0, NULL, 0, NULL, 0, &a));
  CHECK_OK(pki_leaf_reconcile(signer, req, T0, NULL, 0, NULL, 0, &b));
  if (a == NULL || b == NULL) {
    exit(check_summary("misuse"));
  }
  chain = pki_leaf_chain_pem(a);
  key = pki_leaf_key_pem(a);
  other_key = pki_leaf_key_pem(b);
  CHECK(pki_leaf_not_after(a) > T0 && pki_leaf_refresh_at(a) < pki_leaf_not_after(a));

  /* Only one of chain and key. */
  CHECK_CODE(pki_leaf_reconcile(signer, req, T0, chain.data, chain.len, NULL, 0, &out),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_leaf_reconcile(signer, req, T0, NULL, 0, key.data, key.len, &out),
             PKI_RESULT_INVALID_ARGUMENT);
  /* Zero lengths, garbage, truncation, wrong labels, a key of another leaf. */
  CHECK_CODE(pki_leaf_reconcile(signer, req, T0, chain.data, 0, key.data, key.len, &out),
             PKI_RESULT_NO_PEM_BLOCK);
  CHECK_CODE(pki_leaf_reconcile(signer, req, T0, chain.data, chain.len, key.data, 0, &out),
             PKI_RESULT_NO_PEM_BLOCK);
  CHECK_CODE(pki_leaf_reconcile(signer, req, T0, garbage, sizeof garbage, key.data, key.len,
                                &out),
             PKI_RESULT_PEM);
  half = chain.len / 2;
  CHECK_CODE(pki_leaf_reconcile(signer, req, T0, chain.data, half, key.data, key.len, &out),
             PKI_RESULT_PEM);
  CHECK_CODE(pki_leaf_reconcile(signer, req, T0, chain.data, chain.len, key.data,
                                key.len / 2, &out),
             PKI_RESULT_PEM);
  CHECK_CODE(pki_leaf_reconcile(signer, req, T0, (const uint8_t *)bad_der_pem,
                                sizeof bad_der_pem - 1, key.data, key.len, &out),
             PKI_RESULT_PEM);
  CHECK_CODE(pki_leaf_reconcile(signer, req, T0, key.data, key.len, key.data, key.len, &out),
             PKI_RESULT_UNEXPECTED_PEM_LABEL);
  CHECK_CODE(pki_leaf_reconcile(signer, req, T0, chain.data, chain.len,
                                (const uint8_t *)key_label_pem, sizeof key_label_pem - 1,
                                &out),
             PKI_RESULT_KEY_DECODE);
  CHECK_CODE(pki_leaf_reconcile(signer, req, T0, chain.data, chain.len, other_key.data,
                                other_key.len, &out),
             PKI_RESULT_KEY_MISMATCH);
  CHECK(out == SENTINEL(pki_leaf));

  /* Lineage. */
  {
    pki_lineage lineage;
    pki_buffer *reason = SENTINEL(pki_buffer);
    CHECK_CODE(pki_signer_check_lineage(NULL, chain.data, chain.len, &lineage, NULL),
               PKI_RESULT_NULL_PARAMETER);
    CHECK_CODE(pki_signer_check_lineage(signer, NULL, 5, &lineage, NULL),
               PKI_RESULT_NULL_PARAMETER);
    CHECK_CODE(pki_signer_check_lineage(signer, chain.data, chain.len, NULL, &reason),
               PKI_RESULT_NULL_PARAMETER);
    CHECK_CODE(pki_signer_check_lineage(signer, garbage, sizeof garbage, &lineage, &reason),
               PKI_RESULT_PEM);
    CHECK_CODE(pki_signer_check_lineage(signer, chain.data, 0, &lineage, &reason),
               PKI_RESULT_NO_PEM_BLOCK);
    CHECK(reason == SENTINEL(pki_buffer));
    CHECK_OK(pki_signer_check_lineage(signer, chain.data, chain.len, &lineage, NULL));
    CHECK(lineage.issued_by);
  }
  pki_leaf_free(a);
  pki_leaf_free(b);
}

static void test_bundle(const pki_signer *signer, const pki_leaf_request *req) {
  pki_bundle *bundle = NULL, *other = NULL, *out = SENTINEL(pki_bundle), *merged = NULL;
  pki_buffer *pem = NULL, *buf = SENTINEL(pki_buffer), *pins = NULL;
  pki_sha256 fp, fp2;
  pki_leaf *leaf = NULL;
  pki_bytes chain;
  size_t removed = 7;

  CHECK_OK(pki_signer_bundle(signer, &bundle));
  CHECK_OK(pki_bundle_to_pem(bundle, &pem));

  CHECK_CODE(pki_bundle_from_pem(NULL, 3, &out), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_from_pem(pki_buffer_data(pem).data, pki_buffer_data(pem).len, NULL),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_from_pem(pki_buffer_data(pem).data, 0, &out), PKI_RESULT_NO_PEM_BLOCK);
  CHECK_CODE(pki_bundle_from_pem(garbage, sizeof garbage, &out), PKI_RESULT_PEM);
  CHECK_CODE(pki_bundle_from_pem((const uint8_t *)"hello", 5, &out), PKI_RESULT_NO_PEM_BLOCK);
  CHECK_CODE(pki_bundle_from_pem(pki_buffer_data(pem).data, pki_buffer_data(pem).len - 30,
                                 &out),
             PKI_RESULT_PEM);
  CHECK_CODE(pki_bundle_from_pem((const uint8_t *)bad_der_pem, sizeof bad_der_pem - 1, &out),
             PKI_RESULT_PEM);
  CHECK_CODE(pki_bundle_from_pem((const uint8_t *)key_label_pem, sizeof key_label_pem - 1,
                                 &out),
             PKI_RESULT_UNEXPECTED_PEM_LABEL);
  CHECK(out == SENTINEL(pki_bundle));

  CHECK_CODE(pki_bundle_to_pem(NULL, &buf), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_to_pem(bundle, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_merge(NULL, bundle, &out), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_merge(bundle, NULL, &out), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_merge(bundle, bundle, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_prune_expired(NULL, T0, &out, &removed), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_prune_expired(bundle, T0, NULL, &removed), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_prune_expired(bundle, T0, &out, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_prune_expired(bundle, INT64_MAX, &out, &removed), PKI_RESULT_TIME);
  CHECK_CODE(pki_bundle_fingerprint(NULL, &fp), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_fingerprint(bundle, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_root_pin(NULL, &fp), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_root_pin(bundle, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_spki_pins(NULL, &buf), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_spki_pins(bundle, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK(out == SENTINEL(pki_bundle) && buf == SENTINEL(pki_buffer) && removed == 7);

  /* The working paths. */
  CHECK_OK(pki_bundle_merge(bundle, bundle, &merged));
  CHECK(pki_bundle_len(merged) == 1);
  CHECK_OK(pki_bundle_fingerprint(bundle, &fp));
  CHECK_OK(pki_bundle_fingerprint(merged, &fp2));
  CHECK(memcmp(fp.bytes, fp2.bytes, 32) == 0);
  CHECK_OK(pki_bundle_root_pin(bundle, &fp));
  CHECK_OK(pki_bundle_spki_pins(bundle, &pins));
  CHECK(pki_buffer_data(pins).len == 32);
  CHECK_OK(pki_bundle_prune_expired(bundle, T0 + 1000 * DAY, &out, &removed));
  CHECK(removed == 1 && pki_bundle_len(out) == 0);
  pki_bundle_free(out);

  /* A bundle without a self-signed root has no root pin. */
  CHECK_OK(pki_leaf_reconcile(signer, req, T0, NULL, 0, NULL, 0, &leaf));
  chain = pki_leaf_chain_pem(leaf);
  CHECK_OK(pki_bundle_from_pem(chain.data, chain.len, &other));
  CHECK_CODE(pki_bundle_root_pin(other, &fp), PKI_RESULT_NO_ROOT);

  /* Verification failures. */
  {
    pki_buffer *path = SENTINEL(pki_buffer);
    CHECK_CODE(pki_verify_chain(NULL, chain.data, chain.len, T0, 0, NULL, 0, &path),
               PKI_RESULT_NULL_PARAMETER);
    CHECK_CODE(pki_verify_chain(bundle, NULL, 0, T0, 0, NULL, 0, &path),
               PKI_RESULT_NULL_PARAMETER);
    CHECK_CODE(pki_verify_chain(bundle, chain.data, chain.len, T0, 0, NULL, 0, NULL),
               PKI_RESULT_NULL_PARAMETER);
    CHECK_CODE(pki_verify_chain(bundle, chain.data, chain.len, T0, 2, NULL, 0, &path),
               PKI_RESULT_INVALID_ARGUMENT);
    CHECK_CODE(pki_verify_chain(bundle, chain.data, 0, T0, 0, NULL, 0, &path),
               PKI_RESULT_NO_PEM_BLOCK);
    CHECK_CODE(pki_verify_chain(bundle, garbage, sizeof garbage, T0, 0, NULL, 0, &path),
               PKI_RESULT_PEM);
    CHECK_CODE(pki_verify_chain(bundle, chain.data, chain.len, T0, PKI_PURPOSE_SERVER_AUTH,
                                LIT("other.example"), &path),
               PKI_RESULT_VERIFY_NAME_MISMATCH);
    CHECK_CODE(pki_verify_chain(bundle, chain.data, chain.len, T0, PKI_PURPOSE_CLIENT_AUTH,
                                NULL, 0, &path),
               PKI_RESULT_VERIFY_EKU_NOT_ALLOWED);
    CHECK_CODE(pki_verify_chain(bundle, chain.data, chain.len, T0 + 2000 * DAY,
                                PKI_PURPOSE_SERVER_AUTH, NULL, 0, &path),
               PKI_RESULT_VERIFY_EXPIRED);
    CHECK_CODE(pki_verify_chain(other, chain.data, chain.len, T0, PKI_PURPOSE_SERVER_AUTH,
                                NULL, 0, &path),
               PKI_RESULT_VERIFY_UNKNOWN_ISSUER);
    CHECK(path == SENTINEL(pki_buffer));
    CHECK_OK(pki_verify_chain(bundle, chain.data, chain.len, T0 + DAY, PKI_PURPOSE_SERVER_AUTH,
                              LIT("misuse.example"), &path));
    pki_buffer_free(path);
  }

  pki_leaf_free(leaf);
  pki_bundle_free(other);
  pki_bundle_free(merged);
  pki_buffer_free(pins);
  pki_buffer_free(pem);
  pki_bundle_free(bundle);
}

static void test_secret(const pki_signer *signer) {
  pki_secret *secret = SENTINEL(pki_secret), *good = NULL, *broken = NULL;
  pki_signer *s = SENTINEL(pki_signer);
  pki_bytes key, value;
  size_t i;

  CHECK_CODE(pki_secret_new(NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_to_secret(NULL, &secret), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_to_secret(signer, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK(secret == SENTINEL(pki_secret));
  CHECK_OK(pki_signer_to_secret(signer, &good));
  CHECK_OK(pki_secret_new(&broken));

  CHECK_CODE(pki_secret_set(NULL, LIT("a"), (const uint8_t *)"x", 1), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_secret_set(broken, NULL, 1, (const uint8_t *)"x", 1), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_secret_set(broken, LIT("a"), NULL, 1), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_secret_set(broken, "", 0, (const uint8_t *)"x", 1), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_secret_set(broken, LIT("a/b"), (const uint8_t *)"x", 1),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_secret_set(broken, not_utf8, sizeof not_utf8, (const uint8_t *)"x", 1),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK(pki_secret_len(broken) == 0);

  CHECK_CODE(pki_secret_entry(NULL, 0, &key, &value), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_secret_entry(good, 0, NULL, &value), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_secret_entry(good, 0, &key, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_secret_entry(good, 1000, &key, &value), PKI_RESULT_NOT_FOUND);
  CHECK_CODE(pki_secret_get(NULL, LIT("tls.crt"), &value), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_secret_get(good, NULL, 3, &value), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_secret_get(good, LIT("tls.crt"), NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_secret_get(good, LIT("nope"), &value), PKI_RESULT_NOT_FOUND);

  CHECK_CODE(pki_signer_from_secret(NULL, &s), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_from_secret(good, NULL), PKI_RESULT_NULL_PARAMETER);
  /* Empty, then each required entry missing or damaged. */
  CHECK_CODE(pki_signer_from_secret(broken, &s), PKI_RESULT_CORRUPT_STATE);
  for (i = 0; i < pki_secret_len(good); i++) {
    CHECK_OK(pki_secret_entry(good, i, &key, &value));
    if (strcmp((const char *)key.data, "tls.crt") == 0) {
      CHECK_OK(pki_secret_set(broken, (const char *)key.data, key.len, value.data, value.len / 2));
    } else {
      CHECK_OK(pki_secret_set(broken, (const char *)key.data, key.len, value.data, value.len));
    }
  }
  CHECK_CODE(pki_signer_from_secret(broken, &s), PKI_RESULT_CORRUPT_STATE);
  CHECK_OK(pki_secret_get(good, LIT("tls.crt"), &value));
  CHECK_OK(pki_secret_set(broken, LIT("tls.crt"), value.data, value.len));
  CHECK_OK(pki_secret_set(broken, LIT("tls.key"), (const uint8_t *)"", 0));
  CHECK_CODE(pki_signer_from_secret(broken, &s), PKI_RESULT_CORRUPT_STATE);
  CHECK_OK(pki_secret_get(good, LIT("tls.key"), &value));
  CHECK_OK(pki_secret_set(broken, LIT("tls.key"), value.data, value.len));
  CHECK_OK(pki_secret_set(broken, LIT("pki-state.json"), garbage, sizeof garbage));
  CHECK_CODE(pki_signer_from_secret(broken, &s), PKI_RESULT_CORRUPT_STATE);
  CHECK_OK(pki_secret_set(broken, LIT("pki-state.json"), BLIT("{\"version\": 2}")));
  CHECK_CODE(pki_signer_from_secret(broken, &s), PKI_RESULT_UNSUPPORTED_STATE_VERSION);
  CHECK_OK(pki_secret_get(good, LIT("pki-state.json"), &value));
  CHECK_OK(pki_secret_set(broken, LIT("pki-state.json"), value.data, value.len));
  CHECK_OK(pki_secret_set(broken, LIT("forced-rotation-reason"), (const uint8_t *)not_utf8,
                          sizeof not_utf8));
  CHECK_CODE(pki_signer_from_secret(broken, &s), PKI_RESULT_CORRUPT_STATE);
  CHECK(s == SENTINEL(pki_signer));
  /* Repaired, it loads; unknown keys are ignored. */
  CHECK_OK(pki_secret_set(broken, LIT("forced-rotation-reason"), (const uint8_t *)"", 0));
  CHECK_OK(pki_secret_set(broken, LIT("unrelated.key"), BLIT("whatever")));
  CHECK_OK(pki_signer_from_secret(broken, &s));
  pki_signer_free(s);

  pki_secret_free(good);
  pki_secret_free(broken);
}

int main(void) {
  pki_signer *signer = NULL;
  pki_leaf_request *req = NULL;
  test_last_error();
  test_null_frees_and_getters();
  test_signer(&signer, &req);
  test_builder();
  test_leaf(signer, req);
  test_bundle(signer, req);
  test_secret(signer);
  pki_leaf_request_free(req);
  pki_signer_free(signer);
  return check_summary("misuse");
}
