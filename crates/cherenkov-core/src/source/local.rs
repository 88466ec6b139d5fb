//! Local files: positional reads, many ranges read concurrently on the blocking pool; around the
//! page cache with `direct_io` (see `direct`).

use super::direct;
use super::{
    coalesce_ranges, slice_from_fetched, ByteRange, ByteSource, Opened, SourceLimits, SourceReport,
    Tally, DEFAULT_COALESCE_GAP,
};
use crate::error::{Error, Result};
use async_trait::async_trait;
use bytes::Bytes;
use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex};

#[derive(Debug)]
pub struct LocalSource {
    path: String,
    file: Arc<File>,
    size: u64,
    /// Opened with `O_DIRECT`: reads are aligned (see `direct`).
    direct: bool,
    tally: Tally,
}

/// Reads up to this size run inline; larger ones are split into groups read in parallel on the
/// blocking pool (one task per group: a task per range costs more than a page-cache read).
const PARALLEL_READ_MIN_BYTES: u64 = 4 << 20;
const PARALLEL_READ_GROUPS: usize = 4;

/// Reads of several ranges up to this size (a pipelined read's parts: see `engine::table`) go
/// into one buffer kept in `POOL` for the next: memory newly allocated for each read is memory
/// the kernel faults in and zeroes again (with glibc, every block over 128 KB is a new mapping),
/// a tenth of a warm read's CPU. At most `POOLED_BUFFERS` are kept, process-wide.
const POOLED_BUFFER_BYTES: usize = 4 << 20;
const POOLED_BUFFERS: usize = 4;

static POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// Ranges less than this apart are read in one call, the bytes between them copied and left
/// unused: a read out of the page cache costs a system call and a page lookup, about what
/// copying a few kB costs, and the baskets or pages of the branches or columns read are often
/// stored end to end or nearly (asked for branch by branch, they are read in the file's order).
const JOIN_GAP: u64 = DEFAULT_COALESCE_GAP;

/// An empty buffer of at least `len` bytes of capacity: one from the pool, or a new one.
fn pooled_buffer(len: usize) -> Vec<u8> {
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    match pool.iter().position(|b| b.capacity() >= len) {
        Some(i) => pool.swap_remove(i),
        // Sized up, so that the next read, a little larger, fits too.
        None => Vec::with_capacity(len.next_power_of_two()),
    }
}

/// A pooled buffer under the `Bytes` read into it: back to the pool when they are dropped (the
/// pool keeps the largest `POOLED_BUFFERS`).
struct Pooled(Vec<u8>);

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let mut buf = std::mem::take(&mut self.0);
        buf.clear();
        let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        pool.push(buf);
        if pool.len() > POOLED_BUFFERS {
            let smallest = (0..pool.len()).min_by_key(|&i| pool[i].capacity());
            pool.swap_remove(smallest.expect("a full pool"));
        }
    }
}

impl LocalSource {
    /// Open `path`; around the page cache when `direct_io` and its filesystem allows it.
    pub fn open(path: &str, direct_io: bool) -> Result<Self> {
        let direct::Opened { file, direct } = direct::open(Path::new(path), direct_io)
            .map_err(|e| Error::io_caused(path, "cannot open", e))?;
        let size = file
            .metadata()
            .map_err(|e| Error::io_caused(path, "cannot stat", e))?
            .len();
        Ok(Self {
            path: path.to_string(),
            file: Arc::new(file),
            size,
            direct,
            tally: Tally::default(),
        })
    }

