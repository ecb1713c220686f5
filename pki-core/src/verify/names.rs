//! Names: matching the expected DNS name or IP address against the leaf's
//! subjectAltName (RFC 6125), and nameConstraints (RFC 5280 §4.2.1.10).

use super::ExpectedName;
use super::budget::Remaining;
use crate::cert::Certificate;
use crate::cert::ObjectIdentifier;
use crate::dn::CanonicalName;
use crate::error::VerifyError;
use der::Tagged;
use std::net::IpAddr;
use x509_cert::ext::pkix::constraints::name::{GeneralSubtree, NameConstraints};
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::name::Name;

/// Checks that the leaf's subjectAltName holds `expected`.
///
/// DNS: ASCII case-insensitive; one trailing dot is ignored; a presented
/// name may have a wildcard only as its whole left-most label (`*.a.b`,
/// never `f*.a.b` or `a.*.b`), with at least two labels after it, and it
/// matches exactly one non-empty label. An expected DNS name that is an IP
/// address literal is matched against the IP addresses instead, so a
/// wildcard never matches an address. IP: exact octets. The commonName is
/// never consulted.
pub(crate) fn check_expected_name(
    leaf: &Certificate,
    expected: &ExpectedName,
) -> Result<(), VerifyError> {
    let matched = match expected {
        ExpectedName::Ip(ip) => ip_matches(leaf, *ip),
        ExpectedName::Dns(name) => {
            if let Ok(ip) = name.parse::<IpAddr>() {
                ip_matches(leaf, ip)
            } else {
                let reference = reference_dns_name(name)
                    .ok_or_else(|| VerifyError::InvalidReferenceName { name: name.clone() })?;
                leaf.subject_alt_names().iter().any(|n| match n {
                    GeneralName::DnsName(p) => dns_matches(p.as_ref(), &reference),
                    _ => false,
                })
            }
        }
    };
    if matched {
        return Ok(());
    }
    let mut presented: Vec<String> = leaf.dns_names();
    presented.extend(leaf.ip_addresses().iter().map(IpAddr::to_string));
    Err(VerifyError::NameMismatch {
        expected: expected.to_string(),
        presented,
    })
}

fn ip_matches(leaf: &Certificate, ip: IpAddr) -> bool {
    let want: Vec<u8> = match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    };
    leaf.subject_alt_names().iter().any(|n| match n {
        GeneralName::IpAddress(o) => o.as_bytes() == want.as_slice(),
        _ => false,
    })
}

/// Lower-cased reference name without its trailing dot, if it is a valid
/// host name (LDH labels, underscores tolerated, no wildcard).
fn reference_dns_name(name: &str) -> Option<String> {
    let name = name.strip_suffix('.').unwrap_or(name);
    (name.len() <= 253 && name.split('.').all(valid_label)).then(|| name.to_ascii_lowercase())
}

fn valid_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 63
        && !label.starts_with('-')
        && !label.ends_with('-')
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether presented SAN `presented` matches the normalised `reference`.
pub(crate) fn dns_matches(presented: &str, reference: &str) -> bool {
    let presented = presented.strip_suffix('.').unwrap_or(presented);
    let presented = presented.to_ascii_lowercase();
    if let Some(rest) = presented.strip_prefix("*.") {
        // The wildcard must be the whole label, followed by at least two
        // valid labels; it stands for exactly one label of the reference.
        if rest.split('.').count() < 2 || !rest.split('.').all(valid_label) {
            return false;
        }
        return match reference.split_once('.') {
            Some((first, tail)) => valid_label(first) && tail == rest,
            None => false,
        };
    }
    presented.split('.').all(valid_label) && presented == reference
}

/// Whether `name` is a well-formed presented dNSName: host name labels
/// (letters, digits, hyphens not at either end, underscores), the
/// left-most label possibly a whole-label wildcard, one trailing dot
/// tolerated. `.example.com`, `a..b` and `f*.example.com` are not.
pub(crate) fn valid_presented_dns(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    let host = name.strip_prefix("*.").unwrap_or(name);
    name.len() <= 253 && host.split('.').all(valid_label)
}

