#!/usr/bin/env bash
# Regenerates include/pki.h from the Rust sources with the pinned cbindgen.
# Usage: pki-ffi/regen-header.sh [OUTPUT]   (default: pki-ffi/include/pki.h)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The one cbindgen version the checked-in header is generated with. Newer
# versions format differently; change this and regenerate in one commit.
CBINDGEN_VERSION="0.29.4"

installed="$(cbindgen --version 2>/dev/null | awk '{print $2}' || true)"
if [ "$installed" != "$CBINDGEN_VERSION" ]; then
  echo "installing cbindgen $CBINDGEN_VERSION (found: ${installed:-none})" >&2
  cargo install cbindgen --version "$CBINDGEN_VERSION" --locked --quiet >&2
fi

out="${1:-$here/include/pki.h}"
mkdir -p "$(dirname "$out")"
cbindgen --quiet --config "$here/cbindgen.toml" --crate pki-ffi --output "$out" "$here"
