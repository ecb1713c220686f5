//! `pki keys …` end to end: tokens signed before a rotation verify during
//! the grace period and fail after it, checked by `pki keys verify` and by
//! PyJWT (an independent JOSE implementation) reading `jwks.json`; forced
//! rotations once per reason, byte for byte; imports; file modes under
//! umask 000; bad input as one line with exit 1.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use support::cli::{ok, pki, refused};

// 2026-01-01T00:00:00Z: every ring here is created then.
const T0: &str = "2026-01-01T00:00:00Z";
const T0_UNIX: i64 = 1_767_225_600;

fn at(seconds_after_t0: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(T0_UNIX + seconds_after_t0).unwrap();
    pki_core::datetime::rfc3339(t)
}

const HOUR: i64 = 3600;
const DAY: i64 = 86_400;

/// Every file under `dir` (following links), for before/after comparisons.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            let rel = path.strip_prefix(base).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(rel, target.display().to_string().into_bytes());
            } else if meta.is_dir() {
                walk(base, &path, out);
            } else {
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn ring(tmp: &tempfile::TempDir, extra: &[&str]) -> String {
    let dir = tmp.path().join("pki").display().to_string();
    let mut args = vec!["keys", "init", &dir, "--now", T0];
    args.extend_from_slice(extra);
    ok(&args);
    dir
}

fn write(tmp: &tempfile::TempDir, name: &str, contents: &str) -> String {
    let p = tmp.path().join(name);
    std::fs::write(&p, contents).unwrap();
    p.display().to_string()
}

fn sign(tmp: &tempfile::TempDir, dir: &str, name: &str, claims: &str, now: &str) -> String {
    let claims = write(tmp, &format!("{name}.json"), claims);
    let out = ok(&["keys", "sign", dir, "--claims", &claims, "--now", now]);
    assert_eq!(out.lines().count(), 1, "one line: {out}");
    write(tmp, &format!("{name}.jwt"), out.trim_end())
}

/// Runs the PyJWT check on `token` against a JWK Set file at a time.
fn pyjwt_check(jwks: &Path, token: &str, now_unix: i64) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jose/verify_with_pyjwt.py");
    let o = Command::new(support::cli::python_with_pyjwt())
        .arg(script)
        .arg(jwks)
        .arg(token)
        .arg(now_unix.to_string())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !err.contains("Traceback"),
        "the PyJWT check itself failed: {err}"
    );
    o
}

/// PyJWT's verdict on `token` against `DIR/keys/jwks.json` at a time,
/// after it recomputed every `kid` there as an RFC 7638 thumbprint.
fn pyjwt_accepts(dir: &str, token: &str, now_unix: i64) -> bool {
    let o = pyjwt_check(&Path::new(dir).join("keys/jwks.json"), token, now_unix);
    assert_ne!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.status.success()
}

fn pki_accepts(dir: &str, token: &str, now: &str) -> bool {
    let o = pki(&["keys", "verify", dir, "--token", token, "--now", now]);
    match o.status.code() {
        Some(0) => true,
        Some(1) => false,
        other => panic!("keys verify exited {other:?}"),
    }
}

