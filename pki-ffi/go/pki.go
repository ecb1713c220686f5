// Package pki rotates X.509 certificate authorities without breaking trust.
//
// It wraps pki's C library (pki-ffi) with cgo. A Signer holds a CA, its
// bridges and its bundle; a Store keeps it (a directory, memory, or the
// caller's Secret-shaped storage through a SecretBackend), and Store.Step
// rotates it when due (or when forced), writing by compare-and-swap so that
// racing controller replicas rotate once; Step.NextCheck says when to step
// again. ReconcileLeaf keeps serving and client certificates issued by the
// current CA, with the bridge that lets clients that still trust the
// previous CA accept them. Signer.Secret and LoadSecret map the state to a
// Kubernetes Secret's Data as it is.
//
// Time is always an argument: the library never reads the clock. PEM goes
// in and out as []byte. Every failure is an *Error with the library's code
// and message, matched with errors.Is against the Err* sentinels.
//
// Build the static library first (from the repository root):
//
//	cargo build -p pki-ffi
//
// The package links libpki_ffi.a statically, from the workspace's
// target/debug by default. When cargo builds elsewhere (CARGO_TARGET_DIR,
// or a release build), name that directory first:
//
//	CGO_LDFLAGS="-L$CARGO_TARGET_DIR/debug" go test ./...
package pki

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#cgo LDFLAGS: -L${SRCDIR}/../../target/debug -l:libpki_ffi.a -lpthread -ldl -lm
#include <stdlib.h>
#include "pki.h"
*/
import "C"

import (
	"runtime"
	"time"
	"unsafe"
)

// Version is the version of the linked C library.
func Version() string { return C.GoString(C.pki_version()) }

// nonEmpty backs zero-length arguments: the C API wants a non-NULL pointer
// even for zero bytes (NULL means "not given").
var nonEmpty [1]byte

func bytesArg(b []byte) (*C.uint8_t, C.size_t) {
	if len(b) == 0 {
		return (*C.uint8_t)(unsafe.Pointer(&nonEmpty[0])), 0
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0])), C.size_t(len(b))
}

func strArg(s string) (*C.char, C.size_t) {
	if len(s) == 0 {
		return (*C.char)(unsafe.Pointer(&nonEmpty[0])), 0
	}
	return (*C.char)(unsafe.Pointer(unsafe.StringData(s))), C.size_t(len(s))
}

// goBytes copies a view of library-owned bytes into Go memory.
func goBytes(v C.pki_bytes) []byte {
	if v.data == nil || v.len == 0 {
		return []byte{}
	}
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(v.data)), int(v.len))...)
}

func unixTime(t time.Time) C.int64_t { return C.int64_t(t.Unix()) }

func fromUnix(s C.int64_t) time.Time { return time.Unix(int64(s), 0).UTC() }

// takeBuffer copies a buffer the library returned and frees it.
func takeBuffer(b *C.pki_buffer) []byte {
	defer C.pki_buffer_free(b)
	return goBytes(C.pki_buffer_data(b))
}

// KeyType is the key type of new CAs and of the leaves they issue.
type KeyType uint32

// Key types.
const (
	KeyP256    KeyType = C.PKI_KEY_TYPE_P256
	KeyRSA2048 KeyType = C.PKI_KEY_TYPE_RSA2048
	KeyRSA3072 KeyType = C.PKI_KEY_TYPE_RSA3072
	KeyRSA4096 KeyType = C.PKI_KEY_TYPE_RSA4096
	// KeyP384 is for CAs; the key ring refuses it.
	KeyP384 KeyType = C.PKI_KEY_TYPE_P384
)

// Policy says how long CAs live and when they rotate.
type Policy struct {
	// Lifetime D of a CA certificate.
	Lifetime time.Duration
	// MinTrust M: rotate when less than this remains; also the least time
	// a rotated-out CA stays trusted.
	MinTrust time.Duration
	// ReloadInterval I: the longest time any consumer goes without
	// reloading; 0 = unknown.
	ReloadInterval time.Duration
	// LeafRefreshFraction: re-issue a leaf when less than this fraction of
	// its lifetime remains, in (0, 1).
	LeafRefreshFraction float64
	// KeepPreviousRoot keeps the previous self-signed CA in the bundle
	// while it is valid, besides bridge A.
	KeepPreviousRoot bool
}

