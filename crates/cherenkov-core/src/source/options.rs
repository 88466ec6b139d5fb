//! What opening a remote file may be told: the options every protocol shares, what to read while
//! opening, and how long a request may take.

use super::min_rate::MinRate;
use super::retry::RetryPolicy;
use super::{cache, credentials, redact};
use std::time::Duration;

/// How much of a file's start and end a source reads in the same request that learns its size,
/// when it can (HTTP: `Range: bytes=0-(head-1),-tail`), so that opening the file needs no
/// request of its own. The format above decides (see `engine::file::ROOT_OPENING`); the default
/// reads nothing beyond what learning the size takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpeningHint {
    pub head: u64,
    pub tail: u64,
}

/// How every request of a remote source is bounded and tried again: one policy, which the HTTP
/// and XRootD options each hold (with their own default timeout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestPolicy {
    /// Longest wait for the server to connect or answer, and the window over which a transfer
    /// must keep `min_rate` (see `min_rate`), before the request is retried or fails.
    pub timeout: Duration,
    /// When a request that failed in a way that may pass is tried again (see `retry`).
    pub retry: RetryPolicy,
    /// Slowest transfer accepted, in bytes per second: a transfer that receives fewer than
    /// `min_rate × timeout` bytes over any `timeout` seconds is abandoned (and retried, or read
    /// from another replica), whatever its size (see `min_rate`).
    pub min_rate: u64,
}

impl RequestPolicy {
    /// The defaults with this timeout (the protocols differ only there).
    pub fn with_timeout(timeout: Duration) -> Self {
        Self {
            timeout,
            retry: RetryPolicy::default(),
            min_rate: DEFAULT_MIN_RATE,
        }
    }

    /// This policy with `retries` retries.
    pub fn with_retries(self, retries: u32) -> Self {
        let retry = RetryPolicy {
            retries,
            ..self.retry
        };
        Self { retry, ..self }
    }

    /// This policy with retries starting at most `window` after a request's first failure.
    pub fn with_retry_window(self, window: Duration) -> Self {
        let retry = RetryPolicy {
            window,
            ..self.retry
        };
        Self { retry, ..self }
    }

    /// This policy with what the caller gave instead.
    pub fn overridden_by(self, given: &RequestOverrides) -> Self {
        Self {
            timeout: given.timeout.unwrap_or(self.timeout),
            retry: RetryPolicy {
                retries: given.retries.unwrap_or(self.retry.retries),
                window: given.retry_window.unwrap_or(self.retry.window),
            },
            min_rate: given.min_rate.unwrap_or(self.min_rate),
        }
    }

    /// The rate every transfer must keep (see `min_rate`).
    pub fn rate_rule(&self) -> MinRate {
        MinRate::over_timeout(self.min_rate, self.timeout)
    }
}

/// The parts of the [`RequestPolicy`] a caller set (the others keep the protocol's defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestOverrides {
    pub timeout: Option<Duration>,
    pub retries: Option<u32>,
    pub retry_window: Option<Duration>,
    pub min_rate: Option<u64>,
}

/// What opening a file through a source may be told (`cherenkov.open`'s source options); each
/// protocol keeps its own further settings, and its own defaults for what is not given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceOptions {
    /// Parallel connections (XRootD) or requests in flight (HTTP) per file.
    pub connections: Option<usize>,
    /// Timeouts, retries and the slowest transfer accepted (see [`RequestPolicy`]).
    pub request: RequestOverrides,
    /// Record every request (offsets, lengths, times) for plots and replay.
    pub trace: bool,
    /// `root://` only: ask the server where the file is (`kXR_locate`, with the open) and read
    /// from every data server a redirector names, as replicas (see `xrootd::open_discovering`).
    /// Default true; a list of replica URLs is read as given.
    pub discover: Option<bool>,
    /// Read local files and the disk cache's entries around the page cache (see `direct`).
    pub direct_io: bool,
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
