#!/usr/bin/env bash
# Runs the rows of the performance table side by side with a Go program
# doing the same work with Go's standard library (main.go), and prints, per
# row, the median of each side and the pki/Go ratio (lower is better for
# pki). The two CLI rows have no Go side: they print pki's time and the goal.
#
#   benches/go/compare.sh [RUNS] [ROW...]
#
# ROW: issue issue-os issue-rustcrypto matrix matrix-rustcrypto parse
#      reconcile reconcile-parsed memory cli-rotate cli-rotate-whole
#      cli-issue (default: all)
#
# Every pki row is built with default features and runs with the default
# crypto provider (ring), as `cargo add pki-core` gives, but for the two
# `-rustcrypto` rows, which install RustCrypto's (deterministic) provider.
#
# RUNS (default 5) process pairs are run per row, alternating pki and Go so
# that a noisy neighbour hurts both. Each process warms up and reports the
# median of its own repetitions (or its peak memory); the script takes the
# median over runs, and prints the ratio of the medians with the range of
# the per-pair ratios (a pair runs back to back, so a machine that slows
# down for a while moves both sides of a pair, and the range shows how far
# one run can be trusted). cli-issue runs once: 1,000 successive `pki
# issue`.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
runs="${1:-5}"
shift || true
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(issue issue-os issue-rustcrypto matrix matrix-rustcrypto parse reconcile reconcile-parsed memory cli-rotate cli-rotate-whole cli-issue)
go="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The path of a bench executable cargo builds (it prints it as JSON).
bench_exe() { # NAME CARGO-ARGS...
  local name="$1"
  shift
  (cd "$root" && cargo bench -q "$@" --no-run --message-format=json 2>/dev/null) \
    | python3 -c 'import json,sys
name = sys.argv[1]
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == name and m.get("executable"):
        print(m["executable"])' "$name"
}
echo "building (release)…" >&2
core="$(bench_exe compare -p pki-core --bench compare)"
engines="$(bench_exe compare -p pki --bench compare)"
(cd "$root" && cargo build -q --release --bin pki)
pki_bin="$(cd "$root" && cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/pki"
(cd "$root/benches/go" && "$go" build -o "$work/go-compare" .)
"$core" fixtures "$work/core" >/dev/null
need_engine_fixtures=
for row in "${rows[@]}"; do
  case "$row" in reconcile*) need_engine_fixtures=1 ;; esac
done
[ -z "$need_engine_fixtures" ] || "$engines" fixtures "$work/engines" >/dev/null

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# A no-op `pki rotate` on a store of 1,000 leaves, as cron runs it: on a
# store as `pki init` and `pki issue` leave it (the summary kept beside the
# document says nothing is due), or with `whole`, on one without a summary
# (an older build's), which reads and checks every file.
cli_rotate() {
  local kind=store dir="$work/cli-store"
  if [ "${1:-}" = whole ]; then kind=store-whole dir="$work/cli-store-whole"; fi
  [ -d "$dir" ] || "$engines" "$kind" "$dir" 1000
  python3 - "$pki_bin" "$dir" <<'EOF'
import statistics, subprocess, sys, time
pki, store = sys.argv[1], sys.argv[2]
cmd = [pki, "rotate", store, "--now", "2026-02-01T00:00:00Z", "--quiet"]
subprocess.run(cmd, check=True)
times = []
for _ in range(20):
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    times.append(time.perf_counter() - t)
print(f"{statistics.median(times):.6f}")
EOF
}

# 1,000 successive `pki issue` into one new store: the total, and the mean
# of the first and the last hundred (equal when the cost does not grow).
cli_issue() {
  python3 - "$pki_bin" "$work/issue-store" <<'EOF'
import subprocess, sys, time
pki, store = sys.argv[1], sys.argv[2]
now = "2026-01-01T00:00:00Z"
subprocess.run([pki, "init", store, "--now", now], check=True, stdout=subprocess.DEVNULL)
each = []
for i in range(1000):
    t = time.perf_counter()
    subprocess.run([pki, "issue", store, f"svc{i}", "--dns", f"svc{i}.ns.svc", "--now", now],
                   check=True, stdout=subprocess.DEVNULL)
    each.append(time.perf_counter() - t)
first, last = sum(each[:100]) / 100, sum(each[-100:]) / 100
print(f"{sum(each):.2f} {first:.4f} {last:.4f}")
EOF
}

printf '%-17s %12s %12s %8s  %s\n' row pki Go pki/Go 'per pair'
for row in "${rows[@]}"; do
  case "$row" in
    cli-rotate)
      t="$(cli_rotate)"
      printf '%-17s %11.3fs %12s %8s   (goal: at most 0.05 s)\n' "$row" "$t" - -
      continue ;;
    cli-rotate-whole)
      t="$(cli_rotate whole)"
      printf '%-17s %11.3fs %12s %8s   (a store without a summary: every file read)\n' "$row" "$t" - -
      continue ;;
    cli-issue)
      read -r total first last < <(cli_issue)
      printf '%-17s %11.1fs %12s %8s   (goal: at most 60 s; mean of the first 100 %.3f s, of the last 100 %.3f s)\n' \
        "$row" "$total" - - "$first" "$last"
      continue ;;
  esac
  : >"$work/pki.txt"
  : >"$work/go.txt"
  for _ in $(seq "$runs"); do
    case "$row" in
      issue|issue-os|issue-rustcrypto|matrix|matrix-rustcrypto) "$core" "$row" ;;
      parse) "$core" parse ;;
      reconcile|reconcile-parsed) "$engines" reconcile "$work/engines" ;;
      memory) "$engines" memory 10000 ;;
      *) echo "unknown row $row" >&2; exit 2 ;;
    esac >>"$work/pki.txt"
    case "$row" in
      issue*) "$work/go-compare" issue ;;
      matrix*) "$work/go-compare" matrix "$work/core" ;;
      parse) "$work/go-compare" parse "$work/core" ;;
      reconcile|reconcile-parsed) "$work/go-compare" "$row" "$work/engines" ;;
      memory) "$work/go-compare" memory 10000 ;;
    esac >>"$work/go.txt"
  done
  p="$(median <"$work/pki.txt")"
  g="$(median <"$work/go.txt")"
  unit=s
  [ "$row" = memory ] && unit=MB
  pairs="$(paste "$work/pki.txt" "$work/go.txt" \
    | awk '{r = $1 / $2; if (NR == 1 || r < lo) lo = r; if (NR == 1 || r > hi) hi = r}
           END {printf "%.3f-%.3f", lo, hi}')"
  printf '%-17s %11.4f%s %11.4f%s %8.3f  %s\n' "$row" "$p" "$unit" "$g" "$unit" \
    "$(awk -v p="$p" -v g="$g" 'BEGIN {print p / g}')" "$pairs"
done