// DefaultPolicy is 790 days of lifetime, 395 of minimum trust, leaves
// refreshed at 20% of their lifetime left.
func DefaultPolicy() Policy { return policyFromC(C.pki_policy_default()) }

func policyFromC(p C.pki_policy) Policy {
	return Policy{
		Lifetime:            time.Duration(p.lifetime_seconds) * time.Second,
		MinTrust:            time.Duration(p.min_trust_seconds) * time.Second,
		ReloadInterval:      time.Duration(p.reload_interval_seconds) * time.Second,
		LeafRefreshFraction: float64(p.leaf_refresh_fraction),
		KeepPreviousRoot:    bool(p.keep_previous_root),
	}
}

func (p *Policy) toC() *C.pki_policy {
	if p == nil {
		return nil
	}
	return &C.pki_policy{
		lifetime_seconds:        C.int64_t(p.Lifetime / time.Second),
		min_trust_seconds:       C.int64_t(p.MinTrust / time.Second),
		reload_interval_seconds: C.int64_t(p.ReloadInterval / time.Second),
		leaf_refresh_fraction:   C.double(p.LeafRefreshFraction),
		keep_previous_root:      C.bool(p.KeepPreviousRoot),
	}
}

// Signer is a CA with its bridges, bundle, forced-rotation reason and
// history. It is immutable: Reconcile returns a new Signer, and one Signer
// may be used from many goroutines at once. Close frees it; a finalizer
// frees it too if Close is forgotten.
type Signer struct {
	ptr *C.pki_signer
}

func newSigner(ptr *C.pki_signer) *Signer {
	s := &Signer{ptr: ptr}
	runtime.SetFinalizer(s, (*Signer).Close)
	return s
}

// Close frees the signer. It is safe to call more than once, but not
// concurrently with other methods of the same Signer.
func (s *Signer) Close() {
	if s == nil || s.ptr == nil {
		return
	}
	C.pki_signer_free(s.ptr)
	s.ptr = nil
	runtime.SetFinalizer(s, nil)
}

func (s *Signer) handle() (*C.pki_signer, error) {
	if s == nil || s.ptr == nil {
		return nil, ErrClosed
	}
	return s.ptr, nil
}

// NewSigner creates a signer with a new self-signed CA "CN=commonName" valid
// from now. A nil policy means DefaultPolicy().
func NewSigner(commonName string, key KeyType, policy *Policy, now time.Time) (*Signer, error) {
	var out *C.pki_signer
	cn, cnLen := strArg(commonName)
	err := call(func() C.pki_result {
		return C.pki_signer_new(cn, cnLen, C.uint32_t(key), policy.toC(), unixTime(now), &out)
	})
	runtime.KeepAlive(commonName)
	if err != nil {
		return nil, err
	}
	return newSigner(out), nil
}

// LoadState reads a signer from the versioned state bytes written by State.
func LoadState(state []byte) (*Signer, error) {
	var out *C.pki_signer
	p, n := bytesArg(state)
	err := call(func() C.pki_result { return C.pki_signer_from_state(p, n, &out) })
	runtime.KeepAlive(state)
	if err != nil {
		return nil, err
	}
	return newSigner(out), nil
}

// State is the signer as one versioned JSON document, private keys
// included: keep it as a secret.
func (s *Signer) State() ([]byte, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	var out *C.pki_buffer
	err = call(func() C.pki_result { return C.pki_signer_to_state(h, &out) })
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	return takeBuffer(out), nil
}

// Secret keys written by Signer.Secret.
const (
	SecretCACert        = "tls.crt"
	SecretCAKey         = "tls.key"
	SecretBundle        = "ca-bundle.crt"
	SecretIntermediate  = "intermediate-ca.crt"
	SecretForcedReason  = "forced-rotation-reason"
	SecretStateDocument = "pki-state.json"
)

// Secret is the signer as a Kubernetes Secret's Data: tls.crt (CA
// certificate), tls.key (CA key), ca-bundle.crt, intermediate-ca.crt
// (bridge B, after a rotation), forced-rotation-reason (after a forced
// rotation), pki-state.json (the rest of the state) and certs.NAME.tls.crt,
// certs.NAME.tls.key for the leaves it keeps.
func (s *Signer) Secret() (map[string][]byte, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	var sec *C.pki_secret
	if err := call(func() C.pki_result { return C.pki_signer_to_secret(h, &sec) }); err != nil {
		return nil, err
	}
	runtime.KeepAlive(s)
	defer C.pki_secret_free(sec)
	return secretData(sec)
}

