#!/usr/bin/env bash
# Fails (exit 1) when pki-ffi/include/pki.h differs from what the pinned
# cbindgen generates from the sources, and shows the difference.
# Usage: pki-ffi/check-header.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$here/regen-header.sh" "$tmp/pki.h"
if ! diff -u "$here/include/pki.h" "$tmp/pki.h"; then
  echo "pki-ffi/include/pki.h is out of date: run pki-ffi/regen-header.sh and commit it" >&2
  exit 1
fi
echo "pki-ffi/include/pki.h is up to date"
