//go:build pki_debug

package pki

// With -tags pki_debug, cgo links the debug build of libpki_ffi.a only
// (`cargo build -p pki-ffi`), even when a release build exists.

// #cgo LDFLAGS: -L${SRCDIR}/../../target/debug
import "C"
