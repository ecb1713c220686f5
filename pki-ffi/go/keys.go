package pki

// #include <stdlib.h>
// #include "pki.h"
import "C"

import (
	"runtime"
	"strings"
	"time"
)

// Key ring result codes (650-679).
const (
	CodeKeyRingPolicy             Code = C.PKI_RESULT_KEYRING_POLICY
	CodeKeyRingImport             Code = C.PKI_RESULT_KEYRING_IMPORT
	CodeKeyRingRetire             Code = C.PKI_RESULT_KEYRING_RETIRE
	CodeKeyRingClockBehind        Code = C.PKI_RESULT_KEYRING_CLOCK_BEHIND
	CodeTokenMalformed            Code = C.PKI_RESULT_TOKEN_MALFORMED
	CodeTokenUnsupportedAlgorithm Code = C.PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM
	CodeTokenUnknownKid           Code = C.PKI_RESULT_TOKEN_UNKNOWN_KID
	CodeTokenKeyNoLongerAccepted  Code = C.PKI_RESULT_TOKEN_KEY_NO_LONGER_ACCEPTED
	CodeTokenBadSignature         Code = C.PKI_RESULT_TOKEN_BAD_SIGNATURE
	CodeTokenExpired              Code = C.PKI_RESULT_TOKEN_EXPIRED
	CodeTokenNotYetValid          Code = C.PKI_RESULT_TOKEN_NOT_YET_VALID
	CodeTokenLifetime             Code = C.PKI_RESULT_TOKEN_LIFETIME
	CodeJWKUnsupportedKey         Code = C.PKI_RESULT_JWK_UNSUPPORTED_KEY
)

// Key ring sentinel errors, for errors.Is.
var (
	ErrKeyRingPolicy            error = &Error{Code: CodeKeyRingPolicy}
	ErrKeyRingImport            error = &Error{Code: CodeKeyRingImport}
	ErrTokenUnknownKid          error = &Error{Code: CodeTokenUnknownKid}
	ErrTokenKeyNoLongerAccepted error = &Error{Code: CodeTokenKeyNoLongerAccepted}
	ErrTokenBadSignature        error = &Error{Code: CodeTokenBadSignature}
	ErrTokenExpired             error = &Error{Code: CodeTokenExpired}
	ErrTokenLifetime            error = &Error{Code: CodeTokenLifetime}
	// ErrTokenRejected matches every reason a token or its input is refused
	// (codes 654-662).
	ErrTokenRejected error = &classError{654, 662, "pki: token rejected"}
)

// KeyRingPolicy says which keys a key ring makes and how long it keeps them.
type KeyRingPolicy struct {
	// Key is the type of new active keys (KeyP256: ES256 tokens; RSA: RS256).
	Key KeyType
	// Lifetime: rotate the active key once it is this old.
	Lifetime time.Duration
	// Grace: how long a rotated-out key stays accepted, from the rotation.
	Grace time.Duration
	// MaxTokenLifetime: the longest token lifetime (0: not stated). The
	// grace must cover it, and Sign refuses claims that outlive it.
	MaxTokenLifetime time.Duration
}

// DefaultKeyRingPolicy is P-256 keys, 90 days of lifetime, 24 hours of grace.
func DefaultKeyRingPolicy() KeyRingPolicy {
	p := C.pki_keyring_policy_default()
	return KeyRingPolicy{
		Key:              KeyType(p.key_type),
		Lifetime:         time.Duration(p.lifetime_seconds) * time.Second,
		Grace:            time.Duration(p.grace_seconds) * time.Second,
		MaxTokenLifetime: time.Duration(p.max_token_lifetime_seconds) * time.Second,
	}
}

func (p *KeyRingPolicy) toC() *C.pki_keyring_policy {
	if p == nil {
		return nil
	}
	return &C.pki_keyring_policy{
		key_type:                   C.uint32_t(p.Key),
		lifetime_seconds:           C.int64_t(p.Lifetime / time.Second),
		grace_seconds:              C.int64_t(p.Grace / time.Second),
		max_token_lifetime_seconds: C.int64_t(p.MaxTokenLifetime / time.Second),
	}
}

