package pki

// #include "pki.h"
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// Code is a result code of the C library (pki_result in pki.h).
type Code uint32

// String is the code's name in pki.h, such as "PKI_RESULT_CORRUPT_STATE".
func (c Code) String() string {
	return C.GoString(C.pki_result_name(C.uint32_t(c)))
}

// The Code constants (CodeOK, CodeStore…) and one Err sentinel per code
// (ErrStore, ErrConflict…) are generated from the Rust definitions:
// zz_generated_codes.go.

// Error is what every failing call returns: the library's result code and
// its message. Compare with errors.Is against the Err* sentinels.
type Error struct {
	Code    Code
	Message string
	// cause is the context's error when the call's context ended while a
	// SecretBackend waited on it: errors.Is(err, context.Canceled) holds.
	cause error
}

// Unwrap returns the context's error when the call failed after its
// context was cancelled or timed out, else nil.
func (e *Error) Unwrap() error { return e.cause }

func (e *Error) Error() string {
	if e.Message == "" {
		return "pki: " + e.Code.String()
	}
	return fmt.Sprintf("pki: %s (%s)", e.Message, e.Code)
}

// Is matches a sentinel of the same code, or a class sentinel (ErrParse,
// ErrVerify) whose block contains the code.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case *Error:
		return t.Message == "" && t.Code == e.Code
	case *classError:
		return e.Code >= t.lo && e.Code <= t.hi
	}
	return false
}

type classError struct {
	lo, hi Code
	name   string
}

func (c *classError) Error() string { return c.name }

// Class sentinels, for errors.Is.
var (
	// ErrParse matches every input-parsing failure (codes 100-199).
	ErrParse error = &classError{100, 199, "pki: input could not be parsed"}
	// ErrVerify matches every reason a chain does not verify (codes 500-599).
	ErrVerify error = &classError{500, 599, "pki: chain does not verify"}
	// ErrClosed is returned by methods of a handle after Close (or of a nil one).
	ErrClosed = errors.New("pki: use of a closed or nil handle")
)

// call runs one C function and, when it fails, reads the thread-local last
// error on the same OS thread: cgo may otherwise move the goroutine to
// another thread between the two calls.
func call(f func() C.pki_result) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := f()
	if r == C.PKI_RESULT_OK {
		return nil
	}
	return &Error{Code: Code(r), Message: lastError()}
}

func lastError() string {
	n := C.pki_last_error_length()
	buf := make([]byte, int(n)+1)
	var written C.size_t
	if C.pki_last_error((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &written) != C.PKI_RESULT_OK {
		return ""
	}
	return string(buf[:written])
}
