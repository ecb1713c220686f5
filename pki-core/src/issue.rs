//! Issuance: plain-data parameters finished by one verb.
//!
//! The profile decides the extensions (policy); [`build`] only encodes the
//! TBSCertificate from its fields and has the key sign it (mechanism).
//! Every certificate gets:
//!
//! - a SubjectKeyIdentifier, RFC 5280 §4.2.1.2 method 1 (SHA-1 of the key bits);
//! - unless self-signed, an AuthorityKeyIdentifier whose bytes are *copied*
//!   from the issuer's SKI, never recomputed: another tool may have used
//!   another method, and lineage checks compare AKI with SKI byte for byte;
//! - a random, positive, 16-byte serial;
//! - a NotBefore backdated by [`CertificateParams::backdate`] for clock skew;
//! - for leaves, a NotAfter capped at the issuer's NotAfter, and at
//!   [`CertificateParams::not_after_limit`] (the chain above the issuer).

use crate::cert::Certificate;
use crate::error::{Error, Result};
use crate::key::PrivateKey;
use crate::signing::SigningKey;
use crate::usage::{EKU_CLIENT_AUTH, EKU_SERVER_AUTH};
use der::asn1::{Ia5String, OctetString};
use der::referenced::OwnedToRef;
use rand_core::CryptoRng;
use spki::SubjectPublicKeyInfoOwned;
use std::net::IpAddr;
use std::sync::OnceLock;
use time::{Duration, OffsetDateTime};
use x509_cert::attr::AttributeTypeAndValue;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, KeyUsages,
    SubjectAltName, SubjectKeyIdentifier,
};
use x509_cert::ext::{Extension, ToExtension};
use x509_cert::name::{Name, RdnSequence, RelativeDistinguishedName};
use x509_cert::serial_number::SerialNumber;
use x509_cert::time::Validity;

mod authority;
pub(crate) use authority::resign;
pub use authority::{CertificateAuthority, Issuer, cross_sign, cross_sign_with};

/// What a certificate is for. Decides its extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// Self-signed root CA: basicConstraints critical cA:TRUE, keyUsage
    /// critical keyCertSign, cRLSign, digitalSignature.
    RootCa,
    /// Subordinate CA, with an optional pathLenConstraint.
    IntermediateCa {
        /// pathLenConstraint.
        path_len: Option<u8>,
    },
    /// TLS server: EKU serverAuth.
    Server,
    /// TLS client: EKU clientAuth.
    Client,
    /// Both serverAuth and clientAuth.
    ServerClient,
}

impl Profile {
    /// Whether the profile makes a CA certificate.
    pub fn is_ca(self) -> bool {
        matches!(self, Profile::RootCa | Profile::IntermediateCa { .. })
    }
}

/// Default backdating of NotBefore: tolerates five minutes of clock skew
/// between the issuer and the machines that verify.
pub const DEFAULT_BACKDATE: Duration = Duration::minutes(5);

/// Everything that decides a certificate's content, as plain data.
///
/// Finish with [`CertificateParams::self_signed`] or
/// [`CertificateParams::signed_by`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateParams {
    /// What the certificate is for.
    pub profile: Profile,
    /// Subject distinguished name.
    pub subject: Name,
    /// DNS subjectAltNames (leaves).
    pub dns_names: Vec<String>,
    /// IP subjectAltNames (leaves).
    pub ip_addresses: Vec<IpAddr>,
    /// Issuance time: NotAfter is `issued_at + lifetime`.
    pub issued_at: OffsetDateTime,
    /// Requested lifetime. Leaves are cut at the issuer's NotAfter.
    pub lifetime: Duration,
    /// NotBefore is `issued_at - backdate`.
    pub backdate: Duration,
    /// A latest NotAfter for leaves and intermediates besides the issuer's
    /// own: the earliest NotAfter of the certificates above the issuer (an
    /// imported CA's external intermediates and root), since a certificate
    /// stops verifying when any certificate of its path expires. None: the
    /// issuer's NotAfter alone.
    pub not_after_limit: Option<OffsetDateTime>,
}

