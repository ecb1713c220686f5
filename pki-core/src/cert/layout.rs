//! Where the fields pki reads sit in a certificate's DER.
//!
//! Signatures are checked over the TBSCertificate exactly as encoded, pins
//! hash the SubjectPublicKeyInfo exactly as encoded, and the serial rule
//! looks at the INTEGER's content octets: all of these are slices of the
//! original DER, found once when the certificate is parsed. The DER has
//! already been decoded in full by x509-cert at that point, so this only
//! walks headers.

use std::ops::Range;

/// A byte range into a certificate's DER, in half the room of a
/// `Range<usize>` (a certificate is far below 4 GiB: `der` reads no
/// length above 256 MiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    start: u32,
    end: u32,
}

impl Span {
    pub(crate) fn new(range: Range<usize>) -> Option<Span> {
        Some(Span {
            start: u32::try_from(range.start).ok()?,
            end: u32::try_from(range.end).ok()?,
        })
    }

    pub(crate) fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }

    pub(crate) fn start(self) -> usize {
        self.start as usize
    }
}

/// Byte ranges into a certificate's DER.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// The TBSCertificate TLV: the signed bytes.
    pub(crate) tbs: Span,
    /// The content octets of the serialNumber INTEGER.
    pub(crate) serial: Span,
    /// The issuer Name TLV.
    pub(crate) issuer: Span,
    /// The Validity TLV.
    pub(crate) validity: Span,
    /// The subject Name TLV.
    pub(crate) subject: Span,
    /// The SubjectPublicKeyInfo TLV.
    pub(crate) spki: Span,
}

/// One DER header at `at`: (tag byte, start of the content, end of the TLV).
pub(crate) fn tlv(der: &[u8], at: usize) -> Option<(u8, usize, usize)> {
    let input = der.get(at..)?;
    let tag = *input.first()?;
    if tag & 0x1f == 0x1f {
        return None; // multi-byte tags never occur at the places we read
    }
    let first = *input.get(1)?;
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None; // indefinite length, or larger than any certificate
        }
        let mut len = 0usize;
        for i in 0..n {
            len = (len << 8) | usize::from(*input.get(2 + i)?);
        }
        (len, 2 + n)
    };
    let end = at.checked_add(header)?.checked_add(len)?;
    (end <= der.len()).then_some((tag, at + header, end))
}

impl Layout {
    /// Finds the fields of `der`:
    ///
    /// ```text
    /// Certificate ::= SEQUENCE { tbsCertificate TBSCertificate, ... }
    /// TBSCertificate ::= SEQUENCE {
    ///     version [0] EXPLICIT Version DEFAULT v1, serialNumber INTEGER,
    ///     signature AlgorithmIdentifier, issuer Name, validity Validity,
    ///     subject Name, subjectPublicKeyInfo SubjectPublicKeyInfo, ... }
    /// ```
    pub(crate) fn of(der: &[u8]) -> Option<Layout> {
        let (0x30, content, _) = tlv(der, 0)? else {
            return None;
        };
        let (0x30, mut at, tbs_end) = tlv(der, content)? else {
            return None;
        };
        // The next TLV inside the TBSCertificate, which must have tag `tag`:
        // the whole TLV, or only the content octets of an INTEGER.
        let next = |at: &mut usize, tag: u8| -> Option<Span> {
            let (found, body, end) = tlv(der, *at)?;
            if found != tag || end > tbs_end {
                return None;
            }
            let whole = *at..end;
            *at = end;
            Span::new(if tag == 0x02 { body..end } else { whole })
        };
        if der.get(at) == Some(&0xa0) {
            next(&mut at, 0xa0)?;
        }
        let serial = next(&mut at, 0x02)?;
        next(&mut at, 0x30)?; // signature AlgorithmIdentifier
        let issuer = next(&mut at, 0x30)?;
        let validity = next(&mut at, 0x30)?;
        let subject = next(&mut at, 0x30)?;
        let spki = next(&mut at, 0x30)?;
        Some(Layout {
            tbs: Span::new(content..tbs_end)?,
            serial,
            issuer,
            validity,
            subject,
            spki,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tlv_rejects_truncated_and_indefinite_lengths() {
        assert_eq!(tlv(&[0x30, 0x03, 1, 2], 0), None);
        assert_eq!(tlv(&[0x30, 0x80, 0, 0], 0), None);
        assert_eq!(tlv(&[0x30, 0x81, 0x01, 7], 0), Some((0x30, 3, 4)));
        assert_eq!(tlv(&[0, 0x30, 0x00], 1), Some((0x30, 3, 3)));
        assert_eq!(tlv(&[0x30, 0x00], 2), None);
    }
}
