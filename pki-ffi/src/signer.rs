//! The signer: create, load, save, reconcile; its events and its lineage check.

use crate::abi::{
    bytes_in, free_handle, getter, handle, into_handle, os_rng, out_ptr, seconds, str_in, time_in,
    time_out, write_out,
};
use crate::buffer::{CText, pki_buffer, pki_bytes};
use crate::bundle::pki_bundle;
use crate::error::{Failure, boundary, boundary_value, pki_result};
use crate::leaf::pki_leaf_request;
use pki_core::{Certificate, KeyAlgorithm, LineageRule, RotationPolicy};
use pki_rotate::{
    Engine, Event, ForcedRotation, SignerEngine, SignerInput, SignerPolicy, SignerState,
};
use std::ffi::c_char;

/// A signer's whole state: its CA (certificate and key), bridges, bundle,
/// forced-rotation reason, leaves and history. Immutable: reconciling
/// returns a new `pki_signer`, so one handle may be read from several
/// threads at once.
///
/// Free with `pki_signer_free`.
pub struct pki_signer {
    pub(crate) state: SignerState,
    /// In-memory count of changing reconciles since the handle's lineage
    /// was created or loaded; see `pki_signer_generation`.
    pub(crate) generation: u64,
}

impl pki_signer {
    /// A handle for a state read from bytes or a store: generation 0.
    pub(crate) fn loaded(state: SignerState) -> Self {
        pki_signer {
            state,
            generation: 0,
        }
    }
}

/// Key types of new CAs (and of the leaves they issue).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_key_type {
    /// ECDSA P-256 with SHA-256: the default.
    PKI_KEY_TYPE_P256 = 0,
    /// RSA 2048 bits.
    PKI_KEY_TYPE_RSA2048 = 1,
    /// RSA 3072 bits.
    PKI_KEY_TYPE_RSA3072 = 2,
    /// RSA 4096 bits.
    PKI_KEY_TYPE_RSA4096 = 3,
    /// ECDSA P-384 with SHA-384. Not a key type of the key ring.
    PKI_KEY_TYPE_P384 = 4,
}

fn key_type_in(key_type: u32) -> Result<KeyAlgorithm, Failure> {
    Ok(match key_type {
        0 => KeyAlgorithm::EcdsaP256,
        1 => KeyAlgorithm::Rsa2048,
        2 => KeyAlgorithm::Rsa3072,
        3 => KeyAlgorithm::Rsa4096,
        4 => KeyAlgorithm::EcdsaP384,
        other => {
            return Err(Failure::invalid(format!(
                "key type {other} is not a pki_key_type (0 = P-256, 1-3 = RSA 2048/3072/4096, \
                 4 = P-384)"
            )));
        }
    })
}

/// How a signer rotates. All durations are in seconds.
///
/// Start from `pki_policy_default()` and change fields; the rules between
/// them (lifetime >= 2 x min trust, min trust > reload interval) are checked
/// where the policy is used and reported as `PKI_RESULT_INVALID_POLICY`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct pki_policy {
    /// D: lifetime of a CA certificate (default 790 days).
    pub lifetime_seconds: i64,
    /// M: rotate when less than this remains; also the least time a
    /// rotated-out CA stays trusted (default 395 days).
    pub min_trust_seconds: i64,
    /// I: the longest time any consumer goes without reloading; 0 = unknown
    /// (default), which skips the M > I check.
    pub reload_interval_seconds: i64,
    /// Re-issue a leaf when less than this fraction of its lifetime remains;
    /// strictly between 0 and 1 (default 0.2).
    pub leaf_refresh_fraction: f64,
    /// Keep the previous self-signed CA in the bundle while it is valid,
    /// besides bridge A (default false).
    pub keep_previous_root: bool,
}

impl pki_policy {
    fn of(p: &SignerPolicy) -> Self {
        pki_policy {
            lifetime_seconds: p.rotation.lifetime.whole_seconds(),
            min_trust_seconds: p.rotation.min_trust.whole_seconds(),
            reload_interval_seconds: p
                .rotation
                .reload_interval
                .map(|d| d.whole_seconds())
                .unwrap_or(0),
            leaf_refresh_fraction: p.leaf_refresh_fraction,
            keep_previous_root: p.keep_previous_root,
        }
    }

    /// The signer policy with the key type of new CAs, checked.
    pub(crate) fn to_signer_policy(
        self,
        key_algorithm: KeyAlgorithm,
    ) -> Result<SignerPolicy, Failure> {
        let policy = self.with_key_algorithm(key_algorithm);
        policy.validate()?;
        Ok(policy)
    }

