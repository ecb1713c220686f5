//! `pki completions SHELL` and the man page, both generated from the one
//! clap definition of the command line, so they cannot drift from it.

use crate::common::{CliError, CliResult};
use clap::CommandFactory;

pub fn completions(shell: clap_complete::Shell) -> CliResult {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut crate::Cli::command(), "pki", &mut script);
    crate::out!("{}", String::from_utf8_lossy(&script));
    Ok(())
}

/// The man page in roff, as checked in at `docs/pki.1`.
pub fn man_page() -> CliResult<Vec<u8>> {
    let mut page = Vec::new();
    clap_mangen::Man::new(crate::Cli::command())
        .render(&mut page)
        .map_err(|e| CliError::new(format!("cannot render the man page: {e}")))?;
    Ok(page)
}

pub fn man() -> CliResult {
    let page = man_page()?;
    crate::out!("{}", String::from_utf8_lossy(&page));
    Ok(())
}
