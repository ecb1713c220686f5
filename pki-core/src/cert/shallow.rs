//! Reading a certificate of the usual shape without building x509-cert's
//! tree.
//!
//! x509-cert decodes a certificate into owned values (every name,
//! parameter, key and extension copied into its own allocation) through
//! `der`'s general reader, and pki then drops the tree: it keeps the DER
//! and the few fields it reads. That decoding was most of the cost of
//! parsing a bundle, of loading a store and of issuing (what pki issues is
//! parsed back). This module walks the DER once, by hand, and reads the
//! fields pki keeps.
//!
//! It accepts only a narrow, strict form, every part of which x509-cert
//! (with `der`'s DER rules) accepts too: minimal definite lengths, a v3
//! version, a positive serial of at most 21 octets in its minimal encoding,
//! algorithm parameters that are absent, NULL, an OID or a SEQUENCE, names
//! of one attribute per RDN with a string value, UTCTime and
//! GeneralizedTime in the only forms `der` reads (seconds and `Z`, years
//! from 1970), no unique identifiers, extensions whose `critical` is
//! absent or TRUE, OIDs whose arcs fit in 28 bits, and bit strings without
//! unused bits. Anything else makes [`decode`] return `None`, and the caller
//! decodes with x509-cert, whose answer (and error) counts: what this
//! module accepts, x509-cert accepts with the same fields, and the rest is
//! x509-cert's to decide. The `cert_der` fuzz target and the
//! `shallow_decode` tests check that claim
//! ([`check_against_x509_cert`]), and that the usual certificates do not
//! need x509-cert.

use super::layout::{Layout, Span, tlv};
use std::ops::Range;
use time::OffsetDateTime;

/// What pki reads of a certificate that [`decode`] accepted.
pub(crate) struct Shallow<'a> {
    pub(crate) layout: Layout,
    pub(crate) not_before: OffsetDateTime,
    pub(crate) not_after: OffsetDateTime,
    der: &'a [u8],
    /// The content of the extensions SEQUENCE (empty when absent).
    extensions: Range<usize>,
}

/// An extension as pki reads it: (extnID content octets, critical,
/// extnValue content octets).
pub(crate) type RawExtension<'a> = (&'a [u8], bool, &'a [u8]);

impl<'a> Shallow<'a> {
    /// The extensions, in certificate order.
    pub(crate) fn extensions(&self) -> impl Iterator<Item = RawExtension<'a>> + use<'a> {
        let mut list = Cursor {
            der: self.der,
            at: self.extensions.start,
            end: self.extensions.end,
        };
        // Every element was checked by `decode`.
        std::iter::from_fn(move || {
            let (start, end) = list.next(0x30)?;
            let mut ext = Cursor::within(list.der, start, end);
            let oid = ext.next(0x06)?;
            let critical = ext.peek() == Some(0x01);
            if critical {
                ext.next(0x01)?;
            }
            let value = ext.next(0x04)?;
            Some((
                &list.der[oid.0..oid.1],
                critical,
                &list.der[value.0..value.1],
            ))
        })
    }
}

