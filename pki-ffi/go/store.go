package pki

/*
#include <stdint.h>
#include <stdlib.h>
#include "pki.h"

// Defined in backend.go (//export): the Go side of a SecretBackend store.
extern uint32_t pkiGoBackendGet(uintptr_t backend, char *key, size_t key_len, pki_store_reply *reply);
extern uint32_t pkiGoBackendPut(uintptr_t backend, char *key, size_t key_len, uint8_t *expected,
                                size_t expected_len, pki_secret *data, pki_store_reply *reply);
extern void pkiGoBackendRelease(uintptr_t backend);

// The callbacks pki_store_new_callbacks calls. user_data is C memory
// holding the backend's cgo.Handle, so that no Go pointer is kept by C.
static uint32_t pki_go_get(void *user_data, const char *key, size_t key_len,
                           pki_store_reply *reply) {
	return pkiGoBackendGet(*(uintptr_t *)user_data, (char *)key, key_len, reply);
}

static uint32_t pki_go_put(void *user_data, const char *key, size_t key_len,
                           const uint8_t *expected, size_t expected_len, const pki_secret *data,
                           pki_store_reply *reply) {
	return pkiGoBackendPut(*(uintptr_t *)user_data, (char *)key, key_len, (uint8_t *)expected,
	                       expected_len, (pki_secret *)data, reply);
}

static void pki_go_release(void *user_data) {
	pkiGoBackendRelease(*(uintptr_t *)user_data);
	free(user_data);
}

// Creates a callback store over the Go backend behind `backend`. On
// failure nothing is kept: the caller still owns the handle.
static pki_result pki_go_new_secret_store(uintptr_t backend, const char *location,
                                          size_t location_len, pki_store **out) {
	pki_store_callbacks callbacks;
	pki_result r;
	uintptr_t *user_data = malloc(sizeof *user_data);
	if (user_data == NULL) {
		return PKI_RESULT_UNEXPECTED;
	}
	*user_data = backend;
	callbacks.get = pki_go_get;
	callbacks.put = pki_go_put;
	callbacks.release = pki_go_release;
	callbacks.location = location;
	callbacks.location_len = location_len;
	r = pki_store_new_callbacks(&callbacks, user_data, out);
	if (r != PKI_RESULT_OK) {
		free(user_data);
	}
	return r;
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/cgo"
	"time"
)

// DefaultKey is the store key the pki CLI keeps its signer under.
const DefaultKey = "signer"

// Store keeps documents (signers, CA sets, key rings, credentials) under
// keys, each with a revision the store assigns, and writes them by
// compare-and-swap. Every step runs pki's driver on it: load, decide,
// write only what changed, and, when another writer got there first, read
// again and decide again. One Store may be used by many goroutines at once
// (or several Stores over the same directory, URL or backend, by several
// processes): exactly one of racing steps rotates.
//
// Close frees it; a finalizer frees it too if Close is forgotten.
type Store struct {
	ptr *C.pki_store
	// backend and location, for NewSecretStore: each call runs on a store
	// of its own over the backend, so that the backend's methods get that
	// call's context.
	backend  SecretBackend
	location string
}

func newStore(ptr *C.pki_store) *Store {
	s := &Store{ptr: ptr}
	runtime.SetFinalizer(s, (*Store).Close)
	return s
}

// Close frees the store (and, for NewSecretStore, releases the backend).
// It is safe to call more than once, but not concurrently with other
// methods of the same Store.
func (s *Store) Close() {
	if s == nil || s.ptr == nil {
		return
	}
	C.pki_store_free(s.ptr)
	s.ptr = nil
	runtime.SetFinalizer(s, nil)
}

func (s *Store) handle() (*C.pki_store, error) {
	if s == nil || s.ptr == nil {
		return nil, ErrClosed
	}
	return s.ptr, nil
}

// OpenStore opens the store location names, as the CLI's DIR argument: a
// store URL (etcd://HOST:PORT/PREFIX: every key lives under PREFIX/ in
// etcd, and writes are compare-and-swap transactions, so controller
// replicas in several pods may step the same document at once; the server
// is contacted here with a bounded timeout, an unreachable one is ErrStore
// now, a malformed URL ErrInvalidArgument), "memory:" (a new store in
// memory, for tests), or a directory (created when missing: the layout of
// the pki CLI, each write an atomic switch to a complete new generation).
//
// ctx is checked before the store is opened; opening an etcd store is not
// interrupted once started (it is bounded by the client's own timeout).
func OpenStore(ctx context.Context, location string) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *C.pki_store
	p, n := strArg(location)
	err := call(func() C.pki_result { return C.pki_store_open(p, n, nil, 0, &out) })
	runtime.KeepAlive(location)
	if err != nil {
		return nil, err
	}
	return newStore(out), nil
}

// OpenDirStore is OpenStore of a directory.
func OpenDirStore(ctx context.Context, dir string) (*Store, error) { return OpenStore(ctx, dir) }

// OpenURLStore is OpenStore of a store URL.
func OpenURLStore(ctx context.Context, url string) (*Store, error) { return OpenStore(ctx, url) }

// NewMemoryStore is OpenStore("memory:"): an empty store in memory.
func NewMemoryStore() (*Store, error) { return OpenStore(context.Background(), "memory:") }

// SecretBackend is storage of Secret-shaped documents with compare-and-swap,
// written by the embedder: a Kubernetes client reading and updating a
// Secret with its resourceVersion is the model. Documents are Secret data
// under pki's documented keys (tls.crt, tls.key, ca-bundle.crt,
// intermediate-ca.crt, pki-state.json, certs.NAME.tls.crt…), so a Secret
// written through it is also the CA's kubernetes.io/tls Secret.
//
// The methods may be called from several goroutines at once (one per
// concurrent Step). A panic in them is recovered and reported as ErrStore.
// If the backend implements fmt.Stringer, its String names it in errors.
//
// Each method gets the context of the Store call it serves (Step, Create,
// Load, a CA set's, key ring's or credential's method): pass it on to the
// API server's client, and return its error when it ends.
type SecretBackend interface {
	// Get returns the data at key and its revision (resourceVersion), or
	// found == false when there is none.
	Get(ctx context.Context, key string) (data map[string][]byte, revision string, found bool, err error)
	// Put writes data at key if its revision is still expected ("" means:
	// create, only if there is none) and returns the new revision, which
	// must not be empty. When another writer changed or created it first,
	// Put writes nothing and returns an error matching ErrConflict (wrap
	// pki.ErrConflict, for example on a 409 Conflict from the API server):
	// the step then reads again and decides again. Any other error is a
	// broken backend (ErrStore) and ends the step.
	Put(ctx context.Context, key, expected string, data map[string][]byte) (revision string, err error)
}

// NewSecretStore is a store over the embedder's Secret-shaped storage.
func NewSecretStore(backend SecretBackend) (*Store, error) {
	if backend == nil {
		return nil, &Error{Code: CodeNullParameter, Message: "pki: NewSecretStore: nil backend"}
	}
	location := fmt.Sprintf("Go SecretBackend %T", backend)
	if s, ok := backend.(fmt.Stringer); ok {
		location = s.String()
	}
	out, err := newSecretStore(context.Background(), backend, location)
	if err != nil {
		return nil, err
	}
	s := newStore(out)
	s.backend, s.location = backend, location
	return s, nil
}

// boundBackend is what a callback store's handle holds: the backend and
// the context of the call the store was made for.
type boundBackend struct {
	backend SecretBackend
	ctx     context.Context
}

// newSecretStore makes a C callback store over backend whose callbacks get
// ctx. The store releases the handle when it is freed.
func newSecretStore(ctx context.Context, backend SecretBackend, location string) (*C.pki_store, error) {
	h := cgo.NewHandle(&boundBackend{backend: backend, ctx: ctx})
	var out *C.pki_store
	p, n := strArg(location)
	err := call(func() C.pki_result {
		return C.pki_go_new_secret_store(C.uintptr_t(h), p, n, &out)
	})
	runtime.KeepAlive(location)
	if err != nil {
		h.Delete()
		return nil, err
	}
	return out, nil
}

// with runs one library call on the store with ctx. ctx is checked first;
// a SecretBackend gets it in each of its calls, through a store of the
// call's own (the C store is stateless over the backend: one per call is
// the same store). A directory or etcd store cannot be interrupted once
// the call started: each of their waits is bounded (the directory lock's
// timeout, etcd's request timeout).
func (s *Store) with(ctx context.Context, f func(*C.pki_store) C.pki_result) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h, err := s.handle()
	if err != nil {
		return err
	}
	if s.backend != nil {
		bound, err := newSecretStore(ctx, s.backend, s.location)
		if err != nil {
			return err
		}
		defer C.pki_store_free(bound)
		h = bound
	}
	err = call(func() C.pki_result { return f(h) })
	runtime.KeepAlive(s)
	var e *Error
	if err != nil && ctx.Err() != nil && errors.As(err, &e) {
		e.cause = ctx.Err()
	}
	return err
}

// stepFunc is pki_document_create or pki_document_step for one kind.
type stepFunc func(store *C.pki_store, key *C.char, keyLen C.size_t, input *C.char, inputLen C.size_t, now C.int64_t, out **C.pki_buffer) C.pki_result

// step runs one create or step of the document at key with request
// (marshalled to JSON; nil: the engine's default input).
func (s *Store) step(ctx context.Context, f stepFunc, key string, request any, now time.Time) (*Step, error) {
	input, err := jsonArg(request)
	if err != nil {
		return nil, err
	}
	var out *C.pki_buffer
	kp, kn := strArg(key)
	ip, in := inputArg(input)
	err = s.with(ctx, func(h *C.pki_store) C.pki_result { return f(h, kp, kn, ip, in, unixTime(now), &out) })
	runtime.KeepAlive(key)
	runtime.KeepAlive(input)
	if err != nil {
		return nil, err
	}
	return takeStep(takeBuffer(out))
}

// stepSigner is step for a signer: the Step also holds the signer document
// now in the store (none after an idle step). When the step succeeded but
// the signer cannot be read, the Step is returned with the error.
func (s *Store) stepSigner(ctx context.Context, f stepFunc, key string, request any, now time.Time) (*Step, error) {
	st, err := s.step(ctx, f, key, request, now)
	if err != nil || st.Idle {
		return st, err
	}
	signer, _, err := s.Load(ctx, key)
	if err != nil {
		return st, err
	}
	st.Signer = signer
	return st, nil
}

// read reads one output of the document at key.
func (s *Store) read(ctx context.Context, f func(*C.pki_store, *C.char, C.size_t, C.uint32_t, C.int64_t, **C.pki_buffer) C.pki_result,
	key string, output C.uint32_t, now time.Time) ([]byte, error) {
	var out *C.pki_buffer
	kp, kn := strArg(key)
	err := s.with(ctx, func(h *C.pki_store) C.pki_result { return f(h, kp, kn, output, unixTime(now), &out) })
	runtime.KeepAlive(key)
	if err != nil {
		return nil, err
	}
	return takeBuffer(out), nil
}

func signerCreate(store *C.pki_store, key *C.char, keyLen C.size_t, input *C.char, inputLen C.size_t, now C.int64_t, out **C.pki_buffer) C.pki_result {
	return C.pki_document_create(store, C.PKI_KIND_SIGNER, key, keyLen, input, inputLen, now, out)
}

func signerStep(store *C.pki_store, key *C.char, keyLen C.size_t, input *C.char, inputLen C.size_t, now C.int64_t, out **C.pki_buffer) C.pki_result {
	return C.pki_document_step(store, C.PKI_KIND_SIGNER, key, keyLen, input, inputLen, now, out)
}

// CAImport is an existing CA given as PEM: its certificate (which may
// also hold its key and the chain above it, issuer first), its key and its
// chain (nil: not given).
type CAImport struct {
	CA, Key, Chain []byte
}

func optText(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// SignerSpec says which signer Store.Create makes: a new CA (CommonName,
// with Key and Policy), an existing CA (Import, with Policy), or an
// existing signer's document (Signer, or its saved State). A new CA's keys
// are made in the PKCS#11 token KeyStore names (a URI naming the token,
// "pkcs11:token=ops-hsm"), through the module of a store opened with
// OpenTokenStore; they never leave it.
type SignerSpec struct {
	CommonName string
	Key        KeyType
	KeyStore   string
	Policy     *Policy
	Import     *CAImport
	Signer     *Signer
	State      []byte
}

func (spec SignerSpec) request() (any, error) {
	state := spec.State
	if spec.Signer != nil {
		b, err := spec.Signer.State()
		if err != nil {
			return nil, err
		}
		state = b
	}
	if state != nil {
		return reqSignerCreate{State: state}, nil
	}
	req := reqSignerCreate{CommonName: spec.CommonName, KeyType: string(spec.Key), KeyStore: spec.KeyStore, Policy: spec.Policy.toJSON()}
	if spec.Import != nil {
		req.Import = &reqCA{CA: string(spec.Import.CA), Key: optText(spec.Import.Key), Chain: optText(spec.Import.Chain)}
	}
	return req, nil
}

// Create makes the signer spec says as a new document at key (DefaultKey
// is the CLI's) at now. A document already there is never overwritten: the
// error matches ErrAlreadyInitialized. The step holds the signer and its
// revision.
func (s *Store) Create(ctx context.Context, key string, spec SignerSpec, now time.Time) (*Step, error) {
	req, err := spec.request()
	if err != nil {
		return nil, err
	}
	return s.stepSigner(ctx, signerCreate, key, req, now)
}

// Load reads the signer document at key and its revision. A missing
// document matches ErrNotInitialized.
func (s *Store) Load(ctx context.Context, key string) (*Signer, string, error) {
	var (
		out *C.pki_signer
		rev *C.pki_buffer
	)
	kp, kn := strArg(key)
	err := s.with(ctx, func(h *C.pki_store) C.pki_result { return C.pki_signer_load(h, kp, kn, &out, &rev) })
	runtime.KeepAlive(key)
	if err != nil {
		return nil, "", err
	}
	return newSigner(out), string(takeBuffer(rev)), nil
}

// ForcedRotation asks for a rotation whatever the validity left. It runs
// once per distinct Reason.
type ForcedRotation struct {
	Reason string `json:"reason"`
	// Grace, when positive, is how long the old CA stays trusted instead
	// of the normal max(old NotAfter, now + MinTrust).
	Grace time.Duration `json:"-"`
	// NoBridges distrusts the old CA at once (key compromise).
	NoBridges bool `json:"no_bridges,omitempty"`
}

// LeafAction is what a LeafChange does.
type LeafAction string

// Leaf actions.
const (
	// LeafAdd adds the leaf or changes its request (more names, another
	// lifetime).
	LeafAdd LeafAction = "request"
	// LeafReplace is LeafAdd that may also change its kind or drop names.
	LeafReplace LeafAction = "replace"
	// LeafRemove stops keeping the leaf.
	LeafRemove LeafAction = "remove"
	// LeafRenew issues a new key and certificate now.
	LeafRenew LeafAction = "renew"
)

// LeafChange is a change to the leaves a signer keeps (issued in the same
// step; a directory store publishes leaf NAME as certs/NAME/tls.crt and
// tls.key, a Secret as certs.NAME.tls.crt and certs.NAME.tls.key).
type LeafChange struct {
	Action LeafAction
	Name   string
	// Request is the leaf's request, for LeafAdd and LeafReplace.
	Request LeafRequest
}

// SignerInput is what a signer step asks for besides time; the zero value
// (or nil) is the periodic controller step.
type SignerInput struct {
	// Policy, when set, replaces the signer's rotation policy (not its key type).
	Policy *Policy
	// Forced, when set, asks for a forced rotation.
	Forced *ForcedRotation
	// AllowTrustBreak: the operator's reason to rotate even when consumers
	// would be cut off (an expired CA; a rotation while clients may still
	// hold the bundle of two rotations ago), recorded in the rotation's
	// history with each break. Empty: such a rotation fails with
	// ErrTrustBreak.
	AllowTrustBreak string
	// Leaves are changes to the leaves the signer keeps, in order.
	Leaves []LeafChange
	// RotateTo, alone: rotate to a supplied CA (`pki rotate --to`).
	RotateTo *Replacement
	// RenewSameKey, alone: a new certificate for the current CA on its own
	// key and Subject (`pki rotate --renew-same-key`).
	RenewSameKey bool
}

func (in *SignerInput) request() (any, error) {
	return in.requestUnlessIdle(false)
}

// requestUnlessIdle is request, with "unless_idle" set when unlessIdle is.
func (in *SignerInput) requestUnlessIdle(unlessIdle bool) (any, error) {
	if in == nil {
		return nil, nil
	}
	req := reqSignerStep{
		Policy:          in.Policy.toJSON(),
		AllowTrustBreak: in.AllowTrustBreak,
		RenewSameKey:    in.RenewSameKey,
		UnlessIdle:      unlessIdle,
	}
	if f := in.Forced; f != nil {
		req.Forced = &reqForced{Reason: f.Reason, GraceSeconds: seconds(f.Grace), NoBridges: f.NoBridges}
	}
	for _, l := range in.Leaves {
		change, err := l.toJSON()
		if err != nil {
			return nil, err
		}
		req.Leaves = append(req.Leaves, change)
	}
	if in.RotateTo != nil {
		req.RotateTo = in.RotateTo.rotateTo()
	}
	return req, nil
}

// Step is one controller step on the signer document at key at now:
// rotate when due or when in.Forced carries a new reason, change and
// re-issue the leaves the document keeps, prune what expired, rotate to a
// supplied CA, and write the result only when something changed, if the
// revision is still the one read; otherwise read again and decide again
// (up to 8 rounds, then an error matching ErrConflict). in may be nil. A
// rotation that would cut consumers off fails with ErrTrustBreak, writing
// nothing, unless in.AllowTrustBreak gives a reason.
func (s *Store) Step(ctx context.Context, key string, now time.Time, in *SignerInput) (*Step, error) {
	req, err := in.request()
	if err != nil {
		return nil, err
	}
	return s.stepSigner(ctx, signerStep, key, req, now)
}

// StepUnlessIdle is the periodic step (Step with a nil input), decided
// from the summary a directory or etcd store keeps with the document when
// that says nothing is due at now: only the store's head or index is read,
// so a controller stepping every few seconds pays the same whatever the
// number of leaves. Such a step has Idle set, no events, and no Status or
// Signer; otherwise it is Step's. Every write keeps the summary current,
// and a store that keeps none (Secrets) always takes the full step.
func (s *Store) StepUnlessIdle(ctx context.Context, key string, now time.Time) (*Step, error) {
	return s.stepSigner(ctx, signerStep, key, reqSignerStep{UnlessIdle: true}, now)
}

// StepLeaves is Step for leaf changes alone (issue, renew, remove; only
// leaves may be set), decided from the summary a directory or etcd store
// keeps with the document: while it says nothing else is due at now, the
// step reads and writes the document's head and those leaves only, so its
// cost follows the leaves changed, not the number the store holds. Such a
// step has ByParts set, and its Status and Signer hold the CA, the bundle
// and the changed leaves; the store ends as Step would leave it. Otherwise
// (outside the promise, a Secret backend) it is Step's.
func (s *Store) StepLeaves(ctx context.Context, key string, now time.Time, leaves ...LeafChange) (*Step, error) {
	if len(leaves) == 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: "StepLeaves needs at least one leaf change"}
	}
	req, err := (&SignerInput{Leaves: leaves}).requestUnlessIdle(true)
	if err != nil {
		return nil, err
	}
	return s.stepSigner(ctx, signerStep, key, req, now)
}
