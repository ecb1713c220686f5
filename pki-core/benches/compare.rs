//! The pki side of `benches/go/compare.sh`: runs one row of issue 8 and
//! prints the median wall time of one run, in seconds.
//!
//! ```text
//! compare fixtures DIR   write the rotation certificates as PEM for the Go side
//! compare ROW            ROW: issue | issue-os | issue-rustcrypto | matrix
//!                             | matrix-rustcrypto | parse
//! ```
//!
//! Every row runs with pki-core's default features and, but for the
//! `-rustcrypto` rows, its default crypto provider (ring): what `cargo add
//! pki-core` gives. The `-rustcrypto` rows install
//! `CryptoProvider::rust_crypto()` first (every output a function of the
//! caller's RNG), for comparison.
//!
//! Each row runs once to warm up, then at least three times and for at
//! least one second; the median is printed. The Go program
//! (`benches/go/main.go`) does exactly the same, on the same certificates
//! for `matrix` and `parse`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "support/fixtures.rs"]
mod fixtures;

use fixtures::LEAVES;
use pki_core::Certificate;
use std::path::Path;

#[path = "support/median.rs"]
mod median;
use median::median_of;

fn write_pem(dir: &Path, name: &str, certs: &[Certificate]) {
    let pem: String = certs.iter().map(Certificate::to_pem).collect();
    std::fs::write(dir.join(name), pem).unwrap();
}

/// Makes RustCrypto the process's provider (the `-rustcrypto` rows).
fn rust_crypto() {
    pki_core::CryptoProvider::rust_crypto()
        .install_default()
        .expect("nothing installed a provider before");
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["fixtures", dir] => {
            let dir = Path::new(dir);
            std::fs::create_dir_all(dir).unwrap();
            let r = fixtures::rotation(LEAVES);
            write_pem(dir, "old-root.pem", std::slice::from_ref(&r.old_root));
            write_pem(dir, "new-root.pem", std::slice::from_ref(&r.new_root));
            write_pem(dir, "bridge-a.pem", std::slice::from_ref(&r.bridge_a));
            write_pem(dir, "bridge-b.pem", std::slice::from_ref(&r.bridge_b));
            write_pem(dir, "old-leaves.pem", &r.old_leaves);
            write_pem(dir, "new-leaves.pem", &r.new_leaves);
            std::fs::write(dir.join("at.txt"), r.at.unix_timestamp().to_string()).unwrap();
        }
        ["issue"] => {
            let ca = fixtures::issuing_ca();
            let mut seed = 0;
            println!(
                "{:.6}",
                median_of(|| {
                    seed += 1;
                    fixtures::issue_leaves(&ca, LEAVES, seed).len()
                })
            );
        }
        ["issue-rustcrypto"] => {
            rust_crypto();
            let ca = fixtures::issuing_ca();
            let mut seed = 0;
            println!(
                "{:.6}",
                median_of(|| {
                    seed += 1;
                    fixtures::issue_leaves(&ca, LEAVES, seed).len()
                })
            );
        }
        ["issue-os"] => {
            let ca = fixtures::issuing_ca();
            println!(
                "{:.6}",
                median_of(|| fixtures::issue_leaves_os(&ca, LEAVES).len())
            );
        }
        ["matrix" | "matrix-rustcrypto"] => {
            if args[0] == "matrix-rustcrypto" {
                rust_crypto();
            }
            let der = fixtures::rotation(LEAVES).to_der();
            assert_eq!(fixtures::matrix(&der), 4 * LEAVES, "every cell must verify");
            println!("{:.6}", median_of(|| fixtures::matrix(&der)));
        }
        ["parse"] => {
            let r = fixtures::rotation(LEAVES);
            let pem = fixtures::bundle_pem(&r);
            assert_eq!(fixtures::parse(&pem), LEAVES);
            println!("{:.6}", median_of(|| fixtures::parse(&pem)));
        }
        _ => panic!(
            "usage: compare fixtures DIR | compare issue|issue-os|issue-rustcrypto|matrix|matrix-rustcrypto|parse"
        ),
    }
}