/// Reads `der` when it has the form described in the module's docs.
pub(crate) fn decode(der: &[u8]) -> Option<Shallow<'_>> {
    let mut top = Cursor::within(der, 0, der.len());
    let (cert_start, cert_end) = top.next(0x30)?;
    top.finished()?;
    let mut cert = Cursor::within(der, cert_start, cert_end);
    let tbs_tlv = cert.at;
    let (tbs_start, tbs_end) = cert.next(0x30)?;
    algorithm_identifier(&mut cert)?;
    bit_string(&mut cert)?;
    cert.finished()?;

    let mut tbs = Cursor::within(der, tbs_start, tbs_end);
    let (v0, v1) = tbs.next(0xa0)?;
    // v3: INTEGER 2.
    (der.get(v0..v1)? == [0x02, 0x01, 0x02]).then_some(())?;
    let serial = tbs.next(0x02)?;
    serial_number(&der[serial.0..serial.1])?;
    algorithm_identifier(&mut tbs)?;
    let issuer = name(&mut tbs)?;
    let validity_tlv = tbs.at;
    let (val_start, val_end) = tbs.next(0x30)?;
    let mut validity = Cursor::within(der, val_start, val_end);
    let not_before = time(&mut validity)?;
    let not_after = time(&mut validity)?;
    validity.finished()?;
    let subject = name(&mut tbs)?;
    let spki_tlv = tbs.at;
    let (spki_start, spki_end) = tbs.next(0x30)?;
    let mut spki = Cursor::within(der, spki_start, spki_end);
    algorithm_identifier(&mut spki)?;
    bit_string(&mut spki)?;
    spki.finished()?;
    let extensions = if tbs.peek() == Some(0xa3) {
        let (e0, e1) = tbs.next(0xa3)?;
        let mut wrapper = Cursor::within(der, e0, e1);
        let (l0, l1) = wrapper.next(0x30)?;
        wrapper.finished()?;
        let mut list = Cursor::within(der, l0, l1);
        while !list.is_finished() {
            extension(&mut list)?;
        }
        l0..l1
    } else {
        tbs.end..tbs.end
    };
    tbs.finished()?;
    Some(Shallow {
        layout: Layout {
            tbs: Span::new(tbs_tlv..tbs_end)?,
            serial: Span::new(serial.0..serial.1)?,
            issuer: Span::new(issuer)?,
            validity: Span::new(validity_tlv..val_end)?,
            subject: Span::new(subject)?,
            spki: Span::new(spki_tlv..spki_end)?,
        },
        not_before,
        not_after,
        der,
        extensions,
    })
}

/// A position in a constructed value's content.
struct Cursor<'a> {
    der: &'a [u8],
    at: usize,
    end: usize,
}

impl<'a> Cursor<'a> {
    fn within(der: &'a [u8], at: usize, end: usize) -> Self {
        Cursor { der, at, end }
    }

    fn is_finished(&self) -> bool {
        self.at == self.end
    }

    /// `Some` when nothing is left (`der` refuses trailing data).
    fn finished(&self) -> Option<()> {
        self.is_finished().then_some(())
    }

    fn peek(&self) -> Option<u8> {
        if self.is_finished() {
            None
        } else {
            self.der.get(self.at).copied()
        }
    }

    /// The next TLV, which must have tag `tag` and a minimal definite
    /// length below 64 KiB: its content's (start, end).
    fn next(&mut self, tag: u8) -> Option<(usize, usize)> {
        if self.is_finished() {
            return None;
        }
        let (found, start, end) = tlv(self.der, self.at)?;
        // `tlv` reads any definite length; DER wants the shortest form,
        // and one or two length octets cover every certificate.
        let minimal = match start - self.at {
            2 => true,
            3 => end - start >= 0x80,
            4 => end - start >= 0x100,
            _ => false,
        };
        if found != tag || !minimal || end > self.end {
            return None;
        }
        self.at = end;
        Some((start, end))
    }

    /// The next TLV with a tag from `tags`, its content unchecked (what
    /// `der` does for an ANY).
    fn next_any(&mut self, tags: &[u8]) -> Option<(u8, usize, usize)> {
        let tag = self.peek()?;
        if !tags.contains(&tag) {
            return None;
        }
        let (start, end) = self.next(tag)?;
        Some((tag, start, end))
    }

    fn oid(&mut self) -> Option<()> {
        let (start, end) = self.next(0x06)?;
        object_identifier(&self.der[start..end])
    }
}

