//! `pki demo`: a whole service-CA lifecycle on a temporary store, with a
//! simulated clock, proving trust with real TLS handshakes on loopback.

use crate::common::{CliError, CliResult, StoreArg, load_signer, when};
use pki_core::{Bundle, Certificate, PrivateKey};
use pki_rotate::SignerState;
use std::path::Path;
use time::{Duration, OffsetDateTime};

/// What a server serves and what a client trusts at one moment.
struct Snapshot {
    chain: Vec<Certificate>,
    key: PrivateKey,
    bundle: Bundle,
}

fn snapshot(state: &SignerState, name: &str) -> CliResult<Snapshot> {
    let issued = state
        .leaves
        .get(name)
        .and_then(|l| l.issued.as_ref())
        .ok_or_else(|| CliError::new(format!("demo: {name} was not issued")))?;
    Ok(Snapshot {
        chain: state.serving_chain(&issued.cert),
        key: issued.key.clone(),
        bundle: state.bundle.clone(),
    })
}

fn heading(step: &str) {
    crate::outln!("\n== {step}");
}

fn cell(server: &Snapshot, client: &Snapshot, at: OffsetDateTime) -> (bool, String) {
    match crate::tls::handshake(
        &server.chain,
        &server.key,
        &client.bundle,
        "web.demo.svc",
        at,
    ) {
        Ok(()) => (true, "ok".into()),
        Err(e) => (false, format!("FAIL ({e})")),
    }
}

/// Prints the 4-cell matrix and returns whether every cell verified.
fn matrix(old: &Snapshot, new: &Snapshot, at: OffsetDateTime, label: &str) -> bool {
    crate::outln!(
        "   trust matrix at {} ({label}), each cell a TLS handshake on 127.0.0.1:",
        pki_core::datetime::rfc3339(at)
    );
    crate::outln!("   {:<22} {:<14} {:<14}", "", "old bundle", "new bundle");
    let mut all = true;
    for (row, server) in [("old serving chain", old), ("new serving chain", new)] {
        let (a_ok, a) = cell(server, old, at);
        let (b_ok, b) = cell(server, new, at);
        all &= a_ok && b_ok;
        crate::outln!("   {row:<22} {a:<14} {b:<14}");
    }
    all
}

/// `start`: the simulated clock's first moment (the current hour when
/// `None`); `svg`: where to draw the store's timeline at the end.
pub fn run(keep: Option<&Path>, start: Option<OffsetDateTime>, svg: Option<&Path>) -> CliResult {
    if let Some(path) = svg {
        crate::timeline_svg::check_path(path)?;
    }
    let tmp;
    let dir = match keep {
        Some(d) => d.to_path_buf(),
        None => {
            tmp = tempfile::tempdir()
                .map_err(|e| CliError::new(format!("cannot create a temporary directory: {e}")))?;
            tmp.path().join("pki")
        }
    };
    let store = StoreArg::Dir(dir.clone());
    // The simulated clock starts at the current hour unless told; every
    // step passes it as --now.
    let t0 = match start {
        Some(t) => pki_core::datetime::truncate(t),
        None => pki_core::datetime::truncate(OffsetDateTime::now_utc())
            .replace_minute(0)
            .and_then(|t| t.replace_second(0))
            .map_err(|e| CliError::new(e.to_string()))?,
    };
    crate::outln!("pki demo: a service CA through automatic and forced rotation");
    crate::outln!(
        "store: {}   simulated start: {}",
        dir.display(),
        pki_core::datetime::rfc3339(t0)
    );

    let state = init_and_issue(&store, t0)?;
    let t_rot = state.rotation_due_at(&state.policy) + Duration::hours(1);
    let (before, new) = automatic_rotation(&store, &state, t0, t_rot)?;

    let t_forced = t_rot + Duration::days(30);
    let forced = forced_rotation(&store, &new, t_forced)?;

    heading("7. pki status DIR");
    let output = crate::status::Output::default();
    let prefix = pki_kube::controller::DEFAULT_ANNOTATION_PREFIX;
    crate::status::run_drawing(&store, output, t_forced + Duration::hours(1), svg, prefix)?;

    print_timeline(t0, &before, &forced);
    crate::outln!("\ndone: trust held in every cell through both rotations.");
    if let Some(path) = svg {
        crate::outln!("the store's timeline is drawn in {}", path.display());
    }
    if keep.is_some() {
        crate::outln!("the store is kept in {}", dir.display());
    }
    Ok(())
}

