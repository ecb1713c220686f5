package pki

/*
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include "pki.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// SetKey is the store key the pki CLI keeps its CA set under.
const SetKey = "set"

// CASet is a set of CAs rotated in gated steps (GEP-18, StarlingX), kept
// in a Store under a key. Each method that changes it is one driver step
// of the library's set engine, returning the *Step (events, the set's
// status); a refused call leaves the store as it was and returns an *Error
// with one of the CodeSet* codes.
type CASet struct {
	store *Store
	key   string
}

// SetOf returns the CA set kept in store under SetKey (the CLI's).
func SetOf(store *Store) *CASet { return SetAt(store, SetKey) }

// SetAt returns the CA set kept in store under key.
func SetAt(store *Store, key string) *CASet { return &CASet{store: store, key: key} }

func setCreate(store *C.pki_store, key *C.char, keyLen C.size_t, input *C.char, inputLen C.size_t, now C.int64_t, out **C.pki_buffer) C.pki_result {
	return C.pki_document_create(store, C.PKI_KIND_SET, key, keyLen, input, inputLen, now, out)
}

func setStep(store *C.pki_store, key *C.char, keyLen C.size_t, input *C.char, inputLen C.size_t, now C.int64_t, out **C.pki_buffer) C.pki_result {
	return C.pki_document_step(store, C.PKI_KIND_SET, key, keyLen, input, inputLen, now, out)
}

func setRead(store *C.pki_store, key *C.char, keyLen C.size_t, output C.uint32_t, now C.int64_t, out **C.pki_buffer) C.pki_result {
	return C.pki_document_read(store, C.PKI_KIND_SET, key, keyLen, output, now, out)
}

func (s *CASet) step(ctx context.Context, request any, now time.Time) (*Step, error) {
	return s.store.step(ctx, setStep, s.key, request, now)
}

// Create makes a new set: one CA per NAME:ROLES item of cas (ROLES:
// serving, client or serving+client), valid for lifetime from now.
func (s *CASet) Create(ctx context.Context, cas []string, lifetime time.Duration, now time.Time) (*Step, error) {
	lifetimeSeconds := seconds(lifetime)
	req := reqSetCreate{CAs: []reqSetCA{}, LifetimeSeconds: &lifetimeSeconds}
	for _, item := range cas {
		name, roles, _ := strings.Cut(item, ":")
		req.CAs = append(req.CAs, reqSetCA{Name: name, Roles: roles})
	}
	return s.store.step(ctx, setCreate, s.key, req, now)
}

// Issue issues (or re-issues) the leaf name of CA ca for target (created
// if new): a serving certificate, a client certificate, or both.
func (s *CASet) Issue(ctx context.Context, name, ca string, serving, client bool, dns []string, target string, now time.Time) (*Step, error) {
	return s.step(ctx, reqSetStep{Issue: &reqSetIssue{
		Name: name, CA: ca, Serving: serving, Client: client,
		DNSNames: append([]string{}, dns...), Target: target,
	}}, now)
}

// Target creates target or sets the bundles it loads: the CAs whose
// servers it verifies (trusts) and whose clients it verifies (clientCA);
// a nil list is kept as it is.
func (s *CASet) Target(ctx context.Context, target string, trusts, clientCA []string, now time.Time) (*Step, error) {
	body := &reqSetTarget{Name: target}
	if trusts != nil {
		body.Trusts = &trusts
	}
	if clientCA != nil {
		body.ClientCA = &clientCA
	}
	return s.step(ctx, reqSetStep{Target: body}, now)
}

// SetImport is a CA supplied at the start of a rotation instead of a
// generated one (StarlingX's upload): its certificate (which may also hold
// its key and its chain), its key and its chain, as CAImport reads them.
type SetImport struct {
	Name string
	CA   CAImport
}

// Start starts a rotation (→ trust-both) for reason; with oneAtATime,
// serving certificates later move one target at a time; imports are CAs
// supplied instead of generated.
func (s *CASet) Start(ctx context.Context, reason string, oneAtATime bool, now time.Time, imports ...SetImport) (*Step, error) {
	list := []reqSetImport{}
	for _, i := range imports {
		list = append(list, reqSetImport{Name: i.Name, CA: string(i.CA.CA), Key: optText(i.CA.Key), Chain: optText(i.CA.Chain)})
	}
	return s.step(ctx, reqSetStep{Start: &reqSetStart{Reason: reason, OneAtATime: oneAtATime, Imports: list}}, now)
}

// Ack records that target loaded the files with fingerprint.
func (s *CASet) Ack(ctx context.Context, target, fingerprint string, now time.Time) (*Step, error) {
	return s.step(ctx, reqSetStep{Ack: &reqSetAck{Target: target, Fingerprint: fingerprint}}, now)
}

// Advance goes to the next step; a non-empty overrideReason passes a gate
// that still waits for targets (recorded).
func (s *CASet) Advance(ctx context.Context, overrideReason string, now time.Time) (*Step, error) {
	return s.AdvanceFrom(ctx, "", overrideReason, now)
}

// AdvanceFrom is Advance that names the step it leaves (`pki set advance
// --from`): once the set left it, the request is nothing to do; from
// another step, it is refused with CodeSetWrongStep. "" is the current
// step.
func (s *CASet) AdvanceFrom(ctx context.Context, from, overrideReason string, now time.Time) (*Step, error) {
	return s.step(ctx, reqSetStep{Advance: &reqSetAdvance{From: from, OverrideReason: overrideReason}}, now)
}

// Fail records that target failed to load its files, for reason; it
// blocks Advance until Retry.
func (s *CASet) Fail(ctx context.Context, target, reason string, now time.Time) (*Step, error) {
	return s.step(ctx, reqSetStep{Fail: &reqSetFail{Target: target, Reason: reason}}, now)
}

// Retry makes the failed target pending again: it must Ack its files anew.
func (s *CASet) Retry(ctx context.Context, target string, now time.Time) (*Step, error) {
	return s.step(ctx, reqSetStep{Retry: &reqSetRetry{Target: target}}, now)
}

// Abort aborts the rotation to the safe target of its step. In trust-new it
// rolls forward to completed, which destroys the old CA keys: refused with
// CodeSetAbortStrands while a target has not loaded trust-new (see
// AbortOverride).
func (s *CASet) Abort(ctx context.Context, now time.Time) (*Step, error) {
	return s.step(ctx, reqSetStep{Abort: &reqSetAbort{}}, now)
}

// AbortOverride aborts like Abort, but an abort that would strand targets
// proceeds for reason, which is recorded with the targets it stranded.
func (s *CASet) AbortOverride(ctx context.Context, reason string, now time.Time) (*Step, error) {
	return s.step(ctx, reqSetStep{Abort: &reqSetAbort{OverrideReason: &reason}}, now)
}

// SetTargetStatus is one target in SetStatus.
type SetTargetStatus struct {
	Fingerprint string `json:"fingerprint"`
	Progress    string `json:"progress"`
}

// SetStatus is the part of `pki set status --json` most callers need.
type SetStatus struct {
	Step     string                     `json:"step"`
	Half     *string                    `json:"half"`
	Targets  map[string]SetTargetStatus `json:"targets"`
	Blocking []string                   `json:"blocking"`
}

// SetStatusOf reads the status a CASet's Step carries.
func SetStatusOf(st *Step) (*SetStatus, error) {
	var status SetStatus
	if err := json.Unmarshal(st.Status, &status); err != nil {
		return nil, err
	}
	return &status, nil
}

// Status reads the set's status at now.
func (s *CASet) Status(ctx context.Context, now time.Time) (*SetStatus, error) {
	raw, err := s.store.read(ctx, setRead, s.key, C.PKI_SET_STATUS, now)
	if err != nil {
		return nil, err
	}
	var st SetStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// SetFile is one file a target should have.
type SetFile struct {
	Contents string `json:"contents"`
	Secret   bool   `json:"secret"`
}

// SetTargetPlan is what one target should have now, and the fingerprint
// it acknowledges once loaded.
type SetTargetPlan struct {
	Fingerprint string             `json:"fingerprint"`
	Files       map[string]SetFile `json:"files"`
}

// Plan reads which files each target should have now (private keys
// included: keep the result private).
func (s *CASet) Plan(ctx context.Context) (map[string]SetTargetPlan, error) {
	raw, err := s.store.read(ctx, setRead, s.key, C.PKI_SET_PLAN, time.Unix(0, 0))
	if err != nil {
		return nil, err
	}
	plan := map[string]SetTargetPlan{}
	if err := json.Unmarshal(raw, &plan); err != nil {
		return nil, err
	}
	return plan, nil
}