#[test]
fn tokens_signed_before_a_rotation_verify_during_the_grace_and_fail_after_it() {
    for key in ["p256", "rsa2048"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = ring(
            &tmp,
            &["--key", key, "--grace", "24h", "--max-token-lifetime", "2h"],
        );
        // Signed an hour before the rotation, valid for two hours.
        let signed = 10 * DAY;
        let claims = format!(
            r#"{{"iss":"k3s","sub":"system:serviceaccount:kube-system:coredns","iat":{},"exp":{}}}"#,
            T0_UNIX + signed,
            T0_UNIX + signed + 2 * HOUR
        );
        let token = sign(&tmp, &dir, "old", &claims, &at(signed));
        let rotated = signed + HOUR;
        let out = ok(&[
            "keys",
            "rotate",
            &dir,
            "--force",
            "drill",
            "--now",
            &at(rotated),
        ]);
        assert!(out.contains("rotated signing key"), "{out}");
        // During the grace (and the token's life): both verifiers accept it.
        let during = rotated + 30 * 60;
        assert!(pki_accepts(&dir, &token, &at(during)), "{key}");
        assert!(pyjwt_accepts(&dir, &token, T0_UNIX + during), "{key}");
        // A token with no exp of its own, signed just before the rotation
        // (by a ring that does not bound token lifetimes): accepted until
        // the grace ends, counted from the rotation.
        let lax_tmp = tempfile::tempdir().unwrap();
        let lax = ring(&lax_tmp, &["--key", key, "--grace", "24h"]);
        let forever = sign(
            &lax_tmp,
            &lax,
            "forever",
            r#"{"sub":"legacy"}"#,
            &at(signed),
        );
        ok(&[
            "keys",
            "rotate",
            &lax,
            "--force",
            "drill",
            "--now",
            &at(rotated),
        ]);
        let end = rotated + DAY;
        assert!(pki_accepts(&lax, &forever, &at(end - 1)));
        assert!(pyjwt_accepts(&lax, &forever, T0_UNIX + end - 1));
        assert!(!pki_accepts(&lax, &forever, &at(end)), "grace over");
        // `keys rotate` without --force removes the expired key from the
        // published files: PyJWT no longer finds it either.
        let out = ok(&["keys", "rotate", &lax, "--now", &at(end)]);
        assert!(out.contains("grace period has ended"), "{out}");
        assert!(!pyjwt_accepts(&lax, &forever, T0_UNIX + end));
        let err = refused(&[
            "keys",
            "verify",
            &lax,
            "--token",
            &forever,
            "--now",
            &at(end),
        ]);
        assert!(err.contains("is not an accepted key"), "{err}");
        // The original token expires on its own exp, for both verifiers.
        let after_exp = signed + 2 * HOUR;
        let err = refused(&[
            "keys",
            "verify",
            &dir,
            "--token",
            &token,
            "--now",
            &at(after_exp),
        ]);
        assert!(err.contains("expired"), "{err}");
        assert!(!pyjwt_accepts(&dir, &token, T0_UNIX + after_exp));
        // New tokens come from the new key and verify with both.
        let fresh = sign(
            &tmp,
            &dir,
            "new",
            &format!(r#"{{"sub":"a","exp":{}}}"#, T0_UNIX + during + HOUR),
            &at(during),
        );
        assert!(pki_accepts(&dir, &fresh, &at(during)));
        assert!(pyjwt_accepts(&dir, &fresh, T0_UNIX + during));
    }
}

#[test]
fn published_files_follow_the_contract() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ring(&tmp, &[]);
    ok(&["keys", "rotate", &dir, "--force", "x", "--now", &at(HOUR)]);
    let keys = Path::new(&dir).join("keys");
    let pem = std::fs::read_to_string(keys.join("public.pem")).unwrap();
    let blocks = pki_core::pem::read_blocks(pem.as_bytes()).unwrap();
    assert_eq!(blocks.len(), 2);
    assert!(blocks.iter().all(|b| b.label == "PUBLIC KEY"));
    let jwks: serde_json::Value =
        serde_json::from_slice(&std::fs::read(keys.join("jwks.json")).unwrap()).unwrap();
    let list = jwks["keys"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    for k in list {
        assert_eq!(k["kty"], "EC");
        for c in ["x", "y"] {
            // 32 bytes: 43 unpadded base64url characters.
            assert_eq!(k[c].as_str().unwrap().len(), 43);
        }
    }
    let active = std::fs::read_to_string(keys.join("active.key")).unwrap();
    assert!(active.starts_with("-----BEGIN PRIVATE KEY-----"));
    // The token header: alg, kid of the active key, typ JWT; the claims as given.
    let claims = r#"{"sub":"x",  "custom":[1,2]}"#;
    let token = std::fs::read_to_string(sign(&tmp, &dir, "t", claims, &at(HOUR))).unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    use base64::Engine as _;
    let header: serde_json::Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(parts[0])
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["alg"], "ES256");
    assert_eq!(header["typ"], "JWT");
    assert_eq!(header["kid"], list[0]["kid"]);
    assert_eq!(
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(parts[1])
            .unwrap(),
        claims.as_bytes()
    );
    // status --json
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["keys", "status", &dir, "--json", "--now", &at(HOUR)])).unwrap();
    assert_eq!(status["active"]["kid"], list[0]["kid"]);
    assert_eq!(status["accepted"][0]["kid"], list[1]["kid"]);
    assert_eq!(status["accepted"][0]["accepted_until"], at(HOUR + DAY));
    assert_eq!(status["history"][0]["reason"]["reason"], "x");
    let text = ok(&["keys", "status", &dir, "--now", &at(HOUR)]);
    assert!(text.contains("accepted key"), "{text}");
}

