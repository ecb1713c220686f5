//! The timeline as a picture: `pki plan --svg FILE` and `pki status --svg
//! FILE` write a self-contained SVG of when each CA lives and is trusted,
//! when bridges and the previous CA stop being trusted, when rotations fall
//! and leaves refresh, with failing checks (trust breaks) in red.
//!
//! [`Timeline`] is what is drawn, built by [`build`] from a forecast or a
//! status; [`render`] turns it into SVG text and does no I/O; [`write`]
//! puts the text in a file. Every element that stands for an event has
//! `class="event"`, `data-kind` and `data-at` (RFC 3339), every bar
//! `data-kind`, `data-from` and `data-until`, every failing check's mark
//! `class="fail"` and `data-check`: tests and scripts read the picture back.

pub mod build;
mod draw;
mod ticks;

use crate::common::{CliError, CliResult};
use std::path::Path;
use time::OffsetDateTime;

pub use draw::render;

/// What a picture shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// The heading.
    pub title: String,
    /// The left edge of the time axis.
    pub from: OffsetDateTime,
    /// The right edge.
    pub until: OffsetDateTime,
    /// Where the "now" line is drawn.
    pub now: OffsetDateTime,
    /// One row per CA (and per leaf, for a status), top to bottom.
    pub lanes: Vec<Lane>,
    /// Events not tied to a lane, drawn in one row per kind.
    pub events: Vec<Marker>,
    /// The checks, listed under the chart; failing ones in red, and their
    /// spans drawn across the chart.
    pub checks: Vec<CheckMark>,
}

/// One row: a CA's (or a leaf's) bars and the events on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    /// What the row is, like `CA 1a2b-01`.
    pub label: String,
    /// Its spans.
    pub bars: Vec<Bar>,
    /// Events drawn on this row.
    pub markers: Vec<Marker>,
}

/// A span of time on a lane.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// What the span means.
    pub kind: BarKind,
    /// Its first instant.
    pub start: OffsetDateTime,
    /// Its end.
    pub end: OffsetDateTime,
}

/// What a [`Bar`] means; each is drawn in its own style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarKind {
    /// A CA certificate's validity (NotBefore to NotAfter).
    Validity,
    /// While the CA is the current one, issuing.
    Current,
    /// After a rotation replaced it, while it is still trusted.
    Trusted,
    /// Bridge B's validity: the CA signed by the previous CA's key.
    Bridge,
    /// A leaf certificate's validity.
    Leaf,
}

impl BarKind {
    /// The `data-kind` of the bar.
    pub fn as_str(self) -> &'static str {
        match self {
            BarKind::Validity => "ca-validity",
            BarKind::Current => "ca-current",
            BarKind::Trusted => "ca-trusted",
            BarKind::Bridge => "bridge",
            BarKind::Leaf => "leaf-validity",
        }
    }
}

/// Something that happens at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// Its `data-kind`, like `rotation` (the kinds of `pki plan --json`).
    pub kind: String,
    /// When.
    pub at: OffsetDateTime,
    /// For humans (shown as the element's tooltip).
    pub detail: String,
}

/// A check and, when it fails, the spans in which it bites.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckMark {
    /// Its stable name, the `data-check` attribute.
    pub name: String,
    /// Whether it passes.
    pub ok: bool,
    /// What it found.
    pub detail: String,
    /// When it bites (start, end); an instant when both are equal.
    pub spans: Vec<(OffsetDateTime, OffsetDateTime)>,
}

/// Refuses an `--svg` path that cannot take a file (a directory, or in a
/// directory that does not exist), before any work.
pub fn check_path(path: &Path) -> CliResult {
    if path.is_dir() {
        return Err(CliError::new(format!(
            "--svg {}: is a directory; give a file name, like {}",
            path.display(),
            path.join("timeline.svg").display()
        )));
    }
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() && !parent.is_dir() => {
            Err(CliError::new(format!(
                "--svg {}: {} is not a directory",
                path.display(),
                parent.display()
            )))
        }
        _ => Ok(()),
    }
}

/// Writes `svg` to `path` whole or not at all: a temporary file beside it,
/// flushed, renamed over it (readable by all: a picture holds no secret).
pub fn write(path: &Path, svg: &str) -> CliResult {
    use std::io::Write;
    check_path(path)?;
    let fail = |e: std::io::Error| CliError::new(format!("--svg {}: {e}", path.display()));
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".pki-timeline")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(fail)?;
    tmp.write_all(svg.as_bytes()).map_err(fail)?;
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .map_err(fail)?;
    }
    tmp.as_file().sync_all().map_err(fail)?;
    tmp.persist(path).map_err(|e| fail(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests;
