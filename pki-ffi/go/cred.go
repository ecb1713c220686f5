package pki

// #include <stdlib.h>
// #include "pki.h"
import "C"

import (
	"runtime"
	"time"
)

// Result codes of the credential step machine.
const (
	CodeInvalidCredentialName      Code = C.PKI_RESULT_INVALID_CREDENTIAL_NAME
	CodeInvalidCredentialPolicy    Code = C.PKI_RESULT_INVALID_CREDENTIAL_POLICY
	CodeUnexpectedCredentialReport Code = C.PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT
)

// CredActionKind is what the embedder does next for a credential.
type CredActionKind uint32

// Credential actions.
const (
	// CredMint: mint once for the action's Rotation and Attempt (after a
	// crash, adopt what was captured for that attempt instead of minting
	// again), then ReportMinted or ReportMintFailed.
	CredMint CredActionKind = C.PKI_CRED_ACTION_MINT
	// CredRevoke: revoke Credential (already revoked is success), then
	// ReportRevoked or ReportRevokeFailed.
	CredRevoke CredActionKind = C.PKI_CRED_ACTION_REVOKE
	// CredWait: nothing to do before WaitUntil.
	CredWait CredActionKind = C.PKI_CRED_ACTION_WAIT
	// CredRevokeStray: revoke Credential, what the failed (or late) mint
	// attempt Rotation/Attempt returned (already gone is success), then
	// ReportStrayRevoked or ReportStrayRevokeFailed.
	CredRevokeStray CredActionKind = C.PKI_CRED_ACTION_REVOKE_STRAY
)

// CredWaitReason says why a CredWait waits.
type CredWaitReason uint32

// Why a credential waits.
const (
	// CredWaitExpiry: the current credential is not due yet.
	CredWaitExpiry CredWaitReason = C.PKI_CRED_WAIT_EXPIRY
	// CredWaitGrace: the old credential stays usable until the grace ends.
	CredWaitGrace CredWaitReason = C.PKI_CRED_WAIT_GRACE
	// CredWaitBackoff: a hook failed; its retry waits.
	CredWaitBackoff CredWaitReason = C.PKI_CRED_WAIT_BACKOFF
	// CredWaitMintElsewhere: the mint in progress belongs to another owner
	// (NextCredentialActionAs): only it runs the mint; look again later.
	CredWaitMintElsewhere CredWaitReason = C.PKI_CRED_WAIT_MINT_ELSEWHERE
)

// CredAdvanceMaxSteps is the most steps one NextCredentialAction commits
// (the bound the CLI's reconcile has too: both run the same advance).
const CredAdvanceMaxSteps = C.PKI_CRED_ADVANCE_MAX_STEPS

// CredAction is the next action of a credential minted by an outside system.
type CredAction struct {
	Kind     CredActionKind
	Rotation uint64
	Attempt  uint32
	// WaitUntil is the end of a wait (the time asked for otherwise): the
	// same as NextWake.
	WaitUntil time.Time
	// NextWake is when to ask again if nothing else happens.
	NextWake time.Time
	// WaitReason says why a CredWait waits (0 for other actions).
	WaitReason CredWaitReason
	Credential []byte // the credential to revoke (CredRevoke, CredRevokeStray)
}

// CreateCredential records the credential name (store key creds/NAME) with
// nothing minted yet: rotated once expire has passed since its mint, the
// previous one revoked grace after its successor's mint.
func (s *Store) CreateCredential(name string, expire, grace time.Duration) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	np, nn := strArg(name)
	err = call(func() C.pki_result {
		return C.pki_cred_create(h, np, nn, C.int64_t(expire/time.Second), C.int64_t(grace/time.Second))
	})
	runtime.KeepAlive(name)
	runtime.KeepAlive(s)
	return err
}

// NextCredentialAction takes every bookkeeping step due at now (each
// committed on its own) and returns what the embedder must do next. A
// mint attempt it records has no owner; it is asked to run only attempts
// without one (see NextCredentialActionAs).
func (s *Store) NextCredentialAction(name string, now time.Time) (CredAction, error) {
	h, err := s.handle()
	if err != nil {
		return CredAction{}, err
	}
	np, nn := strArg(name)
	var a *C.pki_cred_action
	err = call(func() C.pki_result { return C.pki_cred_next(h, np, nn, unixTime(now), &a) })
	runtime.KeepAlive(name)
	runtime.KeepAlive(s)
	if err != nil {
		return CredAction{}, err
	}
	return takeCredAction(a), nil
}

// NextCredentialActionAs is NextCredentialAction for the replica owner (1-128
// characters of A-Z a-z 0-9 . _ : @ / -, the same across its restarts): a
// mint attempt it records is its own, and one another owner recorded is
// never handed to it (it gets CredWait with CredWaitMintElsewhere), so
// replicas sharing a store mint once per attempt.
func (s *Store) NextCredentialActionAs(name, owner string, now time.Time) (CredAction, error) {
	h, err := s.handle()
	if err != nil {
		return CredAction{}, err
	}
	np, nn := strArg(name)
	op, on := strArg(owner)
	var a *C.pki_cred_action
	err = call(func() C.pki_result { return C.pki_cred_next_as(h, np, nn, op, on, unixTime(now), &a) })
	runtime.KeepAlive(name)
	runtime.KeepAlive(owner)
	runtime.KeepAlive(s)
	if err != nil {
		return CredAction{}, err
	}
	return takeCredAction(a), nil
}