    /// The signer policy with the key type of new CAs, not checked yet.
    pub(crate) fn with_key_algorithm(self, key_algorithm: KeyAlgorithm) -> SignerPolicy {
        SignerPolicy {
            rotation: RotationPolicy {
                lifetime: seconds(self.lifetime_seconds),
                min_trust: seconds(self.min_trust_seconds),
                reload_interval: match self.reload_interval_seconds {
                    0 => None,
                    s => Some(seconds(s)),
                },
            },
            key_algorithm,
            keep_previous_root: self.keep_previous_root,
            leaf_refresh_fraction: self.leaf_refresh_fraction,
        }
    }
}

/// The default policy: lifetime 790 days, minimum trust 395 days, no reload
/// interval, leaf refresh at 20% of lifetime left, previous root not kept.
///
/// Returned by value; nothing to free.
#[unsafe(no_mangle)]
pub extern "C" fn pki_policy_default() -> pki_policy {
    pki_policy::of(&SignerPolicy::default())
}

/// Creates a signer with a new self-signed CA of subject `CN=<common_name>`,
/// valid from `now` (Unix seconds) for the policy's lifetime.
///
/// `common_name` is UTF-8 of `common_name_len` bytes (no NUL needed).
/// `key_type` is a `pki_key_type`. `policy` NULL means `pki_policy_default()`;
/// it is borrowed for the call.
///
/// On success the caller owns `*out_signer` and frees it once with
/// `pki_signer_free`; on failure `*out_signer` is not written.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (key type, UTF-8), `PKI_RESULT_INVALID_POLICY`,
/// `PKI_RESULT_INVALID_REFRESH_FRACTION`, `PKI_RESULT_ISSUANCE` (empty or
/// unusable name), `PKI_RESULT_TIME`, `PKI_RESULT_CRYPTO` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `common_name` must be NULL or valid for `common_name_len` bytes; `policy`
/// NULL or a valid `pki_policy`; `out_signer` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_new(
    common_name: *const c_char,
    common_name_len: usize,
    key_type: u32,
    policy: *const pki_policy,
    now: i64,
    out_signer: *mut *mut pki_signer,
) -> pki_result {
    boundary(|| {
        // SAFETY: pointer and length from the caller, per the contract above.
        let cn = unsafe { str_in(common_name, common_name_len, "common_name") }?;
        out_ptr(out_signer, "out_signer")?;
        let algorithm = key_type_in(key_type)?;
        // SAFETY: NULL or a valid pki_policy (caller contract).
        let policy = unsafe { policy.as_ref() }
            .copied()
            .unwrap_or_else(|| pki_policy_default())
            .to_signer_policy(algorithm)?;
        let now = time_in(now, "now")?;
        let state = SignerState::new(cn, policy, now, &mut os_rng())?;
        let signer = into_handle(pki_signer::loaded(state));
        // SAFETY: checked non-NULL by out_ptr; valid for a write (contract).
        unsafe { write_out(out_signer, signer) };
        Ok(())
    })
}

/// Loads a signer from its versioned state bytes (the JSON document written
/// by `pki_signer_to_state`, certificates and keys included).
///
/// `state` is borrowed for the call. On success the caller owns
/// `*out_signer` and frees it with `pki_signer_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_UNSUPPORTED_STATE_VERSION` (a version this build does not
/// read: the state is never reset), `PKI_RESULT_CORRUPT_STATE` (malformed
/// JSON, missing or invalid material, zero length), `PKI_RESULT_INVALID_LEAF_NAME`
/// or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `state` must be NULL or valid for `state_len` bytes; `out_signer` NULL
/// or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_from_state(
    state: *const u8,
    state_len: usize,
    out_signer: *mut *mut pki_signer,
) -> pki_result {
    boundary(|| {
        // SAFETY: pointer and length from the caller, per the contract above.
        let bytes = unsafe { bytes_in(state, state_len, "state") }?;
        out_ptr(out_signer, "out_signer")?;
        let state = SignerState::from_json(bytes)?;
        let signer = into_handle(pki_signer::loaded(state));
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_signer, signer) };
        Ok(())
    })
}

