//! Leaf reconciliation: when a serving or client certificate must be re-issued.

use crate::model::error::{Result, RotateError};
use pki_core::{Certificate, CertificateAuthority, CertificateParams, PrivateKey, Profile};
use rand_core::CryptoRng;
use std::net::IpAddr;
use std::sync::Arc;
use time::{Duration, OffsetDateTime};

/// Default leaf lifetime: one year, cut at the CA's NotAfter.
pub const DEFAULT_LEAF_LIFETIME: Duration = Duration::days(365);

/// A certificate issued for a leaf request, with its key.
#[derive(Debug, Clone)]
pub struct IssuedLeaf {
    /// The leaf certificate.
    pub cert: Certificate,
    /// Its private key.
    pub key: PrivateKey,
}

/// A named leaf: what was asked for, and what was issued.
#[derive(Debug, Clone)]
pub struct Leaf {
    /// The request: names, profile, lifetime. Shared, not copied, by the
    /// copy of the document a step makes: a signer of 100,000 leaves would
    /// otherwise hold every request twice while it steps.
    pub request: Arc<LeafRequest>,
    /// The current certificate, once issued.
    pub issued: Option<IssuedLeaf>,
}

/// Leaf names become directory names: keep them boring.
///
/// # Errors
///
/// [`SignerError::InvalidLeafName`](crate::SignerError::InvalidLeafName) when
/// `name` is empty, longer than 64 bytes, starts with `.`, or holds a character
/// other than `a-z`, `0-9`, `-`, `_` and `.`.
pub fn validate_leaf_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(RotateError::Signer(crate::SignerError::InvalidLeafName(
            name.to_string(),
        )))
    }
}

/// What kind of leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeafKind {
    /// TLS server (serverAuth).
    Server,
    /// TLS client (clientAuth).
    Client,
    /// Both.
    ServerClient,
}

impl std::fmt::Display for LeafKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LeafKind::Server => "server",
            LeafKind::Client => "client",
            LeafKind::ServerClient => "server-client",
        })
    }
}

impl LeafKind {
    /// The kind a certificate was issued as, from its extended key usage
    /// (None: neither serverAuth nor clientAuth).
    pub fn of(cert: &Certificate) -> Option<LeafKind> {
        let eku = cert.extended_key_usage().unwrap_or(&[]);
        let server = eku.contains(&pki_core::EKU_SERVER_AUTH);
        let client = eku.contains(&pki_core::EKU_CLIENT_AUTH);
        match (server, client) {
            (true, true) => Some(LeafKind::ServerClient),
            (true, false) => Some(LeafKind::Server),
            (false, true) => Some(LeafKind::Client),
            (false, false) => None,
        }
    }

    pub(crate) fn profile(self) -> Profile {
        match self {
            LeafKind::Server => Profile::Server,
            LeafKind::Client => Profile::Client,
            LeafKind::ServerClient => Profile::ServerClient,
        }
    }
}

/// What a leaf should look like. A stored request with a field this build
/// does not know is refused rather than read without it: a misspelt
/// `ip_addresses` would otherwise re-issue the leaf without its addresses.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeafRequest {
    /// Server, client or both.
    pub kind: LeafKind,
    /// DNS names (the first one is also the CN).
    pub dns_names: Vec<String>,
    /// IP addresses.
    #[serde(default)]
    pub ip_addresses: Vec<IpAddr>,
    /// Requested lifetime (cut at the CA's NotAfter).
    #[serde(with = "duration_str")]
    pub lifetime: Duration,
}

impl LeafRequest {
    /// A server request for `dns_names` with the default lifetime.
    pub fn server(dns_names: Vec<String>) -> Self {
        LeafRequest {
            kind: LeafKind::Server,
            dns_names,
            ip_addresses: Vec::new(),
            lifetime: DEFAULT_LEAF_LIFETIME,
        }
    }

