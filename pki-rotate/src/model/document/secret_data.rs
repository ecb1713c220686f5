//! The Secret form of a document's files (see the [module](super)):
//! each path under a valid Kubernetes Secret data key, and back.

use super::{File, Files};
use crate::model::error::{Result, RotateError};
use std::collections::BTreeMap;
use zeroize::Zeroizing;

/// A Kubernetes Secret's `data`: keys to bytes, zeroized on drop.
pub type SecretData = BTreeMap<String, Zeroizing<Vec<u8>>>;

/// The Secret data key of a document file: the document's rename when it
/// has one (`signer/tls.crt` → `tls.crt`), else the path with `/` replaced
/// by `.` (`certs/web/tls.crt` → `certs.web.tls.crt`). Every result is a
/// valid Secret data key (1-253 of `[-._a-zA-Z0-9]`) for a valid path of at
/// most 253 bytes.
pub fn secret_data_key(path: &str, renames: &[(&str, &str)]) -> String {
    match renames.iter().find(|(p, _)| *p == path) {
        Some((_, key)) => (*key).to_string(),
        None => path.replace('/', "."),
    }
}

/// Whether `key` is a valid key of a Kubernetes Secret's data.
pub fn is_secret_data_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Maps every file to its Secret data key. Fails when two paths map to the
/// same key or a key is not valid for a Secret.
///
/// # Errors
///
/// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) naming the path
/// when its key is not a valid Secret data key or another path already maps to
/// it.
pub fn files_to_secret_data(files: &Files, renames: &[(&str, &str)]) -> Result<SecretData> {
    let mut data = SecretData::new();
    for (path, file) in files.iter() {
        let key = secret_data_key(path, renames);
        if !is_secret_data_key(&key) {
            return Err(RotateError::corrupt(
                path,
                format!("maps to \"{key}\", which is not a Secret data key"),
            ));
        }
        if data.insert(key.clone(), file.contents.clone()).is_some() {
            return Err(RotateError::corrupt(
                path,
                format!("maps to Secret data key \"{key}\", which another file also maps to"),
            ));
        }
    }
    Ok(data)
}

/// Reads the files a document expects from Secret data: for each path of
/// `paths`, the entry under its key, when present. The document decides
/// which paths to ask for and which of them are secret.
///
/// # Errors
///
/// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when a path of
/// `paths` is not a valid file path (see [`validate_path`](super::validate_path)). A missing entry is
/// no error: it is left out.
pub fn files_from_secret_data<'a>(
    data: &SecretData,
    renames: &[(&str, &str)],
    paths: impl IntoIterator<Item = (&'a str, bool)>,
) -> Result<Files> {
    let mut files = Files::new();
    for (path, secret) in paths {
        if let Some(value) = data.get(&secret_data_key(path, renames)) {
            files.insert(
                path,
                File {
                    contents: value.clone(),
                    secret,
                },
            )?;
        }
    }
    Ok(files)
}
