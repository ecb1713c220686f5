package pki_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	pki "pki.invalid/go"
)

// t0 is 2026-01-01T00:00:00Z; every test injects its times from it.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const host = "web.ns.svc"

func day(n int) time.Time { return t0.Add(time.Duration(n) * 24 * time.Hour) }

var serverRequest = pki.LeafRequest{
	Kind:        pki.LeafServer,
	DNSNames:    []string{host},
	IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	Lifetime:    365 * 24 * time.Hour,
}

// must unwraps steps whose failure fails the test; the panic it raises on
// an error is reported by the test runner with the error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return v
}

func reconcile(t *testing.T, s *pki.Signer, now time.Time, forced string, wantEvents int) *pki.Signer {
	t.Helper()
	opts := &pki.SignerInput{}
	if forced != "" {
		// A forced rotation days after another cuts off the clients that
		// still hold the bundle of two rotations ago: a drill allows it.
		opts.Forced = &pki.ForcedRotation{Reason: forced}
		opts.AllowTrustBreak = "drill"
	}
	r := must(s.Reconcile(now, opts))
	if len(r.Events) != wantEvents {
		t.Fatalf("reconcile at %s: %d events, want %d: %+v", now, len(r.Events), wantEvents, r.Events)
	}
	if r.NextWake.Before(now) {
		t.Fatalf("next check %s before now %s", r.NextWake, now)
	}
	s.Close()
	return r.Signer
}

func bundlePEM(t *testing.T, s *pki.Signer) []byte {
	t.Helper()
	b := must(s.Bundle())
	defer b.Close()
	return must(b.PEM())
}

// side is what one side of a rotation serves (chain, key) and trusts (bundle).
type side struct {
	name   string
	leaf   *pki.Leaf
	bundle []byte
}

