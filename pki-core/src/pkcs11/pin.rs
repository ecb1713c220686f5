//! A token's user PIN, zeroized when dropped and never printed.

use crate::error::{Error, Result};
use std::fmt;
use zeroize::Zeroizing;

/// The user PIN of a PKCS#11 token. Its memory is zeroized on drop and its
/// `Debug` form hides it. pki-core reads no file: the caller reads the PIN
/// file (a URI's `pin-source`, or one the command line names) and hands
/// its bytes to [`Pkcs11Pin::from_file_contents`].
#[derive(Clone)]
pub struct Pkcs11Pin(Zeroizing<String>);

impl Pkcs11Pin {
    /// A PIN given as text.
    pub fn new(pin: &str) -> Self {
        Pkcs11Pin(Zeroizing::new(pin.to_owned()))
    }

    /// The PIN in a PIN file's bytes: UTF-8 text on one line, one final
    /// line ending (`\n` or `\r\n`) removed. Refuses an empty PIN and a
    /// file of several lines (saying so, without showing the content).
    ///
    /// # Errors
    ///
    /// [`Error::Pkcs11`] when the file is empty, holds more than one line, or
    /// is not UTF-8 text. The message never shows the content.
    pub fn from_file_contents(contents: &[u8]) -> Result<Self> {
        let contents = Zeroizing::new(contents.to_vec());
        let line = contents
            .strip_suffix(b"\r\n")
            .or_else(|| contents.strip_suffix(b"\n"))
            .unwrap_or(&contents);
        let refuse = |what: &str| Error::Pkcs11 {
            operation: "reading the PIN".into(),
            reason: format!("the PIN file {what}: write the PIN alone on one line"),
        };
        if line.is_empty() {
            return Err(refuse("is empty"));
        }
        if line.contains(&b'\n') || line.contains(&b'\r') {
            return Err(refuse("holds more than one line"));
        }
        let text = std::str::from_utf8(line).map_err(|_| refuse("is not UTF-8 text"))?;
        Ok(Pkcs11Pin::new(text))
    }

    /// The PIN's text, for the token's login.
    #[cfg_attr(not(feature = "pkcs11"), allow(dead_code))]
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Pkcs11Pin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Pkcs11Pin(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_file_gives_its_one_line_without_the_line_ending() {
        for contents in [&b"1234"[..], b"1234\n", b"1234\r\n"] {
            let pin = Pkcs11Pin::from_file_contents(contents).unwrap();
            assert_eq!(pin.expose(), "1234");
        }
        assert_eq!(format!("{:?}", Pkcs11Pin::new("1234")), "Pkcs11Pin(..)");
    }

    #[test]
    fn a_pin_file_that_is_empty_or_of_several_lines_is_refused_without_its_content() {
        for contents in [&b""[..], b"\n", b"12\n34\n", b"12\r34", b"\xff\xfe"] {
            let text = Pkcs11Pin::from_file_contents(contents)
                .unwrap_err()
                .to_string();
            assert!(text.contains("write the PIN alone on one line"), "{text}");
            assert!(!text.contains("12"), "{text}");
        }
    }
}