// LoadSecret reads a signer from a Secret's Data written by Secret. Keys it
// does not know are ignored.
func LoadSecret(data map[string][]byte) (*Signer, error) {
	sec, err := newCSecret(data)
	if err != nil {
		return nil, err
	}
	defer C.pki_secret_free(sec)
	var out *C.pki_signer
	if err := call(func() C.pki_result { return C.pki_signer_from_secret(sec, &out) }); err != nil {
		return nil, err
	}
	return newSigner(out), nil
}

// RequestLeaf returns a copy of the signer that also keeps the leaf name
// (or replaces its request): a serving or client certificate whose chain
// and key live in the signer's document, issued by the next Reconcile or
// Store.Step and re-issued when the CA rotates, when it nears expiry or
// when its request changes. Its refresh time is part of NextCheck. A
// directory store publishes it as certs/NAME/tls.crt and tls.key, a Secret
// as certs.NAME.tls.crt and certs.NAME.tls.key.
func (s *Signer) RequestLeaf(name string, req LeafRequest) (*Signer, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	r, err := buildRequest(req)
	if err != nil {
		return nil, err
	}
	defer C.pki_leaf_request_free(r)
	var out *C.pki_signer
	p, n := strArg(name)
	err = call(func() C.pki_result { return C.pki_signer_request_leaf(h, p, n, r, &out) })
	runtime.KeepAlive(name)
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	return newSigner(out), nil
}

// Generation is an in-memory counter: 0 for a signer created or loaded
// (LoadState, LoadSecret, Store.Load, Store.Step), one more than its input
// for the signer Reconcile returns when that reconcile changed something.
// It is stored nowhere and is not a compare-and-swap token: a Store owns
// revisions (Step.Revision) and Step.Changed says whether a step wrote.
// 0 for a closed signer.
func (s *Signer) Generation() uint64 {
	h, err := s.handle()
	if err != nil {
		return 0
	}
	g := uint64(C.pki_signer_generation(h))
	runtime.KeepAlive(s)
	return g
}

// Policy is the policy the signer was created or last reconciled with.
func (s *Signer) Policy() (Policy, error) {
	h, err := s.handle()
	if err != nil {
		return Policy{}, err
	}
	var p C.pki_policy
	err = call(func() C.pki_result { return C.pki_signer_policy(h, &p) })
	runtime.KeepAlive(s)
	if err != nil {
		return Policy{}, err
	}
	return policyFromC(p), nil
}

// Bundle is the CA bundle clients should trust now.
func (s *Signer) Bundle() (*Bundle, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	var out *C.pki_bundle
	err = call(func() C.pki_result { return C.pki_signer_bundle(h, &out) })
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	return newBundle(out), nil
}

// ForcedRotation asks for a rotation whatever the validity left. It runs
// once per distinct Reason.
type ForcedRotation struct {
	Reason string
	// Grace, when positive, is how long the old CA stays trusted instead
	// of the normal max(old NotAfter, now + MinTrust).
	Grace time.Duration
	// NoBridges distrusts the old CA at once (key compromise).
	NoBridges bool
}

// EventKind says what happened.
type EventKind uint32

// Event kinds.
const (
	EventRotated       EventKind = C.PKI_EVENT_ROTATED
	EventLeafReissued  EventKind = C.PKI_EVENT_LEAF_REISSUED
	EventBundlePruned  EventKind = C.PKI_EVENT_BUNDLE_PRUNED
	EventBridgeRetired EventKind = C.PKI_EVENT_BRIDGE_RETIRED
	EventOther         EventKind = C.PKI_EVENT_OTHER
)

// Event is one thing a reconcile did.
type Event struct {
	Kind EventKind
	// Message is one line for logs and Kubernetes events.
	Message string
	// PreviousTrustedUntil is, for a rotation with bridges, until when the
	// previous CA stays trusted; zero otherwise.
	PreviousTrustedUntil time.Time
}

