//! Byte sources: where the bytes of a file come from.
//!
//! One small async trait, [`ByteSource`]: read a list of byte ranges, report the source's limits.
//! The engine above never knows the protocol. Range coalescing is a plain function,
//! [`coalesce_ranges`], so every backend and the engine plan requests the same way.

pub mod adaptive;
pub mod cache;
pub mod credentials;
pub mod external_credentials;
pub mod http;
pub mod local;
pub mod memory;
pub mod multi;
pub mod redact;
pub mod retry;
pub mod trace;
pub mod xrootd;

use crate::error::Result;
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::Arc;

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

/// A file's bytes, wherever they live.
#[async_trait]
pub trait ByteSource: Send + Sync + std::fmt::Debug {
    /// The path or URL, for error messages and statistics.
    fn name(&self) -> &str;
    /// The file size in bytes.
    async fn size(&self) -> Result<u64>;
    /// Read all `ranges` (in any order, possibly overlapping); the answer has one buffer per range,
    /// in the order asked. Implementations split requests by their own limits.
    async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>>;
    /// What one request may carry.
    fn limits(&self) -> SourceLimits;
    /// Counters since the source was opened.
    fn counters(&self) -> SourceCounters;
    /// Bytes the source read while opening (HTTP learns the size with a read of the file's head
    /// and tail), so that the first reads of a file need no request of their own.
    fn opening_reads(&self) -> Vec<(ByteRange, Bytes)> {
        Vec::new()
    }
    /// The requests made so far, when this source records them (see `trace::TracingSource`).
    fn trace(&self) -> Option<Vec<trace::TraceEvent>> {
        None
    }
    /// Per-replica reports, for sources that combine several (see `multi::MultiSource`).
    fn replicas(&self) -> Option<Vec<multi::ReplicaReport>> {
        None
    }
    /// The throughput steps that set the stream count (see `adaptive`), for sources that adapt it.
    fn stream_steps(&self) -> Vec<adaptive::StreamStep> {
        Vec::new()
    }
    /// The link's round trip as measured so far (see `adaptive`), for sources that measure it.
    fn round_trip(&self) -> Option<std::time::Duration> {
        None
    }
    /// What tells this version of the file from a replaced one (a modification time, an ETag),
    /// where the source knows it without a request; the disk cache keys its entries on it.
    fn version(&self) -> Option<String> {
        None
    }
    /// The checksum the server keeps for the whole file, as `<algorithm> <value>` (`adler32
    /// 0a1b2c3d`); `None` when the protocol has no way to ask (HTTP, local files).
    async fn checksum(&self) -> Result<Option<String>> {
        Ok(None)
    }
}

pub type SharedSource = Arc<dyn ByteSource>;

/// The cause of an error raised because the file is no longer the one opened (another size,
/// ETag or Last-Modified): its bytes must not be mixed with those read before. A replica that
/// changed is dropped for good (see `multi`).
#[derive(Debug, thiserror::Error)]
#[error("the file changed on the server since it was opened")]
pub struct FileChanged;

/// An error saying `file` changed on the server (see [`FileChanged`]).
pub fn file_changed(file: &str, message: impl Into<String>) -> crate::Error {
    crate::Error::Io {
        file: file.to_string(),
        message: message.into(),
        cause: Some(Arc::new(FileChanged)),
    }
}

/// Whether `error` says the file changed on the server (see [`FileChanged`]).
pub fn is_file_changed(error: &crate::Error) -> bool {
    matches!(error, crate::Error::Io { cause: Some(cause), .. } if cause.is::<FileChanged>())
}

/// How much of a file's start and end a source reads in the same request that learns its size,
/// when it can (HTTP: `Range: bytes=0-(head-1),-tail`), so that opening the file needs no
/// request of its own. The format above decides (see `engine::file::ROOT_OPENING`); the default
/// reads nothing beyond what learning the size takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpeningHint {
    pub head: u64,
    pub tail: u64,
}

