//! `pki plan DIR --until DUR|TIME`: what the store's engines will do until
//! then, simulated in memory by `pki_rotate::forecast`; nothing is written.

use crate::common::{CliError, CliResult, SIGNER, StoreArg, parse_duration, parse_time};
use pki_rotate::forecast::{Forecast, forecast};
use pki_rotate::{KeyRingEngine, RotateError, SignerEngine, StoreError};
use time::OffsetDateTime;

/// `pki plan`'s arguments.
#[derive(clap::Args)]
pub struct PlanArgs {
    /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME (only read).
    #[arg(value_parser = StoreArg::parse)]
    dir: StoreArg,
    /// The end of the window: a duration after --now, like 800d, or a
    /// time, like 2028-06-01T00:00:00Z.
    #[arg(long, value_parser = parse_until, value_name = "DUR|TIME")]
    until: Until,
    /// Print {"schema_version", "from", "until", "events": [{"at", "kind",
    /// "detail"}], "checks": [{"name", "ok", "detail"}]}
    /// (docs/plan.schema.json).
    #[arg(long)]
    json: bool,
    /// Also write the timeline as a self-contained SVG picture to FILE:
    /// a lane per CA, the events at their times, failing checks in red.
    #[arg(long, value_name = "FILE")]
    svg: Option<std::path::PathBuf>,
    /// The start of the window, like 2027-02-01T00:00:00Z, or "now".
    #[arg(long, default_value = "now", value_parser = parse_time, value_name = "TIME")]
    now: OffsetDateTime,
}

/// `--until`: a duration after `--now`, or a time.
#[derive(Debug, Clone, Copy)]
enum Until {
    After(time::Duration),
    At(OffsetDateTime),
}

fn parse_until(s: &str) -> Result<Until, String> {
    match parse_duration(s) {
        Ok(d) => Ok(Until::After(d)),
        Err(_) => parse_time(s).map(Until::At).map_err(|_| {
            format!(
                "\"{}\" is neither a duration (like 800d, 13h) nor a time ({})",
                s.escape_debug(),
                crate::common::TIME_HELP
            )
        }),
    }
}

/// `pki plan --json` (docs/plan.schema.json).
#[derive(serde::Serialize)]
struct PlanReport<'a> {
    schema_version: u32,
    #[serde(with = "time::serde::rfc3339")]
    from: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    until: OffsetDateTime,
    #[serde(flatten)]
    forecast: &'a Forecast,
}

/// Reads the documents, prints the forecast; exit 1 when a check fails
/// (as `pki validate` does), after printing it.
pub fn run(args: PlanArgs) -> CliResult {
    let until = match args.until {
        Until::After(d) => pki_core::datetime::add(args.now, d)?,
        Until::At(t) => t,
    };
    if until < args.now {
        return Err(CliError {
            message: format!(
                "--until {} is before --now {}",
                pki_core::datetime::rfc3339(until),
                pki_core::datetime::rfc3339(args.now)
            ),
            status: 2,
            details: Vec::new(),
        });
    }
    if let Some(path) = &args.svg {
        crate::timeline_svg::check_path(path)?;
    }
    let driver = crate::token::driver(args.dir.open()?)?;
    let signer = optional(driver.load::<SignerEngine>(SIGNER))?;
    let keys = optional(driver.load::<KeyRingEngine>(pki_rotate::keyring::STORE_KEY))?;
    if signer.is_none() && keys.is_none() {
        return Err(CliError::new(format!(
            "{}: holds no signer or key ring to plan for",
            args.dir
        )));
    }
    let forecast = forecast(signer.as_ref(), keys.as_ref(), args.now, until);
    if let Some(path) = &args.svg {
        let timeline =
            crate::timeline_svg::build::of_plan(&args.dir.to_string(), &forecast, args.now, until);
        crate::timeline_svg::write(path, &crate::timeline_svg::render(&timeline))?;
    }
    if args.json {
        let report = PlanReport {
            schema_version: pki_rotate::status::SCHEMA_VERSION,
            from: args.now,
            until,
            forecast: &forecast,
        };
        let text =
            serde_json::to_string_pretty(&report).map_err(|e| CliError::new(e.to_string()))?;
        crate::outln!("{text}");
    } else {
        print_text(&args.dir, args.now, until, &forecast);
    }
    let failed: Vec<&str> = forecast
        .checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| c.name)
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::new(format!(
            "plan: failed check(s) {}",
            failed.join(", ")
        )))
    }
}

/// A document that is not in the store is None; any other error stays one.
fn optional<D>(loaded: pki_rotate::Result<(D, pki_rotate::Revision)>) -> CliResult<Option<D>> {
    match loaded {
        Ok((doc, _)) => Ok(Some(doc)),
        Err(RotateError::Store(StoreError::NotInitialized(_))) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn print_text(dir: &StoreArg, from: OffsetDateTime, until: OffsetDateTime, f: &Forecast) {
    let rfc3339 = pki_core::datetime::rfc3339;
    crate::outln!(
        "{dir} from {} until {} (simulated; nothing is written):",
        rfc3339(from),
        rfc3339(until)
    );
    if f.events.is_empty() {
        crate::outln!("  nothing happens");
    }
    for e in &f.events {
        crate::outln!("  {}  {:<22} {}", rfc3339(e.at), e.kind.as_str(), e.detail);
    }
    crate::outln!("checks:");
    for c in &f.checks {
        let mark = if c.ok { "ok  " } else { "FAIL" };
        crate::outln!("  {mark} {:<38} {}", c.name, c.detail);
    }
}
