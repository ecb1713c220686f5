//! The document as files and Secret data: every file secret, `old` written
//! only once it differs from `current`, strays round-trip, bad policies and
//! names refused, damaged documents clear errors.

use super::*;
use crate::model::document::{Document, File, Files};

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