/// Options common to the remote sources; each protocol keeps its own further settings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceOptions {
    /// Parallel connections (XRootD) or requests in flight (HTTP) per file.
    pub connections: Option<usize>,
    /// How long a request may wait for the server before it is retried or fails.
    pub timeout: Option<std::time::Duration>,
    /// Retries of a failed idempotent read before it is reported (see `retry::RetryPolicy`).
    pub retries: Option<u32>,
    /// No retry starts later than this after a request's first failure (see `retry`).
    pub retry_window: Option<std::time::Duration>,
    /// Slowest transfer accepted, in bytes per second: a request of `b` bytes fails (and is
    /// retried, or read from another replica) after `timeout + b / min_rate` (see
    /// [`time_allowed`]). Default [`DEFAULT_MIN_RATE`].
    pub min_rate: Option<u64>,
    /// Record every request (offsets, lengths, times) for plots and replay.
    pub trace: bool,
    /// `root://` only: ask the server where the file is (`kXR_locate`, with the open) and read
    /// from every data server a redirector names, as replicas (see `xrootd::open_discovering`).
    /// Default true; a list of replica URLs is read as given.
    pub discover: Option<bool>,
    /// Replicas (a list, or found through a redirector) must have the same checksum on their
    /// servers, not only the same size (see `multi::MultiOptions::verify_checksums`).
    pub verify_checksums: bool,
    /// What to read while opening, where the protocol allows it.
    pub opening: OpeningHint,
    /// Keep the ranges read in a disk cache, for later passes (see `cache`). Off by default.
    pub cache: Option<cache::CacheOptions>,
    /// A bearer token (default: found where WLCG says, see `credentials::BearerToken`).
    pub token: Option<redact::Secret>,
    /// Adapt `connections` to the link (see `adaptive`); `Some(false)` keeps it fixed. Default on.
    pub adaptive_streams: Option<bool>,
    /// XRootD `sss`: the keytab (default: `$XrdSecSSSKT`, `~/.xrd/sss.keytab`, ... as XrdCl).
    pub sss_keytab: Option<std::path::PathBuf>,
    /// What a server's TLS certificate is checked against (`ca=`, the test-only opt-out).
    pub tls: credentials::TlsOptions,
}

/// The slowest transfer a request may have by default: 32 KiB/s. A server this slow is better left
/// for another replica or a retry; a WAN link shared by a few requests is still much faster.
pub const DEFAULT_MIN_RATE: u64 = 32 << 10;

/// How long one request for `bytes` may take in all, however steadily its answer trickles in:
/// `timeout` for the server to answer, plus the transfer at `min_rate` bytes per second. A server
/// sending one byte a second never goes silent, so a silence timeout alone would wait for ever.
pub fn time_allowed(
    timeout: std::time::Duration,
    min_rate: u64,
    bytes: u64,
) -> std::time::Duration {
    timeout + std::time::Duration::from_secs_f64(bytes as f64 / min_rate.max(1) as f64)
}

/// Open the source a path or URL names: `root://`, `http://`, `https://`, `davs://`,
/// `file://` or a path. Errors never show the URL's secrets (see `redact`).
pub async fn open(url: &str, options: &SourceOptions) -> Result<SharedSource> {
    let source = open_untraced(url, options).await?;
    wrapped(source, options).await
}

/// What the options put around an opened source: the trace records what reaches the source,
/// and the disk cache sits above it (its hits are no requests).
async fn wrapped(source: SharedSource, options: &SourceOptions) -> Result<SharedSource> {
    let source: SharedSource = if options.trace {
        Arc::new(trace::TracingSource::new(source))
    } else {
        source
    };
    match &options.cache {
        Some(cache) => cache::wrap(source, cache).await,
        None => Ok(source),
    }
}

/// The path of a `file://` URL: `file:///abs/path` and `file://localhost/abs/path` name
/// `/abs/path` (RFC 8089); another host cannot be read as a local file.
fn file_url_path(url: &str) -> Result<&str> {
    let rest = &url["file://".len()..];
    let (host, path) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest, ""),
    };
    match host {
        "" | "localhost" if !path.is_empty() => Ok(path),
        "" | "localhost" => Err(crate::Error::InvalidArgument(format!(
            "{url}: a file:// URL needs an absolute path (file:///path/to/file.root)"
        ))),
        _ => Err(crate::Error::InvalidArgument(format!(
            "{url}: file:// URLs name local files (file:///path or file://localhost/path), not \
             files on host '{host}'"
        ))),
    }
}

