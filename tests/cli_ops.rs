//! The operations-grade behaviour of the `pki` binary: `status --check`
//! exit codes and wording, guarded leaf changes (`issue --replace`, `renew`,
//! `remove`) and refused trust-breaking rotations.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::cli::{ok, pki, refused, tree};
use support::store::{
    AFTER_CA_EXPIRY, AFTER_ROTATION_POINT, LEAF_DUE, MONTH_LATER, T0, status_json, store,
};

#[test]
fn status_check_exits_0_when_nothing_is_due_3_when_an_action_is_and_4_when_broken() {
    let (_tmp, dir) = store(&[]);
    let code = |now: &str| {
        pki(&["status", &dir, "--check", "--now", now])
            .status
            .code()
    };
    assert_eq!(code("2026-02-01T00:00:00Z"), Some(0));
    // web is due for renewal: `pki rotate` has work to do.
    assert_eq!(code(LEAF_DUE), Some(3));
    // The leaf (365 days) has expired: clients reject the server.
    assert_eq!(code("2027-01-15T00:00:00Z"), Some(4));
    // The CA itself has expired.
    assert_eq!(code(AFTER_CA_EXPIRY), Some(4));
    // Without --check, status reports and exits 0 whatever it finds.
    assert_eq!(
        pki(&["status", &dir, "--now", AFTER_CA_EXPIRY])
            .status
            .code(),
        Some(0)
    );
    // --json carries the same verdict.
    let json = status_json(&dir, LEAF_DUE);
    assert_eq!(json["health"], "action-due");
    assert_eq!(json["pending"][0]["action"], "issue-leaf");
    assert_eq!(status_json(&dir, AFTER_CA_EXPIRY)["health"], "broken");
}

#[test]
fn status_check_is_not_broken_by_a_previous_ca_distrusted_on_purpose() {
    // 2026-02-01: a month after T0, the emergency; checked a week later,
    // long before the old CA would have expired (2028-03-01).
    let (at, week_later) = ("2026-02-01T00:00:00Z", "2026-02-08T00:00:00Z");
    let code = |dir: &str, now: &str| pki(&["status", dir, "--check", "--now", now]).status.code();
    let (_tmp, dir) = store(&[]);
    ok(&[
        "rotate",
        &dir,
        "--force",
        "key leaked",
        "--compromised",
        "--now",
        at,
    ]);
    assert_eq!(code(&dir, week_later), Some(0));
    let json = status_json(&dir, week_later);
    let retired = json["trust"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["retired"] == true)
        .count();
    assert_eq!(retired, 3, "{json}");
    let text = ok(&["status", &dir, "--now", week_later]);
    assert!(text.contains("as intended: retired"), "{text}");

    let (_tmp, dir) = store(&[]);
    ok(&[
        "rotate", &dir, "--force", "drill", "--grace", "1d", "--now", at,
    ]);
    // The expired bridge A is still to be pruned: due, not broken.
    assert_eq!(code(&dir, week_later), Some(3));
    ok(&["rotate", &dir, "--now", week_later]);
    assert_eq!(code(&dir, week_later), Some(0));
}

#[test]
fn status_marks_expired_certificates_and_words_past_dates_as_past() {
    let (_tmp, dir) = store(&[]);
    let text = ok(&["status", &dir, "--now", AFTER_CA_EXPIRY]);
    let web = text.lines().find(|l| l.contains("web.ns.svc")).unwrap();
    assert!(web.contains("EXPIRED"), "{web}");
    assert!(text.contains("BROKEN: the CA"), "{text}");
    assert!(text.contains("CA expired"), "{text}");
    assert!(
        !text.contains("left, less than"),
        "negative time left: {text}"
    );
    assert!(!text.contains("expires soon"), "{text}");
    assert!(!text.contains("-1d") && !text.contains("has -"), "{text}");
    assert!(text.contains("rotation due since"), "{text}");
    // A leaf past its NotAfter is "expired", never "expires soon".
    let json = status_json(&dir, "2027-01-15T00:00:00Z");
    assert_eq!(json["leaves"][0]["state"], "expired");
    assert_eq!(json["leaves"][0]["reissue"]["kind"], "expired");
}

