/*
 * The CA set through the C API, on a directory store: a short GEP-18
 * rotation of a cluster CA (with its new client CA) to completed, a second
 * one aborted, and bad input (an unknown CA or target, an ack of the
 * previous step's real fingerprint, an advance with missing acks, an abort
 * that would strand a target, abort twice, a failed target) each refused
 * with its typed code while every file and link of the store stays exactly
 * as it was.
 *
 * Usage: set DIR   (DIR: a writable scratch directory)
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

/* 2026-01-01T00:00:00Z */
#define T0 ((int64_t)1767225600)
#define DAY ((int64_t)86400)

static char root[1024];

static void stop_if_failed(void) {
  if (check_failures > 0) {
    fprintf(stderr, "stopping after the first failures\n");
    exit(check_summary("set"));
  }
}

static const char *last_error(void) {
  static char msg[1024];
  size_t written = 0;
  msg[0] = '\0';
  pki_last_error(msg, sizeof msg, &written);
  return msg;
}

/* What a directory holds, combined so that the order readdir lists
 * entries in does not matter: the count, and the sum and xor of one
 * FNV-1a hash per entry over its relative path, kind and contents (a
 * link's target). The lock file is skipped: a reader may take it. */
typedef struct {
  uint64_t sum, mix;
  size_t count;
} tree_digest;

static uint64_t fnv(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  size_t i;
  for (i = 0; i < len; i++) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

static void digest_dir(const char *rel, tree_digest *d) {
  char path[2048], child[2048], buf[4096];
  DIR *dir;
  struct dirent *e;
  if (snprintf(path, sizeof path, "%s%s", root, rel) >= (int)sizeof path) {
    d->count = (size_t)-1;
    return;
  }
  dir = opendir(path);
  if (dir == NULL) {
    fprintf(stderr, "cannot list %s\n", path);
    d->count = (size_t)-1;
    return;
  }
  while ((e = readdir(dir)) != NULL) {
    struct stat st;
    uint64_t h = 14695981039346656037ULL;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
        strcmp(e->d_name, ".lock") == 0) {
      continue;
    }
    if (snprintf(child, sizeof child, "%s/%s", rel, e->d_name) >= (int)sizeof child ||
        snprintf(path, sizeof path, "%s%s", root, child) >= (int)sizeof path ||
        lstat(path, &st) != 0) {
      d->count = (size_t)-1;
      continue;
    }
    h = fnv(h, child, strlen(child) + 1);
    if (S_ISLNK(st.st_mode)) {
      ssize_t n = readlink(path, buf, sizeof buf);
      h = fnv(h, "l", 1);
      h = fnv(h, buf, n > 0 ? (size_t)n : 0);
    } else if (S_ISDIR(st.st_mode)) {
      h = fnv(h, "d", 1);
      digest_dir(child, d);
    } else {
      FILE *f = fopen(path, "rb");
      size_t n;
      h = fnv(h, "f", 1);
      if (f == NULL) {
        d->count = (size_t)-1;
        continue;
      }
      while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        h = fnv(h, buf, n);
      }
      fclose(f);
    }
    d->sum += h;
    d->mix ^= h;
    d->count++;
  }
  closedir(dir);
}

static tree_digest snapshot(void) {
  tree_digest d = {0, 0, 0};
  digest_dir("", &d);
  return d;
}

/* Expects `expr` to return `want` and the store to be exactly as before. */
#define REFUSED(expr, want)                                              \
  do {                                                                   \
    tree_digest before_ = snapshot();                                    \
    tree_digest after_;                                                  \
    CHECK_CODE(expr, want);                                              \
    after_ = snapshot();                                                 \
    CHECK(before_.count > 0 && before_.count == after_.count &&          \
          before_.sum == after_.sum && before_.mix == after_.mix);       \
  } while (0)

/* Copies the status JSON's string value that follows `key` (the first
 * occurrence) into out; returns 0 when found. */
static int status_value(const pki_store *store, int64_t now, const char *key, char *out,
                        size_t out_len) {
  pki_buffer *json = NULL;
  const char *text, *at, *end;
  int rc = 1;
  if (pki_document_read(store, PKI_KIND_SET, LIT("set"), PKI_SET_STATUS, now, &json) != PKI_RESULT_OK) {
    return 1;
  }
  /* Textual buffers are NUL-terminated after their length. */
  text = (const char *)pki_buffer_data(json).data;
  at = text == NULL ? NULL : strstr(text, key);
  if (at != NULL) {
    at += strlen(key);
    end = strchr(at, '"');
    if (end != NULL && (size_t)(end - at) < out_len) {
      memcpy(out, at, (size_t)(end - at));
      out[end - at] = '\0';
      rc = 0;
    }
  }
  pki_buffer_free(json);
  return rc;
}

