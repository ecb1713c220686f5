// Command controller is a small controller loop that keeps two
// Secret-shaped maps rotated: the signer's (its CA) and one serving
// certificate's. It runs on a simulated clock, so years pass in
// milliseconds; a real controller reads the Secrets from the API server,
// uses time.Now(), and sleeps until the next check.
//
//	go run ./examples/controller -years 3
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	pki "example.invalid/pki/pki-ffi/go"
)

func main() {
	years := flag.Int("years", 3, "how many simulated years to run")
	force := flag.String("force", "", "force one rotation with this reason, one year in")
	flag.Parse()
	if _, err := run(os.Stdout, *years, *force); err != nil {
		log.Fatal(err)
	}
}

// cluster stands for the API server: Secret data by name.
type cluster map[string]map[string][]byte

// run drives the loop and returns the number of CA rotations.
func run(out io.Writer, years int, force string) (int, error) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(years, 0, 0)
	secrets := cluster{}
	request := pki.LeafRequest{Kind: pki.LeafServer, DNSNames: []string{"web.ns.svc"}, Lifetime: 90 * 24 * time.Hour}
	rotations := 0

	for now := start; now.Before(end); {
		forced := (*pki.ForcedRotation)(nil)
		if force != "" && !now.Before(start.AddDate(1, 0, 0)) {
			forced = &pki.ForcedRotation{Reason: force}
		}
		next, n, err := step(out, secrets, request, now, forced)
		if err != nil {
			return rotations, fmt.Errorf("at %s: %w", now.Format(time.DateOnly), err)
		}
		rotations += n
		now = next
	}
	fmt.Fprintf(out, "%d CA rotations in %d years; serving certificate never untrusted\n", rotations, years)
	return rotations, nil
}

// step is one reconcile: load, decide, write back what changed. It returns
// when to wake up next.
func step(out io.Writer, secrets cluster, request pki.LeafRequest, now time.Time, forced *pki.ForcedRotation) (time.Time, int, error) {
	var signer *pki.Signer
	var err error
	if data, ok := secrets["signer"]; ok {
		signer, err = pki.LoadSecret(data)
	} else {
		signer, err = pki.NewSigner("service-ca", pki.KeyP256, nil, now)
		if err == nil {
			secrets["signer"], err = signer.Secret()
		}
	}
	if err != nil {
		return now, 0, err
	}
	defer signer.Close()

	r, err := signer.Reconcile(now, &pki.ReconcileOptions{Forced: forced})
	if err != nil {
		return now, 0, err
	}
	defer r.Signer.Close()
	rotations := 0
	for _, e := range r.Events {
		fmt.Fprintf(out, "%s  event: %s\n", now.Format(time.DateOnly), e.Message)
		if e.Kind == pki.EventRotated {
			rotations++
		}
	}
	if r.Signer.Generation() != signer.Generation() {
		// A real controller updates the Secret with its resourceVersion.
		if secrets["signer"], err = r.Signer.Secret(); err != nil {
			return now, 0, err
		}
	}

	serving := secrets["web"]
	leaf, err := r.Signer.ReconcileLeaf(request, now, serving["tls.crt"], serving["tls.key"])
	if err != nil {
		return now, 0, err
	}
	if leaf.Reissued() {
		fmt.Fprintf(out, "%s  serving certificate: %s\n", now.Format(time.DateOnly), leaf.ReasonMessage)
		secrets["web"] = map[string][]byte{
			"tls.crt": leaf.ChainPEM,
			"tls.key": leaf.KeyPEM,
			"ca.crt":  secrets["signer"][pki.SecretBundle],
		}
	}

	// Every client trusts the bundle it was last given; check that the
	// serving chain verifies against the current bundle.
	bundle, err := pki.ParseBundle(secrets["signer"][pki.SecretBundle])
	if err != nil {
		return now, 0, err
	}
	defer bundle.Close()
	if _, err := bundle.VerifyChain(leaf.ChainPEM, now, pki.ServerAuth, "web.ns.svc"); err != nil {
		return now, 0, fmt.Errorf("serving chain does not verify: %w", err)
	}

	wake := r.NextCheck
	if leaf.RefreshAt.Before(wake) {
		wake = leaf.RefreshAt
	}
	if !wake.After(now) {
		wake = now.Add(time.Hour)
	}
	return wake, rotations, nil
}
