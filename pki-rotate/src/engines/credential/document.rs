//! The credential's document and its files.
//!
//! Files, all under `creds/NAME/` (the store key is `creds/NAME`):
//!
//! | file | what | Secret data key |
//! |---|---|---|
//! | `state.json` | the document below (secret: the hook commands may carry an admin password) | `state.json` |
//! | `current` | the current credential, as the mint hook printed it (trimmed) | `current` |
//! | `old` | the previous credential, from the new mint until its revocation is recorded | `old` |
//! | `stray-R-A` | what the failed (or late-reported) mint attempt A of rotation R printed, until its revocation is recorded | `stray-R-A` |
//!
//! Every file is secret (mode 0600). `old` exists only while the old
//! credential differs from the current one: the grace period (and a
//! revocation that keeps failing after it). Between "keep current as old"
//! and the new mint the document records `old` with the current
//! credential's rotation, and its value is the one in `current`, so a
//! consumer never sees an `old` equal to `current` (documents written before
//! this wrote that copy; it is read and dropped).
//!
//! Format version 1, fields of `state.json`: `kind` (`"credential"`),
//! `version` (1), `name`, `policy` (`expire_seconds`, `grace_seconds`),
//! `hooks` (`mint`, `revoke`, or null), `current` and `old` (`rotation`,
//! `minted_at`, or null: the values live in their own files), `mint` (the
//! attempt recorded as started: `rotation`, `attempt`, `started_at`, or
//! null), `mint_owner` (who runs that attempt; written only when there is
//! one, so that older builds, which would run any attempt, refuse the
//! document rather than ignore the owner), `failure` (`action`, `rotation`,
//! `failures`, `message` (stored sanitized), `at`, `retry_after`, or null),
//! `strays` (`rotation`, `attempt`, `captured_at`, `failure`; the values
//! live in their own files; written only when not empty, so documents
//! without strays stay readable by older builds, and older builds refuse,
//! rather than ignore, a document with strays), `next_rotation`, `history`
//! (`rotation`, `minted_at`, `attempts`, `revoked_at`).

use crate::engines::credential::{
    Credential, CredentialPolicy, CredentialState, HookFailure, Hooks, MintAttempt, RotationRecord,
    Secret, StrayCredential, validate_credential_name,
};
use crate::model::document::{Document as DocumentForm, Envelope, File, Files, SecretData};
use crate::model::error::{Result, RotateError};
use time::{Duration, OffsetDateTime};
use zeroize::Zeroizing;

/// The document kind.
pub const KIND: &str = "credential";
/// The format version this build writes (and the newest it reads).
pub const VERSION: u32 = 1;
/// The directory all credentials live under.
pub const CREDS_DIR: &str = "creds";
/// The document file, in `creds/NAME/`.
pub const STATE_FILE: &str = "state.json";
/// The current credential, in `creds/NAME/`.
pub const CURRENT_FILE: &str = "current";
/// The previous credential during the grace period, in `creds/NAME/`.
pub const OLD_FILE: &str = "old";

/// The file of what the failed mint attempt `attempt` of `rotation`
/// printed, in `creds/NAME/`.
pub fn stray_file(rotation: u64, attempt: u32) -> String {
    format!("{STRAY_PREFIX}{rotation}-{attempt}")
}

/// How the files of stray credentials start.
pub const STRAY_PREFIX: &str = "stray-";

