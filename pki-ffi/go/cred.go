package pki

// #include <stdlib.h>
// #include "pki.h"
import "C"

import (
	"context"
	"encoding/base64"
	"time"
)

// CredActionKind is what the embedder does next for a credential.
type CredActionKind uint32

// Credential actions (the step result's action `kind`: "mint", "revoke",
// "wait", "revoke_stray").
const (
	// CredMint: mint once for the action's Rotation and Attempt (after a
	// crash, adopt what was captured for that attempt instead of minting
	// again), then ReportMinted or ReportMintFailed.
	CredMint CredActionKind = 1
	// CredRevoke: revoke Credential (already revoked is success), then
	// ReportRevoked or ReportRevokeFailed.
	CredRevoke CredActionKind = 2
	// CredWait: nothing to do before the step's NextWake.
	CredWait CredActionKind = 3
	// CredRevokeStray: revoke Credential, what the failed (or late) mint
	// attempt Rotation/Attempt returned (already gone is success), then
	// ReportStrayRevoked or ReportStrayRevokeFailed.
	CredRevokeStray CredActionKind = 4
)

// CredWaitReason says why a CredWait waits.
type CredWaitReason uint32

// Why a credential waits (the action's `wait_reason`: "expiry", "grace",
// "backoff", "mint_elsewhere").
const (
	// CredWaitExpiry: the current credential is not due yet.
	CredWaitExpiry CredWaitReason = 1
	// CredWaitGrace: the old credential stays usable until the grace ends.
	CredWaitGrace CredWaitReason = 2
	// CredWaitBackoff: a hook failed; its retry waits.
	CredWaitBackoff CredWaitReason = 3
	// CredWaitMintElsewhere: the mint in progress belongs to another owner
	// (AdvanceAs): only it runs the mint; look again later.
	CredWaitMintElsewhere CredWaitReason = 4
)

// CredAdvanceMaxSteps is the most steps one advance commits (the bound
// the CLI's reconcile has too: both run the same advance).
const CredAdvanceMaxSteps = C.PKI_CRED_ADVANCE_MAX_STEPS

// CredAction is the next action of a credential minted by an outside
// system, as an advance's Step.Action holds it. A wait ends at the step's
// NextWake.
type CredAction struct {
	Kind     CredActionKind
	Rotation uint64
	Attempt  uint32
	// WaitReason says why a CredWait waits (0 for other actions).
	WaitReason CredWaitReason
	// Credential is the credential to revoke (CredRevoke, CredRevokeStray).
	Credential []byte
}

// Credential is a credential minted by an outside system, kept in a Store
// (store key creds/NAME): the embedder advances it, performs the action
// the step names (mint, revoke), and reports the result; pki commits each
// step before the next, so a crash anywhere resumes without minting twice
// for one attempt, revoking the current credential or forgetting an old
// one.
type Credential struct {
	store *Store
	name  string
}

// CredentialOf returns the credential name kept in store.
func CredentialOf(store *Store, name string) *Credential {
	return &Credential{store: store, name: name}
}

func credCreate(store *C.pki_store, key *C.char, keyLen C.size_t, input *C.char, inputLen C.size_t, now C.int64_t, out **C.pki_buffer) C.pki_result {
	return C.pki_document_create(store, C.PKI_KIND_CRED, key, keyLen, input, inputLen, now, out)
}

func credStep(store *C.pki_store, key *C.char, keyLen C.size_t, input *C.char, inputLen C.size_t, now C.int64_t, out **C.pki_buffer) C.pki_result {
	return C.pki_document_step(store, C.PKI_KIND_CRED, key, keyLen, input, inputLen, now, out)
}

func credRead(store *C.pki_store, key *C.char, keyLen C.size_t, output C.uint32_t, now C.int64_t, out **C.pki_buffer) C.pki_result {
	return C.pki_document_read(store, C.PKI_KIND_CRED, key, keyLen, output, now, out)
}

func (c *Credential) step(ctx context.Context, request any, now time.Time) (*Step, error) {
	return c.store.step(ctx, credStep, c.name, request, now)
}

// Create records the credential with nothing minted yet (the first
// advance asks for a mint): rotated once expire has passed since its mint,
// the previous one revoked grace after its successor's mint.
func (c *Credential) Create(ctx context.Context, expire, grace time.Duration, now time.Time) (*Step, error) {
	return c.store.step(ctx, credCreate, c.name, reqCredCreate{ExpireSeconds: seconds(expire), GraceSeconds: seconds(grace)}, now)
}