/// An OBJECT IDENTIFIER's content that `const-oid` reads: at most 39
/// octets, a first octet naming arcs 0, 1 or 2, and (stricter than it)
/// minimal arcs of at most four octets.
fn object_identifier(content: &[u8]) -> Option<()> {
    if content.is_empty() || content.len() > 39 || content[0] >= 120 {
        return None;
    }
    let mut arc_len = 0;
    for &b in &content[1..] {
        if arc_len == 0 && b == 0x80 {
            return None; // a non-minimal arc
        }
        arc_len += 1;
        if arc_len > 4 {
            return None;
        }
        if b & 0x80 == 0 {
            arc_len = 0;
        }
    }
    (arc_len == 0).then_some(())
}

/// A positive INTEGER in its minimal encoding, at most 21 octets
/// (x509-cert's limit for a serial it reads).
fn serial_number(content: &[u8]) -> Option<()> {
    let ok = match content {
        [] => false,
        [0x00, second, ..] => *second >= 0x80 && content.len() <= 21,
        [first, ..] => (0x01..=0x7f).contains(first) && content.len() <= 21,
    };
    ok.then_some(())
}

/// AlgorithmIdentifier: an OID, then parameters that are absent, NULL,
/// an OID or a SEQUENCE.
fn algorithm_identifier(outer: &mut Cursor<'_>) -> Option<()> {
    let (start, end) = outer.next(0x30)?;
    let mut alg = Cursor::within(outer.der, start, end);
    alg.oid()?;
    if !alg.is_finished() {
        let (tag, s, e) = alg.next_any(&[0x05, 0x06, 0x30])?;
        if tag == 0x05 && s != e {
            return None;
        }
    }
    alg.finished()
}

/// A BIT STRING with no unused bits.
fn bit_string(outer: &mut Cursor<'_>) -> Option<()> {
    let (start, end) = outer.next(0x03)?;
    (start < end && outer.der[start] == 0).then_some(())
}

/// UTF8String, PrintableString, IA5String, TeletexString, BMPString,
/// NumericString, VisibleString: string types `der` reads as a tag.
const STRING_TAGS: [u8; 7] = [0x0c, 0x13, 0x16, 0x14, 0x1e, 0x12, 0x1a];

/// A Name of one attribute per RDN; the TLV's range.
fn name(outer: &mut Cursor<'_>) -> Option<Range<usize>> {
    let tlv = outer.at;
    let (start, end) = outer.next(0x30)?;
    let mut rdns = Cursor::within(outer.der, start, end);
    while !rdns.is_finished() {
        let (s0, s1) = rdns.next(0x31)?;
        let mut set = Cursor::within(outer.der, s0, s1);
        let (a0, a1) = set.next(0x30)?;
        set.finished()?;
        let mut atv = Cursor::within(outer.der, a0, a1);
        atv.oid()?;
        atv.next_any(&STRING_TAGS)?;
        atv.finished()?;
    }
    Some(tlv..end)
}

/// Extension: an OID, `critical` absent or TRUE, an OCTET STRING.
fn extension(list: &mut Cursor<'_>) -> Option<()> {
    let (start, end) = list.next(0x30)?;
    let mut ext = Cursor::within(list.der, start, end);
    ext.oid()?;
    if ext.peek() == Some(0x01) {
        let (s, e) = ext.next(0x01)?;
        (list.der.get(s..e)? == [0xff]).then_some(())?;
    }
    ext.next(0x04)?;
    ext.finished()
}

