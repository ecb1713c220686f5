// Package pki rotates X.509 certificate authorities without breaking trust.
//
// It wraps pki's C library (pki-ffi) with cgo, and mirrors its one
// surface: every engine (a signer, a CA set, a key ring, a credential) is
// kept in a Store, and every change of one is a step that returns a *Step:
// whether it wrote, what happened (Events), when to step again (NextWake),
// the document's revision, the rounds it took, and the status of the
// document now in the store. Racing controller replicas write by
// compare-and-swap and change a document once.
//
// A Signer holds a CA, its bridges and its bundle; Store.Step rotates it
// when due (or when forced), ReconcileLeaf keeps serving and client
// certificates issued by the current CA, with the bridge that lets clients
// that still trust the previous CA accept them, and Signer.Secret and
// LoadSecret map it to a Kubernetes Secret's Data as it is. SetOf, KeyRingOf
// and CredentialOf reach the other engines in a store.
//
// Every call that reads or writes a store takes a context.Context first:
// it is checked before the call and passed to a SecretBackend's methods
// (see SecretBackend); in-memory calls (NewSigner, Signer.Reconcile,
// bundles) take none.
//
// Time is always an argument: the library never reads the clock. PEM goes
// in and out as []byte. Every failure is an *Error with the library's code
// and message, matched with errors.Is against the Err* sentinels.
//
// Build the static library first, from the repository root:
//
//	cargo build --release -p pki-ffi
//
// The package links libpki_ffi.a statically, from the workspace's
// target/release, or from target/debug when there is no release build (see
// link.go; build with -tags pki_debug to link target/debug only). When
// cargo builds elsewhere (CARGO_TARGET_DIR), name that directory, which is
// searched first:
//
//	CGO_LDFLAGS="-L$CARGO_TARGET_DIR/release" go build
package pki

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#cgo LDFLAGS: -l:libpki_ffi.a -lpthread -ldl -lm
#include <stdlib.h>
#include "pki.h"
*/
import "C"

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
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

