//! Serving certificates for annotated Services: which leaf each Service
//! asks for, and the `kubernetes.io/tls` Secret that carries it.

use super::Writer;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, PostParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use pki_rotate::{LeafRequest, SignerState};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The annotation (after the prefix) naming a Service's serving Secret.
pub(super) const SERVING_CERT_SECRET_NAME: &str = "serving-cert-secret-name";

/// The annotation (after the prefix) that marks a Secret as written by the
/// controller of a store: its value is the store's URL without a context
/// ([`KubeUrl::identity`](crate::KubeUrl::identity)). A Secret without
/// it is someone else's and is never written.
pub(super) const SERVING_CERT_STORE: &str = "serving-cert-store";

/// Every leaf the controller keeps starts with this, so that a pass can
/// tell its own leaves from those `pki issue` made.
const LEAF_PREFIX: &str = "svc.";

/// The longest leaf name the signer takes.
const MAX_LEAF_NAME: usize = 64;

/// A Service that asks for a serving certificate.
#[derive(Debug, Clone)]
pub(super) struct Target {
    pub(super) service: Arc<Service>,
    pub(super) namespace: String,
    pub(super) name: String,
    /// The Secret it names.
    pub(super) secret: String,
    /// The signer leaf that holds its certificate.
    pub(super) leaf: String,
}

impl Target {
    /// The leaf request: the Service's two DNS names, the default lifetime.
    pub(super) fn request(&self) -> LeafRequest {
        let (name, namespace) = (&self.name, &self.namespace);
        LeafRequest::server(vec![
            format!("{name}.{namespace}.svc"),
            format!("{name}.{namespace}.svc.cluster.local"),
        ])
    }
}

/// The Services annotated `PREFIX serving-cert-secret-name`, in a stable
/// order (by leaf name).
pub(super) fn targets(services: &[Arc<Service>], prefix: &str) -> Vec<Target> {
    let key = format!("{prefix}{SERVING_CERT_SECRET_NAME}");
    let mut targets: Vec<Target> = services
        .iter()
        .filter_map(|service| {
            let secret = service.annotations().get(&key)?.trim();
            let namespace = service.namespace()?;
            let name = service.name_any();
            Some(Target {
                leaf: leaf_name(&namespace, &name),
                secret: secret.to_string(),
                service: Arc::clone(service),
                namespace,
                name,
            })
        })
        .filter(|target| !target.secret.is_empty())
        .collect();
    targets.sort_by(|a, b| a.leaf.cmp(&b.leaf));
    targets
}

/// `svc.NAMESPACE.SERVICE` (both DNS labels, so a valid leaf name), or,
/// when that is longer than a leaf name may be, `svc.x.` and a hash of the
/// two.
pub(super) fn leaf_name(namespace: &str, service: &str) -> String {
    let plain = format!("{LEAF_PREFIX}{namespace}.{service}");
    if plain.len() <= MAX_LEAF_NAME {
        return plain;
    }
    let digest = Sha256::digest(format!("{namespace}/{service}").as_bytes());
    format!("{LEAF_PREFIX}x.{}", hex::encode(&digest[..16]))
}

/// Whether `leaf` is one of the controller's.
pub(super) fn is_service_leaf(leaf: &str) -> bool {
    leaf.starts_with(LEAF_PREFIX)
}

/// The Secret's data for `target`'s leaf in `state`, None while it has no
/// certificate.
fn secret_data(target: &Target, state: &SignerState) -> Option<BTreeMap<String, ByteString>> {
    let issued = state.leaves.get(&target.leaf)?.issued.as_ref()?;
    let chain: String = state
        .serving_chain(&issued.cert)
        .iter()
        .map(|cert| cert.to_pem())
        .collect();
    let key = issued.key.to_pkcs8_pem().ok()?;
    Some(BTreeMap::from([
        ("tls.crt".to_string(), ByteString(chain.into_bytes())),
        ("tls.key".to_string(), ByteString(key.as_bytes().to_vec())),
        (
            "ca.crt".to_string(),
            ByteString(state.bundle.to_pem().into_bytes()),
        ),
    ]))
}

/// Whether `secret` holds a leaf from a CA that `state` never had (not
/// its CA, nor any CA of its rotation history): then `state` is older than
/// the document another replica wrote the Secret from (a leader whose
/// lease this one took over while it was still acting, or the reverse),
/// and writing it back would replace a newer CA's leaf with an older one's.
/// The replica with the newer document writes it; this one never does. A
/// leaf of an older CA, even one no longer trusted (a compromise), is known
/// to the history and is replaced.
fn holds_unknown_ca_leaf(secret: &Secret, state: &SignerState) -> bool {
    let theirs = secret.data.as_ref().and_then(|d| d.get("tls.crt"));
    let chain = theirs.and_then(|pem| pki_core::Certificate::all_from_pem(&pem.0).ok());
    let Some(issuer_key) = chain
        .as_ref()
        .and_then(|chain| chain.first())
        .and_then(|leaf| leaf.aki())
    else {
        return false;
    };
    // A CA id starts with the first 16 hex digits of its key identifier.
    let issuer = hex::encode(issuer_key);
    let issuer = &issuer[..issuer.len().min(16)];
    let history = state.history.iter();
    let mut ids = std::iter::once(state.ca.cert.id())
        .chain(history.flat_map(|r| [r.from.clone(), r.to.clone()]));
    !ids.any(|id| id.split('-').next() == Some(issuer))
}

