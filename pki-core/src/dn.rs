//! Distinguished-name comparison, RFC 5280 §7.1.
//!
//! Two names are equal when they have the same number of RDNs and each RDN
//! holds the same attributes (a SET: order does not matter), attribute
//! values compared as follows:
//!
//! - values of a string type (UTF8String, PrintableString, IA5String,
//!   BMPString) are compared after the LDAP StringPrep
//!   profile of RFC 4518 as RFC 5280 §7.1 asks: control and format
//!   characters removed, every kind of white space mapped to SPACE, case
//!   folded, leading and trailing spaces dropped and inner runs of spaces
//!   collapsed to one ("insignificant space handling", §2.6.1). The string
//!   type itself does not matter, so PrintableString `Example` equals
//!   UTF8String `example`. Unicode normalization (NFKC, §2.3) and the
//!   prohibited-character check (§2.4) are not applied: certificates in the
//!   field use composed forms, and a prohibited character only makes the
//!   comparison fail closed (the byte strings differ);
//! - values of any other type (TeletexString included, whose character set
//!   is not Unicode) are compared by their DER encoding, tag included.
//!
//! Each name is turned once into a canonical key; two names are equal
//! when their keys are.

use der::{Encode, Tag, Tagged};
use x509_cert::attr::AttributeTypeAndValue;
use x509_cert::name::{Name, RelativeDistinguishedName};

/// The canonical form of one RDN: the canonical forms of its attributes,
/// each length-prefixed, sorted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CanonicalRdn(Vec<u8>);

/// The canonical form of a name: its RDNs in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct CanonicalName(pub(crate) Vec<CanonicalRdn>);

impl CanonicalName {
    /// The canonical form of `name`.
    pub(crate) fn of(name: &Name) -> Self {
        CanonicalName(name.iter_rdn().map(canonical_rdn).collect())
    }

    /// Whether the first RDNs of `self` are those of `prefix` (RFC 5280
    /// §4.2.1.10: a directoryName is within a subtree when the subtree's
    /// RDNs start it).
    pub(crate) fn starts_with(&self, prefix: &CanonicalName) -> bool {
        self.0.starts_with(&prefix.0)
    }
}

fn canonical_rdn(rdn: &RelativeDistinguishedName) -> CanonicalRdn {
    let mut attributes: Vec<Vec<u8>> = rdn.iter().map(canonical_attribute).collect();
    attributes.sort_unstable();
    let mut out = Vec::new();
    for a in attributes {
        push_prefixed(&mut out, &a);
    }
    CanonicalRdn(out)
}

fn push_prefixed(out: &mut Vec<u8>, part: &[u8]) {
    out.extend_from_slice(&(part.len() as u64).to_be_bytes());
    out.extend_from_slice(part);
}

/// `oid || 0x01 || prepared string` for string values, `oid || 0x00 ||
/// tag || DER value` for the others.
fn canonical_attribute(atv: &AttributeTypeAndValue) -> Vec<u8> {
    let mut out = Vec::new();
    push_prefixed(&mut out, atv.oid.as_bytes());
    let value = atv.value.value();
    match decode_string(atv.value.tag(), value) {
        Some(text) => {
            out.push(1);
            out.extend_from_slice(prepare(&text).as_bytes());
        }
        None => {
            out.push(0);
            // Encoding a tag cannot fail; an empty one would still differ
            // from every string value.
            push_prefixed(&mut out, &atv.value.tag().to_der().unwrap_or_default());
            out.extend_from_slice(value);
        }
    }
    out
}

/// The text of a string value, when its type is one of the Unicode string
/// types and it decodes.
pub(crate) fn decode_string(tag: Tag, value: &[u8]) -> Option<String> {
    match tag {
        Tag::Utf8String => std::str::from_utf8(value).ok().map(str::to_owned),
        Tag::PrintableString | Tag::Ia5String | Tag::VisibleString => value
            .is_ascii()
            .then(|| String::from_utf8_lossy(value).into_owned()),
        Tag::BmpString => {
            if !value.len().is_multiple_of(2) {
                return None;
            }
            let units = value
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]));
            char::decode_utf16(units)
                .collect::<Result<String, _>>()
                .ok()
        }
        _ => None,
    }
}

