//! The service-CA controller: the signer engine run continuously on a
//! `kube://` store, and what the cluster reads from it kept current.
//!
//! A Rust program embeds it on its own tokio runtime:
//!
//! ```no_run
//! use pki_kube::controller::{Controller, ControllerOptions};
//! use pki_kube::{KubeOptions, KubeUrl};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let url = KubeUrl::parse("kube://pki-system/service-ca")?;
//! let client = pki_kube::controller::connect(&url, &KubeOptions::default()).await?;
//! let controller = Controller::new(client, &url, ControllerOptions::default()).await?;
//! // Runs until the future resolves (SIGTERM in `pki controller`).
//! controller.run(std::future::pending::<()>()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! Each pass steps the signer document through the
//! [`AsyncDriver`] (rotating when due, renewing
//! stale leaves, adding the leaves annotated Services ask for), then:
//!
//! - each Service annotated `PREFIX serving-cert-secret-name: SECRET` gets a
//!   `kubernetes.io/tls` Secret SECRET in its namespace (`tls.crt` the
//!   serving chain, `tls.key`, `ca.crt` the bundle), rewritten when its leaf
//!   changes; a Secret of that name the controller did not create is never
//!   touched (`controller/serving.rs`);
//! - each ConfigMap annotated `PREFIX inject-cabundle: "true"` gets the
//!   store's whole bundle (current, previous and bridge while trusted,
//!   never only the new CA) under `ca-bundle.crt` and `service-ca.crt`
//!   (`controller/inject.rs`); so does every `caBundle` of a Validating- or
//!   MutatingWebhookConfiguration, an APIService or a CRD's conversion
//!   webhook annotated the same way (`controller/inject_api.rs`).
//!
//! What it did is told as Kubernetes Events (events.k8s.io/v1): on the
//! store's head Secret `NAME.signer`, `Rotated` (whoever rotated: this
//! replica, another, or `pki rotate`; `controller/events.rs`); on each
//! Service, `ServingCertIssued` and `ServingCertReissued` with the reason,
//! and the Warning `SecretNotOwned`; on each injected object
//! `CABundleInjected`, or the Warning `InjectionRefused` with the API
//! server's reason (an immutable ConfigMap, an APIService with no
//! `caBundle`). [`status`] lists the annotated objects and whether each
//! holds the current bundle, for `pki status`.
//!
//! Then it sleeps until the engine's next wake, a change to a watched
//! object (watched, not polled), or the resync period, whichever comes
//! first. Of several replicas, the one holding the Lease `NAME.controller`
//! in the store's namespace acts (`controller/lease.rs`); the others take it over
//! within the lease duration when the holder stops renewing it. Every write
//! to the document goes through the store's compare-and-swap all the same,
//! so two replicas acting at once (a lease that lapsed under a slow
//! holder), or `pki rotate` run by hand, lose nothing.

mod events;
mod inject;
mod inject_api;
mod lease;
mod serving;
pub mod status;
mod watch;

use crate::options::{self, KubeOptions};
use crate::store::AsyncKubeStore;
use crate::url::KubeUrl;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use pki_rotate::{AsyncDriver, AsyncStore, LeafChange, RotateError, SignerEngine, SignerInput};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;

/// The annotation prefix when none is given (like the Go module's path).
pub const DEFAULT_ANNOTATION_PREFIX: &str = "pki.invalid/";

/// The field manager of the controller's patches (`kubectl get -o yaml
/// --show-managed-fields` names it).
pub const FIELD_MANAGER: &str = "pki-controller";

/// Where the controller's time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// The system clock.
    Real,
    /// Always this instant (tests: `pki controller --now TIME`).
    Frozen(OffsetDateTime),
}

impl Clock {
    /// The time now on this clock.
    pub fn now(&self) -> OffsetDateTime {
        match self {
            Clock::Real => OffsetDateTime::now_utc(),
            Clock::Frozen(at) => *at,
        }
    }
}

