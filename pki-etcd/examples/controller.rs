//! A controller replica that keeps a signer in etcd: run several at once
//! against the same URL and exactly one of them rotates the CA when it is
//! due; the others reload and converge.
//!
//! ```text
//! cargo run -p pki-etcd --example controller -- etcd://127.0.0.1:2379/pki [--once]
//! ```
//!
//! Exit 2 on a malformed URL, 1 when etcd cannot be reached or a step fails
//! with `--once`.

use pki_etcd::{EtcdStore, OpenError};
use pki_rotate::{Driver, RotateError, SignerEngine, SignerInput, SignerPolicy, SignerState};
use std::process::ExitCode;
use std::time::Duration;
use time::OffsetDateTime;

/// The longest sleep between steps, whatever the engine says: another
/// replica or an operator may have changed the document meanwhile.
const MAX_SLEEP: Duration = Duration::from_secs(3600);
/// How long to wait after a failed step before trying again.
const RETRY: Duration = Duration::from_secs(10);
const KEY: &str = "signer";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let once = args.iter().any(|a| a == "--once");
    let Some(url) = args.iter().find(|a| !a.starts_with("--")) else {
        eprintln!("usage: controller etcd://HOST:PORT/PREFIX [--once]");
        return ExitCode::from(2);
    };
    let store = match EtcdStore::from_url(url) {
        Ok(store) => store,
        Err(OpenError::Url(e)) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let driver = Driver::new(&store);
    let mut rng = rand_core::UnwrapErr(getrandom::SysRng);

    // The first replica to get here creates the signer; the others find it.
    let now = OffsetDateTime::now_utc();
    let created = SignerState::new("service-ca", SignerPolicy::default(), now, &mut rng)
        .and_then(|doc| driver.create::<SignerEngine>(KEY, &doc));
    match created {
        Ok(_) => println!("created the signer at {url}"),
        Err(RotateError::AlreadyInitialized(_)) => {}
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    }

    loop {
        let now = OffsetDateTime::now_utc();
        let sleep =
            match driver.step::<SignerEngine, _>(KEY, &SignerInput::default(), now, &mut rng) {
                Ok(step) => {
                    for event in &step.events {
                        println!("{event}");
                    }
                    println!("next step at {}", step.next_wake);
                    let wait = (step.next_wake - now).max(time::Duration::ZERO);
                    Duration::try_from(wait).unwrap_or(MAX_SLEEP).min(MAX_SLEEP)
                }
                Err(e) if once => {
                    eprintln!("{e}");
                    return ExitCode::from(1);
                }
                Err(e) => {
                    eprintln!("{e} (retrying in {RETRY:?})");
                    RETRY
                }
            };
        if once {
            return ExitCode::SUCCESS;
        }
        std::thread::sleep(sleep);
    }
}
