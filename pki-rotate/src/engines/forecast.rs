//! The future of a signer (and of a key ring), simulated: what the engines
//! will do between two times if nothing but time changes, and which policy
//! checks would bite.
//!
//! [`forecast`] steps the engines in memory as a controller would: at the
//! start time, then at each wake-up the engine names ([`Outcome::next_wake`]),
//! with the default input (nothing forced, no leaf changed), until the end
//! time. Certificates and keys the simulation makes come from a seeded RNG
//! (the same documents give the same forecast) and are thrown away: only
//! times and reasons come out. Nothing is read
//! or written but the documents given.
//!
//! An event happens at the first second it is true: a bridge expires one
//! second after its NotAfter (it is valid through that second), and a
//! rotation happens one second after the CA has exactly M left. Those are
//! the times at which a real step does the same thing.

use crate::engines::keyring::{KeyRing, KeyRingEngine, KeyRingEvent};
use crate::engines::signer::{Event, PreviousCa, SignerEngine, SignerState};
use crate::engines::{Engine, Outcome};
use crate::model::document::Document;
use pki_core::datetime::rfc3339;
use pki_core::policy::human;
use rand_core::CryptoRng;
use std::collections::HashMap;
use time::{Duration, OffsetDateTime};

/// The most engine steps one forecast takes: a store with thousands of
/// leaves refreshing at different times over years stays far below it, and
/// it bounds a window of centuries.
pub const MAX_STEPS: usize = 100_000;

/// What happens in the future.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum EventKind {
    /// The CA is rotated (bridges made, every leaf re-issued).
    Rotation,
    /// Bridge B expires and leaves the serving chains.
    BridgeExpiry,
    /// A leaf is re-issued (near expiry, or because the CA rotated).
    LeafRefresh,
    /// The previous CA stops being trusted (bridge A or the CA ended, or
    /// at once after a compromise).
    PreviousCaUntrusted,
    /// Expired certificates leave the bundle.
    BundlePrune,
    /// The CA expires without a replacement (an imported CA: only its
    /// issuer can replace it).
    CaExpiry,
    /// The key ring's active signing key is rotated.
    KeyRotation,
    /// A rotated-out signing key's grace ends and it is removed.
    KeyRemoval,
}

impl EventKind {
    /// The kind as printed: `rotation`, `bridge-expiry`…
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Rotation => "rotation",
            EventKind::BridgeExpiry => "bridge-expiry",
            EventKind::LeafRefresh => "leaf-refresh",
            EventKind::PreviousCaUntrusted => "previous-ca-untrusted",
            EventKind::BundlePrune => "bundle-prune",
            EventKind::CaExpiry => "ca-expiry",
            EventKind::KeyRotation => "key-rotation",
            EventKind::KeyRemoval => "key-removal",
        }
    }
}

/// One thing that will happen.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ForecastEvent {
    /// When: the first second it is true.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// What.
    pub kind: EventKind,
    /// For humans.
    pub detail: String,
}

/// A policy check over the forecast window.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ForecastCheck {
    /// The check's stable name.
    pub name: &'static str,
    /// Whether it passes.
    pub ok: bool,
    /// What it found.
    pub detail: String,
    /// When it bites, as (start, end) spans in the window: for pictures of
    /// the timeline (empty when it passes or has no time); not in `--json`.
    #[serde(skip)]
    pub spans: Vec<(OffsetDateTime, OffsetDateTime)>,
}

/// One CA's life as the forecast sees it, for pictures of the timeline
/// (not in `--json`): the CA current at the start, the previous CA still
/// trusted then, and each CA a rotation in the window makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaLife {
    /// How the details name it: `CA <id>`, or `the CA from the rotation at T`.
    pub name: String,
    /// Its NotBefore (None: not known, as for a previous CA's record).
    pub not_before: Option<OffsetDateTime>,
    /// Its NotAfter.
    pub not_after: OffsetDateTime,
    /// When it became the current CA (None: not known).
    pub current_from: Option<OffsetDateTime>,
    /// The rotation that replaced it (None: current at the end).
    pub replaced_at: Option<OffsetDateTime>,
    /// Once replaced, the first second it is no longer trusted.
    pub untrusted_at: Option<OffsetDateTime>,
    /// Bridge B's validity: this CA signed by the previous CA's key.
    pub bridge: Option<(OffsetDateTime, OffsetDateTime)>,
}

