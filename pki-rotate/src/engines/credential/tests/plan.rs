//! Plans decide; one advance takes every due bookkeeping step; a mint
//! attempt is run only by the owner that recorded it.

use super::*;
use crate::driver::{ADVANCE_MAX_STEPS, AdvanceOptions, Advanced, Driver, Step, advance};
use crate::engines::credential::next::due;
use crate::model::document::{Document, File, Files};
use crate::model::error::RotateError;
use crate::stores::MemoryStore;

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

/// How an advance ended: every advance says.
fn ended(advanced: &Step<CredentialState, Event>) -> &Advanced {
    advanced
        .advance
        .as_ref()
        .expect("an advance says how it ended")
}

#[test]
fn advance_takes_every_due_bookkeeping_step_and_stops_where_the_embedder_acts() {
    let store = store_with(&with_first());
    let driver = Driver::new(&store);
    let rng = &mut rand_core::UnwrapErr(NoRng);
    let due = T0 + Duration::hours(720);
    let not_yet = advance(&driver, "db", AdvanceOptions::default(), T0, rng).unwrap();
    assert_eq!(ended(&not_yet).steps, 0);
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
        (ended(&a).steps, ended(&a).next.clone(), a.next_wake),
        (1, Next::Step(StepKind::StartMint), due)
    );
    assert_eq!(a.events.len(), 1);
    let zero = AdvanceOptions {
        owner: None,
        max_steps: Some(0),
    };
    let z = advance(&driver, "db", zero, due, rng).unwrap();
    assert_eq!(
        (ended(&z).steps, ended(&z).next.clone()),
        (0, Next::Step(StepKind::StartMint))
    );
    // Then all the rest at once, up to the mint.
    let b = advance(&driver, "db", AdvanceOptions::default(), due, rng).unwrap();
    assert_eq!(ended(&b).steps, 1);
    assert_eq!(
        ended(&b).next,
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
    assert_eq!(ended(&c).steps, 2);
    assert_eq!(
        ended(&c).next,
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

impl crate::model::store::Store for ForgetfulStore {
    fn location(&self) -> String {
        "a store that forgets".into()
    }
    fn get(&self, key: &str) -> Result<Option<(Files, crate::model::store::Revision)>> {
        self.0.get(key)
    }
    fn put(
        &self,
        _key: &str,
        expected: Option<&crate::model::store::Revision>,
        _files: &Files,
    ) -> Result<crate::model::store::Revision> {
        Ok(expected
            .cloned()
            .unwrap_or_else(|| crate::model::store::Revision::new("0")))
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
        RotateError::Credential(crate::CredentialError::NotSettling { steps, .. }) => {
            assert_eq!(steps, ADVANCE_MAX_STEPS)
        }
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
        ended(&first).next,
        Next::Act(Action::Mint {
            rotation: 2,
            attempt: 1
        })
    );
    // The other reconciler is told to wait, whatever it asks.
    for embedder in [b, AdvanceOptions::default()] {
        let other = advance(&driver, "db", embedder, due, rng).unwrap();
        assert_eq!(ended(&other).steps, 0);
        assert_eq!(
            ended(&other).next,
            Next::Act(Action::Wait {
                until: due + MINT_ELSEWHERE_RECHECK,
                reason: WaitReason::MintElsewhere
            })
        );
    }
    // The owner, after a restart, is asked again (to adopt its capture).
    assert_eq!(
        ended(&advance(&driver, "db", a, due, rng).unwrap()).next,
        ended(&first).next
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
            matches!(
                e,
                RotateError::Credential(crate::CredentialError::InvalidMintOwner(_))
            ),
            "{bad:?}: {e}"
        );
    }
}
