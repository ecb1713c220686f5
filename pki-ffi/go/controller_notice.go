package pki

// The C side of ControllerOptions.Notice: the notice callback of
// pki_controller_run, exported to C. This file's preamble may only
// declare (cgo copies it into two C files); the trampoline that C calls is
// defined in controller.go.

/*
#include <stdint.h>
#include <stddef.h>
*/
import "C"

import "runtime/cgo"

//export pkiGoControllerNotice
func pkiGoControllerNotice(notice C.uintptr_t, message *C.char, messageLen C.size_t) {
	// A Go panic must not unwind through the library's frames.
	defer func() { _ = recover() }()
	f := cgo.Handle(notice).Value().(func(string))
	f(C.GoStringN(message, C.int(messageLen)))
}
