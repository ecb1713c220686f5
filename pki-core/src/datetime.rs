//! Conversions between `time::OffsetDateTime` and X.509 `Time`.
//!
//! X.509 encodes instants with second precision from 1950 to 9999; RFC 5280
//! §4.1.2.5 asks for UTCTime through 2049 and GeneralizedTime from 2050.

use crate::error::{Error, Result};
use crate::time_text::human;
use der::DateTime;
use der::asn1::{GeneralizedTime, UtcTime};
use time::OffsetDateTime;
use x509_cert::time::Time;

// Below the error types, which print times too.
pub use crate::time_text::{rfc3339, truncate};

/// Converts an instant to an X.509 `Time`, truncated to whole seconds.
///
/// # Errors
///
/// [`Error::Time`] for an instant before 1970 or after 9999, which X.509 `Time`
/// here cannot encode.
pub fn to_x509(t: OffsetDateTime) -> Result<Time> {
    let secs = t.unix_timestamp();
    let secs = u64::try_from(secs).map_err(|_| Error::Time {
        reason: format!("{t} is before 1970 and cannot be encoded"),
        source: None,
    })?;
    let dt = DateTime::from_unix_duration(std::time::Duration::from_secs(secs)).map_err(|e| {
        Error::Time {
            reason: format!("{t} cannot be encoded: {e}"),
            source: Some(e),
        }
    })?;
    if dt.year() < 2050 {
        let utc = UtcTime::from_date_time(dt).map_err(|e| Error::Time {
            reason: format!("{t}: {e}"),
            source: Some(e),
        })?;
        Ok(Time::UtcTime(utc))
    } else {
        let g = GeneralizedTime::from_date_time(dt);
        Ok(Time::GeneralTime(g))
    }
}

/// Converts an X.509 `Time` to an instant.
pub fn from_x509(t: &Time) -> OffsetDateTime {
    let secs = t.to_unix_duration().as_secs();
    // X.509 times end at 9999-12-31, well within i64 and OffsetDateTime's range.
    let secs = i64::try_from(secs).unwrap_or(i64::MAX);
    OffsetDateTime::from_unix_timestamp(secs).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// `t + d`, or an error when the result leaves the range certificates can
/// encode (years 1970 to 9999 here). Inputs come from users (`--now`,
/// lifetimes), so this must not panic like `OffsetDateTime + Duration`.
///
/// # Errors
///
/// [`Error::Time`] when `t + d` overflows or falls outside the years 1970 to
/// 9999.
pub fn add(t: OffsetDateTime, d: time::Duration) -> Result<OffsetDateTime> {
    t.checked_add(d)
        .filter(|r| (1970..=9999).contains(&r.year()))
        .ok_or_else(|| Error::Time {
            reason: format!(
                "{} plus {} is outside the years 1970 to 9999 that certificates can encode",
                rfc3339(t),
                human(d)
            ),
            source: None,
        })
}
