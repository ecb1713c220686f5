//! What `pki status kube://NAMESPACE/NAME` adds to a signer's report: the
//! objects the controller keeps current (the Services annotated for a
//! serving certificate and the objects annotated for CA-bundle injection)
//! and whether each holds the store's current bundle. Read only: it lists
//! and gets, never writes.
//!
//! An object lags like a consumer that acknowledged an older bundle
//! ([`pki_rotate::uptake::lags`]): it is `overdue` when it does not hold
//! the current bundle once the reload interval I has passed since that
//! bundle was published, which makes the report's health `action-due`
//! (`pki status --check` exits 3). One difference: the interval never
//! starts before the object was created, so a Service annotated a moment
//! ago is not overdue because the bundle is old.

use super::inject::{BUNDLE_KEYS, INJECT_CABUNDLE};
use super::inject_api::CaBundles;
use super::serving::{self, SERVING_CERT_STORE};
use super::{ControllerError, check_prefix};
use crate::fail::{self, Fail};
use crate::options::{self, KubeOptions};
use crate::url::KubeUrl;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use pki_core::verify::{ExpectedName, Purpose, VerifyOptions, verify_chain};
use pki_core::{Bundle, Certificate};
use pki_rotate::SignerState;
use pki_rotate::status::{Health, SignerStatus};
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;

/// One object the controller keeps current, as `pki status` reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InjectionTarget {
    /// `Service`, `ConfigMap`, `ValidatingWebhookConfiguration`,
    /// `MutatingWebhookConfiguration`, `APIService` or
    /// `CustomResourceDefinition`.
    pub kind: String,
    /// Its namespace; None for a cluster-scoped object.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Whether it holds the current bundle: for a Service, whether its
    /// Secret's leaf is from the current CA, its chain verifies against
    /// the current bundle (RFC 5280, for `SVC.NS.svc`) and its `ca.crt`
    /// is that bundle; for the others, whether every bundle field holds
    /// the current bundle's certificates.
    pub current: bool,
    /// Not current, and the reload interval has passed since the current
    /// bundle was published (and since the object was created).
    pub overdue: bool,
    /// The fingerprint of the bundle it holds (a Service: its Secret's
    /// `ca.crt`), when every field holds one and the same; None otherwise.
    pub fingerprint: Option<String>,
    /// What it holds, or why it is not current, in one sentence.
    pub detail: String,
}

/// A signer's report with the cluster's objects: `pki status --json` on a
/// `kube://` store.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KubeStatus {
    /// The signer's report; its health counts the objects that lag.
    #[serde(flatten)]
    pub signer: SignerStatus,
    /// The annotated objects, by kind, namespace and name.
    pub injection_targets: Vec<InjectionTarget>,
}

impl KubeStatus {
    /// `signer` with `targets`: an overdue target makes a health that was
    /// `ok` `action-due` (a broken one stays broken), as a lagging consumer
    /// does.
    pub fn new(mut signer: SignerStatus, targets: Vec<InjectionTarget>) -> Self {
        if signer.health == Health::Ok && targets.iter().any(|t| t.overdue) {
            signer.health = Health::ActionDue;
        }
        KubeStatus {
            signer,
            injection_targets: targets,
        }
    }
}

/// What [`injection_targets`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// The annotated objects, by kind, namespace and name.
    pub targets: Vec<InjectionTarget>,
    /// The kinds the account may not list (403), one sentence each: their
    /// objects are not judged, rather than the whole report refused (an
    /// account may read the store and not every namespace).
    pub unlisted: Vec<String>,
}

/// [`injection_targets`] for a program without a tokio runtime (`pki
/// status`): on a small runtime of its own, with a client made from
/// `options` for `url`.
///
/// # Errors
///
/// [`ControllerError::Store`] when the tokio runtime cannot be started, the
/// credentials cannot be loaded or the server does not answer (as for
/// [`connect`](crate::controller::connect)), and the errors of
/// [`injection_targets`].
pub fn list_injection_targets(
    url: &KubeUrl,
    options: &KubeOptions,
    prefix: &str,
    state: &SignerState,
    now: OffsetDateTime,
) -> Result<Listing, ControllerError> {
    blocking(url, options, async |client| {
        injection_targets(&client, url, options, prefix, state, now).await
    })
}

