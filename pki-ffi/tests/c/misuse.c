/*
 * Misuse of the C API: NULL for every pointer, zero lengths, garbage bytes,
 * truncated PEM, malformed and mistyped JSON inputs, bad enum values,
 * freeing NULL.
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
  {
    pki_store *memory = NULL;
    CHECK(pki_store_open(LIT("memory:"), NULL, 0, &memory) == PKI_RESULT_OK &&
          pki_last_error_length() == 0);
    pki_store_free(memory);
  }
}

/* Frees of NULL do nothing; getters of NULL give empty values. */
static void test_null_frees_and_getters(void) {
  pki_bytes b;
  pki_buffer_free(NULL);
  pki_bundle_free(NULL);
  pki_signer_free(NULL);
  pki_buffer_free(NULL);
  pki_secret_free(NULL);
  pki_store_free(NULL);
  b = pki_buffer_data(NULL);
  CHECK(b.data == NULL && b.len == 0);
  CHECK(pki_bundle_len(NULL) == 0);
  CHECK(pki_secret_len(NULL) == 0);
}

/* The leaf request of the leaf tests. */
static const char req[] = "{\"kind\": \"server\", \"dns_names\": [\"misuse.example\"]}";

/* Creates a signer at "signer" in `store` from `input` (a string literal). */
#define CREATE(store, input, now, out) \
  pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"), input, sizeof(input) - 1, now, out)
/* Steps the signer at "signer" in `store` with `input` (a string literal). */
#define STEP(store, input, now, out) \
  pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), input, sizeof(input) - 1, now, out)