#[test]
fn python_recomputes_every_kid_as_the_rfc7638_thumbprint_of_its_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ring(&tmp, &[]);
    let rsa_tmp = tempfile::tempdir().unwrap();
    let rsa = ring(&rsa_tmp, &["--key", "rsa2048"]);
    // A ring with an EC and an RSA key published side by side.
    ok(&["keys", "rotate", &dir, "--force", "x", "--now", &at(HOUR)]);
    let token = sign(&tmp, &dir, "t", "{}", &at(HOUR));
    assert!(pyjwt_accepts(&dir, &token, T0_UNIX + HOUR));
    assert!(pyjwt_accepts(
        &rsa,
        &sign(&rsa_tmp, &rsa, "r", "{}", T0),
        T0_UNIX
    ));
    // The check is independent of pki's kids: one changed character in a
    // kid, or a kid moved to another key, is caught before any signature.
    let jwks = std::fs::read_to_string(Path::new(&dir).join("keys/jwks.json")).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&jwks).unwrap();
    let kid0 = doc["keys"][0]["kid"].as_str().unwrap().to_string();
    let kid1 = doc["keys"][1]["kid"].as_str().unwrap().to_string();
    let mut flipped = kid1.clone();
    let last = if flipped.ends_with('A') { "B" } else { "A" };
    flipped.replace_range(flipped.len() - 1.., last);
    for (k0, k1) in [(kid0.clone(), flipped), (kid1, kid0)] {
        doc["keys"][0]["kid"] = k0.into();
        doc["keys"][1]["kid"] = k1.into();
        let bad = write(&tmp, "bad-jwks.json", &doc.to_string());
        let o = pyjwt_check(Path::new(&bad), &token, T0_UNIX + HOUR);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("is not its RFC 7638 thumbprint"), "{err}");
    }
}

#[test]
fn the_same_forced_reason_again_changes_no_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ring(&tmp, &[]);
    ok(&[
        "keys",
        "rotate",
        &dir,
        "--force",
        "leak",
        "--now",
        &at(HOUR),
    ]);
    let before = tree(Path::new(&dir));
    let out = ok(&[
        "keys",
        "rotate",
        &dir,
        "--force",
        "leak",
        "--now",
        &at(2 * HOUR),
    ]);
    assert!(out.contains("nothing to do"), "{out}");
    assert_eq!(tree(Path::new(&dir)), before, "byte-identical");
    // Age rotation 90 days (the default lifetime) after the key became active.
    ok(&["keys", "rotate", &dir, "--now", &at(90 * DAY + HOUR)]);
    let status: serde_json::Value = serde_json::from_str(&ok(&[
        "keys",
        "status",
        &dir,
        "--json",
        "--now",
        &at(90 * DAY + HOUR),
    ]))
    .unwrap();
    assert_eq!(status["history"].as_array().unwrap().len(), 2);
    assert_eq!(status["history"][1]["reason"]["kind"], "age");
}

