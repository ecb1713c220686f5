//! CAs signed by someone else's root (the k3s custom-CA topology): import,
//! validation of a replacement against today's trust, rotation to a
//! supplied CA, and same-key renewal.
//!
//! An imported CA is kept in the signer's document ([`SignerState`]) with
//! the chain above it ([`ExternalCa`]):
//!
//! - it signs leaves directly (it may carry pathLenConstraint 0), and a
//!   leaf's NotAfter never passes the CA's, nor that of any certificate of
//!   its chain;
//! - the bundle published to clients holds the chain's root, so a client
//!   that trusts only the organisation's root verifies our leaves;
//! - serving chains carry the CA and the external intermediates after the
//!   leaf.
//!
//! pki never generates the replacement of an imported CA: the automatic
//! service-CA rotation leaves it alone, a forced one is refused, and
//! [`ExternalInput::Replace`] (`pki rotate --to`) is the way to move on.
//!
//! A proposed replacement is checked first ([`validate_replacement`], k3s's
//! `validateCA`); each check is a named line of a [`ValidationReport`]:
//!
//! | name | passes when |
//! |---|---|
//! | `key-matches` | a private key was supplied and belongs to the certificate |
//! | `is-ca` | basicConstraints cA:TRUE, and keyCertSign when keyUsage is present |
//! | `chain-supplied` | a CA that is not self-signed comes with the chain above it (never completed from what the store holds) |
//! | `chains-to-current-trust` | the CA verifies up to today's bundle or previous root (cross-signed intermediates in the supplied chain allowed), or it is self-signed and the current CA's key can bridge it (see below) |
//! | `valid-for-24h` | valid now, and for more than 24 hours |
//! | `service-account-key-kept` | the proposed service-account key set keeps every current key |
//!
//! A failing check refuses the rotation; a forced rotation (`force`
//! reason) overrides every check but `key-matches` and `is-ca` (pki must
//! sign leaves with the key and the certificate), and records each
//! overridden check with the reason in the history.
//!
//! A self-signed replacement is bridged both ways with the current CA's
//! key, which pki always holds, as the service-CA scheme does: bridge A
//! (the current CA re-signed by the new key) goes into the bundle, bridge
//! B (the new CA signed by the current key) onto serving chains, followed,
//! when the current CA was imported, by the current CA and its external
//! intermediates, so clients that trust only the organisation's root
//! verify new leaves. That holds only while the current CA and its chain
//! are valid and their pathLenConstraints allow one more CA below the
//! current CA; the k3s custom-CA topology's pathLenConstraint 0 ("sign
//! leaves only") does not, and the organisation's constraint is kept.
//!
//! When the replacement does not chain to today's trust and cannot be
//! bridged, clients that still hold the old bundle reject servers that
//! present certificates of the new CA until they reload it (at the latest
//! the reload interval after the rotation, M when the policy sets none):
//! the report names those cells of the trust matrix and until when. The
//! new bundle keeps the old trust anchors until they expire, so the other
//! cells hold.

use crate::engine::{Engine, Outcome};
use crate::error::{Result, RotateError};
use crate::leaf::{LeafReason, LeafRequest};
use crate::preflight::{MatrixInputs, Side};
use crate::signer::{
    Event, OverriddenCheck, PreviousCa, RotationReason, RotationRecord, SignerState,
};
use pki_core::{
    Bundle, CaImport, Certificate, CertificateAuthority, cross_sign, datetime::rfc3339,
    is_self_signed, verify_ca_path,
};
use rand_core::CryptoRng;
use std::borrow::Cow;
use time::{Duration, OffsetDateTime};

/// The least validity a replacement CA must have left.
pub const MIN_REPLACEMENT_VALIDITY: Duration = Duration::hours(24);

/// Stable names of the validation checks, as printed in reports.
pub mod check {
    /// The supplied key belongs to the certificate.
    pub const KEY_MATCHES: &str = "key-matches";
    /// The certificate may sign certificates.
    pub const IS_CA: &str = "is-ca";
    /// A CA that is not self-signed comes with its chain.
    pub const CHAIN_SUPPLIED: &str = "chain-supplied";
    /// The CA verifies to today's trust, or can be bridged.
    pub const CHAINS_TO_CURRENT_TRUST: &str = "chains-to-current-trust";
    /// Valid now and for more than 24 hours.
    pub const VALID_FOR_24H: &str = "valid-for-24h";
    /// The service-account key set keeps every current key.
    pub const SERVICE_ACCOUNT_KEY_KEPT: &str = "service-account-key-kept";
    /// A leaf the CA issues (and every leaf the store keeps, when the
    /// chain constrains names) verifies against the root clients will
    /// trust: nothing above it forbids it (a path length, a name
    /// constraint, an expiry).
    pub const ISSUES_VERIFIABLE_LEAVES: &str = "issues-verifiable-leaves";
}

/// The requests a CA must be able to issue for: a serving certificate for
/// the probe name, or when the chain constrains names (which the probe
/// name is outside of), a client certificate without names and every leaf
/// the store keeps, with its own names.
pub(crate) fn probe_requests<'a>(
    lifetime: Duration,
    constrained: bool,
    leaves: impl Iterator<Item = (&'a str, &'a LeafRequest)>,
) -> Vec<(Option<&'a str>, LeafRequest)> {
    if !constrained {
        let mut probe = LeafRequest::server(vec![crate::preflight::PROBE_NAME.to_string()]);
        probe.lifetime = lifetime;
        return vec![(None, probe)];
    }
    let nameless = LeafRequest {
        kind: crate::LeafKind::Client,
        dns_names: Vec::new(),
        ip_addresses: Vec::new(),
        lifetime,
    };
    std::iter::once((None, nameless))
        .chain(leaves.map(|(name, r)| (Some(name), r.clone())))
        .collect()
}

