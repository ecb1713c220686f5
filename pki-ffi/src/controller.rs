//! The service-CA controller through the C ABI: `pki_controller_run` runs
//! pki-kube's controller loop (`pki_kube::controller`, what `pki
//! controller` runs) on a `kube://` store, on a tokio runtime of its own,
//! until the caller asks it to stop through a `pki_controller_stop` from
//! another thread.
//!
//! The stop is a handle like every other object of the library (made by
//! `pki_controller_stop_new`, freed once by `pki_controller_stop_free`),
//! shared between the thread blocked in `pki_controller_run` and the one
//! that calls `pki_controller_stop_request`. It is a latch: once requested,
//! every run given it returns, at once if it had not started yet. That is
//! what a Go context is (cancelled once, for good), and it makes a stop
//! requested before the run began impossible to lose.

use crate::abi::{free, handle, into_handle, opt_bytes, str_in, time_in};
use crate::error::{Failure, pki_result};
use pki_kube::KubeUrl;
use pki_kube::controller::{Clock, Controller, ControllerError, ControllerOptions, NoticeFn};
use pki_rotate::request;
use serde::Deserialize;
use std::ffi::{c_char, c_void};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use zeroize::Zeroizing;

/// Stops `pki_controller_run` from another thread: a latch, requested once
/// for good (`pki_controller_stop_request`). One stop may be given to
/// several runs, which it stops together.
///
/// Safe to use from several threads at once. Free it with
/// `pki_controller_stop_free` once no run given it is still running.
pub struct pki_controller_stop {
    /// `true` once a stop was requested. A watch channel keeps the value,
    /// so a run that subscribes after the request still sees it.
    requested: watch::Sender<bool>,
}

impl pki_controller_stop {
    /// Resolves once a stop is requested (or the handle is gone, which
    /// the contract forbids during a run: stopping is the safe reading).
    fn requested(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut receiver = self.requested.subscribe();
        async move {
            let _ = receiver.wait_for(|requested| *requested).await;
        }
    }
}

/// Receives the controller's notices: what it did (a rotation, a Secret
/// written, the Lease taken), what it refused and why, a pass that failed
/// (it keeps going and tries again).
///
/// `message` is `message_len` bytes of UTF-8, also NUL-terminated, borrowed
/// for the call. Called on one of the library's threads, never two at
/// once, and never after `pki_controller_run` returned. It must return
/// promptly (the loop waits for it) and must not unwind (no C++
/// exception, no `longjmp`, no Go panic). It may call
/// `pki_controller_stop_request`.
pub type pki_controller_notice = Option<
    unsafe extern "C" fn(user_data: *mut c_void, message: *const c_char, message_len: usize),
>;

/// Makes a stop for `pki_controller_run`, not requested yet.
///
/// On success the caller owns `*out_stop` and frees it with
/// `pki_controller_stop_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER` or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `out_stop` must be NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_controller_stop_new(
    out_stop: *mut *mut pki_controller_stop,
) -> pki_result {
    ffi!(out_stop => {} {
        let (requested, _) = watch::channel(false);
        Ok::<_, Failure>(into_handle(pki_controller_stop { requested }))
    })
}

/// Requests the stop: every `pki_controller_run` given `stop` finishes the
/// request it is making, gives up the leader Lease and returns
/// `PKI_RESULT_OK`; a run started later returns at once. Requesting again
/// does nothing. Returns without waiting for the runs: the caller waits
/// for `pki_controller_run` to return (joins its thread).
///
/// May be called from any thread, and from a notice callback.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER` or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `stop` must be NULL or a live `pki_controller_stop`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_controller_stop_request(
    stop: *const pki_controller_stop,
) -> pki_result {
    ffi!({
        stop = handle(stop, "stop");
    } {
        // Kept even with no run listening yet: a run started later stops.
        stop.requested.send_replace(true);
        Ok(())
    })
}

