//! `pki fingerprint PATH`: what a target acknowledges; `pki fingerprint
//! --bundle FILE` and `pki ack`: what a consumer of the signer's bundle
//! acknowledges.
//!
//! The token is computed from the files under PATH only: their paths
//! relative to PATH and their contents (links are followed, names starting
//! with `.` are skipped, times and modes are ignored). It equals the
//! fingerprint the CA set expects for the target whose directory PATH is.

use crate::common::{
    CliError, CliResult, DEFAULT_MAX_INPUT, SIGNER, StoreArg, os_rng, parse_size, parse_time,
    read_capped,
};
use pki_rotate::{AckInput, Driver, UptakeEngine};
use std::fs;
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// `pki fingerprint`'s arguments.
#[derive(clap::Args)]
pub struct FingerprintArgs {
    /// A target directory, like DIR/targets/TARGET.
    #[arg(required_unless_present = "bundle", conflicts_with = "bundle")]
    path: Option<PathBuf>,
    /// A PEM bundle: the token depends on its certificates only (any
    /// order, any PEM layout), as `pki ack` expects it.
    #[arg(long, value_name = "FILE")]
    bundle: Option<PathBuf>,
    /// Refuse a bundle file larger than this, like 16M or 1G.
    #[arg(long, default_value_t = DEFAULT_MAX_INPUT, value_parser = parse_size, value_name = "SIZE")]
    max_input_size: u64,
}

/// `pki ack`'s arguments.
#[derive(clap::Args)]
pub struct AckArgs {
    /// Store directory, or etcd://HOST:PORT/PREFIX.
    #[arg(value_parser = StoreArg::parse)]
    dir: StoreArg,
    /// Who loaded it: a host, a pod, a component.
    consumer: String,
    /// The bundle's fingerprint; refused unless this store published it.
    #[arg(long, value_name = "FP")]
    fingerprint: String,
    /// The time of the acknowledgement, like 2027-02-01T00:00:00Z, or "now".
    #[arg(long, default_value = "now", value_parser = parse_time, value_name = "TIME")]
    now: OffsetDateTime,
}

/// `pki fingerprint PATH` or `pki fingerprint --bundle FILE`.
pub fn fingerprint(args: FingerprintArgs) -> CliResult {
    match (args.path, args.bundle) {
        (_, Some(bundle)) => self::bundle(&bundle, args.max_input_size),
        (Some(path), None) => run(&path),
        // clap requires one of the two.
        (None, None) => Err(CliError {
            message: "give a PATH or --bundle FILE".to_string(),
            status: 2,
            details: Vec::new(),
        }),
    }
}

/// Prints the token of the bundle in `file`: the `bundle_fingerprint` of
/// `pki status --json` for the same certificates, whatever their order,
/// duplicates or PEM layout.
pub fn bundle(file: &Path, max_input_size: u64) -> CliResult {
    let bytes = read_capped(file, max_input_size)?;
    let bundle = pki_core::Bundle::from_pem(&bytes)
        .map_err(|e| CliError::new(format!("{}: {e}", file.display())))?;
    crate::outln!("{}", pki_rotate::uptake::bundle_fingerprint(&bundle));
    Ok(())
}

/// Records that `consumer` loaded the bundle `fingerprint`, through the
/// driver: concurrent acks and rotations each land once. The same ack
/// again writes nothing.
pub fn ack(args: AckArgs) -> CliResult {
    let (consumer, fingerprint, now) = (&args.consumer, &args.fingerprint, args.now);
    let driver = Driver::new(args.dir.open()?);
    let step = driver.step::<UptakeEngine, _>(
        SIGNER,
        &AckInput::new(consumer, fingerprint),
        now,
        &mut os_rng(),
    )?;
    if step.events.is_empty() {
        crate::outln!("nothing to do: {consumer} already acknowledged {fingerprint}");
    }
    for e in &step.events {
        crate::outln!("{e}");
    }
    Ok(())
}

/// Prints the fingerprint of the directory (or single file) at `path`.
pub fn run(path: &Path) -> CliResult {
    crate::outln!("{}", fingerprint_dir(path)?);
    Ok(())
}

/// The fingerprint of the tree at `path`.
pub fn fingerprint_dir(path: &Path) -> CliResult<String> {
    let meta = fs::metadata(path).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
    let mut files = Vec::new();
    if meta.is_dir() {
        collect(path, "", &mut files)?;
    } else {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let contents =
            fs::read(path).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
        files.push((name, contents));
    }
    Ok(pki_rotate::set::fingerprint(
        files.iter().map(|(p, c)| (p.as_str(), c.as_slice())),
    ))
}

fn collect(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) -> CliResult {
    let entries =
        fs::read_dir(dir).map_err(|e| CliError::new(format!("{}: {e}", dir.display())))?;
    for entry in entries {
        let entry = entry.map_err(|e| CliError::new(format!("{}: {e}", dir.display())))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let meta =
            fs::metadata(&path).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
        if meta.is_dir() {
            collect(&path, &rel, out)?;
        } else if meta.is_file() {
            let contents =
                fs::read(&path).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
            out.push((rel, contents));
        }
    }
    Ok(())
}
