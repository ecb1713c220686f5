//! Parsed X.509 certificates that keep their original DER.

mod extensions;
pub(crate) mod layout;
mod pre1970;
mod raw;
mod san;
mod shallow;

use extensions::{AuthorityKeyId, Held, Read};
use shallow::RawExtension;

pub use raw::check_raw_reads;
pub use shallow::{check_against_x509_cert, reads_without_x509_cert};

use crate::dn::CanonicalName;
use crate::error::{Error, Result};
use crate::pem;
use der::Decode;
pub(crate) use layout::Layout;
use sha2::{Digest, Sha256};
use std::fmt;
use std::sync::{Arc, OnceLock};
use time::OffsetDateTime;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{KeyUsage, NameConstraints};
use x509_cert::name::Name;
use x509_cert::spki::SubjectPublicKeyInfoOwned;

pub use der::asn1::ObjectIdentifier;
pub use x509_cert::ext::pkix::KeyUsages;

/// The basicConstraints extension, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BasicConstraintsInfo {
    /// cA: the subject is a CA.
    pub ca: bool,
    /// pathLenConstraint, when present.
    pub path_len: Option<u8>,
    /// Whether the extension is marked critical.
    pub critical: bool,
}

/// NotBefore or NotAfter from the Unix seconds kept (read from a valid
/// X.509 time, so within `OffsetDateTime`'s range).
fn from_unix(seconds: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(seconds).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// An X.509 certificate: its exact DER plus the fields and extensions pki
/// reads, decoded once when the certificate is parsed. The whole decoded
/// structure ([`Certificate::x509`]) is decoded again on first use and
/// kept: most certificates pki holds, a store's leaves, are only ever
/// checked through the fields, and the decoded structure would be most of
/// their memory.
///
/// Cloning is cheap: clones share one immutable parsed certificate (an
/// `Arc`), and what is derived from it later (fingerprints, canonical
/// names, whether it is self-signed) is computed at most once for all of
/// them.
#[derive(Clone)]
pub struct Certificate(Arc<Parsed>);

struct Parsed {
    // A Vec, not a boxed slice: shrinking the decoder's buffer would copy it.
    der: Vec<u8>,
    layout: Layout,
    /// NotBefore and NotAfter as Unix seconds (certificate times are whole
    /// seconds): cheap to compare and subtract for a check that runs over
    /// thousands of certificates, and half the room of two
    /// `OffsetDateTime`s.
    validity_unix: (i64, i64),
    basic_constraints: Option<BasicConstraintsInfo>,
    key_usage: Option<KeyUsage>,
    ski: Option<Held>,
    aki: Option<AuthorityKeyId>,
    eku: Option<std::borrow::Cow<'static, [ObjectIdentifier]>>,
    /// The subjectAltName value (checked when parsed).
    san: Option<Held>,
    memo: Memo,
}

/// Values derived from a certificate on first use, shared by its clones.
#[derive(Default)]
pub(crate) struct Memo {
    /// The SHA-256 of the SubjectPublicKeyInfo that verified the
    /// certificate's signature, once one has (a signature verifies with
    /// one key only).
    pub(crate) verified_by: OnceLock<[u8; 32]>,
    /// The (role, purpose) pairs whose per-certificate profile checks
    /// passed, one bit each (see `verify::profile::check_cert`): a leaf
    /// checked against several bundles, or an issuer shared by a thousand
    /// chains, is checked once. Failures are not kept; they are found
    /// again, with their message.
    pub(crate) profile_passed: std::sync::atomic::AtomicU8,
    /// The rest, made on first use: most leaves a store holds never need
    /// any of it, and held inline it would be a third of a certificate.
    more: OnceLock<Box<MoreMemo>>,
}

#[derive(Default)]
pub(crate) struct MoreMemo {
    /// What `x509-cert` decodes instead of `der` when the notBefore is a
    /// UTCTime of 1950 to 1969 (see `pre1970`; set when parsed); None for
    /// every other certificate.
    decodable: Option<Box<[u8]>>,
    /// The decoded structure, once asked for.
    tree: OnceLock<Box<x509_cert::Certificate>>,
    fingerprint: OnceLock<[u8; 32]>,
    spki_sha256: OnceLock<[u8; 32]>,
    subject: OnceLock<CanonicalName>,
    issuer: OnceLock<CanonicalName>,
    /// The subjectAltName entries as x509-cert's values.
    san: OnceLock<Vec<GeneralName>>,
    /// The SubjectPublicKeyInfo, decoded.
    spki: OnceLock<SubjectPublicKeyInfoOwned>,
    /// The public key as signature checks use it (see
    /// `verify::signature::decoded_key`).
    pub(crate) decoded_key: OnceLock<Box<crate::signatures::DecodedKey>>,
    /// Whether the certificate's signature verifies with its own key (asked
    /// only of unusual trust anchors).
    pub(crate) self_signed: OnceLock<bool>,
    /// The nameConstraints extension, decoded.
    pub(crate) name_constraints: OnceLock<Result<Option<Arc<NameConstraints>>, der::Error>>,
}

impl Memo {
    pub(crate) fn more(&self) -> &MoreMemo {
        self.more.get_or_init(Box::default)
    }
}

impl PartialEq for Certificate {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.der == other.0.der
    }
}
impl Eq for Certificate {}

