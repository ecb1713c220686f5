//! How long a failed hook waits before its next attempt: exponential, capped.

use time::{Duration, OffsetDateTime};

/// The first retry after a failed hook waits this long; each further
/// consecutive failure doubles it, up to [`BACKOFF_CAP`].
pub const BACKOFF_BASE: Duration = Duration::seconds(30);
/// The longest wait between two attempts of a failing hook.
pub const BACKOFF_CAP: Duration = Duration::hours(1);

/// The next retry time after `failures` consecutive failures at `now`.
pub fn retry_after(failures: u32, now: OffsetDateTime) -> OffsetDateTime {
    let exponent = failures.saturating_sub(1).min(20);
    let wait = BACKOFF_BASE
        .checked_mul(1i32 << exponent)
        .unwrap_or(BACKOFF_CAP)
        .min(BACKOFF_CAP);
    now + wait
}
