//! The extensions pki reads, decoded once when a certificate is parsed, and
//! kept small: a store holds thousands of leaves, so what can be a slice of
//! the certificate's DER is kept as its position there.

use super::BasicConstraintsInfo;
use super::layout::{Span, tlv};
use super::shallow::RawExtension;
use crate::error::{Error, Result};
use der::Decode;
use der::asn1::ObjectIdentifier;
use der::oid::AssociatedOid;
use std::borrow::Cow;
use x509_cert::ext::pkix::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAltName,
    SubjectKeyIdentifier,
};

/// Bytes of an extension: where they sit in the certificate's DER, or a
/// copy when they come from a decoded tree instead.
///
/// The copy is behind a thin pointer: it is rare (only certificates that
/// x509-cert decodes in place of the usual reader), and a fat one would make
/// every `Option<Held>` a third larger, for each of the three a certificate
/// keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Held {
    In(Span),
    #[allow(clippy::box_collection)]
    Copy(Box<Box<[u8]>>),
}

impl Held {
    /// `part` as its position in `der` when it is a slice of it.
    fn of(der: &[u8], part: &[u8]) -> Held {
        let offset = (part.as_ptr() as usize).wrapping_sub(der.as_ptr() as usize);
        match offset
            .checked_add(part.len())
            .filter(|end| *end <= der.len() && offset <= der.len())
            .and_then(|end| Span::new(offset..end))
        {
            Some(span) => Held::In(span),
            None => Held::Copy(Box::new(part.into())),
        }
    }

    pub(crate) fn get<'a>(&'a self, der: &'a [u8]) -> &'a [u8] {
        match self {
            Held::In(span) => der.get(span.range()).unwrap_or_default(),
            Held::Copy(bytes) => bytes,
        }
    }
}

/// The authorityKeyIdentifier extension, as pki uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuthorityKeyId {
    /// keyIdentifier.
    pub(crate) key_id: Option<Held>,
    /// Whether authorityCertIssuer or authorityCertSerialNumber is present.
    pub(crate) has_issuer_and_serial: bool,
}

fn ext_err(extension: &'static str, source: der::Error) -> Error {
    Error::MalformedExtension { extension, source }
}

/// The extensions pki reads.
#[derive(Default)]
pub(crate) struct Read {
    pub(crate) ski: Option<Held>,
    pub(crate) aki: Option<AuthorityKeyId>,
    pub(crate) basic_constraints: Option<BasicConstraintsInfo>,
    pub(crate) key_usage: Option<KeyUsage>,
    /// The usual lists are shared (every leaf of a store has one): a
    /// statically allocated copy costs nothing per certificate.
    pub(crate) eku: Option<Cow<'static, [ObjectIdentifier]>>,
    /// The subjectAltName extension's value, decoded and checked here and
    /// decoded again only when its entries are asked for as x509-cert's
    /// values (DNS names and IP addresses are read from these bytes).
    pub(crate) san: Option<Held>,
}

/// Stores `value` in `slot`, refusing a second occurrence of the extension.
fn once<T>(slot: &mut Option<T>, extension: &'static str, value: T) -> Result<()> {
    if slot.is_some() {
        return Err(Error::DuplicateExtension { extension });
    }
    *slot = Some(value);
    Ok(())
}

/// The extendedKeyUsage lists pki issues.
const USUAL_EKU: [&[ObjectIdentifier]; 3] = [
    &[crate::usage::EKU_SERVER_AUTH],
    &[crate::usage::EKU_CLIENT_AUTH],
    &[crate::usage::EKU_SERVER_AUTH, crate::usage::EKU_CLIENT_AUTH],
];

/// The DER of each of [`USUAL_EKU`], in order: nearly every leaf carries
/// one, recognised by its bytes (DER has one encoding) without a decoder.
const USUAL_EKU_DER: [&[u8]; 3] = [
    &[
        0x30, 0x0a, 0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01,
    ],
    &[
        0x30, 0x0a, 0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02,
    ],
    &[
        0x30, 0x14, 0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01, 0x06, 0x08, 0x2b,
        0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02,
    ],
];

/// The basicConstraints values of every leaf (cA FALSE: an empty
/// SEQUENCE) and of a CA without a path length, by their bytes.
const USUAL_BASIC_CONSTRAINTS: [(&[u8], bool); 2] = [
    (&[0x30, 0x00], false),
    (&[0x30, 0x03, 0x01, 0x01, 0xff], true),
];

