//! The CA set's document in the files form.
//!
//! | path | contents |
//! |---|---|
//! | `set/state.json` | kind `ca-set`, version 1: key algorithm, CA lifetime, CAs (roles, which certificates exist), leaves (spec, generation), targets, acks, failures, rotation (step, overrides, timeline), history |
//! | `set/cas/CA/ca.crt`, `ca.key` | the CA in use (key secret) |
//! | `set/cas/CA/client-ca.crt`, `client-ca.key` | its separate client CA, once split |
//! | `set/cas/CA/next-ca.crt`, `next-ca.key` | the new CA, during a rotation |
//! | `set/cas/CA/next-client-ca.crt`, `next-client-ca.key` | the new client CA, during a rotation |
//! | `set/cas/CA/ca-chain.crt`, `next-ca-chain.crt` | the chain above an imported CA (issuer first, root last), when it has one |
//! | `targets/T/trust/CA.crt` | bundle T uses to verify servers of CA |
//! | `targets/T/client-ca/CA.crt` | bundle T uses to verify clients of CA |
//! | `targets/T/certs/NAME/tls.crt`, `tls.key` | a leaf T loads (key secret): the leaf, then an imported CA and its intermediates |
//!
//! The bundles are derived from the state on every write; leaves are read
//! back from the target directories.
//!
//! **Versions.** Version 1 gained the optional `chain` flag of a CA and of
//! its `next` generation (present only when true, naming the chain file)
//! when `set start --import` began to keep an imported CA's chain: a
//! document written before it reads as it did (no chain), and one without
//! an imported chain is written exactly as before, so an older build still
//! reads it. An older build refuses a document with a chain (an unknown
//! field) rather than publish the imported CA as a root without it.

use super::token_keys::{SetTokenKeys, slot as token_slot};
use super::{
    Ack, CaPair, Failure, LeafSpec, Roles, Rotation, RotationSummary, SetCa, SetLeaf, SetState,
    TargetSpec, material,
};
use crate::engines::leaf::IssuedLeaf;
use crate::engines::token_keys::current_key;
use crate::model::document::{Document as DocumentForm, Envelope, File, Files, SecretData};
use crate::model::error::{Result, RotateError};
use pki_core::{Certificate, CertificateAuthority, KeyAlgorithm, PrivateKey};
use std::collections::{BTreeMap, BTreeSet};
use time::Duration;