// jsonArg marshals a request for the C API: the one way inputs cross it.
// A nil request is NULL (the engine's default input).
func jsonArg(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

// inputArg is a marshalled request as a C argument (NULL for nil).
func inputArg(b []byte) (*C.char, C.size_t) {
	if b == nil {
		return nil, 0
	}
	p, n := bytesArg(b)
	return (*C.char)(unsafe.Pointer(p)), n
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

func seconds(d time.Duration) int64 { return int64(d / time.Second) }

// takeBuffer copies a buffer the library returned and frees it.
func takeBuffer(b *C.pki_buffer) []byte {
	defer C.pki_buffer_free(b)
	return goBytes(C.pki_buffer_data(b))
}

// KeyType is the key type of new CAs and of the leaves they issue.
type KeyType string

// Key types.
const (
	KeyP256    KeyType = "p256"
	KeyRSA2048 KeyType = "rsa2048"
	KeyRSA3072 KeyType = "rsa3072"
	KeyRSA4096 KeyType = "rsa4096"
	// KeyP384 is for CAs; the key ring refuses it.
	KeyP384 KeyType = "p384"
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

// DefaultPolicy is the library's default: 790 days of lifetime, 395 of
// minimum trust, no reload interval, leaves refreshed at 20% of their
// lifetime left. A nil *Policy means it.
func DefaultPolicy() Policy {
	return Policy{
		Lifetime:            790 * 24 * time.Hour,
		MinTrust:            395 * 24 * time.Hour,
		LeafRefreshFraction: 0.2,
	}
}

// toJSON is the policy as the C API reads it: every field given.
func (p *Policy) toJSON() *reqSignerPolicy {
	if p == nil {
		return nil
	}
	lifetime, minTrust, reload := seconds(p.Lifetime), seconds(p.MinTrust), seconds(p.ReloadInterval)
	fraction, keep := p.LeafRefreshFraction, p.KeepPreviousRoot
	return &reqSignerPolicy{
		LifetimeSeconds:       &lifetime,
		MinTrustSeconds:       &minTrust,
		ReloadIntervalSeconds: &reload,
		LeafRefreshFraction:   &fraction,
		KeepPreviousRoot:      &keep,
	}
}

// Signer is a CA with its bridges, bundle, forced-rotation reason, leaves
// and history, as read from a store, a step or saved bytes. It is
// immutable: changes go through Store.Step (or Reconcile), and one Signer
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

// inMemory creates the signer `spec` says in a memory store and returns
// it: a store's create, for the programs that keep the state themselves.
func inMemory(spec SignerSpec, now time.Time) (*Signer, error) {
	store, err := NewMemoryStore()
	if err != nil {
		return nil, err
	}
	defer store.Close()
	st, err := store.Create(context.Background(), DefaultKey, spec, now)
	if err != nil {
		return nil, err
	}
	return st.Signer, nil
}

// NewSigner creates a signer with a new self-signed CA "CN=commonName" valid
// from now, in memory (a memory store's Create; keep it in a Store with
// Store.Create and SignerSpec.Signer). A nil policy means DefaultPolicy().
func NewSigner(commonName string, key KeyType, policy *Policy, now time.Time) (*Signer, error) {
	return inMemory(SignerSpec{CommonName: commonName, Key: key, Policy: policy}, now)
}

// ImportSigner creates, in memory, a signer whose CA is an existing one
// (see CAImport). A nil policy means DefaultPolicy().
func ImportSigner(caPEM, keyPEM, chainPEM []byte, policy *Policy, now time.Time) (*Signer, error) {
	return inMemory(SignerSpec{Import: &CAImport{CA: caPEM, Key: keyPEM, Chain: chainPEM}, Policy: policy}, now)
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
// included: keep it as a secret. SignerSpec.State takes it back.
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

// Reconcile steps a copy of the signer at now in a memory store, as
// Store.Step would, and returns the step (Step.Signer is the result). It
// keeps nothing: to persist the signer, and to let several replicas race
// safely, keep it in a Store and call Store.Step. in may be nil.
func (s *Signer) Reconcile(now time.Time, in *SignerInput) (*Step, error) {
	if _, err := s.handle(); err != nil {
		return nil, err
	}
	store, err := NewMemoryStore()
	if err != nil {
		return nil, err
	}
	defer store.Close()
	// A memory store does not block: there is no context to pass on.
	ctx := context.Background()
	if _, err := store.Create(ctx, DefaultKey, SignerSpec{Signer: s}, now); err != nil {
		return nil, err
	}
	return store.Step(ctx, DefaultKey, now, in)
}

// EventKind says what happened, in kebab-case: "rotated", "leaf-reissued",
// "bundle-pruned", "bridge-retired" (a signer); "step", "issued", "new-ca",
// "acked" (a CA set); "rotated", "expired", "retired" (a key ring);
// "kept-old", "mint-started", "minted", "revoked", "failed" (a credential)…
type EventKind string

// Event kinds of a signer.
const (
	EventRotated       EventKind = "rotated"
	EventLeafReissued  EventKind = "leaf-reissued"
	EventBundlePruned  EventKind = "bundle-pruned"
	EventBridgeRetired EventKind = "bridge-retired"
)

// Event is one thing a step did.
type Event struct {
	Kind EventKind
	// Message is one line for logs and Kubernetes events.
	Message string
	// JSON is the whole event: kind, its fields (times in RFC 3339) and
	// message.
	JSON json.RawMessage
	// PreviousTrustedUntil is, for a signer's rotation with bridges, until
	// when the previous CA stays trusted; zero otherwise.
	PreviousTrustedUntil time.Time
}

// Step is what one step (or create) did, whatever the engine.
type Step struct {
	// Changed reports whether the step wrote a new document.
	Changed bool
	// Events says what happened, possibly nothing.
	Events []Event
	// NextWake is when to step again if nothing else happens: the engine's
	// wake-up time of the document now in the store (after a rotation, the
	// new CA's, bridges' and leaves' times), never before the step's time;
	// for a credential advance, when its next action is due.
	NextWake time.Time
	// Revision is the document's revision in the store now.
	Revision string
	// Attempts counts the read-decide-write rounds: 1 without contention,
	// one more per write lost to another writer.
	Attempts int
	// Status is the status of the document now in the store as JSON: `pki
	// status --json`'s for a signer, `pki set status --json`'s for a CA
	// set, `pki keys status --json`'s for a key ring, a credential's entry
	// of `pki cred status --json`. It holds no private key.
	Status json.RawMessage
	// Signer is the signer document now in the store, for a signer's
	// create or step (read after the step; none after an idle step).
	Signer *Signer
	// Action is what the embedder does next, for a credential advance.
	Action *CredAction
	// Idle reports a step decided from the summary the store keeps with
	// the document (Store.StepUnlessIdle): nothing was due, no document was
	// read, and Status and Signer are empty.
	Idle bool
	// ByParts reports a step over part of the document
	// (Store.StepLeaves inside the summary's promise): it read and wrote
	// the document's head and the named leaves only, and Status holds the
	// CA, the bundle and those leaves, not the others (the store keeps them
	// all, and so does Signer).
	ByParts bool
}

// Close frees the step's signer, if any.
func (st *Step) Close() {
	if st != nil {
		st.Signer.Close()
	}
}

// resultVersion is the version of the JSON documents the library returns
// that this package reads.
const resultVersion = 1

// The step result's action kinds and wait reasons.
var (
	credActionKinds = map[string]CredActionKind{
		"mint": CredMint, "revoke": CredRevoke, "wait": CredWait, "revoke_stray": CredRevokeStray,
	}
	credWaitReasons = map[string]CredWaitReason{
		"expiry": CredWaitExpiry, "grace": CredWaitGrace, "backoff": CredWaitBackoff,
		"mint_elsewhere": CredWaitMintElsewhere,
	}
)

// takeStep reads the step result the library returned (its JSON text,
// zeroed here once read) into a Step.
func takeStep(text []byte) (*Step, error) {
	defer clear(text)
	var doc resStep
	if err := json.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("pki: the step result is not the JSON this package reads: %w", err)
	}
	if doc.Version != resultVersion {
		return nil, fmt.Errorf("pki: step result version %d (this package reads %d)", doc.Version, resultVersion)
	}
	st := &Step{
		Changed:  doc.Changed,
		NextWake: fromUnix(C.int64_t(doc.NextWake)),
		Revision: doc.Revision,
		Attempts: int(doc.Attempts),
		Idle:     doc.Idle,
		ByParts:  doc.ByParts,
	}
	if len(doc.Status) > 0 && string(doc.Status) != "null" {
		st.Status = doc.Status
	}
	for _, raw := range doc.Events {
		var fields struct {
			Kind                 string     `json:"kind"`
			Message              string     `json:"message"`
			PreviousTrustedUntil *time.Time `json:"previous_trusted_until"`
		}
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, fmt.Errorf("pki: an event is not the JSON this package reads: %w", err)
		}
		ev := Event{Kind: EventKind(fields.Kind), Message: fields.Message, JSON: raw}
		if fields.PreviousTrustedUntil != nil {
			ev.PreviousTrustedUntil = fields.PreviousTrustedUntil.UTC()
		}
		st.Events = append(st.Events, ev)
	}
	if a := doc.Action; a != nil {
		credential, err := base64.StdEncoding.DecodeString(a.CredentialBase64)
		if err != nil {
			return nil, fmt.Errorf("pki: the action's credential is not base64: %w", err)
		}
		if len(credential) == 0 {
			credential = nil
		}
		st.Action = &CredAction{
			Kind:       credActionKinds[a.Kind],
			Rotation:   a.Rotation,
			Attempt:    a.Attempt,
			WaitReason: credWaitReasons[a.WaitReason],
			Credential: credential,
		}
	}
	return st, nil
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