// KeyRing holds one active signing key for service-account tokens and the
// public keys still accepted. It is immutable: Rotate returns a new
// KeyRing. Close frees it; a finalizer frees it too if Close is forgotten.
type KeyRing struct {
	ptr *C.pki_keyring
}

func newKeyRing(ptr *C.pki_keyring) *KeyRing {
	k := &KeyRing{ptr: ptr}
	runtime.SetFinalizer(k, (*KeyRing).Close)
	return k
}

// Close frees the key ring. Safe to call more than once, but not
// concurrently with other methods of the same KeyRing.
func (k *KeyRing) Close() {
	if k == nil || k.ptr == nil {
		return
	}
	C.pki_keyring_free(k.ptr)
	k.ptr = nil
	runtime.SetFinalizer(k, nil)
}

// NewKeyRing creates a key ring with a new active key at now (nil policy:
// DefaultKeyRingPolicy).
func NewKeyRing(policy *KeyRingPolicy, now time.Time) (*KeyRing, error) {
	var out *C.pki_keyring
	err := call(func() C.pki_result { return C.pki_keyring_new(policy.toC(), unixTime(now), &out) })
	if err != nil {
		return nil, err
	}
	return newKeyRing(out), nil
}

// ImportKeyRing adopts an existing key set: PEM keys (k3s's service.key;
// the first private key signs, every other key stays accepted until
// retired; the first, once rotated out, leaves after the grace) or a JWK Set
// of public keys.
func ImportKeyRing(keys []byte, policy *KeyRingPolicy, now time.Time) (*KeyRing, error) {
	var out *C.pki_keyring
	p, n := bytesArg(keys)
	err := call(func() C.pki_result {
		return C.pki_keyring_import(p, n, policy.toC(), unixTime(now), &out)
	})
	runtime.KeepAlive(keys)
	if err != nil {
		return nil, err
	}
	return newKeyRing(out), nil
}

// LoadKeyRing reads a key ring from the document State returned.
func LoadKeyRing(state []byte) (*KeyRing, error) {
	var out *C.pki_keyring
	p, n := bytesArg(state)
	err := call(func() C.pki_result { return C.pki_keyring_from_state(p, n, &out) })
	runtime.KeepAlive(state)
	if err != nil {
		return nil, err
	}
	return newKeyRing(out), nil
}

func (k *KeyRing) export(output C.uint32_t) ([]byte, error) {
	if k == nil || k.ptr == nil {
		return nil, ErrClosed
	}
	var buf *C.pki_buffer
	err := call(func() C.pki_result { return C.pki_keyring_export(k.ptr, output, &buf) })
	runtime.KeepAlive(k)
	if err != nil {
		return nil, err
	}
	return takeBuffer(buf), nil
}

// State is the whole ring as one JSON document, the active private key
// inline: keep it as secret as the key.
func (k *KeyRing) State() ([]byte, error) { return k.export(C.PKI_KEYRING_STATE) }

// PublicPEM is every published public key as PUBLIC KEY PEM, active first
// (what kube-apiserver's --service-account-key-file takes).
func (k *KeyRing) PublicPEM() ([]byte, error) { return k.export(C.PKI_KEYRING_PUBLIC_PEM) }

// JWKS is the JWK Set {"keys": [...]} with RFC 7638 thumbprints as kid
// (what an OIDC discovery endpoint serves).
func (k *KeyRing) JWKS() ([]byte, error) { return k.export(C.PKI_KEYRING_JWKS) }

// ActiveKeyPEM is the active private key, PKCS#8 PEM (secret).
func (k *KeyRing) ActiveKeyPEM() ([]byte, error) { return k.export(C.PKI_KEYRING_ACTIVE_KEY) }

