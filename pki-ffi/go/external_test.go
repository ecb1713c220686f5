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

	pki "example.invalid/pki/pki-ffi/go"
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
	report := must(signer.ValidateReplacement(pemOf(t, next, inter, root), nil, nil, now))
	if !report.OK || len(report.Checks) != 6 {
		t.Fatalf("good replacement: %+v", report)
	}
	report = must(signer.ValidateReplacement(pemOf(t, next), nil, nil, now))
	if failed := report.Failed(); len(failed) != 1 || failed[0] != "chain-supplied" {
		t.Fatalf("replacement without its chain: %+v", report)
	}

	rotated := must(signer.RotateTo(pemOf(t, next, inter, root), nil, nil, "", now))
	rotated.Close()

	otherRoot := makeCA(t, "Other Root", nil, 2)
	stranger := makeCA(t, "cluster-ca-3", otherRoot, 0)
	if _, err := signer.RotateTo(pemOf(t, stranger, otherRoot), nil, nil, "", now); !errors.Is(err, pki.ErrValidationFailed) {
		t.Fatalf("another root without force: %v", err)
	}
	forced := must(signer.RotateTo(pemOf(t, stranger, otherRoot), nil, nil, "org root replaced", now))
	forced.Close()

	twoKeys := append(pemOf(t, cluster, inter, root), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: must(x509.MarshalPKCS8PrivateKey(root.key))})...)
	if _, err := pki.ImportSigner(twoKeys, nil, nil, nil, now); !errors.Is(err, pki.ErrImport) {
		t.Fatalf("two keys: %v", err)
	}
}
