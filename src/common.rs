//! What every subcommand shares: time and duration arguments, the store
//! argument, the error type with its exit status, the RNG, and the one
//! controller step (the driver's).

use pki_rotate::{
    Event, FsStore, RotateError, SignerEngine, SignerInput, SignerState, Step, Store,
};
use std::path::PathBuf;
use time::OffsetDateTime;

/// The exit status of a command refused or failed with the store unchanged.
pub const EXIT_FAILED: u8 = 1;

/// The exit status of a command whose store write may have landed (its
/// answer was lost): the store may hold the new document or the old one,
/// and rerunning the command is safe.
pub const EXIT_UNKNOWN_OUTCOME: u8 = 5;

/// A failed command: a one-line reason, the exit status, and the details
/// that do not fit on one short line.
#[derive(Debug)]
pub struct CliError {
    pub message: String,
    /// [`EXIT_FAILED`], or [`EXIT_UNKNOWN_OUTCOME`] for a write that may
    /// have landed.
    pub status: u8,
    /// Printed after the reason, one indented line each: the reason says
    /// what failed (and how to go on) in one line; these say why.
    pub details: Vec<String>,
}

impl CliError {
    pub fn new(message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
            status: EXIT_FAILED,
            details: Vec::new(),
        }
    }

    /// The same failure (and exit status) with its message rewritten.
    pub fn map_message(mut self, f: impl FnOnce(String) -> String) -> Self {
        self.message = f(self.message);
        self
    }
}

impl From<RotateError> for CliError {
    fn from(e: RotateError) -> Self {
        let status = if e.is_unknown_outcome() {
            EXIT_UNKNOWN_OUTCOME
        } else {
            EXIT_FAILED
        };
        // The library names no command: how to go on is the CLI's to say.
        let hint = match &e {
            RotateError::Signer(pki_rotate::SignerError::LeafChangeNeedsReplace { .. }) => {
                Some("pass --replace to do it on purpose")
            }
            RotateError::Signer(pki_rotate::SignerError::ImportedCaRenewal { .. })
            | RotateError::Signer(pki_rotate::SignerError::ImportedCaRotation { .. }) => {
                Some("use `pki rotate --to FILE`")
            }
            // The signer's: `set`, `keys` and `cred` name their own init.
            RotateError::Store(pki_rotate::StoreError::NotInitialized(_)) => {
                Some("run `pki init` first")
            }
            RotateError::Set(pki_rotate::SetError::UnknownTarget(_)) => {
                Some("targets come from `pki set target` or `pki set issue --target`")
            }
            RotateError::Store(pki_rotate::StoreError::Sealing { .. }) => {
                Some("PKI_STORE_KEY_FILE names the store key; nothing was written")
            }
            _ => None,
        };
        let mut message = e.to_string();
        if let Some(hint) = hint {
            message = format!("{message} ({hint})");
        }
        CliError {
            message,
            status,
            details: Vec::new(),
        }
    }
}

impl CliError {
    /// `e`, and when it is a refusal an operator may override, how to do it
    /// with this command's flag (`--allow-trust-break REASON`, `--force
    /// REASON`): the library names no flag. A trust break says in its
    /// first line what is refused and that flag; who breaks and until when
    /// follow, one line each.
    pub fn with_override_hint(e: RotateError, flag: &str) -> Self {
        if let RotateError::Signer(pki_rotate::SignerError::TrustBreak {
            summary, breaks, ..
        }) = &e
        {
            let mut error = CliError::new(format!(
                "rotation refused: {summary}; to rotate anyway, pass {flag}"
            ));
            error.details = breaks.clone();
            return error;
        }
        let overridable = matches!(
            e,
            RotateError::Signer(pki_rotate::SignerError::ValidationFailed { forced: false, .. })
        );
        let mut error = CliError::from(e);
        if overridable {
            error.message = format!("{}; to go ahead anyway, pass {flag}", error.message);
        }
        error
    }
}

impl From<pki_core::Error> for CliError {
    fn from(e: pki_core::Error) -> Self {
        CliError::new(e.to_string())
    }
}

pub type CliResult<T = ()> = Result<T, CliError>;

