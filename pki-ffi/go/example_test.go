package pki_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	pki "pki.invalid/go"
)

// A signer issues a serving certificate, rotates when less than the minimum
// trust is left, and the certificate is re-issued by the new CA with the
// bridge that keeps old clients trusting it.
func Example() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	signer, err := pki.NewSigner("service-ca", pki.KeyP256, nil, now)
	if err != nil {
		log.Fatal(err)
	}
	defer signer.Close()

	req := pki.LeafRequest{Kind: pki.LeafServer, DNSNames: []string{"web.ns.svc"}}
	leaf, err := signer.ReconcileLeaf(req, now, nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(leaf.ReasonMessage)

	// 396 days later less than the 395-day minimum trust is left.
	later := now.AddDate(0, 0, 396)
	r, err := signer.Reconcile(later, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Signer.Close()
	for _, e := range r.Events {
		fmt.Println(e.Kind == pki.EventRotated, "previous CA trusted until", e.PreviousTrustedUntil.Format(time.DateOnly))
	}

	leaf, err = r.Signer.ReconcileLeaf(req, later, leaf.ChainPEM, leaf.KeyPEM)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(leaf.Reason == pki.LeafWrongIssuer, "certificates served:", bytes.Count(leaf.ChainPEM, []byte("BEGIN CERTIFICATE")))
	// Output:
	// first certificate for this name
	// true previous CA trusted until 2028-03-02
	// true certificates served: 2
}

// The state maps to a Kubernetes Secret's Data as it is, and back.
func ExampleSigner_Secret() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	signer, err := pki.NewSigner("service-ca", pki.KeyP256, nil, now)
	if err != nil {
		log.Fatal(err)
	}
	defer signer.Close()
	r, err := signer.Reconcile(now.AddDate(0, 0, 1), &pki.SignerInput{
		Forced: &pki.ForcedRotation{Reason: "rotate-after-incident-42"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Signer.Close()

	data, err := r.Signer.Secret() // copy to Secret.Data
	if err != nil {
		log.Fatal(err)
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Println(keys)
	fmt.Println(string(data[pki.SecretForcedReason]))

	back, err := pki.LoadSecret(data) // read from Secret.Data
	if err != nil {
		log.Fatal(err)
	}
	defer back.Close()
	before, _ := r.Signer.State()
	after, _ := back.State()
	fmt.Println(bytes.Equal(before, after))
	// Output:
	// [ca-bundle.crt forced-rotation-reason intermediate-ca.crt pki-state.json tls.crt tls.key]
	// rotate-after-incident-42
	// true
}

// A client verifies a served chain against its bundle at a pinned time.
func ExampleBundle_VerifyChain() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	signer, err := pki.NewSigner("service-ca", pki.KeyP256, nil, now)
	if err != nil {
		log.Fatal(err)
	}
	defer signer.Close()
	leaf, err := signer.ReconcileLeaf(pki.LeafRequest{Kind: pki.LeafServer, DNSNames: []string{"web.ns.svc"}}, now, nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	bundle, err := signer.Bundle()
	if err != nil {
		log.Fatal(err)
	}
	defer bundle.Close()

	_, err = bundle.VerifyChain(leaf.ChainPEM, now.Add(time.Hour), pki.ServerAuth, "web.ns.svc")
	fmt.Println(err)
	_, err = bundle.VerifyChain(leaf.ChainPEM, now.AddDate(2, 0, 0), pki.ServerAuth, "web.ns.svc")
	fmt.Println(errors.Is(err, pki.ErrVerifyExpired))
	// Output:
	// <nil>
	// true
}

// A credential minted by an outside system: advance, do what the step's
// action says, report it; each create, advance and report is a Step.
func ExampleCredential_Advance() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store, err := pki.NewMemoryStore()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	db := pki.CredentialOf(store, "db")
	if _, err := db.Create(ctx, time.Hour, 10*time.Minute, now); err != nil {
		log.Fatal(err)
	}
	st, err := db.Advance(ctx, now)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Action.Kind == pki.CredMint, st.Action.Rotation, st.Action.Attempt)
	st, err = db.ReportMinted(ctx, st.Action.Rotation, st.Action.Attempt, []byte("user-1:pw"), now)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Changed, st.Events[0].Kind)
	st, err = db.Advance(ctx, now)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Action.Kind == pki.CredWait, st.NextWake.Sub(now))
	// Output:
	// true 1 1
	// true minted
	// true 1h0m0s
}

// A Go controller runs the service-CA controller loop until SIGTERM (what
// Kubernetes sends a Pod): RunController returns nil once the context is
// cancelled, after giving up the leader Lease. (Not run: it needs a
// cluster and a store made by `pki init kube://pki-system/service-ca`.)
func ExampleRunController() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := pki.RunController(ctx, "kube://pki-system/service-ca", pki.ControllerOptions{
		Identity: os.Getenv("POD_NAME"),
		Notice:   func(message string) { log.Print("pki: ", message) },
	})
	if err != nil {
		log.Fatal(err) // pki.ErrNotInitialized: no signer in the store yet
	}
}
