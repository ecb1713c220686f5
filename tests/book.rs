//! The book (docs/book) as a reader meets it: every chapter listed in
//! SUMMARY.md and every listed chapter there, no relative link of the book,
//! the README or the changelog pointing at a file or heading that is not
//! there, and every ```sh block run by some test. A block is claimed by
//! the HTML comment on the line before it:
//!
//! - `<!-- runs as: tests/book.rs -->`: run here, literally, by `sh -e` in
//!   a new directory, with `DIR` a store path in it and this build's `pki`
//!   first on the PATH;
//! - `<!-- runs as: PATH WORD -->`: PATH (from the repository root) holds
//!   WORD, and when PATH is a Rust test it names the chapter too (it reads
//!   the block from the chapter and runs it).
//!
//! Commands that cannot run as written (an install into /usr/local, a store
//! on a server) are ```text blocks.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn book_src() -> PathBuf {
    root().join("docs/book/src")
}

fn chapters() -> Vec<PathBuf> {
    let mut out: Vec<_> = std::fs::read_dir(book_src())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    out.sort();
    out
}

/// The targets of `[text](target)` links outside code, with their lines.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((n + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// The anchor mdBook and GitHub give a heading: lower case, spaces to
/// dashes, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn summary_lists_every_chapter_once() {
    let summary = std::fs::read_to_string(book_src().join("SUMMARY.md")).unwrap();
    let listed: Vec<String> = links(&summary).into_iter().map(|(_, t)| t).collect();
    let unique: BTreeSet<_> = listed.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        listed.len(),
        "a chapter listed twice: {listed:?}"
    );
    let files: BTreeSet<String> = chapters()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|name| name != "SUMMARY.md")
        .collect();
    assert_eq!(unique, files, "SUMMARY.md and docs/book/src disagree");
}

#[test]
fn no_relative_link_is_broken() {
    let mut files = chapters();
    files.push(root().join("README.md"));
    files.push(root().join("CHANGELOG.md"));
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            let place = format!("{}:{line}: {target}", file.display());
            if !resolved.exists() {
                broken.push(format!("{place} (no such file)"));
            } else if !fragment.is_empty() {
                let target_text = std::fs::read_to_string(&resolved).unwrap_or_default();
                if !anchors(&target_text).contains(fragment) {
                    broken.push(format!("{place} (no such heading)"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Every ```sh block of the book: (chapter, the claim on the line before,
/// the block's text).
fn sh_blocks() -> Vec<(PathBuf, Option<String>, String)> {
    let mut out = Vec::new();
    for chapter in chapters() {
        let text = std::fs::read_to_string(&chapter).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            if lines[i] == "```sh" {
                let claim = i
                    .checked_sub(1)
                    .map(|p| lines[p].trim())
                    .and_then(|l| l.strip_prefix("<!-- runs as:"))
                    .and_then(|l| l.strip_suffix("-->"))
                    .map(|l| l.trim().to_string());
                let end = i + 1 + lines[i + 1..].iter().position(|l| *l == "```").unwrap();
                out.push((chapter.clone(), claim, lines[i + 1..end].join("\n") + "\n"));
                i = end;
            }
            i += 1;
        }
    }
    out
}

#[test]
fn every_command_sequence_is_run_by_a_test() {
    let mut unclaimed = Vec::new();
    for (chapter, claim, script) in sh_blocks() {
        let name = chapter.file_name().unwrap().to_string_lossy().into_owned();
        let Some(claim) = claim else {
            unclaimed.push(format!(
                "{name}: no `<!-- runs as: ... -->` before:\n{script}"
            ));
            continue;
        };
        if claim == "tests/book.rs" {
            continue; // run by the next test
        }
        let (path, word) = claim.split_once(' ').expect("runs as: PATH WORD");
        let source = std::fs::read_to_string(root().join(path))
            .unwrap_or_else(|e| panic!("{name}: runs as {path}: {e}"));
        assert!(source.contains(word), "{name}: {path} has no `{word}`");
        if path.ends_with(".rs") {
            assert!(
                source.contains(&name),
                "{name}: {path} does not read {name}"
            );
        }
    }
    assert!(unclaimed.is_empty(), "{}", unclaimed.join("\n"));
}

/// Runs `script` by `sh -e` in `dir`, `DIR` being `dir/store`.
fn run_here(script: &str, dir: &Path) -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_pki")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = script.replace("DIR", dir.join("store").to_str().unwrap());
    let out = Command::new("sh")
        .args(["-e", "-c", &script])
        .current_dir(dir)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}\nexit {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_blocks_claimed_here_run_as_written() {
    let mut ran = 0;
    for (_, claim, script) in sh_blocks() {
        if claim.as_deref() == Some("tests/book.rs") {
            let dir = tempfile::tempdir().unwrap();
            run_here(&script, dir.path());
            ran += 1;
        }
    }
    assert!(ran >= 1, "no block is run here");
}

/// The picture in the introduction, without what differs from run to run
/// (the CA's key identifier and serial, the store's path).
fn comparable(svg: &str, store: &str) -> String {
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg.replace(store, "DIR");
    // Certificate ids: 16 hex digits, a dash, the serial in hex.
    while let Some(at) = find_id(&rest) {
        out.push_str(&rest[..at.0]);
        out.push_str("CA-ID");
        rest = rest[at.1..].to_string();
    }
    out.push_str(&rest);
    out
}

fn find_id(s: &str) -> Option<(usize, usize)> {
    let bytes = s.as_bytes();
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    let mut i = 0;
    while i + 17 < bytes.len() {
        if bytes[i..i + 16].iter().all(|b| hex(*b))
            && bytes[i + 16] == b'-'
            && (i == 0 || !hex(bytes[i - 1]))
        {
            let mut end = i + 17;
            while end < bytes.len() && hex(bytes[end]) {
                end += 1;
            }
            if end > i + 17 {
                return Some((i, end));
            }
        }
        i += 1;
    }
    None
}

/// Every picture a chapter's commands draw (`--svg NAME.svg`) is the one
/// checked in beside the chapter (`PKI_UPDATE_DOCS=1` writes them again):
/// introduction.md's from `pki demo`, checks.md's from `pki plan`.
#[test]
fn the_books_timelines_are_what_pki_draws() {
    let mut drawn_any = 0;
    for (chapter, _, script) in sh_blocks() {
        let Some(picture) = script
            .split_whitespace()
            .skip_while(|word| *word != "--svg")
            .nth(1)
        else {
            continue;
        };
        let dir = tempfile::tempdir().unwrap();
        run_here(&script, dir.path());
        let drawn = std::fs::read_to_string(dir.path().join(picture)).unwrap();
        let store = dir.path().join("store");
        let drawn = drawn.replace(store.to_str().unwrap(), "DIR");
        let checked_in = book_src().join(picture);
        if std::env::var_os("PKI_UPDATE_DOCS").is_some() {
            std::fs::write(&checked_in, &drawn).unwrap();
        }
        let kept = std::fs::read_to_string(&checked_in)
            .unwrap_or_else(|e| panic!("{}: {}: {e}", chapter.display(), checked_in.display()));
        assert_eq!(
            comparable(&drawn, "DIR"),
            comparable(&kept, "DIR"),
            "docs/book/src/{picture} is not what {}'s commands draw: \
             PKI_UPDATE_DOCS=1 cargo test --test book rewrites it",
            chapter.display()
        );
        drawn_any += 1;
    }
    assert!(drawn_any >= 2, "the introduction's and the plan's pictures");
}