/// Frees a stop. NULL is accepted (nothing happens).
///
/// No `pki_controller_run` given `stop` may still be running, nor any other
/// call on it; it must not be used afterwards.
///
/// # Safety
///
/// `stop` must be NULL or a live `pki_controller_stop` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_controller_stop_free(stop: *mut pki_controller_stop) {
    // SAFETY: NULL or a live handle freed once (contract).
    unsafe { free(stop) }
}

/// The options of `pki_controller_run`, every one optional.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunOptions {
    /// The prefix of the annotations read and written (`pki.invalid/`).
    annotation_prefix: Option<String>,
    /// The longest pause between two passes, changes or not (600).
    resync_seconds: Option<u64>,
    /// Whether replicas elect a leader on the Lease (true).
    leader_election: Option<bool>,
    /// How long a hold on the Lease lasts without renewal (15).
    lease_duration_seconds: Option<u64>,
    /// This replica's name in the Lease and on its Events.
    identity: Option<String>,
    /// A frozen clock, in Unix seconds (tests).
    now: Option<i64>,
    /// The store's sealing key and its access, as for `pki_store_open`.
    store_key: Option<Zeroizing<String>>,
    store_key_file: Option<String>,
    kubeconfig_file: Option<String>,
    connect_timeout_seconds: Option<u64>,
    request_timeout_seconds: Option<u64>,
}

/// The longest identity: an Event's `reportingInstance` holds 128 bytes.
const MAX_IDENTITY_LEN: usize = 128;

/// A positive number of seconds, or the default when not given.
fn seconds(given: Option<u64>, default: Duration, field: &str) -> Result<Duration, Failure> {
    match given {
        None => Ok(default),
        Some(0) => Err(Failure::invalid(format!(
            "parameter `options`: `{field}` must be positive"
        ))),
        Some(s) => Ok(Duration::from_secs(s)),
    }
}

impl RunOptions {
    /// The controller's options, with pki-kube's defaults for what is not
    /// given.
    fn controller(&self) -> Result<ControllerOptions, Failure> {
        let defaults = ControllerOptions::default();
        if let Some(identity) = &self.identity {
            check_identity(identity)?;
        }
        let positive = |given: Option<u64>, field: &str| -> Result<Option<u64>, Failure> {
            seconds(given, Duration::ZERO, field).map(|_| given)
        };
        let store = crate::open::kube_options(
            self.kubeconfig_file.as_deref(),
            positive(self.connect_timeout_seconds, "connect_timeout_seconds")?,
            positive(self.request_timeout_seconds, "request_timeout_seconds")?,
        );
        Ok(ControllerOptions {
            annotation_prefix: self
                .annotation_prefix
                .clone()
                .unwrap_or(defaults.annotation_prefix),
            resync: seconds(self.resync_seconds, defaults.resync, "resync_seconds")?,
            leader_election: self.leader_election.unwrap_or(defaults.leader_election),
            lease_duration: seconds(
                self.lease_duration_seconds,
                defaults.lease_duration,
                "lease_duration_seconds",
            )?,
            identity: self.identity.clone(),
            clock: match self.now {
                Some(now) => Clock::Frozen(time_in(now, "options.now")?),
                None => Clock::Real,
            },
            store,
            notice: None,
        })
    }
}

/// An identity a Lease and an Event accept: 1 to 128 bytes, no control
/// characters.
fn check_identity(identity: &str) -> Result<(), Failure> {
    if identity.is_empty()
        || identity.len() > MAX_IDENTITY_LEN
        || identity.chars().any(char::is_control)
    {
        return Err(Failure::invalid(format!(
            "parameter `options`: `identity` must be 1 to {MAX_IDENTITY_LEN} bytes without \
             control characters, got {identity:?}"
        )));
    }
    Ok(())
}

/// The caller's notice callback, called one message at a time and never
/// after the run returned.
struct CallbackNotice {
    notice: unsafe extern "C" fn(*mut c_void, *const c_char, usize),
    user_data: *mut c_void,
    /// Held during each call; `true` once the run returned.
    closed: Mutex<bool>,
}

