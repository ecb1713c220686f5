#!/usr/bin/env bash
# Fuzz every target for SECONDS each (default 30), on stable Rust.
#
#   fuzz/run.sh [SECONDS] [TARGET...]
#
# Installs cargo-fuzz when missing, builds all targets once (release, debug
# assertions, no sanitizer: `-s none` needs no nightly toolchain), writes
# the seed corpora with gen_corpus, then runs each target for SECONDS with
# its seeds and its checked-in reproducers (regressions/<target>/). Prints
# the executions of each target. Exits 1 when any target crashed, timed out
# or ran out of memory; the input is saved under fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")"

secs="${1:-30}"
[ $# -gt 0 ] && shift
case "$secs" in
  ''|*[!0-9]*) echo "usage: fuzz/run.sh [SECONDS] [TARGET...]" >&2; exit 2 ;;
esac
all_targets=(cert_der not_before_1950 pem_bundle der_input private_key state_file documents path_validation ca_import jose sealed_value fs_manifest pkcs11_uri kube_store)
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${all_targets[@]}"); fi

# A single input slower than this is a finding too (denial of service).
timeout_secs="${FUZZ_TIMEOUT:-20}"

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "cargo-fuzz is missing: installing it"
  cargo install cargo-fuzz --locked
fi
cargo fuzz --version

# Same flags for build and run, so `run` does not rebuild.
flags=(-s none -a)
echo "building the fuzz targets (once)"
build_start=$SECONDS
cargo fuzz build "${flags[@]}"
echo "built in $((SECONDS - build_start)) s"

triple="$(rustc -vV | sed -n 's/^host: //p')"
# The fuzz crate is its own workspace; cargo says where it builds
# (fuzz/target unless CARGO_TARGET_DIR or a config moves it).
target_dir="$(cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
gen_corpus="$target_dir/$triple/release/gen_corpus"
if [ ! -x "$gen_corpus" ]; then
  echo "fuzz: the seed-corpus generator was not built at $gen_corpus" >&2
  exit 1
fi
"$gen_corpus" corpus

mkdir -p target/fuzz-logs
failed=()
summary=()
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "regressions/$t"
  log="target/fuzz-logs/$t.log"
  echo "=== $t: ${secs} s"
  status=0
  cargo fuzz run "${flags[@]}" "$t" "corpus/$t" "regressions/$t" -- \
    -max_total_time="$secs" -timeout="$timeout_secs" -print_final_stats=1 \
    >"$log" 2>&1 || status=$?
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  cov="$(grep -Eo 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[^ ]+' "$log" | tail -n 1 || true)"
  if [ "$status" -ne 0 ]; then
    failed+=("$t")
    summary+=("$t: FAILED (exit $status) after ${execs:-?} executions")
    echo "--- $t failed; last lines of $log:"
    tail -n 60 "$log"
    ls -l "artifacts/$t" 2>/dev/null || true
  else
    summary+=("$t: ok, ${execs:-?} executions in ${secs} s (${cov:-no stats})")
  fi
done

# The fs_manifest target's stores, one per process (see src/fs_store.rs).
rm -rf "${TMPDIR:-/tmp}"/pki-fuzz-fs-*

echo
echo "=== fuzzing summary"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "crashed: ${failed[*]} (inputs under fuzz/artifacts/, logs under fuzz/target/fuzz-logs/)"
  exit 1
fi
