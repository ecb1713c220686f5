//! A rotation step by step, and the failures along the way: refused
//! reports, backoff, a failing revocation, hook messages kept on one line.

use super::*;

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
