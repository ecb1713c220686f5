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
  if (pki_set_status_json(store, now, &json) != PKI_RESULT_OK) {
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

static void ack(const pki_store *store, int64_t now, const char *target) {
  char fp[128];
  fingerprint_of(store, now, target, fp, sizeof fp);
  CHECK_OK(pki_set_ack(store, target, strlen(target), fp, strlen(fp), now));
}

static void ack_all(const pki_store *store, int64_t now) {
  ack(store, now, "control-plane");
  ack(store, now, "node-1");
}

int main(int argc, char **argv) {
  pki_store *store = NULL;
  char stale[128], path[1200];
  int64_t now = T0;
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  snprintf(root, sizeof root, "%s/set", argv[1]);
  CHECK_OK(pki_store_open_dir(root, strlen(root), &store));
  stop_if_failed();

  CHECK_OK(pki_set_create(store, LIT("cluster:serving+client"), 730 * DAY, now));
  CHECK_OK(pki_set_issue(store, LIT("api"), LIT("cluster"), true, false, LIT("api.example"),
                         LIT("control-plane"), now));
  CHECK_OK(pki_set_issue(store, LIT("kubelet"), LIT("cluster"), false, true, LIT(""),
                         LIT("node-1"), now));
  CHECK_OK(pki_set_target(store, LIT("node-1"), LIT("cluster"), NULL, 0, now));
  CHECK_OK(pki_set_target(store, LIT("control-plane"), NULL, 0, LIT("cluster"), now));
  CHECK(step_is(store, now, "idle"));
  stop_if_failed();

  /* Nothing runs yet. */
  REFUSED(pki_set_issue(store, LIT("x"), LIT("nope"), true, false, LIT("x.example"), LIT("t"),
                        now),
          PKI_RESULT_SET_UNKNOWN_CA);
  REFUSED(pki_set_target(store, LIT("node-1"), LIT("nope"), NULL, 0, now),
          PKI_RESULT_SET_UNKNOWN_CA);
  REFUSED(pki_set_ack(store, LIT("ghost"), LIT("sha256:00"), now),
          PKI_RESULT_SET_UNKNOWN_TARGET);
  REFUSED(pki_set_advance(store, NULL, 0, now), PKI_RESULT_SET_WRONG_STEP);
  REFUSED(pki_set_abort(store, now), PKI_RESULT_SET_WRONG_STEP);
  REFUSED(pki_set_fail(store, LIT("node-1"), LIT("x"), now), PKI_RESULT_SET_WRONG_STEP);
  REFUSED(pki_set_fail(NULL, LIT("node-1"), LIT("x"), now), PKI_RESULT_NULL_PARAMETER);
  REFUSED(pki_set_retry(store, NULL, 3, now), PKI_RESULT_NULL_PARAMETER);
  /* What node-1 loaded while idle: a real fingerprint, of the wrong step
   * once the rotation starts. */
  fingerprint_of(store, now, "node-1", stale, sizeof stale);

  /* t1: start-ca-rotation. */
  now += 60 * DAY;
  CHECK_OK(pki_set_start(store, LIT("yearly"), false, now));
  CHECK(step_is(store, now, "trust-both"));
  stop_if_failed();
  REFUSED(pki_set_start(store, LIT("again"), false, now), PKI_RESULT_SET_WRONG_STEP);
  REFUSED(pki_set_ack(store, LIT("node-1"), stale, strlen(stale), now),
          PKI_RESULT_SET_STALE_FINGERPRINT);
  CHECK(strstr(last_error(), "trust-both") != NULL);
  REFUSED(pki_set_advance(store, NULL, 0, now), PKI_RESULT_SET_STEP_BLOCKED);
  CHECK(strstr(last_error(), "node-1") != NULL);
  REFUSED(pki_set_fail(store, LIT("ghost"), LIT("x"), now), PKI_RESULT_SET_UNKNOWN_TARGET);
  REFUSED(pki_set_fail(store, LIT("node-1"), LIT(""), now), PKI_RESULT_SET_INVALID);
  REFUSED(pki_set_retry(store, LIT("ghost"), now), PKI_RESULT_SET_UNKNOWN_TARGET);
  REFUSED(pki_set_retry(store, LIT("node-1"), now), PKI_RESULT_SET_INVALID);

  /* The control plane loads first: the kubelet's certificate moves to the
   * new client CA, so node-1's fingerprint changes before it acks. */
  ack(store, now, "control-plane");
  fingerprint_of(store, now, "node-1", stale, sizeof stale);
  ack(store, now, "node-1");

  /* A failed target blocks, is retried to pending, and must ack again. */
  CHECK_OK(pki_set_fail(store, LIT("node-1"), LIT("puppet apply failed"), now));
  REFUSED(pki_set_ack(store, LIT("node-1"), stale, strlen(stale), now),
          PKI_RESULT_SET_TARGET_FAILED);
  REFUSED(pki_set_advance(store, NULL, 0, now), PKI_RESULT_SET_STEP_BLOCKED);
  CHECK(strstr(last_error(), "puppet apply failed") != NULL);
  CHECK_OK(pki_set_retry(store, LIT("node-1"), now));
  REFUSED(pki_set_advance(store, NULL, 0, now), PKI_RESULT_SET_STEP_BLOCKED);
  ack(store, now, "node-1");

  /* t2: complete-ca-rotation. */
  now += DAY;
  CHECK_OK(pki_set_advance(store, NULL, 0, now));
  CHECK(step_is(store, now, "update-certs"));
  fingerprint_of(store, now, "control-plane", stale, sizeof stale);
  ack_all(store, now);
  CHECK_OK(pki_set_advance(store, NULL, 0, now));
  CHECK(step_is(store, now, "trust-new"));
  stop_if_failed();
  /* control-plane's update-certs files are the previous step's. */
  REFUSED(pki_set_ack(store, LIT("control-plane"), stale, strlen(stale), now),
          PKI_RESULT_SET_STALE_FINGERPRINT);
  /* Rolling forward destroys the old CA keys: not while a target has not
   * loaded trust-new, unless overridden with a reason. */
  REFUSED(pki_set_abort(store, now), PKI_RESULT_SET_ABORT_STRANDS);
  ack(store, now, "control-plane");
  REFUSED(pki_set_abort(store, now), PKI_RESULT_SET_ABORT_STRANDS);
  CHECK(strstr(last_error(), "node-1") != NULL && strstr(last_error(), "control-plane") == NULL);
  REFUSED(pki_set_abort_override(store, LIT(" "), now), PKI_RESULT_SET_INVALID);
  REFUSED(pki_set_abort_override(store, NULL, 0, now), PKI_RESULT_NULL_PARAMETER);
  CHECK_OK(pki_set_abort_override(store, LIT("node-1 is decommissioned"), now));
  CHECK(step_is(store, now, "completed"));
  CHECK(snprintf(path, sizeof path, "%s/set/cas/cluster/next-ca.key", root) <
        (int)sizeof path);
  CHECK(access(path, F_OK) != 0);
  REFUSED(pki_set_abort(store, now), PKI_RESULT_SET_WRONG_STEP);
  REFUSED(pki_set_abort_override(store, LIT("again"), now), PKI_RESULT_SET_WRONG_STEP);
  stop_if_failed();

  /* A second rotation, aborted in trust-both: reverting, then idle. */
  now += DAY;
  CHECK_OK(pki_set_start(store, LIT("practice abort"), false, now));
  ack(store, now, "control-plane");
  CHECK_OK(pki_set_abort(store, now));
  CHECK(step_is(store, now, "reverting"));
  REFUSED(pki_set_abort(store, now), PKI_RESULT_SET_WRONG_STEP);
  CHECK(strstr(last_error(), "already reverting") != NULL);
  REFUSED(pki_set_advance(store, NULL, 0, now), PKI_RESULT_SET_STEP_BLOCKED);
  ack_all(store, now);
  CHECK_OK(pki_set_advance(store, NULL, 0, now));
  CHECK(step_is(store, now, "idle"));
  REFUSED(pki_set_abort(store, now), PKI_RESULT_SET_WRONG_STEP);

  pki_store_free(store);
  return check_summary("set");
}
