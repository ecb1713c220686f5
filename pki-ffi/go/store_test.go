package pki_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pki "pki.invalid/go"
)

// ctx is the context of the tests' store calls: they are never cancelled
// but by the tests of cancellation.
var ctx = context.Background()

// fakeSecrets stands for the API server: Secret data by name, each with a
// resourceVersion, updated by compare-and-swap as a Kubernetes client does.
type fakeSecrets struct {
	mu        sync.Mutex
	items     map[string]fakeSecret
	version   int
	gets      int
	puts      int
	conflicts int

	// readers, when set, holds every Put until that many Gets happened, so
	// that racing steps all read the same resourceVersion first.
	readers int
	allRead chan struct{}

	alwaysConflict bool
	broken         error
	panics         bool
	// waitForCancel, when set, makes Get wait until its context ends (an
	// API server that does not answer), closing getting first.
	waitForCancel bool
	getting       chan struct{}
	// lastCtx is the context of the last Get or Put.
	lastCtx context.Context
}

type fakeSecret struct {
	data    map[string][]byte
	version string
}

func newFakeSecrets() *fakeSecrets {
	return &fakeSecrets{items: map[string]fakeSecret{}}
}

func (f *fakeSecrets) String() string { return "fake secrets in namespace test" }

func (f *fakeSecrets) Get(ctx context.Context, key string) (map[string][]byte, string, bool, error) {
	if f.waitForCancel {
		close(f.getting)
		<-ctx.Done()
		return nil, "", false, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastCtx = ctx
	if f.panics {
		panic("the informer cache is gone")
	}
	f.gets++
	if f.allRead != nil && f.gets == f.readers {
		close(f.allRead)
	}
	item, ok := f.items[key]
	if !ok {
		return nil, "", false, nil
	}
	data := make(map[string][]byte, len(item.data))
	for k, v := range item.data {
		data[k] = append([]byte(nil), v...)
	}
	return data, item.version, true, nil
}

func (f *fakeSecrets) Put(ctx context.Context, key, expected string, data map[string][]byte) (string, error) {
	if f.allRead != nil {
		select {
		case <-f.allRead:
		case <-time.After(20 * time.Second):
			return "", errors.New("not every replica read before the writes")
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastCtx = ctx
	f.puts++
	if f.broken != nil {
		return "", f.broken
	}
	item, exists := f.items[key]
	if f.alwaysConflict || (expected == "" && exists) || (expected != "" && (!exists || item.version != expected)) {
		f.conflicts++
		// What a client-go caller sees on a 409, wrapped around pki's sentinel.
		return "", fmt.Errorf("Operation cannot be fulfilled on secrets %q: the object has been modified: %w", key, pki.ErrConflict)
	}
	f.version++
	f.items[key] = fakeSecret{data: data, version: strconv.Itoa(f.version)}
	return strconv.Itoa(f.version), nil
}

func (f *fakeSecrets) data(key string) map[string][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.items[key].data
}

// stores are the three kinds of store, each new and empty.
func stores(t *testing.T) map[string]func() *pki.Store {
	return map[string]func() *pki.Store{
		"memory": func() *pki.Store { return must(pki.NewMemoryStore()) },
		"secret": func() *pki.Store { return must(pki.NewSecretStore(newFakeSecrets())) },
		"dir":    func() *pki.Store { return must(pki.OpenDirStore(ctx, filepath.Join(t.TempDir(), "pki"))) },
	}
}

func step(t *testing.T, store *pki.Store, now time.Time, opts *pki.SignerInput) *pki.Step {
	t.Helper()
	st, err := store.Step(ctx, pki.DefaultKey, now, opts)
	if err != nil {
		t.Fatalf("step at %s: %v", now.Format(time.RFC3339), err)
	}
	t.Cleanup(st.Close)
	return st
}

func rotations(st *pki.Step) int {
	n := 0
	for _, e := range st.Events {
		if e.Kind == pki.EventRotated {
			n++
		}
	}
	return n
}

func TestStepNextCheckAfterARotationIsTheNewDocumentsWakeUp(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			store := open()
			defer store.Close()
			signer := must(pki.NewSigner("service-ca", pki.KeyP256, nil, t0))
			defer signer.Close()
			created := must(store.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0)).Revision

			// Nothing due: no write; the CA is due once less than 395 of its
			// 790 days are left, one second after day 395.
			quiet := step(t, store, day(10), nil)
			if quiet.Changed || len(quiet.Events) != 0 || quiet.Attempts != 1 || quiet.Revision != created {
				t.Fatalf("quiet step: %+v", quiet)
			}
			if want := day(395).Add(time.Second); !quiet.NextWake.Equal(want) {
				t.Fatalf("next check %s, want %s", quiet.NextWake, want)
			}

			// The rotation. The next check is the new document's: bridge B
			// (the new CA signed by the old key) ends with the old CA at day
			// 790 and is retired a second later, before the new CA is due
			// (day 791). Not the time of the step.
			r := step(t, store, day(396), nil)
			if !r.Changed || rotations(r) != 1 || r.Attempts != 1 || r.Revision == created {
				t.Fatalf("rotation step: %+v", r)
			}
			if want := day(790).Add(time.Second); !r.NextWake.Equal(want) {
				t.Fatalf("next check after the rotation %s, want %s", r.NextWake, want)
			}
			loaded, rev := must2(store.Load(ctx, pki.DefaultKey))
			defer loaded.Close()
			if rev != r.Revision || !bytes.Equal(bundlePEM(t, loaded), bundlePEM(t, r.Signer)) {
				t.Fatalf("load after the step: revision %q, step's %q", rev, r.Revision)
			}
		})
	}
}

