//! A persistent cache of the byte ranges read from remote files, below the engine and above any
//! source (`root://`, `http(s)://`, replicas): a second pass over the same data reads the disk.
//!
//! Layout: `<dir>/v2/<file key>/` holds one entry file per request fetched (`store`: all its
//! ranges, each with an XXH3-64 checksum), the URL it caches (`about`) and a lock file (`lock`).
//! The file key hashes what identifies one version of one file: its URL with credentials
//! redacted (a renewed token keeps the entries), its size, and its content identity (the
//! source's version tag where it has one, and the first bytes of the file, which for a ROOT file
//! hold its UUID and modification time, where opening read them or there is no tag): a replaced
//! file gets a new key and never meets the old entries.
//!
//! The read path touches no directory on a hit: the ranges cached for a file are indexed in
//! memory when it is opened (`index`) and read with one open per entry file. Fetched ranges go to
//! a background writer (`writer`), which writes an entry under a temporary name and renames it
//! into place, so a process killed mid-write leaves nothing that is read back; every range is
//! checked against its checksum when read, and a damaged entry is removed and fetched again.
//! Processes sharing the cache lock the ranges they fetch (`lock`) until their entry is written,
//! so a range wanted by several at once travels once. A cache directory that cannot be written
//! (full disk, read-only) turns into a pass-through with one warning. Entries are evicted least
//! recently used first when the cache outgrows its cap. Beside the ranges, the cache keeps small
//! named records for the layers above (`notes`: what a dataset's files hold), pruned with them.

mod index;
mod lock;
pub mod notes;
mod store;
mod writer;

use super::direct;
use super::redact::redact;
use super::{ByteRange, ByteSource, Opened, SharedSource, SourceLimits, SourceReport};
use crate::error::{Error, Result};
use async_trait::async_trait;
use bytes::Bytes;
use index::{Index, Located};
use lock::RangeLocks;
use std::collections::{BTreeMap, HashSet};
use std::fs::{self, File};
use std::hash::Hasher;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use twox_hash::XxHash3_64;

/// Where the cache lives and how large it may grow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheOptions {
    pub dir: PathBuf,
    /// Bytes kept at most; the least recently used entries go first.
    pub max_bytes: u64,
    /// Entries read around the page cache, and dropped from it once written (see `direct`).
    pub direct_io: bool,
}

impl CacheOptions {
    /// Default cap: 20 GiB.
    pub const DEFAULT_MAX_BYTES: u64 = 20 << 30;
}

/// Bytes of a file's head that identify its content when the source has no version tag.
const IDENTITY_HEAD: u64 = 4096;
const LAYOUT: &str = "v2";
/// Layouts of earlier versions, removed by `clear`.
const OLD_LAYOUTS: [&str; 1] = ["v1"];
/// A file directory's note of what it caches (the URL, redacted), for `cache info`.
const ABOUT: &str = "about";
/// How long `flush` waits for the entries queued to be written.
const FLUSH_WAIT: Duration = Duration::from_secs(30);

/// What a cache directory holds, for `cherenkov cache info`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheSummary {
    pub files: u64,
    /// Ranges held.
    pub entries: u64,
    pub bytes: u64,
}

/// What a source and the writer's jobs for it share: one file version's directory and index.
#[derive(Debug)]
struct Shared {
    dir: PathBuf,
    root: PathBuf,
    max_bytes: u64,
    direct_io: bool,
    index: Mutex<Index>,
    /// Set when the directory cannot be written: the cache only reads from then on.
    read_only: AtomicBool,
    written_since_prune: AtomicU64,
}

/// A source whose reads go through the cache.
#[derive(Debug)]
pub struct CachedSource {
    inner: SharedSource,
    shared: Arc<Shared>,
    /// Entry files this source has marked as used (once each, for eviction).
    touched: Mutex<HashSet<Arc<str>>>,
    hits: AtomicU64,
    misses: AtomicU64,
    bytes_saved: AtomicU64,
}