/// Whether `address` is a Mailbox (RFC 5321 §4.1.2, as RFC 5280 §4.2.1.6
/// asks of an rfc822Name): a dot-string or quoted-string local part, `@`,
/// and a host name. `invalid@address@example.com` is not (its local part
/// holds an unquoted `@`); address literals (`user@[192.0.2.1]`) are not
/// accepted either.
pub(crate) fn valid_mailbox(address: &str) -> bool {
    let Some((local, domain)) = address.rsplit_once('@') else {
        return false;
    };
    valid_local_part(local) && !domain.ends_with('.') && reference_dns_name(domain).is_some()
}

fn valid_local_part(local: &str) -> bool {
    if let Some(quoted) = local
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
    {
        // quoted-string: printable ASCII, `"` and `\` only escaped.
        let mut bytes = quoted.bytes();
        while let Some(b) = bytes.next() {
            match b {
                b'\\' => {
                    if !bytes.next().is_some_and(|c| (32..=126).contains(&c)) {
                        return false;
                    }
                }
                b'"' => return false,
                32..=126 => {}
                _ => return false,
            }
        }
        return true;
    }
    // Dot-string: atoms of atext joined by single dots.
    let atext = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~".contains(&b);
    local
        .split('.')
        .all(|atom| !atom.is_empty() && atom.bytes().all(atext))
}

/// Whether `constraint` is a well-formed dNSName constraint (RFC 5280
/// §4.2.1.10): a host name, to which zero or more labels may be added on
/// the left, or empty (every name). A leading period (`.example.com`) is
/// the syntax of rfc822Name and URI constraints, not of dNSName ones, and
/// a wildcard has no meaning in a constraint: both are refused, as the
/// x509-limbo cases `rfc5280::nc::invalid-dnsname-leading-period` and
/// `invalid-dnsname-wildcard` expect.
pub(crate) fn valid_dns_constraint(constraint: &str) -> bool {
    constraint.is_empty() || reference_dns_name(constraint).is_some()
}

/// A name of a certificate that name constraints apply to.
enum Subject<'a> {
    /// A subjectAltName entry.
    Alt(&'a GeneralName),
    /// The subject DN, a directoryName (§6.1.3(b)).
    Dn(&'a Name),
    /// An emailAddress attribute of the subject DN, an rfc822Name.
    Email(String),
}

impl Subject<'_> {
    fn kind(&self) -> Kind {
        match self {
            Subject::Alt(n) => kind_of(n),
            Subject::Dn(_) => Kind::Directory,
            Subject::Email(_) => Kind::Rfc822,
        }
    }

    fn label(&self) -> String {
        match self {
            Subject::Alt(n) => display_name(n),
            Subject::Dn(n) => format!("DirName:{n}"),
            Subject::Email(e) => format!("email:{e} (subject emailAddress)"),
        }
    }
}

/// emailAddress (PKCS #9), the legacy place of an e-mail address in a DN.
const EMAIL_ADDRESS: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.1");

/// The first name that is not well formed, and why. Such a name cannot
/// be shown to lie inside or outside a subtree: `.example.com` ends with
/// `example.com` although it names no host. So under any constraint, every
/// dNSName and rfc822Name must be well formed, whatever the kinds
/// constrained (as Go and rustls-webpki do).
fn first_malformed<'n, 'a>(names: &'n [Subject<'a>]) -> Option<(&'n Subject<'a>, &'static str)> {
    names.iter().find_map(|name| match name {
        Subject::Alt(GeneralName::DnsName(d)) if !valid_presented_dns(d.as_str()) => {
            Some((name, "malformed dNSName"))
        }
        Subject::Alt(GeneralName::Rfc822Name(e)) if !valid_mailbox(e.as_str()) => {
            Some((name, "malformed rfc822Name"))
        }
        _ => None,
    })
}

/// The subtrees of `trees` whose base is a name of `kind`.
fn by_kind(trees: &[GeneralSubtree], kind: Kind) -> Vec<&GeneralName> {
    trees
        .iter()
        .map(|t| &t.base)
        .filter(|b| kind_of(b) == kind)
        .collect()
}

