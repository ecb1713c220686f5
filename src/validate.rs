//! `pki validate`: check a proposed replacement CA against today's trust,
//! without changing anything.

use crate::common::{CliError, CliResult, StoreArg, load_signer};
use crate::external::{CaFiles, service_account_keys};
use time::OffsetDateTime;

pub fn run(
    dir: &StoreArg,
    files: &CaFiles,
    service_account_file: Option<&std::path::Path>,
    json: bool,
    now: OffsetDateTime,
) -> CliResult {
    let import = files.read()?;
    let state = load_signer(dir)?;
    let keys = service_account_keys(dir, service_account_file, files.max_input_size)?;
    let report = pki_rotate::validate_replacement(&state, &import, &keys, now);
    if json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| CliError::new(format!("cannot encode the report: {e}")))?;
        crate::outln!("{text}");
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
