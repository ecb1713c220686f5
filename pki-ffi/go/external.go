package pki

/*
#include <stdlib.h>
#include "pki.h"
*/
import "C"

import (
	"encoding/json"
	"runtime"
	"time"
)

// Result codes of CAs signed by someone else's root.
const (
	// CodeImport: an imported CA's PEM is unusable (two keys, a key
	// without a certificate, an encrypted key, a chain out of order or
	// without its root).
	CodeImport Code = C.PKI_RESULT_IMPORT
	// CodeValidationFailed: a supplied CA failed a validation check.
	CodeValidationFailed Code = C.PKI_RESULT_VALIDATION_FAILED
	// CodeImportedCA: the operation needs a CA pki generated.
	CodeImportedCA Code = C.PKI_RESULT_IMPORTED_CA
)

// Sentinels for errors.Is.
var (
	ErrImport           error = &Error{Code: CodeImport}
	ErrValidationFailed error = &Error{Code: CodeValidationFailed}
	ErrImportedCA       error = &Error{Code: CodeImportedCA}
)

// optBytesArg is bytesArg, except that nil is NULL ("not given").
func optBytesArg(b []byte) (*C.uint8_t, C.size_t) {
	if b == nil {
		return nil, 0
	}
	return bytesArg(b)
}

// ImportSigner creates a signer whose CA is an existing one. caPEM holds the
// CA certificate first, and may hold its key and the chain above it (issuer
// first, root last); keyPEM and chainPEM are separate inputs, or nil. The
// signer's bundle holds the chain's root; serving chains carry the CA and
// the intermediates. A nil policy means DefaultPolicy().
func ImportSigner(caPEM, keyPEM, chainPEM []byte, policy *Policy, now time.Time) (*Signer, error) {
	var out *C.pki_signer
	ca, caLen := bytesArg(caPEM)
	key, keyLen := optBytesArg(keyPEM)
	chain, chainLen := optBytesArg(chainPEM)
	err := call(func() C.pki_result {
		return C.pki_signer_import(ca, caLen, key, keyLen, chain, chainLen, policy.toC(), unixTime(now), &out)
	})
	runtime.KeepAlive(caPEM)
	runtime.KeepAlive(keyPEM)
	runtime.KeepAlive(chainPEM)
	if err != nil {
		return nil, err
	}
	return newSigner(out), nil
}