/// UTCTime `YYMMDDHHMMSSZ` (1970 to 2049) or GeneralizedTime
/// `YYYYMMDDHHMMSSZ` (1970 to 9999), a valid date and time.
fn time(outer: &mut Cursor<'_>) -> Option<OffsetDateTime> {
    let (tag, start, end) = outer.next_any(&[0x17, 0x18])?;
    let text = &outer.der[start..end];
    let digits = |at: usize| -> Option<u16> {
        let (hi, lo) = (*text.get(at)?, *text.get(at + 1)?);
        (hi.is_ascii_digit() && lo.is_ascii_digit())
            .then(|| u16::from(hi - b'0') * 10 + u16::from(lo - b'0'))
    };
    let (year, rest) = match (tag, text.len()) {
        (0x17, 13) => {
            let yy = digits(0)?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, 2)
        }
        (0x18, 15) => (digits(0)? * 100 + digits(2)?, 4),
        _ => return None,
    };
    if year < 1970 || text.last() != Some(&b'Z') {
        return None;
    }
    let month = time::Month::try_from(u8::try_from(digits(rest)?).ok()?).ok()?;
    let day = u8::try_from(digits(rest + 2)?).ok()?;
    let date = time::Date::from_calendar_date(i32::from(year), month, day).ok()?;
    let (h, m, s) = (digits(rest + 4)?, digits(rest + 6)?, digits(rest + 8)?);
    let time = time::Time::from_hms(
        u8::try_from(h).ok()?,
        u8::try_from(m).ok()?,
        u8::try_from(s).ok()?,
    )
    .ok()?;
    Some(date.with_time(time).assume_utc())
}

/// The extensions x509-cert decoded from `tbs`, as the raw reads give
/// them: what the checks for the fuzz targets compare those with.
pub(super) fn decoded_extensions(tbs: &x509_cert::TbsCertificate) -> Vec<RawExtension<'_>> {
    tbs.extensions()
        .map(|e| e.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|e| (e.extn_id.as_bytes(), e.critical, e.extn_value.as_bytes()))
        .collect()
}

/// Whether a name holds a relative distinguished name of more than one
/// attribute.
fn has_multi_attribute_rdn(name: &x509_cert::name::Name) -> bool {
    name.as_ref().iter().any(|rdn| rdn.as_ref().len() > 1)
}

/// Reads `der` both ways and says where they disagree: what `decode`
/// accepts, x509-cert must accept, with the same layout, validity and
/// extensions. The other way round is a matter of speed, not of
/// correctness, and is checked for the forms pki and common issuers
/// write: x509-cert accepts a v3 certificate with names of one attribute
/// per RDN and no unique identifiers, and `decode` refuses it, only for
/// one of the rarer encodings listed in the module's docs. For the fuzz
/// targets and the tests (through `pki_core::fuzzing`).
///
/// # Errors
///
/// A message saying how the two readings disagree: a certificate the fast
/// reader accepts and x509-cert refuses, or one whose layout, validity or
/// extensions differ between them. Input the fast reader refuses is not an
/// error.
pub fn check_against_x509_cert(der: &[u8]) -> Result<(), String> {
    use der::Decode as _;
    let full = x509_cert::Certificate::from_der(der);
    match (decode(der), full) {
        (None, _) => Ok(()),
        (Some(_), Err(e)) => Err(format!("accepted what x509-cert refuses ({e})")),
        (Some(shallow), Ok(full)) => {
            let tbs = full.tbs_certificate();
            #[allow(clippy::disallowed_methods)] // the tree's own, compared as decoded
            let validity = tbs.validity();
            if shallow.not_before != crate::datetime::from_x509(&validity.not_before)
                || shallow.not_after != crate::datetime::from_x509(&validity.not_after)
            {
                return Err("a different validity".into());
            }
            if Some(&shallow.layout) != Layout::of(der).as_ref() {
                return Err("a different layout".into());
            }
            if has_multi_attribute_rdn(tbs.issuer()) || has_multi_attribute_rdn(tbs.subject()) {
                return Err("accepted a multi-attribute RDN".into());
            }
            let theirs = decoded_extensions(tbs);
            let ours: Vec<_> = shallow.extensions().collect();
            if ours != theirs {
                return Err("different extensions".into());
            }
            Ok(())
        }
    }
}

/// Whether `decode` reads `der` itself (for the tests: the usual
/// certificates must not need x509-cert).
pub fn reads_without_x509_cert(der: &[u8]) -> bool {
    decode(der).is_some()
}
