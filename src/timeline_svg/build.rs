//! [`Timeline`]s of a forecast (`pki plan --svg`) and of a store as it is
//! (`pki status --svg`).

use super::{Bar, BarKind, CheckMark, Lane, Marker, Timeline};
use pki_core::datetime::rfc3339;
use pki_rotate::SignerState;
use pki_rotate::forecast::{CaLife, Forecast};
use pki_rotate::status::{Health, SignerStatus};
use time::{Duration, OffsetDateTime};

/// The most leaves a status picture gives a lane each; the rest are
/// counted in the last lane's label.
pub const MAX_LEAF_LANES: usize = 40;

/// The forecast of `store` from `from` to `until`: a lane per CA, a row
/// per kind of event, the checks.
pub fn of_plan(
    store: &str,
    forecast: &Forecast,
    from: OffsetDateTime,
    until: OffsetDateTime,
) -> Timeline {
    Timeline {
        title: format!("pki plan {store} (simulated)"),
        from,
        until,
        now: from,
        lanes: forecast
            .cas
            .iter()
            .map(|life| ca_lane(life, from, until))
            .collect(),
        events: forecast
            .events
            .iter()
            .map(|e| Marker {
                kind: e.kind.as_str().to_string(),
                at: e.at,
                detail: e.detail.clone(),
            })
            .collect(),
        checks: forecast
            .checks
            .iter()
            .map(|c| CheckMark {
                name: c.name.to_string(),
                ok: c.ok,
                detail: c.detail.clone(),
                spans: c.spans.clone(),
            })
            .collect(),
    }
}

/// A CA's validity, its time as the current CA, its trust after it was
/// replaced, and its bridge B.
fn ca_lane(life: &CaLife, from: OffsetDateTime, until: OffsetDateTime) -> Lane {
    let mut bars = vec![Bar {
        kind: BarKind::Validity,
        start: life.not_before.unwrap_or(from),
        end: life.not_after,
    }];
    let current_end = life.replaced_at.unwrap_or(life.not_after.min(until));
    let current_start = life.current_from.unwrap_or(from);
    if current_end > current_start {
        bars.push(Bar {
            kind: BarKind::Current,
            start: current_start,
            end: current_end,
        });
    }
    if let (Some(replaced), Some(untrusted)) = (life.replaced_at, life.untrusted_at)
        && untrusted > replaced
    {
        bars.push(Bar {
            kind: BarKind::Trusted,
            start: replaced,
            end: untrusted,
        });
    }
    if let Some((start, end)) = life.bridge {
        bars.push(Bar {
            kind: BarKind::Bridge,
            start,
            end,
        });
    }
    Lane {
        label: life.name.clone(),
        bars,
        markers: Vec::new(),
    }
}

/// The store as `status` reports it at its `now`: the previous CA, the
/// current CA and its bridge, each leaf with its refresh time, past
/// rotations and the next one due; problems and failing trust cells in red.
pub fn of_status(store: &str, status: &SignerStatus, state: &SignerState) -> Timeline {
    let (from, until) = status_window(status, state);
    let mut lanes = Vec::new();
    lanes.extend(previous_lane(status, state, from));
    lanes.push(current_lane(status, state, until));
    lanes.extend(leaf_lanes(state));
    let events = state
        .history
        .iter()
        .filter(|r| r.at >= from && r.at <= until)
        .map(|r| Marker {
            kind: "rotation".into(),
            at: r.at,
            detail: format!("CA {} replaced by CA {} ({})", r.from, r.to, r.reason),
        })
        .collect();
    Timeline {
        title: format!("pki status {store}"),
        from,
        until,
        now: status.now,
        lanes,
        events,
        checks: status_checks(status),
    }
}

/// From the earliest of now, the CA's start and the last rotation, to the
/// latest of now, the CA's end, the rotation due and the leaves' ends.
fn status_window(status: &SignerStatus, state: &SignerState) -> (OffsetDateTime, OffsetDateTime) {
    let mut from = status.now.min(status.ca.not_before);
    if let Some(last) = state.history.last() {
        from = from.min(last.at);
    }
    if let Some(start) = previous_not_before(state) {
        from = from.min(start);
    }
    let mut until = status
        .now
        .max(status.ca.not_after)
        .max(status.rotation_due_at);
    for leaf in &status.leaves {
        if let Some(cert) = &leaf.cert {
            until = until.max(cert.not_after);
        }
    }
    (from, until)
}