/// The format version this build writes and reads.
pub const VERSION: u32 = 1;
/// The state file.
pub const STATE_FILE: &str = "set/state.json";

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    kind: String,
    version: u32,
    key_algorithm: KeyAlgorithm,
    #[serde(with = "super::duration_serde")]
    ca_lifetime: Duration,
    cas: BTreeMap<String, CaDoc>,
    leaves: BTreeMap<String, LeafDoc>,
    targets: BTreeMap<String, TargetSpec>,
    acks: BTreeMap<String, Ack>,
    failures: BTreeMap<String, Failure>,
    rotation: Option<Rotation>,
    history: Vec<RotationSummary>,
    /// Present when CA keys are objects in a PKCS#11 token: their slots
    /// have no key file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_keys: Option<SetTokenKeys>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CaDoc {
    roles: Roles,
    client_ca: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    chain: bool,
    next: Option<NextDoc>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NextDoc {
    client_ca: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    chain: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LeafDoc {
    spec: LeafSpec,
    on_next: bool,
}

fn ca_path(ca: &str, slot: &str, ext: &str) -> String {
    format!("set/cas/{ca}/{slot}.{ext}")
}

/// The key files of the CAs the state file in `files` names, unless
/// `files` already holds a CA file (then they were read): what a sealing
/// store reads to learn which store key the set is sealed under. Empty
/// when `files` has no readable state.
pub(crate) fn ca_key_paths(files: &Files) -> BTreeSet<String> {
    /// The CA names alone, whatever else the state holds.
    #[derive(serde::Deserialize)]
    struct Names {
        cas: BTreeMap<String, serde::de::IgnoredAny>,
    }
    if files.iter().any(|(path, _)| path.starts_with("set/cas/")) {
        return BTreeSet::new();
    }
    files
        .get(STATE_FILE)
        .and_then(|state| serde_json::from_slice::<Names>(state).ok())
        .map(|names| {
            names
                .cas
                .keys()
                .map(|ca| ca_path(ca, "ca", "key"))
                .collect()
        })
        .unwrap_or_default()
}

fn put_chain(files: &mut Files, ca: &str, slot: &str, chain: &[Certificate]) -> Result<()> {
    if chain.is_empty() {
        return Ok(());
    }
    let pem: String = chain.iter().map(Certificate::to_pem).collect();
    files.insert(
        ca_path(ca, &format!("{slot}-chain"), "crt"),
        File::public(pem),
    )
}

fn put_ca(files: &mut Files, ca: &str, slot: &str, authority: &CertificateAuthority) -> Result<()> {
    files.insert(
        ca_path(ca, slot, "crt"),
        File::public(authority.cert.to_pem()),
    )?;
    // A key in a token has no file: the state's `token_keys` names it.
    if authority.key.in_process().is_none() {
        return Ok(());
    }
    files.insert(
        ca_path(ca, slot, "key"),
        File::secret(authority.key.to_pkcs8_pem()?.as_bytes().to_vec()),
    )
}

/// The set as files: state, CA certificates and keys, every target's tree.
fn to_files(state: &SetState) -> Result<Files> {
    let mut files = Files::new();
    let mut cas = BTreeMap::new();
    for (name, ca) in &state.cas {
        put_ca(&mut files, name, "ca", &ca.current.signer)?;
        put_chain(&mut files, name, "ca", &ca.current.chain)?;
        if let Some(c) = &ca.current.client_signer {
            put_ca(&mut files, name, "client-ca", c)?;
        }
        if let Some(n) = &ca.next {
            put_ca(&mut files, name, "next-ca", &n.signer)?;
            put_chain(&mut files, name, "next-ca", &n.chain)?;
            if let Some(c) = &n.client_signer {
                put_ca(&mut files, name, "next-client-ca", c)?;
            }
        }
        cas.insert(
            name.clone(),
            CaDoc {
                roles: ca.roles,
                client_ca: ca.current.client_signer.is_some(),
                chain: !ca.current.chain.is_empty(),
                next: ca.next.as_ref().map(|n| NextDoc {
                    client_ca: n.client_signer.is_some(),
                    chain: !n.chain.is_empty(),
                }),
            },
        );
    }
    let doc = Document {
        kind: super::KIND.to_string(),
        version: VERSION,
        key_algorithm: state.key_algorithm,
        ca_lifetime: state.ca_lifetime,
        cas,
        leaves: state
            .leaves
            .iter()
            .map(|(n, l)| {
                (
                    n.clone(),
                    LeafDoc {
                        spec: l.spec.clone(),
                        on_next: l.on_next,
                    },
                )
            })
            .collect(),
        targets: state.targets.clone(),
        acks: state.acks.clone(),
        failures: state.failures.clone(),
        rotation: state.rotation.clone(),
        history: state.history.clone(),
        token_keys: state.token_keys.clone(),
    };
    let json = serde_json::to_vec_pretty(&doc).map_err(|e| RotateError::json(STATE_FILE, e))?;
    files.insert(STATE_FILE, File::public(json))?;
    files.insert_dir(material::TARGETS_DIR)?;
    for (target, tree) in material::all_target_files(state)? {
        let base = format!("{}/{target}", material::TARGETS_DIR);
        files.insert_dir(base.clone())?;
        for (path, file) in tree.iter() {
            files.insert(format!("{base}/{path}"), file.clone())?;
        }
    }
    Ok(files)
}

fn need<'a>(files: &'a Files, path: &str) -> Result<&'a [u8]> {
    files
        .get(path)
        .ok_or_else(|| RotateError::corrupt(path, "is missing"))
}