impl std::hash::Hash for Certificate {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.der.hash(state)
    }
}

impl fmt::Debug for Certificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Certificate")
            .field("id", &self.id())
            .field("subject", &self.subject().to_string())
            .field("issuer", &self.issuer().to_string())
            .finish()
    }
}

/// Decodes a certificate that was decoded before. Every [`Certificate`] was
/// made by decoding exactly these bytes (`Certificate::from_der_vec`: its
/// DER, or the copy with a stand-in notBefore), and DER decoding is
/// deterministic, so this cannot fail.
#[allow(clippy::expect_used)]
fn decode_again(der: &[u8]) -> x509_cert::Certificate {
    x509_cert::Certificate::from_der(der).expect("a parsed certificate decodes again")
}

impl Certificate {
    /// Parses a DER certificate. Malformed extensions that pki reads (SKI,
    /// AKI, basic constraints, key usage, EKU, SAN) are errors here, so the
    /// accessors never fail.
    ///
    /// # Errors
    ///
    /// [`Error::CertificateDecode`] when `der` is not a DER certificate,
    /// [`Error::MalformedExtension`] when an extension pki reads (SKI, AKI,
    /// basic constraints, key usage, EKU, SAN) cannot be decoded, and
    /// [`Error::DuplicateExtension`] when one of those appears twice.
    pub fn from_der(der: &[u8]) -> Result<Self> {
        Self::from_der_vec(der.to_vec())
    }

    /// [`Certificate::from_der`] without copying the buffer.
    pub(crate) fn from_der_vec(der: Vec<u8>) -> Result<Self> {
        // The usual certificate is read without x509-cert's tree (see
        // `shallow`); x509-cert decides about every other.
        if let Some(shallow) = shallow::decode(&der) {
            let read = extensions::read(&der, || shallow.extensions())?;
            let (layout, not_before, not_after) = (
                shallow.layout.clone(),
                shallow.not_before,
                shallow.not_after,
            );
            return Ok(Self::from_fields(
                der,
                layout,
                (not_before, not_after),
                None,
                read,
            ));
        }
        let decoded = match x509_cert::Certificate::from_der(&der) {
            Ok(inner) => (inner, None),
            Err(source) => {
                // `der` 0.8 holds no time before 1970: a notBefore of 1950
                // to 1969 is read here and decoded through a stand-in.
                let Some((decodable, not_before)) = pre1970::decodable(&der) else {
                    return Err(Error::CertificateDecode { source });
                };
                let inner = x509_cert::Certificate::from_der(&decodable)
                    .map_err(|_| Error::CertificateDecode { source })?;
                (inner, Some((decodable.into(), not_before)))
            }
        };
        let (inner, pre1970) = decoded;
        let tbs = inner.tbs_certificate();
        let read = extensions::read(&der, || {
            tbs.extensions()
                .map(|e| e.as_slice())
                .unwrap_or_default()
                .iter()
                .map(|e| (e.extn_id.as_bytes(), e.critical, e.extn_value.as_bytes()))
        })?;
        // The one place that reads the tree's validity (clippy.toml).
        #[allow(clippy::disallowed_methods)]
        let validity = tbs.validity();
        let (decodable, not_before) = match pre1970 {
            Some((decodable, not_before)) => (Some(decodable), not_before),
            None => (None, crate::datetime::from_x509(&validity.not_before)),
        };
        let not_after = crate::datetime::from_x509(&validity.not_after);
        // x509-cert decoded this DER, so the walk cannot fail; if it did,
        // the certificate would be refused, not misread.
        let layout = Layout::of(&der).ok_or(Error::CertificateDecode {
            source: der::ErrorKind::Failed.into(),
        })?;
        Ok(Self::from_fields(
            der,
            layout,
            (not_before, not_after),
            decodable,
            read,
        ))
    }

