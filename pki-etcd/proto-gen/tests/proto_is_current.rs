//! The gRPC code checked in as `pki-etcd/src/proto/*.rs` is what the
//! `.proto` files in `pki-etcd/proto/` generate: regenerated here without
//! protoc, and compared byte for byte.

#![allow(clippy::unwrap_used, clippy::panic)]

use pki_etcd_proto_gen::{GENERATED, generate_with_protox, generated_dir};

#[test]
fn proto_is_current() {
    let out = tempfile::tempdir().unwrap();
    generate_with_protox(out.path()).unwrap();
    let mut generated: Vec<String> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    generated.sort();
    let mut expected: Vec<String> = GENERATED.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(generated, expected, "the .proto files now make other files");
    for name in GENERATED {
        let fresh = std::fs::read_to_string(out.path().join(name)).unwrap();
        let checked_in = std::fs::read_to_string(generated_dir().join(name)).unwrap_or_default();
        if fresh != checked_in {
            panic!(
                "pki-etcd/src/proto/{name} is stale: the .proto files in pki-etcd/proto \
                 generate other code; run pki-etcd/regen-proto.sh and commit the result"
            );
        }
    }
}
