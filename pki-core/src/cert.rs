//! Parsed X.509 certificates that keep their original DER.

use crate::error::{Error, Result};
use crate::pem;
use der::{Decode, Encode};
use sha2::{Digest, Sha256};
use std::fmt;
use std::net::IpAddr;
use time::OffsetDateTime;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAltName,
    SubjectKeyIdentifier,
};
use x509_cert::name::Name;
use x509_cert::spki::SubjectPublicKeyInfoOwned;

pub use der::asn1::ObjectIdentifier;
pub use x509_cert::ext::pkix::KeyUsages;

/// id-kp-serverAuth (RFC 5280 §4.2.1.12).
pub const EKU_SERVER_AUTH: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.1");
/// id-kp-clientAuth (RFC 5280 §4.2.1.12).
pub const EKU_CLIENT_AUTH: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.2");
/// anyExtendedKeyUsage (RFC 5280 §4.2.1.12).
pub const EKU_ANY: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37.0");

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

/// An X.509 certificate: its exact DER plus the decoded structure and the
/// extensions pki reads, decoded once when the certificate is parsed.
#[derive(Clone)]
pub struct Certificate {
    der: Vec<u8>,
    inner: x509_cert::Certificate,
    ski: Option<Vec<u8>>,
    aki: Option<Vec<u8>>,
    basic_constraints: Option<BasicConstraintsInfo>,
    key_usage: Option<KeyUsage>,
    eku: Option<Vec<ObjectIdentifier>>,
    san: Vec<GeneralName>,
}

impl PartialEq for Certificate {
    fn eq(&self, other: &Self) -> bool {
        self.der == other.der
    }
}
impl Eq for Certificate {}

impl std::hash::Hash for Certificate {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.der.hash(state)
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

fn ext_err(extension: &'static str, e: der::Error) -> Error {
    Error::MalformedExtension {
        extension,
        reason: e.to_string(),
    }
}

impl Certificate {
    /// Parses a DER certificate. Malformed extensions that pki reads (SKI,
    /// AKI, basic constraints, key usage, EKU, SAN) are errors here, so the
    /// accessors never fail.
    pub fn from_der(der: &[u8]) -> Result<Self> {
        let inner =
            x509_cert::Certificate::from_der(der).map_err(|e| Error::CertificateDecode {
                reason: e.to_string(),
            })?;
        Self::from_parsed(der.to_vec(), inner)
    }

    pub(crate) fn from_x509(inner: x509_cert::Certificate) -> Result<Self> {
        let der = inner.to_der().map_err(Error::crypto)?;
        Self::from_parsed(der, inner)
    }

    fn from_parsed(der: Vec<u8>, inner: x509_cert::Certificate) -> Result<Self> {
        let tbs = inner.tbs_certificate();
        let ski = tbs
            .get_extension::<SubjectKeyIdentifier>()
            .map_err(|e| ext_err("subjectKeyIdentifier", e))?
            .map(|(_, s)| s.0.as_bytes().to_vec());
        let aki = tbs
            .get_extension::<AuthorityKeyIdentifier>()
            .map_err(|e| ext_err("authorityKeyIdentifier", e))?
            .and_then(|(_, a)| a.key_identifier.map(|k| k.as_bytes().to_vec()));
        let basic_constraints = tbs
            .get_extension::<BasicConstraints>()
            .map_err(|e| ext_err("basicConstraints", e))?
            .map(|(critical, b)| BasicConstraintsInfo {
                ca: b.ca,
                path_len: b.path_len_constraint,
                critical,
            });
        let key_usage = tbs
            .get_extension::<KeyUsage>()
            .map_err(|e| ext_err("keyUsage", e))?
            .map(|(_, k)| k);
        let eku = tbs
            .get_extension::<ExtendedKeyUsage>()
            .map_err(|e| ext_err("extendedKeyUsage", e))?
            .map(|(_, e)| e.0);
        let san = tbs
            .get_extension::<SubjectAltName>()
            .map_err(|e| ext_err("subjectAltName", e))?
            .map(|(_, s)| s.0)
            .unwrap_or_default();
        Ok(Certificate {
            der,
            inner,
            ski,
            aki,
            basic_constraints,
            key_usage,
            eku,
            san,
        })
    }

