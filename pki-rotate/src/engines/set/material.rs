//! What each target of a CA set loads, its fingerprint, and the pre-flight
//! trust matrix over it.

use super::{CaPair, SetState, SetStep};
use crate::model::document::{File, Files};
use crate::model::error::{Result, RotateError};
use pki_core::{Bundle, Certificate, Purpose, SignatureCache};
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
///
/// # Errors
///
/// [`RotateError::Core`] when a leaf's private key does not encode, and
/// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when a CA, leaf or
/// target name makes no valid file path (names are checked when recorded, see
/// [`validate_name`](super::validate_name)).
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
///
/// # Errors
///
/// Those of [`target_files`], for the first target that fails.
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

/// The public part of what a target loaded, kept with its
/// acknowledgement: the bundles (PEM) and each leaf's chain as it presents
/// it (leaf first, PEM). No key: the pre-flight verifies certificates.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadedMaterial {
    /// `trust/CA.crt` by CA.
    #[serde(default)]
    pub trust: BTreeMap<String, String>,
    /// `client-ca/CA.crt` by CA.
    #[serde(default)]
    pub client_ca: BTreeMap<String, String>,
    /// The leaves by name.
    #[serde(default)]
    pub leaves: BTreeMap<String, LoadedLeaf>,
}

/// One leaf a target loaded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadedLeaf {
    /// Its CA in the set.
    pub ca: String,
    /// Serving certificate.
    pub serving: bool,
    /// Client certificate.
    pub client: bool,
    /// The certificate, then what follows it in the chain it presents.
    pub chain: String,
}

impl LoadedMaterial {
    /// What target `name` of `state` loads now.
    pub fn of(state: &SetState, name: &str) -> LoadedMaterial {
        let m = target_material(state, name);
        let pem = |certs: &mut dyn Iterator<Item = &Certificate>| -> String {
            certs.map(Certificate::to_pem).collect()
        };
        LoadedMaterial {
            trust: m
                .trust
                .iter()
                .map(|(ca, b)| (ca.clone(), b.to_pem()))
                .collect(),
            client_ca: m
                .client_ca
                .iter()
                .map(|(ca, b)| (ca.clone(), b.to_pem()))
                .collect(),
            leaves: m
                .leaves
                .iter()
                .map(|l| {
                    (
                        l.name.clone(),
                        LoadedLeaf {
                            ca: l.ca.clone(),
                            serving: l.serving,
                            client: l.client,
                            chain: pem(&mut std::iter::once(&l.cert).chain(&l.chain)),
                        },
                    )
                })
                .collect(),
        }
    }

    /// The material, parsed; `location` names it in errors.
    ///
    /// # Errors
    ///
    /// [`DocumentError::Material`](crate::DocumentError::Material) naming the
    /// file when a bundle or a leaf's chain does not decode, and
    /// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when a leaf's
    /// chain holds no certificate.
    pub fn material(&self, location: &str) -> Result<TargetMaterial> {
        let bundle = |what: &str, pem: &str| {
            Bundle::from_pem(pem.as_bytes())
                .map_err(|e| RotateError::material(format!("{location}: {what}"), e))
        };
        let mut m = TargetMaterial::default();
        for (ca, pem) in &self.trust {
            m.trust
                .insert(ca.clone(), bundle(&format!("trust/{ca}.crt"), pem)?);
        }
        for (ca, pem) in &self.client_ca {
            m.client_ca
                .insert(ca.clone(), bundle(&format!("client-ca/{ca}.crt"), pem)?);
        }
        for (name, leaf) in &self.leaves {
            let certs = Certificate::all_from_pem(leaf.chain.as_bytes()).map_err(|e| {
                RotateError::material(format!("{location}: certs/{name}/tls.crt"), e)
            })?;
            let Some((cert, chain)) = certs.split_first() else {
                return Err(RotateError::corrupt(
                    format!("{location}: certs/{name}/tls.crt"),
                    "holds no certificate",
                ));
            };
            m.leaves.push(HeldLeaf {
                name: name.clone(),
                ca: leaf.ca.clone(),
                serving: leaf.serving,
                client: leaf.client,
                cert: cert.clone(),
                chain: chain.to_vec(),
            });
        }
        Ok(m)
    }
}

/// One version of the files a target may hold during a transition.
struct Version {
    target: String,
    /// How to name it in a red cell.
    label: String,
    material: TargetMaterial,
    /// Files it is given by this transition (else files it may hold
    /// already).
    after: bool,
}

