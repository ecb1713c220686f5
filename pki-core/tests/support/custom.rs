//! Certificates with content pki-core does not issue (name constraints,
//! e-mail addresses, names encoded in other string types), built with
//! x509-cert's builder and signed with a pki-core CA's key.

#![allow(dead_code, clippy::unwrap_used)]

use super::fixtures::{NOW, bundle, new_root, opts, rng};
use der::Encode;
use der::Tag;
use der::asn1::{Any, Ia5String, OctetString, SetOfVec};
use der::referenced::OwnedToRef;
use p256::pkcs8::DecodePrivateKey;
use pki_core::{
    Certificate, CertificateAuthority, KeyAlgorithm, ObjectIdentifier, PrivateKey, VerifyError,
    verify_chain,
};
use time::Duration;
use x509_cert::attr::AttributeTypeAndValue;
use x509_cert::builder::{Builder, CertificateBuilder};
use x509_cert::certificate::TbsCertificate;
use x509_cert::ext::pkix::constraints::name::GeneralSubtree;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{
    AuthorityKeyIdentifier, BasicConstraints, KeyUsage, KeyUsages, SubjectKeyIdentifier,
};
use x509_cert::ext::pkix::{NameConstraints, SubjectAltName};
use x509_cert::ext::{Extension, ToExtension};
use x509_cert::name::{Name, RdnSequence, RelativeDistinguishedName};
use x509_cert::serial_number::SerialNumber;
use x509_cert::time::Validity;

pub const CN: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");
pub const O: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.10");
pub const EMAIL: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.1");

struct Fixed {
    issuer: Name,
    subject: Name,
    extensions: Vec<Extension>,
}

impl x509_cert::builder::Profile for Fixed {
    fn get_issuer(&self, _subject: &Name) -> Name {
        self.issuer.clone()
    }
    fn get_subject(&self) -> Name {
        self.subject.clone()
    }
    fn build_extensions(
        &self,
        _spk: spki::SubjectPublicKeyInfoRef<'_>,
        _issuer_spk: spki::SubjectPublicKeyInfoRef<'_>,
        _tbs: &TbsCertificate,
    ) -> x509_cert::builder::Result<Vec<Extension>> {
        Ok(self.extensions.clone())
    }
}

/// A name of one attribute per RDN, each value of the given string type.
pub fn name(rdns: &[(ObjectIdentifier, der::Tag, &str)]) -> Name {
    let mut seq = RdnSequence::default();
    for (oid, tag, value) in rdns {
        let atv = AttributeTypeAndValue {
            oid: *oid,
            value: Any::new(*tag, value.as_bytes()).unwrap(),
        };
        seq.push(RelativeDistinguishedName::from(
            SetOfVec::try_from(vec![atv]).unwrap(),
        ));
    }
    let der = der::Encode::to_der(&seq).unwrap();
    <Name as der::Decode>::from_der(&der).unwrap()
}

pub fn ext<T>(value: &T, subject: &Name) -> Extension
where
    for<'a> &'a T: ToExtension<Error = der::Error>,
{
    value.to_extension(subject, &[]).unwrap()
}

/// A certificate for `key` named `subject`, issued under the name
/// `issuer_name` and signed by `signer`, with SKI and AKI added to
/// `extensions`. Valid from an hour before `NOW` for 300 days.
pub fn issue(
    signer: &CertificateAuthority,
    issuer_name: Name,
    subject: Name,
    key: &PrivateKey,
    mut extensions: Vec<Extension>,
) -> Certificate {
    let spki = key.public_key().unwrap();
    let ski = SubjectKeyIdentifier::try_from(spki.owned_to_ref()).unwrap();
    let aki = AuthorityKeyIdentifier {
        key_identifier: Some(OctetString::new(signer.cert.ski().unwrap()).unwrap()),
        authority_cert_issuer: None,
        authority_cert_serial_number: None,
    };
    extensions.push(ext(&ski, &subject));
    extensions.push(ext(&aki, &subject));
    let validity = Validity::new(
        pki_core::datetime::to_x509(NOW - Duration::hours(1)).unwrap(),
        pki_core::datetime::to_x509(NOW + Duration::days(300)).unwrap(),
    );
    let profile = Fixed {
        issuer: issuer_name,
        subject,
        extensions,
    };
    let builder = CertificateBuilder::new(
        profile,
        SerialNumber::new(&[0x42, 1]).unwrap(),
        validity,
        spki,
    )
    .unwrap();
    let signer =
        p256::ecdsa::SigningKey::from_pkcs8_der(&signer.key.to_pkcs8_der().unwrap()).unwrap();
    let x509 = builder
        .build::<_, p256::ecdsa::DerSignature>(&signer)
        .unwrap();
    Certificate::from_der(&x509.to_der().unwrap()).unwrap()
}