fn previous_lane(status: &SignerStatus, state: &SignerState, from: OffsetDateTime) -> Option<Lane> {
    let previous = status.previous.as_ref()?;
    let rotated = state.history.last().map_or(from, |r| r.at);
    let not_before = previous_not_before(state).unwrap_or(from);
    // The rotation before the last made it current, when there was one.
    let current_from = match state.history.len() {
        n if n >= 2 => state.history.get(n - 2).map_or(not_before, |r| r.at),
        _ => not_before,
    };
    let untrusted = previous
        .trusted_until
        .map_or(rotated, |t| next_second(t.min(previous.not_after)));
    let mut bars = vec![Bar {
        kind: BarKind::Validity,
        start: not_before,
        end: previous.not_after,
    }];
    if rotated > current_from {
        bars.push(Bar {
            kind: BarKind::Current,
            start: current_from,
            end: rotated,
        });
    }
    if untrusted > rotated {
        bars.push(Bar {
            kind: BarKind::Trusted,
            start: rotated,
            end: untrusted,
        });
    }
    let trust = match previous.trusted_until {
        Some(t) => format!("trust ends {}", rfc3339(t.min(previous.not_after))),
        None => "distrusted at the rotation".to_string(),
    };
    Some(Lane {
        label: format!("previous CA {}", previous.id),
        bars,
        markers: vec![Marker {
            kind: "previous-ca-untrusted".into(),
            at: untrusted,
            detail: format!(
                "the previous CA {} is no longer trusted ({trust})",
                previous.id
            ),
        }],
    })
}

/// The previous CA's NotBefore, from its certificate when the store kept it.
fn previous_not_before(state: &SignerState) -> Option<OffsetDateTime> {
    let pem = state.previous.as_ref()?.certificate.as_ref()?;
    let cert = pki_core::Certificate::from_pem(pem.as_bytes()).ok()?;
    Some(cert.not_before())
}

fn current_lane(status: &SignerStatus, state: &SignerState, until: OffsetDateTime) -> Lane {
    let ca = &status.ca;
    let since = state.history.last().map_or(ca.not_before, |r| r.at);
    let mut bars = vec![
        Bar {
            kind: BarKind::Validity,
            start: ca.not_before,
            end: ca.not_after,
        },
        Bar {
            kind: BarKind::Current,
            start: since,
            end: ca.not_after.min(until),
        },
    ];
    let mut markers = vec![Marker {
        kind: "rotation-due".into(),
        at: status.rotation_due_at,
        detail: format!("CA {} is due for rotation", ca.id),
    }];
    if let Some(b) = &status.bridge {
        bars.push(Bar {
            kind: BarKind::Bridge,
            start: b.not_before,
            end: b.not_after,
        });
        markers.push(Marker {
            kind: "bridge-expiry".into(),
            at: next_second(b.not_after),
            detail: format!("bridge B {} expires and leaves the serving chains", b.id),
        });
    }
    Lane {
        label: format!("CA {}", ca.id),
        bars,
        markers,
    }
}

/// The first second after `t` (`t` itself at the end of time: a NotAfter
/// of 9999-12-31T23:59:59Z means "no expiry").
fn next_second(t: OffsetDateTime) -> OffsetDateTime {
    t.checked_add(Duration::SECOND).unwrap_or(t)
}

/// A lane per leaf (the first [`MAX_LEAF_LANES`]): its validity and when it
/// is refreshed.
fn leaf_lanes(state: &SignerState) -> Vec<Lane> {
    let fraction = state.policy.leaf_refresh_fraction;
    let mut lanes: Vec<Lane> = state
        .leaves
        .iter()
        .take(MAX_LEAF_LANES)
        .map(|(name, leaf)| match &leaf.issued {
            Some(issued) => Lane {
                label: format!("leaf {name}"),
                bars: vec![Bar {
                    kind: BarKind::Leaf,
                    start: issued.cert.not_before(),
                    end: issued.cert.not_after(),
                }],
                markers: vec![Marker {
                    kind: "leaf-refresh".into(),
                    at: pki_rotate::refresh_at(&issued.cert, fraction),
                    detail: format!("{name} is re-issued"),
                }],
            },
            None => Lane {
                label: format!("leaf {name} (not issued)"),
                bars: Vec::new(),
                markers: Vec::new(),
            },
        })
        .collect();
    let rest = state.leaves.len().saturating_sub(MAX_LEAF_LANES);
    if let Some(last) = lanes.last_mut()
        && rest > 0
    {
        last.label
            .push_str(&format!(" (and {rest} more leaves not drawn)"));
    }
    lanes
}

/// The health, then each problem (a failing trust cell is one of them).
/// Broken health is drawn in red at now, from the CA's end when it expired.
fn status_checks(status: &SignerStatus) -> Vec<CheckMark> {
    let now = status.now;
    let broken = status.health == Health::Broken;
    let since = if status.ca.not_after < now {
        next_second(status.ca.not_after)
    } else {
        now
    };
    let mut checks = vec![CheckMark {
        name: "health".into(),
        ok: !broken,
        detail: match status.health {
            Health::Ok => "ok".to_string(),
            Health::ActionDue => "an action is due".to_string(),
            Health::Broken => "broken".to_string(),
        },
        spans: if broken {
            vec![(since, now)]
        } else {
            Vec::new()
        },
    }];
    checks.extend(status.problems.iter().map(|p| CheckMark {
        name: "problem".into(),
        ok: false,
        detail: p.clone(),
        spans: Vec::new(),
    }));
    checks
}