/// Steps 1 and 2: a store with a CA, and two certificates issued.
fn init_and_issue(store: &StoreArg, t0: OffsetDateTime) -> CliResult<SignerState> {
    heading(
        "1. pki init DIR --cn demo-service-ca --reload-interval 7d   (CA lifetime D = 790d, minimum trust M = 395d)",
    );
    let state = crate::init::run(&crate::init::InitArgs {
        dir: store,
        common_name: "demo-service-ca",
        key: pki_core::KeyAlgorithm::EcdsaP256,
        lifetime: pki_core::policy::DEFAULT_LIFETIME,
        min_trust: pki_core::policy::DEFAULT_MIN_TRUST,
        // Every consumer reloads within a week: a forced rotation a month
        // after the automatic one strands nobody (see step 6).
        reload_interval: Some(Duration::days(7)),
        now: t0,
        key_store: None,
    })?;

    heading(
        "2. pki issue DIR web --dns web.demo.svc;  pki issue DIR api --dns api.demo.svc --ip 10.0.0.7",
    );
    crate::issue::run(crate::issue::IssueArgs {
        dir: store,
        name: "web",
        dns: vec!["web.demo.svc".into()],
        ip: vec![],
        client: false,
        lifetime: None,
        replace: false,
        json: false,
        now: t0,
    })?;
    crate::issue::run(crate::issue::IssueArgs {
        dir: store,
        name: "api",
        dns: vec!["api.demo.svc".into()],
        ip: vec![
            "10.0.0.7"
                .parse()
                .map_err(|_| CliError::new("bad demo IP"))?,
        ],
        client: false,
        lifetime: None,
        replace: false,
        json: false,
        now: t0,
    })?;
    Ok(state)
}

/// Steps 3 to 5: the daily run re-issues the leaves, the CA rotates when
/// less than M remains, and every server verifies with every client
/// around the rotation. Returns the store before the rotation and the new
/// serving material.
fn automatic_rotation(
    store: &StoreArg,
    state: &SignerState,
    t0: OffsetDateTime,
    t_rot: OffsetDateTime,
) -> CliResult<(SignerState, Snapshot)> {
    // The first daily run after the leaves cross their refresh point (80%
    // of 365d is 292d): they still have a fifth of their life left when
    // they are re-issued, and the event says so.
    let leaf_life = pki_rotate::DEFAULT_LEAF_LIFETIME;
    let refresh_at = t0 + leaf_life * (1.0 - state.policy.leaf_refresh_fraction);
    let t_cron = refresh_at + Duration::days(1);
    heading(&format!(
        "3. {}: the daily `pki rotate DIR` re-issues certificates near their end ({}d leaves, refreshed once less than {:.0}% is left)",
        when(t_cron, t0),
        leaf_life.whole_days(),
        state.policy.leaf_refresh_fraction * 100.0,
    ));
    crate::rotate::run(store, None, t_cron)?;
    let before = load_signer(store)?;
    let old = snapshot(&before, "web")?;

    heading(&format!(
        "4. {}: less than M remains on the CA;  pki rotate DIR",
        when(t_rot, t0)
    ));
    crate::rotate::run(store, None, t_rot)?;
    let after = load_signer(store)?;
    let new = snapshot(&after, "web")?;

    heading("5. every server (old or new chain) against every client (old or new bundle)");
    let old_leaf_end = old.chain[0].not_after();
    let mut ok = matrix(
        &old,
        &new,
        t_rot + Duration::minutes(1),
        "just after rotation",
    );
    ok &= matrix(
        &old,
        &new,
        old_leaf_end - Duration::minutes(1),
        "just before the old serving cert expires",
    );
    if !ok {
        return Err(CliError::new("demo: a trust matrix cell failed"));
    }
    crate::outln!("   new serving chain = leaf + bridge B (new CA signed by the old key);");
    crate::outln!("   new bundle = new CA + bridge A (old CA signed by the new key).");
    Ok((before, new))
}

/// Step 6: a forced rotation, once per reason, that strands nobody.
fn forced_rotation(
    store: &StoreArg,
    new: &Snapshot,
    t_forced: OffsetDateTime,
) -> CliResult<SignerState> {
    heading(&format!(
        "6. {}: pki rotate DIR --force \"key ceremony\"   (once per reason)",
        pki_core::datetime::rfc3339(t_forced)
    ));
    let ceremony = pki_rotate::ForcedRotation::new("key ceremony");
    crate::rotate::run(store, Some(&ceremony), t_forced)?;
    crate::outln!("   running it again with the same reason:");
    crate::rotate::run(store, Some(&ceremony), t_forced + Duration::minutes(5))?;
    let forced = load_signer(store)?;
    let newest = snapshot(&forced, "web")?;
    if !matrix(
        new,
        &newest,
        t_forced + Duration::minutes(1),
        "after the forced rotation",
    ) {
        return Err(CliError::new(
            "demo: a trust matrix cell failed after the forced rotation",
        ));
    }
    Ok(forced)
}

/// Step 8: when the CA was created, and every rotation since.
fn print_timeline(t0: OffsetDateTime, before: &SignerState, forced: &SignerState) {
    heading("8. timeline");
    crate::outln!(
        "   {}  CA {} created",
        pki_core::datetime::rfc3339(t0),
        before.ca.cert.id()
    );
    for r in &forced.history {
        let until = r
            .previous_trusted_until
            .map(|t| format!("previous trusted until {}", pki_core::datetime::rfc3339(t)))
            .unwrap_or_else(|| "previous distrusted".into());
        crate::outln!(
            "   {}  {} -> {}  {}; {until}",
            pki_core::datetime::rfc3339(r.at),
            r.from,
            r.to,
            r.reason
        );
    }
}