    /// Checks everything about the request that issuing it would refuse:
    /// it names something, each DNS name is one a leaf may carry
    /// ([`check_leaf_dns_name`]), its common name fits, and its lifetime is
    /// positive. `pki issue` runs it on what it is asked, and reading a
    /// stored request runs it on what was stored, so a store never holds a
    /// request that every later step would fail to issue.
    ///
    /// # Errors
    ///
    /// [`RotateError::Core`] with [`pki_core::Error::Issuance`] when the
    /// request names no DNS name and no IP address, or its lifetime is not
    /// positive; those of [`check_leaf_dns_name`] for each DNS name; a
    /// [`RotateError::Core`] when the common name does not make a subject name.
    pub fn validate(&self) -> Result<()> {
        if self.dns_names.is_empty() && self.ip_addresses.is_empty() {
            return Err(pki_core::Error::Issuance {
                reason: "a certificate needs at least one DNS name or IP address".into(),
            }
            .into());
        }
        for name in &self.dns_names {
            check_leaf_dns_name(name)?;
        }
        pki_core::common_name_to_name(&self.common_name())?;
        if self.lifetime <= Duration::ZERO {
            return Err(pki_core::Error::Issuance {
                reason: "lifetime must be positive".into(),
            }
            .into());
        }
        Ok(())
    }

    /// Every requested name, DNS names first, as the CLI shows them.
    pub fn names(&self) -> Vec<String> {
        let mut names = self.dns_names.clone();
        names.extend(self.ip_addresses.iter().map(ToString::to_string));
        names
    }

    /// The names `self` has that `other` lacks (case-insensitive for DNS).
    pub fn names_missing_from(&self, other: &LeafRequest) -> Vec<String> {
        let mut missing: Vec<String> = self
            .dns_names
            .iter()
            .filter(|d| !other.dns_names.iter().any(|o| o.eq_ignore_ascii_case(d)))
            .cloned()
            .collect();
        missing.extend(
            self.ip_addresses
                .iter()
                .filter(|ip| !other.ip_addresses.contains(ip))
                .map(ToString::to_string),
        );
        missing
    }

    pub(crate) fn common_name(&self) -> String {
        match (self.dns_names.first(), self.ip_addresses.first()) {
            (Some(d), _) => d.clone(),
            (None, Some(ip)) => ip.to_string(),
            (None, None) => "leaf".into(),
        }
    }
}

/// Refuses DNS names that are wrong in a leaf request: a bare `*` (every
/// host), a wildcard directly under a single label such as `*.com` (every
/// host of a top-level domain, which no CA should certify), an IP literal
/// (clients match IP addresses against iPAddress names only, so such a DNS
/// name never matches: use an IP name), and any name a certificate cannot
/// carry ([`pki_core::check_dns_name`]).
///
/// # Errors
///
/// [`RotateError::Core`] with [`pki_core::Error::Issuance`] naming the name for
/// each case above, and the error of [`pki_core::check_dns_name`] for a name a
/// certificate cannot carry.
pub fn check_leaf_dns_name(name: &str) -> Result<()> {
    let refuse = |why: &str| -> Result<()> {
        Err(pki_core::Error::Issuance {
            reason: format!("DNS name \"{}\" refused: {why}", name.escape_debug()),
        }
        .into())
    };
    let trimmed = name.trim_end_matches('.');
    if trimmed == "*" {
        return refuse("a bare wildcard would match every host name");
    }
    if let Some(parent) = trimmed.strip_prefix("*.")
        && !parent.contains('.')
    {
        return refuse(&format!(
            "a wildcard directly under the single label \"{}\" would match every host in a top-level domain",
            parent.escape_debug()
        ));
    }
    if trimmed.parse::<IpAddr>().is_ok() || name.trim_matches(['[', ']']).parse::<IpAddr>().is_ok()
    {
        return refuse(
            "it is an IP address, which clients never match against DNS names: request it as an IP address (--ip)",
        );
    }
    if pki_core::text::find_control_or_invisible(name).is_some() {
        return refuse(
            "it contains a control character or an invisible one (a bidi override, a zero-width space)",
        );
    }
    Ok(pki_core::check_dns_name(name)?)
}

/// Why a leaf is (re-)issued.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum LeafReason {
    /// Nothing was issued for this name yet.
    NotYetIssued,
    /// The CA is rotated in this same step.
    IssuerRotated,
    /// Its AKI differs from the current CA's SKI (issued by another CA).
    WrongIssuer {
        /// How lineage was decided.
        lineage: String,
    },
    /// Less than the refresh fraction of its lifetime remains.
    NearExpiry {
        /// Its NotAfter (RFC 3339).
        not_after: String,
    },
    /// The requested names changed since it was issued.
    RequestChanged,
    /// The requested kind (server, client, both) changed since it was issued.
    KindChanged {
        /// The kind of the certificate issued.
        from: LeafKind,
        /// The kind requested now.
        to: LeafKind,
    },
    /// Its NotAfter has passed: servers presenting it are already rejected.
    Expired {
        /// Its NotAfter (RFC 3339).
        not_after: String,
    },
    /// An operator asked for a new certificate now (`pki renew`).
    Renewed,
}

