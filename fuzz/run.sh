#!/usr/bin/env bash
# Fuzz every target for SECONDS each (default 30), on stable Rust.
#
#   fuzz/run.sh [SECONDS] [TARGET...]
#
# Installs cargo-fuzz when missing, builds all targets once (release, debug
# assertions, no sanitizer: `-s none` needs no nightly toolchain), writes
# the seed corpora with gen_corpus, then runs each target for SECONDS with
# its seeds and its checked-in reproducers (regressions/<target>/), two
# targets at a time (FUZZ_JOBS). Prints
# the executions of each target. Exits 1 when any target crashed, timed out
# or ran out of memory; the input is saved under fuzz/artifacts/<target>/
# and printed (gzip, base64) with the panic's message.
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
# Each target is one single-threaded process: two at a time keep both cores
# busy and halve the wall time (FUZZ_JOBS changes it).
jobs="${FUZZ_JOBS:-2}"

fuzz_one() { # TARGET: runs it, leaves its exit status in target/fuzz-logs/TARGET.status
  local t="$1" log="target/fuzz-logs/$1.log" status=0
  mkdir -p "corpus/$t" "regressions/$t"
  cargo fuzz run "${flags[@]}" "$t" "corpus/$t" "regressions/$t" -- \
    -max_total_time="$secs" -timeout="$timeout_secs" -print_final_stats=1 \
    >"$log" 2>&1 || status=$?
  echo "$status" >"target/fuzz-logs/$t.status"
}

running=0
for t in "${targets[@]}"; do
  echo "=== $t: ${secs} s"
  rm -f "target/fuzz-logs/$t.status"
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

failed=()
summary=()
for t in "${targets[@]}"; do
  log="target/fuzz-logs/$t.log"
  status="$(cat "target/fuzz-logs/$t.status" 2>/dev/null || echo '?')"
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  cov="$(grep -Eo 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[^ ]+' "$log" | tail -n 1 || true)"
  if [ "$status" != 0 ]; then
    failed+=("$t")
    # The panic's message names what broke; it is what a reader of CI needs.
    why="$(grep -m 1 -A 1 "panicked at" "$log" | tail -n 1 | cut -c 1-300 || true)"
    summary+=("$t: FAILED (exit $status) after ${execs:-?} executions: ${why:-see the log}")
    echo "--- $t failed; last lines of $log:"
    grep -v -e '^#[0-9]' -e 'NEW_FUNC' "$log" | grep -B 2 -A 12 "panicked at" | head -n 30 || true
    tail -n 20 "$log"
    for input in "artifacts/$t"/*; do
      [ -f "$input" ] || continue
      # CI keeps only its output: the input, compressed, to reproduce it
      # elsewhere (base64 -d | gunzip > FILE; cargo fuzz run ... FILE).
      echo "--- $input, gzip then base64:"
      gzip -9 -c "$input" | base64 -w 0
      echo
    done
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
