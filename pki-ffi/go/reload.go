package pki

// #include "pki.h"
import "C"

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Snapshot is one consistent read of what a consumer loads: a leaf's chain
// and key from the same generation (the key checked to match the leaf) and
// its trust bundle, with the bundle's token (what Store.Ack and `pki ack`
// take, `pki fingerprint --bundle` of the same certificates).
type Snapshot struct {
	Chain       []byte
	Key         []byte
	Bundle      []byte
	Fingerprint string
}

// LoadSnapshot reads certFile (the chain, leaf first), keyFile and
// bundleFile as one snapshot: a directory store switches generations
// atomically, but two opens may straddle a switch, so the files are read
// again until they come from one generation. A certificate is never
// returned with another generation's key (the error then matches
// ErrKeyMismatch).
func LoadSnapshot(certFile, keyFile, bundleFile string) (*Snapshot, error) {
	var out *C.pki_buffer
	cp, cn := strArg(certFile)
	kp, kn := strArg(keyFile)
	bp, bn := strArg(bundleFile)
	err := call(func() C.pki_result { return C.pki_snapshot_load(cp, cn, kp, kn, bp, bn, &out) })
	runtime.KeepAlive(certFile)
	runtime.KeepAlive(keyFile)
	runtime.KeepAlive(bundleFile)
	if err != nil {
		return nil, err
	}
	text := takeBuffer(out)
	defer clear(text)
	var doc struct {
		Version     uint32 `json:"version"`
		Chain       string `json:"chain_pem"`
		Key         string `json:"key_pem"`
		Bundle      string `json:"bundle_pem"`
		Fingerprint string `json:"fingerprint"`
	}
	if err := json.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("pki: the snapshot is not the JSON this package reads: %w", err)
	}
	if doc.Version != resultVersion {
		return nil, fmt.Errorf("pki: snapshot version %d (this package reads %d)", doc.Version, resultVersion)
	}
	return &Snapshot{
		Chain:       []byte(doc.Chain),
		Key:         []byte(doc.Key),
		Bundle:      []byte(doc.Bundle),
		Fingerprint: doc.Fingerprint,
	}, nil
}

// Ack records that consumer loaded the bundle of fingerprint, published by
// the signer at key (`pki ack`). It changes nothing else. A bundle the
// signer did not publish matches ErrUnknownBundle; the fingerprint already
// recorded for consumer writes nothing (Changed is false).
func (s *Store) Ack(ctx context.Context, key, consumer, fingerprint string, now time.Time) (*Step, error) {
	req := reqSignerStep{Ack: &reqAck{Consumer: consumer, Fingerprint: fingerprint}}
	return s.stepSigner(ctx, signerStep, key, req, now)
}

// WatchOptions says how a Watcher polls and whom it tells.
type WatchOptions struct {
	// Interval between two looks at the files; 0 means one second.
	Interval time.Duration
	// Store, Key and Consumer, when Store is set: acknowledge every bundle
	// loaded (Store.Ack) as Consumer, in the signer at Key (DefaultKey when
	// empty), one ack at a time in the order of the loads; a bundle
	// replaced before its ack went out is not acknowledged.
	Store    *Store
	Key      string
	Consumer string
	// OnError, when set, hears every failed reload or ack; the material
	// loaded before stays in use.
	OnError func(error)
}

// material is one loaded snapshot, ready for crypto/tls.
type material struct {
	snapshot *Snapshot
	cert     *tls.Certificate
	roots    *x509.CertPool
}

// Watcher keeps a consumer on what pki publishes: a leaf's certificate and
// key and a trust bundle, polled and swapped atomically (a certificate is
// never paired with another generation's key). It serves crypto/tls as
// GetCertificate, GetClientCertificate and VerifyConnection: tls.Config
// has no hook to replace its roots, so trust is checked in
// VerifyConnection against the bundle loaded now (ServerConfig and
// ClientConfig set this up). It is safe for concurrent use; it polls until
// the context given to Watch is done.
type Watcher struct {
	certFile, keyFile, bundleFile string
	opts                          WatchOptions
	ctx                           context.Context // the watcher's lifetime: its acks end with it
	current                       atomic.Pointer[material]
	reloads                       atomic.Uint64
	mu                            sync.Mutex // one reload at a time
	ackMu                         sync.Mutex // one ack at a time, in the order of the loads
}

// Watch loads certFile, keyFile and bundleFile (an error when they are
// unusable) and polls them every opts.Interval until ctx is done. For a
// signer's directory store DIR and leaf NAME: DIR/certs/NAME/tls.crt,
// DIR/certs/NAME/tls.key and DIR/ca-bundle.crt; for a CA set target T:
// DIR/targets/T/certs/NAME/… and DIR/targets/T/trust/CA.crt (a client) or
// DIR/targets/T/client-ca/CA.crt (a server).
func Watch(ctx context.Context, certFile, keyFile, bundleFile string, opts WatchOptions) (*Watcher, error) {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Key == "" {
		opts.Key = DefaultKey
	}
	w := &Watcher{certFile: certFile, keyFile: keyFile, bundleFile: bundleFile, opts: opts, ctx: ctx}
	if _, err := w.Refresh(); err != nil {
		return nil, err
	}
	go func() {
		ticker := time.NewTicker(opts.Interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				if _, err := w.Refresh(); err != nil && opts.OnError != nil {
					opts.OnError(err)
				}
			}
		}
	}()
	return w, nil
}

