package pki_test

import (
	"bytes"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	pki "pki.invalid/go"
)

const (
	tokenLabel = "pki-test"
	tokenPIN   = "1234"
)

// softHSM is a SoftHSM2 token of the test's own.
type softHSM struct {
	module  string
	pinFile string
}

// newSoftHSM makes a token in a temporary directory. SoftHSM2 reads
// SOFTHSM2_CONF once, when the module is initialised: it is set here,
// before any store of the process loads the module, and every tool run
// by the test inherits it.
func newSoftHSM(t *testing.T, module string) softHSM {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.Mkdir(tokens, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "softhsm2.conf")
	text := "directories.tokendir = " + tokens + "\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n"
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOFTHSM2_CONF", conf)
	out, err := exec.Command("softhsm2-util", "--init-token", "--free", "--label", tokenLabel,
		"--pin", tokenPIN, "--so-pin", "5678").CombinedOutput()
	if err != nil {
		t.Fatalf("softhsm2-util --init-token (install softhsm2): %v\n%s", err, out)
	}
	pinFile := filepath.Join(dir, "pin")
	if err := os.WriteFile(pinFile, []byte(tokenPIN+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return softHSM{module: module, pinFile: pinFile}
}

// privateKeyIDs lists the token's private key objects with OpenSC's
// pkcs11-tool, an independent reader: their ids in hex, each checked
// sensitive and never extractable.
func (h softHSM) privateKeyIDs(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("pkcs11-tool", "--module", h.module, "--token-label", tokenLabel,
		"--login", "--pin", tokenPIN, "--list-objects", "--type", "privkey").CombinedOutput()
	if err != nil {
		t.Fatalf("pkcs11-tool (install opensc): %v\n%s", err, out)
	}
	var ids []string
	for _, object := range strings.Split(string(out), "Private Key Object")[1:] {
		var id, access string
		for _, line := range strings.Split(object, "\n") {
			line = strings.TrimSpace(line)
			if v, ok := strings.CutPrefix(line, "ID:"); ok {
				id = strings.ToLower(strings.TrimSpace(v))
			}
			if v, ok := strings.CutPrefix(line, "Access:"); ok {
				access = v
			}
		}
		if id == "" || !strings.Contains(access, "sensitive") || !strings.Contains(access, "never extractable") {
			t.Fatalf("a private key object without an id, or that can leave the token:%s", object)
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// namedKeyIDs reads the ids of the key objects the document's token_keys
// names (current, pending, previous, retiring), in hex.
func namedKeyIDs(t *testing.T, storeDir string) []string {
	t.Helper()
	var state struct {
		TokenKeys struct {
			Current  string   `json:"current"`
			Pending  string   `json:"pending"`
			Previous string   `json:"previous"`
			Retiring []string `json:"retiring"`
		} `json:"token_keys"`
	}
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(storeDir, "pki-state.json"))), &state); err != nil {
		t.Fatal(err)
	}
	k := state.TokenKeys
	var ids []string
	for _, uri := range append([]string{k.Current, k.Pending, k.Previous}, k.Retiring...) {
		if uri == "" {
			continue
		}
		ids = append(ids, uriID(t, uri))
	}
	sort.Strings(ids)
	return ids
}

// uriID is the `id` attribute of an RFC 7512 URI, in hex.
func uriID(t *testing.T, uri string) string {
	t.Helper()
	path, _, _ := strings.Cut(strings.TrimPrefix(uri, "pkcs11:"), "?")
	for _, attr := range strings.Split(path, ";") {
		if v, ok := strings.CutPrefix(attr, "id="); ok {
			raw, err := url.PathUnescape(v)
			if err != nil {
				t.Fatalf("%s: %v", uri, err)
			}
			return hex.EncodeToString([]byte(raw))
		}
	}
	t.Fatalf("%s names no id", uri)
	return ""
}

// assertTokenMatches: the token holds exactly the key objects the
// document names (an orphan or a missing key fails); returns how many.
func assertTokenMatches(t *testing.T, h softHSM, storeDir, after string) int {
	t.Helper()
	held, named := h.privateKeyIDs(t), namedKeyIDs(t, storeDir)
	if len(named) == 0 || strings.Join(held, ",") != strings.Join(named, ",") {
		t.Fatalf("%s: the token holds %v, the document names %v", after, held, named)
	}
	return len(held)
}

// assertLeafTrusted verifies the stored leaf's chain against the stored
// bundle with crypto/x509 at `at`.
func assertLeafTrusted(t *testing.T, storeDir, name string, at time.Time) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(must(os.ReadFile(filepath.Join(storeDir, "ca-bundle.crt")))) {
		t.Fatal("ca-bundle.crt holds no certificate")
	}
	var chain []*x509.Certificate
	rest := must(os.ReadFile(filepath.Join(storeDir, "certs", name, "tls.crt")))
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		chain = append(chain, must(x509.ParseCertificate(block.Bytes)))
	}
	if len(chain) == 0 {
		t.Fatalf("certs/%s/tls.crt holds no certificate", name)
	}
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: intermediates, DNSName: host, CurrentTime: at,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		t.Fatalf("the leaf %s does not verify against the bundle at %s: %v", name, at, err)
	}
}

