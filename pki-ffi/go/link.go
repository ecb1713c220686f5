//go:build !pki_debug

package pki

// Where cgo finds libpki_ffi.a: the release build that
// `cargo build --release -p pki-ffi` makes, or the debug build (`cargo build
// -p pki-ffi`, ten times larger and slower) when there is no release one.
// The release library comes first, so once it exists a newer debug build
// is not used: build with -tags pki_debug (link_debug.go) to link the debug
// library only. Directories named in CGO_LDFLAGS are searched before both.

// cgo directives cannot read the environment, so a build with
// CARGO_TARGET_DIR set passes its directory the one way cgo allows:
// CGO_LDFLAGS="-L$CARGO_TARGET_DIR/release" (what pki-ffi/tests/go.rs does).

// #cgo LDFLAGS: -L${SRCDIR}/../../target/release -L${SRCDIR}/../../target/debug
import "C"
