//! pki-core: the pure model of X.509 CA rotation.
//!
//! Keys, certificates, issuance profiles, cross-signing, bundles, lineage
//! (AKI/SKI) and the validity math. No clock, no files: time and randomness
//! are arguments. The one process-wide setting is the crypto provider
//! ([`CryptoProvider`]), installed once or taken from the build: ring by
//! default (fast; EC keys and signatures from the operating system), or
//! RustCrypto, under which the same inputs and RNG seed give the same
//! outputs — as the example below installs.
//!
//! ```
//! use pki_core::{Bundle, CertificateAuthority, CertificateParams, KeyAlgorithm, PrivateKey, Profile};
//! use rand_chacha::ChaCha20Rng;
//! use rand_core::SeedableRng;
//! use time::{Duration, macros::datetime};
//!
//! pki_core::CryptoProvider::rust_crypto().install_default().expect("first install");
//! let mut rng = ChaCha20Rng::seed_from_u64(1);
//! let now = datetime!(2026-01-01 00:00 UTC);
//! let ca = CertificateAuthority::generate_root("service-ca", KeyAlgorithm::EcdsaP256, now, Duration::days(790), &mut rng)?;
//!
//! let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng)?;
//! let mut params = CertificateParams::new(Profile::Server, "web", now, Duration::days(365))?;
//! params.dns_names.push("web.ns.svc".into());
//! let leaf = ca.issue(&params, &key.public_key()?, &mut rng)?;
//!
//! assert!(pki_core::issued_by(&leaf, &ca.cert).issued_by);
//! let bundle = Bundle::from_certs([ca.cert.clone()]);
//! assert_eq!(bundle.root_pin()?, hex::encode(ca.cert.fingerprint_sha256()));
//! # Ok::<(), pki_core::Error>(())
//! ```

// The modules form a stack, each importing only those below it
// (tests/layers.rs checks it), bottom up: text, rng, dn, provider, usage,
// time_text and signatures; the error types (error); der_input, pem,
// datetime and policy; cert; key and bundle; issue; verify and lineage;
// trust_matrix (the cells every pre-flight checks); import; lint.
mod bundle;
mod ca_key;
mod cert;
pub mod datetime;
/// Checks for the fuzz targets and the tests; not a stable API.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::cert::{check_against_x509_cert, check_raw_reads, reads_without_x509_cert};

    /// Whether two names are the same name as path validation compares
    /// them (RFC 5280 §7.1: case-insensitively, insignificant spaces
    /// ignored), as the path-validation oracle must.
    pub fn same_name(a: &x509_cert::name::Name, b: &x509_cert::name::Name) -> bool {
        crate::dn::CanonicalName::of(a) == crate::dn::CanonicalName::of(b)
    }
}
mod der_input;
mod dn;
mod error;
mod import;
mod issue;
mod key;
mod lineage;
pub mod lint;
pub mod pem;
// Above key, below issue: a CA key in a token (pkcs11), and the one
// signing interface both kinds of key give (signing).
mod pkcs11;
pub mod policy;
mod provider;
mod rng;
mod signatures;
mod signing;
pub mod text;
mod time_text;
mod token_access;
pub mod trust_matrix;
mod usage;
pub mod verify;

pub use bundle::Bundle;
pub use ca_key::{CaKey, TokenKey, public_key_algorithm};
pub use cert::{BasicConstraintsInfo, Certificate, KeyUsages, ObjectIdentifier};
pub use error::{Error, Result, VerifyError};
pub use import::{
    CaImport, ValidatedCa, chain_root, check_can_sign_certificates, check_issuing_order,
    import_ca_file, is_self_signed, renew_same_key, renew_same_key_with, verify_ca_path,
};
pub use issue::{
    CertificateAuthority, CertificateParams, DEFAULT_BACKDATE, Issuer, Profile, check_dns_name,
    common_name_to_name, cross_sign, cross_sign_with,
};
pub use key::{KeyAlgorithm, PrivateKey};
pub use lineage::{Lineage, LineageRule, issued_by};
#[cfg(feature = "pkcs11")]
pub use pkcs11::{Pkcs11Key, Pkcs11Module, Pkcs11Token};
pub use pkcs11::{Pkcs11ObjectType, Pkcs11Pin, Pkcs11Uri};
pub use policy::RotationPolicy;
pub use provider::{Backend, CryptoProvider};
pub use rng::{OsRng, os_rng};
pub use signatures::SignatureCache;
pub use signing::{SigningKey, signature_algorithm};
#[cfg(feature = "pkcs11")]
pub use token_access::Pkcs11Tokens;
pub use token_access::TokenAccess;
pub use usage::{EKU_ANY, EKU_CLIENT_AUTH, EKU_SERVER_AUTH, Purpose};
pub use verify::{
    Budget, ExpectedName, VerifiedPath, VerifyOptions, verify_chain, verify_chain_cached,
    verify_signature,
};

/// Re-exported so callers can build names and read extensions without
/// depending on x509-cert themselves.
pub use x509_cert;
