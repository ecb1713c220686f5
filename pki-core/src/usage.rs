//! What a certificate may be used for: the extended key usages pki names,
//! and the purpose a verification asks of a leaf.
//!
//! At the bottom of the crate: certificates, issuance profiles and path
//! validation speak of these, and so do the errors of path validation.

use der::asn1::ObjectIdentifier;
use std::fmt;

/// id-kp-serverAuth (RFC 5280 §4.2.1.12).
pub const EKU_SERVER_AUTH: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.1");
/// id-kp-clientAuth (RFC 5280 §4.2.1.12).
pub const EKU_CLIENT_AUTH: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.2");
/// anyExtendedKeyUsage (RFC 5280 §4.2.1.12).
pub const EKU_ANY: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37.0");

/// What the leaf will be used for (its extended key usage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// TLS server authentication (id-kp-serverAuth).
    ServerAuth,
    /// TLS client authentication (id-kp-clientAuth).
    ClientAuth,
}

impl Purpose {
    /// The extendedKeyUsage OID of the purpose.
    pub fn oid(self) -> ObjectIdentifier {
        match self {
            Purpose::ServerAuth => EKU_SERVER_AUTH,
            Purpose::ClientAuth => EKU_CLIENT_AUTH,
        }
    }
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Purpose::ServerAuth => "serverAuth",
            Purpose::ClientAuth => "clientAuth",
        })
    }
}
