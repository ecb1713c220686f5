package pki_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pki "pki.invalid/go"
)

// tally counts the handshakes of the client loops and remembers when each
// server certificate was first presented.
type tally struct {
	ok, failed atomic.Uint64
	mu         sync.Mutex
	errs       []error
	seen       map[string]time.Time
}

func (t *tally) firstSeen(leaf []byte) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.seen[string(leaf)]
	return at, ok
}

// exchange is one connection: a full handshake, ping, pong. It returns
// the server's leaf.
func exchange(addr string, config *tls.Config) ([]byte, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, config)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("ping")); err != nil {
		return nil, err
	}
	pong := make([]byte, 4)
	if _, err := io.ReadFull(conn, pong); err != nil {
		return nil, errors.New("after the handshake (the server refused us?): " + err.Error())
	}
	return conn.ConnectionState().PeerCertificates[0].Raw, nil
}

func serve(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			ping := make([]byte, 4)
			if _, err := io.ReadFull(conn, ping); err == nil {
				_, _ = conn.Write([]byte("pong"))
			}
		}()
	}
}

func leafDER(t *testing.T, path string) []byte {
	t.Helper()
	snap := must(pki.LoadSnapshot(path, filepath.Join(filepath.Dir(path), "tls.key"), path))
	cert := must(tls.X509KeyPair(snap.Chain, snap.Key))
	return cert.Certificate[0]
}

