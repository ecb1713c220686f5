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
	"fmt"
	"runtime"
	"runtime/cgo"
	"time"
	"unsafe"
)

// DefaultKey is the store key the pki CLI keeps its signer under.
const DefaultKey = "signer"

// Store keeps signer documents under keys, each with a revision the store
// assigns, and writes them by compare-and-swap. Step runs pki's driver on
// it: load, decide, write only what changed, and, when another writer got
// there first, read again and decide again. One Store may be used by many
// goroutines at once (or several Stores over the same directory or
// backend, by several processes): exactly one of racing steps rotates.
//
// Close frees it; a finalizer frees it too if Close is forgotten.
type Store struct {
	ptr *C.pki_store
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

// OpenDirStore opens the directory store at dir, creating the directory
// when it does not exist: the layout of the pki CLI (signer/tls.crt,
// ca-bundle.crt, certs/NAME/tls.crt…), each write an atomic switch to a
// complete new generation.
func OpenDirStore(dir string) (*Store, error) {
	var out *C.pki_store
	p, n := strArg(dir)
	err := call(func() C.pki_result { return C.pki_store_open_dir(p, n, &out) })
	runtime.KeepAlive(dir)
	if err != nil {
		return nil, err
	}
	return newStore(out), nil
}

// OpenURLStore opens the store a URL names: etcd://HOST:PORT/PREFIX. Every
// key lives under PREFIX/ in etcd, and writes are compare-and-swap
// transactions, so controller replicas in several pods may Step the same
// document at once: one write wins, the others read again. The server is
// contacted here with a bounded timeout: an unreachable one is ErrStore now,
// a malformed URL ErrInvalidArgument.
func OpenURLStore(url string) (*Store, error) {
	var out *C.pki_store
	p, n := strArg(url)
	err := call(func() C.pki_result { return C.pki_store_open_url(p, n, &out) })
	runtime.KeepAlive(url)
	if err != nil {
		return nil, err
	}
	return newStore(out), nil
}

// NewMemoryStore is an empty store in memory, for tests.
func NewMemoryStore() (*Store, error) {
	var out *C.pki_store
	if err := call(func() C.pki_result { return C.pki_store_new_memory(&out) }); err != nil {
		return nil, err
	}
	return newStore(out), nil
}

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
type SecretBackend interface {
	// Get returns the data at key and its revision (resourceVersion), or
	// found == false when there is none.
	Get(key string) (data map[string][]byte, revision string, found bool, err error)
	// Put writes data at key if its revision is still expected ("" means:
	// create, only if there is none) and returns the new revision, which
	// must not be empty. When another writer changed or created it first,
	// Put writes nothing and returns an error matching ErrConflict (wrap
	// pki.ErrConflict, for example on a 409 Conflict from the API server):
	// the step then reads again and decides again. Any other error is a
	// broken backend (ErrStore) and ends the step.
	Put(key, expected string, data map[string][]byte) (revision string, err error)
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
	h := cgo.NewHandle(backend)
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
	return newStore(out), nil
}

// Create stores signer as a new document at key (DefaultKey is the CLI's)
// and returns its revision. A document already there is never overwritten:
// the error matches ErrAlreadyInitialized.
func (s *Store) Create(key string, signer *Signer) (revision string, err error) {
	h, err := s.handle()
	if err != nil {
		return "", err
	}
	sh, err := signer.handle()
	if err != nil {
		return "", err
	}
	var rev *C.pki_buffer
	kp, kn := strArg(key)
	err = call(func() C.pki_result { return C.pki_signer_store_create(h, kp, kn, sh, &rev) })
	runtime.KeepAlive(key)
	runtime.KeepAlive(s)
	runtime.KeepAlive(signer)
	if err != nil {
		return "", err
	}
	return string(takeBuffer(rev)), nil
}

// Load reads the signer document at key and its revision. A missing
// document matches ErrNotInitialized.
func (s *Store) Load(key string) (*Signer, string, error) {
	h, err := s.handle()
	if err != nil {
		return nil, "", err
	}
	var (
		out *C.pki_signer
		rev *C.pki_buffer
	)
	kp, kn := strArg(key)
	err = call(func() C.pki_result { return C.pki_signer_store_load(h, kp, kn, &out, &rev) })
	runtime.KeepAlive(key)
	runtime.KeepAlive(s)
	if err != nil {
		return nil, "", err
	}
	return newSigner(out), string(takeBuffer(rev)), nil
}

// Step is what one Store.Step did.
type Step struct {
	// Signer is the document now in the store, written by this step or not.
	Signer *Signer
	// Events says what happened, possibly nothing.
	Events []Event
	// Changed reports whether the step wrote a new document.
	Changed bool
	// NextCheck is when to step again if nothing else happens: the
	// engine's wake-up time of the document now in the store (after a
	// rotation, the new CA's, bridges' and leaves' times), always after
	// the step's time.
	NextCheck time.Time
	// Revision is the document's revision in the store now.
	Revision string
	// Attempts counts the read-decide-write rounds: 1 without contention,
	// one more per write lost to another writer.
	Attempts int
}

// Close frees the step's signer.
func (st *Step) Close() {
	if st != nil {
		st.Signer.Close()
	}
}

// Step is one controller step on the signer document at key at now:
// rotate when due or when opts.Forced carries a new reason, re-issue the
// leaves the document keeps when due, prune what expired, and write the
// result only when something changed, if the revision is still the one
// read; otherwise read again and decide again (up to 8 rounds, then an
// error matching ErrConflict). opts may be nil; opts.Policy replaces the
// document's rotation policy (not its key type). A rotation that would cut
// consumers off fails with ErrTrustBreak, writing nothing, unless
// opts.AllowTrustBreak gives a reason.
func (s *Store) Step(key string, now time.Time, opts *ReconcileOptions) (*Step, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &ReconcileOptions{}
	}
	forced, free := opts.Forced.toC()
	defer free()
	policy := opts.Policy.toC()
	var out *C.pki_step
	kp, kn := strArg(key)
	var allow *C.char
	var allowLen C.size_t
	if opts.AllowTrustBreak != "" {
		allow, allowLen = strArg(opts.AllowTrustBreak)
	}
	err = call(func() C.pki_result {
		return C.pki_signer_store_step_guarded(h, kp, kn, policy, forced, allow, allowLen, unixTime(now), &out)
	})
	runtime.KeepAlive(key)
	runtime.KeepAlive(s)
	runtime.KeepAlive(opts)
	if err != nil {
		return nil, err
	}
	return takeStep(out)
}

