#!/usr/bin/env bash
# Installs pki under a prefix (default /usr/local):
#
#   scripts/install.sh [--cli] [--c] [PREFIX]
#
#   --cli  (the default) the pki command in PREFIX/bin, its man pages in
#          PREFIX/share/man/man1 and its bash, zsh and fish completions
#   --c    the C library for C programs: PREFIX/lib/libpki_ffi.a,
#          PREFIX/include/pki/pki.h and PREFIX/lib/pkgconfig/pki.pc, so
#          that `pkg-config --cflags --libs pki` compiles and links them
#
# Both may be given. Everything is built in release mode from this checkout
# with the versions in Cargo.lock (--locked), wherever cargo builds
# (CARGO_TARGET_DIR is respected). DESTDIR, when set, is put before every
# installed path (for packaging), while pki.pc still names PREFIX.
set -euo pipefail
caller="$(pwd -P)" # a relative PREFIX is the caller's
cd "$(dirname "$0")/.."

usage() { echo "usage: scripts/install.sh [--cli] [--c] [PREFIX]" >&2; exit 2; }
cli= c= prefix=
for arg in "$@"; do
  case "$arg" in
    --cli) cli=1 ;;
    --c) c=1 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) usage ;;
    *) [ -z "$prefix" ] || usage; prefix="$arg" ;;
  esac
done
[ -n "$cli$c" ] || cli=1
prefix="${prefix:-/usr/local}"
case "$prefix" in
  /*) ;;
  *) prefix="$caller/$prefix" ;; # pki.pc needs an absolute prefix
esac
prefix="${prefix%/}"
dest="${DESTDIR:-}$prefix"

cargo="${CARGO:-cargo}"
command -v "$cargo" >/dev/null || {
  echo "install: cargo is missing: install Rust 1.89 or later (rustup, or Debian's cargo when recent enough)" >&2
  exit 1
}
# Wherever cargo builds (CARGO_TARGET_DIR, .cargo/config.toml), ask it.
target_dir="$("$cargo" metadata --format-version 1 --no-deps \
  | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"

if [ -n "$cli" ]; then
  echo "install: building the pki command (cargo build --release --locked --bin pki)"
  "$cargo" build --release --locked --quiet --bin pki
  pki="$target_dir/release/pki"
  install -d "$dest/bin" "$dest/share/man/man1" \
    "$dest/share/bash-completion/completions" "$dest/share/zsh/site-functions" \
    "$dest/share/fish/vendor_completions.d"
  install -m 0755 "$pki" "$dest/bin/pki"
  # The man pages and completions come from the binary just built (the
  # same clap definition docs/man is generated from), so they match it.
  "$pki" man "$dest/share/man/man1"
  chmod 0644 "$dest/share/man/man1/"pki*.1
  "$pki" completions bash >"$dest/share/bash-completion/completions/pki"
  "$pki" completions zsh >"$dest/share/zsh/site-functions/_pki"
  "$pki" completions fish >"$dest/share/fish/vendor_completions.d/pki.fish"
  echo "install: $dest/bin/pki, man pages in $dest/share/man/man1, completions for bash, zsh and fish"
fi

if [ -n "$c" ]; then
  echo "install: building the C library (cargo rustc -p pki-ffi --release --locked --lib)"
  # rustc prints the system libraries a program linking the static library
  # needs ("note: native-static-libs: ..."); cargo replays the note when
  # pki-ffi is already built.
  log="$("$cargo" rustc -p pki-ffi --release --locked --lib --quiet -- --print native-static-libs 2>&1)" || {
    printf '%s\n' "$log" >&2
    exit 1
  }
  native="$(printf '%s\n' "$log" | sed -n 's/.*native-static-libs: //p' | tail -n 1)"
  if [ -z "$native" ]; then
    printf '%s\n' "$log" >&2
    echo "install: rustc did not print the native libraries libpki_ffi.a needs" >&2
    exit 1
  fi
  version="$("$cargo" pkgid -p pki-ffi | sed 's/.*[#@]//')"
  install -d "$dest/lib/pkgconfig" "$dest/include/pki"
  install -m 0644 "$target_dir/release/libpki_ffi.a" "$dest/lib/libpki_ffi.a"
  install -m 0644 pki-ffi/include/pki.h "$dest/include/pki/pki.h"
  # Only the static library is installed (no shared library to version and
  # find at run time), so its system libraries go in Libs, as cargo-c does
  # for a static-only library: `pkg-config --libs` and `--libs --static`
  # both give a complete link line.
  cat >"$dest/lib/pkgconfig/pki.pc" <<EOF
prefix=$prefix
exec_prefix=\${prefix}
libdir=\${exec_prefix}/lib
includedir=\${prefix}/include

Name: pki
Description: Rotate X.509 certificate authorities without breaking trust (C ABI)
Version: $version
Libs: -L\${libdir} -lpki_ffi $native
Cflags: -I\${includedir}/pki
EOF
  echo "install: $dest/lib/libpki_ffi.a, $dest/include/pki/pki.h, $dest/lib/pkgconfig/pki.pc"
fi
