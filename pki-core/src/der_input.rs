//! Binary DER where PEM is expected: `openssl x509 -outform DER` files,
//! Windows `.cer` exports, PKCS#8 `.der` keys. Every reader of PEM blocks
//! ([`crate::pem::read_blocks`], certificates, bundles, keys) accepts them
//! through here, so no caller has to guess the encoding of a file.
//!
//! An input is DER when it starts with a SEQUENCE tag (0x30: every
//! certificate and key is a SEQUENCE) and holds no PEM `BEGIN` line (text
//! starting with the digit `0` stays PEM). Several objects may follow one
//! another, as `cat a.der b.der` makes them. Each object gets the label its
//! PEM block would have, from its shape, so callers that filter blocks by
//! label work unchanged.

use crate::error::{Error, Result};
use der::{Decode, Reader, SliceReader, Tag, Tagged, asn1::AnyRef};

/// The DER objects of `input` when it is binary DER; `None` when it is to
/// be read as PEM text.
pub(crate) fn objects(input: &[u8]) -> Result<Option<Vec<&[u8]>>> {
    if input.first() != Some(&0x30) || contains(input, b"-----BEGIN ") {
        return Ok(None);
    }
    let mut reader = SliceReader::new(input).map_err(|e| malformed(1, e))?;
    let mut objects = Vec::new();
    while !reader.is_finished() {
        let index = objects.len() + 1;
        objects.push(reader.tlv_bytes().map_err(|e| malformed(index, e))?);
    }
    Ok(Some(objects))
}

/// The PEM label the `index`-th (1-based) DER object would carry, from the
/// tags of its first two elements:
///
/// ```text
/// Certificate          SEQUENCE { SEQUENCE (tbsCertificate), SEQUENCE (signatureAlgorithm), BIT STRING }
/// SubjectPublicKeyInfo SEQUENCE { SEQUENCE (algorithm), BIT STRING }
/// PrivateKeyInfo       SEQUENCE { INTEGER (version), SEQUENCE (algorithm), OCTET STRING, ... }  PKCS#8
/// ECPrivateKey         SEQUENCE { INTEGER 1, OCTET STRING, ... }                              SEC1
/// RSAPrivateKey        SEQUENCE { INTEGER 0, INTEGER (modulus), ... }                         PKCS#1
/// EncryptedPrivateKeyInfo SEQUENCE { SEQUENCE (algorithm), OCTET STRING }                     refused
/// ```
///
/// Only the shape is read here; the object is decoded in full by the
/// caller, which reports what is wrong inside it.
pub(crate) fn label(index: usize, der: &[u8]) -> Result<&'static str> {
    let shape = || -> der::Result<Option<(Tag, Tag)>> {
        let any = AnyRef::from_der(der)?;
        if any.tag() != Tag::Sequence {
            return Ok(None);
        }
        let mut inner = SliceReader::new(any.value())?;
        let first = Tag::peek(&inner)?;
        inner.tlv_bytes()?;
        Ok(Some((first, Tag::peek(&inner)?)))
    };
    let not_one = |what: &str| Error::Der {
        object: index,
        reason: what.to_string(),
    };
    match shape() {
        Ok(Some((Tag::Sequence, Tag::Sequence))) => Ok("CERTIFICATE"),
        Ok(Some((Tag::Sequence, Tag::BitString))) => Ok("PUBLIC KEY"),
        Ok(Some((Tag::Integer, Tag::Sequence))) => Ok("PRIVATE KEY"),
        Ok(Some((Tag::Integer, Tag::OctetString))) => Ok("EC PRIVATE KEY"),
        Ok(Some((Tag::Integer, Tag::Integer))) => Ok("RSA PRIVATE KEY"),
        Ok(Some((Tag::Sequence, Tag::OctetString))) => Err(not_one(
            "an encrypted private key, which is not supported (decrypt it first: openssl pkcs8 -in KEY -out PLAIN.key)",
        )),
        Ok(_) => Err(not_one("neither a certificate nor a key")),
        Err(e) => Err(malformed(index, e)),
    }
}

/// An error about the `index`-th DER object, from a [`Error::Pem`] its
/// caller made for "block `index`".
pub(crate) fn renamed(e: Error) -> Error {
    match e {
        Error::Pem {
            block,
            reason,
            source,
        } => Error::Der {
            object: block,
            reason: match source {
                Some(source) => format!("{reason} ({source})"),
                None => reason,
            },
        },
        other => other,
    }
}

fn malformed(index: usize, e: der::Error) -> Error {
    Error::Der {
        object: index,
        reason: format!("not valid DER ({e}); expected a certificate or a key, in DER or PEM"),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn text_starting_with_a_zero_digit_is_still_pem() {
        assert!(
            objects(b"0 comment\n-----BEGIN CERTIFICATE-----\n")
                .unwrap()
                .is_none()
        );
        assert!(objects(b"-----BEGIN CERTIFICATE-----\n").unwrap().is_none());
    }

    #[test]
    fn concatenated_objects_are_split_and_truncated_ones_refused() {
        let two = [0x30, 0x03, 0x02, 0x01, 0x00, 0x30, 0x00];
        assert_eq!(objects(&two).unwrap().unwrap().len(), 2);
        let err = objects(&two[..4]).unwrap_err().to_string();
        assert!(err.starts_with("DER object 1: not valid DER"), "{err}");
        let err = objects(&[0x30, 0x00, 0x30]).unwrap_err().to_string();
        assert!(err.starts_with("DER object 2: not valid DER"), "{err}");
    }

    #[test]
    fn shapes_name_their_labels() {
        // SEQUENCE { INTEGER 0, INTEGER 0 }: the shape of PKCS#1.
        assert_eq!(
            label(1, &[0x30, 0x06, 2, 1, 0, 2, 1, 0]).unwrap(),
            "RSA PRIVATE KEY"
        );
        // SEQUENCE { SEQUENCE {}, OCTET STRING }: an encrypted PKCS#8 key.
        let err = label(1, &[0x30, 0x04, 0x30, 0x00, 0x04, 0x00]).unwrap_err();
        assert!(err.to_string().contains("encrypted"), "{err}");
        let err = label(3, &[0x30, 0x06, 0x01, 0x01, 0xff, 0x01, 0x01, 0xff]).unwrap_err();
        assert!(err.to_string().contains("neither"), "{err}");
        assert!(err.to_string().starts_with("DER object 3"), "{err}");
    }
}
