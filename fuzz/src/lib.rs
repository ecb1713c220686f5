//! Shared pieces of the fuzz targets and of the corpus generator.
//!
//! - [`pool`]: a deterministic set of valid certificates made with
//!   pki-core's own issuance (roots, intermediates, cross-signed bridges,
//!   leaves), built once per process from a seeded ChaCha20 RNG;
//! - [`CertSource`] / [`Edit`]: the structure-aware description of one
//!   certificate of a `path_validation` input: a pool certificate as it is,
//!   a byte-mutated copy, a copy whose TBSCertificate is mutated and then
//!   re-signed with a pool key, or raw bytes;
//! - [`split_state_input`] / [`join_state_files`]: the framing of
//!   `state_file` inputs (the store's files, NUL-separated).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use arbitrary::Arbitrary;
use pki_core::{
    Certificate, CertificateAuthority, CertificateParams, KeyAlgorithm, PrivateKey, Profile,
    cross_sign,
};
use pki_rotate::signer::document::{
    CA_BUNDLE, SIGNER_BRIDGE, SIGNER_CERT, SIGNER_KEY, STATE_FILE, leaf_cert_path, leaf_key_path,
};
use pki_rotate::{File, Files};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::sync::OnceLock;
use time::{Duration, OffsetDateTime, macros::datetime};

/// The issuance time of the pool; verification times are relative to it.
pub const NOW: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

/// The seed of every RNG used here: same seed, same pool, same corpus.
pub const SEED: u64 = 0x5eed_f022;

/// A pool certificate with a human label (for debugging reproducers).
#[derive(Clone, Debug)]
pub struct PoolCert {
    /// What it is, e.g. `bridge-a` or `leaf-under-intermediate`.
    pub label: &'static str,
    /// The certificate.
    pub cert: Certificate,
}

/// Valid certificates and the P-256 keys that signed them.
pub struct Pool {
    /// Certificates; index 0 is a server leaf, then the others in no
    /// meaningful order.
    pub certs: Vec<PoolCert>,
    /// P-256 keys of the pool (CA keys first) for re-signing mutated TBS.
    pub p256_keys: Vec<(&'static str, p256::ecdsa::SigningKey)>,
    /// Private keys of the pool in pki-core form (for the corpus).
    pub keys: Vec<(&'static str, PrivateKey)>,
}

impl Pool {
    /// The certificate at `i` modulo the pool size.
    pub fn cert(&self, i: u8) -> &Certificate {
        &self.certs[usize::from(i) % self.certs.len()].cert
    }
}

fn p256(key: &PrivateKey) -> p256::ecdsa::SigningKey {
    use p256::pkcs8::DecodePrivateKey;
    p256::ecdsa::SigningKey::from_pkcs8_der(&key.to_pkcs8_der().expect("pkcs8"))
        .expect("pool key is P-256")
}

fn intermediate(
    parent: &CertificateAuthority,
    cn: &str,
    path_len: Option<u8>,
    at: OffsetDateTime,
    lifetime: Duration,
    rng: &mut ChaCha20Rng,
) -> CertificateAuthority {
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, rng).expect("key");
    let params = CertificateParams::new(Profile::IntermediateCa { path_len }, cn, at, lifetime)
        .expect("params");
    let cert = parent
        .issue(&params, &key.public_key().expect("spki"), rng)
        .expect("intermediate");
    CertificateAuthority::new(cert, key).expect("ca")
}

struct LeafSpec<'a> {
    profile: Profile,
    cn: &'a str,
    dns: &'a [&'a str],
    ips: &'a [&'a str],
    at: OffsetDateTime,
    lifetime: Duration,
}

fn leaf(
    ca: &CertificateAuthority,
    spec: &LeafSpec<'_>,
    key: &PrivateKey,
    rng: &mut ChaCha20Rng,
) -> Certificate {
    let mut p =
        CertificateParams::new(spec.profile, spec.cn, spec.at, spec.lifetime).expect("params");
    p.dns_names = spec.dns.iter().map(|s| s.to_string()).collect();
    p.ip_addresses = spec.ips.iter().map(|s| s.parse().expect("ip")).collect();
    ca.issue(&p, &key.public_key().expect("spki"), rng)
        .expect("leaf")
}

