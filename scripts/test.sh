#!/usr/bin/env bash
# Runs every test of the workspace (`cargo test --workspace`), after
# installing with apt-get what a fresh Debian machine lacks for them:
#
#   scripts/test.sh [--no-install] [CARGO TEST ARGUMENTS...]
#
# It says what it installs and why before it does. --no-install only lists
# what is missing (and the command that installs it) and stops there when
# something is. Rust itself (1.89 or later) is not installed: Debian's cargo
# is too old, use rustup.
#
# protoc is not needed: pki-etcd's gRPC code is checked in.
#
# Before the tests it runs scripts/kube-tools.sh, which builds with Go the
# kube-apiserver and etcd 3.6 that the kube:// tests (pki-kube) start: about
# 6 minutes the first time on 2 cores, then cached in
# ${PKI_KUBE_TOOLS:-$HOME/.cache/pki-kube-tools} (a lookup of milliseconds).
# It does so with --no-install too: that builds into a cache, it installs
# nothing. PKI_KUBE_APISERVER and PKI_KUBE_ETCD, when both are set, name
# binaries to use instead, and no build happens.
set -euo pipefail
cd "$(dirname "$0")/.."

install=1
if [ "${1:-}" = "--no-install" ]; then
  install=
  shift
fi

packages=() # Debian packages to install, each with why in reasons
reasons=()
want() { # PACKAGE WHY
  local p
  for p in "${packages[@]+"${packages[@]}"}"; do [ "$p" = "$1" ] && return 0; done
  packages+=("$1")
  reasons+=("$1: $2")
}
need() { # COMMAND PACKAGE WHY
  command -v "$1" >/dev/null 2>&1 || want "$2" "$3"
}

# The version of Go that pki-ffi/go/go.mod asks for (its `go` line), or the
# one scripts/kube-tools.sh needs to build kube-apiserver when that is newer.
go_wanted="$(sed -n 's/^go \([0-9][0-9.]*\).*/\1/p' pki-ffi/go/go.mod)"
go_kube="$(sed -n 's/^go_min=\([0-9][0-9.]*\).*/\1/p' scripts/kube-tools.sh)"
go_wanted="$(printf '%s\n%s\n' "$go_wanted" "$go_kube" | sort -V | tail -n 1)"
go_recent_enough() {
  command -v go >/dev/null 2>&1 || return 1
  local have
  have="$(go env GOVERSION 2>/dev/null | sed 's/^go//')"
  [ -n "$have" ] || return 1
  # sort -V puts the older first: recent enough when the wanted one is.
  [ "$(printf '%s\n%s\n' "$go_wanted" "$have" | sort -V | head -n 1)" = "$go_wanted" ]
}
python_has() { # MODULES: the python3 on PATH can import them
  command -v python3 >/dev/null 2>&1 && python3 -c "import $1" 2>/dev/null
}

collect() {
  packages=()
  reasons=()
  need openssl openssl "the trust-matrix and interop tests run openssl verify"
  need etcd etcd-server "the etcd store's tests, the CLI's and the C ABI's start a real etcd server"
  need redis-server redis-server "the credential tests mint and revoke ACL users of a real Redis server"
  need redis-cli redis-tools "the credential tests' hooks talk to Redis with redis-cli"
  need gcc gcc "the C ABI's tests and cgo compile C"
  need g++ g++ "the C ABI's header is compiled as C++17 too"
  [ -e /usr/include/stdio.h ] || want libc6-dev "the C headers the C ABI's tests include"
  need pkg-config pkg-config "the C install test links with pkg-config --libs pki"
  need pgrep procps "the credential tests check that a killed hook left no process"
  need softhsm2-util softhsm2 "the PKCS#11 tests make their own SoftHSM2 token and keep CA keys in it"
  need pkcs11-tool opensc "the PKCS#11 tests read the token's key objects back with OpenSC's pkcs11-tool"
  need python3 python3 "the JSON schema and token tests run Python checkers"
  python_has jsonschema || want python3-jsonschema "the CLI's JSON output is validated against docs/*.schema.json"
  python_has 'jwt, cryptography' || /usr/bin/python3 -c 'import jwt, cryptography' 2>/dev/null \
    || { want python3-jwt "the key ring's tokens are verified with PyJWT"
         want python3-cryptography "PyJWT's ES256 and RS256 need it"; }
  go_recent_enough || want golang-go "the Go package's tests (with cgo), and building kube-apiserver and etcd 3.6 for the kube:// tests (Go $go_wanted or later)"
}