// SAFETY: `user_data` is only passed back to the caller's callback, whose
// contract (on `pki_controller_run`) is to accept calls from the
// library's threads; the mutex makes them one at a time.
unsafe impl Send for CallbackNotice {}
// SAFETY: as above; `&CallbackNotice` only calls the callback, under the
// mutex.
unsafe impl Sync for CallbackNotice {}

impl CallbackNotice {
    fn call(&self, message: &str) {
        let closed = self.closed.lock().unwrap_or_else(|e| e.into_inner());
        if *closed {
            return;
        }
        let mut text = Vec::with_capacity(message.len() + 1);
        text.extend_from_slice(message.as_bytes());
        text.push(0);
        // SAFETY: the caller's callback with its user_data, during the run
        // (not closed); the message is a local, valid and NUL-terminated
        // for the call.
        unsafe { (self.notice)(self.user_data, text.as_ptr().cast(), message.len()) };
    }

    /// No call after this returns: it waits for one under way.
    fn close(&self) {
        *self.closed.lock().unwrap_or_else(|e| e.into_inner()) = true;
    }
}

/// Closes the notice when the run ends, however it ends (a panic too).
struct CloseOnDrop(Option<Arc<CallbackNotice>>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if let Some(notice) = &self.0 {
            notice.close();
        }
    }
}

/// Runs the service-CA controller on the `kube://[CONTEXT@]NAMESPACE/NAME`
/// store `location` names (`location_len` bytes of UTF-8, no NUL needed),
/// blocking the calling thread until `stop` is requested from another one
/// (`pki_controller_stop_request`); then it finishes the request under
/// way, gives up the leader Lease so that another replica takes over at
/// once, and returns `PKI_RESULT_OK`. It is the loop of `pki controller`
/// (pki-kube's `pki_kube::controller`), which a Rust program embeds on its
/// own runtime: this call makes a tokio runtime of its own (two threads),
/// shut down before it returns.
///
/// The store must hold a signer at the key `signer` (made by `pki init`, or
/// `pki_document_create` with `PKI_KIND_SIGNER`). The loop steps it,
/// rotating when due; each Service annotated `PREFIX
/// serving-cert-secret-name: SECRET` gets a `kubernetes.io/tls` Secret
/// SECRET in its namespace (`tls.crt` the serving chain for `SVC.NS.svc`
/// and `SVC.NS.svc.cluster.local`, `tls.key`, `ca.crt`), re-issued on
/// rotation, expiry or a change of the Service; a Secret of that name pki
/// did not create is never touched. Each ConfigMap annotated `PREFIX
/// inject-cabundle: "true"` gets the store's whole bundle (current,
/// previous and bridge while trusted) under `ca-bundle.crt` and
/// `service-ca.crt`, and so does every `caBundle` of a webhook
/// configuration, an APIService or a CRD's conversion webhook annotated
/// so. Between passes it sleeps until the engine's next wake, a change to
/// a watched object, or the resync period. Of several replicas, the one
/// holding the Lease `NAME.controller` in the store's namespace acts; every
/// write to the document is a compare-and-swap all the same.
///
/// `options` is JSON (`options_len` bytes; NULL or `{}`: the defaults):
///
/// ```json
/// {"annotation_prefix": "pki.invalid/", "resync_seconds": 600,
///  "leader_election": true, "lease_duration_seconds": 15,
///  "identity": "my-pod", "now": 1767225600,
///  "store_key_file": "/etc/pki/store.key",
///  "kubeconfig_file": "/etc/pki/kubeconfig",
///  "connect_timeout_seconds": 5, "request_timeout_seconds": 5}
/// ```
///
/// - `annotation_prefix`: the prefix of the annotations read and written,
///   a DNS subdomain and `/` (`pki.invalid/`, like the Go module's path);
/// - `resync_seconds`: the longest pause between passes, changes or not
///   (600, as client-go's informers);
/// - `leader_election`: whether replicas elect a leader (true); off, every
///   replica acts (still safe: the document is written by compare-and-swap);
/// - `lease_duration_seconds`: how long a hold on the Lease lasts without
///   renewal, the longest a dead leader keeps the others waiting (15);
/// - `identity`: this replica's name in the Lease and on its Events (1 to
///   128 bytes; by default `HOSTNAME`, a Pod's name, and a random suffix);
/// - `now`: a frozen clock, in Unix seconds, for tests only (by default the
///   system clock);
/// - `store_key_file` or `store_key`, `kubeconfig_file`, the timeouts: as
///   for `pki_store_open` with a `kube://` location.
///
/// `notice` (NULL: none) receives the controller's notices with
/// `user_data`, as `pki_controller_notice` says; the library never
/// dereferences `user_data`.
///
/// A pass that fails once running (the API server restarting, a request
/// refused) is a notice and is tried again; the call fails only before
/// the loop starts.
///
/// Returns `PKI_RESULT_OK` (stopped), `PKI_RESULT_NULL_PARAMETER`
/// (`location` or `stop` NULL), `PKI_RESULT_INVALID_ARGUMENT` (a location
/// that is not a valid `kube://` URL, malformed options, a bad annotation
/// prefix or identity, a zero duration), `PKI_RESULT_TIME` (`now` out of
/// range), `PKI_RESULT_STORE` (the API server cannot be reached or refuses
/// the account, a store key that is not one), `PKI_RESULT_NOT_INITIALIZED`
/// (no signer in the store), another code of the stored signer's load
/// (`PKI_RESULT_CORRUPT_STATE`…), `PKI_RESULT_UNEXPECTED` (no runtime
/// could be started) or `PKI_RESULT_PANIC`. The options are checked
/// before the stop: misuse is reported even when the stop was requested
/// already.
///
/// # Safety
///
/// `location` must be NULL or valid for `location_len` bytes and `options`
/// NULL or valid for `options_len` bytes, during the call; `stop` NULL or
/// a live `pki_controller_stop`, not freed before this returns; `notice`
/// NULL or a function following the contract of `pki_controller_notice`
/// with `user_data`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_controller_run(
    location: *const c_char,
    location_len: usize,
    options: *const c_char,
    options_len: usize,
    stop: *const pki_controller_stop,
    notice: pki_controller_notice,
    user_data: *mut c_void,
) -> pki_result {
    ffi!({
        location = str_in(location, location_len, "location");
        options = opt_bytes(options.cast::<u8>(), options_len, "options");
        stop = handle(stop, "stop");
    } {
        let notice = notice.map(|notice| {
            Arc::new(CallbackNotice {
                notice,
                user_data,
                closed: Mutex::new(false),
            })
        });
        let _close = CloseOnDrop(notice.clone());
        run(location, options, stop, notice)
    })
}

