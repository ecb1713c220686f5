package pki_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	pki "pki.invalid/go"
)

func setCode(t *testing.T, err error, want pki.Code) {
	t.Helper()
	var e *pki.Error
	if !errors.As(err, &e) || e.Code != want {
		t.Fatalf("want code %v, got %v", want, err)
	}
}

// snapshotDir reads every file and link under dir (the lock file aside:
// a reader may take it), keyed by relative path.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		switch {
		case d.Name() == ".lock":
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			out[rel] = "link:" + target
		case d.IsDir():
			out[rel] = "dir"
		default:
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[rel] = string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A GEP-18 rotation of a cluster CA through the C ABI: every step gated
// on the targets' acknowledgements, a failed target retried, bad input
// refused with its code and the store left exactly as it was.
func TestCASetRotatesInGatedSteps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	store, err := pki.OpenDirStore(ctx, dir)
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
	refused := func(err error, want pki.Code, before map[string]string) {
		t.Helper()
		setCode(t, err, want)
		if after := snapshotDir(t, dir); !reflect.DeepEqual(before, after) {
			t.Fatalf("a refused call (%v) changed the store", err)
		}
	}
	fingerprint := func(target string) string {
		t.Helper()
		plan, err := set.Plan(ctx)
		must(err)
		return plan[target].Fingerprint
	}
	must(errOf(set.Create(ctx, []string{"cluster:serving+client"}, 730*24*time.Hour, now)))
	must(errOf(set.Issue(ctx, "api", "cluster", true, false, []string{"api.example"}, "control-plane", now)))
	must(errOf(set.Issue(ctx, "kubelet", "cluster", false, true, nil, "node-1", now)))
	must(errOf(set.Target(ctx, "node-1", []string{"cluster"}, nil, now)))
	must(errOf(set.Target(ctx, "control-plane", nil, []string{"cluster"}, now)))
	snap := snapshotDir(t, dir)
	refused(errOf(set.Issue(ctx, "x", "nope", true, false, []string{"x.example"}, "t", now)), pki.CodeSetUnknownCA, snap)
	refused(errOf(set.Target(ctx, "node-1", []string{"nope"}, nil, now)), pki.CodeSetUnknownCA, snap)
	refused(errOf(set.Advance(ctx, "", now)), pki.CodeSetWrongStep, snap)
	refused(errOf(set.Abort(ctx, now)), pki.CodeSetWrongStep, snap)
	// What node-1 loaded while idle: a real fingerprint of the wrong step
	// once the rotation runs.
	idleFingerprint := fingerprint("node-1")

	now = now.Add(60 * 24 * time.Hour)
	started, err := set.Start(ctx, "yearly", false, now)
	must(err)
	// The step says what happened (a new CA and its separate client CA)
	// and where the set is now.
	if status, err := pki.SetStatusOf(started); err != nil || !started.Changed || len(started.Events) != 2 ||
		started.Events[0].Kind != "new-ca" || status.Step != "trust-both" || started.Attempts != 1 {
		t.Fatalf("start: %+v %+v %v", started, status, err)
	}
	snap = snapshotDir(t, dir)
	refused(errOf(set.Start(ctx, "again", false, now)), pki.CodeSetWrongStep, snap)
	refused(errOf(set.Advance(ctx, "", now)), pki.CodeSetStepBlocked, snap)
	refused(errOf(set.Ack(ctx, "ghost", fingerprint("node-1"), now)), pki.CodeSetUnknownTarget, snap)
	refused(errOf(set.Ack(ctx, "node-1", idleFingerprint, now)), pki.CodeSetStaleFingerprint, snap)
	refused(errOf(set.Fail(ctx, "ghost", "x", now)), pki.CodeSetUnknownTarget, snap)
	refused(errOf(set.Retry(ctx, "node-1", now)), pki.CodeSetInvalid, snap)

	ackAll := func() {
		t.Helper()
		for _, target := range []string{"control-plane", "node-1"} {
			must(errOf(set.Ack(ctx, target, fingerprint(target), now)))
		}
	}
	ackAll()
	st, err := set.Status(ctx, now)
	must(err)
	if st.Step != "trust-both" || st.Half == nil || *st.Half != "clients" {
		t.Fatalf("status: %+v", st)
	}
	plan, err := set.Plan(ctx)
	must(err)
	if !plan["node-1"].Files["certs/kubelet/tls.key"].Secret {
		t.Fatal("the kubelet key is not marked secret")
	}

	// A failed target blocks the step; retried, it must ack again.
	must(errOf(set.Fail(ctx, "node-1", "puppet apply failed", now)))
	snap = snapshotDir(t, dir)
	refused(errOf(set.Ack(ctx, "node-1", fingerprint("node-1"), now)), pki.CodeSetTargetFailed, snap)
	refused(errOf(set.Advance(ctx, "", now)), pki.CodeSetStepBlocked, snap)
	must(errOf(set.Retry(ctx, "node-1", now)))
	st, err = set.Status(ctx, now)
	must(err)
	if st.Targets["node-1"].Progress != "pending" {
		t.Fatalf("after retry: %+v", st.Targets["node-1"])
	}
	snap = snapshotDir(t, dir)
	refused(errOf(set.Advance(ctx, "", now)), pki.CodeSetStepBlocked, snap)
	must(errOf(set.Ack(ctx, "node-1", fingerprint("node-1"), now)))

	for _, want := range []string{"update-certs", "trust-new"} {
		// Naming the step it leaves: again once left is nothing to do.
		from := map[string]string{"update-certs": "trust-both", "trust-new": "update-certs"}[want]
		must(errOf(set.AdvanceFrom(ctx, from, "", now)))
		if again, err := set.AdvanceFrom(ctx, from, "", now); err != nil || again.Changed {
			t.Fatalf("advance from %s again: %+v %v", from, again, err)
		}
		st, err := set.Status(ctx, now)
		must(err)
		if st.Step != want {
			t.Fatalf("step %s, want %s", st.Step, want)
		}
		if want == "trust-new" {
			break
		}
		ackAll()
	}
	// Rolling forward to completed destroys the old CA keys: refused while
	// a target has not loaded trust-new, unless overridden.
	must(errOf(set.Ack(ctx, "control-plane", fingerprint("control-plane"), now)))
	snap = snapshotDir(t, dir)
	refused(errOf(set.Abort(ctx, now)), pki.CodeSetAbortStrands, snap)
	must(errOf(set.AbortOverride(ctx, "node-1 is decommissioned", now)))
	st, err = set.Status(ctx, now)
	must(err)
	if st.Step != "completed" {
		t.Fatalf("step %s after abort in trust-new", st.Step)
	}
	snap = snapshotDir(t, dir)
	refused(errOf(set.Abort(ctx, now)), pki.CodeSetWrongStep, snap)
}

