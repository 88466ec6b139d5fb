//! Entry files: the ranges of one fetched request in one file, each with its own checksum.
//!
//! An entry file is `<magic> <count u32> <0 u32> <count × (offset u64, len u64, xxh3 u64)>
//! <xxh3 of all that u64>` followed by the ranges' bytes in that order, all little-endian. Its name
//! is the hash of that header (`<hash>.entry`), so two processes writing the same request write
//! the same file. It is written under a temporary name and renamed into place: a process killed
//! mid-write leaves a `.partial` file that is never read (and removed by pruning once stale).

use super::super::ByteRange;
use bytes::Bytes;
use std::fs::{self, File};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};
use twox_hash::XxHash3_64;

const MAGIC: &[u8; 8] = b"chkcache";
const FIXED: usize = 16;
const PER_RANGE: usize = 24;
/// The most ranges an entry may hold: a header claiming more is damaged.
const MAX_RANGES: usize = 1 << 20;
const SUFFIX: &str = ".entry";

/// One range of an entry file: where its bytes are in the file and their checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stored {
    pub range: ByteRange,
    /// Offset of the range's bytes in the entry file.
    pub at: u64,
    pub checksum: u64,
}

pub fn checksum(bytes: &[u8]) -> u64 {
    XxHash3_64::oneshot(bytes)
}

/// The entry's file name, when `name` is one.
pub fn is_entry(name: &str) -> bool {
    name.ends_with(SUFFIX) && !name.starts_with('.')
}

fn header(ranges: &[ByteRange], sums: &[u64]) -> Vec<u8> {
    let mut h = Vec::with_capacity(FIXED + PER_RANGE * ranges.len() + 8);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&(ranges.len() as u32).to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    for (r, sum) in ranges.iter().zip(sums) {
        for v in [r.offset, r.len, *sum] {
            h.extend_from_slice(&v.to_le_bytes());
        }
    }
    let sum = checksum(&h);
    h.extend_from_slice(&sum.to_le_bytes());
    h
}

fn stored(ranges: &[ByteRange], sums: &[u64], header_len: usize) -> Vec<Stored> {
    let mut at = header_len as u64;
    ranges
        .iter()
        .zip(sums)
        .map(|(&range, &checksum)| {
            let s = Stored {
                range,
                at,
                checksum,
            };
            at += range.len;
            s
        })
        .collect()
}

/// Write one entry holding `ranges` (with their `bytes`) into `dir`, atomically; its name and
/// where each range is. `uncached`: the entry leaves the page cache once on disk.
pub fn write(
    dir: &Path,
    ranges: &[ByteRange],
    bytes: &[Bytes],
    uncached: bool,
) -> std::io::Result<(String, Vec<Stored>)> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let sums: Vec<u64> = bytes.iter().map(|b| checksum(b)).collect();
    let head = header(ranges, &sums);
    let name = format!("{:016x}{SUFFIX}", checksum(&head));
    let temporary = dir.join(format!(
        ".{name}.{}.{}.partial",
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut f = std::io::BufWriter::with_capacity(1 << 20, File::create(&temporary)?);
        f.write_all(&head)?;
        for b in bytes {
            f.write_all(b)?;
        }
        let file = f.into_inner().map_err(|e| e.into_error())?;
        if uncached {
            super::super::direct::drop_cached(&file);
        }
        // No fsync (but where the entry leaves the page cache, which needs it on disk first):
        // it would cost milliseconds per entry; an entry a crash leaves damaged fails its
        // checksums and is fetched again.
        fs::rename(&temporary, dir.join(&name))
    })();
    match written {
        Ok(()) => Ok((name, stored(ranges, &sums, head.len()))),
        Err(e) => {
            let _ = fs::remove_file(&temporary);
            Err(e)
        }
    }
}

/// The ranges an entry file holds, from its header; `None` when the header is damaged or does
/// not match the file's size.
pub fn read_header(path: &Path) -> Option<Vec<Stored>> {
    let mut f = File::open(path).ok()?;
    let size = f.metadata().ok()?.len();
    let mut fixed = [0u8; FIXED];
    f.read_exact(&mut fixed).ok()?;
    if &fixed[..8] != MAGIC {
        return None;
    }
    let count = u32::from_le_bytes(fixed[8..12].try_into().ok()?) as usize;
    let header_len = FIXED + PER_RANGE * count + 8;
    if count > MAX_RANGES || header_len as u64 > size {
        return None;
    }
    let mut head = fixed.to_vec();
    head.resize(header_len, 0);
    f.read_exact(&mut head[FIXED..]).ok()?;
    let word = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().unwrap());
    if word(header_len - 8) != checksum(&head[..header_len - 8]) {
        return None;
    }
    let mut ranges = Vec::with_capacity(count);
    let mut sums = Vec::with_capacity(count);
    for i in 0..count {
        let at = FIXED + PER_RANGE * i;
        ranges.push(ByteRange::new(word(at), word(at + 8)));
        sums.push(word(at + 16));
    }
    let data: u64 = ranges.iter().map(|r| r.len).sum();
    (header_len as u64 + data == size).then(|| stored(&ranges, &sums, header_len))
}

/// An entry file found in a file's directory: its path, size and last use.
pub struct Found {
    pub path: PathBuf,
    pub size: u64,
    pub used: SystemTime,
}

/// Entry files in `file_dir`.
pub fn list(file_dir: &Path) -> Vec<Found> {
    list_named(file_dir, is_entry)
}

/// Files in `dir` whose names `wanted` accepts, with their sizes and last use.
pub(super) fn list_named(dir: &Path, wanted: impl Fn(&str) -> bool) -> Vec<Found> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(&wanted) {
            continue;
        }
        if let Ok(meta) = entry.metadata() {
            out.push(Found {
                path: entry.path(),
                size: meta.len(),
                used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            });
        }
    }
    out
}

/// Temporary files left in `file_dir` by processes killed while writing (never read).
pub fn remove_stale_partials(file_dir: &Path) {
    let stale = SystemTime::now() - Duration::from_secs(3600);
    for entry in fs::read_dir(file_dir).into_iter().flatten().flatten() {
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

/// Remove `path`, counting a file already gone (another process pruned it) as removed.
pub fn remove(path: &Path) -> std::io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