/// Wrap an opened source with the cache in `options.dir`.
pub async fn wrap(opened: &Opened, options: &CacheOptions) -> Result<SharedSource> {
    let inner = opened.source.clone();
    let size = inner.size();
    // The version tag where the source has one; the file's head too where it costs no request
    // (a version tag of one-second resolution misses a file replaced within that second).
    let mut identity = opened.version.clone().unwrap_or_default().into_bytes();
    match opened_head(&opened.reads, size) {
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
    let shared = Shared {
        dir: root.join(format!("{:016x}", key.finish())),
        root,
        max_bytes: options.max_bytes,
        direct_io: options.direct_io,
        index: Mutex::new(Index::default()),
        read_only: AtomicBool::new(false),
        written_since_prune: AtomicU64::new(0),
    };
    let about = shared.dir.join(ABOUT);
    let made = fs::create_dir_all(&shared.dir).and_then(|()| {
        if about.exists() {
            Ok(())
        } else {
            fs::write(&about, redact(inner.name()))
        }
    });
    if let Err(e) = made {
        shared.stop_writing(&e);
    }
    shared.index.lock().unwrap().refresh(&shared.dir);
    Ok(Arc::new(CachedSource {
        inner,
        shared: Arc::new(shared),
        touched: Mutex::new(HashSet::new()),
        hits: AtomicU64::new(0),
        misses: AtomicU64::new(0),
        bytes_saved: AtomicU64::new(0),
    }))
}

/// The bytes that identify a file's content when the source has no version tag.
fn head_range(size: u64) -> ByteRange {
    ByteRange::new(0, size.min(IDENTITY_HEAD))
}

/// The file's head, when the source read it while opening.
fn opened_head(reads: &[(ByteRange, Bytes)], size: u64) -> Option<Vec<u8>> {
    let head = head_range(size);
    let (r, bytes) = reads.iter().find(|(r, _)| r.contains(&head))?;
    let at = (head.offset - r.offset) as usize;
    Some(bytes[at..at + head.len as usize].to_vec())
}

async fn read_head(source: &dyn ByteSource, size: u64) -> Result<Vec<u8>> {
    let mut got = source.read_ranges(&[head_range(size)]).await?;
    Ok(got.pop().map(|b| b.to_vec()).unwrap_or_default())
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

impl Shared {
    fn stop_writing(&self, e: &std::io::Error) {
        if !self.read_only.swap(true, Ordering::Relaxed) {
            warn_once(
                &self.root,
                &format!("cannot be written ({e}): reading remotely without caching"),
            );
        }
    }

    fn writable(&self) -> bool {
        !self.read_only.load(Ordering::Relaxed)
    }

    /// On the writer's thread, once an entry is in place (or could not be written).
    fn written(&self, written: writer::Written) {
        match written {
            Ok((name, stored)) => {
                let size: u64 = stored.iter().map(|s| s.range.len).sum();
                self.index.lock().unwrap().add(&name, stored);
                let since = self.written_since_prune.fetch_add(size, Ordering::Relaxed);
                if since + size > self.max_bytes / 16 {
                    self.written_since_prune.store(0, Ordering::Relaxed);
                    let _ = prune(&self.root, self.max_bytes);
                }
            }
            Err(e) => self.stop_writing(&e),
        }
    }
}

impl CachedSource {
    /// Fill `out[i]` for the ranges `which` the cache holds; returns those it does not.
    fn read_cached(
        &self,
        ranges: &[ByteRange],
        which: Vec<usize>,
        out: &mut [Option<Bytes>],
    ) -> Vec<usize> {
        let mut missing = Vec::new();
        let mut by_entry: BTreeMap<Arc<str>, Vec<(usize, Located)>> = BTreeMap::new();
        {
            let index = self.shared.index.lock().unwrap();
            for i in which {
                match index.find(ranges[i]) {
                    Some(l) => by_entry.entry(l.entry.clone()).or_default().push((i, l)),
                    None => missing.push(i),
                }
            }
        }
        for (entry, wanted) in by_entry {
            let path = self.shared.dir.join(&*entry);
            let Ok(direct::Opened { mut file, direct }) =
                direct::open(&path, self.shared.direct_io)
            else {
                // Evicted by another process since it was indexed.
                self.shared.index.lock().unwrap().forget(&entry);
                missing.extend(wanted.iter().map(|(i, _)| i));
                continue;
            };
            let mut damaged = false;
            let mut read: BTreeMap<u64, Bytes> = BTreeMap::new();
            for (i, l) in wanted {
                let s = l.stored;
                let bytes = match read.get(&s.at) {
                    Some(b) => Some(b.clone()),
                    None => read_stored(&mut file, direct, s).inspect(|b| {
                        read.insert(s.at, b.clone());
                    }),
                };
                let Some(bytes) = bytes else {
                    damaged = true;
                    missing.push(i);
                    continue;
                };
                let at = (ranges[i].offset - s.range.offset) as usize;
                out[i] = Some(bytes.slice(at..at + ranges[i].len as usize));
                self.hits.fetch_add(1, Ordering::Relaxed);
                self.bytes_saved.fetch_add(ranges[i].len, Ordering::Relaxed);
            }
            if damaged {
                warn_once(
                    &path,
                    "entry failed its checksum: removed and read again remotely",
                );
                let _ = store::remove(&path);
                self.shared.index.lock().unwrap().forget(&entry);
            } else if self.touched.lock().unwrap().insert(entry) {
                // Reads mark an entry as recently used, for eviction.
                let _ = file.set_modified(SystemTime::now());
            }
        }
        missing
    }

    /// Fetch `wanted` (indices into `ranges`) from the source in one read and hand them to the
    /// writer, which lets `locks` go once they are on disk.
    async fn fetch(
        &self,
        ranges: &[ByteRange],
        wanted: &[usize],
        locks: Option<RangeLocks>,
        out: &mut [Option<Bytes>],
    ) -> Result<()> {
        if wanted.is_empty() {
            return Ok(());
        }
        let asked: Vec<ByteRange> = wanted.iter().map(|&i| ranges[i]).collect();
        let got = self.inner.read_ranges(&asked).await?;
        self.misses.fetch_add(asked.len() as u64, Ordering::Relaxed);
        for (&i, bytes) in wanted.iter().zip(&got) {
            out[i] = Some(bytes.clone());
        }
        if self.shared.writable() {
            let shared = self.shared.clone();
            let job = writer::Job {
                dir: shared.dir.clone(),
                direct_io: shared.direct_io,
                ranges: asked,
                bytes: got,
                done: Box::new(move |written| {
                    shared.written(written);
                    drop(locks);
                }),
            };
            // A full queue: this request is not cached (its locks go with the job).
            let _ = writer::submit(job);
        }
        Ok(())
    }
}

/// The bytes of one stored range, checked against its checksum.
fn read_stored(file: &mut File, direct: bool, s: store::Stored) -> Option<Bytes> {
    if direct {
        let size = file.metadata().ok()?.len();
        let at = ByteRange::new(s.at, s.range.len);
        let bytes = direct::read_ranges(file, size, &[at]).ok()?.pop()?;
        return (store::checksum(&bytes) == s.checksum).then_some(bytes);
    }
    let mut bytes = vec![0; usize::try_from(s.range.len).ok()?];
    file.seek(SeekFrom::Start(s.at)).ok()?;
    file.read_exact(&mut bytes).ok()?;
    (store::checksum(&bytes) == s.checksum).then(|| Bytes::from(bytes))
}

/// Wait (at most 30 s) until the entries of every file read so far are on disk: at the
/// process's exit, so that the next process finds them (the bindings call it `atexit`).
pub fn flush() {
    writer::flush(FLUSH_WAIT);
}

#[async_trait]
impl ByteSource for CachedSource {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }

    async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        let mut out: Vec<Option<Bytes>> = vec![None; ranges.len()];
        let mut missing = self.read_cached(ranges, (0..ranges.len()).collect(), &mut out);
        let locks = if missing.is_empty() || !self.shared.writable() {
            None
        } else {
            RangeLocks::new(&self.shared.dir)
                .inspect_err(|e| self.shared.stop_writing(e))
                .ok()
        };
        // Ranges no other process is fetching are ours (locked); the others are waited for.
        let mut theirs = Vec::new();
        if let Some(locks) = &locks {
            let all = std::mem::take(&mut missing);
            (missing, theirs) = all.into_iter().partition(|&i| locks.try_lock(ranges[i]));
            if !missing.is_empty() {
                // Another process may have written some of them since they were looked up.
                self.shared.index.lock().unwrap().refresh(&self.shared.dir);
                missing = self.read_cached(ranges, missing, &mut out);
            }
        }
        let dir = self.shared.dir.clone();
        let waited: Vec<ByteRange> = theirs.iter().map(|&i| ranges[i]).collect();
        let wait = async move {
            if !waited.is_empty() {
                let _ = tokio::task::spawn_blocking(move || {
                    for r in waited {
                        lock::wait_unlocked(&dir, r);
                    }
                })
                .await;
            }
        };
        let (fetched, ()) = tokio::join!(self.fetch(ranges, &missing, locks, &mut out), wait);
        fetched?;
        if !theirs.is_empty() {
            self.shared.index.lock().unwrap().refresh(&self.shared.dir);
            // Not written by the one that held them (a range overlapping a locked one, a full
            // queue, a failed fetch): fetched here, and locked until written like any other.
            let still_missing = self.read_cached(ranges, theirs, &mut out);
            let locks = if still_missing.is_empty() || !self.shared.writable() {
                None
            } else {
                RangeLocks::new(&self.shared.dir).ok().inspect(|locks| {
                    for &i in &still_missing {
                        locks.try_lock(ranges[i]);
                    }
                })
            };
            self.fetch(ranges, &still_missing, locks, &mut out).await?;
        }
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
    fn report(&self) -> SourceReport {
        let mut report = self.inner.report();
        report.counters.disk_cache_hits = self.hits.load(Ordering::Relaxed);
        report.counters.disk_cache_misses = self.misses.load(Ordering::Relaxed);
        report.counters.disk_cache_bytes_saved = self.bytes_saved.load(Ordering::Relaxed);
        report
    }
    async fn checksum(&self) -> Result<Option<String>> {
        self.inner.checksum().await
    }
}

/// The directories of the files cached under `root` (`<dir>/v2`).
fn file_dirs(root: &Path) -> Vec<PathBuf> {
    fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path())
        .filter(|p| p.is_dir())
        .collect()
}

