//! Text pki stores and prints back (names, reasons, common names): which
//! characters it refuses in them.

/// Whether `c` may not appear in text pki keeps and prints: a control
/// character (a newline forges a line, an escape drives the terminal), a
/// line or paragraph separator (a line break to some readers), or an
/// invisible formatting character: Unicode's Bidi_Control characters (an
/// override such as U+202E shows a name reversed) and the
/// default-ignorable format characters (a zero-width space such as U+200B
/// makes two names that print alike differ). Letters, marks and symbols
/// of every script pass, and emoji (but for sequences joined by U+200D).
pub fn is_control_or_invisible(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            // Soft hyphen, Arabic letter mark, Mongolian vowel separator.
            '\u{00AD}'
                | '\u{061C}'
                | '\u{180E}'
                // Zero-width space, non-joiner, joiner; LRM, RLM.
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'
                | '\u{2029}'
                // Embeddings, pops and overrides.
                | '\u{202A}'..='\u{202E}'
                // Word joiner, invisible operators, isolates, and the
                // deprecated format characters (with U+2065, reserved as
                // default-ignorable).
                | '\u{2060}'..='\u{206F}'
                // Byte order mark (zero-width no-break space).
                | '\u{FEFF}'
                // Reserved default-ignorables; interlinear annotation.
                | '\u{FFF0}'..='\u{FFFB}'
                // Shorthand format controls, musical symbol formats.
                | '\u{1BCA0}'..='\u{1BCA3}'
                | '\u{1D173}'..='\u{1D17A}'
                // Tags (the language tag and the tag characters).
                | '\u{E0000}'..='\u{E007F}'
        )
}

/// The first character of `text` that [`is_control_or_invisible`], if any.
pub fn find_control_or_invisible(text: &str) -> Option<char> {
    text.chars().find(|&c| is_control_or_invisible(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_bidi_overrides_and_zero_width_characters_are_refused_and_scripts_pass() {
        for c in [
            '\n',
            '\t',
            '\u{1b}',
            '\u{7f}',
            '\u{9b}',
            '\u{202E}',
            '\u{202A}',
            '\u{200B}',
            '\u{200D}',
            '\u{200E}',
            '\u{2066}',
            '\u{2069}',
            '\u{061C}',
            '\u{FEFF}',
            '\u{2028}',
            '\u{00AD}',
            '\u{E0041}',
        ] {
            assert!(is_control_or_invisible(c), "{c:?}");
        }
        for text in [
            "web-1",
            "clé compromise — ticket #42",
            "東京",
            "שלום",
            "🔥",
            "a b",
        ] {
            assert_eq!(find_control_or_invisible(text), None, "{text}");
        }
    }
}