fn build_pool() -> Pool {
    let mut rng = ChaCha20Rng::seed_from_u64(SEED);
    let rng = &mut rng;
    let p = KeyAlgorithm::EcdsaP256;
    let rotated_at = NOW + Duration::days(395);

    // The service-CA rotation: old CA, new CA with the same subject, and
    // the two bridges.
    let old = CertificateAuthority::generate_root("service-ca", p, NOW, Duration::days(790), rng)
        .expect("root");
    let new_key = PrivateKey::generate(p, rng).expect("key");
    let mut params = CertificateParams::new(
        Profile::RootCa,
        "service-ca",
        rotated_at,
        Duration::days(790),
    )
    .expect("params");
    params.subject = old.cert.subject().clone();
    let new = CertificateAuthority::new(params.self_signed(&new_key, rng).expect("root"), new_key)
        .expect("ca");
    let bridge_a =
        cross_sign(&old.cert, &new, rotated_at + Duration::days(395), rng).expect("bridge a");
    let bridge_b = cross_sign(&new.cert, &old, old.cert.not_after(), rng).expect("bridge b");

    // A two-level hierarchy whose first intermediate is also cross-signed
    // by the service CA, and whose second violates the pathLenConstraint.
    let other =
        CertificateAuthority::generate_root("other-root", p, NOW, Duration::days(3650), rng)
            .expect("root");
    let issuing = intermediate(
        &other,
        "issuing-ca",
        Some(0),
        NOW,
        Duration::days(1825),
        rng,
    );
    let sub = intermediate(
        &issuing,
        "sub-issuing-ca",
        None,
        NOW,
        Duration::days(1000),
        rng,
    );
    let issuing_x = cross_sign(&issuing.cert, &old, old.cert.not_after(), rng).expect("cross");

    // RSA: a 2048-bit root, a P-256 intermediate signed with RSA, and a leaf
    // carrying the RSA key (keyEncipherment).
    let rsa_root = CertificateAuthority::generate_root(
        "rsa-root",
        KeyAlgorithm::Rsa2048,
        NOW,
        Duration::days(3650),
        rng,
    )
    .expect("rsa root");
    let rsa_issuing = intermediate(
        &rsa_root,
        "rsa-issuing",
        None,
        NOW,
        Duration::days(1825),
        rng,
    );

    let k_web = PrivateKey::generate(p, rng).expect("key");
    let k_new = PrivateKey::generate(p, rng).expect("key");
    let k_api = PrivateKey::generate(p, rng).expect("key");
    let k_client = PrivateKey::generate(p, rng).expect("key");
    let year = Duration::days(365);
    let web = leaf(
        &old,
        &LeafSpec {
            profile: Profile::Server,
            cn: "web",
            dns: &["web.ns.svc", "web.ns.svc.cluster.local"],
            ips: &["10.0.0.1"],
            at: NOW,
            lifetime: year,
        },
        &k_web,
        rng,
    );
    let web_new = leaf(
        &new,
        &LeafSpec {
            profile: Profile::ServerClient,
            cn: "web",
            dns: &["web.ns.svc", "*.apps.example.com"],
            ips: &[],
            at: rotated_at,
            lifetime: year,
        },
        &k_new,
        rng,
    );
    let api = leaf(
        &issuing,
        &LeafSpec {
            profile: Profile::Server,
            cn: "api.example.com",
            dns: &["api.example.com"],
            ips: &["::1", "192.168.1.10"],
            at: NOW,
            lifetime: year,
        },
        &k_api,
        rng,
    );
    let client = leaf(
        &sub,
        &LeafSpec {
            profile: Profile::Client,
            cn: "client",
            dns: &["client.example.com"],
            ips: &[],
            at: NOW,
            lifetime: year,
        },
        &k_client,
        rng,
    );
    let rsa_leaf = leaf(
        &rsa_issuing,
        &LeafSpec {
            profile: Profile::Server,
            cn: "rsa.example.com",
            dns: &["rsa.example.com"],
            ips: &["127.0.0.1"],
            at: NOW,
            lifetime: year,
        },
        &rsa_root.key,
        rng,
    );
    let short = leaf(
        &old,
        &LeafSpec {
            profile: Profile::Server,
            cn: "short",
            dns: &["short.ns.svc"],
            ips: &[],
            at: NOW + Duration::days(1),
            lifetime: Duration::hours(1),
        },
        &k_web,
        rng,
    );

    let certs = vec![
        PoolCert {
            label: "leaf-old-ca",
            cert: web,
        },
        PoolCert {
            label: "service-ca-old",
            cert: old.cert.clone(),
        },
        PoolCert {
            label: "service-ca-new",
            cert: new.cert.clone(),
        },
        PoolCert {
            label: "bridge-a-old-by-new",
            cert: bridge_a,
        },
        PoolCert {
            label: "bridge-b-new-by-old",
            cert: bridge_b,
        },
        PoolCert {
            label: "leaf-new-ca",
            cert: web_new,
        },
        PoolCert {
            label: "other-root",
            cert: other.cert.clone(),
        },
        PoolCert {
            label: "issuing-ca-pathlen0",
            cert: issuing.cert.clone(),
        },
        PoolCert {
            label: "issuing-ca-cross-signed",
            cert: issuing_x,
        },
        PoolCert {
            label: "sub-issuing-ca",
            cert: sub.cert.clone(),
        },
        PoolCert {
            label: "leaf-issuing-ca",
            cert: api,
        },
        PoolCert {
            label: "client-leaf-sub-ca",
            cert: client,
        },
        PoolCert {
            label: "rsa-root",
            cert: rsa_root.cert.clone(),
        },
        PoolCert {
            label: "rsa-issuing",
            cert: rsa_issuing.cert.clone(),
        },
        PoolCert {
            label: "rsa-leaf",
            cert: rsa_leaf,
        },
        PoolCert {
            label: "short-lived-leaf",
            cert: short,
        },
    ];
    let keys = vec![
        ("service-ca-old", old.key.clone()),
        ("service-ca-new", new.key.clone()),
        ("other-root", other.key.clone()),
        ("issuing-ca", issuing.key.clone()),
        ("sub-issuing-ca", sub.key.clone()),
        ("rsa-issuing", rsa_issuing.key.clone()),
        ("leaf-web", k_web),
        ("leaf-new", k_new),
        ("leaf-api", k_api),
        ("leaf-client", k_client),
        ("rsa-root", rsa_root.key.clone()),
    ];
    let p256_keys = keys
        .iter()
        .filter(|(_, k)| k.algorithm() == KeyAlgorithm::EcdsaP256)
        .map(|(l, k)| (*l, p256(k)))
        .collect();
    Pool {
        certs,
        p256_keys,
        keys,
    }
}

