//! `pki validate`: check a proposed replacement CA against today's trust,
//! without changing anything.

use crate::common::{CliError, CliResult, StoreArg, load_signer};
use crate::external::{CaFiles, proposed_keys, with_current_keys};
use time::OffsetDateTime;

/// The check `--json` reports failed when an input file cannot be read or
/// holds no usable CA or key (the other checks need what it holds).
pub const INPUTS_READABLE: &str = "inputs-readable";

pub fn run(
    dir: &StoreArg,
    files: &CaFiles,
    service_account_file: Option<&std::path::Path>,
    json: bool,
    now: OffsetDateTime,
) -> CliResult {
    let inputs = files.read().and_then(|import| {
        Ok((
            import,
            proposed_keys(service_account_file, files.max_input_size)?,
        ))
    });
    let (import, proposed) = match inputs {
        Ok(inputs) => inputs,
        Err(e) => {
            if json {
                print_json(&serde_json::json!({
                    "ok": false,
                    "checks": [{"name": INPUTS_READABLE, "ok": false, "detail": e.message}],
                }))?;
            }
            return Err(e);
        }
    };
    let state = load_signer(dir)?;
    let keys = with_current_keys(dir, proposed)?;
    let report = pki_rotate::validate_replacement(&state, &import, &keys, now);
    if json {
        print_json(&report)?;
    } else {
        for check in &report.checks {
            let mark = if check.ok { "ok  " } else { "FAIL" };
            crate::outln!("{mark} {:<26} {}", check.name, check.detail);
        }
    }
    if report.ok {
        Ok(())
    } else {
        let failed: Vec<&str> = report.failed().map(|c| c.name.as_str()).collect();
        Err(CliError::new(format!(
            "{} would be refused: failed check(s) {}",
            import.cert.id(),
            failed.join(", ")
        )))
    }
}

fn print_json(report: &impl serde::Serialize) -> CliResult {
    let text = serde_json::to_string_pretty(report)
        .map_err(|e| CliError::new(format!("cannot encode the report: {e}")))?;
    crate::outln!("{text}");
    Ok(())
}