    /// `decodable`: what x509-cert decodes in place of `der`, when `der`
    /// itself cannot be decoded for a notBefore before 1970.
    fn from_fields(
        der: Vec<u8>,
        layout: Layout,
        (not_before, not_after): (OffsetDateTime, OffsetDateTime),
        decodable: Option<Box<[u8]>>,
        read: Read,
    ) -> Self {
        let memo = Memo::default();
        if decodable.is_some() {
            let _ = memo.more.set(Box::new(MoreMemo {
                decodable,
                ..MoreMemo::default()
            }));
        }
        Certificate(Arc::new(Parsed {
            validity_unix: (not_before.unix_timestamp(), not_after.unix_timestamp()),
            der,
            layout,
            ski: read.ski,
            aki: read.aki,
            basic_constraints: read.basic_constraints,
            key_usage: read.key_usage,
            eku: read.eku,
            san: read.san,
            memo,
        }))
    }

    /// Parses exactly one `CERTIFICATE` PEM block (other text is ignored).
    ///
    /// # Errors
    ///
    /// The errors of [`Certificate::all_from_pem`]; [`Error::NoPemBlock`] when
    /// the input holds no certificate, and [`Error::Pem`] (naming block 2) when
    /// it holds more than one.
    pub fn from_pem(input: &[u8]) -> Result<Self> {
        let mut certs = Self::all_from_pem(input)?;
        match certs.len() {
            0 => Err(Error::NoPemBlock {
                what: "certificate input",
            }),
            1 => Ok(certs.remove(0)),
            n => Err(Error::Pem {
                block: 2,
                reason: format!("expected one certificate, found {n}"),
                source: None,
            }),
        }
    }

    /// Parses every block of `input`; each must be a `CERTIFICATE`. An error
    /// names the block.
    ///
    /// # Errors
    ///
    /// The error names the block (or, for binary DER input, the object) it is
    /// about:
    /// - [`Error::Pem`] when a block cannot be read (not UTF-8 text, no END
    ///   line, bad base64), or its certificate is refused by
    ///   [`Certificate::from_der`] (that error is its source);
    /// - [`Error::UnexpectedPemLabel`] for a block that is not a `CERTIFICATE`;
    /// - [`Error::Der`] for binary DER input that cannot be read, holds
    ///   something other than a certificate, or a certificate
    ///   [`Certificate::from_der`] refuses.
    pub fn all_from_pem(input: &[u8]) -> Result<Vec<Self>> {
        let mut certs = Vec::new();
        pem::for_each_public_block(input, "CERTIFICATE", |index, der| {
            let cert = Self::from_der_vec(der).map_err(|e| Error::Pem {
                block: index,
                reason: e.to_string(),
                source: Some(Box::new(e)),
            })?;
            certs.push(cert);
            Ok(())
        })?;
        Ok(certs)
    }

