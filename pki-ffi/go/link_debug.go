//go:build pki_debug

package pki

// With -tags pki_debug, cgo links the debug build of libpki_ffi.a only
// (`cargo build -p pki-ffi`), even when a release build exists.

// cgo directives cannot read the environment, so a build with
// CARGO_TARGET_DIR set passes its directory the one way cgo allows:
// CGO_LDFLAGS="-L$CARGO_TARGET_DIR/debug" (what pki-ffi/tests/go.rs does).

// #cgo LDFLAGS: -L${SRCDIR}/../../target/debug
import "C"
