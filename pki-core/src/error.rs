//! The error types of pki-core: [`Error`], and [`VerifyError`] of path
//! validation, which an [`Error`] can carry as its cause.

mod verify;

use std::fmt;
pub use verify::{BudgetKind, VerifyError};

/// Everything that can go wrong in pki-core. Each variant carries enough
/// context to tell the user what is wrong and where.
///
/// Where a typed cause exists (a DER decoding error, the error of a
/// certificate inside a PEM block) it is the [`std::error::Error::source`]
/// of the variant. The message of a variant includes its cause's message
/// too, so that a one-line report is complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A PEM block could not be read, or its content could not be decoded.
    #[error("PEM block {block}: {reason}")]
    Pem {
        /// 1-based index of the block in its input.
        block: usize,
        /// What is wrong with it.
        reason: String,
        /// Why its content could not be decoded (a certificate block that
        /// holds no certificate), when that is what is wrong. Seen through
        /// [`std::error::Error::source`], it is a `Box<Error>`.
        #[source]
        source: Option<Box<Error>>,
    },
    /// An input given in binary DER (instead of PEM) could not be read,
    /// or one of its objects is not what is expected here.
    #[error("DER object {object}: {reason}")]
    Der {
        /// 1-based index of the object in its input.
        object: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A PEM block has a label other than the one expected here.
    #[error("PEM block {block}: expected {expected}, found \"{found}\"")]
    UnexpectedPemLabel {
        /// 1-based index of the block in its input.
        block: usize,
        /// The label found (the text after `BEGIN `).
        found: String,
        /// What the caller expected.
        expected: &'static str,
    },
    /// Input that should hold PEM blocks holds none.
    #[error("no PEM block found in {what}")]
    NoPemBlock {
        /// What was being read.
        what: &'static str,
    },
    /// A certificate's DER could not be decoded.
    #[error("certificate: {source}")]
    CertificateDecode {
        /// The decoder's error.
        source: der::Error,
    },
    /// An extension of a certificate is malformed.
    #[error("certificate extension {extension}: {source}")]
    MalformedExtension {
        /// Name of the extension.
        extension: &'static str,
        /// The decoder's error.
        source: der::Error,
    },
    /// An extension pki reads appears more than once in a certificate
    /// (RFC 5280 §4.2 allows one of each).
    #[error("certificate extension {extension} appears more than once")]
    DuplicateExtension {
        /// Name of the extension.
        extension: &'static str,
    },
    /// A private key could not be decoded.
    #[error("private key: {reason}")]
    KeyDecode {
        /// What is wrong with it.
        reason: String,
    },
    /// The key type is not one pki supports.
    #[error("unsupported key: {reason}")]
    UnsupportedKey {
        /// Which key it is.
        reason: String,
    },
    /// An RSA key shorter than 2048 bits was offered.
    #[error("RSA key of {bits} bits refused: at least 2048 bits are required")]
    RsaKeyTooSmall {
        /// Its modulus size.
        bits: usize,
    },
    /// A private key does not belong to the certificate it was paired with.
    #[error("private key does not match certificate {certificate}")]
    KeyMismatch {
        /// The certificate's human id.
        certificate: String,
    },
    /// Key generation, encoding or signing failed.
    #[error("cryptographic operation failed: {reason}")]
    Crypto {
        /// The underlying message.
        reason: String,
    },
    /// A certificate could not be built from its parameters.
    #[error("cannot issue certificate: {reason}")]
    Issuance {
        /// What is wrong with the parameters.
        reason: String,
    },
    /// A time value is outside what X.509 can encode, or inconsistent.
    #[error("time: {reason}")]
    Time {
        /// What is wrong.
        reason: String,
        /// The encoder's error, when it refused the value.
        #[source]
        source: Option<der::Error>,
    },
    /// A rotation policy breaks the validity math.
    #[error("invalid rotation policy: {reason}")]
    InvalidPolicy {
        /// The rule it breaks, with the timeline that shows why.
        reason: String,
    },
    /// A certificate that must be a CA is not one.
    #[error("certificate {certificate} is not a CA: {reason}")]
    NotACa {
        /// The certificate's human id.
        certificate: String,
        /// Why it does not qualify.
        reason: String,
    },
    /// A bundle holds no self-signed root to pin.
    #[error("bundle has no self-signed root certificate to pin")]
    NoRoot,
    /// An input of a CA import could not be read.
    #[error("{what}: {source}")]
    Import {
        /// Which input (`the CA file`, `the key file`, `the chain file`).
        what: &'static str,
        /// What is wrong with it.
        #[source]
        source: Box<Error>,
    },
    /// Two private keys were supplied where one CA key is expected.
    #[error("two private keys supplied ({first}; {second}): a CA import takes exactly one")]
    TwoPrivateKeys {
        /// Where the first one is.
        first: String,
        /// Where the second one is.
        second: String,
    },
    /// A private key came without any certificate.
    #[error(
        "{place}: a private key without a certificate: supply the CA certificate it belongs to"
    )]
    KeyWithoutCertificate {
        /// Where the key is.
        place: String,
    },
    /// An input that must hold certificates holds none.
    #[error("{what} holds no certificate")]
    NoCertificate {
        /// Which input.
        what: &'static str,
    },
    /// An encrypted PKCS#8 key (`ENCRYPTED PRIVATE KEY`).
    #[error(
        "{place}: encrypted keys are not supported; decrypt with `openssl pkcs8 -in KEY -out PLAIN.key` and import the plain key"
    )]
    EncryptedKey {
        /// Where the key is.
        place: String,
    },
    /// A chain is not in issuing order (the CA, then its issuer, up to the
    /// root), or holds a certificate that issued nothing in it.
    #[error("chain out of order at certificate {position} {certificate}: {reason}")]
    ChainOutOfOrder {
        /// 1-based position among the certificates supplied (the CA is 1).
        position: usize,
        /// The certificate found there.
        certificate: String,
        /// What is wrong, and what was expected.
        reason: String,
    },
    /// A chain does not reach a self-signed root.
    #[error(
        "the chain ends at {last}, which is not a root: supply the certificates up to the root that issued \"{issuer}\""
    )]
    ChainHasNoRoot {
        /// Id of the last certificate supplied.
        last: String,
        /// Its issuer's name.
        issuer: String,
    },
    /// A CA's chain does not verify with the path verifier.
    #[error("CA {certificate} does not verify up to its root: {reason}")]
    ChainVerification {
        /// The CA's id.
        certificate: String,
        /// The verifier's reason.
        reason: String,
    },
    /// A signature in a chain cannot be checked: it uses an algorithm, or
    /// its issuer has a key, that pki does not support. The chain may well
    /// be intact; pki cannot tell.
    #[error("cannot check the signature of {certificate}: {source}")]
    UnsupportedSignature {
        /// The signed certificate (subject and id).
        certificate: String,
        /// What the verifier does not support.
        #[source]
        source: Box<VerifyError>,
    },
    /// A CA must sign but no private key was supplied for it.
    #[error("no private key supplied for CA {certificate}")]
    MissingPrivateKey {
        /// The CA's id.
        certificate: String,
    },
    /// A PKCS#11 URI (RFC 7512) could not be read.
    #[error("PKCS#11 URI: {reason}")]
    Pkcs11Uri {
        /// What is wrong, naming the attribute (never a PIN).
        reason: String,
    },
    /// The PKCS#11 module could not be loaded: no file at the path, or a
    /// file that is not a PKCS#11 module.
    #[error(
        "cannot load the PKCS#11 module {path}: {reason}: give the path of the token's module (a .so file, such as /usr/lib/softhsm/libsofthsm2.so)"
    )]
    Pkcs11Module {
        /// The path given.
        path: String,
        /// What the loader said.
        reason: String,
    },
    /// The token refused the user PIN.
    #[error("the PIN of PKCS#11 token \"{token}\" is wrong: check the PIN file")]
    Pkcs11WrongPin {
        /// The token's label.
        token: String,
    },
    /// No token of the module matches the URI's token attributes.
    #[error(
        "no PKCS#11 token {wanted} in the module (tokens: {available}): check token= in the key's URI, or initialise the token"
    )]
    Pkcs11TokenNotFound {
        /// The token attributes looked for (`token="ca"`).
        wanted: String,
        /// The labels of the tokens the module has, comma-separated, or
        /// `none`.
        available: String,
    },
    /// The token holds no private key object matching the URI.
    #[error(
        "PKCS#11 token \"{token}\" holds no private key {object}: the key object was deleted, or the URI names another one"
    )]
    Pkcs11KeyNotFound {
        /// The token's label.
        token: String,
        /// The object attributes looked for (`object="ca" id=%01`).
        object: String,
    },
    /// More than one private key object matches the URI.
    #[error(
        "PKCS#11 token \"{token}\" holds {count} private keys matching {object}: add id= to the URI to name one"
    )]
    Pkcs11KeyAmbiguous {
        /// The token's label.
        token: String,
        /// The object attributes looked for.
        object: String,
        /// How many match.
        count: usize,
    },
    /// A key was to be generated with a CKA_ID that an object of the token
    /// already has.
    #[error(
        "PKCS#11 token \"{token}\" already holds a key object with {object}: adopt or destroy that key, or choose another id"
    )]
    Pkcs11KeyExists {
        /// The token's label.
        token: String,
        /// The id (and label) asked for.
        object: String,
    },
    /// The token has no room for another object (CKR_DEVICE_MEMORY).
    #[error(
        "PKCS#11 token \"{token}\" is full (CKR_DEVICE_MEMORY) while {operation}: destroy key objects nothing uses, or use a token with more room"
    )]
    Pkcs11TokenFull {
        /// The token's label.
        token: String,
        /// What was being done.
        operation: String,
    },
    /// The token does not offer a mechanism pki needs for the key.
    #[error(
        "PKCS#11 token \"{token}\" does not support {mechanism}: choose another key algorithm, or a token that offers it"
    )]
    Pkcs11UnsupportedMechanism {
        /// The token's label.
        token: String,
        /// The mechanism (`CKM_ECDSA`).
        mechanism: String,
    },
    /// A CA key in a token was to sign, but no token was opened for it.
    #[error(
        "the CA key {uri} is in a PKCS#11 token and no token was opened: give the module (PKI_PKCS11_MODULE) and the PIN file (PKI_PKCS11_PIN_FILE)"
    )]
    Pkcs11TokenNotOpen {
        /// The key's URI.
        uri: String,
    },
    /// The object a CA key's URI finds is not the key the document records.
    #[error(
        "the PKCS#11 key object {uri} is not the CA's key (its public key differs from the one recorded): the object was replaced; restore it, or point the URI at the CA's key"
    )]
    Pkcs11KeyReplaced {
        /// The key's URI.
        uri: String,
    },
    /// Any other failure of a PKCS#11 module or token.
    #[error("PKCS#11 {operation}: {reason}")]
    Pkcs11 {
        /// What was being done (`signing with token "ca"`).
        operation: String,
        /// What the module said.
        reason: String,
    },
}

impl Error {
    pub(crate) fn crypto(e: impl fmt::Display) -> Self {
        Error::Crypto {
            reason: e.to_string(),
        }
    }
    pub(crate) fn issuance(e: impl fmt::Display) -> Self {
        Error::Issuance {
            reason: e.to_string(),
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
