//! Reading and writing PEM (RFC 7468).
//!
//! Real-world bundles have CRLF line endings, comments or `openssl x509
//! -text` output between blocks, and trailing whitespace. [`read_blocks`]
//! finds every `-----BEGIN …-----`/`-----END …-----` pair, ignores the text
//! around them, and accepts base64 lines of any length; an error names the
//! 1-based block it is about.
//!
//! Public blocks (certificates, public keys) are decoded with plain base64
//! into ordinary buffers. Any other block may hold a secret: it is decoded
//! by the constant-time `pem-rfc7468` crate into zeroized buffers.

use crate::error::{Error, Result};
use zeroize::Zeroizing;

/// One decoded PEM block.
#[derive(Clone, PartialEq, Eq)]
pub struct PemBlock {
    /// The label, such as `CERTIFICATE` or `PRIVATE KEY`.
    pub label: String,
    /// The decoded bytes. Zeroized on drop: blocks may hold private keys.
    pub der: Zeroizing<Vec<u8>>,
}

impl std::fmt::Debug for PemBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PemBlock")
            .field("label", &self.label)
            .field("len", &self.der.len())
            .finish()
    }
}

const BEGIN: &str = "-----BEGIN ";
const END: &str = "-----END ";
const DASHES: &str = "-----";

/// Labels of blocks that hold public data only. Their bodies are decoded
/// with plain base64 into ordinary buffers; every other label (private
/// keys first of all) goes through constant-time base64 into zeroized ones.
const PUBLIC_LABELS: [&str; 5] = [
    "CERTIFICATE",
    "TRUSTED CERTIFICATE",
    "PUBLIC KEY",
    "X509 CRL",
    "CERTIFICATE REQUEST",
];

/// Reads every PEM block of `input`, in order.
///
/// Text outside blocks is ignored. A block that has no END line, whose END
/// label differs from its BEGIN label, or whose body is not valid base64 is an
/// error naming the block.
///
/// Binary DER input (a certificate or a key, or several concatenated) is
/// read too: each object becomes the block its PEM form would be.
///
/// # Errors
///
/// The error names the 1-based block (or DER object) it is about:
/// - [`Error::Pem`] when the input is not UTF-8 text, a block has no END line
///   or an END label that differs from its BEGIN label, or its body is not
///   valid base64;
/// - [`Error::Der`] when binary DER input cannot be split into objects, or one
///   of them is not a certificate or a key (an encrypted key is refused too).
pub fn read_blocks(input: &[u8]) -> Result<Vec<PemBlock>> {
    if let Some(objects) = crate::der_input::objects(input)? {
        return objects
            .into_iter()
            .enumerate()
            .map(|(i, der)| {
                Ok(PemBlock {
                    label: crate::der_input::label(i + 1, der)?.to_string(),
                    der: Zeroizing::new(der.to_vec()),
                })
            })
            .collect();
    }
    let mut blocks = Vec::new();
    let mut scanner = Scanner::new(input)?;
    // Room for the whole input: the body never reallocates, so no copy of
    // a secret is left behind in freed memory.
    let mut body = Zeroizing::new(String::with_capacity(input.len()));
    while let Some((index, label)) = scanner.next_block(&mut body)? {
        let der = if PUBLIC_LABELS.contains(&label) {
            Zeroizing::new(decode_public(index, label, &body)?)
        } else {
            decode_secret(index, label, &body)?
        };
        blocks.push(PemBlock {
            label: label.to_string(),
            der,
        });
    }
    Ok(blocks)
}

/// Calls `f` with the 1-based index and the DER of every block of `input`,
/// in order, after checking that its label is `expected`. Faster than
/// [`read_blocks`] for public data: no label is copied, and the body is
/// decoded with plain base64 straight into the buffer handed to `f`. A
/// block with another label is an [`Error::UnexpectedPemLabel`]; other
/// errors are the ones [`read_blocks`] gives.
pub(crate) fn for_each_public_block(
    input: &[u8],
    expected: &'static str,
    mut f: impl FnMut(usize, Vec<u8>) -> Result<()>,
) -> Result<()> {
    debug_assert!(PUBLIC_LABELS.contains(&expected));
    if let Some(objects) = crate::der_input::objects(input)? {
        for (i, der) in objects.into_iter().enumerate() {
            let index = i + 1;
            let label = crate::der_input::label(index, der)?;
            if label != expected {
                return Err(Error::Der {
                    object: index,
                    reason: format!("expected {expected}, found {label}"),
                });
            }
            f(index, der.to_vec()).map_err(crate::der_input::renamed)?;
        }
        return Ok(());
    }
    let mut scanner = Scanner::new(input)?;
    let mut body = String::new();
    while let Some((index, label)) = scanner.next_block(&mut body)? {
        if label != expected {
            return Err(Error::UnexpectedPemLabel {
                block: index,
                found: label.to_string(),
                expected,
            });
        }
        f(index, decode_public(index, label, &body)?)?;
    }
    Ok(())
}

