//! The one trait every source implements, [`ByteSource`], and what it speaks of: byte ranges,
//! limits of one request, counters.

use super::{adaptive, multi, trace};
use crate::error::Result;
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// A byte range `[offset, offset + len)` of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ByteRange {
    pub offset: u64,
    pub len: u64,
}

impl ByteRange {
    pub fn new(offset: u64, len: u64) -> Self {
        Self { offset, len }
    }
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
    pub fn contains(&self, other: &ByteRange) -> bool {
        self.offset <= other.offset && other.end() <= self.end()
    }
}

/// What one request to a source may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceLimits {
    /// Most ranges one request may ask for (XRootD `readv_iov_max`, HTTP ranges per header).
    pub max_ranges_per_request: usize,
    /// Largest single range a request element may have (XRootD `readv_ior_max`).
    pub max_range_len: u64,
    /// Largest total payload of one request.
    pub max_request_bytes: u64,
}

impl SourceLimits {
    /// No protocol limit (local files).
    pub const UNLIMITED: SourceLimits = SourceLimits {
        max_ranges_per_request: usize::MAX,
        max_range_len: u64::MAX,
        max_request_bytes: u64::MAX,
    };
}

/// Counters every source keeps; the engine and the statistics layer read them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(module = "cherenkov._core", get_all, frozen)
)]
pub struct SourceCounters {
    /// Requests sent (one vectored request counts once).
    pub requests: u64,
    /// Sequential waits on the server: requests issued together in one batch count once.
    pub round_trips: u64,
    /// Ranges asked for, after any splitting by limits.
    pub ranges: u64,
    /// Payload bytes received.
    pub bytes: u64,
    /// Ranges served by the disk cache (see `cache`), without a request.
    pub disk_cache_hits: u64,
    /// Ranges the disk cache did not hold, read from the source and stored.
    pub disk_cache_misses: u64,
    /// Bytes served by the disk cache.
    pub disk_cache_bytes_saved: u64,
    /// Parallel streams in use now: XRootD connections, HTTP requests in flight (see `adaptive`).
    pub streams: u64,
    /// Most streams used at once since the file was opened.
    pub streams_peak: u64,
    /// Requests sent again after a failure that may pass (see `retry`), on a new connection;
    /// a replica set counts its replicas'.
    pub retries: u64,
}

impl std::ops::Add for SourceCounters {
    type Output = SourceCounters;
    fn add(self, other: SourceCounters) -> SourceCounters {
        SourceCounters {
            requests: self.requests + other.requests,
            round_trips: self.round_trips + other.round_trips,
            ranges: self.ranges + other.ranges,
            bytes: self.bytes + other.bytes,
            disk_cache_hits: self.disk_cache_hits + other.disk_cache_hits,
            disk_cache_misses: self.disk_cache_misses + other.disk_cache_misses,
            disk_cache_bytes_saved: self.disk_cache_bytes_saved + other.disk_cache_bytes_saved,
            streams: self.streams + other.streams,
            streams_peak: self.streams_peak + other.streams_peak,
            retries: self.retries + other.retries,
        }
    }
}

#[cfg(feature = "python")]
#[pyo3::pymethods]
impl SourceCounters {
    /// All zero: the start of a sum over files.
    #[new]
    fn zero() -> SourceCounters {
        SourceCounters::default()
    }
    fn __add__(&self, other: &SourceCounters) -> SourceCounters {
        *self + *other
    }
    fn __repr__(&self) -> String {
        format!("{self:?}")
    }
}

/// What a source counts as it reads: atomics its tasks add to, read as [`SourceCounters`].
#[derive(Debug, Default)]
pub struct Tally {
    pub requests: AtomicU64,
    pub round_trips: AtomicU64,
    pub ranges: AtomicU64,
    pub bytes: AtomicU64,
    pub retries: AtomicU64,
}

impl Tally {
    /// A tally that starts from `counters` (what opening already did).
    pub fn from_counters(counters: SourceCounters) -> Tally {
        Tally {
            requests: AtomicU64::new(counters.requests),
            round_trips: AtomicU64::new(counters.round_trips),
            ranges: AtomicU64::new(counters.ranges),
            bytes: AtomicU64::new(counters.bytes),
            retries: AtomicU64::new(counters.retries),
        }
    }

    /// One request of `ranges` ranges and `bytes` bytes, waited for on its own.
    pub fn record(&self, ranges: u64, bytes: u64) {
        self.requests.fetch_add(1, Relaxed);
        self.round_trips.fetch_add(1, Relaxed);
        self.ranges.fetch_add(ranges, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
    }

    pub fn counters(&self) -> SourceCounters {
        SourceCounters {
            requests: self.requests.load(Relaxed),
            round_trips: self.round_trips.load(Relaxed),
            ranges: self.ranges.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            retries: self.retries.load(Relaxed),
            ..SourceCounters::default()
        }
    }
}

/// A file's bytes, wherever they live.
///
/// What every source must do: name the file, know its size, read ranges within its limits, and
/// report what it did and measured ([`SourceReport`]); wrappers (trace, disk cache, replicas)
/// merge their own into their inner sources'. What opening read is handed over by the open
/// ([`Opened`]), not asked for later.
#[async_trait]
pub trait ByteSource: Send + Sync + std::fmt::Debug {
    /// The path or URL, for error messages and statistics.
    fn name(&self) -> &str;
    /// The file size in bytes (every source learns it while opening).
    fn size(&self) -> u64;
    /// Read all `ranges` (in any order, possibly overlapping); the answer has one buffer per range,
    /// in the order asked. Implementations split requests by their own limits.
    async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>>;
    /// What one request may carry.
    fn limits(&self) -> SourceLimits;
    /// What the source did and measured since it was opened.
    fn report(&self) -> SourceReport;
    /// The checksum the server keeps for the whole file, as `<algorithm> <value>` (`adler32
    /// 0a1b2c3d`); `None` when the protocol has no way to ask (HTTP, local files).
    async fn checksum(&self) -> Result<Option<String>> {
        Ok(None)
    }
}

pub type SharedSource = Arc<dyn ByteSource>;

/// What a source did and measured: counters, and what the sources that measure the link (see
/// `adaptive`) or combine replicas (see `multi`) found.
#[derive(Clone, Debug, Default)]
pub struct SourceReport {
    pub counters: SourceCounters,
    /// The link's shortest round trip measured so far.
    pub round_trip: Option<Duration>,
    /// The throughput steps that set the stream count, in order.
    pub stream_steps: Vec<adaptive::StreamStep>,
    /// Per replica, for a set of replicas.
    pub replicas: Option<Vec<multi::ReplicaReport>>,
}

/// A source as opening left it.
#[derive(Clone, Debug)]
pub struct Opened {
    pub source: SharedSource,
    /// Bytes read while opening, beyond learning the size (HTTP reads the file's head and tail
    /// with the same request, see `OpeningHint`): the first reads of the file need no request.
    pub reads: Vec<(ByteRange, Bytes)>,
    /// What tells this version of the file from a replaced one (a modification time, an ETag),
    /// where opening learned it; the disk cache keys its entries on it.
    pub version: Option<String>,
    /// Every request made through the source, when the options asked for a trace.
    pub trace: Option<Arc<trace::TraceLog>>,
}

impl Opened {
    /// A source that read nothing beyond its size while opening.
    pub fn plain(source: SharedSource) -> Opened {
        Opened {
            source,
            reads: Vec::new(),
            version: None,
            trace: None,
        }
    }
}
