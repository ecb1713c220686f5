package pki

// #include <stdlib.h>
// #include "pki.h"
import "C"

import (
	"context"
	"encoding/json"
	"runtime"
	"time"
)

// Key ring class sentinel, for errors.Is.
var (
	// ErrTokenRejected matches every reason a token or its input is refused
	// (codes 654-662).
	ErrTokenRejected error = &classError{654, 662, "pki: token rejected"}
)

// KeyRingPolicy says which keys a key ring makes and how long it keeps them.
type KeyRingPolicy struct {
	// Key is the type of new active keys (KeyP256: ES256 tokens; RSA: RS256).
	Key KeyType `json:"key_type,omitempty"`
	// Lifetime: rotate the active key once it is this old.
	Lifetime time.Duration `json:"-"`
	// Grace: how long a rotated-out key stays accepted, from the rotation.
	Grace time.Duration `json:"-"`
	// MaxTokenLifetime: the longest token lifetime (0: not stated). The
	// grace must cover it, and Sign refuses claims that outlive it.
	MaxTokenLifetime time.Duration `json:"-"`
}

// DefaultKeyRingPolicy is the library's default: P-256 keys, 90 days of
// lifetime, 24 hours of grace, no stated token lifetime. A nil
// *KeyRingPolicy means it.
func DefaultKeyRingPolicy() KeyRingPolicy {
	return KeyRingPolicy{Key: KeyP256, Lifetime: 90 * 24 * time.Hour, Grace: 24 * time.Hour}
}

// toJSON is the policy as the C API reads it: every duration given.
func (p *KeyRingPolicy) toJSON() *reqKeyRingPolicy {
	if p == nil {
		return nil
	}
	lifetime, grace, maxToken := seconds(p.Lifetime), seconds(p.Grace), seconds(p.MaxTokenLifetime)
	return &reqKeyRingPolicy{
		KeyType:                 string(p.Key),
		LifetimeSeconds:         &lifetime,
		GraceSeconds:            &grace,
		MaxTokenLifetimeSeconds: &maxToken,
	}
}

// KeyRingKey is the store key the pki CLI keeps its key ring under (a
// directory store publishes keys/active.key, keys/public.pem and
// keys/jwks.json).
const KeyRingKey = "keys"

// KeyRing is a key ring of service-account token signing keys kept in a
// Store under a key: one active signing key and the public keys still
// accepted. Every change is one driver step with compare-and-swap, so
// controller replicas sharing the store rotate once; a refused call leaves
// the store as it was. A program that keeps the ring itself uses a memory
// store, State, and KeyRingSpec.State.
type KeyRing struct {
	store *Store
	key   string
}

// KeyRingOf returns the key ring kept in store under KeyRingKey (the CLI's).
func KeyRingOf(store *Store) *KeyRing { return KeyRingAt(store, KeyRingKey) }

// KeyRingAt returns the key ring kept in store under key.
func KeyRingAt(store *Store, key string) *KeyRing { return &KeyRing{store: store, key: key} }

// KeyRingSpec says which ring KeyRing.Create makes: a new one with Policy
// (nil: DefaultKeyRingPolicy), one over an imported key set (Import: PEM
// keys, k3s's service.key, the first private key signs and every other
// key stays accepted until retired; or a JWK Set of public keys), or a
// saved ring (State, alone). A new ring's keys are made in the PKCS#11
// token KeyStore names (a URI naming the token, "pkcs11:token=LABEL"),
// reached through the module the store was opened with (OpenTokenStore):
// they never leave it, and the document keeps their URIs.
type KeyRingSpec struct {
	Policy   *KeyRingPolicy
	Import   []byte
	State    []byte
	KeyStore string
}

func keyringCreate(store *C.pki_store, key *C.char, keyLen C.size_t, input *C.char, inputLen C.size_t, now C.int64_t, out **C.pki_buffer) C.pki_result {
	return C.pki_document_create(store, C.PKI_KIND_KEYRING, key, keyLen, input, inputLen, now, out)
}

func keyringStep(store *C.pki_store, key *C.char, keyLen C.size_t, input *C.char, inputLen C.size_t, now C.int64_t, out **C.pki_buffer) C.pki_result {
	return C.pki_document_step(store, C.PKI_KIND_KEYRING, key, keyLen, input, inputLen, now, out)
}

func keyringRead(store *C.pki_store, key *C.char, keyLen C.size_t, output C.uint32_t, now C.int64_t, out **C.pki_buffer) C.pki_result {
	return C.pki_document_read(store, C.PKI_KIND_KEYRING, key, keyLen, output, now, out)
}