impl CertificateParams {
    /// Parameters for `profile` with subject `CN=<common_name>`.
    ///
    /// # Errors
    ///
    /// The errors of [`common_name_to_name`] for `common_name`.
    pub fn new(
        profile: Profile,
        common_name: &str,
        issued_at: OffsetDateTime,
        lifetime: Duration,
    ) -> Result<Self> {
        Ok(CertificateParams {
            profile,
            subject: common_name_to_name(common_name)?,
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            issued_at,
            lifetime,
            backdate: DEFAULT_BACKDATE,
            not_after_limit: None,
        })
    }

    /// Issues a self-signed certificate for `key` (normally a root CA).
    ///
    /// # Errors
    ///
    /// The errors of [`CertificateParams::self_signed_with`].
    pub fn self_signed<R: CryptoRng + ?Sized>(
        &self,
        key: &PrivateKey,
        rng: &mut R,
    ) -> Result<Certificate> {
        self.self_signed_with(key, rng)
    }

    /// [`CertificateParams::self_signed`] with any [`SigningKey`]: a key in
    /// this process or in a token.
    ///
    /// # Errors
    ///
    /// - [`Error::Issuance`] when the parameters cannot make a certificate: a
    ///   lifetime that is not positive, a negative backdate, a server
    ///   certificate without a DNS name or IP address, or an invalid DNS name
    ///   (see [`check_dns_name`]);
    /// - [`Error::Time`] when the validity falls outside what a certificate can
    ///   encode (1970 to 9999);
    /// - `key`'s error when it cannot give its public key or sign (for a key in
    ///   a token, [`Error::Pkcs11`] and the other `Pkcs11…` variants), and
    ///   [`Error::Crypto`] when encoding fails.
    pub fn self_signed_with<R: CryptoRng + ?Sized>(
        &self,
        key: &dyn SigningKey,
        rng: &mut R,
    ) -> Result<Certificate> {
        let (not_before, not_after) = self.window(None)?;
        let spki = key.public_key()?;
        let ski = key_identifier(&spki)?;
        let extensions = self.extensions(&ski, None, key.algorithm().is_rsa())?;
        build(
            None,
            &self.subject,
            &extensions,
            not_before,
            not_after,
            &spki,
            key,
            rng,
        )
    }

    /// Issues a certificate for `public_key`, signed by `issuer`.
    ///
    /// # Errors
    ///
    /// The errors of [`CertificateParams::signed_with`].
    pub fn signed_by<R: CryptoRng + ?Sized>(
        &self,
        public_key: &SubjectPublicKeyInfoOwned,
        issuer: &CertificateAuthority,
        rng: &mut R,
    ) -> Result<Certificate> {
        self.signed_with(public_key, &issuer.issuer(), rng)
    }

    /// Issues a certificate for `public_key`, signed by `issuer`: a CA
    /// certificate with any [`SigningKey`] (in this process or in a token).
    ///
    /// # Errors
    ///
    /// - [`Error::Issuance`] when the parameters cannot make a certificate: a
    ///   lifetime that is not positive, a negative backdate, `issuer` not valid
    ///   at `issued_at`, a server certificate without a DNS name or IP address,
    ///   or an invalid DNS name (see [`check_dns_name`]);
    /// - [`Error::Time`] when the validity falls outside what a certificate can
    ///   encode (1970 to 9999);
    /// - the issuer's key's error when it cannot sign (for a key in a token,
    ///   [`Error::Pkcs11`] and the other `Pkcs11…` variants), and
    ///   [`Error::Crypto`] when encoding fails.
    pub fn signed_with<R: CryptoRng + ?Sized>(
        &self,
        public_key: &SubjectPublicKeyInfoOwned,
        issuer: &Issuer<'_>,
        rng: &mut R,
    ) -> Result<Certificate> {
        let (not_before, not_after) = self.window(Some(issuer.cert))?;
        let ski = key_identifier(public_key)?;
        let is_rsa = public_key.algorithm.oid == RSA_ENCRYPTION;
        let extensions = self.extensions(&ski, issuer.cert.ski(), is_rsa)?;
        build(
            Some(issuer.cert.subject_der()),
            &self.subject,
            &extensions,
            not_before,
            not_after,
            public_key,
            issuer.key,
            rng,
        )
    }

