//! `Certificate::from_der` reads the usual certificate without x509-cert's
//! tree (the `shallow` module of `cert`) and hands every other to
//! x509-cert: what it reads itself x509-cert must accept, with the same
//! layout, validity and extensions, so that `Certificate::from_der`
//! accepts and refuses exactly what x509-cert's decoder does. And the
//! usual certificates (pki's own, most of x509-limbo's) must not need
//! x509-cert. What verification reads from a parsed certificate's DER
//! (version, signature, extensions, empty names, key) must be what the
//! decoded tree holds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use der::asn1::{Any, SetOfVec};
use pki_core::fuzzing::{check_against_x509_cert, check_raw_reads, reads_without_x509_cert};
use pki_core::{Certificate, pem};
use proptest::prelude::*;
use std::path::Path;
use std::sync::OnceLock;
use x509_cert::attr::AttributeTypeAndValue;
use x509_cert::name::{Name, RdnSequence, RelativeDistinguishedName};

mod support;

use support::{custom, fixtures::*};

/// Every certificate of the vendored x509-limbo cases: malformed names,
/// times, extensions and encodings that real validators meet.
fn limbo() -> &'static Vec<Vec<u8>> {
    static CERTS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    CERTS.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance/limbo/cases");
        let mut out = Vec::new();
        let mut cases: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        cases.sort();
        for case in cases {
            for file in ["leaf.pem", "intermediates.pem", "trusted.pem"] {
                let Ok(bytes) = std::fs::read(case.join(file)) else {
                    continue;
                };
                out.extend(
                    pem::read_blocks(&bytes)
                        .unwrap()
                        .into_iter()
                        .map(|b| b.der.to_vec()),
                );
            }
        }
        out
    })
}

/// A chain pki-core issued, as DER.
fn issued() -> &'static Vec<Vec<u8>> {
    static CERTS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    CERTS.get_or_init(|| {
        let root = new_root("root", 1);
        let inter = intermediate(&root, "issuing", Some(0), 2);
        let leaf = server_leaf(&inter, 3);
        [root.cert, inter.cert, leaf]
            .iter()
            .map(|c| c.der().to_vec())
            .collect()
    })
}

#[test]
fn every_limbo_certificate_decodes_alike_both_ways() {
    let certs = limbo();
    assert!(certs.len() > 300, "only {} certificates", certs.len());
    let mut read = 0;
    for (i, der) in certs.iter().enumerate() {
        if let Err(e) = check_against_x509_cert(der).and_then(|()| check_raw_reads(der)) {
            panic!("limbo certificate {i}: {e}");
        }
        read += usize::from(reads_without_x509_cert(der));
    }
    // The rest carry multi-attribute names, explicit FALSE criticality,
    // unusual string types or malformed parts on purpose.
    assert!(read * 10 > certs.len() * 9, "{read} of {}", certs.len());
}

