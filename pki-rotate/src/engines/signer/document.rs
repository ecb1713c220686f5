//! The signer's document and its three forms.
//!
//! - **Files** ([`SignerState::to_files`]), what stores keep and consumers
//!   read: `pki-state.json` (the document without leaf requests,
//!   certificates and keys), `leaf-requests/NAME.json` (each leaf's
//!   request, in a file of its own so that a step changing one leaf of
//!   many reads and writes that leaf's files only), `signer/tls.crt`,
//!   `signer/tls.key` (secret), `signer/intermediate-ca.crt`
//!   (bridge B, after a rotation, followed by the certificates above it when
//!   the previous CA was imported under someone else's root),
//!   `ca-bundle.crt`, and for each issued leaf
//!   `certs/NAME/tls.crt` (leaf, then bridge B when present),
//!   `certs/NAME/tls.key` (secret) and `certs/NAME/tls.pem` (secret: the
//!   two in one file, which a reader gets whole from one commit; read back
//!   only to check it matches, and left out of the Secret data form).
//! - **One JSON document** ([`SignerState::to_json`]), with certificates and
//!   keys inline as PEM under `material`: what an embedding program (or the
//!   C ABI) keeps in one blob.
//! - **A Kubernetes Secret's data** ([`SignerState::to_secret_data`]): the
//!   files under Secret data keys (table below).
//!
//! Format version 3, fields of `pki-state.json`:
//!
//! | field | meaning |
//! |---|---|
//! | `kind` | always `"signer"` |
//! | `version` | 3; versions 1 (no `kind`, a `generation` field) and 2 (leaf requests inside `pki-state.json` in the files form too) are migrated on read, anything else refused |
//! | `policy` | [`SignerPolicy`]: lifetime, min_trust, reload_interval, key_algorithm, keep_previous_root, leaf_refresh_fraction |
//! | `forced_rotation_reason` | reason of the last forced rotation, or null |
//! | `previous` | the CA rotated out last: id, not_after, trusted_until, certificate, probe |
//! | `leaves` | (JSON and Secret forms only; the files form keeps them in `leaf-requests/NAME.json`) leaf requests by name: kind, dns_names, ip_addresses, lifetime |
//! | `history` | rotations: at, reason, from, to, previous_trusted_until |
//! | `published` | the last bundles published: fingerprint, at ([`crate::engines::uptake`]); absent in older documents |
//! | `consumers` | by name, the bundle each consumer acknowledged: fingerprint, loaded_at |
//! | `material` | (JSON form only) PEM: ca_cert, ca_key, bridge, bundle, leaves{name: {cert, key}} |
//!
//! Version 1 kept the store's compare-and-swap counter in the document
//! (`generation`); stores now own their revisions, so migration drops it.
//! Version 2 kept every leaf request in `pki-state.json`, which a step then
//! read and wrote whole (1.5 MB at 10,000 leaves); the next write of a
//! version 2 store moves them into `leaf-requests/`.
//!
//! Secret data keys:
//!
//! | file | Secret key |
//! |---|---|
//! | `signer/tls.crt` | `tls.crt` |
//! | `signer/tls.key` | `tls.key` (secret) |
//! | `signer/intermediate-ca.crt` | `intermediate-ca.crt` |
//! | `ca-bundle.crt` | `ca-bundle.crt` |
//! | `pki-state.json` | `pki-state.json`, with the leaf requests inside (`leaves`): a Secret is read and written whole |
//! | `leaf-requests/NAME.json` | — (inside `pki-state.json`) |
//! | `certs/NAME/tls.crt`, `certs/NAME/tls.key` | `certs.NAME.tls.crt`, `certs.NAME.tls.key` (secret) |
//! | — | `forced-rotation-reason`: when present, the recorded reason (empty = none) |
//!
//! The names `tls.crt` and `tls.key` make the Secret usable as a
//! `kubernetes.io/tls` Secret of the CA itself.

use crate::engines::leaf::LeafRequest;
use crate::engines::signer::{ConsumerRecord, PublishedBundle};
use crate::engines::signer::{ExternalCa, ExternalRecord};
use crate::engines::signer::{PreviousCa, RotationRecord, SignerPolicy, SignerState};
use crate::engines::token_keys::TokenKeys;
use crate::model::document::{Document as DocumentForm, Envelope, File, Files, Idle, SecretData};
use crate::model::error::{Result, RotateError};
use pki_core::Certificate;
use std::collections::{BTreeMap, BTreeSet};
use zeroize::Zeroizing;

