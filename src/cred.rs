//! `pki cred init|reconcile|status`: credentials minted by an outside
//! system, rotated by the credential engine through two hooks.
//!
//! The engine decides every step; this module runs the hooks it asks for
//! and reports their results through the driver, one committed step at a
//! time (see `pki_rotate::credential`).

mod capture;
mod hooks;
mod sealed_capture;
mod spill;

use crate::common::{CliError, CliResult, StoreArg, os_rng, when};
use hooks::{Attempt, HookResult};
use pki_rotate::credential::status::{CredentialStatus, SCHEMA_VERSION};
use pki_rotate::credential::{
    Action, CredentialEngine, CredentialInput, CredentialPolicy, CredentialState, Event, Hooks,
    Next, WaitReason, credential_key,
    document::{CREDS_DIR, STATE_FILE},
    validate_credential_name,
};
use pki_rotate::driver::{AdvanceOptions, Advanced, advance};
use pki_rotate::{Driver, Files, FsStore, RotateError, Store};
use std::path::{Path, PathBuf};
use std::time::Duration as StdDuration;
use time::OffsetDateTime;

/// Where the mint hook's output is captured for a directory store.
pub const CAPTURE_DIR: &str = ".cred-capture";

/// The default `--hook-timeout`.
pub const DEFAULT_HOOK_TIMEOUT: &str = "2m";

/// The default `--max-output`: far more than any credential, far less
/// than a store value may hold (etcd refuses requests over 1.5 MiB).
pub const DEFAULT_MAX_OUTPUT: &str = "64K";

/// How many hooks one reconcile of a credential runs at most. A rotation
/// runs two (mint, revoke), plus one revocation per stray; a failing hook
/// ends the run with a wait. Only a guard against a bug looping.
const MAX_HOOK_RUNS: u32 = 64;

/// How the commands read time: `--now TIME` pins it (every step of the run
/// happens at that time); the default reads the clock before each step.
#[derive(Debug, Clone, Copy)]
pub enum Clock {
    Fixed(OffsetDateTime),
    System,
}

impl Clock {
    pub fn parse(s: &str) -> Result<Self, String> {
        if s == "now" {
            Ok(Clock::System)
        } else {
            crate::common::parse_time(s).map(Clock::Fixed)
        }
    }

    fn now(self) -> OffsetDateTime {
        match self {
            Clock::Fixed(t) => t,
            Clock::System => pki_core::datetime::truncate(OffsetDateTime::now_utc()),
        }
    }
}

/// What `init` and `reconcile` share.
pub struct RunOptions {
    pub clock: Clock,
    pub hook_timeout: StdDuration,
    pub capture_dir: Option<PathBuf>,
    /// Stop after this many committed steps (None: until one must wait).
    pub max_steps: Option<u32>,
    /// The most bytes the mint hook may print (`--max-output`).
    pub max_output: u64,
}

/// Parses `--hook-timeout` (bad usage when wrong).
pub fn parse_timeout(s: &str) -> Result<StdDuration, String> {
    let d = crate::common::parse_duration(s)?;
    Ok(StdDuration::from_secs(d.whole_seconds().unsigned_abs()))
}

pub struct InitArgs<'a> {
    pub dir: &'a StoreArg,
    pub name: &'a str,
    pub expire: time::Duration,
    pub grace: time::Duration,
    pub mint_cmd: &'a str,
    pub revoke_cmd: &'a str,
    pub options: RunOptions,
}

/// `pki cred init`: records the credential, then mints its first one.
pub fn init(args: InitArgs<'_>) -> CliResult {
    validate_credential_name(args.name)?;
    let policy = CredentialPolicy {
        expire: args.expire,
        grace: args.grace,
    };
    for (flag, cmd) in [("mint-cmd", args.mint_cmd), ("revoke-cmd", args.revoke_cmd)] {
        if cmd.trim().is_empty() {
            return Err(CliError::new(format!("--{flag} must not be empty")));
        }
    }
    let hooks = Hooks {
        mint: args.mint_cmd.to_string(),
        revoke: args.revoke_cmd.to_string(),
    };
    let doc = CredentialState::new(args.name, policy, Some(hooks))?;
    let store = args.dir.open_or_create()?;
    let driver = Driver::new(store);
    driver
        .create::<CredentialEngine>(&credential_key(args.name), &doc)
        .map_err(|e| match e {
            RotateError::Store(pki_rotate::StoreError::AlreadyInitialized(_)) => {
                CliError::new(format!(
                    "credential \"{}\" already exists in {}",
                    args.name, args.dir
                ))
            }
            other => other.into(),
        })?;
    crate::outln!("cred {}: created in {}", args.name, args.dir);
    // A first mint that fails is recorded like any other (stderr, exit 0):
    // the credential exists and `reconcile` retries it. Only a failure to
    // run the steps at all is an error.
    reconcile_one(&driver, args.dir, args.name, &args.options).map_err(|e| {
        e.map_message(|m| format!("{m} (the credential is recorded: `pki cred reconcile` retries)"))
    })
}

