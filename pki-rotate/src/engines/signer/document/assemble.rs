//! The signer built from its files, whichever form they came in (the store's
//! files or the JSON document's inline material): every certificate and
//! key parsed, and checked to fit together, before the document is used.

use super::{CA_BUNDLE, Document, SIGNER_BRIDGE, SIGNER_CERT, SIGNER_CHAIN, SIGNER_KEY};
use super::{leaf_cert_path, leaf_key_path};
use crate::engines::leaf::{IssuedLeaf, Leaf};
use crate::engines::signer::{ExternalCa, ExternalRecord, SignerState};
use crate::engines::token_keys::{TokenKeys, current_key};
use crate::model::error::{Result, RotateError};
use pki_core::{Bundle, Certificate, CertificateAuthority, PrivateKey};
use std::collections::BTreeMap;

/// The signer from `doc` and its files: `get` finds a file by path, `leaf`
/// a leaf's certificate and key by name; errors name `origin` (`store`,
/// `material`) and the path.
pub(super) fn assemble<'a>(
    doc: Document,
    origin: &str,
    get: impl Fn(&str) -> Option<&'a [u8]>,
    leaf: impl Fn(&str) -> Option<(&'a [u8], &'a [u8])>,
) -> Result<SignerState> {
    let source = Source { origin, get };
    let ca = source.ca(doc.token_keys.as_ref())?;
    let (bridge, bridge_chain) = source.bridge()?;
    let bundle = Bundle::from_pem(source.need(CA_BUNDLE)?).map_err(|e| source.at(CA_BUNDLE, e))?;
    let external = source.external(doc.external)?;
    // An imported CA's bundle holds the root of its chain instead, and that
    // root leaves the bundle when it expires (pruned like any member).
    if external.is_none() && !bundle.contains(&ca.cert) {
        return Err(RotateError::corrupt(
            format!("{origin}: {CA_BUNDLE}"),
            format!("does not contain the current CA {}", ca.cert.id()),
        ));
    }

    let mut leaves = BTreeMap::new();
    for (name, request) in doc.leaves {
        let issued = match leaf(&name) {
            None => None,
            Some((chain_pem, key_pem)) => Some(source.leaf(&name, chain_pem, key_pem)?),
        };
        leaves.insert(
            name,
            Leaf {
                request: std::sync::Arc::new(request),
                issued,
            },
        );
    }

    let mut state = SignerState {
        policy: doc.policy,
        ca,
        bridge,
        bridge_chain,
        bundle,
        previous: doc.previous,
        forced_rotation_reason: doc.forced_rotation_reason,
        leaves,
        history: doc.history,
        external,
        published: doc.published,
        consumers: doc.consumers,
        token_keys: doc.token_keys,
    };
    state.adopt_current_bundle();
    Ok(state)
}

/// Where the files come from: a name for errors and a lookup by path.
struct Source<'o, G> {
    origin: &'o str,
    get: G,
}

impl<'a, G: Fn(&str) -> Option<&'a [u8]>> Source<'_, G> {
    /// The file at `path`, which the document cannot do without.
    fn need(&self, path: &str) -> Result<&'a [u8]> {
        (self.get)(path)
            .ok_or_else(|| RotateError::corrupt(format!("{}: {path}", self.origin), "missing"))
    }

    /// `e`, raised reading the file at `path`, named by where it came from.
    fn at(&self, path: &str, e: pki_core::Error) -> RotateError {
        RotateError::material(format!("{}: {path}", self.origin), e)
    }

    /// The CA, its key checked against its certificate: the key file, or
    /// the token object `token_keys` names (its public half the one the
    /// certificate names; a key file beside it is refused, since one of
    /// the two would be a key nobody rotates).
    fn ca(&self, token_keys: Option<&TokenKeys>) -> Result<CertificateAuthority> {
        let cert =
            Certificate::from_pem(self.need(SIGNER_CERT)?).map_err(|e| self.at(SIGNER_CERT, e))?;
        let Some(keys) = token_keys else {
            let key = PrivateKey::from_stored_pem(self.need(SIGNER_KEY)?)
                .map_err(|e| self.at(SIGNER_KEY, e))?;
            return CertificateAuthority::new(cert, key).map_err(|e| self.at(SIGNER_KEY, e));
        };
        if (self.get)(SIGNER_KEY).is_some() {
            return Err(RotateError::corrupt(
                format!("{}: {SIGNER_KEY}", self.origin),
                format!(
                    "is present, but the document keeps the CA key in a token ({})",
                    keys.current
                ),
            ));
        }
        let key = current_key(&keys.current, &cert).map_err(|e| self.at(SIGNER_CERT, e))?;
        CertificateAuthority::new(cert, key).map_err(|e| self.at(SIGNER_CERT, e))
    }

    /// Bridge B and what follows it in serving chains (the certificates
    /// above a previous CA imported under someone else's root), once a
    /// rotation made one.
    fn bridge(&self) -> Result<(Option<Certificate>, Vec<Certificate>)> {
        let Some(pem) = (self.get)(SIGNER_BRIDGE) else {
            return Ok((None, Vec::new()));
        };
        let mut certs = Certificate::all_from_pem(pem)
            .map_err(|e| self.at(SIGNER_BRIDGE, e))?
            .into_iter();
        let bridge = certs.next().ok_or_else(|| {
            RotateError::corrupt(
                format!("{}: {SIGNER_BRIDGE}", self.origin),
                "holds no certificate",
            )
        })?;
        Ok((Some(bridge), certs.collect()))
    }

    /// The imported CA's record with the chain above it, read only when the
    /// document says the CA was imported.
    fn external(&self, record: Option<ExternalRecord>) -> Result<Option<ExternalCa>> {
        let Some(record) = record else {
            return Ok(None);
        };
        let chain = match (self.get)(SIGNER_CHAIN) {
            Some(pem) => Certificate::all_from_pem(pem).map_err(|e| self.at(SIGNER_CHAIN, e))?,
            None => Vec::new(),
        };
        Ok(Some(ExternalCa {
            imported_at: record.imported_at,
            chain,
        }))
    }

    /// An issued leaf: the first certificate of its chain file, with a key
    /// that must be its own, or every handshake with it would fail.
    fn leaf(&self, name: &str, chain_pem: &[u8], key_pem: &[u8]) -> Result<IssuedLeaf> {
        let cert_path = leaf_cert_path(name);
        let key_path = leaf_key_path(name);
        let chain = Certificate::all_from_pem(chain_pem).map_err(|e| self.at(&cert_path, e))?;
        let cert = chain.into_iter().next().ok_or_else(|| {
            RotateError::corrupt(
                format!("{}: {cert_path}", self.origin),
                "holds no certificate",
            )
        })?;
        let key = PrivateKey::from_stored_pem(key_pem).map_err(|e| self.at(&key_path, e))?;
        if !key.matches_certificate(&cert) {
            return Err(self.at(
                &key_path,
                pki_core::Error::KeyMismatch {
                    certificate: cert.id(),
                },
            ));
        }
        Ok(IssuedLeaf { cert, key })
    }
}