static void test_signer(pki_store *store, pki_signer **out_signer) {
  pki_buffer *st = SENTINEL(pki_buffer), *created = NULL, *quiet = NULL;
  pki_signer *s = SENTINEL(pki_signer), *signer = NULL;
  pki_buffer *buf = SENTINEL(pki_buffer), *state = NULL;
  pki_bundle *bundle = SENTINEL(pki_bundle);
  step_event_t event;
  char input[256];
  size_t half;
  int n;

  CHECK_CODE(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"), NULL, 4, T0, &st),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(CREATE(store, "{\"common_name\": \"ca\"}", T0, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_document_create(NULL, PKI_KIND_SIGNER, LIT("signer"), LIT("{\"common_name\": \"ca\"}"), T0, &st),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_document_create(store, PKI_KIND_SIGNER, NULL, 6, LIT("{\"common_name\": \"ca\"}"), T0, &st),
             PKI_RESULT_NULL_PARAMETER);
  n = snprintf(input, sizeof input, "{\"common_name\": \"%.*s\"}", (int)sizeof not_utf8,
               not_utf8);
  CHECK_CODE(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"), input, (size_t)n, T0, &st),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_FAILS(CREATE(store, "{\"common_name\": \"\"}", T0, &st));
  CHECK_CODE(CREATE(store, "{\"common_name\": \"ca\", \"key_type\": \"p17\"}", T0, &st),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(CREATE(store, "{\"common_name\": \"ca\", \"colour\": \"red\"}", T0, &st),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(CREATE(store, "{\"common_name\": \"ca\"", T0, &st), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(CREATE(store, "{\"common_name\": \"ca\"}", INT64_MAX, &st), PKI_RESULT_TIME);
  CHECK_CODE(CREATE(store, "{\"common_name\": \"ca\", \"policy\": {\"lifetime_seconds\": 0}}",
                    T0, &st),
             PKI_RESULT_INVALID_POLICY);
  n = snprintf(input, sizeof input,
               "{\"common_name\": \"ca\", \"policy\": {\"min_trust_seconds\": %lld}}",
               (long long)(790 * DAY - DAY));
  CHECK_CODE(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"), input, (size_t)n, T0, &st),
             PKI_RESULT_INVALID_POLICY);
  n = snprintf(input, sizeof input,
               "{\"common_name\": \"ca\", \"policy\": {\"reload_interval_seconds\": %lld}}",
               (long long)(395 * DAY));
  CHECK_CODE(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"), input, (size_t)n, T0, &st),
             PKI_RESULT_INVALID_POLICY);
  CHECK_CODE(CREATE(store, "{\"common_name\": \"ca\", \"policy\": {\"leaf_refresh_fraction\": 1.5}}",
                    T0, &st),
             PKI_RESULT_INVALID_REFRESH_FRACTION);
  CHECK(st == SENTINEL(pki_buffer));

  CHECK_OK(CREATE(store, "{\"common_name\": \"misuse-ca\"}", T0, &created));
  CHECK_CODE(CREATE(store, "{\"common_name\": \"misuse-ca\"}", T0, &st),
             PKI_RESULT_ALREADY_INITIALIZED);
  if (created == NULL) {
    exit(check_summary("misuse"));
  }
  signer = stored_signer(store, "signer");
  CHECK(signer != NULL);
  if (signer == NULL) {
    exit(check_summary("misuse"));
  }
  /* The default policy. */
  CHECK_OK(pki_signer_to_state(signer, &state));
  CHECK(strstr((const char *)pki_buffer_data(state).data, "\"lifetime\": \"790d\"") != NULL &&
        strstr((const char *)pki_buffer_data(state).data, "\"leaf_refresh_fraction\": 0.2") != NULL);
  pki_buffer_free(state);
  state = NULL;
  CHECK_CODE(pki_signer_load(NULL, LIT("signer"), &s, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_load(store, LIT("signer"), NULL, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK(s == SENTINEL(pki_signer));
  CHECK_CODE(pki_signer_bundle(NULL, &bundle), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_signer_bundle(signer, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK(bundle == SENTINEL(pki_bundle));
  pki_buffer_free(created);

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

  /* Steps. */
  CHECK_CODE(pki_document_step(NULL, PKI_KIND_SIGNER, LIT("signer"), NULL, 0, T0, &st), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), NULL, 0, T0, NULL),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, NULL, 6, NULL, 0, T0, &st), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("other"), NULL, 0, T0, &st), PKI_RESULT_NOT_INITIALIZED);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("../x"), NULL, 0, T0, &st), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(STEP(store, "{\"forced\": {\"reason\": \"\"}}", T0, &st),
             PKI_RESULT_EMPTY_FORCED_REASON);
  n = snprintf(input, sizeof input, "{\"forced\": {\"reason\": \"%.*s\"}}", (int)sizeof not_utf8,
               not_utf8);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), input, (size_t)n, T0, &st),
             PKI_RESULT_INVALID_ARGUMENT);
  n = snprintf(input, sizeof input,
               "{\"forced\": {\"reason\": \"drill\", \"grace_seconds\": %lld}}", (long long)-DAY);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), input, (size_t)n, T0, &st),
             PKI_RESULT_INVALID_GRACE);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), NULL, 0, T0 - DAY, &st),
             PKI_RESULT_CLOCK_BEFORE_CA);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), NULL, 0, INT64_MIN, &st), PKI_RESULT_TIME);
  CHECK_CODE(STEP(store, "{\"policy\": {\"min_trust_seconds\": 0}}", T0, &st),
             PKI_RESULT_INVALID_POLICY);
  CHECK_CODE(STEP(store, "{\"forced\": \"drill\"}", T0, &st), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(STEP(store, "{\"allow_trust_break\": \" \"}", T0, &st), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(STEP(store, "{\"renew_same_key\": true, \"forced\": {\"reason\": \"x\"}}", T0, &st),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), (const char *)garbage, sizeof garbage, T0, &st),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK(st == SENTINEL(pki_buffer));

  /* Events. */
  CHECK_OK(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), NULL, 0, T0 + DAY, &quiet));
  CHECK(step_events(quiet) == 0);
  CHECK(!step_event(quiet, 0, &event));
  /* Only a credential advance has an action. */
  CHECK(json_find(jtext(quiet), "action") == NULL);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), NULL, 0, T0 + DAY, NULL),
             PKI_RESULT_NULL_PARAMETER);
  pki_buffer_free(quiet);

  *out_signer = signer;
}

/* Leaf requests are JSON: every malformed one is refused, and nothing is
 * written. */