/// RFC 4518 §2.2 (map), case folding, and §2.6.1 (insignificant spaces).
pub(crate) fn prepare(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if c.is_control() || is_mapped_to_nothing(c) {
            continue;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// The characters RFC 4518 §2.2 maps to nothing, besides control ones.
fn is_mapped_to_nothing(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{1806}'
            | '\u{180B}'..='\u{180D}'
            | '\u{200B}'
            | '\u{200C}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2063}'
            | '\u{206A}'..='\u{206F}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFC}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use der::Decode;
    use der::asn1::{Any, SetOfVec};
    use x509_cert::name::RdnSequence;

    const CN: der::asn1::ObjectIdentifier = der::asn1::ObjectIdentifier::new_unwrap("2.5.4.3");
    const O: der::asn1::ObjectIdentifier = der::asn1::ObjectIdentifier::new_unwrap("2.5.4.10");

    fn atv(oid: der::asn1::ObjectIdentifier, tag: Tag, value: &[u8]) -> AttributeTypeAndValue {
        AttributeTypeAndValue {
            oid,
            value: Any::new(tag, value).unwrap(),
        }
    }

    fn name(rdns: Vec<Vec<AttributeTypeAndValue>>) -> Name {
        let mut seq = RdnSequence::default();
        for rdn in rdns {
            let set = SetOfVec::try_from(rdn).unwrap();
            seq.push(RelativeDistinguishedName::from(set));
        }
        Name::from_der(&seq.to_der().unwrap()).unwrap()
    }

    fn same(a: &Name, b: &Name) -> bool {
        CanonicalName::of(a) == CanonicalName::of(b)
    }

    #[test]
    fn printable_and_utf8_strings_compare_case_insensitively() {
        let a = name(vec![vec![atv(CN, Tag::PrintableString, b"Example CA")]]);
        let b = name(vec![vec![atv(CN, Tag::Utf8String, b"example ca")]]);
        assert!(same(&a, &b));
        let c = name(vec![vec![atv(CN, Tag::Utf8String, b"example cb")]]);
        assert!(!same(&a, &c));
    }

    #[test]
    fn insignificant_spaces_are_ignored_but_word_breaks_are_not() {
        let a = name(vec![vec![atv(CN, Tag::Utf8String, b"  Example   CA ")]]);
        let b = name(vec![vec![atv(CN, Tag::PrintableString, b"Example CA")]]);
        let c = name(vec![vec![atv(CN, Tag::PrintableString, b"ExampleCA")]]);
        assert!(same(&a, &b));
        assert!(!same(&b, &c));
    }

    #[test]
    fn bmp_strings_are_decoded() {
        let bmp: Vec<u8> = "Ünïcode"
            .encode_utf16()
            .flat_map(u16::to_be_bytes)
            .collect();
        let a = name(vec![vec![atv(CN, Tag::BmpString, &bmp)]]);
        let b = name(vec![vec![atv(CN, Tag::Utf8String, "üNÏCODE".as_bytes())]]);
        assert!(same(&a, &b));
    }

    #[test]
    fn attribute_types_rdn_order_and_multi_valued_rdns_matter_as_rfc5280_says() {
        let cn = atv(CN, Tag::Utf8String, b"x");
        let o = atv(O, Tag::Utf8String, b"x");
        assert!(!same(
            &name(vec![vec![cn.clone()]]),
            &name(vec![vec![o.clone()]])
        ));
        // RDN order matters…
        assert!(!same(
            &name(vec![vec![cn.clone()], vec![o.clone()]]),
            &name(vec![vec![o.clone()], vec![cn.clone()]])
        ));
        // …the order inside a multi-valued RDN (a SET) does not.
        let multi = name(vec![vec![cn.clone(), o.clone()]]);
        let der = der::Encode::to_der(&multi).unwrap();
        assert!(same(&multi, &Name::from_der(&der).unwrap()));
        assert!(!same(&multi, &name(vec![vec![cn], vec![o]])));
    }

    #[test]
    fn other_value_types_compare_by_their_encoding() {
        let t61 = name(vec![vec![atv(CN, Tag::TeletexString, b"Example")]]);
        let t61_lower = name(vec![vec![atv(CN, Tag::TeletexString, b"example")]]);
        let utf8 = name(vec![vec![atv(CN, Tag::Utf8String, b"Example")]]);
        assert!(same(&t61, &t61.clone()));
        assert!(!same(&t61, &t61_lower));
        assert!(!same(&t61, &utf8));
    }

    #[test]
    fn prefixes_are_whole_rdns() {
        let o = vec![atv(O, Tag::PrintableString, b"Corp")];
        let parent = name(vec![o.clone()]);
        let child = name(vec![
            vec![atv(O, Tag::Utf8String, b"corp")],
            vec![atv(CN, Tag::Utf8String, b"web")],
        ]);
        assert!(CanonicalName::of(&child).starts_with(&CanonicalName::of(&parent)));
        assert!(!CanonicalName::of(&parent).starts_with(&CanonicalName::of(&child)));
    }
}
