/*
 * The service-CA controller loop through the C API, on a real
 * kube-apiserver (started by the Rust test that runs this program): a
 * signer made in the store, the loop started on a thread of its own with
 * a frozen clock and a notice callback, stopped from the main thread once
 * it holds the leader Lease, and the thread joined (the run returned
 * PKI_RESULT_OK, and no notice came after it). Then the stop's other
 * paths: requested from the notice callback itself, requested before the
 * run (which then returns at once), and the refusals (NULL stop, a
 * location that is not kube://, unknown options, a store without a
 * signer).
 *
 * Usage: controller URL ADMIN_KUBECONFIG   (URL: kube://NAMESPACE/NAME)
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "check.h"

/* 2026-01-01T00:00:00Z */
#define T0 ((int64_t)1767225600)
#define SERVICE_CA "{\"common_name\": \"c-service-ca\", \"key_type\": \"p256\"}"

/* What the notice callback saw, shared with the main thread. */
typedef struct {
  atomic_int notices;
  /* A notice naming this run's identity (the Lease is held). */
  atomic_int leading;
  /* Set once pki_controller_run returned: a notice after it is a bug. */
  atomic_int returned;
  atomic_int late;
  /* When set, the callback requests this stop at the first Lease notice. */
  const pki_controller_stop *stop_on_lease;
} heard;

static void on_notice(void *user_data, const char *message, size_t message_len) {
  heard *h = user_data;
  atomic_fetch_add(&h->notices, 1);
  if (atomic_load(&h->returned)) {
    atomic_fetch_add(&h->late, 1);
  }
  /* NUL-terminated, and `message_len` long. */
  if (strlen(message) == message_len && strstr(message, "c-test-replica") != NULL) {
    atomic_store(&h->leading, 1);
    if (h->stop_on_lease != NULL) {
      pki_controller_stop_request(h->stop_on_lease);
    }
  }
}

/* The options: the admin's kubeconfig, a frozen clock an hour after the
 * signer was made, a short Lease, this test's identity. */
static text options_for(const char *kubeconfig) {
  text options = {0};
  text_add(&options, LIT("{\"kubeconfig_file\": "));
  text_json(&options, kubeconfig, strlen(kubeconfig));
  text_fmt(&options,
           ", \"now\": %lld, \"lease_duration_seconds\": 3, \"resync_seconds\": 30, "
           "\"identity\": \"c-test-replica\", \"connect_timeout_seconds\": 10}",
           (long long)(T0 + 3600));
  return options;
}

/* One run on its own thread. */
typedef struct {
  const char *url;
  const text *options;
  const pki_controller_stop *stop;
  heard *heard;
  pki_result result;
  char error[512];
} run_args;

static void *run_thread(void *arg) {
  run_args *a = arg;
  size_t written = 0;
  a->result = pki_controller_run(a->url, strlen(a->url), a->options->data, a->options->len,
                                 a->stop, on_notice, a->heard);
  a->error[0] = '\0';
  pki_last_error(a->error, sizeof a->error, &written);
  atomic_store(&a->heard->returned, 1);
  return NULL;
}

static void sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}

/* Waits up to `seconds` for *flag; whether it was set. */
static int wait_for(atomic_int *flag, int seconds) {
  int i;
  for (i = 0; i < seconds * 10; i++) {
    if (atomic_load(flag)) {
      return 1;
    }
    sleep_ms(100);
  }
  return atomic_load(flag);
}

/* Starts the loop on a thread, stops it from this one once it leads. */
static void stopped_from_another_thread(const char *url, const text *options) {
  heard h = {0};
  pki_controller_stop *stop = NULL;
  pthread_t thread;
  run_args args;
  int notices_at_return;

  CHECK_OK(pki_controller_stop_new(&stop));
  if (stop == NULL) {
    return;
  }
  memset(&args, 0, sizeof args);
  args.url = url;
  args.options = options;
  args.stop = stop;
  args.heard = &h;
  CHECK(pthread_create(&thread, NULL, run_thread, &args) == 0);
  CHECK(wait_for(&h.leading, 60));
  /* Still running: only the stop ends it. */
  CHECK(!atomic_load(&h.returned));
  CHECK_OK(pki_controller_stop_request(stop));
  /* A second request does nothing. */
  CHECK_OK(pki_controller_stop_request(stop));
  CHECK(wait_for(&h.returned, 30));
  CHECK(pthread_join(thread, NULL) == 0);
  CHECK_CODE(args.result, PKI_RESULT_OK);
  if (args.result != PKI_RESULT_OK) {
    fprintf(stderr, "    run: %s\n", args.error);
  }
  notices_at_return = atomic_load(&h.notices);
  sleep_ms(500);
  CHECK(atomic_load(&h.late) == 0);
  CHECK(atomic_load(&h.notices) == notices_at_return);
  pki_controller_stop_free(stop);
}

