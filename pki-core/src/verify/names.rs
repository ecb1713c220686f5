//! Names: matching the expected DNS name or IP address against the leaf's
//! subjectAltName (RFC 6125), and nameConstraints (RFC 5280 §4.2.1.10).

use super::ExpectedName;
use super::error::VerifyError;
use crate::cert::Certificate;
use crate::dn::CanonicalName;
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

/// Applies the nameConstraints of `ca` to `cert` (a certificate below it).
/// Self-issued intermediates are exempted by the caller (RFC 5280 §6.1.3(b)).
pub(crate) fn check_name_constraints(
    ca: &Certificate,
    nc: &NameConstraints,
    cert: &Certificate,
) -> Result<(), VerifyError> {
    let permitted = nc.permitted_subtrees.as_deref().unwrap_or_default();
    let excluded = nc.excluded_subtrees.as_deref().unwrap_or_default();
    let violation = |name: String, reason: &'static str| VerifyError::NameConstraintViolation {
        cert: cert.id(),
        ca: ca.id(),
        name,
        reason,
    };

    // The subject DN, when not empty, is a directoryName (§6.1.3(b)).
    let subject = cert.subject();
    let mut names: Vec<GeneralName> = Vec::new();
    if !subject.is_empty() {
        names.push(GeneralName::DirectoryName(subject.clone()));
    }
    names.extend(cert.subject_alt_names().iter().cloned());

    for name in &names {
        let label = display_name(name);
        let kind = kind_of(name);
        let excluded_hit = excluded
            .iter()
            .filter(|s| kind_of(&s.base) == kind)
            .map(|s| intersects(name, s))
            .collect::<Result<Vec<bool>, &'static str>>()
            .map_err(|reason| violation(label.clone(), reason))?;
        if excluded_hit.into_iter().any(|hit| hit) {
            return Err(violation(label, "within an excluded subtree"));
        }
        let same_kind: Vec<&GeneralSubtree> = permitted
            .iter()
            .filter(|s| kind_of(&s.base) == kind)
            .collect();
        if same_kind.is_empty() {
            continue;
        }
        let mut inside = false;
        for s in same_kind {
            if within(name, s).map_err(|reason| violation(label.clone(), reason))? {
                inside = true;
                break;
            }
        }
        if !inside {
            return Err(violation(label, "outside every permitted subtree"));
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dns,
    Ip,
    Directory,
    Other(u8),
}

fn kind_of(name: &GeneralName) -> Kind {
    match name {
        GeneralName::DnsName(_) => Kind::Dns,
        GeneralName::IpAddress(_) => Kind::Ip,
        GeneralName::DirectoryName(_) => Kind::Directory,
        GeneralName::OtherName(_) => Kind::Other(0),
        GeneralName::Rfc822Name(_) => Kind::Other(1),
        GeneralName::EdiPartyName(_) => Kind::Other(5),
        GeneralName::UniformResourceIdentifier(_) => Kind::Other(6),
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

/// Whether `name` lies inside `subtree` (same kind assumed).
fn within(name: &GeneralName, subtree: &GeneralSubtree) -> Result<bool, &'static str> {
    match (name, &subtree.base) {
        (GeneralName::DnsName(n), GeneralName::DnsName(c)) => {
            Ok(dns_within(n.as_ref(), c.as_ref()))
        }
        (GeneralName::IpAddress(n), GeneralName::IpAddress(c)) => {
            ip_within(n.as_bytes(), c.as_bytes())
        }
        (GeneralName::DirectoryName(n), GeneralName::DirectoryName(c)) => Ok(dn_within(n, c)),
        _ => Err("name type not supported in name constraints"),
    }
}

/// Whether some name matched by `name` lies inside `subtree`: the same as
/// [`within`] except for a wildcard DNS name, which stands for many names.
fn intersects(name: &GeneralName, subtree: &GeneralSubtree) -> Result<bool, &'static str> {
    if let (GeneralName::DnsName(n), GeneralName::DnsName(c)) = (name, &subtree.base) {
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
    within(name, subtree)
}

/// RFC 5280 §4.2.1.10 for dNSName: a constraint `example.com` covers that
/// host and every name below it; `.example.com` covers only names below;
/// an empty constraint covers everything.
fn dns_within(name: &str, constraint: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    let c = constraint
        .strip_suffix('.')
        .unwrap_or(constraint)
        .to_ascii_lowercase();
    if c.is_empty() {
        return true;
    }
    if let Some(domain) = c.strip_prefix('.') {
        return name.len() > domain.len() + 1 && name.ends_with(&c);
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
        assert!(!dns_within("example.com", ".example.com"));
        assert!(dns_within("a.example.com", ".example.com"));
        assert!(dns_within("anything", ""));
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
