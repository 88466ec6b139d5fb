//! A persistent cache of the byte ranges read from remote files, below the engine and above any
//! source (`root://`, `http(s)://`, replicas): a second pass over the same data reads the disk.
//!
//! Layout: `<dir>/v1/<file key>/<offset>-<len>` holds one range read before, as an 8-byte
//! XXH3-64 checksum of the bytes followed by the bytes. The file key hashes what identifies one
//! version of one file: its URL with credentials redacted (a renewed token keeps the entries),
//! its size, and its content identity (the source's version tag where it has one, and the first
//! bytes of the file, which for a ROOT file hold its UUID and modification time, where opening
//! read them or there is no tag): a replaced file gets a new key and never meets the old entries.
//!
//! Safety: an entry is written to a temporary name and renamed into place, so a process killed
//! mid-write leaves nothing that is read back; every entry is checked against its checksum when
//! read and dropped when it fails. Processes sharing the cache lock a range's lock file while
//! they fetch it, so a range wanted by several at once travels once. A cache directory that
//! cannot be written (full disk, read-only) turns into a pass-through with one warning. Entries
//! are evicted least recently used first when the cache outgrows its cap.

use super::redact::redact;
use super::{ByteRange, ByteSource, SharedSource, SourceCounters, SourceLimits};
use crate::error::{Error, Result};
use async_trait::async_trait;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::hash::Hasher;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use twox_hash::XxHash3_64;

/// Where the cache lives and how large it may grow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheOptions {
    pub dir: PathBuf,
    /// Bytes kept at most; the least recently used entries go first.
    pub max_bytes: u64,
}

impl CacheOptions {
    /// Default cap: 20 GiB.
    pub const DEFAULT_MAX_BYTES: u64 = 20 << 30;
}

/// Bytes of a file's head that identify its content when the source has no version tag.
const IDENTITY_HEAD: u64 = 4096;
const LAYOUT: &str = "v1";
/// A file directory's note of what it caches (the URL, redacted), for `cache info`.
const ABOUT: &str = "about";

/// What a cache directory holds, for `cherenkov cache info`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheSummary {
    pub files: u64,
    pub entries: u64,
    pub bytes: u64,
}

/// A source whose reads go through the cache.
#[derive(Debug)]
pub struct CachedSource {
    inner: SharedSource,
    /// This file version's directory.
    dir: PathBuf,
    root: PathBuf,
    max_bytes: u64,
    /// Ranges on disk, by offset (what this process wrote or found; others' writes are found by
    /// looking at the directory on a miss).
    index: Mutex<BTreeMap<u64, Vec<u64>>>,
    /// Set when the directory cannot be written: the cache only reads from then on.
    read_only: AtomicBool,
    written_since_prune: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    bytes_saved: AtomicU64,
}

/// Wrap `inner` with the cache in `options.dir`.
pub async fn wrap(inner: SharedSource, options: &CacheOptions) -> Result<SharedSource> {
    let size = inner.size().await?;
    // The version tag where the source has one; the file's head too where it costs no request
    // (a version tag of one-second resolution misses a file replaced within that second).
    let mut identity = inner.version().unwrap_or_default().into_bytes();
    match opened_head(&*inner, size) {
        Some(head) => identity.extend(head),
        None if identity.is_empty() => identity.extend(read_head(&*inner, size).await?),
        None => {}
    }
    let mut key = XxHash3_64::default();
    for part in [
        redact(inner.name()).as_bytes(),
        &size.to_le_bytes(),
        &identity,
    ] {
        key.write(&(part.len() as u64).to_le_bytes());
        key.write(part);
    }
    let root = options.dir.join(LAYOUT);
    let dir = root.join(format!("{:016x}", key.finish()));
    let source = CachedSource {
        index: Mutex::new(BTreeMap::new()),
        read_only: AtomicBool::new(false),
        written_since_prune: AtomicU64::new(0),
        hits: AtomicU64::new(0),
        misses: AtomicU64::new(0),
        bytes_saved: AtomicU64::new(0),
        max_bytes: options.max_bytes,
        root,
        dir,
        inner,
    };
    match fs::create_dir_all(&source.dir)
        .and_then(|()| fs::write(source.dir.join(ABOUT), redact(source.inner.name())))
    {
        Ok(()) => source.load_index(),
        Err(e) => source.stop_writing(&e),
    }
    Ok(Arc::new(source))
}

