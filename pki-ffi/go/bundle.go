package pki

// #include "pki.h"
import "C"

import (
	"runtime"
	"time"
)

// Bundle is an ordered set of CA certificates, deduplicated. It is
// immutable and may be used from many goroutines at once. Close frees it;
// a finalizer frees it too if Close is forgotten.
type Bundle struct {
	ptr *C.pki_bundle
}

func newBundle(ptr *C.pki_bundle) *Bundle {
	b := &Bundle{ptr: ptr}
	runtime.SetFinalizer(b, (*Bundle).Close)
	return b
}

// Close frees the bundle. It is safe to call more than once, but not
// concurrently with other methods of the same Bundle.
func (b *Bundle) Close() {
	if b == nil || b.ptr == nil {
		return
	}
	C.pki_bundle_free(b.ptr)
	b.ptr = nil
	runtime.SetFinalizer(b, nil)
}

func (b *Bundle) handle() (*C.pki_bundle, error) {
	if b == nil || b.ptr == nil {
		return nil, ErrClosed
	}
	return b.ptr, nil
}

// ParseBundle reads a PEM bundle; every block must be a CERTIFICATE.
func ParseBundle(pem []byte) (*Bundle, error) {
	var out *C.pki_bundle
	p, n := bytesArg(pem)
	err := call(func() C.pki_result { return C.pki_bundle_from_pem(p, n, &out) })
	runtime.KeepAlive(pem)
	if err != nil {
		return nil, err
	}
	return newBundle(out), nil
}

// PEM writes the bundle, one CERTIFICATE block per member, in order.
func (b *Bundle) PEM() ([]byte, error) { return b.export(C.PKI_BUNDLE_PEM) }

// Len is the number of certificates (0 for a closed bundle).
func (b *Bundle) Len() int {
	h, err := b.handle()
	if err != nil {
		return 0
	}
	n := int(C.pki_bundle_len(h))
	runtime.KeepAlive(b)
	return n
}

// Merge returns a new bundle: b's members, then other's not yet present.
func (b *Bundle) Merge(other *Bundle) (*Bundle, error) {
	h, err := b.handle()
	if err != nil {
		return nil, err
	}
	o, err := other.handle()
	if err != nil {
		return nil, err
	}
	var out *C.pki_bundle
	err = call(func() C.pki_result { return C.pki_bundle_merge(h, o, &out) })
	runtime.KeepAlive(b)
	runtime.KeepAlive(other)
	if err != nil {
		return nil, err
	}
	return newBundle(out), nil
}

// PruneExpired returns a new bundle without the members expired at now,
// and how many were removed.
func (b *Bundle) PruneExpired(now time.Time) (*Bundle, int, error) {
	h, err := b.handle()
	if err != nil {
		return nil, 0, err
	}
	var (
		out     *C.pki_bundle
		removed C.size_t
	)
	err = call(func() C.pki_result { return C.pki_bundle_prune_expired(h, unixTime(now), &out, &removed) })
	runtime.KeepAlive(b)
	if err != nil {
		return nil, 0, err
	}
	return newBundle(out), int(removed), nil
}

// Fingerprint is SHA-256 over the sorted fingerprints of the members: the
// same set in any order gives the same value.
func (b *Bundle) Fingerprint() ([32]byte, error) {
	return b.digest(C.PKI_BUNDLE_FINGERPRINT)
}

// RootPin is SHA-256 of the DER of the first self-signed root (ErrNoRoot
// when there is none).
func (b *Bundle) RootPin() ([32]byte, error) {
	return b.digest(C.PKI_BUNDLE_ROOT_PIN)
}

// export writes one form of the bundle (a pki_bundle_output).
func (b *Bundle) export(output C.uint32_t) ([]byte, error) {
	h, err := b.handle()
	if err != nil {
		return nil, err
	}
	var out *C.pki_buffer
	err = call(func() C.pki_result { return C.pki_bundle_export(h, output, &out) })
	runtime.KeepAlive(b)
	if err != nil {
		return nil, err
	}
	return takeBuffer(out), nil
}

func (b *Bundle) digest(output C.uint32_t) ([32]byte, error) {
	var d [32]byte
	raw, err := b.export(output)
	if err != nil {
		return d, err
	}
	copy(d[:], raw)
	return d, nil
}

// SPKIPins are SHA-256 digests of each member's SubjectPublicKeyInfo,
// deduplicated, in bundle order.
func (b *Bundle) SPKIPins() ([][32]byte, error) {
	raw, err := b.export(C.PKI_BUNDLE_SPKI_PINS)
	if err != nil {
		return nil, err
	}
	pins := make([][32]byte, len(raw)/32)
	for i := range pins {
		copy(pins[i][:], raw[i*32:])
	}
	return pins, nil
}

// Purpose is what a chain's leaf is verified for.
type Purpose uint32

// Purposes.
const (
	ServerAuth Purpose = C.PKI_PURPOSE_SERVER_AUTH
	ClientAuth Purpose = C.PKI_PURPOSE_CLIENT_AUTH
)

// VerifyChain verifies chainPEM (leaf first, then untrusted intermediates)
// against the bundle at time at, for purpose and, unless name is empty, for
// name (a DNS name or an IP address). It returns the PEM of the path found,
// leaf first, anchor last; errors match ErrVerify.
func (b *Bundle) VerifyChain(chainPEM []byte, at time.Time, purpose Purpose, name string) ([]byte, error) {
	h, err := b.handle()
	if err != nil {
		return nil, err
	}
	var (
		out   *C.pki_buffer
		nameP *C.char
		nameN C.size_t
	)
	if name != "" {
		nameP, nameN = strArg(name)
	}
	p, n := bytesArg(chainPEM)
	err = call(func() C.pki_result {
		return C.pki_verify_chain(h, p, n, unixTime(at), C.uint32_t(purpose), nameP, nameN, &out)
	})
	runtime.KeepAlive(b)
	runtime.KeepAlive(chainPEM)
	runtime.KeepAlive(name)
	if err != nil {
		return nil, err
	}
	return takeBuffer(out), nil
}
