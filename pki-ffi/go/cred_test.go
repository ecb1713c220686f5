package pki_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	pki "pki.invalid/go"
)

// An outside system whose credentials a controller mints and revokes:
// live holds every credential that works.
type outside struct {
	live  map[string]bool
	mints map[[2]uint64]int
	n     int
}

func (o *outside) mint(rotation uint64, attempt uint32) []byte {
	o.mints[[2]uint64{rotation, uint64(attempt)}]++
	o.n++
	c := fmt.Sprintf("user-%d:secret-%d", o.n, o.n)
	o.live[c] = true
	return []byte(c)
}

// seen is an advance's action and when its step says to advance again.
type seen struct {
	pki.CredAction
	WaitUntil time.Time
	NextWake  time.Time
}

// advanced reads the action of an advance's step.
func advanced(st *pki.Step, err error) (seen, error) {
	if err != nil {
		return seen{}, err
	}
	if st.Action == nil {
		return seen{}, errors.New("an advance without an action")
	}
	return seen{*st.Action, st.NextWake, st.NextWake}, nil
}

// reported drops a report's step, keeping its error.
func reported(st *pki.Step, err error) error {
	if err == nil && st.Action != nil {
		return errors.New("a report with an action")
	}
	return err
}

func TestCredentialRotationMintsOnceKeepsOldUntilGraceAndNeverLeaks(t *testing.T) {
	store, err := pki.NewMemoryStore()
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	db := pki.CredentialOf(store, "db")
	var perr *pki.Error
	if err := reported(db.Create(ctx, time.Hour, time.Hour, t0)); !errors.As(err, &perr) || perr.Code != pki.CodeInvalidCredentialPolicy {
		t.Fatalf("grace = expiry must be refused, got %v", err)
	}
	if err := reported(pki.CredentialOf(store, "Bad Name").Create(ctx, time.Hour, time.Minute, t0)); !errors.As(err, &perr) || perr.Code != pki.CodeInvalidCredentialName {
		t.Fatalf("bad name must be refused, got %v", err)
	}
	if err := reported(db.Create(ctx, time.Hour, 10*time.Minute, t0)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Current(ctx); !errors.Is(err, pki.ErrNotFound) {
		t.Fatalf("no credential before the first mint, got %v", err)
	}
	sys := &outside{live: map[string]bool{}, mints: map[[2]uint64]int{}}
	now := t0
	crashed := false
	// A controller loop over four hours, stepping once a minute; it
	// "crashes" once right after a mint, before reporting it.
	var captured []byte
	for now.Before(t0.Add(4 * time.Hour)) {
		a, err := advanced(db.Advance(ctx, now))
		if err != nil {
			t.Fatal(err)
		}
		switch a.Kind {
		case pki.CredMint:
			c := captured
			if c == nil {
				c = sys.mint(a.Rotation, a.Attempt)
			}
			if a.Rotation == 2 && !crashed {
				crashed, captured = true, c
				continue // the report is lost; the next round adopts c
			}
			captured = nil
			if err := reported(db.ReportMinted(ctx, a.Rotation, a.Attempt, c, now)); err != nil {
				t.Fatal(err)
			}
		case pki.CredRevoke:
			cur, err := db.Current(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if string(cur) == string(a.Credential) {
				t.Fatal("asked to revoke the current credential")
			}
			delete(sys.live, string(a.Credential))
			if err := reported(db.ReportRevoked(ctx, a.Rotation, now)); err != nil {
				t.Fatal(err)
			}
		case pki.CredWait:
			if len(sys.live) > 2 {
				t.Fatalf("more than old and new live: %v", sys.live)
			}
			now = now.Add(time.Minute)
		}
	}
	for k, n := range sys.mints {
		if n != 1 {
			t.Fatalf("minted %d times for rotation/attempt %v", n, k)
		}
	}
	cur, err := db.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sys.live) != 1 || !sys.live[string(cur)] {
		t.Fatalf("exactly the current credential is live: %v, current %s", sys.live, cur)
	}
	status, err := db.Status(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), `"state":"idle"`) || strings.Contains(string(status), string(cur)) {
		t.Fatalf("status: %s", status)
	}
	if err := reported(db.ReportRevoked(ctx, 4, now)); !errors.As(err, &perr) || perr.Code != pki.CodeUnexpectedCredentialReport {
		t.Fatalf("revoking the current credential must be refused, got %v", err)
	}
}

func TestCredentialMintFailureIsRetriedWithBackoff(t *testing.T) {
	store, err := pki.NewMemoryStore()
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	db := pki.CredentialOf(store, "db")
	if err := reported(db.Create(ctx, time.Hour, time.Minute, t0)); err != nil {
		t.Fatal(err)
	}
	a, err := advanced(db.Advance(ctx, t0))
	if err != nil || a.Kind != pki.CredMint {
		t.Fatalf("%v %v", a, err)
	}
	if err := reported(db.ReportMintFailed(ctx, a.Rotation, a.Attempt, "quota exceeded", nil, t0)); err != nil {
		t.Fatal(err)
	}
	w, err := advanced(db.Advance(ctx, t0))
	if err != nil || w.Kind != pki.CredWait || !w.WaitUntil.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("%+v %v", w, err)
	}
	status, _ := db.Status(ctx, t0)
	if !strings.Contains(string(status), "quota exceeded") {
		t.Fatalf("status: %s", status)
	}
	b, err := advanced(db.Advance(ctx, w.WaitUntil))
	if err != nil || b.Kind != pki.CredMint || b.Rotation != a.Rotation || b.Attempt != 2 {
		t.Fatalf("%+v %v", b, err)
	}
}

