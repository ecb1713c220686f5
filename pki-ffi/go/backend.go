package pki

// The C side of a SecretBackend store: the callbacks of
// pki_store_new_callbacks, exported to C. This file's preamble may only
// declare (cgo copies it into two C files); the trampolines that C calls
// are defined in store.go.

/*
#include <stdint.h>
#include "pki.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/cgo"
	"unsafe"
)

func backendOf(h C.uintptr_t) *boundBackend {
	return cgo.Handle(h).Value().(*boundBackend)
}

// replyMessage explains a failure to the library, which puts it in the
// step's error.
func replyMessage(reply *C.pki_store_reply, message string) {
	p, n := strArg(message)
	C.pki_store_reply_set_message(reply, p, n)
	runtime.KeepAlive(message)
}

// failed answers a backend error: ErrConflict is a lost compare-and-swap
// (the step retries), anything else a broken backend.
func failed(reply *C.pki_store_reply, what string, err error) C.uint32_t {
	replyMessage(reply, fmt.Sprintf("%s: %v", what, err))
	if errors.Is(err, ErrConflict) {
		return C.PKI_RESULT_CONFLICT
	}
	return C.PKI_RESULT_STORE
}

// recovered turns a panic of the backend into a failure: a Go panic must
// not unwind through the C frames between the library and this callback.
func recovered(reply *C.pki_store_reply, what string, code *C.uint32_t) {
	if r := recover(); r != nil {
		replyMessage(reply, fmt.Sprintf("%s panicked: %v", what, r))
		*code = C.PKI_RESULT_PANIC
	}
}

// answer sets the reply: data (nil for a put) and the revision.
func answer(reply *C.pki_store_reply, data *C.pki_secret, revision string) error {
	p, n := strArg(revision)
	err := call(func() C.pki_result {
		return C.pki_store_reply_set(reply, data, (*C.uint8_t)(unsafe.Pointer(p)), n)
	})
	runtime.KeepAlive(revision)
	return err
}

//export pkiGoBackendGet
func pkiGoBackendGet(backend C.uintptr_t, key *C.char, keyLen C.size_t, reply *C.pki_store_reply) (code C.uint32_t) {
	defer recovered(reply, "SecretBackend.Get", &code)
	b := backendOf(backend)
	data, revision, found, err := b.backend.Get(b.ctx, C.GoStringN(key, C.int(keyLen)))
	if err != nil {
		return failed(reply, "SecretBackend.Get", err)
	}
	if !found {
		return C.PKI_RESULT_OK
	}
	sec, err := newCSecret(data)
	if err != nil {
		return failed(reply, "SecretBackend.Get data", err)
	}
	defer C.pki_secret_free(sec)
	if err := answer(reply, sec, revision); err != nil {
		return failed(reply, "SecretBackend.Get answer", err)
	}
	return C.PKI_RESULT_OK
}

//export pkiGoBackendPut
func pkiGoBackendPut(backend C.uintptr_t, key *C.char, keyLen C.size_t, expected *C.uint8_t, expectedLen C.size_t, data *C.pki_secret, reply *C.pki_store_reply) (code C.uint32_t) {
	defer recovered(reply, "SecretBackend.Put", &code)
	exp := ""
	if expected != nil {
		exp = C.GoStringN((*C.char)(unsafe.Pointer(expected)), C.int(expectedLen))
	}
	values, err := secretData(data)
	if err != nil {
		return failed(reply, "SecretBackend.Put data", err)
	}
	b := backendOf(backend)
	revision, err := b.backend.Put(b.ctx, C.GoStringN(key, C.int(keyLen)), exp, values)
	if err != nil {
		return failed(reply, "SecretBackend.Put", err)
	}
	if revision == "" {
		replyMessage(reply, "SecretBackend.Put returned an empty revision")
		return C.PKI_RESULT_STORE
	}
	if err := answer(reply, nil, revision); err != nil {
		return failed(reply, "SecretBackend.Put revision", err)
	}
	return C.PKI_RESULT_OK
}

//export pkiGoBackendRelease
func pkiGoBackendRelease(backend C.uintptr_t) {
	cgo.Handle(backend).Delete()
}

// newCSecret copies Secret data into a pki_secret the caller frees.
func newCSecret(data map[string][]byte) (*C.pki_secret, error) {
	var sec *C.pki_secret
	if err := call(func() C.pki_result { return C.pki_secret_new(&sec) }); err != nil {
		return nil, err
	}
	for k, v := range data {
		kp, kn := strArg(k)
		vp, vn := bytesArg(v)
		err := call(func() C.pki_result { return C.pki_secret_set(sec, kp, kn, vp, vn) })
		runtime.KeepAlive(k)
		runtime.KeepAlive(v)
		if err != nil {
			C.pki_secret_free(sec)
			return nil, err
		}
	}
	return sec, nil
}

// secretData copies a pki_secret's entries into Go memory.
func secretData(sec *C.pki_secret) (map[string][]byte, error) {
	n := int(C.pki_secret_len(sec))
	data := make(map[string][]byte, n)
	for i := 0; i < n; i++ {
		var k, v C.pki_bytes
		if err := call(func() C.pki_result { return C.pki_secret_entry(sec, C.size_t(i), &k, &v) }); err != nil {
			return nil, err
		}
		data[string(goBytes(k))] = goBytes(v)
	}
	return data, nil
}