/// Runs `work` with a client for `url` on a small runtime of its own.
fn blocking<T>(
    url: &KubeUrl,
    options: &KubeOptions,
    work: impl AsyncFnOnce(Client) -> Result<T, ControllerError>,
) -> Result<T, ControllerError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail::backend(url, format!("cannot start a tokio runtime: {e}")))?;
    runtime.block_on(async {
        let client = options::client(url, options).await?;
        work(client).await
    })
}

/// Whether any object in the cluster is annotated under `prefix` for the
/// controller (a Service for a serving certificate, or an object with a
/// bundle field for injection): when none is, `pki status --check` may
/// answer from the store's summary, which knows nothing of such objects.
/// A kind the account may not list counts as having some, so that the full
/// report names it.
///
/// # Errors
///
/// [`ControllerError::Prefix`] for an invalid `prefix`;
/// [`ControllerError::Store`] when the runtime cannot be started, the
/// credentials cannot be loaded, the server does not answer, or a listing fails
/// other than with a 403 (which counts as having some) or a kind the server
/// does not serve.
pub fn any_annotated(
    url: &KubeUrl,
    options: &KubeOptions,
    prefix: &str,
) -> Result<bool, ControllerError> {
    check_prefix(prefix)?;
    blocking(url, options, async |client| {
        let lister = Lister {
            client: &client,
            url,
            limit: options.request_timeout,
            unlisted: std::sync::Mutex::default(),
        };
        let services: Vec<Arc<Service>> = lister
            .all::<Service>("Services")
            .await?
            .into_iter()
            .map(Arc::new)
            .collect();
        let inject = format!("{prefix}{INJECT_CABUNDLE}");
        let found = !serving::targets(&services, prefix).is_empty()
            || lister
                .all::<ConfigMap>("ConfigMaps")
                .await?
                .iter()
                .any(|c| asks_injection(&c.metadata, &inject))
            || lister
                .any_ca_bundles::<ValidatingWebhookConfiguration>(&inject)
                .await?
            || lister
                .any_ca_bundles::<MutatingWebhookConfiguration>(&inject)
                .await?
            || lister.any_ca_bundles::<APIService>(&inject).await?
            || lister
                .any_ca_bundles::<CustomResourceDefinition>(&inject)
                .await?;
        let unlisted = lister
            .unlisted
            .lock()
            .map(|u| !u.is_empty())
            .unwrap_or(true);
        Ok(found || unlisted)
    })
}

/// Every object annotated under `prefix` for the controller of the store
/// at `url` (whose document is `state`), judged at `now`, sorted by kind,
/// namespace and name. A kind the API server does not serve (no
/// aggregator, say) has none; a kind the account may not list is named in
/// [`Listing::unlisted`]; any other failure fails the listing, naming it.
///
/// # Errors
///
/// [`ControllerError::Prefix`] for an invalid `prefix`;
/// [`ControllerError::Store`] naming the kind when a listing fails for another
/// reason than a 403 or a kind the server does not serve (no answer within
/// `options.request_timeout`, another error of the server).
pub async fn injection_targets(
    client: &Client,
    url: &KubeUrl,
    options: &KubeOptions,
    prefix: &str,
    state: &SignerState,
    now: OffsetDateTime,
) -> Result<Listing, ControllerError> {
    check_prefix(prefix)?;
    let lister = Lister {
        client,
        url,
        limit: options.request_timeout,
        unlisted: std::sync::Mutex::default(),
    };
    let judge = Judge::new(state, url, prefix, now);
    let mut targets = lister.services(&judge).await?;
    let inject = format!("{prefix}{INJECT_CABUNDLE}");
    for config_map in lister.all::<ConfigMap>("ConfigMaps").await? {
        if asks_injection(&config_map.metadata, &inject) {
            let data = config_map.data.as_ref();
            let fields = BUNDLE_KEYS
                .iter()
                .map(|key| data.and_then(|d| d.get(*key)).map(String::as_bytes))
                .collect::<Vec<_>>();
            let verdict = judge.bundles(&fields, "key");
            targets.push(judge.target("ConfigMap", &config_map.metadata, verdict));
        }
    }
    lister
        .ca_bundles::<ValidatingWebhookConfiguration>(&judge, &inject, &mut targets)
        .await?;
    lister
        .ca_bundles::<MutatingWebhookConfiguration>(&judge, &inject, &mut targets)
        .await?;
    lister
        .ca_bundles::<APIService>(&judge, &inject, &mut targets)
        .await?;
    lister
        .ca_bundles::<CustomResourceDefinition>(&judge, &inject, &mut targets)
        .await?;
    targets.sort_by(|a, b| (&a.kind, &a.namespace, &a.name).cmp(&(&b.kind, &b.namespace, &b.name)));
    let unlisted = lister.unlisted.into_inner().unwrap_or_default();
    Ok(Listing { targets, unlisted })
}