/// DNS names and IP addresses are read from the subjectAltName's DER, the
/// entries as x509-cert's values only when asked for: both must agree.
#[test]
fn names_read_from_the_der_are_the_decoded_ones() {
    use x509_cert::ext::pkix::name::GeneralName;
    let mut with_names = 0;
    for der in limbo().iter().chain(issued()) {
        let Ok(cert) = Certificate::from_der(der) else {
            continue;
        };
        let sans = cert.subject_alt_names();
        let dns: Vec<String> = sans
            .iter()
            .filter_map(|n| match n {
                GeneralName::DnsName(d) => Some(d.as_str().to_string()),
                _ => None,
            })
            .collect();
        let ips: Vec<std::net::IpAddr> = sans
            .iter()
            .filter_map(|n| match n {
                GeneralName::IpAddress(o) => match o.as_bytes().len() {
                    4 => Some(<[u8; 4]>::try_from(o.as_bytes()).unwrap().into()),
                    16 => Some(<[u8; 16]>::try_from(o.as_bytes()).unwrap().into()),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        assert_eq!(cert.dns_names(), dns);
        assert_eq!(cert.ip_addresses(), ips);
        with_names += usize::from(!sans.is_empty());
    }
    assert!(with_names > 100, "{with_names}");
}

proptest! {
    /// Validity is kept as Unix seconds: `is_valid_at` must answer as the
    /// comparison of instants does, fractions of a second included.
    #[test]
    fn is_valid_at_compares_instants(pick in 0usize..3, offset in -3_000_000_000i64..3_000_000_000, edge in 0usize..3) {
        let cert = Certificate::from_der(&issued()[pick]).unwrap();
        let base = [cert.not_before(), cert.not_after(), cert.not_before()][edge];
        let at = base + time::Duration::nanoseconds(offset);
        prop_assert_eq!(
            cert.is_valid_at(at),
            cert.not_before() <= at && at <= cert.not_after()
        );
    }
}

#[test]
fn what_pki_issues_reads_without_x509_cert() {
    for der in issued() {
        assert!(reads_without_x509_cert(der));
        check_against_x509_cert(der).unwrap();
    }
}

#[test]
fn a_multi_attribute_rdn_is_decoded_by_x509_cert_and_reads_the_same() {
    let atv = |oid, value: &str| AttributeTypeAndValue {
        oid,
        value: Any::new(der::Tag::Utf8String, value.as_bytes()).unwrap(),
    };
    let rdn = RelativeDistinguishedName::from(
        SetOfVec::try_from(vec![atv(custom::CN, "web"), atv(custom::O, "org")]).unwrap(),
    );
    let mut seq = RdnSequence::default();
    seq.push(rdn);
    let subject: Name = der::Decode::from_der(&der::Encode::to_der(&seq).unwrap()).unwrap();
    let root = new_root("root", 4);
    let key =
        pki_core::PrivateKey::generate(pki_core::KeyAlgorithm::EcdsaP256, &mut rng(5)).unwrap();
    let cert = custom::issue(&root, root.cert.subject().clone(), subject, &key, vec![]);
    check_against_x509_cert(cert.der()).unwrap();
    assert!(!reads_without_x509_cert(cert.der()));
    let back = Certificate::from_der(cert.der()).unwrap();
    assert_eq!(back.subject().to_string(), "CN=web+O=org");
    assert_eq!(back.aki(), root.cert.ski());
    assert_eq!(back.not_after(), cert.not_after());
}

/// A DER TLV with a definite length.
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    match len {
        0..=0x7f => out.push(len as u8),
        0x80..=0xff => out.extend([0x81, len as u8]),
        _ => out.extend([0x82, (len >> 8) as u8, len as u8]),
    }
    out.extend_from_slice(content);
    out
}

/// (header length, content length) of the TLV at the start of `bytes`.
fn header(bytes: &[u8]) -> (usize, usize) {
    use der::{Decode, Reader};
    let mut r = der::SliceReader::new(bytes).unwrap();
    let h = der::Header::decode(&mut r).unwrap();
    (
        u32::from(r.position()) as usize,
        u32::from(h.length()) as usize,
    )
}

/// `der` with the serialNumber INTEGER's content octets replaced (the
/// signature no longer verifies; decoding does not look at it).
fn with_serial(der: &[u8], serial: &[u8]) -> Vec<u8> {
    let (h, n) = header(der);
    let cert = &der[h..h + n];
    let (th, tn) = header(cert);
    let tbs = &cert[th..th + tn];
    let after_tbs = &cert[th + tn..];
    let (vh, vn) = header(tbs);
    let version = &tbs[..vh + vn];
    let rest = &tbs[vh + vn..];
    let (sh, sn) = header(rest);
    let after_serial = &rest[sh + sn..];
    let new_tbs = tlv(0x30, &[version, &tlv(0x02, serial), after_serial].concat());
    tlv(0x30, &[new_tbs.as_slice(), after_tbs].concat())
}

#[test]
fn serial_numbers_of_every_length_and_encoding_decode_alike_both_ways() {
    let leaf = &issued()[2];
    let mut serials: Vec<Vec<u8>> = (0..=24).map(|n| vec![0x11; n]).collect();
    serials.extend([
        vec![0x00, 0x11],                      // a redundant leading zero
        vec![0xff, 0x80],                      // a redundant leading one
        vec![0x80],                            // negative
        [vec![0x00], vec![0x91; 20]].concat(), // 21 octets, the sign octet first
        [vec![0x00], vec![0x91; 21]].concat(), // 22
    ]);
    let mut accepted = Vec::new();
    for serial in &serials {
        let der = with_serial(leaf, serial);
        if let Err(e) = check_against_x509_cert(&der) {
            panic!("serial {}: {e}", hex::encode(serial));
        }
        if Certificate::from_der(&der).is_ok() {
            accepted.push(serial.len());
        }
    }
    // x509-cert reads up to 21 content octets (20, plus a sign octet some
    // issuers count in), and only minimal encodings.
    assert_eq!(
        accepted,
        [
            1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 1, 21
        ]
    );
}

/// A DER value as a tree: constructed values (tag bit 0x20) hold their
/// elements.
#[derive(Clone, Debug)]
enum Node {
    Primitive(u8, Vec<u8>),
    Constructed(u8, Vec<Node>),
}

fn parse_tree(mut bytes: &[u8]) -> Option<Vec<Node>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let tag = bytes[0];
        let (h, n) = {
            use der::{Decode, Reader};
            let mut r = der::SliceReader::new(bytes).ok()?;
            let header = der::Header::decode(&mut r).ok()?;
            (
                u32::from(r.position()) as usize,
                u32::from(header.length()) as usize,
            )
        };
        let content = bytes.get(h..h + n)?;
        out.push(if tag & 0x20 != 0 {
            Node::Constructed(tag, parse_tree(content)?)
        } else {
            Node::Primitive(tag, content.to_vec())
        });
        bytes = &bytes[h + n..];
    }
    Some(out)
}