#[test]
fn issue_refuses_a_kind_change_or_dropped_names_without_replace_and_says_why() {
    let (tmp, dir) = store(&[]);
    let before = tree(tmp.path());
    let err = refused(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.ns.svc",
        "--dns",
        "web.ns.svc.cluster.local",
        "--client",
        "--now",
        T0,
    ]);
    assert!(
        err.contains("kind would change from server to client") && err.contains("--replace"),
        "{err}"
    );
    let err = refused(&["issue", &dir, "web", "--dns", "web.ns.svc", "--now", T0]);
    assert!(err.contains("would lose web.ns.svc.cluster.local"), "{err}");
    assert_eq!(
        before,
        tree(tmp.path()),
        "a refused issue changed the store"
    );

    // Adding a name is an ordinary change.
    let out = ok(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.ns.svc",
        "--dns",
        "web.ns.svc.cluster.local",
        "--dns",
        "web.example.org",
        "--now",
        T0,
    ]);
    assert!(out.contains("requested names changed"), "{out}");

    let out = ok(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.ns.svc",
        "--dns",
        "web.ns.svc.cluster.local",
        "--dns",
        "web.example.org",
        "--client",
        "--replace",
        "--now",
        T0,
    ]);
    assert!(
        out.contains("requested kind changed from server to client"),
        "{out}"
    );
    let out = ok(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.ns.svc",
        "--client",
        "--replace",
        "--now",
        T0,
    ]);
    assert!(out.contains("requested names changed"), "{out}");
    let json = status_json(&dir, T0);
    assert_eq!(json["leaves"][0]["kind"], "client");
    assert_eq!(
        json["leaves"][0]["names"],
        serde_json::json!(["web.ns.svc"])
    );
}

#[test]
fn renew_reissues_one_certificate_now_and_remove_deletes_one() {
    let (tmp, dir) = store(&[]);
    ok(&["issue", &dir, "api", "--dns", "api.ns.svc", "--now", T0]);
    let d = tmp.path().join("pki");
    let web = std::fs::read(d.join("certs/web/tls.crt")).unwrap();
    let web_key = std::fs::read(d.join("certs/web/tls.key")).unwrap();
    let api = std::fs::read(d.join("certs/api/tls.crt")).unwrap();

    let out = ok(&["renew", &dir, "web", "--now", "2026-02-01T00:00:00Z"]);
    assert!(
        out.contains("issued web") && out.contains("renewed on request"),
        "{out}"
    );
    assert_ne!(web, std::fs::read(d.join("certs/web/tls.crt")).unwrap());
    assert_ne!(web_key, std::fs::read(d.join("certs/web/tls.key")).unwrap());
    assert_eq!(api, std::fs::read(d.join("certs/api/tls.crt")).unwrap());
    let json = status_json(&dir, "2026-02-01T00:00:00Z");
    // Issued now (backdated a few minutes for clock skew), not at T0.
    assert!(
        json["leaves"][1]["cert"]["not_before"].as_str().unwrap() > "2026-01-31",
        "{json}"
    );

    let before = tree(tmp.path());
    let err = refused(&["renew", &dir, "nope", "--now", "2026-02-01T00:00:00Z"]);
    assert!(err.contains("no certificate named \"nope\""), "{err}");
    assert_eq!(before, tree(tmp.path()));

    let out = ok(&["remove", &dir, "api", "--now", "2026-02-01T00:00:00Z"]);
    assert!(out.contains("removed api"), "{out}");
    assert!(!d.join("certs/api").exists());
    assert!(d.join("certs/web/tls.crt").exists());
    let json = status_json(&dir, "2026-02-01T00:00:00Z");
    assert_eq!(json["leaves"].as_array().unwrap().len(), 1);
    // Removing it again is what a rerun after a kill that landed does:
    // nothing to do (issue 31), where it used to be refused.
    let before = tree(tmp.path());
    let out = ok(&["remove", &dir, "api", "--now", "2026-02-01T00:00:00Z"]);
    assert!(
        out.contains("nothing to do: no certificate named \"api\""),
        "{out}"
    );
    assert_eq!(before, tree(tmp.path()));
}

#[test]
fn a_remove_rerun_is_nothing_to_do_by_parts_or_whole_while_renew_of_a_missing_name_fails() {
    let (tmp, dir) = store(&[]);
    let d = tmp.path().join("pki");
    let now = "2026-02-01T00:00:00Z";
    ok(&["issue", &dir, "api", "--dns", "api.ns.svc", "--now", T0]);
    ok(&["remove", &dir, "api", "--now", T0]);
    for whole in [false, true] {
        if whole {
            // Without the store's summary the step reads the whole document.
            let live = d.join(std::fs::read_link(d.join(".data")).unwrap());
            std::fs::remove_file(live.join(".index.json")).unwrap();
        }
        let before = tree(tmp.path());
        for name in ["api", "never-issued"] {
            let out = ok(&["remove", &dir, name, "--now", now]);
            assert_eq!(
                out.trim(),
                format!("nothing to do: no certificate named \"{name}\""),
                "whole: {whole}"
            );
        }
        assert_eq!(before, tree(tmp.path()), "whole: {whole}");
    }
    // A renewal needs the certificate: it is still refused.
    let err = refused(&["renew", &dir, "api", "--now", now]);
    assert!(err.contains("no certificate named \"api\""), "{err}");
}