// ActiveKid is the active key's id (its RFC 7638 thumbprint).
func (k *KeyRing) ActiveKid() (string, error) {
	b, err := k.export(C.PKI_KEYRING_ACTIVE_KID)
	return string(b), err
}

// KeyRingStep is what Rotate did.
type KeyRingStep struct {
	// Ring is the ring after the step (a new handle; Close it).
	Ring *KeyRing
	// Changed says whether anything changed (store Ring.State() then).
	Changed bool
	// NextCheck is when to step again.
	NextCheck time.Time
}

// Rotate runs one controller step at now: rotates the active key when it
// reached its lifetime or when forced names a reason not acted on before
// ("" forces nothing), and drops accepted keys whose grace has ended.
func (k *KeyRing) Rotate(now time.Time, forced string) (*KeyRingStep, error) {
	if k == nil || k.ptr == nil {
		return nil, ErrClosed
	}
	var (
		out     *C.pki_keyring
		changed C.bool
		next    C.int64_t
	)
	err := call(func() C.pki_result {
		if forced == "" {
			return C.pki_keyring_rotate(k.ptr, nil, 0, unixTime(now), &out, &changed, &next)
		}
		p, n := strArg(forced)
		return C.pki_keyring_rotate(k.ptr, p, n, unixTime(now), &out, &changed, &next)
	})
	runtime.KeepAlive(k)
	if err != nil {
		return nil, err
	}
	return &KeyRingStep{Ring: newKeyRing(out), Changed: bool(changed), NextCheck: fromUnix(next)}, nil
}

// Sign signs claims (a JSON object, used byte for byte as the payload)
// with the active key: a compact JWS, header {"alg","kid","typ":"JWT"}.
func (k *KeyRing) Sign(claims []byte, now time.Time) (string, error) {
	if k == nil || k.ptr == nil {
		return "", ErrClosed
	}
	var buf *C.pki_buffer
	p, n := bytesArg(claims)
	err := call(func() C.pki_result { return C.pki_keyring_sign(k.ptr, p, n, unixTime(now), &buf) })
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
func (k *KeyRing) Verify(token []byte, now time.Time) error {
	if k == nil || k.ptr == nil {
		return ErrClosed
	}
	p, n := bytesArg(token)
	err := call(func() C.pki_result { return C.pki_keyring_verify(k.ptr, p, n, unixTime(now)) })
	runtime.KeepAlive(k)
	runtime.KeepAlive(token)
	return err
}

// A key ring kept in a Store, under the key "keys" (the CLI's: a directory
// store publishes keys/active.key, keys/public.pem and keys/jwks.json).
// Every change is one driver step with compare-and-swap, so controller
// replicas sharing the store rotate once; a refused call leaves the store
// as it was.

// CreateKeyRing creates a key ring with a new active key at now in the
// store (nil policy: DefaultKeyRingPolicy). A ring already there is an
// *Error with CodeAlreadyInitialized, and nothing is written.
func (s *Store) CreateKeyRing(policy *KeyRingPolicy, now time.Time) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	err = call(func() C.pki_result { return C.pki_keyring_store_create(h, policy.toC(), unixTime(now)) })
	runtime.KeepAlive(s)
	return err
}

// ImportKeyRing creates a key ring in the store over an existing key set,
// as the package-level ImportKeyRing reads it.
func (s *Store) ImportKeyRing(keys []byte, policy *KeyRingPolicy, now time.Time) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	p, n := bytesArg(keys)
	err = call(func() C.pki_result {
		return C.pki_keyring_store_import(h, p, n, policy.toC(), unixTime(now))
	})
	runtime.KeepAlive(keys)
	runtime.KeepAlive(s)
	return err
}

// KeyRingRotation is what RotateKeyRing did.
type KeyRingRotation struct {
	// Changed says whether the step wrote a new ring.
	Changed bool
	// NextCheck is when to step again.
	NextCheck time.Time
}

