//! Names that are one name to RFC 5280 §7.1 but not byte for byte: the
//! same attributes and values, in other string types.

use der::{Tag, Tagged};
use x509_cert::name::Name;

/// When `a` and `b` hold the same attributes with the same value bytes,
/// RDN by RDN, but some values in other string types (PrintableString in
/// one, UTF8String in the other): what differs, like `CN "service-ca" is
/// UTF8String here, PrintableString there`. None when the names are equal
/// byte for byte or differ in anything else.
pub(super) fn string_type_difference(a: &Name, b: &Name) -> Option<String> {
    let (a_rdns, b_rdns): (Vec<_>, Vec<_>) = (a.iter_rdn().collect(), b.iter_rdn().collect());
    if a_rdns.len() != b_rdns.len() {
        return None;
    }
    let mut first = None;
    for (ra, rb) in a_rdns.iter().zip(&b_rdns) {
        let (va, vb): (Vec<_>, Vec<_>) = (ra.iter().collect(), rb.iter().collect());
        if va.len() != vb.len() {
            return None;
        }
        for (x, y) in va.iter().zip(&vb) {
            if x.oid != y.oid || x.value.value() != y.value.value() {
                return None;
            }
            let (tx, ty) = (x.value.tag(), y.value.tag());
            if tx != ty && first.is_none() {
                first = Some(format!(
                    "{} \"{}\" is {} here, {} there",
                    attribute_name(&x.oid),
                    String::from_utf8_lossy(x.value.value()).escape_debug(),
                    tag_name(tx),
                    tag_name(ty)
                ));
            }
        }
    }
    first
}

fn attribute_name(oid: &der::asn1::ObjectIdentifier) -> String {
    const KNOWN: &[(&str, &str)] = &[
        ("2.5.4.3", "CN"),
        ("2.5.4.6", "C"),
        ("2.5.4.7", "L"),
        ("2.5.4.8", "ST"),
        ("2.5.4.10", "O"),
        ("2.5.4.11", "OU"),
    ];
    let dotted = oid.to_string();
    KNOWN
        .iter()
        .find(|(o, _)| *o == dotted)
        .map(|(_, n)| n.to_string())
        .unwrap_or(dotted)
}

fn tag_name(tag: Tag) -> String {
    match tag {
        Tag::Utf8String => "UTF8String".into(),
        Tag::PrintableString => "PrintableString".into(),
        Tag::Ia5String => "IA5String".into(),
        Tag::TeletexString => "TeletexString".into(),
        Tag::BmpString => "BMPString".into(),
        Tag::VisibleString => "VisibleString".into(),
        other => other.to_string(),
    }
}
