use super::next::due;
use super::*;
use crate::document::{Document, File, Files};
use crate::driver::Driver;
use crate::error::RotateError;
use crate::store::MemoryStore;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use time::macros::datetime;
use time::{Duration, OffsetDateTime};

// 2026-01-01, a fixed start: nothing here reads the clock.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

fn policy() -> CredentialPolicy {
    CredentialPolicy {
        expire: Duration::hours(720),
        grace: Duration::minutes(10),
    }
}

fn fresh() -> CredentialState {
    CredentialState::new("db", policy(), None).unwrap()
}

/// What a step of `doc` at `now` decides first: the bookkeeping step it
/// commits, or (nothing to commit) what the embedder must do: read from
/// the plan.
fn next_action(doc: &CredentialState, now: OffsetDateTime) -> Next {
    let plan = plan(doc, &CredentialInput::Step, now).unwrap();
    match plan.change.as_ref().and_then(Change::step_kind) {
        Some(kind) => Next::Step(kind),
        None => plan.next,
    }
}

fn step(
    doc: &CredentialState,
    input: CredentialInput,
    now: OffsetDateTime,
) -> Result<CredentialState> {
    let plan = plan(doc, &input, now)?;
    Ok(apply(doc, plan)?.into_document())
}

fn minted(rotation: u64, attempt: u32, v: &str) -> CredentialInput {
    CredentialInput::Minted {
        rotation,
        attempt,
        value: Secret::new(v),
    }
}

/// A document with credential 1 current, minted at T0.
fn with_first() -> CredentialState {
    let d = step(&fresh(), CredentialInput::Step, T0).unwrap();
    assert_eq!(
        d.mint.as_ref().map(|m| (m.rotation, m.attempt)),
        Some((1, 1))
    );
    step(&d, minted(1, 1, "one"), T0).unwrap()
}

#[test]
fn a_whole_rotation_takes_one_committed_step_at_a_time() {
    let d = with_first();
    assert_eq!(
        next_action(&d, T0),
        Next::Act(Action::Wait {
            until: T0 + Duration::hours(720),
            reason: WaitReason::Expiry
        })
    );
    let due = T0 + Duration::hours(720);
    assert_eq!(next_action(&d, due), Next::Step(StepKind::KeepOld));
    let kept = step(&d, CredentialInput::Step, due).unwrap();
    assert_eq!(kept.old, kept.current, "kept as old, nothing minted yet");
    assert_eq!(next_action(&kept, due), Next::Step(StepKind::StartMint));
    let started = step(&kept, CredentialInput::Step, due).unwrap();
    assert_eq!(
        next_action(&started, due),
        Next::Act(Action::Mint {
            rotation: 2,
            attempt: 1
        })
    );
    // Stepping again while the mint is the embedder's changes nothing.
    assert_eq!(step(&started, CredentialInput::Step, due).unwrap(), started);
    let t = due + Duration::seconds(5);
    let new = step(&started, minted(2, 1, "two"), t).unwrap();
    assert_eq!(new.current.as_ref().unwrap().value, Secret::new("two"));
    assert_eq!(new.current.as_ref().unwrap().minted_at, t);
    assert_eq!(new.old.as_ref().unwrap().value, Secret::new("one"));
    let grace_end = t + Duration::minutes(10);
    assert_eq!(
        next_action(&new, t),
        Next::Act(Action::Wait {
            until: grace_end,
            reason: WaitReason::Grace
        })
    );
    let outcome = CredentialEngine::step(
        &new,
        &CredentialInput::Step,
        t,
        &mut rand_core::UnwrapErr(NoRng),
    )
    .unwrap();
    assert!(!outcome.changed());
    assert_eq!(outcome.next_wake, grace_end);
    assert_eq!(
        next_action(&new, grace_end),
        Next::Act(Action::Revoke {
            rotation: 1,
            value: Secret::new("one")
        })
    );
    let done = step(&new, CredentialInput::Revoked { rotation: 1 }, grace_end).unwrap();
    assert!(done.old.is_none());
    assert_eq!(done.history.len(), 2);
    assert_eq!(done.history[0].revoked_at, Some(grace_end));
    assert_eq!(done.history[1].revoked_at, None);
    // A second report of the same revocation is accepted and changes nothing.
    assert_eq!(
        step(&done, CredentialInput::Revoked { rotation: 1 }, grace_end).unwrap(),
        done
    );
}

/// The engine never draws randomness; this RNG proves it by failing.
struct NoRng;
impl rand_core::TryRng for NoRng {
    type Error = std::convert::Infallible;
    fn try_next_u32(&mut self) -> std::result::Result<u32, Self::Error> {
        unreachable!("the credential engine draws no randomness")
    }
    fn try_next_u64(&mut self) -> std::result::Result<u64, Self::Error> {
        unreachable!("the credential engine draws no randomness")
    }
    fn try_fill_bytes(&mut self, _: &mut [u8]) -> std::result::Result<(), Self::Error> {
        unreachable!("the credential engine draws no randomness")
    }
}
impl rand_core::TryCryptoRng for NoRng {}

#[test]
fn the_current_credential_is_never_revoked() {
    let d = with_first();
    let err = step(&d, CredentialInput::Revoked { rotation: 1 }, T0).unwrap_err();
    assert!(
        err.to_string().contains("it is the current credential"),
        "{err}"
    );
    // Kept as old but not yet replaced: still current, still refused.
    let kept = step(&d, CredentialInput::Step, T0 + Duration::hours(720)).unwrap();
    assert!(step(&kept, CredentialInput::Revoked { rotation: 1 }, T0).is_err());
    assert!(
        step(
            &kept,
            CredentialInput::RevokeFailed {
                rotation: 1,
                message: "x".into()
            },
            T0
        )
        .is_err()
    );
}