/// The bytes that identify a file's content when the source has no version tag.
fn head_range(size: u64) -> ByteRange {
    ByteRange::new(0, size.min(IDENTITY_HEAD))
}

/// The file's head, when the source read it while opening.
fn opened_head(source: &dyn ByteSource, size: u64) -> Option<Vec<u8>> {
    let head = head_range(size);
    let (r, bytes) = source
        .opening_reads()
        .into_iter()
        .find(|(r, _)| r.contains(&head))?;
    let at = (head.offset - r.offset) as usize;
    Some(bytes[at..at + head.len as usize].to_vec())
}

async fn read_head(source: &dyn ByteSource, size: u64) -> Result<Vec<u8>> {
    let mut got = source.read_ranges(&[head_range(size)]).await?;
    Ok(got.pop().map(|b| b.to_vec()).unwrap_or_default())
}

fn entry_name(r: ByteRange) -> String {
    format!("{}-{}", r.offset, r.len)
}

fn lock_path(dir: &Path, r: ByteRange) -> PathBuf {
    dir.join(format!(".{}.lock", entry_name(r)))
}

fn parse_entry_name(name: &str) -> Option<ByteRange> {
    let (offset, len) = name.split_once('-')?;
    Some(ByteRange::new(offset.parse().ok()?, len.parse().ok()?))
}

fn checksum(bytes: &[u8]) -> u64 {
    XxHash3_64::oneshot(bytes)
}

/// Warn once per process and cache directory.
fn warn_once(dir: &Path, message: &str) {
    static WARNED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if !warned.iter().any(|d| d == dir) {
        warned.push(dir.to_path_buf());
        eprintln!("cherenkov: cache {}: {message}", dir.display());
    }
}

impl CachedSource {
    fn load_index(&self) {
        let Ok(listing) = fs::read_dir(&self.dir) else {
            return;
        };
        let mut index = self.index.lock().unwrap();
        for entry in listing.flatten() {
            if let Some(r) = entry.file_name().to_str().and_then(parse_entry_name) {
                index.entry(r.offset).or_default().push(r.len);
            }
        }
    }

    fn stop_writing(&self, e: &std::io::Error) {
        if !self.read_only.swap(true, Ordering::Relaxed) {
            warn_once(
                &self.root,
                &format!("cannot be written ({e}): reading remotely without caching"),
            );
        }
    }

    /// The cached entry holding `r`, if this process knows of one.
    fn covering(&self, r: ByteRange) -> Option<ByteRange> {
        let index = self.index.lock().unwrap();
        index
            .range(..=r.offset)
            .rev()
            .flat_map(|(&offset, lens)| lens.iter().map(move |&len| ByteRange::new(offset, len)))
            .find(|e| e.contains(&r))
    }

    /// The bytes of entry `e`, checked; a damaged entry is removed.
    fn read_entry(&self, e: ByteRange) -> Option<Bytes> {
        let path = self.dir.join(entry_name(e));
        let data = fs::read(&path).ok()?;
        let sound = data.len() as u64 == 8 + e.len
            && u64::from_le_bytes(data[..8].try_into().ok()?) == checksum(&data[8..]);
        if !sound {
            warn_once(
                &path,
                "entry failed its checksum: removed and read again remotely",
            );
            let _ = fs::remove_file(&path);
            self.forget(e);
            return None;
        }
        // Reads mark an entry as recently used, for eviction.
        if let Ok(f) = File::options().write(true).open(&path) {
            let _ = f.set_modified(SystemTime::now());
        }
        Some(Bytes::from(data).slice(8..))
    }

    fn forget(&self, e: ByteRange) {
        if let Some(lens) = self.index.lock().unwrap().get_mut(&e.offset) {
            lens.retain(|&l| l != e.len);
        }
    }

    /// Range `r` from the cache: an entry holding it, known or written by another process since.
    fn lookup(&self, r: ByteRange) -> Option<Bytes> {
        let e = match self.covering(r) {
            Some(e) => e,
            None if self.dir.join(entry_name(r)).exists() => {
                self.index
                    .lock()
                    .unwrap()
                    .entry(r.offset)
                    .or_default()
                    .push(r.len);
                r
            }
            None => return None,
        };
        let bytes = self.read_entry(e)?;
        let at = (r.offset - e.offset) as usize;
        Some(bytes.slice(at..at + r.len as usize))
    }

