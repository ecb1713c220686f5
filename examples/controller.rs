//! A controller loop: one driver step, then sleep until the wake-up time the
//! engine computed, forever. Run several of these against the same store and
//! they race safely: the driver's compare-and-swap lets one write, the
//! others read again and find nothing left to do.
//!
//! ```sh
//! # a directory store, real time (Ctrl-C to stop)
//! cargo run --example controller -- /var/lib/pki/service-ca
//! # years of simulated time in a second, printing every change
//! cargo run --example controller -- /tmp/pki-demo --simulate-years 3
//! # the same against etcd (several replicas may run at once)
//! cargo run --example controller -- etcd://127.0.0.1:2379/pki/service-ca --simulate-years 3
//! ```
//!
//! The store is created with one serving certificate (`web`) when it holds
//! no signer yet.

use pki_rotate::{
    Driver, LeafRequest, RotateError, SignerEngine, SignerInput, SignerPolicy, SignerState, Store,
};
use std::process::ExitCode;
use time::{Duration, OffsetDateTime};

const KEY: &str = "signer";

/// The longest a real-time controller sleeps before looking again, even
/// when nothing is due for months: someone may have changed the store.
const MAX_SLEEP: Duration = Duration::hours(1);

fn open(location: &str) -> Result<Box<dyn Store + Send + Sync>, String> {
    if pki_etcd::is_etcd_url(location) {
        let store = pki_etcd::EtcdStore::from_url(location).map_err(|e| e.to_string())?;
        Ok(Box::new(store))
    } else {
        pki_rotate::FsStore::open_or_create(location)
            .map(|s| Box::new(s) as Box<dyn Store + Send + Sync>)
            .map_err(|e| e.to_string())
    }
}

fn os_rng() -> rand_core::UnwrapErr<getrandom::SysRng> {
    rand_core::UnwrapErr(getrandom::SysRng)
}

/// Creates the signer with one serving certificate unless the store has one.
fn ensure_signer<S: Store>(driver: &Driver<S>, now: OffsetDateTime) -> Result<(), RotateError> {
    if driver.store().get(KEY)?.is_some() {
        return Ok(());
    }
    let mut state = SignerState::new("service-ca", SignerPolicy::default(), now, &mut os_rng())?;
    state.request_leaf("web", LeafRequest::server(vec!["web.ns.svc".into()]))?;
    match driver.create::<SignerEngine>(KEY, &state) {
        // Another replica created it first: use theirs.
        Ok(_) | Err(RotateError::Store(pki_rotate::StoreError::AlreadyInitialized(_))) => Ok(()),
        Err(e) => Err(e),
    }
}

fn run(location: &str, simulate_years: Option<i64>) -> Result<(), String> {
    let driver = Driver::new(open(location)?);
    let start = pki_core::datetime::truncate(OffsetDateTime::now_utc());
    let end = simulate_years.map(|y| start + Duration::days(365 * y));
    let mut now = start;
    ensure_signer(&driver, now).map_err(|e| e.to_string())?;
    loop {
        match driver.step::<SignerEngine, _>(KEY, &SignerInput::default(), now, &mut os_rng()) {
            Ok(step) => {
                for event in &step.events {
                    println!("{}  {event}", pki_core::datetime::rfc3339(now));
                }
                if step.attempts > 1 {
                    println!(
                        "{}  another replica wrote first; decided again ({} attempts)",
                        pki_core::datetime::rfc3339(now),
                        step.attempts
                    );
                }
                match end {
                    // Simulated time: jump straight to the wake-up time.
                    Some(end) if step.next_wake >= end => return Ok(()),
                    Some(_) => now = step.next_wake,
                    None => {
                        let sleep = (step.next_wake - now).clamp(Duration::SECOND, MAX_SLEEP);
                        std::thread::sleep(sleep.unsigned_abs());
                        now = pki_core::datetime::truncate(OffsetDateTime::now_utc());
                    }
                }
            }
            // A store that keeps changing under us, or is briefly down:
            // log, back off, try again. Anything else needs a human.
            Err(
                e @ (RotateError::Store(pki_rotate::StoreError::TooManyConflicts { .. })
                | RotateError::Store(pki_rotate::StoreError::Backend { .. })),
            ) if end.is_none() => {
                eprintln!("{}  {e}; retrying in 10s", pki_core::datetime::rfc3339(now));
                std::thread::sleep(std::time::Duration::from_secs(10));
                now = pki_core::datetime::truncate(OffsetDateTime::now_utc());
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (location, simulate) = match args.as_slice() {
        [location] => (location.as_str(), None),
        [location, flag, years] if flag == "--simulate-years" => match years.parse::<i64>() {
            Ok(y) if (1..=100).contains(&y) => (location.as_str(), Some(y)),
            _ => {
                eprintln!("--simulate-years takes a number of years from 1 to 100");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!(
                "usage: controller STORE [--simulate-years N]   (STORE: a directory or etcd://HOST:PORT/PREFIX)"
            );
            return ExitCode::from(2);
        }
    };
    if pki_etcd::is_etcd_url(location)
        && let Err(e) = pki_etcd::EtcdUrl::parse(location)
    {
        eprintln!("controller: {e}");
        return ExitCode::from(2);
    }
    match run(location, simulate) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("controller: {e}");
            ExitCode::from(1)
        }
    }
}
