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

/// The man pages in roff, as checked in under `docs/man/`: `pki.1`, which
/// lists the commands, and `pki-COMMAND.1` for each command with its options.
pub fn man_pages() -> CliResult<Vec<(String, Vec<u8>)>> {
    let render = |cmd: clap::Command| -> CliResult<Vec<u8>> {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut page)
            .map_err(|e| CliError::new(format!("cannot render the man page: {e}")))?;
        Ok(page)
    };
    // `help` is no page of its own: `man pki-set` is that help.
    let top = crate::Cli::command().disable_help_subcommand(true);
    let mut pages = vec![("pki.1".to_string(), render(top.clone())?)];
    let mut queue: Vec<(String, String, clap::Command)> = top
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| ("pki".to_string(), "pki".to_string(), s.clone()))
        .collect();
    // Each page is named `pki-set-init` (the file, and how the parent's
    // SUBCOMMANDS section refers to it), and its SYNOPSIS shows what a
    // user types, `pki set init`: clap_mangen takes the first from the
    // command's name and the second from its bin name.
    while let Some((parent_page, parent_words, sub)) = queue.pop() {
        let page = format!("{parent_page}-{}", sub.get_name());
        let words = format!("{parent_words} {}", sub.get_name());
        let sub = sub
            .disable_help_subcommand(true)
            .name(page.clone())
            .bin_name(words.clone())
            .version(env!("CARGO_PKG_VERSION"));
        queue.extend(
            sub.get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| (page.clone(), words.clone(), s.clone())),
        );
        pages.push((format!("{page}.1"), render(sub)?));
    }
    Ok(pages)
}

/// `pki man`: the top page on stdout, or every page written into `outdir`.
pub fn man(outdir: Option<&std::path::Path>) -> CliResult {
    let pages = man_pages()?;
    let Some(dir) = outdir else {
        crate::out!("{}", String::from_utf8_lossy(&pages[0].1));
        return Ok(());
    };
    std::fs::create_dir_all(dir).map_err(|e| CliError::new(format!("{}: {e}", dir.display())))?;
    for (name, page) in pages {
        let path = dir.join(name);
        std::fs::write(&path, page)
            .map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}
