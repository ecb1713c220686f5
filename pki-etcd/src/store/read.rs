//! Reading a document: one consistent read (the head, then its entries and
//! blobs at the revision of that answer), started over when that revision
//! is compacted away between the requests.

use super::GET_ATTEMPTS;
use super::client::AsyncEtcdStore;
use super::fail::Fail;
use super::pages::LARGE_PAGE;
use crate::client::{GetOptions, KeyValue};
use crate::layout::{AnyHead, DocKeys, FileEntry, assemble, decode_entry, decode_head};
use pki_rotate::store::validate_key;
use pki_rotate::{File, Files, Result, Revision, RotateError};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use zeroize::Zeroizing;

impl AsyncEtcdStore {
    /// [`pki_rotate::AsyncStore::get`]: a consistent read, tried again
    /// (up to [`GET_ATTEMPTS`] times) when the revision it read at was
    /// compacted away.
    pub(super) async fn get_document(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        validate_key(key)?;
        let mut attempt = 1;
        loop {
            match self.read(key).await {
                Ok(found) => return Ok(found),
                Err(ReadFail::Error(e)) => return Err(e),
                Err(ReadFail::Compacted) if attempt < GET_ATTEMPTS => attempt += 1,
                Err(ReadFail::Compacted) => return Err(self.compacted_too_often(key)),
            }
        }
    }

    /// The error of a read whose revision was compacted away every time.
    pub(super) fn compacted_too_often(&self, key: &str) -> RotateError {
        self.backend(
            format!("reading document \"{key}\""),
            Fail::Other(format!(
                "the revision read at was compacted away, {GET_ATTEMPTS} times in a row"
            )),
        )
    }

    /// The head of a document (None: no document) and the revision of the
    /// answer, which every later request of a consistent read reads at.
    /// [`AsyncEtcdStore::get_head`] as the first step of a read (the read
    /// hook's "read head"), its failure said as `doing`.
    pub(super) async fn read_head(
        &self,
        keys: &DocKeys,
        doing: &str,
    ) -> Result<(i64, Option<KeyValue>)> {
        self.read_step("read head")
            .map_err(|f| self.backend(doing, f))?;
        self.get_head(keys)
            .await
            .map_err(|f| self.backend(doing, f))
    }

    pub(super) async fn get_head(
        &self,
        keys: &DocKeys,
    ) -> std::result::Result<(i64, Option<KeyValue>), Fail> {
        let mut kv = self.kv.clone();
        let head_key = keys.head.clone();
        let mut response = self
            .run(async move { kv.get(head_key, None).await })
            .await?;
        let at = response.header().map_or(0, |h| h.revision());
        Ok((at, response.take_kvs().into_iter().next()))
    }

    /// [`pki_rotate::AsyncStore::get_summary`]: the head alone. None for a
    /// head without a summary, or of the first release's format.
    pub(super) async fn read_summary(
        &self,
        key: &str,
    ) -> Result<Option<(pki_rotate::Summary, Revision)>> {
        validate_key(key)?;
        let keys = DocKeys::new(self.url.prefix(), key);
        let doing = format!("reading the summary of document \"{key}\"");
        self.read_step("read head")
            .map_err(|f| self.backend(&doing, f))?;
        let mut kv = self.kv.clone();
        let head_key = keys.head.clone();
        let mut response = self
            .run(async move { kv.get(head_key, None).await })
            .await
            .map_err(|f| self.backend(&doing, f))?;
        let Some(head) = response.take_kvs().into_iter().next() else {
            return Ok(None);
        };
        let location = format!("{}: head {}", self.doc_location(key), keys.head);
        Ok(match decode_head(&location, head.value())? {
            AnyHead::Current(current) => current
                .summary
                .and_then(pki_rotate::Summary::new)
                .map(|s| (s, Revision::new(head.mod_revision().to_string()))),
            AnyHead::Legacy(_) => None,
        })
    }

    /// One consistent read of a document: the head, then its blobs at the
    /// revision of that answer.
    async fn read(&self, key: &str) -> std::result::Result<Option<(Files, Revision)>, ReadFail> {
        let keys = DocKeys::new(self.url.prefix(), key);
        let doing = format!("reading document \"{key}\"");
        // Every blob the head references exists at the revision of this
        // answer (see the garbage collection rule in `put`), so the blobs
        // are read at that revision: one snapshot, whatever commits and
        // collections happen meanwhile. Not at the head's mod_revision,
        // which is the same document but may be long compacted away when
        // the document has not changed for a while.
        let (at, head) = self.read_head(&keys, &doing).await?;
        let Some(head) = head else {
            return Ok(None);
        };
        let revision = Revision::new(head.mod_revision().to_string());
        let location = self.doc_location(key);
        let head_location = format!("{location}: head {}", keys.head);
        let compacted = self.read_fail(&doing);
        let files = match decode_head(&head_location, head.value())? {
            AnyHead::Legacy(manifest) => {
                let wanted: BTreeSet<&str> =
                    manifest.files.values().map(|e| e.blob.as_str()).collect();
                let blobs = self
                    .read_blobs(&keys, &wanted, at)
                    .await
                    .map_err(compacted)?;
                manifest.files(&location, &keys, |id| {
                    blobs.get(id).map(|bytes| File {
                        contents: bytes.clone(),
                        secret: false,
                    })
                })?
            }
            AnyHead::Current(head) => {
                let entries = self
                    .read_entries(&keys, &location, &head.generation, Some(at), |page| {
                        self.read_step(&format!("read entries {page}"))
                    })
                    .await;
                let (entries, blobs) = self.with_blobs(&keys, entries, at, compacted).await?;
                assemble(&location, &keys, &head, &entries, &blobs)?
            }
        };
        Ok(Some((files, revision)))
    }