#[test]
fn a_mint_that_reuses_a_live_credential_or_is_empty_is_a_failed_attempt() {
    let d = with_first();
    let due = T0 + Duration::hours(720);
    let started = step(
        &step(&d, CredentialInput::Step, due).unwrap(),
        CredentialInput::Step,
        due,
    )
    .unwrap();
    for (value, expect) in [("one", "already in use"), ("", "empty credential")] {
        let d = step(&started, minted(2, 1, value), due).unwrap();
        let f = d.failure.as_ref().unwrap();
        assert!(f.message.contains(expect), "{}", f.message);
        assert_eq!(d.current, started.current, "nothing recorded as current");
        assert!(d.mint.is_none(), "the attempt is over");
        assert_eq!(
            next_action(&d, f.retry_after),
            Next::Step(StepKind::StartMint)
        );
    }
    // Reports of another attempt are refused, not recorded.
    assert!(step(&started, minted(2, 2, "two"), due).is_err());
    assert!(step(&started, minted(3, 1, "two"), due).is_err());
}

#[test]
fn failures_back_off_exponentially_up_to_the_cap_and_keep_the_rotation() {
    let mut d = step(&fresh(), CredentialInput::Step, T0).unwrap();
    let mut now = T0;
    let mut waits = Vec::new();
    for attempt in 1..=10u32 {
        assert_eq!(
            d.mint.as_ref().map(|m| (m.rotation, m.attempt)),
            Some((1, attempt))
        );
        d = step(
            &d,
            CredentialInput::MintFailed {
                rotation: 1,
                attempt,
                message: "exit status 1:\nno\nroute".into(),
                captured: None,
            },
            now,
        )
        .unwrap();
        let f = d.failure.clone().unwrap();
        assert_eq!(f.message, "exit status 1: no route");
        assert_eq!(f.failures, attempt);
        waits.push((f.retry_after - now).whole_seconds());
        // Not before the retry time…
        assert_eq!(
            step(&d, CredentialInput::Step, f.retry_after - Duration::SECOND).unwrap(),
            d
        );
        now = f.retry_after;
        // …then the next attempt of the same rotation.
        d = step(&d, CredentialInput::Step, now).unwrap();
    }
    assert_eq!(waits, [30, 60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]);
    let d = step(&d, minted(1, 11, "v"), now).unwrap();
    assert!(d.failure.is_none());
    assert_eq!(d.history[0].attempts, 11);
    assert_eq!(d.next_rotation, 2);
}

#[test]
fn a_failed_revoke_keeps_the_old_credential_and_retries() {
    let d = with_first();
    let due = T0 + Duration::hours(720);
    let d = step(
        &step(&d, CredentialInput::Step, due).unwrap(),
        CredentialInput::Step,
        due,
    )
    .unwrap();
    let d = step(&d, minted(2, 1, "two"), due).unwrap();
    let end = due + Duration::minutes(10);
    let fail = |d: &CredentialState, at| {
        step(
            d,
            CredentialInput::RevokeFailed {
                rotation: 1,
                message: "timed out after 30s".into(),
            },
            at,
        )
        .unwrap()
    };
    let d = fail(&d, end);
    assert!(
        d.old.is_some(),
        "an old credential that still needs revoking is never forgotten"
    );
    assert_eq!(
        next_action(&d, end),
        Next::Act(Action::Wait {
            until: end + Duration::seconds(30),
            reason: WaitReason::Backoff
        })
    );
    let d = fail(&d, end + Duration::seconds(30));
    assert_eq!(d.failure.as_ref().unwrap().failures, 2);
    assert_eq!(
        d.failure.as_ref().unwrap().retry_after,
        end + Duration::seconds(90)
    );
    let d = step(
        &d,
        CredentialInput::Revoked { rotation: 1 },
        end + Duration::seconds(90),
    )
    .unwrap();
    assert!(d.old.is_none() && d.failure.is_none());
}

/// Credential 1 current, kept as old and a mint of rotation 2 started, at
/// `due`.
fn minting_second() -> (CredentialState, OffsetDateTime) {
    let due = T0 + Duration::hours(720);
    let kept = step(&with_first(), CredentialInput::Step, due).unwrap();
    (step(&kept, CredentialInput::Step, due).unwrap(), due)
}

fn mint_failed(rotation: u64, attempt: u32, captured: Option<&str>) -> CredentialInput {
    CredentialInput::MintFailed {
        rotation,
        attempt,
        message: "timed out after 2m and was killed".into(),
        captured: captured.map(Secret::new),
    }
}