    fn window(&self, issuer: Option<&Certificate>) -> Result<(OffsetDateTime, OffsetDateTime)> {
        if self.lifetime <= Duration::ZERO {
            return Err(Error::issuance(format!(
                "lifetime must be positive, got {}",
                self.lifetime
            )));
        }
        if self.backdate < Duration::ZERO {
            return Err(Error::issuance("backdate must not be negative"));
        }
        let not_before =
            crate::datetime::truncate(crate::datetime::add(self.issued_at, -self.backdate)?);
        let mut not_after =
            crate::datetime::truncate(crate::datetime::add(self.issued_at, self.lifetime)?);
        if let Some(issuer) = issuer {
            if !issuer.is_valid_at(self.issued_at) {
                return Err(Error::issuance(format!(
                    "issuer {} is not valid at {} (valid {} to {})",
                    issuer.id(),
                    crate::datetime::rfc3339(self.issued_at),
                    crate::datetime::rfc3339(issuer.not_before()),
                    crate::datetime::rfc3339(issuer.not_after())
                )));
            }
            if !self.profile.is_ca() || matches!(self.profile, Profile::IntermediateCa { .. }) {
                not_after = not_after.min(issuer.not_after());
                if let Some(limit) = self.not_after_limit {
                    not_after = not_after.min(crate::datetime::truncate(limit));
                }
            }
        }
        Ok((not_before, not_after))
    }

    fn extensions(
        &self,
        ski: &SubjectKeyIdentifier,
        issuer_ski: Option<&[u8]>,
        is_rsa: bool,
    ) -> Result<Vec<ExtensionDer>> {
        let mut exts = Vec::new();
        let subject = &self.subject;
        let encoded = |ext: Result<Extension, der::Error>| {
            ext.map(ExtensionDer::Value).map_err(Error::crypto)
        };
        match self.profile {
            Profile::RootCa | Profile::IntermediateCa { .. } => {
                let path_len = match self.profile {
                    Profile::IntermediateCa { path_len } => path_len,
                    _ => None,
                };
                exts.push(encoded(
                    BasicConstraints {
                        ca: true,
                        path_len_constraint: path_len,
                    }
                    .to_extension_for(subject),
                )?);
                exts.push(encoded(
                    KeyUsage(
                        KeyUsages::KeyCertSign | KeyUsages::CRLSign | KeyUsages::DigitalSignature,
                    )
                    .to_extension_for(subject),
                )?);
            }
            Profile::Server | Profile::Client | Profile::ServerClient => {
                if self.profile != Profile::Client
                    && self.dns_names.is_empty()
                    && self.ip_addresses.is_empty()
                {
                    return Err(Error::issuance(
                        "a server certificate needs at least one DNS name or IP address",
                    ));
                }
                exts.push(ExtensionDer::Encoded(leaf_usage_extensions(
                    self.profile,
                    is_rsa,
                )?));
                let mut names = Vec::new();
                for dns in &self.dns_names {
                    names.push(GeneralName::DnsName(dns_name(dns)?));
                }
                for ip in &self.ip_addresses {
                    names.push(GeneralName::from(*ip));
                }
                if !names.is_empty() {
                    exts.push(encoded(SubjectAltName(names).to_extension_for(subject))?);
                }
            }
        }
        exts.push(encoded(ski.to_extension_for(subject))?);
        if let Some(issuer_ski) = issuer_ski {
            exts.push(encoded(
                authority_key_id(issuer_ski)?.to_extension_for(subject),
            )?);
        }
        Ok(exts)
    }
}

const RSA_ENCRYPTION: der::asn1::ObjectIdentifier =
    der::asn1::ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");