/// A shared source, usable where a source is owned (to wrap it).
#[derive(Debug)]
pub struct SourceRef(pub SharedSource);

#[async_trait]
impl ByteSource for SourceRef {
    fn name(&self) -> &str {
        self.0.name()
    }
    async fn size(&self) -> Result<u64> {
        self.0.size().await
    }
    async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        self.0.read_ranges(ranges).await
    }
    fn limits(&self) -> SourceLimits {
        self.0.limits()
    }
    fn counters(&self) -> SourceCounters {
        self.0.counters()
    }
    fn opening_reads(&self) -> Vec<(ByteRange, Bytes)> {
        self.0.opening_reads()
    }
    fn round_trip(&self) -> Option<std::time::Duration> {
        self.0.round_trip()
    }
    fn version(&self) -> Option<String> {
        self.0.version()
    }
    async fn checksum(&self) -> Result<Option<String>> {
        self.0.checksum().await
    }
}

/// Open several URLs as replicas of one file (see `multi::MultiSource`), all at once: the first
/// that opens makes the set, the others join as they open, and those that cannot be opened or
/// hold another file are reported (`ByteSource::replicas`), not fatal. With `verify_checksums`
/// every replica must open and agree, or the open fails. One URL opens plainly.
pub async fn open_replicas(urls: &[String], options: &SourceOptions) -> Result<SharedSource> {
    if let [url] = urls {
        return open(url, options).await;
    }
    let plain = SourceOptions {
        trace: false,
        cache: None,
        discover: Some(false),
        ..options.clone()
    };
    if options.verify_checksums {
        // Verifying is strict: every replica must open and its server's checksum agree.
        let opened = futures_util::future::join_all(urls.iter().map(|u| open_untraced(u, &plain)));
        let sources = opened.await.into_iter().collect::<Result<Vec<_>>>()?;
        let multi = multi::MultiSource::new(sources, multi::MultiOptions::verifying(true)).await?;
        return wrapped(Arc::new(multi), options).await;
    }
    let openings: Vec<multi::Opening> = urls
        .iter()
        .map(|url| {
            let (name, plain) = (url.clone(), plain.clone());
            let opening = async move { open_untraced(&name, &plain).await };
            (url.clone(), Box::pin(opening) as _)
        })
        .collect();
    let multi_options = multi::MultiOptions {
        compare: options.opening,
        ..multi::MultiOptions::default()
    };
    let multi: SharedSource =
        multi::MultiSource::open_first(&urls.join(" | "), openings, multi_options).await?;
    wrapped(multi, options).await
}

async fn open_untraced(url: &str, options: &SourceOptions) -> Result<SharedSource> {
    open_by_scheme(url, options)
        .await
        .map_err(redact::redact_error)
}