fn layout_root(root_or_dir: &Path) -> PathBuf {
    if root_or_dir.ends_with(LAYOUT) {
        root_or_dir.to_path_buf()
    } else {
        root_or_dir.join(LAYOUT)
    }
}

/// What the cache at `dir` holds.
pub fn summary(dir: &Path) -> CacheSummary {
    let mut s = CacheSummary {
        bytes: notes::list(dir).iter().map(|n| n.size).sum(),
        ..CacheSummary::default()
    };
    for file_dir in file_dirs(&dir.join(LAYOUT)) {
        s.files += 1;
        for found in store::list(&file_dir) {
            s.bytes += found.size;
            s.entries += store::read_header(&found.path).map_or(0, |r| r.len() as u64);
        }
    }
    s
}

/// Remove least recently used entries until the cache holds at most `max_bytes`; returns the
/// bytes removed.
pub fn prune(root_or_dir: &Path, max_bytes: u64) -> std::io::Result<u64> {
    let root = layout_root(root_or_dir);
    let mut all = notes::list(root.parent().unwrap_or(&root));
    for file_dir in file_dirs(&root) {
        store::remove_stale_partials(&file_dir);
        all.extend(store::list(&file_dir));
    }
    let mut total: u64 = all.iter().map(|f| f.size).sum();
    all.sort_by_key(|f| f.used);
    let mut removed = 0;
    for found in all {
        if total <= max_bytes {
            break;
        }
        store::remove(&found.path)?;
        total -= found.size;
        removed += found.size;
    }
    Ok(removed)
}

