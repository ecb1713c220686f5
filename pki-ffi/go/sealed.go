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

// OpenSealedStore opens the store location names, as OpenStore, with every
// document's private keys and credentials sealed under storeKey (the
// contents of a key file made by `pki store-key new`; keep it 0600) before
// they reach the store, and opened when read. Certificates and bundles
// stay in clear. In a directory store the files consumers read where they
// are (leaf keys, keys/active.key, creds/NAME/current) stay in clear;
// etcd and memory stores seal everything private. A value sealed under
// another key is ErrStore, before anything is written.
func OpenSealedStore(ctx context.Context, location string, storeKey []byte) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if storeKey == nil {
		return nil, &Error{Code: CodeNullParameter, Message: "parameter `store_key` is NULL"}
	}
	options, err := json.Marshal(etcdOptionsJSON{StoreKey: string(storeKey)})
	if err != nil {
		return nil, err
	}
	// The options hold the store key: zero them once the library has read them.
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
