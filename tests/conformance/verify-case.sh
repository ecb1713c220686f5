#!/bin/sh
# One conformance case: PKI LEAF INTERMEDIATES TRUSTED TIME HOST_KIND HOST
pki="$1"; leaf="$2"; inter="$3"; trusted="$4"; at="$5"; kind="$6"; host="$7"
chain="$(mktemp)"
cat "$leaf" "$inter" > "$chain"
case "$kind" in
  IP) name="--ip $host" ;;
  DNS) name="--dns $host" ;;
  *) name="" ;;
esac
# Cases without a validation time run at 2026-01-01, inside every case's validity.
[ "$at" = now ] && at=2026-01-01T00:00:00Z
# shellcheck disable=SC2086
"$pki" verify --bundle "$trusted" --chain "$chain" --at "$at" $name
status=$?
rm -f "$chain"
exit $status