/// The body of `pki_controller_run`.
fn run(
    location: &str,
    options: Option<&[u8]>,
    stop: &pki_controller_stop,
    notice: Option<Arc<CallbackNotice>>,
) -> Result<(), Failure> {
    let url = kube_url(location)?;
    let given: RunOptions = request::from_json_or_default("parameter `options`", options)?;
    let mut options = given.controller()?;
    let keys = crate::open::sealing_keys(
        given.store_key.as_deref().map(String::as_str),
        given.store_key_file.as_deref(),
    )?;
    options.notice = notice.map(|notice| -> NoticeFn { Arc::new(move |m: &str| notice.call(m)) });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("pki-controller")
        .enable_all()
        .build()
        .map_err(|e| {
            Failure::new(
                pki_result::PKI_RESULT_UNEXPECTED,
                format!("cannot start a tokio runtime for the controller: {e}"),
            )
        })?;
    let outcome = runtime.block_on(serve(url, options, keys, stop));
    // The watch tasks end with the controller; nothing else should be
    // left, and nothing is waited on for long.
    runtime.shutdown_timeout(SHUTDOWN_WAIT);
    outcome
}

/// The longest the runtime's shutdown waits for tasks still running.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

/// Connects, opens the store as every `kube://` store is opened (leaf keys
/// in clear, for their Secrets publish them; everything else private
/// sealed), and runs the controller until `stop`. A stop during the
/// connection returns at once.
async fn serve(
    url: KubeUrl,
    options: ControllerOptions,
    keys: pki_rotate::SealingKeys,
    stop: &pki_controller_stop,
) -> Result<(), Failure> {
    let setup = async {
        let client = pki_kube::controller::connect(&url, &options.store).await?;
        let store = pki_kube::AsyncKubeStore::open(&url, options.store.clone()).await?;
        let store = pki_rotate::SealedStore::new(store, keys, crate::abi::os_rng(), true)
            .clear_only(pki_rotate::is_published_leaf_key);
        Controller::with_store(client, &url, store, options).map_err(controller_failure)
    };
    let controller = tokio::select! {
        // A stop already requested wins over the connection.
        biased;
        () = stop.requested() => return Ok(()),
        controller = setup => controller?,
    };
    controller
        .run(stop.requested())
        .await
        .map_err(controller_failure)
}