#[test]
fn a_mint_that_failed_after_printing_is_revoked_before_the_next_attempt() {
    let (started, due) = minting_second();
    let d = step(&started, mint_failed(2, 1, Some("stray")), due).unwrap();
    assert_eq!(d.strays.len(), 1);
    assert_eq!(
        (d.strays[0].rotation, d.strays[0].attempt),
        (2, 1),
        "kept with its attempt"
    );
    assert_eq!(d.current, started.current, "never used");
    // Revoked at once, not after the mint's backoff, and before any retry.
    let revoke = Next::Act(Action::RevokeStray {
        rotation: 2,
        attempt: 1,
        value: Secret::new("stray"),
    });
    assert_eq!(next_action(&d, due), revoke);
    let retry = d.failure.as_ref().unwrap().retry_after;
    assert_eq!(
        next_action(&d, retry),
        revoke,
        "no mint while it may be live"
    );
    assert_eq!(step(&d, CredentialInput::Step, retry).unwrap(), d);
    let status = status::CredentialStatus::of(&d, due);
    assert_eq!(
        (status.state, status.next_action, status.health),
        ("revoking-stray", "revoke-stray", status::Health::Failing)
    );
    // A failing revocation backs off on its own and keeps blocking the mint.
    let failed = step(
        &d,
        CredentialInput::StrayRevokeFailed {
            rotation: 2,
            attempt: 1,
            message: "API down".into(),
        },
        due,
    )
    .unwrap();
    let f = failed.strays[0].failure.clone().unwrap();
    assert_eq!((f.action, f.failures), (HookAction::RevokeStray, 1));
    assert_eq!(
        next_action(&failed, due),
        Next::Act(Action::Wait {
            until: due + Duration::seconds(30),
            reason: WaitReason::Backoff
        })
    );
    assert_eq!(
        step(&failed, CredentialInput::Step, retry).unwrap(),
        failed,
        "the mint's own retry time passed, the stray's did not: nothing"
    );
    assert_eq!(next_action(&failed, due + Duration::seconds(30)), revoke);
    let done = step(
        &failed,
        CredentialInput::StrayRevoked {
            rotation: 2,
            attempt: 1,
        },
        due + Duration::seconds(30),
    )
    .unwrap();
    assert!(done.strays.is_empty());
    // Reported twice: accepted, nothing changes.
    assert_eq!(
        step(
            &done,
            CredentialInput::StrayRevoked {
                rotation: 2,
                attempt: 1
            },
            due
        )
        .unwrap(),
        done
    );
    // Then the mint is retried as attempt 2 of the same rotation.
    let again = step(&done, CredentialInput::Step, retry).unwrap();
    assert_eq!(
        again.mint.as_ref().map(|m| (m.rotation, m.attempt)),
        Some((2, 2))
    );
    // Reports about strays that never were are refused.
    assert!(
        step(
            &again,
            CredentialInput::StrayRevokeFailed {
                rotation: 2,
                attempt: 1,
                message: "x".into()
            },
            retry
        )
        .is_err()
    );
    assert!(
        step(
            &again,
            CredentialInput::StrayRevoked {
                rotation: 9,
                attempt: 1
            },
            retry
        )
        .is_err()
    );
}

#[test]
fn a_failed_mint_that_printed_a_live_credential_or_nothing_keeps_no_stray() {
    let (started, due) = minting_second();
    for captured in [Some("one"), Some(""), None] {
        let d = step(&started, mint_failed(2, 1, captured), due).unwrap();
        assert!(
            d.strays.is_empty(),
            "{captured:?}: the live one is never revoked"
        );
        assert_eq!(
            next_action(&d, d.failure.as_ref().unwrap().retry_after),
            Next::Step(StepKind::StartMint)
        );
    }
    // A first mint that fails after printing: no current credential yet,
    // the stray is revoked before the retry all the same.
    let d = step(&fresh(), CredentialInput::Step, T0).unwrap();
    let d = step(&d, mint_failed(1, 1, Some("first")), T0).unwrap();
    assert!(matches!(
        next_action(&d, T0 + Duration::hours(1)),
        Next::Act(Action::RevokeStray {
            rotation: 1,
            attempt: 1,
            ..
        })
    ));
}

#[test]
fn old_is_published_only_once_the_new_credential_is_recorded() {
    let kept = step(
        &with_first(),
        CredentialInput::Step,
        T0 + Duration::hours(720),
    )
    .unwrap();
    assert_eq!(kept.old, kept.current, "the document keeps it as old");
    let files = kept.to_files().unwrap();
    assert_eq!(
        files.get("creds/db/old"),
        None,
        "no old file equal to current"
    );
    assert_eq!(CredentialState::from_files(&files).unwrap(), kept);
    // A document written by an older build, with that copy, reads the same.
    let mut legacy = files.clone();
    legacy
        .insert("creds/db/old", File::secret(b"one".to_vec()))
        .unwrap();
    assert_eq!(CredentialState::from_files(&legacy).unwrap(), kept);
    let (started, due) = minting_second();
    let new = step(&started, minted(2, 1, "two"), due).unwrap();
    let files = new.to_files().unwrap();
    assert_eq!(files.get("creds/db/old"), Some(&b"one"[..]));
}

#[test]
fn strays_round_trip_through_files_and_secret_data_and_stay_out_of_state_json() {
    let (started, due) = minting_second();
    let d = step(&started, mint_failed(2, 1, Some("user:stray")), due).unwrap();
    let d = step(
        &d,
        CredentialInput::StrayRevokeFailed {
            rotation: 2,
            attempt: 1,
            message: "down".into(),
        },
        due,
    )
    .unwrap();
    let files = d.to_files().unwrap();
    assert_eq!(files.get("creds/db/stray-2-1"), Some(&b"user:stray"[..]));
    assert!(files.iter().all(|(_, f)| f.secret));
    let json = String::from_utf8(files.get("creds/db/state.json").unwrap().to_vec()).unwrap();
    assert!(!json.contains("user:stray"), "{json}");
    assert_eq!(CredentialState::from_files(&files).unwrap(), d);
    let data = CredentialState::files_to_secret_data(&files).unwrap();
    assert_eq!(
        CredentialState::files_from_secret_data(&data).unwrap(),
        files
    );
    // Without its file the document is damaged, not silently stray-less.
    let mut missing = Files::new();
    for (path, file) in files.iter().filter(|(p, _)| !p.ends_with("stray-2-1")) {
        missing.insert(path, file.clone()).unwrap();
    }
    let err = CredentialState::from_files(&missing)
        .unwrap_err()
        .to_string();
    assert!(err.contains("creds/db/stray-2-1"), "{err}");
    // A document without strays does not mention them: older builds read it.
    let clean = with_first().to_files().unwrap();
    let json = String::from_utf8(clean.get("creds/db/state.json").unwrap().to_vec()).unwrap();
    assert!(!json.contains("strays"), "{json}");
}