func TestReplicasRacingStepOverASecretBackendRotateOnce(t *testing.T) {
	const replicas = 6
	backend := newFakeSecrets()
	store := must(pki.NewSecretStore(backend))
	defer store.Close()
	signer := must(pki.NewSigner("service-ca", pki.KeyP256, nil, t0))
	defer signer.Close()
	must(store.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0))
	before := backend.data(pki.DefaultKey)[pki.SecretCACert]

	// Every replica reads resourceVersion 1 before any of them writes.
	backend.mu.Lock()
	backend.gets = 0
	backend.readers = replicas
	backend.allRead = make(chan struct{})
	backend.mu.Unlock()

	var wg sync.WaitGroup
	start := make(chan struct{})
	steps := make([]*pki.Step, replicas)
	errs := make([]error, replicas)
	for i := 0; i < replicas; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			steps[i], errs[i] = store.Step(ctx, pki.DefaultKey, day(396), nil)
		}(i)
	}
	close(start)
	wg.Wait()

	rotated, changed := 0, 0
	final := backend.data(pki.DefaultKey)
	for i, st := range steps {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		defer st.Close()
		rotated += rotations(st)
		if st.Changed {
			changed++
			if st.Attempts != 1 {
				t.Errorf("the winner took %d attempts", st.Attempts)
			}
		} else if st.Attempts != 2 {
			t.Errorf("replica %d: %d attempts, want 2 (a lost write, then a fresh read)", i, st.Attempts)
		}
		// Every replica ends on the CA in the store, at the same wake-up time.
		data := must(st.Signer.Secret())
		if !bytes.Equal(data[pki.SecretCACert], final[pki.SecretCACert]) {
			t.Errorf("replica %d ends on another CA", i)
		}
		if want := day(790).Add(time.Second); !st.NextWake.Equal(want) {
			t.Errorf("replica %d: next check %s, want %s", i, st.NextWake, want)
		}
	}
	if rotated != 1 || changed != 1 {
		t.Fatalf("%d rotations by %d writers, want exactly one", rotated, changed)
	}
	if backend.conflicts != replicas-1 {
		t.Errorf("%d lost resourceVersion races, want %d", backend.conflicts, replicas-1)
	}
	if bytes.Equal(before, final[pki.SecretCACert]) {
		t.Fatal("the CA in the Secret did not change")
	}
	// The Secret is the signer's documented mapping: it loads as it is.
	back := must(pki.LoadSecret(final))
	back.Close()
}

type requestID struct{}