async fn open_by_scheme(url: &str, options: &SourceOptions) -> Result<SharedSource> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        None => Ok(Arc::new(local::LocalSource::open(url)?)),
        Some("file") => Ok(Arc::new(local::LocalSource::open(file_url_path(url)?)?)),
        Some("http" | "https" | "dav" | "davs") => {
            let defaults = http::HttpOptions::default();
            let http_options = http::HttpOptions {
                connections: options.connections.unwrap_or(defaults.connections),
                request_timeout: options.timeout.unwrap_or(defaults.request_timeout),
                retries: options.retries.unwrap_or(defaults.retries),
                retry_window: options.retry_window.unwrap_or(defaults.retry_window),
                min_rate: options.min_rate.unwrap_or(defaults.min_rate),
                adaptive: options.adaptive_streams.unwrap_or(defaults.adaptive),
                opening: options.opening,
                token: options.token.clone(),
                tls: options.tls.clone(),
                ..defaults
            };
            Ok(Arc::new(http::HttpSource::open(url, http_options).await?))
        }
        Some("root" | "xroot" | "roots" | "xroots") => {
            let defaults = xrootd::XrootdOptions::default();
            let xrootd_options = xrootd::XrootdOptions {
                connections: options.connections.unwrap_or(defaults.connections),
                request_timeout: options.timeout.unwrap_or(defaults.request_timeout),
                retries: options.retries.unwrap_or(defaults.retries),
                retry_window: options.retry_window.unwrap_or(defaults.retry_window),
                min_rate: options.min_rate.unwrap_or(defaults.min_rate),
                discover: options.discover.unwrap_or(defaults.discover),
                adaptive: options.adaptive_streams.unwrap_or(defaults.adaptive),
                verify_checksums: options.verify_checksums,
                token: options.token.clone(),
                sss_keytab: options.sss_keytab.clone(),
                tls: options.tls.clone(),
                ..defaults
            };
            // A server asking for gsi or krb5 is read through XrdCl when it is available.
            xrootd::external::open(url, xrootd_options).await
        }
        Some(other) => Err(crate::Error::InvalidArgument(format!(
            "{url}: unsupported URL scheme '{other}' (use root://, roots://, http://, https://, davs://, file:// or a path)"
        ))),
    }
}

/// Default gap below which two ranges are merged into one read: a gap costs bandwidth, an extra
/// range costs a request element (or, over HTTP, header bytes and a multipart boundary).
pub const DEFAULT_COALESCE_GAP: u64 = 4096;

/// Merge sorted-or-unsorted ranges whose gap is at most `max_gap` into fewer, larger ranges.
/// Returns the merged ranges in offset order.
pub fn coalesce_ranges(ranges: &[ByteRange], max_gap: u64) -> Vec<ByteRange> {
    let mut sorted: Vec<ByteRange> = ranges.iter().copied().filter(|r| r.len > 0).collect();
    sorted.sort_unstable();
    let mut out: Vec<ByteRange> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if r.offset <= last.end().saturating_add(max_gap) => {
                let end = last.end().max(r.end());
                last.len = end - last.offset;
            }
            _ => out.push(r),
        }
    }
    out
}

/// One buffer from consecutive pieces, copying only when there is more than one.
pub fn join(mut pieces: Vec<Bytes>) -> Bytes {
    match pieces.len() {
        0 => Bytes::new(),
        1 => pieces.pop().unwrap_or_default(),
        _ => {
            let mut all = Vec::with_capacity(pieces.iter().map(|p| p.len()).sum());
            for p in &pieces {
                all.extend_from_slice(p);
            }
            Bytes::from(all)
        }
    }
}

/// The buffer of each of `ranges` from the pieces [`split_for_limits`] cut them into, in its order
/// (range by range); `None` when there are fewer pieces than the ranges need.
pub fn join_split_pieces(
    ranges: &[ByteRange],
    pieces: impl IntoIterator<Item = Bytes>,
) -> Option<Vec<Bytes>> {
    let mut pieces = pieces.into_iter();
    ranges
        .iter()
        .map(|r| {
            let mut parts = Vec::new();
            let mut have = 0u64;
            while have < r.len {
                let part = pieces.next()?;
                have += part.len() as u64;
                parts.push(part);
            }
            Some(join(parts))
        })
        .collect()
}

/// Split ranges so that each request respects `limits`: ranges longer than `max_range_len` are cut,
/// and the list is grouped into requests of at most `max_ranges_per_request` ranges and
/// `max_request_bytes` bytes.
pub fn split_for_limits(ranges: &[ByteRange], limits: &SourceLimits) -> Vec<Vec<ByteRange>> {
    let mut requests = Vec::new();
    let mut current: Vec<ByteRange> = Vec::new();
    let mut current_bytes = 0u64;
    let max_len = limits.max_range_len.max(1);
    for r in ranges {
        let mut offset = r.offset;
        let end = r.end();
        while offset < end {
            let piece = ByteRange::new(offset, (end - offset).min(max_len));
            offset = piece.end();
            if !current.is_empty()
                && (current.len() >= limits.max_ranges_per_request
                    || current_bytes + piece.len > limits.max_request_bytes)
            {
                requests.push(std::mem::take(&mut current));
                current_bytes = 0;
            }
            current_bytes += piece.len;
            current.push(piece);
        }
    }
    if !current.is_empty() {
        requests.push(current);
    }
    requests
}