impl std::fmt::Display for LeafReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeafReason::NotYetIssued => f.write_str("first certificate for this name"),
            LeafReason::IssuerRotated => f.write_str("the CA was rotated"),
            LeafReason::WrongIssuer { lineage } => {
                write!(f, "not issued by the current CA: {lineage}")
            }
            LeafReason::NearExpiry { not_after } => {
                write!(
                    f,
                    "the previous certificate has less than the refresh fraction of its lifetime left (it expires {not_after})"
                )
            }
            LeafReason::RequestChanged => f.write_str("requested names changed"),
            LeafReason::KindChanged { from, to } => {
                write!(f, "requested kind changed from {from} to {to}")
            }
            LeafReason::Renewed => f.write_str("renewed on request"),
            LeafReason::Expired { not_after } => write!(f, "expired at {not_after}"),
        }
    }
}

/// A decision to (re-)issue one leaf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafDecision {
    /// The leaf's name.
    pub name: String,
    /// Why.
    pub reason: LeafReason,
}

/// When a leaf becomes due for refresh: NotAfter − fraction × lifetime.
pub fn refresh_at(cert: &Certificate, fraction: f64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(RefreshTimes::new(fraction).of(cert))
        .unwrap_or(cert.not_before())
}

/// Leaves' refresh times for one refresh fraction, in Unix nanoseconds: the
/// per-leaf check of every reconcile. Multiplying a lifetime by the
/// fraction is most of the cost, and a store's leaves nearly always share
/// one lifetime, so the product for the last lifetime seen is kept.
pub(crate) struct RefreshTimes {
    fraction: f64,
    /// A lifetime in seconds, and `fraction` of it in nanoseconds.
    last: std::cell::Cell<Option<(i64, i128)>>,
}

impl RefreshTimes {
    pub(crate) fn new(fraction: f64) -> Self {
        RefreshTimes {
            fraction,
            last: std::cell::Cell::new(None),
        }
    }

    /// When `cert` becomes due for refresh.
    pub(crate) fn of(&self, cert: &Certificate) -> i128 {
        let (not_before, not_after) = cert.validity_unix();
        // A certificate read from a store may be malformed (NotBefore after
        // NotAfter); it is then due at once rather than at an overflowing time.
        let lifetime = not_after.saturating_sub(not_before).max(0);
        let back = match self.last.get() {
            Some((seen, back)) if seen == lifetime => back,
            _ => {
                let back = (Duration::seconds(lifetime) * self.fraction).whole_nanoseconds();
                self.last.set(Some((lifetime, back)));
                back
            }
        };
        i128::from(not_after) * 1_000_000_000 - back
    }
}

/// Decides whether `leaf` must be (re-)issued against `ca` at `now`.
pub fn decide_leaf(
    name: &str,
    leaf: &Leaf,
    ca: &Certificate,
    now: OffsetDateTime,
    fraction: f64,
) -> Option<LeafDecision> {
    LeafCheck::new(ca, now, fraction)
        .decide(&leaf.request, leaf.issued.as_ref())
        .0
        .map(|reason| LeafDecision {
            name: name.to_string(),
            reason,
        })
}

/// The check of a step's leaves against one CA at one time. What every
/// leaf shares (the time in the units a certificate's validity is kept
/// in, the refresh offset of a lifetime) is worked out once per step, so
/// that a leaf with nothing due, which is every leaf on most steps, costs
/// a few comparisons of integers and bytes.
pub(crate) struct LeafCheck<'a> {
    ca: &'a Certificate,
    now_second: i64,
    now_nanos: i128,
    refresh: RefreshTimes,
}

impl<'a> LeafCheck<'a> {
    pub(crate) fn new(ca: &'a Certificate, now: OffsetDateTime, fraction: f64) -> Self {
        LeafCheck {
            ca,
            now_second: now.unix_timestamp(),
            now_nanos: now.unix_timestamp_nanos(),
            refresh: RefreshTimes::new(fraction),
        }
    }

    /// When `cert` becomes due for refresh, in Unix nanoseconds.
    pub(crate) fn refresh_at(&self, cert: &Certificate) -> i128 {
        self.refresh.of(cert)
    }

