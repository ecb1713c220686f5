//! Text the engine stores and prints back: credential names, mint owners
//! and the hooks' failure messages.

use crate::model::error::{Result, RotateError};

#[cfg(doc)]
use super::MintAttempt;

/// The longest failure message kept, in bytes (longer ones are cut, with `…`).
pub const MESSAGE_LIMIT: usize = 500;

/// Checks a credential name: 1-64 characters of `[a-z0-9._-]`, not
/// starting with `.` (it becomes a store key segment and a directory).
///
/// # Errors
///
/// [`CredentialError::InvalidName`](crate::CredentialError::InvalidName) when
/// `name` is not such a name.
pub fn validate_credential_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
        });
    if ok {
        Ok(())
    } else {
        Err(RotateError::Credential(
            crate::CredentialError::InvalidName(name.to_string()),
        ))
    }
}

/// Checks a mint owner (see [`MintAttempt::owner`]): 1-128 characters of
/// `[A-Za-z0-9._:@/-]`, so it prints as it is, on one line.
///
/// # Errors
///
/// [`CredentialError::InvalidMintOwner`](crate::CredentialError::InvalidMintOwner)
/// when `owner` is not such an owner.
pub fn validate_owner(owner: &str) -> Result<()> {
    let ok = !owner.is_empty()
        && owner.len() <= 128
        && owner.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'@' | b'/' | b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(RotateError::Credential(
            crate::CredentialError::InvalidMintOwner(owner.to_string()),
        ))
    }
}

/// Text from outside (a hook's failure message) as it is stored and
/// printed: one line (runs of whitespace, newlines included, become one
/// space), every other control or invisible formatting character escaped
/// (`\u{1b}`), at most [`MESSAGE_LIMIT`] bytes. Nothing stored carries a
/// terminal escape or a fake line. Idempotent.
pub fn sanitize_message(message: &str) -> String {
    let mut line = String::with_capacity(message.len().min(MESSAGE_LIMIT + 8));
    for word in message.split_whitespace() {
        if !line.is_empty() {
            line.push(' ');
        }
        for c in word.chars() {
            // escape_debug leaves printable characters alone; quotes and
            // backslashes are printable and stay as they are (so that
            // sanitizing twice changes nothing).
            if matches!(c, '\\' | '"' | '\'') || c.escape_debug().len() == 1 {
                line.push(c);
            } else {
                line.extend(c.escape_unicode());
            }
        }
    }
    if line.is_empty() {
        line = "failed without a message".to_string();
    }
    if line.len() > MESSAGE_LIMIT {
        let mut cut = MESSAGE_LIMIT;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push('…');
    }
    line
}
