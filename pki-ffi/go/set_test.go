package pki_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	pki "example.invalid/pki/pki-ffi/go"
)

func setCode(t *testing.T, err error, want pki.Code) {
	t.Helper()
	var e *pki.Error
	if !errors.As(err, &e) || e.Code != want {
		t.Fatalf("want code %v, got %v", want, err)
	}
}

// A GEP-18 rotation of a cluster CA through the C ABI: every step gated
// on the targets' acknowledgements, bad input refused with its code.
func TestCASetRotatesInGatedSteps(t *testing.T) {
	store, err := pki.OpenDirStore(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	set := pki.SetOf(store)
	now := t0
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(set.Create([]string{"cluster:serving+client"}, 730*24*time.Hour, now))
	must(set.Issue("api", "cluster", true, false, []string{"api.example"}, "control-plane", now))
	must(set.Issue("kubelet", "cluster", false, true, nil, "node-1", now))
	must(set.Target("node-1", []string{"cluster"}, nil, now))
	must(set.Target("control-plane", nil, []string{"cluster"}, now))
	setCode(t, set.Issue("x", "nope", true, false, []string{"x"}, "t", now), pki.CodeSetUnknownCA)
	setCode(t, set.Advance("", now), pki.CodeSetWrongStep)

	now = now.Add(60 * 24 * time.Hour)
	must(set.Start("yearly", false, now))
	setCode(t, set.Start("again", false, now), pki.CodeSetWrongStep)
	setCode(t, set.Advance("", now), pki.CodeSetStepBlocked)
	setCode(t, set.Ack("ghost", "sha256:00", now), pki.CodeSetUnknownTarget)
	setCode(t, set.Ack("node-1", "sha256:00", now), pki.CodeSetStaleFingerprint)

	ackAll := func() {
		for _, target := range []string{"control-plane", "node-1"} {
			plan, err := set.Plan()
			must(err)
			must(set.Ack(target, plan[target].Fingerprint, now))
		}
	}
	ackAll()
	st, err := set.Status(now)
	must(err)
	if st.Step != "trust-both" || st.Half == nil || *st.Half != "clients" {
		t.Fatalf("status: %+v", st)
	}
	plan, err := set.Plan()
	must(err)
	if !plan["node-1"].Files["certs/kubelet/tls.key"].Secret {
		t.Fatal("the kubelet key is not marked secret")
	}
	for _, want := range []string{"update-certs", "trust-new", "completed"} {
		must(set.Advance("", now))
		st, err := set.Status(now)
		must(err)
		if st.Step != want {
			t.Fatalf("step %s, want %s", st.Step, want)
		}
		ackAll()
	}
	setCode(t, set.Abort(now), pki.CodeSetWrongStep)
}
