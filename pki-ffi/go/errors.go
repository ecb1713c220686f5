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

// Result codes; see pki.h for their meaning. Numbers never change.
const (
	CodeOK                  Code = C.PKI_RESULT_OK
	CodeNullParameter       Code = C.PKI_RESULT_NULL_PARAMETER
	CodePanic               Code = C.PKI_RESULT_PANIC
	CodeInvalidArgument     Code = C.PKI_RESULT_INVALID_ARGUMENT
	CodeBuilderConsumed     Code = C.PKI_RESULT_BUILDER_CONSUMED // no longer returned; the number stays taken
	CodeNotFound            Code = C.PKI_RESULT_NOT_FOUND
	CodePEM                 Code = C.PKI_RESULT_PEM
	CodeNoPEMBlock          Code = C.PKI_RESULT_NO_PEM_BLOCK
	CodeKeyMismatch         Code = C.PKI_RESULT_KEY_MISMATCH
	CodeInvalidPolicy       Code = C.PKI_RESULT_INVALID_POLICY
	CodeNoRoot              Code = C.PKI_RESULT_NO_ROOT
	CodeClockBeforeCA       Code = C.PKI_RESULT_CLOCK_BEFORE_CA
	CodeEmptyForcedReason   Code = C.PKI_RESULT_EMPTY_FORCED_REASON
	CodeTrustCheckFailed    Code = C.PKI_RESULT_TRUST_CHECK_FAILED
	CodeUnknownLeaf         Code = C.PKI_RESULT_UNKNOWN_LEAF
	CodeUnknownBundle       Code = C.PKI_RESULT_UNKNOWN_BUNDLE
	CodeUnsupportedVersion  Code = C.PKI_RESULT_UNSUPPORTED_STATE_VERSION
	CodeCorruptState        Code = C.PKI_RESULT_CORRUPT_STATE
	CodeStore               Code = C.PKI_RESULT_STORE
	CodeConflict            Code = C.PKI_RESULT_CONFLICT
	CodeNotInitialized      Code = C.PKI_RESULT_NOT_INITIALIZED
	CodeAlreadyInitialized  Code = C.PKI_RESULT_ALREADY_INITIALIZED
	CodeUnknownOutcome      Code = C.PKI_RESULT_UNKNOWN_OUTCOME
	CodeVerifyExpired       Code = C.PKI_RESULT_VERIFY_EXPIRED
	CodeVerifyUnknownIssuer Code = C.PKI_RESULT_VERIFY_UNKNOWN_ISSUER
	CodeVerifyNameMismatch  Code = C.PKI_RESULT_VERIFY_NAME_MISMATCH
	// CodeTrustBreak: Store.Step refused a rotation that would cut
	// consumers off (the message says who and until when);
	// SignerInput.AllowTrustBreak overrides it with a reason.
	CodeTrustBreak Code = C.PKI_RESULT_TRUST_BREAK
)

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

// Sentinel errors, for errors.Is.
var (
	ErrNullParameter      error = &Error{Code: CodeNullParameter}
	ErrPanic              error = &Error{Code: CodePanic}
	ErrInvalidArgument    error = &Error{Code: CodeInvalidArgument}
	ErrNotFound           error = &Error{Code: CodeNotFound}
	ErrPEM                error = &Error{Code: CodePEM}
	ErrNoPEMBlock         error = &Error{Code: CodeNoPEMBlock}
	ErrKeyMismatch        error = &Error{Code: CodeKeyMismatch}
	ErrInvalidPolicy      error = &Error{Code: CodeInvalidPolicy}
	ErrNoRoot             error = &Error{Code: CodeNoRoot}
	ErrClockBeforeCA      error = &Error{Code: CodeClockBeforeCA}
	ErrEmptyForcedReason  error = &Error{Code: CodeEmptyForcedReason}
	ErrTrustCheckFailed   error = &Error{Code: CodeTrustCheckFailed}
	ErrUnknownLeaf        error = &Error{Code: CodeUnknownLeaf}
	ErrUnknownBundle      error = &Error{Code: CodeUnknownBundle}
	ErrUnsupportedVersion error = &Error{Code: CodeUnsupportedVersion}
	ErrCorruptState       error = &Error{Code: CodeCorruptState}
	// ErrStore: a store failed (I/O, an unreachable or broken backend);
	// retrying at once is not expected to help.
	ErrStore error = &Error{Code: CodeStore}
	// ErrConflict: another writer changed the document since it was read.
	// A SecretBackend returns it (or wraps it) for a lost resourceVersion
	// race; Store.Step returns it after too many lost races in a row.
	ErrConflict error = &Error{Code: CodeConflict}
	// ErrNotInitialized: the store holds no document at the key.
	ErrNotInitialized error = &Error{Code: CodeNotInitialized}
	// ErrAlreadyInitialized: Create found a document at the key.
	ErrAlreadyInitialized error = &Error{Code: CodeAlreadyInitialized}
	// ErrUnknownOutcome: a store write was sent but its answer was lost
	// (a timeout, a dropped connection), so it may have landed: the store
	// may hold the new document or the old one. Unlike every other error,
	// it does not promise that nothing changed. Stepping again with the
	// same request is safe: one that landed is then nothing to do.
	ErrUnknownOutcome      error = &Error{Code: CodeUnknownOutcome}
	ErrVerifyExpired       error = &Error{Code: CodeVerifyExpired}
	ErrVerifyUnknownIssuer error = &Error{Code: CodeVerifyUnknownIssuer}
	ErrVerifyNameMismatch  error = &Error{Code: CodeVerifyNameMismatch}
	// ErrTrustBreak: a rotation would cut consumers off and no reason to
	// allow it was given (SignerInput.AllowTrustBreak).
	ErrTrustBreak error = &Error{Code: CodeTrustBreak}

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