fn read_ca(
    files: &Files,
    ca: &str,
    slot: &str,
    token: Option<&SetTokenKeys>,
) -> Result<CertificateAuthority> {
    let cert_path = ca_path(ca, slot, "crt");
    let key_path = ca_path(ca, slot, "key");
    let cert = Certificate::from_pem(need(files, &cert_path)?)
        .map_err(|e| RotateError::material(&cert_path, e))?;
    if let Some(uri) = token.and_then(|t| t.keys.get(&token_slot(ca, slot))) {
        if files.get(&key_path).is_some() {
            return Err(RotateError::corrupt(
                key_path,
                format!("is present, but the state keeps this CA's key in a token ({uri})"),
            ));
        }
        let key = current_key(uri, &cert).map_err(|e| RotateError::material(&cert_path, e))?;
        return CertificateAuthority::new(cert, key)
            .map_err(|e| RotateError::material(&cert_path, e));
    }
    let key = PrivateKey::from_stored_pem(need(files, &key_path)?)
        .map_err(|e| RotateError::material(&key_path, e))?;
    CertificateAuthority::new(cert, key).map_err(|e| RotateError::material(&key_path, e))
}

/// The chain above the CA in `slot`, when the document says it has one.
/// It is checked as at import (issuing order up to a root), so a damaged
/// file cannot publish something else as the CA's root.
fn read_chain(
    files: &Files,
    ca: &str,
    slot: &str,
    present: bool,
    authority: &CertificateAuthority,
) -> Result<Vec<Certificate>> {
    if !present {
        return Ok(Vec::new());
    }
    let path = ca_path(ca, &format!("{slot}-chain"), "crt");
    let chain = Certificate::all_from_pem(need(files, &path)?)
        .map_err(|e| RotateError::material(&path, e))?;
    if chain.is_empty() {
        return Err(RotateError::corrupt(path, "holds no certificate"));
    }
    pki_core::check_issuing_order(&authority.cert, &chain)
        .map_err(|e| RotateError::material(&path, e))?;
    if !chain.last().is_some_and(pki_core::is_self_signed) {
        return Err(RotateError::corrupt(path, "does not end at a root"));
    }
    Ok(chain)
}

fn parse(bytes: &[u8]) -> Result<Document> {
    let envelope = Envelope::probe(STATE_FILE, bytes)?;
    envelope.check(STATE_FILE, super::KIND, VERSION, |_| false)?;
    serde_json::from_slice(bytes).map_err(|e| RotateError::json(STATE_FILE, e))
}

/// Reads the set back from its files.
fn from_files(files: &Files) -> Result<SetState> {
    let doc = parse(need(files, STATE_FILE)?)?;
    let cas = read_cas(files, &doc.cas, doc.token_keys.as_ref())?;
    let leaves = read_leaves(files, doc.leaves, &cas, &doc.targets)?;
    check_target_cas(&doc.targets, &cas)?;
    Ok(SetState {
        key_algorithm: doc.key_algorithm,
        ca_lifetime: doc.ca_lifetime,
        cas,
        leaves,
        targets: doc.targets,
        acks: doc.acks,
        failures: doc.failures,
        rotation: doc.rotation,
        history: doc.history,
        token_keys: doc.token_keys,
    })
}

/// Every CA the state names, with its current generation and, during a
/// rotation, the next one.
fn read_cas(
    files: &Files,
    cas: &BTreeMap<String, CaDoc>,
    token: Option<&SetTokenKeys>,
) -> Result<BTreeMap<String, SetCa>> {
    let mut out = BTreeMap::new();
    for (name, c) in cas {
        super::validate_name("CA", name)?;
        let current = read_ca_pair(
            files,
            name,
            ["ca", "client-ca"],
            (c.chain, c.client_ca),
            token,
        )?;
        let next = c
            .next
            .as_ref()
            .map(|n| {
                let slots = ["next-ca", "next-client-ca"];
                read_ca_pair(files, name, slots, (n.chain, n.client_ca), token)
            })
            .transpose()?;
        out.insert(
            name.clone(),
            SetCa {
                roles: c.roles,
                current,
                next,
            },
        );
    }
    Ok(out)
}

