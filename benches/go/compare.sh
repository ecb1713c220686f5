#!/usr/bin/env bash
# Runs the pki-core rows of issue 8 side by side with Go's crypto/x509 and
# prints, per row, the median of each side and the pki/Go ratio (lower is
# better for pki).
#
#   benches/go/compare.sh [RUNS] [ROW...]      ROW: issue matrix parse
#
# RUNS (default 5) process pairs are run per row, alternating pki and Go so
# that a noisy neighbour hurts both. Each process warms up and reports the
# median of its own repetitions; the script takes the median over runs.
# PKI_FEATURES=ring compares with pki-core's ring verification backend.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
runs="${1:-5}"
shift || true
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(issue matrix parse)
go="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

features=()
[ -n "${PKI_FEATURES:-}" ] && features=(--features "$PKI_FEATURES")
pki="$(cd "$root" && cargo bench -q -p pki-core --bench compare "${features[@]}" --no-run \
  --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "compare" and m.get("executable"):
        print(m["executable"])')"
(cd "$root/benches/go" && "$go" build -o "$work/go-compare" .)
"$pki" fixtures "$work/fixtures" >/dev/null

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

printf '%-8s %12s %12s %10s\n' row "pki (s)" "Go (s)" "pki/Go"
for row in "${rows[@]}"; do
  : >"$work/pki.txt"
  : >"$work/go.txt"
  for _ in $(seq "$runs"); do
    "$pki" "$row" >>"$work/pki.txt"
    case "$row" in
      issue|issue-os) "$work/go-compare" issue >>"$work/go.txt" ;;
      *) "$work/go-compare" "$row" "$work/fixtures" >>"$work/go.txt" ;;
    esac
  done
  p="$(median <"$work/pki.txt")"
  g="$(median <"$work/go.txt")"
  printf '%-8s %12.4f %12.4f %10.2f\n' "$row" "$p" "$g" "$(awk -v p="$p" -v g="$g" 'BEGIN {print p / g}')"
done