/// The keyUsage values pki issues (a leaf's digitalSignature, with
/// keyEncipherment for RSA, and a CA's), by their bytes.
type UsualKeyUsage = (&'static [u8], fn() -> KeyUsage);
const USUAL_KEY_USAGE: [UsualKeyUsage; 3] = {
    use x509_cert::ext::pkix::KeyUsages as U;
    [
        (&[0x03, 0x02, 0x07, 0x80], || {
            KeyUsage(U::DigitalSignature.into())
        }),
        (&[0x03, 0x02, 0x05, 0xa0], || {
            KeyUsage(U::DigitalSignature | U::KeyEncipherment)
        }),
        (&[0x03, 0x02, 0x01, 0x86], || {
            KeyUsage(U::DigitalSignature | U::KeyCertSign | U::CRLSign)
        }),
    ]
};

/// Where the content of `value` starts when it is an OCTET STRING with a
/// short length (under 128 octets, which DER writes in one octet): a key
/// identifier, read without a decoder.
fn short_octet_string(value: &[u8]) -> Option<usize> {
    match value {
        [0x04, len, ..] if *len < 0x80 && value.len() == 2 + usize::from(*len) => Some(2),
        _ => None,
    }
}

/// The keyIdentifier of an authorityKeyIdentifier that holds nothing else,
/// with short lengths: `30 L 80 K <K octets>`, L = K + 2. Any other form
/// goes through the decoder.
fn key_id_only(value: &[u8]) -> Option<&[u8]> {
    match value {
        [0x30, outer, 0x80, inner, key_id @ ..]
            if *outer < 0x80
                && usize::from(*outer) == usize::from(*inner) + 2
                && key_id.len() == usize::from(*inner) =>
        {
            Some(key_id)
        }
        _ => None,
    }
}

/// The extensions pki reads, by OID.
const READ: [(ObjectIdentifier, &str); 6] = [
    (SubjectKeyIdentifier::OID, "subjectKeyIdentifier"),
    (AuthorityKeyIdentifier::OID, "authorityKeyIdentifier"),
    (BasicConstraints::OID, "basicConstraints"),
    (KeyUsage::OID, "keyUsage"),
    (ExtendedKeyUsage::OID, "extendedKeyUsage"),
    (SubjectAltName::OID, "subjectAltName"),
];

/// The content octets of the first element of the SEQUENCE `value`, when
/// it has tag `tag` and its content is `expected` (the decoder read the
/// same bytes; anything else is copied instead).
fn first_element<'a>(value: &'a [u8], tag: u8, expected: &[u8]) -> Option<&'a [u8]> {
    let (_, content, _) = tlv(value, 0)?;
    let (found, start, end) = tlv(value, content)?;
    let bytes = value.get(start..end)?;
    (found == tag && bytes == expected).then_some(bytes)
}

/// Reads the extensions pki reads from `extensions` (called twice: once
/// to refuse repeats, once to decode), which are those of `der`.
pub(crate) fn read<'a, I>(der: &[u8], extensions: impl Fn() -> I) -> Result<Read>
where
    I: Iterator<Item = RawExtension<'a>>,
{
    refuse_repeats(extensions())?;
    let mut read = Read::default();
    for (extn_id, critical, value) in extensions() {
        let Some((oid, name)) = READ.iter().find(|(read, _)| read.as_bytes() == extn_id) else {
            continue;
        };
        let name: &'static str = name;
        match *oid {
            SubjectKeyIdentifier::OID => once(&mut read.ski, name, ski(der, value, name)?)?,
            AuthorityKeyIdentifier::OID => once(&mut read.aki, name, aki(der, value, name)?)?,
            BasicConstraints::OID => {
                let info = basic_constraints(value, critical, name)?;
                once(&mut read.basic_constraints, name, info)?;
            }
            KeyUsage::OID => once(&mut read.key_usage, name, key_usage(value, name)?)?,
            ExtendedKeyUsage::OID => once(&mut read.eku, name, eku(value, name)?)?,
            SubjectAltName::OID => {
                SubjectAltName::from_der(value).map_err(|e| ext_err(name, e))?;
                once(&mut read.san, name, Held::of(der, value))?;
            }
            _ => {}
        }
    }
    Ok(read)
}

/// Refuses an extension pki reads that appears twice, before any is
/// decoded: which copy would count is exactly what an attacker would like
/// to choose. The first extension seen twice is the one named.
fn refuse_repeats<'a>(extensions: impl Iterator<Item = RawExtension<'a>>) -> Result<()> {
    let mut seen = 0u8;
    for (oid, _, _) in extensions {
        if let Some(i) = READ.iter().position(|(read, _)| read.as_bytes() == oid) {
            if seen & (1 << i) != 0 {
                return Err(Error::DuplicateExtension {
                    extension: READ[i].1,
                });
            }
            seen |= 1 << i;
        }
    }
    Ok(())
}

/// The key identifier of a subjectKeyIdentifier `value`, held in `der`.
fn ski(der: &[u8], value: &[u8], name: &'static str) -> Result<Held> {
    let at = match short_octet_string(value) {
        Some(at) => at,
        None => {
            let ski = SubjectKeyIdentifier::from_der(value).map_err(|e| ext_err(name, e))?;
            // The OCTET STRING's content ends the value.
            value.len() - ski.0.as_bytes().len()
        }
    };
    Ok(Held::of(der, &value[at..]))
}