// A CA set kept in the embedder's Secret-shaped storage is written under
// the set's own Secret mapping (every path with '/' as '.'), not the
// signer's, and reads back through every step: the kind of document is
// the one the caller works on, never guessed from the data. A signer and
// a set in one backend keep their own mappings side by side.
func TestCASetThroughSecretStoreKeepsItsOwnMapping(t *testing.T) {
	backend := newFakeSecrets()
	store := must(pki.NewSecretStore(backend))
	defer store.Close()
	set := pki.SetOf(store)
	now := t0
	ok := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ok(errOf(set.Create(ctx, []string{"cluster:serving+client"}, 730*24*time.Hour, now)))
	ok(errOf(set.Issue(ctx, "api", "cluster", true, false, []string{"api.example"}, "control-plane", now)))
	ok(errOf(set.Target(ctx, "control-plane", nil, []string{"cluster"}, now)))
	signer := must(pki.NewSigner("service-ca", pki.KeyP256, nil, now))
	defer signer.Close()
	if _, err := store.Create(ctx, "signer", pki.SignerSpec{Signer: signer}, t0); err != nil {
		t.Fatal(err)
	}

	backend.mu.Lock()
	setData := backend.items["set"].data
	signerData := backend.items["signer"].data
	backend.mu.Unlock()
	for _, key := range []string{"set.state.json", "set.cas.cluster.ca.crt", "targets.control-plane.certs.api.tls.crt"} {
		if _, found := setData[key]; !found {
			t.Errorf("the set's Secret has no %q: keys %v", key, keysOf(setData))
		}
	}
	if _, found := setData["pki-state.json"]; found {
		t.Errorf("the set was written under the signer's mapping: keys %v", keysOf(setData))
	}
	if _, found := signerData["pki-state.json"]; !found {
		t.Errorf("the signer's Secret has no pki-state.json: keys %v", keysOf(signerData))
	}

	now = now.Add(24 * time.Hour)
	ok(errOf(set.Start(ctx, "yearly", false, now)))
	plan, err := set.Plan(ctx)
	ok(err)
	ok(errOf(set.Ack(ctx, "control-plane", plan["control-plane"].Fingerprint, now)))
	st, err := set.Status(ctx, now)
	ok(err)
	if st.Step != "trust-both" || st.Targets["control-plane"].Progress != "loaded" {
		t.Fatalf("status through the Secret store: %+v", st)
	}
	if _, _, err := store.Load(ctx, "signer"); err != nil {
		t.Fatalf("the signer beside the set: %v", err)
	}
}

// errOf drops a step, keeping its error.
func errOf(_ *pki.Step, err error) error { return err }

func keysOf(data map[string][]byte) []string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
