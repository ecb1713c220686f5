/*
 * A kube:// store through the C API, on a real kube-apiserver (started by
 * the Rust test that runs this program): opened with the `kubeconfig_file`
 * option, a signer created, stepped through its rotation and read back
 * by a second handle (another replica, say) at the step's revision. An
 * account that may not read Secrets is refused (PKI_RESULT_STORE, a
 * message naming the resource) by the first request that needs them:
 * the opening of the store contacts the server but reads no Secret.
 *
 * Usage: kube URL ADMIN_KUBECONFIG READER_KUBECONFIG
 */
#include "check.h"

/* 2026-01-01T00:00:00Z */
#define T0 ((int64_t)1767225600)
#define DAY ((int64_t)86400)
#define HOST "web.ns.svc"
#define SERVICE_CA "{\"common_name\": \"service-ca\", \"key_type\": \"p256\"}"
/* The server leaf `web` for HOST, for 365 days. */
#define LEAF_WEB                                                                        \
  "{\"leaves\": [{\"request\": {\"name\": \"web\", \"kind\": \"server\", "           \
  "\"dns_names\": [\"" HOST "\"], \"lifetime_seconds\": 31536000}}]}"

static const char *last_error(void) {
  static char msg[1024];
  size_t written = 0;
  msg[0] = '\0';
  pki_last_error(msg, sizeof msg, &written);
  return msg;
}

static void stop_if_failed(void) {
  if (check_failures > 0) {
    fprintf(stderr, "stopping after the first failures\n");
    exit(check_summary("kube"));
  }
}

static int bytes_equal(pki_bytes a, pki_bytes b) {
  return a.len == b.len && (a.len == 0 || memcmp(a.data, b.data, a.len) == 0);
}

/* Opens URL with KUBECONFIG as the `kubeconfig_file` option. */
static pki_result open_store(const char *url, const char *kubeconfig, pki_store **out) {
  text options = {0};
  pki_result r;
  text_add(&options, LIT("{\"kubeconfig_file\": "));
  text_json(&options, kubeconfig, strlen(kubeconfig));
  text_add(&options, LIT(", \"connect_timeout_seconds\": 10}"));
  r = pki_store_open(url, strlen(url), options.data, options.len, out);
  text_free(&options);
  return r;
}

/* Steps the signer with `input` (NULL: the periodic step) at `now`. */
static pki_buffer *step(const pki_store *store, const char *input, int64_t now) {
  pki_buffer *out = NULL;
  CHECK_OK(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), input,
                             input ? strlen(input) : 0, now, &out));
  stop_if_failed();
  return out;
}

int main(int argc, char **argv) {
  const char *url, *admin, *reader;
  pki_store *store = NULL, *replica = NULL, *refused = NULL;
  pki_buffer *created = NULL, *issued, *quiet, *rotated, *rev = NULL, *status = NULL;
  pki_signer *loaded = NULL;
  pki_bundle *bundle = NULL;
  int64_t t_rotate = T0 + 395 * DAY + 1;

  if (argc != 4) {
    fprintf(stderr, "usage: kube URL ADMIN_KUBECONFIG READER_KUBECONFIG\n");
    return 2;
  }
  url = argv[1];
  admin = argv[2];
  reader = argv[3];

  CHECK_OK(open_store(url, admin, &store));
  stop_if_failed();
  CHECK_OK(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"), LIT(SERVICE_CA), T0, &created));
  stop_if_failed();
  CHECK(step_changed(created));
  CHECK_CODE(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"), LIT(SERVICE_CA), T0, &rev),
             PKI_RESULT_ALREADY_INITIALIZED);
  CHECK(rev == NULL);

  /* The reader may not read Secrets: the signer there is refused to it. */
  CHECK_OK(open_store(url, reader, &refused));
  stop_if_failed();
  CHECK_CODE(pki_signer_load(refused, LIT("signer"), &loaded, NULL), PKI_RESULT_STORE);
  CHECK(loaded == NULL);
  CHECK(strstr(last_error(), "secrets") != NULL);
  pki_store_free(refused);

  /* The leaf is issued; nothing else is due ten days in (no write). */
  issued = step(store, LEAF_WEB, T0);
  CHECK(step_changed(issued) && step_events(issued) == 1);
  quiet = step(store, NULL, T0 + 10 * DAY);
  CHECK(!step_changed(quiet));
  CHECK(bytes_equal(step_revision(quiet), step_revision(issued)));

  /* Renewed when due, then rotated at the first second less than M is
   * left: the leaf re-issued under the new CA. */
  pki_buffer_free(step(store, NULL, T0 + 292 * DAY));
  rotated = step(store, NULL, t_rotate);
  CHECK(step_changed(rotated) && step_count(rotated, "rotated") == 1);
  CHECK(strstr(step_status_at(rotated), "\"rotations\":1") != NULL);

  /* Another handle reads what the step wrote, from the server. */
  CHECK_OK(open_store(url, admin, &replica));
  stop_if_failed();
  CHECK_OK(pki_signer_load(replica, LIT("signer"), &loaded, &rev));
  stop_if_failed();
  CHECK(bytes_equal(pki_buffer_data(rev), step_revision(rotated)));
  CHECK_OK(pki_signer_bundle(loaded, &bundle));
  CHECK(pki_bundle_len(bundle) == 2); /* new CA, bridge A */
  CHECK_OK(pki_document_read(replica, PKI_KIND_SIGNER, LIT("signer"), PKI_SIGNER_STATUS, t_rotate,
                             &status));
  CHECK(status != NULL && strstr(jtext(status), "\"rotations\":1") != NULL);
  /* And finds nothing more to do at the same time. */
  pki_buffer_free(quiet);
  quiet = step(replica, NULL, t_rotate);
  CHECK(!step_changed(quiet));

  pki_buffer_free(quiet);
  pki_buffer_free(status);
  pki_bundle_free(bundle);
  pki_signer_free(loaded);
  pki_buffer_free(rev);
  pki_buffer_free(rotated);
  pki_buffer_free(issued);
  pki_buffer_free(created);
  pki_store_free(replica);
  pki_store_free(store);
  return check_summary("kube");
}