/// `pki cred reconcile`: every due step of one credential or all of them.
/// A hook failure is recorded in the store and reported on stderr; it is
/// not an error of this command (exit 0), since the store holds what
/// happened and the next run retries. Errors are the refusals: an
/// unreachable store, an unknown credential, a lock that times out.
pub fn reconcile(dir: &StoreArg, name: Option<&str>, options: &RunOptions) -> CliResult {
    let store = open(dir)?;
    let names = match name {
        Some(n) => {
            validate_credential_name(n)?;
            vec![n.to_string()]
        }
        None => list(dir)?,
    };
    let driver = Driver::new(store);
    if let Some(name) = name {
        // Named on the command line, it may be another store's document.
        let key = credential_key(name);
        if let Some((files, _)) = driver.store().get(&key)?
            && !is_credential(&files, name, dir)?
        {
            return Err(CliError::new(format!(
                "no credential \"{name}\" in {dir}: the document at {key} is not a credential \
                 (a store nested under this one's prefix keeps it)"
            )));
        }
    }
    let mut errors: Vec<CliError> = Vec::new();
    for name in &names {
        if let Err(e) = reconcile_one(&driver, dir, name, options) {
            errors.push(e);
        }
    }
    // A write that may have landed is the one to report: exit 1 would
    // say that nothing changed.
    errors.sort_by_key(|e| std::cmp::Reverse(e.status));
    let more = errors.len().saturating_sub(1);
    match errors.into_iter().next() {
        None => Ok(()),
        Some(first) if more == 0 => Err(first),
        Some(first) => Err(first.map_message(|m| format!("{m} (and {more} more failed)"))),
    }
}

/// Opens an existing store; a directory without one gets the credentials'
/// hint, not the signer's `pki init`.
fn open(dir: &StoreArg) -> CliResult<Box<dyn Store + Send + Sync>> {
    if dir.is_empty_dir() {
        return Err(no_store(dir));
    }
    dir.open()
}

fn no_store(dir: &StoreArg) -> CliError {
    CliError::new(format!(
        "no credentials in {dir}: no pki store there (run `pki cred init` first)"
    ))
}

/// The names of the credentials in the store: the documents at
/// `creds/NAME` that are credentials (see [`is_credential`]).
pub fn list(dir: &StoreArg) -> CliResult<Vec<String>> {
    let (keys, store): (_, Box<dyn Store>) = match dir {
        StoreArg::Dir(path) => {
            let store = FsStore::open(path).map_err(|e| match e {
                RotateError::Store(pki_rotate::StoreError::NotInitialized(_)) => no_store(dir),
                other => other.into(),
            })?;
            (store.keys()?, Box::new(store))
        }
        StoreArg::Url(url) => {
            let store = crate::stores::open_url(url)?;
            (store.keys()?, store)
        }
    };
    let mut names = Vec::new();
    let candidates = keys
        .iter()
        .filter_map(|k| k.strip_prefix(CREDS_DIR)?.strip_prefix('/'))
        .filter(|n| !n.contains('/'));
    for name in candidates {
        if let Some((files, _)) = store.get(&credential_key(name))?
            && is_credential(&files, name, dir)?
        {
            names.push(name.to_string());
        }
    }
    Ok(names)
}

/// Whether the document at `creds/NAME` is the credential NAME: its files
/// are its own, under `creds/NAME/`. A store nested under this one's
/// prefix at `PREFIX/creds` keeps its own documents there (its signer at
/// `creds/signer`, with the signer's files): not a credential, so not
/// listed. A credential without its `state.json` is damaged: an error
/// naming it.
fn is_credential(files: &Files, name: &str, dir: &StoreArg) -> CliResult<bool> {
    let own = format!("{CREDS_DIR}/{name}/");
    let state = format!("{own}{STATE_FILE}");
    if files.get(&state).is_some() {
        return Ok(true);
    }
    if files.iter().any(|(path, _)| path.starts_with(&own)) {
        return Err(CliError::new(format!(
            "credential \"{name}\" in {dir} is damaged: {state} is missing"
        )));
    }
    Ok(false)
}