/* The callback itself requests the stop: the run returns OK. */
static void stopped_from_the_notice(const char *url, const text *options) {
  heard h = {0};
  pki_controller_stop *stop = NULL;
  CHECK_OK(pki_controller_stop_new(&stop));
  h.stop_on_lease = stop;
  CHECK_OK(pki_controller_run(url, strlen(url), options->data, options->len, stop, on_notice, &h));
  CHECK(atomic_load(&h.leading));
  pki_controller_stop_free(stop);
}

/* A stop requested before the run: it returns at once, without a notice
 * (it does not connect); the options are still checked. */
static void stopped_before_it_ran(const char *url, const text *options) {
  heard h = {0};
  pki_controller_stop *stop = NULL;
  time_t start = time(NULL);
  CHECK_OK(pki_controller_stop_new(&stop));
  CHECK_OK(pki_controller_stop_request(stop));
  CHECK_OK(pki_controller_run(url, strlen(url), options->data, options->len, stop, on_notice, &h));
  CHECK(time(NULL) - start < 5);
  CHECK(atomic_load(&h.notices) == 0);
  CHECK_CODE(pki_controller_run(url, strlen(url), LIT("{\"resync_seconds\": 0}"), stop, NULL, NULL),
             PKI_RESULT_INVALID_ARGUMENT);
  pki_controller_stop_free(stop);
}

static void refusals(const char *empty_url, const text *options) {
  pki_controller_stop *stop = NULL;
  CHECK_CODE(pki_controller_stop_new(NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_controller_stop_request(NULL), PKI_RESULT_NULL_PARAMETER);
  pki_controller_stop_free(NULL);
  CHECK_OK(pki_controller_stop_new(&stop));
  CHECK(stop != NULL);
  CHECK_CODE(pki_controller_run(LIT("kube://pki/x"), NULL, 0, NULL, NULL, NULL),
             PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_controller_run(NULL, 0, NULL, 0, stop, NULL, NULL), PKI_RESULT_NULL_PARAMETER);
  CHECK_CODE(pki_controller_run(LIT("etcd://127.0.0.1:2379/x"), NULL, 0, stop, NULL, NULL),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_controller_run(LIT("/var/lib/pki"), NULL, 0, stop, NULL, NULL),
             PKI_RESULT_INVALID_ARGUMENT);
  CHECK_CODE(pki_controller_run(empty_url, strlen(empty_url), LIT("{\"no_such_option\": 1}"), stop,
                                NULL, NULL),
             PKI_RESULT_INVALID_ARGUMENT);
  /* A store without a signer: refused before the loop starts. */
  CHECK_CODE(pki_controller_run(empty_url, strlen(empty_url), options->data, options->len, stop,
                                NULL, NULL),
             PKI_RESULT_NOT_INITIALIZED);
  pki_controller_stop_free(stop);
}

int main(int argc, char **argv) {
  const char *url, *kubeconfig;
  char empty_url[512];
  pki_store *store = NULL;
  pki_buffer *created = NULL;
  text options, store_options = {0};

  if (argc != 3) {
    fprintf(stderr, "usage: controller URL ADMIN_KUBECONFIG\n");
    return 2;
  }
  url = argv[1];
  kubeconfig = argv[2];
  snprintf(empty_url, sizeof empty_url, "%s-empty", url);
  options = options_for(kubeconfig);

  text_add(&store_options, LIT("{\"kubeconfig_file\": "));
  text_json(&store_options, kubeconfig, strlen(kubeconfig));
  text_add(&store_options, LIT("}"));
  CHECK_OK(pki_store_open(url, strlen(url), store_options.data, store_options.len, &store));
  CHECK_OK(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"), LIT(SERVICE_CA), T0,
                               &created));
  if (check_failures > 0) {
    return check_summary("controller");
  }

  stopped_from_another_thread(url, &options);
  stopped_from_the_notice(url, &options);
  stopped_before_it_ran(empty_url, &options);
  refusals(empty_url, &options);

  pki_buffer_free(created);
  pki_store_free(store);
  text_free(&store_options);
  text_free(&options);
  return check_summary("controller");
}
