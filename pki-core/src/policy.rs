//! The validity math of CA rotation.
//!
//! A CA lives for D (lifetime). It is rotated when less than M (minimum
//! trust) remains, so at R = D − M after it was issued. Every consumer is
//! known to restart or reload within I (the reload interval). Then:
//!
//! - M > I: after a rotation, every consumer picks up the new material
//!   before the old CA (still trusted through the bridges) expires;
//! - R ≥ M: a second rotation never happens before every consumer has seen
//!   the first, since the scheme only bridges the current and previous CAs;
//! - hence D = R + M ≥ 2M > 2I.
//!
//! The defaults (D = 790 days, M = 395 days, so R = 395 days) come from
//! OpenShift's service CA: 26 and 13 months for a yearly upgrade interval.

use crate::error::{Error, Result};
use time::Duration;

// Below the error types, which print durations too.
pub use crate::time_text::human;

/// Default CA lifetime D: 790 days (26 months).
pub const DEFAULT_LIFETIME: Duration = Duration::days(790);
/// Default minimum trust M: 395 days (13 months).
pub const DEFAULT_MIN_TRUST: Duration = Duration::days(395);

/// How long CAs live and when they rotate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RotationPolicy {
    /// D: the lifetime of a CA certificate.
    #[serde(with = "crate::policy::serde_duration")]
    pub lifetime: Duration,
    /// M: rotate when less than this remains; also the least time a
    /// rotated-out CA stays trusted through bridge A.
    #[serde(with = "crate::policy::serde_duration")]
    pub min_trust: Duration,
    /// I: the longest time any consumer may go without reloading, if known.
    #[serde(with = "crate::policy::serde_duration_opt", default)]
    pub reload_interval: Option<Duration>,
}

impl Default for RotationPolicy {
    fn default() -> Self {
        RotationPolicy {
            lifetime: DEFAULT_LIFETIME,
            min_trust: DEFAULT_MIN_TRUST,
            reload_interval: None,
        }
    }
}

impl RotationPolicy {
    /// I as the guards use it: the reload interval when the policy sets
    /// one, otherwise M, the longest a consumer can hold old material and
    /// still be kept trusting by bridge A (the policy's only promise).
    pub fn effective_reload_interval(&self) -> Duration {
        self.reload_interval.unwrap_or(self.min_trust)
    }

    /// A policy of lifetime D and minimum trust M, validated.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPolicy`] when the policy breaks a rule of
    /// [`RotationPolicy::validate`].
    pub fn new(lifetime: Duration, min_trust: Duration) -> Result<Self> {
        let p = RotationPolicy {
            lifetime,
            min_trust,
            reload_interval: None,
        };
        p.validate()?;
        Ok(p)
    }

    /// R = D − M: how long after issue a CA is rotated.
    pub fn rotate_after(&self) -> Duration {
        self.lifetime - self.min_trust
    }

    /// Checks the rules of the module docs; the error explains the timeline
    /// that would break.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPolicy`] when D or M is not positive, M ≥ D, R = D − M
    /// is shorter than M, or a reload interval I is set and is not positive or
    /// not shorter than M.
    pub fn validate(&self) -> Result<()> {
        let d = self.lifetime;
        let m = self.min_trust;
        let fail = |reason: String| Err(Error::InvalidPolicy { reason });
        if d <= Duration::ZERO || m <= Duration::ZERO {
            return fail(format!(
                "lifetime ({}) and minimum trust ({}) must both be positive",
                human(d),
                human(m)
            ));
        }
        if m >= d {
            return fail(format!(
                "minimum trust M = {} must be shorter than the lifetime D = {}: a CA issued at T+0 \
                 would already have less than M left, so every run would rotate again",
                human(m),
                human(d)
            ));
        }
        let r = d - m;
        if r < m {
            return fail(format!(
                "rotation point R = D - M = {} is shorter than M = {}: CA-1 issued at T+0 rotates to \
                 CA-2 at T+{}, and CA-2 rotates to CA-3 at T+{}, while consumers that have not \
                 reloaded since T+{} still hold CA-1 material valid until T+{}; only the current \
                 and previous CAs are bridged, so they break. Choose D >= 2M (for M = {}, D >= {})",
                human(r),
                human(m),
                human(r),
                human(r + r),
                human(r),
                human(d),
                human(m),
                human(m + m)
            ));
        }
        if let Some(i) = self.reload_interval {
            if i <= Duration::ZERO {
                return fail(format!("reload interval ({}) must be positive", human(i)));
            }
            if m <= i {
                return fail(format!(
                    "minimum trust M = {} must exceed the reload interval I = {}: after a rotation \
                     at T+{}, the old CA may expire at T+{} while a consumer that last reloaded \
                     just before the rotation keeps old material until T+{}",
                    human(m),
                    human(i),
                    human(r),
                    human(d),
                    human(r + i)
                ));
            }
        }
        Ok(())
    }
}