    /// The exact DER this certificate was parsed from.
    pub fn der(&self) -> &[u8] {
        &self.0.der
    }

    /// PEM encoding (`CERTIFICATE`, LF line endings).
    pub fn to_pem(&self) -> String {
        pem::encode("CERTIFICATE", &self.0.der)
    }

    /// The decoded structure, for checks pki-core does not wrap. Decoded on
    /// the first call and kept.
    ///
    /// One field may differ from the certificate: `der` 0.8 cannot hold a
    /// time before 1970, so for a certificate whose notBefore is a UTCTime
    /// of 1950 to 1969 the tree's notBefore is 1970-01-01T00:00:00Z (a later
    /// time, so never a looser check). [`Certificate::not_before`] is the
    /// real time; [`Certificate::der`] and [`Certificate::tbs_der`] are the
    /// bytes as signed. See `docs/book/src/pre-1970-utctime.md`.
    pub fn x509(&self) -> &x509_cert::Certificate {
        let more = self.0.memo.more();
        more.tree.get_or_init(|| {
            Box::new(decode_again(
                more.decodable.as_deref().unwrap_or(&self.0.der),
            ))
        })
    }

    /// Subject distinguished name.
    pub fn subject(&self) -> &Name {
        self.x509().tbs_certificate().subject()
    }

    /// The subject Name's DER, exactly as encoded in the certificate.
    pub(crate) fn subject_der(&self) -> &[u8] {
        self.slice(&self.0.layout.subject)
    }

    /// Issuer distinguished name.
    pub fn issuer(&self) -> &Name {
        self.x509().tbs_certificate().issuer()
    }

    /// The subject's commonName, if it has one that decodes as a string.
    pub fn common_name(&self) -> Option<String> {
        self.subject()
            .common_name()
            .ok()
            .flatten()
            .map(|cn| cn.value().into_owned())
    }

    /// Serial number bytes (big-endian, no sign padding beyond DER's).
    pub fn serial(&self) -> &[u8] {
        self.slice(&self.0.layout.serial)
    }

    /// Serial number in lowercase hex.
    pub fn serial_hex(&self) -> String {
        hex::encode(self.serial())
    }

    /// NotBefore.
    pub fn not_before(&self) -> OffsetDateTime {
        from_unix(self.0.validity_unix.0)
    }

    /// NotAfter.
    pub fn not_after(&self) -> OffsetDateTime {
        from_unix(self.0.validity_unix.1)
    }

    /// NotBefore and NotAfter as Unix seconds (certificate times are whole
    /// seconds): for checks over many certificates, where comparing and
    /// subtracting `OffsetDateTime`s is the cost.
    pub fn validity_unix(&self) -> (i64, i64) {
        self.0.validity_unix
    }

    /// Whether `at` lies within [NotBefore, NotAfter] (both inclusive, RFC 5280 §4.1.2.5).
    pub fn is_valid_at(&self, at: OffsetDateTime) -> bool {
        // On whole seconds: `at` is at or after NotBefore when its second
        // is, and at or before NotAfter when its second is earlier, or the
        // same with no fraction.
        let (not_before, not_after) = self.0.validity_unix;
        let second = at.unix_timestamp();
        not_before <= second
            && (second < not_after || (second == not_after && at.nanosecond() == 0))
    }

    /// SubjectKeyIdentifier bytes.
    pub fn ski(&self) -> Option<&[u8]> {
        self.0.ski.as_ref().map(|ski| ski.get(&self.0.der))
    }

    /// AuthorityKeyIdentifier keyIdentifier bytes.
    pub fn aki(&self) -> Option<&[u8]> {
        let key_id = self.0.aki.as_ref()?.key_id.as_ref()?;
        Some(key_id.get(&self.0.der))
    }

    /// The whole authorityKeyIdentifier, when present.
    pub(crate) fn authority_key_id(&self) -> Option<&AuthorityKeyId> {
        self.0.aki.as_ref()
    }

    /// basicConstraints.
    pub fn basic_constraints(&self) -> Option<BasicConstraintsInfo> {
        self.0.basic_constraints
    }