/// A leaf's basicConstraints, keyUsage and extendedKeyUsage: the same for
/// every leaf of a profile and key type (none depends on the subject), so
/// x509-cert encodes them once per process, not once per leaf (encoding
/// the keyUsage bit string alone was 2 % of issuing one).
fn leaf_usage_extensions(profile: Profile, is_rsa: bool) -> Result<&'static [u8]> {
    static ENCODED: [OnceLock<Vec<u8>>; 6] = [const { OnceLock::new() }; 6];
    let (index, purposes) = match profile {
        Profile::Server => (0, &[EKU_SERVER_AUTH][..]),
        Profile::Client => (2, &[EKU_CLIENT_AUTH][..]),
        Profile::ServerClient => (4, &[EKU_SERVER_AUTH, EKU_CLIENT_AUTH][..]),
        Profile::RootCa | Profile::IntermediateCa { .. } => {
            return Err(Error::issuance("a CA certificate has no leaf usages"));
        }
    };
    let slot = &ENCODED[index + usize::from(is_rsa)];
    if let Some(done) = slot.get() {
        return Ok(done);
    }
    let usage = if is_rsa {
        KeyUsages::DigitalSignature | KeyUsages::KeyEncipherment
    } else {
        KeyUsages::DigitalSignature.into()
    };
    // Their criticality is fixed by their type (only subjectAltName's
    // depends on the subject).
    let anyone = Name::default();
    let mut encoded = Vec::new();
    for extension in [
        BasicConstraints {
            ca: false,
            path_len_constraint: None,
        }
        .to_extension_for(&anyone),
        KeyUsage(usage).to_extension_for(&anyone),
        ExtendedKeyUsage(purposes.to_vec()).to_extension_for(&anyone),
    ] {
        der::Encode::encode_to_vec(&extension.map_err(Error::crypto)?, &mut encoded)
            .map_err(Error::crypto)?;
    }
    Ok(slot.get_or_init(|| encoded))
}

/// Builds `CN=<common_name>`.
///
/// # Errors
///
/// [`Error::Issuance`] when `common_name` is empty, longer than 64 bytes, or
/// holds a control or invisible character.
pub fn common_name_to_name(common_name: &str) -> Result<Name> {
    if common_name.is_empty() {
        return Err(Error::issuance("common name must not be empty"));
    }
    if let Some(c) = crate::text::find_control_or_invisible(common_name) {
        // A control character in a name ends up in logs and terminals,
        // where it can forge lines, and an invisible one (a bidi override)
        // shows it as another name; no legitimate CN carries one.
        let kind = if c.is_control() {
            "control"
        } else {
            "invisible"
        };
        return Err(Error::issuance(format!(
            "common name \"{}\" contains the {kind} character {c:?}",
            common_name.escape_debug(),
        )));
    }
    if common_name.len() > 64 {
        return Err(Error::issuance(format!(
            "common name \"{common_name}\" is longer than 64 characters (RFC 5280 ub-common-name)"
        )));
    }
    // One RDN holding the CN as a UTF8String, as x509-cert's string form
    // `CN=...` gives (RFC 5280 §4.1.2.6), made from its parts: issuing a
    // leaf builds one, and the string form looks its attribute name up in
    // a table of hundreds. x509-cert otherwise makes a `Name` only by
    // decoding one; its `hazmat` constructor takes the sequence as it is,
    // which is safe here: a UTF8String is a DirectoryString RFC 5280
    // allows, and the length and characters were checked above (a test
    // checks the name equals the string form's).
    let bad = |e: der::Error| Error::issuance(format!("common name \"{common_name}\": {e}"));
    let value = AttributeTypeAndValue {
        oid: COMMON_NAME,
        value: der::Any::new(der::Tag::Utf8String, common_name.as_bytes()).map_err(bad)?,
    };
    let rdn =
        RelativeDistinguishedName::from(der::asn1::SetOfVec::try_from(vec![value]).map_err(bad)?);
    Ok(Name::hazmat_from_rdn_sequence(RdnSequence::from(vec![rdn])))
}

/// id-at-commonName (RFC 4519).
const COMMON_NAME: der::asn1::ObjectIdentifier = der::asn1::ObjectIdentifier::new_unwrap("2.5.4.3");