    /// Parses exactly one `CERTIFICATE` PEM block (other text is ignored).
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
            }),
        }
    }

    /// Parses every block of `input`; each must be a `CERTIFICATE`. An error
    /// names the block.
    pub fn all_from_pem(input: &[u8]) -> Result<Vec<Self>> {
        let mut certs = Vec::new();
        pem::for_each_public_block(input, "CERTIFICATE", |index, der| {
            let cert = Self::from_der(&der).map_err(|e| Error::Pem {
                block: index,
                reason: e.to_string(),
            })?;
            certs.push(cert);
            Ok(())
        })?;
        Ok(certs)
    }

    /// The exact DER this certificate was parsed from.
    pub fn der(&self) -> &[u8] {
        &self.der
    }

    /// PEM encoding (`CERTIFICATE`, LF line endings).
    pub fn to_pem(&self) -> String {
        pem::encode("CERTIFICATE", &self.der)
    }

    /// The decoded structure, for checks pki-core does not wrap.
    pub fn x509(&self) -> &x509_cert::Certificate {
        &self.inner
    }

    /// Subject distinguished name.
    pub fn subject(&self) -> &Name {
        self.inner.tbs_certificate().subject()
    }

    /// Issuer distinguished name.
    pub fn issuer(&self) -> &Name {
        self.inner.tbs_certificate().issuer()
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
        self.inner.tbs_certificate().serial_number().as_bytes()
    }

    /// Serial number in lowercase hex.
    pub fn serial_hex(&self) -> String {
        hex::encode(self.serial())
    }

    /// NotBefore.
    pub fn not_before(&self) -> OffsetDateTime {
        crate::datetime::from_x509(&self.inner.tbs_certificate().validity().not_before)
    }

    /// NotAfter.
    pub fn not_after(&self) -> OffsetDateTime {
        crate::datetime::from_x509(&self.inner.tbs_certificate().validity().not_after)
    }

    /// Whether `at` lies within [NotBefore, NotAfter] (both inclusive, RFC 5280 §4.1.2.5).
    pub fn is_valid_at(&self, at: OffsetDateTime) -> bool {
        self.not_before() <= at && at <= self.not_after()
    }

    /// SubjectKeyIdentifier bytes.
    pub fn ski(&self) -> Option<&[u8]> {
        self.ski.as_deref()
    }

    /// AuthorityKeyIdentifier keyIdentifier bytes.
    pub fn aki(&self) -> Option<&[u8]> {
        self.aki.as_deref()
    }

    /// basicConstraints.
    pub fn basic_constraints(&self) -> Option<BasicConstraintsInfo> {
        self.basic_constraints
    }

    /// Whether basicConstraints says cA:TRUE.
    pub fn is_ca(&self) -> bool {
        self.basic_constraints.is_some_and(|b| b.ca)
    }

    /// keyUsage bits, when the extension is present.
    pub fn key_usage(&self) -> Option<&KeyUsage> {
        self.key_usage.as_ref()
    }

    /// extendedKeyUsage purposes, when the extension is present.
    pub fn extended_key_usage(&self) -> Option<&[ObjectIdentifier]> {
        self.eku.as_deref()
    }

    /// subjectAltName entries, in certificate order.
    pub fn subject_alt_names(&self) -> &[GeneralName] {
        &self.san
    }

    /// DNS names of the subjectAltName.
    pub fn dns_names(&self) -> Vec<String> {
        self.san
            .iter()
            .filter_map(|n| match n {
                GeneralName::DnsName(d) => Some(d.to_string()),
                _ => None,
            })
            .collect()
    }

    /// IP addresses of the subjectAltName (malformed lengths are skipped).
    pub fn ip_addresses(&self) -> Vec<IpAddr> {
        self.san
            .iter()
            .filter_map(|n| match n {
                GeneralName::IpAddress(o) => match o.as_bytes().len() {
                    4 => <[u8; 4]>::try_from(o.as_bytes()).ok().map(IpAddr::from),
                    16 => <[u8; 16]>::try_from(o.as_bytes()).ok().map(IpAddr::from),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    /// The SubjectPublicKeyInfo.
    pub fn public_key(&self) -> &SubjectPublicKeyInfoOwned {
        self.inner.tbs_certificate().subject_public_key_info()
    }

    /// DER of the SubjectPublicKeyInfo.
    pub fn public_key_der(&self) -> Vec<u8> {
        self.public_key().to_der().unwrap_or_default()
    }

    /// SHA-256 of the certificate's DER.
    pub fn fingerprint_sha256(&self) -> [u8; 32] {
        Sha256::digest(&self.der).into()
    }

    /// SHA-256 of the SubjectPublicKeyInfo DER (the HPKP / k3s-style SPKI pin).
    pub fn spki_sha256(&self) -> [u8; 32] {
        Sha256::digest(self.public_key_der()).into()
    }

    /// A stable id for humans: `<first 16 hex of SKI>-<serial hex>`. Without an
    /// SKI, the first 16 hex of the SPKI SHA-256 stand in.
    pub fn id(&self) -> String {
        let key = match self.ski() {
            Some(ski) => hex::encode(ski),
            None => hex::encode(self.spki_sha256()),
        };
        let short = &key[..key.len().min(16)];
        format!("{short}-{}", self.serial_hex())
    }

    /// Subject and issuer names are equal (RFC 5280 "self-issued").
    pub fn is_self_issued(&self) -> bool {
        self.subject() == self.issuer()
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
