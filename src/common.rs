//! What every subcommand shares: time and duration arguments, the error
//! type with its exit status, the RNG, and the load-reconcile-store step.

use pki_rotate::{Event, ForcedRotation, FsStore, RotateError, SignerState, Store, reconcile};
use std::path::Path;
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

/// Opens the store (taking its lock), lets `change` adjust the loaded
/// state, reconciles at `now` and commits. Nothing is written when any
/// step fails. Returns the new state and the events.
pub fn reconcile_store(
    dir: &Path,
    now: OffsetDateTime,
    forced: Option<&ForcedRotation>,
    change: impl FnOnce(&mut SignerState) -> CliResult,
) -> CliResult<(SignerState, Vec<Event>)> {
    let store = FsStore::open(dir)?;
    let (mut state, generation) = store.load()?;
    change(&mut state)?;
    let policy = state.policy;
    let (next, events, _) = reconcile(&state, &policy, now, forced, &mut os_rng())?;
    if !events.is_empty() || state_changed(&state, &next)? {
        store.compare_and_swap(generation, &next)?;
    }
    Ok((next, events))
}

fn state_changed(a: &SignerState, b: &SignerState) -> CliResult<bool> {
    Ok(*a.to_json(0)? != *b.to_json(0)?)
}

/// Prints one line per event.
pub fn print_events(events: &[Event]) {
    for e in events {
        println!("{e}");
    }
}
