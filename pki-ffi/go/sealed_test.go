package pki_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	pki "pki.invalid/go"
)

// storeKeyFile writes a store key file as docs/sealing.md specifies it,
// the key id computed here: the format is checked from another language.
func storeKeyFile(fill byte) []byte {
	key := bytes.Repeat([]byte{fill}, 32)
	sum := sha256.Sum256(append([]byte("pki store key id\x00"), key...))
	return []byte(fmt.Sprintf("pki-store-key 1\nalgorithm xchacha20-poly1305\nid %s\nkey %s\n",
		hex.EncodeToString(sum[:8]), hex.EncodeToString(key)))
}

func TestASealedDirectoryStoreSealsTheCAKeyAndKeepsLeafKeysUsable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	store := must(pki.OpenSealedStore(ctx, dir, storeKeyFile(1)))
	signer := must(pki.NewSigner("service-ca", pki.KeyP256, nil, t0))
	defer signer.Close()
	must(store.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0))
	add := &pki.SignerInput{Leaves: []pki.LeafChange{{Action: pki.LeafAdd, Name: "web", Request: serverRequest}}}
	must(store.Step(ctx, pki.DefaultKey, t0, add))
	store.Close()

	read := func(p string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if caKey := read("signer/tls.key"); !bytes.HasPrefix(caKey, []byte("PKISEAL")) || bytes.Contains(caKey, []byte("PRIVATE KEY")) {
		t.Fatalf("the CA key is not sealed: %q", caKey[:16])
	}
	if leafKey := read("certs/web/tls.key"); !bytes.HasPrefix(leafKey, []byte("-----BEGIN PRIVATE KEY-----")) {
		t.Fatalf("the leaf key consumers read is not usable: %q", leafKey[:16])
	}

	// Without the key, or with another: ErrStore, one line.
	for name, open := range map[string]func() (*pki.Store, error){
		"no key":    func() (*pki.Store, error) { return pki.OpenStore(ctx, dir) },
		"other key": func() (*pki.Store, error) { return pki.OpenSealedStore(ctx, dir, storeKeyFile(2)) },
	} {
		s := must(open())
		_, err := s.Step(ctx, pki.DefaultKey, t0, nil)
		s.Close()
		if !errors.Is(err, pki.ErrStore) || !bytes.Contains([]byte(err.Error()), []byte("sealed")) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	again := must(pki.OpenSealedStore(ctx, dir, storeKeyFile(1)))
	defer again.Close()
	must(again.Step(ctx, pki.DefaultKey, t0, nil))

	// A key file whose id does not match its key is refused.
	bad := bytes.Replace(storeKeyFile(1), []byte("id "), []byte("id 0"), 1)
	if _, err := pki.OpenSealedStore(ctx, dir, bad); err == nil {
		t.Fatal("a damaged key file was accepted")
	}
}
