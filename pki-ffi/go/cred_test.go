package pki_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	pki "example.invalid/pki/pki-ffi/go"
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

func TestCredentialRotationMintsOnceKeepsOldUntilGraceAndNeverLeaks(t *testing.T) {
	store, err := pki.NewMemoryStore()
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var perr *pki.Error
	if err := store.CreateCredential("db", time.Hour, time.Hour); !errors.As(err, &perr) || perr.Code != pki.CodeInvalidCredentialPolicy {
		t.Fatalf("grace = expiry must be refused, got %v", err)
	}
	if err := store.CreateCredential("Bad Name", time.Hour, time.Minute); !errors.As(err, &perr) || perr.Code != pki.CodeInvalidCredentialName {
		t.Fatalf("bad name must be refused, got %v", err)
	}
	if err := store.CreateCredential("db", time.Hour, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := store.CurrentCredential("db"); !errors.Is(err, pki.ErrNotFound) {
		t.Fatalf("no credential before the first mint, got %v", err)
	}
	sys := &outside{live: map[string]bool{}, mints: map[[2]uint64]int{}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	crashed := false
	// A controller loop over four hours, stepping once a minute; it
	// "crashes" once right after a mint, before reporting it.
	var captured []byte
	for now.Before(t0.Add(4 * time.Hour)) {
		a, err := store.NextCredentialAction("db", now)
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
			if err := store.ReportMinted("db", a.Rotation, a.Attempt, c, now); err != nil {
				t.Fatal(err)
			}
		case pki.CredRevoke:
			cur, err := store.CurrentCredential("db")
			if err != nil {
				t.Fatal(err)
			}
			if string(cur) == string(a.Credential) {
				t.Fatal("asked to revoke the current credential")
			}
			delete(sys.live, string(a.Credential))
			if err := store.ReportRevoked("db", a.Rotation, now); err != nil {
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
	cur, err := store.CurrentCredential("db")
	if err != nil {
		t.Fatal(err)
	}
	if len(sys.live) != 1 || !sys.live[string(cur)] {
		t.Fatalf("exactly the current credential is live: %v, current %s", sys.live, cur)
	}
	status, err := store.CredentialStatusJSON("db", now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), `"state":"idle"`) || strings.Contains(string(status), string(cur)) {
		t.Fatalf("status: %s", status)
	}
	if err := store.ReportRevoked("db", 4, now); !errors.As(err, &perr) || perr.Code != pki.CodeUnexpectedCredentialReport {
		t.Fatalf("revoking the current credential must be refused, got %v", err)
	}
}

func TestCredentialMintFailureIsRetriedWithBackoff(t *testing.T) {
	store, err := pki.NewMemoryStore()
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.CreateCredential("db", time.Hour, time.Minute); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, err := store.NextCredentialAction("db", t0)
	if err != nil || a.Kind != pki.CredMint {
		t.Fatalf("%v %v", a, err)
	}
	if err := store.ReportMintFailed("db", a.Rotation, a.Attempt, "quota exceeded", t0); err != nil {
		t.Fatal(err)
	}
	w, err := store.NextCredentialAction("db", t0)
	if err != nil || w.Kind != pki.CredWait || !w.WaitUntil.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("%+v %v", w, err)
	}
	status, _ := store.CredentialStatusJSON("db", t0)
	if !strings.Contains(string(status), "quota exceeded") {
		t.Fatalf("status: %s", status)
	}
	b, err := store.NextCredentialAction("db", w.WaitUntil)
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
	if err := store.CreateCredential("db", time.Hour, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	sys := &outside{live: map[string]bool{}, mints: map[[2]uint64]int{}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, err := store.NextCredentialAction("db", now)
	if err != nil || a.Kind != pki.CredMint {
		t.Fatalf("want a mint, got %+v %v", a, err)
	}
	// The mint made a credential, then failed (a lost reply).
	stray := sys.mint(a.Rotation, a.Attempt)
	if err := store.ReportMintFailedCaptured("db", a.Rotation, a.Attempt, "lost reply", stray, now); err != nil {
		t.Fatal(err)
	}
	status, err := store.CredentialStatusJSON("db", now)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(status), string(stray)) || !strings.Contains(string(status), `"state":"revoking-stray"`) {
		t.Fatalf("status: %s", status)
	}
	// No mint before the stray is revoked, even past the mint's backoff.
	for _, at := range []time.Time{now, now.Add(time.Minute)} {
		a, err = store.NextCredentialAction("db", at)
		if err != nil {
			t.Fatal(err)
		}
		if a.Kind != pki.CredRevokeStray || string(a.Credential) != string(stray) || a.Rotation != 1 || a.Attempt != 1 {
			t.Fatalf("want the stray revoked first, got %+v", a)
		}
	}
	delete(sys.live, string(a.Credential))
	if err := store.ReportStrayRevoked("db", a.Rotation, a.Attempt, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	a, err = store.NextCredentialAction("db", now.Add(time.Minute))
	if err != nil || a.Kind != pki.CredMint || a.Attempt != 2 {
		t.Fatalf("want attempt 2, got %+v %v", a, err)
	}
	good := sys.mint(a.Rotation, a.Attempt)
	if err := store.ReportMinted("db", a.Rotation, a.Attempt, good, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if len(sys.live) != 1 || !sys.live[string(good)] {
		t.Fatalf("only the current credential is live: %v", sys.live)
	}
	var perr *pki.Error
	if err := store.ReportStrayRevokeFailed("db", 9, 1, "x", now); !errors.As(err, &perr) || perr.Code != pki.CodeUnexpectedCredentialReport {
		t.Fatalf("a stray never recorded is refused, got %v", err)
	}
}

func TestCredentialReplicasWithOwnersMintEachAttemptOnceAndSayWhenToWake(t *testing.T) {
	store, err := pki.NewMemoryStore()
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.CreateCredential("db", time.Hour, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	sys := &outside{live: map[string]bool{}, mints: map[[2]uint64]int{}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	replicas := []string{"replica-a", "replica-b"}
	now := t0
	elsewhere := 0
	// Both replicas step every minute for five hours; whoever is told to
	// mint first asks the other before it reports.
	for now.Before(t0.Add(5 * time.Hour)) {
		for i, r := range replicas {
			a, err := store.NextCredentialActionAs("db", r, now)
			if err != nil {
				t.Fatal(err)
			}
			switch a.Kind {
			case pki.CredMint:
				other, err := store.NextCredentialActionAs("db", replicas[1-i], now)
				if err != nil || other.Kind != pki.CredWait || other.WaitReason != pki.CredWaitMintElsewhere {
					t.Fatalf("%s must wait for %s's mint: %+v %v", replicas[1-i], r, other, err)
				}
				elsewhere++
				c := sys.mint(a.Rotation, a.Attempt)
				if err := store.ReportMinted("db", a.Rotation, a.Attempt, c, now); err != nil {
					t.Fatal(err)
				}
			case pki.CredRevoke:
				delete(sys.live, string(a.Credential))
				if err := store.ReportRevoked("db", a.Rotation, now); err != nil {
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
	if _, err := store.NextCredentialActionAs("db", "no spaces", now); !errors.As(err, &perr) || perr.Code != pki.CodeInvalidArgument {
		t.Fatalf("a bad owner is refused, got %v", err)
	}
	if pki.CredAdvanceMaxSteps != 8 {
		t.Fatalf("CredAdvanceMaxSteps %d", pki.CredAdvanceMaxSteps)
	}
}
