package pki_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	pki "pki.invalid/go"
)

// kubeAPI is the test's own client of the API server (the module has no
// dependencies: plain REST with the admin's bearer token), to do what a
// user does around the controller: annotate objects, read what it wrote.
type kubeAPI struct {
	server, token string
	client        *http.Client
}

// newKubeAPI reaches the API server `cargo test -p pki-ffi --test go`
// started, or skips the test.
func newKubeAPI(t *testing.T) *kubeAPI {
	t.Helper()
	server, caFile, token := os.Getenv("PKI_TEST_KUBE_SERVER"), os.Getenv("PKI_TEST_KUBE_CA"), os.Getenv("PKI_TEST_KUBE_TOKEN")
	if server == "" || caFile == "" || token == "" || os.Getenv("PKI_TEST_KUBE_URL") == "" {
		t.Skip("needs a kube-apiserver: run through `cargo test -p pki-ffi --test go`, which starts one")
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatalf("no certificate in %s", caFile)
	}
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}},
	}
	return &kubeAPI{server: server, token: token, client: client}
}

// do sends body (nil: none) as JSON and decodes the answer into out (nil:
// dropped); the HTTP status.
func (k *kubeAPI) do(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	var reader *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		reader = bytes.NewReader(b)
	} else {
		reader = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, k.server+path, reader)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+k.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

// create POSTs an object and fails the test unless it was created.
func (k *kubeAPI) create(t *testing.T, path string, object any) {
	t.Helper()
	if status := k.do(t, http.MethodPost, path, object, nil); status != http.StatusCreated {
		t.Fatalf("POST %s: status %d", path, status)
	}
}