#[test]
fn bad_policies_and_names_are_refused() {
    let p = |e, g| CredentialPolicy {
        expire: Duration::seconds(e),
        grace: Duration::seconds(g),
    };
    for bad in [p(0, 0), p(-1, 0), p(60, -1), p(60, 60), p(60, 61)] {
        assert!(CredentialState::new("x", bad, None).is_err(), "{bad:?}");
    }
    CredentialState::new("x", p(60, 0), None).unwrap();
    for bad in ["", "A", ".x", "a/b", "a b", &"x".repeat(65)] {
        assert!(
            CredentialState::new(bad, policy(), None).is_err(),
            "{bad:?}"
        );
    }
}

#[test]
fn files_round_trip_with_every_file_secret() {
    let d = with_first();
    let due = T0 + Duration::hours(720);
    let d = step(
        &step(&d, CredentialInput::Step, due).unwrap(),
        CredentialInput::Step,
        due,
    )
    .unwrap();
    let d = step(&d, minted(2, 1, "two"), due).unwrap();
    let mut d = d;
    d.hooks = Some(Hooks {
        mint: "mint.sh".into(),
        revoke: "revoke.sh".into(),
    });
    let files = d.to_files().unwrap();
    let paths: Vec<&str> = files.iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        ["creds/db/current", "creds/db/old", "creds/db/state.json"]
    );
    assert!(files.iter().all(|(_, f)| f.secret));
    assert_eq!(files.get("creds/db/current"), Some(&b"two"[..]));
    assert_eq!(files.get("creds/db/old"), Some(&b"one"[..]));
    let json = String::from_utf8(files.get("creds/db/state.json").unwrap().to_vec()).unwrap();
    assert!(
        !json.contains("\"two\"") && !json.contains("\"one\""),
        "no credential in state.json: {json}"
    );
    assert_eq!(CredentialState::from_files(&files).unwrap(), d);
    let data = CredentialState::files_to_secret_data(&files).unwrap();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["current", "old", "state.json"]
    );
    assert_eq!(
        CredentialState::files_from_secret_data(&data).unwrap(),
        files
    );
}

#[test]
fn damaged_documents_are_clear_errors() {
    let d = with_first();
    let files = d.to_files().unwrap();
    let mut missing = Files::new();
    missing
        .insert(
            "creds/db/state.json",
            files.file("creds/db/state.json").unwrap().clone(),
        )
        .unwrap();
    let err = CredentialState::from_files(&missing)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("creds/db/current") && err.contains("missing"),
        "{err}"
    );
    let json = String::from_utf8(files.get("creds/db/state.json").unwrap().to_vec()).unwrap();
    for (bad, expect) in [
        (
            json.replace("\"version\": 1", "\"version\": 9"),
            "version 9 is not supported",
        ),
        (
            json.replace("\"credential\"", "\"signer\""),
            "holds a \"signer\" document",
        ),
        (
            json.replace("\"next_rotation\": 2", "\"next_rotation\": 1"),
            "impossible rotation",
        ),
        (
            json.replace("\"name\": \"db\"", "\"name\": \"other\""),
            "belongs in creds/other/state.json",
        ),
    ] {
        let mut f = files.clone();
        f.insert("creds/db/state.json", File::secret(bad.into_bytes()))
            .unwrap();
        let err = CredentialState::from_files(&f).unwrap_err().to_string();
        assert!(err.contains(expect), "{expect}: {err}");
    }
}

// ---- Any interleaving of crashes and retries ----
//
// A model embedder runs against the driver and a MemoryStore. The outside
// system is a set of live credentials. Each mint run for a recorded
// attempt is captured (as the CLI captures the hook's stdout in a file);
// a crash loses everything the embedder had in memory but the captures.
// A failing mint hook may have minted before it failed (it printed a
// credential, then exited non-zero or was killed): that credential is
// live, and only what was captured can bring it back.

#[derive(Debug, Clone)]
enum Op {
    /// Let time pass.
    Advance(u32),
    /// One reconcile action, with the hook's result and whether the
    /// embedder dies before reporting it.
    Act {
        hook_fails: bool,
        /// A failing mint hook minted (and printed) before it failed.
        minted_before_failing: bool,
        crash_before_report: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u32..100_000).prop_map(Op::Advance),
        (any::<bool>(), any::<bool>(), any::<bool>(), 0u8..4).prop_map(|(f, m, c, w)| Op::Act {
            // Failures are rarer than successes, or rotations never finish.
            hook_fails: f && w == 0,
            minted_before_failing: m,
            crash_before_report: c
        }),
    ]
}

/// What one mint run printed, and whether the hook succeeded.
#[derive(Debug, Clone)]
struct Capture {
    printed: Option<Vec<u8>>,
    succeeded: bool,
}

#[derive(Default)]
struct World {
    live: BTreeSet<Vec<u8>>,
    /// Captured mint output per (rotation, attempt).
    captures: BTreeMap<(u64, u32), Capture>,
    /// How many times the mint hook ran per (rotation, attempt).
    mint_runs: BTreeMap<(u64, u32), u32>,
    /// Successful mints per rotation.
    minted_per_rotation: BTreeMap<u64, u32>,
    /// The most credentials live at once so far.
    most_live: usize,
    counter: u32,
}