    /// The source with the version of the file it opened: its modification time.
    pub fn into_opened(self) -> Opened {
        let modified = self.file.metadata().ok().and_then(|m| m.modified().ok());
        let since = modified.and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok());
        Opened {
            version: since.map(|t| format!("mtime {}", t.as_nanos())),
            ..Opened::plain(Arc::new(self))
        }
    }

    fn read_one(file: &File, path: &str, size: u64, r: ByteRange) -> Result<Bytes> {
        let mut buf = Vec::new();
        Self::read_into(file, path, size, r, &mut buf)?;
        Ok(Bytes::from(buf))
    }

    /// Append range `r` of the file to `buf`.
    fn read_into(
        file: &File,
        path: &str,
        size: u64,
        r: ByteRange,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        if r.end() > size {
            return Err(Error::io(
                path,
                format!(
                    "range {}..{} is past the end of the file ({} bytes)",
                    r.offset,
                    r.end(),
                    size
                ),
            ));
        }
        read_exact_at(file, r.len as usize, r.offset, buf).map_err(|e| {
            Error::io(
                path,
                format!("read of {} bytes at offset {}: {e}", r.len, r.offset),
            )
        })
    }

    /// Ranges of `total` bytes read one after the other into one buffer from `POOL`, each a
    /// slice of it; the buffer goes back to the pool when the last slice is dropped.
    fn read_pooled(
        file: &File,
        path: &str,
        size: u64,
        group: &[ByteRange],
        total: usize,
    ) -> Result<Vec<Bytes>> {
        let mut buf = pooled_buffer(total);
        for r in group {
            Self::read_into(file, path, size, *r, &mut buf)?;
        }
        let bytes = Bytes::from_owner(Pooled(buf));
        let mut at = 0;
        Ok(group
            .iter()
            .map(|r| {
                at += r.len as usize;
                bytes.slice(at - r.len as usize..at)
            })
            .collect())
    }

    /// Read a group of ranges: one by one, or around the page cache in aligned reads.
    fn read_group(
        file: &File,
        path: &str,
        size: u64,
        direct: bool,
        group: &[ByteRange],
    ) -> Result<Vec<Bytes>> {
        if !direct {
            let total: u64 = group.iter().map(|r| r.len).sum();
            if group.len() > 1 && total <= POOLED_BUFFER_BYTES as u64 {
                return Self::read_pooled(file, path, size, group, total as usize);
            }
            return group
                .iter()
                .map(|r| Self::read_one(file, path, size, *r))
                .collect();
        }
        direct::read_ranges(file, size, group).map_err(|e| {
            let what = super::describe_ranges(group);
            Error::io(path, format!("direct read of {what}: {e}"))
        })
    }
}

#[async_trait]
impl ByteSource for LocalSource {
    fn name(&self) -> &str {
        &self.path
    }

    fn size(&self) -> u64 {
        self.size
    }

    /// Read as spans in the file's order, ranges less than `JOIN_GAP` apart joined in one
    /// (see `read_spans`), each range a slice of its span.
    async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        let total: u64 = ranges.iter().map(|r| r.len).sum();
        self.tally.record(ranges.len() as u64, total);
        let spans = coalesce_ranges(ranges, JOIN_GAP);
        let buffers = self.read_spans(&spans).await?;
        slice_from_fetched(ranges, &spans, &buffers).ok_or_else(|| {
            let what = super::describe_ranges(ranges);
            Error::io(
                &self.path,
                format!("internal error: spans not covering {what}"),
            )
        })
    }

    fn limits(&self) -> SourceLimits {
        SourceLimits::UNLIMITED
    }

    fn report(&self) -> SourceReport {
        SourceReport {
            counters: self.tally.counters(),
            // The disk is no link: a request waits for no round trip.
            round_trip: Some(std::time::Duration::ZERO),
            ..SourceReport::default()
        }
    }
}

impl LocalSource {
    /// `spans`, sorted by offset and apart: the parallel groups are then each one region of
    /// the file.
    async fn read_spans(&self, spans: &[ByteRange]) -> Result<Vec<Bytes>> {
        let total: u64 = spans.iter().map(|r| r.len).sum();
        if total < PARALLEL_READ_MIN_BYTES || spans.len() == 1 {
            return Self::read_group(&self.file, &self.path, self.size, self.direct, spans);
        }
        let per_group = spans.len().div_ceil(PARALLEL_READ_GROUPS);
        let tasks: Vec<_> = spans
            .chunks(per_group)
            .map(|group| {
                let (file, path, size, direct, group) = (
                    self.file.clone(),
                    self.path.clone(),
                    self.size,
                    self.direct,
                    group.to_vec(),
                );
                tokio::task::spawn_blocking(move || {
                    Self::read_group(&file, &path, size, direct, &group)
                })
            })
            .collect();
        let mut out = Vec::with_capacity(spans.len());
        for t in tasks {
            out.extend(
                t.await
                    .map_err(|e| Error::io_caused(&self.path, "read task failed", e))??,
            );
        }
        Ok(out)
    }
}