// Advance takes every bookkeeping step due at now (each committed on its
// own); the step's Action says what the embedder must do next. A mint
// attempt it records has no owner; it is asked to run only attempts
// without one (see AdvanceAs).
func (c *Credential) Advance(ctx context.Context, now time.Time) (*Step, error) {
	return c.step(ctx, nil, now)
}

// AdvanceAs is Advance for the replica owner (1-128 characters of A-Z a-z
// 0-9 . _ : @ / -, the same across its restarts): a mint attempt it records
// is its own, and one another owner recorded is never handed to it (it
// gets CredWait with CredWaitMintElsewhere), so replicas sharing a store
// mint once per attempt.
func (c *Credential) AdvanceAs(ctx context.Context, owner string, now time.Time) (*Step, error) {
	return c.step(ctx, reqCredStep{Advance: &reqCredAdvance{Owner: &owner}}, now)
}

// ReportMinted records credential (whitespace trimmed) as the mint of
// rotation/attempt; an empty credential or one already in use is recorded
// as a failed attempt instead.
func (c *Credential) ReportMinted(ctx context.Context, rotation uint64, attempt uint32, credential []byte, now time.Time) (*Step, error) {
	b64 := base64.StdEncoding.EncodeToString(credential)
	return c.step(ctx, reqCredStep{Minted: &reqCredMinted{Rotation: rotation, Attempt: attempt, CredentialBase64: &b64}}, now)
}

// ReportMintFailed records a failed mint attempt, retried after a backoff.
// captured is what the mint returned before it failed, if anything (nil:
// nothing): it may be live, so pki keeps it and asks for its revocation
// (CredRevokeStray) before the next attempt.
func (c *Credential) ReportMintFailed(ctx context.Context, rotation uint64, attempt uint32, message string, captured []byte, now time.Time) (*Step, error) {
	body := &reqCredMintFailed{Rotation: rotation, Attempt: attempt, Message: message}
	if captured != nil {
		b64 := base64.StdEncoding.EncodeToString(captured)
		body.CapturedBase64 = &b64
	}
	return c.step(ctx, reqCredStep{MintFailed: body}, now)
}

// ReportStrayRevoked records that the stray credential of the failed mint
// rotation/attempt is revoked.
func (c *Credential) ReportStrayRevoked(ctx context.Context, rotation uint64, attempt uint32, now time.Time) (*Step, error) {
	return c.step(ctx, reqCredStep{StrayRevoked: &reqCredStrayRevoked{Rotation: rotation, Attempt: attempt}}, now)
}

// ReportStrayRevokeFailed records a failed revocation of a stray
// credential; it is retried after a backoff, and no mint runs meanwhile.
func (c *Credential) ReportStrayRevokeFailed(ctx context.Context, rotation uint64, attempt uint32, message string, now time.Time) (*Step, error) {
	return c.step(ctx, reqCredStep{StrayRevokeFailed: &reqCredStrayRevokeFailed{Rotation: rotation, Attempt: attempt, Message: message}}, now)
}

// ReportRevoked records that the old credential of rotation is revoked.
func (c *Credential) ReportRevoked(ctx context.Context, rotation uint64, now time.Time) (*Step, error) {
	return c.step(ctx, reqCredStep{Revoked: &reqCredRevoked{Rotation: rotation}}, now)
}

// ReportRevokeFailed records a failed revocation; the old credential is
// kept and the revocation retried after a backoff.
func (c *Credential) ReportRevokeFailed(ctx context.Context, rotation uint64, message string, now time.Time) (*Step, error) {
	return c.step(ctx, reqCredStep{RevokeFailed: &reqCredRevokeFailed{Rotation: rotation, Message: message}}, now)
}

// Status is the credential's status at now, as `pki cred status --json`
// reports each credential (never a credential's value).
func (c *Credential) Status(ctx context.Context, now time.Time) ([]byte, error) {
	return c.store.read(ctx, credRead, c.name, C.PKI_CRED_STATUS, now)
}

// Current is the credential consumers use; before the first mint the
// error matches ErrNotFound.
func (c *Credential) Current(ctx context.Context) ([]byte, error) {
	return c.store.read(ctx, credRead, c.name, C.PKI_CRED_CURRENT, time.Unix(0, 0))
}