mod assemble;
mod part;
mod requests;
mod secret;

use assemble::assemble;

use requests::{
    Wanted, check_stored_request, leaf_of_request_path, parse_files_document, request_file,
    state_json,
};

pub use secret::{files_from_secret_data, secret_data_from_files};

/// The document kind.
pub const KIND: &str = "signer";
/// The format version this build writes (and the newest it reads).
pub const VERSION: u32 = 3;

/// Name of the document file in the files form.
pub const STATE_FILE: &str = "pki-state.json";
/// The CA certificate.
pub const SIGNER_CERT: &str = "signer/tls.crt";
/// The CA private key (secret).
pub const SIGNER_KEY: &str = "signer/tls.key";
/// Bridge B, after a rotation.
pub const SIGNER_BRIDGE: &str = "signer/intermediate-ca.crt";
/// The chain above an imported CA (issuer first, root last), when it has one.
pub const SIGNER_CHAIN: &str = "signer/ca-chain.crt";
/// The CA bundle clients trust.
pub const CA_BUNDLE: &str = "ca-bundle.crt";
/// The directory of the leaves (present even when empty).
pub const CERTS_DIR: &str = "certs";
/// The directory of the leaf requests in the files form (present even when
/// empty).
pub const LEAF_REQUESTS_DIR: &str = "leaf-requests";
/// Secret data key of the forced-rotation reason override.
pub const FORCED_ROTATION_REASON_KEY: &str = "forced-rotation-reason";

/// The files whose Secret data key is not the path with `/` → `.`.
pub const SECRET_RENAMES: &[(&str, &str)] = &[
    (SIGNER_CERT, "tls.crt"),
    (SIGNER_KEY, "tls.key"),
    (SIGNER_BRIDGE, "intermediate-ca.crt"),
    (SIGNER_CHAIN, "ca-chain.crt"),
];

/// Path of a leaf's request in the files form.
pub fn leaf_request_path(name: &str) -> String {
    format!("{LEAF_REQUESTS_DIR}/{name}.json")
}

/// Path of a leaf's chain file (leaf first, then bridge B when present).
pub fn leaf_cert_path(name: &str) -> String {
    format!("{CERTS_DIR}/{name}/tls.crt")
}
/// Path of a leaf's private key (secret).
pub fn leaf_key_path(name: &str) -> String {
    format!("{CERTS_DIR}/{name}/tls.key")
}
/// Path of a leaf's chain and key in one file (secret): `tls.crt` then
/// `tls.key`. One file is read whole from one commit, while `tls.crt` and
/// `tls.key` opened one after the other may come from two (a directory
/// store switches between the two opens).
pub fn leaf_pem_path(name: &str) -> String {
    format!("{CERTS_DIR}/{name}/tls.pem")
}

/// Whether `path` is a leaf's combined `tls.pem`.
fn is_leaf_pem(path: &str) -> bool {
    path.strip_prefix(CERTS_DIR)
        .and_then(|rest| rest.strip_suffix("/tls.pem"))
        .is_some_and(|name| name.starts_with('/') && !name[1..].contains('/'))
}

/// Versions 2 and 3: version 3 keeps the leaf requests out of the files
/// form's `pki-state.json` (in `leaf-requests/`), version 2 kept them in.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    kind: String,
    version: u32,
    policy: SignerPolicy,
    forced_rotation_reason: Option<String>,
    previous: Option<PreviousCa>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    leaves: BTreeMap<String, LeafRequest>,
    history: Vec<RotationRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    material: Option<Material>,
    /// Present when the CA was imported (its chain is `signer/ca-chain.crt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    external: Option<ExternalRecord>,
    /// The bundles published last (absent before they were recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    published: Vec<PublishedBundle>,
    /// What each consumer acknowledged last.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    consumers: BTreeMap<String, ConsumerRecord>,
    /// Present when the CA keys are objects in a PKCS#11 token: then
    /// there is no `signer/tls.key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_keys: Option<TokenKeys>,
}