/// What a target may hold already: certificates and bundles by SHA-256.
#[derive(Default)]
struct Known {
    certs: std::collections::HashSet<[u8; 32]>,
    bundles: std::collections::HashSet<[u8; 32]>,
}

impl Known {
    fn add(&mut self, m: &TargetMaterial) {
        self.bundles.extend(
            m.trust
                .values()
                .chain(m.client_ca.values())
                .map(Bundle::fingerprint),
        );
        self.certs
            .extend(m.leaves.iter().map(|l| l.cert.fingerprint_sha256()));
    }
}

/// The red cells of one transition from `before` to `after` at `now`: a
/// certificate or bundle the transition gives a target that another
/// target, holding anything it may hold, would not accept — in both
/// directions (the server's serving certificates against the client's
/// `trust/` bundle, the client's client certificates against the server's
/// `client-ca/` bundle). A target may hold what it acknowledged last (kept
/// with the acknowledgement), the files the document gave it before the
/// transition (it may have loaded them without acknowledging yet), and
/// what the transition gives it. Cells between material that is not new
/// are not this transition's doing and are not checked; a certificate a
/// target already held that has expired is broken whatever happens. One
/// line per red cell, naming the pair; empty when the transition is green.
pub fn red_cells(before: &SetState, after: &SetState, now: OffsetDateTime) -> Vec<String> {
    let (versions, known) = versions(before, after);
    if !versions.iter().any(|v| v.after) {
        return Vec::new();
    }
    let mut judge = Judge {
        now,
        known: &known,
        cache: SignatureCache::new(),
        memo: HashMap::new(),
    };
    let mut red = Vec::new();
    for client in &versions {
        for server in &versions {
            if !client.after && !server.after {
                continue;
            }
            judge.serving_cells(client, server, &mut red);
            judge.client_cells(client, server, &mut red);
        }
    }
    red.dedup();
    red
}

/// Every version of its files each target may hold across the transition,
/// and what each may hold already. A version whose files are the same as
/// one listed before it (by fingerprint) is listed once.
fn versions(before: &SetState, after: &SetState) -> (Vec<Version>, BTreeMap<String, Known>) {
    let names: std::collections::BTreeSet<&String> =
        before.targets.keys().chain(after.targets.keys()).collect();
    let mut versions: Vec<Version> = Vec::new();
    let mut known: BTreeMap<String, Known> = BTreeMap::new();
    let (b, a) = (before.step(), after.step());
    for name in names {
        let k = known.entry(name.clone()).or_default();
        let mut fps = Vec::new();
        // What it acknowledged last: an acknowledgement this transition
        // records replaces the one before, and one a retry forgets still
        // says what the target may hold.
        if let Some(ack) = after.acks.get(name).or(before.acks.get(name))
            && let Some(loaded) = &ack.loaded
            && let Ok(m) = loaded.material(&format!("acknowledgement of target {name}"))
        {
            k.add(&m);
            fps.push(ack.fingerprint.clone());
            versions.push(Version {
                target: name.clone(),
                label: format!(
                    "holding what it loaded at {}",
                    pki_core::datetime::rfc3339(ack.at)
                ),
                material: m,
                after: false,
            });
        }
        if before.targets.contains_key(name) {
            let fp = target_fingerprint(before, name);
            if !fps.contains(&fp) {
                let m = target_material(before, name);
                k.add(&m);
                fps.push(fp);
                versions.push(Version {
                    target: name.clone(),
                    label: format!("holding its {b} files"),
                    material: m,
                    after: false,
                });
            }
        }
        if after.targets.contains_key(name) {
            let fp = target_fingerprint(after, name);
            if !fps.contains(&fp) {
                versions.push(Version {
                    target: name.clone(),
                    label: format!("given its {a} files"),
                    material: target_material(after, name),
                    after: true,
                });
            }
        }
    }
    (versions, known)
}

/// The cells of the matrix at `now`: which pairs are new enough to be the
/// transition's doing, and whether a certificate verifies against a bundle.
struct Judge<'a> {
    now: OffsetDateTime,
    known: &'a BTreeMap<String, Known>,
    cache: SignatureCache,
    /// Verdicts by (leaf, bundle, serving): a leaf's chain follows from its
    /// issuer, so the leaf alone keys it, and targets sharing files share
    /// verdicts.
    memo: HashMap<([u8; 32], [u8; 32], bool), Option<String>>,
}