// A signer whose CA keys are in a SoftHSM2 token: created with KeyStore in
// a store opened with the token's module, a leaf issued, a forced
// rotation; after each step the leaf verifies against the bundle and the
// token holds exactly the keys the document names. The same store opened
// without the module refuses to sign, naming PKI_PKCS11_MODULE, and is
// left as it was.
func TestTokenHeldCARotatesAndTheTokenHoldsExactlyItsKeys(t *testing.T) {
	module := os.Getenv("PKI_TEST_PKCS11_MODULE")
	if module == "" {
		t.Skip("needs SoftHSM2: run through `cargo test -p pki-ffi --test go`, which names its module")
	}
	h := newSoftHSM(t, module)
	storeDir := filepath.Join(t.TempDir(), "store")
	spec := pki.SignerSpec{CommonName: "token-ca", Key: pki.KeyP256, KeyStore: "pkcs11:token=" + tokenLabel}

	bare := must(pki.OpenStore(ctx, storeDir))
	defer bare.Close()
	if _, err := bare.Create(ctx, pki.DefaultKey, spec, t0); !errors.Is(err, pki.ErrPKCS11NotOpen) {
		t.Fatalf("a key_store without the module: %v, want ErrPKCS11NotOpen", err)
	}
	if _, err := os.Stat(filepath.Join(storeDir, "pki-state.json")); !os.IsNotExist(err) {
		t.Fatalf("a refused create wrote the document: %v", err)
	}

	store := must(pki.OpenTokenStore(ctx, storeDir, pki.PKCS11Options{Module: module, PINFile: h.pinFile}))
	defer store.Close()
	must(store.Create(ctx, pki.DefaultKey, spec, t0)).Close()
	if _, err := os.Stat(filepath.Join(storeDir, "signer", "tls.key")); !os.IsNotExist(err) {
		t.Fatalf("a token-held CA key was written to the store: %v", err)
	}
	if n := assertTokenMatches(t, h, storeDir, "created"); n != 1 {
		t.Fatalf("created: %d keys, want 1", n)
	}

	issue := &pki.SignerInput{Leaves: []pki.LeafChange{{Action: pki.LeafAdd, Name: "web", Request: serverRequest}}}
	must(store.Step(ctx, pki.DefaultKey, t0.Add(time.Hour), issue)).Close()
	assertLeafTrusted(t, storeDir, "web", t0.Add(2*time.Hour))
	assertTokenMatches(t, h, storeDir, "leaf issued")

	// A forced rotation: the new key is made in the token, the old one
	// stays while its CA is trusted, and the leaf is issued again.
	oldLeaf := must(os.ReadFile(filepath.Join(storeDir, "certs", "web", "tls.crt")))
	st := must(store.Step(ctx, pki.DefaultKey, day(10), &pki.SignerInput{Forced: &pki.ForcedRotation{Reason: "drill"}}))
	rotated := 0
	for _, e := range st.Events {
		if e.Kind == pki.EventRotated {
			rotated++
		}
	}
	st.Close()
	if rotated != 1 {
		t.Fatalf("a forced rotation: %d rotations", rotated)
	}
	if n := assertTokenMatches(t, h, storeDir, "rotated"); n != 2 {
		t.Fatalf("rotated: %d keys, want the new and the previous", n)
	}
	if bytes.Equal(oldLeaf, must(os.ReadFile(filepath.Join(storeDir, "certs", "web", "tls.crt")))) {
		t.Fatal("the leaf was not issued again by the new CA")
	}
	assertLeafTrusted(t, storeDir, "web", day(10).Add(time.Hour))

	// Without the module: refused, naming what to give, nothing written.
	before := must(os.ReadFile(filepath.Join(storeDir, "pki-state.json")))
	api := &pki.SignerInput{Leaves: []pki.LeafChange{{Action: pki.LeafAdd, Name: "api",
		Request: pki.LeafRequest{Kind: pki.LeafServer, DNSNames: []string{"api.ns.svc"}}}}}
	_, err := bare.Step(ctx, pki.DefaultKey, day(20), api)
	if !errors.Is(err, pki.ErrPKCS11NotOpen) || !strings.Contains(err.Error(), "PKI_PKCS11_MODULE") {
		t.Fatalf("a step that signs without the module: %v", err)
	}
	if !bytes.Equal(before, must(os.ReadFile(filepath.Join(storeDir, "pki-state.json")))) {
		t.Fatal("a refused step changed the document")
	}
	if _, err := os.Stat(filepath.Join(storeDir, "certs", "api")); !os.IsNotExist(err) {
		t.Fatalf("a refused step issued the leaf: %v", err)
	}
	assertTokenMatches(t, h, storeDir, "after the refusal")
}