/// Parses durations like `790d`, `13h`, `2h30m`, `90s`, `1d12h`.
///
/// # Errors
///
/// [`Error::InvalidPolicy`] naming the input when it is empty, has an unknown
/// unit, a number without a unit or a unit without a number, overflows, or is
/// longer than 100 years.
pub fn parse_duration(input: &str) -> Result<Duration> {
    let err = |why: &str| Error::InvalidPolicy {
        reason: format!("duration \"{input}\": {why} (examples: 790d, 13h, 2h30m)"),
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    let mut total: i64 = 0;
    let mut num = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let unit: i64 = match c {
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            's' => 1,
            _ => return Err(err(&format!("unknown unit '{c}'"))),
        };
        if num.is_empty() {
            return Err(err("a unit without a number"));
        }
        let n: i64 = num.parse().map_err(|_| err("number too large"))?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| err("too large"))?;
        num.clear();
    }
    if !num.is_empty() {
        return Err(err("a number without a unit"));
    }
    if total > 100 * 366 * 86_400 {
        return Err(err("longer than 100 years"));
    }
    Ok(Duration::seconds(total))
}

pub(crate) mod serde_duration {
    use time::Duration;
    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::human(*d))
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s: String = serde::Deserialize::deserialize(d)?;
        super::parse_duration(&s).map_err(serde::de::Error::custom)
    }
}

pub(crate) mod serde_duration_opt {
    use time::Duration;
    pub fn serialize<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&super::human(*d)),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let s: Option<String> = serde::Deserialize::deserialize(d)?;
        s.map(|s| super::parse_duration(&s).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_service_ca_values_and_valid() {
        let p = RotationPolicy::default();
        assert_eq!(p.lifetime, Duration::days(790));
        assert_eq!(p.rotate_after(), Duration::days(395));
        p.validate().unwrap();
    }

    #[test]
    fn min_trust_not_below_lifetime_is_refused() {
        let e = RotationPolicy::new(Duration::days(10), Duration::days(10)).unwrap_err();
        assert!(
            e.to_string().contains("must be shorter than the lifetime"),
            "{e}"
        );
    }

    #[test]
    fn rotation_point_shorter_than_min_trust_is_refused_with_timeline() {
        // The seed's worked example of a bad policy: M = 6 months of a 12-month CA is fine,
        // but M = 8 of 12 leaves R = 4 < M.
        let e = RotationPolicy::new(Duration::days(360), Duration::days(240)).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("R = D - M = 120d") && msg.contains("D >= 480d"),
            "{msg}"
        );
    }

    #[test]
    fn min_trust_not_above_reload_interval_is_refused() {
        let p = RotationPolicy {
            lifetime: Duration::days(360),
            min_trust: Duration::days(180),
            reload_interval: Some(Duration::days(365)),
        };
        let msg = p.validate().unwrap_err().to_string();
        assert!(msg.contains("must exceed the reload interval"), "{msg}");
        let ok = RotationPolicy {
            lifetime: Duration::days(790),
            min_trust: Duration::days(395),
            reload_interval: Some(Duration::days(365)),
        };
        ok.validate().unwrap();
    }

    #[test]
    fn durations_parse_and_render() {
        assert_eq!(parse_duration("790d").unwrap(), Duration::days(790));
        assert_eq!(parse_duration("2h30m").unwrap(), Duration::minutes(150));
        assert_eq!(human(Duration::minutes(150)), "2h30m");
        for bad in ["", "5", "d", "5x", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