// Create makes the ring spec says at now. A ring already there is an
// error matching ErrAlreadyInitialized, and nothing is written.
func (k *KeyRing) Create(ctx context.Context, spec KeyRingSpec, now time.Time) (*Step, error) {
	req := reqKeyRingCreate{Policy: spec.Policy.toJSON(), KeyStore: spec.KeyStore}
	if spec.State != nil {
		req.State = json.RawMessage(spec.State)
	}
	if spec.Import != nil {
		req.Import = string(spec.Import)
	}
	return k.store.step(ctx, keyringCreate, k.key, req, now)
}

// Rotate runs one controller step at now: rotates the active key when it
// reached its lifetime or when forced names a reason not acted on before
// ("" forces nothing), retires the keys whose kids are in retire (imported
// keys, or keys past their grace), and drops accepted keys whose grace has
// ended.
func (k *KeyRing) Rotate(ctx context.Context, now time.Time, forced string, retire ...string) (*Step, error) {
	return k.store.step(ctx, keyringStep, k.key, reqKeyRingStep{Forced: forced, Retire: append([]string{}, retire...)}, now)
}

func (k *KeyRing) read(ctx context.Context, output C.uint32_t, now time.Time) ([]byte, error) {
	return k.store.read(ctx, keyringRead, k.key, output, now)
}

// State is the whole ring as one JSON document, the active private key
// inline: keep it as secret as the key.
func (k *KeyRing) State(ctx context.Context) ([]byte, error) {
	return k.read(ctx, C.PKI_KEYRING_STATE, time.Unix(0, 0))
}

// PublicPEM is every published public key as PUBLIC KEY PEM, active first
// (what kube-apiserver's --service-account-key-file takes).
func (k *KeyRing) PublicPEM(ctx context.Context) ([]byte, error) {
	return k.read(ctx, C.PKI_KEYRING_PUBLIC_PEM, time.Unix(0, 0))
}

// JWKS is the JWK Set {"keys": [...]} with RFC 7638 thumbprints as kid
// (what an OIDC discovery endpoint serves).
func (k *KeyRing) JWKS(ctx context.Context) ([]byte, error) {
	return k.read(ctx, C.PKI_KEYRING_JWKS, time.Unix(0, 0))
}

// ActiveKeyPEM is the active private key, PKCS#8 PEM (secret).
func (k *KeyRing) ActiveKeyPEM(ctx context.Context) ([]byte, error) {
	return k.read(ctx, C.PKI_KEYRING_ACTIVE_KEY, time.Unix(0, 0))
}

// ActiveKid is the active key's id (its RFC 7638 thumbprint).
func (k *KeyRing) ActiveKid(ctx context.Context) (string, error) {
	b, err := k.read(ctx, C.PKI_KEYRING_ACTIVE_KID, time.Unix(0, 0))
	return string(b), err
}

// Status is the ring's status at now, as `pki keys status --json` prints
// it (no private key).
func (k *KeyRing) Status(ctx context.Context, now time.Time) ([]byte, error) {
	return k.read(ctx, C.PKI_KEYRING_STATUS, now)
}

// Sign signs claims (a JSON object, used byte for byte as the payload)
// with the active key at now: a compact JWS, header {"alg","kid","typ":"JWT"}.
func (k *KeyRing) Sign(ctx context.Context, claims []byte, now time.Time) (string, error) {
	var buf *C.pki_buffer
	kp, kn := strArg(k.key)
	p, n := bytesArg(claims)
	err := k.store.with(ctx, func(h *C.pki_store) C.pki_result {
		return C.pki_keyring_sign(h, kp, kn, p, n, unixTime(now), &buf)
	})
	runtime.KeepAlive(k)
	runtime.KeepAlive(claims)
	if err != nil {
		return "", err
	}
	return string(takeBuffer(buf)), nil
}

// Verify checks a compact JWS at now against the keys accepted then (by
// kid), and its exp and nbf when present. nil means accepted; otherwise
// errors.Is(err, ErrTokenRejected) and a specific sentinel say why.
func (k *KeyRing) Verify(ctx context.Context, token []byte, now time.Time) error {
	kp, kn := strArg(k.key)
	p, n := bytesArg(token)
	err := k.store.with(ctx, func(h *C.pki_store) C.pki_result {
		return C.pki_keyring_verify(h, kp, kn, p, n, unixTime(now))
	})
	runtime.KeepAlive(k)
	runtime.KeepAlive(token)
	return err
}