/// Remove everything the cache at `dir` holds; returns the bytes removed.
pub fn clear(dir: &Path) -> std::io::Result<u64> {
    let bytes = summary(dir).bytes;
    for layout in OLD_LAYOUTS.iter().chain([&LAYOUT, &notes::FOLDER]) {
        match fs::remove_dir_all(dir.join(layout)) {
            Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::memory::MemorySource;
    use crate::source::SourceCounters;

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
            direct_io: false,
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
        let cached = wrap(&Opened::plain(memory.clone()), &options(dir))
            .await
            .unwrap();
        let got = cached.read_ranges(&RANGES).await.unwrap();
        flush();
        (got, cached.report().counters)
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

    /// The one entry file the first read wrote.
    fn only_entry(dir: &Path) -> PathBuf {
        let dirs = file_dirs(&dir.join(LAYOUT));
        let found = store::list(&dirs[0]);
        assert_eq!((dirs.len(), found.len()), (1, 1));
        found.into_iter().next().unwrap().path
    }

    #[tokio::test]
    async fn a_damaged_entry_is_dropped_and_read_again() {
        let dir = temp_dir("damaged");
        let file = data(3, 20_000);
        let memory = Arc::new(MemorySource::new("root://h//f.root", file.clone()));
        read(&dir, &memory).await;
        let entry = only_entry(&dir);
        let mut bytes = fs::read(&entry).unwrap();
        // A byte of the second range (the header holds 3 ranges: 16 + 3 × 24 + 8 bytes).
        bytes[96 + 100 + 10] ^= 1;
        fs::write(&entry, &bytes).unwrap();
        // A write cut short by a kill leaves only a temporary file, never read.
        fs::write(entry.with_file_name(".0123.entry.1.0.partial"), b"cut").unwrap();
        let (got, c) = read(&dir, &memory).await;
        assert_holds(&got, &file);
        assert_eq!((c.disk_cache_hits, c.disk_cache_misses), (2, 1));
        assert!(!entry.exists());
        // The range read again is an entry of its own.
        assert_eq!(summary(&dir).entries, 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_truncated_entry_is_never_read() {
        let dir = temp_dir("truncated");
        let file = data(7, 20_000);
        let memory = Arc::new(MemorySource::new("root://h//f.root", file.clone()));
        read(&dir, &memory).await;
        let entry = only_entry(&dir);
        let bytes = fs::read(&entry).unwrap();
        fs::write(&entry, &bytes[..bytes.len() - 1]).unwrap();
        let (got, c) = read(&dir, &memory).await;
        assert_holds(&got, &file);
        assert_eq!((c.disk_cache_hits, c.disk_cache_misses), (0, 3));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn sources_reading_at_once_fetch_each_range_once() {
        let dir = temp_dir("shared");
        let file = data(8, 20_000);
        let memory = Arc::new(MemorySource::new("root://h//f.root", file.clone()));
        let opened = Opened::plain(memory.clone());
        let a = wrap(&opened, &options(&dir)).await.unwrap();
        let b = wrap(&opened, &options(&dir)).await.unwrap();
        let (got_a, got_b) = tokio::join!(a.read_ranges(&RANGES), b.read_ranges(&RANGES));
        assert_holds(&got_a.unwrap(), &file);
        assert_holds(&got_b.unwrap(), &file);
        let (a, b) = (a.report().counters, b.report().counters);
        assert_eq!(a.disk_cache_misses + b.disk_cache_misses, 3);
        assert_eq!(a.disk_cache_hits + b.disk_cache_hits, 3);
        flush();
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