/// The checks' names.
pub mod check {
    /// Every step of the window succeeds (none is refused).
    pub const ENGINE_STEPS: &str = "engine-steps";
    /// No leaf is cut short by the CA's (or its chain's) end.
    pub const LEAF_LIFETIME_WITHIN_CA: &str = "leaf-lifetime-within-ca";
    /// A leaf is re-issued at least the reload interval before it expires.
    pub const LEAF_REFRESH_COVERS_RELOAD: &str = "leaf-refresh-covers-reload-interval";
    /// A previous CA stays trusted at least the reload interval.
    pub const TRUST_OVERLAP_COVERS_RELOAD: &str = "trust-overlap-covers-reload-interval";
    /// The CA is replaced before it expires.
    pub const CA_REPLACED_BEFORE_EXPIRY: &str = "ca-replaced-before-expiry";
}

/// What [`forecast`] found: events in time order, then the checks.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Forecast {
    /// Everything that happens in the window, in time order.
    pub events: Vec<ForecastEvent>,
    /// The policy checks, in a fixed order.
    pub checks: Vec<ForecastCheck>,
    /// The signer's CAs in the order they became current (the previous
    /// one first): not in `--json`.
    #[serde(skip)]
    pub cas: Vec<CaLife>,
}

/// The seed of the simulation's RNG: its keys and certificates are thrown
/// away, and a fixed seed makes the forecast a function of its inputs.
const SEED: u64 = 0x0070_6c61_6e00;

/// Simulates `signer` (and `keys`, when the store has a key ring) from
/// `from` to `until`, both included.
pub fn forecast(
    signer: Option<&SignerState>,
    keys: Option<&KeyRing>,
    from: OffsetDateTime,
    until: OffsetDateTime,
) -> Forecast {
    let rng = &mut <rand_chacha::ChaCha20Rng as rand_core::SeedableRng>::seed_from_u64(SEED);
    let mut events = Vec::new();
    let mut checks = Vec::new();
    let mut failures = Vec::new();
    let mut cas = Vec::new();
    let mut steps = 0;
    if let Some(signer) = signer {
        let mut sim = SignerSim::new(signer, from, until);
        let run = run::<SignerEngine, _>(signer, from, until, rng, |doc, at, evs| {
            sim.observe(doc, at, evs)
        });
        steps += run.steps;
        failures.extend(run.failure);
        sim.finish(&run.last, until);
        checks.extend(sim.checks(signer));
        events.append(&mut sim.events);
        cas = sim.lives;
    }
    if let Some(ring) = keys {
        let run = run::<KeyRingEngine, _>(ring, from, until, rng, |_, at, evs| {
            for e in evs {
                events.extend(key_event(at, e));
            }
        });
        steps += run.steps;
        failures.extend(run.failure);
    }
    checks.insert(
        0,
        ForecastCheck {
            name: check::ENGINE_STEPS,
            ok: failures.is_empty(),
            detail: if failures.is_empty() {
                format!(
                    "{steps} step(s) from {} to {} succeed",
                    rfc3339(from),
                    rfc3339(until)
                )
            } else {
                failures.join("; ")
            },
            spans: Vec::new(),
        },
    );
    // At one time, in the order of the kinds (a rotation before the leaves
    // it re-issues); stable otherwise.
    events.sort_by_key(|e| (e.at, e.kind));
    Forecast {
        events,
        checks,
        cas,
    }
}

/// How one engine's simulation ended.
struct Run<D> {
    /// The document at the end.
    last: D,
    steps: usize,
    /// Why it stopped early, if it did.
    failure: Option<String>,
}

/// Steps `E` from `from` at each wake-up until past `until`, showing each
/// changed document and its events to `observe`.
fn run<E, R>(
    doc: &E::Document,
    from: OffsetDateTime,
    until: OffsetDateTime,
    rng: &mut R,
    mut observe: impl FnMut(&E::Document, OffsetDateTime, &[E::Event]),
) -> Run<E::Document>
where
    E: Engine,
    R: CryptoRng + ?Sized,
{
    let mut doc = doc.clone();
    doc.simulate_tokens();
    let mut at = from;
    let mut steps = 0;
    while at <= until {
        if steps == MAX_STEPS {
            return Run {
                last: doc,
                steps,
                failure: Some(format!(
                    "stopped after {MAX_STEPS} steps at {}: choose an earlier --until",
                    rfc3339(at)
                )),
            };
        }
        steps += 1;
        let outcome: Outcome<'_, E::Document, E::Event> =
            match E::step(&doc, &E::Input::default(), at, rng) {
                Ok(outcome) => outcome,
                Err(e) => {
                    return Run {
                        last: doc,
                        steps,
                        failure: Some(format!("the step at {} fails: {e}", rfc3339(at))),
                    };
                }
            };
        let next_wake = outcome.next_wake;
        let mut follow_up = false;
        if let std::borrow::Cow::Owned(next) = outcome.document {
            observe(&next, at, &outcome.events);
            // As the driver does: a document that asks for another round
            // at once (a key in a token recorded, then made) gets it.
            follow_up = next.follow_up() != crate::FollowUp::None;
            doc = next;
        }
        // A wake-up is never before the step; one at the step itself would
        // repeat it forever, but for a follow-up (which ends, since the
        // round after it changes what asked for it).
        if !follow_up {
            at = next_wake.max(at + Duration::SECOND);
        }
    }
    Run {
        last: doc,
        steps,
        failure: None,
    }
}