    /// Write entry `r` atomically: a temporary file renamed into place.
    fn store(&self, r: ByteRange, bytes: &[u8]) {
        if self.read_only.load(Ordering::Relaxed) {
            return;
        }
        let name = entry_name(r);
        let temporary = self
            .dir
            .join(format!(".{name}.{}.partial", std::process::id()));
        let written = (|| {
            let mut f = File::create(&temporary)?;
            f.write_all(&checksum(bytes).to_le_bytes())?;
            f.write_all(bytes)?;
            f.sync_data()?;
            fs::rename(&temporary, self.dir.join(&name))
        })();
        match written {
            Ok(()) => {
                self.index
                    .lock()
                    .unwrap()
                    .entry(r.offset)
                    .or_default()
                    .push(r.len);
                let since = self
                    .written_since_prune
                    .fetch_add(r.len + 8, Ordering::Relaxed);
                if since + r.len > self.max_bytes / 16 {
                    self.written_since_prune.store(0, Ordering::Relaxed);
                    let _ = prune(&self.root, self.max_bytes);
                }
            }
            Err(e) => {
                let _ = fs::remove_file(&temporary);
                self.stop_writing(&e);
            }
        }
    }

    /// A range's lock, held while this process fetches it so that others wait for it instead
    /// of fetching it again. `None` when another process holds it, or locks cannot be had
    /// (read-only cache).
    fn try_lock(&self, r: ByteRange) -> Option<File> {
        if self.read_only.load(Ordering::Relaxed) {
            return None;
        }
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(lock_path(&self.dir, r))
            .ok()?;
        f.try_lock().is_ok().then_some(f)
    }

    /// Fetch `wanted` (indices into `ranges`) from the source in one read and cache them.
    async fn fetch(
        &self,
        ranges: &[ByteRange],
        wanted: &[usize],
        out: &mut [Option<Bytes>],
    ) -> Result<()> {
        if wanted.is_empty() {
            return Ok(());
        }
        let asked: Vec<ByteRange> = wanted.iter().map(|&i| ranges[i]).collect();
        let got = self.inner.read_ranges(&asked).await?;
        self.misses.fetch_add(asked.len() as u64, Ordering::Relaxed);
        for ((&i, r), bytes) in wanted.iter().zip(&asked).zip(got) {
            self.store(*r, &bytes);
            out[i] = Some(bytes);
        }
        Ok(())
    }
}

#[async_trait]
impl ByteSource for CachedSource {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn size(&self) -> Result<u64> {
        self.inner.size().await
    }

    async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        let mut out: Vec<Option<Bytes>> = ranges.iter().map(|&r| self.lookup(r)).collect();
        let found: Vec<usize> = (0..ranges.len()).filter(|&i| out[i].is_some()).collect();
        self.hits.fetch_add(found.len() as u64, Ordering::Relaxed);
        self.bytes_saved.fetch_add(
            found.iter().map(|&i| ranges[i].len).sum::<u64>(),
            Ordering::Relaxed,
        );
        // Ranges no other process is fetching are ours (locked); the others are waited for.
        let mut ours = Vec::new();
        let mut locks = Vec::new();
        let mut theirs = Vec::new();
        for i in (0..ranges.len()).filter(|&i| out[i].is_none()) {
            match self.try_lock(ranges[i]) {
                Some(lock) => {
                    locks.push(lock);
                    ours.push(i);
                }
                None if !self.read_only.load(Ordering::Relaxed) => theirs.push(i),
                None => ours.push(i),
            }
        }
        self.fetch(ranges, &ours, &mut out).await?;
        drop(locks);
        let mut still_missing = Vec::new();
        for i in theirs {
            let r = ranges[i];
            let dir = self.dir.clone();
            // Taking the lock (and letting it go) waits for the process fetching the range.
            let _ = tokio::task::spawn_blocking(move || {
                let lock = OpenOptions::new().write(true).open(lock_path(&dir, r));
                lock.map(|f| f.lock())
            })
            .await;
            match self.lookup(r) {
                Some(bytes) => {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    self.bytes_saved.fetch_add(r.len, Ordering::Relaxed);
                    out[i] = Some(bytes);
                }
                None => still_missing.push(i),
            }
        }
        self.fetch(ranges, &still_missing, &mut out).await?;
        out.into_iter()
            .zip(ranges)
            .map(|(b, r)| {
                b.ok_or_else(|| {
                    Error::io(
                        self.name(),
                        format!("cache: range {}..{} was not read", r.offset, r.end()),
                    )
                })
            })
            .collect()
    }

    fn limits(&self) -> SourceLimits {
        self.inner.limits()
    }
    fn counters(&self) -> SourceCounters {
        SourceCounters {
            disk_cache_hits: self.hits.load(Ordering::Relaxed),
            disk_cache_misses: self.misses.load(Ordering::Relaxed),
            disk_cache_bytes_saved: self.bytes_saved.load(Ordering::Relaxed),
            ..self.inner.counters()
        }
    }
    fn opening_reads(&self) -> Vec<(ByteRange, Bytes)> {
        self.inner.opening_reads()
    }
    fn trace(&self) -> Option<Vec<super::trace::TraceEvent>> {
        self.inner.trace()
    }
    fn replicas(&self) -> Option<Vec<super::multi::ReplicaReport>> {
        self.inner.replicas()
    }
    fn version(&self) -> Option<String> {
        self.inner.version()
    }
    async fn checksum(&self) -> Result<Option<String>> {
        self.inner.checksum().await
    }
}