func TestASecretBackendGetsTheContextOfTheCallAndItsCancellation(t *testing.T) {
	backend := newFakeSecrets()
	store := must(pki.NewSecretStore(backend))
	defer store.Close()

	// The context of the call, with its values, is the backend's.
	traced := context.WithValue(ctx, requestID{}, "reconcile-7")
	must(store.Create(traced, pki.DefaultKey, pki.SignerSpec{CommonName: "ctx-ca"}, t0))
	if got := backend.lastCtx.Value(requestID{}); got != "reconcile-7" {
		t.Fatalf("the backend's context carries %v, want the caller's value", got)
	}

	// A context that already ended: the backend is not asked anything.
	ended, cancel := context.WithCancel(ctx)
	cancel()
	gets := backend.gets
	if _, err := store.Step(ended, pki.DefaultKey, t0, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a step with an ended context: %v, want context.Canceled", err)
	}
	if _, err := pki.OpenStore(ended, t.TempDir()); !errors.Is(err, context.Canceled) {
		t.Fatalf("an open with an ended context: %v, want context.Canceled", err)
	}
	if backend.gets != gets {
		t.Fatal("the backend was called with an ended context")
	}

	// An API server that does not answer: cancelling the step's context
	// ends the backend's Get, and the step fails with both the store's
	// sentinel and the context's error.
	backend.waitForCancel = true
	backend.getting = make(chan struct{})
	running, cancel := context.WithCancel(ctx)
	go func() {
		<-backend.getting
		cancel()
	}()
	_, err := store.Step(running, pki.DefaultKey, t0, nil)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, pki.ErrStore) {
		t.Fatalf("a cancelled step: %v, want context.Canceled and ErrStore", err)
	}
}

func TestStoreFailuresMatchTheirSentinels(t *testing.T) {
	signer := must(pki.NewSigner("errors-ca", pki.KeyP256, nil, t0))
	defer signer.Close()
	memory := must(pki.NewMemoryStore())
	defer memory.Close()

	expect(t, "load of a missing document", pki.ErrNotInitialized, func() error {
		_, _, err := memory.Load(ctx, pki.DefaultKey)
		return err
	})
	expect(t, "step of a missing document", pki.ErrNotInitialized, func() error {
		_, err := memory.Step(ctx, pki.DefaultKey, t0, nil)
		return err
	})
	must(memory.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0))
	expect(t, "second create", pki.ErrAlreadyInitialized, func() error {
		_, err := memory.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0)
		return err
	})
	expect(t, "bad key", pki.ErrInvalidArgument, func() error {
		_, err := memory.Step(ctx, "Not A Key", t0, nil)
		return err
	})
	expect(t, "empty forced reason", pki.ErrEmptyForcedReason, func() error {
		_, err := memory.Step(ctx, pki.DefaultKey, t0, &pki.SignerInput{Forced: &pki.ForcedRotation{}})
		return err
	})

	// A backend whose every write loses the resourceVersion race.
	racing := newFakeSecrets()
	racingStore := must(pki.NewSecretStore(racing))
	defer racingStore.Close()
	must(racingStore.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0))
	racing.alwaysConflict = true
	err := noPanic(t, "always conflicting", func() error {
		_, err := racingStore.Step(ctx, pki.DefaultKey, day(396), nil)
		return err
	})
	if !errors.Is(err, pki.ErrConflict) || errors.Is(err, pki.ErrStore) {
		t.Errorf("always conflicting: %v is not ErrConflict alone", err)
	}
	if racing.puts != 1+8 {
		t.Errorf("%d writes, want the create and 8 attempts", racing.puts)
	}

	// A backend that cannot be reached: ErrStore, at once.
	broken := newFakeSecrets()
	brokenStore := must(pki.NewSecretStore(broken))
	defer brokenStore.Close()
	must(brokenStore.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0))
	broken.broken = errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
	err = noPanic(t, "broken backend", func() error {
		_, err := brokenStore.Step(ctx, pki.DefaultKey, day(396), nil)
		return err
	})
	if !errors.Is(err, pki.ErrStore) || errors.Is(err, pki.ErrConflict) {
		t.Errorf("broken backend: %v is not ErrStore alone", err)
	}
	if !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "namespace test") {
		t.Errorf("broken backend: the message does not say what and where: %v", err)
	}
	if broken.puts != 2 {
		t.Errorf("%d writes, want the create and one attempt (no retry)", broken.puts)
	}

	// A backend that panics: recovered, reported, never a crash.
	broken.broken = nil
	broken.panics = true
	expect(t, "panicking backend", pki.ErrStore, func() error {
		_, err := brokenStore.Step(ctx, pki.DefaultKey, day(396), nil)
		if err != nil && !strings.Contains(err.Error(), "panicked: the informer cache is gone") {
			t.Errorf("panicking backend: %v", err)
		}
		return err
	})

	expect(t, "nil backend", pki.ErrNullParameter, func() error {
		_, err := pki.NewSecretStore(nil)
		return err
	})
	closed := must(pki.NewMemoryStore())
	closed.Close()
	closed.Close()
	expect(t, "closed store", pki.ErrClosed, func() error {
		_, err := closed.Step(ctx, pki.DefaultKey, t0, nil)
		return err
	})
	var nilStore *pki.Store
	expect(t, "nil store", pki.ErrClosed, func() error {
		_, _, err := nilStore.Load(ctx, pki.DefaultKey)
		return err
	})
}

