//! Lint: what breaks path builders in bundles and chains, found before
//! they ship.
//!
//! [`lint`] looks at certificates as they were given, grouped in
//! [`Source`]s (one per file), at a time passed in, and returns
//! [`Finding`]s. Each finding names a certificate by its source and its
//! position there, `SOURCE#N` (N counts the source's certificates from 1),
//! which stays the same as long as the files do.
//!
//! A source whose certificates are all CAs is a **bundle**: each of them is
//! a trust anchor. A source holding an end-entity certificate is a
//! **chain**: its self-signed certificates, if any, are its anchors.
//!
//! Issuers are found among everything given: a certificate issues another
//! when its Subject names the other's Issuer (RFC 5280 §7.1 comparison) and
//! its key verifies the other's signature (or, when the signature cannot
//! be checked, its SKI equals the other's AKI). Checks that need an issuer
//! (`leaf-outlives-issuer`, `pathlen-violation`, `name-string-type`) see
//! only the issuers given: lint a chain together with its bundle for the
//! whole picture.

mod names;

use crate::Certificate;
use crate::dn::CanonicalName;
use std::collections::{HashMap, HashSet};
use time::OffsetDateTime;

/// How many certificates one pathLenConstraint walk may visit: enough for
/// any real bundle (a path rarely has more than 4 certificates), and a
/// bound on inputs built so that cross-signed CAs form many paths.
const PATH_WALK_BUDGET: usize = 100_000;

/// The certificates of one input (a file), in the order they appear.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// How findings name the source (a file name as given).
    pub name: &'a str,
    /// Its certificates, in order.
    pub certs: &'a [Certificate],
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Some verifier rejects a path through the certificate, now or at a
    /// rotation: do not ship it.
    Error,
    /// Works, but is a mistake or a hazard worth fixing.
    Warning,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// What a finding is about; each code has one severity ([`Code::severity`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Code {
    /// The authorityKeyIdentifier names the issuer's name and serial number.
    AkiIssuerSerial,
    /// Two different certificates of one issuer share a serial number.
    SerialReused,
    /// Two CA certificates on one key (a cross-signed pair) differ in
    /// Subject or SubjectKeyIdentifier.
    CrossSignMismatch,
    /// A CA certificate without a SubjectKeyIdentifier.
    MissingSki,
    /// A trust anchor past its NotAfter.
    AnchorExpired,
    /// A trust anchor before its NotBefore.
    AnchorNotYetValid,
    /// An end-entity certificate whose NotAfter is after its issuer's.
    LeafOutlivesIssuer,
    /// More CA certificates below a CA than its pathLenConstraint allows.
    PathlenViolation,
    /// An Issuer and the issuer's Subject (or the Subjects of a
    /// cross-signed pair) differ only in the string types of their values.
    NameStringType,
    /// The same certificate given twice.
    DuplicateCert,
}

impl Code {
    /// The code as printed: `aki-issuer-serial`, `serial-reused`…
    pub fn as_str(self) -> &'static str {
        match self {
            Code::AkiIssuerSerial => "aki-issuer-serial",
            Code::SerialReused => "serial-reused",
            Code::CrossSignMismatch => "cross-sign-mismatch",
            Code::MissingSki => "missing-ski",
            Code::AnchorExpired => "anchor-expired",
            Code::AnchorNotYetValid => "anchor-not-yet-valid",
            Code::LeafOutlivesIssuer => "leaf-outlives-issuer",
            Code::PathlenViolation => "pathlen-violation",
            Code::NameStringType => "name-string-type",
            Code::DuplicateCert => "duplicate-cert",
        }
    }

    /// The severity of every finding of this code.
    pub fn severity(self) -> Severity {
        match self {
            // OpenSSL matches an AKI's issuer and serial against the issuer
            // certificate (X509_check_akid): a cross-signed or renewed
            // issuer has another serial, so the bridges a rotation relies
            // on are rejected.
            Code::AkiIssuerSerial => Severity::Error,
            // NSS refuses a second certificate with the same issuer and
            // serial (SEC_ERROR_REUSED_ISSUER_AND_SERIAL), and revocation
            // by serial would hit both.
            Code::SerialReused => Severity::Error,
            // The children of one certificate of the pair name its Subject
            // and SKI: the other cannot stand in for it in their paths.
            Code::CrossSignMismatch => Severity::Error,
            // RFC 5280 §4.2.1.2 requires it of CAs; without it, builders
            // cannot tell apart CAs that share a Subject, as rotated CAs do.
            Code::MissingSki => Severity::Error,
            // OpenSSL before 1.1.0 picks an expired anchor over a valid one
            // of the same name (the DST Root CA X3 outage), and Go and
            // OpenSSL reject a path ending at one.
            Code::AnchorExpired => Severity::Error,
            // Harmless until it becomes valid: publishing the next CA's
            // anchor ahead of its use is how trust is staged.
            Code::AnchorNotYetValid => Severity::Warning,
            // The chain verifies until the issuer ends, but renewal timed
            // by the leaf's NotAfter comes too late; and an issuer
            // certificate not given (a cross-sign) may outlive it.
            Code::LeafOutlivesIssuer => Severity::Warning,
            // Every verifier rejects the path.
            Code::PathlenViolation => Severity::Error,
            // Verifiers that compare names byte for byte (mbedTLS, some
            // embedded and older stacks) find no issuer.
            Code::NameStringType => Severity::Error,
            // Verifiers ignore the copy; it only bloats the bundle.
            Code::DuplicateCert => Severity::Warning,
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// What was found.
    pub code: Code,
    /// How bad it is (the code's).
    pub severity: Severity,
    /// The certificate it is about: `SOURCE#N`.
    pub cert: String,
    /// The certificate's human id (`<first 16 hex of SKI>-<serial>`).
    pub id: String,
    /// What is wrong, naming the other certificates involved.
    pub detail: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {}: {}",
            self.severity, self.code, self.cert, self.detail
        )
    }
}

