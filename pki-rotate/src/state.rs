//! The versioned state format.
//!
//! A [`SignerState`] has two serialized forms that share one document:
//!
//! - **one JSON document** ([`SignerState::to_json`]), with certificates and
//!   keys inline as PEM strings: what an embedding program (or the C ABI)
//!   keeps in a database or a Kubernetes Secret;
//! - **a set of named files** ([`SignerState::to_files`]): the PEM files
//!   servers and clients read (`signer/tls.crt`, `ca-bundle.crt`,
//!   `certs/NAME/tls.crt`…) plus `pki-state.json`, the same document without
//!   the material. The filesystem store writes these.
//!
//! Format version 1, top-level fields of the document:
//!
//! | field | meaning |
//! |---|---|
//! | `version` | format version, always 1; any other value is refused, never reset |
//! | `generation` | store generation, incremented at every commit (compare-and-swap token) |
//! | `policy` | [`SignerPolicy`]: lifetime, min_trust, reload_interval, key_algorithm, keep_previous_root, leaf_refresh_fraction |
//! | `forced_rotation_reason` | reason of the last forced rotation, or null |
//! | `previous` | the CA rotated out last: id, not_after, trusted_until |
//! | `leaves` | leaf requests by name: kind, dns_names, ip_addresses, lifetime |
//! | `history` | rotations: at, reason, from, to, previous_trusted_until |
//! | `material` | (JSON form only) PEM: ca_cert, ca_key, bridge, bundle, leaves{name: {cert, key}} |

use crate::error::{Result, RotateError};
use crate::leaf::LeafRequest;
use crate::signer::{IssuedLeaf, Leaf, PreviousCa, RotationRecord, SignerPolicy, SignerState};
use pki_core::{Bundle, Certificate, CertificateAuthority, PrivateKey};
use std::collections::BTreeMap;
use zeroize::Zeroizing;

/// The state format version this build reads and writes.
pub const STATE_VERSION: u32 = 1;

/// Name of the document file in the file form.
pub const STATE_FILE: &str = "pki-state.json";
/// The CA certificate.
pub const SIGNER_CERT: &str = "signer/tls.crt";
/// The CA private key (mode 0600).
pub const SIGNER_KEY: &str = "signer/tls.key";
/// Bridge B, after a rotation.
pub const SIGNER_BRIDGE: &str = "signer/intermediate-ca.crt";
/// The CA bundle clients trust.
pub const CA_BUNDLE: &str = "ca-bundle.crt";

/// Path of a leaf's chain file (leaf first, then bridge B when present).
pub fn leaf_cert_path(name: &str) -> String {
    format!("certs/{name}/tls.crt")
}
/// Path of a leaf's private key (mode 0600).
pub fn leaf_key_path(name: &str) -> String {
    format!("certs/{name}/tls.key")
}

#[derive(serde::Serialize, serde::Deserialize)]
struct VersionProbe {
    version: u32,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    version: u32,
    #[serde(default)]
    generation: u64,
    policy: SignerPolicy,
    forced_rotation_reason: Option<String>,
    previous: Option<PreviousCa>,
    leaves: BTreeMap<String, LeafRequest>,
    history: Vec<RotationRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    material: Option<Material>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Material {
    ca_cert: String,
    ca_key: Zeroizing<String>,
    bridge: Option<String>,
    bundle: String,
    leaves: BTreeMap<String, LeafMaterial>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LeafMaterial {
    cert: String,
    key: Zeroizing<String>,
}

/// A file of the file form: its contents and whether it holds a secret
/// (written with mode 0600).
#[derive(Clone, PartialEq, Eq)]
pub struct StateFile {
    /// The bytes; zeroized on drop since keys are among them.
    pub contents: Zeroizing<Vec<u8>>,
    /// Private key material.
    pub secret: bool,
}

impl std::fmt::Debug for StateFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "StateFile({} bytes, secret: {})",
            self.contents.len(),
            self.secret
        )
    }
}

/// Named files, by path relative to the store root (`/`-separated).
pub type StateFiles = BTreeMap<String, StateFile>;

