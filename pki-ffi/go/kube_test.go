package pki_test

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	pki "pki.invalid/go"
)

// The Kubernetes API server store, when the test runs under `cargo test
// -p pki-ffi`, which starts a kube-apiserver, names a store on it in
// PKI_TEST_KUBE_URL and its admin's kubeconfig in KUBECONFIG: a signer is
// created there once, replicas with their own connections race at the
// rotation point and rotate once, and the document read back is the
// rotated one.
func TestReplicasRacingStepOverKubeRotateOnce(t *testing.T) {
	url := os.Getenv("PKI_TEST_KUBE_URL")
	if url == "" {
		t.Skip("needs a kube-apiserver: run through `cargo test -p pki-ffi --test go`, which starts one")
	}
	store := must(pki.OpenURLStore(ctx, url))
	defer store.Close()
	signer := must(pki.NewSigner("service-ca", pki.KeyP256, nil, t0))
	defer signer.Close()
	must(store.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0))
	if _, err := store.Create(ctx, pki.DefaultKey, pki.SignerSpec{Signer: signer}, t0); !errors.Is(err, pki.ErrAlreadyInitialized) {
		t.Fatalf("second create: %v", err)
	}

	const replicas = 3
	var wg sync.WaitGroup
	steps := make([]*pki.Step, replicas)
	errs := make([]error, replicas)
	for i := 0; i < replicas; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			own, err := pki.OpenURLStore(ctx, url)
			if err != nil {
				errs[i] = err
				return
			}
			defer own.Close()
			steps[i], errs[i] = own.Step(ctx, pki.DefaultKey, day(396), nil)
		}(i)
	}
	wg.Wait()
	rotated := 0
	for i, st := range steps {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		defer st.Close()
		rotated += rotations(st)
		if want := day(790).Add(time.Second); !st.NextWake.Equal(want) {
			t.Errorf("replica %d: next check %s, want %s", i, st.NextWake, want)
		}
	}
	if rotated != 1 {
		t.Fatalf("%d rotations, want exactly one", rotated)
	}
	loaded, _ := must2(store.Load(ctx, pki.DefaultKey))
	defer loaded.Close()
	if _, err := pki.OpenURLStore(ctx, "kube://Not_A_Namespace/x"); !errors.Is(err, pki.ErrInvalidArgument) {
		t.Fatalf("a malformed kube:// URL: %v", err)
	}
}