fn act(
    world: &mut World,
    driver: &Driver<&MemoryStore>,
    now: OffsetDateTime,
    hook_fails: bool,
    minted_before_failing: bool,
    crash: bool,
) {
    let key = credential_key("db");
    let mut rng = rand_core::UnwrapErr(NoRng);
    // One committed bookkeeping step at most, so that crashes fall between
    // any two; then the action, if one is due.
    let options = AdvanceOptions {
        owner: None,
        max_steps: Some(1),
    };
    let advanced = advance(driver, "db", options, now, &mut rng).unwrap();
    let doc = advanced.document;
    let mut report = |input: CredentialInput| {
        driver
            .step::<CredentialEngine, _>(&key, &input, now, &mut rng)
            .unwrap();
    };
    let Next::Act(action) = advanced.next else {
        return;
    };
    match action {
        Action::Mint { rotation, attempt } => {
            let capture = match world.captures.get(&(rotation, attempt)) {
                // Adopt what an earlier run printed: never mint again for it.
                Some(captured) => captured.clone(),
                None => {
                    *world.mint_runs.entry((rotation, attempt)).or_default() += 1;
                    let printed = if hook_fails && !minted_before_failing {
                        None
                    } else {
                        world.counter += 1;
                        let v = format!("cred-{}", world.counter).into_bytes();
                        world.live.insert(v.clone());
                        if !hook_fails {
                            *world.minted_per_rotation.entry(rotation).or_default() += 1;
                        }
                        Some(v)
                    };
                    let capture = Capture {
                        printed,
                        succeeded: !hook_fails,
                    };
                    world.captures.insert((rotation, attempt), capture.clone());
                    capture
                }
            };
            if crash {
                return;
            }
            report(match capture {
                Capture {
                    printed: Some(v),
                    succeeded: true,
                } => CredentialInput::Minted {
                    rotation,
                    attempt,
                    value: Secret::new(v),
                },
                Capture { printed, .. } => CredentialInput::MintFailed {
                    rotation,
                    attempt,
                    message: "exit status 1".into(),
                    captured: printed.map(Secret::new),
                },
            });
        }
        Action::Revoke { rotation, value } => {
            let current = doc.current.as_ref().unwrap();
            assert_ne!(value, current.value, "revoking the current credential");
            if hook_fails {
                if !crash {
                    report(CredentialInput::RevokeFailed {
                        rotation,
                        message: "exit status 1".into(),
                    });
                }
                return;
            }
            world.live.remove(value.as_bytes());
            if !crash {
                report(CredentialInput::Revoked { rotation });
            }
        }
        Action::RevokeStray {
            rotation,
            attempt,
            value,
        } => {
            assert!(
                !doc.is_live(&value),
                "revoking the current or old credential as a stray"
            );
            if hook_fails {
                if !crash {
                    report(CredentialInput::StrayRevokeFailed {
                        rotation,
                        attempt,
                        message: "exit status 1".into(),
                    });
                }
                return;
            }
            world.live.remove(value.as_bytes());
            if !crash {
                report(CredentialInput::StrayRevoked { rotation, attempt });
            }
        }
        Action::Wait { .. } => {}
    }
}