/// Checks that `ca`, presented with `chain_after_leaf` and trusted through
/// `root`, issues leaves that verify: the [`check::ISSUES_VERIFIABLE_LEAVES`]
/// check of imports and replacements.
pub(crate) fn check_issuance<'a>(
    ca: &CertificateAuthority,
    chain_after_leaf: &[Certificate],
    root: &Certificate,
    lifetime: Duration,
    leaves: impl Iterator<Item = (&'a str, &'a LeafRequest)>,
    now: OffsetDateTime,
) -> Check {
    let constrained = std::iter::once(&ca.cert)
        .chain(chain_after_leaf)
        .chain([root])
        .any(Certificate::has_name_constraints);
    let bundle = Bundle::from_certs([root.clone()]);
    let limit = chain_after_leaf
        .iter()
        .chain([root])
        .filter(|c| *c != &ca.cert)
        .map(Certificate::not_after)
        .min();
    let requests = probe_requests(lifetime, constrained, leaves);
    for (leaf, request) in &requests {
        if let Err(e) =
            crate::preflight::probe_issuance(ca, chain_after_leaf, &bundle, request, limit, now)
        {
            let what = match leaf {
                Some(name) => format!("certificate {name} ({})", request.names().join(", ")),
                None => "a leaf".to_string(),
            };
            return Check::new(
                check::ISSUES_VERIFIABLE_LEAVES,
                false,
                format!(
                    "{what} issued by {} would not verify for clients trusting {}: {e}",
                    ca.cert.id(),
                    root.id()
                ),
            );
        }
    }
    Check::new(
        check::ISSUES_VERIFIABLE_LEAVES,
        true,
        format!(
            "{} probe leaf(s) issued by {} verify against {}",
            requests.len(),
            ca.cert.id(),
            root.id()
        ),
    )
}

/// What an imported CA brings besides itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalCa {
    /// When it was imported.
    pub imported_at: OffsetDateTime,
    /// The certificates above the CA, its issuer first, the root last;
    /// empty when the imported CA is self-signed.
    pub chain: Vec<Certificate>,
}

/// How `pki-state.json` records an imported CA (the chain itself is the
/// file `signer/ca-chain.crt`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalRecord {
    /// When the CA was imported.
    #[serde(with = "time::serde::rfc3339")]
    pub imported_at: OffsetDateTime,
}

impl ExternalCa {
    /// The chain's root, when the chain ends at one.
    pub fn root(&self) -> Option<&Certificate> {
        self.chain.last().filter(|c| is_self_signed(c))
    }

    /// The earliest NotAfter of the chain (None when it is empty): no leaf
    /// of the CA verifies past it.
    pub fn not_after(&self) -> Option<OffsetDateTime> {
        self.chain.iter().map(Certificate::not_after).min()
    }

    /// The chain without its root.
    pub fn intermediates(&self) -> &[Certificate] {
        match self.root() {
            Some(_) => &self.chain[..self.chain.len() - 1],
            None => &self.chain,
        }
    }

    /// What follows a leaf of `ca` in a serving chain: the CA itself when
    /// it is not self-signed, then the intermediates above it.
    pub(crate) fn serving_suffix(&self, ca: &Certificate) -> Vec<Certificate> {
        if is_self_signed(ca) {
            return Vec::new();
        }
        let mut suffix = vec![ca.clone()];
        suffix.extend(self.intermediates().iter().cloned());
        suffix
    }

    pub(crate) fn record(&self) -> ExternalRecord {
        ExternalRecord {
            imported_at: self.imported_at,
        }
    }
}

/// One line of a validation report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    /// The check's stable name (see [`check`]).
    pub name: String,
    /// Whether it passed.
    pub ok: bool,
    /// What it found.
    pub detail: String,
}

impl Check {
    fn new(name: &str, ok: bool, detail: impl Into<String>) -> Self {
        Check {
            name: name.to_string(),
            ok,
            detail: detail.into(),
        }
    }

    /// Whether `force` may override this check: pki cannot sign with a
    /// key that is not the certificate's, or with a certificate that may
    /// not sign certificates.
    pub fn overridable(&self) -> bool {
        self.name != check::KEY_MATCHES && self.name != check::IS_CA
    }
}

/// The outcome of [`validate_replacement`]: every check, in a fixed order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ValidationReport {
    /// Whether every check passed.
    pub ok: bool,
    /// The checks.
    pub checks: Vec<Check>,
}

impl ValidationReport {
    /// The checks that failed.
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.ok)
    }

    /// The failed checks as history entries.
    pub fn overridden(&self) -> Vec<OverriddenCheck> {
        self.failed()
            .map(|c| OverriddenCheck {
                name: c.name.clone(),
                detail: c.detail.clone(),
            })
            .collect()
    }
}

/// The service-account signing keys, by SubjectPublicKeyInfo DER: the ones
/// the store's key ring holds today, and the set a replacement proposes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceAccountKeys {
    /// The current keys (None: the store keeps no key ring).
    pub current: Option<Vec<Vec<u8>>>,
    /// The proposed key set (None: unchanged).
    pub proposed: Option<Vec<Vec<u8>>>,
}

