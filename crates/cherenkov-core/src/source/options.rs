//! What opening a remote file may be told: the options every protocol shares, what to read while
//! opening, and how long a request may take.

use super::{cache, credentials, redact};

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
    /// Slowest transfer accepted, in bytes per second: a transfer that receives fewer than
    /// `min_rate × timeout` bytes over any `timeout` seconds is abandoned (and retried, or read
    /// from another replica), whatever its size (see `min_rate`). Default [`DEFAULT_MIN_RATE`].
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
