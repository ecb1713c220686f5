//! The framing of `state_file` and `documents` inputs: a store's files,
//! NUL-separated.

use pki_rotate::signer::document::{
    CA_BUNDLE, SIGNER_BRIDGE, SIGNER_CERT, SIGNER_KEY, STATE_FILE, leaf_cert_path, leaf_key_path,
    leaf_request_path,
};
use pki_rotate::{File, Files};

/// Separator between files in a `state_file` input.
pub const STATE_SEPARATOR: u8 = 0;

/// The fixed slots of a `state_file` input, in order; after them come
/// quadruples (leaf name, `certs/NAME/tls.crt`, `certs/NAME/tls.key`,
/// `leaf-requests/NAME.json`).
pub const STATE_SLOTS: [(&str, bool); 5] = [
    (STATE_FILE, false),
    (SIGNER_CERT, false),
    (SIGNER_KEY, true),
    (CA_BUNDLE, false),
    (SIGNER_BRIDGE, false),
];

/// Splits a `state_file` input: NUL-separated parts fill [`STATE_SLOTS`]
/// (an empty part means the file is absent), then leaf quadruples. The first
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
    for leaf in parts.get(STATE_SLOTS.len()..).unwrap_or(&[]).chunks(4) {
        let name = String::from_utf8_lossy(leaf[0]);
        if let Some(cert) = leaf.get(1) {
            put(leaf_cert_path(&name), cert, false);
        }
        if let Some(key) = leaf.get(2) {
            put(leaf_key_path(&name), key, true);
        }
        if let Some(request) = leaf.get(3) {
            put(leaf_request_path(&name), request, false);
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
    let names: std::collections::BTreeSet<&str> = files
        .iter()
        .filter_map(|(path, _)| {
            path.strip_prefix("certs/")
                .and_then(|p| p.strip_suffix("/tls.crt"))
                .or_else(|| {
                    path.strip_prefix("leaf-requests/")
                        .and_then(|p| p.strip_suffix(".json"))
                })
        })
        .collect();
    for name in names {
        let get = |p: String| files.get(&p).map(<[u8]>::to_vec).unwrap_or_default();
        parts.push(name.as_bytes().to_vec());
        parts.push(get(leaf_cert_path(name)));
        parts.push(get(leaf_key_path(name)));
        parts.push(get(leaf_request_path(name)));
    }
    parts.join(&[STATE_SEPARATOR][..])
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
