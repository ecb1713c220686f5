//! Text callers give that pki stores and prints back: reasons, names,
//! messages.

use crate::model::error::{Result, RotateError};

/// The longest reason pki keeps, in bytes: a sentence, not a document.
pub const MAX_REASON_LEN: usize = 1024;

/// Checks a reason an operator gives (a forced rotation's, an override's,
/// a failure's): not blank, at most [`MAX_REASON_LEN`] bytes, and no
/// control or invisible character ([`pki_core::text::is_control_or_invisible`]),
/// since reasons are printed in status and history where a newline would
/// forge a line, an escape would drive the terminal and a bidi override
/// would show other words.
///
/// # Errors
///
/// [`RotateError::InvalidText`] naming `what` when `text` is blank, longer than
/// [`MAX_REASON_LEN`] bytes, or holds a control or invisible character.
pub fn check_reason(what: &str, text: &str) -> Result<()> {
    let refuse = |reason| {
        Err(RotateError::InvalidText {
            what: what.to_string(),
            reason,
        })
    };
    if text.trim().is_empty() {
        return refuse("must not be empty");
    }
    if text.len() > MAX_REASON_LEN {
        return refuse("is longer than 1024 bytes");
    }
    if pki_core::text::find_control_or_invisible(text).is_some() {
        return refuse(
            "contains a control character (a newline, a tab, an escape…) or an invisible one (a bidi override, a zero-width space…)",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_with_control_characters_or_blank_are_refused() {
        for bad in [
            "",
            "  ",
            "a\nb",
            "\u{1b}[31mred",
            "tab\there",
            "del\u{7f}",
            "c1\u{9b}x",
            "evil\u{202e}txt.exe",
            "zero\u{200b}width",
            "isolate\u{2067}d",
        ] {
            assert!(check_reason("the reason", bad).is_err(), "{bad:?}");
        }
        assert!(check_reason("the reason", &"x".repeat(1025)).is_err());
        for good in ["t1 down", "clé compromise — ticket #42", &"x".repeat(1024)] {
            check_reason("the reason", good).unwrap();
        }
    }
}
