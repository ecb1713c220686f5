//! `pki rotate`: rotate the CA if due or forced; re-issue stale leaves.

use crate::common::{
    CliError, CliResult, SIGNER, StoreArg, os_rng, print_events, step_signer, when,
};
use pki_rotate::signer::IdleReport;
use pki_rotate::{
    Event, ForcedRotation, RotateError, SignerEngine, SignerError, SignerInput, SignerState, Step,
};
use time::OffsetDateTime;

pub fn run(dir: &StoreArg, forced: Option<&ForcedRotation>, now: OffsetDateTime) -> CliResult {
    let input = SignerInput {
        forced: forced.cloned(),
        ..SignerInput::default()
    };
    let step = step_signer(dir, &input, now)?;
    if step.events.is_empty() {
        crate::outln!("nothing to do");
    }
    print_events(&step.events);
    let state = &step.document;
    crate::outln!(
        "next rotation   {}",
        when(state.rotation_due_at(&state.policy), now)
    );
    Ok(())
}

/// What `pki rotate` passes besides the store: the forced rotation, the
/// operator's reason to break trust, and the output form.
pub struct GuardedArgs<'a> {
    pub dir: &'a StoreArg,
    pub forced: Option<&'a ForcedRotation>,
    /// Rotate even when the pre-flight finds consumers that would break.
    pub allow_trust_break: Option<&'a str>,
    pub json: bool,
    /// Only the events: nothing at all when nothing was done.
    pub quiet: bool,
    pub now: OffsetDateTime,
}

/// `pki rotate --json` (docs/rotate.schema.json).
#[derive(serde::Serialize)]
struct RotateReport<'a> {
    schema_version: u32,
    changed: bool,
    /// Whether the CA was rotated by this command.
    rotated: bool,
    events: &'a [pki_rotate::Event],
    /// The history entry of the rotation this command made, if any.
    rotation: Option<&'a pki_rotate::RotationRecord>,
    ca_id: String,
    #[serde(with = "time::serde::rfc3339")]
    next_rotation: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    next_check: OffsetDateTime,
}

fn rotated(step: &Step<SignerState, Event>) -> bool {
    step.events
        .iter()
        .any(|e| matches!(e, pki_rotate::Event::Rotated { .. }))
}

/// Prints what a rotate step did as `docs/rotate.schema.json` describes:
/// the same document whichever kind of rotation (due, forced, to a
/// supplied CA, same-key renewal) made it.
pub fn print_json(step: &Step<SignerState, Event>) -> CliResult {
    let state = &step.document;
    let rotated = rotated(step);
    let report = RotateReport {
        schema_version: pki_rotate::status::SCHEMA_VERSION,
        changed: step.changed,
        rotated,
        events: &step.events,
        rotation: if rotated { state.history.last() } else { None },
        ca_id: state.ca.cert.id(),
        next_rotation: state.rotation_due_at(&state.policy),
        next_check: step.next_wake,
    };
    print_report(&report)
}

fn print_report(report: &RotateReport<'_>) -> CliResult {
    let text = serde_json::to_string_pretty(report)
        .map_err(|e| crate::common::CliError::new(e.to_string()))?;
    crate::outln!("{text}");
    Ok(())
}

/// `pki rotate` with the trust-break guard: a rotation that would cut
/// consumers off is refused (exit 1, naming them) unless allowed.
pub fn run_guarded(args: &GuardedArgs<'_>) -> CliResult {
    let input = SignerInput {
        forced: args.forced.cloned(),
        allow_trust_break: args.allow_trust_break.map(str::to_string),
        ..SignerInput::default()
    };
    let store = args.dir.open()?;
    let driver = crate::token::driver(store)?;
    // Nothing asked and nothing due: decided from the store's summary of
    // the document, at a cost that does not grow with its leaves.
    let stepped =
        driver.step_unless_idle::<SignerEngine, _>(SIGNER, &input, args.now, &mut os_rng());
    if let Ok(idle) = &stepped
        && let Some(Ok(report)) = idle.summary_report::<IdleReport>()
    {
        return print_idle(args, &report, idle.next_wake);
    }
    let step = match stepped {
        // A summary this build cannot read: the full step decides.
        Ok(idle) if idle.is_idle() => {
            driver.step::<SignerEngine, _>(SIGNER, &input, args.now, &mut os_rng())
        }
        // `pki rotate` changes no leaf: never stepped by parts.
        Ok(step) => Ok(step),
        Err(e) => Err(e),
    };
    let step = step
        .map_err(|e| {
            let assumed = matches!(
                &e,
                RotateError::Signer(SignerError::TrustBreak {
                    reload_interval_assumed: true,
                    ..
                })
            );
            let mut error = CliError::with_override_hint(e, "--allow-trust-break REASON");
            if assumed {
                error.details.push(
                    "without `pki init --reload-interval DUR`, consumers are assumed to reload within M (--min-trust)".into(),
                );
            }
            if !error.details.is_empty() {
                error.details.push(
                    "in an emergency, --force REASON --compromised (and, within the reload interval, --force REASON --grace DUR) is not refused: what it breaks is recorded in the history".into(),
                );
            }
            error
        })?;
    let state = &step.document;
    let rotated = rotated(&step);
    if args.json {
        return print_json(&step);
    }
    if step.events.is_empty() && !args.quiet {
        crate::outln!("nothing to do");
    }
    print_events(&step.events);
    if rotated && let Some(record) = state.history.last() {
        for o in &record.overridden {
            // What an emergency rotation broke by its nature, or what the
            // operator allowed with --allow-trust-break.
            let how = if o.detail.starts_with("accepted by") {
                "accepted"
            } else {
                "allowed"
            };
            crate::outln!("trust break {how}: {}: {}", o.name, o.detail);
        }
    }
    if !args.quiet {
        crate::outln!(
            "next rotation   {}",
            when(state.rotation_due_at(&state.policy), args.now)
        );
    }
    Ok(())
}

/// What `pki rotate` prints when the store's summary says nothing is due:
/// the same as a full step that found nothing to do.
fn print_idle(
    args: &GuardedArgs<'_>,
    report: &IdleReport,
    next_check: OffsetDateTime,
) -> CliResult {
    if args.json {
        return print_report(&RotateReport {
            schema_version: pki_rotate::status::SCHEMA_VERSION,
            changed: false,
            rotated: false,
            events: &[],
            rotation: None,
            ca_id: report.ca_id.clone(),
            next_rotation: report.next_rotation,
            next_check,
        });
    }
    if !args.quiet {
        crate::outln!("nothing to do");
        crate::outln!("next rotation   {}", when(report.next_rotation, args.now));
    }
    Ok(())
}

/// `--to FILE`: validate the supplied CA, then rotate to it.
pub fn run_to(
    dir: &StoreArg,
    files: &crate::external::CaFiles,
    service_account_keys: Option<&std::path::Path>,
    force: Option<String>,
    json: bool,
    now: OffsetDateTime,
) -> CliResult {
    crate::external::rotate_to(dir, files, service_account_keys, force, json, now)
}

/// `--renew-same-key`: a new CA certificate on the same key.
pub fn run_renew_same_key(dir: &StoreArg, json: bool, now: OffsetDateTime) -> CliResult {
    crate::external::renew(dir, json, now)
}