/// Finds blocks in PEM text, one at a time.
struct Scanner<'a> {
    lines: std::str::Lines<'a>,
    found: usize,
}

impl<'a> Scanner<'a> {
    fn new(input: &'a [u8]) -> Result<Self> {
        let text = std::str::from_utf8(input).map_err(|e| Error::Pem {
            block: 1,
            reason: format!("input is not UTF-8 text (byte {})", e.valid_up_to()),
            source: None,
        })?;
        Ok(Scanner {
            lines: text.lines(),
            found: 0,
        })
    }

    /// The next block's index and label; its body lines, trimmed and
    /// joined, replace the content of `body`.
    fn next_block(&mut self, body: &mut String) -> Result<Option<(usize, &'a str)>> {
        body.clear();
        let label = loop {
            let Some(line) = self.lines.next() else {
                return Ok(None);
            };
            if let Some(label) = line
                .trim()
                .strip_prefix(BEGIN)
                .and_then(|rest| rest.strip_suffix(DASHES))
            {
                break label;
            }
        };
        self.found += 1;
        let index = self.found;
        let mut closed = false;
        for inner in self.lines.by_ref().map(str::trim) {
            if let Some(end_label) = inner.strip_prefix(END).and_then(|r| r.strip_suffix(DASHES)) {
                if end_label != label {
                    return Err(Error::Pem {
                        block: index,
                        reason: format!("BEGIN {label} closed by END {end_label}"),
                        source: None,
                    });
                }
                closed = true;
                break;
            }
            if inner.starts_with(BEGIN) {
                return Err(Error::Pem {
                    block: index,
                    reason: format!("BEGIN {label} has no END line before the next BEGIN"),
                    source: None,
                });
            }
            body.push_str(inner);
        }
        if !closed {
            return Err(Error::Pem {
                block: index,
                reason: format!("BEGIN {label} has no END line (truncated input?)"),
                source: None,
            });
        }
        // Headers (RFC 1421 `Proc-Type:` lines) mean an encrypted legacy key.
        if body.contains(':') {
            return Err(Error::Pem {
                block: index,
                reason: format!("{label} has PEM headers (encrypted keys are not supported)"),
                source: None,
            });
        }
        Ok(Some((index, label)))
    }
}

fn empty(index: usize, label: &str) -> Error {
    Error::Pem {
        block: index,
        reason: format!("{label} is empty"),
        source: None,
    }
}

/// Plain (variable-time) base64 of a public block's body.
fn decode_public(index: usize, label: &str, body: &str) -> Result<Vec<u8>> {
    use base64::Engine;
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|e| Error::Pem {
            block: index,
            reason: format!("{label}: invalid base64 body ({e})"),
            source: None,
        })?;
    if der.is_empty() {
        return Err(empty(index, label));
    }
    Ok(der)
}

/// Constant-time base64 of a block that may hold a secret, through
/// zeroized buffers only. The body is re-wrapped at 64 characters, the
/// line length `pem-rfc7468` expects.
fn decode_secret(index: usize, label: &str, body: &str) -> Result<Zeroizing<Vec<u8>>> {
    let mut canonical = Zeroizing::new(String::with_capacity(
        2 * (BEGIN.len() + label.len() + DASHES.len() + 1) + body.len() + body.len() / 64 + 1,
    ));
    canonical.push_str(BEGIN);
    canonical.push_str(label);
    canonical.push_str(DASHES);
    canonical.push('\n');
    for line in body.as_bytes().chunks(64) {
        // Valid base64 is ASCII, so a chunk is valid UTF-8; anything else
        // fails to decode below either way.
        canonical.push_str(std::str::from_utf8(line).unwrap_or("!"));
        canonical.push('\n');
    }
    canonical.push_str(END);
    canonical.push_str(label);
    canonical.push_str(DASHES);
    canonical.push('\n');
    let (_, der) = pem_rfc7468::decode_vec(canonical.as_bytes()).map_err(|e| Error::Pem {
        block: index,
        reason: format!("{label}: invalid base64 body ({e})"),
        source: None,
    })?;
    let der = Zeroizing::new(der);
    if der.is_empty() {
        return Err(empty(index, label));
    }
    Ok(der)
}