/// The `kube://` URL `location` names.
fn kube_url(location: &str) -> Result<KubeUrl, Failure> {
    if !pki_kube::is_kube_url(location) {
        return Err(Failure::invalid(format!(
            "parameter `location`: the controller runs on a kube://[CONTEXT@]NAMESPACE/NAME store, \
             not {location:?}"
        )));
    }
    KubeUrl::parse(location).map_err(|e| Failure::invalid(format!("parameter `location`: {e}")))
}

/// The code and message of a controller that could not start.
fn controller_failure(e: ControllerError) -> Failure {
    match e {
        ControllerError::Store(e) => Failure::from(e),
        ControllerError::Prefix(_) => Failure::invalid(format!("option `annotation_prefix`: {e}")),
        other => Failure::new(pki_result::PKI_RESULT_UNEXPECTED, other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::pki_result::*;

    /// The code and message `options` are refused with.
    fn refused(options: &str) -> (pki_result, String) {
        let given: Result<RunOptions, Failure> =
            request::from_json_or_default("parameter `options`", Some(options.as_bytes()))
                .map_err(Failure::from);
        match given.and_then(|g| g.controller()) {
            Ok(_) => panic!("{options} was accepted"),
            Err(f) => (f.code, f.message),
        }
    }

    #[test]
    fn options_default_to_the_controllers_and_refuse_what_cannot_run() {
        let defaults = RunOptions::default().controller().unwrap();
        assert_eq!(defaults.annotation_prefix, "pki.invalid/");
        assert_eq!(defaults.resync, Duration::from_secs(600));
        assert_eq!(defaults.clock, Clock::Real);
        assert!(defaults.leader_election);
        for (options, field) in [
            (r#"{"resync_seconds": 0}"#, "resync_seconds"),
            (r#"{"lease_duration_seconds": 0}"#, "lease_duration_seconds"),
            (
                r#"{"request_timeout_seconds": 0}"#,
                "request_timeout_seconds",
            ),
            (r#"{"identity": ""}"#, "identity"),
            (r#"{"identity": "a\nb"}"#, "identity"),
            (r#"{"resync": 5}"#, "resync"),
        ] {
            let (code, message) = refused(options);
            assert_eq!(code, PKI_RESULT_INVALID_ARGUMENT, "{options}");
            assert!(message.contains(field), "{options}: {message}");
        }
        let (code, _) = refused(r#"{"now": 9223372036854775807}"#);
        assert_eq!(code, PKI_RESULT_TIME);
        let frozen: RunOptions = request::from_json_or_default(
            "o",
            Some(br#"{"now": 1767225600, "identity": "r1"}"#.as_slice()),
        )
        .unwrap();
        let frozen = frozen.controller().unwrap();
        assert_eq!(frozen.clock.now().unix_timestamp(), 1_767_225_600);
        assert_eq!(frozen.identity.as_deref(), Some("r1"));
    }

    #[test]
    fn only_a_kube_location_is_run() {
        for location in ["etcd://127.0.0.1:2379/x", "/var/lib/pki", "kube://Bad_NS/x"] {
            let e = kube_url(location).err().unwrap();
            assert_eq!(e.code, PKI_RESULT_INVALID_ARGUMENT, "{location}");
        }
        assert!(kube_url("kube://pki-system/service-ca").is_ok());
    }
}