/// Whether any finding is an error.
pub fn has_errors(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.severity == Severity::Error)
}

/// One distinct certificate of the input.
struct Entry<'a> {
    cert: &'a Certificate,
    /// `SOURCE#N` of its first occurrence.
    label: String,
    /// `SOURCE#N` of its first occurrence as an anchor, if any.
    anchor: Option<String>,
}

/// Lints `sources` at `at`: findings in input order (by the certificate
/// they are about, then by code).
pub fn lint(sources: &[Source<'_>], at: OffsetDateTime) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut entries: Vec<Entry<'_>> = Vec::new();
    let mut seen: HashMap<&[u8], usize> = HashMap::new();
    for source in sources {
        let bundle = source.certs.iter().all(Certificate::is_ca);
        for (n, cert) in source.certs.iter().enumerate() {
            let label = format!("{}#{}", source.name, n + 1);
            let anchor = bundle || crate::is_self_signed(cert);
            match seen.get(cert.der()) {
                Some(&first) => {
                    let entry = &mut entries[first];
                    findings.push(finding(
                        Code::DuplicateCert,
                        &label,
                        cert,
                        format!("the same certificate as {}", entry.label),
                    ));
                    if anchor && entry.anchor.is_none() {
                        entry.anchor = Some(label);
                    }
                }
                None => {
                    seen.insert(cert.der(), entries.len());
                    entries.push(Entry {
                        cert,
                        anchor: anchor.then(|| label.clone()),
                        label,
                    });
                }
            }
        }
    }
    let graph = Graph::of(&entries);
    for (i, e) in entries.iter().enumerate() {
        check_alone(e, at, &mut findings);
        check_leaf_lifetime(&entries, &graph, i, &mut findings);
        check_issuer_names(&entries, &graph, i, &mut findings);
    }
    check_serials(&entries, &mut findings);
    check_same_key(&entries, &mut findings);
    check_path_lengths(&entries, &graph, &mut findings);
    // Input order: the certificate's position among everything given,
    // then the code.
    let order: HashMap<String, usize> = sources
        .iter()
        .flat_map(|s| (1..=s.certs.len()).map(move |n| format!("{}#{n}", s.name)))
        .enumerate()
        .map(|(i, label)| (label, i))
        .collect();
    findings.sort_by_key(|f| (order.get(&f.cert).copied(), f.code));
    findings
}

fn finding(code: Code, label: &str, cert: &Certificate, detail: String) -> Finding {
    Finding {
        code,
        severity: code.severity(),
        cert: label.to_string(),
        id: cert.id(),
        detail,
    }
}

/// Who issued whom among the entries.
struct Graph {
    /// `issuers[i]`: the entries that issued entry i (those on its own key
    /// excluded).
    issuers: Vec<Vec<usize>>,
    /// `children[i]`: the entries entry i issued (the same exclusion).
    children: Vec<Vec<usize>>,
}

impl Graph {
    fn of(entries: &[Entry<'_>]) -> Self {
        let n = entries.len();
        let mut issuers = vec![Vec::new(); n];
        let mut children = vec![Vec::new(); n];
        for (p, parent) in entries.iter().enumerate() {
            for (c, child) in entries.iter().enumerate() {
                // A certificate on the child's own key is the child's
                // renewal or cross-sign, never its issuer: a path does not
                // use a key twice.
                if p != c
                    && parent.cert.spki_sha256() != child.cert.spki_sha256()
                    && issued(parent.cert, child.cert)
                {
                    issuers[c].push(p);
                    children[p].push(c);
                }
            }
        }
        Graph { issuers, children }
    }
}

/// Whether `parent` issued `child`: names chain and the key verifies the
/// signature, or, when it does not verify (an algorithm pki cannot check),
/// the key identifiers match.
fn issued(parent: &Certificate, child: &Certificate) -> bool {
    if !parent.subject_matches_issuer_of(child) {
        return false;
    }
    let ids_match = matches!((parent.ski(), child.aki()), (Some(s), Some(a)) if s == a);
    ids_match || crate::verify_signature(parent.public_key(), child).is_ok()
}

/// The checks of one certificate on its own.
fn check_alone(e: &Entry<'_>, at: OffsetDateTime, findings: &mut Vec<Finding>) {
    let cert = e.cert;
    if cert
        .authority_key_id()
        .is_some_and(|aki| aki.has_issuer_and_serial)
    {
        findings.push(finding(
            Code::AkiIssuerSerial,
            &e.label,
            cert,
            "its authorityKeyIdentifier names the issuer's name and serial number \
             (authorityCertIssuer, authorityCertSerialNumber): only that one issuer \
             certificate matches, so a cross-signed or renewed issuer cannot stand in"
                .into(),
        ));
    }
    if cert.is_ca() && cert.ski().is_none() {
        findings.push(finding(
            Code::MissingSki,
            &e.label,
            cert,
            format!(
                "CA {} has no subjectKeyIdentifier: path builders cannot tell it from \
                 other CAs named the same (a rotated CA keeps its Subject)",
                cert.subject()
            ),
        ));
    }
    if let Some(label) = &e.anchor {
        let rfc3339 = crate::datetime::rfc3339;
        if at > cert.not_after() {
            findings.push(finding(
                Code::AnchorExpired,
                label,
                cert,
                format!(
                    "trust anchor {} expired at {} (checked at {})",
                    cert.subject(),
                    rfc3339(cert.not_after()),
                    rfc3339(at)
                ),
            ));
        } else if at < cert.not_before() {
            findings.push(finding(
                Code::AnchorNotYetValid,
                label,
                cert,
                format!(
                    "trust anchor {} is valid only from {} (checked at {})",
                    cert.subject(),
                    rfc3339(cert.not_before()),
                    rfc3339(at)
                ),
            ));
        }
    }
}

/// `leaf-outlives-issuer`: an end-entity certificate against the latest
/// NotAfter among its issuers' certificates (any certificate on an
/// issuer's key: a CA and its cross-signs are one issuer).
fn check_leaf_lifetime(
    entries: &[Entry<'_>],
    graph: &Graph,
    i: usize,
    findings: &mut Vec<Finding>,
) {
    let leaf = entries[i].cert;
    if leaf.is_ca() || graph.issuers[i].is_empty() {
        return;
    }
    let keys: HashSet<[u8; 32]> = graph.issuers[i]
        .iter()
        .map(|&p| entries[p].cert.spki_sha256())
        .collect();
    let Some(latest) = entries
        .iter()
        .filter(|e| keys.contains(&e.cert.spki_sha256()))
        .max_by_key(|e| e.cert.not_after())
    else {
        return;
    };
    if leaf.not_after() > latest.cert.not_after() {
        let rfc3339 = crate::datetime::rfc3339;
        findings.push(finding(
            Code::LeafOutlivesIssuer,
            &entries[i].label,
            leaf,
            format!(
                "NotAfter {} is after {}, the latest NotAfter of its issuer ({}): \
                 its chains stop verifying {} early",
                rfc3339(leaf.not_after()),
                rfc3339(latest.cert.not_after()),
                latest.label,
                crate::policy::human(leaf.not_after() - latest.cert.not_after())
            ),
        ));
    }
}

/// `name-string-type` between a certificate's Issuer and its issuers'
/// Subjects, and between its own Subject and Issuer when it is self-issued.
fn check_issuer_names(entries: &[Entry<'_>], graph: &Graph, i: usize, findings: &mut Vec<Finding>) {
    let cert = entries[i].cert;
    let mut others: Vec<(&str, &Certificate)> = graph.issuers[i]
        .iter()
        .map(|&p| (entries[p].label.as_str(), entries[p].cert))
        .collect();
    if cert.is_self_issued() {
        others.insert(0, (entries[i].label.as_str(), cert));
    }
    for (label, issuer) in others {
        if let Some(difference) = names::string_type_difference(cert.issuer(), issuer.subject()) {
            let whose = if std::ptr::eq(issuer, cert) {
                "its own Subject".to_string()
            } else {
                format!("the Subject of its issuer {label}")
            };
            findings.push(finding(
                Code::NameStringType,
                &entries[i].label,
                cert,
                format!("its Issuer and {whose} differ only in string type: {difference}"),
            ));
            return;
        }
    }
}

/// `serial-reused`: two certificates with one issuer name and one serial.
fn check_serials(entries: &[Entry<'_>], findings: &mut Vec<Finding>) {
    let mut by_serial: HashMap<(&[u8], &CanonicalName), usize> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        let key = (e.cert.serial(), e.cert.canonical_issuer());
        match by_serial.get(&key) {
            Some(&first) => findings.push(finding(
                Code::SerialReused,
                &e.label,
                e.cert,
                format!(
                    "serial {} is also the serial of {}, another certificate of the same \
                     issuer {}",
                    e.cert.serial_hex(),
                    entries[first].label,
                    e.cert.issuer()
                ),
            )),
            None => {
                by_serial.insert(key, i);
            }
        }
    }
}

/// `cross-sign-mismatch` and `name-string-type` between CA certificates on
/// one key: each is compared with the first one given.
fn check_same_key(entries: &[Entry<'_>], findings: &mut Vec<Finding>) {
    let mut by_key: HashMap<[u8; 32], usize> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        if !e.cert.is_ca() {
            continue;
        }
        let Some(&first) = by_key.get(&e.cert.spki_sha256()) else {
            by_key.insert(e.cert.spki_sha256(), i);
            continue;
        };
        let (a, b) = (entries[first].cert, e.cert);
        let other = &entries[first].label;
        let hex = |ski: Option<&[u8]>| ski.map(hex::encode).unwrap_or_else(|| "none".into());
        if a.canonical_subject() != b.canonical_subject() {
            findings.push(finding(
                Code::CrossSignMismatch,
                &e.label,
                b,
                format!(
                    "same key as {other} but another Subject ({} here, {} there): \
                     certificates issued under one are not found under the other",
                    b.subject(),
                    a.subject()
                ),
            ));
        } else if a.ski() != b.ski() {
            findings.push(finding(
                Code::CrossSignMismatch,
                &e.label,
                b,
                format!(
                    "same key as {other} but another SubjectKeyIdentifier ({} here, {} \
                     there): certificates issued under one are not found under the other",
                    hex(b.ski()),
                    hex(a.ski())
                ),
            ));
        } else if let Some(difference) = names::string_type_difference(b.subject(), a.subject()) {
            findings.push(finding(
                Code::NameStringType,
                &e.label,
                b,
                format!(
                    "same key as {other}, but the two Subjects differ only in string type: \
                     {difference}"
                ),
            ));
        }
    }
}

/// `pathlen-violation`: below each CA with a pathLenConstraint, every CA
/// certificate deeper than the constraint allows (counted as Go and
/// rustls count: every CA certificate, self-issued ones included).
fn check_path_lengths(entries: &[Entry<'_>], graph: &Graph, findings: &mut Vec<Finding>) {
    for (p, top) in entries.iter().enumerate() {
        let Some(limit) = top.cert.basic_constraints().and_then(|b| b.path_len) else {
            continue;
        };
        if !top.cert.is_ca() {
            continue;
        }
        let mut walk = PathWalk {
            entries,
            graph,
            limit: usize::from(limit),
            keys: vec![top.cert.spki_sha256()],
            budget: PATH_WALK_BUDGET,
            too_deep: Vec::new(),
        };
        walk.below(p, 0);
        for (c, depth) in walk.too_deep {
            findings.push(finding(
                Code::PathlenViolation,
                &entries[c].label,
                entries[c].cert,
                format!(
                    "CA certificate number {depth} below {} ({}), whose pathLenConstraint \
                     is {limit}: verifiers reject every path through it",
                    top.label,
                    top.cert.subject()
                ),
            ));
        }
    }
}

/// A walk down from one constrained CA.
struct PathWalk<'e, 'a> {
    entries: &'e [Entry<'a>],
    graph: &'e Graph,
    limit: usize,
    /// The keys on the path so far: a path never uses a key twice (RFC 4158
    /// loop detection), which ends cycles of cross-signed CAs.
    keys: Vec<[u8; 32]>,
    budget: usize,
    /// The CA certificates found too deep, each once, with their depth.
    too_deep: Vec<(usize, usize)>,
}

impl PathWalk<'_, '_> {
    fn below(&mut self, node: usize, depth: usize) {
        for &child in &self.graph.children[node] {
            let cert = self.entries[child].cert;
            if !cert.is_ca() || self.budget == 0 {
                continue;
            }
            self.budget -= 1;
            let key = cert.spki_sha256();
            if self.keys.contains(&key) {
                continue;
            }
            let depth = depth + 1;
            if depth > self.limit && !self.too_deep.iter().any(|(c, _)| *c == child) {
                self.too_deep.push((child, depth));
            }
            self.keys.push(key);
            self.below(child, depth);
            self.keys.pop();
        }
    }
}

#[cfg(test)]
mod tests;