impl ServiceAccountKeys {
    /// The SubjectPublicKeyInfo DER of every key in PEM text: `PUBLIC KEY`
    /// blocks as they are, and the public half of private keys (PKCS#8,
    /// SEC1, PKCS#1); other blocks are skipped. Input without any key is
    /// refused, as is an encrypted key.
    pub fn keys_from_pem(pem: &[u8]) -> Result<Vec<Vec<u8>>> {
        let blocks = pki_core::pem::read_blocks(pem)?;
        let mut keys = Vec::new();
        let mut other = None;
        for (i, block) in blocks.iter().enumerate() {
            let key = match block.label.as_str() {
                "PUBLIC KEY" => {
                    keys.push(block.der.to_vec());
                    continue;
                }
                "ENCRYPTED PRIVATE KEY" => {
                    return Err(pki_core::Error::EncryptedKey {
                        place: format!("the service-account key set, PEM block {}", i + 1),
                    }
                    .into());
                }
                "PRIVATE KEY" => pki_core::PrivateKey::from_pkcs8_der(&block.der)?,
                "EC PRIVATE KEY" => pki_core::PrivateKey::from_sec1_der(&block.der)?,
                "RSA PRIVATE KEY" => pki_core::PrivateKey::from_pkcs1_der(&block.der)?,
                label => {
                    other.get_or_insert((i + 1, label.to_string()));
                    continue;
                }
            };
            keys.push(key.public_key_der()?);
        }
        if keys.is_empty() {
            return Err(match other {
                Some((block, found)) => pki_core::Error::UnexpectedPemLabel {
                    block,
                    found,
                    expected: "PUBLIC KEY or a private key (a service-account key set)",
                },
                None => pki_core::Error::NoPemBlock {
                    what: "the service-account key set",
                },
            }
            .into());
        }
        Ok(keys)
    }

    /// The keys to compare for a replacement proposed to the signer in
    /// `store`: the current ones from the store's key ring (`pki keys`, the
    /// `keys` document's `keys/public.pem`; None when the store keeps no
    /// key ring) and the `proposed` set (PEM; None: unchanged).
    pub fn from_store<S: crate::Store + ?Sized>(
        store: &S,
        proposed: Option<&[u8]>,
    ) -> Result<Self> {
        let path = crate::keyring::document::PUBLIC_PEM;
        let current = match store.get(crate::keyring::STORE_KEY)? {
            Some((files, _)) => match files.get(path) {
                Some(pem) => Some(Self::keys_from_pem(pem).map_err(|e| match e {
                    RotateError::Core(core) => {
                        RotateError::material(format!("{}: {path}", store.location()), core)
                    }
                    other => other,
                })?),
                None => None,
            },
            None => None,
        };
        let proposed = proposed.map(Self::keys_from_pem).transpose()?;
        Ok(ServiceAccountKeys { current, proposed })
    }
}

/// `service-account-key-kept`: every current key must stay in the proposed
/// set, or tokens signed with a dropped key stop verifying at once.
pub fn check_service_account_keys(keys: &ServiceAccountKeys) -> Check {
    let name = check::SERVICE_ACCOUNT_KEY_KEPT;
    let Some(current) = &keys.current else {
        return Check::new(name, true, "no service-account key ring in this store");
    };
    let Some(proposed) = &keys.proposed else {
        return Check::new(
            name,
            true,
            format!("key set unchanged ({} current keys)", current.len()),
        );
    };
    let dropped: Vec<String> = current
        .iter()
        .enumerate()
        .filter(|(_, k)| !proposed.contains(k))
        .map(|(i, _)| format!("#{}", i + 1))
        .collect();
    if dropped.is_empty() {
        Check::new(
            name,
            true,
            format!(
                "the proposed {} keys keep all {} current keys",
                proposed.len(),
                current.len()
            ),
        )
    } else {
        Check::new(
            name,
            false,
            format!(
                "the proposed key set drops current key(s) {} of {}: tokens they signed would stop verifying",
                dropped.join(", "),
                current.len()
            ),
        )
    }
}

/// How trust moves from the current CA to a replacement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// The replacement verifies against today's trust: nothing to bridge.
    SameTrust,
    /// The replacement is self-signed and pki holds the current CA's key
    /// (whether that CA is self-signed or was imported under someone
    /// else's root): both cross-signs, as the service-CA scheme does,
    /// trusted until `until`.
    Bridged {
        /// Bridge A's NotAfter.
        until: OffsetDateTime,
    },
    /// Neither: clients holding the old bundle reject new serving chains
    /// until they reload it.
    Break,
}

/// Anchors of today's trust: the bundle, plus the previous self-signed CA
/// while it is valid (clients that have not refreshed still trust it).
fn current_anchors(state: &SignerState, now: OffsetDateTime) -> Bundle {
    let mut anchors = state.bundle.clone();
    if let Some(prev) = state
        .previous
        .as_ref()
        .and_then(|p| p.certificate.as_ref())
        .and_then(|pem| Certificate::from_pem(pem.as_bytes()).ok())
        && prev.is_valid_at(now)
    {
        anchors.push(prev);
    }
    anchors
}