/// How [`encode_tree`] changes the node it is pointed at.
#[derive(Clone, Copy, Debug)]
enum Edit {
    /// Its length in the long form with one octet (not minimal below 128).
    LongLength,
    /// Its length in the long form with two octets.
    LongerLength,
    /// Another tag octet.
    Tag(u8),
    /// Removed.
    Remove,
    /// Twice.
    Repeat,
    /// A primitive's content replaced.
    Content(u8, u8),
}

fn encode_tree(nodes: &[Node], target: usize, edit: Edit, counter: &mut usize) -> Vec<u8> {
    let mut out = Vec::new();
    for node in nodes {
        let this = *counter == target;
        *counter += 1;
        let (mut tag, content) = match node {
            Node::Primitive(tag, content) => (*tag, content.clone()),
            Node::Constructed(tag, children) => {
                (*tag, encode_tree(children, target, edit, counter))
            }
        };
        let mut content = content;
        let mut times = 1;
        let mut long = 0;
        if this {
            match edit {
                Edit::LongLength => long = 1,
                Edit::LongerLength => long = 2,
                Edit::Tag(t) => tag = t,
                Edit::Remove => times = 0,
                Edit::Repeat => times = 2,
                Edit::Content(len, byte) => {
                    if matches!(node, Node::Primitive(..)) {
                        content = vec![byte; usize::from(len % 24)];
                    }
                }
            }
        }
        let mut tlv = match long {
            1 if content.len() < 0x100 => [vec![tag, 0x81, content.len() as u8], content].concat(),
            2 => [
                vec![tag, 0x82, (content.len() >> 8) as u8, content.len() as u8],
                content,
            ]
            .concat(),
            _ => tlv(tag, &content),
        };
        if times == 0 {
            tlv.clear();
        }
        for _ in 0..times {
            out.extend_from_slice(&tlv);
        }
    }
    out
}

fn edit_strategy() -> impl Strategy<Value = Edit> {
    prop_oneof![
        Just(Edit::LongLength),
        Just(Edit::LongerLength),
        any::<u8>().prop_map(Edit::Tag),
        Just(Edit::Remove),
        Just(Edit::Repeat),
        (any::<u8>(), any::<u8>()).prop_map(|(l, b)| Edit::Content(l, b)),
    ]
}

fn mutate(der: &[u8], edits: &[(usize, u8)]) -> Vec<u8> {
    let mut out = der.to_vec();
    for (at, byte) in edits {
        let i = at % out.len();
        out[i] = *byte;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Byte edits of certificates pki issued and of limbo's: whatever the
    /// shallow decoder accepts, x509-cert accepts with the same fields,
    /// and the other way round.
    #[test]
    fn edited_certificates_decode_alike_both_ways(
        pick in any::<usize>(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cut in proptest::option::of(any::<usize>()),
    ) {
        let pool: Vec<&Vec<u8>> = issued().iter().chain(limbo().iter()).collect();
        let mut der = mutate(pool[pick % pool.len()], &edits);
        if let Some(cut) = cut {
            der.truncate(cut % (der.len() + 1));
        }
        prop_assert_eq!(check_against_x509_cert(&der), Ok(()));
        prop_assert_eq!(check_raw_reads(&der), Ok(()));
        // And the certificate reads the same whichever decoder decoded it.
        if let Ok(cert) = Certificate::from_der(&der) {
            prop_assert_eq!(cert.der(), der.as_slice());
        }
    }

    /// Structural edits of any element of a certificate (a TLV of pki's
    /// or of limbo's): lengths in a longer form than DER allows, other
    /// tags, elements removed or repeated, other contents.
    #[test]
    fn edited_elements_decode_alike_both_ways(
        pick in any::<usize>(),
        target in any::<usize>(),
        edit in edit_strategy(),
    ) {
        let pool: Vec<&Vec<u8>> = issued().iter().chain(limbo().iter()).collect();
        let der = pool[pick % pool.len()];
        let Some(tree) = parse_tree(der) else { return Ok(()) };
        let mut count = 0;
        encode_tree(&tree, usize::MAX, edit, &mut count);
        let edited = encode_tree(&tree, target % count, edit, &mut 0);
        prop_assert_eq!(check_against_x509_cert(&edited), Ok(()));
        prop_assert_eq!(check_raw_reads(&edited), Ok(()));
    }

    /// Edits of the length octets move the structure around more than
    /// byte flips anywhere.
    #[test]
    fn shifted_lengths_decode_alike_both_ways(
        pick in any::<usize>(),
        at in any::<usize>(),
        delta in -3i16..=3,
    ) {
        let pool = issued();
        let mut der = pool[pick % pool.len()].clone();
        let i = at % der.len();
        der[i] = (i16::from(der[i]) + delta).clamp(0, 255) as u8;
        prop_assert_eq!(check_against_x509_cert(&der), Ok(()));
    }
}
