package pki_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pki "pki.invalid/go"
)

// stalledSecrets holds the first write after armed is set until release
// is closed, and counts the writes that landed.
type stalledSecrets struct {
	*fakeSecrets
	armed   atomic.Bool
	stalled chan struct{} // closed once a write waits
	release chan struct{}
	written atomic.Int32
}

func (s *stalledSecrets) Put(ctx context.Context, key, expected string, data map[string][]byte) (string, error) {
	if s.armed.CompareAndSwap(true, false) {
		close(s.stalled)
		<-s.release
	}
	rev, err := s.fakeSecrets.Put(ctx, key, expected, data)
	if err == nil {
		s.written.Add(1)
	}
	return rev, err
}

// TestWatcherAcknowledgesTheBundleItHoldsWhenAnAckIsOvertaken: the store
// keeps the last ack it gets, so a watcher that loads two bundles in a row
// must not let the first one's ack land last. The first ack is held in the
// backend while the second bundle is loaded; whatever the order they would
// reach the store in, the consumer ends recorded on the bundle it holds.
func TestWatcherAcknowledgesTheBundleItHoldsWhenAnAckIsOvertaken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	files := must(pki.OpenDirStore(context.Background(), dir))
	defer files.Close()
	now := time.Now()
	must(files.Create(context.Background(), pki.DefaultKey, pki.SignerSpec{CommonName: "service-ca"}, now)).Close()
	must(files.Step(context.Background(), pki.DefaultKey, now, &pki.SignerInput{Leaves: []pki.LeafChange{
		{Action: pki.LeafAdd, Name: "web", Request: pki.LeafRequest{DNSNames: []string{"web.test"}}},
	}})).Close()

	// The acks go to a Secret store holding a copy of the signer that
	// writes the files: it publishes the same bundles.
	backend := &stalledSecrets{fakeSecrets: newFakeSecrets(), stalled: make(chan struct{}), release: make(chan struct{})}
	mirror := func() {
		signer, _ := must2(files.Load(context.Background(), pki.DefaultKey))
		data := must(signer.Secret())
		signer.Close()
		backend.mu.Lock()
		backend.version++
		backend.items["signer"] = fakeSecret{data: data, version: strconv.Itoa(backend.version)}
		backend.mu.Unlock()
	}
	recorded := func() string {
		backend.mu.Lock()
		state := backend.items["signer"].data["pki-state.json"]
		backend.mu.Unlock()
		var doc struct {
			Consumers map[string]struct {
				Fingerprint string `json:"fingerprint"`
			} `json:"consumers"`
		}
		if err := json.Unmarshal(state, &doc); err != nil {
			t.Fatal(err)
		}
		return strings.TrimPrefix(doc.Consumers["web-1"].Fingerprint, "sha256:")
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s", what)
			}
		}
	}
	mirror()
	acks := must(pki.NewSecretStore(backend))
	defer acks.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ackErr atomic.Value
	// Reloads only when told (Refresh): the test orders the loads.
	w := must(pki.Watch(ctx, filepath.Join(dir, "certs/web/tls.crt"), filepath.Join(dir, "certs/web/tls.key"),
		filepath.Join(dir, "ca-bundle.crt"), pki.WatchOptions{
			Interval: time.Hour, Store: acks, Key: "signer", Consumer: "web-1",
			OnError: func(err error) { ackErr.Store(err) },
		}))
	waitFor("the first ack", func() bool { return recorded() == w.Fingerprint() })

	rotate := func(reason string) string {
		t.Helper()
		must(files.Step(context.Background(), pki.DefaultKey, time.Now(), &pki.SignerInput{
			Forced: &pki.ForcedRotation{Reason: reason}, AllowTrustBreak: "the consumer reloads"})).Close()
		mirror()
		if changed, err := w.Refresh(); err != nil || !changed {
			t.Fatalf("refresh: %v %v", changed, err)
		}
		return w.Fingerprint()
	}
	backend.written.Store(0)
	backend.armed.Store(true)
	first := rotate("drill one")
	<-backend.stalled // the first bundle's ack waits in the backend
	second := rotate("drill two")
	if first == second {
		t.Fatal("two rotations, one bundle")
	}
	// An ack of the second bundle may go out now: let it land before the
	// first one's (a bounded wait: an ack queued behind the first does not
	// go out at all).
	for deadline := time.Now().Add(2 * time.Second); recorded() != second && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	close(backend.release)
	waitFor("both writes", func() bool { return backend.written.Load() == 2 })
	if got := recorded(); got != second {
		t.Fatalf("the consumer holds %s, recorded on %s (the first rotation's: %v); ack error %v",
			second, got, got == first, ackErr.Load())
	}
}
