package pki

/*
#include "pki.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"runtime"
)

// PKCS11Options is how a store reaches the PKCS#11 tokens that hold CA
// keys: the module (the token's .so, such as
// /usr/lib/softhsm/libsofthsm2.so) and its user PIN, given as a file
// holding it (PINFile: one line, its final line break dropped) or as text
// (PIN), not both. The CLI reads the same from PKI_PKCS11_MODULE and
// PKI_PKCS11_PIN_FILE.
type PKCS11Options struct {
	Module  string
	PINFile string
	PIN     string
}

type pkcs11OptionsJSON struct {
	Module  string `json:"pkcs11_module,omitempty"`
	PINFile string `json:"pkcs11_pin_file,omitempty"`
	PIN     string `json:"pkcs11_pin,omitempty"`
}

// OpenTokenStore opens the store location names, as OpenStore, with the
// PKCS#11 module of opts loaded now (a wrong path is ErrPKCS11). Every
// document of the store whose CA key is in a token signs, makes and
// destroys its keys through it, logging in to a token the first time one
// of its keys is needed; a signer created with SignerSpec.KeyStore makes
// its CA key there. Opened without a module (OpenStore), such a document
// refuses to sign with ErrPKCS11NotOpen, before anything is written.
func OpenTokenStore(ctx context.Context, location string, opts PKCS11Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	options, err := json.Marshal(pkcs11OptionsJSON(opts))
	if err != nil {
		return nil, err
	}
	// The options may hold the PIN: zero them once the library has read them.
	defer clear(options)
	var out *C.pki_store
	p, n := strArg(location)
	op, on := inputArg(options)
	err = call(func() C.pki_result { return C.pki_store_open(p, n, op, on, &out) })
	runtime.KeepAlive(location)
	runtime.KeepAlive(options)
	if err != nil {
		return nil, err
	}
	return newStore(out), nil
}
