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

// ServiceAccountKeys are the service-account signing key sets a replacement
// is checked against (service-account-key-kept), each PEM: PUBLIC KEY
// blocks, or private keys whose public halves are taken.
type ServiceAccountKeys struct {
	// Current: the keys tokens are verified with today; nil when there is
	// no key ring to keep (for a store step: the store's own key ring).
	Current []byte
	// Proposed: the set that comes with the replacement; nil when unchanged.
	Proposed []byte
}

// Replacement is a CA supplied to replace a signer's (`pki rotate --to`):
// the CA as CAImport reads it, the service-account key sets to compare
// (nil: none; a store step compares the store's key ring with
// Keys.Proposed when Keys.Current is nil), and Force, a reason to
// override the failed checks it may (recorded with them).
type Replacement struct {
	CA    CAImport
	Keys  *ServiceAccountKeys
	Force string
}

// rotateTo is the replacement as a step's rotate_to.
func (r *Replacement) rotateTo() *reqRotateTo {
	out := &reqRotateTo{CA: string(r.CA.CA), Key: optText(r.CA.Key), Chain: optText(r.CA.Chain), Force: r.Force}
	if r.Keys != nil {
		out.CurrentKeys = optText(r.Keys.Current)
		out.ProposedKeys = optText(r.Keys.Proposed)
	}
	return out
}

// validate is the replacement as pki_signer_validate reads it (no force).
func (r *Replacement) validate() *reqValidate {
	out := &reqValidate{CA: string(r.CA.CA), Key: optText(r.CA.Key), Chain: optText(r.CA.Chain)}
	if r.Keys != nil {
		out.CurrentKeys = optText(r.Keys.Current)
		out.ProposedKeys = optText(r.Keys.Proposed)
	}
	return out
}

// ValidateReplacement checks a proposed replacement of the signer's CA at
// now (k3s validateCA; `pki validate --to`), comparing r.Keys when given
// (r.Force plays no part). A failed check is in the report, not an error.
func (s *Signer) ValidateReplacement(r Replacement, now time.Time) (ValidationReport, error) {
	var report ValidationReport
	h, err := s.handle()
	if err != nil {
		return report, err
	}
	input, err := json.Marshal(r.validate())
	if err != nil {
		return report, err
	}
	var out *C.pki_buffer
	ip, in := inputArg(input)
	err = call(func() C.pki_result { return C.pki_signer_validate(h, ip, in, unixTime(now), &out) })
	runtime.KeepAlive(s)
	runtime.KeepAlive(input)
	if err != nil {
		return report, err
	}
	err = json.Unmarshal(takeBuffer(out), &report)
	return report, err
}