/// A function that receives the controller's notices: what it did, what
/// it refused and why, and passes that failed (it keeps going).
pub type NoticeFn = Arc<dyn Fn(&str) + Send + Sync>;

/// How the controller runs.
#[derive(Clone)]
pub struct ControllerOptions {
    /// The prefix of the annotations it reads and writes (`pki.invalid/`).
    pub annotation_prefix: String,
    /// The longest it sleeps between passes, events or not: a safety net
    /// for a watch that missed something.
    pub resync: Duration,
    /// Whether replicas elect a leader on the Lease `NAME.controller` in
    /// the store's namespace, so that one acts; off, every replica acts
    /// (still safe: the document is written by compare-and-swap).
    pub leader_election: bool,
    /// How long a replica's hold on the Lease lasts without renewal: the
    /// longest a dead leader keeps the others waiting. The holder renews
    /// every third of it.
    pub lease_duration: Duration,
    /// This replica's name in the Lease and on its Events; None:
    /// `HOSTNAME` (a Pod's name) and a random suffix.
    pub identity: Option<String>,
    /// Real time, or a frozen instant for tests.
    pub clock: Clock,
    /// How the store reaches the API server.
    pub store: KubeOptions,
    /// Receives notices; None drops them.
    pub notice: Option<NoticeFn>,
}

impl std::fmt::Debug for ControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerOptions")
            .field("annotation_prefix", &self.annotation_prefix)
            .field("resync", &self.resync)
            .field("leader_election", &self.leader_election)
            .field("lease_duration", &self.lease_duration)
            .field("identity", &self.identity)
            .field("clock", &self.clock)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl Default for ControllerOptions {
    /// `pki.invalid/`, a resync every 10 minutes (what controller-runtime
    /// and client-go informers use by default), leader election on a 15 s
    /// lease (Kubernetes' own controllers'), the system clock and
    /// kubectl's credentials.
    fn default() -> Self {
        ControllerOptions {
            annotation_prefix: DEFAULT_ANNOTATION_PREFIX.to_string(),
            resync: Duration::from_secs(600),
            leader_election: true,
            lease_duration: Duration::from_secs(15),
            identity: None,
            clock: Clock::Real,
            store: KubeOptions::default(),
            notice: None,
        }
    }
}

/// Why the controller stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControllerError {
    /// The store could not be opened or holds no signer (`pki init` first).
    #[error(transparent)]
    Store(#[from] RotateError),
    /// The annotation prefix is not a valid annotation key prefix.
    #[error(
        "annotation prefix \"{0}\" is not DNS-subdomain-like text ending in '/' (like pki.invalid/)"
    )]
    Prefix(String),
}

/// The service-CA controller over one signer store.
pub struct Controller<S = AsyncKubeStore> {
    client: Client,
    url: KubeUrl,
    driver: AsyncDriver<S>,
    options: ControllerOptions,
    /// Records Kubernetes Events; one for the run, so that repeats of an
    /// Event become one series.
    recorder: Recorder,
    /// This replica's identity (its Lease holder name, its Events'
    /// reporting instance).
    instance: String,
    /// The Secrets (`NAMESPACE/NAME`) already reported as someone else's,
    /// and the objects (`KIND NAMESPACE/NAME`) whose injection was refused.
    refused: Mutex<BTreeSet<String>>,
    /// The id of the CA this replica's last pass saw: a different one
    /// after a step is a rotation to record as an Event.
    seen_ca: Mutex<Option<String>>,
}

/// A client for the controller's own requests: the store's credentials
/// (`url`'s context, `options`' kubeconfig), with a read timeout that lets
/// a watch stay open for the server's five minutes. The controller bounds
/// its other requests itself, by `options.request_timeout`.
///
/// # Errors
///
/// [`StoreError::Backend`](pki_rotate::StoreError::Backend), naming the URL,
/// when the credentials cannot be loaded, the client cannot be made, or the
/// server does not answer within `options.connect_timeout`.
pub async fn connect(url: &KubeUrl, options: &KubeOptions) -> pki_rotate::Result<Client> {
    let watching = KubeOptions {
        request_timeout: watch::WATCH_READ_TIMEOUT,
        ..options.clone()
    };
    options::client(url, &watching).await
}

