//! Dated ticks for the time axis: whole hours, days, months or years (UTC),
//! the finest step that leaves few enough to read.

use time::{Date, Month, OffsetDateTime, Time, UtcOffset};

/// At most about this many ticks on an axis.
const MAX_TICKS: i64 = 10;
/// A month and a year on average, in seconds: to choose a step.
const MONTH_SECONDS: i64 = 2_629_746;

#[derive(Clone, Copy)]
enum Step {
    Seconds(i64),
    Months(i64),
}

const HOUR: i64 = 3_600;
const DAY: i64 = 86_400;
const STEPS: [Step; 20] = [
    Step::Seconds(HOUR),
    Step::Seconds(3 * HOUR),
    Step::Seconds(6 * HOUR),
    Step::Seconds(12 * HOUR),
    Step::Seconds(DAY),
    Step::Seconds(2 * DAY),
    Step::Seconds(7 * DAY),
    Step::Months(1),
    Step::Months(2),
    Step::Months(3),
    Step::Months(6),
    Step::Months(12),
    Step::Months(24),
    Step::Months(60),
    Step::Months(120),
    Step::Months(240),
    Step::Months(600),
    Step::Months(1200),
    Step::Months(6000),
    Step::Months(12000),
];

impl Step {
    fn seconds(self) -> i64 {
        match self {
            Step::Seconds(n) => n,
            Step::Months(n) => n * MONTH_SECONDS,
        }
    }
}

/// Ticks from `from` to `until` (both included), each with its label.
pub fn ticks(from: OffsetDateTime, until: OffsetDateTime) -> Vec<(OffsetDateTime, String)> {
    let (from, until) = (
        from.to_offset(UtcOffset::UTC),
        until.to_offset(UtcOffset::UTC),
    );
    if until <= from {
        return Vec::new();
    }
    let span = (until - from).whole_seconds();
    let step = STEPS
        .iter()
        .copied()
        .find(|s| span / s.seconds() <= MAX_TICKS)
        .unwrap_or(Step::Months(12000));
    match step {
        Step::Seconds(n) => second_ticks(from, until, n),
        Step::Months(n) => month_ticks(from, until, n),
    }
}

/// Every `n` seconds since the Unix epoch (so at whole hours and days).
fn second_ticks(
    from: OffsetDateTime,
    until: OffsetDateTime,
    n: i64,
) -> Vec<(OffsetDateTime, String)> {
    let first = from.unix_timestamp().div_euclid(n) * n
        + if from.unix_timestamp().rem_euclid(n) == 0 && from.nanosecond() == 0 {
            0
        } else {
            n
        };
    (0..=MAX_TICKS * 2)
        .map(|k| first + k * n)
        .take_while(|t| *t <= until.unix_timestamp())
        .filter_map(|t| OffsetDateTime::from_unix_timestamp(t).ok())
        .map(|t| {
            let text = if n < DAY {
                format!(
                    "{:02}-{:02} {:02}:{:02}",
                    u8::from(t.month()),
                    t.day(),
                    t.hour(),
                    t.minute()
                )
            } else {
                format!("{:04}-{:02}-{:02}", t.year(), u8::from(t.month()), t.day())
            };
            (t, text)
        })
        .collect()
}

/// The first of every `n`th month (of every `n / 12`th January).
fn month_ticks(
    from: OffsetDateTime,
    until: OffsetDateTime,
    n: i64,
) -> Vec<(OffsetDateTime, String)> {
    let index = |t: OffsetDateTime| i64::from(t.year()) * 12 + i64::from(u8::from(t.month())) - 1;
    let at_start = t_is_month_start(from);
    let mut first = index(from) + if at_start { 0 } else { 1 };
    first += (n - first.rem_euclid(n)) % n;
    (0..=MAX_TICKS * 2)
        .map_while(|k| month_start(first + k * n))
        .take_while(|t| *t <= until)
        .map(|t| {
            let text = if n % 12 == 0 {
                format!("{:04}", t.year())
            } else {
                format!("{:04}-{:02}", t.year(), u8::from(t.month()))
            };
            (t, text)
        })
        .collect()
}

fn t_is_month_start(t: OffsetDateTime) -> bool {
    t.day() == 1 && t.time() == Time::MIDNIGHT
}

/// Midnight UTC on the first of the month with index `year * 12 + month - 1`.
fn month_start(index: i64) -> Option<OffsetDateTime> {
    let year = i32::try_from(index.div_euclid(12)).ok()?;
    let month = Month::try_from(u8::try_from(index.rem_euclid(12) + 1).ok()?).ok()?;
    Some(
        Date::from_calendar_date(year, month, 1)
            .ok()?
            .with_time(Time::MIDNIGHT)
            .assume_utc(),
    )
}
