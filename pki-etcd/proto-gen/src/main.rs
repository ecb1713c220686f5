//! `pki-etcd-proto-gen [--protox] [OUT_DIR]`: writes pki-etcd's generated
//! gRPC code (by default into `pki-etcd/src/proto`), with `protoc` unless
//! `--protox` is given.

use std::path::PathBuf;

fn main() -> std::process::ExitCode {
    let mut protox = false;
    let mut out = pki_etcd_proto_gen::generated_dir();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--protox" => protox = true,
            dir => out = PathBuf::from(dir),
        }
    }
    let result = if protox {
        pki_etcd_proto_gen::generate_with_protox(&out)
    } else {
        pki_etcd_proto_gen::generate_with_protoc(&out)
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pki-etcd-proto-gen: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