// RotateKeyRing runs one controller step on the stored ring at now:
// rotates the active key when it reached its lifetime or when forced names
// a reason not acted on before ("" forces nothing), retires the keys
// whose kids are in retire (imported keys, or keys past their grace), and
// drops accepted keys whose grace has ended.
func (s *Store) RotateKeyRing(now time.Time, forced string, retire []string) (KeyRingRotation, error) {
	h, err := s.handle()
	if err != nil {
		return KeyRingRotation{}, err
	}
	var (
		changed C.bool
		next    C.int64_t
	)
	kids := strings.Join(retire, ",")
	err = call(func() C.pki_result {
		var fp, rp *C.char
		var fn, rn C.size_t
		if forced != "" {
			fp, fn = strArg(forced)
		}
		if kids != "" {
			rp, rn = strArg(kids)
		}
		return C.pki_keyring_store_rotate(h, fp, fn, rp, rn, unixTime(now), &changed, &next)
	})
	runtime.KeepAlive(forced)
	runtime.KeepAlive(kids)
	runtime.KeepAlive(s)
	if err != nil {
		return KeyRingRotation{}, err
	}
	return KeyRingRotation{Changed: bool(changed), NextCheck: fromUnix(next)}, nil
}

func (s *Store) exportKeyRing(output C.uint32_t) ([]byte, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	var buf *C.pki_buffer
	err = call(func() C.pki_result { return C.pki_keyring_store_export(h, output, &buf) })
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	return takeBuffer(buf), nil
}

// KeyRingJWKS is the stored ring's JWK Set (kid = RFC 7638 thumbprint).
func (s *Store) KeyRingJWKS() ([]byte, error) { return s.exportKeyRing(C.PKI_KEYRING_JWKS) }

// KeyRingPublicPEM is every public key the stored ring publishes, as
// PUBLIC KEY PEM, active first.
func (s *Store) KeyRingPublicPEM() ([]byte, error) {
	return s.exportKeyRing(C.PKI_KEYRING_PUBLIC_PEM)
}

// KeyRingActiveKid is the stored ring's active key id.
func (s *Store) KeyRingActiveKid() (string, error) {
	b, err := s.exportKeyRing(C.PKI_KEYRING_ACTIVE_KID)
	return string(b), err
}

// SignToken signs claims with the stored ring's active key at now: a
// compact JWS, header {"alg","kid","typ":"JWT"}.
func (s *Store) SignToken(claims []byte, now time.Time) (string, error) {
	h, err := s.handle()
	if err != nil {
		return "", err
	}
	var buf *C.pki_buffer
	p, n := bytesArg(claims)
	err = call(func() C.pki_result { return C.pki_keyring_store_sign(h, p, n, unixTime(now), &buf) })
	runtime.KeepAlive(claims)
	runtime.KeepAlive(s)
	if err != nil {
		return "", err
	}
	return string(takeBuffer(buf)), nil
}

// VerifyToken checks a compact JWS at now against the keys the stored ring
// accepts then. nil means accepted; otherwise errors.Is(err,
// ErrTokenRejected) and a specific sentinel say why.
func (s *Store) VerifyToken(token []byte, now time.Time) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	p, n := bytesArg(token)
	err = call(func() C.pki_result { return C.pki_keyring_store_verify(h, p, n, unixTime(now)) })
	runtime.KeepAlive(token)
	runtime.KeepAlive(s)
	return err
}

// KeyRingStatusJSON is the stored ring's status at now, as `pki keys
// status --json` prints it (no private key).
func (s *Store) KeyRingStatusJSON(now time.Time) ([]byte, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	var buf *C.pki_buffer
	err = call(func() C.pki_result { return C.pki_keyring_store_status_json(h, unixTime(now), &buf) })
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	return takeBuffer(buf), nil
}

// LoadKeyRing reads the stored ring as an immutable KeyRing snapshot.
func (s *Store) LoadKeyRing() (*KeyRing, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	var out *C.pki_keyring
	err = call(func() C.pki_result { return C.pki_keyring_store_load(h, &out) })
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	return newKeyRing(out), nil
}
