//! Stray credentials: what a failed mint printed, and a mint reported after
//! the document moved on, kept and revoked before the next attempt.

use super::*;

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
