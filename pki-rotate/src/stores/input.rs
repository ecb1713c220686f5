//! Files a caller names (a CA to import, a bundle to verify, the etcd
//! client key, a password file): the one way pki reads them, whole and
//! bounded, without waiting on something that is not a file.
//!
//! A path may name a FIFO, whose open waits for a writer and whose reads
//! wait for data; a directory; a socket; a device; or a sparse file of
//! gigabytes. Each would hang pki or fill its memory. [`read_file`] opens
//! without blocking (`O_NONBLOCK`), refuses anything but a regular file or
//! a character device (such as `/dev/null`, read like a file but bounded
//! like any: `/dev/zero` never ends), refuses a regular file larger than
//! the limit from its size alone, before reading a byte, and reads at most
//! one byte more than the limit from anything else.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The default limit on an input file: far more than any real bundle,
/// chain, key or password, small enough that `/dev/zero` fails at once.
pub const DEFAULT_MAX_INPUT: u64 = 16 * 1024 * 1024;

/// Why an input file could not be read. Each message starts with the
/// path, on one line; [`InputError::reason`] is the rest.
#[derive(Debug)]
#[non_exhaustive]
pub enum InputError {
    /// The path names something that is not a regular file (nor a
    /// character device): a FIFO, a socket, a directory, a block device.
    NotRegular {
        /// The path given.
        path: PathBuf,
        /// What it is instead, with its article ("a FIFO (named pipe)").
        kind: &'static str,
    },
    /// The file holds more than the limit allows.
    TooLarge {
        /// The path given.
        path: PathBuf,
        /// The limit, in bytes.
        limit: u64,
    },
    /// Opening or reading it failed.
    Io {
        /// The path given.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
}

impl InputError {
    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            InputError::NotRegular { path, .. }
            | InputError::TooLarge { path, .. }
            | InputError::Io { path, .. } => path,
        }
    }

    /// What is wrong, without the path (for a caller that names the file
    /// in its own words).
    pub fn reason(&self) -> String {
        match self {
            InputError::NotRegular { kind, .. } => {
                format!("is {kind}, not a regular file: give the path of a file")
            }
            InputError::TooLarge { limit, .. } => {
                format!("larger than the input limit of {limit} bytes")
            }
            InputError::Io { source, .. } => source.to_string(),
        }
    }
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path().display(), self.reason())
    }
}

impl std::error::Error for InputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InputError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<InputError> for std::io::Error {
    fn from(e: InputError) -> Self {
        let kind = match &e {
            InputError::Io { source, .. } => source.kind(),
            InputError::NotRegular { .. } | InputError::TooLarge { .. } => {
                std::io::ErrorKind::InvalidInput
            }
        };
        std::io::Error::new(kind, e.to_string())
    }
}

/// What a file type is when pki will not read it, for messages.
fn not_readable(t: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_block_device() {
        Some("a block device")
    } else {
        None
    }
}

/// Opens `path` for reading without waiting on it: a FIFO, a socket, a
/// directory or a block device is refused (the open itself does not block:
/// `O_NONBLOCK`), and a read of what is opened that would wait fails
/// instead. Links are followed.
///
/// # Errors
///
/// [`InputError::NotRegular`] for a FIFO, a socket, a directory or a block
/// device; [`InputError::Io`] when the open or its metadata fails (a missing
/// file, no permission).
pub fn open_file(path: &Path) -> Result<File, InputError> {
    use rustix::fs::{Mode, OFlags};
    let refused = |kind| InputError::NotRegular {
        path: path.to_path_buf(),
        kind,
    };
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(e) => {
            // Opening a socket fails (ENXIO): say what it is.
            if let Some(kind) = std::fs::metadata(path)
                .ok()
                .and_then(|m| not_readable(m.file_type()))
            {
                return Err(refused(kind));
            }
            return Err(InputError::Io {
                path: path.to_path_buf(),
                source: e.into(),
            });
        }
    };
    let meta = file.metadata().map_err(|source| InputError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    match not_readable(meta.file_type()) {
        Some(kind) => Err(refused(kind)),
        None => Ok(file),
    }
}

/// Reads the file at `path` whole, at most `max` bytes (see the module
/// documentation). A regular file's buffer is allocated once at its size,
/// so a secret read this way leaves no copy behind in memory freed by a
/// reallocation: wrap the result in `Zeroizing` as soon as it returns.
///
/// # Errors
///
/// Those of [`open_file`] and [`read_opened`].
pub fn read_file(path: &Path, max: u64) -> Result<Vec<u8>, InputError> {
    read_opened(open_file(path)?, path, max)
}

/// Reads `file` (opened from `path` with [`open_file`]) whole, at most
/// `max` bytes.
///
/// # Errors
///
/// [`InputError::TooLarge`] when the file holds more than `max` bytes;
/// [`InputError::Io`] when its metadata or a read fails (a read that would wait
/// fails too).
pub fn read_opened(file: File, path: &Path, max: u64) -> Result<Vec<u8>, InputError> {
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let too_large = || InputError::TooLarge {
        path: path.to_path_buf(),
        limit: max,
    };
    let meta = file.metadata().map_err(io)?;
    // A regular file says its size: a sparse file of gigabytes is refused
    // without reading it.
    let size = if meta.is_file() { meta.len() } else { 0 };
    if size > max {
        return Err(too_large());
    }
    // One more byte than the size: read_to_end sees the end without
    // growing the buffer.
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0).saturating_add(1));
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_at_once_without_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("in.fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let started = std::time::Instant::now();
        let err = read_file(&fifo, 100).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(
            matches!(err, InputError::NotRegular { kind, .. } if kind.contains("FIFO")),
            "{err}"
        );
        let err = read_file(dir.path(), 100).unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
    }

    #[test]
    fn a_sparse_file_over_the_limit_is_refused_from_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse");
        File::create(&path).unwrap().set_len(3 << 30).unwrap();
        let err = read_file(&path, DEFAULT_MAX_INPUT).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("larger than the input limit of 16777216 bytes"),
            "{err}"
        );
        // A device has no size: the limit stops the read.
        let err = read_file(Path::new("/dev/zero"), 10).unwrap_err();
        assert!(
            matches!(err, InputError::TooLarge { limit: 10, .. }),
            "{err}"
        );
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_file(&path, 10).unwrap(), b"0123456789");
        assert!(read_file(&path, 9).is_err());
    }
}