/// Applies the nameConstraints of `ca` to `cert` (a certificate below it).
/// Self-issued intermediates are exempted by the caller (RFC 5280 §6.1.3(b)).
///
/// The names constrained are the subjectAltName entries, the subject DN
/// (as a directoryName, when not empty) and every emailAddress attribute of
/// the subject DN (as an rfc822Name). RFC 5280 §4.2.1.10 requires the last
/// only when the certificate has no subjectAltName; like OpenSSL, we
/// always apply it, since otherwise adding a subjectAltName of another type
/// would let a DN e-mail address escape an rfc822Name constraint.
///
/// Every comparison of a name with a subtree is counted in `remaining`:
/// a CA with thousands of subtrees over a certificate with thousands of
/// names ends with [`VerifyError::BudgetExceeded`] instead of running for
/// minutes.
pub(crate) fn check_name_constraints(
    ca: &Certificate,
    nc: &NameConstraints,
    cert: &Certificate,
    remaining: &mut Remaining,
) -> Result<(), VerifyError> {
    let permitted = nc.permitted_subtrees.as_deref().unwrap_or_default();
    let excluded = nc.excluded_subtrees.as_deref().unwrap_or_default();
    let violation =
        |name: &Subject<'_>, reason: &'static str| VerifyError::NameConstraintViolation {
            cert: cert.id(),
            ca: ca.id(),
            name: name.label(),
            reason,
        };

    let subject = cert.subject();
    let mut names: Vec<Subject<'_>> = Vec::new();
    if !subject.is_empty() {
        names.push(Subject::Dn(subject));
    }
    for atv in subject.iter().filter(|atv| atv.oid == EMAIL_ADDRESS) {
        match crate::dn::decode_string(atv.value.tag(), atv.value.value()) {
            Some(address) => names.push(Subject::Email(address)),
            None => {
                return Err(violation(
                    &Subject::Email(hex::encode(atv.value.value())),
                    "subject emailAddress is not a string",
                ));
            }
        }
    }
    names.extend(cert.subject_alt_names().iter().map(Subject::Alt));

    if let Some((name, reason)) = first_malformed(&names) {
        return Err(violation(name, reason));
    }

    // Subtrees by kind, sorted out once per kind met.
    let mut kinds: Vec<(Kind, Vec<&GeneralName>, Vec<&GeneralName>)> = Vec::new();

    for name in &names {
        let kind = name.kind();
        let index = match kinds.iter().position(|(k, _, _)| *k == kind) {
            Some(i) => i,
            None => {
                kinds.push((kind, by_kind(excluded, kind), by_kind(permitted, kind)));
                kinds.len() - 1
            }
        };
        let (_, excluded_here, permitted_here) = &kinds[index];
        for base in excluded_here {
            remaining.spend_name_constraint_check()?;
            if intersects(name, base).map_err(|reason| violation(name, reason))? {
                return Err(violation(name, "within an excluded subtree"));
            }
        }
        if permitted_here.is_empty() {
            continue;
        }
        let mut inside = false;
        for base in permitted_here {
            remaining.spend_name_constraint_check()?;
            if within(name, base).map_err(|reason| violation(name, reason))? {
                inside = true;
                break;
            }
        }
        if !inside {
            return Err(violation(name, "outside every permitted subtree"));
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dns,
    Ip,
    Directory,
    Rfc822,
    Uri,
    Other(u8),
}

fn kind_of(name: &GeneralName) -> Kind {
    match name {
        GeneralName::DnsName(_) => Kind::Dns,
        GeneralName::IpAddress(_) => Kind::Ip,
        GeneralName::DirectoryName(_) => Kind::Directory,
        GeneralName::Rfc822Name(_) => Kind::Rfc822,
        GeneralName::UniformResourceIdentifier(_) => Kind::Uri,
        GeneralName::OtherName(_) => Kind::Other(0),
        GeneralName::EdiPartyName(_) => Kind::Other(5),
        GeneralName::RegisteredId(_) => Kind::Other(8),
    }
}

fn display_name(name: &GeneralName) -> String {
    match name {
        GeneralName::DnsName(d) => format!("DNS:{}", d.as_str()),
        GeneralName::IpAddress(o) => match o.as_bytes().len() {
            4 | 16 => format!("IP:{}", ip_to_string(o.as_bytes())),
            _ => format!("IP:{}", hex::encode(o.as_bytes())),
        },
        GeneralName::DirectoryName(n) => format!("DirName:{n}"),
        GeneralName::Rfc822Name(e) => format!("email:{}", e.as_str()),
        GeneralName::UniformResourceIdentifier(u) => format!("URI:{}", u.as_str()),
        GeneralName::OtherName(_) => "otherName".to_owned(),
        GeneralName::EdiPartyName(_) => "ediPartyName".to_owned(),
        GeneralName::RegisteredId(oid) => format!("RID:{oid}"),
    }
}

fn ip_to_string(octets: &[u8]) -> String {
    if let Ok(v4) = <[u8; 4]>::try_from(octets) {
        IpAddr::from(v4).to_string()
    } else if let Ok(v6) = <[u8; 16]>::try_from(octets) {
        IpAddr::from(v6).to_string()
    } else {
        hex::encode(octets)
    }
}

/// Whether `name` lies inside the subtree of `base` (same kind assumed).
fn within(name: &Subject<'_>, base: &GeneralName) -> Result<bool, &'static str> {
    match (name, base) {
        (Subject::Alt(GeneralName::DnsName(n)), GeneralName::DnsName(c)) => {
            Ok(dns_within(n.as_ref(), c.as_ref()))
        }
        (Subject::Alt(GeneralName::IpAddress(n)), GeneralName::IpAddress(c)) => {
            ip_within(n.as_bytes(), c.as_bytes())
        }
        (Subject::Dn(n), GeneralName::DirectoryName(c)) => Ok(dn_within(n, c)),
        (Subject::Alt(GeneralName::DirectoryName(n)), GeneralName::DirectoryName(c)) => {
            Ok(dn_within(n, c))
        }
        (Subject::Alt(GeneralName::Rfc822Name(n)), GeneralName::Rfc822Name(c)) => {
            email_within(n.as_str(), c.as_str())
        }
        (Subject::Email(n), GeneralName::Rfc822Name(c)) => email_within(n, c.as_str()),
        (
            Subject::Alt(GeneralName::UniformResourceIdentifier(n)),
            GeneralName::UniformResourceIdentifier(c),
        ) => uri_within(n.as_str(), c.as_str()),
        _ => Err("name type not supported in name constraints"),
    }
}

/// Whether some name matched by `name` lies inside the subtree of `base`:
/// the same as [`within`] except for a wildcard DNS name, which stands for
/// many names.
fn intersects(name: &Subject<'_>, base: &GeneralName) -> Result<bool, &'static str> {
    if let (Subject::Alt(GeneralName::DnsName(n)), GeneralName::DnsName(c)) = (name, base) {
        let n = n.as_str().to_ascii_lowercase();
        let c = c.as_str().to_ascii_lowercase();
        if let Some(parent) = n.strip_prefix("*.") {
            // `*.P` covers every `L.P`. It meets the subtree of `C` when P is
            // inside it, or when `C` itself is one label below P.
            if dns_within(&n, &c) {
                return Ok(true);
            }
            let host = c.strip_prefix('.').map_or(c.as_str(), |_| "");
            return Ok(host
                .split_once('.')
                .is_some_and(|(label, rest)| !label.is_empty() && rest == parent));
        }
    }
    within(name, base)
}

/// RFC 5280 §4.2.1.10 for rfc822Name: a constraint is a mailbox
/// (`user@example.com`, local part exact, host case-insensitive), a host
/// (`example.com`: every address at that host, not below it) or a domain
/// (`.example.com`: every address at a host below it); an empty constraint
/// covers every address.
fn email_within(address: &str, constraint: &str) -> Result<bool, &'static str> {
    let (local, host) = address
        .rsplit_once('@')
        .filter(|(l, h)| !l.is_empty() && !h.is_empty())
        .ok_or("malformed rfc822Name (no local part and host)")?;
    if let Some((c_local, c_host)) = constraint.rsplit_once('@') {
        return Ok(local == c_local && host.eq_ignore_ascii_case(c_host));
    }
    Ok(host_within(host, constraint))
}

/// RFC 5280 §4.2.1.10 for uniformResourceIdentifier: the constraint applies
/// to the host of the URI and is a host (`host.example.com`, exactly) or a
/// domain (`.example.com`, any host below it). A URI without a host name
/// (a URN, or an IP address literal) cannot be shown to be inside or
/// outside a subtree, so it fails closed.
fn uri_within(uri: &str, constraint: &str) -> Result<bool, &'static str> {
    let parsed: http::Uri = uri.parse().map_err(|_| "malformed URI")?;
    let host = parsed.host().ok_or("URI without a host name")?;
    if host.starts_with('[') || host.parse::<IpAddr>().is_ok() {
        return Err("URI whose host is an IP address");
    }
    Ok(host_within(host, constraint))
}

/// A DNS name or host as names compare: lowercase, one trailing dot dropped.
fn comparable(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// A host against a host (`a.example`, exact) or a domain (`.example`,
/// strictly below) constraint, case-insensitively, one trailing dot ignored.
fn host_within(host: &str, constraint: &str) -> bool {
    let (host, c) = (comparable(host), comparable(constraint));
    if c.is_empty() {
        return true;
    }
    match c.strip_prefix('.') {
        Some(domain) => host.len() > domain.len() + 1 && host.ends_with(&c),
        None => host == c,
    }
}

/// RFC 5280 §4.2.1.10 for dNSName: a constraint `example.com` covers that
/// host and every name below it; an empty constraint covers everything.
/// Constraints with a leading period never get here: the CA that carries
/// one is refused as malformed ([`valid_dns_constraint`]).
fn dns_within(name: &str, constraint: &str) -> bool {
    let (name, c) = (comparable(name), comparable(constraint));
    if c.is_empty() {
        return true;
    }
    name == c || (name.len() > c.len() && name.ends_with(&format!(".{c}")))
}

/// iPAddress constraints are an address followed by a mask of the same
/// length (8 octets for IPv4, 32 for IPv6).
fn ip_within(ip: &[u8], constraint: &[u8]) -> Result<bool, &'static str> {
    if constraint.len() != 8 && constraint.len() != 32 {
        return Err("malformed iPAddress constraint");
    }
    if ip.len() != 4 && ip.len() != 16 {
        return Err("malformed iPAddress name");
    }
    let (net, mask) = constraint.split_at(constraint.len() / 2);
    if ip.len() != net.len() {
        return Ok(false);
    }
    Ok(ip
        .iter()
        .zip(net)
        .zip(mask)
        .all(|((a, n), m)| a & m == n & m))
}

/// A directoryName is inside a subtree when the constraint's RDNs are a
/// prefix of the name's RDNs, compared as RFC 5280 §7.1 says.
fn dn_within(name: &Name, constraint: &Name) -> bool {
    CanonicalName::of(name).starts_with(&CanonicalName::of(constraint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_matches_one_left_most_label_only() {
        assert!(dns_matches("*.example.com", "www.example.com"));
        assert!(dns_matches("*.EXAMPLE.com", "www.example.com"));
        assert!(!dns_matches("*.example.com", "example.com"));
        assert!(!dns_matches("*.example.com", "a.b.example.com"));
        assert!(!dns_matches("w*.example.com", "www.example.com"));
        assert!(!dns_matches("www.*.com", "www.example.com"));
        assert!(!dns_matches("*.com", "example.com"));
        assert!(dns_matches("example.com.", "example.com"));
    }

    #[test]
    fn dns_constraints_follow_rfc5280() {
        assert!(dns_within("example.com", "example.com"));
        assert!(dns_within("a.example.com", "example.com"));
        assert!(!dns_within("badexample.com", "example.com"));
        assert!(dns_within("anything", ""));
        assert!(valid_dns_constraint("example.com"));
        assert!(valid_dns_constraint(""));
        assert!(!valid_dns_constraint(".example.com"));
        assert!(!valid_dns_constraint("*.example.com"));
        assert!(!valid_dns_constraint("a..example.com"));
    }

    #[test]
    fn presented_dns_names_must_be_host_names_or_whole_label_wildcards() {
        for good in [
            "example.com",
            "a-b.example.com",
            "_srv.example.com",
            "*.example.com",
            "x.",
        ] {
            assert!(valid_presented_dns(good), "{good}");
        }
        for bad in [
            ".example.com",
            "a..b",
            "",
            "f*.example.com",
            "-a.example",
            "a b.example",
        ] {
            assert!(!valid_presented_dns(bad), "{bad}");
        }
    }

    #[test]
    fn mailboxes_have_one_unquoted_at_sign_and_a_host() {
        for good in [
            "ops@example.com",
            "first.last+tag@mail.example",
            "\"a@b\"@example.com",
        ] {
            assert!(valid_mailbox(good), "{good}");
        }
        for bad in [
            "invalid@address@example.com",
            "no-at-sign",
            "@example.com",
            "ops@",
            "a..b@example.com",
            ".a@example.com",
            "ops@.example.com",
            "ops@[192.0.2.1]",
            "\"unterminated@example.com",
        ] {
            assert!(!valid_mailbox(bad), "{bad}");
        }
    }

    #[test]
    fn rfc822_constraints_are_mailboxes_hosts_or_domains() {
        assert_eq!(email_within("ops@example.com", "ops@EXAMPLE.com"), Ok(true));
        assert_eq!(
            email_within("Ops@example.com", "ops@example.com"),
            Ok(false)
        );
        assert_eq!(email_within("ops@example.com", "example.com"), Ok(true));
        assert_eq!(
            email_within("ops@mail.example.com", "example.com"),
            Ok(false)
        );
        assert_eq!(
            email_within("ops@mail.example.com", ".example.com"),
            Ok(true)
        );
        assert_eq!(email_within("ops@example.com", ".example.com"), Ok(false));
        assert_eq!(
            email_within("ops@badexample.com", ".example.com"),
            Ok(false)
        );
        assert_eq!(email_within("\"a@b\"@example.com", "example.com"), Ok(true));
        assert_eq!(email_within("anyone@anywhere", ""), Ok(true));
        assert!(email_within("no-at-sign", "example.com").is_err());
        assert!(email_within("@example.com", "example.com").is_err());
    }

    #[test]
    fn uri_constraints_match_the_host() {
        assert_eq!(
            uri_within("https://api.example.com/v1", "api.example.com"),
            Ok(true)
        );
        assert_eq!(
            uri_within("https://user@API.example.com:8443/", "api.example.com"),
            Ok(true)
        );
        assert_eq!(
            uri_within("https://a.api.example.com/", "api.example.com"),
            Ok(false)
        );
        assert_eq!(
            uri_within("https://a.example.com/", ".example.com"),
            Ok(true)
        );
        assert_eq!(
            uri_within("https://example.com/", ".example.com"),
            Ok(false)
        );
        assert_eq!(
            uri_within("spiffe://cluster.local/ns/a", ".local"),
            Ok(true)
        );
        assert!(
            uri_within(
                "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66",
                "example.com"
            )
            .is_err()
        );
        assert!(uri_within("https://10.0.0.1/", "example.com").is_err());
        assert!(uri_within("https://[::1]/", "example.com").is_err());
    }

    #[test]
    fn ip_constraints_apply_the_mask() {
        let c = [10, 0, 0, 0, 255, 0, 0, 0];
        assert_eq!(ip_within(&[10, 1, 2, 3], &c), Ok(true));
        assert_eq!(ip_within(&[11, 1, 2, 3], &c), Ok(false));
        assert_eq!(ip_within(&[0u8; 16], &c), Ok(false));
        assert!(ip_within(&[10, 1, 2, 3], &c[..5]).is_err());
    }
}
