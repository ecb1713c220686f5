//! Parts of a certificate read straight from its DER, for the checks that
//! run on every certificate verified and would otherwise build the whole
//! decoded tree (most of a certificate's cost in time and memory). The DER
//! was decoded, by `shallow` or by x509-cert, when the certificate was
//! parsed, so these walks find what the tree holds; a caller whose walk
//! finds nothing, or an answer that the tree would qualify, asks the tree.

use super::layout::{Span, tlv};
use super::shallow::RawExtension;

/// The TLV at `at`, with tag `tag`: (content start, end).
fn expect(der: &[u8], at: usize, tag: u8) -> Option<(usize, usize)> {
    let (found, content, end) = tlv(der, at)?;
    (found == tag).then_some((content, end))
}

/// The signatureAlgorithm TLV after the TBSCertificate and the
/// signatureValue BIT STRING's content (its first octet counts the unused
/// bits).
pub(crate) fn outer(der: &[u8], tbs: Span) -> Option<(&[u8], &[u8])> {
    let tbs_end = tbs.range().end;
    let (_, alg_end) = expect(der, tbs_end, 0x30)?;
    let (bits, bits_end) = expect(der, alg_end, 0x03)?;
    Some((der.get(tbs_end..alg_end)?, der.get(bits..bits_end)?))
}

/// The TBSCertificate's version (0 for v1, its DEFAULT) and its signature
/// AlgorithmIdentifier TLV.
pub(crate) fn version_and_signature(der: &[u8], tbs: Span) -> Option<(u8, &[u8])> {
    let (mut at, _) = expect(der, tbs.start(), 0x30)?;
    let mut version = 0;
    if let Some((content, end)) = expect(der, at, 0xa0) {
        let (value, value_end) = expect(der, content, 0x02)?;
        version = match der.get(value..value_end)? {
            [v] => *v,
            _ => return None,
        };
        at = end;
    }
    let (_, serial_end) = expect(der, at, 0x02)?;
    let (_, alg_end) = expect(der, serial_end, 0x30)?;
    Some((version, der.get(serial_end..alg_end)?))
}

/// The extensions, in certificate order: what follows the
/// SubjectPublicKeyInfo is the optional unique identifiers, then the
/// optional `[3]` extensions.
pub(crate) fn extensions(
    der: &[u8],
    spki: Span,
    tbs: Span,
) -> impl Iterator<Item = RawExtension<'_>> {
    let tbs_end = tbs.range().end;
    let mut at = spki.range().end;
    let mut list = None;
    while at < tbs_end {
        let Some((tag, content, end)) = tlv(der, at) else {
            break;
        };
        if tag == 0xa3 {
            list = expect(der, content, 0x30);
            break;
        }
        at = end;
    }
    let (mut at, end) = list.unwrap_or((0, 0));
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let (content, next) = expect(der, at, 0x30)?;
        at = next;
        let (oid, oid_end) = expect(der, content, 0x06)?;
        let mut value_at = oid_end;
        let mut critical = false;
        if let Some((b, b_end)) = expect(der, oid_end, 0x01) {
            critical = der.get(b..b_end)? == [0xff];
            value_at = b_end;
        }
        let (value, value_end) = expect(der, value_at, 0x04)?;
        Some((der.get(oid..oid_end)?, critical, der.get(value..value_end)?))
    })
}

/// Parses `der` and compares what the checks read from the DER with the
/// decoded tree: version, signature algorithms and value, extensions,
/// empty names and the public key. For the fuzz targets and the tests
/// (through `pki_core::fuzzing`).
///
/// # Errors
///
/// A message saying which field the DER reads and the decoded tree disagree on.
/// Input that [`Certificate::from_der`](super::Certificate::from_der) refuses
/// is not an error.
pub fn check_raw_reads(der: &[u8]) -> Result<(), String> {
    use der::Decode;
    let Ok(cert) = super::Certificate::from_der(der) else {
        return Ok(());
    };
    let x = cert.x509();
    let tbs = x.tbs_certificate();
    let differ = |what: &str| Err(format!("{what} differs from the decoded one"));
    if cert.version() != tbs.version() {
        return differ("the version");
    }
    if cert.signature_algorithms_match() != (tbs.signature() == x.signature_algorithm()) {
        return differ("whether the signature algorithms match");
    }
    let Some((algorithm, bits)) = cert.raw_signature() else {
        return differ("the signature");
    };
    let decoded = spki::AlgorithmIdentifierOwned::from_der(algorithm).map_err(|e| e.to_string())?;
    if &decoded != x.signature_algorithm()
        || bits.first() != Some(&x.signature().unused_bits())
        || bits.get(1..) != Some(x.signature().raw_bytes())
    {
        return differ("the signature");
    }
    let ours: Vec<_> = cert.raw_extensions().collect();
    let theirs = super::shallow::decoded_extensions(tbs);
    if ours != theirs {
        return differ("the extension list");
    }
    if cert.subject_is_empty() != tbs.subject().is_empty()
        || cert.issuer_is_empty() != tbs.issuer().is_empty()
    {
        return differ("whether a name is empty");
    }
    if cert.public_key() != tbs.subject_public_key_info() {
        return differ("the public key");
    }
    Ok(())
}
