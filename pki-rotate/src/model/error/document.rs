//! [`DocumentError`]: A document that cannot be read as the kind asked for: another kind or a newer version, malformed JSON or material, a file missing, or parts that do not belong together.

/// A document that cannot be read as the kind asked for: another kind or a newer version, malformed JSON or material, a file missing, or parts that do not belong together.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentError {
    /// A document that reads, but whose parts do not belong together (see
    /// [`crate::Document::problems`]): nothing is decided over it.
    #[error("{location} is inconsistent: {}; nothing was written", .problems.join("; "))]
    Inconsistent {
        /// The store and document.
        location: String,
        /// What does not hold, one sentence each.
        problems: Vec<String>,
    },
    /// A document has a kind or a version this build does not read. It is
    /// never reset or overwritten because of it.
    #[error("{location}: {}", describe_unsupported(.kind, *.version, .expected_kind, *.supported))]
    Unsupported {
        /// Where the document was read from.
        location: String,
        /// The kind found (None: the document names no kind).
        kind: Option<String>,
        /// The version found.
        version: u32,
        /// The kind the caller asked for.
        expected_kind: &'static str,
        /// The newest version of that kind this build reads.
        supported: u32,
    },
    /// A document or one of its files is not valid JSON of the expected shape.
    #[error("{location}: {source}")]
    Json {
        /// Which file or field.
        location: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A certificate or key of a document does not decode.
    #[error("{location}: {source}")]
    Material {
        /// Which file.
        location: String,
        /// What is wrong with it.
        #[source]
        source: pki_core::Error,
    },
    /// A document is inconsistent or incomplete (a file is missing, the
    /// bundle lacks the current CA…).
    #[error("{location}: {reason}")]
    Corrupt {
        /// Which file or field.
        location: String,
        /// What is wrong.
        reason: String,
    },
}

fn describe_unsupported(
    kind: &Option<String>,
    version: u32,
    expected: &str,
    supported: u32,
) -> String {
    match kind.as_deref() {
        Some(k) if k != expected => format!(
            "holds a \"{}\" document, not a {expected} document",
            k.escape_debug()
        ),
        _ => format!(
            "{expected} document version {version} is not supported (this build reads versions up to {supported}); refusing to reset it"
        ),
    }
}