impl Controller<AsyncKubeStore> {
    /// A controller on the store at `url`, opened with `options.store`;
    /// `client` makes every other request (see [`connect`]).
    ///
    /// # Errors
    ///
    /// [`ControllerError::Store`] with the errors of [`AsyncKubeStore::open`],
    /// and the errors of [`Controller::with_store`].
    pub async fn new(
        client: Client,
        url: &KubeUrl,
        options: ControllerOptions,
    ) -> Result<Self, ControllerError> {
        let store = AsyncKubeStore::open(url, options.store.clone()).await?;
        Controller::with_store(client, url, store, options)
    }
}

impl<S: AsyncStore + Send + Sync> Controller<S> {
    /// A controller on `store`, which is the `kube://` store at `url`
    /// wrapped (a [`SealedStore`](pki_rotate::SealedStore), say).
    ///
    /// # Errors
    ///
    /// [`ControllerError::Prefix`] when `options.annotation_prefix` is not
    /// DNS-subdomain-like text ending in `/`. The store is not read here.
    pub fn with_store(
        client: Client,
        url: &KubeUrl,
        store: S,
        options: ControllerOptions,
    ) -> Result<Self, ControllerError> {
        check_prefix(&options.annotation_prefix)?;
        let instance = options.identity.clone().unwrap_or_else(lease::identity);
        let reporter = Reporter {
            controller: FIELD_MANAGER.into(),
            instance: Some(instance.clone()),
        };
        Ok(Controller {
            instance,
            recorder: Recorder::new(client.clone(), reporter),
            refused: Mutex::new(BTreeSet::new()),
            seen_ca: Mutex::new(None),
            client,
            url: url.clone(),
            driver: AsyncDriver::new(store),
            options,
        })
    }