    /// Whether basicConstraints says cA:TRUE.
    pub fn is_ca(&self) -> bool {
        self.0.basic_constraints.is_some_and(|b| b.ca)
    }

    /// keyUsage bits, when the extension is present.
    pub fn key_usage(&self) -> Option<&KeyUsage> {
        self.0.key_usage.as_ref()
    }

    /// extendedKeyUsage purposes, when the extension is present.
    pub fn extended_key_usage(&self) -> Option<&[ObjectIdentifier]> {
        self.0.eku.as_deref()
    }

    /// The SubjectPublicKeyInfo.
    pub fn public_key(&self) -> &SubjectPublicKeyInfoOwned {
        // Decoded on its own from the bytes the tree would decode it from:
        // verifying thousands of leaves reads their keys, not their trees.
        self.0.memo.more().spki.get_or_init(|| {
            SubjectPublicKeyInfoOwned::from_der(self.spki_der()).unwrap_or_else(|_| {
                self.x509()
                    .tbs_certificate()
                    .subject_public_key_info()
                    .clone()
            })
        })
    }

    /// The version (x509-cert's decoding of the TBSCertificate's).
    pub(crate) fn version(&self) -> x509_cert::certificate::Version {
        use x509_cert::certificate::Version;
        match raw::version_and_signature(&self.0.der, self.0.layout.tbs) {
            Some((0, _)) => Version::V1,
            Some((1, _)) => Version::V2,
            Some((2, _)) => Version::V3,
            _ => self.x509().tbs_certificate().version(),
        }
    }

    /// Whether the TBSCertificate's signature algorithm is the outer
    /// one: equal encodings (DER), or equal decoded values.
    pub(crate) fn signature_algorithms_match(&self) -> bool {
        let der = &self.0.der;
        let inner = raw::version_and_signature(der, self.0.layout.tbs).map(|(_, alg)| alg);
        let outer = raw::outer(der, self.0.layout.tbs).map(|(alg, _)| alg);
        (inner.is_some() && inner == outer) || {
            let x = self.x509();
            x.tbs_certificate().signature() == x.signature_algorithm()
        }
    }

    /// The signatureAlgorithm TLV and the signatureValue BIT STRING's
    /// content, as encoded.
    pub(crate) fn raw_signature(&self) -> Option<(&[u8], &[u8])> {
        raw::outer(&self.0.der, self.0.layout.tbs)
    }

