//! Direct I/O: reading a file around the page cache (`O_DIRECT`), for local files and the disk
//! cache's entries (`direct_io=True`). A read that bypasses the page cache neither fills it nor
//! evicts what else it holds (an analysis' other files, a large file read once); it also gets no
//! kernel read-ahead, so ranges close together are read as one and large reads run in parallel.
//!
//! `O_DIRECT` asks that the buffer, the offset and the length be multiples of the device's block:
//! every read here is widened to [`ALIGN`] (which every common block size, 512 or 4096, divides)
//! into a buffer aligned as much, and each range is a slice of it (no copy). A filesystem that
//! refuses `O_DIRECT` (tmpfs, some network and overlay filesystems) is read through the page cache,
//! with one warning naming it.

use super::{coalesce_ranges, slice_from_fetched, ByteRange};
use bytes::Bytes;
use std::alloc::Layout;
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Mutex;

/// Alignment of direct reads: buffers, offsets and lengths.
pub const ALIGN: u64 = 4096;

/// Ranges closer than this are read as one: without the kernel's read-ahead, a few more bytes
/// read cost less than one more request to the device.
pub const MERGE_GAP: u64 = 128 << 10;

/// A file opened for reading, and whether it bypasses the page cache.
pub struct Opened {
    pub file: File,
    pub direct: bool,
}

/// Open `path` for direct reads when `direct`, else as usual; a filesystem that refuses
/// `O_DIRECT` is read through the page cache (warned about once per path).
pub fn open(path: &Path, direct: bool) -> std::io::Result<Opened> {
    if direct {
        match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
        {
            Ok(file) => return Ok(Opened { file, direct: true }),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => refused(path, &e),
            Err(e) => return Err(e),
        }
    }
    Ok(Opened {
        file: File::open(path)?,
        direct: false,
    })
}

/// Say once per path that direct I/O was refused there.
pub fn refused(path: &Path, e: &std::io::Error) {
    static WARNED: Mutex<Vec<std::path::PathBuf>> = Mutex::new(Vec::new());
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if !warned.iter().any(|p| p == path) {
        warned.push(path.to_path_buf());
        eprintln!(
            "cherenkov: direct_io: {}: the filesystem refuses direct I/O ({e}); reading through \
             the page cache",
            path.display()
        );
    }
}

/// A buffer aligned to [`ALIGN`], freed when the last `Bytes` slicing it goes.
struct Aligned {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer is owned, never shared mutably once built.
unsafe impl Send for Aligned {}
unsafe impl Sync for Aligned {}

impl Aligned {
    fn zeroed(len: usize) -> Aligned {
        let layout = Layout::from_size_align(len.max(1), ALIGN as usize).expect("a valid layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            std::ptr::NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        Aligned { ptr, len }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes allocated (and zeroed) by `zeroed`, borrowed exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl AsRef<[u8]> for Aligned {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: as in `as_mut`, shared.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        let layout =
            Layout::from_size_align(self.len.max(1), ALIGN as usize).expect("a valid layout");
        // SAFETY: allocated by `zeroed` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) }
    }
}

/// Read `ranges` (inside a file of `size` bytes) from a file opened with `O_DIRECT`: ranges within
/// [`MERGE_GAP`] of each other in one aligned read, each returned as a slice of it.
pub fn read_ranges(file: &File, size: u64, ranges: &[ByteRange]) -> std::io::Result<Vec<Bytes>> {
    let spans = coalesce_ranges(ranges, MERGE_GAP);
    let buffers = spans
        .iter()
        .map(|span| read_span(file, size, *span))
        .collect::<std::io::Result<Vec<_>>>()?;
    slice_from_fetched(ranges, &spans, &buffers).ok_or_else(|| {
        let what = super::describe_ranges(ranges);
        std::io::Error::other(format!("internal error: spans not covering {what}"))
    })
}

/// One span read whole with aligned reads: its bytes.
fn read_span(file: &File, size: u64, span: ByteRange) -> std::io::Result<Bytes> {
    if span.end() > size {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!(
                "range {}..{} is past the end of the file ({size} bytes)",
                span.offset,
                span.end()
            ),
        ));
    }
    let start = span.offset / ALIGN * ALIGN;
    let end = span.end().div_ceil(ALIGN) * ALIGN;
    let mut buffer = Aligned::zeroed((end - start) as usize);
    let wanted = (span.end() - start) as usize;
    let mut filled = 0usize;
    let dest = buffer.as_mut();
    while filled < wanted {
        // Whole blocks each time: the last may end past the file, which reads short.
        match file.read_at(&mut dest[filled..], start + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if !filled.is_multiple_of(ALIGN as usize) {
            break; // the end of the file
        }
    }
    if filled < wanted {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("read {filled} of {wanted} bytes at offset {start}"),
        ));
    }
    let at = (span.offset - start) as usize;
    Ok(Bytes::from_owner(buffer).slice(at..at + span.len as usize))
}

/// Drop a file's pages from the page cache once they are on disk (`POSIX_FADV_DONTNEED`): what
/// a direct reader writes (a cache entry, a staged file) does not stay in memory either.
pub fn drop_cached(file: &File) {
    use std::os::fd::AsRawFd;
    if file.sync_data().is_ok() {
        // SAFETY: a valid descriptor; advice has no effect on memory safety.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_read_directly_equal_the_file() {
        let dir = std::env::temp_dir().join(format!("cherenkov-direct-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.bin");
        let data: Vec<u8> = (0..300_001u32).map(|i| (i * 31 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let opened = open(&path, true).unwrap();
        let ranges = [
            ByteRange::new(0, 10),
            ByteRange::new(5, 4096),
            ByteRange::new(200_000, 1),
            ByteRange::new(299_990, 11), // up to the last byte, not on a block boundary
            ByteRange::new(4095, 2),
            ByteRange::new(150_000, 0), // empty, in no span: served empty
        ];
        // Direct or not (a filesystem that refuses it is read as usual), the bytes are the file's.
        let got = read_ranges(&opened.file, data.len() as u64, &ranges).unwrap();
        for (r, b) in ranges.iter().zip(&got) {
            assert_eq!(&b[..], &data[r.offset as usize..r.end() as usize], "{r:?}");
        }
        let past = read_span(&opened.file, data.len() as u64, ByteRange::new(299_990, 20));
        assert!(past.is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