#[test]
fn a_k3s_service_key_is_imported_and_the_active_one_leaves_after_its_grace() {
    let tmp = tempfile::tempdir().unwrap();
    // Three rings stand for three generations of a k3s cluster's keys.
    let a = ring(&tmp, &[]);
    let b_tmp = tempfile::tempdir().unwrap();
    let b = ring(&b_tmp, &["--key", "rsa2048"]);
    let c_tmp = tempfile::tempdir().unwrap();
    let c = ring(&c_tmp, &[]);
    let token_a = sign(&tmp, &a, "a", r#"{"sub":"a"}"#, T0);
    let token_b = sign(&b_tmp, &b, "b", r#"{"sub":"b"}"#, T0);
    let token_c = sign(&c_tmp, &c, "c", r#"{"sub":"c"}"#, T0);
    let file =
        |d: &str, f: &str| std::fs::read_to_string(Path::new(d).join("keys").join(f)).unwrap();
    let kid = |d: &str| {
        let jwks: serde_json::Value = serde_json::from_str(&file(d, "jwks.json")).unwrap();
        jwks["keys"][0]["kid"].as_str().unwrap().to_string()
    };
    let service_key = write(
        &tmp,
        "service.key",
        &format!(
            "{}{}{}",
            file(&b, "active.key"),
            file(&a, "active.key"),
            file(&c, "active.key")
        ),
    );
    let imported = tmp.path().join("imported").display().to_string();
    let out = ok(&[
        "keys",
        "init",
        &imported,
        "--import",
        &service_key,
        "--now",
        T0,
    ]);
    assert!(out.contains("2 imported key(s) kept accepted"), "{out}");
    for t in [&token_a, &token_b, &token_c] {
        assert!(pki_accepts(&imported, t, &at(400 * DAY)));
        assert!(pyjwt_accepts(&imported, t, T0_UNIX));
    }
    // The first key of service.key signs.
    let t = sign(&tmp, &imported, "d", r#"{"sub":"d"}"#, T0);
    assert!(pki_accepts(&b, &t, T0));
    let published = |d: &str| -> (Vec<String>, String) {
        let jwks: serde_json::Value = serde_json::from_str(&file(d, "jwks.json")).unwrap();
        let kids = jwks["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kid"].as_str().unwrap().to_string())
            .collect();
        (kids, file(d, "public.pem"))
    };
    // Rotated out, the imported active key stays accepted for the grace
    // (24h by default)…
    ok(&[
        "keys",
        "rotate",
        &imported,
        "--force",
        "adopt",
        "--now",
        &at(HOUR),
    ]);
    ok(&["keys", "rotate", &imported, "--now", &at(HOUR + DAY - 1)]);
    let (kids, pem) = published(&imported);
    assert!(kids.contains(&kid(&b)) && pem.contains(&file(&b, "public.pem")));
    assert!(pki_accepts(&imported, &token_b, &at(HOUR + DAY - 1)));
    // …then the next rotate removes it from public.pem and jwks.json; the
    // imported keys that never signed here stay until retired.
    ok(&["keys", "rotate", &imported, "--now", &at(HOUR + DAY)]);
    let (kids, pem) = published(&imported);
    assert_eq!(kids.len(), 3, "{kids:?}");
    assert!(!kids.contains(&kid(&b)), "{kids:?}");
    assert!(!pem.contains(&file(&b, "public.pem")), "{pem}");
    for d in [&a, &c] {
        assert!(kids.contains(&kid(d)) && pem.contains(&file(d, "public.pem")));
    }
    assert!(!pyjwt_accepts(&imported, &token_b, T0_UNIX));
    assert!(!pki_accepts(&imported, &token_b, &at(HOUR + DAY)));
    ok(&["keys", "rotate", &imported, "--now", &at(30 * DAY)]);
    for t in [&token_a, &token_c] {
        assert!(pyjwt_accepts(&imported, t, T0_UNIX));
        assert!(pki_accepts(&imported, t, &at(30 * DAY)));
    }
    assert_eq!(published(&imported).0.len(), 3);
}

#[test]
fn keys_are_0600_and_directories_0700_under_umask_000() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki");
    let status = Command::new("sh")
        .arg("-c")
        .arg("umask 000 && exec \"$0\" keys init \"$1\" --now \"$2\" && exec \"$0\" keys rotate \"$1\" --force x --now \"$2\"")
        .arg(env!("CARGO_BIN_EXE_pki"))
        .arg(&dir)
        .arg(T0)
        .status()
        .unwrap();
    assert!(status.success());
    let key = std::fs::canonicalize(dir.join("keys/active.key")).unwrap();
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let parent = key.parent().unwrap();
    assert_eq!(
        std::fs::metadata(parent).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
}

#[test]
fn bad_input_fails_with_one_line_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ring(&tmp, &["--max-token-lifetime", "1h"]);
    let before = tree(Path::new(&dir));
    let bad_claims = write(&tmp, "bad.json", "{\"sub\": ");
    let err = refused(&["keys", "sign", &dir, "--claims", &bad_claims, "--now", T0]);
    assert!(err.contains("claims: not JSON"), "{err}");
    let array = write(&tmp, "array.json", "[1]");
    let err = refused(&["keys", "sign", &dir, "--claims", &array, "--now", T0]);
    assert!(err.contains("not a JSON object"), "{err}");
    let long = write(
        &tmp,
        "long.json",
        &format!(r#"{{"exp":{}}}"#, T0_UNIX + 2 * HOUR),
    );
    let err = refused(&["keys", "sign", &dir, "--claims", &long, "--now", T0]);
    assert!(err.contains("longest token lifetime"), "{err}");
    // A time before the active key existed: refused, saying why and from when.
    let short = write(&tmp, "short.json", &format!(r#"{{"exp":{T0_UNIX}}}"#));
    let err = refused(&["keys", "sign", &dir, "--claims", &short, "--now", &at(-1)]);
    assert!(
        err.contains("cannot sign a token at 2025-12-31T23:59:59Z")
            && err.contains("behind")
            && err.contains("use 2026-01-01T00:00:00Z or later"),
        "{err}"
    );
    let missing = tmp.path().join("nope.json").display().to_string();
    let err = refused(&["keys", "sign", &dir, "--claims", &missing, "--now", T0]);
    assert!(err.contains("nope.json"), "{err}");
    for (name, token, expect) in [
        ("garbage", "not a token", "3"),
        ("two", "a.b", "3"),
        ("b64", "!!.e30.AA", "base64url"),
        (
            "unknown-kid",
            "eyJhbGciOiJFUzI1NiIsImtpZCI6Im5vYm9keSJ9.e30.AAAA",
            "\"nobody\" is not an accepted key",
        ),
        (
            "none",
            "eyJhbGciOiJub25lIiwia2lkIjoieCJ9.e30.",
            "\"none\" is not accepted",
        ),
    ] {
        let path = write(&tmp, name, token);
        let err = refused(&["keys", "verify", &dir, "--token", &path, "--now", T0]);
        assert!(
            err.contains("token rejected") && err.contains(expect),
            "{name}: {err}"
        );
    }
    // A signature from another ring under this ring's kid.
    let other_tmp = tempfile::tempdir().unwrap();
    let other = ring(&other_tmp, &[]);
    let foreign = std::fs::read_to_string(sign(&tmp, &other, "f", "{}", T0)).unwrap();
    let kid = ok(&["keys", "status", &dir, "--json", "--now", T0]);
    let kid: serde_json::Value = serde_json::from_str(&kid).unwrap();
    let header = serde_json::json!({"alg":"ES256","kid":kid["active"]["kid"],"typ":"JWT"});
    use base64::Engine as _;
    let mut parts: Vec<String> = foreign.trim().split('.').map(String::from).collect();
    parts[0] =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(header.to_string().as_bytes());
    let forged = write(&tmp, "forged", &parts.join("."));
    let err = refused(&["keys", "verify", &dir, "--token", &forged, "--now", T0]);
    assert!(err.contains("signature does not verify"), "{err}");
    // Refused policies and imports, a second init, an empty reason.
    let other_dir = tmp.path().join("p2").display().to_string();
    let err = refused(&[
        "keys",
        "init",
        &other_dir,
        "--grace",
        "30m",
        "--max-token-lifetime",
        "1h",
    ]);
    assert!(
        err.contains("does not cover the longest token lifetime"),
        "{err}"
    );
    assert!(!Path::new(&other_dir).exists());
    let junk = write(&tmp, "junk.key", "hello");
    let err = refused(&["keys", "init", &other_dir, "--import", &junk]);
    assert!(err.contains("junk.key"), "{err}");
    let err = refused(&["keys", "init", &dir, "--now", T0]);
    assert!(err.contains("already exists"), "{err}");
    let err = refused(&["keys", "rotate", &dir, "--force", "", "--now", T0]);
    assert!(err.contains("non-empty reason"), "{err}");
    let err = refused(&["keys", "rotate", &dir, "--retire", "nobody", "--now", T0]);
    assert!(err.contains("nobody"), "{err}");
    let err = refused(&["keys", "status", &other_dir]);
    assert!(err.contains("pki keys init"), "{err}");
    assert_eq!(tree(Path::new(&dir)), before);
    // Bad usage is exit 2.
    assert_eq!(pki(&["keys", "sign", &dir]).status.code(), Some(2));
    assert_eq!(
        pki(&["keys", "init", &other_dir, "--key", "dsa"])
            .status
            .code(),
        Some(2)
    );
}
