// The header compiles as C++17 with warnings as errors, and the library
// links and runs from C++.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "pki.h"

namespace {

struct store_deleter {
  void operator()(pki_store *s) const { pki_store_free(s); }
};
struct signer_deleter {
  void operator()(pki_signer *s) const { pki_signer_free(s); }
};
struct buffer_deleter {
  void operator()(pki_buffer *b) const { pki_buffer_free(b); }
};

std::string last_error() {
  std::string msg(pki_last_error_length() + 1, '\0');
  size_t written = 0;
  if (pki_last_error(&msg[0], msg.size(), &written) != PKI_RESULT_OK) {
    return "";
  }
  msg.resize(written);
  return msg;
}

}  // namespace

int main() {
  const std::string location = "memory:";
  pki_store *store_raw = nullptr;
  if (pki_store_open(location.data(), location.size(), nullptr, 0, &store_raw) != PKI_RESULT_OK) {
    return 1;
  }
  std::unique_ptr<pki_store, store_deleter> store(store_raw);
  const std::string key = "signer";
  const std::string input = R"({"common_name": "cpp-ca", "key_type": "p256"})";
  pki_buffer *step_raw = nullptr;
  // 2026-01-01T00:00:00Z
  if (pki_document_create(store.get(), PKI_KIND_SIGNER, key.data(), key.size(), input.data(), input.size(),
                        1767225600, &step_raw) != PKI_RESULT_OK) {
    std::fprintf(stderr, "pki_document_create: %s\n", last_error().c_str());
    return 1;
  }
  std::unique_ptr<pki_buffer, buffer_deleter> step(step_raw);
  if (std::strstr(reinterpret_cast<const char *>(pki_buffer_data(step.get()).data),
                  "\"changed\":true") == nullptr) {
    return 1;
  }
  pki_signer *raw = nullptr;
  if (pki_signer_load(store.get(), key.data(), key.size(), &raw, nullptr) != PKI_RESULT_OK) {
    return 1;
  }
  std::unique_ptr<pki_signer, signer_deleter> signer(raw);

  pki_buffer *state_raw = nullptr;
  if (pki_signer_to_state(signer.get(), &state_raw) != PKI_RESULT_OK) {
    return 1;
  }
  std::unique_ptr<pki_buffer, buffer_deleter> state(state_raw);
  pki_bytes bytes = pki_buffer_data(state.get());
  if (bytes.len == 0 || std::strstr(reinterpret_cast<const char *>(bytes.data), "\"kind\": \"signer\"") ==
                            nullptr) {
    return 1;
  }

  pki_result r = pki_signer_from_state(bytes.data, 3, nullptr);
  if (r != PKI_RESULT_NULL_PARAMETER || last_error().empty()) {
    return 1;
  }
  std::printf("header: 3 passed, 0 failed\n");
  return 0;
}
