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
    /// Refuse a bundle file larger than this, or a target directory whose
    /// files hold more in all, like 16M or 1G.
    #[arg(long, default_value_t = DEFAULT_MAX_INPUT, value_parser = parse_size, value_name = "SIZE")]
    max_input_size: u64,
}

/// `pki ack`'s arguments.
#[derive(clap::Args)]
pub struct AckArgs {
    /// Store directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
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
        (Some(path), None) => run(&path, args.max_input_size),
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
/// again writes nothing. Inside the store's idle promise only the
/// document's head is read and written, whatever the number of leaves.
pub fn ack(args: AckArgs) -> CliResult {
    let (consumer, fingerprint, now) = (&args.consumer, &args.fingerprint, args.now);
    let driver = Driver::new(args.dir.open()?);
    let step = driver.step_unless_idle::<UptakeEngine, _>(
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

/// Prints the fingerprint of the directory (or single file) at `path`,
/// whose files hold at most `max` bytes in all.
pub fn run(path: &Path, max: u64) -> CliResult {
    crate::outln!("{}", fingerprint_dir(path, max)?);
    Ok(())
}

/// The fingerprint of the tree at `path`: every file under it read whole,
/// `max` bytes in all at most (the names count too: a directory of a
/// million empty files is as much to hold). Anything but directories and
/// regular files (a FIFO, a socket) is refused without waiting on it, as
/// is a link back to a directory above it, which would never end.
pub fn fingerprint_dir(path: &Path, max: u64) -> CliResult<String> {
    let meta = fs::metadata(path).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
    let mut walk = Walk {
        root: path,
        limit: max,
        left: max,
        files: Vec::new(),
        above: Vec::new(),
    };
    if meta.is_dir() {
        walk.dir(path, "")?;
    } else {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        walk.files.push((name, read_capped(path, max)?));
    }
    Ok(pki_rotate::set::fingerprint(
        walk.files.iter().map(|(p, c)| (p.as_str(), c.as_slice())),
    ))
}

/// A walk of a target directory: what it read, and what it may still read.
struct Walk<'a> {
    root: &'a Path,
    limit: u64,
    /// Bytes the walk may still hold.
    left: u64,
    files: Vec<(String, Vec<u8>)>,
    /// The directories being walked, by device and inode: a link to one
    /// of them is a loop.
    above: Vec<(u64, u64)>,
}

/// What each name costs the walk besides its bytes: the entry it keeps.
const ENTRY_COST: u64 = 64;

impl Walk<'_> {
    fn too_large(&self) -> CliError {
        CliError::new(format!(
            "{}: its files hold more than the input limit of {} bytes (raise it with --max-input-size)",
            self.root.display(),
            self.limit
        ))
    }

    /// Takes `cost` bytes from what the walk may still hold.
    fn spend(&mut self, cost: u64) -> CliResult {
        self.left = self
            .left
            .checked_sub(cost)
            .ok_or_else(|| self.too_large())?;
        Ok(())
    }

    fn file(&mut self, path: &Path, rel: String) -> CliResult {
        self.spend(ENTRY_COST.saturating_add(rel.len() as u64))?;
        let contents = pki_rotate::input::read_file(path, self.left).map_err(|e| match e {
            pki_rotate::input::InputError::TooLarge { .. } => self.too_large(),
            e => CliError::new(e.to_string()),
        })?;
        self.spend(contents.len() as u64)?;
        self.files.push((rel, contents));
        Ok(())
    }

    fn dir(&mut self, dir: &Path, prefix: &str) -> CliResult {
        use std::os::unix::fs::MetadataExt;
        let fail =
            |path: &Path, e: std::io::Error| CliError::new(format!("{}: {e}", path.display()));
        let meta = fs::metadata(dir).map_err(|e| fail(dir, e))?;
        let id = (meta.dev(), meta.ino());
        if self.above.contains(&id) {
            return Err(CliError::new(format!(
                "{}: a link back to a directory above it: the walk would never end",
                dir.display()
            )));
        }
        self.above.push(id);
        for entry in fs::read_dir(dir).map_err(|e| fail(dir, e))? {
            let entry = entry.map_err(|e| fail(dir, e))?;
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
            if fs::metadata(&path).map_err(|e| fail(&path, e))?.is_dir() {
                self.spend(ENTRY_COST)?;
                self.dir(&path, &rel)?;
            } else {
                self.file(&path, rel)?;
            }
        }
        self.above.pop();
        Ok(())
    }
}