static void test_request(const pki_signer *signer) {
  test_leaf *out = SENTINEL(test_leaf), *leaf = NULL;
  char input[256];
  int n;
#define RECONCILE(input, out) \
  test_leaf_reconcile(signer, input, sizeof(input) - 1, T0, NULL, 0, NULL, 0, out)

  CHECK_CODE(RECONCILE("{\"kind\": \"client\", \"dns_names\": [\"a\"]}", NULL),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(RECONCILE("{\"kind\": \"both\", \"dns_names\": [\"a\"]}", &out),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK(out == SENTINEL(test_leaf));
  CHECK_CODE(test_leaf_reconcile(NULL, LIT(req), T0, NULL, 0, NULL, 0, &out),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(test_leaf_reconcile(signer, NULL, 1, T0, NULL, 0, NULL, 0, &out),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(RECONCILE("{\"kind\": \"client\", \"dns_names\": [\"\"]}", &out),
             PKI_RESULT_INVALID_ARGUMENT);
  n = snprintf(input, sizeof input, "{\"kind\": \"client\", \"dns_names\": [\"%.*s\"]}",
               (int)sizeof not_utf8, not_utf8);
  CHECK_CODE(test_leaf_reconcile(signer, input, (size_t)n, T0, NULL, 0, NULL, 0, &out),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(RECONCILE("{\"kind\": \"client\", \"ip_addresses\": [\"::1\"],", &out),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(RECONCILE("{\"kind\": \"client\", \"ip_addresses\": \"::1\"}", &out),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(RECONCILE("{\"kind\": \"client\", \"ip_addresses\": [\"300.1.1.1\"]}", &out),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(RECONCILE("{\"kind\": \"client\", \"ip_addresses\": [\"\"]}", &out),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(RECONCILE("{\"kind\": \"client\", \"ip\": [\"::1\"]}", &out),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(RECONCILE("{\"kind\": \"client\", \"ip_addresses\": [\"::1\"], \"lifetime_seconds\": 0}",
                       &out),
             PKI_RESULT_INVALID_ARGUMENT);
  n = snprintf(input, sizeof input,
               "{\"kind\": \"client\", \"ip_addresses\": [\"::1\"], \"lifetime_seconds\": %lld}",
               (long long)-DAY);
  CHECK_CODE(test_leaf_reconcile(signer, input, (size_t)n, T0, NULL, 0, NULL, 0, &out),
             PKI_RESULT_INVALID_ARGUMENT);
  /* No names. */
  CHECK_CODE(RECONCILE("{\"kind\": \"client\"}", &out), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(test_leaf_reconcile(signer, req, 0, T0, NULL, 0, NULL, 0, &out),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK(out == SENTINEL(test_leaf));
  CHECK_OK(RECONCILE("{\"kind\": \"client\", \"ip_addresses\": [\"::1\"]}", &leaf));
  CHECK(leaf_not_after(leaf) > T0);
  leaf_free(leaf);
#undef RECONCILE
}

static void test_leaf_pairs(const pki_signer *signer) {
  test_leaf *a = NULL, *b = NULL, *out = SENTINEL(test_leaf);
  pki_bytes chain, key, other_key;
  size_t half;

  CHECK_CODE(test_leaf_reconcile(NULL, LIT(req), T0, NULL, 0, NULL, 0, &out),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(test_leaf_reconcile(signer, NULL, 0, T0, NULL, 0, NULL, 0, &out),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(test_leaf_reconcile(signer, LIT(req), T0, NULL, 0, NULL, 0, NULL),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(test_leaf_reconcile(signer, LIT(req), T0 - DAY, NULL, 0, NULL, 0, &out),
             PKI_RESULT_ISSUANCE);
  CHECK(out == SENTINEL(test_leaf));

  CHECK_OK(test_leaf_reconcile(signer, LIT(req), T0, NULL, 0, NULL, 0, &a));
  CHECK_OK(test_leaf_reconcile(signer, LIT(req), T0, NULL, 0, NULL, 0, &b));
  if (a == NULL || b == NULL) {
    exit(check_summary("misuse"));
  }
  chain = leaf_chain_pem(a);
  key = leaf_key_pem(a);
  other_key = leaf_key_pem(b);
  CHECK(leaf_not_after(a) > T0 && leaf_refresh_at(a) < leaf_not_after(a));

  /* Only one of chain and key. */
  CHECK_CODE(test_leaf_reconcile(signer, LIT(req), T0, chain.data, chain.len, NULL, 0, &out),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(test_leaf_reconcile(signer, LIT(req), T0, NULL, 0, key.data, key.len, &out),
             PKI_RESULT_INVALID_ARGUMENT);
  /* Zero lengths, garbage, truncation, wrong labels, a key of another leaf. */
  CHECK_CODE(test_leaf_reconcile(signer, LIT(req), T0, chain.data, 0, key.data, key.len, &out),
             PKI_RESULT_NO_PEM_BLOCK);
  CHECK_CODE(test_leaf_reconcile(signer, LIT(req), T0, chain.data, chain.len, key.data, 0, &out),
             PKI_RESULT_NO_PEM_BLOCK);
  CHECK_CODE(test_leaf_reconcile(signer, LIT(req), T0, garbage, sizeof garbage, key.data, key.len,
                                &out),
             PKI_RESULT_PEM);
  half = chain.len / 2;
  CHECK_CODE(test_leaf_reconcile(signer, LIT(req), T0, chain.data, half, key.data, key.len, &out),
             PKI_RESULT_PEM);
  CHECK_CODE(test_leaf_reconcile(signer, LIT(req), T0, chain.data, chain.len, key.data,
                                key.len / 2, &out),
             PKI_RESULT_PEM);
  CHECK_CODE(test_leaf_reconcile(signer, LIT(req), T0, (const uint8_t *)bad_der_pem,
                                sizeof bad_der_pem - 1, key.data, key.len, &out),
             PKI_RESULT_PEM);
  CHECK_CODE(test_leaf_reconcile(signer, LIT(req), T0, key.data, key.len, key.data, key.len, &out),
             PKI_RESULT_UNEXPECTED_PEM_LABEL);
  CHECK_CODE(test_leaf_reconcile(signer, LIT(req), T0, chain.data, chain.len,
                                (const uint8_t *)key_label_pem, sizeof key_label_pem - 1,
                                &out),
             PKI_RESULT_KEY_DECODE);
  CHECK_CODE(test_leaf_reconcile(signer, LIT(req), T0, chain.data, chain.len, other_key.data,
                                other_key.len, &out),
             PKI_RESULT_KEY_MISMATCH);
  CHECK(out == SENTINEL(test_leaf));

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
  leaf_free(a);
  leaf_free(b);
}

static void test_bundle(const pki_signer *signer) {
  pki_bundle *bundle = NULL, *other = NULL, *out = SENTINEL(pki_bundle), *merged = NULL;
  pki_buffer *pem = NULL, *buf = SENTINEL(pki_buffer), *pins = NULL;
  pki_buffer *fp = SENTINEL(pki_buffer), *fp2 = NULL, *pin = NULL;
  test_leaf *leaf = NULL;
  pki_bytes chain;
  size_t removed = 7;

  CHECK_OK(pki_signer_bundle(signer, &bundle));
  CHECK_OK(pki_bundle_export(bundle, PKI_BUNDLE_PEM, &pem));

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

  CHECK_CODE(pki_bundle_export(NULL, PKI_BUNDLE_PEM, &buf), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_export(bundle, PKI_BUNDLE_PEM, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_export(bundle, 4, &buf), PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_bundle_merge(NULL, bundle, &out), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_merge(bundle, NULL, &out), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_merge(bundle, bundle, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_prune_expired(NULL, T0, &out, &removed), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_prune_expired(bundle, T0, NULL, &removed), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_prune_expired(bundle, T0, &out, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_prune_expired(bundle, INT64_MAX, &out, &removed), PKI_RESULT_TIME);
  CHECK_CODE(pki_bundle_export(NULL, PKI_BUNDLE_FINGERPRINT, &fp), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_export(bundle, PKI_BUNDLE_FINGERPRINT, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_export(NULL, PKI_BUNDLE_ROOT_PIN, &fp), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_export(bundle, PKI_BUNDLE_ROOT_PIN, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_export(NULL, PKI_BUNDLE_SPKI_PINS, &buf), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_bundle_export(bundle, PKI_BUNDLE_SPKI_PINS, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK(fp == SENTINEL(pki_buffer));
  fp = NULL;
  CHECK(out == SENTINEL(pki_bundle) && buf == SENTINEL(pki_buffer) && removed == 7);

  /* The working paths. */
  CHECK_OK(pki_bundle_merge(bundle, bundle, &merged));
  CHECK(pki_bundle_len(merged) == 1);
  CHECK_OK(pki_bundle_export(bundle, PKI_BUNDLE_FINGERPRINT, &fp));
  CHECK_OK(pki_bundle_export(merged, PKI_BUNDLE_FINGERPRINT, &fp2));
  CHECK(pki_buffer_data(fp).len == 32 && pki_buffer_data(fp2).len == 32 &&
        memcmp(pki_buffer_data(fp).data, pki_buffer_data(fp2).data, 32) == 0);
  CHECK_OK(pki_bundle_export(bundle, PKI_BUNDLE_ROOT_PIN, &pin));
  CHECK_OK(pki_bundle_export(bundle, PKI_BUNDLE_SPKI_PINS, &pins));
  CHECK(pki_buffer_data(pins).len == 32);
  CHECK_OK(pki_bundle_prune_expired(bundle, T0 + 1000 * DAY, &out, &removed));
  CHECK(removed == 1 && pki_bundle_len(out) == 0);
  pki_bundle_free(out);

  /* A bundle without a self-signed root has no root pin. */
  CHECK_OK(test_leaf_reconcile(signer, LIT(req), T0, NULL, 0, NULL, 0, &leaf));
  chain = leaf_chain_pem(leaf);
  CHECK_OK(pki_bundle_from_pem(chain.data, chain.len, &other));
  CHECK_CODE(pki_bundle_export(other, PKI_BUNDLE_ROOT_PIN, &buf), PKI_RESULT_NO_ROOT);

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

  leaf_free(leaf);
  pki_bundle_free(other);
  pki_bundle_free(merged);
  pki_buffer_free(pins);
  pki_buffer_free(fp);
  pki_buffer_free(fp2);
  pki_buffer_free(pin);
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
  CHECK_CODE(secret_get(NULL, LIT("tls.crt"), &value), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_secret_set(good, NULL, 3, value.data, 0), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_secret_entry(good, 0, NULL, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(secret_get(good, LIT("nope"), &value), PKI_RESULT_NOT_FOUND);

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
  CHECK_OK(secret_get(good, LIT("tls.crt"), &value));
  CHECK_OK(pki_secret_set(broken, LIT("tls.crt"), value.data, value.len));
  CHECK_OK(pki_secret_set(broken, LIT("tls.key"), (const uint8_t *)"", 0));
  CHECK_CODE(pki_signer_from_secret(broken, &s), PKI_RESULT_CORRUPT_STATE);
  CHECK_OK(secret_get(good, LIT("tls.key"), &value));
  CHECK_OK(pki_secret_set(broken, LIT("tls.key"), value.data, value.len));
  CHECK_OK(pki_secret_set(broken, LIT("pki-state.json"), garbage, sizeof garbage));
  CHECK_CODE(pki_signer_from_secret(broken, &s), PKI_RESULT_CORRUPT_STATE);
  CHECK_OK(pki_secret_set(broken, LIT("pki-state.json"), BLIT("{\"version\": 2}")));
  CHECK_CODE(pki_signer_from_secret(broken, &s), PKI_RESULT_UNSUPPORTED_STATE_VERSION);
  CHECK_OK(secret_get(good, LIT("pki-state.json"), &value));
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
  pki_store *store = NULL;
  test_last_error();
  test_null_frees_and_getters();
  CHECK_OK(pki_store_open(LIT("memory:"), NULL, 0, &store));
  test_signer(store, &signer);
  test_request(signer);
  test_leaf_pairs(signer);
  test_bundle(signer);
  test_secret(signer);
  pki_signer_free(signer);
  pki_store_free(store);
  return check_summary("misuse");
}
