//! Local files: positional reads, many ranges read concurrently on the blocking pool; around the
//! page cache with `direct_io` (see `direct`).

use super::direct;
use super::{ByteRange, ByteSource, Opened, SourceLimits, SourceReport, Tally};
use crate::error::{Error, Result};
use async_trait::async_trait;
use bytes::Bytes;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

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
        let buf = read_exact_at(file, r.len as usize, r.offset).map_err(|e| {
            Error::io(
                path,
                format!("read of {} bytes at offset {}: {e}", r.len, r.offset),
            )
        })?;
        Ok(Bytes::from(buf))
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

    async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        let total: u64 = ranges.iter().map(|r| r.len).sum();
        self.tally.record(ranges.len() as u64, total);
        if total < PARALLEL_READ_MIN_BYTES || ranges.len() == 1 {
            return Self::read_group(&self.file, &self.path, self.size, self.direct, ranges);
        }
        let per_group = ranges.len().div_ceil(PARALLEL_READ_GROUPS);
        let tasks: Vec<_> = ranges
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
        let mut out = Vec::with_capacity(ranges.len());
        for t in tasks {
            out.extend(
                t.await
                    .map_err(|e| Error::io_caused(&self.path, "read task failed", e))??,
            );
        }
        Ok(out)
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

/// `len` bytes of `file` at `offset`, read into memory not zeroed first (zeroing is a pass over
/// every byte a read fetches, which the read then overwrites).
#[cfg(target_os = "linux")]
fn read_exact_at(file: &File, len: usize, offset: u64) -> std::io::Result<Vec<u8>> {
    use std::os::fd::AsRawFd;
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    let mut done = 0;
    while done < len {
        let at = libc::off_t::try_from(offset + done as u64).map_err(std::io::Error::other)?;
        // SAFETY: the kernel writes at most `len - done` bytes into the spare capacity after
        // the `done` bytes read so far; nothing reads them before `set_len` below.
        let n = unsafe {
            libc::pread(
                file.as_raw_fd(),
                buf.as_mut_ptr().add(done).cast(),
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
    // SAFETY: the loop above wrote all `len` bytes.
    unsafe { buf.set_len(len) };
    Ok(buf)
}

#[cfg(not(target_os = "linux"))]
fn read_exact_at(file: &File, len: usize, offset: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}