impl Judge<'_> {
    /// Why `bundle` would reject `cert` (a server certificate, checked
    /// against its first DNS name or IP address, or a client certificate),
    /// or None when it accepts it.
    fn check(
        &mut self,
        cert: &Certificate,
        chain: &[Certificate],
        bundle: &Bundle,
        server: bool,
    ) -> Option<String> {
        let (now, cache) = (self.now, &self.cache);
        self.memo
            .entry((cert.fingerprint_sha256(), bundle.fingerprint(), server))
            .or_insert_with(|| {
                let purpose = if server {
                    Purpose::ServerAuth
                } else {
                    Purpose::ClientAuth
                };
                pki_core::trust_matrix::check_for(cert, chain, bundle, now, purpose, cache)
                    .err()
                    .map(|e| e.to_string())
            })
            .clone()
    }

    /// Whether the transition gives `v`'s target a certificate it may not
    /// hold already.
    fn is_new_cert(&self, v: &Version, cert: &Certificate) -> bool {
        v.after
            && !self
                .known
                .get(&v.target)
                .is_some_and(|k| k.certs.contains(&cert.fingerprint_sha256()))
    }

    /// Whether the transition gives `v`'s target a bundle it may not hold
    /// already.
    fn is_new_bundle(&self, v: &Version, bundle: &Bundle) -> bool {
        v.after
            && !self
                .known
                .get(&v.target)
                .is_some_and(|k| k.bundles.contains(&bundle.fingerprint()))
    }

    /// Whether the cell of `leaf` against `bundle` is the transition's
    /// doing: the leaf is new, or the bundle is new and the leaf still
    /// valid (an expired leaf is broken whatever happens).
    fn cell_is_new(
        &self,
        holder: &Version,
        leaf: &HeldLeaf,
        loader: &Version,
        bundle: &Bundle,
    ) -> bool {
        let usable = leaf.cert.not_before() <= self.now && self.now <= leaf.cert.not_after();
        self.is_new_cert(holder, &leaf.cert) || (self.is_new_bundle(loader, bundle) && usable)
    }

    /// The server's serving certificates against the client's `trust/`
    /// bundles.
    fn serving_cells(&mut self, client: &Version, server: &Version, red: &mut Vec<String>) {
        for leaf in server.material.leaves.iter().filter(|l| l.serving) {
            let Some(bundle) = client.material.trust.get(&leaf.ca) else {
                continue;
            };
            if !self.cell_is_new(server, leaf, client, bundle) {
                continue;
            }
            if let Some(e) = self.check(&leaf.cert, &leaf.chain, bundle, true) {
                red.push(format!(
                    "client target \"{}\" ({}) would reject serving certificate {} of target \"{}\" ({}) with its trust/{}.crt: {e}",
                    client.target, client.label, leaf.name, server.target, server.label, leaf.ca
                ));
            }
        }
    }

    /// The client's client certificates against the server's `client-ca/`
    /// bundles.
    fn client_cells(&mut self, client: &Version, server: &Version, red: &mut Vec<String>) {
        for leaf in client.material.leaves.iter().filter(|l| l.client) {
            let Some(bundle) = server.material.client_ca.get(&leaf.ca) else {
                continue;
            };
            if !self.cell_is_new(client, leaf, server, bundle) {
                continue;
            }
            if let Some(e) = self.check(&leaf.cert, &leaf.chain, bundle, false) {
                red.push(format!(
                    "server target \"{}\" ({}) would reject client certificate {} of CA {} of target \"{}\" ({}) with its client-ca/{}.crt: {e}",
                    server.target, server.label, leaf.name, leaf.ca, client.target, client.label, leaf.ca
                ));
            }
        }
    }
}

/// [`red_cells`] as a result: the first cells as the error.
///
/// # Errors
///
/// [`SetError::TrustBroken`](crate::SetError::TrustBroken) listing the red
/// cells.
pub fn preflight(before: &SetState, after: &SetState, now: OffsetDateTime) -> Result<()> {
    let red = red_cells(before, after, now);
    if red.is_empty() {
        Ok(())
    } else {
        Err(RotateError::Set(crate::SetError::TrustBroken(
            red.join("; "),
        )))
    }
}
