package pki_test

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	pki "pki.invalid/go"
)

// noPanic fails the test if f panics: every error path must return an error.
func noPanic(t *testing.T, name string, f func() error) error {
	t.Helper()
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s panicked: %v", name, r)
			}
		}()
		err = f()
	}()
	if err == nil {
		t.Errorf("%s: expected an error", name)
	}
	return err
}

func expect(t *testing.T, name string, sentinel error, f func() error) {
	t.Helper()
	err := noPanic(t, name, f)
	if err == nil {
		return
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Errorf("%s: %v is not %v", name, err, sentinel)
	}
	var e *pki.Error
	if errors.As(err, &e) {
		if e.Message == "" || !strings.Contains(err.Error(), e.Code.String()) {
			t.Errorf("%s: error without message or code: %q", name, err)
		}
	} else if !errors.Is(err, pki.ErrClosed) {
		t.Errorf("%s: %T is neither *pki.Error nor ErrClosed", name, err)
	}
}

func TestEveryErrorPathReturnsAnErrorNeverAPanic(t *testing.T) {
	good := must(pki.NewSigner("errors-ca", pki.KeyP256, nil, t0))
	defer good.Close()
	leaf := must(good.ReconcileLeaf(serverRequest, t0, nil, nil))
	other := must(good.ReconcileLeaf(serverRequest, t0, nil, nil))
	bundle := must(good.Bundle())
	defer bundle.Close()
	state := must(good.State())
	secret := must(good.Secret())
	garbage := []byte{0xff, 0x00, 0xfe, '-', '-', '-', '-', '-', 'B'}

	var closed *pki.Signer
	closedBundle := must(good.Bundle())
	closedBundle.Close()
	closedBundle.Close() // twice is fine

	bad := pki.DefaultPolicy()
	bad.MinTrust = bad.Lifetime
	expect(t, "invalid policy", pki.ErrInvalidPolicy, func() error {
		_, err := pki.NewSigner("x", pki.KeyP256, &bad, t0)
		return err
	})
	expect(t, "bad key type", pki.ErrInvalidArgument, func() error {
		_, err := pki.NewSigner("x", pki.KeyType("p42"), nil, t0)
		return err
	})
	expect(t, "empty common name", nil, func() error {
		_, err := pki.NewSigner("", pki.KeyP256, nil, t0)
		return err
	})
	expect(t, "garbage state", pki.ErrCorruptState, func() error {
		_, err := pki.LoadState(garbage)
		return err
	})
	expect(t, "empty state", pki.ErrCorruptState, func() error {
		_, err := pki.LoadState(nil)
		return err
	})
	expect(t, "truncated state", pki.ErrCorruptState, func() error {
		_, err := pki.LoadState(state[:len(state)/2])
		return err
	})
	expect(t, "future state version", pki.ErrUnsupportedVersion, func() error {
		_, err := pki.LoadState([]byte(`{"version": 7}`))
		return err
	})
	expect(t, "empty secret", pki.ErrCorruptState, func() error {
		_, err := pki.LoadSecret(map[string][]byte{})
		return err
	})
	expect(t, "bad secret key", pki.ErrInvalidArgument, func() error {
		_, err := pki.LoadSecret(map[string][]byte{"a/b": nil})
		return err
	})
	expect(t, "truncated CA in secret", pki.ErrCorruptState, func() error {
		damaged := map[string][]byte{}
		for k, v := range secret {
			damaged[k] = v
		}
		damaged[pki.SecretCACert] = secret[pki.SecretCACert][:40]
		_, err := pki.LoadSecret(damaged)
		return err
	})
	expect(t, "clock before the CA", pki.ErrClockBeforeCA, func() error {
		_, err := good.Reconcile(t0.Add(-time.Hour), nil)
		return err
	})
	expect(t, "empty forced reason", pki.ErrEmptyForcedReason, func() error {
		_, err := good.Reconcile(t0, &pki.SignerInput{Forced: &pki.ForcedRotation{}})
		return err
	})
	expect(t, "invalid policy at reconcile", pki.ErrInvalidPolicy, func() error {
		_, err := good.Reconcile(t0, &pki.SignerInput{Policy: &pki.Policy{}})
		return err
	})
	expect(t, "leaf without names", pki.ErrInvalidArgument, func() error {
		_, err := good.ReconcileLeaf(pki.LeafRequest{Kind: pki.LeafServer}, t0, nil, nil)
		return err
	})
	expect(t, "leaf with a bad kind", pki.ErrInvalidArgument, func() error {
		_, err := good.ReconcileLeaf(pki.LeafRequest{Kind: "both", DNSNames: []string{"a"}}, t0, nil, nil)
		return err
	})
	expect(t, "leaf with a bad IP", pki.ErrInvalidArgument, func() error {
		_, err := good.ReconcileLeaf(pki.LeafRequest{Kind: pki.LeafServer, IPAddresses: []net.IP{{1, 2, 3}}}, t0, nil, nil)
		return err
	})
	expect(t, "leaf with a negative lifetime", pki.ErrInvalidArgument, func() error {
		_, err := good.ReconcileLeaf(pki.LeafRequest{Kind: pki.LeafServer, DNSNames: []string{"a"}, Lifetime: -time.Hour}, t0, nil, nil)
		return err
	})
	expect(t, "previous chain without key", pki.ErrNoPEMBlock, func() error {
		_, err := good.ReconcileLeaf(serverRequest, t0, leaf.ChainPEM, nil)
		return err
	})
	expect(t, "garbage previous chain", pki.ErrParse, func() error {
		_, err := good.ReconcileLeaf(serverRequest, t0, garbage, leaf.KeyPEM)
		return err
	})
	expect(t, "truncated previous key", pki.ErrPEM, func() error {
		_, err := good.ReconcileLeaf(serverRequest, t0, leaf.ChainPEM, leaf.KeyPEM[:len(leaf.KeyPEM)/2])
		return err
	})
	expect(t, "key of another leaf", pki.ErrKeyMismatch, func() error {
		_, err := good.ReconcileLeaf(serverRequest, t0, leaf.ChainPEM, other.KeyPEM)
		return err
	})
	expect(t, "lineage of garbage", pki.ErrParse, func() error {
		_, err := good.CheckLineage(garbage)
		return err
	})
	expect(t, "garbage bundle", pki.ErrParse, func() error {
		_, err := pki.ParseBundle(garbage)
		return err
	})
	expect(t, "empty bundle", pki.ErrNoPEMBlock, func() error {
		_, err := pki.ParseBundle(nil)
		return err
	})
	expect(t, "bundle without root", pki.ErrNoRoot, func() error {
		b, err := pki.ParseBundle(leaf.ChainPEM)
		if err != nil {
			return nil
		}
		defer b.Close()
		_, err = b.RootPin()
		return err
	})
	expect(t, "wrong name", pki.ErrVerifyNameMismatch, func() error {
		_, err := bundle.VerifyChain(leaf.ChainPEM, t0.Add(time.Hour), pki.ServerAuth, "other.example")
		return err
	})
	expect(t, "expired", pki.ErrVerifyExpired, func() error {
		_, err := bundle.VerifyChain(leaf.ChainPEM, t0.AddDate(5, 0, 0), pki.ServerAuth, host)
		return err
	})
	expect(t, "wrong purpose", pki.ErrVerify, func() error {
		_, err := bundle.VerifyChain(leaf.ChainPEM, t0.Add(time.Hour), pki.ClientAuth, "")
		return err
	})
	expect(t, "bad purpose", pki.ErrInvalidArgument, func() error {
		_, err := bundle.VerifyChain(leaf.ChainPEM, t0.Add(time.Hour), pki.Purpose(7), "")
		return err
	})
	expect(t, "nil signer", pki.ErrClosed, func() error {
		_, err := closed.Reconcile(t0, nil)
		return err
	})
	expect(t, "nil signer state", pki.ErrClosed, func() error {
		_, err := closed.State()
		return err
	})
	expect(t, "nil signer leaf", pki.ErrClosed, func() error {
		_, err := closed.ReconcileLeaf(serverRequest, t0, nil, nil)
		return err
	})
	expect(t, "closed bundle", pki.ErrClosed, func() error {
		_, err := closedBundle.PEM()
		return err
	})
	expect(t, "merge with closed bundle", pki.ErrClosed, func() error {
		_, err := bundle.Merge(closedBundle)
		return err
	})
	if closedBundle.Len() != 0 {
		t.Error("getters of closed handles should give zero values")
	}
	closed.Close()

	// The working paths of the bundle API, for contrast.
	merged := must(bundle.Merge(bundle))
	defer merged.Close()
	f1, f2 := must(bundle.Fingerprint()), must(merged.Fingerprint())
	if f1 != f2 || merged.Len() != 1 {
		t.Error("merging a bundle with itself changed it")
	}
	if pins := must(bundle.SPKIPins()); len(pins) != 1 {
		t.Errorf("%d SPKI pins", len(pins))
	}
	pruned, removed := must2(bundle.PruneExpired(t0.AddDate(10, 0, 0)))
	defer pruned.Close()
	if removed != 1 || pruned.Len() != 0 {
		t.Errorf("pruned %d, left %d", removed, pruned.Len())
	}
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

func TestAClientTrustingAnotherCARefusesTheServer(t *testing.T) {
	a := must(pki.NewSigner("ca-a", pki.KeyP256, nil, t0))
	defer a.Close()
	b := must(pki.NewSigner("ca-b", pki.KeyP256, nil, t0))
	defer b.Close()
	leaf := must(a.ReconcileLeaf(serverRequest, t0, nil, nil))
	server := side{"a", leaf, bundlePEM(t, a)}
	client := side{"b", leaf, bundlePEM(t, b)}
	if err := handshake(t, server, client, day(1)); err == nil {
		t.Fatal("handshake succeeded against an unrelated bundle")
	}
	if err := x509Verify(server, client, day(1)); err == nil {
		t.Fatal("crypto/x509 accepted an unrelated bundle")
	}
}

func TestAWriteThatMayHaveLandedIsErrUnknownOutcomeAlone(t *testing.T) {
	// What a step returns when the library answers PKI_RESULT_UNKNOWN_OUTCOME,
	// wrapped the way a controller might.
	var err error = &pki.Error{
		Code:    pki.CodeUnknownOutcome,
		Message: `the write of document "signer" to etcd://127.0.0.1:2379/pki may have landed (no answer to the commit); rerunning the command is safe`,
	}
	err = fmt.Errorf("reconcile: %w", err)
	if !errors.Is(err, pki.ErrUnknownOutcome) {
		t.Fatalf("%v is not ErrUnknownOutcome", err)
	}
	for _, other := range []error{pki.ErrStore, pki.ErrConflict, pki.ErrAlreadyInitialized} {
		if errors.Is(err, other) {
			t.Errorf("%v also matches %v", err, other)
		}
	}
	if got := pki.CodeUnknownOutcome.String(); got != "PKI_RESULT_UNKNOWN_OUTCOME" {
		t.Errorf("the library names code %d %q", uint32(pki.CodeUnknownOutcome), got)
	}
	if !strings.Contains(err.Error(), "PKI_RESULT_UNKNOWN_OUTCOME") {
		t.Errorf("message without its code: %q", err)
	}
}