// takeCredAction copies an action out and frees it.
func takeCredAction(a *C.pki_cred_action) CredAction {
	defer C.pki_cred_action_free(a)
	return CredAction{
		Kind:       CredActionKind(C.pki_cred_action_kind(a)),
		Rotation:   uint64(C.pki_cred_action_rotation(a)),
		Attempt:    uint32(C.pki_cred_action_attempt(a)),
		WaitUntil:  fromUnix(C.pki_cred_action_wait_until(a)),
		NextWake:   fromUnix(C.pki_cred_action_next_wake(a)),
		WaitReason: CredWaitReason(C.pki_cred_action_wait_reason(a)),
		Credential: goBytes(C.pki_cred_action_credential(a)),
	}
}

// ReportMinted records credential (whitespace trimmed) as the mint of
// rotation/attempt; an empty credential or one already in use is recorded
// as a failed attempt instead.
func (s *Store) ReportMinted(name string, rotation uint64, attempt uint32, credential []byte, now time.Time) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	np, nn := strArg(name)
	cp, cn := bytesArg(credential)
	err = call(func() C.pki_result {
		return C.pki_cred_report_minted(h, np, nn, C.uint64_t(rotation), C.uint32_t(attempt), cp, cn, unixTime(now))
	})
	runtime.KeepAlive(name)
	runtime.KeepAlive(credential)
	runtime.KeepAlive(s)
	return err
}

// ReportMintFailed records a failed mint attempt; it is retried after a backoff.
func (s *Store) ReportMintFailed(name string, rotation uint64, attempt uint32, message string, now time.Time) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	np, nn := strArg(name)
	mp, mn := strArg(message)
	err = call(func() C.pki_result {
		return C.pki_cred_report_mint_failed(h, np, nn, C.uint64_t(rotation), C.uint32_t(attempt), mp, mn, unixTime(now))
	})
	runtime.KeepAlive(name)
	runtime.KeepAlive(message)
	runtime.KeepAlive(s)
	return err
}

// ReportMintFailedCaptured records a failed mint attempt that may have
// minted: captured is what it returned before failing (nil or empty:
// nothing). pki keeps it and asks for its revocation (CredRevokeStray)
// before the next attempt, so it cannot leak.
func (s *Store) ReportMintFailedCaptured(name string, rotation uint64, attempt uint32, message string, captured []byte, now time.Time) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	np, nn := strArg(name)
	mp, mn := strArg(message)
	cp, cn := bytesArg(captured)
	err = call(func() C.pki_result {
		return C.pki_cred_report_mint_failed_captured(h, np, nn, C.uint64_t(rotation), C.uint32_t(attempt), mp, mn, cp, cn, unixTime(now))
	})
	runtime.KeepAlive(name)
	runtime.KeepAlive(message)
	runtime.KeepAlive(captured)
	runtime.KeepAlive(s)
	return err
}

// ReportStrayRevoked records that the stray credential of the failed mint
// rotation/attempt is revoked.
func (s *Store) ReportStrayRevoked(name string, rotation uint64, attempt uint32, now time.Time) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	np, nn := strArg(name)
	err = call(func() C.pki_result {
		return C.pki_cred_report_stray_revoked(h, np, nn, C.uint64_t(rotation), C.uint32_t(attempt), unixTime(now))
	})
	runtime.KeepAlive(name)
	runtime.KeepAlive(s)
	return err
}

// ReportStrayRevokeFailed records a failed revocation of a stray
// credential; it is retried after a backoff, and no mint runs meanwhile.
func (s *Store) ReportStrayRevokeFailed(name string, rotation uint64, attempt uint32, message string, now time.Time) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	np, nn := strArg(name)
	mp, mn := strArg(message)
	err = call(func() C.pki_result {
		return C.pki_cred_report_stray_revoke_failed(h, np, nn, C.uint64_t(rotation), C.uint32_t(attempt), mp, mn, unixTime(now))
	})
	runtime.KeepAlive(name)
	runtime.KeepAlive(message)
	runtime.KeepAlive(s)
	return err
}

// ReportRevoked records that the old credential of rotation is revoked.
func (s *Store) ReportRevoked(name string, rotation uint64, now time.Time) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	np, nn := strArg(name)
	err = call(func() C.pki_result { return C.pki_cred_report_revoked(h, np, nn, C.uint64_t(rotation), unixTime(now)) })
	runtime.KeepAlive(name)
	runtime.KeepAlive(s)
	return err
}

// ReportRevokeFailed records a failed revocation; the old credential is
// kept and the revocation retried after a backoff.
func (s *Store) ReportRevokeFailed(name string, rotation uint64, message string, now time.Time) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	np, nn := strArg(name)
	mp, mn := strArg(message)
	err = call(func() C.pki_result {
		return C.pki_cred_report_revoke_failed(h, np, nn, C.uint64_t(rotation), mp, mn, unixTime(now))
	})
	runtime.KeepAlive(name)
	runtime.KeepAlive(message)
	runtime.KeepAlive(s)
	return err
}

// CredentialStatusJSON is the credential's status at now, as `pki cred
// status --json` reports each credential (never a credential's value).
func (s *Store) CredentialStatusJSON(name string, now time.Time) ([]byte, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	np, nn := strArg(name)
	var out *C.pki_buffer
	err = call(func() C.pki_result { return C.pki_cred_status_json(h, np, nn, unixTime(now), &out) })
	runtime.KeepAlive(name)
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	return takeBuffer(out), nil
}

// CurrentCredential is the credential consumers use; before the first
// mint the error matches ErrNotFound.
func (s *Store) CurrentCredential(name string) ([]byte, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	np, nn := strArg(name)
	var out *C.pki_buffer
	err = call(func() C.pki_result { return C.pki_cred_current(h, np, nn, &out) })
	runtime.KeepAlive(name)
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	return takeBuffer(out), nil
}