// ringKeyIDs are the ids of the key objects the key ring at storeDir
// names (keys/key-ring.json's token_keys), sorted.
func ringKeyIDs(t *testing.T, storeDir string) []string {
	t.Helper()
	var state struct {
		TokenKeys struct {
			Active   string            `json:"active"`
			Accepted map[string]string `json:"accepted"`
			Pending  string            `json:"pending"`
			Retiring []string          `json:"retiring"`
		} `json:"token_keys"`
	}
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(storeDir, "keys", "key-ring.json"))), &state); err != nil {
		t.Fatal(err)
	}
	k := state.TokenKeys
	uris := append([]string{k.Active, k.Pending}, k.Retiring...)
	for _, uri := range k.Accepted {
		uris = append(uris, uri)
	}
	var ids []string
	for _, uri := range uris {
		if uri != "" {
			ids = append(ids, uriID(t, uri))
		}
	}
	sort.Strings(ids)
	return ids
}

// A key ring whose signing keys are in a SoftHSM2 token: created with
// KeyStore, a token signed there verifies, a forced rotation makes the
// new key in the token and keeps the old one while it is accepted, and
// once its grace has ended the old key object is destroyed. No private
// key file is written; without the module a create is refused.
func TestTokenHeldKeyRingSignsRotatesAndDestroysItsOldKey(t *testing.T) {
	module := os.Getenv("PKI_TEST_PKCS11_MODULE")
	if module == "" {
		t.Skip("needs SoftHSM2: run through `cargo test -p pki-ffi --test go`, which names its module")
	}
	h := newSoftHSM(t, module)
	storeDir := filepath.Join(t.TempDir(), "store")
	spec := pki.KeyRingSpec{KeyStore: "pkcs11:token=" + tokenLabel}

	bare := must(pki.OpenStore(ctx, storeDir))
	defer bare.Close()
	if _, err := pki.KeyRingOf(bare).Create(ctx, spec, t0); !errors.Is(err, pki.ErrPKCS11NotOpen) {
		t.Fatalf("a key_store without the module: %v, want ErrPKCS11NotOpen", err)
	}

	store := must(pki.OpenTokenStore(ctx, storeDir, pki.PKCS11Options{Module: module, PINFile: h.pinFile}))
	defer store.Close()
	ring := pki.KeyRingOf(store)
	must(ring.Create(ctx, spec, t0)).Close()
	if _, err := os.Stat(filepath.Join(storeDir, "keys", "active.key")); !os.IsNotExist(err) {
		t.Fatalf("a token-held signing key was written to the store: %v", err)
	}
	matches := func(after string) int {
		t.Helper()
		held, named := h.privateKeyIDs(t), ringKeyIDs(t, storeDir)
		if len(named) == 0 || strings.Join(held, ",") != strings.Join(named, ",") {
			t.Fatalf("%s: the token holds %v, the ring names %v", after, held, named)
		}
		return len(held)
	}
	if n := matches("created"); n != 1 {
		t.Fatalf("created: %d keys, want 1", n)
	}
	claims := []byte(`{"sub":"go"}`)
	old := must(ring.Sign(ctx, claims, t0.Add(time.Minute)))
	if err := ring.Verify(ctx, []byte(old), t0.Add(time.Minute)); err != nil {
		t.Fatalf("a token signed in the token: %v", err)
	}

	must(ring.Rotate(ctx, t0.Add(time.Hour), "drill")).Close()
	if n := matches("rotated"); n != 2 {
		t.Fatalf("rotated: %d keys, want the new and the previous", n)
	}
	fresh := must(ring.Sign(ctx, claims, t0.Add(time.Hour)))
	for _, token := range []string{old, fresh} {
		if err := ring.Verify(ctx, []byte(token), t0.Add(2*time.Hour)); err != nil {
			t.Fatalf("during the grace: %v", err)
		}
	}

	// The default grace is 24 hours: after it the old key object goes.
	must(ring.Rotate(ctx, t0.Add(26*time.Hour), "")).Close()
	if n := matches("after the grace"); n != 1 {
		t.Fatalf("after the grace: %d keys, want 1", n)
	}
	if err := ring.Verify(ctx, []byte(old), t0.Add(26*time.Hour)); err == nil {
		t.Fatal("a token of the destroyed key still verifies")
	}
}
