/*
 * What a C consumer loads: one consistent snapshot of a leaf's chain and
 * key and the trust bundle from a directory store, its token equal to the
 * signer's bundle fingerprint, a key of another generation refused, and the
 * consumer's acknowledgement through pki_document_step's "ack".
 *
 * Usage: snapshot DIR   (DIR: a writable scratch directory)
 */
#include <time.h>

#include "check.h"

#define LEAF "{\"leaves\": [{\"request\": {\"name\": \"web\", \"kind\": \"server\", " \
             "\"dns_names\": [\"web.test\"]}}]}"
#define DRILL "{\"forced\": {\"reason\": \"drill\"}, \"allow_trust_break\": \"test\"}"

static char path_buf[4][1024];

static const char *at(int slot, const char *dir, const char *rel) {
  snprintf(path_buf[slot], sizeof path_buf[slot], "%s/%s", dir, rel);
  return path_buf[slot];
}

static pki_result load(const char *cert, const char *key, const char *bundle,
                       test_snapshot **out) {
  return test_snapshot_load(cert, strlen(cert), key, strlen(key), bundle, strlen(bundle), out);
}

/* The stored signer's bundle fingerprint as lowercase hex. */
static void bundle_hex(const pki_store *store, char out[65]) {
  pki_signer *signer = NULL;
  pki_bundle *bundle = NULL;
  pki_buffer *fp = NULL;
  pki_bytes b;
  size_t i;
  out[0] = '\0';
  CHECK((signer = stored_signer(store, "signer")) != NULL);
  CHECK_OK(pki_signer_bundle(signer, &bundle));
  CHECK_OK(pki_bundle_export(bundle, PKI_BUNDLE_FINGERPRINT, &fp));
  b = pki_buffer_data(fp);
  CHECK(b.len == 32);
  for (i = 0; i < b.len && i < 32; i++) {
    snprintf(out + 2 * i, 3, "%02x", b.data[i]);
  }
  pki_buffer_free(fp);
  pki_bundle_free(bundle);
  pki_signer_free(signer);
}

static pki_buffer *step(const pki_store *store, const char *input, int64_t now) {
  pki_buffer *s = NULL;
  CHECK_OK(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), input, strlen(input), now, &s));
  return s;
}

int main(int argc, char **argv) {
  const char *dir;
  pki_store *store = NULL;
  pki_buffer *s = NULL;
  test_snapshot *snap = NULL, *other = NULL;
  char want[65], ack[256];
  int64_t now = (int64_t)time(NULL);
  pki_bytes fp;
  FILE *f;

  if (argc != 2) {
    fprintf(stderr, "usage: snapshot DIR\n");
    return 2;
  }
  dir = at(3, argv[1], "store");
  CHECK_OK(pki_store_open(dir, strlen(dir), NULL, 0, &store));
  CHECK_OK(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"),
                             LIT("{\"common_name\": \"service-ca\"}"), now, &s));
  pki_buffer_free(s);
  pki_buffer_free(step(store, LEAF, now));
  s = step(store, "{}", now);
  bundle_hex(store, want);
  pki_buffer_free(s);

  /* One snapshot: chain, key and bundle, with the bundle's token. */
  CHECK_OK(load(at(0, dir, "certs/web/tls.crt"), at(1, dir, "certs/web/tls.key"),
                at(2, dir, "ca-bundle.crt"), &snap));
  if (check_failures > 0) {
    return check_summary("snapshot");
  }
  CHECK(snapshot_chain_pem(snap).len > 0);
  CHECK(strstr((const char *)snapshot_key_pem(snap).data, "PRIVATE KEY") != NULL);
  CHECK(strstr((const char *)snapshot_bundle_pem(snap).data, "CERTIFICATE") != NULL);
  fp = snapshot_fingerprint(snap);
  CHECK(fp.len == 64 && strcmp((const char *)fp.data, want) == 0);

  /* The consumer acknowledges it; again, nothing is written. */
  snprintf(ack, sizeof ack, "{\"ack\": {\"consumer\": \"c-client\", \"fingerprint\": \"%s\"}}",
           (const char *)fp.data);
  s = step(store, ack, now);
  CHECK(step_changed(s));
  CHECK(step_count(s, "acknowledged") == 1);
  pki_buffer_free(s);
  s = step(store, ack, now);
  CHECK(!step_changed(s));
  pki_buffer_free(s);
  /* A bundle never published is refused; "ack" goes alone. */
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"),
                             LIT("{\"ack\": {\"consumer\": \"c\", \"fingerprint\": "
                                 "\"0000000000000000000000000000000000000000000000000000000000000000\"}}"),
                             now, &s),
             PKI_RESULT_UNKNOWN_BUNDLE);
  CHECK_CODE(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"),
                             LIT("{\"ack\": {\"consumer\": \"c\", \"fingerprint\": \"ab\"}, "
                                 "\"allow_trust_break\": \"x\"}"),
                             now, &s),
             PKI_RESULT_INVALID_ARGUMENT);

  /* After a rotation the certificate and key moved together: a snapshot
   * never pairs them across generations. Here a key of the previous
   * generation beside the new chain is refused. */
  f = fopen(at(0, argv[1], "old.key"), "wb");
  CHECK(f != NULL);
  if (f) {
    fwrite(snapshot_key_pem(snap).data, 1, snapshot_key_pem(snap).len, f);
    fclose(f);
  }
  pki_buffer_free(step(store, DRILL, now));
  CHECK_CODE(load(at(0, dir, "certs/web/tls.crt"), at(1, argv[1], "old.key"),
                  at(2, dir, "ca-bundle.crt"), &other),
             PKI_RESULT_KEY_MISMATCH);
  CHECK_OK(load(at(0, dir, "certs/web/tls.crt"), at(1, dir, "certs/web/tls.key"),
                at(2, dir, "ca-bundle.crt"), &other));
  CHECK(strcmp((const char *)snapshot_fingerprint(other).data,
               (const char *)snapshot_fingerprint(snap).data) != 0);
  CHECK_CODE(load(at(0, dir, "certs/missing/tls.crt"), at(1, dir, "certs/web/tls.key"),
                  at(2, dir, "ca-bundle.crt"), &other),
             PKI_RESULT_STORE);
  CHECK_CODE(test_snapshot_load(NULL, 3, "a", 1, "b", 1, &other), PKI_RESULT_NULL_PARAMETER);
  CHECK(snapshot_fingerprint(NULL).len == 0);

  snapshot_free(other);
  snapshot_free(snap);
  snapshot_free(NULL);
  pki_store_free(store);
  return check_summary("snapshot");
}
