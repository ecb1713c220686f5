package pki_test

import (
	"errors"
	"os"
	"testing"

	pki "pki.invalid/go"
)

// The Kubernetes API server store, when the test runs under `cargo test
// -p pki-ffi`, which starts a kube-apiserver, names a store on it in
// PKI_TEST_KUBE_URL and its admin's kubeconfig in KUBECONFIG: replicas
// with their own connections race at the rotation point and rotate once,
// and a malformed kube:// URL is ErrInvalidArgument.
func TestReplicasRacingStepOverKubeRotateOnce(t *testing.T) {
	url := os.Getenv("PKI_TEST_KUBE_URL")
	if url == "" {
		t.Skip("needs a kube-apiserver: run through `cargo test -p pki-ffi --test go`, which starts one")
	}
	replicasRacingRotateOnce(t, url, 3)
	if _, err := pki.OpenURLStore(ctx, "kube://Not_A_Namespace/x"); !errors.Is(err, pki.ErrInvalidArgument) {
		t.Fatalf("a malformed kube:// URL: %v", err)
	}
}
