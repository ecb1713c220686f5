package pki_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"testing"
	"time"

	pki "pki.invalid/go"
)

// goCA is a CA made with Go's crypto: the organisation's side of the k3s
// custom-CA topology.
type goCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

func makeCA(t *testing.T, cn string, parent *goCA, pathLen int) *goCA {
	t.Helper()
	key := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             t0.Add(-time.Hour),
		NotAfter:              t0.Add(700 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            pathLen,
		MaxPathLenZero:        pathLen == 0,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey))
	return &goCA{cert: must(x509.ParseCertificate(der)), key: key, der: der}
}

// pemOf is the CA's certificate, its key, then the chain: one upload file.
func pemOf(t *testing.T, ca *goCA, chain ...*goCA) []byte {
	t.Helper()
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
	out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: must(x509.MarshalPKCS8PrivateKey(ca.key))})...)
	for _, c := range chain {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.der})...)
	}
	return out
}

// to asks a signer step to rotate to the CA pem, checking keys (nil: none)
// and overriding failed checks for force ("": no override).
func to(pem []byte, keys *pki.ServiceAccountKeys, force string) *pki.SignerInput {
	return &pki.SignerInput{RotateTo: &pki.Replacement{CA: pki.CAImport{CA: pem}, Keys: keys, Force: force}}
}

// asked is a replacement to validate.
func asked(pem []byte, keys *pki.ServiceAccountKeys) pki.Replacement {
	return pki.Replacement{CA: pki.CAImport{CA: pem}, Keys: keys}
}

func TestImportValidateAndRotateToASuppliedCA(t *testing.T) {
	root := makeCA(t, "Org Root", nil, 2)
	inter := makeCA(t, "Org Intermediate", root, 1)
	cluster := makeCA(t, "cluster-ca", inter, 0)
	now := t0.Add(24 * time.Hour)

	signer := must(pki.ImportSigner(pemOf(t, cluster, inter, root), nil, nil, nil, now))
	defer signer.Close()
	bundle := must(signer.Bundle())
	defer bundle.Close()
	pin := must(bundle.RootPin())
	if want := sha256.Sum256(root.der); pin != want {
		t.Fatalf("bundle root pin %x, want the organisation root's %x", pin, want)
	}

	next := makeCA(t, "cluster-ca-2", inter, 0)
	report := must(signer.ValidateReplacement(asked(pemOf(t, next, inter, root), nil), now))
	if !report.OK || len(report.Checks) != 7 {
		t.Fatalf("good replacement: %+v", report)
	}
	report = must(signer.ValidateReplacement(asked(pemOf(t, next), nil), now))
	if failed := report.Failed(); len(failed) != 1 || failed[0] != "chain-supplied" {
		t.Fatalf("replacement without its chain: %+v", report)
	}

	rotated := must(signer.Reconcile(now, to(pemOf(t, next, inter, root), nil, "")))
	rotated.Close()

	otherRoot := makeCA(t, "Other Root", nil, 2)
	stranger := makeCA(t, "cluster-ca-3", otherRoot, 0)
	if _, err := signer.Reconcile(now, to(pemOf(t, stranger, otherRoot), nil, "")); !errors.Is(err, pki.ErrValidationFailed) {
		t.Fatalf("another root without force: %v", err)
	}
	forced := must(signer.Reconcile(now, to(pemOf(t, stranger, otherRoot), nil, "org root replaced")))
	forced.Close()

	twoKeys := append(pemOf(t, cluster, inter, root), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: must(x509.MarshalPKCS8PrivateKey(root.key))})...)
	if _, err := pki.ImportSigner(twoKeys, nil, nil, nil, now); !errors.Is(err, pki.ErrImport) {
		t.Fatalf("two keys: %v", err)
	}
}

// publicPEM is a service-account key set holding one new public key.
func publicPEM(t *testing.T) []byte {
	t.Helper()
	key := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: must(x509.MarshalPKIXPublicKey(&key.PublicKey))})
}