impl SignerState {
    fn document(&self, generation: u64, with_material: bool) -> Result<Document> {
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
                ca_key: self.ca.key.to_pkcs8_pem()?,
                bridge: self.bridge.as_ref().map(Certificate::to_pem),
                bundle: self.bundle.to_pem(),
                leaves,
            })
        } else {
            None
        };
        Ok(Document {
            version: STATE_VERSION,
            generation,
            policy: self.policy,
            forced_rotation_reason: self.forced_rotation_reason.clone(),
            previous: self.previous.clone(),
            leaves: self
                .leaves
                .iter()
                .map(|(n, l)| (n.clone(), l.request.clone()))
                .collect(),
            history: self.history.clone(),
            material,
        })
    }

    /// The whole state as one versioned JSON document (keys included).
    pub fn to_json(&self, generation: u64) -> Result<Zeroizing<Vec<u8>>> {
        let doc = self.document(generation, true)?;
        serde_json::to_vec_pretty(&doc)
            .map(Zeroizing::new)
            .map_err(|e| RotateError::corrupt("state document", e))
    }

    /// Reads the JSON document form; returns the state and its generation.
    pub fn from_json(bytes: &[u8]) -> Result<(Self, u64)> {
        let mut doc = parse_document("state document", bytes)?;
        let generation = doc.generation;
        let material = doc.material.take().ok_or_else(|| {
            RotateError::corrupt(
                "state document",
                "has no \"material\" (certificates and keys)",
            )
        })?;
        let get = |field: &str| -> Option<&[u8]> {
            match field {
                SIGNER_CERT => Some(material.ca_cert.as_bytes()),
                SIGNER_KEY => Some(material.ca_key.as_bytes()),
                SIGNER_BRIDGE => material.bridge.as_ref().map(|b| b.as_bytes()),
                CA_BUNDLE => Some(material.bundle.as_bytes()),
                _ => None,
            }
        };
        let leaf = |name: &str| -> Option<(&[u8], &[u8])> {
            material
                .leaves
                .get(name)
                .map(|m| (m.cert.as_bytes(), m.key.as_bytes()))
        };
        Ok((assemble(doc, "material", get, leaf)?, generation))
    }

    /// The file form: PEM files plus `pki-state.json` (without material).
    pub fn to_files(&self, generation: u64) -> Result<StateFiles> {
        let mut files = StateFiles::new();
        let mut put = |path: String, contents: Vec<u8>, secret: bool| {
            files.insert(
                path,
                StateFile {
                    contents: Zeroizing::new(contents),
                    secret,
                },
            );
        };
        let doc = self.document(generation, false)?;
        let json =
            serde_json::to_vec_pretty(&doc).map_err(|e| RotateError::corrupt(STATE_FILE, e))?;
        put(STATE_FILE.into(), json, false);
        put(
            SIGNER_CERT.into(),
            self.ca.cert.to_pem().into_bytes(),
            false,
        );
        put(
            SIGNER_KEY.into(),
            self.ca.key.to_pkcs8_pem()?.as_bytes().to_vec(),
            true,
        );
        if let Some(bridge) = &self.bridge {
            put(SIGNER_BRIDGE.into(), bridge.to_pem().into_bytes(), false);
        }
        put(CA_BUNDLE.into(), self.bundle.to_pem().into_bytes(), false);
        for (name, leaf) in &self.leaves {
            if let Some(issued) = &leaf.issued {
                let chain: String = self
                    .serving_chain(&issued.cert)
                    .iter()
                    .map(Certificate::to_pem)
                    .collect();
                put(leaf_cert_path(name), chain.into_bytes(), false);
                put(
                    leaf_key_path(name),
                    issued.key.to_pkcs8_pem()?.as_bytes().to_vec(),
                    true,
                );
            }
        }
        Ok(files)
    }

    /// Reads the file form; returns the state and its generation. A missing
    /// or malformed file is an error naming it.
    pub fn from_files(files: &StateFiles) -> Result<(Self, u64)> {
        let json = files
            .get(STATE_FILE)
            .ok_or_else(|| RotateError::corrupt(STATE_FILE, "missing"))?;
        let doc = parse_document(STATE_FILE, &json.contents)?;
        let generation = doc.generation;
        let get = |path: &str| files.get(path).map(|f| f.contents.as_slice());
        let leaf = |name: &str| -> Option<(&[u8], &[u8])> {
            Some((get(&leaf_cert_path(name))?, get(&leaf_key_path(name))?))
        };
        Ok((assemble(doc, "store", get, leaf)?, generation))
    }
}