/// Why bridge B (the replacement signed by the current CA's key) would not
/// verify for clients that hold today's bundle, or None when it would.
///
/// Their path is: leaf, bridge B, the current CA, its external
/// intermediates, the root. Bridge B is one more CA certificate under the
/// current CA, so each CA above it must allow one more below it
/// (pathLenConstraint). Go's crypto/x509 and rustls-webpki count
/// self-issued certificates too (RFC 5280 would exempt bridge B when the
/// replacement reuses the Subject), so they are counted here as well.
///
/// This is also the organisation's policy, not only path validation: when
/// the current CA was imported under an external root, bridge B makes a
/// CA the organisation never signed trusted by everyone who trusts its
/// root. The organisation says whether its CA may do that with
/// pathLenConstraint (and name constraints, which the pre-flight trust
/// matrix checks on real chains): the k3s custom-CA topology gives the
/// cluster CA pathLenConstraint 0, "sign leaves only", and then there is
/// no bridge; a CA given room for sub-CAs is bridged like any other.
fn bridge_obstacle(state: &SignerState, now: OffsetDateTime) -> Option<String> {
    let current = &state.ca.cert;
    if !current.is_valid_at(now) {
        return Some(format!(
            "the current CA {} is not valid now (valid until {})",
            current.id(),
            rfc3339(current.not_after())
        ));
    }
    let above: &[Certificate] = state.external.as_ref().map_or(&[], |e| e.chain.as_slice());
    if let Some(dead) = above.iter().find(|c| !c.is_valid_at(now)) {
        return Some(format!(
            "{} above the current CA is not valid now (valid until {})",
            dead.id(),
            rfc3339(dead.not_after())
        ));
    }
    for (below, ca) in std::iter::once(current).chain(above).enumerate() {
        // CA certificates between `ca` and the leaf: bridge B, then the
        // ones of today's path below `ca`.
        let cas_below = below + 1;
        if let Some(limit) = ca.basic_constraints().and_then(|b| b.path_len)
            && usize::from(limit) < cas_below
        {
            return Some(format!(
                "{} ({}) has pathLenConstraint {limit}, and bridge B would put {cas_below} CA certificate(s) below it",
                ca.id(),
                ca.subject()
            ));
        }
    }
    None
}

/// Until when a rotation that cannot be bridged leaves clients holding the
/// old bundle unable to verify new serving chains: until they reload it,
/// which the policy promises within the reload interval I (M when it sets
/// none), and no later than the old bundle's last anchor expires.
fn break_until(state: &SignerState, now: OffsetDateTime) -> OffsetDateTime {
    let rotation = &state.policy.rotation;
    let reload = rotation.reload_interval.unwrap_or(rotation.min_trust);
    let reloaded = now.checked_add(reload).unwrap_or(now);
    state
        .bundle
        .certs()
        .iter()
        .map(Certificate::not_after)
        .max()
        .map_or(reloaded, |last| reloaded.min(last))
}

fn topology(
    state: &SignerState,
    import: &CaImport,
    now: OffsetDateTime,
) -> (Topology, std::result::Result<String, String>) {
    // The supplied chain first; the intermediates the store holds may
    // complete it (whether the chain was supplied is a check of its own).
    let mut intermediates = import.chain.clone();
    if let Some(ext) = &state.external {
        intermediates.extend(ext.intermediates().iter().cloned());
        intermediates.push(state.ca.cert.clone());
    }
    let anchors = current_anchors(state, now);
    let e = match verify_ca_path(&import.cert, &intermediates, &anchors, now) {
        Ok(path) => {
            return (
                Topology::SameTrust,
                Ok(format!(
                    "verifies through {} certificate(s) up to {}, trusted today",
                    path.certs.len() - 1,
                    path.anchor().map(Certificate::id).unwrap_or_default()
                )),
            );
        }
        Err(e) => e,
    };
    let obstacle = if import.is_self_signed() {
        bridge_obstacle(state, now)
    } else {
        Some(
            "only a self-signed replacement is bridged (one signed by another CA is that CA's to vouch for)"
                .to_string(),
        )
    };
    let Some(obstacle) = obstacle else {
        let min_trust = state.policy.rotation.min_trust;
        let until = state
            .ca
            .cert
            .not_after()
            .max(pki_core::datetime::truncate(now + min_trust));
        return (
            Topology::Bridged { until },
            Ok(format!(
                "a new self-signed root; the current CA's key cross-signs it both ways (service-CA bridges), old CA trusted until {}",
                rfc3339(until)
            )),
        );
    };
    (
        Topology::Break,
        Err(format!(
            "does not verify against today's trust ({e}), and the current CA's key cannot bridge it: {obstacle}. \
             Breaks: new serving chain x old bundle (clients holding the old ca-bundle.crt reject servers with certificates of the new CA) from the rotation until {}, \
             when every client has reloaded ca-bundle.crt (the reload interval after the rotation; M when the policy sets none). \
             Holds: old x old, new x new, old x new (the new bundle keeps the old trust until {})",
            rfc3339(break_until(state, now)),
            rfc3339(state.ca.cert.not_after())
        )),
    )
}

/// Checks a proposed replacement of the current CA at `now` (k3s
/// `validateCA`). Pure: the caller supplies the service-account key sets.
pub fn validate_replacement(
    state: &SignerState,
    import: &CaImport,
    service_accounts: &ServiceAccountKeys,
    now: OffsetDateTime,
) -> ValidationReport {
    Validation::run(state, import, service_accounts, now).report
}