    /// The blobs named `wanted`, read at revision `at`, for a format 1
    /// head: a scan of the document's blobs, as the first release read them.
    async fn read_blobs(
        &self,
        keys: &DocKeys,
        wanted: &BTreeSet<&str>,
        at: i64,
    ) -> std::result::Result<HashMap<String, Zeroizing<Vec<u8>>>, Fail> {
        let mut blobs: HashMap<String, Zeroizing<Vec<u8>>> = HashMap::new();
        if wanted.is_empty() {
            return Ok(blobs);
        }
        self.scan(
            &keys.blobs,
            GetOptions::new().with_revision(at),
            |page| self.read_step(&format!("read blobs {page}")),
            |item| {
                let (k, v) = item.into_key_value();
                let v = Zeroizing::new(v);
                if let Some(id) = keys.blob_id_of(&k)
                    && wanted.contains(id)
                {
                    blobs.insert(id.to_string(), v);
                }
            },
        )
        .await?;
        Ok(blobs)
    }

    /// The entries of `generation`, by path: at revision `at`, or the
    /// latest when None. `before` runs before each page's request.
    pub(super) async fn read_entries(
        &self,
        keys: &DocKeys,
        location: &str,
        generation: &str,
        at: Option<i64>,
        before: impl FnMut(usize) -> std::result::Result<(), Fail>,
    ) -> std::result::Result<BTreeMap<String, FileEntry>, EntriesFail> {
        let prefix = keys.generation(generation);
        let options = match at {
            Some(at) => GetOptions::new().with_revision(at),
            None => GetOptions::new(),
        };
        let mut entries = BTreeMap::new();
        let mut bad: Option<RotateError> = None;
        self.scan_large(&prefix, options, LARGE_PAGE, before, |item| {
            if bad.is_some() {
                return;
            }
            let path = item
                .key()
                .strip_prefix(prefix.as_bytes())
                .and_then(|p| std::str::from_utf8(p).ok());
            let Some(path) = path else {
                bad = Some(crate::layout::corrupt(
                    location,
                    format!("an entry key of generation {generation} is not UTF-8"),
                ));
                return;
            };
            match decode_entry(location, path, item.value()) {
                Ok(entry) => {
                    entries.insert(path.to_string(), entry);
                }
                Err(e) => bad = Some(e),
            }
        })
        .await
        .map_err(EntriesFail::Fail)?;
        match bad {
            Some(e) => Err(EntriesFail::Error(e)),
            None => Ok(entries),
        }
    }
    /// How a request of a read at one revision fails: that revision was
    /// compacted away (read again), or an error of `doing`.
    pub(super) fn read_fail<'a>(&'a self, doing: &'a str) -> impl Fn(Fail) -> ReadFail + 'a {
        move |f| match f {
            f if f.is_compacted() => ReadFail::Compacted,
            f => ReadFail::Error(self.backend(doing, f)),
        }
    }

    /// `entries` (read at revision `at`) and the blobs they name, read at
    /// `at` too; a failed request as `compacted` maps it.
    pub(super) async fn with_blobs(
        &self,
        keys: &DocKeys,
        entries: std::result::Result<BTreeMap<String, FileEntry>, EntriesFail>,
        at: i64,
        compacted: impl Fn(Fail) -> ReadFail,
    ) -> std::result::Result<(BTreeMap<String, FileEntry>, Blobs), ReadFail> {
        let entries = entries.map_err(|e| match e {
            EntriesFail::Fail(f) => compacted(f),
            EntriesFail::Error(e) => ReadFail::Error(e),
        })?;
        let wanted: BTreeSet<&str> = entries.values().flat_map(FileEntry::blobs).collect();
        let blobs = self.get_blobs(keys, &wanted, at).await.map_err(compacted)?;
        Ok((entries, blobs))
    }
}

/// Blobs' bytes by id.
type Blobs = HashMap<String, Zeroizing<Vec<u8>>>;

/// Why reading a generation's entries failed: a request, or an entry.
pub(super) enum EntriesFail {
    Fail(Fail),
    Error(RotateError),
}

/// Why one read of a document failed.
pub(super) enum ReadFail {
    /// The revision it read at was compacted between its requests: read again.
    Compacted,
    Error(RotateError),
}

impl From<RotateError> for ReadFail {
    fn from(e: RotateError) -> Self {
        ReadFail::Error(e)
    }
}