/// A CA named `subject` under `parent` (issuer name as `parent` writes
/// it), with `more` extensions.
pub fn ca(
    parent: &CertificateAuthority,
    subject: Name,
    more: Vec<Extension>,
    seed: u64,
) -> CertificateAuthority {
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng(seed)).unwrap();
    let mut extensions = vec![
        ext(
            &BasicConstraints {
                ca: true,
                path_len_constraint: None,
            },
            &subject,
        ),
        ext(
            &KeyUsage(KeyUsages::KeyCertSign | KeyUsages::CRLSign),
            &subject,
        ),
    ];
    extensions.extend(more);
    let cert = issue(
        parent,
        parent.cert.subject().clone(),
        subject,
        &key,
        extensions,
    );
    CertificateAuthority::new(cert, key).unwrap()
}

/// A TLS server leaf named `subject` under `ca`, issued under the name
/// `issuer_name`, with `more` extensions (a subjectAltName, say).
pub fn server_leaf(
    ca: &CertificateAuthority,
    issuer_name: Name,
    subject: Name,
    more: Vec<Extension>,
    seed: u64,
) -> Certificate {
    use x509_cert::ext::pkix::ExtendedKeyUsage;
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng(seed)).unwrap();
    let mut extensions = vec![
        ext(
            &BasicConstraints {
                ca: false,
                path_len_constraint: None,
            },
            &subject,
        ),
        ext(&KeyUsage(KeyUsages::DigitalSignature.into()), &subject),
        ext(&ExtendedKeyUsage(vec![pki_core::EKU_SERVER_AUTH]), &subject),
    ];
    extensions.extend(more);
    issue(ca, issuer_name, subject, &key, extensions)
}

/// A DNS name (dNSName), for a subjectAltName or a constraint.
pub fn dns_name(s: &str) -> GeneralName {
    GeneralName::DnsName(Ia5String::new(s).unwrap())
}

/// An e-mail address, host or domain (rfc822Name).
pub fn email(s: &str) -> GeneralName {
    GeneralName::Rfc822Name(Ia5String::new(s).unwrap())
}

/// Name-constraint subtrees of these bases, without minimum or maximum.
pub fn subtrees(bases: Vec<GeneralName>) -> Option<Vec<GeneralSubtree>> {
    Some(
        bases
            .into_iter()
            .map(|base| GeneralSubtree {
                base,
                minimum: 0,
                maximum: None,
            })
            .collect(),
    )
}

/// A root and, under it, the CA `CN=constrained` with the name
/// constraints `nc`.
pub fn constrained_ca(nc: NameConstraints) -> (CertificateAuthority, CertificateAuthority) {
    let root = new_root("root", 1);
    let subject = name(&[(CN, Tag::Utf8String, "constrained")]);
    let nc = ext(&nc, &subject);
    let ca = ca(&root, subject, vec![nc], 2);
    (root, ca)
}

/// Verifies a leaf of `ca` with the subject `CN=web` (plus
/// `emailAddress=<dn_email>` when given) and the subjectAltNames `sans`,
/// for a client trusting `root`.
pub fn verify_leaf(
    (root, ca): &(CertificateAuthority, CertificateAuthority),
    dn_email: Option<&str>,
    sans: Vec<GeneralName>,
) -> Result<(), VerifyError> {
    let mut rdns = vec![(CN, Tag::Utf8String, "web")];
    if let Some(e) = dn_email {
        rdns.push((EMAIL, Tag::Ia5String, e));
    }
    let subject = name(&rdns);
    let san = ext(&SubjectAltName(sans), &subject);
    let leaf = server_leaf(ca, ca.cert.subject().clone(), subject, vec![san], 3);
    verify_chain(
        &leaf,
        std::slice::from_ref(&ca.cert),
        &bundle(&[&root.cert]),
        &opts(),
    )
    .map(|_| ())
}