func TestCredentialFailedMintThatMintedIsRevokedBeforeTheNextAttempt(t *testing.T) {
	store, err := pki.NewMemoryStore()
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	db := pki.CredentialOf(store, "db")
	if err := reported(db.Create(ctx, time.Hour, 10*time.Minute, now)); err != nil {
		t.Fatal(err)
	}
	sys := &outside{live: map[string]bool{}, mints: map[[2]uint64]int{}}
	a, err := advanced(db.Advance(ctx, now))
	if err != nil || a.Kind != pki.CredMint {
		t.Fatalf("want a mint, got %+v %v", a, err)
	}
	// The mint made a credential, then failed (a lost reply).
	stray := sys.mint(a.Rotation, a.Attempt)
	if err := reported(db.ReportMintFailed(ctx, a.Rotation, a.Attempt, "lost reply", stray, now)); err != nil {
		t.Fatal(err)
	}
	status, err := db.Status(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(status), string(stray)) || !strings.Contains(string(status), `"state":"revoking-stray"`) {
		t.Fatalf("status: %s", status)
	}
	// No mint before the stray is revoked, even past the mint's backoff.
	for _, at := range []time.Time{now, now.Add(time.Minute)} {
		a, err = advanced(db.Advance(ctx, at))
		if err != nil {
			t.Fatal(err)
		}
		if a.Kind != pki.CredRevokeStray || string(a.Credential) != string(stray) || a.Rotation != 1 || a.Attempt != 1 {
			t.Fatalf("want the stray revoked first, got %+v", a)
		}
	}
	delete(sys.live, string(a.Credential))
	if err := reported(db.ReportStrayRevoked(ctx, a.Rotation, a.Attempt, now.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	a, err = advanced(db.Advance(ctx, now.Add(time.Minute)))
	if err != nil || a.Kind != pki.CredMint || a.Attempt != 2 {
		t.Fatalf("want attempt 2, got %+v %v", a, err)
	}
	good := sys.mint(a.Rotation, a.Attempt)
	if err := reported(db.ReportMinted(ctx, a.Rotation, a.Attempt, good, now.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	if len(sys.live) != 1 || !sys.live[string(good)] {
		t.Fatalf("only the current credential is live: %v", sys.live)
	}
	var perr *pki.Error
	if err := reported(db.ReportStrayRevokeFailed(ctx, 9, 1, "x", now)); !errors.As(err, &perr) || perr.Code != pki.CodeUnexpectedCredentialReport {
		t.Fatalf("a stray never recorded is refused, got %v", err)
	}
}

func TestCredentialReplicasWithOwnersMintEachAttemptOnceAndSayWhenToWake(t *testing.T) {
	store, err := pki.NewMemoryStore()
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	db := pki.CredentialOf(store, "db")
	if err := reported(db.Create(ctx, time.Hour, 10*time.Minute, t0)); err != nil {
		t.Fatal(err)
	}
	sys := &outside{live: map[string]bool{}, mints: map[[2]uint64]int{}}
	replicas := []string{"replica-a", "replica-b"}
	now := t0
	elsewhere := 0
	// Both replicas step every minute for five hours; whoever is told to
	// mint first asks the other before it reports.
	for now.Before(t0.Add(5 * time.Hour)) {
		for i, r := range replicas {
			a, err := advanced(db.AdvanceAs(ctx, r, now))
			if err != nil {
				t.Fatal(err)
			}
			switch a.Kind {
			case pki.CredMint:
				other, err := advanced(db.AdvanceAs(ctx, replicas[1-i], now))
				if err != nil || other.Kind != pki.CredWait || other.WaitReason != pki.CredWaitMintElsewhere {
					t.Fatalf("%s must wait for %s's mint: %+v %v", replicas[1-i], r, other, err)
				}
				elsewhere++
				c := sys.mint(a.Rotation, a.Attempt)
				if err := reported(db.ReportMinted(ctx, a.Rotation, a.Attempt, c, now)); err != nil {
					t.Fatal(err)
				}
			case pki.CredRevoke:
				delete(sys.live, string(a.Credential))
				if err := reported(db.ReportRevoked(ctx, a.Rotation, now)); err != nil {
					t.Fatal(err)
				}
			case pki.CredWait:
				if !a.NextWake.Equal(a.WaitUntil) || !a.NextWake.After(now) || a.WaitReason == 0 {
					t.Fatalf("a wait says until when and why: %+v", a)
				}
			}
			if len(sys.live) > 2 {
				t.Fatalf("more than old and new live: %v", sys.live)
			}
		}
		now = now.Add(time.Minute)
	}
	for k, n := range sys.mints {
		if n != 1 {
			t.Fatalf("minted %d times for rotation/attempt %v", n, k)
		}
	}
	if elsewhere < 5 {
		t.Fatalf("five rotations, each minted by one replica: %d", elsewhere)
	}
	var perr *pki.Error
	if _, err := advanced(db.AdvanceAs(ctx, "no spaces", now)); !errors.As(err, &perr) || perr.Code != pki.CodeInvalidArgument {
		t.Fatalf("a bad owner is refused, got %v", err)
	}
	if pki.CredAdvanceMaxSteps != 8 {
		t.Fatalf("CredAdvanceMaxSteps %d", pki.CredAdvanceMaxSteps)
	}
}