/// Why the controller rewrites a Secret that holds `before`: the engine's
/// reason when this pass re-issued the leaf (`reissued`), else what
/// changed, read from the two certificates (another replica or `pki
/// rotate` re-issued it).
fn rewrite_reason(
    before: &Secret,
    data: &BTreeMap<String, ByteString>,
    reissued: Option<&str>,
) -> String {
    if let Some(reason) = reissued {
        return format!("leaf re-issued: {reason}");
    }
    let leaf = |data: Option<&BTreeMap<String, ByteString>>| {
        let pem = data?.get("tls.crt")?;
        pki_core::Certificate::all_from_pem(&pem.0)
            .ok()?
            .into_iter()
            .next()
    };
    match (leaf(before.data.as_ref()), leaf(Some(data))) {
        (Some(old), Some(new)) if old == new => "the CA bundle changed (ca.crt)".into(),
        (Some(old), Some(new)) if old.aki() != new.aki() => {
            format!("the CA was rotated: leaf {} from the new CA", new.id())
        }
        (_, Some(new)) => format!("leaf re-issued ({})", new.id()),
        _ => "its content differs from the store's".into(),
    }
}

impl Writer<'_> {
    /// Makes `target`'s Secret hold its leaf: created when missing,
    /// replaced (at the resourceVersion read) when the controller made it
    /// and its data differs, left alone when someone else made it.
    /// `reissued`: why this pass re-issued the leaf, if it did.
    pub(super) async fn serving_secret(
        &self,
        target: &Target,
        state: &SignerState,
        reissued: Option<&str>,
    ) {
        let Some(data) = secret_data(target, state) else {
            return;
        };
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &target.namespace);
        let (ns, secret) = (&target.namespace, &target.secret);
        let existing = match self.call(api.get_opt(secret)).await {
            Ok(existing) => existing,
            Err(fail) => {
                return self.notice(&format!("Secret {ns}/{secret}: {}", fail.describe()));
            }
        };
        let (written, why) = match existing {
            None => {
                let object = self.secret_object(target, None, data);
                let created = self.call(api.create(&PostParams::default(), &object)).await;
                (created, None)
            }
            Some(existing) if !self.is_ours(&existing) => return self.refuse(target).await,
            Some(existing) if existing.data.as_ref() == Some(&data) => return,
            Some(existing) if holds_unknown_ca_leaf(&existing, state) => {
                return self.notice(&format!(
                    "Secret {ns}/{secret} holds a certificate from a CA newer than this replica's document: left for the replica that wrote it"
                ));
            }
            Some(existing) => {
                let why = rewrite_reason(&existing, &data, reissued);
                let version = existing.resource_version();
                let object = self.secret_object(target, version, data);
                let replaced = self
                    .call(api.replace(secret, &PostParams::default(), &object))
                    .await;
                (replaced, Some(why))
            }
        };
        match written {
            Ok(_) => {
                self.clear_refusal(&format!("{ns}/{secret}"));
                let leaf = &target.leaf;
                let (reason, message) = match why {
                    None => (
                        "ServingCertIssued",
                        format!("Secret {ns}/{secret} holds leaf {leaf} (created)"),
                    ),
                    Some(why) => (
                        "ServingCertReissued",
                        format!("Secret {ns}/{secret} holds leaf {leaf} (rewritten: {why})"),
                    ),
                };
                self.notice(&message);
                let regarding = target.service.object_ref(&());
                self.own_event(&regarding, EventType::Normal, reason, message)
                    .await;
            }
            // A conflict or a create race: the next pass reads it again.
            Err(fail) => self.notice(&format!("Secret {ns}/{secret}: {}", fail.describe())),
        }
    }

    /// Whether the controller of this store made `secret`.
    fn is_ours(&self, secret: &Secret) -> bool {
        let key = format!("{}{SERVING_CERT_STORE}", self.options.annotation_prefix);
        secret
            .annotations()
            .get(&key)
            .is_some_and(|marker| self.store.is_same_store(marker))
    }

    /// Says why a Secret the controller did not make stays as it is:
    /// once per Secret while the controller runs, not on every pass.
    async fn refuse(&self, target: &Target) {
        if !self.first_refusal(&format!("{}/{}", target.namespace, target.secret)) {
            return;
        }
        let message = format!(
            "Secret {}/{} exists and was not created by pki controller of {}: not overwritten (delete it, or name another Secret)",
            target.namespace,
            target.secret,
            self.store.identity()
        );
        self.notice(&message);
        let regarding = target.service.object_ref(&());
        self.event(&regarding, EventType::Warning, "SecretNotOwned", message)
            .await;
    }

    /// The Secret for `target`: its data, the marker, and the Service as
    /// its owner (so that Kubernetes' garbage collector removes it with
    /// the Service).
    fn secret_object(
        &self,
        target: &Target,
        resource_version: Option<String>,
        data: BTreeMap<String, ByteString>,
    ) -> Secret {
        let prefix = &self.options.annotation_prefix;
        let owner = target.service.uid().map(|uid| OwnerReference {
            api_version: "v1".into(),
            kind: "Service".into(),
            name: target.name.clone(),
            uid,
            ..OwnerReference::default()
        });
        Secret {
            metadata: ObjectMeta {
                name: Some(target.secret.clone()),
                namespace: Some(target.namespace.clone()),
                resource_version,
                labels: Some(BTreeMap::from([(
                    crate::layout::LABEL_MANAGED_BY.to_string(),
                    crate::layout::MANAGED_BY.to_string(),
                )])),
                annotations: Some(BTreeMap::from([
                    (
                        format!("{prefix}{SERVING_CERT_STORE}"),
                        self.store.identity(),
                    ),
                    (format!("{prefix}leaf"), target.leaf.clone()),
                ])),
                owner_references: owner.map(|owner| vec![owner]),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(data),
            ..Secret::default()
        }
    }
}