/// `creds/NAME/FILE`.
pub fn credential_path(name: &str, file: &str) -> String {
    format!("{CREDS_DIR}/{name}/{file}")
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    kind: String,
    version: u32,
    name: String,
    policy: PolicyJson,
    hooks: Option<Hooks>,
    current: Option<CredentialJson>,
    old: Option<CredentialJson>,
    mint: Option<MintJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mint_owner: Option<String>,
    failure: Option<HookFailure>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    strays: Vec<StrayJson>,
    next_rotation: u64,
    history: Vec<RotationRecord>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct MintJson {
    rotation: u64,
    attempt: u32,
    #[serde(with = "time::serde::rfc3339")]
    started_at: OffsetDateTime,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StrayJson {
    rotation: u64,
    attempt: u32,
    #[serde(with = "time::serde::rfc3339")]
    captured_at: OffsetDateTime,
    failure: Option<HookFailure>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyJson {
    expire_seconds: i64,
    grace_seconds: i64,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialJson {
    rotation: u64,
    #[serde(with = "time::serde::rfc3339")]
    minted_at: OffsetDateTime,
}

impl CredentialState {
    fn document(&self) -> Document {
        let meta = |c: &Credential| CredentialJson {
            rotation: c.rotation,
            minted_at: c.minted_at,
        };
        Document {
            kind: KIND.to_string(),
            version: VERSION,
            name: self.name.clone(),
            policy: PolicyJson {
                expire_seconds: self.policy.expire.whole_seconds(),
                grace_seconds: self.policy.grace.whole_seconds(),
            },
            hooks: self.hooks.clone(),
            current: self.current.as_ref().map(meta),
            old: self.old.as_ref().map(meta),
            mint: self.mint.as_ref().map(|m| MintJson {
                rotation: m.rotation,
                attempt: m.attempt,
                started_at: m.started_at,
            }),
            mint_owner: self.mint.as_ref().and_then(|m| m.owner.clone()),
            failure: self.failure.clone(),
            strays: self
                .strays
                .iter()
                .map(|s| StrayJson {
                    rotation: s.rotation,
                    attempt: s.attempt,
                    captured_at: s.captured_at,
                    failure: s.failure.clone(),
                })
                .collect(),
            next_rotation: self.next_rotation,
            history: self.history.clone(),
        }
    }
}

fn parse(location: &str, bytes: &[u8]) -> Result<Document> {
    Envelope::probe(location, bytes)?.check(location, KIND, VERSION, |_| false)?;
    let doc: Document =
        serde_json::from_slice(bytes).map_err(|e| RotateError::json(location, e))?;
    validate_credential_name(&doc.name)?;
    Ok(doc)
}

/// Finds and parses the one `creds/NAME/state.json`. Its directory must be
/// the name it records: a document copied under another name would
/// otherwise publish its credentials where consumers of that name read.
fn read_state(files: &Files) -> Result<(&str, Document)> {
    let (state_path, json) = files
        .iter()
        .find(|(p, _)| {
            p.strip_prefix(CREDS_DIR)
                .and_then(|r| r.strip_prefix('/'))
                .and_then(|r| r.split_once('/'))
                .is_some_and(|(_, f)| f == STATE_FILE)
        })
        .ok_or_else(|| RotateError::corrupt(format!("{CREDS_DIR}/NAME/{STATE_FILE}"), "missing"))?;
    let doc = parse(state_path, &json.contents)?;
    let expected = credential_path(&doc.name, STATE_FILE);
    if state_path != expected {
        return Err(RotateError::corrupt(
            state_path,
            format!(
                "names credential \"{}\", which belongs in {expected}",
                doc.name.escape_debug()
            ),
        ));
    }
    Ok((state_path, doc))
}

/// The value in `creds/NAME/FILE`; the document recorded it, so a missing
/// file is corruption, named by its path.
fn credential_value(files: &Files, name: &str, file: &str) -> Result<Secret> {
    let path = credential_path(name, file);
    files
        .get(&path)
        .map(Secret::new)
        .ok_or_else(|| RotateError::corrupt(path, "missing (state.json records it)"))
}

/// The current and old credentials with their values. An old credential
/// that is still the current one (kept as old, not replaced yet) takes the
/// value in `current`: older builds wrote a copy to `old`, which is dropped.
fn read_credentials(
    doc: &Document,
    files: &Files,
) -> Result<(Option<Credential>, Option<Credential>)> {
    let current = match &doc.current {
        Some(c) => Some(Credential {
            rotation: c.rotation,
            minted_at: c.minted_at,
            value: credential_value(files, &doc.name, CURRENT_FILE)?,
        }),
        None => None,
    };
    let old = match (&doc.old, &current) {
        // Kept as old, not replaced yet: the value is the current one.
        (Some(c), Some(cur)) if c.rotation == cur.rotation => Some(Credential {
            rotation: c.rotation,
            minted_at: c.minted_at,
            value: cur.value.clone(),
        }),
        (Some(c), _) => Some(Credential {
            rotation: c.rotation,
            minted_at: c.minted_at,
            value: credential_value(files, &doc.name, OLD_FILE)?,
        }),
        (None, _) => None,
    };
    Ok((current, old))
}

/// The stray credentials with their values, each from its own file, so
/// that they can still be revoked.
fn read_strays(doc: &Document, files: &Files) -> Result<Vec<StrayCredential>> {
    doc.strays
        .iter()
        .map(|s| {
            Ok(StrayCredential {
                rotation: s.rotation,
                attempt: s.attempt,
                captured_at: s.captured_at,
                value: credential_value(files, &doc.name, &stray_file(s.rotation, s.attempt))?,
                failure: s.failure.clone(),
            })
        })
        .collect()
}

impl DocumentForm for CredentialState {
    const KIND: &'static str = KIND;
    const VERSION: u32 = VERSION;

    /// `creds/NAME/state.json` beside any file `creds/NAME/…` (sealed
    /// where the store seals: it holds hook commands).
    fn state_file(near: Option<&str>) -> Option<String> {
        match near?.split('/').collect::<Vec<_>>().as_slice() {
            [CREDS_DIR, name, _] => Some(credential_path(name, STATE_FILE)),
            _ => None,
        }
    }

    /// The files form (see the module's table).
    fn to_files(&self) -> Result<Files> {
        self.validate()?;
        let mut files = Files::new();
        let state = credential_path(&self.name, STATE_FILE);
        let json = serde_json::to_vec_pretty(&self.document())
            .map_err(|e| RotateError::json(state.clone(), e))?;
        files.insert(state, File::secret(json))?;
        if let Some(c) = &self.current {
            files.insert(
                credential_path(&self.name, CURRENT_FILE),
                File::secret(c.value.as_bytes()),
            )?;
        }
        if let Some(o) = &self.old
            && self.in_grace()
        {
            files.insert(
                credential_path(&self.name, OLD_FILE),
                File::secret(o.value.as_bytes()),
            )?;
        }
        for stray in &self.strays {
            files.insert(
                credential_path(&self.name, &stray_file(stray.rotation, stray.attempt)),
                File::secret(stray.value.as_bytes()),
            )?;
        }
        Ok(files)
    }

    /// Reads the files form. The document is found by its one
    /// `creds/NAME/state.json`; a missing credential file it names is an
    /// error naming it.
    fn from_files(files: &Files) -> Result<Self> {
        let (state_path, doc) = read_state(files)?;
        let (current, old) = read_credentials(&doc, files)?;
        let strays = read_strays(&doc, files)?;
        if doc.mint.is_none() && doc.mint_owner.is_some() {
            return Err(RotateError::corrupt(
                state_path,
                "has a mint_owner but no mint in progress",
            ));
        }
        let mint = doc.mint.as_ref().map(|m| MintAttempt {
            rotation: m.rotation,
            attempt: m.attempt,
            started_at: m.started_at,
            owner: doc.mint_owner.clone(),
        });
        let state = CredentialState {
            name: doc.name,
            policy: CredentialPolicy {
                expire: Duration::seconds(doc.policy.expire_seconds),
                grace: Duration::seconds(doc.policy.grace_seconds),
            },
            hooks: doc.hooks,
            current,
            old,
            mint,
            failure: doc.failure,
            strays,
            next_rotation: doc.next_rotation,
            history: doc.history,
        };
        state.validate().map_err(|e| match e {
            RotateError::Document(crate::DocumentError::Corrupt { reason, .. }) => {
                RotateError::corrupt(state_path, reason)
            }
            other => other,
        })?;
        Ok(state)
    }

    fn files_to_secret_data(files: &Files) -> Result<SecretData> {
        secret_data_from_files(files)
    }

    /// Consumers read `creds/NAME/current` and, during the grace period,
    /// `old` where they are published.
    fn published_secret(path: &str) -> bool {
        matches!(
            path.split('/').collect::<Vec<_>>().as_slice(),
            [CREDS_DIR, _, CURRENT_FILE | OLD_FILE]
        )
    }

    fn files_from_secret_data(data: &SecretData) -> Result<Files> {
        files_from_secret_data(data)
    }

    /// A sealed state cannot name the credential: its store key
    /// (`creds/NAME`) does, and the strays are the `stray-` entries.
    fn files_from_secret_data_at(key: &str, data: &SecretData) -> Result<Files> {
        let sealed_state = data
            .get(STATE_FILE)
            .is_some_and(|v| crate::model::is_sealed(v));
        let name = key
            .strip_prefix(CREDS_DIR)
            .and_then(|n| n.strip_prefix('/'));
        let (true, Some(name)) = (sealed_state, name) else {
            return files_from_secret_data(data);
        };
        let mut files = Files::new();
        for (entry, value) in data {
            if [STATE_FILE, CURRENT_FILE, OLD_FILE].contains(&entry.as_str())
                || entry.starts_with(STRAY_PREFIX)
            {
                files.insert(
                    credential_path(name, entry),
                    File {
                        contents: Zeroizing::clone(value),
                        secret: true,
                    },
                )?;
            }
        }
        Ok(files)
    }
}

/// The credential's files under Secret data keys: the file names inside
/// `creds/NAME/` (`state.json`, `current`, `old`): one Secret per
/// credential, as CCO keeps one Secret per CredentialsRequest.
///
/// # Errors
///
/// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when two files
/// share a name, so would share a Secret data key.
pub fn secret_data_from_files(files: &Files) -> Result<SecretData> {
    let mut data = SecretData::new();
    for (path, file) in files.iter() {
        let name = path.rsplit('/').next().unwrap_or(path);
        if data
            .insert(name.to_string(), file.contents.clone())
            .is_some()
        {
            return Err(RotateError::corrupt(
                path,
                format!("maps to Secret data key \"{name}\", which another file also maps to"),
            ));
        }
    }
    Ok(data)
}

/// The files back from Secret data: `state.json` names the credential.
///
/// # Errors
///
/// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when `state.json`
/// is missing;
/// [`DocumentError::Unsupported`](crate::DocumentError::Unsupported) and
/// [`DocumentError::Json`](crate::DocumentError::Json) when it is of another
/// kind or version or does not parse;
/// [`CredentialError::InvalidName`](crate::CredentialError::InvalidName) when
/// it names an unusable credential.
pub fn files_from_secret_data(data: &SecretData) -> Result<Files> {
    let json = data
        .get(STATE_FILE)
        .ok_or_else(|| RotateError::corrupt(STATE_FILE, "missing"))?;
    let doc = parse(STATE_FILE, json)?;
    let mut files = Files::new();
    let strays = doc.strays.iter().map(|s| stray_file(s.rotation, s.attempt));
    for file in [STATE_FILE, CURRENT_FILE, OLD_FILE]
        .map(str::to_string)
        .into_iter()
        .chain(strays)
    {
        if let Some(value) = data.get(&file) {
            files.insert(
                credential_path(&doc.name, &file),
                File {
                    contents: Zeroizing::clone(value),
                    secret: true,
                },
            )?;
        }
    }
    Ok(files)
}
