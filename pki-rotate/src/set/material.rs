//! What each target of a CA set loads, its fingerprint, and the pre-flight
//! trust matrix over it.

use super::{CaPair, SetState, SetStep};
use crate::document::{File, Files};
use crate::error::{Result, RotateError};
use pki_core::{
    Bundle, Certificate, ExpectedName, Purpose, SignatureCache, VerifyOptions, verify_chain_cached,
};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use time::OffsetDateTime;

/// Directory of the targets in the store.
pub const TARGETS_DIR: &str = "targets";

/// Which generations a bundle holds in a step.
fn generations(state: &SetState) -> (bool, bool) {
    // (old, new)
    match state.step() {
        SetStep::Idle | SetStep::Completed => (true, false),
        SetStep::TrustBoth | SetStep::UpdateCerts | SetStep::Reverting => (true, true),
        SetStep::TrustNew => (false, true),
    }
}

fn pairs<'a>(state: &SetState, ca: &'a super::SetCa) -> Vec<&'a CaPair> {
    let (old, new) = generations(state);
    let mut out = Vec::new();
    match &ca.next {
        Some(next) => {
            if old {
                out.push(&ca.current);
            }
            if new {
                out.push(next);
            }
        }
        None => out.push(&ca.current),
    }
    out
}

/// The bundle a target loads to verify servers of `ca`: each generation's
/// root (an imported CA's external root, not the CA itself: a client that
/// trusts only the organisation's root must verify the same leaves).
pub fn trust_bundle(state: &SetState, ca: &str) -> Bundle {
    let mut bundle = Bundle::new();
    if let Some(entry) = state.cas.get(ca) {
        for pair in pairs(state, entry) {
            bundle.push(pair.root().clone());
        }
    }
    bundle
}

/// The bundle a server target loads to verify clients of `ca`.
pub fn client_ca_bundle(state: &SetState, ca: &str) -> Bundle {
    let mut bundle = Bundle::new();
    let dual = state
        .leaves
        .values()
        .any(|l| l.spec.ca == ca && l.spec.serving && l.spec.client);
    if let Some(entry) = state.cas.get(ca) {
        for pair in pairs(state, entry) {
            bundle.push(pair.client_root().clone());
            // Leaves that are both serving and client are signed by the
            // serving signer: servers must accept it as a client issuer too.
            if dual && pair.client_signer.is_some() {
                bundle.push(pair.root().clone());
            }
        }
    }
    bundle
}

/// A leaf as a target holds it.
#[derive(Debug, Clone)]
pub struct HeldLeaf {
    /// The leaf's name.
    pub name: String,
    /// Its CA in the set.
    pub ca: String,
    /// Serving certificate.
    pub serving: bool,
    /// Client certificate.
    pub client: bool,
    /// The certificate.
    pub cert: Certificate,
    /// What follows it in the chain it presents (see [`leaf_chain`]).
    pub chain: Vec<Certificate>,
}

/// What follows leaf `leaf` in the chain it presents (`tls.crt` after the
/// leaf): its CA and the external intermediates when that CA was imported
/// under someone else's root, whose bundles hold only that root; nothing
/// for a leaf of a CA that is its own root.
pub fn leaf_chain(state: &SetState, leaf: &super::SetLeaf) -> Vec<Certificate> {
    let Some(ca) = state.cas.get(&leaf.spec.ca) else {
        return Vec::new();
    };
    std::iter::once(&ca.current)
        .chain(&ca.next)
        .map(|pair| (pair, pair.issuer_for(&leaf.spec)))
        .find(|(_, issuer)| pki_core::issued_by(&leaf.issued.cert, &issuer.cert).issued_by)
        .map(|(pair, issuer)| pair.chain_after_leaf(issuer))
        .unwrap_or_default()
}

/// Everything one target loads.
#[derive(Debug, Clone, Default)]
pub struct TargetMaterial {
    /// `trust/CA.crt`.
    pub trust: BTreeMap<String, Bundle>,
    /// `client-ca/CA.crt`.
    pub client_ca: BTreeMap<String, Bundle>,
    /// `certs/NAME/`.
    pub leaves: Vec<HeldLeaf>,
}

/// The material of target `name`.
pub fn target_material(state: &SetState, name: &str) -> TargetMaterial {
    let mut m = TargetMaterial::default();
    if let Some(t) = state.targets.get(name) {
        for ca in &t.trusts {
            m.trust.insert(ca.clone(), trust_bundle(state, ca));
        }
        for ca in &t.client_ca {
            m.client_ca.insert(ca.clone(), client_ca_bundle(state, ca));
        }
    }
    for (leaf_name, leaf) in &state.leaves {
        if leaf.spec.target == name {
            m.leaves.push(HeldLeaf {
                name: leaf_name.clone(),
                ca: leaf.spec.ca.clone(),
                serving: leaf.spec.serving,
                client: leaf.spec.client,
                cert: leaf.issued.cert.clone(),
                chain: leaf_chain(state, leaf),
            });
        }
    }
    m
}

/// The files of target `name`, relative to its directory.
pub fn target_files(state: &SetState, name: &str) -> Result<Files> {
    let mut files = Files::new();
    let m = target_material(state, name);
    for (ca, bundle) in &m.trust {
        files.insert(format!("trust/{ca}.crt"), File::public(bundle.to_pem()))?;
    }
    for (ca, bundle) in &m.client_ca {
        files.insert(format!("client-ca/{ca}.crt"), File::public(bundle.to_pem()))?;
    }
    for (leaf_name, leaf) in &state.leaves {
        if leaf.spec.target == name {
            let mut pem = leaf.issued.cert.to_pem();
            for c in leaf_chain(state, leaf) {
                pem.push_str(&c.to_pem());
            }
            files.insert(format!("certs/{leaf_name}/tls.crt"), File::public(pem))?;
            files.insert(
                format!("certs/{leaf_name}/tls.key"),
                File::secret(leaf.issued.key.to_pkcs8_pem()?.as_bytes().to_vec()),
            )?;
        }
    }
    Ok(files)
}