/// Reads the generation of a document without decoding the rest.
pub fn document_generation(location: &str, bytes: &[u8]) -> Result<u64> {
    #[derive(serde::Deserialize)]
    struct G {
        version: u32,
        #[serde(default)]
        generation: u64,
    }
    let g: G = serde_json::from_slice(bytes).map_err(|e| RotateError::corrupt(location, e))?;
    if g.version != STATE_VERSION {
        return Err(RotateError::UnsupportedStateVersion {
            found: g.version,
            supported: STATE_VERSION,
        });
    }
    Ok(g.generation)
}

fn parse_document(location: &str, bytes: &[u8]) -> Result<Document> {
    let probe: VersionProbe =
        serde_json::from_slice(bytes).map_err(|e| RotateError::corrupt(location, e))?;
    if probe.version != STATE_VERSION {
        return Err(RotateError::UnsupportedStateVersion {
            found: probe.version,
            supported: STATE_VERSION,
        });
    }
    let doc: Document =
        serde_json::from_slice(bytes).map_err(|e| RotateError::corrupt(location, e))?;
    doc.policy
        .validate()
        .map_err(|e| RotateError::corrupt(format!("{location}: policy"), e))?;
    for name in doc.leaves.keys() {
        crate::signer::validate_leaf_name(name)?;
    }
    Ok(doc)
}

fn assemble<'a>(
    doc: Document,
    origin: &str,
    get: impl Fn(&str) -> Option<&'a [u8]>,
    leaf: impl Fn(&str) -> Option<(&'a [u8], &'a [u8])>,
) -> Result<SignerState> {
    let need = |path: &str| {
        get(path).ok_or_else(|| RotateError::corrupt(format!("{origin}: {path}"), "missing"))
    };
    let at = |path: &str, e: pki_core::Error| RotateError::corrupt(format!("{origin}: {path}"), e);

    let ca_cert = Certificate::from_pem(need(SIGNER_CERT)?).map_err(|e| at(SIGNER_CERT, e))?;
    let ca_key = PrivateKey::from_pem(need(SIGNER_KEY)?).map_err(|e| at(SIGNER_KEY, e))?;
    let ca = CertificateAuthority::new(ca_cert, ca_key).map_err(|e| at(SIGNER_KEY, e))?;
    let bridge = match get(SIGNER_BRIDGE) {
        Some(b) => Some(Certificate::from_pem(b).map_err(|e| at(SIGNER_BRIDGE, e))?),
        None => None,
    };
    let bundle = Bundle::from_pem(need(CA_BUNDLE)?).map_err(|e| at(CA_BUNDLE, e))?;
    if !bundle.contains(&ca.cert) {
        return Err(RotateError::corrupt(
            format!("{origin}: {CA_BUNDLE}"),
            format!("does not contain the current CA {}", ca.cert.id()),
        ));
    }

    let mut leaves = BTreeMap::new();
    for (name, request) in doc.leaves {
        let issued = match leaf(&name) {
            None => None,
            Some((chain_pem, key_pem)) => {
                let cert_path = leaf_cert_path(&name);
                let key_path = leaf_key_path(&name);
                let chain = Certificate::all_from_pem(chain_pem).map_err(|e| at(&cert_path, e))?;
                let cert = chain.into_iter().next().ok_or_else(|| {
                    RotateError::corrupt(format!("{origin}: {cert_path}"), "holds no certificate")
                })?;
                let key = PrivateKey::from_pem(key_pem).map_err(|e| at(&key_path, e))?;
                if !key.matches(cert.public_key()) {
                    return Err(at(
                        &key_path,
                        pki_core::Error::KeyMismatch {
                            certificate: cert.id(),
                        },
                    ));
                }
                Some(IssuedLeaf { cert, key })
            }
        };
        leaves.insert(name, Leaf { request, issued });
    }

    Ok(SignerState {
        policy: doc.policy,
        ca,
        bridge,
        bundle,
        previous: doc.previous,
        forced_rotation_reason: doc.forced_rotation_reason,
        leaves,
        history: doc.history,
    })
}