    /// Runs passes until `shutdown` resolves, then returns Ok. Fails at
    /// once when the store holds no signer; after that a failed pass is a
    /// notice and is tried again (the API server may be restarting). With
    /// leader election, only while this replica holds the Lease.
    ///
    /// # Errors
    ///
    /// [`ControllerError::Store`] when the signer document cannot be loaded
    /// before the first pass: the store cannot be read, holds no signer
    /// ([`StoreError::NotInitialized`](pki_rotate::StoreError::NotInitialized):
    /// `pki init` first), or its document cannot be decoded. Failures after
    /// that are notices, never errors.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ControllerError> {
        // Refuses a store without a signer before anything is watched.
        self.driver
            .load::<SignerEngine>(pki_rotate::signer::STORE_KEY)
            .await?;
        let mut watches = watch::Watches::start(&self.client);
        let mut leadership = self.options.leader_election.then(|| {
            let (namespace, name) = (self.url.namespace(), self.url.name());
            let duration = self.options.lease_duration;
            let identity = self.instance.clone();
            lease::Leadership::new(&self.client, namespace, name, identity, duration)
        });
        tokio::pin!(shutdown);
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = watches.ready() => {}
        }
        self.serve(&mut watches, leadership.as_mut(), shutdown)
            .await;
        if let Some(leadership) = &leadership {
            leadership.release(&self.writer()).await;
        }
        Ok(())
    }

    /// The loop of [`Controller::run`], until `shutdown`.
    ///
    /// A pass cut short by `shutdown` is safe to abandon: every document
    /// write is one compare-and-swap on the store's head, and the objects
    /// the controller writes are rewritten whole by the next pass.
    async fn serve(
        &self,
        watches: &mut watch::Watches,
        mut leadership: Option<&mut lease::Leadership>,
        mut shutdown: std::pin::Pin<&mut impl Future<Output = ()>>,
    ) {
        let mut next_pass = Instant::now();
        let mut previous = Vec::new();
        loop {
            let leading = match leadership.as_deref_mut() {
                Some(leadership) => leadership.hold(&self.writer()).await,
                None => true,
            };
            if leading && Instant::now() >= next_pass {
                let outcome = tokio::select! {
                    _ = &mut shutdown => return,
                    outcome = self.pass(watches, &previous) => outcome,
                };
                let pause = match outcome {
                    Ok((wake, leaves)) => {
                        previous = leaves;
                        wake
                    }
                    Err(message) => {
                        self.notice(&format!("pass failed, retrying: {message}"));
                        RETRY_AFTER.min(self.options.resync)
                    }
                };
                next_pass = Instant::now() + pause;
            }
            // The holder wakes to renew; the others to try to take over.
            let renew = leadership.as_deref().map(lease::Leadership::renew_every);
            let wake = match (renew, leading) {
                (None, _) => next_pass,
                (Some(renew), true) => next_pass.min(Instant::now() + renew),
                (Some(renew), false) => Instant::now() + renew,
            };
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tokio::time::sleep_until(wake) => {}
                _ = watches.changed() => {}
            }
            // Also when the timer won while a change was settling: the
            // change was taken from the notifier and would be lost.
            if watches.take_seen() {
                next_pass = Instant::now();
            }
        }
    }

    /// One pass: the step, then the Secrets and the injected bundles. The
    /// pause until the next one, and the controller's leaves in the
    /// document after the step.
    async fn pass(
        &self,
        watches: &watch::Watches,
        previous: &[String],
    ) -> Result<(Duration, Vec<String>), String> {
        let now = self.options.clock.now();
        let prefix = &self.options.annotation_prefix;
        let targets = serving::targets(&watches.services(), prefix);
        let input = SignerInput {
            leaves: leaf_changes(&targets, previous),
            ..SignerInput::default()
        };
        let mut rng = pki_core::os_rng();
        let step = self
            .driver
            .step::<SignerEngine, _>(pki_rotate::signer::STORE_KEY, &input, now, &mut rng)
            .await
            .map_err(|e| e.to_string())?;
        let mut reissued = BTreeMap::new();
        for event in &step.events {
            self.notice(&format!("{}: {event}", self.url));
            if let pki_rotate::Event::LeafReissued { name, reason, .. } = event {
                reissued.insert(name.as_str(), reason.to_string());
            }
        }
        let state = &step.document;
        let writer = self.writer();
        let seen = self
            .seen_ca
            .lock()
            .ok()
            .and_then(|mut seen| seen.replace(state.ca.cert.id()));
        writer
            .rotation_event(&self.url, state, seen.as_deref())
            .await;
        for target in &targets {
            let why = reissued.get(target.leaf.as_str()).map(String::as_str);
            writer.serving_secret(target, state, why).await;
        }
        let bundle = state.bundle.to_pem();
        for config_map in watches.config_maps() {
            writer.inject(&config_map, &bundle).await;
        }
        writer.inject_api_objects(watches, &bundle).await;
        let leaves = state
            .leaves
            .keys()
            .filter(|name| serving::is_service_leaf(name))
            .cloned()
            .collect();
        Ok((self.pause(step.next_wake, now), leaves))
    }

    /// How long to sleep after a pass at `now`: until the engine's next
    /// wake, at least a second (a wake already past on a frozen clock
    /// would spin), at most the resync period.
    fn pause(&self, next_wake: OffsetDateTime, now: OffsetDateTime) -> Duration {
        let until = Duration::try_from(next_wake - now).unwrap_or(Duration::ZERO);
        until.clamp(MIN_PAUSE, self.options.resync.max(MIN_PAUSE))
    }

    fn writer(&self) -> Writer<'_> {
        Writer {
            client: &self.client,
            recorder: &self.recorder,
            instance: &self.instance,
            refused: &self.refused,
            store: &self.url,
            options: &self.options,
        }
    }

    fn notice(&self, message: &str) {
        notice(&self.options, message);
    }
}