/// Saves a signer as its versioned state bytes: one JSON document with the
/// kind and format version, the policy, the leaves, the history and every
/// certificate and key as PEM. It holds the CA's private key: store it as a
/// secret.
///
/// `signer` is borrowed. On success the caller owns `*out_state` and frees
/// it with `pki_buffer_free` (which zeroes it).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`, `PKI_RESULT_CRYPTO`,
/// `PKI_RESULT_CORRUPT_STATE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`; `out_state` NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_to_state(
    signer: *const pki_signer,
    out_state: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let signer = unsafe { handle(signer, "signer") }?;
        out_ptr(out_state, "out_state")?;
        let json = signer.state.to_json()?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_state, into_handle(pki_buffer::new(&json))) };
        Ok(())
    })
}

/// An in-memory counter: 0 for a signer created, loaded (from state bytes,
/// Secret blobs or a store) or returned by a store step, and one more than
/// its input for the signer `pki_signer_reconcile` returns when that
/// reconcile changed something. It is not stored anywhere and is not a
/// compare-and-swap token: stores own their revisions (`pki_step_revision`),
/// and `pki_step_changed` says whether a store step wrote. NULL gives 0.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_generation(signer: *const pki_signer) -> u64 {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(signer, 0, |s| s.generation) }
}

/// Writes the policy a signer was created or last reconciled with to
/// `*out_policy`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`; `out_policy` NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_policy(
    signer: *const pki_signer,
    out_policy: *mut pki_policy,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let signer = unsafe { handle(signer, "signer") }?;
        out_ptr(out_policy, "out_policy")?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_policy, pki_policy::of(&signer.state.policy)) };
        Ok(())
    })
}

/// The CA bundle clients should trust (current CA, bridge A, and the
/// previous root when the policy keeps it), as a new bundle object.
///
/// On success the caller owns `*out_bundle` and frees it with
/// `pki_bundle_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`; `out_bundle` NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_bundle(
    signer: *const pki_signer,
    out_bundle: *mut *mut pki_bundle,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let signer = unsafe { handle(signer, "signer") }?;
        out_ptr(out_bundle, "out_bundle")?;
        let bundle = pki_bundle::new(signer.state.bundle.clone());
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_bundle, into_handle(bundle)) };
        Ok(())
    })
}

/// Frees a signer (its CA key is zeroed). NULL is accepted (nothing happens).
///
/// The caller owned `signer`; it must not be used afterwards. Objects read
/// from it before (bundles, buffers, leaves) stay valid.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_free(signer: *mut pki_signer) {
    // SAFETY: NULL or a live handle freed once (contract).
    boundary_value((), || unsafe { free_handle(signer) })
}

/// Returns a copy of `signer` that also keeps the leaf `name` (a serving or
/// client certificate whose key and chain live in the signer's document),
/// or whose request is replaced by `request` when it keeps one already. The
/// next reconcile or store step issues it, and then re-issues it when the
/// CA rotates, when it nears expiry or when its request changes; a
/// directory store publishes it as `certs/NAME/tls.crt` (leaf, then bridge
/// B when present) and `certs/NAME/tls.key`.
///
/// `name` is `name_len` bytes: 1-64 of `a-z`, `0-9`, `-`, `_`, `.`, not
/// starting with `.`. `signer` and `request` are borrowed for the call.
///
/// On success the caller owns `*out_signer` and frees it with
/// `pki_signer_free`; its generation is `signer`'s.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (name not UTF-8),
/// `PKI_RESULT_INVALID_LEAF_NAME` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`; `name` NULL or valid for
/// `name_len` bytes; `request` NULL or a live `pki_leaf_request`;
/// `out_signer` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_request_leaf(
    signer: *const pki_signer,
    name: *const c_char,
    name_len: usize,
    request: *const pki_leaf_request,
    out_signer: *mut *mut pki_signer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let signer = unsafe { handle(signer, "signer") }?;
        // SAFETY: pointer and length from the caller (contract).
        let name = unsafe { str_in(name, name_len, "name") }?;
        // SAFETY: NULL or a live handle (contract).
        let request = unsafe { handle(request, "request") }?;
        out_ptr(out_signer, "out_signer")?;
        let mut state = signer.state.clone();
        state.request_leaf(name, request.request.clone())?;
        let next = into_handle(pki_signer {
            state,
            generation: signer.generation,
        });
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_signer, next) };
        Ok(())
    })
}

