package pki

// #include "pki.h"
import "C"

import (
	"encoding/json"
	"fmt"
	"net"
	"runtime"
	"time"
)

// LeafKind is what a leaf certificate is for.
type LeafKind string

// Leaf kinds.
const (
	LeafServer       LeafKind = "server"
	LeafClient       LeafKind = "client"
	LeafServerClient LeafKind = "server+client"
)

// LeafReason says why a leaf was (re-)issued, or that it was not.
type LeafReason uint32

// Leaf reasons.
const (
	LeafUpToDate       LeafReason = C.PKI_LEAF_UP_TO_DATE
	LeafNotYetIssued   LeafReason = C.PKI_LEAF_NOT_YET_ISSUED
	LeafIssuerRotated  LeafReason = C.PKI_LEAF_ISSUER_ROTATED
	LeafWrongIssuer    LeafReason = C.PKI_LEAF_WRONG_ISSUER
	LeafNearExpiry     LeafReason = C.PKI_LEAF_NEAR_EXPIRY
	LeafRequestChanged LeafReason = C.PKI_LEAF_REQUEST_CHANGED
)

// LeafRequest is what a serving or client certificate should look like.
type LeafRequest struct {
	// Kind is LeafServer when empty.
	Kind        LeafKind
	DNSNames    []string
	IPAddresses []net.IP
	// Lifetime of the certificate (cut at the CA's NotAfter); 0 = 365 days.
	Lifetime time.Duration
}

// Leaf is a certificate to serve (or present as a client) and its key.
type Leaf struct {
	// ChainPEM is the leaf, then bridge B when clients that still trust
	// only the previous CA need it.
	ChainPEM []byte
	// KeyPEM is the private key, PKCS#8.
	KeyPEM []byte
	// Reason is why it was (re-)issued; LeafUpToDate when it was not.
	Reason LeafReason
	// ReasonMessage says the same in words.
	ReasonMessage string
	// NotAfter is the leaf's expiry.
	NotAfter time.Time
	// RefreshAt is when it becomes due for re-issue.
	RefreshAt time.Time
}

// Reissued reports whether the leaf differs from the one given.
func (l *Leaf) Reissued() bool { return l.Reason != LeafUpToDate }

// toJSON is the request as the C API reads it (every leaf function's).
func (req LeafRequest) toJSON() reqLeaf {
	ips := make([]string, 0, len(req.IPAddresses))
	for _, ip := range req.IPAddresses {
		ips = append(ips, ip.String())
	}
	kind := req.Kind
	if kind == "" {
		kind = LeafServer
	}
	return reqLeaf{
		Kind:            string(kind),
		DNSNames:        append([]string{}, req.DNSNames...),
		IPAddresses:     ips,
		LifetimeSeconds: seconds(req.Lifetime),
	}
}

// toJSON is the change as a signer step's `leaves` entry.
func (l LeafChange) toJSON() (reqLeafChange, error) {
	var change reqLeafChange
	switch l.Action {
	case LeafAdd, LeafReplace:
		r := l.Request.toJSON()
		named := &reqNamedLeaf{Name: l.Name, Kind: r.Kind, DNSNames: r.DNSNames, IPAddresses: r.IPAddresses, LifetimeSeconds: r.LifetimeSeconds}
		if l.Action == LeafAdd {
			change.Request = named
		} else {
			change.Replace = named
		}
	case LeafRemove:
		change.Remove = &reqLeafName{Name: l.Name}
	case LeafRenew:
		change.Renew = &reqLeafName{Name: l.Name}
	default:
		return change, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("leaf %q: unknown action %q", l.Name, l.Action)}
	}
	return change, nil
}

// ReconcileLeaf keeps one leaf issued by the current CA at now. Pass the
// chain and key the leaf has now, or nil for both to issue a first one. It
// is re-issued (new key) when it was not issued by the current CA, when its
// names or kind changed, or when it nears expiry; otherwise it is returned
// as it is, with Reason LeafUpToDate.
func (s *Signer) ReconcileLeaf(req LeafRequest, now time.Time, chainPEM, keyPEM []byte) (*Leaf, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	request, err := json.Marshal(req.toJSON())
	if err != nil {
		return nil, err
	}
	rp, rn := inputArg(request)
	var (
		chainP, keyP *C.uint8_t
		chainN, keyN C.size_t
	)
	if chainPEM != nil || keyPEM != nil {
		chainP, chainN = bytesArg(chainPEM)
		keyP, keyN = bytesArg(keyPEM)
	}
	var out *C.pki_buffer
	err = call(func() C.pki_result {
		return C.pki_leaf_reconcile(h, rp, rn, unixTime(now), chainP, chainN, keyP, keyN, &out)
	})
	runtime.KeepAlive(s)
	runtime.KeepAlive(request)
	runtime.KeepAlive(chainPEM)
	runtime.KeepAlive(keyPEM)
	if err != nil {
		return nil, err
	}
	text := takeBuffer(out)
	defer clear(text)
	var doc struct {
		Version       uint32 `json:"version"`
		Chain         string `json:"chain_pem"`
		Key           string `json:"key_pem"`
		NotAfter      int64  `json:"not_after"`
		RefreshAt     int64  `json:"refresh_at"`
		Reason        uint32 `json:"reason_code"`
		ReasonMessage string `json:"reason_message"`
	}
	if err := json.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("pki: the leaf is not the JSON this package reads: %w", err)
	}
	if doc.Version != resultVersion {
		return nil, fmt.Errorf("pki: leaf version %d (this package reads %d)", doc.Version, resultVersion)
	}
	return &Leaf{
		ChainPEM:      []byte(doc.Chain),
		KeyPEM:        []byte(doc.Key),
		Reason:        LeafReason(doc.Reason),
		ReasonMessage: doc.ReasonMessage,
		NotAfter:      fromUnix(C.int64_t(doc.NotAfter)),
		RefreshAt:     fromUnix(C.int64_t(doc.RefreshAt)),
	}, nil
}
