//! How an HTTP source talks to its server: limits, connections, timeouts, retries, credentials.

use crate::source::credentials::TlsOptions;
use crate::source::redact::Secret;
use crate::source::{adaptive, OpeningHint, RequestPolicy};
use std::time::Duration;

/// How an [`HttpSource`](super::HttpSource) talks to its server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpOptions {
    /// Most ranges in one `Range:` header. Default 200: Apache's default `MaxRanges` (nginx has no
    /// limit unless `max_ranges` is set). Longer lists are split into requests sent together.
    pub max_ranges_per_request: usize,
    /// Longest `Range:` header value, in bytes. Default 6000: fits nginx's default 8 KB header
    /// buffer and Apache's 8190-byte `LimitRequestFieldSize`. Lowered by itself if a server
    /// rejects a header as too large.
    pub max_header_bytes: usize,
    /// Requests in flight at once for this file, and idle connections kept for reuse. Default 8:
    /// where reading starts; see `adaptive`. This many connections are opened while the file is
    /// (with the first request): the first parallel reads find them ready (over HTTPS/1.1 each
    /// would otherwise pay its TLS handshake).
    pub connections: usize,
    /// Adapt the requests in flight to the link (see `source::adaptive`): more while they bring
    /// more throughput, up to `max_connections`; fewer after 503 or 429 answers. False keeps
    /// `connections`. Default true.
    pub adaptive: bool,
    /// Most requests in flight with `adaptive`. Default 32, twice XRootD's most connections: an
    /// XRootD connection carries any number of requests at once, an HTTP/1.1 one a single request,
    /// so here requests in flight are connections (a deep read-ahead of many branches sends two
    /// requests per chunk, where an XRootD stream takes its chunks one after another).
    pub max_connections: usize,
    /// Timeouts, retries and the slowest transfer accepted (see `source::RequestPolicy`); the
    /// timeout is the longest wait to connect or for an answer's headers, and the window over
    /// which a request must receive `min_rate × timeout` bytes of its answer (default 30 s; see
    /// `source::min_rate`). Retried: connection errors, timeouts, 5xx answers, cut-short bodies.
    pub policy: RequestPolicy,
    /// Redirects followed by one request. Default 10.
    pub max_redirects: usize,
    /// Largest whole-file answer (a 200 to a range request) that is used; a larger one is dropped
    /// and the ranges are asked one by one instead. Default 64 MiB.
    pub max_full_body_bytes: u64,
    /// The first request, which learns the size, also reads this much of the file's start and
    /// end (default: nothing; the engine asks for where ROOT keeps what opening needs).
    pub opening: OpeningHint,
    /// A bearer token sent as `Authorization: Bearer` (default: found where WLCG says, see
    /// `credentials::BearerToken::discover`; a discovered token goes to https:// only).
    pub token: Option<Secret>,
    /// What the server's certificate is checked against (https://).
    pub tls: TlsOptions,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            max_ranges_per_request: 200,
            max_header_bytes: 6000,
            connections: 8,
            adaptive: true,
            max_connections: 2 * adaptive::DEFAULT_MAX_STREAMS,
            policy: RequestPolicy::with_timeout(Duration::from_secs(30)),
            max_redirects: 10,
            max_full_body_bytes: 64 << 20,
            opening: OpeningHint::default(),
            token: None,
            tls: TlsOptions::default(),
        }
    }
}