/// One generation of a CA: the signer in `slot` (`ca` or `next-ca`), its
/// chain when it has one, and its client CA in `client_slot` (`client-ca`,
/// `next-client-ca`) once split. Only the files the state records are
/// read, so a leftover file cannot slip into the set.
fn read_ca_pair(
    files: &Files,
    ca: &str,
    [slot, client_slot]: [&str; 2],
    (chain, client_ca): (bool, bool),
    token: Option<&SetTokenKeys>,
) -> Result<CaPair> {
    let signer = read_ca(files, ca, slot, token)?;
    Ok(CaPair {
        chain: read_chain(files, ca, slot, chain, &signer)?,
        signer,
        client_signer: client_ca
            .then(|| read_ca(files, ca, client_slot, token))
            .transpose()?,
    })
}

/// Every leaf the state names, read from its target's directory. A leaf
/// must name a known CA and target: the target's files are where it is
/// written, so issuing a leaf makes its target.
fn read_leaves(
    files: &Files,
    leaves: BTreeMap<String, LeafDoc>,
    cas: &BTreeMap<String, SetCa>,
    targets: &BTreeMap<String, TargetSpec>,
) -> Result<BTreeMap<String, SetLeaf>> {
    let mut out = BTreeMap::new();
    for (name, l) in leaves {
        super::validate_name("certificate", &name)?;
        super::validate_name("target", &l.spec.target)?;
        if !cas.contains_key(&l.spec.ca) {
            return Err(RotateError::corrupt(
                STATE_FILE,
                format!("leaf \"{name}\" names unknown CA \"{}\"", l.spec.ca),
            ));
        }
        if !targets.contains_key(&l.spec.target) {
            return Err(RotateError::corrupt(
                STATE_FILE,
                format!("leaf \"{name}\" names unknown target \"{}\"", l.spec.target),
            ));
        }
        let issued = read_leaf(files, &l.spec.target, &name)?;
        out.insert(
            name,
            SetLeaf {
                spec: l.spec,
                issued,
                on_next: l.on_next,
            },
        );
    }
    Ok(out)
}

/// The leaf `name` as its target loads it. The leaf comes first; what
/// follows it (an imported CA's chain) is derived from the CA on every
/// write. A key that does not fit the certificate would fail every
/// handshake, so it is refused here.
fn read_leaf(files: &Files, target: &str, name: &str) -> Result<IssuedLeaf> {
    let base = format!("{}/{target}/certs/{name}", material::TARGETS_DIR);
    let cert_path = format!("{base}/tls.crt");
    let key_path = format!("{base}/tls.key");
    let cert = Certificate::all_from_pem(need(files, &cert_path)?)
        .map_err(|e| RotateError::material(&cert_path, e))?
        .into_iter()
        .next()
        .ok_or_else(|| RotateError::corrupt(&cert_path, "holds no certificate"))?;
    let key = PrivateKey::from_stored_pem(need(files, &key_path)?)
        .map_err(|e| RotateError::material(&key_path, e))?;
    if !key.matches_certificate(&cert) {
        return Err(RotateError::corrupt(
            key_path,
            "does not belong to the certificate beside it",
        ));
    }
    Ok(IssuedLeaf { cert, key })
}

/// The CAs a target loads bundles of become file names under it: each must
/// be a CA of the set.
fn check_target_cas(
    targets: &BTreeMap<String, TargetSpec>,
    cas: &BTreeMap<String, SetCa>,
) -> Result<()> {
    for (name, target) in targets {
        super::validate_name("target", name)?;
        if let Some(ca) = target
            .trusts
            .iter()
            .chain(&target.client_ca)
            .find(|ca| !cas.contains_key(ca.as_str()))
        {
            return Err(RotateError::corrupt(
                STATE_FILE,
                format!(
                    "target \"{name}\" loads bundles of unknown CA \"{}\"",
                    ca.escape_debug()
                ),
            ));
        }
    }
    Ok(())
}