fn asks_injection(metadata: &ObjectMeta, key: &str) -> bool {
    let value = metadata.annotations.as_ref().and_then(|a| a.get(key));
    value.map(|v| v.trim()) == Some("true")
}

/// The requests of one listing, each bounded by `limit`.
struct Lister<'a> {
    client: &'a Client,
    url: &'a KubeUrl,
    limit: Duration,
    /// The kinds the account may not list.
    unlisted: std::sync::Mutex<Vec<String>>,
}

impl Lister<'_> {
    async fn call<T>(
        &self,
        what: &str,
        request: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, Fail> {
        match tokio::time::timeout(self.limit, request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(Fail::Kube(e)),
            Err(_) => Err(Fail::Other(format!(
                "{what}: no answer within {:?}",
                self.limit
            ))),
        }
    }

    fn refused(&self, what: &str, fail: &Fail) -> ControllerError {
        ControllerError::Store(fail::backend(
            self.url,
            format!("listing {what}: {}", fail.describe()),
        ))
    }

    /// Every `K` in the cluster; none when the server does not serve `K`.
    async fn all<K>(&self, what: &str) -> Result<Vec<K>, ControllerError>
    where
        K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let api: Api<K> = Api::all(self.client.clone());
        match self.call(what, api.list(&ListParams::default())).await {
            Ok(list) => Ok(list.items),
            Err(fail) if fail.is_not_found() => Ok(Vec::new()),
            Err(fail) if fail.code() == Some(403) => {
                if let Ok(mut unlisted) = self.unlisted.lock() {
                    unlisted.push(format!("{what} not listed: {}", fail.describe()));
                }
                Ok(Vec::new())
            }
            Err(fail) => Err(self.refused(what, &fail)),
        }
    }

    /// The annotated Services, each judged by the Secret it names.
    async fn services(&self, judge: &Judge<'_>) -> Result<Vec<InjectionTarget>, ControllerError> {
        let services: Vec<Arc<Service>> = self
            .all::<Service>("Services")
            .await?
            .into_iter()
            .map(Arc::new)
            .collect();
        let mut targets = Vec::new();
        for target in serving::targets(&services, judge.prefix) {
            let api: Api<Secret> = Api::namespaced(self.client.clone(), &target.namespace);
            let what = format!("Secret {}/{}", target.namespace, target.secret);
            let secret = match self.call(&what, api.get_opt(&target.secret)).await {
                Ok(secret) => secret,
                Err(fail) => return Err(self.refused(&what, &fail)),
            };
            let verdict = judge.secret(&target, secret.as_ref());
            targets.push(judge.target("Service", &target.service.metadata, verdict));
        }
        Ok(targets)
    }

    /// Whether an object of kind `K` is annotated and has a `caBundle`
    /// field.
    async fn any_ca_bundles<K: CaBundles>(&self, inject: &str) -> Result<bool, ControllerError> {
        let objects = self.all::<K>(K::KIND).await?;
        Ok(objects
            .iter()
            .any(|o| asks_injection(o.meta(), inject) && !o.ca_bundles().is_empty()))
    }

    /// The annotated objects of kind `K` that have a `caBundle` field.
    async fn ca_bundles<K: CaBundles>(
        &self,
        judge: &Judge<'_>,
        inject: &str,
        targets: &mut Vec<InjectionTarget>,
    ) -> Result<(), ControllerError> {
        for object in self.all::<K>(K::KIND).await? {
            let fields: Vec<Option<&[u8]>> = object
                .ca_bundles()
                .into_iter()
                .map(|field| field.map(|b| b.0.as_slice()))
                .collect();
            // A local APIService, a CRD without a conversion webhook:
            // nothing to inject, which the controller skips too.
            if asks_injection(object.meta(), inject) && !fields.is_empty() {
                let verdict = judge.bundles(&fields, "caBundle field");
                targets.push(judge.target(K::KIND, object.meta(), verdict));
            }
        }
        Ok(())
    }
}

