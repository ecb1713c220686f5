package pki

/*
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include "pki.h"
*/
import "C"

import (
	"encoding/json"
	"runtime"
	"strings"
	"time"
)

// Result codes of the CA set (600-649).
const (
	CodeSetUnknownCA        Code = C.PKI_RESULT_SET_UNKNOWN_CA
	CodeSetUnknownTarget    Code = C.PKI_RESULT_SET_UNKNOWN_TARGET
	CodeSetInvalid          Code = C.PKI_RESULT_SET_INVALID
	CodeSetWrongStep        Code = C.PKI_RESULT_SET_WRONG_STEP
	CodeSetStepBlocked      Code = C.PKI_RESULT_SET_STEP_BLOCKED
	CodeSetStaleFingerprint Code = C.PKI_RESULT_SET_STALE_FINGERPRINT
	CodeSetTargetFailed     Code = C.PKI_RESULT_SET_TARGET_FAILED
	CodeSetCARefused        Code = C.PKI_RESULT_SET_CA_REFUSED
	CodeSetTrustBroken      Code = C.PKI_RESULT_SET_TRUST_BROKEN
	CodeSetAbortStrands     Code = C.PKI_RESULT_SET_ABORT_STRANDS
)

// CASet is a set of CAs rotated in gated steps (GEP-18, StarlingX), kept
// in a Store under the key "set" (the CLI's). Each method is one driver
// step of the library's set engine; a refused call leaves the store as it
// was and returns an *Error with one of the CodeSet* codes.
type CASet struct {
	store *Store
}

// SetOf returns the CA set kept in store.
func SetOf(store *Store) *CASet { return &CASet{store: store} }

// Create makes a new set: one CA per NAME:ROLES item of cas (ROLES:
// serving, client or serving+client), valid for lifetime from now.
func (s *CASet) Create(cas []string, lifetime time.Duration, now time.Time) error {
	h, err := s.store.handle()
	if err != nil {
		return err
	}
	list := strings.Join(cas, ",")
	p, n := strArg(list)
	err = call(func() C.pki_result {
		return C.pki_set_create(h, p, n, C.int64_t(lifetime/time.Second), unixTime(now))
	})
	runtime.KeepAlive(list)
	runtime.KeepAlive(s.store)
	return err
}

// Issue issues (or re-issues) the leaf name of CA ca for target.
func (s *CASet) Issue(name, ca string, serving, client bool, dns []string, target string, now time.Time) error {
	h, err := s.store.handle()
	if err != nil {
		return err
	}
	d := strings.Join(dns, ",")
	np, nn := strArg(name)
	cp, cn := strArg(ca)
	dp, dn := strArg(d)
	tp, tn := strArg(target)
	err = call(func() C.pki_result {
		return C.pki_set_issue(h, np, nn, cp, cn, C.bool(serving), C.bool(client), dp, dn, tp, tn, unixTime(now))
	})
	runtime.KeepAlive(name)
	runtime.KeepAlive(ca)
	runtime.KeepAlive(d)
	runtime.KeepAlive(target)
	runtime.KeepAlive(s.store)
	return err
}

// Target creates target or sets the bundles it loads: the CAs whose
// servers it verifies (trusts) and whose clients it verifies (clientCA).
func (s *CASet) Target(target string, trusts, clientCA []string, now time.Time) error {
	h, err := s.store.handle()
	if err != nil {
		return err
	}
	t, c := strings.Join(trusts, ","), strings.Join(clientCA, ",")
	gp, gn := strArg(target)
	tp, tn := strArg(t)
	cp, cn := strArg(c)
	err = call(func() C.pki_result { return C.pki_set_target(h, gp, gn, tp, tn, cp, cn, unixTime(now)) })
	runtime.KeepAlive(target)
	runtime.KeepAlive(t)
	runtime.KeepAlive(c)
	runtime.KeepAlive(s.store)
	return err
}

// Start starts a rotation (→ trust-both).
func (s *CASet) Start(reason string, oneAtATime bool, now time.Time) error {
	h, err := s.store.handle()
	if err != nil {
		return err
	}
	p, n := strArg(reason)
	err = call(func() C.pki_result { return C.pki_set_start(h, p, n, C.bool(oneAtATime), unixTime(now)) })
	runtime.KeepAlive(reason)
	runtime.KeepAlive(s.store)
	return err
}