/// A request to rotate now, whatever the validity left. Borrowed for the
/// call that receives it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pki_forced_rotation {
    /// Why, as UTF-8 of `reason_len` bytes (no NUL needed); must not be
    /// empty. A forced rotation runs once per distinct reason: asking again
    /// with the reason recorded by the last forced rotation does nothing.
    pub reason: *const c_char,
    /// Length of `reason` in bytes.
    pub reason_len: usize,
    /// Emergency: how long (seconds) the old CA stays trusted through
    /// bridge A; 0 = the normal max(old NotAfter, now + min trust).
    pub grace_seconds: i64,
    /// Compromise: issue no bridges; the old CA is distrusted at once.
    pub no_bridges: bool,
}

/// Reads an optional `pki_forced_rotation` argument.
///
/// # Safety
///
/// `forced` must be NULL or a valid `pki_forced_rotation` whose `reason` is
/// NULL or valid for `reason_len` bytes.
pub(crate) unsafe fn forced_in(
    forced: *const pki_forced_rotation,
) -> Result<Option<ForcedRotation>, Failure> {
    // SAFETY: NULL or a valid pki_forced_rotation (contract).
    let Some(f) = (unsafe { forced.as_ref() }) else {
        return Ok(None);
    };
    // SAFETY: `reason` is NULL or valid for `reason_len` bytes (contract).
    let reason = unsafe { str_in(f.reason, f.reason_len, "forced.reason") }?;
    Ok(Some(ForcedRotation {
        reason: reason.to_string(),
        grace: (f.grace_seconds != 0).then(|| seconds(f.grace_seconds)),
        no_bridges: f.no_bridges,
    }))
}

/// What kind of event happened.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_event_kind {
    /// The CA was rotated.
    PKI_EVENT_ROTATED = 1,
    /// A leaf kept in the signer state was (re-)issued.
    PKI_EVENT_LEAF_REISSUED = 2,
    /// Expired certificates left the bundle.
    PKI_EVENT_BUNDLE_PRUNED = 3,
    /// Bridge B expired and is no longer appended to serving chains.
    PKI_EVENT_BRIDGE_RETIRED = 4,
    /// An event kind newer than this header; read the message.
    PKI_EVENT_OTHER = 99,
}

struct EventEntry {
    kind: pki_event_kind,
    message: CText,
    previous_trusted_until: Option<i64>,
}

/// The events of one reconcile, in order. Free with `pki_events_free`.
pub struct pki_events {
    events: Vec<EventEntry>,
}

impl pki_events {
    pub(crate) fn new(events: &[Event]) -> Self {
        let events = events
            .iter()
            .map(|e| {
                let (kind, until) = match e {
                    Event::Rotated {
                        previous_trusted_until,
                        ..
                    } => (
                        pki_event_kind::PKI_EVENT_ROTATED,
                        previous_trusted_until.map(time_out),
                    ),
                    Event::LeafReissued { .. } => (pki_event_kind::PKI_EVENT_LEAF_REISSUED, None),
                    Event::BundlePruned { .. } => (pki_event_kind::PKI_EVENT_BUNDLE_PRUNED, None),
                    Event::BridgeRetired { .. } => (pki_event_kind::PKI_EVENT_BRIDGE_RETIRED, None),
                    _ => (pki_event_kind::PKI_EVENT_OTHER, None),
                };
                EventEntry {
                    kind,
                    message: CText::new(&e.to_string()),
                    previous_trusted_until: until,
                }
            })
            .collect();
        pki_events { events }
    }
}

/// One event, as read by `pki_events_get`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pki_event {
    /// What happened.
    pub kind: pki_event_kind,
    /// A one-line description for logs and Kubernetes events (UTF-8,
    /// NUL-terminated). Borrowed: valid until the `pki_events` is freed.
    pub message: pki_bytes,
    /// Whether `previous_trusted_until` is set: only for
    /// `PKI_EVENT_ROTATED` with bridges.
    pub has_previous_trusted_until: bool,
    /// Until when (Unix seconds) the previous CA stays trusted; 0 when
    /// `has_previous_trusted_until` is false (the previous CA is distrusted
    /// at once, or the event is not a rotation).
    pub previous_trusted_until: i64,
}

/// Number of events. NULL gives 0.
///
/// # Safety
///
/// `events` must be NULL or a live `pki_events`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_events_len(events: *const pki_events) -> usize {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(events, 0, |e| e.events.len()) }
}

