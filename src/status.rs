//! `pki status`: what the store holds, when it expires, what happens next.

use crate::common::{CliResult, StoreArg, load_signer, when};
use pki_rotate::status::{BundleRole, CertSummary, SignerStatus};
use time::OffsetDateTime;

pub fn run(dir: &StoreArg, json: bool, now: OffsetDateTime) -> CliResult {
    let state = load_signer(dir)?;
    let status = SignerStatus::of(&state, now)?;
    if json {
        let text = serde_json::to_string_pretty(&status)
            .map_err(|e| crate::common::CliError::new(e.to_string()))?;
        println!("{text}");
    } else {
        print!("{}", render(&status));
    }
    Ok(())
}

fn row(role: &str, c: &CertSummary, now: OffsetDateTime) -> String {
    let state = if c.valid { "" } else { "  EXPIRED" };
    format!(
        "  {role:<10} {:<52} {}{state}\n",
        c.id,
        when(c.not_after, now)
    )
}

/// The human table.
pub fn render(s: &SignerStatus) -> String {
    let now = s.now;
    let mut out = String::new();
    out.push_str(&format!(
        "at {}   CA {}   rotations so far: {}\n\n",
        pki_core::datetime::rfc3339(now),
        s.ca.subject,
        s.rotations
    ));
    out.push_str(&format!("  {:<10} {:<52} {}\n", "ROLE", "ID", "EXPIRES"));
    out.push_str(&row("CA", &s.ca, now));
    if let Some(b) = &s.bridge {
        out.push_str(&row("bridge B", b, now));
    }
    for m in &s.bundle {
        let role = match m.role {
            BundleRole::CurrentCa => "bundle:CA",
            BundleRole::BridgeA => "bridge A",
            BundleRole::PreviousRoot => "old root",
            BundleRole::Other => "bundle",
        };
        out.push_str(&row(role, &m.cert, now));
    }
    out.push_str(&format!("  bundle fingerprint {}\n", s.bundle_fingerprint));
    if let Some(p) = &s.previous {
        match p.trusted_until {
            Some(t) => out.push_str(&format!(
                "  previous CA {} trusted until {}\n",
                p.id,
                when(t, now)
            )),
            None => out.push_str(&format!("  previous CA {} no longer trusted\n", p.id)),
        }
    }
    out.push('\n');
    if s.leaves.is_empty() {
        out.push_str("  no certificates issued (pki issue DIR NAME --dns ...)\n");
    } else {
        out.push_str(&format!(
            "  {:<14} {:<8} {:<6} {:<36} NAMES\n",
            "CERT", "KIND", "CHAIN", "EXPIRES"
        ));
        for l in &s.leaves {
            let expires = l
                .cert
                .as_ref()
                .map(|c| when(c.not_after, now))
                .unwrap_or_else(|| "not issued".into());
            let kind = match l.kind {
                pki_rotate::LeafKind::Server => "server",
                pki_rotate::LeafKind::Client => "client",
                pki_rotate::LeafKind::ServerClient => "both",
            };
            out.push_str(&format!(
                "  {:<14} {:<8} {:<6} {:<36} {}\n",
                l.name,
                kind,
                l.chain_len,
                expires,
                l.names.join(",")
            ));
        }
    }
    if !s.trust.is_empty() {
        out.push_str("\n  trust now (RFC 5280 path validation):\n");
        for c in &s.trust {
            let verdict = match &c.result {
                Ok(_) => "ok".to_string(),
                Err(e) => format!("FAILS: {e}"),
            };
            out.push_str(&format!(
                "  {:>3} serving chain x {:>3} bundle  {verdict}\n",
                c.chain.to_string(),
                c.bundle.to_string()
            ));
        }
    }
    out.push('\n');
    out.push_str(&format!(
        "  CA rotation due {}\n",
        when(s.rotation_due_at, now)
    ));
    if s.pending.is_empty() {
        out.push_str(&format!(
            "  next action: none now; next check {}\n",
            when(s.next_check, now)
        ));
    } else {
        for p in &s.pending {
            out.push_str(&format!("  next action: {p} (run `pki rotate`)\n"));
        }
    }
    out
}