/// The pool, built on first use.
pub fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(build_pool)
}

/// One byte-level edit. Positions wrap around the current length.
#[derive(Arbitrary, Debug, Clone)]
pub enum Edit {
    /// XOR one byte with `mask`.
    Flip { at: u16, mask: u8 },
    /// Overwrite one byte.
    Set { at: u16, byte: u8 },
    /// Keep the first `len` bytes.
    Truncate { len: u16 },
    /// Remove up to `len` bytes at `at`.
    Remove { at: u16, len: u8 },
    /// Insert `bytes` at `at`.
    Insert { at: u16, bytes: Vec<u8> },
    /// Overwrite `len` bytes at `at` with bytes of another pool certificate
    /// starting at `from` (same-length splice: DER lengths stay plausible).
    Splice {
        donor: u8,
        from: u16,
        at: u16,
        len: u8,
    },
}

/// At most this many edits are applied per certificate.
pub const MAX_EDITS: usize = 8;

/// Applies `edits` (the first [`MAX_EDITS`]) to `bytes`.
pub fn apply_edits(bytes: &mut Vec<u8>, edits: &[Edit], pool: &Pool) {
    for edit in edits.iter().take(MAX_EDITS) {
        let len = bytes.len();
        let pos = |at: u16| if len == 0 { 0 } else { usize::from(at) % len };
        match edit {
            Edit::Flip { at, mask } => {
                if len > 0 {
                    bytes[pos(*at)] ^= mask;
                }
            }
            Edit::Set { at, byte } => {
                if len > 0 {
                    bytes[pos(*at)] = *byte;
                }
            }
            Edit::Truncate { len: n } => bytes.truncate(usize::from(*n)),
            Edit::Remove { at, len: n } => {
                let start = pos(*at);
                let end = (start + usize::from(*n)).min(len);
                bytes.drain(start..end);
            }
            Edit::Insert { at, bytes: ins } => {
                let start = if len == 0 {
                    0
                } else {
                    usize::from(*at) % (len + 1)
                };
                let ins = &ins[..ins.len().min(64)];
                bytes.splice(start..start, ins.iter().copied());
            }
            Edit::Splice {
                donor,
                from,
                at,
                len: n,
            } => {
                let donor = pool.cert(*donor).der();
                if len == 0 || donor.is_empty() {
                    continue;
                }
                let from = usize::from(*from) % donor.len();
                let start = pos(*at);
                let n = usize::from(*n).min(donor.len() - from).min(len - start);
                bytes[start..start + n].copy_from_slice(&donor[from..from + n]);
            }
        }
    }
}

