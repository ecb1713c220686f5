package pki_test

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	pki "pki.invalid/go"
)

// TestStepLeavesGoesByPartsInsideTheSummary: a leaf change while the
// store's summary says nothing else is due reads and writes the head and
// that leaf; the published files are those of a whole step, and Go's
// crypto/x509 verifies the new leaf against the published bundle.
func TestStepLeavesGoesByPartsInsideTheSummary(t *testing.T) {
	dir, store, signer := newDirSigner(t)
	step(t, store, t0, &pki.SignerInput{Leaves: []pki.LeafChange{{Action: pki.LeafAdd, Name: "web", Request: serverRequest}}})

	webCert := filepath.Join(dir, "certs", "web", "tls.crt")
	before := must(os.ReadFile(webCert))
	now := t0.Add(time.Hour)
	api := pki.LeafRequest{Kind: pki.LeafServer, DNSNames: []string{"api.ns.svc"}, Lifetime: 90 * 24 * time.Hour}
	st := must(store.StepLeaves(ctx, pki.DefaultKey, now,
		pki.LeafChange{Action: pki.LeafAdd, Name: "api", Request: api},
		pki.LeafChange{Action: pki.LeafRenew, Name: "web"}))
	defer st.Close()
	if !st.ByParts || !st.Changed || st.Idle || st.Signer == nil {
		t.Fatalf("a leaf change inside the promise: %+v", st)
	}
	var status struct {
		Leaves []struct{ Name string } `json:"leaves"`
	}
	if err := json.Unmarshal(st.Status, &status); err != nil || len(status.Leaves) != 2 {
		t.Fatalf("the part's status names the two leaves: %s (%v)", st.Status, err)
	}

	whole, revision := must2(store.Load(ctx, pki.DefaultKey))
	defer whole.Close()
	if revision != st.Revision {
		t.Fatalf("revision %s, the step said %s", revision, st.Revision)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(must(os.ReadFile(filepath.Join(dir, "ca-bundle.crt")))) {
		t.Fatal("no certificate in ca-bundle.crt")
	}
	block, _ := pem.Decode(must(os.ReadFile(filepath.Join(dir, "certs", "api", "tls.crt"))))
	if block == nil {
		t.Fatal("certs/api/tls.crt holds no certificate")
	}
	if _, err := must(x509.ParseCertificate(block.Bytes)).Verify(x509.VerifyOptions{
		DNSName: "api.ns.svc", Roots: roots, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		t.Errorf("certs/api/tls.crt: %v", err)
	}
	if bytes.Equal(before, must(os.ReadFile(webCert))) {
		t.Error("certs/web/tls.crt was not renewed")
	}

	if _, err := store.StepLeaves(ctx, pki.DefaultKey, now); !errors.Is(err, pki.ErrInvalidArgument) {
		t.Fatalf("no leaf change: %v", err)
	}
	secrets := must(pki.NewSecretStore(newFakeSecrets()))
	defer secrets.Close()
	must(secrets.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0))
	full := must(secrets.StepLeaves(ctx, pki.DefaultKey, now, pki.LeafChange{Action: pki.LeafAdd, Name: "api", Request: api}))
	defer full.Close()
	if full.ByParts || !full.Changed || full.Signer == nil {
		t.Fatalf("a Secret backend keeps no summary: %+v", full)
	}
}