// newDirSigner creates a service-ca signer at t0 in a new directory store
// (closed with the test); it returns the directory, the store and the
// signer it was created from.
func newDirSigner(t *testing.T) (string, *pki.Store, *pki.Signer) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki")
	store := must(pki.OpenDirStore(ctx, dir))
	t.Cleanup(store.Close)
	signer := must(pki.NewSigner("service-ca", pki.KeyP256, nil, t0))
	t.Cleanup(signer.Close)
	must(store.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0))
	return dir, store, signer
}

// A controller that steps exactly when told, over a directory store whose
// published files a TLS client and server load: every combination of
// the material before and after the rotation still handshakes.
func TestADirectoryStoreFollowedByNextCheckPublishesTrustedMaterial(t *testing.T) {
	dir, store, _ := newDirSigner(t)
	leaf := func(name string) *pki.SignerInput {
		return &pki.SignerInput{Leaves: []pki.LeafChange{{Action: pki.LeafAdd, Name: name, Request: serverRequest}}}
	}
	expect(t, "bad leaf name", nil, func() error {
		_, err := store.Step(ctx, pki.DefaultKey, t0, leaf("Web!"))
		return err
	})

	published := func(name string) side {
		read := func(p string) []byte {
			b, err := os.ReadFile(filepath.Join(dir, p))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		return side{name, &pki.Leaf{ChainPEM: read("certs/web/tls.crt"), KeyPEM: read("certs/web/tls.key")}, read("ca-bundle.crt")}
	}

	// The leaf the signer keeps is asked for and issued in the first step.
	// It (365 days, NotBefore backdated 5 minutes) is due at 80% of its
	// life: 292 days less 60 s after it was issued.
	now := t0
	st := step(t, store, now, leaf("web"))
	if want := t0.Add(292*24*time.Hour - time.Minute); !st.NextWake.Equal(want) {
		t.Fatalf("next check %s, want %s", st.NextWake, want)
	}
	var old side
	for i := 0; rotations(st) == 0; i++ {
		if !st.NextWake.After(now) || i > 10 {
			t.Fatalf("step %d at %s: next check %s", i, now, st.NextWake)
		}
		old = published("old")
		now = st.NextWake
		st = step(t, store, now, nil)
	}
	if want := now.Add(292*24*time.Hour - time.Minute); !st.NextWake.Equal(want) {
		t.Fatalf("next check after the rotation %s, want the new leaf's refresh %s", st.NextWake, want)
	}
	rotated := published("new")
	checkMatrix(t, old, rotated, now.Add(time.Hour))
}

func TestResultCodesKeepTheirNumbers(t *testing.T) {
	pinned := map[pki.Code]uint32{
		pki.CodeOK: 0, pki.CodeNullParameter: 1, pki.CodePanic: 2, pki.CodeInvalidArgument: 3,
		pki.CodeBuilderConsumed: 4, pki.CodeNotFound: 5, pki.CodePEM: 100, pki.CodeNoPEMBlock: 102,
		pki.CodeKeyMismatch: 108, pki.CodeInvalidPolicy: 203, pki.CodeNoRoot: 205,
		pki.CodeClockBeforeCA: 300, pki.CodeEmptyForcedReason: 301, pki.CodeTrustCheckFailed: 305,
		pki.CodeUnknownLeaf: 307, pki.CodeUnknownBundle: 308, pki.CodeUnsupportedVersion: 400, pki.CodeCorruptState: 401,
		pki.CodeStore: 402, pki.CodeConflict: 403, pki.CodeNotInitialized: 404,
		pki.CodeAlreadyInitialized: 405, pki.CodeUnknownOutcome: 406, pki.CodeVerifyExpired: 500,
		pki.CodeVerifyUnknownIssuer: 502, pki.CodeVerifyNameMismatch: 514,
		pki.CodeTrustBreak: 740,
	}
	for code, number := range pinned {
		if uint32(code) != number {
			t.Errorf("%s is %d, pinned at %d", code, uint32(code), number)
		}
		if code.String() == "PKI_RESULT_UNKNOWN" {
			t.Errorf("%d has no name in the library", number)
		}
	}
}

// The etcd store, when the test runs under `cargo test -p pki-ffi`, which
// starts a server and names it in PKI_TEST_ETCD_URL: replicas with their
// own connections race at the rotation point and rotate once.
func TestReplicasRacingStepOverEtcdRotateOnce(t *testing.T) {
	base := os.Getenv("PKI_TEST_ETCD_URL")
	if base == "" {
		t.Skip("needs an etcd server: run through `cargo test -p pki-ffi --test go`, which starts one")
	}
	replicasRacingRotateOnce(t, base+"/go-race", 4)
	if _, err := pki.OpenURLStore(ctx, "etcd://127.0.0.1:2379"); !errors.Is(err, pki.ErrInvalidArgument) {
		t.Fatalf("URL without a prefix: %v", err)
	}
}

// replicasRacingRotateOnce creates a signer in the store at url (once: a
// second create is ErrAlreadyInitialized), then steps it from `replicas`
// goroutines, each with its own connection, at the rotation point: exactly
// one rotates, and every one reports the new document's next check.
func replicasRacingRotateOnce(t *testing.T, url string, replicas int) {
	t.Helper()
	store := must(pki.OpenURLStore(ctx, url))
	defer store.Close()
	signer := must(pki.NewSigner("service-ca", pki.KeyP256, nil, t0))
	defer signer.Close()
	must(store.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0))
	if _, err := store.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0); !errors.Is(err, pki.ErrAlreadyInitialized) {
		t.Fatalf("second create: %v", err)
	}

	var wg sync.WaitGroup
	steps := make([]*pki.Step, replicas)
	errs := make([]error, replicas)
	for i := 0; i < replicas; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			own, err := pki.OpenURLStore(ctx, url)
			if err != nil {
				errs[i] = err
				return
			}
			defer own.Close()
			steps[i], errs[i] = own.Step(ctx, pki.DefaultKey, day(396), nil)
		}(i)
	}
	wg.Wait()
	rotated := 0
	for i, st := range steps {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		defer st.Close()
		rotated += rotations(st)
		if want := day(790).Add(time.Second); !st.NextWake.Equal(want) {
			t.Errorf("replica %d: next check %s, want %s", i, st.NextWake, want)
		}
	}
	if rotated != 1 {
		t.Fatalf("%d rotations, want exactly one", rotated)
	}
}