fn check(world: &mut World, doc: &CredentialState) {
    for (k, runs) in &world.mint_runs {
        assert_eq!(*runs, 1, "mint hook ran {runs} times for {k:?}");
    }
    for (r, n) in &world.minted_per_rotation {
        assert_eq!(*n, 1, "rotation {r} minted {n} credentials");
    }
    // Everything live is the current or the old credential, a stray the
    // document keeps to revoke, or a mint captured and not yet reported
    // (adopted on the next action).
    let mut known: BTreeSet<Vec<u8>> = doc
        .current
        .iter()
        .chain(doc.old.iter())
        .map(|c| c.value.as_bytes().to_vec())
        .chain(doc.strays.iter().map(|s| s.value.as_bytes().to_vec()))
        .collect();
    if let Some(m) = &doc.mint
        && let Some(Capture {
            printed: Some(v), ..
        }) = world.captures.get(&(m.rotation, m.attempt))
    {
        known.insert(v.clone());
    }
    assert!(
        world.live.is_subset(&known),
        "leaked: live {:?} known {known:?}",
        world.live
    );
    assert!(world.live.len() <= 2, "more than two live credentials");
    world.most_live = world.most_live.max(world.live.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn no_interleaving_of_crashes_and_failures_mints_twice_revokes_current_or_leaks(
        ops in proptest::collection::vec(op(), 1..120)
    ) {
        let store = MemoryStore::new();
        let driver = Driver::new(&store);
        let short = CredentialPolicy { expire: Duration::hours(10), grace: Duration::hours(1) };
        driver.create::<CredentialEngine>(&credential_key("db"), &CredentialState::new("db", short, None).unwrap()).unwrap();
        let mut world = World::default();
        let mut now = T0;
        for op in ops {
            match op {
                Op::Advance(s) => now += Duration::seconds(i64::from(s)),
                Op::Act { hook_fails, minted_before_failing, crash_before_report } => act(&mut world, &driver, now, hook_fails, minted_before_failing, crash_before_report),
            }
            let (doc, _) = driver.load::<CredentialEngine>(&credential_key("db")).unwrap();
            check(&mut world, &doc);
        }
        // Then a healthy embedder converges: one live credential, current.
        for _ in 0..50 {
            let (doc, _) = driver.load::<CredentialEngine>(&credential_key("db")).unwrap();
            match next_action(&doc, now) {
                Next::Act(Action::Wait { until, reason }) => {
                    if reason == WaitReason::Expiry && doc.old.is_none() { break; }
                    now = until;
                }
                _ => act(&mut world, &driver, now, false, false, false),
            }
        }
        let (doc, _) = driver.load::<CredentialEngine>(&credential_key("db")).unwrap();
        check(&mut world, &doc);
        prop_assert!(doc.old.is_none() && doc.mint.is_none() && doc.strays.is_empty());
        let current = doc.current.unwrap().value.as_bytes().to_vec();
        prop_assert_eq!(world.live.clone(), BTreeSet::from([current]));
    }
}

/// The property above must see the case it is about: a failed mint that
/// minted, its stray revoked before the retry. One fixed run of the model
/// shows it does (so a change to the model cannot quietly drop it).
#[test]
fn the_model_exercises_a_failed_mint_that_minted() {
    let store = MemoryStore::new();
    let driver = Driver::new(&store);
    let short = CredentialPolicy {
        expire: Duration::hours(10),
        grace: Duration::hours(1),
    };
    driver
        .create::<CredentialEngine>(
            &credential_key("db"),
            &CredentialState::new("db", short, None).unwrap(),
        )
        .unwrap();
    let mut world = World::default();
    let load = || {
        driver
            .load::<CredentialEngine>(&credential_key("db"))
            .unwrap()
            .0
    };
    // Start the first mint (advance records it, then the embedder runs
    // it): it fails after minting, and the embedder crashes before the
    // report.
    act(&mut world, &driver, T0, true, true, true);
    check(&mut world, &load());
    assert_eq!(world.live.len(), 1);
    act(&mut world, &driver, T0, false, false, false);
    let doc = load();
    assert_eq!(doc.strays.len(), 1, "adopted after the crash and kept");
    check(&mut world, &doc);
    act(&mut world, &driver, T0, false, false, false);
    assert!(load().strays.is_empty() && world.live.is_empty());
}

// ---- Plans decide; one advance ----

#[test]
fn a_step_plan_holds_the_change_what_comes_next_and_the_wake_up() {
    let at = T0 + Duration::hours(720);
    let d = with_first();
    let kept = step(&d, CredentialInput::Step, at).unwrap();
    let started = step(&kept, CredentialInput::Step, at).unwrap();
    let grace_end = at + Duration::minutes(10);
    let fresh = fresh();
    // (case, document, input, time), then the plan: (change, what comes
    // next, wake-up).
    type Case<'a> = (
        &'a str,
        &'a CredentialState,
        CredentialInput,
        OffsetDateTime,
    );
    type Decision = (Option<Change>, Next, OffsetDateTime);
    let cases: Vec<(Case<'_>, Decision)> = vec![
        (
            (
                "nothing minted yet: record the first attempt, then mint it",
                &fresh,
                CredentialInput::Step,
                T0,
            ),
            (
                Some(Change::StartMint {
                    rotation: 1,
                    attempt: 1,
                    owner: None,
                }),
                Next::Act(Action::Mint {
                    rotation: 1,
                    attempt: 1,
                }),
                T0,
            ),
        ),
        (
            (
                "not due: nothing, wait for the expiry",
                &d,
                CredentialInput::Step,
                T0,
            ),
            (
                None,
                Next::Act(Action::Wait {
                    until: at,
                    reason: WaitReason::Expiry,
                }),
                at,
            ),
        ),
        (
            (
                "due: keep the current one as old, then another step",
                &d,
                CredentialInput::Step,
                at,
            ),
            (Some(Change::KeepOld), Next::Step(StepKind::StartMint), at),
        ),
        (
            (
                "kept: record the attempt as the stepping owner's, then mint it",
                &kept,
                CredentialInput::StepAs {
                    owner: "host-a:1".into(),
                },
                at,
            ),
            (
                Some(Change::StartMint {
                    rotation: 2,
                    attempt: 1,
                    owner: Some("host-a:1".into()),
                }),
                Next::Act(Action::Mint {
                    rotation: 2,
                    attempt: 1,
                }),
                at,
            ),
        ),
        (
            (
                "the minted credential: record it, then wait for the grace",
                &started,
                minted(2, 1, "two"),
                at,
            ),
            (
                Some(Change::RecordMint {
                    rotation: 2,
                    attempt: 1,
                    value: Secret::new("two"),
                }),
                Next::Act(Action::Wait {
                    until: grace_end,
                    reason: WaitReason::Grace,
                }),
                grace_end,
            ),
        ),
    ];
    for ((case, doc, input, now), (change, next, wake)) in cases {
        let p = plan(doc, &input, now).unwrap();
        assert_eq!(p.change, change, "{case}");
        assert_eq!(p.next, next, "{case}");
        assert_eq!(p.next_wake, wake, "{case}");
        assert_eq!(
            plan(doc, &input, now).unwrap(),
            p,
            "{case}: same inputs, same plan"
        );
        // apply carries it out and takes the wake-up from the plan.
        let outcome = apply(doc, p.clone()).unwrap();
        assert_eq!(outcome.changed(), p.change.is_some(), "{case}");
        assert_eq!(outcome.next_wake, p.next_wake, "{case}");
        // What the plan said comes next is what the new document asks for.
        let after = outcome.into_document();
        assert_eq!(due(&after, input_owner(&input), now), p.next, "{case}");
    }
}

fn input_owner(input: &CredentialInput) -> Option<&str> {
    match input {
        CredentialInput::StepAs { owner } => Some(owner),
        _ => None,
    }
}

fn store_with(doc: &CredentialState) -> MemoryStore {
    let store = MemoryStore::new();
    Driver::new(&store)
        .create::<CredentialEngine>(&credential_key("db"), doc)
        .unwrap();
    store
}