/// The store key of the signer's document.
pub const SIGNER: &str = pki_rotate::signer::STORE_KEY;

/// The DIR argument: a directory, or a store URL (`etcd://HOST:PORT/PREFIX`).
#[derive(Debug, Clone)]
pub enum StoreArg {
    /// A directory store.
    Dir(PathBuf),
    /// A store URL.
    Url(String),
}

impl StoreArg {
    /// A directory that holds no store (a URL always names one: its
    /// server says what it holds).
    pub fn is_empty_dir(&self) -> bool {
        matches!(self, StoreArg::Dir(path) if !pki_rotate::FsStore::is_store(path))
    }

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
    /// Private material is sealed with `PKI_STORE_KEY_FILE`'s key.
    pub fn open(&self) -> CliResult<Box<dyn Store + Send + Sync>> {
        crate::store_key::seal(self.open_unsealed()?, matches!(self, StoreArg::Dir(_)))
    }

    /// Opens an existing store as it is: sealed values stay sealed.
    pub fn open_unsealed(&self) -> CliResult<Box<dyn Store + Send + Sync>> {
        match self {
            StoreArg::Dir(dir) => Ok(Box::new(configure(FsStore::open(dir)?))),
            StoreArg::Url(url) => crate::stores::open_url(url),
        }
    }

    /// Opens the store, creating a directory store when there is none.
    pub fn open_or_create(&self) -> CliResult<Box<dyn Store + Send + Sync>> {
        // A bad key file is refused before a directory is made.
        crate::store_key::key_from_env()?;
        let store: Box<dyn Store + Send + Sync> = match self {
            StoreArg::Dir(dir) => Box::new(configure(FsStore::open_or_create(dir)?)),
            StoreArg::Url(url) => crate::stores::open_url(url)?,
        };
        crate::store_key::seal(store, matches!(self, StoreArg::Dir(_)))
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
pub fn configure(mut store: FsStore) -> FsStore {
    store.set_lock_timeout(
        LOCK_TIMEOUT
            .get()
            .copied()
            .unwrap_or(pki_rotate::DEFAULT_LOCK_TIMEOUT),
    );
    // A notice names paths, which may hold a newline: one line each, like errors.
    store.set_notice_hook(Some(Box::new(|notice| {
        eprintln!("pki: {}", one_line(notice))
    })));
    store
}
/// What `--now` and `--at` accept, for `--help` and for errors.
pub const TIME_HELP: &str = "RFC 3339 time like 2027-02-01T00:00:00Z (or with an offset, 2027-02-01T01:00:00+01:00), or \"now\"";

/// `--now`: RFC 3339 or `now` (the default).
pub fn parse_time(s: &str) -> Result<OffsetDateTime, String> {
    if s == "now" {
        return Ok(pki_core::datetime::truncate(OffsetDateTime::now_utc()));
    }
    OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map(|t| t.to_offset(time::UtcOffset::UTC))
        .map_err(|_| {
            format!(
                "\"{}\" is not a time: expected {TIME_HELP}",
                s.escape_debug()
            )
        })
}

/// The default of `--max-input-size`: far more than any real bundle or
/// chain, small enough that `--bundle /dev/zero` fails at once.
pub const DEFAULT_MAX_INPUT: u64 = pki_rotate::input::DEFAULT_MAX_INPUT;

/// `--max-input-size`: bytes, or with a suffix `K`, `M`, `G` (binary: KiB,
/// MiB, GiB; `KiB`, `MiB`, `GiB` are accepted too).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => {
            return Err(format!(
                "\"{}\" is not a size: expected bytes like 16777216 or 16M, 64M, 1G",
                s.escape_debug()
            ));
        }
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("\"{}\" is not a positive size like 16M", s.escape_debug()))
}

