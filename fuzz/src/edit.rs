//! The structure-aware description of one certificate of a
//! `path_validation` input: a pool certificate as it is, a byte-mutated
//! copy, a copy whose TBSCertificate is mutated and re-signed with a pool
//! key, or raw bytes.

use super::Pool;
use arbitrary::Arbitrary;
use pki_core::Certificate;

/// One byte-level edit. Positions wrap around the current length.
#[derive(Arbitrary, Debug, Clone)]
pub enum Edit {
    /// XOR one byte with `mask`.
    Flip { at: u16, mask: u8 },
    /// Overwrite one byte.
    Set { at: u16, byte: u8 },
    /// Keep the first `len` bytes.
    Truncate { len: u16 },
    /// Remove up to `len` bytes at `at`.
    Remove { at: u16, len: u8 },
    /// Insert `bytes` at `at`.
    Insert { at: u16, bytes: Vec<u8> },
    /// Overwrite `len` bytes at `at` with bytes of another pool certificate
    /// starting at `from` (same-length splice: DER lengths stay plausible).
    Splice {
        donor: u8,
        from: u16,
        at: u16,
        len: u8,
    },
}

/// At most this many edits are applied per certificate.
pub const MAX_EDITS: usize = 8;

/// Applies `edits` (the first [`MAX_EDITS`]) to `bytes`.
pub fn apply_edits(bytes: &mut Vec<u8>, edits: &[Edit], pool: &Pool) {
    for edit in edits.iter().take(MAX_EDITS) {
        let len = bytes.len();
        let pos = |at: u16| if len == 0 { 0 } else { usize::from(at) % len };
        match edit {
            Edit::Flip { at, mask } => {
                if len > 0 {
                    bytes[pos(*at)] ^= mask;
                }
            }
            Edit::Set { at, byte } => {
                if len > 0 {
                    bytes[pos(*at)] = *byte;
                }
            }
            Edit::Truncate { len: n } => bytes.truncate(usize::from(*n)),
            Edit::Remove { at, len: n } => {
                let start = pos(*at);
                let end = (start + usize::from(*n)).min(len);
                bytes.drain(start..end);
            }
            Edit::Insert { at, bytes: ins } => {
                let start = if len == 0 {
                    0
                } else {
                    usize::from(*at) % (len + 1)
                };
                let ins = &ins[..ins.len().min(64)];
                bytes.splice(start..start, ins.iter().copied());
            }
            Edit::Splice {
                donor,
                from,
                at,
                len: n,
            } => {
                let donor = pool.cert(*donor).der();
                if len == 0 || donor.is_empty() {
                    continue;
                }
                let from = usize::from(*from) % donor.len();
                let start = pos(*at);
                let n = usize::from(*n).min(donor.len() - from).min(len - start);
                bytes[start..start + n].copy_from_slice(&donor[from..from + n]);
            }
        }
    }
}

/// Where one certificate of a `path_validation` input comes from.
#[derive(Arbitrary, Debug, Clone)]
pub enum CertSource {
    /// A pool certificate, unchanged.
    Pool(u8),
    /// A pool certificate with byte edits anywhere in its DER (the
    /// signature no longer matches unless the edits miss the signed part).
    Mutated { base: u8, edits: Vec<Edit> },
    /// A pool certificate whose TBSCertificate bytes are edited and then
    /// signed again (ECDSA P-256 with SHA-256) with the pool's P-256 key
    /// number `signer`: the signature can verify, so the checks after it
    /// see the mutated content.
    Resigned {
        base: u8,
        edits: Vec<Edit>,
        signer: u8,
    },
    /// Arbitrary bytes.
    Raw(Vec<u8>),
}

impl CertSource {
    /// The DER this source stands for.
    pub fn der(&self, pool: &Pool) -> Vec<u8> {
        match self {
            CertSource::Pool(i) => pool.cert(*i).der().to_vec(),
            CertSource::Mutated { base, edits } => {
                let mut der = pool.cert(*base).der().to_vec();
                apply_edits(&mut der, edits, pool);
                der
            }
            CertSource::Resigned {
                base,
                edits,
                signer,
            } => {
                let der = pool.cert(*base).der();
                let Some(tbs) = tbs_of(der) else {
                    return der.to_vec();
                };
                let mut tbs = tbs.to_vec();
                apply_edits(&mut tbs, edits, pool);
                let key = &pool.p256_keys[usize::from(*signer) % pool.p256_keys.len()].1;
                sign_p256(&tbs, key)
            }
            CertSource::Raw(bytes) => bytes.clone(),
        }
    }

    /// The certificate, if the DER parses.
    pub fn cert(&self, pool: &Pool) -> Option<Certificate> {
        match self {
            CertSource::Pool(i) => Some(pool.cert(*i).clone()),
            _ => Certificate::from_der(&self.der(pool)).ok(),
        }
    }
}

/// Header length and content length of the DER TLV at the start of `der`
/// (definite lengths only).
fn tlv(der: &[u8]) -> Option<(usize, usize)> {
    let first = *der.get(1)?;
    if first < 0x80 {
        return Some((2, usize::from(first)));
    }
    let n = usize::from(first & 0x7f);
    if n == 0 || n > 4 {
        return None;
    }
    let mut len = 0usize;
    for i in 0..n {
        len = (len << 8) | usize::from(*der.get(2 + i)?);
    }
    Some((2 + n, len))
}

/// The TBSCertificate bytes (with their header) of a certificate's DER.
pub fn tbs_of(der: &[u8]) -> Option<&[u8]> {
    let (h, _) = tlv(der)?;
    let inner = der.get(h..)?;
    let (h2, l2) = tlv(inner)?;
    inner.get(..h2 + l2)
}

fn der_len(len: usize, out: &mut Vec<u8>) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
}

/// `Certificate ::= SEQUENCE { tbs, ecdsa-with-SHA256, BIT STRING sig }`,
/// with `tbs` taken as raw bytes (it may be malformed: that is the point).
pub fn sign_p256(tbs: &[u8], key: &p256::ecdsa::SigningKey) -> Vec<u8> {
    use signature::Signer;
    // AlgorithmIdentifier { ecdsa-with-SHA256 } (RFC 5758: no parameters).
    const ALG: [u8; 12] = [
        0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02,
    ];
    let sig: p256::ecdsa::DerSignature = key.sign(tbs);
    let sig = sig.as_bytes();
    let mut bits = vec![0x03];
    der_len(sig.len() + 1, &mut bits);
    bits.push(0);
    bits.extend_from_slice(sig);
    let body_len = tbs.len() + ALG.len() + bits.len();
    let mut out = vec![0x30];
    der_len(body_len, &mut out);
    out.extend_from_slice(tbs);
    out.extend_from_slice(&ALG);
    out.extend_from_slice(&bits);
    out
}
