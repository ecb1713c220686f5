package pki_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	pki "pki.invalid/go"
)

// OpenEtcdStore's options cross the C ABI as JSON: a plaintext store with
// its limits opens and holds a signer, and misused options are
// ErrInvalidArgument or ErrStore with a message saying which. (The TLS and
// user paths run against a mutual-TLS etcd in pki-ffi/tests/etcd_tls.rs.)
func TestOpenEtcdStoreTakesItsOptions(t *testing.T) {
	base := os.Getenv("PKI_TEST_ETCD_URL")
	if base == "" {
		t.Skip("needs an etcd server: run through `cargo test -p pki-ffi --test go`, which starts one")
	}
	store, err := pki.OpenEtcdStore(ctx, base+"/go-options", pki.EtcdOptions{
		ConnectTimeout: 3 * time.Second,
		RequestTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer store.Close()
	signer := must(pki.NewSigner("go-options", pki.KeyP256, nil, t0))
	defer signer.Close()
	must(store.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0))

	tlsURL := strings.Replace(base, "etcd://", "etcds://", 1) + "/go-options"
	for _, c := range []struct {
		url     string
		opts    pki.EtcdOptions
		want    error
		message string
	}{
		{tlsURL, pki.EtcdOptions{CAFile: "/nonexistent/ca.crt"}, pki.ErrInvalidArgument, "cannot read"},
		{tlsURL, pki.EtcdOptions{User: "pki"}, pki.ErrInvalidArgument, "password"},
		{tlsURL, pki.EtcdOptions{}, pki.ErrStore, "needs the CA bundle"},
		{base + "/go-options", pki.EtcdOptions{CAPEM: []byte("x")}, pki.ErrStore, "use etcds://"},
	} {
		_, err := pki.OpenEtcdStore(ctx, c.url, c.opts)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.message) {
			t.Errorf("%s %+v: %v, want %v with %q", c.url, c.opts, err, c.want, c.message)
		}
	}
}
