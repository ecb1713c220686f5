/*
 * A signer whose CA keys are in a PKCS#11 token, through the C API: a
 * SoftHSM2 token of this test's own (made here with softhsm2-util, its
 * configuration named in SOFTHSM2_CONF before the module is loaded), a
 * directory store opened with the `pkcs11_module` and `pkcs11_pin_file`
 * options, a signer created with `key_store`, a leaf issued, a forced
 * rotation, and after each step: the leaf's chain verifies against the
 * bundle (pki_verify_chain and `openssl verify`), and OpenSC's
 * `pkcs11-tool`, an independent reader, lists exactly the private key
 * objects the document's `token_keys` names, each sensitive and never
 * extractable. The same store opened without the options refuses to sign
 * (PKI_RESULT_PKCS11_NOT_OPEN, naming PKI_PKCS11_MODULE) and is left as it
 * was.
 *
 * Usage: token DIR MODULE   (DIR: a new writable directory; MODULE:
 * SoftHSM2's libsofthsm2.so)
 */
#define _POSIX_C_SOURCE 200809L
#include <sys/stat.h>

#include "check.h"

/* 2026-01-01T00:00:00Z */
#define T0 ((int64_t)1767225600)
#define DAY ((int64_t)86400)
#define HOST "web.ns.svc"
#define TOKEN "pki-test"
#define PIN "1234"
/* The most key objects either side may name in this test. */
#define MAX_KEYS 16
/* A CKA_ID as lowercase hex (pki's ids are 16 bytes). */
#define ID_HEX 80

static const char *dir;
static const char *module_path;
static char store_dir[1024];

static void stop_if_failed(void) {
  if (check_failures > 0) {
    fprintf(stderr, "stopping after the first failures\n");
    exit(check_summary("token"));
  }
}

/* A set of key ids, as lowercase hex. */
typedef struct {
  char id[MAX_KEYS][ID_HEX];
  size_t len;
} id_set;

static void id_add(id_set *set, const char *hex) {
  size_t i;
  for (i = 0; i < set->len; i++) {
    if (strcmp(set->id[i], hex) == 0) {
      return;
    }
  }
  CHECK(set->len < MAX_KEYS && strlen(hex) < ID_HEX);
  if (set->len < MAX_KEYS && strlen(hex) < ID_HEX) {
    strcpy(set->id[set->len++], hex);
  }
}

/* Both sets hold the same ids (each set holds each id once). */
static int id_same(const id_set *a, const id_set *b) {
  size_t i, j, found;
  if (a->len != b->len) {
    return 0;
  }
  for (i = 0; i < a->len; i++) {
    for (found = 0, j = 0; j < b->len; j++) {
      found += strcmp(a->id[i], b->id[j]) == 0;
    }
    if (found != 1) {
      return 0;
    }
  }
  return 1;
}

static void id_print(const char *what, const id_set *set) {
  size_t i;
  fprintf(stderr, "  %s:", what);
  for (i = 0; i < set->len; i++) {
    fprintf(stderr, " %s", set->id[i]);
  }
  fprintf(stderr, "\n");
}

/* The whole file at `path`, malloc'd and NUL-terminated; NULL when it
 * cannot be read. */
static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  char *out = NULL;
  size_t len = 0, cap = 0, n;
  char chunk[4096];
  if (f == NULL) {
    return NULL;
  }
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (len + n + 1 > cap) {
      cap = (len + n + 1) * 2;
      out = realloc(out, cap);
      if (out == NULL) {
        exit(2);
      }
    }
    memcpy(out + len, chunk, n);
    len += n;
  }
  fclose(f);
  if (out == NULL) {
    out = calloc(1, 1);
  } else {
    out[len] = '\0';
  }
  return out;
}

static char *store_file(const char *name) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", store_dir, name);
  return read_text(path);
}