// Refresh looks at the files now and swaps in what changed; it reports
// whether it did. On an error the material loaded before stays in use.
func (w *Watcher) Refresh() (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	snap, err := LoadSnapshot(w.certFile, w.keyFile, w.bundleFile)
	if err != nil {
		return false, err
	}
	old := w.current.Load()
	if old != nil && bytes.Equal(old.snapshot.Chain, snap.Chain) &&
		bytes.Equal(old.snapshot.Key, snap.Key) && bytes.Equal(old.snapshot.Bundle, snap.Bundle) {
		return false, nil
	}
	cert, err := tls.X509KeyPair(snap.Chain, snap.Key)
	if err != nil {
		return false, fmt.Errorf("%s: %w", w.certFile, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(snap.Bundle) {
		return false, fmt.Errorf("%s: no certificate", w.bundleFile)
	}
	w.current.Store(&material{snapshot: snap, cert: &cert, roots: roots})
	w.reloads.Add(1)
	if w.opts.Store != nil && (old == nil || old.snapshot.Fingerprint != snap.Fingerprint) {
		go w.ack(snap.Fingerprint)
	}
	return true, nil
}

// ack records fingerprint unless the watcher has loaded another bundle
// since: the store keeps the last ack it gets, so an ack overtaken by the
// next load's would record a bundle the consumer no longer holds. The next
// load's ack, waiting for this one, records that.
func (w *Watcher) ack(fingerprint string) {
	w.ackMu.Lock()
	defer w.ackMu.Unlock()
	if w.Fingerprint() != fingerprint {
		return
	}
	step, err := w.opts.Store.Ack(w.ctx, w.opts.Key, w.opts.Consumer, fingerprint, time.Now())
	if err != nil {
		if w.opts.OnError != nil {
			w.opts.OnError(fmt.Errorf("ack %s: %w", fingerprint, err))
		}
		return
	}
	step.Close()
}

// Reloads counts the loads so far (1 after Watch).
func (w *Watcher) Reloads() uint64 { return w.reloads.Load() }

// Fingerprint is the token of the bundle in use.
func (w *Watcher) Fingerprint() string { return w.current.Load().snapshot.Fingerprint }

// Certificate is the certificate and key in use.
func (w *Watcher) Certificate() *tls.Certificate { return w.current.Load().cert }

// GetCertificate is tls.Config.GetCertificate: the certificate in use.
func (w *Watcher) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return w.Certificate(), nil
}

// GetClientCertificate is tls.Config.GetClientCertificate: the
// certificate in use, whatever authorities the server names.
func (w *Watcher) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return w.Certificate(), nil
}

// errNoPeerCertificate: the peer sent no certificate to verify.
var errNoPeerCertificate = errors.New("pki: the peer sent no certificate")

func (w *Watcher) verify(cs tls.ConnectionState, name string, usage x509.ExtKeyUsage) error {
	if len(cs.PeerCertificates) == 0 {
		return errNoPeerCertificate
	}
	intermediates := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		DNSName:       name,
		Roots:         w.current.Load().roots,
		Intermediates: intermediates,
		KeyUsages:     []x509.ExtKeyUsage{usage},
	})
	return err
}

// VerifyServer is a client's tls.Config.VerifyConnection: the server's
// chain and name against the bundle in use (with InsecureSkipVerify, so
// that the static roots are not used; ClientConfig sets both).
func (w *Watcher) VerifyServer(cs tls.ConnectionState) error {
	return w.verify(cs, cs.ServerName, x509.ExtKeyUsageServerAuth)
}

// VerifyClient is a server's tls.Config.VerifyConnection: the client's
// chain against the bundle in use (with ClientAuth RequireAnyClientCert;
// ServerConfig sets both).
func (w *Watcher) VerifyClient(cs tls.ConnectionState) error {
	return w.verify(cs, "", x509.ExtKeyUsageClientAuth)
}

// ServerConfig is a mutual-TLS server's configuration: it presents the
// certificate in use and requires client certificates that verify against
// the bundle in use.
func (w *Watcher) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:       tls.VersionTLS12,
		GetCertificate:   w.GetCertificate,
		ClientAuth:       tls.RequireAnyClientCert,
		VerifyConnection: w.VerifyClient,
	}
}

// ClientConfig is a client's configuration for serverName: it verifies the
// server against the bundle in use and presents the certificate in use
// when asked. InsecureSkipVerify only turns off the static roots, which
// cannot be reloaded; VerifyServer verifies every connection instead.
func (w *Watcher) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		ServerName:           serverName,
		InsecureSkipVerify:   true, //nolint:gosec // verified in VerifyConnection
		GetClientCertificate: w.GetClientCertificate,
		VerifyConnection:     w.VerifyServer,
	}
}