/// The capture directory of one credential: inside a directory store, or
/// `--capture-dir`, or a per-URL directory under the user's state directory.
fn capture_dir(dir: &StoreArg, name: &str, options: &RunOptions) -> CliResult<PathBuf> {
    let base = match (&options.capture_dir, dir) {
        (Some(d), _) => d.clone(),
        (None, StoreArg::Dir(d)) => d.join(CAPTURE_DIR),
        (None, StoreArg::Url(url)) => {
            let state = std::env::var_os("XDG_STATE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
                .ok_or_else(|| {
                    CliError::new("neither XDG_STATE_HOME nor HOME is set: pass --capture-dir")
                })?;
            let safe: String = url
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            state.join("pki").join("cred-capture").join(safe)
        }
    };
    let dir = base.join(name);
    hooks::private_dir(&dir).map_err(CliError::new)?;
    Ok(dir)
}

/// Progress on stdout; a recorded failure as one line on stderr (cron and
/// systemd show it as an error although the command succeeded).
fn print_events(events: &[Event]) {
    for e in events {
        match e {
            Event::Failed { .. } => eprintln!("pki: {}", crate::common::one_line(&e.to_string())),
            _ => crate::outln!("{e}"),
        }
    }
}

/// Runs every due step of `name` until it must wait: what
/// `pki_rotate::credential::advance` asks for, one hook at a time, each
/// result reported through the driver. A failed hook is recorded (with its
/// retry time) and reported on stderr, one line each.
fn reconcile_one<S: Store>(
    driver: &Driver<S>,
    dir: &StoreArg,
    name: &str,
    options: &RunOptions,
) -> CliResult {
    let not_found = |e: RotateError| match e {
        RotateError::Store(pki_rotate::StoreError::NotInitialized(_)) => CliError::new(format!(
            "no credential \"{name}\" in {dir} (run `pki cred init` first)"
        )),
        other => other.into(),
    };
    let (doc, _) = driver
        .load::<CredentialEngine>(&credential_key(name))
        .map_err(not_found)?;
    let capture = capture_dir(dir, name, options)?;
    // One reconciler per capture directory at a time; reconcilers with
    // other capture directories are kept apart by the owner recorded with
    // each mint attempt (see capture.rs).
    let _lock = capture::lock(&capture).map_err(CliError::new)?;
    let owner = capture::owner(&capture).map_err(CliError::new)?;
    let report = |input: &CredentialInput| -> CliResult<bool> {
        let now = options.clock.now();
        let step =
            driver.step::<CredentialEngine, _>(&credential_key(name), input, now, &mut os_rng())?;
        print_events(&step.events);
        Ok(step.changed)
    };
    let strays: Vec<_> = doc.strays.iter().map(|s| (s.rotation, s.attempt)).collect();
    spill::prune(&capture, &strays);
    settle_leftovers(&capture, &doc, options, &report);
    let mut committed = 0u32;
    let budget_spent = |committed: u32| options.max_steps.is_some_and(|max| committed >= max);
    for _ in 0..MAX_HOOK_RUNS {
        let now = options.clock.now();
        let advanced = advance(
            driver,
            name,
            AdvanceOptions {
                owner: Some(&owner),
                max_steps: options.max_steps.map(|max| max.saturating_sub(committed)),
            },
            now,
            &mut os_rng(),
        )
        .map_err(not_found)?;
        print_events(&advanced.events);
        // Every advance says how it ended.
        let Some(Advanced { next, steps }) = advanced.advance else {
            return Err(CliError::new(format!(
                "cred {name}: the advance did not say what comes next"
            )));
        };
        committed += steps;
        let action = match next {
            Next::Act(action) if !budget_spent(committed) => action,
            // --max-steps spent (advance stops with a step still due only
            // for it): stop, whatever is due.
            _ => {
                crate::outln!("cred {name}: stopped after {committed} steps (--max-steps)");
                return Ok(());
            }
        };
        let changed = match action {
            Action::Wait { until, reason } => {
                match (reason, &advanced.document.mint) {
                    (WaitReason::MintElsewhere, Some(m)) => crate::outln!(
                        "cred {name}: rotation {} attempt {} is minted by another reconciler ({}): only it runs that mint; nothing to do here",
                        m.rotation,
                        m.attempt,
                        m.owner.as_deref().unwrap_or("no owner")
                    ),
                    _ => crate::outln!("cred {name}: waiting {reason}: {}", when(until, now)),
                }
                return Ok(());
            }
            action => run_hook(action, name, &capture, doc.hooks.as_ref(), options, &report)?,
        };
        committed += u32::from(changed);
    }
    Err(CliError::new(format!(
        "cred {name}: still running hooks after {MAX_HOOK_RUNS}: refusing to loop"
    )))
}

/// Runs the hook `action` asks for (a mint, a revocation, a stray's
/// revocation) and reports its result through `report`: whether that
/// changed the document.
fn run_hook(
    action: Action,
    name: &str,
    capture: &Path,
    hooks: Option<&Hooks>,
    options: &RunOptions,
    report: &dyn Fn(&CredentialInput) -> CliResult<bool>,
) -> CliResult<bool> {
    let need_hooks = || {
        hooks.ok_or_else(|| {
            CliError::new(format!(
                "credential \"{name}\" has no hooks: its embedder performs and reports its steps"
            ))
        })
    };
    let changed = match action {
        Action::Mint { rotation, attempt } => {
            let hooks = need_hooks()?;
            let files = Attempt::new(capture, rotation, attempt);
            let result = hooks::mint(
                &files,
                name,
                &hooks.mint,
                options.hook_timeout,
                options.max_output,
            )
            .map_err(CliError::new)?;
            let changed = report(&mint_report(rotation, attempt, result))?;
            // Only now: until the result (and any stray) is committed,
            // the capture is what a resumed run adopts.
            files.remove();
            changed
        }
        Action::Revoke { rotation, value } => {
            let hooks = need_hooks()?;
            let input = spill::revoke_input(&value, None).map_err(CliError::new)?;
            let result = hooks::revoke(capture, name, &hooks.revoke, input, options.hook_timeout)
                .map_err(CliError::new)?;
            report(&match result {
                HookResult::Done(()) => CredentialInput::Revoked { rotation },
                HookResult::Failed { message, .. } => {
                    CredentialInput::RevokeFailed { rotation, message }
                }
            })?
        }
        Action::RevokeStray {
            rotation,
            attempt,
            value,
        } => {
            let hooks = need_hooks()?;
            let stray = Stray {
                capture,
                rotation,
                attempt,
            };
            stray.revoke(name, &hooks.revoke, &value, options, report)?
        }
        other => {
            return Err(CliError::new(format!(
                "cred {name}: the engine asks for {other:?}, which this pki cannot run"
            )));
        }
    };
    Ok(changed)
}

/// A stray credential to revoke: what a failed mint printed.
struct Stray<'a> {
    capture: &'a Path,
    rotation: u64,
    attempt: u32,
}

