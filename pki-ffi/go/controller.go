package pki

/*
#include <stdint.h>
#include "pki.h"

// Defined in controller_notice.go (//export): hands a notice to the Go
// function behind the handle.
extern void pkiGoControllerNotice(uintptr_t notice, char *message, size_t message_len);

static void pki_go_notice(void *user_data, const char *message, size_t message_len) {
	pkiGoControllerNotice(*(uintptr_t *)user_data, (char *)message, message_len);
}

// Runs the controller with the Go notice function behind `notice` (0:
// none). user_data points to this frame's copy of the handle: the library
// calls the notice only during the run, so no Go pointer is kept by C.
static pki_result pki_go_run_controller(const char *location, size_t location_len,
                                        const char *options, size_t options_len,
                                        const pki_controller_stop *stop, uintptr_t notice) {
	uintptr_t handle = notice;
	return pki_controller_run(location, location_len, options, options_len, stop,
	                          notice == 0 ? NULL : pki_go_notice, &handle);
}
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"runtime/cgo"
	"time"
)

// ControllerOptions is how RunController runs. The zero value runs with
// the defaults of `pki controller`: annotations under pki.invalid/, a
// resync every 10 minutes, leader election on a 15 s Lease, the system
// clock, kubectl's credentials.
type ControllerOptions struct {
	// AnnotationPrefix is the prefix of the annotations read and written,
	// a DNS subdomain and "/" ("": pki.invalid/).
	AnnotationPrefix string
	// Resync is the longest pause between two passes, changes or not: a
	// safety net for a watch that missed something (0: 10 minutes).
	Resync time.Duration
	// LeaseDuration is how long a replica's hold on the leader Lease
	// (NAME.controller in the store's namespace) lasts without renewal:
	// the longest a dead leader keeps the others waiting (0: 15 s).
	LeaseDuration time.Duration
	// NoLeaderElection makes every replica act, not only the Lease's
	// holder (still safe: the store is written by compare-and-swap).
	NoLeaderElection bool
	// Identity is this replica's name in the Lease and on its Events,
	// 1 to 128 bytes ("": $HOSTNAME, a Pod's name, and a random suffix).
	Identity string
	// StoreKey is the store key the store's private material is sealed
	// under (the contents of a `pki store-key new` file); nil: none.
	StoreKey []byte
	// Kubeconfig is the kubeconfig file to use ("": $KUBECONFIG or
	// ~/.kube/config, then the in-cluster service account).
	Kubeconfig string
	// ConnectTimeout and RequestTimeout bound connecting to the API
	// server and each request (0: the store's defaults).
	ConnectTimeout time.Duration
	RequestTimeout time.Duration
	// Now freezes the controller's clock at this instant: for tests only
	// (zero: the system clock).
	Now time.Time
	// Notice receives the controller's notices: what it did (a rotation,
	// a Secret written, the Lease taken), what it refused and why, a pass
	// that failed (it keeps going). Called from a thread of the library,
	// one call at a time and never after RunController returned; it must
	// return promptly. A panic in it is recovered and the notice dropped.
	// nil: notices are dropped.
	Notice func(message string)
}

type controllerOptionsJSON struct {
	AnnotationPrefix     string `json:"annotation_prefix,omitempty"`
	ResyncSeconds        int64  `json:"resync_seconds,omitempty"`
	LeaderElection       *bool  `json:"leader_election,omitempty"`
	LeaseDurationSeconds int64  `json:"lease_duration_seconds,omitempty"`
	Identity             string `json:"identity,omitempty"`
	Now                  *int64 `json:"now,omitempty"`
	StoreKey             string `json:"store_key,omitempty"`
	KubeconfigFile       string `json:"kubeconfig_file,omitempty"`
	ConnectTimeout       int64  `json:"connect_timeout_seconds,omitempty"`
	RequestTimeout       int64  `json:"request_timeout_seconds,omitempty"`
}

func (o *ControllerOptions) toJSON() ([]byte, error) {
	j := controllerOptionsJSON{
		AnnotationPrefix:     o.AnnotationPrefix,
		ResyncSeconds:        wholeSeconds(o.Resync),
		LeaseDurationSeconds: wholeSeconds(o.LeaseDuration),
		Identity:             o.Identity,
		StoreKey:             string(o.StoreKey),
		KubeconfigFile:       o.Kubeconfig,
		ConnectTimeout:       wholeSeconds(o.ConnectTimeout),
		RequestTimeout:       wholeSeconds(o.RequestTimeout),
	}
	if o.NoLeaderElection {
		off := false
		j.LeaderElection = &off
	}
	if !o.Now.IsZero() {
		now := o.Now.Unix()
		j.Now = &now
	}
	return json.Marshal(j)
}

// RunController runs the service-CA controller on the kube:// store at
// url (kube://[CONTEXT@]NAMESPACE/NAME, holding a signer at DefaultKey:
// `pki init`, or Store.Create) until ctx is cancelled; then it finishes
// the request under way, gives up the leader Lease so that another
// replica takes over at once, and returns nil. It is the loop of `pki
// controller`, run by the C library on threads of its own
// (pki_controller_run); the calling goroutine waits in it.
//
// The loop steps the signer, rotating when due. Each Service annotated
// PREFIX serving-cert-secret-name: SECRET gets a kubernetes.io/tls Secret
// SECRET in its namespace (tls.crt the serving chain for SVC.NS.svc and
// SVC.NS.svc.cluster.local, tls.key, ca.crt), re-issued on rotation,
// expiry or a change of the Service; a Secret of that name pki did not
// create is never touched. Each ConfigMap annotated PREFIX
// inject-cabundle: "true" gets the store's whole bundle (current,
// previous and bridge while trusted, never only the new CA) under
// ca-bundle.crt and service-ca.crt, and so does every caBundle of a
// webhook configuration, an APIService or a CRD's conversion webhook
// annotated so. Between passes it sleeps until the next rotation or
// renewal is due, a watched object changes, or opts.Resync passes. Of
// several replicas, the one holding the Lease acts; every write to the
// store is a compare-and-swap all the same, so two replicas acting at
// once lose nothing.
//
// It fails only before the loop starts: a malformed URL or options
// (ErrInvalidArgument), an API server that cannot be reached or refuses
// the account (ErrStore), no signer in the store (ErrNotInitialized).
// Once running, a failed pass is a Notice and is tried again. When ctx
// is already done, it returns nil without connecting (the options are
// still checked).
func RunController(ctx context.Context, url string, opts ControllerOptions) error {
	options, err := opts.toJSON()
	if err != nil {
		return err
	}
	// The options may hold the store key: zeroed once the run is over.
	defer clear(options)
	var stop *C.pki_controller_stop
	if err := call(func() C.pki_result { return C.pki_controller_stop_new(&stop) }); err != nil {
		return err
	}
	defer C.pki_controller_stop_free(stop)
	var notice cgo.Handle
	if opts.Notice != nil {
		notice = cgo.NewHandle(opts.Notice)
		defer notice.Delete()
	}
	if ctx.Err() != nil {
		// Requested before the run: it returns at once, whatever else is
		// ready.
		C.pki_controller_stop_request(stop)
	}
	// Requests the stop when ctx ends; done when the run returned, so
	// that the stop is not used after it is freed.
	returned := make(chan struct{})
	watcher := make(chan struct{})
	go func() {
		defer close(watcher)
		select {
		case <-ctx.Done():
			C.pki_controller_stop_request(stop)
		case <-returned:
		}
	}()
	up, un := strArg(url)
	op, on := inputArg(options)
	err = call(func() C.pki_result {
		return C.pki_go_run_controller(up, un, op, on, stop, C.uintptr_t(notice))
	})
	close(returned)
	<-watcher
	runtime.KeepAlive(url)
	runtime.KeepAlive(options)
	var e *Error
	if err != nil && ctx.Err() != nil && errors.As(err, &e) {
		e.cause = ctx.Err()
	}
	return err
}