/// The signer's simulation: its events, and what the checks need.
struct SignerSim {
    from: OffsetDateTime,
    until: OffsetDateTime,
    events: Vec<ForecastEvent>,
    /// How details name certificates the simulation made (their ids are
    /// the simulation's own, thrown away).
    names: HashMap<String, String>,
    /// Leaves cut short: (name, at, requested, got).
    cut: Vec<(String, OffsetDateTime, Duration, Duration)>,
    /// Every rotation's trust overlap still running in the window: (at, how
    /// long the previous CA stays trusted from then).
    overlaps: Vec<(OffsetDateTime, Duration)>,
    /// The CAs seen, for [`Forecast::cas`].
    lives: Vec<CaLife>,
}

/// When a previous CA stops being trusted: one second after the end of
/// its trust window (the earlier of bridge A's NotAfter and its own),
/// or at the rotation itself when it was distrusted there.
fn untrusted_at(previous: &PreviousCa, rotated_at: OffsetDateTime) -> OffsetDateTime {
    match previous.trusted_until {
        Some(t) => t.min(previous.not_after) + Duration::SECOND,
        None => rotated_at,
    }
}

impl SignerSim {
    fn new(state: &SignerState, from: OffsetDateTime, until: OffsetDateTime) -> Self {
        let mut sim = SignerSim {
            from,
            until,
            events: Vec::new(),
            names: HashMap::new(),
            cut: Vec::new(),
            overlaps: Vec::new(),
            lives: Vec::new(),
        };
        // A rotation made before the window whose previous CA is still trusted.
        if let (Some(previous), Some(last)) = (&state.previous, state.history.last()) {
            let end = untrusted_at(previous, last.at);
            if end > from {
                sim.untrusted(previous, last.at, end);
                sim.overlaps.push((last.at, end - last.at));
                // Its certificate, when kept, tells its start; the
                // rotation before the last made it current.
                let not_before = previous
                    .certificate
                    .as_ref()
                    .and_then(|pem| pki_core::Certificate::from_pem(pem.as_bytes()).ok())
                    .map(|cert| cert.not_before());
                let made_current = state.history.iter().rev().nth(1).map(|r| r.at);
                sim.lives.push(CaLife {
                    name: sim.name("CA", &previous.id),
                    not_before,
                    not_after: previous.not_after,
                    current_from: made_current.or(not_before),
                    replaced_at: Some(last.at),
                    untrusted_at: Some(end),
                    bridge: None,
                });
            }
        }
        let current = sim.life(state, state.history.last().map(|r| r.at));
        sim.lives.push(current);
        sim
    }

    /// `state`'s current CA, current since `from`.
    fn life(&self, state: &SignerState, from: Option<OffsetDateTime>) -> CaLife {
        let ca = &state.ca.cert;
        CaLife {
            name: self.name("CA", &ca.id()),
            not_before: Some(ca.not_before()),
            not_after: ca.not_after(),
            current_from: from.or(Some(ca.not_before())),
            replaced_at: None,
            untrusted_at: None,
            bridge: state
                .bridge
                .as_ref()
                .map(|b| (b.not_before(), b.not_after())),
        }
    }

    /// `what id` for a certificate of the store, or how the simulation
    /// names one it made.
    fn name(&self, what: &str, id: &str) -> String {
        self.names
            .get(id)
            .cloned()
            .unwrap_or_else(|| format!("{what} {id}"))
    }

    fn push(&mut self, at: OffsetDateTime, kind: EventKind, detail: String) {
        if at >= self.from && at <= self.until {
            self.events.push(ForecastEvent { at, kind, detail });
        }
    }

    fn untrusted(&mut self, previous: &PreviousCa, rotated_at: OffsetDateTime, at: OffsetDateTime) {
        let detail = match previous.trusted_until {
            Some(t) => format!(
                "the previous {} is no longer trusted (its trust ended {})",
                self.name("CA", &previous.id),
                rfc3339(t.min(previous.not_after))
            ),
            None => format!(
                "the previous {} is no longer trusted (distrusted at the rotation of {})",
                self.name("CA", &previous.id),
                rfc3339(rotated_at)
            ),
        };
        self.push(at, EventKind::PreviousCaUntrusted, detail);
    }

