package pki_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pki "pki.invalid/go"
)

// setTarget is one target of a CA set as a process runs it: a watcher
// over the target's only leaf and only bundle, and the fingerprint the set
// wants it to acknowledge now.
type setTarget struct {
	name    string
	watcher *pki.Watcher
	leaf    string // certs/NAME, relative to the target's directory
	bundle  string // trust/CA.crt or client-ca/CA.crt, likewise
	want    string
	changed time.Time // when the set last changed what it wants

	mu     sync.Mutex
	loaded map[string]time.Time // by fingerprint, when last loaded
}

// sample notes when the watcher swaps in new files, every millisecond
// until ctx is done.
func (tg *setTarget) sample(ctx context.Context) {
	var last *pki.Snapshot
	for ctx.Err() == nil {
		if snap := pki.LoadedSnapshot(tg.watcher); snap != last {
			at, fp := time.Now(), tg.loadedFingerprint(snap)
			tg.mu.Lock()
			tg.loaded[fp] = at
			tg.mu.Unlock()
			last = snap
		}
		time.Sleep(time.Millisecond)
	}
}

// loadedAt is when the watcher last loaded the files of fingerprint.
func (tg *setTarget) loadedAt(fingerprint string) (time.Time, bool) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	at, ok := tg.loaded[fingerprint]
	return at, ok
}

// loadedFingerprint is what `pki fingerprint DIR/targets/T` prints, over
// the files of snap (the target holds no others): SHA-256 over
// each file's relative path and contents in path order, each preceded by
// its length as 8 big-endian bytes. The set refuses an acknowledgement of
// anything but its current fingerprint, which checks this computation.
func (tg *setTarget) loadedFingerprint(snap *pki.Snapshot) string {
	files := map[string][]byte{
		tg.leaf + "/tls.crt": snap.Chain,
		tg.leaf + "/tls.key": snap.Key,
		tg.bundle:            snap.Bundle,
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	h := sha256.New()
	var n [8]byte
	for _, p := range paths {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
		binary.BigEndian.PutUint64(n[:], uint64(len(files[p])))
		h.Write(n[:])
		h.Write(files[p])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// leafLog remembers when each leaf was first seen.
type leafLog struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func (l *leafLog) add(leaf []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[string(leaf)]; !ok {
		l.seen[string(leaf)] = time.Now()
	}
}

func (l *leafLog) has(leaf []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.seen[string(leaf)]
	return ok
}

// serveRecordingClients is serve that also logs the client certificate
// of each connection.
func serveRecordingClients(l net.Listener, clients *leafLog) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			tc := conn.(*tls.Conn)
			if tc.Handshake() != nil {
				return
			}
			clients.add(tc.ConnectionState().PeerCertificates[0].Raw)
			ping := make([]byte, 4)
			if _, err := io.ReadFull(tc, ping); err == nil {
				_, _ = tc.Write([]byte("pong"))
			}
		}()
	}
}

// verifiesAgainst reports whether leaf chains to a root in the bundle file.
func verifiesAgainst(t *testing.T, leaf []byte, bundle []byte, usage x509.ExtKeyUsage) bool {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatal("a bundle without a certificate")
	}
	cert := must(x509.ParseCertificate(leaf))
	_, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err == nil
}