#[test]
fn advance_takes_every_due_bookkeeping_step_and_stops_where_the_embedder_acts() {
    let store = store_with(&with_first());
    let driver = Driver::new(&store);
    let rng = &mut rand_core::UnwrapErr(NoRng);
    let due = T0 + Duration::hours(720);
    let not_yet = advance(&driver, "db", AdvanceOptions::default(), T0, rng).unwrap();
    assert_eq!(not_yet.steps, 0);
    assert_eq!(not_yet.next_wake, due);
    assert!(matches!(
        not_yet.action(),
        Some(Action::Wait {
            reason: WaitReason::Expiry,
            ..
        })
    ));
    // Step by step: one committed step, and it says another is due.
    let one = AdvanceOptions {
        owner: None,
        max_steps: Some(1),
    };
    let a = advance(&driver, "db", one, due, rng).unwrap();
    assert_eq!(
        (a.steps, a.next.clone(), a.next_wake),
        (1, Next::Step(StepKind::StartMint), due)
    );
    assert_eq!(a.events.len(), 1);
    let zero = AdvanceOptions {
        owner: None,
        max_steps: Some(0),
    };
    let z = advance(&driver, "db", zero, due, rng).unwrap();
    assert_eq!((z.steps, z.next), (0, Next::Step(StepKind::StartMint)));
    // Then all the rest at once, up to the mint.
    let b = advance(&driver, "db", AdvanceOptions::default(), due, rng).unwrap();
    assert_eq!(b.steps, 1);
    assert_eq!(
        b.next,
        Next::Act(Action::Mint {
            rotation: 2,
            attempt: 1
        })
    );
    assert_eq!(b.next_wake, due);
    assert!(matches!(
        b.events[..],
        [Event::MintStarted {
            rotation: 2,
            attempt: 1,
            ..
        }]
    ));
    // A fresh document from due: both steps in one call.
    let store = store_with(&with_first());
    let driver = Driver::new(&store);
    let c = advance(&driver, "db", AdvanceOptions::default(), due, rng).unwrap();
    assert_eq!(c.steps, 2);
    assert_eq!(
        c.next,
        Next::Act(Action::Mint {
            rotation: 2,
            attempt: 1
        })
    );
    assert_eq!(
        c.document,
        driver
            .load::<CredentialEngine>(&credential_key("db"))
            .unwrap()
            .0
    );
    assert_eq!(
        c.document.mint.as_ref().map(|m| m.owner.clone()),
        Some(None)
    );
}

/// A store that acknowledges every write and keeps none: a step is always
/// due again.
struct ForgetfulStore(MemoryStore);

impl crate::store::Store for ForgetfulStore {
    fn location(&self) -> String {
        "a store that forgets".into()
    }
    fn get(&self, key: &str) -> Result<Option<(Files, crate::store::Revision)>> {
        self.0.get(key)
    }
    fn put(
        &self,
        _key: &str,
        expected: Option<&crate::store::Revision>,
        _files: &Files,
    ) -> Result<crate::store::Revision> {
        Ok(expected
            .cloned()
            .unwrap_or_else(|| crate::store::Revision::new("0")))
    }
}

#[test]
fn advance_gives_up_after_its_one_bound_on_a_store_that_loses_its_writes() {
    let store = ForgetfulStore(store_with(&with_first()));
    let driver = Driver::new(&store);
    let due = T0 + Duration::hours(720);
    let err = advance(
        &driver,
        "db",
        AdvanceOptions::default(),
        due,
        &mut rand_core::UnwrapErr(NoRng),
    )
    .unwrap_err();
    match err {
        RotateError::CredentialNotSettling { steps, .. } => assert_eq!(steps, ADVANCE_MAX_STEPS),
        other => panic!("{other}"),
    }
}

#[test]
fn a_mint_attempt_is_run_only_by_the_owner_that_recorded_it() {
    let store = store_with(&with_first());
    let driver = Driver::new(&store);
    let rng = &mut rand_core::UnwrapErr(NoRng);
    let due = T0 + Duration::hours(720);
    let a = AdvanceOptions {
        owner: Some("host-a:aa"),
        max_steps: None,
    };
    let b = AdvanceOptions {
        owner: Some("host-b:bb"),
        max_steps: None,
    };
    let first = advance(&driver, "db", a, due, rng).unwrap();
    assert_eq!(
        first.next,
        Next::Act(Action::Mint {
            rotation: 2,
            attempt: 1
        })
    );
    // The other reconciler is told to wait, whatever it asks.
    for embedder in [b, AdvanceOptions::default()] {
        let other = advance(&driver, "db", embedder, due, rng).unwrap();
        assert_eq!(other.steps, 0);
        assert_eq!(
            other.next,
            Next::Act(Action::Wait {
                until: due + MINT_ELSEWHERE_RECHECK,
                reason: WaitReason::MintElsewhere
            })
        );
    }
    // The owner, after a restart, is asked again (to adopt its capture).
    assert_eq!(
        advance(&driver, "db", a, due, rng).unwrap().next,
        first.next
    );
    let status = status::CredentialStatus::of(&first.document, due);
    assert_eq!((status.state, status.next_action), ("minting", "mint"));
    assert_eq!(status.mint.unwrap().owner.as_deref(), Some("host-a:aa"));
    // The owner survives the files form; an older document has none.
    let files = first.document.to_files().unwrap();
    let json = String::from_utf8(files.get("creds/db/state.json").unwrap().to_vec()).unwrap();
    assert!(json.contains("\"mint_owner\": \"host-a:aa\""), "{json}");
    assert_eq!(CredentialState::from_files(&files).unwrap(), first.document);
    let mut f = files.clone();
    f.insert(
        "creds/db/state.json",
        File::secret(
            json.replace("\"mint_owner\": \"host-a:aa\",", "")
                .into_bytes(),
        ),
    )
    .unwrap();
    assert_eq!(
        CredentialState::from_files(&f).unwrap().mint.unwrap().owner,
        None
    );
    // Bad owners are refused before anything is written.
    for bad in ["", "host a", "x\u{1b}[2J", &"o".repeat(129)] {
        let e = plan(
            &first.document,
            &CredentialInput::StepAs { owner: bad.into() },
            due,
        )
        .unwrap_err();
        assert!(
            matches!(e, RotateError::InvalidMintOwner(_)),
            "{bad:?}: {e}"
        );
    }
}