impl Stray<'_> {
    /// Runs the revoke hook with the whole output of the failed mint (what
    /// the store kept and what was spilled past the cap) and reports the
    /// result; the spill goes once the revocation is recorded.
    fn revoke(
        &self,
        name: &str,
        command: &str,
        value: &pki_rotate::CredentialSecret,
        options: &RunOptions,
        report: &dyn Fn(&CredentialInput) -> CliResult<bool>,
    ) -> CliResult<bool> {
        let (rotation, attempt) = (self.rotation, self.attempt);
        let spilled = spill::path(self.capture, rotation, attempt);
        let input = spill::revoke_input(value, Some(&spilled)).map_err(CliError::new)?;
        let result = hooks::revoke(self.capture, name, command, input, options.hook_timeout)
            .map_err(CliError::new)?;
        let revoked = matches!(result, HookResult::Done(()));
        let changed = report(&match result {
            HookResult::Done(()) => CredentialInput::StrayRevoked { rotation, attempt },
            HookResult::Failed { message, .. } => CredentialInput::StrayRevokeFailed {
                rotation,
                attempt,
                message,
            },
        })?;
        if revoked {
            let _ = std::fs::remove_file(&spilled);
        }
        Ok(changed)
    }
}

/// What a mint hook's result is reported as.
fn mint_report(
    rotation: u64,
    attempt: u32,
    result: HookResult<pki_rotate::CredentialSecret>,
) -> CredentialInput {
    match result {
        HookResult::Done(value) => CredentialInput::Minted {
            rotation,
            attempt,
            value,
        },
        HookResult::Failed { message, captured } => CredentialInput::MintFailed {
            rotation,
            attempt,
            message,
            captured,
        },
    }
}

