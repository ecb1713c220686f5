#!/usr/bin/env bash
# Builds the Kubernetes API server and etcd 3.6 that the kube:// store's
# tests run (pki-kube's test support starts them), from the Go module proxy,
# into a cache folder that later runs reuse:
#
#   scripts/kube-tools.sh [--check]
#
# On success it prints two lines on stdout, the paths of kube-apiserver and
# etcd:
#
#   ${PKI_KUBE_TOOLS:-$HOME/.cache/pki-kube-tools}/VERSION/kube-apiserver
#   ${PKI_KUBE_TOOLS:-$HOME/.cache/pki-kube-tools}/VERSION/etcd
#
# When both are there already it builds nothing (milliseconds). A cold build
# takes about 6 minutes on 2 cores and, while it runs, about 0.7 GB of Go
# modules and 2 GB of Go build cache in a folder beside the binaries that is
# removed at the end: only the two binaries stay (about 125 MB). --check
# builds nothing: it prints the paths when both are built, else says so
# and exits 1. Needs Go 1.24 or later (the go command on PATH); GOPROXY and
# GOFLAGS of the environment are respected. PKI_KUBE_TOOLS_JOBS (default 2)
# is `go build -p`.
#
# Why not Debian's packages: Debian has no kube-apiserver, and its etcd is
# 3.4, which floods the API server's log; upstream's release binaries are
# downloads this project does not depend on.
set -euo pipefail

k8s_version=v1.34.4
# The staging modules (k8s.io/api, k8s.io/client-go, ...) are published
# with the same minor and patch as v0.MINOR.PATCH.
staging_version="v0.${k8s_version#v1.}"
# The newest 3.6 release the module proxy served on 2026-11-25.
etcd_version=v3.6.16
go_min=1.24 # k8s.io/kubernetes v1.34's go.mod

root="${PKI_KUBE_TOOLS:-${HOME:?is not set: set PKI_KUBE_TOOLS to a cache folder}/.cache/pki-kube-tools}"
dir="$root/kube-apiserver-$k8s_version-etcd-$etcd_version"
apiserver="$dir/kube-apiserver"
etcd="$dir/etcd"

say() { echo "kube-tools: $*" >&2; }
built() { [ -x "$apiserver" ] && [ -x "$etcd" ]; }
print_paths() { printf '%s\n%s\n' "$apiserver" "$etcd"; }

case "${1:-}" in
  "") ;;
  --check)
    if built; then print_paths; exit 0; fi
    say "kube-apiserver $k8s_version and etcd $etcd_version are not built in $dir: run scripts/kube-tools.sh (needs Go $go_min or later, about 6 minutes once)"
    exit 1 ;;
  -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: scripts/kube-tools.sh [--check]" >&2; exit 2 ;;
esac

if built; then print_paths; exit 0; fi

go_ok() {
  command -v go >/dev/null 2>&1 || return 1
  local have
  have="$(go env GOVERSION 2>/dev/null | sed 's/^go//')"
  [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$go_min" "$have" | sort -V | head -n 1)" = "$go_min" ]
}
if ! go_ok; then
  say "go $go_min or later is missing (found: $(go env GOVERSION 2>/dev/null || echo none)): install Go (apt-get install golang-go; on Debian 12 from bookworm-backports) to build kube-apiserver and etcd for the kube:// tests"
  exit 1
fi

mkdir -p "$root"
# One build at a time: a second caller (another test binary, another
# script) waits for the first and then finds the binaries.
exec 9>"$root/.lock"
if ! flock -n 9; then
  say "another build is running in $root: waiting for it"
  flock 9
fi
if built; then print_paths; exit 0; fi

work="$(mktemp -d "$root/.build.XXXXXX")"
cleanup() {
  # Module files are read-only unless -modcacherw was in effect; make sure.
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
# Go's module and build caches of this build only: 2.7 GB that nothing
# reuses once the binaries exist.
export GOMODCACHE="$work/mod" GOCACHE="$work/cache" GOPATH="$work/gopath"
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod -modcacherw -buildvcs=false"
export CGO_ENABLED=0
jobs="${PKI_KUBE_TOOLS_JOBS:-2}"
start=$SECONDS
quiet_get() { # go get without its hundreds of "downloading" lines
  if ! go get "$1" > "$work/get.log" 2>&1; then
    grep -v '^go: downloading' "$work/get.log" >&2
    say "go get $1 failed"
    exit 1
  fi
}
say "building kube-apiserver $k8s_version and etcd $etcd_version with $(go env GOVERSION) (about 6 minutes on 2 cores, once) into $dir"

# kube-apiserver: a module that requires k8s.io/kubernetes and points each
# of its staging modules (replaced by ./staging/src/... in its own go.mod)
# at the published module of the same name.
mkdir -p "$work/apiserver" "$work/etcd" "$work/out"
cd "$work/apiserver"
printf 'module pki.invalid/kube-tools/apiserver\n\ngo %s\n' "$go_min" > go.mod
gomod="$(go mod download -json "k8s.io/kubernetes@$k8s_version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
[ -f "$gomod" ] || { say "could not download k8s.io/kubernetes@$k8s_version's go.mod from $(go env GOPROXY)"; exit 1; }
staging="$(sed -n 's#^[[:space:]]*\(replace[[:space:]]\{1,\}\)\{0,1\}\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\2#p' "$gomod")"
[ -n "$staging" ] || { say "no staging module found in $gomod's replace block"; exit 1; }
go mod edit -require="k8s.io/kubernetes@$k8s_version"
for m in $staging; do go mod edit -replace="$m=$m@$staging_version"; done
say "$(echo "$staging" | wc -l) staging modules replaced by their $staging_version"
quiet_get "k8s.io/kubernetes/cmd/kube-apiserver@$k8s_version"
ldflags="-s -w"
for kv in "gitVersion=$k8s_version" "gitMajor=1" "gitMinor=$(echo "$k8s_version" | cut -d. -f2)" \
          "gitTreeState=clean"; do
  ldflags="$ldflags -X k8s.io/component-base/version.$kv"
done
go build -p "$jobs" -ldflags "$ldflags" -o "$work/out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
say "kube-apiserver built after $((SECONDS - start)) s"

# etcd: its server module's main, in a module of ours (etcd's own go.mod
# has replace directives, so `go install` of it is refused).
cd "$work/etcd"
printf 'module pki.invalid/kube-tools/etcd\n\ngo %s\n' "$go_min" > go.mod
cat > main.go <<'EOF'
// The etcd server, as etcd's own main package starts it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
quiet_get "go.etcd.io/etcd/server/v3@$etcd_version"
go build -p "$jobs" -ldflags "-s -w" -o "$work/out/etcd" .
say "etcd built after $((SECONDS - start)) s"

"$work/out/etcd" --version | head -n 1 | grep -q "${etcd_version#v}" \
  || { say "the etcd built does not report version $etcd_version"; exit 1; }
mkdir -p "$dir"
# Both or neither: a cache folder is never left half-filled.
mv "$work/out/etcd" "$dir/etcd.tmp" && mv "$work/out/kube-apiserver" "$dir/kube-apiserver.tmp"
mv "$dir/etcd.tmp" "$etcd"
mv "$dir/kube-apiserver.tmp" "$apiserver"
say "done in $((SECONDS - start)) s"
print_paths