func TestServiceAccountKeySetsReachValidationAndRotation(t *testing.T) {
	root := makeCA(t, "Org Root", nil, 2)
	next := makeCA(t, "Next Root", nil, 2)
	now := t0.Add(24 * time.Hour)
	signer := must(pki.ImportSigner(pemOf(t, root), nil, nil, nil, now))
	defer signer.Close()
	kept, other := publicPEM(t), publicPEM(t)
	dropped := &pki.ServiceAccountKeys{Current: kept, Proposed: other}

	report := must(signer.ValidateReplacement(asked(pemOf(t, next), dropped), now))
	if failed := report.Failed(); len(failed) != 1 || failed[0] != "service-account-key-kept" {
		t.Fatalf("a proposed key set that drops the current key: %+v", report)
	}
	keeps := &pki.ServiceAccountKeys{Current: kept, Proposed: append(append([]byte{}, other...), kept...)}
	if report := must(signer.ValidateReplacement(asked(pemOf(t, next), keeps), now)); !report.OK {
		t.Fatalf("a proposed key set that keeps the current key: %+v", report)
	}
	if _, err := signer.Reconcile(now, to(pemOf(t, next), dropped, "")); !errors.Is(err, pki.ErrValidationFailed) {
		t.Fatalf("rotation dropping the current key without force: %v", err)
	}
	forced := must(signer.Reconcile(now, to(pemOf(t, next), dropped, "key ring moved")))
	forced.Close()
}

func TestStoreRotateToWritesTheSuppliedCAOnce(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			root := makeCA(t, "Org Root", nil, 2)
			next := makeCA(t, "Next Root", nil, 2)
			now := t0.Add(24 * time.Hour)
			store := open()
			defer store.Close()
			signer := must(pki.ImportSigner(pemOf(t, root), nil, nil, nil, now))
			defer signer.Close()
			created := must(store.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, now)).Revision

			stranger := makeCA(t, "cluster-ca", makeCA(t, "Other Root", nil, 2), 0)
			if _, err := store.Step(ctx, pki.DefaultKey, now, to(pemOf(t, stranger), nil, "")); !errors.Is(err, pki.ErrValidationFailed) {
				t.Fatalf("a CA under another root, without its chain: %v", err)
			}
			if _, rev := must2(store.Load(ctx, pki.DefaultKey)); rev != created {
				t.Fatalf("a refused rotation wrote revision %q", rev)
			}
			st := must(store.Step(ctx, pki.DefaultKey, now, to(pemOf(t, next), nil, "")))
			defer st.Close()
			if !st.Changed || rotations(st) != 1 || st.Attempts != 1 || st.Revision == created {
				t.Fatalf("rotation to a supplied CA: %+v", st)
			}
			if _, rev := must2(store.Load(ctx, pki.DefaultKey)); rev != st.Revision {
				t.Fatalf("stored revision %q, step's %q", rev, st.Revision)
			}
		})
	}
}

func TestStoreStepRefusesATrustBreakUnlessAReasonAllowsIt(t *testing.T) {
	store := must(pki.NewMemoryStore())
	defer store.Close()
	signer := must(pki.NewSigner("service-ca", pki.KeyP256, nil, t0))
	defer signer.Close()
	must(store.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0))
	day := 24 * time.Hour
	step(t, store, t0.Add(day), &pki.SignerInput{Forced: &pki.ForcedRotation{Reason: "first"}})
	// A day later, clients may still hold the bundle of two rotations ago.
	second := &pki.SignerInput{Forced: &pki.ForcedRotation{Reason: "second"}}
	if _, err := store.Step(ctx, pki.DefaultKey, t0.Add(2*day), second); !errors.Is(err, pki.ErrTrustBreak) {
		t.Fatalf("a rotation a day after another: %v", err)
	}
	second.AllowTrustBreak = "lab store"
	if st := step(t, store, t0.Add(2*day), second); rotations(st) != 1 {
		t.Fatalf("allowed: %+v", st.Events)
	}
}
