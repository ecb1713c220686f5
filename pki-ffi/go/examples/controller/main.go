// Command controller keeps a service CA and one serving certificate rotated
// the way a Kubernetes controller would: the signer lives in a Secret, each
// reconcile is one pki driver step (read the Secret, decide, update it with
// the resourceVersion read), and the controller sleeps until the step's
// NextWake. The API server here is a fake that keeps resourceVersions and
// answers 409 Conflict like the real one, and the clock is simulated, so
// years pass in milliseconds; a real controller passes a client-go backed
// SecretBackend, uses time.Now() and sleeps for time.Until(NextWake).
//
//	go run ./examples/controller -years 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	"sync"
	"time"

	pki "pki.invalid/go"
)

func main() {
	years := flag.Int("years", 3, "how many simulated years to run")
	force := flag.String("force", "", "force one rotation with this reason, one year in")
	flag.Parse()
	// A real controller cancels ctx on shutdown (signal.NotifyContext):
	// every store call and the SecretBackend's API calls then stop.
	if _, err := run(context.Background(), os.Stdout, *years, *force); err != nil {
		log.Fatal(err)
	}
}

// secretName is the Secret holding the signer: its tls.crt and tls.key are
// the CA, ca-bundle.crt what clients trust, certs.web.tls.crt and
// certs.web.tls.key the serving certificate.
const secretName = "service-ca"

// cluster stands for the API server: Secret data by name, each with a
// resourceVersion, updated only by compare-and-swap.
type cluster struct {
	mu      sync.Mutex
	secrets map[string]secret
	version int
}

type secret struct {
	data            map[string][]byte
	resourceVersion string
}

func (c *cluster) String() string { return "secrets in namespace openshift-service-ca" }

// Get is a GET of the Secret.
func (c *cluster) Get(ctx context.Context, name string) (map[string][]byte, string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.secrets[name]
	return s.data, s.resourceVersion, ok, nil
}

// Put is a POST (expected "") or a PUT with the resourceVersion read; a
// stale resourceVersion is a 409 Conflict, reported as pki.ErrConflict so
// that the step reads again and decides again.
func (c *cluster) Put(ctx context.Context, name, expected string, data map[string][]byte) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	current, exists := c.secrets[name]
	switch {
	case expected == "" && exists:
		return "", fmt.Errorf("secrets %q already exists: %w", name, pki.ErrConflict)
	case expected != "" && (!exists || current.resourceVersion != expected):
		return "", fmt.Errorf("operation cannot be fulfilled on secrets %q: the object has been modified: %w", name, pki.ErrConflict)
	}
	c.version++
	rv := strconv.Itoa(c.version)
	c.secrets[name] = secret{data: data, resourceVersion: rv}
	return rv, nil
}

// run drives the loop and returns the number of CA rotations.
func run(ctx context.Context, out io.Writer, years int, force string) (int, error) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(years, 0, 0)
	api := &cluster{secrets: map[string]secret{}}
	store, err := pki.NewSecretStore(api)
	if err != nil {
		return 0, err
	}
	defer store.Close()
	if err := install(ctx, store, start); err != nil {
		return 0, err
	}

	rotations, steps := 0, 0
	var trusted []byte // the bundle clients loaded last
	for now := start; now.Before(end); {
		opts := &pki.SignerInput{}
		if force != "" && !now.Before(start.AddDate(1, 0, 0)) {
			opts.Forced = &pki.ForcedRotation{Reason: force} // runs once per reason
		}
		step, err := store.Step(ctx, secretName, now, opts)
		if err != nil {
			// pki.ErrConflict here means other replicas kept winning: requeue soon.
			return rotations, fmt.Errorf("at %s: %w", now.Format(time.DateOnly), err)
		}
		steps++
		for _, e := range step.Events {
			fmt.Fprintf(out, "%s  %s\n", now.Format(time.DateOnly), e.Message)
			if e.Kind == pki.EventRotated {
				rotations++
			}
		}
		step.Close()

		// What consumers see: servers serve the chain in the Secret; a
		// client verifies it with the bundle it loaded before this step and
		// with the one the step published.
		data, _, _, _ := api.Get(ctx, secretName)
		for _, bundle := range [][]byte{trusted, data[pki.SecretBundle]} {
			if bundle == nil {
				continue
			}
			if err := verify(bundle, data["certs.web.tls.crt"], now); err != nil {
				return rotations, fmt.Errorf("at %s: serving chain not trusted: %w", now.Format(time.DateOnly), err)
			}
		}
		trusted = data[pki.SecretBundle]

		// Sleep until the engine says something is due. It is always later
		// than now; a controller that was told otherwise would spin.
		if !step.NextWake.After(now) {
			return rotations, fmt.Errorf("at %s: next check %s is not in the future", now.Format(time.RFC3339), step.NextWake.Format(time.RFC3339))
		}
		now = step.NextWake
	}
	fmt.Fprintf(out, "%d CA rotations in %d years, %d steps; serving certificate never untrusted\n", rotations, years, steps)
	return rotations, nil
}

// install creates the signer Secret on first start (another replica may
// have created it first), and asks it to keep the serving certificate: the
// same request again is nothing to do, so every replica may ask.
func install(ctx context.Context, store *pki.Store, now time.Time) error {
	created, err := store.Create(ctx, secretName, pki.SignerSpec{CommonName: "service-ca", Key: pki.KeyP256}, now)
	if err != nil && !errors.Is(err, pki.ErrAlreadyInitialized) {
		return err
	}
	created.Close()
	serving := pki.LeafChange{Action: pki.LeafAdd, Name: "web", Request: pki.LeafRequest{
		Kind:     pki.LeafServer,
		DNSNames: []string{"web.ns.svc"},
		Lifetime: 90 * 24 * time.Hour,
	}}
	step, err := store.Step(ctx, secretName, now, &pki.SignerInput{Leaves: []pki.LeafChange{serving}})
	if err != nil {
		return err
	}
	step.Close()
	return nil
}

func verify(bundlePEM, chainPEM []byte, at time.Time) error {
	bundle, err := pki.ParseBundle(bundlePEM)
	if err != nil {
		return err
	}
	defer bundle.Close()
	_, err = bundle.VerifyChain(chainPEM, at, pki.ServerAuth, "web.ns.svc")
	return err
}