/// Version 1, as the first release wrote it.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DocumentV1 {
    #[allow(dead_code)]
    version: u32,
    /// The store's compare-and-swap counter, now the store's own business.
    #[serde(default)]
    #[allow(dead_code)]
    generation: u64,
    policy: SignerPolicy,
    forced_rotation_reason: Option<String>,
    previous: Option<PreviousCa>,
    leaves: BTreeMap<String, LeafRequest>,
    history: Vec<RotationRecord>,
    #[serde(default)]
    material: Option<Material>,
}

impl From<DocumentV1> for Document {
    fn from(v1: DocumentV1) -> Self {
        Document {
            kind: KIND.to_string(),
            version: 1,
            policy: v1.policy,
            forced_rotation_reason: v1.forced_rotation_reason,
            previous: v1.previous,
            leaves: v1.leaves,
            history: v1.history,
            material: v1.material,
            external: None,
            published: Vec::new(),
            consumers: BTreeMap::new(),
            token_keys: None,
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Material {
    ca_cert: String,
    /// Absent when the CA key is a token object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ca_key: Option<Zeroizing<String>>,
    bridge: Option<String>,
    bundle: String,
    leaves: BTreeMap<String, LeafMaterial>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    chain: Option<String>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LeafMaterial {
    cert: String,
    key: Zeroizing<String>,
}

/// Reads the document, checking kind and version first and migrating
/// version 1; then checks the policy and each leaf's name and request.
/// `version` stays the one read.
fn parse_document(location: &str, bytes: &[u8]) -> Result<Document> {
    let envelope = Envelope::probe(location, bytes)?;
    envelope.check(location, KIND, VERSION, |v| v == 1)?;
    let doc: Document = match envelope.version {
        1 => serde_json::from_slice::<DocumentV1>(bytes)
            .map_err(|e| RotateError::json(location, e))?
            .into(),
        _ => serde_json::from_slice(bytes).map_err(|e| RotateError::json(location, e))?,
    };
    doc.policy
        .validate()
        .map_err(|e| RotateError::corrupt(format!("{location}: policy"), e))?;
    for (name, request) in &doc.leaves {
        check_stored_request(&format!("{location}: leaves.{name}"), name, request)?;
    }
    Ok(doc)
}

impl SignerState {
    fn document(&self, with_material: bool) -> Result<Document> {
        let material = if with_material {
            let mut leaves = BTreeMap::new();
            for (name, leaf) in &self.leaves {
                if let Some(issued) = &leaf.issued {
                    leaves.insert(
                        name.clone(),
                        LeafMaterial {
                            cert: issued.cert.to_pem(),
                            key: issued.key.to_pkcs8_pem()?,
                        },
                    );
                }
            }
            Some(Material {
                ca_cert: self.ca.cert.to_pem(),
                ca_key: self.in_process_key_pem()?,
                bridge: self.bridge_pem(),
                bundle: self.bundle.to_pem(),
                leaves,
                chain: self.external_chain_pem(),
            })
        } else {
            None
        };
        Ok(Document {
            kind: KIND.to_string(),
            version: VERSION,
            policy: self.policy,
            forced_rotation_reason: self.forced_rotation_reason.clone(),
            previous: self.previous.clone(),
            leaves: self
                .leaves
                .iter()
                .map(|(n, l)| (n.clone(), (*l.request).clone()))
                .collect(),
            history: self.history.clone(),
            material,
            external: self.external.as_ref().map(ExternalCa::record),
            published: self.published.clone(),
            consumers: self.consumers.clone(),
            token_keys: self.token_keys.clone(),
        })
    }

    /// The CA key's PKCS#8 PEM when it is in this process; None for a
    /// token object, of which the document keeps only the URI.
    fn in_process_key_pem(&self) -> Result<Option<Zeroizing<String>>> {
        Ok(match self.ca.key.in_process() {
            Some(key) => Some(key.to_pkcs8_pem()?),
            None => None,
        })
    }

    /// The whole state as one versioned JSON document (keys included).
    ///
    /// # Errors
    ///
    /// [`RotateError::Core`] when a private key does not encode, and
    /// [`DocumentError::Json`](crate::DocumentError::Json) when the document
    /// does not serialize.
    pub fn to_json(&self) -> Result<Zeroizing<Vec<u8>>> {
        let doc = self.document(true)?;
        serde_json::to_vec_pretty(&doc)
            .map(Zeroizing::new)
            .map_err(|e| RotateError::json("signer document", e))
    }

    /// Reads the JSON document form (version 1, 2 or 3).
    ///
    /// # Errors
    ///
    /// [`DocumentError::Unsupported`](crate::DocumentError::Unsupported) for
    /// another kind or version,
    /// [`DocumentError::Json`](crate::DocumentError::Json) for JSON that does
    /// not parse, [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) for
    /// a missing `material`, an invalid stored policy or leaf request, or
    /// material that does not fit together, and
    /// [`DocumentError::Material`](crate::DocumentError::Material) for a
    /// certificate or key that does not decode.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        let mut doc = parse_document("signer document", bytes)?;
        let material = doc.material.take().ok_or_else(|| {
            RotateError::corrupt(
                "signer document",
                "has no \"material\" (certificates and keys)",
            )
        })?;
        let get = |field: &str| -> Option<&[u8]> {
            match field {
                SIGNER_CERT => Some(material.ca_cert.as_bytes()),
                SIGNER_KEY => material.ca_key.as_ref().map(|k| k.as_bytes()),
                SIGNER_BRIDGE => material.bridge.as_ref().map(|b| b.as_bytes()),
                CA_BUNDLE => Some(material.bundle.as_bytes()),
                SIGNER_CHAIN => material.chain.as_ref().map(|c| c.as_bytes()),
                _ => None,
            }
        };
        let leaf = |name: &str| -> Option<(&[u8], &[u8])> {
            material
                .leaves
                .get(name)
                .map(|m| (m.cert.as_bytes(), m.key.as_bytes()))
        };
        assemble(doc, "material", get, leaf)
    }

    /// The files under Kubernetes Secret data keys (see the module's table),
    /// plus `forced-rotation-reason` when a forced rotation was recorded.
    ///
    /// # Errors
    ///
    /// Those of [`Document::to_files`](crate::Document::to_files) and
    /// [`secret_data_from_files`].
    pub fn to_secret_data(&self) -> Result<SecretData> {
        secret_data_from_files(&self.to_files()?)
    }

    /// Reads Secret data written by [`SignerState::to_secret_data`] (possibly
    /// after a round trip through a Kubernetes Secret). Keys the document
    /// does not expect are ignored. `forced-rotation-reason`, when present,
    /// is the recorded reason (empty = none), overriding the document's.
    ///
    /// # Errors
    ///
    /// Those of [`files_from_secret_data`] and
    /// [`Document::from_files`](crate::Document::from_files).
    pub fn from_secret_data(data: &SecretData) -> Result<Self> {
        Self::from_files(&files_from_secret_data(data)?)
    }
}

impl DocumentForm for SignerState {
    const KIND: &'static str = KIND;
    const VERSION: u32 = VERSION;
    /// Version 1 predates kinds.
    const KINDLESS_VERSIONS: &'static [u32] = &[1];

    /// `pki-state.json`, whatever the document holds.
    fn state_file(near: Option<&str>) -> Option<String> {
        let _ = near;
        Some(STATE_FILE.to_string())
    }

    /// The CA key.
    fn sealed_witness_paths(read: Option<&Files>) -> BTreeSet<String> {
        match read {
            None => BTreeSet::from([SIGNER_KEY.to_string()]),
            Some(_) => BTreeSet::new(),
        }
    }

    /// The files form: PEM files, `pki-state.json` (without material and
    /// leaf requests) and a request file per leaf.
    fn to_files(&self) -> Result<Files> {
        let mut files = Files::new();
        let mut doc = self.document(false)?;
        files.insert_dir(LEAF_REQUESTS_DIR)?;
        for (name, request) in std::mem::take(&mut doc.leaves) {
            files.insert(leaf_request_path(&name), request_file(&name, &request)?)?;
        }
        files.insert(STATE_FILE, File::public(state_json(&doc)?))?;
        files.insert(SIGNER_CERT, File::public(self.ca.cert.to_pem()))?;
        if let Some(key) = self.in_process_key_pem()? {
            files.insert(SIGNER_KEY, File::secret(key.as_bytes()))?;
        }
        if let Some(bridge) = self.bridge_pem() {
            files.insert(SIGNER_BRIDGE, File::public(bridge))?;
        }
        files.insert(CA_BUNDLE, File::public(self.bundle.to_pem()))?;
        if let Some(chain) = self.external_chain_pem() {
            files.insert(SIGNER_CHAIN, File::public(chain))?;
        }
        files.insert_dir(CERTS_DIR)?;
        for (name, leaf) in &self.leaves {
            if let Some(issued) = &leaf.issued {
                let chain: String = self
                    .serving_chain(&issued.cert)
                    .iter()
                    .map(Certificate::to_pem)
                    .collect();
                let key = issued.key.to_pkcs8_pem()?;
                let mut combined = Zeroizing::new(Vec::with_capacity(chain.len() + key.len()));
                combined.extend_from_slice(chain.as_bytes());
                combined.extend_from_slice(key.as_bytes());
                files.insert(leaf_cert_path(name), File::public(chain))?;
                files.insert(leaf_key_path(name), File::secret(key.as_bytes()))?;
                files.insert(
                    leaf_pem_path(name),
                    File {
                        contents: combined,
                        secret: true,
                    },
                )?;
            }
        }
        Ok(files)
    }

    /// Reads the files form (version 1, 2 or 3). A missing or malformed
    /// file is an error naming it. Which files are secret is decided here,
    /// not by the flags the files carry.
    fn from_files(files: &Files) -> Result<Self> {
        assemble_files(parse_files_document(files, Wanted::All)?, files)
    }

    fn files_to_secret_data(files: &Files) -> Result<SecretData> {
        secret_data_from_files(files)
    }

    /// Bridge B must be the current CA (its Subject and key) certified by
    /// the previous CA's key: it goes into every serving chain, so a
    /// foreign certificate there would make clients holding the old bundle
    /// reject every server.
    /// Consumers read each leaf's key (`certs/NAME/tls.key`) and its
    /// chain-and-key file (`certs/NAME/tls.pem`) where they are published.
    fn published_secret(path: &str) -> bool {
        matches!(
            path.split('/').collect::<Vec<_>>().as_slice(),
            [CERTS_DIR, _, "tls.key" | "tls.pem"]
        )
    }

    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let Some(bridge) = &self.bridge else {
            return problems;
        };
        let ca = &self.ca.cert;
        if bridge.subject() != ca.subject() {
            problems.push(format!(
                "bridge B {} has subject \"{}\", not the CA's \"{}\"",
                bridge.id(),
                bridge.subject(),
                ca.subject()
            ));
        }
        if bridge.spki_sha256() != ca.spki_sha256() {
            problems.push(format!(
                "bridge B {} certifies another key than the CA {}'s",
                bridge.id(),
                ca.id()
            ));
        }
        // The previous CA: kept as its certificate, or the first of the
        // chain that follows bridge B (an imported previous CA).
        let previous = self
            .previous
            .as_ref()
            .and_then(|p| p.certificate.as_ref())
            .and_then(|pem| Certificate::from_pem(pem.as_bytes()).ok())
            .or_else(|| self.bridge_chain.first().cloned());
        // Documents of the first release kept no previous CA certificate:
        // the Subject and key checks above still hold for them.
        if let Some(previous) = previous
            && let Err(e) = pki_core::verify_signature(previous.public_key(), bridge)
        {
            problems.push(format!(
                "bridge B {} is not signed by the previous CA {}: {e}",
                bridge.id(),
                previous.id()
            ));
        }
        problems
    }

    fn files_from_secret_data(data: &SecretData) -> Result<Files> {
        files_from_secret_data(data)
    }

    fn part_paths(names: &BTreeSet<String>) -> Option<BTreeSet<String>> {
        Some(part::paths(names))
    }

    fn from_part(files: &Files, names: &BTreeSet<String>) -> Result<Self> {
        part::read(files, names)
    }

    fn attach_tokens(&mut self, access: &std::sync::Arc<dyn pki_core::TokenAccess>) {
        self.attach_token_access(access);
    }

    fn follow_up(&self) -> crate::FollowUp {
        self.token_keys
            .as_ref()
            .map_or(crate::FollowUp::None, TokenKeys::follow_up)
    }

    fn simulate_tokens(&mut self) {
        if let Some(keys) = &mut self.token_keys {
            keys.simulate();
        }
    }

    /// The signer's plan with nothing asked, at `now`: when it changes
    /// nothing, nothing changes before its next check either (that is what
    /// the next check is), so steps until then are idle.
    fn idle(&self, now: time::OffsetDateTime) -> Option<Idle> {
        let plan = crate::engines::signer::plan(self, &crate::SignerInput::default(), now).ok()?;
        if !plan.is_empty() {
            return None;
        }
        self.idle_after_step(now, plan.next_check)
    }

    /// The promise until `next_wake`, the next check of a document at
    /// rest (tests/properties.rs holds every step's outcome to it).
    fn idle_after_step(
        &self,
        now: time::OffsetDateTime,
        next_wake: time::OffsetDateTime,
    ) -> Option<Idle> {
        if next_wake <= now {
            return None;
        }
        // Nor is anything broken or lagging while the promise lasts: inside
        // it `pki status --check` answers from the summary.
        let until = crate::engines::signer::status::ok_until(self, now, next_wake)?;
        let report = IdleReport {
            ca_id: self.ca.cert.id(),
            next_rotation: self.rotation_due_at(&self.policy),
            ca_subject: Some(self.ca.cert.subject().to_string()),
            rotations: Some(self.history.len()),
            bundle_fingerprint: Some(self.bundle_fingerprint()),
            status_ok: true,
        };
        Some(Idle {
            kind: KIND.to_string(),
            since: now,
            until,
            report: serde_json::to_value(report).ok()?,
        })
    }
}

/// What a signer step with nothing to do reports (the report of its
/// [`Idle`] promise): what `pki rotate` prints when nothing was due, and
/// the head of what `pki status --check` prints from the summary. Fields
/// added since the first summaries are optional (a summary an older build
/// wrote lacks them), and fields this build does not know are ignored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IdleReport {
    /// The current CA's id.
    pub ca_id: String,
    /// When the CA is due for rotation under the document's policy.
    #[serde(with = "time::serde::rfc3339")]
    pub next_rotation: time::OffsetDateTime,
    /// The current CA's subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_subject: Option<String>,
    /// How many rotations the document records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotations: Option<usize>,
    /// The fingerprint of the published bundle
    /// ([`SignerState::bundle_fingerprint`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle_fingerprint: Option<String>,
    /// Whether the promise also holds that nothing is broken, no consumer
    /// lags and no imported CA waits for its replacement, so that `pki
    /// status --check` may answer `ok` from it: every promise this build
    /// makes; false in a summary an older build wrote, whose promise was
    /// about steps alone.
    #[serde(default)]
    pub status_ok: bool,
}

/// The signer from its files: the leaves `doc` names, each from its
/// `tls.crt` and `tls.key`, and the head.
fn assemble_files(doc: Document, files: &Files) -> Result<SignerState> {
    let get = |path: &str| files.get(path);
    // `tls.pem` is derived from `tls.crt` and `tls.key`: when present it
    // must hold exactly them, else consumers would read another key.
    for name in doc.leaves.keys() {
        if let (Some(pem), Some(chain), Some(key)) = (
            get(&leaf_pem_path(name)),
            get(&leaf_cert_path(name)),
            get(&leaf_key_path(name)),
        ) && (pem.len() != chain.len() + key.len()
            || pem[..chain.len()] != *chain
            || pem[chain.len()..] != *key)
        {
            return Err(RotateError::corrupt(
                format!("store: {}", leaf_pem_path(name)),
                format!(
                    "does not hold {} followed by {}",
                    leaf_cert_path(name),
                    leaf_key_path(name)
                ),
            ));
        }
    }
    let leaf = |name: &str| -> Option<(&[u8], &[u8])> {
        Some((get(&leaf_cert_path(name))?, get(&leaf_key_path(name))?))
    };
    assemble(doc, "store", get, leaf)
}

impl SignerState {
    /// Bridge B then what follows it in serving chains, as PEM.
    fn bridge_pem(&self) -> Option<String> {
        self.bridge.as_ref().map(|b| {
            std::iter::once(b)
                .chain(&self.bridge_chain)
                .map(Certificate::to_pem)
                .collect()
        })
    }

    /// The imported CA's chain as PEM, when it has one.
    fn external_chain_pem(&self) -> Option<String> {
        self.external
            .as_ref()
            .filter(|e| !e.chain.is_empty())
            .map(|e| e.chain.iter().map(Certificate::to_pem).collect())
    }
}
