package pki_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	pki "pki.invalid/go"
)

type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	N   string `json:"n"`
	E   string `json:"e"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
}

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("base64url %q: %v", s, err)
	}
	return b
}

// thumbprint is RFC 7638 computed here, independently of the library.
func thumbprint(k jwk) string {
	var canon string
	if k.Kty == "EC" {
		canon = fmt.Sprintf(`{"crv":%q,"kty":"EC","x":%q,"y":%q}`, k.Crv, k.X, k.Y)
	} else {
		canon = fmt.Sprintf(`{"e":%q,"kty":"RSA","n":%q}`, k.E, k.N)
	}
	sum := sha256.Sum256([]byte(canon))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// verifyWithGo checks a compact JWS against a JWK Set with Go's crypto
// only: it finds the key by kid and verifies ES256 or RS256.
func verifyWithGo(t *testing.T, jwks []byte, token string) error {
	t.Helper()
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(jwks, &set); err != nil {
		t.Fatalf("jwks: %v", err)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts", len(parts))
	}
	var header struct{ Alg, Kid, Typ string }
	if err := json.Unmarshal(b64(t, parts[0]), &header); err != nil {
		t.Fatalf("header: %v", err)
	}
	if header.Typ != "JWT" {
		t.Fatalf("typ %q", header.Typ)
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	sig := b64(t, parts[2])
	for _, k := range set.Keys {
		if k.Kid != header.Kid {
			continue
		}
		if got := thumbprint(k); got != k.Kid {
			t.Fatalf("kid %s is not the RFC 7638 thumbprint %s", k.Kid, got)
		}
		switch {
		case k.Kty == "EC" && header.Alg == "ES256":
			x, y := b64(t, k.X), b64(t, k.Y)
			if len(x) != 32 || len(y) != 32 || len(sig) != 64 {
				t.Fatalf("coordinate or signature length: %d %d %d", len(x), len(y), len(sig))
			}
			pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
			if !ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
				return errors.New("ES256 signature does not verify")
			}
			return nil
		case k.Kty == "RSA" && header.Alg == "RS256":
			pub := &rsa.PublicKey{N: new(big.Int).SetBytes(b64(t, k.N)), E: int(new(big.Int).SetBytes(b64(t, k.E)).Int64())}
			return rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig)
		default:
			t.Fatalf("alg %s with a %s key", header.Alg, k.Kty)
		}
	}
	return fmt.Errorf("no key %s in the JWK Set", header.Kid)
}

// memoryRing is a key ring in a memory store of its own.
func memoryRing(t *testing.T) *pki.KeyRing {
	t.Helper()
	store, err := pki.NewMemoryStore()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	return pki.KeyRingOf(store)
}

func TestKeyRingTokensVerifyWithGoCryptoDuringTheGraceOnly(t *testing.T) {
	for _, key := range []pki.KeyType{pki.KeyP256, pki.KeyRSA2048} {
		policy := pki.DefaultKeyRingPolicy()
		policy.Key = key
		policy.Grace = time.Hour
		policy.MaxTokenLifetime = 30 * time.Minute
		ring := memoryRing(t)
		created, err := ring.Create(ctx, pki.KeyRingSpec{Policy: &policy}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if !created.Changed || !created.NextWake.Equal(t0.Add(90*24*time.Hour)) {
			t.Fatalf("created: changed %v, next wake %v", created.Changed, created.NextWake)
		}
		claims := fmt.Sprintf(`{"sub":"system:serviceaccount:default:web","exp":%d}`, t0.Add(20*time.Minute).Unix())
		token, err := ring.Sign(ctx, []byte(claims), t0)
		if err != nil {
			t.Fatal(err)
		}
		rotatedAt := t0.Add(10 * time.Minute)
		step, err := ring.Rotate(ctx, rotatedAt, "drill")
		if err != nil {
			t.Fatal(err)
		}
		if !step.Changed || !step.NextWake.Equal(rotatedAt.Add(time.Hour)) {
			t.Fatalf("changed %v, next check %v", step.Changed, step.NextWake)
		}
		if len(step.Events) != 1 || step.Events[0].Kind != "rotated" {
			t.Fatalf("the rotation's events: %+v", step.Events)
		}
		jwks, err := ring.JWKS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := verifyWithGo(t, jwks, token); err != nil {
			t.Fatalf("Go crypto rejects the old token during the grace: %v", err)
		}
		if err := ring.Verify(ctx, []byte(token), rotatedAt.Add(5*time.Minute)); err != nil {
			t.Fatal(err)
		}
		// The same reason again changes nothing.
		again, err := ring.Rotate(ctx, rotatedAt.Add(time.Minute), "drill")
		if err != nil {
			t.Fatal(err)
		}
		if again.Changed {
			t.Fatal("the same forced reason rotated again")
		}
		// After the grace the library refuses the old key, and the step
		// removes it from the JWK Set, so Go finds no key either.
		end := rotatedAt.Add(time.Hour)
		if err := ring.Verify(ctx, []byte(token), end); !errors.Is(err, pki.ErrTokenRejected) {
			t.Fatalf("after the grace: %v", err)
		}
		if _, err := ring.Rotate(ctx, end, ""); err != nil {
			t.Fatal(err)
		}
		jwks, _ = ring.JWKS(ctx)
		if err := verifyWithGo(t, jwks, token); err == nil {
			t.Fatal("Go crypto still finds the removed key")
		}
		// A new token verifies with Go, and the state round-trips.
		fresh, err := ring.Sign(ctx, []byte(fmt.Sprintf(`{"exp":%d}`, end.Add(time.Minute).Unix())), end)
		if err != nil {
			t.Fatal(err)
		}
		if err := verifyWithGo(t, jwks, fresh); err != nil {
			t.Fatal(err)
		}
		state, err := ring.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		loaded := memoryRing(t)
		if _, err := loaded.Create(ctx, pki.KeyRingSpec{State: state}, end); err != nil {
			t.Fatal(err)
		}
		a, _ := loaded.ActiveKid(ctx)
		b, _ := ring.ActiveKid(ctx)
		if a != b || a == "" {
			t.Fatalf("kid %q after load, %q before", a, b)
		}
	}
}

func TestKeyRingRefusalsHaveTheirCodes(t *testing.T) {
	policy := pki.DefaultKeyRingPolicy()
	policy.Grace = 10 * time.Minute
	policy.MaxTokenLifetime = time.Hour
	if _, err := memoryRing(t).Create(ctx, pki.KeyRingSpec{Policy: &policy}, t0); !errors.Is(err, pki.ErrKeyRingPolicy) {
		t.Fatalf("grace shorter than tokens: %v", err)
	}
	if _, err := memoryRing(t).Create(ctx, pki.KeyRingSpec{Import: []byte("not keys")}, t0); !errors.Is(err, pki.ErrKeyRingImport) {
		t.Fatalf("import: %v", err)
	}
	ring := memoryRing(t)
	if _, err := ring.Create(ctx, pki.KeyRingSpec{}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Sign(ctx, []byte("{"), t0); !errors.Is(err, pki.ErrTokenRejected) {
		t.Fatalf("bad claims: %v", err)
	}
	if err := ring.Verify(ctx, []byte("eyJhbGciOiJFUzI1NiIsImtpZCI6Im5vYm9keSJ9.e30.AAAA"), t0); !errors.Is(err, pki.ErrTokenUnknownKid) {
		t.Fatalf("unknown kid: %v", err)
	}
	pem, err := ring.PublicPEM(ctx)
	if err != nil || !strings.HasPrefix(string(pem), "-----BEGIN PUBLIC KEY-----") {
		t.Fatalf("public PEM: %v %q", err, pem)
	}
	// Importing the ring's own key and public key set keeps its kid.
	keyPEM, _ := ring.ActiveKeyPEM(ctx)
	imported := memoryRing(t)
	if _, err := imported.Create(ctx, pki.KeyRingSpec{Import: keyPEM}, t0); err != nil {
		t.Fatal(err)
	}
	a, _ := ring.ActiveKid(ctx)
	b, _ := imported.ActiveKid(ctx)
	if a != b {
		t.Fatalf("imported kid %s, want %s", b, a)
	}
	var closed *pki.KeyRing = pki.KeyRingOf(nil)
	if _, err := closed.JWKS(ctx); !errors.Is(err, pki.ErrClosed) {
		t.Fatalf("a ring of no store: %v", err)
	}
}

func TestStoredKeyRingRotatesWithGraceOnEveryKindOfStore(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	policy := pki.DefaultKeyRingPolicy()
	policy.Grace = time.Hour
	for kind, newStore := range stores(t) {
		t.Run(kind, func(t *testing.T) {
			store := newStore()
			defer store.Close()
			ring := pki.KeyRingOf(store)
			var perr *pki.Error
			if _, err := ring.JWKS(ctx); !errors.As(err, &perr) || perr.Code != pki.CodeNotInitialized {
				t.Fatalf("no ring yet, got %v", err)
			}
			if _, err := ring.Create(ctx, pki.KeyRingSpec{Policy: &policy}, t0); err != nil {
				t.Fatal(err)
			}
			if _, err := ring.Create(ctx, pki.KeyRingSpec{Policy: &policy}, t0); !errors.As(err, &perr) || perr.Code != pki.CodeAlreadyInitialized {
				t.Fatalf("a second create must be refused, got %v", err)
			}
			first, err := ring.ActiveKid(ctx)
			if err != nil {
				t.Fatal(err)
			}
			token, err := ring.Sign(ctx, []byte(`{"sub":"a"}`), t0)
			if err != nil {
				t.Fatal(err)
			}
			r, err := ring.Rotate(ctx, t0.Add(time.Minute), "compromise drill")
			if err != nil || !r.Changed || !r.NextWake.Equal(t0.Add(time.Minute+time.Hour)) {
				t.Fatalf("forced rotation: %+v %v", r, err)
			}
			if r, err := ring.Rotate(ctx, t0.Add(2*time.Minute), "compromise drill"); err != nil || r.Changed {
				t.Fatalf("the same reason again changes nothing: %+v %v", r, err)
			}
			if kid, _ := ring.ActiveKid(ctx); kid == first {
				t.Fatal("the active key did not change")
			}
			jwks, err := ring.JWKS(ctx)
			if err != nil || !strings.Contains(string(jwks), first) {
				t.Fatalf("the old key is published during the grace: %s %v", jwks, err)
			}
			if err := ring.Verify(ctx, []byte(token), t0.Add(30*time.Minute)); err != nil {
				t.Fatalf("a token of the old key verifies during the grace: %v", err)
			}
			if _, err := ring.Rotate(ctx, t0.Add(time.Hour), "", first); !errors.As(err, &perr) || perr.Code != pki.CodeKeyRingRetire {
				t.Fatalf("retiring a key in its grace is refused, got %v", err)
			}
			if r, err := ring.Rotate(ctx, t0.Add(time.Minute+time.Hour), ""); err != nil || !r.Changed {
				t.Fatalf("the grace ended: %+v %v", r, err)
			} else if len(r.Events) != 1 || r.Events[0].Kind != "expired" || !strings.Contains(string(r.Status), `"active"`) {
				t.Fatalf("the step says what it did: %+v %s", r.Events, r.Status)
			}
			pem, err := ring.PublicPEM(ctx)
			if err != nil || strings.Count(string(pem), "BEGIN PUBLIC KEY") != 1 {
				t.Fatalf("only the active key is left: %s %v", pem, err)
			}
			if err := ring.Verify(ctx, []byte(token), t0.Add(2*time.Hour)); !errors.Is(err, pki.ErrTokenRejected) {
				t.Fatalf("the old key's token is rejected after the grace, got %v", err)
			}
			state, err := ring.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			copied := memoryRing(t)
			if _, err := copied.Create(ctx, pki.KeyRingSpec{State: state}, t0.Add(2*time.Hour)); err != nil {
				t.Fatal(err)
			}
			if kid, _ := copied.ActiveKid(ctx); kid == first {
				t.Fatal("the copy is the stored ring")
			}
			status, err := ring.Status(ctx, t0.Add(2*time.Hour))
			if err != nil || !strings.Contains(string(status), `"forced_reasons":["compromise drill"]`) {
				t.Fatalf("status: %s %v", status, err)
			}
		})
	}
}