if ! command -v cargo >/dev/null 2>&1; then
  echo "test: cargo is missing: install Rust 1.89 or later with rustup (Debian's cargo is too old)" >&2
  exit 1
fi

collect
if [ "${#packages[@]}" -gt 0 ]; then
  echo "test: these Debian packages are missing:"
  printf '  %s\n' "${reasons[@]}"
  if [ -z "$install" ]; then
    echo "test: install them with: apt-get install ${packages[*]}" >&2
    exit 1
  fi
  command -v apt-get >/dev/null 2>&1 || {
    echo "test: apt-get not found: install the packages above with this system's package manager" >&2
    exit 1
  }
  sudo=
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "test: run as root, or install sudo, to install them" >&2; exit 1; }
    sudo=sudo
  fi
  apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq)
  codename="$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")"
  go_from=()
  for p in "${packages[@]}"; do [ "$p" = golang-go ] && go_from=(golang-go); done
  if [ "${#go_from[@]}" -gt 0 ] && [ "$codename" = bookworm ]; then
    # Debian 12's golang-go is Go 1.19, older than go.mod's; its backports
    # suite has a recent one.
    echo "test: Debian 12's golang-go is too old: adding bookworm-backports for Go"
    echo "deb http://deb.debian.org/debian bookworm-backports main" \
      | $sudo tee /etc/apt/sources.list.d/bookworm-backports.list >/dev/null
  fi
  echo "test: installing: apt-get install ${packages[*]}"
  $sudo apt-get update -qq
  others=()
  for p in "${packages[@]}"; do [ "$p" = golang-go ] || others+=("$p"); done
  if [ "${#others[@]}" -gt 0 ]; then $sudo "${apt[@]}" "${others[@]}" >/dev/null; fi
  if [ "${#go_from[@]}" -gt 0 ]; then
    if [ "$codename" = bookworm ]; then
      $sudo "${apt[@]}" -t bookworm-backports golang-go >/dev/null
    else
      $sudo "${apt[@]}" golang-go >/dev/null
    fi
  fi
  if ! python_has jsonschema && [ "$(command -v python3)" != /usr/bin/python3 ]; then
    # The python3 on PATH is not Debian's (pyenv, a virtualenv): apt-get
    # cannot reach it.
    echo "test: installing jsonschema from PyPI into $(command -v python3) (python3 -m pip install jsonschema)"
    python3 -m pip install --quiet jsonschema >/dev/null 2>&1 || true
  fi
  collect
  if [ "${#packages[@]}" -gt 0 ]; then
    echo "test: still missing after apt-get install:" >&2
    printf '  %s\n' "${reasons[@]}" >&2
    go_recent_enough || echo "test: go $(go env GOVERSION 2>/dev/null || echo 'not found') is older than the go $go_wanted that pki-ffi/go/go.mod and scripts/kube-tools.sh need" >&2
    if ! python_has jsonschema || ! python_has 'jwt, cryptography'; then
      echo "test: the python3 on PATH ($(command -v python3)) is not Debian's: pip install jsonschema into it, or put /usr/bin first in PATH" >&2
    fi
    exit 1
  fi
fi

# The kube:// tests' servers, built once and cached; the tests then find
# them here without running the script again.
if [ -z "${PKI_KUBE_APISERVER:-}" ] || [ -z "${PKI_KUBE_ETCD:-}" ]; then
  echo "test: kube-apiserver and etcd 3.6 for the kube:// tests: scripts/kube-tools.sh"
  kube_tools="$(scripts/kube-tools.sh)"
  PKI_KUBE_APISERVER="$(sed -n 1p <<<"$kube_tools")"
  PKI_KUBE_ETCD="$(sed -n 2p <<<"$kube_tools")"
  export PKI_KUBE_APISERVER PKI_KUBE_ETCD
fi

echo "test: cargo test --workspace $*"
exec cargo test --workspace "$@"