type objectMeta struct {
	Name        string            `json:"name"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type secretObject struct {
	Type string            `json:"type"`
	Data map[string][]byte `json:"data"`
}

type configMapObject struct {
	Data map[string]string `json:"data"`
}

type leaseObject struct {
	Spec struct {
		HolderIdentity *string `json:"holderIdentity"`
	} `json:"spec"`
}

// kubeNamespace is NAMESPACE of kube://NAMESPACE/NAME.
func kubeNamespace(t *testing.T, url string) string {
	t.Helper()
	ns, _, ok := strings.Cut(strings.TrimPrefix(url, "kube://"), "/")
	if !ok {
		t.Fatalf("%s is not kube://NAMESPACE/NAME", url)
	}
	return ns
}

// notices collects a controller's notices.
type notices struct {
	mu   sync.Mutex
	seen []string
}

func (n *notices) add(m string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen = append(n.seen, m)
}

func (n *notices) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.seen, "\n")
}

// eventually polls ready until it holds, failing the test after a minute
// or when the controller returned meanwhile.
func eventually(t *testing.T, what string, returned <-chan error, heard *notices, ready func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ready() {
		select {
		case err := <-returned:
			t.Fatalf("RunController returned (%v) while waiting for %s; notices:\n%s", err, what, heard)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after a minute; notices:\n%s", what, heard)
		}
	}
}

// certificates parses every CERTIFICATE block of pemText.
func certificates(t *testing.T, pemText []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	for rest := pemText; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return certs
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, cert)
	}
}

// The controller loop through the C ABI, on the real API server: a
// Service and a ConfigMap annotated (under a prefix of the test's own),
// the loop run in a goroutine, the serving Secret and the injected bundle
// awaited, the serving chain verified by Go's crypto/x509 against the
// injected bundle for both of the Service's names; the Lease held under
// the given identity; then the context cancelled: RunController returns
// nil and the Lease is given up.
func TestRunControllerServesAnnotatedServicesUntilCancelled(t *testing.T) {
	api := newKubeAPI(t)
	url := os.Getenv("PKI_TEST_KUBE_URL") + "-controller"
	ns := kubeNamespace(t, url)
	store := must(pki.OpenURLStore(ctx, url))
	defer store.Close()
	must(store.Create(ctx, pki.DefaultKey, pki.SignerSpec{CommonName: "go-service-ca", Key: pki.KeyP256}, time.Now()))

	const prefix = "go.pki.test/"
	api.create(t, "/api/v1/namespaces/"+ns+"/services", map[string]any{
		"metadata": objectMeta{Name: "web", Annotations: map[string]string{prefix + "serving-cert-secret-name": "web-tls"}},
		"spec":     map[string]any{"ports": []map[string]any{{"port": 443, "targetPort": 8443}}},
	})
	api.create(t, "/api/v1/namespaces/"+ns+"/configmaps", map[string]any{
		"metadata": objectMeta{Name: "trust", Annotations: map[string]string{prefix + "inject-cabundle": "true"}},
	})

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	heard := &notices{}
	returned := make(chan error, 1)
	go func() {
		returned <- pki.RunController(runCtx, url, pki.ControllerOptions{
			AnnotationPrefix: prefix,
			LeaseDuration:    3 * time.Second,
			Resync:           30 * time.Second,
			Identity:         "go-test-replica",
			Notice:           heard.add,
		})
	}()

	var secret secretObject
	eventually(t, "serving Secret", returned, heard, func() bool {
		return api.do(t, http.MethodGet, "/api/v1/namespaces/"+ns+"/secrets/web-tls", nil, &secret) == http.StatusOK &&
			len(secret.Data["tls.crt"]) > 0
	})
	var trust configMapObject
	eventually(t, "injected bundle", returned, heard, func() bool {
		return api.do(t, http.MethodGet, "/api/v1/namespaces/"+ns+"/configmaps/trust", nil, &trust) == http.StatusOK &&
			trust.Data["ca-bundle.crt"] != ""
	})
	if secret.Type != "kubernetes.io/tls" {
		t.Errorf("Secret type %q", secret.Type)
	}
	if _, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"]); err != nil {
		t.Errorf("tls.key does not pair with tls.crt: %v", err)
	}
	if trust.Data["service-ca.crt"] != trust.Data["ca-bundle.crt"] {
		t.Errorf("service-ca.crt differs from ca-bundle.crt")
	}
	roots := x509.NewCertPool()
	for _, ca := range certificates(t, []byte(trust.Data["ca-bundle.crt"])) {
		roots.AddCert(ca)
	}
	chain := certificates(t, secret.Data["tls.crt"])
	if len(chain) == 0 {
		t.Fatal("tls.crt holds no certificate")
	}
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	for _, name := range []string{"web." + ns + ".svc", "web." + ns + ".svc.cluster.local"} {
		_, err := chain[0].Verify(x509.VerifyOptions{
			DNSName:       name,
			Roots:         roots,
			Intermediates: intermediates,
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			t.Errorf("the serving chain does not verify for %s against the injected bundle: %v", name, err)
		}
	}
	leasePath := "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases/" + strings.TrimPrefix(url, "kube://"+ns+"/") + ".controller"
	var lease leaseObject
	if status := api.do(t, http.MethodGet, leasePath, nil, &lease); status != http.StatusOK ||
		lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "go-test-replica" {
		t.Errorf("Lease while running: status %d, holder %v", status, lease.Spec.HolderIdentity)
	}

	cancel()
	select {
	case err := <-returned:
		if err != nil {
			t.Fatalf("RunController after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("RunController did not return within 30 s of the cancel; notices:\n%s", heard)
	}
	lease = leaseObject{}
	if status := api.do(t, http.MethodGet, leasePath, nil, &lease); status != http.StatusOK ||
		(lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "") {
		t.Errorf("Lease after the stop: status %d, holder %v (not given up)", status, lease.Spec.HolderIdentity)
	}
	if !strings.Contains(heard.String(), "go-test-replica") {
		t.Errorf("no notice of the Lease taken; notices:\n%s", heard)
	}
}

// RunController's failures are the package's typed errors, before the
// loop starts; a context already done returns nil without connecting.
func TestRunControllerRefusesWhatCannotRunWithTypedErrors(t *testing.T) {
	newKubeAPI(t)
	empty := os.Getenv("PKI_TEST_KUBE_URL") + "-empty"
	for _, c := range []struct {
		url  string
		opts pki.ControllerOptions
		want error
	}{
		{"etcd://127.0.0.1:2379/x", pki.ControllerOptions{}, pki.ErrInvalidArgument},
		{"kube://Not_A_Namespace/x", pki.ControllerOptions{}, pki.ErrInvalidArgument},
		{empty, pki.ControllerOptions{Identity: strings.Repeat("x", 129)}, pki.ErrInvalidArgument},
		{empty, pki.ControllerOptions{AnnotationPrefix: "Not A Prefix"}, pki.ErrInvalidArgument},
		{empty, pki.ControllerOptions{}, pki.ErrNotInitialized},
	} {
		err := pki.RunController(ctx, c.url, c.opts)
		var e *pki.Error
		if !errors.Is(err, c.want) || !errors.As(err, &e) {
			t.Errorf("%s %+v: %v, want %v", c.url, c.opts, err, c.want)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	start := time.Now()
	if err := pki.RunController(done, empty, pki.ControllerOptions{}); err != nil {
		t.Errorf("a context already done: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a context already done took %v", took)
	}
	if err := pki.RunController(done, empty, pki.ControllerOptions{Resync: -time.Second, Identity: "\n"}); !errors.Is(err, pki.ErrInvalidArgument) {
		t.Errorf("bad options with a context already done: %v", err)
	}
}
