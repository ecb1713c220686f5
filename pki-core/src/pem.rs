//! Reading and writing PEM (RFC 7468).
//!
//! Real-world bundles have CRLF line endings, comments or `openssl x509
//! -text` output between blocks, and trailing whitespace. [`read_blocks`]
//! finds every `-----BEGIN …-----`/`-----END …-----` pair, ignores the text
//! around them, and decodes each block with the `pem-rfc7468` crate; an error
//! names the 1-based block it is about.

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

/// Reads every PEM block of `input`, in order.
///
/// Text outside blocks is ignored. A block that has no END line, whose END
/// label differs from its BEGIN label, or whose body is not valid base64 is an
/// error naming the block.
pub fn read_blocks(input: &[u8]) -> Result<Vec<PemBlock>> {
    let text = std::str::from_utf8(input).map_err(|e| Error::Pem {
        block: 1,
        reason: format!("input is not UTF-8 text (byte {})", e.valid_up_to()),
    })?;
    let mut blocks = Vec::new();
    let mut lines = text.lines().map(|l| l.trim_end_matches('\r').trim());
    while let Some(line) = lines.next() {
        let Some(label) = line
            .strip_prefix(BEGIN)
            .and_then(|rest| rest.strip_suffix(DASHES))
        else {
            continue;
        };
        let index = blocks.len() + 1;
        let mut body = Zeroizing::new(String::new());
        let mut closed = false;
        for inner in lines.by_ref() {
            if let Some(end_label) = inner.strip_prefix(END).and_then(|r| r.strip_suffix(DASHES)) {
                if end_label != label {
                    return Err(Error::Pem {
                        block: index,
                        reason: format!("BEGIN {label} closed by END {end_label}"),
                    });
                }
                closed = true;
                break;
            }
            if inner.starts_with(BEGIN) {
                return Err(Error::Pem {
                    block: index,
                    reason: format!("BEGIN {label} has no END line before the next BEGIN"),
                });
            }
            body.push_str(inner);
            body.push('\n');
        }
        if !closed {
            return Err(Error::Pem {
                block: index,
                reason: format!("BEGIN {label} has no END line (truncated input?)"),
            });
        }
        // Headers (RFC 1421 `Proc-Type:` lines) mean an encrypted legacy key.
        if body.contains(':') {
            return Err(Error::Pem {
                block: index,
                reason: format!("{label} has PEM headers (encrypted keys are not supported)"),
            });
        }
        let canonical = Zeroizing::new(format!(
            "{BEGIN}{label}{DASHES}\n{}{END}{label}{DASHES}\n",
            body.as_str()
        ));
        let (_, der) = pem_rfc7468::decode_vec(canonical.as_bytes()).map_err(|e| Error::Pem {
            block: index,
            reason: format!("{label}: invalid base64 body ({e})"),
        })?;
        if der.is_empty() {
            return Err(Error::Pem {
                block: index,
                reason: format!("{label} is empty"),
            });
        }
        blocks.push(PemBlock {
            label: label.to_string(),
            der: Zeroizing::new(der),
        });
    }
    Ok(blocks)
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
    fn roundtrip() {
        let pem = encode("CERTIFICATE", &[9, 8, 7]);
        let blocks = read_blocks(pem.as_bytes()).unwrap();
        assert_eq!(blocks[0].der.as_slice(), &[9, 8, 7]);
    }
}