/// Where one certificate of a `path_validation` input comes from.
#[derive(Arbitrary, Debug, Clone)]
pub enum CertSource {
    /// A pool certificate, unchanged.
    Pool(u8),
    /// A pool certificate with byte edits anywhere in its DER (the
    /// signature no longer matches unless the edits miss the signed part).
    Mutated { base: u8, edits: Vec<Edit> },
    /// A pool certificate whose TBSCertificate bytes are edited and then
    /// signed again (ECDSA P-256 with SHA-256) with the pool's P-256 key
    /// number `signer`: the signature can verify, so the checks after it
    /// see the mutated content.
    Resigned {
        base: u8,
        edits: Vec<Edit>,
        signer: u8,
    },
    /// Arbitrary bytes.
    Raw(Vec<u8>),
}

impl CertSource {
    /// The DER this source stands for.
    pub fn der(&self, pool: &Pool) -> Vec<u8> {
        match self {
            CertSource::Pool(i) => pool.cert(*i).der().to_vec(),
            CertSource::Mutated { base, edits } => {
                let mut der = pool.cert(*base).der().to_vec();
                apply_edits(&mut der, edits, pool);
                der
            }
            CertSource::Resigned {
                base,
                edits,
                signer,
            } => {
                let der = pool.cert(*base).der();
                let Some(tbs) = tbs_of(der) else {
                    return der.to_vec();
                };
                let mut tbs = tbs.to_vec();
                apply_edits(&mut tbs, edits, pool);
                let key = &pool.p256_keys[usize::from(*signer) % pool.p256_keys.len()].1;
                sign_p256(&tbs, key)
            }
            CertSource::Raw(bytes) => bytes.clone(),
        }
    }

    /// The certificate, if the DER parses.
    pub fn cert(&self, pool: &Pool) -> Option<Certificate> {
        match self {
            CertSource::Pool(i) => Some(pool.cert(*i).clone()),
            _ => Certificate::from_der(&self.der(pool)).ok(),
        }
    }
}

/// Header length and content length of the DER TLV at the start of `der`
/// (definite lengths only).
fn tlv(der: &[u8]) -> Option<(usize, usize)> {
    let first = *der.get(1)?;
    if first < 0x80 {
        return Some((2, usize::from(first)));
    }
    let n = usize::from(first & 0x7f);
    if n == 0 || n > 4 {
        return None;
    }
    let mut len = 0usize;
    for i in 0..n {
        len = (len << 8) | usize::from(*der.get(2 + i)?);
    }
    Some((2 + n, len))
}