/// Reads a whole input file named on the command line, at most `max`
/// bytes, without waiting on it: a FIFO, a socket, a directory or a block
/// device is refused with one line naming it, a regular file larger than
/// `max` is refused from its size, and a device like `/dev/zero` is read
/// no further than the limit (see [`pki_rotate::input`]). A file over the
/// limit says how to raise it (`--max-input-size`).
pub fn read_capped(path: &std::path::Path, max: u64) -> CliResult<Vec<u8>> {
    pki_rotate::input::read_file(path, max).map_err(|e| match e {
        pki_rotate::input::InputError::TooLarge { .. } => {
            CliError::new(format!("{e} (raise it with --max-input-size)"))
        }
        e => CliError::new(e.to_string()),
    })
}

/// Makes a message one line: control characters (a newline in a name
/// given on the command line) and invisible ones (a bidi override) are
/// shown escaped, never acted on.
pub fn one_line(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for c in message.chars() {
        if pki_core::text::is_control_or_invisible(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// The exit status of a command that succeeded: 0, or what `status
/// --check` found (3 an action is due, 4 broken).
static EXIT_STATUS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Sets the exit status of a successful run.
pub fn set_exit_status(code: u8) {
    EXIT_STATUS.store(code, std::sync::atomic::Ordering::Relaxed);
}

/// The exit status of a successful run.
pub fn exit_status() -> u8 {
    EXIT_STATUS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether standard output was found closed (a reader like `head` went
/// away): further output is dropped and the command finishes quietly.
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The first error writing to standard output other than a closed pipe.
static STDOUT_ERROR: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Writes to standard output without panicking: `println!` panics when the
/// reader has gone (`pki status DIR | head -1`). A closed pipe makes the
/// rest of the output go nowhere; any other error is reported at exit.
pub fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    use std::sync::atomic::Ordering;
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe
            && let Ok(mut slot) = STDOUT_ERROR.lock()
        {
            slot.get_or_insert_with(|| format!("cannot write to standard output: {e}"));
        }
    }
}

/// The error writing standard output met, if it was not a closed pipe.
pub fn stdout_error() -> Option<String> {
    STDOUT_ERROR.lock().ok().and_then(|slot| slot.clone())
}

/// `println!` that never panics on a closed standard output.
#[macro_export]
macro_rules! outln {
    () => { $crate::common::write_stdout(format_args!("\n")) };
    ($($arg:tt)*) => {
        $crate::common::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that never panics on a closed standard output.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::common::write_stdout(format_args!($($arg)*)) };
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
/// engines take the RNG as an argument so tests can seed it. pki-core's own
/// type, so that P-256 keys are made and signed with ring (see `pki_core::OsRng`).
pub fn os_rng() -> pki_core::OsRng {
    pki_core::os_rng()
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

/// The reload interval the guards assume, for `init` and `status`:
/// `7d`, or `395d (assumed: M, as no --reload-interval was set)`.
pub fn reload_interval_text(policy: &pki_core::RotationPolicy) -> String {
    let interval = pki_core::policy::human(policy.effective_reload_interval());
    if policy.reload_interval.is_some() {
        interval
    } else {
        format!("{interval} (assumed: M, as no --reload-interval was set)")
    }
}

/// One controller step on the signer in `store`: the driver loads, plans
/// and applies `input` at `now`, and writes only when something changed.
/// Nothing is written when any step fails.
pub fn step_signer(
    store: &StoreArg,
    input: &SignerInput,
    now: OffsetDateTime,
) -> CliResult<Step<SignerState, Event>> {
    let driver = crate::token::driver(store.open()?)?;
    // A leaf change while nothing else is due reads and writes that leaf
    // and the document's head only: its cost does not grow with the store.
    let step = driver.step_unless_idle::<SignerEngine, _>(SIGNER, input, now, &mut os_rng())?;
    if step.is_idle() {
        // Callers print what the document says (the next rotation): the
        // whole step decides with the document read.
        return Ok(driver.step::<SignerEngine, _>(SIGNER, input, now, &mut os_rng())?);
    }
    Ok(step)
}

/// Reads the signer's document.
pub fn load_signer(store: &StoreArg) -> CliResult<SignerState> {
    let store = store.open()?;
    Ok(crate::token::driver(store)?.load::<SignerEngine>(SIGNER)?.0)
}

/// Prints one line per event.
pub fn print_events(events: &[Event]) {
    for e in events {
        crate::outln!("{e}");
    }
}