/* The output of the shell command `cmd`, malloc'd; exits on failure. */
static char *command_output(const char *cmd) {
  FILE *p = popen(cmd, "r");
  char *out = NULL;
  size_t len = 0, cap = 0, n;
  char chunk[4096];
  int status;
  if (p == NULL) {
    fprintf(stderr, "cannot run %s\n", cmd);
    exit(2);
  }
  while ((n = fread(chunk, 1, sizeof chunk, p)) > 0) {
    if (len + n + 1 > cap) {
      cap = (len + n + 1) * 2;
      out = realloc(out, cap);
      if (out == NULL) {
        exit(2);
      }
    }
    memcpy(out + len, chunk, n);
    len += n;
  }
  status = pclose(p);
  if (status != 0) {
    fprintf(stderr, "`%s` failed (%d):\n%s\n", cmd, status, out == NULL ? "" : out);
    exit(2);
  }
  if (out == NULL) {
    out = calloc(1, 1);
  } else {
    out[len] = '\0';
  }
  return out;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* The ids of the key objects the document names: every `id=` of the URIs
 * in its `token_keys` (current, pending, previous, retiring), decoded from
 * RFC 7512's percent-encoding into lowercase hex. */
static id_set named_ids(void) {
  id_set set = {0};
  char *state = store_file("pki-state.json");
  const char *keys, *end, *p;
  CHECK(state != NULL);
  if (state == NULL) {
    return set;
  }
  keys = strstr(state, "\"token_keys\"");
  CHECK(keys != NULL);
  if (keys == NULL) {
    free(state);
    return set;
  }
  keys = strchr(keys, '{');
  end = keys == NULL ? NULL : json_skip(keys);
  for (p = keys; p != NULL && p < end && (p = strstr(p, "id=")) != NULL && p < end;) {
    char hex[ID_HEX];
    size_t n = 0;
    /* The attribute `id`, not the end of another (`object=…` has none). */
    int attribute = p[-1] == ';' || p[-1] == ':';
    for (p += 3; *p != ';' && *p != '"' && *p != '?' && n + 2 < sizeof hex; p++) {
      unsigned byte = (unsigned char)*p;
      if (*p == '%' && hex_digit(p[1]) >= 0 && hex_digit(p[2]) >= 0) {
        byte = (unsigned)(hex_digit(p[1]) * 16 + hex_digit(p[2]));
        p += 2;
      }
      snprintf(hex + n, sizeof hex - n, "%02x", byte);
      n += 2;
    }
    hex[n] = '\0';
    if (attribute) {
      id_add(&set, hex);
    }
  }
  free(state);
  return set;
}

/* The ids of the token's private key objects, as `pkcs11-tool` lists
 * them, each checked sensitive and never extractable. */
static id_set token_ids(void) {
  id_set set = {0};
  char cmd[2048];
  char *listing, *object;
  snprintf(cmd, sizeof cmd,
           "pkcs11-tool --module '%s' --token-label " TOKEN " --login --pin " PIN
           " --list-objects --type privkey 2>&1",
           module_path);
  listing = command_output(cmd);
  for (object = strstr(listing, "Private Key Object"); object != NULL;) {
    char *next = strstr(object + 1, "Private Key Object");
    char *id = strstr(object, "ID:");
    char *access = strstr(object, "Access:");
    char hex[ID_HEX];
    size_t n = 0;
    if (next != NULL) {
      next[-1] = '\0'; /* this object's lines only */
    }
    CHECK(id != NULL && access != NULL);
    if (access != NULL) {
      CHECK(strstr(access, "sensitive") != NULL && strstr(access, "never extractable") != NULL);
    }
    if (id != NULL) {
      for (id += 3; *id == ' ' || *id == '\t'; id++) {
      }
      while (hex_digit(*id) >= 0 && n + 1 < sizeof hex) {
        hex[n++] = (char)(*id >= 'A' && *id <= 'F' ? *id - 'A' + 'a' : *id);
        id++;
      }
      hex[n] = '\0';
      id_add(&set, hex);
    }
    object = next;
  }
  free(listing);
  return set;
}

/* The token holds exactly the key objects the document names; returns
 * how many. */
static size_t check_token_matches(const char *context) {
  id_set named = named_ids(), held = token_ids();
  int same = id_same(&named, &held);
  if (!same) {
    fprintf(stderr, "%s: the token's keys and the document's differ\n", context);
    id_print("named by the document", &named);
    id_print("held by the token", &held);
  }
  CHECK(same);
  CHECK(named.len > 0);
  printf("%s: the token holds the %zu key(s) the document names\n", context, held.len);
  return held.len;
}

/* The leaf `name`'s chain as stored verifies against the stored bundle at
 * `at`, by pki_verify_chain and by `openssl verify`. */
static void check_leaf_trusted(const pki_store *store, const char *name, int64_t at) {
  pki_signer *signer = stored_signer(store, "signer");
  pki_bundle *bundle = NULL;
  pki_buffer *path = NULL;
  char file[256], cmd[4096];
  char *chain;
  snprintf(file, sizeof file, "certs/%s/tls.crt", name);
  chain = store_file(file);
  CHECK(chain != NULL && signer != NULL);
  if (chain == NULL || signer == NULL) {
    free(chain);
    pki_signer_free(signer);
    return;
  }
  CHECK_OK(pki_signer_bundle(signer, &bundle));
  CHECK_OK(pki_verify_chain(bundle, (const uint8_t *)chain, strlen(chain), at,
                            PKI_PURPOSE_SERVER_AUTH, LIT(HOST), &path));
  snprintf(cmd, sizeof cmd,
           "openssl verify -attime %lld -purpose sslserver -verify_hostname " HOST
           " -CAfile '%s/ca-bundle.crt' -untrusted '%s/%s' '%s/%s' > /dev/null",
           (long long)at, store_dir, store_dir, file, store_dir, file);
  CHECK(system(cmd) == 0);
  pki_buffer_free(path);
  pki_bundle_free(bundle);
  pki_signer_free(signer);
  free(chain);
}

/* SoftHSM2's configuration and token in DIR, named in SOFTHSM2_CONF
 * before anything loads the module (SoftHSM2 reads it once, when the
 * module is initialised), and the PIN file the store is opened with. */
static void make_token(void) {
  char path[1200], cmd[2048];
  FILE *f;
  snprintf(path, sizeof path, "%s/tokens", dir);
  if (mkdir(path, 0700) != 0) {
    fprintf(stderr, "cannot create %s\n", path);
    exit(2);
  }
  snprintf(path, sizeof path, "%s/softhsm2.conf", dir);
  f = fopen(path, "w");
  if (f == NULL) {
    exit(2);
  }
  fprintf(f,
          "directories.tokendir = %s/tokens\nobjectstore.backend = file\nlog.level = ERROR\n"
          "slots.removable = false\n",
          dir);
  fclose(f);
  if (setenv("SOFTHSM2_CONF", path, 1) != 0) {
    exit(2);
  }
  snprintf(cmd, sizeof cmd,
           "softhsm2-util --init-token --free --label " TOKEN " --pin " PIN
           " --so-pin 5678 2>&1");
  free(command_output(cmd));
  snprintf(path, sizeof path, "%s/pin", dir);
  f = fopen(path, "w");
  if (f == NULL) {
    exit(2);
  }
  fputs(PIN "\n", f);
  fclose(f);
}

/* The store at `location`, with the token's module and PIN file. */
static pki_store *open_with_token(const char *location) {
  pki_store *store = NULL;
  text options = {0};
  char pin_file[1200];
  snprintf(pin_file, sizeof pin_file, "%s/pin", dir);
  text_add(&options, LIT("{\"pkcs11_module\": "));
  text_json(&options, module_path, strlen(module_path));
  text_add(&options, LIT(", \"pkcs11_pin_file\": "));
  text_json(&options, pin_file, strlen(pin_file));
  text_add(&options, LIT("}"));
  CHECK_OK(pki_store_open(location, strlen(location), options.data, options.len, &store));
  text_free(&options);
  stop_if_failed();
  return store;
}

/* The last error holds `needle`. */
static int last_error_names(const char *needle) {
  char msg[1024];
  size_t written = 0;
  return pki_last_error(msg, sizeof msg, &written) == PKI_RESULT_OK &&
         strstr(msg, needle) != NULL;
}

static const char create_in_token[] =
    "{\"common_name\": \"token-ca\", \"key_type\": \"p256\", "
    "\"key_store\": \"pkcs11:token=" TOKEN "\"}";

static const char issue_web[] =
    "{\"leaves\": [{\"request\": {\"name\": \"web\", \"kind\": \"server\", "
    "\"dns_names\": [\"" HOST "\"], \"lifetime_seconds\": 7776000}}]}";

static const char issue_api[] =
    "{\"leaves\": [{\"request\": {\"name\": \"api\", \"kind\": \"server\", "
    "\"dns_names\": [\"api.ns.svc\"]}}]}";

/* Without the module, the store refuses to make a key in the token or to
 * sign with one, and writes nothing. */
static void check_refusals(int created) {
  pki_store *bare = NULL;
  pki_buffer *out = NULL;
  char *before = created ? store_file("pki-state.json") : NULL;
  char *after;
  CHECK_OK(pki_store_open(store_dir, strlen(store_dir), NULL, 0, &bare));
  if (!created) {
    CHECK_CODE(pki_document_create(bare, PKI_KIND_SIGNER, LIT("signer"), LIT(create_in_token), T0,
                                   &out),
               PKI_RESULT_PKCS11_NOT_OPEN);
    CHECK(last_error_names("pkcs11_module"));
    CHECK(store_file("pki-state.json") == NULL);
  } else {
    CHECK_CODE(pki_document_step(bare, PKI_KIND_SIGNER, LIT("signer"), LIT(issue_api),
                                 T0 + 20 * DAY, &out),
               PKI_RESULT_PKCS11_NOT_OPEN);
    CHECK(last_error_names("PKI_PKCS11_MODULE"));
    CHECK(last_error_names("pkcs11_module"));
    CHECK_CODE(pki_document_step(bare, PKI_KIND_SIGNER, LIT("signer"),
                                 LIT("{\"forced\": {\"reason\": \"no token\"}}"), T0 + 20 * DAY,
                                 &out),
               PKI_RESULT_PKCS11_NOT_OPEN);
    after = store_file("pki-state.json");
    CHECK(before != NULL && after != NULL && strcmp(before, after) == 0);
    CHECK(store_file("certs/api/tls.crt") == NULL);
    free(after);
  }
  CHECK(out == NULL);
  free(before);
  pki_store_free(bare);
}

int main(int argc, char **argv) {
  pki_store *store, *memory;
  pki_buffer *step = NULL;
  size_t keys;
  char *state;

  if (argc != 3) {
    fprintf(stderr, "usage: %s DIR MODULE\n", argv[0]);
    return 2;
  }
  dir = argv[1];
  module_path = argv[2];
  snprintf(store_dir, sizeof store_dir, "%s/store", dir);
  make_token();

  /* A key_store without the module: refused, nothing created. */
  check_refusals(0);
  stop_if_failed();

  store = open_with_token(store_dir);
  CHECK_OK(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"), LIT(create_in_token), T0,
                               &step));
  stop_if_failed();
  pki_buffer_free(step);
  /* The document keeps the key's URI, never the key. */
  state = store_file("pki-state.json");
  CHECK(state != NULL && strstr(state, "\"token_keys\"") != NULL &&
        strstr(state, "PRIVATE KEY") == NULL);
  free(state);
  CHECK(store_file("signer/tls.key") == NULL);
  CHECK(check_token_matches("created") == 1);

  CHECK_OK(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), LIT(issue_web), T0 + 3600,
                             &step));
  stop_if_failed();
  CHECK(step_changed(step));
  pki_buffer_free(step);
  check_leaf_trusted(store, "web", T0 + 7200);
  CHECK(check_token_matches("leaf issued") == 1);
  stop_if_failed();

  /* A forced rotation: the new key is made in the token, the old one kept
   * while its CA is trusted, and the leaf re-issued by the new CA. */
  CHECK_OK(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"),
                             LIT("{\"forced\": {\"reason\": \"drill\"}}"), T0 + 10 * DAY, &step));
  stop_if_failed();
  CHECK(step_count(step, "rotated") == 1);
  pki_buffer_free(step);
  keys = check_token_matches("rotated");
  CHECK(keys == 2);
  check_leaf_trusted(store, "web", T0 + 10 * DAY + 3600);
  /* Stepping again is nothing to do, and still signs nothing new. */
  CHECK_OK(pki_document_step(store, PKI_KIND_SIGNER, LIT("signer"), LIT("{}"), T0 + 11 * DAY,
                             &step));
  CHECK(!step_changed(step));
  pki_buffer_free(step);
  CHECK(check_token_matches("stepped again") == keys);
  stop_if_failed();

  /* The same store without the module: refused, unchanged. */
  check_refusals(1);
  CHECK(check_token_matches("after the refusals") == keys);

  /* A create over the existing document is refused before the token
   * makes a key. */
  step = NULL;
  CHECK_CODE(pki_document_create(store, PKI_KIND_SIGNER, LIT("signer"), LIT(create_in_token), T0,
                                 &step),
             PKI_RESULT_ALREADY_INITIALIZED);
  CHECK(step == NULL && token_ids().len == keys);

  /* Two signers of one store with the same CA name get a key each (the
   * id derives from the document's store key too), never the same one. */
  memory = open_with_token("memory:");
  CHECK_OK(pki_document_create(memory, PKI_KIND_SIGNER, LIT("signer"), LIT(create_in_token), T0,
                               &step));
  pki_buffer_free(step);
  CHECK_OK(pki_document_create(memory, PKI_KIND_SIGNER, LIT("tenants/a"), LIT(create_in_token),
                               T0, &step));
  pki_buffer_free(step);
  CHECK(token_ids().len == keys + 2);
  pki_store_free(memory);

  pki_store_free(store);
  return check_summary("token");
}