// takeStep reads a step the library returned into a Step, and frees it.
func takeStep(out *C.pki_step) (*Step, error) {
	defer C.pki_step_free(out)
	events, err := eventsFrom(C.pki_step_events(out))
	if err != nil {
		return nil, err
	}
	var signer *C.pki_signer
	if err := call(func() C.pki_result { return C.pki_step_signer(out, &signer) }); err != nil {
		return nil, err
	}
	return &Step{
		Signer:    newSigner(signer),
		Events:    events,
		Changed:   bool(C.pki_step_changed(out)),
		NextCheck: fromUnix(C.pki_step_next_check(out)),
		Revision:  string(goBytes(C.pki_step_revision(out))),
		Attempts:  int(C.pki_step_attempts(out)),
	}, nil
}

// toC is the forced rotation as the C API takes it, in C memory (a Go
// struct passed to C may not point to Go memory), and the function that
// frees it.
func (f *ForcedRotation) toC() (*C.pki_forced_rotation, func()) {
	if f == nil {
		return nil, func() {}
	}
	reason := C.CString(f.Reason)
	forced := &C.pki_forced_rotation{
		reason:        reason,
		reason_len:    C.size_t(len(f.Reason)),
		grace_seconds: C.int64_t(f.Grace / time.Second),
		no_bridges:    C.bool(f.NoBridges),
	}
	return forced, func() { C.free(unsafe.Pointer(reason)) }
}