/// Checks that `name` can be a certificate's DNS name: at most 253 bytes
/// of labels of letters, digits, `-` and `_` (at most 63 bytes each, no
/// `-` at either end), the first label possibly `*`. Issuing refuses any
/// other; a request is checked with this before anything is issued.
///
/// # Errors
///
/// [`Error::Issuance`] naming `name` when it is not a valid DNS name by the
/// rules above.
pub fn check_dns_name(name: &str) -> Result<()> {
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').enumerate().all(|(i, label)| {
            let wildcard = i == 0 && label == "*";
            wildcard
                || (!label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        });
    if !valid {
        return Err(Error::issuance(format!(
            "\"{name}\" is not a valid DNS name"
        )));
    }
    Ok(())
}

fn dns_name(name: &str) -> Result<Ia5String> {
    check_dns_name(name)?;
    Ia5String::new(&name.to_ascii_lowercase()).map_err(Error::issuance)
}

/// RFC 5280 §4.2.1.2 method 1: SHA-1 of the subjectPublicKey bits.
fn key_identifier(spki: &SubjectPublicKeyInfoOwned) -> Result<SubjectKeyIdentifier> {
    SubjectKeyIdentifier::try_from(spki.owned_to_ref()).map_err(Error::crypto)
}

fn authority_key_id(issuer_ski: &[u8]) -> Result<AuthorityKeyIdentifier> {
    Ok(AuthorityKeyIdentifier {
        key_identifier: Some(OctetString::new(issuer_ski).map_err(Error::crypto)?),
        authority_cert_issuer: None,
        authority_cert_serial_number: None,
    })
}

/// 16 random bytes with the top bit cleared (positive) and the next bit set,
/// so the DER INTEGER is always exactly 16 bytes long.
fn random_serial<R: CryptoRng + ?Sized>(rng: &mut R) -> Result<SerialNumber> {
    let mut bytes = [0u8; 16];
    rng.fill_bytes(&mut bytes);
    bytes[0] = (bytes[0] & 0x7f) | 0x40;
    SerialNumber::new(&bytes).map_err(Error::crypto)
}

/// Encodes the TBSCertificate and has `signing_key` sign it.
///
/// The fields are encoded one by one and put together here, as x509-cert's
/// certificate builder would encode them, without its copies of every
/// field and extension and without the signer's own public key, which the
/// builder encodes for each certificate only to hand it to a profile that
/// does not read it.
///
/// `issuer` is the DER of the issuing CA's subject, copied byte for byte
/// from its certificate (chaining compares names, and a copy matches
/// whatever encoding the CA has); None for a self-issued certificate,
/// whose issuer is its own subject.
#[allow(clippy::too_many_arguments)]
fn build<R: CryptoRng + ?Sized>(
    issuer: Option<&[u8]>,
    subject: &Name,
    extensions: &[ExtensionDer],
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    spki: &SubjectPublicKeyInfoOwned,
    signing_key: &dyn SigningKey,
    rng: &mut R,
) -> Result<Certificate> {
    if not_after <= not_before {
        return Err(Error::issuance(format!(
            "NotAfter {} is not after NotBefore {}",
            crate::datetime::rfc3339(not_after),
            crate::datetime::rfc3339(not_before)
        )));
    }
    // Through 2049 a UTCTime, as RFC 5280 §4.1.2.5 asks (`to_x509`).
    let validity = Validity::new(
        crate::datetime::to_x509(not_before)?,
        crate::datetime::to_x509(not_after)?,
    );
    let serial = random_serial(rng)?;
    let algorithm = signing_key.signature_algorithm()?;
    let subject = der::Encode::to_der(subject).map_err(Error::crypto)?;
    let tbs = tbs_der(&TbsFields {
        serial: &serial,
        algorithm: &algorithm,
        issuer: issuer.unwrap_or(&subject),
        validity: &validity,
        subject: &subject,
        spki,
        extensions,
    })
    .map_err(Error::crypto)?;
    let signature = signing_key.sign(&tbs, &crate::CryptoProvider::get_default())?;
    crate::signing::check_signature(&signature)?;
    let der = certificate_der(tbs, &algorithm, &signature).map_err(Error::crypto)?;
    // Parsed from its encoding like any other certificate, so that what
    // pki made is known to decode again (see `Certificate::x509`).
    Certificate::from_der_vec(der)
}