/// Reads event `index` (from 0) into `*out_event`. The message it points to
/// is borrowed from `events`: valid until `events` is freed.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_NOT_FOUND` (index out of range) or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `events` must be NULL or a live `pki_events`; `out_event` NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_events_get(
    events: *const pki_events,
    index: usize,
    out_event: *mut pki_event,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let events = unsafe { handle(events, "events") }?;
        out_ptr(out_event, "out_event")?;
        let e = events.events.get(index).ok_or_else(|| {
            Failure::new(
                pki_result::PKI_RESULT_NOT_FOUND,
                format!("event {index} of {}", events.events.len()),
            )
        })?;
        let event = pki_event {
            kind: e.kind,
            message: e.message.view(),
            has_previous_trusted_until: e.previous_trusted_until.is_some(),
            previous_trusted_until: e.previous_trusted_until.unwrap_or(0),
        };
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_event, event) };
        Ok(())
    })
}

/// Frees an event list. NULL is accepted (nothing happens). Views read from
/// it must not be used afterwards.
///
/// # Safety
///
/// `events` must be NULL or a live `pki_events` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_events_free(events: *mut pki_events) {
    // SAFETY: NULL or a live handle freed once (contract).
    boundary_value((), || unsafe { free_handle(events) })
}

/// Reconciles a signer at `now` (Unix seconds): rotates the CA when less
/// than the minimum trust remains or when `forced` carries a reason not
/// recorded yet (bridges A and B are issued and the pre-flight trust matrix
/// must pass), drops expired bundle members and an expired bridge B.
///
/// `signer` is borrowed and not changed. `policy` NULL means the signer's
/// own policy; otherwise it replaces it (the key type of new CAs stays the
/// signer's). `forced` NULL means no forced rotation. Both are borrowed for
/// the call.
///
/// On success the caller owns `*out_signer` (the next state, with the
/// generation increased when anything changed; free with `pki_signer_free`)
/// and `*out_events` (what happened, possibly nothing; free with
/// `pki_events_free`), and `*out_next_check` holds the time (Unix seconds)
/// at which a controller should reconcile again: the engine's wake-up time
/// of the next state (after a rotation, the new CA's, bridges' and leaves'
/// times), always after `now`. Nothing is written on failure.
///
/// This function keeps nothing: to persist the state and let several
/// controller replicas race safely, use a `pki_store` and
/// `pki_signer_store_step`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (reason not UTF-8),
/// `PKI_RESULT_CLOCK_BEFORE_CA`, `PKI_RESULT_EMPTY_FORCED_REASON`,
/// `PKI_RESULT_INVALID_GRACE`, `PKI_RESULT_INVALID_POLICY`,
/// `PKI_RESULT_INVALID_REFRESH_FRACTION`, `PKI_RESULT_TRUST_CHECK_FAILED`,
/// `PKI_RESULT_TIME`, `PKI_RESULT_ISSUANCE`, `PKI_RESULT_CRYPTO`,
/// `PKI_RESULT_EXPIRED` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`; `policy` NULL or a valid
/// `pki_policy`; `forced` NULL or a valid `pki_forced_rotation` whose
/// `reason` is NULL or valid for `reason_len` bytes; each output pointer
/// NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_reconcile(
    signer: *const pki_signer,
    policy: *const pki_policy,
    now: i64,
    forced: *const pki_forced_rotation,
    out_signer: *mut *mut pki_signer,
    out_events: *mut *mut pki_events,
    out_next_check: *mut i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let signer = unsafe { handle(signer, "signer") }?;
        out_ptr(out_signer, "out_signer")?;
        out_ptr(out_events, "out_events")?;
        out_ptr(out_next_check, "out_next_check")?;
        let state = &signer.state;
        // SAFETY: NULL or a valid pki_policy (contract).
        let policy = match unsafe { policy.as_ref() } {
            Some(p) => p.to_signer_policy(state.policy.key_algorithm)?,
            None => state.policy,
        };
        // SAFETY: NULL or a valid pki_forced_rotation (contract).
        let forced = unsafe { forced_in(forced) }?;
        let now = time_in(now, "now")?;
        let input = SignerInput {
            policy: Some(policy),
            forced,
            // The C ABI cannot pass an override for a trust-breaking
            // rotation yet: keep its behaviour until it can.
            skip_trust_break_check: true,
            ..SignerInput::default()
        };
        let outcome = SignerEngine::step(state, &input, now, &mut os_rng())?;
        let changed = outcome.changed();
        // The wake-up time of the document just produced, not of the one
        // given: after a rotation that is the new CA's (or new leaf's) time.
        let next_check = time_out(outcome.next_wake);
        let events = into_handle(pki_events::new(&outcome.events));
        let next = into_handle(pki_signer {
            state: outcome.into_document(),
            generation: signer.generation + u64::from(changed),
        });
        // SAFETY: all three checked non-NULL; valid for a write (contract).
        unsafe {
            write_out(out_signer, next);
            write_out(out_events, events);
            write_out(out_next_check, next_check);
        }
        Ok(())
    })
}

