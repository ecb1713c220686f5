//! What a document publishes for consumers that take objects as they are
//! (a store of Kubernetes objects), by a rule on paths alone.

use super::Files;
use std::collections::BTreeMap;

/// The path of the bundle consumers trust, in every kind that publishes
/// one (a signer's, an external CA's): `ca-bundle.crt` at the top.
pub const PUBLISHED_BUNDLE: &str = "ca-bundle.crt";

/// The directory of the leaves consumers use as they are: `certs/NAME/`.
pub const PUBLISHED_LEAVES_DIR: &str = "certs";

/// One leaf as consumers use it: a directory `certs/NAME/` holding
/// `tls.crt` (the serving chain, leaf first) and `tls.key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublishedLeaf<'a> {
    /// `tls.crt`: the chain the leaf serves.
    pub chain: &'a [u8],
    /// `tls.key`: its private key.
    pub key: &'a [u8],
}

/// What a document publishes for consumers that take objects as they are
/// (a store of Kubernetes objects: each leaf a `kubernetes.io/tls` Secret,
/// the bundle a ConfigMap), by a rule on paths alone, so that a store
/// needs not know the document's kind: the bundle is the top-level
/// [`PUBLISHED_BUNDLE`], the leaves the directories
/// [`PUBLISHED_LEAVES_DIR`]`/NAME/` holding both `tls.crt` and `tls.key`.
/// The signer and the external CA (one document) publish this way; a CA
/// set (whose leaves live per target, `targets/T/certs/NAME/`, each
/// target with bundles per CA, `targets/T/trust/CA.crt`), a key ring and a
/// credential hold neither and publish nothing. None when the document
/// has no bundle: a leaf is only useful with the bundle that verifies it.
/// A leaf whose key is sealed ([`crate::model::is_sealed`]: a store that
/// seals leaf keys too) is left out: consumers could not use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication<'a> {
    /// The bundle consumers trust.
    pub bundle: &'a [u8],
    /// The leaves by name.
    pub leaves: BTreeMap<&'a str, PublishedLeaf<'a>>,
}

impl<'a> Publication<'a> {
    /// What `files` publish; None without a bundle.
    pub fn of(files: &'a Files) -> Option<Self> {
        let bundle = files.get(PUBLISHED_BUNDLE)?;
        let mut leaves = BTreeMap::new();
        for (path, _) in files.iter() {
            if let Some((name, "tls.crt")) = published_leaf_file(path)
                && let (Some(chain), Some(key)) = (
                    files.get(path),
                    files.get(&format!("{PUBLISHED_LEAVES_DIR}/{name}/tls.key")),
                )
                && !crate::model::is_sealed(key)
            {
                leaves.insert(name, PublishedLeaf { chain, key });
            }
        }
        Some(Publication { bundle, leaves })
    }
}

/// The leaf and file name of `path` when it is a file of a published
/// leaf's directory (`certs/NAME/FILE`, FILE without `/`).
pub fn published_leaf_file(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix(PUBLISHED_LEAVES_DIR)?.strip_prefix('/')?;
    let (name, file) = rest.split_once('/')?;
    (!file.contains('/')).then_some((name, file))
}

/// Whether `path` is a private file of a published leaf (`certs/NAME/tls.key`,
/// or `tls.pem`, the key with its chain): what a store of consumer objects
/// publishes in clear in the leaf's Secret, so a store sealing private
/// material may leave it in clear ([`crate::SealedStore::clear_only`]);
/// every other private file (CA keys, key rings, credentials) stays sealed.
pub fn is_published_leaf_key(path: &str) -> bool {
    matches!(published_leaf_file(path), Some((_, "tls.key" | "tls.pem")))
}