/// Whether an object holds the current bundle, and what it holds.
struct Verdict {
    current: bool,
    fingerprint: Option<String>,
    detail: String,
}

/// What an object is judged against: the store's document at `now`.
struct Judge<'a> {
    state: &'a SignerState,
    /// The current bundle's fingerprint.
    current: String,
    /// When the current bundle was published plus the reload interval.
    deadline: Option<OffsetDateTime>,
    interval: time::Duration,
    now: OffsetDateTime,
    /// The store, whose [`KubeUrl::identity`] marks the Secrets its
    /// controller made.
    store: &'a KubeUrl,
    prefix: &'a str,
}

impl<'a> Judge<'a> {
    fn new(state: &'a SignerState, url: &'a KubeUrl, prefix: &'a str, now: OffsetDateTime) -> Self {
        Judge {
            state,
            current: state.bundle_fingerprint(),
            deadline: state.reload_deadline(),
            interval: state.policy.rotation.effective_reload_interval(),
            now,
            store: url,
            prefix,
        }
    }

    fn target(&self, kind: &str, metadata: &ObjectMeta, verdict: Verdict) -> InjectionTarget {
        let created = metadata
            .creation_timestamp
            .as_ref()
            .and_then(|t| OffsetDateTime::from_unix_timestamp(t.0.as_second()).ok());
        InjectionTarget {
            kind: kind.to_string(),
            namespace: metadata.namespace.clone(),
            name: metadata.name.clone().unwrap_or_default(),
            overdue: !verdict.current && self.past_deadline(created),
            current: verdict.current,
            fingerprint: verdict.fingerprint,
            detail: verdict.detail,
        }
    }

    /// Whether `now` is past the reload deadline of the current bundle,
    /// and past the reload interval since the object was `created`.
    fn past_deadline(&self, created: Option<OffsetDateTime>) -> bool {
        let Some(deadline) = self.deadline else {
            return false;
        };
        let since_created = created.and_then(|c| c.checked_add(self.interval));
        self.now > since_created.map_or(deadline, |d| d.max(deadline))
    }

