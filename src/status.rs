//! `pki status`: what the store holds, when it expires, what happens next,
//! and with `--check`, an exit status for cron and monitoring.

use crate::common::{CliError, CliResult, SIGNER, StoreArg, set_exit_status, when};
use pki_kube::controller::ControllerError;
use pki_kube::controller::status::{
    InjectionTarget, KubeStatus, any_annotated, list_injection_targets,
};
use pki_kube::{KubeOptions, KubeUrl};
use pki_rotate::signer::IdleReport;
use pki_rotate::status::{
    BundleRole, CellResult, CertSummary, Health, LeafState, PendingAction, SignerStatus,
};
use pki_rotate::{Event, SignerEngine, SignerState, Step};
use std::path::Path;
use time::OffsetDateTime;

/// What `pki status` prints and what decides its exit status.
#[derive(Debug, Clone, Copy, Default)]
pub struct Output {
    /// The report as JSON (docs/status.schema.json).
    pub json: bool,
    /// Exit 0, 3 or 4 by the report's health.
    pub check: bool,
    /// With `check`, read and verify everything even when the store's
    /// summary could answer.
    pub verify: bool,
}

/// `pki status`: the store's report, and with `svg`, its timeline written there too (before
/// printing, so a failed write prints only its error). On a `kube://`
/// store the report also lists the objects annotated under `prefix` for
/// `pki controller` (pki-kube decides which lag); the store's summary
/// knows nothing of them, so `--check` makes the full report when there
/// are some.
pub fn run_drawing(
    dir: &StoreArg,
    output: Output,
    now: OffsetDateTime,
    svg: Option<&Path>,
    prefix: &str,
) -> CliResult {
    if let Some(path) = svg {
        crate::timeline_svg::check_path(path)?;
    }
    let kube = kube_url(dir);
    let driver = crate::token::driver(dir.open()?)?;
    if output.check
        && !output.json
        && !output.verify
        && !lists_annotated_objects(kube.as_ref(), prefix)?
        && let Some(idle) = driver.idle::<SignerEngine>(SIGNER, now)?
        // A summary this build cannot read, or one an older build wrote
        // (its promise was about steps alone): the full report decides.
        && let Some(Ok(report)) = idle.summary_report::<IdleReport>()
        && report.status_ok
    {
        if let Some(path) = svg {
            let state = driver.load::<SignerEngine>(SIGNER)?.0;
            write_svg(dir, &SignerStatus::of(&state, now)?, &state, path)?;
        }
        crate::out!("{}", render_idle(&idle, &report, now));
        set_exit_status(Health::Ok.exit_code());
        return Ok(());
    }
    let state = driver.load::<SignerEngine>(SIGNER)?.0;
    let status = SignerStatus::of(&state, now)?;
    if let Some(path) = svg {
        write_svg(dir, &status, &state, path)?;
    }
    let targets = match &kube {
        Some(url) => {
            let options = KubeOptions::default();
            let listing = list_injection_targets(url, &options, prefix, &state, now)
                .map_err(listing_error)?;
            for unlisted in &listing.unlisted {
                eprintln!("pki: {}", crate::common::one_line(unlisted));
            }
            listing.targets
        }
        None => Vec::new(),
    };
    let report = KubeStatus::new(status, targets);
    if output.json {
        let text = match kube {
            Some(_) => serde_json::to_string_pretty(&report),
            None => serde_json::to_string_pretty(&report.signer),
        };
        crate::outln!("{}", text.map_err(|e| CliError::new(e.to_string()))?);
    } else {
        crate::out!("{}", render(&report.signer, &report.injection_targets));
    }
    if output.check {
        set_exit_status(report.signer.health.exit_code());
    }
    Ok(())
}

/// Whether the report lists objects annotated for `pki controller`: on a
/// `kube://` store where some are (the store's summary knows nothing of
/// them, so `--check` then makes the full report).
fn lists_annotated_objects(kube: Option<&KubeUrl>, prefix: &str) -> Result<bool, CliError> {
    let Some(url) = kube else { return Ok(false) };
    any_annotated(url, &KubeOptions::default(), prefix).map_err(listing_error)
}

/// A failed listing of the cluster: a store error keeps its exit code.
fn listing_error(e: ControllerError) -> CliError {
    match e {
        ControllerError::Store(e) => CliError::from(e),
        other => CliError::new(other.to_string()),
    }
}

/// The `kube://` store `dir` names, if it names one.
fn kube_url(dir: &StoreArg) -> Option<KubeUrl> {
    match dir {
        StoreArg::Url(url) if pki_kube::is_kube_url(url) => KubeUrl::parse(url).ok(),
        _ => None,
    }
}