/* The fingerprint `target` must acknowledge now. */
static void fingerprint_of(const pki_store *store, int64_t now, const char *target, char *out,
                           size_t out_len) {
  char key[256];
  snprintf(key, sizeof key, "\"%s\":{\"fingerprint\":\"", target);
  CHECK(status_value(store, now, key, out, out_len) == 0);
  CHECK(strncmp(out, "sha256:", 7) == 0);
}

static int step_is(const pki_store *store, int64_t now, const char *want) {
  char step[64];
  return status_value(store, now, "\"step\":\"", step, sizeof step) == 0 &&
         strcmp(step, want) == 0;
}

/* One step of the set with `input` (JSON text, NULL: nothing); the step is
 * checked to say what the status says, and freed. */
static pki_result set_step(const pki_store *store, int64_t now, const char *input) {
  pki_buffer *step = NULL;
  pki_result r = pki_document_step(store, PKI_KIND_SET, LIT("set"), input, input ? strlen(input) : 0, now, &step);
  if (r == PKI_RESULT_OK) {
    char from_step[64], from_read[64];
    pki_buffer *json = NULL;
    CHECK(json_string(step_status_at(step), "step", from_step,
                      sizeof from_step));
    CHECK_OK(pki_document_read(store, PKI_KIND_SET, LIT("set"), PKI_SET_STATUS, now, &json));
    CHECK(json_string((const char *)pki_buffer_data(json).data, "step", from_read,
                      sizeof from_read) &&
          strcmp(from_step, from_read) == 0);
    pki_buffer_free(json);
  }
  pki_buffer_free(step);
  return r;
}

/* The ack of `target` with fingerprint `fp`, as JSON. */
static const char *ack_input(const char *target, const char *fp) {
  static char input[512];
  snprintf(input, sizeof input, "{\"ack\": {\"target\": \"%s\", \"fingerprint\": \"%s\"}}",
           target, fp);
  return input;
}

static void ack(const pki_store *store, int64_t now, const char *target) {
  char fp[128];
  fingerprint_of(store, now, target, fp, sizeof fp);
  CHECK_OK(set_step(store, now, ack_input(target, fp)));
}

static void ack_all(const pki_store *store, int64_t now) {
  ack(store, now, "control-plane");
  ack(store, now, "node-1");
}