// Check is one named line of a ValidationReport.
type Check struct {
	// Name is stable: key-matches, is-ca, chain-supplied,
	// chains-to-current-trust, valid-for-24h, service-account-key-kept.
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// ValidationReport says whether a replacement CA may be rotated to, check by check.
type ValidationReport struct {
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
}

// Failed lists the names of the checks that failed.
func (r ValidationReport) Failed() []string {
	var names []string
	for _, c := range r.Checks {
		if !c.OK {
			names = append(names, c.Name)
		}
	}
	return names
}

// ValidateReplacement checks a proposed replacement of the signer's CA at
// now (k3s validateCA). A failed check is in the report, not an error.
func (s *Signer) ValidateReplacement(caPEM, keyPEM, chainPEM []byte, now time.Time) (ValidationReport, error) {
	var report ValidationReport
	h, err := s.handle()
	if err != nil {
		return report, err
	}
	var out *C.pki_buffer
	ca, caLen := bytesArg(caPEM)
	key, keyLen := optBytesArg(keyPEM)
	chain, chainLen := optBytesArg(chainPEM)
	err = call(func() C.pki_result {
		return C.pki_signer_validate_replacement(h, ca, caLen, key, keyLen, chain, chainLen, unixTime(now), &out)
	})
	runtime.KeepAlive(s)
	runtime.KeepAlive(caPEM)
	runtime.KeepAlive(keyPEM)
	runtime.KeepAlive(chainPEM)
	if err != nil {
		return report, err
	}
	err = json.Unmarshal(takeBuffer(out), &report)
	return report, err
}

// RotateTo validates a supplied CA and rotates to it, re-issuing every
// leaf; the receiver is unchanged and the rotated signer is returned. A
// failed check refuses it (ErrValidationFailed) unless force is a reason,
// which is recorded with every overridden check.
func (s *Signer) RotateTo(caPEM, keyPEM, chainPEM []byte, force string, now time.Time) (*Signer, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	var out *C.pki_signer
	ca, caLen := bytesArg(caPEM)
	key, keyLen := optBytesArg(keyPEM)
	chain, chainLen := optBytesArg(chainPEM)
	var reason *C.char
	var reasonLen C.size_t
	if force != "" {
		reason, reasonLen = strArg(force)
	}
	err = call(func() C.pki_result {
		return C.pki_signer_rotate_to(h, ca, caLen, key, keyLen, chain, chainLen, reason, reasonLen, unixTime(now), &out)
	})
	runtime.KeepAlive(s)
	runtime.KeepAlive(caPEM)
	runtime.KeepAlive(keyPEM)
	runtime.KeepAlive(chainPEM)
	runtime.KeepAlive(force)
	if err != nil {
		return nil, err
	}
	return newSigner(out), nil
}

// ServiceAccountKeys are the service-account signing key sets a replacement
// is checked against (service-account-key-kept), each PEM: PUBLIC KEY
// blocks, or private keys whose public halves are taken.
type ServiceAccountKeys struct {
	// Current: the keys tokens are verified with today; nil when there is
	// no key ring to keep.
	Current []byte
	// Proposed: the set that comes with the replacement; nil when unchanged.
	Proposed []byte
}

// ValidateReplacementWithKeys is ValidateReplacement, also checking that
// keys.Proposed keeps every key of keys.Current (service-account-key-kept).
// keys may be nil.
func (s *Signer) ValidateReplacementWithKeys(caPEM, keyPEM, chainPEM []byte, keys *ServiceAccountKeys, now time.Time) (ValidationReport, error) {
	var report ValidationReport
	h, err := s.handle()
	if err != nil {
		return report, err
	}
	if keys == nil {
		keys = &ServiceAccountKeys{}
	}
	var out *C.pki_buffer
	ca, caLen := bytesArg(caPEM)
	key, keyLen := optBytesArg(keyPEM)
	chain, chainLen := optBytesArg(chainPEM)
	current, currentLen := optBytesArg(keys.Current)
	proposed, proposedLen := optBytesArg(keys.Proposed)
	err = call(func() C.pki_result {
		return C.pki_signer_validate_replacement_with_keys(h, ca, caLen, key, keyLen, chain, chainLen,
			current, currentLen, proposed, proposedLen, unixTime(now), &out)
	})
	runtime.KeepAlive(s)
	runtime.KeepAlive(caPEM)
	runtime.KeepAlive(keyPEM)
	runtime.KeepAlive(chainPEM)
	runtime.KeepAlive(keys)
	if err != nil {
		return report, err
	}
	err = json.Unmarshal(takeBuffer(out), &report)
	return report, err
}

// RotateToWithKeys is RotateTo, also checking the service-account key sets
// as ValidateReplacementWithKeys does: a dropped current key refuses the
// rotation (ErrValidationFailed) unless force overrides it. keys may be nil.
func (s *Signer) RotateToWithKeys(caPEM, keyPEM, chainPEM []byte, keys *ServiceAccountKeys, force string, now time.Time) (*Signer, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	if keys == nil {
		keys = &ServiceAccountKeys{}
	}
	var out *C.pki_signer
	ca, caLen := bytesArg(caPEM)
	key, keyLen := optBytesArg(keyPEM)
	chain, chainLen := optBytesArg(chainPEM)
	current, currentLen := optBytesArg(keys.Current)
	proposed, proposedLen := optBytesArg(keys.Proposed)
	var reason *C.char
	var reasonLen C.size_t
	if force != "" {
		reason, reasonLen = strArg(force)
	}
	err = call(func() C.pki_result {
		return C.pki_signer_rotate_to_with_keys(h, ca, caLen, key, keyLen, chain, chainLen,
			current, currentLen, proposed, proposedLen, reason, reasonLen, unixTime(now), &out)
	})
	runtime.KeepAlive(s)
	runtime.KeepAlive(caPEM)
	runtime.KeepAlive(keyPEM)
	runtime.KeepAlive(chainPEM)
	runtime.KeepAlive(keys)
	runtime.KeepAlive(force)
	if err != nil {
		return nil, err
	}
	return newSigner(out), nil
}

// RotateTo rotates the signer document at key to a supplied CA, as `pki
// rotate DIR --to FILE` does: it validates the CA against today's trust,
// rotates and re-issues every leaf, and writes only if the document is
// still the one read (otherwise it reads and validates again, up to 8
// rounds, then ErrConflict). A refusal writes nothing. The
// service-account check compares the store's own key ring (`pki keys`), if
// any, with proposedKeys (PEM; nil: unchanged). force, when not empty,
// overrides the failed checks it may and is recorded with them.
func (s *Store) RotateTo(key string, caPEM, keyPEM, chainPEM, proposedKeys []byte, force string, now time.Time) (*Step, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	var out *C.pki_step
	kp, kn := strArg(key)
	ca, caLen := bytesArg(caPEM)
	caKey, caKeyLen := optBytesArg(keyPEM)
	chain, chainLen := optBytesArg(chainPEM)
	proposed, proposedLen := optBytesArg(proposedKeys)
	var reason *C.char
	var reasonLen C.size_t
	if force != "" {
		reason, reasonLen = strArg(force)
	}
	err = call(func() C.pki_result {
		return C.pki_signer_store_rotate_to(h, kp, kn, ca, caLen, caKey, caKeyLen, chain, chainLen,
			proposed, proposedLen, reason, reasonLen, unixTime(now), &out)
	})
	runtime.KeepAlive(s)
	runtime.KeepAlive(key)
	runtime.KeepAlive(caPEM)
	runtime.KeepAlive(keyPEM)
	runtime.KeepAlive(chainPEM)
	runtime.KeepAlive(proposedKeys)
	runtime.KeepAlive(force)
	if err != nil {
		return nil, err
	}
	return takeStep(out)
}