    /// The extensions as encoded, in order: (extnID content, critical,
    /// extnValue content).
    pub(crate) fn raw_extensions(&self) -> impl Iterator<Item = RawExtension<'_>> {
        raw::extensions(&self.0.der, self.0.layout.spki, self.0.layout.tbs)
    }

    /// Whether the subject is the empty sequence.
    pub(crate) fn subject_is_empty(&self) -> bool {
        self.slice(&self.0.layout.subject) == [0x30, 0x00]
    }

    /// Whether the issuer is the empty sequence.
    pub(crate) fn issuer_is_empty(&self) -> bool {
        self.slice(&self.0.layout.issuer) == [0x30, 0x00]
    }

    /// DER of the SubjectPublicKeyInfo (a copy of [`Certificate::spki_der`]).
    pub fn public_key_der(&self) -> Vec<u8> {
        self.spki_der().to_vec()
    }

    /// DER of the SubjectPublicKeyInfo, exactly as encoded in the certificate.
    pub fn spki_der(&self) -> &[u8] {
        self.slice(&self.0.layout.spki)
    }

    /// The signed TBSCertificate, exactly as encoded in the certificate.
    pub fn tbs_der(&self) -> &[u8] {
        self.slice(&self.0.layout.tbs)
    }

    /// The content octets of the serialNumber INTEGER, as encoded (a
    /// leading zero octet included when DER needs one).
    pub(crate) fn serial_content(&self) -> &[u8] {
        self.slice(&self.0.layout.serial)
    }

    fn slice(&self, span: &layout::Span) -> &[u8] {
        // Spans come from reading this very DER.
        self.0.der.get(span.range()).unwrap_or_default()
    }

    /// SHA-256 of the certificate's DER.
    pub fn fingerprint_sha256(&self) -> [u8; 32] {
        *self
            .0
            .memo
            .more()
            .fingerprint
            .get_or_init(|| Sha256::digest(&self.0.der).into())
    }

    /// SHA-256 of the SubjectPublicKeyInfo DER (the HPKP / k3s-style SPKI pin).
    pub fn spki_sha256(&self) -> [u8; 32] {
        *self
            .0
            .memo
            .more()
            .spki_sha256
            .get_or_init(|| Sha256::digest(self.spki_der()).into())
    }

    /// Values derived on first use.
    pub(crate) fn memo(&self) -> &Memo {
        &self.0.memo
    }

    /// The subject in the canonical form of RFC 5280 §7.1 comparison.
    pub(crate) fn canonical_subject(&self) -> &CanonicalName {
        self.0
            .memo
            .more()
            .subject
            .get_or_init(|| CanonicalName::of(self.subject()))
    }

    /// The issuer in the canonical form of RFC 5280 §7.1 comparison.
    pub(crate) fn canonical_issuer(&self) -> &CanonicalName {
        self.0
            .memo
            .more()
            .issuer
            .get_or_init(|| CanonicalName::of(self.issuer()))
    }

    /// Whether this certificate's subject names `child`'s issuer (RFC 5280
    /// §7.1 comparison: case and insignificant spaces do not matter, nor
    /// whether a value is a PrintableString or a UTF8String).
    pub fn subject_matches_issuer_of(&self, child: &Certificate) -> bool {
        // Equal encodings are equal names; only other pairs need the
        // canonical forms, computed once per certificate.
        self.slice(&self.0.layout.subject) == child.slice(&child.0.layout.issuer)
            || self.canonical_subject() == child.canonical_issuer()
    }

    /// Whether the certificate carries a nameConstraints extension (or one
    /// that does not decode): the names of the leaves below it matter.
    pub fn has_name_constraints(&self) -> bool {
        !matches!(self.name_constraints(), Ok(None))
    }

    /// The nameConstraints extension, decoded once.
    pub(crate) fn name_constraints(&self) -> Result<Option<Arc<NameConstraints>>, der::Error> {
        self.0
            .memo
            .more()
            .name_constraints
            .get_or_init(|| {
                self.x509()
                    .tbs_certificate()
                    .get_extension::<NameConstraints>()
                    .map(|nc| nc.map(|(_, nc)| Arc::new(nc)))
            })
            .clone()
    }

    /// A stable id for humans: `<first 16 hex of SKI>-<serial hex>`. Without an
    /// SKI, the first 16 hex of the SPKI SHA-256 stand in.
    pub fn id(&self) -> String {
        let key = match self.ski() {
            Some(ski) => hex::encode(ski),
            None => hex::encode(self.spki_sha256()),
        };
        let short = &key[..key.len().min(16)];
        // Allocated at its exact length: a signer holds one id per leaf it
        // issued in its events, and `format!` would grow it to a larger
        // block of the allocator.
        let serial = self.serial();
        let mut id = String::with_capacity(short.len() + 1 + 2 * serial.len());
        id.push_str(short);
        id.push('-');
        id.push_str(&hex::encode(serial));
        id
    }

    /// Subject and issuer names are equal (RFC 5280 "self-issued"; names
    /// compared as RFC 5280 §7.1 says).
    pub fn is_self_issued(&self) -> bool {
        self.subject_matches_issuer_of(self)
    }

    /// Self-issued and, when both identifiers are present, AKI equals SKI.
    /// This is a structural test; it does not check the signature.
    pub fn looks_self_signed(&self) -> bool {
        self.is_self_issued()
            && match (self.aki(), self.ski()) {
                (Some(aki), Some(ski)) => aki == ski,
                _ => true,
            }
    }
}

#[cfg(test)]
mod tests;