struct Validation {
    report: ValidationReport,
    topology: Topology,
}

impl Validation {
    fn run(
        state: &SignerState,
        import: &CaImport,
        service_accounts: &ServiceAccountKeys,
        now: OffsetDateTime,
    ) -> Self {
        let mut checks = import_checks(
            import,
            state.leaves.iter().map(|(n, l)| (n.as_str(), &l.request)),
            now,
        );
        let (topology, trust) = topology(state, import, now);
        checks.insert(
            3,
            match trust {
                Ok(detail) => Check::new(check::CHAINS_TO_CURRENT_TRUST, true, detail),
                Err(detail) => Check::new(check::CHAINS_TO_CURRENT_TRUST, false, detail),
            },
        );
        checks.push(check_service_account_keys(service_accounts));
        let ok = checks.iter().all(|c| c.ok);
        Validation {
            report: ValidationReport { ok, checks },
            topology,
        }
    }
}

/// The checks of a CA supplied from outside that hold whatever the store
/// holds, in report order: its key, that it may sign certificates, its
/// chain, its validity (to the earliest NotAfter of it and its chain),
/// and that the leaves it issues (and `leaves`, when the chain constrains
/// names) verify against its root. `init --import` refuses when one
/// fails; `validate` and `rotate --to` run the same list and add the
/// checks against the store (continuity of trust, service-account keys).
pub fn import_checks<'a>(
    import: &CaImport,
    leaves: impl Iterator<Item = (&'a str, &'a LeafRequest)>,
    now: OffsetDateTime,
) -> Vec<Check> {
    let cert = &import.cert;
    let mut checks = Vec::new();
    checks.push(match &import.key {
        None => Check::new(check::KEY_MATCHES, false, "no private key supplied"),
        Some(k) if k.matches(cert.public_key()) => Check::new(
            check::KEY_MATCHES,
            true,
            format!("the {} key belongs to {}", k.algorithm(), cert.id()),
        ),
        Some(_) => Check::new(
            check::KEY_MATCHES,
            false,
            format!("the private key supplied does not belong to {}", cert.id()),
        ),
    });
    checks.push(match pki_core::check_can_sign_certificates(cert) {
        Ok(()) => Check::new(check::IS_CA, true, "cA:TRUE, may sign certificates"),
        Err(e) => Check::new(check::IS_CA, false, e.to_string()),
    });
    checks.push(if import.is_self_signed() {
        Check::new(check::CHAIN_SUPPLIED, true, "self-signed: no chain needed")
    } else if import.chain.is_empty() {
        Check::new(
            check::CHAIN_SUPPLIED,
            false,
            format!(
                "{} is signed by \"{}\" but came alone: an intermediate topology needs the chain up to the root (--chain, or the certificates after the CA in the same file)",
                cert.id(),
                cert.issuer()
            ),
        )
    } else {
        Check::new(
            check::CHAIN_SUPPLIED,
            true,
            format!(
                "{} certificate(s) above the CA{}",
                import.chain.len(),
                if import.root().is_some() {
                    ", up to a root"
                } else {
                    ""
                }
            ),
        )
    });
    // A leaf stops verifying when any certificate of its path expires.
    let (until, first) = std::iter::once(cert)
        .chain(&import.chain)
        .map(|c| (c.not_after(), c))
        .min_by_key(|(t, _)| *t)
        .unwrap_or((cert.not_after(), cert));
    let whose = if first == cert {
        String::new()
    } else {
        format!(" (its chain's {})", first.id())
    };
    let left = until - now;
    checks.push(if now < cert.not_before() {
        Check::new(
            check::VALID_FOR_24H,
            false,
            format!("not valid before {}", rfc3339(cert.not_before())),
        )
    } else if left <= MIN_REPLACEMENT_VALIDITY {
        Check::new(
            check::VALID_FOR_24H,
            false,
            format!(
                "expires at {}{whose} ({} left): a CA needs more than 24h",
                rfc3339(until),
                pki_core::policy::human(left.max(Duration::ZERO))
            ),
        )
    } else {
        Check::new(
            check::VALID_FOR_24H,
            true,
            format!(
                "valid until {}{whose} ({} left)",
                rfc3339(until),
                pki_core::policy::human(left)
            ),
        )
    });
    // A probe needs the CA's key and a certificate that may sign: when an
    // earlier check found either missing, that check is the failure, and
    // this one says it did not run.
    let blocked: Vec<&str> = checks
        .iter()
        .filter(|c| !c.ok && (c.name == check::KEY_MATCHES || c.name == check::IS_CA))
        .map(|c| c.name.as_str())
        .collect();
    if !blocked.is_empty() {
        let detail = format!(
            "not run: no leaf can be issued until {} passes",
            blocked.join(" and ")
        );
        checks.push(Check::new(check::ISSUES_VERIFIABLE_LEAVES, true, detail));
        return checks;
    }
    checks.push(match import.authority() {
        Ok(ca) => {
            let suffix: Vec<Certificate> = if import.is_self_signed() {
                Vec::new()
            } else {
                std::iter::once(cert.clone())
                    .chain(import.intermediates().iter().cloned())
                    .collect()
            };
            let root = import.root().or(import.chain.last()).unwrap_or(cert);
            check_issuance(
                &ca,
                &suffix,
                root,
                crate::leaf::DEFAULT_LEAF_LIFETIME,
                leaves,
                now,
            )
        }
        Err(e) => Check::new(
            check::ISSUES_VERIFIABLE_LEAVES,
            false,
            format!("nothing can be issued: {e}"),
        ),
    });
    checks
}