// TestWatchersKeepAMutualTLSPairTalkingThroughEveryStepOfACASetRotation
// runs a Go server (target apiserver: leaf api, verifying clients against
// client-ca/cluster.crt) and a Go client (target node: leaf kubelet,
// verifying the server against trust/cluster.crt) on Watcher material
// over 127.0.0.1, handshaking continuously, while a CA set walks idle →
// trust-both → update-certs → trust-new → completed. Each target
// acknowledges, as its node agent would, the fingerprint of the files its
// watcher loaded, once loaded; the set accepts only the current one. No
// handshake may fail at any step, and after update-certs both sides
// present certificates of the new CAs. Reload latency (the start of the
// set call that wrote a target's files → its watcher holding them) and
// handshakes per second are logged, not asserted.
func TestWatchersKeepAMutualTLSPairTalkingThroughEveryStepOfACASetRotation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "set")
	store := must(pki.OpenDirStore(context.Background(), dir))
	defer store.Close()
	set := pki.SetOf(store)
	// The set runs on the real clock crypto/tls verifies with.
	ok := func(step *pki.Step, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		step.Close()
	}
	// The cluster CA signs the API server's serving certificate and the
	// kubelet's client certificate: the rotation gives it a separate new
	// client CA.
	ok(set.Create(context.Background(), []string{"cluster:serving+client"}, 730*24*time.Hour, time.Now()))
	ok(set.Issue(context.Background(), "api", "cluster", true, false, []string{"api.test"}, "apiserver", time.Now()))
	ok(set.Issue(context.Background(), "kubelet", "cluster", false, true, nil, "node", time.Now()))
	ok(set.Target(context.Background(), "apiserver", nil, []string{"cluster"}, time.Now()))
	ok(set.Target(context.Background(), "node", []string{"cluster"}, nil, time.Now()))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var reloadErrors atomic.Value
	watch := func(name, leaf, bundle string) *setTarget {
		base := filepath.Join(dir, "targets", name)
		w := must(pki.Watch(ctx, filepath.Join(base, leaf, "tls.crt"), filepath.Join(base, leaf, "tls.key"),
			filepath.Join(base, bundle), pki.WatchOptions{
				Interval: 50 * time.Millisecond,
				OnError:  func(err error) { reloadErrors.Store(err) },
			}))
		tg := &setTarget{name: name, watcher: w, leaf: leaf, bundle: bundle, loaded: map[string]time.Time{}}
		go tg.sample(ctx)
		return tg
	}
	server := watch("apiserver", "certs/api", "client-ca/cluster.crt")
	client := watch("node", "certs/kubelet", "trust/cluster.crt")
	targets := map[string]*setTarget{"apiserver": server, "node": client}
	file := func(tg *setTarget, rel string) string { return filepath.Join(dir, "targets", tg.name, rel) }
	read := func(path string) []byte { return must(os.ReadFile(path)) }
	oldAPI := leafDER(t, file(server, "certs/api/tls.crt"))
	oldKubelet := leafDER(t, file(client, "certs/kubelet/tls.crt"))
	oldTrust := read(file(client, "trust/cluster.crt"))
	oldClientCA := read(file(server, "client-ca/cluster.crt"))

	listener := must(tls.Listen("tcp", "127.0.0.1:0", server.watcher.ServerConfig()))
	defer listener.Close()
	clientsSeen := &leafLog{seen: map[string]time.Time{}}
	go serveRecordingClients(listener, clientsSeen)
	tl := &tally{seen: map[string]time.Time{}}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			config := client.watcher.ClientConfig("api.test")
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
				if _, seen := tl.seen[string(leaf)]; !seen {
					tl.seen[string(leaf)] = time.Now()
				}
				tl.mu.Unlock()
			}
		}()
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	noFailures := func(step string) {
		t.Helper()
		if tl.failed.Load() != 0 {
			tl.mu.Lock()
			defer tl.mu.Unlock()
			t.Fatalf("%s: %d failed handshakes: %v", step, tl.failed.Load(), tl.errs)
		}
	}

	// change makes a set call and records which targets the set now
	// wants to load other files, and since when: the call's start, as
	// the files may be written, and loaded, before it returns.
	change := func(call func() (*pki.Step, error)) {
		t.Helper()
		at := time.Now()
		if call != nil {
			ok(call())
		}
		plan := must(set.Plan(context.Background()))
		for name, tg := range targets {
			if fp := plan[name].Fingerprint; fp != tg.want {
				tg.want, tg.changed = fp, at
			}
		}
	}
	// settle lets each pending target's watcher load what the set wants,
	// acknowledges it, and again until every target loaded this step (an
	// acknowledgement may move other targets' files: client certificates
	// move once the servers verifying them loaded trust-both). Then the
	// pair talks for a while on this step's files.
	between := 1500 * time.Millisecond
	settle := func(step string) {
		t.Helper()
		before, start := tl.ok.Load(), time.Now()
		for round := 0; ; round++ {
			status := must(set.Status(context.Background(), time.Now()))
			if status.Step != step {
				t.Fatalf("step %s, want %s", status.Step, step)
			}
			var pending []string
			for name, tg := range status.Targets {
				if tg.Progress != "loaded" {
					pending = append(pending, name)
				}
			}
			if len(pending) == 0 {
				break
			}
			if round == 4 {
				t.Fatalf("%s: targets still pending: %+v", step, status.Targets)
			}
			sort.Strings(pending)
			for _, name := range pending {
				tg := targets[name]
				deadline := time.Now().Add(20 * time.Second)
				for {
					if fp := tg.loadedFingerprint(pki.LoadedSnapshot(tg.watcher)); fp == tg.want {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: %s never loaded its files (last reload error: %v)", step, name, reloadErrors.Load())
					}
					time.Sleep(time.Millisecond)
				}
				if at, seen := tg.loadedAt(tg.want); seen && !at.Before(tg.changed) {
					t.Logf("%s: %s loaded its files %.1f ms after the set call that wrote them began (interval 50 ms)", step, name,
						float64(at.Sub(tg.changed).Microseconds())/1e3)
				}
				// What the watcher holds: the set takes nothing else.
				fp := tg.loadedFingerprint(pki.LoadedSnapshot(tg.watcher))
				change(func() (*pki.Step, error) { return set.Ack(context.Background(), name, fp, time.Now()) })
			}
		}
		time.Sleep(between)
		noFailures(step)
		n := tl.ok.Load() - before
		if n == 0 {
			t.Fatalf("%s: no handshakes", step)
		}
		t.Logf("%s: every target loaded; %d handshakes, %.0f/s over the step, 0 failed (loads: server %d, client %d)",
			step, n, float64(n)/time.Since(start).Seconds(),
			server.watcher.Reloads(), client.watcher.Reloads())
	}

	change(nil) // what the watchers loaded at their start
	settle("idle")
	change(func() (*pki.Step, error) { return set.Start(context.Background(), "live rotation", false, time.Now()) })
	settle("trust-both")
	for _, step := range []string{"update-certs", "trust-new", "completed"} {
		change(func() (*pki.Step, error) { return set.Advance(context.Background(), "", time.Now()) })
		settle(step)
		if step != "update-certs" {
			continue
		}
		// Both sides present certificates of the new CAs: what their
		// peers saw, and no longer verifiable by the bundles of before the
		// rotation.
		newAPI := leafDER(t, file(server, "certs/api/tls.crt"))
		newKubelet := leafDER(t, file(client, "certs/kubelet/tls.crt"))
		if string(newAPI) == string(oldAPI) || string(newKubelet) == string(oldKubelet) {
			t.Fatal("update-certs left a leaf as it was")
		}
		if _, seen := tl.firstSeen(newAPI); !seen {
			t.Fatal("the client never saw the new serving certificate")
		}
		if !clientsSeen.has(newKubelet) {
			t.Fatal("the server never saw the new client certificate")
		}
		presented := must(exchange(listener.Addr().String(), client.watcher.ClientConfig("api.test")))
		if string(presented) != string(newAPI) || string(client.watcher.Certificate().Certificate[0]) != string(newKubelet) {
			t.Fatal("after update-certs, a side still presents its old certificate")
		}
		if verifiesAgainst(t, newAPI, oldTrust, x509.ExtKeyUsageServerAuth) ||
			verifiesAgainst(t, newKubelet, oldClientCA, x509.ExtKeyUsageClientAuth) {
			t.Fatal("a new leaf verifies against the bundles of before the rotation")
		}
		if !verifiesAgainst(t, oldAPI, oldTrust, x509.ExtKeyUsageServerAuth) ||
			!verifiesAgainst(t, oldKubelet, oldClientCA, x509.ExtKeyUsageClientAuth) {
			t.Fatal("the old leaves do not verify against their own bundles: the check above proves nothing")
		}
	}
	stop.Store(true)
	wg.Wait()
	noFailures("completed")
	t.Logf("CA set rotation: %d handshakes, %d failed; loads: server %d, client %d",
		tl.ok.Load(), tl.failed.Load(), server.watcher.Reloads(), client.watcher.Reloads())
}