int main(int argc, char **argv) {
  pki_store *store = NULL;
  pki_buffer *step = NULL;
  char stale[128], path[1200];
  int64_t now = T0;
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  snprintf(root, sizeof root, "%s/set", argv[1]);
  CHECK_OK(pki_store_open(root, strlen(root), NULL, 0, &store));
  stop_if_failed();

  CHECK_OK(pki_document_create(store, PKI_KIND_SET, LIT("set"),
                          LIT("{\"cas\": [{\"name\": \"cluster\", \"roles\": \"serving+client\"}],"
                              " \"lifetime_seconds\": 63072000}"),
                          now, &step));
  CHECK(step_changed(step) && strstr(step_status_at(step),
                                         "\"step\":\"idle\"") != NULL);
  pki_buffer_free(step);
  CHECK_OK(set_step(store, now,
                    "{\"issue\": {\"name\": \"api\", \"ca\": \"cluster\", \"serving\": true, "
                    "\"dns_names\": [\"api.example\"], \"target\": \"control-plane\"}}"));
  CHECK_OK(set_step(store, now,
                    "{\"issue\": {\"name\": \"kubelet\", \"ca\": \"cluster\", \"client\": true, "
                    "\"target\": \"node-1\"}}"));
  CHECK_OK(set_step(store, now, "{\"target\": {\"name\": \"node-1\", \"trusts\": [\"cluster\"]}}"));
  CHECK_OK(set_step(store, now,
                    "{\"target\": {\"name\": \"control-plane\", \"client_ca\": [\"cluster\"]}}"));
  CHECK(step_is(store, now, "idle"));
  stop_if_failed();

  /* Nothing runs yet. */
  REFUSED(set_step(store, now,
                   "{\"issue\": {\"name\": \"x\", \"ca\": \"nope\", \"serving\": true, "
                   "\"dns_names\": [\"x.example\"], \"target\": \"t\"}}"),
          PKI_RESULT_SET_UNKNOWN_CA);
  REFUSED(set_step(store, now, "{\"target\": {\"name\": \"node-1\", \"trusts\": [\"nope\"]}}"),
          PKI_RESULT_SET_UNKNOWN_CA);
  REFUSED(set_step(store, now, ack_input("ghost", "sha256:00")), PKI_RESULT_SET_UNKNOWN_TARGET);
  REFUSED(set_step(store, now, "{\"advance\": {}}"), PKI_RESULT_SET_WRONG_STEP);
  REFUSED(set_step(store, now, "{\"abort\": {}}"), PKI_RESULT_SET_WRONG_STEP);
  REFUSED(set_step(store, now, "{\"fail\": {\"target\": \"node-1\", \"reason\": \"x\"}}"),
          PKI_RESULT_SET_WRONG_STEP);
  REFUSED(pki_document_step(NULL, PKI_KIND_SET, LIT("set"), LIT("{\"fail\": {\"target\": \"node-1\", \"reason\": \"x\"}}"),
                       now, &step),
          PKI_RESULT_NULL_PARAMETER);
  REFUSED(pki_document_step(store, PKI_KIND_SET, NULL, 3, LIT("{\"retry\": {\"target\": \"node-1\"}}"), now, &step),
          PKI_RESULT_NULL_PARAMETER);
  REFUSED(set_step(store, now, "{\"retry\": {\"target\": \"node-1\", \"why\": \"x\"}}"),
          PKI_RESULT_INVALID_ARGUMENT);
  REFUSED(set_step(store, now, "{\"rotate\": {}}"), PKI_RESULT_INVALID_ARGUMENT);
  /* No request: a report, the store unchanged. */
  REFUSED(set_step(store, now, NULL), PKI_RESULT_OK);
  /* What node-1 loaded while idle: a real fingerprint, of the wrong step
   * once the rotation starts. */
  fingerprint_of(store, now, "node-1", stale, sizeof stale);

  /* t1: start-ca-rotation. */
  now += 60 * DAY;
  CHECK_OK(pki_document_step(store, PKI_KIND_SET, LIT("set"), LIT("{\"start\": {\"reason\": \"yearly\"}}"), now,
                        &step));
  /* A new cluster CA, and a separate new client CA for its client certs. */
  CHECK(step_changed(step) && step_count(step, "new-ca") == 2);
  pki_buffer_free(step);
  CHECK(step_is(store, now, "trust-both"));
  stop_if_failed();
  REFUSED(set_step(store, now, "{\"start\": {\"reason\": \"again\"}}"), PKI_RESULT_SET_WRONG_STEP);
  REFUSED(set_step(store, now, ack_input("node-1", stale)), PKI_RESULT_SET_STALE_FINGERPRINT);
  CHECK(strstr(last_error(), "trust-both") != NULL);
  REFUSED(set_step(store, now, "{\"advance\": {}}"), PKI_RESULT_SET_STEP_BLOCKED);
  CHECK(strstr(last_error(), "node-1") != NULL);
  REFUSED(set_step(store, now, "{\"fail\": {\"target\": \"ghost\", \"reason\": \"x\"}}"),
          PKI_RESULT_SET_UNKNOWN_TARGET);
  REFUSED(set_step(store, now, "{\"fail\": {\"target\": \"node-1\", \"reason\": \"\"}}"),
          PKI_RESULT_SET_INVALID);
  REFUSED(set_step(store, now, "{\"retry\": {\"target\": \"ghost\"}}"),
          PKI_RESULT_SET_UNKNOWN_TARGET);
  REFUSED(set_step(store, now, "{\"retry\": {\"target\": \"node-1\"}}"), PKI_RESULT_SET_INVALID);

  /* The control plane loads first: the kubelet's certificate moves to the
   * new client CA, so node-1's fingerprint changes before it acks. */
  ack(store, now, "control-plane");
  fingerprint_of(store, now, "node-1", stale, sizeof stale);
  ack(store, now, "node-1");

  /* A failed target blocks, is retried to pending, and must ack again. */
  CHECK_OK(set_step(store, now,
                    "{\"fail\": {\"target\": \"node-1\", \"reason\": \"puppet apply failed\"}}"));
  REFUSED(set_step(store, now, ack_input("node-1", stale)), PKI_RESULT_SET_TARGET_FAILED);
  REFUSED(set_step(store, now, "{\"advance\": {}}"), PKI_RESULT_SET_STEP_BLOCKED);
  CHECK(strstr(last_error(), "puppet apply failed") != NULL);
  CHECK_OK(set_step(store, now, "{\"retry\": {\"target\": \"node-1\"}}"));
  REFUSED(set_step(store, now, "{\"advance\": {}}"), PKI_RESULT_SET_STEP_BLOCKED);
  ack(store, now, "node-1");

  /* t2: complete-ca-rotation. Advancing `from` a step already left is
   * nothing to do; from another step, refused. */
  now += DAY;
  CHECK_OK(set_step(store, now, "{\"advance\": {\"from\": \"trust-both\"}}"));
  CHECK(step_is(store, now, "update-certs"));
  REFUSED(set_step(store, now, "{\"advance\": {\"from\": \"trust-both\"}}"), PKI_RESULT_OK);
  REFUSED(set_step(store, now, "{\"advance\": {\"from\": \"trust-new\"}}"),
          PKI_RESULT_SET_WRONG_STEP);
  fingerprint_of(store, now, "control-plane", stale, sizeof stale);
  ack_all(store, now);
  CHECK_OK(set_step(store, now, "{\"advance\": {}}"));
  CHECK(step_is(store, now, "trust-new"));
  stop_if_failed();
  /* control-plane's update-certs files are the previous step's. */
  REFUSED(set_step(store, now, ack_input("control-plane", stale)),
          PKI_RESULT_SET_STALE_FINGERPRINT);
  /* Rolling forward destroys the old CA keys: not while a target has not
   * loaded trust-new, unless overridden with a reason. */
  REFUSED(set_step(store, now, "{\"abort\": {}}"), PKI_RESULT_SET_ABORT_STRANDS);
  ack(store, now, "control-plane");
  REFUSED(set_step(store, now, "{\"abort\": {}}"), PKI_RESULT_SET_ABORT_STRANDS);
  CHECK(strstr(last_error(), "node-1") != NULL && strstr(last_error(), "control-plane") == NULL);
  REFUSED(set_step(store, now, "{\"abort\": {\"override_reason\": \" \"}}"),
          PKI_RESULT_SET_INVALID);
  REFUSED(pki_document_step(store, PKI_KIND_SET, LIT("set"), LIT("{\"abort\": {\"override_reason\": \"x\"}}"), now,
                       NULL),
          PKI_RESULT_NULL_PARAMETER);
  CHECK_OK(set_step(store, now, "{\"abort\": {\"override_reason\": \"node-1 is decommissioned\"}}"));
  CHECK(step_is(store, now, "completed"));
  CHECK(snprintf(path, sizeof path, "%s/set/cas/cluster/next-ca.key", root) <
        (int)sizeof path);
  CHECK(access(path, F_OK) != 0);
  REFUSED(set_step(store, now, "{\"abort\": {}}"), PKI_RESULT_SET_WRONG_STEP);
  REFUSED(set_step(store, now, "{\"abort\": {\"override_reason\": \"again\"}}"),
          PKI_RESULT_SET_WRONG_STEP);
  stop_if_failed();

  /* A second rotation, aborted in trust-both: reverting, then idle. */
  now += DAY;
  CHECK_OK(set_step(store, now, "{\"start\": {\"reason\": \"practice abort\"}}"));
  ack(store, now, "control-plane");
  CHECK_OK(set_step(store, now, "{\"abort\": {}}"));
  CHECK(step_is(store, now, "reverting"));
  REFUSED(set_step(store, now, "{\"abort\": {}}"), PKI_RESULT_SET_WRONG_STEP);
  CHECK(strstr(last_error(), "already reverting") != NULL);
  REFUSED(set_step(store, now, "{\"advance\": {}}"), PKI_RESULT_SET_STEP_BLOCKED);
  ack_all(store, now);
  CHECK_OK(set_step(store, now, "{\"advance\": {}}"));
  CHECK(step_is(store, now, "idle"));
  REFUSED(set_step(store, now, "{\"abort\": {}}"), PKI_RESULT_SET_WRONG_STEP);

  /* The plan: each target's files and the fingerprint it acknowledges. */
  {
    pki_buffer *plan = NULL;
    char fp[128];
    CHECK_OK(pki_document_read(store, PKI_KIND_SET, LIT("set"), PKI_SET_PLAN, now, &plan));
    CHECK(strstr((const char *)pki_buffer_data(plan).data, "\"trust/cluster.crt\"") != NULL);
    fingerprint_of(store, now, "node-1", fp, sizeof fp);
    CHECK(strstr((const char *)pki_buffer_data(plan).data, fp) != NULL);
    pki_buffer_free(plan);
    CHECK_CODE(pki_document_read(store, PKI_KIND_SET, LIT("set"), 2, now, &plan), PKI_RESULT_INVALID_ARGUMENT);
    CHECK_CODE(pki_document_read(store, PKI_KIND_SET, LIT("other"), PKI_SET_STATUS, now, &plan),
               PKI_RESULT_NOT_INITIALIZED);
  }

  pki_store_free(store);
  return check_summary("set");
}