/// Reads the files back from Secret data (`/` → `.` in every key): the
/// state first, then every path it implies.
fn files_from_secret_data(data: &SecretData) -> Result<Files> {
    let key = crate::model::document::secret_data_key(STATE_FILE, &[]);
    let state = data
        .get(&key)
        .ok_or_else(|| RotateError::corrupt(key.clone(), "is missing"))?;
    let doc = parse(state)?;
    let mut paths: Vec<(String, bool)> = vec![(STATE_FILE.to_string(), false)];
    for (name, c) in &doc.cas {
        let mut slots = vec!["ca"];
        if c.client_ca {
            slots.push("client-ca");
        }
        if c.chain {
            paths.push((ca_path(name, "ca-chain", "crt"), false));
        }
        if let Some(n) = &c.next {
            slots.push("next-ca");
            if n.client_ca {
                slots.push("next-client-ca");
            }
            if n.chain {
                paths.push((ca_path(name, "next-ca-chain", "crt"), false));
            }
        }
        for slot in slots {
            paths.push((ca_path(name, slot, "crt"), false));
            paths.push((ca_path(name, slot, "key"), true));
        }
    }
    for (name, l) in &doc.leaves {
        let base = format!("{}/{}/certs/{name}", material::TARGETS_DIR, l.spec.target);
        paths.push((format!("{base}/tls.crt"), false));
        paths.push((format!("{base}/tls.key"), true));
    }
    for (name, t) in &doc.targets {
        let base = format!("{}/{name}", material::TARGETS_DIR);
        for ca in &t.trusts {
            paths.push((format!("{base}/trust/{ca}.crt"), false));
        }
        for ca in &t.client_ca {
            paths.push((format!("{base}/client-ca/{ca}.crt"), false));
        }
    }
    crate::model::document::files_from_secret_data(
        data,
        &[],
        paths.iter().map(|(p, s)| (p.as_str(), *s)),
    )
}

impl DocumentForm for SetState {
    const KIND: &'static str = super::KIND;
    const VERSION: u32 = VERSION;

    /// `set/state.json`, whatever the document holds.
    fn state_file(near: Option<&str>) -> Option<String> {
        let _ = near;
        Some(STATE_FILE.to_string())
    }

    /// Each CA's key, named by the state file (read first).
    fn sealed_witness_paths(read: Option<&Files>) -> BTreeSet<String> {
        match read {
            None => BTreeSet::from([STATE_FILE.to_string()]),
            Some(files) => ca_key_paths(files),
        }
    }

    fn attach_tokens(&mut self, access: &std::sync::Arc<dyn pki_core::TokenAccess>) {
        let Some(keys) = &mut self.token_keys else {
            return;
        };
        keys.attach(access);
        for ca in self.cas.values_mut() {
            let pairs = std::iter::once(&mut ca.current).chain(ca.next.as_mut());
            for pair in pairs {
                let cas = std::iter::once(&mut pair.signer).chain(pair.client_signer.as_mut());
                for authority in cas {
                    if let pki_core::CaKey::Token(key) = &mut authority.key {
                        key.attach(std::sync::Arc::clone(access));
                    }
                }
            }
        }
    }

    fn follow_up(&self) -> crate::FollowUp {
        self.token_keys
            .as_ref()
            .map_or(crate::FollowUp::None, SetTokenKeys::follow_up)
    }

    fn to_files(&self) -> Result<Files> {
        to_files(self)
    }

    fn from_files(files: &Files) -> Result<Self> {
        from_files(files)
    }

    /// Every path with `/` replaced by `.`.
    fn files_to_secret_data(files: &Files) -> Result<SecretData> {
        crate::model::document::files_to_secret_data(files, &[])
    }

    /// Targets load their leaves' keys (`targets/T/certs/NAME/tls.key`)
    /// where they are published.
    fn published_secret(path: &str) -> bool {
        matches!(
            path.split('/').collect::<Vec<_>>().as_slice(),
            ["targets", _, "certs", _, "tls.key"]
        )
    }

    fn files_from_secret_data(data: &SecretData) -> Result<Files> {
        files_from_secret_data(data)
    }
}