/// The shortest pause between passes.
const MIN_PAUSE: Duration = Duration::from_secs(1);

/// The pause after a failed pass.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// What the controller writes, and as whom.
struct Writer<'a> {
    client: &'a Client,
    recorder: &'a Recorder,
    /// The replica's identity: the reporting instance of its Events.
    instance: &'a str,
    refused: &'a Mutex<BTreeSet<String>>,
    /// The store: [`KubeUrl::identity`] is the marker on the Secrets it
    /// creates.
    store: &'a KubeUrl,
    options: &'a ControllerOptions,
}

impl Writer<'_> {
    fn notice(&self, message: &str) {
        notice(self.options, message);
    }

    /// A Kubernetes Event on the object `regarding`; failing to record
    /// one is a notice, never a failed pass.
    async fn event(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(fail) = self.call(self.recorder.publish(&event, regarding)).await {
            self.notice(&format!("event {reason}: {}", fail.describe()));
        }
    }

    /// Whether `key` (an object the controller may not or cannot write)
    /// is refused for the first time while the controller runs: a refusal
    /// is reported once, not on every pass.
    fn first_refusal(&self, key: &str) -> bool {
        match self.refused.lock() {
            Ok(mut refused) => refused.insert(key.to_string()),
            Err(_) => true,
        }
    }

    /// `key` was written: a later refusal is reported again.
    fn clear_refusal(&self, key: &str) {
        if let Ok(mut refused) = self.refused.lock() {
            refused.remove(key);
        }
    }

    /// `request`, failing after the store's request timeout (the client's
    /// own read timeout is a watch's).
    async fn call<T>(
        &self,
        request: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, crate::fail::Fail> {
        let limit = self.options.store.request_timeout;
        match tokio::time::timeout(limit, request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(crate::fail::Fail::Kube(e)),
            Err(_) => Err(crate::fail::Fail::Timeout(limit)),
        }
    }
}

impl Writer<'_> {
    /// The bundle into every annotated object with `caBundle` fields.
    async fn inject_api_objects(&self, watches: &watch::Watches, bundle: &str) {
        for object in watches.validating.state() {
            self.inject_ca_bundles(&object, bundle).await;
        }
        for object in watches.mutating.state() {
            self.inject_ca_bundles(&object, bundle).await;
        }
        for object in watches.api_services.state() {
            self.inject_ca_bundles(&object, bundle).await;
        }
        for object in watches.crds.state() {
            self.inject_ca_bundles(&object, bundle).await;
        }
    }
}

fn notice(options: &ControllerOptions, message: &str) {
    if let Some(notice) = &options.notice {
        notice(message);
    }
}

/// The leaf changes a pass asks for: each annotated Service's request
/// (`Replace`, so that a leaf of that name with other names is brought to
/// the Service's, never refused, which would stop the whole step), and the
/// removal of the controller's leaves whose Service is gone or no longer
/// annotated (`previous`: the controller's leaves after the last pass).
fn leaf_changes(targets: &[serving::Target], previous: &[String]) -> Vec<LeafChange> {
    let mut changes: Vec<LeafChange> = targets
        .iter()
        .map(|target| LeafChange::Replace {
            name: target.leaf.clone(),
            request: target.request(),
        })
        .collect();
    changes.extend(
        previous
            .iter()
            .filter(|leaf| !targets.iter().any(|t| &t.leaf == *leaf))
            .map(|leaf| LeafChange::Remove { name: leaf.clone() }),
    );
    changes
}

/// An annotation key prefix: a DNS subdomain and a `/`.
fn check_prefix(prefix: &str) -> Result<(), ControllerError> {
    let refuse = || ControllerError::Prefix(prefix.to_string());
    let domain = prefix.strip_suffix('/').ok_or_else(refuse)?;
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    if domain.len() > 253 || !domain.split('.').all(label_ok) {
        return Err(refuse());
    }
    Ok(())
}