#[test]
fn a_mint_reported_after_the_document_moved_on_is_kept_as_a_stray_and_revoked() {
    let (started, due) = minting_second();
    // Two embedders without owners both ran attempt 2/1; one reported first.
    let won = step(&started, minted(2, 1, "two-a"), due).unwrap();
    let late = step(&won, minted(2, 1, "two-b"), due).unwrap();
    assert_eq!(late.current, won.current, "the first report stands");
    assert_eq!(late.strays.len(), 1);
    assert_eq!((late.strays[0].rotation, late.strays[0].attempt), (2, 1));
    assert_eq!(late.strays[0].value, Secret::new("two-b"));
    let outcome = apply(&won, plan(&won, &minted(2, 1, "two-b"), due).unwrap()).unwrap();
    assert!(matches!(
        outcome.events[..],
        [Event::LateMintKept {
            rotation: 2,
            attempt: 1,
            ..
        }]
    ));
    // Revoked before anything else (even during the grace).
    assert_eq!(
        next_action(&late, due),
        Next::Act(Action::RevokeStray {
            rotation: 2,
            attempt: 1,
            value: Secret::new("two-b")
        })
    );
    // Reported again: already kept. The winner's report again: current.
    assert_eq!(step(&late, minted(2, 1, "two-b"), due).unwrap(), late);
    assert_eq!(step(&late, minted(2, 1, "two-a"), due).unwrap(), late);
    // A third mint of the same attempt while that stray is kept: refused,
    // so its embedder keeps it and reports again later (never dropped).
    let e = step(&late, minted(2, 1, "two-c"), due).unwrap_err();
    assert!(
        e.to_string()
            .contains("report it again once that one is revoked"),
        "{e}"
    );
    let revoked = step(
        &late,
        CredentialInput::StrayRevoked {
            rotation: 2,
            attempt: 1,
        },
        due,
    )
    .unwrap();
    let again = step(&revoked, minted(2, 1, "two-c"), due).unwrap();
    assert_eq!(again.strays[0].value, Secret::new("two-c"));
    // A failed mint that printed, reported late, is kept the same way; one
    // that printed nothing is nothing to keep.
    let failed_late = step(&won, mint_failed(2, 1, Some("two-d")), due).unwrap();
    assert_eq!(failed_late.strays[0].value, Secret::new("two-d"));
    assert_eq!(step(&won, mint_failed(2, 1, None), due).unwrap(), won);
    // A superseded attempt reported while the next one runs: kept.
    let retried = step(
        &step(
            &step(&started, mint_failed(2, 1, None), due).unwrap(),
            CredentialInput::Step,
            due + Duration::seconds(30),
        )
        .unwrap(),
        CredentialInput::Step,
        due + Duration::seconds(30),
    )
    .unwrap();
    assert_eq!(retried.mint.as_ref().map(|m| m.attempt), Some(2));
    let kept = step(&retried, minted(2, 1, "two-e"), due).unwrap();
    assert_eq!(kept.strays[0].value, Secret::new("two-e"));
    assert_eq!(kept.mint, retried.mint, "the attempt in progress goes on");
    // Attempts that never started are refused, not kept.
    for (r, a) in [(2, 3), (3, 1), (0, 1), (2, 0)] {
        assert!(step(&retried, minted(r, a, "x"), due).is_err(), "{r}/{a}");
    }
}

#[test]
fn hook_messages_are_stored_on_one_line_with_control_characters_escaped() {
    let (started, due) = minting_second();
    let raw =
        "boom\u{1b}[2J\u{1b}[31mred\rpki: cred db: fake line\npki: ok \u{9b}31m \u{202e}x \u{7f}";
    let d = step(
        &started,
        CredentialInput::MintFailed {
            rotation: 2,
            attempt: 1,
            message: raw.into(),
            captured: None,
        },
        due,
    )
    .unwrap();
    let stored = &d.failure.as_ref().unwrap().message;
    assert!(
        !stored.chars().any(|c| c.is_control() || c == '\u{202e}'),
        "{stored:?}"
    );
    assert!(
        stored.contains("\\u{1b}[2J") && stored.contains("fake line pki: ok"),
        "{stored}"
    );
    assert_eq!(sanitize_message(stored), *stored, "idempotent");
    let printed = Event::Failed {
        name: "db".into(),
        failure: d.failure.clone().unwrap(),
    }
    .to_string();
    assert!(!printed.chars().any(char::is_control), "{printed:?}");
    // A document written before messages were sanitized shows them sanitized.
    let mut legacy = d.clone();
    legacy.failure.as_mut().unwrap().message = raw.into();
    let status = status::CredentialStatus::of(&legacy, due);
    let text = serde_json::to_string(&status).unwrap();
    assert!(
        !text.contains('\u{9b}') && !text.contains('\u{7f}') && !text.contains("\\u001b"),
        "{text}"
    );
    assert_eq!(sanitize_message("  \n\t "), "failed without a message");
    assert!(sanitize_message(&"é".repeat(400)).len() <= MESSAGE_LIMIT + '…'.len_utf8());
}
