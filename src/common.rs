//! What every subcommand shares: time and duration arguments, the store
//! argument, the error type with its exit status, the RNG, and the one
//! controller step (the driver's).

use pki_rotate::{
    Driver, Engine, Event, FsStore, RotateError, SignerEngine, SignerInput, SignerState, Step,
    Store,
};
use std::path::PathBuf;
use time::OffsetDateTime;

/// A failed command: a one-line reason and the exit status.
#[derive(Debug)]
pub struct CliError {
    pub message: String,
}

impl CliError {
    pub fn new(message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
        }
    }
}

impl From<RotateError> for CliError {
    fn from(e: RotateError) -> Self {
        CliError::new(e.to_string())
    }
}

impl From<pki_core::Error> for CliError {
    fn from(e: pki_core::Error) -> Self {
        CliError::new(e.to_string())
    }
}

pub type CliResult<T = ()> = Result<T, CliError>;

/// The store key of the signer's document.
pub const SIGNER: &str = SignerEngine::KIND;

/// The DIR argument: a directory, or a store URL (`etcd://HOST:PORT/PREFIX`).
#[derive(Debug, Clone)]
pub enum StoreArg {
    /// A directory store.
    Dir(PathBuf),
    /// A store URL.
    Url(String),
}

impl StoreArg {
    /// Parses the argument; a malformed URL is bad usage (clap exits 2).
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.contains("://") {
            crate::stores::check_url(s)?;
            Ok(StoreArg::Url(s.to_string()))
        } else if s.is_empty() {
            Err("the store directory must not be empty".into())
        } else {
            Ok(StoreArg::Dir(PathBuf::from(s)))
        }
    }

    /// Opens an existing store.
    pub fn open(&self) -> CliResult<Box<dyn Store + Send + Sync>> {
        match self {
            StoreArg::Dir(dir) => Ok(Box::new(configure(FsStore::open(dir)?))),
            StoreArg::Url(url) => crate::stores::open_url(url),
        }
    }

    /// Opens the store, creating a directory store when there is none.
    pub fn open_or_create(&self) -> CliResult<Box<dyn Store + Send + Sync>> {
        match self {
            StoreArg::Dir(dir) => Ok(Box::new(configure(FsStore::open_or_create(dir)?))),
            StoreArg::Url(url) => crate::stores::open_url(url),
        }
    }

    /// Where a published file is: a path for a directory, a key for a URL.
    pub fn published(&self, relative: &str) -> String {
        match self {
            StoreArg::Dir(dir) => dir.join(relative).display().to_string(),
            StoreArg::Url(url) => format!("{relative} in {url}"),
        }
    }
}

impl std::fmt::Display for StoreArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreArg::Dir(dir) => write!(f, "{}", dir.display()),
            StoreArg::Url(url) => f.write_str(url),
        }
    }
}

/// `--lock-timeout`, when given (a global flag, so one setting for the run).
static LOCK_TIMEOUT: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();

/// Sets how long a directory store waits for another run's lock.
pub fn set_lock_timeout(timeout: time::Duration) {
    let timeout =
        std::time::Duration::try_from(timeout).unwrap_or(pki_rotate::DEFAULT_LOCK_TIMEOUT);
    let _ = LOCK_TIMEOUT.set(timeout);
}

/// A directory store as every command uses it: the lock timeout of the
/// run, and the store's notices (repairs, warnings) printed on stderr.
fn configure(mut store: FsStore) -> FsStore {
    store.set_lock_timeout(
        LOCK_TIMEOUT
            .get()
            .copied()
            .unwrap_or(pki_rotate::DEFAULT_LOCK_TIMEOUT),
    );
    store.set_notice_hook(Some(Box::new(|notice| eprintln!("pki: {notice}"))));
    store
}

/// `--now`: RFC 3339 or `now` (the default).
pub fn parse_time(s: &str) -> Result<OffsetDateTime, String> {
    if s == "now" {
        return Ok(pki_core::datetime::truncate(OffsetDateTime::now_utc()));
    }
    OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map(|t| t.to_offset(time::UtcOffset::UTC))
        .map_err(|e| format!("\"{s}\" is not RFC 3339 time or \"now\" ({e})"))
}

/// DUR: `790d`, `13h`, `2h30m`.
pub fn parse_duration(s: &str) -> Result<time::Duration, String> {
    let d = pki_core::policy::parse_duration(s).map_err(|e| e.to_string())?;
    if d <= time::Duration::ZERO {
        return Err(format!("duration \"{s}\" must be positive"));
    }
    Ok(d)
}

/// The operating system's RNG. Keys and serials need real randomness; the
/// engines take the RNG as an argument so tests can seed it.
pub fn os_rng() -> rand_core::UnwrapErr<getrandom::SysRng> {
    rand_core::UnwrapErr(getrandom::SysRng)
}

/// Renders a time with a countdown relative to `now`: `2027-01-31T00:00:00Z (in 395d)`.
pub fn when(t: OffsetDateTime, now: OffsetDateTime) -> String {
    let d = t - now;
    let rel = if d.is_negative() {
        format!("{} ago", pki_core::policy::human(-d))
    } else {
        format!("in {}", pki_core::policy::human(d))
    };
    format!("{} ({rel})", pki_core::datetime::rfc3339(t))
}

/// One controller step on the signer in `store`: the driver loads, plans
/// and applies `input` at `now`, and writes only when something changed.
/// Nothing is written when any step fails.
pub fn step_signer(
    store: &StoreArg,
    input: &SignerInput,
    now: OffsetDateTime,
) -> CliResult<Step<SignerState, Event>> {
    let store = store.open()?;
    Ok(Driver::new(store).step::<SignerEngine, _>(SIGNER, input, now, &mut os_rng())?)
}

/// Reads the signer's document.
pub fn load_signer(store: &StoreArg) -> CliResult<SignerState> {
    let store = store.open()?;
    Ok(Driver::new(store).load::<SignerEngine>(SIGNER)?.0)
}

/// Prints one line per event.
pub fn print_events(events: &[Event]) {
    for e in events {
        println!("{e}");
    }
}