/// "range 10..20" or "3 ranges in 10..900 (first 10..20)": how errors name the ranges of a request.
pub fn describe_ranges(ranges: &[ByteRange]) -> String {
    match ranges {
        [] => "no range".to_string(),
        [r] => format!("range {}..{}", r.offset, r.end()),
        [first, ..] => {
            let lo = ranges.iter().map(|r| r.offset).min().unwrap_or(0);
            let hi = ranges.iter().map(|r| r.end()).max().unwrap_or(0);
            format!(
                "{} ranges in {lo}..{hi} (first {}..{})",
                ranges.len(),
                first.offset,
                first.end()
            )
        }
    }
}

/// Serve `wanted` ranges out of `fetched` ranges (each wanted range lies inside one fetched range).
pub fn slice_from_fetched(
    wanted: &[ByteRange],
    fetched: &[ByteRange],
    buffers: &[Bytes],
) -> Option<Vec<Bytes>> {
    wanted
        .iter()
        .map(|w| {
            let i = fetched.partition_point(|f| f.end() < w.end());
            let i = (i..fetched.len()).find(|&i| fetched[i].contains(w))?;
            let start = (w.offset - fetched[i].offset) as usize;
            Some(buffers[i].slice(start..start + w.len as usize))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesce_merges_close_ranges_only() {
        let r = [
            ByteRange::new(100, 10),
            ByteRange::new(0, 10),
            ByteRange::new(15, 5),
        ];
        assert_eq!(
            coalesce_ranges(&r, 5),
            vec![ByteRange::new(0, 20), ByteRange::new(100, 10)]
        );
        assert_eq!(coalesce_ranges(&r, 0).len(), 3);
    }

    #[test]
    fn split_respects_every_limit() {
        let limits = SourceLimits {
            max_ranges_per_request: 2,
            max_range_len: 10,
            max_request_bytes: 15,
        };
        let reqs = split_for_limits(&[ByteRange::new(0, 25), ByteRange::new(100, 3)], &limits);
        for req in &reqs {
            assert!(req.len() <= 2);
            assert!(req.iter().map(|r| r.len).sum::<u64>() <= 15);
            assert!(req.iter().all(|r| r.len <= 10));
        }
        let total: u64 = reqs.iter().flatten().map(|r| r.len).sum();
        assert_eq!(total, 28);
    }

    #[test]
    fn file_urls_name_absolute_local_paths() {
        assert_eq!(
            file_url_path("file:///data/a.root").unwrap(),
            "/data/a.root"
        );
        assert_eq!(
            file_url_path("file://localhost/data/a.root").unwrap(),
            "/data/a.root"
        );
        assert!(file_url_path("file://elsewhere/data/a.root").is_err());
        assert!(file_url_path("file://localhost").is_err());
    }

    #[test]
    fn messages_name_the_ranges() {
        assert_eq!(describe_ranges(&[ByteRange::new(10, 5)]), "range 10..15");
        assert_eq!(
            describe_ranges(&[ByteRange::new(10, 5), ByteRange::new(0, 2)]),
            "2 ranges in 0..15 (first 10..15)"
        );
    }

    #[test]
    fn slices_come_from_the_covering_range() {
        let fetched = [ByteRange::new(0, 20), ByteRange::new(100, 10)];
        let bufs = [
            Bytes::from((0u8..20).collect::<Vec<_>>()),
            Bytes::from(vec![7u8; 10]),
        ];
        let out = slice_from_fetched(
            &[ByteRange::new(5, 3), ByteRange::new(102, 2)],
            &fetched,
            &bufs,
        )
        .unwrap();
        assert_eq!(&out[0][..], &[5, 6, 7]);
        assert_eq!(&out[1][..], &[7, 7]);
        assert!(slice_from_fetched(&[ByteRange::new(18, 5)], &fetched, &bufs).is_none());
    }
}