/// Every entry under `root` (`<dir>/v1`): (path, size, last use).
fn entries(root: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let mut out = Vec::new();
    for file_dir in fs::read_dir(root).into_iter().flatten().flatten() {
        for entry in fs::read_dir(file_dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if parse_entry_name(name).is_none() {
                continue;
            }
            if let Ok(meta) = entry.metadata() {
                let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                out.push((entry.path(), meta.len(), used));
            }
        }
    }
    out
}

/// Temporary files left by processes killed while writing (never read: not entry names).
fn remove_stale_partials(root: &Path) {
    let stale = SystemTime::now() - std::time::Duration::from_secs(3600);
    for file_dir in fs::read_dir(root).into_iter().flatten().flatten() {
        for entry in fs::read_dir(file_dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let partial = entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.ends_with(".partial"));
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < stale);
            if partial && old {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}

/// What the cache at `dir` holds.
pub fn summary(dir: &Path) -> CacheSummary {
    let root = dir.join(LAYOUT);
    let all = entries(&root);
    CacheSummary {
        files: fs::read_dir(&root).map_or(0, |d| d.flatten().count() as u64),
        entries: all.len() as u64,
        bytes: all.iter().map(|(_, len, _)| len).sum(),
    }
}

/// Remove least recently used entries until the cache holds at most `max_bytes`; returns the
/// bytes removed.
pub fn prune(root_or_dir: &Path, max_bytes: u64) -> std::io::Result<u64> {
    let root = if root_or_dir.ends_with(LAYOUT) {
        root_or_dir.to_path_buf()
    } else {
        root_or_dir.join(LAYOUT)
    };
    remove_stale_partials(&root);
    let mut all = entries(&root);
    let mut total: u64 = all.iter().map(|(_, len, _)| len).sum();
    all.sort_by_key(|(_, _, used)| *used);
    let mut removed = 0;
    for (path, len, _) in all {
        if total <= max_bytes {
            break;
        }
        match fs::remove_file(&path) {
            Ok(()) => {
                total -= len;
                removed += len;
            }
            Err(e) if e.kind() == ErrorKind::NotFound => total -= len,
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

/// Remove everything the cache at `dir` holds; returns the bytes removed.
pub fn clear(dir: &Path) -> std::io::Result<u64> {
    let root = dir.join(LAYOUT);
    let bytes = summary(dir).bytes;
    match fs::remove_dir_all(&root) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e),
        _ => Ok(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::memory::MemorySource;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("cherenkov-cache-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn data(seed: u8, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    fn options(dir: &Path) -> CacheOptions {
        CacheOptions {
            dir: dir.to_path_buf(),
            max_bytes: CacheOptions::DEFAULT_MAX_BYTES,
        }
    }

    const RANGES: [ByteRange; 3] = [
        ByteRange {
            offset: 10,
            len: 100,
        },
        ByteRange {
            offset: 5000,
            len: 3000,
        },
        ByteRange {
            offset: 9000,
            len: 1000,
        },
    ];

    async fn read(dir: &Path, memory: &Arc<MemorySource>) -> (Vec<Bytes>, SourceCounters) {
        let cached = wrap(memory.clone(), &options(dir)).await.unwrap();
        let got = cached.read_ranges(&RANGES).await.unwrap();
        (got, cached.counters())
    }

    fn assert_holds(got: &[Bytes], file: &[u8]) {
        for (r, bytes) in RANGES.iter().zip(got) {
            assert_eq!(
                &bytes[..],
                &file[r.offset as usize..r.end() as usize],
                "{r:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_second_pass_reads_the_disk_only() {
        let dir = temp_dir("second");
        let file = data(1, 20_000);
        let memory = Arc::new(MemorySource::new("root://h//f.root", file.clone()));
        let (first, c) = read(&dir, &memory).await;
        assert_eq!((c.disk_cache_hits, c.disk_cache_misses), (0, 3));
        let asked = memory.requests().len();
        let (second, c) = read(&dir, &memory).await;
        assert_eq!(first, second);
        assert_holds(&second, &file);
        assert_eq!(
            (
                c.disk_cache_hits,
                c.disk_cache_misses,
                c.disk_cache_bytes_saved
            ),
            (3, 0, 4100)
        );
        // One request: the head that identifies the file (a memory source has no version).
        assert_eq!(memory.requests().len() - asked, 1);
        assert_eq!(summary(&dir).entries, 3);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_replaced_file_never_meets_the_old_entries() {
        let dir = temp_dir("replaced");
        let old = Arc::new(MemorySource::new("http://h/f.root", data(1, 20_000)));
        read(&dir, &old).await;
        let new_file = data(2, 20_000);
        let new = Arc::new(MemorySource::new("http://h/f.root", new_file.clone()));
        let (got, c) = read(&dir, &new).await;
        assert_holds(&got, &new_file);
        assert_eq!(c.disk_cache_hits, 0);
        assert_eq!(summary(&dir).files, 2);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_damaged_entry_is_dropped_and_read_again() {
        let dir = temp_dir("damaged");
        let file = data(3, 20_000);
        let memory = Arc::new(MemorySource::new("root://h//f.root", file.clone()));
        read(&dir, &memory).await;
        let entry = entries(&dir.join(LAYOUT))
            .into_iter()
            .find(|(p, _, _)| p.ends_with("5000-3000"))
            .unwrap()
            .0;
        let mut bytes = fs::read(&entry).unwrap();
        bytes[100] ^= 1;
        fs::write(&entry, &bytes).unwrap();
        // A write cut short by a kill leaves only a temporary file, never read.
        fs::write(entry.with_file_name(".9000-1000.1.partial"), b"cut").unwrap();
        let (got, c) = read(&dir, &memory).await;
        assert_holds(&got, &file);
        assert_eq!((c.disk_cache_hits, c.disk_cache_misses), (2, 1));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_directory_that_cannot_be_written_reads_through() {
        let dir = temp_dir("blocked");
        fs::write(&dir, b"a file where the directory should be").unwrap();
        let file = data(4, 20_000);
        let memory = Arc::new(MemorySource::new("root://h//f.root", file.clone()));
        let (got, c) = read(&dir, &memory).await;
        assert_holds(&got, &file);
        assert_eq!((c.disk_cache_hits, c.disk_cache_misses), (0, 3));
        fs::remove_file(&dir).unwrap();
    }

    #[tokio::test]
    async fn pruning_keeps_the_recently_used() {
        let dir = temp_dir("prune");
        let memory = Arc::new(MemorySource::new("root://h//f.root", data(5, 20_000)));
        read(&dir, &memory).await;
        let before = summary(&dir);
        let removed = prune(&dir, before.bytes - 1).unwrap();
        let after = summary(&dir);
        assert!(removed > 0 && after.bytes < before.bytes);
        assert_eq!(clear(&dir).unwrap(), after.bytes);
        assert_eq!(summary(&dir), CacheSummary::default());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_rotated_token_keeps_the_entries() {
        let dir = temp_dir("token");
        let file = data(6, 20_000);
        for token in ["first", "second"] {
            let url = format!("https://host/f.root?authz={token}");
            let memory = Arc::new(MemorySource::new(&url, file.clone()));
            read(&dir, &memory).await;
        }
        assert_eq!(summary(&dir).files, 1);
        let about = fs::read_dir(dir.join(LAYOUT))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let about = fs::read_to_string(about.join(ABOUT)).unwrap();
        assert!(
            !about.contains("first") && !about.contains("second"),
            "{about}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