/// The files of every target.
pub fn all_target_files(state: &SetState) -> Result<BTreeMap<String, Files>> {
    state
        .targets
        .keys()
        .map(|t| Ok((t.clone(), target_files(state, t)?)))
        .collect()
}

/// What a target acknowledges: SHA-256 over its files' relative paths and
/// contents, in path order, as `sha256:HEX`. Only content counts: no
/// times, modes or link names. `pki fingerprint DIR/targets/T` computes the
/// same over the directory.
pub fn fingerprint<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> String {
    let mut entries: Vec<(&str, &[u8])> = files.into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let mut h = Sha256::new();
    for (path, contents) in entries {
        h.update((path.len() as u64).to_be_bytes());
        h.update(path.as_bytes());
        h.update((contents.len() as u64).to_be_bytes());
        h.update(contents);
    }
    format!("sha256:{}", hex::encode(h.finalize()))
}

/// The fingerprint of target `name`'s current files.
pub fn target_fingerprint(state: &SetState, name: &str) -> String {
    match target_files(state, name) {
        Ok(files) => fingerprint(files.iter().map(|(p, f)| (p, f.contents.as_slice()))),
        // Only a key that cannot be encoded fails here; no ack can match.
        Err(e) => format!("unavailable: {e}"),
    }
}

/// A host name a client could connect to under the SAN `name`: a
/// wildcard is no reference name, so its `*` becomes a label it matches.
fn reference_name(name: &str) -> String {
    match name.strip_prefix("*.") {
        Some(parent) => format!("host.{parent}"),
        None => name.to_string(),
    }
}

/// Checks one transition: every target's material before and after, as a
/// client, against every target's material before and after, as a server,
/// in both directions: the server's serving certificates against the
/// client's `trust/` bundle, the client's client certificates against the
/// server's `client-ca/` bundle. The first red cell is the error, naming
/// the pair.
pub fn preflight(before: &SetState, after: &SetState, now: OffsetDateTime) -> Result<()> {
    let mut versions: Vec<(String, String, TargetMaterial)> = Vec::new();
    let names: std::collections::BTreeSet<&String> =
        before.targets.keys().chain(after.targets.keys()).collect();
    let (b, a) = (before.step(), after.step());
    let label = |s: SetStep, which: &str| {
        if a == b {
            format!("{s} material {which}")
        } else {
            format!("{s} material")
        }
    };
    for name in names {
        let mut fps = Vec::new();
        for (state, which) in [(before, label(b, "before")), (after, label(a, "after"))] {
            if !state.targets.contains_key(name) {
                continue;
            }
            let fp = target_fingerprint(state, name);
            if fps.contains(&fp) {
                continue;
            }
            fps.push(fp);
            versions.push((name.clone(), which, target_material(state, name)));
        }
    }
    let cache = SignatureCache::new();
    // A leaf's chain follows from its issuer, so the leaf alone keys it.
    let mut memo: HashMap<([u8; 32], [u8; 32], bool), Option<String>> = HashMap::new();
    let mut check = |cert: &Certificate,
                     chain: &[Certificate],
                     bundle: &Bundle,
                     server: bool|
     -> Option<String> {
        memo.entry((cert.fingerprint_sha256(), bundle.fingerprint(), server))
            .or_insert_with(|| {
                let purpose = if server {
                    Purpose::ServerAuth
                } else {
                    Purpose::ClientAuth
                };
                let mut opts = VerifyOptions::new(now, purpose);
                if server {
                    opts.name = cert
                        .dns_names()
                        .into_iter()
                        .next()
                        .map(|d| ExpectedName::Dns(reference_name(&d)))
                        .or_else(|| cert.ip_addresses().into_iter().next().map(ExpectedName::Ip));
                }
                verify_chain_cached(cert, chain, bundle, &opts, &cache)
                    .err()
                    .map(|e| e.to_string())
            })
            .clone()
    };
    for (c_name, c_which, client) in &versions {
        for (s_name, s_which, server) in &versions {
            for leaf in server.leaves.iter().filter(|l| l.serving) {
                if let Some(bundle) = client.trust.get(&leaf.ca)
                    && let Some(e) = check(&leaf.cert, &leaf.chain, bundle, true)
                {
                    return Err(RotateError::SetTrustBroken(format!(
                        "client target \"{c_name}\" ({c_which}) would reject serving certificate {} of target \"{s_name}\" ({s_which}) with its trust/{}.crt: {e}",
                        leaf.name, leaf.ca
                    )));
                }
            }
            for leaf in client.leaves.iter().filter(|l| l.client) {
                if let Some(bundle) = server.client_ca.get(&leaf.ca)
                    && let Some(e) = check(&leaf.cert, &leaf.chain, bundle, false)
                {
                    return Err(RotateError::SetTrustBroken(format!(
                        "server target \"{s_name}\" ({s_which}) would reject client certificate {} of target \"{c_name}\" ({c_which}) with its client-ca/{}.crt: {e}",
                        leaf.name, leaf.ca
                    )));
                }
            }
        }
    }
    Ok(())
}