/// A replacement CA proposed by an operator.
#[derive(Debug, Clone)]
pub struct Replacement {
    /// The CA, its key and its chain.
    pub import: CaImport,
    /// Override the failing checks, with this reason (recorded).
    pub force: Option<String>,
    /// The service-account key sets to compare.
    pub service_accounts: ServiceAccountKeys,
}

/// What an operator asks of an external CA.
#[derive(Debug, Clone, Default)]
pub enum ExternalInput {
    /// Nothing: the engine changes nothing.
    #[default]
    Nothing,
    /// Validate, then rotate to the supplied CA and re-issue every leaf.
    Replace(Box<Replacement>),
    /// A new certificate for the current CA, on its own key and Subject.
    RenewSameKey,
}

/// What [`ExternalEngine::plan`] decided.
#[derive(Debug, Clone)]
pub enum ExternalPlan {
    /// Nothing to do.
    Nothing {
        /// The plan's time.
        now: OffsetDateTime,
        /// The request was carried out before (the CA supplied is the one
        /// in use): what was done, and when.
        already_done: Option<String>,
    },
    /// Rotate to a validated (or forced) replacement.
    Replace {
        /// The plan's time.
        now: OffsetDateTime,
        /// The new CA.
        ca: Box<CertificateAuthority>,
        /// Its chain.
        chain: Vec<Certificate>,
        /// How trust moves.
        topology: Topology,
        /// The forced reason, when forced.
        force: Option<String>,
        /// Checks that failed and were overridden.
        overridden: Vec<OverriddenCheck>,
    },
    /// Renew the current CA on its key.
    RenewSameKey {
        /// The plan's time.
        now: OffsetDateTime,
    },
}

/// The external-CA operations over the signer's document (same store key
/// and files as [`crate::SignerEngine`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ExternalEngine;

impl Engine for ExternalEngine {
    type Document = SignerState;
    type Input = ExternalInput;
    type Plan = ExternalPlan;
    type Event = Event;

    fn plan(doc: &SignerState, input: &ExternalInput, now: OffsetDateTime) -> Result<ExternalPlan> {
        plan(doc, input, now)
    }

    fn apply<'d, R: CryptoRng + ?Sized + 'static>(
        doc: &'d SignerState,
        plan: ExternalPlan,
        rng: &mut R,
    ) -> Result<Outcome<'d, SignerState, Event>> {
        apply(doc, plan, rng)
    }
}

/// Decides: validates a replacement (refusing it unless every failing
/// check may be and is overridden), or checks that renewal is possible.
pub fn plan(
    state: &SignerState,
    input: &ExternalInput,
    now: OffsetDateTime,
) -> Result<ExternalPlan> {
    match input {
        ExternalInput::Nothing => Ok(ExternalPlan::Nothing {
            now,
            already_done: None,
        }),
        ExternalInput::RenewSameKey => {
            if state.external.is_some() {
                return Err(RotateError::ImportedCaRenewal {
                    ca: state.ca.cert.id(),
                });
            }
            if !state.ca.cert.is_valid_at(now) {
                return Err(RotateError::Expired {
                    what: format!("CA {}", state.ca.cert.id()),
                    at: state.ca.cert.not_after(),
                });
            }
            pki_core::datetime::add(now, state.policy.rotation.lifetime)?;
            Ok(ExternalPlan::RenewSameKey { now })
        }
        ExternalInput::Replace(replacement) => {
            let force = match &replacement.force {
                Some(r) if r.trim().is_empty() => return Err(RotateError::EmptyForcedReason),
                other => other.clone(),
            };
            if let Some(reason) = &force {
                crate::text::check_reason("the forced rotation's reason", reason)?;
            }
            // The request's identity is the CA it supplies: the one in use
            // already (a rerun after a lost reply, or after a kill) is done.
            if replacement.import.cert == state.ca.cert {
                let since = state
                    .history
                    .iter()
                    .rev()
                    .find(|r| r.to == state.ca.cert.id())
                    .map(|r| format!(" since {}", rfc3339(r.at)))
                    .unwrap_or_default();
                return Ok(ExternalPlan::Nothing {
                    now,
                    already_done: Some(format!(
                        "CA {} is the CA in use{since}",
                        state.ca.cert.id()
                    )),
                });
            }
            let validation = Validation::run(
                state,
                &replacement.import,
                &replacement.service_accounts,
                now,
            );
            let failed: Vec<OverriddenCheck> = validation.report.overridden();
            let hard = validation.report.failed().any(|c| !c.overridable());
            if !failed.is_empty() && (force.is_none() || hard) {
                return Err(RotateError::ValidationFailed {
                    failed,
                    forced: force.is_some(),
                });
            }
            let ca = replacement.import.authority()?;
            Ok(ExternalPlan::Replace {
                now,
                ca: Box::new(ca),
                chain: replacement.import.chain.clone(),
                topology: validation.topology,
                force,
                overridden: failed,
            })
        }
    }
}

