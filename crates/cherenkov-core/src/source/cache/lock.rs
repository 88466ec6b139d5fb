//! Which process fetches a range: byte-range locks on one lock file per cached file, at the
//! range's own offsets. A process holds the locks of the ranges it fetches until their entry is
//! on disk; another process wanting one of them waits for it and then reads the entry, so a
//! range travels once. Locks are open-file-description locks (Linux `F_OFD_SETLK`): each
//! request's `RangeLocks` is its own owner (two requests of one process exclude each other too),
//! and the kernel drops them when the file closes, also when the process is killed.
//!
//! Elsewhere there is no lock: processes sharing a cache may then fetch a range twice (never
//! serve a wrong one: entries are written whole or not at all).

use super::super::ByteRange;
use std::fs::{File, OpenOptions};
use std::path::Path;

const NAME: &str = "lock";

/// Locks held on ranges of one file; released when dropped.
#[derive(Debug)]
pub struct RangeLocks {
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    file: File,
}

fn open(file_dir: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(file_dir.join(NAME))
}

impl RangeLocks {
    /// A new owner of locks in `file_dir`; fails when the lock file cannot be made (a
    /// read-only cache).
    pub fn new(file_dir: &Path) -> std::io::Result<Self> {
        Ok(Self {
            file: open(file_dir)?,
        })
    }

    /// Lock `r` for this owner unless another holds part of it.
    pub fn try_lock(&self, r: ByteRange) -> bool {
        #[cfg(target_os = "linux")]
        {
            ofd::lock(&self.file, r, false)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = r;
            true
        }
    }
}

/// Wait until no owner holds a lock on any byte of `r`.
pub fn wait_unlocked(file_dir: &Path, r: ByteRange) {
    #[cfg(target_os = "linux")]
    if let Ok(f) = open(file_dir) {
        // Taking a shared lock waits for every exclusive one; closing the file drops it.
        ofd::lock(&f, r, true);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file_dir, r);
}

#[cfg(target_os = "linux")]
mod ofd {
    use super::ByteRange;
    use std::fs::File;
    use std::os::fd::AsRawFd;

    /// An exclusive lock without waiting, or (`wait_shared`) a shared one, waiting for it.
    pub fn lock(file: &File, r: ByteRange, wait_shared: bool) -> bool {
        // A zero length means "to the end of the file" to fcntl; an empty range needs no lock.
        let (Ok(start), Ok(len)) = (i64::try_from(r.offset), i64::try_from(r.len)) else {
            return true;
        };
        if len == 0 {
            return true;
        }
        // SAFETY: flock is plain data; all-zero is a valid value (l_pid must be 0 for OFD locks).
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        let kind = if wait_shared {
            libc::F_RDLCK
        } else {
            libc::F_WRLCK
        };
        fl.l_type = kind as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = start;
        fl.l_len = len;
        let command = if wait_shared {
            libc::F_OFD_SETLKW
        } else {
            libc::F_OFD_SETLK
        };
        loop {
            // SAFETY: a valid descriptor and a pointer to an initialised flock.
            let rc = unsafe { libc::fcntl(file.as_raw_fd(), command, &mut fl as *mut libc::flock) };
            if rc == 0 {
                return true;
            }
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return false;
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_range_locked_by_one_owner_is_refused_to_another() {
        let dir = std::env::temp_dir().join(format!("cherenkov-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = RangeLocks::new(&dir).unwrap();
        let b = RangeLocks::new(&dir).unwrap();
        assert!(a.try_lock(ByteRange::new(100, 50)));
        assert!(!b.try_lock(ByteRange::new(120, 100)));
        assert!(b.try_lock(ByteRange::new(150, 100)));
        drop(a);
        wait_unlocked(&dir, ByteRange::new(100, 50));
        assert!(b.try_lock(ByteRange::new(100, 50)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