    /// The fingerprint of the certificates a bundle field holds, or why
    /// it has none.
    fn fingerprint(field: Option<&[u8]>) -> Result<String, &'static str> {
        let bytes = field.ok_or("unset")?;
        let bundle = Bundle::from_pem(bytes).map_err(|_| "not a PEM bundle")?;
        Ok(pki_rotate::uptake::bundle_fingerprint(&bundle))
    }

    /// `fields` (each a `what`: a ConfigMap key, a `caBundle`) against the
    /// current bundle.
    fn bundles(&self, fields: &[Option<&[u8]>], what: &str) -> Verdict {
        let prints: Vec<Result<String, &str>> =
            fields.iter().map(|f| Self::fingerprint(*f)).collect();
        let lagging = prints
            .iter()
            .filter(|p| p.as_deref() != Ok(self.current.as_str()))
            .count();
        let same = prints.first().and_then(|first| {
            let first = first.as_ref().ok()?;
            prints
                .iter()
                .all(|p| p.as_ref() == Ok(first))
                .then(|| first.clone())
        });
        let detail = if lagging == 0 {
            format!(
                "holds the current bundle ({} certificates)",
                self.state.bundle.len()
            )
        } else if let Some(other) = &same {
            format!("holds bundle {} (not the current one)", short(other))
        } else {
            let why: Vec<&str> = prints
                .iter()
                .filter_map(|p| p.as_ref().err().copied())
                .collect();
            format!(
                "{lagging} of {} {what}s lack the current bundle{}",
                prints.len(),
                if why.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", why.join(", "))
                }
            )
        };
        Verdict {
            current: lagging == 0,
            fingerprint: same,
            detail,
        }
    }

    /// A Service's Secret against the current CA and bundle.
    fn secret(&self, target: &serving::Target, secret: Option<&Secret>) -> Verdict {
        let (ns, name) = (&target.namespace, &target.secret);
        let lagging = |detail: String, fingerprint: Option<String>| Verdict {
            current: false,
            fingerprint,
            detail,
        };
        let Some(secret) = secret else {
            return lagging(format!("Secret {ns}/{name} does not exist yet"), None);
        };
        let marker = format!("{}{SERVING_CERT_STORE}", self.prefix);
        let ours = secret
            .annotations()
            .get(&marker)
            .is_some_and(|value| self.store.is_same_store(value));
        if !ours {
            return lagging(
                format!(
                    "Secret {ns}/{name} was not created by pki controller of {}: left as it is",
                    self.store.identity()
                ),
                None,
            );
        }
        let field = |key: &str| {
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|b| b.0.as_slice())
        };
        let fingerprint = Self::fingerprint(field("ca.crt")).ok();
        match self.serving_chain(target, field("tls.crt")) {
            Err(why) => lagging(format!("Secret {ns}/{name}: {why}"), fingerprint),
            Ok(_) if fingerprint.as_deref() != Some(self.current.as_str()) => lagging(
                format!("Secret {ns}/{name}: ca.crt does not hold the current bundle"),
                fingerprint,
            ),
            Ok(leaf) => Verdict {
                current: true,
                fingerprint,
                detail: format!(
                    "Secret {ns}/{name}: leaf {leaf} from the current CA, verifies against the current bundle"
                ),
            },
        }
    }

    /// The id of the leaf of `tls_crt`, when it is from the current CA
    /// and its chain verifies against the current bundle for the
    /// Service's name; why not otherwise.
    fn serving_chain(
        &self,
        target: &serving::Target,
        tls_crt: Option<&[u8]>,
    ) -> Result<String, String> {
        let chain = tls_crt
            .map(Certificate::all_from_pem)
            .ok_or("no tls.crt")?
            .map_err(|e| format!("tls.crt: {e}"))?;
        let (leaf, intermediates) = chain.split_first().ok_or("tls.crt holds no certificate")?;
        let ca = &self.state.ca.cert;
        if !pki_core::issued_by(leaf, ca).issued_by {
            return Err(format!(
                "leaf {} is not from the current CA {}",
                leaf.id(),
                ca.id()
            ));
        }
        let mut options = VerifyOptions::new(self.now, Purpose::ServerAuth);
        let dns = format!("{}.{}.svc", target.name, target.namespace);
        options.name = Some(ExpectedName::Dns(dns));
        verify_chain(leaf, intermediates, &self.state.bundle, &options)
            .map_err(|e| format!("the chain does not verify against the current bundle: {e}"))?;
        Ok(leaf.id())
    }
}

/// The first 16 hex digits of a fingerprint, as `pki status` shows them.
fn short(fingerprint: &str) -> &str {
    fingerprint.get(..16).unwrap_or(fingerprint)
}