/// Reports what the captures of earlier attempts hold, when their result
/// may not be committed (a report that failed or lost a race), then
/// removes them: what a mint printed is recorded (as current, or as a
/// stray to revoke, or found already recorded) and never just deleted. The
/// attempt this capture directory still has to run is left for the mint.
/// A report that fails leaves its capture for the next run, with a line on
/// stderr: it must not stop the rest (a stray to revoke first, say).
fn settle_leftovers(
    capture: &Path,
    doc: &CredentialState,
    options: &RunOptions,
    report: &dyn Fn(&CredentialInput) -> CliResult<bool>,
) {
    let pending = doc.mint.as_ref().map(|m| (m.rotation, m.attempt));
    for (rotation, attempt) in hooks::attempts(capture) {
        if Some((rotation, attempt)) == pending {
            // Ours: the mint adopts it. Another owner's: not this
            // directory's business (a capture directory shared by stores).
            continue;
        }
        let files = Attempt::new(capture, rotation, attempt);
        let outcome = hooks::leftover(&files, options.hook_timeout, options.max_output)
            .map_err(CliError::new)
            .and_then(|result| match result {
                None => Ok(()),
                Some(result) => report(&mint_report(rotation, attempt, result)).map(|_| ()),
            });
        match outcome {
            Ok(()) => files.remove(),
            Err(e) => eprintln!(
                "pki: cred {}: the capture of rotation {rotation} attempt {attempt} is kept for the next run: {}",
                doc.name,
                crate::common::one_line(&e.message)
            ),
        }
    }
}

/// `pki cred status`; with `check`, the exit status says the worst health
/// among the credentials (0 ok, 3 an action is due, 4 a hook is failing).
pub fn status(dir: &StoreArg, json: bool, check: bool, clock: Clock) -> CliResult {
    let now = clock.now();
    let store = open(dir)?;
    let driver = Driver::new(store);
    let mut statuses = Vec::new();
    for name in list(dir)? {
        let (doc, _) = driver.load::<CredentialEngine>(&credential_key(&name))?;
        statuses.push(CredentialStatus::of(&doc, now));
    }
    if check {
        let worst = statuses.iter().map(|s| s.health).max();
        crate::common::set_exit_status(worst.map_or(0, |h| h.exit_code()));
    }
    if json {
        let report = serde_json::json!({
            "schema_version": SCHEMA_VERSION,
            "now": pki_core::datetime::rfc3339(now),
            "credentials": statuses,
        });
        let text =
            serde_json::to_string_pretty(&report).map_err(|e| CliError::new(e.to_string()))?;
        crate::outln!("{text}");
        return Ok(());
    }
    if statuses.is_empty() {
        // As every other command's empty answer does: say how to go on.
        crate::outln!("no credentials in {dir} (create one with `pki cred init`)");
    }
    for s in &statuses {
        print_status(s, now);
    }
    Ok(())
}

/// The text report of one credential.
fn print_status(s: &CredentialStatus, now: OffsetDateTime) {
    crate::outln!(
        "{}: {}   expire {}   grace {}",
        s.name,
        s.state,
        pki_core::policy::human(time::Duration::seconds(s.expire_seconds)),
        pki_core::policy::human(time::Duration::seconds(s.grace_seconds))
    );
    if let Some(c) = &s.current {
        crate::outln!(
            "  current  rotation {}, minted {}, due {}",
            c.rotation,
            pki_core::datetime::rfc3339(c.minted_at),
            when(c.until, now)
        );
    }
    if let Some(o) = &s.old {
        crate::outln!(
            "  old      rotation {}, revoked after {}",
            o.rotation,
            when(o.until, now)
        );
    }
    if let Some(m) = &s.mint {
        crate::outln!(
            "  minting  rotation {} attempt {}, started {}{}",
            m.rotation,
            m.attempt,
            pki_core::datetime::rfc3339(m.started_at),
            m.owner
                .as_deref()
                .map(|o| format!(", run by {o}"))
                .unwrap_or_default()
        );
    }
    let failed = |f: &pki_rotate::credential::HookFailure| {
        crate::outln!(
            "  failed   {} of rotation {} ({} in a row) at {}: {}; retry after {}",
            f.action,
            f.rotation,
            f.failures,
            pki_core::datetime::rfc3339(f.at),
            f.message,
            when(f.retry_after, now)
        );
    };
    if let Some(f) = &s.failure {
        failed(f);
    }
    for stray in &s.strays {
        crate::outln!(
            "  stray    rotation {} attempt {}: printed before it failed at {}, to revoke before the next attempt",
            stray.rotation,
            stray.attempt,
            pki_core::datetime::rfc3339(stray.captured_at)
        );
        if let Some(f) = &stray.failure {
            failed(f);
        }
    }
    crate::outln!("  next     {} at {}", s.next_action, when(s.next_at, now));
}