/// Encodes `der` as one PEM block with LF line endings.
pub fn encode(label: &str, der: &[u8]) -> String {
    // Encoding into a String only fails for labels that are not valid PEM
    // labels; our labels are constants.
    pem_rfc7468::encode_string(label, pem_rfc7468::LineEnding::LF, der).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = "-----BEGIN CERTIFICATE-----\nAAEC\n-----END CERTIFICATE-----\n";

    #[test]
    fn reads_blocks_with_crlf_and_text_between() {
        let input = format!(
            "subject=foo\r\n{}\r\nnoise\n{}",
            ONE.replace('\n', "\r\n"),
            ONE
        );
        let blocks = read_blocks(input.as_bytes()).unwrap();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].label, "CERTIFICATE");
        assert_eq!(blocks[1].der.as_slice(), &[0, 1, 2]);
    }

    #[test]
    fn truncated_block_names_its_index() {
        let input = format!("{ONE}-----BEGIN CERTIFICATE-----\nAAEC\n");
        let err = read_blocks(input.as_bytes()).unwrap_err();
        assert!(matches!(err, Error::Pem { block: 2, .. }), "{err}");
    }

    #[test]
    fn bad_base64_is_an_error() {
        let input = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        assert!(matches!(
            read_blocks(input.as_bytes()),
            Err(Error::Pem { block: 1, .. })
        ));
    }

    #[test]
    fn mismatched_end_label_is_an_error() {
        let input = "-----BEGIN CERTIFICATE-----\nAAEC\n-----END PRIVATE KEY-----\n";
        assert!(read_blocks(input.as_bytes()).is_err());
    }

    #[test]
    fn reads_bodies_wrapped_at_any_width() {
        let der: Vec<u8> = (0..=255).collect();
        let pem = encode("CERTIFICATE", &der);
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        for width in [1, 7, 63, 65, 1000] {
            let wrapped: Vec<String> = body
                .as_bytes()
                .chunks(width)
                .map(|c| String::from_utf8(c.to_vec()).unwrap())
                .collect();
            let input = format!(
                "-----BEGIN CERTIFICATE-----\r\n{}\r\n-----END CERTIFICATE-----\r\n",
                wrapped.join("\r\n")
            );
            let blocks = read_blocks(input.as_bytes()).unwrap();
            assert_eq!(blocks[0].der.as_slice(), der.as_slice(), "width {width}");
            let mut seen = Vec::new();
            for_each_public_block(input.as_bytes(), "CERTIFICATE", |i, d| {
                seen.push((i, d));
                Ok(())
            })
            .unwrap();
            assert_eq!(seen, [(1, der.clone())], "width {width}");
        }
    }

    #[test]
    fn public_and_secret_blocks_decode_the_same_way() {
        for label in ["CERTIFICATE", "PRIVATE KEY"] {
            let der: Vec<u8> = (0..200).collect();
            let pem = encode(label, &der);
            for width in [1, 7, 64, 65, 1000] {
                let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
                let wrapped: Vec<&str> = body
                    .as_bytes()
                    .chunks(width)
                    .map(|c| std::str::from_utf8(c).unwrap())
                    .collect();
                let input = format!(
                    "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
                    wrapped.join("\n")
                );
                let blocks = read_blocks(input.as_bytes()).unwrap();
                assert_eq!(blocks[0].der.as_slice(), der.as_slice(), "{label} {width}");
            }
            let input = encode(label, &[1, 2, 3, 4, 5]);
            assert_eq!(
                read_blocks(input.as_bytes()).unwrap()[0].der.as_slice(),
                [1, 2, 3, 4, 5]
            );
            let broken = input.replace("AQIDBAU=", "AQIDBAU");
            assert!(
                matches!(
                    read_blocks(broken.as_bytes()),
                    Err(Error::Pem { block: 1, .. })
                ),
                "{label}"
            );
        }
    }

    #[test]
    fn public_block_reader_names_a_block_with_another_label() {
        let input = format!("{ONE}{}", encode("PRIVATE KEY", &[1]));
        let err =
            for_each_public_block(input.as_bytes(), "CERTIFICATE", |_, _| Ok(())).unwrap_err();
        assert_eq!(
            err,
            Error::UnexpectedPemLabel {
                block: 2,
                found: "PRIVATE KEY".into(),
                expected: "CERTIFICATE"
            }
        );
    }

    #[test]
    fn roundtrip() {
        let pem = encode("CERTIFICATE", &[9, 8, 7]);
        let blocks = read_blocks(pem.as_bytes()).unwrap();
        assert_eq!(blocks[0].der.as_slice(), &[9, 8, 7]);
    }
}
