package pki

// #include "pki.h"
import "C"

import (
	"context"
	"runtime"
	"time"
)

// EtcdOptions is how OpenEtcdStore reaches etcd: TLS material, an etcd user
// and time limits. Each piece of TLS material is given as PEM (CAPEM,
// CertPEM, KeyPEM) or as a file the library reads (CAFile, CertFile,
// KeyFile), not both; the password likewise (Password or PasswordFile,
// whose final line break is dropped). The zero value is a plaintext
// connection with the default limits (5 s).
type EtcdOptions struct {
	// The CA bundle that verifies the servers: required for etcds://.
	CAPEM  []byte
	CAFile string
	// The client certificate chain and its key, for an etcd started with
	// --client-cert-auth.
	CertPEM  []byte
	CertFile string
	KeyPEM   []byte
	KeyFile  string
	// An etcd user, when etcd has authentication enabled.
	User         string
	Password     string
	PasswordFile string
	// How long connecting, and each request, may take (0: 5 s).
	ConnectTimeout time.Duration
	RequestTimeout time.Duration
}

type etcdOptionsJSON struct {
	StoreKey       string `json:"store_key,omitempty"`
	CAPEM          string `json:"ca_pem,omitempty"`
	CAFile         string `json:"ca_file,omitempty"`
	CertPEM        string `json:"cert_pem,omitempty"`
	CertFile       string `json:"cert_file,omitempty"`
	KeyPEM         string `json:"key_pem,omitempty"`
	KeyFile        string `json:"key_file,omitempty"`
	User           string `json:"user,omitempty"`
	Password       string `json:"password,omitempty"`
	PasswordFile   string `json:"password_file,omitempty"`
	ConnectTimeout int64  `json:"connect_timeout_seconds,omitempty"`
	RequestTimeout int64  `json:"request_timeout_seconds,omitempty"`
}

// wholeSeconds rounds a positive limit up to whole seconds (0 stays the default).
func wholeSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// OpenEtcdStore opens the etcd store at url: etcd://HOST:PORT[,HOST:PORT...]/PREFIX,
// or etcds://... over TLS with opts' CA bundle and, when etcd asks for one,
// its client certificate; with opts.User, as that etcd user. The server is
// contacted here within the connect timeout: a wrong CA, a refused client
// certificate, a bad password or an unreachable server is ErrStore now, with
// one line saying which; a malformed URL or options ErrInvalidArgument.
// ctx is checked before the store is opened; opening is not interrupted once
// started (it is bounded by the connect timeout).
func OpenEtcdStore(ctx context.Context, url string, opts EtcdOptions) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	request, err := jsonArg(etcdOptionsJSON{
		CAPEM:          string(opts.CAPEM),
		CAFile:         opts.CAFile,
		CertPEM:        string(opts.CertPEM),
		CertFile:       opts.CertFile,
		KeyPEM:         string(opts.KeyPEM),
		KeyFile:        opts.KeyFile,
		User:           opts.User,
		Password:       opts.Password,
		PasswordFile:   opts.PasswordFile,
		ConnectTimeout: wholeSeconds(opts.ConnectTimeout),
		RequestTimeout: wholeSeconds(opts.RequestTimeout),
	})
	if err != nil {
		return nil, err
	}
	// The marshalled options may hold a key or a password: wiped once used.
	defer clear(request)
	up, un := strArg(url)
	op, on := inputArg(request)
	var out *C.pki_store
	err = call(func() C.pki_result { return C.pki_store_open(up, un, op, on, &out) })
	runtime.KeepAlive(url)
	runtime.KeepAlive(request)
	if err != nil {
		return nil, err
	}
	return newStore(out), nil
}