/// Carries out `plan` with `rng`.
pub fn apply<'d, R: CryptoRng + ?Sized + 'static>(
    state: &'d SignerState,
    plan: ExternalPlan,
    rng: &mut R,
) -> Result<Outcome<'d, SignerState, Event>> {
    match plan {
        ExternalPlan::Nothing { now, already_done } => Ok(Outcome {
            document: Cow::Borrowed(state),
            events: already_done
                .map(|note| Event::AlreadyDone { note })
                .into_iter()
                .collect(),
            next_wake: crate::signer::next_check(state, &state.policy, now),
        }),
        ExternalPlan::RenewSameKey { now } => renew(state, now, rng),
        ExternalPlan::Replace {
            now,
            ca,
            chain,
            topology,
            force,
            overridden,
        } => replace(state, now, *ca, chain, topology, force, overridden, rng),
    }
}

fn probe_request(state: &SignerState) -> LeafRequest {
    let mut request = LeafRequest::server(vec![crate::preflight::PROBE_NAME.to_string()]);
    request.lifetime = state.policy.rotation.lifetime;
    request
}

#[allow(clippy::too_many_arguments)]
fn replace<'d, R: CryptoRng + ?Sized + 'static>(
    state: &'d SignerState,
    now: OffsetDateTime,
    new: CertificateAuthority,
    chain: Vec<Certificate>,
    topology: Topology,
    force: Option<String>,
    overridden: Vec<OverriddenCheck>,
    rng: &mut R,
) -> Result<Outcome<'d, SignerState, Event>> {
    let old = &state.ca;
    let mut next = state.clone();
    let mut events = Vec::new();
    let old_probe = if old.cert.is_valid_at(now) {
        Some(state.issue_leaf(&probe_request(state), now, rng)?)
    } else {
        None
    };
    // A forced replacement that came without its chain: the chain the
    // store holds is the best guess at what clients need.
    let chain = match &state.external {
        Some(ext) if chain.is_empty() && !is_self_signed(&new.cert) => ext.chain.clone(),
        _ => chain,
    };
    let external = ExternalCa {
        imported_at: now,
        chain,
    };
    let new_root = if is_self_signed(&new.cert) {
        new.cert.clone()
    } else {
        // Validation made sure of a chain; without a root (a forced
        // import), the top of the chain is what clients must trust.
        external
            .root()
            .or(external.chain.last())
            .cloned()
            .unwrap_or_else(|| new.cert.clone())
    };
    let trusted_until;
    match topology {
        Topology::Bridged { until } => {
            let bridge_a = cross_sign(&old.cert, &new, until, rng)?;
            // Bridge B verifies only through the current CA and the chain
            // above it: it ends with the first of them to expire.
            let b_until = [Some(new.cert.not_after()), Some(old.cert.not_after())]
                .into_iter()
                .chain([state.leaf_not_after_limit()])
                .flatten()
                .min()
                .unwrap_or(old.cert.not_after());
            let bridge_b = cross_sign(&new.cert, old, b_until, rng)?;
            next.bundle = Bundle::from_certs([new.cert.clone(), bridge_a]);
            next.bridge = Some(bridge_b);
            next.bridge_chain = state
                .external
                .as_ref()
                .map(|e| e.serving_suffix(&old.cert))
                .unwrap_or_default();
            trusted_until = Some(until);
        }
        Topology::SameTrust | Topology::Break => {
            // The old anchors stay until they expire: servers that have
            // not refreshed keep verifying for clients that have.
            let mut bundle = Bundle::from_certs([new_root]);
            bundle.merge(&state.bundle);
            next.bundle = bundle;
            next.bridge = None;
            next.bridge_chain = Vec::new();
            trusted_until = Some(old.cert.not_after());
        }
    }
    let reason = match &force {
        Some(reason) => RotationReason::Forced {
            reason: reason.clone(),
        },
        None => RotationReason::Supplied,
    };
    events.push(Event::Rotated {
        reason: reason.clone(),
        previous: old.cert.id(),
        current: new.cert.id(),
        previous_trusted_until: trusted_until,
    });
    next.history.push(RotationRecord {
        at: now,
        reason,
        from: old.cert.id(),
        to: new.cert.id(),
        previous_trusted_until: trusted_until,
        overridden,
        forced_reasons: Vec::new(),
    });
    next.previous = Some(PreviousCa {
        id: old.cert.id(),
        not_after: old.cert.not_after(),
        trusted_until,
        certificate: is_self_signed(&old.cert).then(|| old.cert.to_pem()),
        probe: old_probe.as_ref().map(|p| {
            state
                .serving_chain(&p.cert)
                .iter()
                .map(Certificate::to_pem)
                .collect()
        }),
    });
    next.ca = new;
    next.external = Some(external);

    let new_probe = next.issue_leaf(&probe_request(state), now, rng)?;
    let old_chain = old_probe.as_ref().map(|p| state.serving_chain(&p.cert));
    let new_chain = next.serving_chain(&new_probe.cert);
    let inputs = MatrixInputs {
        old_chain: old_chain.as_deref(),
        new_chain: Some(&new_chain),
        old_bundle: Some(&state.bundle),
        new_bundle: &next.bundle,
    };
    for cell in crate::preflight::matrix(&inputs, &[now]) {
        // The one cell a forced, unbridgeable rotation announced.
        let announced = topology == Topology::Break
            && force.is_some()
            && cell.chain == Side::New
            && cell.bundle == Side::Old;
        if let Err(source) = cell.result
            && !announced
        {
            return Err(RotateError::TrustCheckFailed {
                chain: cell.chain,
                bundle: cell.bundle,
                at: cell.at,
                source: Box::new(source),
            });
        }
    }

    // The guard every rotation runs: consumers that may still hold the
    // material of the previous rotation (within the reload interval), or a
    // bundle of an expired CA. Refused unless forced, then recorded.
    let breaks = crate::preflight::rotation_trust_breaks(state, &next, &new_probe.cert, now);
    if !breaks.is_empty() {
        let Some(reason) = &force else {
            return Err(RotateError::TrustBreak {
                breaks: breaks.iter().map(ToString::to_string).collect(),
            });
        };
        if let Some(record) = next.history.last_mut() {
            record
                .overridden
                .extend(breaks.iter().map(|b| b.overridden(reason)));
        }
    }

    let limit = next.leaf_not_after_limit();
    for (name, leaf) in next.leaves.iter_mut() {
        let issued = crate::leaf::issue_leaf_within(&next.ca, &leaf.request, now, limit, rng)?;
        events.push(Event::LeafReissued {
            name: name.clone(),
            reason: LeafReason::IssuerRotated,
            id: issued.cert.id(),
        });
        leaf.issued = Some(issued);
    }
    Ok(Outcome {
        document: Cow::Owned(next),
        events,
        next_wake: now,
    })
}