/// The rule that decided a lineage check.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_lineage_rule {
    /// The certificate's AuthorityKeyIdentifier equals the CA's SubjectKeyIdentifier.
    PKI_LINEAGE_KEY_IDENTIFIER_MATCH = 0,
    /// The certificate's AKI differs from the CA's SKI.
    PKI_LINEAGE_KEY_IDENTIFIER_MISMATCH = 1,
    /// The CA has an SKI, the certificate no AKI: not shown to be issued by it.
    PKI_LINEAGE_MISSING_AUTHORITY_KEY_IDENTIFIER = 2,
    /// The CA has no SKI; the issuer name equals the CA's subject.
    PKI_LINEAGE_LEGACY_NAME_MATCH = 3,
    /// The CA has no SKI; the names differ.
    PKI_LINEAGE_LEGACY_NAME_MISMATCH = 4,
}

/// The answer of `pki_signer_check_lineage`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pki_lineage {
    /// Whether the certificate was issued by the signer's current CA.
    pub issued_by: bool,
    /// Which rule decided.
    pub rule: pki_lineage_rule,
}

/// Checks whether a certificate was issued by the signer's current CA, by
/// AuthorityKeyIdentifier == SubjectKeyIdentifier (names only for a CA
/// without SKI), and says which rule decided.
///
/// `cert_pem` holds one or more `CERTIFICATE` blocks; the first is checked
/// (a serving chain's leaf). Borrowed for the call.
///
/// On success writes `*out_lineage`, and, when `out_reason` is not NULL,
/// a one-line explanation the caller owns and frees with `pki_buffer_free`.
/// `out_reason` NULL is accepted.
///
/// Returns `PKI_RESULT_OK` (whatever the answer), `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_PEM`, `PKI_RESULT_UNEXPECTED_PEM_LABEL`,
/// `PKI_RESULT_NO_PEM_BLOCK`, `PKI_RESULT_CERTIFICATE_DECODE`,
/// `PKI_RESULT_MALFORMED_EXTENSION` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`; `cert_pem` NULL or valid
/// for `cert_pem_len` bytes; `out_lineage` NULL or valid for one write;
/// `out_reason` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_check_lineage(
    signer: *const pki_signer,
    cert_pem: *const u8,
    cert_pem_len: usize,
    out_lineage: *mut pki_lineage,
    out_reason: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let signer = unsafe { handle(signer, "signer") }?;
        // SAFETY: pointer and length from the caller (contract).
        let pem = unsafe { bytes_in(cert_pem, cert_pem_len, "cert_pem") }?;
        out_ptr(out_lineage, "out_lineage")?;
        let cert = first_certificate(pem)?;
        let lineage = pki_core::issued_by(&cert, &signer.state.ca.cert);
        let rule = match lineage.rule {
            LineageRule::KeyIdentifierMatch => pki_lineage_rule::PKI_LINEAGE_KEY_IDENTIFIER_MATCH,
            LineageRule::KeyIdentifierMismatch => {
                pki_lineage_rule::PKI_LINEAGE_KEY_IDENTIFIER_MISMATCH
            }
            LineageRule::MissingAuthorityKeyIdentifier => {
                pki_lineage_rule::PKI_LINEAGE_MISSING_AUTHORITY_KEY_IDENTIFIER
            }
            LineageRule::LegacyNameMatch => pki_lineage_rule::PKI_LINEAGE_LEGACY_NAME_MATCH,
            LineageRule::LegacyNameMismatch => pki_lineage_rule::PKI_LINEAGE_LEGACY_NAME_MISMATCH,
        };
        let answer = pki_lineage {
            issued_by: lineage.issued_by,
            rule,
        };
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_lineage, answer) };
        if !out_reason.is_null() {
            let reason = into_handle(pki_buffer::new(lineage.to_string().as_bytes()));
            // SAFETY: non-NULL; valid for a write (contract).
            unsafe { write_out(out_reason, reason) };
        }
        Ok(())
    })
}

/// The first certificate of a PEM input (every block must be a certificate).
pub(crate) fn first_certificate(pem: &[u8]) -> Result<Certificate, Failure> {
    Certificate::all_from_pem(pem)?
        .into_iter()
        .next()
        .ok_or_else(|| {
            pki_core::Error::NoPemBlock {
                what: "certificate input",
            }
            .into()
        })
}
