/*
 * The last error is per thread: threads that fail differently at the same
 * time each read their own message, and handles that are immutable
 * (signer, bundle) are shared between threads, with one leaf request. A store is
 * shared too: threads stepping one document at the rotation point rotate
 * it once.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "check.h"

/* 2026-01-01T00:00:00Z */
#define T0 ((int64_t)1767225600)
#define DAY ((int64_t)86400)
#define THREADS 8
#define ROUNDS 20

static pki_signer *shared_signer;
static const char shared_request[] =
    "{\"kind\": \"server+client\", \"dns_names\": [\"threads.example\"]}";

struct result {
  int ok;
  char message[256];
};

static void *worker(void *arg) {
  struct result *res = (struct result *)arg;
  int round;
  res->ok = 1;
  for (round = 0; round < ROUNDS; round++) {
    test_leaf *leaf = NULL;
    pki_bundle *bundle = NULL;
    size_t written = 0;
    /* A failure whose message is specific to this thread and round... */
    char cn[64];
    int n = snprintf(cn, sizeof cn, "thread-%p-%d", (void *)res, round);
    if (test_leaf_reconcile(NULL, cn, (size_t)n, T0, NULL, 0, NULL, 0, NULL) !=
        PKI_RESULT_NULL_PARAMETER) {
      res->ok = 0;
    }
    /* ...then work on shared handles from every thread at once... */
    if (test_leaf_reconcile(shared_signer, LIT(shared_request), T0 + round * DAY, NULL, 0, NULL,
                           0, &leaf) != PKI_RESULT_OK ||
        pki_signer_bundle(shared_signer, &bundle) != PKI_RESULT_OK) {
      res->ok = 0;
    }
    /* ...which succeeded, so this thread's message is clear again. */
    if (pki_last_error_length() != 0) {
      res->ok = 0;
    }
    if (pki_bundle_from_pem((const uint8_t *)"x", 1, &bundle) != PKI_RESULT_NO_PEM_BLOCK ||
        pki_last_error(res->message, sizeof res->message, &written) != PKI_RESULT_OK ||
        strstr(res->message, "no PEM block") == NULL) {
      res->ok = 0;
    }
    leaf_free(leaf);
    pki_bundle_free(bundle);
  }
  return NULL;
}

static pki_store *shared_store;
static pthread_barrier_t start_line;

struct stepped {
  int ok;
  int rotated;
  int changed;
};

static void *stepper(void *arg) {
  struct stepped *res = (struct stepped *)arg;
  pki_buffer *step = NULL;
  pthread_barrier_wait(&start_line);
  /* Every thread at the same simulated time, the rotation point. */
  res->ok = pki_document_step(shared_store, PKI_KIND_SIGNER, LIT("signer"), NULL, 0, T0 + 396 * DAY, &step) ==
                PKI_RESULT_OK &&
            step_next_wake(step) == T0 + 790 * DAY + 1;
  res->changed = step_changed(step);
  res->rotated += (int)step_count(step, "rotated");
  pki_buffer_free(step);
  return NULL;
}

static void test_racing_steps(void) {
  pthread_t threads[THREADS];
  struct stepped results[THREADS];
  pki_buffer *created = NULL;
  int i, rotated = 0, changed = 0;

  CHECK_OK(pki_store_open(LIT("memory:"), NULL, 0, &shared_store));
  CHECK_OK(pki_document_create(shared_store, PKI_KIND_SIGNER, LIT("signer"), LIT("{\"common_name\": \"race-ca\"}"),
                             T0, &created));
  pki_buffer_free(created);
  CHECK(pthread_barrier_init(&start_line, NULL, THREADS) == 0);
  memset(results, 0, sizeof results);
  for (i = 0; i < THREADS; i++) {
    CHECK(pthread_create(&threads[i], NULL, stepper, &results[i]) == 0);
  }
  for (i = 0; i < THREADS; i++) {
    CHECK(pthread_join(threads[i], NULL) == 0);
    CHECK(results[i].ok);
    rotated += results[i].rotated;
    changed += results[i].changed;
  }
  CHECK(rotated == 1 && changed == 1);
  pthread_barrier_destroy(&start_line);
  pki_store_free(shared_store);
}

int main(void) {
  pthread_t threads[THREADS];
  struct result results[THREADS];
  pki_store *store = NULL;
  pki_buffer *created = NULL;
  int i;

  CHECK_OK(pki_store_open(LIT("memory:"), NULL, 0, &store));
  CHECK_OK(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"), LIT("{\"common_name\": \"threads-ca\"}"), T0,
                             &created));
  CHECK((shared_signer = stored_signer(store, "signer")) != NULL);
  pki_buffer_free(created);
  pki_store_free(store);

  /* The main thread's own failure stays its own while the others run. */
  CHECK_CODE(pki_bundle_merge(NULL, NULL, NULL), PKI_RESULT_NULL_PARAMETER);
  for (i = 0; i < THREADS; i++) {
    CHECK(pthread_create(&threads[i], NULL, worker, &results[i]) == 0);
  }
  for (i = 0; i < THREADS; i++) {
    CHECK(pthread_join(threads[i], NULL) == 0);
    CHECK(results[i].ok);
  }
  {
    char msg[128];
    size_t written = 0;
    CHECK_OK(pki_last_error(msg, sizeof msg, &written));
    CHECK(strstr(msg, "`first`") != NULL);
  }
  pki_signer_free(shared_signer);
  test_racing_steps();
  return check_summary("threads");
}