    /// Why `issued` must be re-issued for `request`, if it must, and the
    /// refresh time of `issued` in Unix nanoseconds (the step's next
    /// wake-up is the earliest of them).
    pub(crate) fn decide(
        &self,
        request: &LeafRequest,
        issued: Option<&IssuedLeaf>,
    ) -> (Option<LeafReason>, Option<i128>) {
        let Some(issued) = issued else {
            return (Some(LeafReason::NotYetIssued), None);
        };
        let cert = &issued.cert;
        let refresh_at = self.refresh.of(cert);
        // The first reason that holds, in the order they are reported.
        let lineage = pki_core::issued_by(cert, self.ca);
        let kind = LeafKind::of(cert);
        let reason = if !lineage.issued_by {
            LeafReason::WrongIssuer {
                lineage: lineage.to_string(),
            }
        } else if !names_match(cert, request) {
            LeafReason::RequestChanged
        } else if let Some(from) = kind.filter(|k| *k != request.kind) {
            LeafReason::KindChanged {
                from,
                to: request.kind,
            }
        } else if kind.is_none() {
            LeafReason::RequestChanged
        } else if self.now_second >= cert.validity_unix().1 {
            // NotAfter is a whole second: `now` is at or after it exactly
            // when its second is.
            LeafReason::Expired {
                not_after: pki_core::datetime::rfc3339(cert.not_after()),
            }
        } else if self.now_nanos >= refresh_at {
            LeafReason::NearExpiry {
                not_after: pki_core::datetime::rfc3339(cert.not_after()),
            }
        } else {
            return (None, Some(refresh_at));
        };
        (Some(reason), Some(refresh_at))
    }
}

fn names_match(cert: &Certificate, request: &LeafRequest) -> bool {
    // Nearly always the names are those issued, in the same order: compare
    // them in place, without allocating, before sorting copies.
    cert.has_names_in_order(&request.dns_names, &request.ip_addresses)
        || names_match_in_any_order(cert, request)
}

fn names_match_in_any_order(cert: &Certificate, request: &LeafRequest) -> bool {
    let mut want: Vec<String> = request
        .dns_names
        .iter()
        .map(|d| d.to_ascii_lowercase())
        .collect();
    let mut have = cert.dns_names();
    want.sort();
    have.sort();
    let mut want_ip = request.ip_addresses.clone();
    let mut have_ip = cert.ip_addresses();
    want_ip.sort();
    have_ip.sort();
    want == have && want_ip == have_ip
}

/// Issues a fresh key and certificate for `request` from `ca`.
///
/// # Errors
///
/// Those of [`issue_leaf_within`].
pub fn issue_leaf<R: CryptoRng + ?Sized>(
    ca: &CertificateAuthority,
    request: &LeafRequest,
    now: OffsetDateTime,
    rng: &mut R,
) -> Result<IssuedLeaf> {
    issue_leaf_within(ca, request, now, None, rng)
}

/// [`issue_leaf`], with the NotAfter also cut at `not_after_limit` (the
/// earliest NotAfter of the certificates above `ca`).
///
/// # Errors
///
/// Those of [`LeafRequest::validate`]; a [`RotateError::Core`] when the key
/// cannot be generated, the certificate's parameters are refused, or the CA
/// cannot issue; [`RotateError::Expired`] when the certificate would already be
/// expired at `now` (its NotAfter cut at `not_after_limit` or the CA's).
pub fn issue_leaf_within<R: CryptoRng + ?Sized>(
    ca: &CertificateAuthority,
    request: &LeafRequest,
    now: OffsetDateTime,
    not_after_limit: Option<OffsetDateTime>,
    rng: &mut R,
) -> Result<IssuedLeaf> {
    request.validate()?;
    let algorithm = ca.key.algorithm();
    let key = PrivateKey::generate(algorithm, rng)?;
    let mut params = CertificateParams::new(
        request.kind.profile(),
        &request.common_name(),
        now,
        request.lifetime,
    )?;
    params.dns_names = request.dns_names.clone();
    params.ip_addresses = request.ip_addresses.clone();
    params.not_after_limit = not_after_limit;
    let cert = ca.issue(&params, &key.public_key()?, rng)?;
    if cert.not_after() <= now {
        return Err(RotateError::Expired {
            what: format!("certificate for {}", request.common_name()),
            at: cert.not_after(),
        });
    }
    Ok(IssuedLeaf { cert, key })
}

mod duration_str {
    use time::Duration;
    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&pki_core::policy::human(*d))
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s: String = serde::Deserialize::deserialize(d)?;
        pki_core::policy::parse_duration(&s).map_err(serde::de::Error::custom)
    }
}