/// `len` bytes of `file` at `offset` appended to `buf`, read into memory not zeroed first
/// (zeroing is a pass over every byte a read fetches, which the read then overwrites).
#[cfg(target_os = "linux")]
fn read_exact_at(file: &File, len: usize, offset: u64, buf: &mut Vec<u8>) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    buf.reserve(len);
    let start = buf.len();
    let mut done = 0;
    while done < len {
        let at = libc::off_t::try_from(offset + done as u64).map_err(std::io::Error::other)?;
        // SAFETY: the kernel writes at most `len - done` bytes into the spare capacity (at
        // least `len` bytes, reserved above) after the `done` bytes read so far; nothing reads
        // them before `set_len` below.
        let n = unsafe {
            libc::pread(
                file.as_raw_fd(),
                buf.as_mut_ptr().add(start + done).cast(),
                len - done,
                at,
            )
        };
        match n {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n if n < 0 => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            n => done += n as usize,
        }
    }
    // SAFETY: the loop above wrote all `len` bytes after the `start` already there.
    unsafe { buf.set_len(start + len) };
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn read_exact_at(file: &File, len: usize, offset: u64, buf: &mut Vec<u8>) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let start = buf.len();
    buf.resize(start + len, 0);
    file.read_exact_at(&mut buf[start..], offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_of(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("cherenkov-{name}-{}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[tokio::test]
    async fn pooled_reads_keep_earlier_bytes_and_read_every_range() {
        let data: Vec<u8> = (0..1_000_000u32)
            .map(|i| (i * 31 + i / 977) as u8)
            .collect();
        let path = file_of("pooled", &data);
        let source = LocalSource::open(path.to_str().unwrap(), false).unwrap();
        let ranges = |shift: u64| -> Vec<ByteRange> {
            (0..20)
                .map(|k| ByteRange::new(shift + k * 40_000, 1_000 + k * 333))
                .collect()
        };
        let expect = |r: &ByteRange| &data[r.offset as usize..r.end() as usize];
        // The first read's bytes are held while later reads go through the pool.
        let first = ranges(7);
        let kept = source.read_ranges(&first).await.unwrap();
        for shift in [11, 13, 17, 19, 23, 29] {
            let rs = ranges(shift);
            let got = source.read_ranges(&rs).await.unwrap();
            for (r, b) in rs.iter().zip(&got) {
                assert_eq!(&b[..], expect(r), "range {r:?}");
            }
        }
        for (r, b) in first.iter().zip(&kept) {
            assert_eq!(&b[..], expect(r), "range {r:?} held across later reads");
        }
        // Ranges end to end, overlapping, a few bytes apart (read in one span), empty, and
        // far apart, in no order, come back as asked.
        let mixed = [
            ByteRange::new(500, 100),
            ByteRange::new(600, 50),
            ByteRange::new(650, 1),
            ByteRange::new(10, 20),
            ByteRange::new(3_000, 5),
            ByteRange::new(600, 7),
            ByteRange::new(77, 0),
            ByteRange::new(900_000, 30),
        ];
        let got = source.read_ranges(&mixed).await.unwrap();
        for (r, b) in mixed.iter().zip(&got) {
            assert_eq!(&b[..], expect(r), "range {r:?}");
        }
        // A range past the end is an error, not a short read.
        let past = [ByteRange::new(0, 10), ByteRange::new(999_990, 11)];
        assert!(source.read_ranges(&past).await.is_err());
        std::fs::remove_file(path).unwrap();
    }
}