/// An extension of a TBSCertificate: one to encode, or extensions
/// encoded already (the usages every leaf of a profile shares).
enum ExtensionDer {
    Value(Extension),
    Encoded(&'static [u8]),
}

/// The fields of a TBSCertificate pki writes.
struct TbsFields<'a> {
    serial: &'a SerialNumber,
    algorithm: &'a spki::AlgorithmIdentifierOwned,
    /// The issuer Name's DER.
    issuer: &'a [u8],
    validity: &'a Validity,
    /// The subject Name's DER.
    subject: &'a [u8],
    spki: &'a SubjectPublicKeyInfoOwned,
    extensions: &'a [ExtensionDer],
}

/// ```text
/// TBSCertificate ::= SEQUENCE {
///     version [0] EXPLICIT Version DEFAULT v1, serialNumber, signature,
///     issuer, validity, subject, subjectPublicKeyInfo,
///     extensions [3] EXPLICIT Extensions OPTIONAL }
/// ```
///
/// Version 3 with extensions; without any, version 1 (the default, so
/// absent), as x509-cert's builder decides.
fn tbs_der(f: &TbsFields<'_>) -> der::Result<Vec<u8>> {
    use der::{Encode, Header, Length, Tag, TagNumber};
    let mut body = Vec::with_capacity(512);
    if !f.extensions.is_empty() {
        // [0] EXPLICIT INTEGER 2
        body.extend_from_slice(&[0xa0, 0x03, 0x02, 0x01, 0x02]);
    }
    f.serial.encode_to_vec(&mut body)?;
    f.algorithm.encode_to_vec(&mut body)?;
    body.extend_from_slice(f.issuer);
    f.validity.encode_to_vec(&mut body)?;
    body.extend_from_slice(f.subject);
    f.spki.encode_to_vec(&mut body)?;
    if !f.extensions.is_empty() {
        let mut list = Vec::with_capacity(256);
        for extension in f.extensions {
            match extension {
                ExtensionDer::Encoded(der) => list.extend_from_slice(der),
                ExtensionDer::Value(value) => {
                    value.encode_to_vec(&mut list)?;
                }
            }
        }
        let sequence = Header::new(Tag::Sequence, Length::try_from(list.len())?).to_der()?;
        Header::new(
            Tag::ContextSpecific {
                constructed: true,
                number: TagNumber(3),
            },
            Length::try_from(sequence.len() + list.len())?,
        )
        .encode_to_vec(&mut body)?;
        body.extend_from_slice(&sequence);
        body.extend_from_slice(&list);
    }
    let header = Header::new(Tag::Sequence, Length::try_from(body.len())?).to_der()?;
    let mut tbs = Vec::with_capacity(header.len() + body.len());
    tbs.extend_from_slice(&header);
    tbs.extend_from_slice(&body);
    Ok(tbs)
}

/// ```text
/// Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm,
///     signatureValue BIT STRING }
/// ```
fn certificate_der(
    tbs: Vec<u8>,
    algorithm: &spki::AlgorithmIdentifierOwned,
    signature: &[u8],
) -> der::Result<Vec<u8>> {
    use der::{Encode, Header, Length, Tag};
    let bits = der::asn1::BitStringRef::from_bytes(signature)?;
    let len = ((Length::try_from(tbs.len())? + algorithm.encoded_len()?)? + bits.encoded_len()?)?;
    let header = Header::new(Tag::Sequence, len);
    // One allocation of the final size.
    let mut der = Vec::with_capacity(usize::try_from((header.encoded_len()? + len)?)?);
    header.encode_to_vec(&mut der)?;
    der.extend_from_slice(&tbs);
    algorithm.encode_to_vec(&mut der)?;
    bits.encode_to_vec(&mut der)?;
    Ok(der)
}

/// Encodes an extension with the criticality RFC 5280 gives it.
trait EncodeExtension {
    fn to_extension_for(&self, subject: &Name) -> Result<Extension, der::Error>;
}

impl<T> EncodeExtension for T
where
    for<'a> &'a T: ToExtension<Error = der::Error>,
{
    fn to_extension_for(&self, subject: &Name) -> Result<Extension, der::Error> {
        self.to_extension(subject, &[])
    }
}