#[test]
fn rotating_an_expired_ca_is_refused_unless_the_trust_break_is_allowed_and_recorded() {
    let (tmp, dir) = store(&[]);
    let before = tree(tmp.path());
    let err = refused(&["rotate", &dir, "--now", AFTER_CA_EXPIRY]);
    assert!(
        err.contains("expired at 2028-03-01T00:00:00Z")
            && err.contains("no bridge can be made")
            && err.contains("--allow-trust-break"),
        "{err}"
    );
    assert_eq!(before, tree(tmp.path()), "a refused rotation wrote");

    let out = ok(&[
        "rotate",
        &dir,
        "--allow-trust-break",
        "CA lapsed over the holidays",
        "--now",
        AFTER_CA_EXPIRY,
    ]);
    assert!(
        out.contains("trust break allowed: previous-ca-expired"),
        "{out}"
    );
    let json = status_json(&dir, AFTER_CA_EXPIRY);
    let record = &json["history"][0];
    assert_eq!(record["reason"]["kind"], "expiring");
    assert_eq!(record["previous_trusted_until"], serde_json::Value::Null);
    assert_eq!(record["overridden"][0]["name"], "previous-ca-expired");
    let detail = record["overridden"][0]["detail"].as_str().unwrap();
    assert!(detail.contains("CA lapsed over the holidays"), "{detail}");
}

#[test]
fn a_forced_rotation_soon_after_another_is_refused_naming_who_breaks_and_until_when() {
    let (tmp, dir) = store(&[]);
    ok(&["rotate", &dir, "--now", AFTER_ROTATION_POINT]);
    let before = tree(tmp.path());
    let err = refused(&[
        "rotate",
        &dir,
        "--force",
        "key ceremony",
        "--now",
        MONTH_LATER,
    ]);
    // Without a reload interval, consumers may hold old files for up to M
    // (395d) after the rotation at 2027-02-01; the first CA expires before.
    assert!(
        err.contains(
            "clients still holding the bundle from before the rotation at 2027-02-01T00:00:00Z"
        ) && err.contains("servers still presenting certificates of CA")
            && err.contains("until 2028-03-01T00:00:00Z"),
        "{err}"
    );
    assert_eq!(before, tree(tmp.path()), "a refused rotation wrote");

    let json: serde_json::Value = serde_json::from_str(&ok(&[
        "rotate",
        &dir,
        "--force",
        "key ceremony",
        "--allow-trust-break",
        "all consumers restarted",
        "--json",
        "--now",
        MONTH_LATER,
    ]))
    .unwrap();
    assert_eq!(json["rotated"], true);
    let record = &json["rotation"];
    assert_eq!(record["reason"]["kind"], "forced");
    assert_eq!(record["reason"]["reason"], "key ceremony");
    let overridden = record["overridden"].as_array().unwrap();
    assert_eq!(overridden.len(), 2, "{overridden:?}");
    assert!(
        overridden
            .iter()
            .all(|o| o["name"] == "bundle-of-two-rotations-ago")
    );
    assert_eq!(status_json(&dir, MONTH_LATER)["history"][1], *record);
}

#[test]
fn a_forced_rotation_after_the_reload_interval_needs_no_override() {
    let (_tmp, dir) = store(&["--reload-interval", "7d"]);
    ok(&["rotate", &dir, "--now", AFTER_ROTATION_POINT]);
    // Six days later a consumer may still hold the first bundle...
    let err = refused(&[
        "rotate",
        &dir,
        "--force",
        "early",
        "--now",
        "2027-02-07T00:00:00Z",
    ]);
    assert!(err.contains("until 2027-02-08T00:00:00Z"), "{err}");
    // ...a month later every one has reloaded.
    let out = ok(&[
        "rotate",
        &dir,
        "--force",
        "key ceremony",
        "--now",
        MONTH_LATER,
    ]);
    assert!(out.contains("forced: key ceremony"), "{out}");
    let json = status_json(&dir, MONTH_LATER);
    assert!(json["history"][1].get("overridden").is_none(), "{json}");
}
