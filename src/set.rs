//! `pki set …`: a set of CAs rotated in gated steps (GEP-18, StarlingX).
//!
//! Every command loads the set's document through the driver, runs one
//! engine step and prints what happened; the engine decides everything.

use crate::common::{
    CliError, CliResult, DEFAULT_MAX_INPUT, StoreArg, os_rng, parse_duration, parse_size,
    parse_time, read_capped, when,
};
use clap::{Args, Subcommand};
use pki_core::KeyAlgorithm;
use pki_rotate::set::{ImportedCa, KEY, SetStatus};
use pki_rotate::{
    Driver, LeafSpec, Roles, RotateError, SetEngine, SetEvent, SetInput, SetState, SetStep,
};
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::PathBuf;
use time::{Duration, OffsetDateTime};

/// The `pki set` subcommands.
#[derive(Subcommand)]
pub enum SetCommand {
    /// Create a CA set: one new CA per --ca NAME:ROLES.
    Init {
        /// Store directory (created if missing), etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// A CA and its roles: NAME:serving, NAME:client or NAME:serving+client (repeat).
        #[arg(long = "ca", required = true, num_args = 1.., value_parser = parse_ca_roles)]
        cas: Vec<(String, Roles)>,
        /// Key type: p256, p384, rsa2048, rsa3072 or rsa4096.
        #[arg(long, default_value = "p256", value_parser = parse_key)]
        key: KeyAlgorithm,
        /// Lifetime of the set's CAs, like 1825d.
        #[arg(long, default_value_t = pki_rotate::set::DEFAULT_CA_LIFETIME, value_parser = parse_duration)]
        lifetime: Duration,
        /// The time to act at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
        /// Make every CA key, and every key a rotation makes, in this
        /// PKCS#11 token (sensitive, never extractable): a URI like
        /// pkcs11:token=LABEL. The module is PKI_PKCS11_MODULE, the PIN
        /// is read from PKI_PKCS11_PIN_FILE (or pin-source in the URI).
        #[arg(long, value_name = "PKCS11-URI", value_parser = crate::token::parse_uri)]
        key_store: Option<pki_core::Pkcs11Uri>,
    },
    /// Issue (or re-issue) a leaf of a CA for a target.
    Issue(IssueArgs),
    /// Create a target or set the bundles it loads.
    Target {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// The target (a host or a component).
        target: String,
        /// CAs whose servers it verifies: trust/CA.crt (replaces the list).
        #[arg(long, num_args = 1..)]
        trusts: Option<Vec<String>>,
        /// CAs whose clients it verifies: client-ca/CA.crt (replaces the list).
        #[arg(long = "client-ca", num_args = 1..)]
        client_ca: Option<Vec<String>>,
        /// The time to act at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
    /// Start a rotation: new CAs, every bundle trusts old and new.
    Start {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// Why (recorded).
        #[arg(long, default_value = "manual rotation")]
        reason: String,
        /// Use this CA as the new CA of CA: CA=FILE (repeat). FILE is one
        /// PEM file with the CA certificate first, its key anywhere, and,
        /// unless the CA is self-signed, the chain above it up to the root
        /// (issuer first).
        #[arg(long = "import", num_args = 1.., value_parser = parse_import, value_name = "CA=FILE")]
        imports: Vec<(String, PathBuf)>,
        /// Refuse --import files larger than this, like 16M or 1G.
        #[arg(long, default_value_t = DEFAULT_MAX_INPUT, value_parser = parse_size, value_name = "SIZE")]
        max_input_size: u64,
        /// In update-certs, move serving certificates one target at a time.
        #[arg(long)]
        one_at_a_time: bool,
        /// The time to act at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
    /// Record that a target loaded the files with this fingerprint.
    Ack {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// The target.
        target: String,
        /// What `pki fingerprint DIR/targets/TARGET` printed on the target.
        #[arg(long)]
        fingerprint: String,
        /// The time to act at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
    /// Record that a target failed to load its files.
    Fail {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// The target.
        target: String,
        /// What went wrong.
        #[arg(long)]
        reason: String,
        /// The time to act at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
    /// Make a failed target pending again.
    Retry {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// The target.
        target: String,
        /// The time to act at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
    /// Go to the next step once every target loaded the current one.
    Advance {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// Advance without every acknowledgement, for this reason (recorded).
        /// An override applies to the step it was given in: the same reason
        /// again once the set moved on is nothing to do.
        #[arg(long = "override", value_name = "REASON")]
        override_reason: Option<String>,
        /// Advance only from this step: once the set left it, nothing to
        /// do (a rerun is safe); from another step, refused.
        #[arg(long, value_name = "STEP", value_parser = parse_step)]
        from: Option<SetStep>,
        /// The time to act at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
    /// Abort: back to idle through reverting, or forward to completed from trust-new.
    Abort {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// Abort although it strands targets that have not loaded trust-new
        /// (rolling forward destroys the old CA keys), for this reason (recorded).
        #[arg(long = "override", value_name = "REASON")]
        override_reason: Option<String>,
        /// The time to act at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
    /// Show the step, per-target progress, what blocks, overrides, timeline.
    Status {
        /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// The time to report at: RFC 3339 or "now".
        #[arg(long, default_value = "now", value_parser = parse_time)]
        now: OffsetDateTime,
    },
}

/// `pki set issue`.
#[derive(Args)]
pub struct IssueArgs {
    /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
    #[arg(value_parser = StoreArg::parse)]
    dir: StoreArg,
    /// Certificate name: files go to targets/TARGET/certs/NAME/.
    name: String,
    /// The CA that signs it.
    #[arg(long)]
    ca: String,
    /// A serving certificate (serverAuth).
    #[arg(long, required_unless_present = "client")]
    serving: bool,
    /// A client certificate (clientAuth).
    #[arg(long)]
    client: bool,
    /// DNS subjectAltName (repeat for more).
    #[arg(long, num_args = 1..)]
    dns: Vec<String>,
    /// IP subjectAltName (repeat for more).
    #[arg(long, num_args = 1..)]
    ip: Vec<IpAddr>,
    /// Common name (default: the first DNS name or IP, else NAME).
    #[arg(long)]
    cn: Option<String>,
    /// The target that loads it (created if new).
    #[arg(long)]
    target: String,
    /// Certificate lifetime, like 365d (cut at the CA's expiry).
    #[arg(long, default_value_t = pki_rotate::set::DEFAULT_SET_LEAF_LIFETIME, value_parser = parse_duration)]
    lifetime: Duration,
    /// Move the certificate although another target loads it (that target
    /// loses it).
    #[arg(long)]
    replace: bool,
    /// The time to act at: RFC 3339 or "now".
    #[arg(long, default_value = "now", value_parser = parse_time)]
    now: OffsetDateTime,
}

fn parse_key(s: &str) -> Result<KeyAlgorithm, String> {
    s.parse().map_err(|e: pki_core::Error| e.to_string())
}

fn parse_ca_roles(s: &str) -> Result<(String, Roles), String> {
    let (name, roles) = s.split_once(':').ok_or_else(|| {
        format!("\"{s}\" is not NAME:ROLES (ROLES: serving, client or serving+client)")
    })?;
    pki_rotate::set::validate_name("CA", name).map_err(|e| e.to_string())?;
    let roles: Roles = roles
        .parse()
        .map_err(|e: pki_rotate::RotateError| e.to_string())?;
    Ok((name.to_string(), roles))
}

fn parse_import(s: &str) -> Result<(String, PathBuf), String> {
    let (ca, file) = s
        .split_once('=')
        .filter(|(c, f)| !c.is_empty() && !f.is_empty())
        .ok_or_else(|| format!("\"{s}\" is not CA=FILE"))?;
    Ok((ca.to_string(), PathBuf::from(file)))
}

/// Runs a `pki set` command.
pub fn run(command: SetCommand) -> CliResult {
    match command {
        SetCommand::Init {
            dir,
            cas,
            key,
            lifetime,
            now,
            key_store,
        } => init(&dir, &cas, (key, lifetime), key_store.as_ref(), now),
        SetCommand::Issue(a) => issue(a),
        SetCommand::Target {
            dir,
            target,
            trusts,
            client_ca,
            now,
        } => {
            let set = |v: Option<Vec<String>>| v.map(|v| v.into_iter().collect::<BTreeSet<_>>());
            let input = SetInput::Target {
                name: target,
                trusts: set(trusts),
                client_ca: set(client_ca),
            };
            step(&dir, &input, now)
        }
        SetCommand::Start {
            dir,
            reason,
            imports,
            max_input_size,
            one_at_a_time,
            now,
        } => {
            let imports = read_imports(&imports, max_input_size, now)?;
            start(&dir, reason, imports, one_at_a_time, now)
        }
        SetCommand::Ack {
            dir,
            target,
            fingerprint,
            now,
        } => step(
            &dir,
            &SetInput::Ack {
                target,
                fingerprint,
            },
            now,
        ),
        SetCommand::Fail {
            dir,
            target,
            reason,
            now,
        } => step(&dir, &SetInput::Fail { target, reason }, now),
        SetCommand::Retry { dir, target, now } => step(&dir, &SetInput::Retry { target }, now),
        SetCommand::Advance {
            dir,
            override_reason,
            from,
            now,
        } => step(
            &dir,
            &SetInput::Advance {
                from,
                override_reason,
            },
            now,
        ),
        SetCommand::Abort {
            dir,
            override_reason,
            now,
        } => step(&dir, &SetInput::Abort { override_reason }, now),
        SetCommand::Status { dir, json, now } => status(&dir, json, now),
    }
}

/// `pki set start` with the CAs to import already read.
fn start(
    dir: &StoreArg,
    reason: String,
    imports: Vec<ImportedCa>,
    one_at_a_time: bool,
    now: OffsetDateTime,
) -> CliResult {
    let input = SetInput::Start {
        reason,
        imports,
        one_at_a_time,
    };
    step(dir, &input, now)
}

/// `pki set init`: creates the set's CAs.
fn init(
    dir: &StoreArg,
    cas: &[(String, Roles)],
    (key, lifetime): (KeyAlgorithm, Duration),
    key_store: Option<&pki_core::Pkcs11Uri>,
    now: OffsetDateTime,
) -> CliResult {
    let state = match key_store {
        None => SetState::new(cas, key, lifetime, now, &mut os_rng())?,
        Some(uri) => {
            let access = crate::token::for_uri(uri)?;
            let location = crate::token::store_location(dir)?;
            let token = (&access, uri, location.as_str());
            SetState::new_in_token(cas, key, lifetime, token, now, &mut os_rng())?
        }
    };
    let store = dir.open_or_create()?;
    Driver::new(store).create::<SetEngine>(&KEY, &state)?;
    for (name, ca) in state.cas() {
        crate::outln!(
            "created CA {name} ({}): {}, valid until {}",
            ca.roles,
            ca.current.signer.cert.id(),
            pki_core::datetime::rfc3339(ca.current.signer.cert.not_after())
        );
    }
    Ok(())
}

/// `pki set issue`: issues (or re-issues) a leaf and names the file it
/// is published in.
fn issue(a: IssueArgs) -> CliResult {
    let spec = LeafSpec {
        ca: a.ca,
        serving: a.serving,
        client: a.client,
        dns_names: a.dns,
        ip_addresses: a.ip,
        common_name: a.cn,
        target: a.target.clone(),
        lifetime: a.lifetime,
    };
    let input = SetInput::Issue {
        replace: a.replace,
        name: a.name.clone(),
        spec,
    };
    step(&a.dir, &input, a.now)?;
    crate::outln!(
        "  {}",
        a.dir
            .published(&format!("targets/{}/certs/{}/tls.crt", a.target, a.name))
    );
    Ok(())
}

/// `pki set status`: the table, or with `json` the status document.
fn status(dir: &StoreArg, json: bool, now: OffsetDateTime) -> CliResult {
    let (state, _) = crate::token::driver(open(dir)?)?
        .load::<SetEngine>(&KEY)
        .map_err(not_initialized(dir))?;
    let status = state.status(now);
    if json {
        let text = serde_json::to_string_pretty(&status)
            .map_err(|e| CliError::new(format!("status: {e}")))?;
        crate::outln!("{text}");
    } else {
        crate::out!("{}", render_status(&state, now));
    }
    Ok(())
}

/// Reads and validates every `--import CA=FILE` at `now`.
fn read_imports(
    imports: &[(String, PathBuf)],
    max_input_size: u64,
    now: OffsetDateTime,
) -> CliResult<Vec<ImportedCa>> {
    imports
        .iter()
        .map(|(ca, file)| read_import(ca, file, max_input_size, now))
        .collect()
}

/// Reads and validates one `--import CA=FILE` at `now`; every refusal is
/// one line naming the CA and the file.
fn read_import(
    ca: &str,
    file: &std::path::Path,
    max_input_size: u64,
    now: OffsetDateTime,
) -> CliResult<ImportedCa> {
    let bytes = zeroize::Zeroizing::new(
        read_capped(file, max_input_size)
            .map_err(|e| CliError::new(format!("--import {ca}: {}", e.message)))?,
    );
    let validated = pki_core::import_ca_file(&bytes, now)
        .map_err(|e| CliError::new(format!("--import {ca}: {}: {e}", file.display())))?;
    Ok(ImportedCa::new(ca, validated))
}

/// Opens the store; a directory without one gets the set's hint.
fn open(dir: &StoreArg) -> CliResult<Box<dyn pki_rotate::Store + Send + Sync>> {
    if dir.is_empty_dir() {
        return Err(no_set(dir));
    }
    dir.open()
}

/// A store without the set's document: the hint names `pki set init`,
/// not the signer's `pki init`.
fn not_initialized(dir: &StoreArg) -> impl Fn(RotateError) -> CliError + '_ {
    move |e| match e {
        RotateError::Store(pki_rotate::StoreError::NotInitialized(_)) => no_set(dir),
        other => other.into(),
    }
}

fn no_set(dir: &StoreArg) -> CliError {
    CliError::new(format!("no CA set in {dir} (run `pki set init` first)"))
}

fn step(dir: &StoreArg, input: &SetInput, now: OffsetDateTime) -> CliResult {
    let step = crate::token::driver(open(dir)?)?
        .step::<SetEngine, _>(&KEY, input, now, &mut os_rng())
        .map_err(not_initialized(dir))?;
    print_events(&step.events);
    if !step.changed && step.events.is_empty() {
        crate::outln!("nothing to change");
    }
    let state = &step.document;
    if state.running().is_some()
        || matches!(input, SetInput::Advance { .. } | SetInput::Abort { .. })
    {
        crate::outln!("step: {}", state.step());
    }
    Ok(())
}

fn parse_step(s: &str) -> Result<SetStep, String> {
    s.parse()
        .map_err(|e: pki_rotate::RotateError| e.to_string())
}

fn print_events(events: &[SetEvent]) {
    for e in events {
        crate::outln!("{e}");
    }
}

/// The human status: step, CAs, per-target table, what blocks, overrides, timeline.
pub fn render_status(state: &SetState, now: OffsetDateTime) -> String {
    use std::fmt::Write;
    let status = state.status(now);
    let mut out = String::new();
    let half = match status.half {
        Some("trust") => {
            " (first half: bundles trust both; client certificates wait for their servers)"
        }
        Some(_) => " (second half: client certificates on the new client CAs)",
        None => "",
    };
    let _ = writeln!(out, "step: {}{half}", status.step);
    if let Some(reason) = &status.reason {
        let _ = writeln!(out, "reason: {reason}");
    }
    if let Some(t) = status.started_at {
        let _ = writeln!(out, "started: {}", when(t, now));
    }
    if let Some(t) = status.completed_at {
        let _ = writeln!(out, "completed: {}", when(t, now));
    }
    if status.one_at_a_time {
        let _ = writeln!(out, "serving certificates move one target at a time");
    }
    render_cas(&mut out, &status);
    render_targets(&mut out, state, &status);
    render_history(&mut out, &status, now);
    out
}

/// Each CA's current certificate and, during a rotation, its successor.
fn render_cas(out: &mut String, status: &SetStatus) {
    use std::fmt::Write;
    let _ = writeln!(out, "\nCAs:");
    for (name, ca) in &status.cas {
        let _ = write!(out, "  {name:<14} {:<15} {}", ca.roles, ca.current);
        if let Some(r) = &ca.current_root {
            let _ = write!(out, " (under root {r})");
        }
        if let Some(c) = &ca.current_client_ca {
            let _ = write!(out, " (client CA {c})");
        }
        if let Some(n) = &ca.next {
            let _ = write!(out, " -> new {n}");
        }
        if let Some(r) = &ca.next_root {
            let _ = write!(out, " (under root {r})");
        }
        if let Some(n) = &ca.next_client_ca {
            let _ = write!(out, ", new client CA {n}");
        }
        if ca.clients_moved {
            let _ = write!(out, " [client certs moved]");
        }
        let _ = writeln!(out);
    }
}

/// Each target's progress, and what `advance` and `abort` would do.
fn render_targets(out: &mut String, state: &SetState, status: &SetStatus) {
    use std::fmt::Write;
    let _ = writeln!(out, "\nTARGET           PROGRESS  FINGERPRINT TO ACK");
    for (name, t) in &status.targets {
        let mut progress = t.progress.to_string();
        if t.serving_updated && state.step() == SetStep::UpdateCerts {
            progress.push('*');
        }
        let _ = writeln!(out, "{name:<16} {progress:<9} {}", t.fingerprint);
        if let Some(f) = &t.failure {
            let _ = writeln!(out, "{:<16}   failed: {f} (run `pki set retry`)", "");
        }
    }
    if state.step() == SetStep::UpdateCerts {
        let _ = writeln!(out, "(* serving certificates on the new CAs)");
    }
    for w in &status.warnings {
        let _ = writeln!(out, "\nwarning: {w}");
    }
    if !status.blocking.is_empty() {
        let _ = writeln!(out, "\nadvance waits for: {}", status.blocking.join(", "));
    } else if state.running().is_some() {
        let _ = writeln!(
            out,
            "\nevery target loaded this step: `pki set advance` may proceed"
        );
    }
    if let Some(to) = status.abort_to {
        if status.abort_strands.is_empty() {
            let _ = writeln!(out, "abort would go to {to}");
        } else {
            let _ = writeln!(
                out,
                "abort would go to {to} and strand {} (refused without --override REASON)",
                status.abort_strands.join(", ")
            );
        }
    }
}

/// The overrides given, the timeline of steps and the last completion.
fn render_history(out: &mut String, status: &SetStatus, now: OffsetDateTime) {
    use std::fmt::Write;
    if !status.overrides.is_empty() {
        let _ = writeln!(out, "\noverrides:");
        for o in &status.overrides {
            let _ = writeln!(
                out,
                "  {} {} -> {}: {} (was waiting for {})",
                pki_core::datetime::rfc3339(o.at),
                o.from,
                o.to,
                o.reason,
                o.waiting.join(", ")
            );
            for w in &o.warnings {
                let _ = writeln!(out, "    warning: {w}");
            }
        }
    }
    if !status.timeline.is_empty() {
        let _ = writeln!(out, "\ntimeline:");
        for e in &status.timeline {
            let _ = writeln!(
                out,
                "  {} {:<13} {}",
                pki_core::datetime::rfc3339(e.at),
                e.step.to_string(),
                e.note
            );
        }
    }
    if let Some(t) = status.last_completion {
        let _ = writeln!(out, "\nlast completed rotation: {}", when(t, now));
    }
}
