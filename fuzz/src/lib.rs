//! Shared pieces of the fuzz targets and of the corpus generator.
//!
//! - [`pool`]: a deterministic set of valid certificates made with
//!   pki-core's own issuance (roots, intermediates, cross-signed bridges,
//!   leaves), built once per process from a seeded ChaCha20 RNG;
//! - [`CertSource`] / [`Edit`]: the structure-aware description of one
//!   certificate of a `path_validation` input: a pool certificate as it is,
//!   a byte-mutated copy, a copy whose TBSCertificate is mutated and then
//!   re-signed with a pool key, or raw bytes;
//! - [`split_state_input`] / [`join_state_files`]: the framing of
//!   `state_file` inputs (the store's files, NUL-separated);
//! - [`fs_fixture`] / [`split_fs_input`]: the directory store the
//!   `fs_manifest` target reads, and its inputs' framing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_core::Certificate;
use time::{Duration, OffsetDateTime, macros::datetime};

mod edit;
mod framing;
mod fs_store;
mod pool;

pub use edit::{CertSource, Edit, MAX_EDITS, apply_edits, sign_p256, tbs_of};
pub use framing::{
    DocumentKind, STATE_SEPARATOR, STATE_SLOTS, join_document_files, join_state_files,
    split_document_input, split_state_input,
};
pub use fs_store::{
    FsFixture, INDEX, KEY, LEAVES, MANIFEST, fs_fixture, part_path, shard_path, split_fs_input,
};
pub use pool::{Pool, PoolCert, pool};

/// The issuance time of the pool; verification times are relative to it.
pub const NOW: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

/// The seed of every RNG used here: same seed, same pool, same corpus.
pub const SEED: u64 = 0x5eed_f022;

/// Instants worth checking for a certificate-bearing state: its edges, one
/// second beyond them, and the extremes of X.509 time.
pub fn edge_times(cert: &Certificate) -> Vec<OffsetDateTime> {
    let mut times = vec![
        cert.not_before(),
        cert.not_after(),
        datetime!(1950-01-01 00:00 UTC),
        datetime!(9999-12-31 23:59:59 UTC),
    ];
    times.extend(cert.not_before().checked_sub(Duration::seconds(1)));
    times.extend(cert.not_after().checked_add(Duration::seconds(1)));
    times
}

#[cfg(test)]
mod tests {
    use super::*;
    use pki_rotate::signer::document::{CA_BUNDLE, SIGNER_CERT, STATE_FILE};

    #[test]
    fn resigned_pool_cert_without_edits_verifies_with_the_right_key() {
        let pool = pool();
        // Pool cert 0 is signed by service-ca-old, p256 key 0.
        let src = CertSource::Resigned {
            base: 0,
            edits: vec![],
            signer: 0,
        };
        let cert = src.cert(pool).expect("parses");
        let issuer = pool.cert(1);
        pki_core::verify_signature(issuer.public_key(), &cert).expect("verifies");
    }

    #[test]
    fn state_framing_roundtrips() {
        let mut files = pki_rotate::Files::new();
        for (p, s) in [
            (STATE_FILE, false),
            (SIGNER_CERT, false),
            (CA_BUNDLE, false),
            ("certs/web/tls.crt", false),
            ("certs/web/tls.key", true),
            ("leaf-requests/web.json", false),
            ("leaf-requests/api.json", false),
        ] {
            files
                .insert(
                    p,
                    pki_rotate::File {
                        contents: p.as_bytes().to_vec().into(),
                        secret: s,
                    },
                )
                .unwrap();
        }
        let joined = join_state_files(&files);
        let (json, back) = split_state_input(&joined);
        assert_eq!(json, STATE_FILE.as_bytes());
        assert_eq!(
            back.iter().collect::<Vec<_>>(),
            files.iter().collect::<Vec<_>>()
        );
    }
}