/// An authorityKeyIdentifier `value`: its key identifier (held in `der`
/// when the decoder read the same bytes) and whether it names the issuer
/// by name and serial too.
fn aki(der: &[u8], value: &[u8], name: &'static str) -> Result<AuthorityKeyId> {
    if let Some(bytes) = key_id_only(value) {
        return Ok(AuthorityKeyId {
            key_id: Some(Held::of(der, bytes)),
            has_issuer_and_serial: false,
        });
    }
    let aki = AuthorityKeyIdentifier::from_der(value).map_err(|e| ext_err(name, e))?;
    let key_id =
        aki.key_identifier
            .as_ref()
            .map(|k| match first_element(value, 0x80, k.as_bytes()) {
                Some(bytes) => Held::of(der, bytes),
                None => Held::Copy(Box::new(k.as_bytes().into())),
            });
    Ok(AuthorityKeyId {
        key_id,
        has_issuer_and_serial: aki.authority_cert_issuer.is_some()
            || aki.authority_cert_serial_number.is_some(),
    })
}

fn basic_constraints(
    value: &[u8],
    critical: bool,
    name: &'static str,
) -> Result<BasicConstraintsInfo> {
    let (ca, path_len) = match USUAL_BASIC_CONSTRAINTS.iter().find(|u| u.0 == value) {
        Some((_, ca)) => (*ca, None),
        None => {
            let b = BasicConstraints::from_der(value).map_err(|e| ext_err(name, e))?;
            (b.ca, b.path_len_constraint)
        }
    };
    Ok(BasicConstraintsInfo {
        ca,
        path_len,
        critical,
    })
}

fn key_usage(value: &[u8], name: &'static str) -> Result<KeyUsage> {
    match USUAL_KEY_USAGE.iter().find(|u| u.0 == value) {
        Some((_, usual)) => Ok(usual()),
        None => KeyUsage::from_der(value).map_err(|e| ext_err(name, e)),
    }
}

fn eku(value: &[u8], name: &'static str) -> Result<Cow<'static, [ObjectIdentifier]>> {
    // A usual list decodes only from its own DER (the decoder takes DER
    // alone), so its bytes are all there is to check.
    if let Some(at) = USUAL_EKU_DER.iter().position(|usual| *usual == value) {
        return Ok(Cow::Borrowed(USUAL_EKU[at]));
    }
    let mut e = ExtendedKeyUsage::from_der(value).map_err(|e| ext_err(name, e))?;
    // Kept for the certificate's life: without the decoder's spare capacity.
    e.0.shrink_to_fit();
    Ok(Cow::Owned(e.0))
}

/// The entries of a subjectAltName value that decoded, with their tags
/// (`[2]` dNSName, `[7]` iPAddress...), in order.
pub(crate) fn san_entries(value: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    let (content, end) = match tlv(value, 0) {
        Some((0x30, content, end)) => (content, end),
        _ => (0, 0),
    };
    let mut at = content;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let (tag, start, next) = tlv(value, at)?;
        at = next;
        Some((tag, value.get(start..next)?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use der::Encode;

    #[test]
    fn key_identifiers_read_in_place_are_what_the_decoder_reads() {
        let id = [7u8; 20];
        let ski = SubjectKeyIdentifier(der::asn1::OctetString::new(&id[..]).unwrap())
            .to_der()
            .unwrap();
        assert_eq!(&ski[short_octet_string(&ski).unwrap()..], &id);
        let aki = AuthorityKeyIdentifier {
            key_identifier: Some(der::asn1::OctetString::new(&id[..]).unwrap()),
            authority_cert_issuer: None,
            authority_cert_serial_number: None,
        }
        .to_der()
        .unwrap();
        assert_eq!(key_id_only(&aki), Some(&id[..]));
        // Anything else is left to the decoder.
        assert_eq!(key_id_only(&aki[..aki.len() - 1]), None);
        assert_eq!(key_id_only(&[0x30, 0x00]), None);
        assert_eq!(short_octet_string(&ski[..ski.len() - 1]), None);
        let with_serial = AuthorityKeyIdentifier {
            key_identifier: Some(der::asn1::OctetString::new(&id[..]).unwrap()),
            authority_cert_issuer: None,
            authority_cert_serial_number: Some(
                x509_cert::serial_number::SerialNumber::new(&[1]).unwrap(),
            ),
        }
        .to_der()
        .unwrap();
        assert_eq!(key_id_only(&with_serial), None);
    }

    #[test]
    fn the_usual_encodings_are_what_x509_cert_encodes_and_decodes() {
        for (der, usual) in USUAL_KEY_USAGE {
            assert_eq!(usual().to_der().unwrap(), der);
            assert_eq!(KeyUsage::from_der(der).unwrap(), usual());
        }
        for (list, der) in USUAL_EKU.iter().zip(USUAL_EKU_DER) {
            assert_eq!(ExtendedKeyUsage(list.to_vec()).to_der().unwrap(), der);
        }
        for (der, ca) in USUAL_BASIC_CONSTRAINTS {
            let encoded = BasicConstraints {
                ca,
                path_len_constraint: None,
            };
            assert_eq!(encoded.to_der().unwrap(), der);
            assert_eq!(BasicConstraints::from_der(der).unwrap(), encoded);
        }
    }
}
