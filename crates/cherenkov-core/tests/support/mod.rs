//! Helpers for tests against real servers on 127.0.0.1: each test starts its own servers on free
//! ports in fresh temporary directories, and they are killed and cleaned up when dropped.

#![allow(dead_code)]

pub mod federation;
pub mod nginx;
pub mod pki;
pub mod reads;
pub mod toxiproxy;
pub mod xrootd;

use std::collections::BTreeSet;
use std::future::Future;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A fresh directory under the system temp dir, unique to this process and call, readable by
/// every user (servers that drop privileges must read it). Removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("cherenkov-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        make_public(&dir);
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Write `bytes` to `name` inside the directory, readable by every user.
    pub fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create a directory");
            make_public(parent);
        }
        std::fs::write(&path, bytes).expect("write a test file");
        make_public(&path);
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn make_public(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = if path.is_dir() { 0o777 } else { 0o644 };
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
}

/// No test may take longer than this, whatever the servers do.
pub const TEST_LIMIT: Duration = Duration::from_secs(120);

/// Run `test`, failing it if it takes longer than [`TEST_LIMIT`].
pub async fn bounded<F: Future>(test: F) -> F::Output {
    tokio::time::timeout(TEST_LIMIT, test)
        .await
        .expect("the test did not finish in time")
}

/// Test servers' ports are drawn from here up to the kernel's ephemeral range.
const FIRST_TEST_PORT: u16 = 20000;

/// A TCP port nobody listens on right now, for a server about to start: below the kernel's
/// ephemeral range, so no outgoing connection takes it before the server binds it (a port
/// from `bind(0)` can be, as CI saw once), drawn at random so that test processes running at
/// once rarely meet, and never handed out twice by this process.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let mut given = GIVEN.lock().unwrap_or_else(PoisonError::into_inner);
    if ephemeral > FIRST_TEST_PORT + 1000 {
        for _ in 0..1000 {
            let mut random = [0u8; 2];
            getrandom::getrandom(&mut random).expect("random bytes");
            let port = FIRST_TEST_PORT + u16::from_le_bytes(random) % (ephemeral - FIRST_TEST_PORT);
            if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
                given.insert(port);
                return port;
            }
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("find a free port")
}

/// Wait until something accepts connections on `port`, or `limit` passes.
pub fn wait_for_port(port: u16, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    false
}

/// The first of `names` found on PATH or in the workspace's `.tools/bin`.
pub fn find_binary(names: &[&str]) -> Option<PathBuf> {
    let workspace_tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/bin");
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.push(workspace_tools);
    dirs.extend(["/usr/bin", "/usr/sbin"].map(PathBuf::from));
    names
        .iter()
        .flat_map(|name| dirs.iter().map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// The project's shared test data directory (`$CHERENKOV_SHARED/testdata`, or `../shared/testdata`
/// next to the workspace), or `None` with a message saying the test is skipped.
pub fn shared_testdata() -> Option<PathBuf> {
    let shared = std::env::var_os("CHERENKOV_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    let dir = shared.join("testdata");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED: no test data at {} (set CHERENKOV_SHARED to the shared directory)",
            dir.display()
        );
        None
    }
}

/// Deterministic random numbers (splitmix64): tests repeat exactly.
pub struct Random(u64);

impl Random {
    pub fn new(seed: u64) -> Random {
        Random(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// An index in `0..n`.
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.index(items.len())]
    }
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next().to_le_bytes());
        }
        out.truncate(len);
        out
    }
}

/// Read `ranges` through `source` in one call and check every range against `file`'s bytes.
pub async fn assert_ranges_equal(
    source: &dyn cherenkov_core::source::ByteSource,
    ranges: &[cherenkov_core::source::ByteRange],
    file: &[u8],
) {
    let got = source
        .read_ranges(ranges)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for (r, bytes) in ranges.iter().zip(&got) {
        assert!(
            bytes[..] == file[r.offset as usize..r.end() as usize],
            "{r:?}"
        );
    }
}