// A controller's periodic step through StepUnlessIdle reads the summary a
// directory store keeps with the document while nothing is due, says
// what the full step says, and steps fully once something is due; a
// Secret backend keeps no summary, so its steps are always full.
func TestStepUnlessIdleDecidesFromTheSummaryWhileNothingIsDue(t *testing.T) {
	_, store, signer := newDirSigner(t)
	issued := step(t, store, t0, &pki.SignerInput{Leaves: []pki.LeafChange{{Action: pki.LeafAdd, Name: "web", Request: serverRequest}}})

	for _, now := range []time.Time{t0.Add(time.Hour), issued.NextWake.Add(-time.Second)} {
		idle := must(store.StepUnlessIdle(ctx, pki.DefaultKey, now))
		if !idle.Idle || idle.Changed || len(idle.Events) != 0 || idle.Signer != nil || len(idle.Status) != 0 {
			t.Fatalf("at %s: %+v", now, idle)
		}
		full := step(t, store, now, nil)
		if full.Idle || full.Changed || full.Signer == nil {
			t.Fatalf("full step at %s: %+v", now, full)
		}
		if !idle.NextWake.Equal(full.NextWake) || idle.Revision != full.Revision {
			t.Fatalf("at %s: idle says %s at %s, the full step %s at %s", now, idle.NextWake, idle.Revision, full.NextWake, full.Revision)
		}
	}
	due := must(store.StepUnlessIdle(ctx, pki.DefaultKey, issued.NextWake))
	if due.Idle || !due.Changed || due.Signer == nil {
		t.Fatalf("the leaf is due at %s: %+v", issued.NextWake, due)
	}
	defer due.Signer.Close()

	secrets := must(pki.NewSecretStore(newFakeSecrets()))
	defer secrets.Close()
	must(secrets.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0))
	if st := must(secrets.StepUnlessIdle(ctx, pki.DefaultKey, t0.Add(time.Hour))); st.Idle || st.Signer == nil {
		t.Fatalf("a Secret backend keeps no summary: %+v", st)
	}
	if _, err := store.Step(ctx, pki.DefaultKey, t0, nil); err != nil {
		t.Fatal(err)
	}
}