    fn observe(&mut self, doc: &SignerState, at: OffsetDateTime, events: &[Event]) {
        for e in events {
            match e {
                Event::Rotated {
                    reason, previous, ..
                } => {
                    let new = format!("the CA from the rotation at {}", rfc3339(at));
                    let detail = format!(
                        "{} is replaced by a new CA ({reason})",
                        self.name("CA", previous)
                    );
                    self.names.insert(doc.ca.cert.id(), new);
                    if let Some(b) = &doc.bridge {
                        self.names.insert(
                            b.id(),
                            format!("bridge B from the rotation at {}", rfc3339(at)),
                        );
                    }
                    self.push(at, EventKind::Rotation, detail);
                    let mut end = None;
                    if let Some(p) = &doc.previous {
                        let until = untrusted_at(p, at);
                        self.overlaps.push((at, until - at));
                        self.untrusted(p, at, until);
                        end = Some(until);
                    }
                    self.replaced(doc, at, end);
                }
                Event::BridgeRetired { id } => {
                    let bridge = self.name("bridge B", id);
                    let detail = format!("{bridge} expires and leaves the serving chains");
                    self.push(at, EventKind::BridgeExpiry, detail);
                }
                Event::LeafReissued { name, reason, .. } => {
                    if let Some(leaf) = doc.leaves.get(name)
                        && let Some(issued) = &leaf.issued
                    {
                        let got = issued.cert.not_after() - at;
                        // Issuance truncates to the second.
                        if got + Duration::SECOND < leaf.request.lifetime {
                            self.cut
                                .push((name.clone(), at, leaf.request.lifetime, got));
                        }
                    }
                    self.push(at, EventKind::LeafRefresh, format!("{name}: {reason}"));
                }
                Event::BundlePruned { removed } => {
                    let removed: Vec<String> = removed
                        .iter()
                        .map(|id| self.name("certificate", id))
                        .collect();
                    let detail = format!("expired {} leave the bundle", removed.join(", "));
                    self.push(at, EventKind::BundlePrune, detail);
                }
                // Not made by a step without input.
                _ => {}
            }
        }
    }

    /// The current CA's life ends at `at`, trusted until `untrusted_at`;
    /// `doc`'s CA's begins.
    fn replaced(
        &mut self,
        doc: &SignerState,
        at: OffsetDateTime,
        untrusted_at: Option<OffsetDateTime>,
    ) {
        if let Some(last) = self.lives.last_mut() {
            last.replaced_at = Some(at);
            last.untrusted_at = untrusted_at.or(Some(at));
        }
        let next = self.life(doc, Some(at));
        self.lives.push(next);
    }

    /// A CA still current at the end of the window and expiring in it.
    fn finish(&mut self, last: &SignerState, until: OffsetDateTime) {
        let ca = &last.ca.cert;
        if ca.not_after() < until {
            let detail = format!(
                "{} expires and nothing replaces it{}",
                self.name("CA", &ca.id()),
                if last.external.is_some() {
                    " (an imported CA: have its issuer sign a replacement, then `rotate --to`)"
                } else {
                    ""
                }
            );
            self.push(
                ca.not_after() + Duration::SECOND,
                EventKind::CaExpiry,
                detail,
            );
        }
    }

    fn checks(&self, state: &SignerState) -> Vec<ForecastCheck> {
        vec![
            self.leaf_lifetime_check(state),
            leaf_refresh_check(state),
            self.trust_overlap_check(state),
            self.ca_expiry_check(),
        ]
    }

    /// A CA has between D and M left while it is current: a leaf asking
    /// for more than M is cut at the CA's end whenever it is issued late
    /// in the CA's life. Names the first cuts the run saw as examples.
    fn leaf_lifetime_check(&self, state: &SignerState) -> ForecastCheck {
        let m = state.policy.rotation.min_trust;
        let mut long: Vec<String> = state
            .leaves
            .iter()
            .filter(|(_, l)| l.request.lifetime > m)
            .map(|(n, l)| {
                format!(
                    "{n} asks for {}, more than the {} a CA has left before it rotates",
                    human(l.request.lifetime),
                    human(m)
                )
            })
            .collect();
        long.extend(self.cut.iter().take(3).map(|(n, at, want, got)| {
            format!(
                "{n} issued at {} gets {} of the {} it asks for",
                rfc3339(*at),
                human(*got),
                human(*want)
            )
        }));
        ForecastCheck {
            name: check::LEAF_LIFETIME_WITHIN_CA,
            ok: long.is_empty(),
            detail: if long.is_empty() {
                format!("every leaf lifetime fits in the {} a CA has left", human(m))
            } else {
                long.join("; ")
            },
            // Each cut, at the issuance it shortens.
            spans: self.cut.iter().map(|(_, at, _, _)| (*at, *at)).collect(),
        }
    }