// Ack records that target loaded the files with fingerprint.
func (s *CASet) Ack(target, fingerprint string, now time.Time) error {
	h, err := s.store.handle()
	if err != nil {
		return err
	}
	tp, tn := strArg(target)
	fp, fn := strArg(fingerprint)
	err = call(func() C.pki_result { return C.pki_set_ack(h, tp, tn, fp, fn, unixTime(now)) })
	runtime.KeepAlive(target)
	runtime.KeepAlive(fingerprint)
	runtime.KeepAlive(s.store)
	return err
}

// Advance goes to the next step; a non-empty overrideReason passes a gate
// that still waits for targets (recorded).
func (s *CASet) Advance(overrideReason string, now time.Time) error {
	h, err := s.store.handle()
	if err != nil {
		return err
	}
	var p *C.char
	var n C.size_t
	if overrideReason != "" {
		p, n = strArg(overrideReason)
	}
	err = call(func() C.pki_result { return C.pki_set_advance(h, p, n, unixTime(now)) })
	runtime.KeepAlive(overrideReason)
	runtime.KeepAlive(s.store)
	return err
}

// Fail records that target failed to load its files, for reason; it
// blocks Advance until Retry.
func (s *CASet) Fail(target, reason string, now time.Time) error {
	h, err := s.store.handle()
	if err != nil {
		return err
	}
	tp, tn := strArg(target)
	rp, rn := strArg(reason)
	err = call(func() C.pki_result { return C.pki_set_fail(h, tp, tn, rp, rn, unixTime(now)) })
	runtime.KeepAlive(target)
	runtime.KeepAlive(reason)
	runtime.KeepAlive(s.store)
	return err
}

// Retry makes the failed target pending again: it must Ack its files anew.
func (s *CASet) Retry(target string, now time.Time) error {
	h, err := s.store.handle()
	if err != nil {
		return err
	}
	tp, tn := strArg(target)
	err = call(func() C.pki_result { return C.pki_set_retry(h, tp, tn, unixTime(now)) })
	runtime.KeepAlive(target)
	runtime.KeepAlive(s.store)
	return err
}

// Abort aborts the rotation to the safe target of its step. In trust-new it
// rolls forward to completed, which destroys the old CA keys: refused with
// CodeSetAbortStrands while a target has not loaded trust-new (see
// AbortOverride).
func (s *CASet) Abort(now time.Time) error {
	h, err := s.store.handle()
	if err != nil {
		return err
	}
	err = call(func() C.pki_result { return C.pki_set_abort(h, unixTime(now)) })
	runtime.KeepAlive(s.store)
	return err
}

// AbortOverride aborts like Abort, but an abort that would strand targets
// proceeds for reason, which is recorded with the targets it stranded.
func (s *CASet) AbortOverride(reason string, now time.Time) error {
	h, err := s.store.handle()
	if err != nil {
		return err
	}
	p, n := strArg(reason)
	err = call(func() C.pki_result { return C.pki_set_abort_override(h, p, n, unixTime(now)) })
	runtime.KeepAlive(reason)
	runtime.KeepAlive(s.store)
	return err
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

// Status reads the set's status at now.
func (s *CASet) Status(now time.Time) (*SetStatus, error) {
	h, err := s.store.handle()
	if err != nil {
		return nil, err
	}
	var out *C.pki_buffer
	err = call(func() C.pki_result { return C.pki_set_status_json(h, unixTime(now), &out) })
	runtime.KeepAlive(s.store)
	if err != nil {
		return nil, err
	}
	var st SetStatus
	if err := json.Unmarshal(takeBuffer(out), &st); err != nil {
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
func (s *CASet) Plan() (map[string]SetTargetPlan, error) {
	h, err := s.store.handle()
	if err != nil {
		return nil, err
	}
	var out *C.pki_buffer
	err = call(func() C.pki_result { return C.pki_set_plan_json(h, &out) })
	runtime.KeepAlive(s.store)
	if err != nil {
		return nil, err
	}
	plan := map[string]SetTargetPlan{}
	if err := json.Unmarshal(takeBuffer(out), &plan); err != nil {
		return nil, err
	}
	return plan, nil
}