// ReconcileOptions are the optional inputs of Reconcile.
type ReconcileOptions struct {
	// Forced, when set, asks for a forced rotation.
	Forced *ForcedRotation
	// Policy, when set, replaces the signer's policy.
	Policy *Policy
	// AllowTrustBreak, for Store.Step: the operator's reason to rotate even
	// when consumers would be cut off (an expired CA; a rotation while
	// clients may still hold the bundle of two rotations ago), recorded in
	// the rotation's history with each break. Empty: such a rotation fails
	// with ErrTrustBreak. Signer.Reconcile, which keeps nothing, does not
	// check for trust breaks.
	AllowTrustBreak string
}

// Reconciled is the outcome of Reconcile.
type Reconciled struct {
	// Signer is the next state (a new handle; the old one is unchanged).
	Signer *Signer
	// Events says what happened, possibly nothing.
	Events []Event
	// NextCheck is when to reconcile again: the engine's wake-up time of
	// the next state (after a rotation, the new CA's, bridges' and leaves'
	// times), always after now.
	NextCheck time.Time
}

// Reconcile rotates the CA when less than MinTrust remains or when forced
// with a new reason, and drops expired bundle members and bridges. opts may
// be nil. It keeps nothing: to persist the signer, and to let several
// replicas race safely, keep it in a Store and call Store.Step.
func (s *Signer) Reconcile(now time.Time, opts *ReconcileOptions) (*Reconciled, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &ReconcileOptions{}
	}
	forced, free := opts.Forced.toC()
	defer free()
	var (
		next      *C.pki_signer
		events    *C.pki_events
		nextCheck C.int64_t
	)
	policy := opts.Policy.toC()
	err = call(func() C.pki_result {
		return C.pki_signer_reconcile(h, policy, unixTime(now), forced, &next, &events, &nextCheck)
	})
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	defer C.pki_events_free(events)
	evs, err := eventsFrom(events)
	if err != nil {
		C.pki_signer_free(next)
		return nil, err
	}
	return &Reconciled{Signer: newSigner(next), Events: evs, NextCheck: fromUnix(nextCheck)}, nil
}

// eventsFrom copies a list of events into Go memory.
func eventsFrom(events *C.pki_events) ([]Event, error) {
	var out []Event
	n := int(C.pki_events_len(events))
	for i := 0; i < n; i++ {
		var e C.pki_event
		if err := call(func() C.pki_result { return C.pki_events_get(events, C.size_t(i), &e) }); err != nil {
			return nil, err
		}
		ev := Event{Kind: EventKind(e.kind), Message: string(goBytes(e.message))}
		if e.has_previous_trusted_until {
			ev.PreviousTrustedUntil = fromUnix(e.previous_trusted_until)
		}
		out = append(out, ev)
	}
	return out, nil
}

// LineageRule says which rule decided a lineage check.
type LineageRule uint32

// Lineage rules.
const (
	LineageKeyIdentifierMatch            LineageRule = C.PKI_LINEAGE_KEY_IDENTIFIER_MATCH
	LineageKeyIdentifierMismatch         LineageRule = C.PKI_LINEAGE_KEY_IDENTIFIER_MISMATCH
	LineageMissingAuthorityKeyIdentifier LineageRule = C.PKI_LINEAGE_MISSING_AUTHORITY_KEY_IDENTIFIER
	LineageLegacyNameMatch               LineageRule = C.PKI_LINEAGE_LEGACY_NAME_MATCH
	LineageLegacyNameMismatch            LineageRule = C.PKI_LINEAGE_LEGACY_NAME_MISMATCH
)

// Lineage is the answer to "was this certificate issued by the current CA?".
type Lineage struct {
	IssuedBy bool
	Rule     LineageRule
	Reason   string
}

// CheckLineage checks the first certificate of certPEM against the current
// CA by AuthorityKeyIdentifier == SubjectKeyIdentifier.
func (s *Signer) CheckLineage(certPEM []byte) (Lineage, error) {
	h, err := s.handle()
	if err != nil {
		return Lineage{}, err
	}
	var (
		l      C.pki_lineage
		reason *C.pki_buffer
	)
	p, n := bytesArg(certPEM)
	err = call(func() C.pki_result { return C.pki_signer_check_lineage(h, p, n, &l, &reason) })
	runtime.KeepAlive(s)
	runtime.KeepAlive(certPEM)
	if err != nil {
		return Lineage{}, err
	}
	return Lineage{IssuedBy: bool(l.issued_by), Rule: LineageRule(l.rule), Reason: string(takeBuffer(reason))}, nil
}