    /// Consumers reload within I (M when unknown, as the engine assumes):
    /// a previous CA trusted for less than that after a rotation cuts off
    /// consumers that have not reloaded yet.
    fn trust_overlap_check(&self, state: &SignerState) -> ForecastCheck {
        let reload = state.policy.rotation.reload_interval;
        let needed = reload.unwrap_or(state.policy.rotation.min_trust);
        let short: Vec<String> = self
            .overlaps
            .iter()
            .filter(|(_, overlap)| *overlap < needed)
            .map(|(at, overlap)| {
                format!(
                    "after the rotation at {} the previous CA stays trusted {}, less than the \
                     reload interval {}: consumers that have not reloaded are cut off",
                    rfc3339(*at),
                    human(*overlap),
                    human(needed)
                )
            })
            .collect();
        ForecastCheck {
            name: check::TRUST_OVERLAP_COVERS_RELOAD,
            ok: short.is_empty(),
            detail: if short.is_empty() {
                format!(
                    "{} rotation(s) considered: each previous CA stays trusted at least {}{}",
                    self.overlaps.len(),
                    human(needed),
                    if reload.is_none() {
                        " (M: no reload interval set)"
                    } else {
                        ""
                    }
                )
            } else {
                short.join("; ")
            },
            // From the previous CA's end of trust until consumers that
            // reload within the interval have all reloaded.
            spans: self
                .overlaps
                .iter()
                .filter(|(_, overlap)| *overlap < needed)
                .map(|(at, overlap)| (*at + *overlap, *at + needed))
                .collect(),
        }
    }

    /// The first CA the run saw expire with nothing to replace it: the
    /// outage the forecast exists to show before it happens.
    fn ca_expiry_check(&self) -> ForecastCheck {
        let expiring = self.events.iter().find(|e| e.kind == EventKind::CaExpiry);
        ForecastCheck {
            name: check::CA_REPLACED_BEFORE_EXPIRY,
            ok: expiring.is_none(),
            detail: match expiring {
                Some(e) => format!("at {}: {}", rfc3339(e.at), e.detail),
                None => "the CA is replaced before it expires".into(),
            },
            spans: expiring.map(|e| (e.at, self.until)).into_iter().collect(),
        }
    }
}

/// A leaf re-issued closer to its expiry than the reload interval may still
/// be served after it expired, by a server that has not reloaded. Not
/// checked without a reload interval: the policy does not know it.
fn leaf_refresh_check(state: &SignerState) -> ForecastCheck {
    let fraction = state.policy.leaf_refresh_fraction;
    let Some(i) = state.policy.rotation.reload_interval else {
        return ForecastCheck {
            name: check::LEAF_REFRESH_COVERS_RELOAD,
            ok: true,
            detail: "no reload interval set (`init --reload-interval`): not checked".into(),
            spans: Vec::new(),
        };
    };
    let short: Vec<String> = state
        .leaves
        .iter()
        .filter(|(_, l)| l.request.lifetime * fraction < i)
        .map(|(n, l)| {
            format!(
                "{n} is re-issued {} before it expires, less than the reload \
                 interval {}: a server may still present it expired",
                human(l.request.lifetime * fraction),
                human(i)
            )
        })
        .collect();
    ForecastCheck {
        name: check::LEAF_REFRESH_COVERS_RELOAD,
        ok: short.is_empty(),
        detail: if short.is_empty() {
            format!(
                "every leaf is re-issued at least the reload interval {} before it expires",
                human(i)
            )
        } else {
            short.join("; ")
        },
        spans: Vec::new(),
    }
}

fn key_event(at: OffsetDateTime, e: &KeyRingEvent) -> Option<ForecastEvent> {
    let (kind, detail) = match e {
        KeyRingEvent::Rotated {
            reason, previous, ..
        } => (
            EventKind::KeyRotation,
            format!("signing key {previous} is replaced by a new key ({reason})"),
        ),
        KeyRingEvent::Expired { kid } => (
            EventKind::KeyRemoval,
            format!("signing key {kid} is removed: its grace period has ended"),
        ),
        _ => return None,
    };
    Some(ForecastEvent { at, kind, detail })
}

#[cfg(test)]
mod tests;
