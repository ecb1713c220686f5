//! What a mint hook printed beyond the cap (`--max-output`), kept so that
//! the revoke hook of what it minted gets all of it.
//!
//! A mint over the cap failed, and the first cap bytes go to the store as
//! a stray credential to revoke (the document never holds more). The rest
//! may be what the revoke hook needs (a credential printed after a banner,
//! a second line the hook reads), so instead of being dropped it is kept
//! in the capture directory until the stray is revoked:
//!
//! ```text
//! CAPTURE/NAME/R-A.spill   what followed the stray's value (0600, sealed
//!                          with the store key when one is given)
//! ```
//!
//! It is written before the capture is cut to the cap, so a run that dies
//! in between writes it again from the whole capture. The revoke hook of
//! the stray gets the value and the spill, which together are the whole
//! output (surrounding whitespace trimmed, a newline after it, as for any
//! credential). The spill is removed once the revocation is recorded, or
//! when nothing refers to it any more.

use pki_rotate::credential::Secret;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// The most a spill keeps: a hook is stopped within moments of passing the
/// cap, so only one printing gigabytes a second gets here, and the spill
/// is held in memory to seal it and to feed the revoke hook.
pub const SPILL_LIMIT: u64 = 64 * 1024 * 1024;

/// The extension of spill files.
pub const EXT: &str = "spill";

/// The spill of attempt `attempt` of rotation `rotation` in `dir`.
pub fn path(dir: &Path, rotation: u64, attempt: u32) -> PathBuf {
    dir.join(format!("{rotation}-{attempt}.{EXT}"))
}

/// Where the spill of a capture starts, for `printed`, its first `cap + 1`
/// bytes or more: just after the stray's value, which is the first `cap`
/// bytes with surrounding whitespace trimmed. Whitespace cut from the end
/// of those bytes goes in the spill, so that value and spill side by side
/// are the output as printed.
pub fn start(printed: &[u8], cap: usize) -> u64 {
    let head = &printed[..printed.len().min(cap)];
    head.trim_ascii_end().len() as u64
}

/// Writes what the capture `out` holds from `from` on (up to
/// [`SPILL_LIMIT`] bytes) to the spill at `spill`, replacing any.
pub fn write(out: &mut File, from: u64, spill: &Path) -> Result<(), String> {
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let mut rest = Zeroizing::new(Vec::new());
    out.seek(SeekFrom::Start(from))
        .and_then(|_| out.take(SPILL_LIMIT).read_to_end(&mut rest))
        .map_err(|e| io(spill, e))?;
    super::sealed_capture::write(spill, &rest)
}

/// What the revoke hook gets on stdin for `value`: the value and, when
/// `spill` names a spill file that exists, what it holds; the whole
/// trimmed of trailing whitespace and ended by a newline.
pub fn revoke_input(value: &Secret, spill: Option<&Path>) -> Result<Zeroizing<Vec<u8>>, String> {
    let mut input = Zeroizing::new(value.as_bytes().to_vec());
    if let Some(path) = spill.filter(|p| p.exists()) {
        let limit = SPILL_LIMIT + super::sealed_capture::OVERHEAD;
        let bytes = pki_rotate::input::read_file(path, limit).map_err(|e| e.to_string())?;
        let rest = super::sealed_capture::open(path, Zeroizing::new(bytes))?;
        input.extend_from_slice(&rest);
        let end = input.trim_ascii_end().len();
        input.truncate(end);
    }
    input.push(b'\n');
    Ok(input)
}

/// Removes the spills in `dir` that nothing refers to: neither a stray
/// still to revoke (`strays`) nor a capture still to settle (its
/// `R-A.out`).
pub fn prune(dir: &Path, strays: &[(u64, u32)]) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((rotation, attempt)) = name
            .strip_suffix(&format!(".{EXT}"))
            .and_then(|stem| stem.split_once('-'))
            .and_then(|(r, a)| Some((r.parse::<u64>().ok()?, a.parse::<u32>().ok()?)))
        else {
            continue;
        };
        let settling = dir.join(format!("{rotation}-{attempt}.out")).exists();
        if !settling && !strays.contains(&(rotation, attempt)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_and_spill_side_by_side_are_the_output_as_printed() {
        let printed = b"  user:pass \n  more-after-the-cap\n";
        let cap = 14; // "  user:pass \n " | " more-after-the-cap\n"
        let value = Secret::from_output(&printed[..cap]);
        assert_eq!(value.as_bytes(), b"user:pass");
        let from = start(printed, cap) as usize;
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path().join("1-1.spill");
        std::fs::write(&spill, &printed[from..]).unwrap();
        let input = revoke_input(&value, Some(&spill)).unwrap();
        assert_eq!(&input[..], b"user:pass \n  more-after-the-cap\n");
        // Without a spill, the value alone, as before.
        let input = revoke_input(&value, Some(&dir.path().join("none"))).unwrap();
        assert_eq!(&input[..], b"user:pass\n");
    }
}