/// The TBSCertificate bytes (with their header) of a certificate's DER.
pub fn tbs_of(der: &[u8]) -> Option<&[u8]> {
    let (h, _) = tlv(der)?;
    let inner = der.get(h..)?;
    let (h2, l2) = tlv(inner)?;
    inner.get(..h2 + l2)
}

fn der_len(len: usize, out: &mut Vec<u8>) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
}

/// `Certificate ::= SEQUENCE { tbs, ecdsa-with-SHA256, BIT STRING sig }`,
/// with `tbs` taken as raw bytes (it may be malformed: that is the point).
pub fn sign_p256(tbs: &[u8], key: &p256::ecdsa::SigningKey) -> Vec<u8> {
    use signature::Signer;
    // AlgorithmIdentifier { ecdsa-with-SHA256 } (RFC 5758: no parameters).
    const ALG: [u8; 12] = [
        0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02,
    ];
    let sig: p256::ecdsa::DerSignature = key.sign(tbs);
    let sig = sig.as_bytes();
    let mut bits = vec![0x03];
    der_len(sig.len() + 1, &mut bits);
    bits.push(0);
    bits.extend_from_slice(sig);
    let body_len = tbs.len() + ALG.len() + bits.len();
    let mut out = vec![0x30];
    der_len(body_len, &mut out);
    out.extend_from_slice(tbs);
    out.extend_from_slice(&ALG);
    out.extend_from_slice(&bits);
    out
}

/// Separator between files in a `state_file` input.
pub const STATE_SEPARATOR: u8 = 0;

/// The fixed slots of a `state_file` input, in order; after them come
/// triples (leaf name, `certs/NAME/tls.crt`, `certs/NAME/tls.key`).
pub const STATE_SLOTS: [(&str, bool); 5] = [
    (STATE_FILE, false),
    (SIGNER_CERT, false),
    (SIGNER_KEY, true),
    (CA_BUNDLE, false),
    (SIGNER_BRIDGE, false),
];

/// Splits a `state_file` input: NUL-separated parts fill [`STATE_SLOTS`]
/// (an empty part means the file is absent), then leaf triples. The first
/// part is also the JSON document given to `SignerState::from_json`.
pub fn split_state_input(data: &[u8]) -> (&[u8], Files) {
    let parts: Vec<&[u8]> = data.split(|b| *b == STATE_SEPARATOR).collect();
    let mut files = Files::new();
    let mut put = |path: String, contents: &[u8], secret: bool| {
        if !contents.is_empty() {
            // A leaf name that is not a valid path cannot be in a store:
            // such a file is simply absent.
            let _ = files.insert(
                path,
                File {
                    contents: contents.to_vec().into(),
                    secret,
                },
            );
        }
    };
    for (part, (path, secret)) in parts.iter().zip(STATE_SLOTS) {
        put(path.to_string(), part, secret);
    }
    for triple in parts.get(STATE_SLOTS.len()..).unwrap_or(&[]).chunks(3) {
        let name = String::from_utf8_lossy(triple[0]);
        if let Some(cert) = triple.get(1) {
            put(leaf_cert_path(&name), cert, false);
        }
        if let Some(key) = triple.get(2) {
            put(leaf_key_path(&name), key, true);
        }
    }
    (parts[0], files)
}

/// The inverse of [`split_state_input`], for the corpus.
pub fn join_state_files(files: &Files) -> Vec<u8> {
    let mut parts: Vec<Vec<u8>> = STATE_SLOTS
        .iter()
        .map(|(path, _)| files.get(*path).map(<[u8]>::to_vec).unwrap_or_default())
        .collect();
    for (path, _) in files.iter() {
        let Some(name) = path
            .strip_prefix("certs/")
            .and_then(|p| p.strip_suffix("/tls.crt"))
        else {
            continue;
        };
        let get = |p: String| files.get(&p).map(<[u8]>::to_vec).unwrap_or_default();
        parts.push(name.as_bytes().to_vec());
        parts.push(get(leaf_cert_path(name)));
        parts.push(get(leaf_key_path(name)));
    }
    parts.join(&[STATE_SEPARATOR][..])
}

