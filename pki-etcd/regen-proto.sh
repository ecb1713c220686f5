#!/usr/bin/env bash
# Regenerates pki-etcd/src/proto/*.rs from the .proto files in
# pki-etcd/proto/ with protoc. Run it after changing a .proto file and commit
# both; the test `proto_is_current` (crate pki-etcd-proto-gen) fails while
# they disagree. Building pki-etcd itself never needs protoc.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v protoc >/dev/null || {
  echo "regen-proto.sh needs protoc (Debian: apt-get install protobuf-compiler)" >&2
  exit 1
}
cargo run --quiet -p pki-etcd-proto-gen -- pki-etcd/src/proto
cargo test --quiet -p pki-etcd-proto-gen --test proto_is_current
