//! A better "did you mean" for a mistyped flag: clap's suggestion scores
//! similarity by Jaro distance, so `pki issue --dsn` suggests `--json`.
//! Typing two letters in the wrong order is the commonest slip, so a flag
//! one edit away, a transposition counting as one, is suggested instead.

use clap::error::{ContextKind, ContextValue, ErrorKind};
use std::ffi::OsString;

/// `err` (from parsing `args` with `cmd`) with its suggestion replaced
/// when an unknown `--flag` is one edit (or one transposition) away from
/// exactly one flag of the subcommand it was given to.
pub fn improve(err: clap::Error, mut cmd: clap::Command, args: &[OsString]) -> clap::Error {
    if err.kind() != ErrorKind::UnknownArgument {
        return err;
    }
    let Some(ContextValue::String(invalid)) = err.get(ContextKind::InvalidArg) else {
        return err;
    };
    let Some(typed) = invalid.strip_prefix("--") else {
        return err;
    };
    let typed = typed.split('=').next().unwrap_or(typed).to_string();
    cmd.build();
    let sub = subcommand_of(&cmd, args);
    let close: Vec<&str> = sub
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long())
        .filter(|long| strsim::osa_distance(&typed, long) == 1)
        .collect();
    let [flag] = close.as_slice() else {
        return err;
    };
    let mut sub = sub.clone();
    let mut err = err;
    err.insert(
        ContextKind::SuggestedArg,
        ContextValue::String(format!("--{flag}")),
    );
    err.insert(
        ContextKind::Usage,
        ContextValue::StyledStr(sub.render_usage()),
    );
    err
}

/// The deepest subcommand named in `args` (`pki set ack ...` → `ack`).
fn subcommand_of<'a>(cmd: &'a clap::Command, args: &[OsString]) -> &'a clap::Command {
    let mut current = cmd;
    for arg in args.iter().skip(1) {
        let Some(word) = arg.to_str() else { continue };
        if word.starts_with('-') {
            continue;
        }
        match current.find_subcommand(word) {
            Some(sub) => current = sub,
            None => break,
        }
    }
    current
}