fn write_svg(dir: &StoreArg, status: &SignerStatus, state: &SignerState, path: &Path) -> CliResult {
    let timeline = crate::timeline_svg::build::of_status(&dir.to_string(), status, state);
    crate::timeline_svg::write(path, &crate::timeline_svg::render(&timeline))
}

/// The short report of `status --check` answered from the store's
/// summary: the header and the next action of the full table.
fn render_idle(
    idle: &Step<SignerState, Event>,
    report: &IdleReport,
    now: OffsetDateTime,
) -> String {
    let mut out = format!(
        "at {}   CA {}",
        pki_core::datetime::rfc3339(now),
        report.ca_subject.as_deref().unwrap_or(&report.ca_id)
    );
    if let Some(rotations) = report.rotations {
        out.push_str(&format!("   rotations so far: {rotations}"));
    }
    out.push_str(&format!("\n\n  CA {}\n", report.ca_id));
    if let Some(fingerprint) = &report.bundle_fingerprint {
        out.push_str(&format!("  bundle fingerprint {fingerprint}\n"));
    }
    out.push_str(&format!(
        "\n  CA rotation due {}\n  next action: none now; next check {}\n  health: ok\n",
        when(report.next_rotation, now),
        when(idle.next_wake, now)
    ));
    out.push_str(
        "  (from the store's summary of its last write, every file checked against its commit: certificates not listed nor verified; `pki status DIR` lists and verifies them)\n",
    );
    out
}

fn row(role: &str, c: &CertSummary, now: OffsetDateTime) -> String {
    let state = if now > c.not_after {
        "  EXPIRED"
    } else if now < c.not_before {
        "  NOT YET VALID"
    } else {
        ""
    };
    format!(
        "  {role:<10} {:<52} {}{state}\n",
        c.id,
        when(c.not_after, now)
    )
}

/// The human table; `targets`: the objects `pki controller` keeps current
/// (a `kube://` store's).
pub fn render(s: &SignerStatus, targets: &[InjectionTarget]) -> String {
    let now = s.now;
    let mut out = String::new();
    out.push_str(&format!(
        "at {}   CA {}   rotations so far: {}\n\n",
        pki_core::datetime::rfc3339(now),
        s.ca.subject,
        s.rotations
    ));
    out.push_str(&format!("  {:<10} {:<52} {}\n", "ROLE", "ID", "EXPIRES"));
    out.push_str(&row("CA", &s.ca, now));
    if let Some(b) = &s.bridge {
        out.push_str(&row("bridge B", b, now));
    }
    for m in &s.bundle {
        let role = match m.role {
            BundleRole::CurrentCa => "bundle:CA",
            BundleRole::BridgeA => "bridge A",
            BundleRole::PreviousRoot => "old root",
            BundleRole::Other => "bundle",
        };
        out.push_str(&row(role, &m.cert, now));
    }
    out.push_str(&format!("  bundle fingerprint {}\n", s.bundle_fingerprint));
    render_previous(&mut out, s);
    out.push('\n');
    render_leaves(&mut out, s);
    render_trust(&mut out, s);
    render_consumers(&mut out, s);
    render_targets(&mut out, targets);
    out.push('\n');
    render_next(&mut out, s, targets);
    out
}

/// What each annotated object holds.
fn render_targets(out: &mut String, targets: &[InjectionTarget]) {
    if targets.is_empty() {
        return;
    }
    out.push_str(&format!("\n  {:<48} STATE\n", "ANNOTATED OBJECT"));
    for t in targets {
        let object = match &t.namespace {
            Some(namespace) => format!("{} {namespace}/{}", t.kind, t.name),
            None => format!("{} {}", t.kind, t.name),
        };
        let state = if t.current {
            "current"
        } else if t.overdue {
            "LAGS: not current within the reload interval"
        } else {
            "not current yet (within the reload interval)"
        };
        out.push_str(&format!("  {object:<48} {state}: {}\n", t.detail));
    }
}

/// The CA the last rotation replaced, and whether it is still trusted.
fn render_previous(out: &mut String, s: &SignerStatus) {
    let now = s.now;
    if let Some(p) = &s.previous {
        match p.trusted_until {
            Some(t) if p.trusted => out.push_str(&format!(
                "  previous CA {} trusted until {}\n",
                p.id,
                when(t, now)
            )),
            Some(t) => out.push_str(&format!(
                "  previous CA {} no longer trusted (trust ended {})\n",
                p.id,
                when(t.min(p.not_after), now)
            )),
            None => out.push_str(&format!(
                "  previous CA {} no longer trusted (distrusted at the rotation)\n",
                p.id
            )),
        }
    }
}