// TestWatchersKeepAMutualTLSPairTalkingThroughSignerRotations runs a Go
// server and Go clients on Watcher material over 127.0.0.1, handshaking
// continuously, while the signer rotates automatically, by force and in an
// emergency with a short grace. No handshake may fail and neither side
// restarts; both acknowledge the bundle they load. The reload latency (the
// new certificate written → first presented) is logged, not asserted.
func TestWatchersKeepAMutualTLSPairTalkingThroughSignerRotations(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	store := must(pki.OpenDirStore(context.Background(), dir))
	defer store.Close()
	// A CA made two days ago with three days of life and 36 hours of
	// minimum trust: due now, on the real clock crypto/tls verifies with.
	made := time.Now().Add(-48 * time.Hour)
	policy := pki.DefaultPolicy()
	policy.Lifetime, policy.MinTrust = 72*time.Hour, 36*time.Hour
	must(store.Create(context.Background(), pki.DefaultKey, pki.SignerSpec{CommonName: "service-ca", Policy: &policy}, made)).Close()
	must(store.Step(context.Background(), pki.DefaultKey, made, &pki.SignerInput{Leaves: []pki.LeafChange{
		{Action: pki.LeafAdd, Name: "web", Request: pki.LeafRequest{Kind: pki.LeafServer, DNSNames: []string{"web.test"}}},
		{Action: pki.LeafAdd, Name: "peer", Request: pki.LeafRequest{Kind: pki.LeafClient, DNSNames: []string{"peer.test"}}},
	}})).Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var reloadErrors atomic.Value
	opts := func(consumer string) pki.WatchOptions {
		return pki.WatchOptions{
			Interval: 50 * time.Millisecond, Store: store, Consumer: consumer,
			OnError: func(err error) { reloadErrors.Store(err) },
		}
	}
	bundle := filepath.Join(dir, "ca-bundle.crt")
	server := must(pki.Watch(ctx, filepath.Join(dir, "certs/web/tls.crt"), filepath.Join(dir, "certs/web/tls.key"), bundle, opts("go-server")))
	client := must(pki.Watch(ctx, filepath.Join(dir, "certs/peer/tls.crt"), filepath.Join(dir, "certs/peer/tls.key"), bundle, opts("go-client")))

	listener := must(tls.Listen("tcp", "127.0.0.1:0", server.ServerConfig()))
	defer listener.Close()
	go serve(listener)
	tl := &tally{seen: map[string]time.Time{}}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			config := client.ClientConfig("web.test")
			for !stop.Load() {
				leaf, err := exchange(listener.Addr().String(), config)
				if err != nil {
					tl.failed.Add(1)
					tl.mu.Lock()
					tl.errs = append(tl.errs, err)
					tl.mu.Unlock()
					continue
				}
				tl.ok.Add(1)
				tl.mu.Lock()
				if _, ok := tl.seen[string(leaf)]; !ok {
					tl.seen[string(leaf)] = time.Now()
				}
				tl.mu.Unlock()
			}
		}()
	}
	between := 1500 * time.Millisecond
	time.Sleep(between)

	rotate := func(what string, in *pki.SignerInput) {
		before := tl.ok.Load()
		step := must(store.Step(context.Background(), pki.DefaultKey, time.Now(), in))
		rotated := false
		for _, e := range step.Events {
			rotated = rotated || e.Kind == pki.EventRotated
		}
		step.Close()
		if !rotated {
			t.Fatalf("%s: no rotation", what)
		}
		certFile := filepath.Join(dir, "certs/web/tls.crt")
		info, err := os.Stat(certFile)
		if err != nil {
			t.Fatal(err)
		}
		written := info.ModTime()
		newLeaf := leafDER(t, certFile)
		deadline := time.Now().Add(20 * time.Second)
		var seen time.Time
		for {
			if at, ok := tl.firstSeen(newLeaf); ok {
				seen = at
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the server never presented the new certificate (reload error: %v)", what, reloadErrors.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(between)
		n := tl.ok.Load() - before
		t.Logf("%s: reload latency %.1f ms (interval 50 ms); %d handshakes, %.0f/s, %d failed so far",
			what, float64(seen.Sub(written).Microseconds())/1e3, n, float64(n)/between.Seconds(), tl.failed.Load())
	}
	rotate("automatic rotation", nil)
	rotate("forced rotation", &pki.SignerInput{
		Forced: &pki.ForcedRotation{Reason: "drill"}, AllowTrustBreak: "live consumers reload"})
	rotate("emergency rotation (grace 1h)", &pki.SignerInput{
		Forced: &pki.ForcedRotation{Reason: "key exposure drill", Grace: time.Hour}, AllowTrustBreak: "live consumers reload"})
	stop.Store(true)
	wg.Wait()

	t.Logf("%d handshakes, %d failed; loads: server %d, client %d", tl.ok.Load(), tl.failed.Load(), server.Reloads(), client.Reloads())
	if tl.failed.Load() != 0 {
		t.Fatalf("failed handshakes: %v", tl.errs)
	}
	if server.Reloads() != 4 || client.Reloads() != 4 {
		t.Fatalf("loads: server %d, client %d, want one and one per rotation", server.Reloads(), client.Reloads())
	}
	if client.Fingerprint() != server.Fingerprint() {
		t.Fatalf("the two sides hold different bundles")
	}

	// Both acknowledged the current bundle (acks are written apart from
	// the reload: wait for them).
	deadline := time.Now().Add(20 * time.Second)
	for {
		step := must(store.Step(context.Background(), pki.DefaultKey, time.Now(), nil))
		var status struct {
			Consumers []struct {
				Name    string `json:"name"`
				Current bool   `json:"current"`
			} `json:"consumers"`
		}
		if err := json.Unmarshal(step.Status, &status); err != nil {
			t.Fatal(err)
		}
		step.Close()
		current := 0
		for _, c := range status.Consumers {
			if c.Current {
				current++
			}
		}
		if current == 2 && len(status.Consumers) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acks missing: %+v (last error %v)", status.Consumers, reloadErrors.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAckRefusesABundleTheSignerDidNotPublishAndRepeatsWithoutAWrite: Store.Ack
// takes a snapshot's token once, and refuses one never published; a
// snapshot never pairs a chain with another key.
func TestAckRefusesABundleTheSignerDidNotPublishAndRepeatsWithoutAWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	store := must(pki.OpenDirStore(context.Background(), dir))
	defer store.Close()
	now := time.Now()
	must(store.Create(context.Background(), pki.DefaultKey, pki.SignerSpec{CommonName: "service-ca"}, now)).Close()
	must(store.Step(context.Background(), pki.DefaultKey, now, &pki.SignerInput{Leaves: []pki.LeafChange{
		{Action: pki.LeafAdd, Name: "web", Request: pki.LeafRequest{DNSNames: []string{"web.test"}}},
	}})).Close()
	snap := must(pki.LoadSnapshot(filepath.Join(dir, "certs/web/tls.crt"), filepath.Join(dir, "certs/web/tls.key"), filepath.Join(dir, "ca-bundle.crt")))
	if !bytes.Contains(snap.Key, []byte("PRIVATE KEY")) || len(snap.Fingerprint) != 64 {
		t.Fatalf("snapshot: %q", snap.Fingerprint)
	}
	first := must(store.Ack(context.Background(), pki.DefaultKey, "web-1", snap.Fingerprint, now))
	again := must(store.Ack(context.Background(), pki.DefaultKey, "web-1", snap.Fingerprint, now))
	if !first.Changed || again.Changed {
		t.Fatalf("first ack changed %v, second %v", first.Changed, again.Changed)
	}
	first.Close()
	again.Close()
	if _, err := store.Ack(context.Background(), pki.DefaultKey, "web-1", string(bytes.Repeat([]byte("0"), 64)), now); !errors.Is(err, pki.ErrUnknownBundle) {
		t.Fatalf("an unpublished bundle: %v", err)
	}
	// A key of another leaf beside the chain: never one snapshot.
	_, err := pki.LoadSnapshot(filepath.Join(dir, "certs/web/tls.crt"), filepath.Join(dir, "signer/tls.key"), filepath.Join(dir, "ca-bundle.crt"))
	if !errors.Is(err, pki.ErrKeyMismatch) {
		t.Fatalf("a mismatched key: %v", err)
	}
}