fn renew<'d, R: CryptoRng + ?Sized + 'static>(
    state: &'d SignerState,
    now: OffsetDateTime,
    rng: &mut R,
) -> Result<Outcome<'d, SignerState, Event>> {
    let old = &state.ca;
    let renewed = pki_core::renew_same_key(old, now, state.policy.rotation.lifetime, rng)?;
    let mut next = state.clone();
    let mut bundle = Bundle::from_certs([renewed.clone()]);
    for c in state.bundle.certs() {
        if c != &old.cert {
            bundle.push(c.clone());
        }
    }
    next.bundle = bundle;
    next.ca = CertificateAuthority::new(renewed, old.key.clone())?;
    let new_id = next.ca.cert.id();
    let reason = RotationReason::RenewedSameKey;
    next.history.push(RotationRecord {
        at: now,
        reason: reason.clone(),
        from: old.cert.id(),
        to: next.ca.cert.id(),
        previous_trusted_until: Some(old.cert.not_after()),
        overridden: Vec::new(),
        forced_reasons: Vec::new(),
    });
    // Same key and SKI: a leaf of the old certificate is a leaf of the new.
    let probe = state.issue_leaf(&probe_request(state), now, rng)?;
    let chain = state.serving_chain(&probe.cert);
    let cells = crate::preflight::matrix(
        &MatrixInputs {
            old_chain: Some(&chain),
            new_chain: None,
            old_bundle: Some(&state.bundle),
            new_bundle: &next.bundle,
        },
        &[now],
    );
    for cell in cells {
        if let Err(source) = cell.result {
            return Err(RotateError::TrustCheckFailed {
                chain: cell.chain,
                bundle: cell.bundle,
                at: cell.at,
                source: Box::new(source),
            });
        }
    }
    Ok(Outcome {
        document: Cow::Owned(next),
        events: vec![Event::Rotated {
            reason,
            previous: old.cert.id(),
            current: new_id,
            previous_trusted_until: Some(old.cert.not_after()),
        }],
        next_wake: now,
    })
}

impl SignerState {
    /// A signer whose CA is `import`: the key must match and the CA must
    /// verify up to the root of its chain (or be self-signed) and be valid
    /// at `now`. The bundle holds the root; serving chains carry the CA
    /// and the intermediates.
    pub fn import(
        import: &CaImport,
        policy: crate::signer::SignerPolicy,
        now: OffsetDateTime,
    ) -> Result<Self> {
        policy.validate()?;
        // The checks of every supplied CA that hold whatever the store
        // holds (validate and rotate --to run the same): what can never
        // verify is refused before it is written.
        let failed: Vec<OverriddenCheck> = import_checks(import, std::iter::empty(), now)
            .into_iter()
            .filter(|c| !c.ok)
            .map(|c| OverriddenCheck {
                name: c.name,
                detail: c.detail,
            })
            .collect();
        if !failed.is_empty() {
            return Err(RotateError::ValidationFailed {
                failed,
                forced: false,
            });
        }
        let ca = import.authority()?;
        let validated = import.validate(now)?;
        let root = validated.root().clone();
        Ok(SignerState {
            policy,
            ca,
            bridge: None,
            bridge_chain: Vec::new(),
            bundle: Bundle::from_certs([root]),
            previous: None,
            forced_rotation_reason: None,
            leaves: Default::default(),
            history: Vec::new(),
            external: Some(ExternalCa {
                imported_at: now,
                chain: import.chain.clone(),
            }),
        })
    }
}

/// The signer's automatic rotation leaves an imported CA alone (its
/// replacement must come from its issuer), and a forced one is refused.
pub(crate) fn hold_rotation(
    state: &SignerState,
    rotation: &mut Option<crate::signer::RotationDecision>,
) -> Result<()> {
    if state.external.is_none() {
        return Ok(());
    }
    match rotation.as_ref().map(|r| &r.reason) {
        Some(RotationReason::Forced { reason }) => Err(RotateError::ImportedCaRotation {
            ca: state.ca.cert.id(),
            reason: reason.clone(),
        }),
        _ => {
            *rotation = None;
            Ok(())
        }
    }
}
