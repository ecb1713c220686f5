//! Validating a CA supplied from outside: the named checks of a
//! [`ValidationReport`], and how trust would move to it ([`Topology`]).

use super::{MIN_REPLACEMENT_VALIDITY, ServiceAccountKeys, check, check_service_account_keys};
use crate::engines::leaf::LeafRequest;
use crate::engines::signer::{OverriddenCheck, SignerState};
use pki_core::{
    Bundle, CaImport, Certificate, CertificateAuthority, datetime::rfc3339, verify_ca_path,
};
use time::{Duration, OffsetDateTime};

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
    pub(super) fn new(name: &str, ok: bool, detail: impl Into<String>) -> Self {
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
    let mut checks = vec![
        key_check(import),
        match pki_core::check_can_sign_certificates(&import.cert) {
            Ok(()) => Check::new(check::IS_CA, true, "cA:TRUE, may sign certificates"),
            Err(e) => Check::new(check::IS_CA, false, e.to_string()),
        },
        chain_check(import),
        validity_check(import, now),
    ];
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
    checks.push(issuance_check(import, leaves, now));
    checks
}

/// Without its own private key the CA can issue nothing; a key of another
/// certificate would issue leaves nobody verifies.
fn key_check(import: &CaImport) -> Check {
    let cert = &import.cert;
    match &import.key {
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
    }
}

/// A CA signed by someone else needs the chain up to the root: consumers
/// trust the root, and leaves are served with the certificates between.
fn chain_check(import: &CaImport) -> Check {
    let cert = &import.cert;
    if import.is_self_signed() {
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
    }
}

/// A CA must be valid now and for more than a day: a leaf stops verifying
/// when any certificate of its path expires, so the earliest NotAfter of
/// the CA and its chain counts, and the detail names which one it is.
fn validity_check(import: &CaImport, now: OffsetDateTime) -> Check {
    let cert = &import.cert;
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
    if now < cert.not_before() {
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
    }
}

/// The proof that the CA works: leaves it issues (served with the CA and
/// its intermediates) verify against its root.
fn issuance_check<'a>(
    import: &CaImport,
    leaves: impl Iterator<Item = (&'a str, &'a LeafRequest)>,
    now: OffsetDateTime,
) -> Check {
    let cert = &import.cert;
    match import.authority() {
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
                crate::engines::leaf::DEFAULT_LEAF_LIFETIME,
                leaves,
                now,
            )
        }
        Err(e) => Check::new(
            check::ISSUES_VERIFIABLE_LEAVES,
            false,
            format!("nothing can be issued: {e}"),
        ),
    }
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
        let mut probe =
            LeafRequest::server(vec![crate::engines::preflight::PROBE_NAME.to_string()]);
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
        if let Err(e) = crate::engines::preflight::probe_issuance(
            ca,
            chain_after_leaf,
            &bundle,
            request,
            limit,
            now,
        ) {
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
    let reload = rotation.effective_reload_interval();
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

pub(super) struct Validation {
    pub(super) report: ValidationReport,
    pub(super) topology: Topology,
}

impl Validation {
    pub(super) fn run(
        state: &SignerState,
        import: &CaImport,
        service_accounts: &ServiceAccountKeys,
        now: OffsetDateTime,
    ) -> Self {
        let mut checks = import_checks(
            import,
            state.leaves.iter().map(|(n, l)| (n.as_str(), &*l.request)),
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