// handshake runs a real TLS handshake over loopback: the server serves the
// chain of `server`, the client trusts the bundle of `client`; certificate
// validity is checked at `at` on both ends.
func handshake(t *testing.T, server, client side, at time.Time) error {
	t.Helper()
	cert, err := tls.X509KeyPair(server.leaf.ChainPEM, server.leaf.KeyPEM)
	if err != nil {
		t.Fatalf("server key pair: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(client.bundle) {
		t.Fatal("client bundle has no certificate")
	}
	clock := func() time.Time { return at }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serverErr := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer conn.Close()
		tc := tls.Server(conn, &tls.Config{Certificates: []tls.Certificate{cert}, Time: clock})
		if err := tc.Handshake(); err != nil {
			serverErr <- err
			return
		}
		_, err = io.Copy(tc, tc)
		serverErr <- err
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{
		RootCAs: pool, ServerName: host, Time: clock, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		return err
	}
	if _, err := conn.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
		return fmt.Errorf("echo failed: %q %v", buf, err)
	}
	conn.Close()
	if err := <-serverErr; err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// x509Verify checks the chain with crypto/x509 at `at`.
func x509Verify(server, client side, at time.Time) error {
	var certs []*x509.Certificate
	rest := server.leaf.ChainPEM
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return err
		}
		certs = append(certs, c)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(client.bundle)
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{
		DNSName: host, Roots: roots, Intermediates: inter, CurrentTime: at,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}

// checkMatrix proves old/new serving chain x old/new client bundle by a
// TLS handshake, by crypto/x509 and by the library's own verifier.
func checkMatrix(t *testing.T, old, new side, at time.Time) {
	t.Helper()
	for _, server := range []side{old, new} {
		for _, client := range []side{old, new} {
			cell := fmt.Sprintf("%s chain x %s bundle at %s", server.name, client.name, at.Format(time.DateOnly))
			if err := handshake(t, server, client, at); err != nil {
				t.Errorf("%s: TLS handshake: %v", cell, err)
			}
			if err := x509Verify(server, client, at); err != nil {
				t.Errorf("%s: crypto/x509: %v", cell, err)
			}
			b := must(pki.ParseBundle(client.bundle))
			if _, err := b.VerifyChain(server.leaf.ChainPEM, at, pki.ServerAuth, host); err != nil {
				t.Errorf("%s: pki: %v", cell, err)
			}
			b.Close()
		}
	}
}

func TestTrustMatrixHoldsThroughAutomaticAndForcedRotation(t *testing.T) {
	s := must(pki.NewSigner("service-ca", pki.KeyP256, nil, t0))
	defer func() { s.Close() }()

	leaf0 := must(s.ReconcileLeaf(serverRequest, t0, nil, nil))
	if leaf0.Reason != pki.LeafNotYetIssued {
		t.Fatalf("first issue: %v %s", leaf0.Reason, leaf0.ReasonMessage)
	}
	s = reconcile(t, s, day(10), "", 0)
	leaf1 := must(s.ReconcileLeaf(serverRequest, day(390), leaf0.ChainPEM, leaf0.KeyPEM))
	if leaf1.Reason != pki.LeafNearExpiry {
		t.Fatalf("renewal: %v %s", leaf1.Reason, leaf1.ReasonMessage)
	}
	old := side{"old", leaf1, bundlePEM(t, s)}

	// Automatic: less than 395 days left at day 396.
	r := must(s.Reconcile(day(396), nil))
	if len(r.Events) != 1 || r.Events[0].Kind != pki.EventRotated {
		t.Fatalf("events: %+v", r.Events)
	}
	if want := day(396 + 395); !r.Events[0].PreviousTrustedUntil.Equal(want) {
		t.Fatalf("trusted until %s, want %s", r.Events[0].PreviousTrustedUntil, want)
	}
	// The next check is the new state's: bridge B ends with the old CA at
	// day 790 and is retired one second later (the new CA is due at 791).
	if want := day(790).Add(time.Second); !r.NextWake.Equal(want) {
		t.Fatalf("next check after the rotation %s, want %s", r.NextWake, want)
	}
	s.Close()
	s = r.Signer
	leaf2 := must(s.ReconcileLeaf(serverRequest, day(396), leaf1.ChainPEM, leaf1.KeyPEM))
	if leaf2.Reason != pki.LeafWrongIssuer {
		t.Fatalf("after rotation: %v %s", leaf2.Reason, leaf2.ReasonMessage)
	}
	if n := bytes.Count(leaf2.ChainPEM, []byte("BEGIN CERTIFICATE")); n != 2 {
		t.Fatalf("new chain has %d certificates, want leaf + bridge", n)
	}
	lin := must(s.CheckLineage(leaf1.ChainPEM))
	if lin.IssuedBy || lin.Rule != pki.LineageKeyIdentifierMismatch || lin.Reason == "" {
		t.Fatalf("lineage of the old leaf: %+v", lin)
	}
	rotated := side{"new", leaf2, bundlePEM(t, s)}
	checkMatrix(t, old, rotated, day(396).Add(time.Hour))
	checkMatrix(t, old, rotated, leaf1.NotAfter.Add(-24*time.Hour))

	// Forced: once per reason.
	s = reconcile(t, s, day(400), "key-compromise-drill", 1)
	s = reconcile(t, s, day(401), "key-compromise-drill", 0)
	leaf3 := must(s.ReconcileLeaf(serverRequest, day(401), leaf2.ChainPEM, leaf2.KeyPEM))
	if leaf3.Reason != pki.LeafWrongIssuer {
		t.Fatalf("after forced rotation: %v", leaf3.Reason)
	}
	forced := side{"new", leaf3, bundlePEM(t, s)}
	rotated.name = "old"
	checkMatrix(t, rotated, forced, day(402))

	// The Secret form carries the forced reason and survives a round trip.
	data := must(s.Secret())
	if string(data[pki.SecretForcedReason]) != "key-compromise-drill" {
		t.Fatalf("forced reason in the Secret: %q", data[pki.SecretForcedReason])
	}
	for _, k := range []string{pki.SecretCACert, pki.SecretCAKey, pki.SecretBundle, pki.SecretIntermediate, pki.SecretStateDocument} {
		if len(data[k]) == 0 {
			t.Fatalf("Secret has no %s", k)
		}
	}
	back := must(pki.LoadSecret(data))
	defer back.Close()
	a := must(s.State())
	b := must(back.State())
	if !bytes.Equal(a, b) {
		t.Fatal("state differs after a Secret round trip")
	}
	// The reloaded signer still refuses to rotate twice for the same reason.
	back = reconcile(t, back, day(402), "key-compromise-drill", 0)
}

func TestManyGoroutinesReconcileIndependentStatesAtOnce(t *testing.T) {
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	// One signer shared read-only by every goroutine, besides their own.
	shared := must(pki.NewSigner("shared-ca", pki.KeyP256, nil, t0))
	defer shared.Close()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errs <- func() error {
				s, err := pki.NewSigner(fmt.Sprintf("ca-%d", w), pki.KeyP256, nil, t0)
				if err != nil {
					return err
				}
				defer func() { s.Close() }()
				var leaf *pki.Leaf
				changed := 0
				for step, at := range []time.Time{day(1), day(200), day(396), day(500), day(800)} {
					r, err := s.Reconcile(at, nil)
					if err != nil {
						return fmt.Errorf("worker %d step %d: %w", w, step, err)
					}
					if r.Changed {
						changed++
					}
					s.Close()
					s = r.Signer
					var chain, key []byte
					if leaf != nil {
						chain, key = leaf.ChainPEM, leaf.KeyPEM
					}
					if leaf, err = s.ReconcileLeaf(serverRequest, at, chain, key); err != nil {
						return fmt.Errorf("worker %d step %d leaf: %w", w, step, err)
					}
					data, err := s.Secret()
					if err != nil {
						return err
					}
					back, err := pki.LoadSecret(data)
					if err != nil {
						return err
					}
					back.Close()
					if _, err := shared.ReconcileLeaf(serverRequest, day(1), nil, nil); err != nil {
						return err
					}
					// Errors on this goroutine carry this goroutine's message.
					if _, err := pki.ParseBundle([]byte(fmt.Sprintf("worker %d", w))); !errors.Is(err, pki.ErrNoPEMBlock) {
						return fmt.Errorf("worker %d: want ErrNoPEMBlock, got %v", w, err)
					}
				}
				// The reconciles that changed something: the rotations at
				// days 396 and 800, at least.
				if changed < 2 {
					return fmt.Errorf("worker %d: %d changing reconciles", w, changed)
				}
				return nil
			}()
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
