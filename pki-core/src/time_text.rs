//! How pki writes instants and durations in messages.
//!
//! At the bottom of the crate, below the error types that print them;
//! [`crate::datetime`] and [`crate::policy`] hand these out.

use time::{Duration, OffsetDateTime};

/// Truncates an instant to whole seconds, the precision certificates carry.
pub fn truncate(t: OffsetDateTime) -> OffsetDateTime {
    t.replace_nanosecond(0).unwrap_or(t)
}

/// Formats an instant as RFC 3339 (UTC, whole seconds).
pub fn rfc3339(t: OffsetDateTime) -> String {
    let t = truncate(t.to_offset(time::UtcOffset::UTC));
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| t.to_string())
}

/// Renders a duration like `395d`, `13h`, `2h30m`, `45s`.
pub fn human(d: Duration) -> String {
    let neg = d.is_negative();
    let mut s = d.whole_seconds().unsigned_abs();
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    for (unit, len) in [("d", 86_400u64), ("h", 3_600), ("m", 60), ("s", 1)] {
        if s >= len {
            out.push_str(&format!("{}{unit}", s / len));
            s %= len;
        }
    }
    if out.is_empty() || out == "-" {
        out = "0s".into();
    }
    out
}