/// Instants worth checking for a certificate-bearing state: its edges, one
/// second beyond them, and the extremes of X.509 time.
pub fn edge_times(cert: &Certificate) -> Vec<OffsetDateTime> {
    let mut times = vec![
        cert.not_before(),
        cert.not_after(),
        datetime!(1950-01-01 00:00 UTC),
        datetime!(9999-12-31 23:59:59 UTC),
    ];
    times.extend(cert.not_before().checked_sub(Duration::seconds(1)));
    times.extend(cert.not_after().checked_add(Duration::seconds(1)));
    times
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resigned_pool_cert_without_edits_verifies_with_the_right_key() {
        let pool = pool();
        // Pool cert 0 is signed by service-ca-old, p256 key 0.
        let src = CertSource::Resigned {
            base: 0,
            edits: vec![],
            signer: 0,
        };
        let cert = src.cert(pool).expect("parses");
        let issuer = pool.cert(1);
        pki_core::verify_signature(issuer.public_key(), &cert).expect("verifies");
    }

    #[test]
    fn state_framing_roundtrips() {
        let mut files = StateFiles::new();
        for (p, s) in [
            (STATE_FILE, false),
            (SIGNER_CERT, false),
            (CA_BUNDLE, false),
            ("certs/web/tls.crt", false),
            ("certs/web/tls.key", true),
        ] {
            files.insert(
                p.into(),
                StateFile {
                    contents: p.as_bytes().to_vec().into(),
                    secret: s,
                },
            );
        }
        let joined = join_state_files(&files);
        let (json, back) = split_state_input(&joined);
        assert_eq!(json, STATE_FILE.as_bytes());
        assert_eq!(
            back.keys().collect::<Vec<_>>(),
            files.keys().collect::<Vec<_>>()
        );
    }
}

/// Which document the `documents` target reads: the first input byte,
/// modulo the number of kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentKind {
    /// A CA set (`pki set`).
    Set,
    /// A key ring (`pki keys`).
    KeyRing,
    /// A credential (`pki cred`).
    Credential,
}

/// Frames a document's files for the `documents` target: the kind byte,
/// then `path NUL contents NUL path NUL contents …`.
pub fn join_document_files(kind: DocumentKind, files: &Files) -> Vec<u8> {
    let mut out = vec![match kind {
        DocumentKind::Set => 0,
        DocumentKind::KeyRing => 1,
        DocumentKind::Credential => 2,
    }];
    for (path, file) in files.iter() {
        out.extend_from_slice(path.as_bytes());
        out.push(STATE_SEPARATOR);
        out.extend_from_slice(&file.contents);
        out.push(STATE_SEPARATOR);
    }
    out
}

/// The inverse of [`join_document_files`] on arbitrary bytes: a path that is
/// not a valid store path is simply absent, a file whose path ends in `key`
/// or names a credential is secret (as the engines write them).
pub fn split_document_input(data: &[u8]) -> Option<(DocumentKind, Files)> {
    let (&first, rest) = data.split_first()?;
    let kind = match first % 3 {
        0 => DocumentKind::Set,
        1 => DocumentKind::KeyRing,
        _ => DocumentKind::Credential,
    };
    let mut files = Files::new();
    let parts: Vec<&[u8]> = rest.split(|b| *b == STATE_SEPARATOR).collect();
    for pair in parts.chunks(2) {
        let [path, contents] = pair else { continue };
        let path = String::from_utf8_lossy(path).into_owned();
        let secret = path.ends_with(".key")
            || path.starts_with("creds/")
            || path.ends_with("state.json") && kind == DocumentKind::Credential;
        let _ = files.insert(
            path,
            File {
                contents: contents.to_vec().into(),
                secret,
            },
        );
    }
    Some((kind, files))
}