/// The certificates issued, one row each.
fn render_leaves(out: &mut String, s: &SignerStatus) {
    let now = s.now;
    if s.leaves.is_empty() {
        out.push_str("  no certificates issued (pki issue DIR NAME --dns ...)\n");
    } else {
        out.push_str(&format!(
            "  {:<14} {:<8} {:<6} {:<44} NAMES\n",
            "CERT", "KIND", "CHAIN", "EXPIRES"
        ));
        for l in &s.leaves {
            let expires = match (&l.cert, l.state) {
                (Some(c), LeafState::Valid) => when(c.not_after, now),
                (Some(c), state) => format!("{}  {}", when(c.not_after, now), state.label()),
                (None, state) => state.label().to_string(),
            };
            out.push_str(&format!(
                "  {:<14} {:<8} {:<6} {:<44} {}\n",
                l.name,
                match l.kind {
                    pki_rotate::LeafKind::Server => "server",
                    pki_rotate::LeafKind::Client => "client",
                    pki_rotate::LeafKind::ServerClient => "both",
                },
                l.chain_len,
                expires,
                l.names.join(",")
            ));
        }
    }
}

/// Which serving chain verifies against which bundle now.
fn render_trust(out: &mut String, s: &SignerStatus) {
    if !s.trust.is_empty() {
        out.push_str("\n  trust now (RFC 5280 path validation):\n");
        for c in &s.trust {
            let verdict = match (&c.result, c.retired) {
                (CellResult::Verified { .. }, false) => "ok".to_string(),
                (CellResult::Verified { .. }, true) => {
                    "ok (retired: the previous CA is no longer trusted)".to_string()
                }
                (CellResult::Failed { error }, false) => format!("FAILS: {error}"),
                (CellResult::Failed { .. }, true) => {
                    "fails, as intended: retired, the previous CA is no longer trusted".to_string()
                }
            };
            out.push_str(&format!(
                "  {:>3} serving chain x {:>3} bundle  {verdict}\n",
                c.chain.to_string(),
                c.bundle.to_string()
            ));
        }
    }
}

/// What each consumer last loaded.
fn render_consumers(out: &mut String, s: &SignerStatus) {
    let now = s.now;
    if !s.consumers.is_empty() {
        out.push_str(&format!(
            "\n  {:<24} {:<18} {:<44} STATE\n",
            "CONSUMER", "BUNDLE", "LOADED"
        ));
        for c in &s.consumers {
            let state = if c.current {
                "current"
            } else if c.overdue {
                "LAGS: has not loaded the current bundle within the reload interval"
            } else {
                "previous bundle (within the reload interval)"
            };
            out.push_str(&format!(
                "  {:<24} {:<18} {:<44} {state}\n",
                c.name,
                c.fingerprint.get(..16).unwrap_or(&c.fingerprint),
                when(c.loaded_at, now)
            ));
        }
    }
}

/// When the CA rotates, the next action and the health.
fn render_next(out: &mut String, s: &SignerStatus, targets: &[InjectionTarget]) {
    let now = s.now;
    let due = if s.rotation_due_at <= now {
        format!("since {}", when(s.rotation_due_at, now))
    } else {
        when(s.rotation_due_at, now)
    };
    out.push_str(&format!("  CA rotation due {due}\n"));
    let policy = &s.policy;
    let reload = pki_core::policy::human(time::Duration::seconds(policy.reload_interval_seconds));
    out.push_str(&format!(
        "  reload interval {reload}{}\n",
        if policy.reload_interval_assumed {
            " (assumed: M, as no --reload-interval was set)"
        } else {
            ""
        }
    ));
    if s.pending.is_empty() {
        out.push_str(&format!(
            "  next action: none now; next check {}\n",
            when(s.next_check, now)
        ));
    } else {
        for p in &s.pending {
            // `pki rotate` alone cannot make an imported CA's replacement:
            // the action's own words say what to run.
            let run = match p {
                PendingAction::SupplyReplacement { .. } => "",
                _ => " (run `pki rotate`)",
            };
            out.push_str(&format!("  next action: {p}{run}\n"));
        }
    }
    match s.health {
        Health::Ok => out.push_str("  health: ok\n"),
        Health::ActionDue if s.pending.is_empty() && targets.iter().any(|t| t.overdue) => out
            .push_str(
                "  health: an action is due: annotated objects lag (is pki controller running?)\n",
            ),
        Health::ActionDue if s.pending.is_empty() => {
            out.push_str("  health: an action is due: consumers lag (reload them)\n")
        }
        Health::ActionDue => out.push_str("  health: an action is due\n"),
        Health::Broken => {
            for p in &s.problems {
                out.push_str(&format!("  BROKEN: {p}\n"));
            }
        }
    }
}
