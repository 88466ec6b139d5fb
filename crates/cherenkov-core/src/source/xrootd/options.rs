//! How an XRootD source talks to its server: connections, timeouts, retries, vector-read caps,
//! discovery, credentials.

use crate::source::credentials::TlsOptions;
use crate::source::redact::Secret;
use crate::source::{adaptive, OpeningHint, RequestPolicy};
use std::time::Duration;

/// How an [`XrootdSource`](super::XrootdSource) talks to its server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XrootdOptions {
    /// TCP connections to the data server, each logged in with the file open; requests are spread
    /// over them (each connection runs its requests one after another on the server). Default 2:
    /// where reading starts; see `adaptive`.
    pub connections: usize,
    /// Adapt the number of connections to the link (see `source::adaptive`): more while they bring
    /// more throughput, up to `max_connections`; fewer when the server asks to wait or refuses a
    /// connection. False keeps `connections`. Default true.
    pub adaptive: bool,
    /// Most connections with `adaptive`. Default 16.
    pub max_connections: usize,
    /// Timeouts, retries and the slowest transfer accepted (see `source::RequestPolicy`); the
    /// timeout is the longest wait for connecting and logging in, and the window over which a
    /// connection with requests waiting must receive `min_rate × timeout` bytes (any at all when
    /// silent): one that does not is closed and its requests sent again on a new one, whatever
    /// their size (default 60 s; see `source::min_rate`).
    pub policy: RequestPolicy,
    /// Redirects followed while opening the file, or by one read. Default 8.
    pub max_redirects: usize,
    /// At most this many ranges per `kXR_readv`, below what the server allows. Default: no cap.
    pub readv_iov_max: Option<usize>,
    /// At most this many bytes per `kXR_readv` element, below what the server allows. Default: no
    /// cap.
    pub readv_ior_max: Option<u64>,
    /// Ask the first server for the file's locations (`kXR_locate`, sent with the open: no extra
    /// round trip); a redirector answers with its data servers, which
    /// [`XrootdSource::other_replicas`](super::XrootdSource::other_replicas) lists. Default true.
    pub discover: bool,
    /// When discovery finds replicas, the head and tail of the file they must hold the same bytes
    /// in, besides the size (see `multi::MultiOptions::compare`). Default nothing.
    pub opening: OpeningHint,
    /// When discovery finds replicas, require their servers' checksums to agree (see
    /// [`MultiOptions::verify_checksums`](crate::source::multi::MultiOptions)). Default false.
    pub verify_checksums: bool,
    /// `roots://`: the certificates the server's is checked against (as for HTTPS).
    pub tls: TlsOptions,
    /// `roots://`: the bearer token for `ztn` (default: found where WLCG says, see
    /// `credentials::BearerToken`).
    pub token: Option<Secret>,
    /// The `sss` keytab (default: found where XrdCl looks, see `keytab::KEYTAB_DISCOVERY`).
    pub sss_keytab: Option<std::path::PathBuf>,
}

impl Default for XrootdOptions {
    fn default() -> Self {
        Self {
            connections: 2,
            adaptive: true,
            max_connections: adaptive::DEFAULT_MAX_STREAMS,
            policy: RequestPolicy::with_timeout(Duration::from_secs(60)),
            max_redirects: 8,
            readv_iov_max: None,
            readv_ior_max: None,
            discover: true,
            opening: OpeningHint::default(),
            verify_checksums: false,
            tls: TlsOptions::default(),
            token: None,
            sss_keytab: None,
        }
    }
}
