//! HTTP(S) files: many byte ranges per request (`206 multipart/byteranges`), every answer checked.
//!
//! A read is planned as: merge touching ranges, pack them into `Range:` headers that servers
//! accept (count and length capped), send those requests at once over a pool of keep-alive
//! connections, and serve each asked range from whichever part of an answer covers it. Servers that
//! do not answer multi-range requests properly (200 with the whole file, a single range, a cut-short
//! or malformed body) are detected and the ranges are asked one by one, in parallel.

mod auth;
mod failure;
mod multipart;
mod options;
mod probe;
mod range_header;
mod response;

use self::auth::{is_refusal, trusting, web_url, HttpAuth};
use self::failure::{error_chain, retrying, status_failure, too_slow, Failure};
use self::multipart::{
    boundary_from_content_type, parse_byteranges, MultipartError, Part, PART_OVERHEAD,
};
pub use self::options::HttpOptions;
use self::probe::probe;
use self::range_header::{plan_requests, range_header_value, ContentRange};
use self::response::{content_range, header_str, read_body, reject_encoded, send, Version};
use super::adaptive::Streams;
use super::min_rate::{self, Progress};
use super::{
    coalesce_ranges, describe_ranges, file_changed, join_split_pieces, slice_from_fetched,
    split_for_limits, ByteRange, ByteSource, Opened, SourceCounters, SourceLimits, SourceReport,
    Tally,
};
use crate::error::{Error, Result};
use crate::source::credentials::{MadeForTls, TlsOptions};
use crate::source::redact::redact;
use async_trait::async_trait;
use bytes::Bytes;
use futures_util::future::try_join_all;
use reqwest::header::{CONTENT_TYPE, RANGE};
use reqwest::Method;
use reqwest::{Response, StatusCode, Url};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Ranges closer than this are asked as one: a multipart part costs about this much in headers.
const MERGE_GAP: u64 = 128;
/// When ranges are asked one by one, each request costs a round trip: merge across larger gaps,
/// but not into ranges longer than `SINGLE_RANGE_MERGE_MAX`, so that requests still go in parallel.
const SINGLE_RANGE_MERGE_GAP: u64 = 32 << 10;
const SINGLE_RANGE_MERGE_MAX: u64 = 8 << 20;
/// The `Range:` header budget is never lowered below this.
const MIN_HEADER_BYTES: usize = 256;

/// A file on an HTTP(S) server.
pub struct HttpSource {
    /// The URL as given, its secrets redacted: the name in errors and statistics.
    url: String,
    /// Where requests go: the URL after the redirects followed when opening.
    target: Url,
    client: reqwest::Client,
    /// The `Authorization` every request carries.
    auth: HttpAuth,
    options: HttpOptions,
    size: u64,
    /// Set when the server ignores `Range:` altogether and the file was small enough to keep.
    whole_file: Option<Bytes>,
    /// What the first request read besides the size (see `probe`).
    opening: Vec<(ByteRange, Bytes)>,
    /// The version of the file the first answer came from: every later answer must be of it.
    version: Version,
    /// Bounds the requests in flight to `streams.current()`.
    in_flight: Semaphore,
    /// Permits to take out of `in_flight` as they come back (the count went down).
    permits_owed: AtomicUsize,
    /// Permits `in_flight` is meant to have: the stream count last applied.
    permits: AtomicUsize,
    streams: Streams,
    /// Cleared once the server answers a multi-range request with something else than multipart.
    multirange_works: AtomicBool,
    /// Current `Range:` header budget (starts at `options.max_header_bytes`).
    header_budget: AtomicUsize,
    tally: Tally,
}

impl HttpSource {
    /// The source with what opening read of the file (its head and tail, see
    /// `HttpOptions::opening`) and the version of the file it read them from.
    pub fn into_opened(mut self) -> Opened {
        let reads = std::mem::take(&mut self.opening);
        let version = self.version.tag();
        Opened {
            reads,
            version,
            ..Opened::plain(Arc::new(self))
        }
    }

    /// Open `url` (http or https): learn the file's size with a one-byte range request, following
    /// at most `options.max_redirects` redirects; later requests go to the final URL.
    pub async fn open(url: &str, options: HttpOptions) -> Result<HttpSource> {
        let name = redact(url);
        let url = web_url(url);
        let mut target =
            Url::parse(&url).map_err(|e| Error::io_caused(&name, "not a valid URL", e))?;
        if !matches!(target.scheme(), "http" | "https") {
            return Err(Error::io(&name, "not an http://, https:// or davs:// URL"));
        }
        let auth =
            HttpAuth::for_url(&mut target, options.token.as_ref()).map_err(|e| e.in_file(&name))?;
        let options = HttpOptions {
            max_ranges_per_request: options.max_ranges_per_request.max(1),
            max_header_bytes: options.max_header_bytes.max(MIN_HEADER_BYTES),
            connections: options.connections.max(1),
            ..options
        };
        let client = shared_client(&options).map_err(|e| e.in_file(&name))?;

        let started = std::time::Instant::now();
        let warming = warm_up(&client, &auth, &target, options.connections - 1);
        let probe = retrying(
            options.policy.retry,
            |_| true,
            || {},
            || probe(&client, &auth, &target, &options),
        )
        .await;
        // The warm-up went out with the probe and takes about as long (the same handshakes, a
        // shorter answer): wait for it, but never longer than the probe took (a connection still
        // opening then is used when ready, by a later request).
        let grace = started.elapsed();
        let _ = tokio::time::timeout(grace, warming).await;
        let probe = probe.map_err(|f| {
            let message = format!("cannot learn the file size: {}", f.message());
            Error::io_of(f.kind(), &name, message)
        })?;
        Ok(HttpSource {
            url: name,
            target: probe.target,
            client,
            auth,
            size: probe.size,
            whole_file: probe.whole_file.clone(),
            opening: probe.opening.clone(),
            version: probe.version.clone(),
            in_flight: Semaphore::new(options.connections),
            permits_owed: AtomicUsize::new(0),
            permits: AtomicUsize::new(options.connections),
            streams: Streams::new(
                options.connections,
                options.max_connections,
                options.adaptive,
            ),
            multirange_works: AtomicBool::new(probe.multirange_works),
            header_budget: AtomicUsize::new(options.max_header_bytes),
            options,
            tally: Tally::from_counters(SourceCounters {
                requests: 1,
                round_trips: 1,
                ranges: 1,
                bytes: probe.opening.iter().map(|(r, _)| r.len).sum(),
                ..SourceCounters::default()
            }),
        })
    }

    /// The URL requests go to (after redirects), its secrets redacted.
    pub fn effective_url(&self) -> String {
        redact(self.target.as_str())
    }

    /// The options in force.
    pub fn options(&self) -> &HttpOptions {
        &self.options
    }

    fn error(&self, ranges: &[ByteRange], message: &str) -> Error {
        Error::io(&self.url, format!("{}: {message}", describe_ranges(ranges)))
    }

    /// The error for a request that failed for good, of its kind; a changed file says so in its
    /// cause.
    fn failed(&self, ranges: &[ByteRange], failure: Failure) -> Error {
        let message = format!("{}: {}", describe_ranges(ranges), failure.message());
        match failure {
            Failure::Changed(_) => file_changed(&self.url, message),
            f => Error::io_of(f.kind(), &self.url, message),
        }
    }

    /// A request sent again after a failure: a round trip of its own.
    fn count_retry(&self) {
        self.tally.retries.fetch_add(1, Ordering::Relaxed);
        self.count_round_trips(1);
    }

    /// Requests sent together count as one round trip per `connections` of them; a retry as one.
    fn count_round_trips(&self, requests: usize) {
        let waves = requests.div_ceil(self.streams.current()) as u64;
        self.tally.round_trips.fetch_add(waves, Ordering::Relaxed);
    }

    /// Fetch sorted, disjoint, non-empty ranges; one buffer per range.
    async fn fetch(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        if !self.multirange_works.load(Ordering::Relaxed) {
            return self.fetch_one_by_one(ranges).await;
        }
        let budget = self.header_budget.load(Ordering::Relaxed);
        let requests = plan_requests(ranges, self.options.max_ranges_per_request, budget);
        let total = ranges.iter().map(|r| r.len).sum();
        if let Some(each) = self.streams.spread(total, requests.len()) {
            return self.fetch_spread(ranges, each).await;
        }
        self.count_round_trips(requests.len());
        let answers = try_join_all(requests.iter().map(|group| self.fetch_group(group))).await?;
        Ok(answers.into_iter().flatten().collect())
    }

    /// Fewer requests than streams in use: cut the ranges into requests of about `each` bytes so
    /// that every stream carries a part, and join the pieces of each range again.
    async fn fetch_spread(&self, ranges: &[ByteRange], each: u64) -> Result<Vec<Bytes>> {
        let limits = SourceLimits {
            max_ranges_per_request: self.options.max_ranges_per_request,
            max_range_len: each,
            max_request_bytes: each,
        };
        let budget = self.header_budget.load(Ordering::Relaxed);
        let requests: Vec<Vec<ByteRange>> = split_for_limits(ranges, &limits)
            .iter()
            .flat_map(|group| plan_requests(group, self.options.max_ranges_per_request, budget))
            .collect();
        self.count_round_trips(requests.len());
        let answers = try_join_all(requests.iter().map(|group| self.fetch_group(group))).await?;
        join_split_pieces(ranges, answers.into_iter().flatten())
            .ok_or_else(|| self.error(ranges, "internal error: fewer pieces than asked"))
    }

    /// A permit for one request, minus those owed since the count went down.
    async fn permit(&self) -> Result<tokio::sync::SemaphorePermit<'_>, Failure> {
        loop {
            let permit = self
                .in_flight
                .acquire()
                .await
                .map_err(|_| Failure::Fatal("the source is closed".into()))?;
            let owed = self.permits_owed.load(Ordering::Relaxed);
            if owed == 0
                || self
                    .permits_owed
                    .compare_exchange(owed, owed - 1, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                return Ok(permit);
            }
            permit.forget();
        }
    }

    /// Hand out or take back permits to match the stream count.
    fn resize(&self) {
        let now = self.streams.current();
        let before = self.permits.swap(now, Ordering::Relaxed);
        if now == before {
            return;
        }
        // New permits serve at once (connections open on demand).
        self.streams.set_ready(now);
        if now > before {
            self.in_flight.add_permits(now - before);
        } else {
            let fewer = before - now;
            let taken = self.in_flight.forget_permits(fewer);
            self.permits_owed
                .fetch_add(fewer - taken, Ordering::Relaxed);
        }
    }

    /// [`Self::fetch`] behind a box, to re-plan a request from within [`Self::fetch_group`].
    fn fetch_boxed<'a>(
        &'a self,
        ranges: &'a [ByteRange],
    ) -> Pin<Box<dyn Future<Output = Result<Vec<Bytes>>> + Send + 'a>> {
        Box::pin(self.fetch(ranges))
    }

    /// One planned request: several ranges in one `Range:` header, with fallbacks.
    async fn fetch_group(&self, group: &[ByteRange]) -> Result<Vec<Bytes>> {
        if group.len() == 1 {
            return Ok(vec![self.fetch_single(group[0]).await?]);
        }
        let retry_multi = |f: &Failure| {
            matches!(
                f,
                Failure::Unreachable(_) | Failure::TimedOut(_) | Failure::ServerError(_)
            )
        };
        match retrying(
            self.options.policy.retry,
            retry_multi,
            || self.count_retry(),
            || self.fetch_once(group),
        )
        .await
        {
            Ok(parts) => {
                let single_part = parts.len() == 1;
                let (mut served, missing) = serve_from_parts(group, parts);
                if !missing.is_empty() {
                    if single_part {
                        // One range back for several asked: this server does not do multi-range.
                        self.multirange_works.store(false, Ordering::Relaxed);
                    }
                    let missing_ranges: Vec<ByteRange> =
                        missing.iter().map(|&i| group[i]).collect();
                    let filled = self.fetch_one_by_one(&missing_ranges).await?;
                    for (i, bytes) in missing.into_iter().zip(filled) {
                        served[i] = Some(bytes);
                    }
                }
                Ok(served.into_iter().map(Option::unwrap_or_default).collect())
            }
            Err(
                f @ (Failure::Unreachable(_)
                | Failure::TimedOut(_)
                | Failure::Missing(_)
                | Failure::Refused(_)
                | Failure::Fatal(_)
                | Failure::Changed(_)),
            ) => Err(self.failed(group, f)),
            Err(Failure::HeaderTooLarge(_)) => {
                // Known servers accept the default budget; below it, halve until accepted.
                let header_len = range_header_value(group).len();
                let smaller = (header_len / 2)
                    .min(HttpOptions::default().max_header_bytes)
                    .max(MIN_HEADER_BYTES);
                self.header_budget.fetch_min(smaller, Ordering::Relaxed);
                if header_len > smaller {
                    self.fetch_boxed(group).await
                } else {
                    self.fetch_one_by_one(group).await
                }
            }
            Err(Failure::NoMultiRange(_)) => {
                self.multirange_works.store(false, Ordering::Relaxed);
                self.fetch_one_by_one(group).await
            }
            Err(Failure::ServerError(_) | Failure::CutShort(_) | Failure::Unusable(_)) => {
                self.fetch_one_by_one(group).await
            }
        }
    }

    /// Ask each range in a request of its own, all at once (bounded by `connections`).
    async fn fetch_one_by_one(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        let merged = merge_for_single_requests(ranges);
        self.count_round_trips(merged.len());
        let buffers = try_join_all(merged.iter().map(|&r| self.fetch_single(r))).await?;
        slice_from_fetched(ranges, &merged, &buffers).ok_or_else(|| {
            self.error(
                ranges,
                "internal error: merged ranges do not cover the asked ones",
            )
        })
    }

    async fn fetch_single(&self, range: ByteRange) -> Result<Bytes> {
        let asked = [range];
        let parts = retrying(
            self.options.policy.retry,
            |_| true,
            || self.count_retry(),
            || self.fetch_once(&asked),
        )
        .await
        .map_err(|f| self.failed(&[range], f))?;
        let (mut served, missing) = serve_from_parts(&[range], parts);
        match (missing.is_empty(), served.pop().flatten()) {
            (true, Some(bytes)) => Ok(bytes),
            _ => Err(self.error(
                &[range],
                "the server answered with other bytes than the range asked",
            )),
        }
    }

    /// Send one request for `ranges` and check its answer. Retries are the caller's business.
    async fn fetch_once(&self, ranges: &[ByteRange]) -> Result<Vec<Part>, Failure> {
        let _permit = self.permit().await?;
        self.tally.requests.fetch_add(1, Ordering::Relaxed);
        self.tally
            .ranges
            .fetch_add(ranges.len() as u64, Ordering::Relaxed);
        self.streams.started();
        let sent = std::time::Instant::now();
        let progress = Progress::default();
        let answer = tokio::select! {
            answer = self.exchange(ranges, &progress) => answer,
            slow = min_rate::too_slow(self.options.policy.rate_rule(), &progress) => Err(too_slow(slow)),
        };
        let received = match &answer {
            Ok(parts) => parts.iter().map(|p| p.data.len() as u64).sum(),
            Err(_) => 0,
        };
        self.streams.finished(sent, received);
        if matches!(&answer, Err(Failure::ServerError(m)) if m.contains(" 503") || m.contains(" 429"))
        {
            self.streams.pushback();
        }
        self.resize();
        answer
    }

    /// The request and its answer, checked (see [`Self::fetch_once`]).
    async fn exchange(
        &self,
        ranges: &[ByteRange],
        progress: &Progress,
    ) -> Result<Vec<Part>, Failure> {
        let request = self
            .client
            .get(self.target.clone())
            .header(RANGE, range_header_value(ranges));
        let response = send(self.auth.apply(request)?, self.options.policy.timeout).await?;
        reject_encoded(&response)?;
        self.version.check(&response)?;
        let status = response.status();
        let parts = match status {
            _ if is_refusal(status) => return Err(self.auth.refused(status)),
            StatusCode::PARTIAL_CONTENT => self.read_partial(response, ranges, progress).await?,
            StatusCode::OK => {
                self.read_whole_file(response, ranges.len(), progress)
                    .await?
            }
            StatusCode::RANGE_NOT_SATISFIABLE => {
                let size_note = match content_range(&response) {
                    Some(ContentRange::Unsatisfied { total }) => {
                        format!(" (the file is now {total} bytes)")
                    }
                    _ => String::new(),
                };
                return Err(Failure::Unusable(format!(
                    "server answered 416 Range Not Satisfiable{size_note}; the file was {} bytes when opened",
                    self.size
                )));
            }
            _ => return Err(status_failure(status, ranges.len())),
        };
        for part in &parts {
            if part.total.is_some_and(|t| t != self.size) || part.range.end() > self.size {
                return Err(Failure::Changed(format!(
                    "the file changed on the server: it was {} bytes when opened, the answer says {}",
                    self.size,
                    part.total.map_or("otherwise".to_string(), |t| format!("{t} bytes")),
                )));
            }
        }
        let received: u64 = parts.iter().map(|p| p.data.len() as u64).sum();
        self.tally.bytes.fetch_add(received, Ordering::Relaxed);
        Ok(parts)
    }

    /// A 206: one part (Content-Range header) or several (multipart/byteranges).
    async fn read_partial(
        &self,
        response: Response,
        ranges: &[ByteRange],
        progress: &Progress,
    ) -> Result<Vec<Part>, Failure> {
        let asked: u64 = ranges.iter().map(|r| r.len).sum();
        let content_type = header_str(&response, CONTENT_TYPE).unwrap_or_default();
        if let Some(boundary) = boundary_from_content_type(&content_type) {
            let limit = asked + PART_OVERHEAD * (ranges.len() as u64 + 1);
            let body = read_body(response, limit, progress).await?;
            return parse_byteranges(&body, &boundary, ranges.len()).map_err(|e| match e {
                MultipartError::Truncated(m) => {
                    Failure::CutShort(format!("multipart answer cut short: {m}"))
                }
                MultipartError::Malformed(m) => {
                    Failure::Unusable(format!("malformed multipart answer: {m}"))
                }
            });
        }
        let Some(ContentRange::Bytes { range, total }) = content_range(&response) else {
            return Err(Failure::Unusable(
                "206 answer without a valid Content-Range".into(),
            ));
        };
        // One part covering everything asked is fine (a server may merge ranges); more is not.
        let span = ranges.last().map_or(0, |r| r.end()) - ranges.first().map_or(0, |r| r.offset);
        if range.len > span.max(asked) {
            return Err(Failure::Unusable(format!(
                "server sent bytes {}..{}, more than the {} bytes asked",
                range.offset,
                range.end(),
                span
            )));
        }
        let data = read_body(response, range.len, progress).await?;
        if data.len() as u64 != range.len {
            return Err(Failure::CutShort(format!(
                "answer has {} bytes, its Content-Range announces {}",
                data.len(),
                range.len
            )));
        }
        Ok(vec![Part { range, total, data }])
    }

    /// A 200: the server ignored `Range:` and sends the whole file; used only if small enough.
    async fn read_whole_file(
        &self,
        response: Response,
        ranges_asked: usize,
        progress: &Progress,
    ) -> Result<Vec<Part>, Failure> {
        if ranges_asked > 1 {
            self.multirange_works.store(false, Ordering::Relaxed);
        }
        if self.size > self.options.max_full_body_bytes {
            let message = format!(
                "server ignored the Range header and sends the whole file ({} bytes, more than the {} allowed)",
                self.size, self.options.max_full_body_bytes
            );
            return Err(if ranges_asked > 1 {
                Failure::NoMultiRange(message)
            } else {
                Failure::Fatal(message)
            });
        }
        if let Some(len) = response.content_length().filter(|&len| len != self.size) {
            return Err(Failure::Changed(format!(
                "the file changed on the server: it was {} bytes when opened, now {len}",
                self.size
            )));
        }
        let data = read_body(response, self.size, progress).await?;
        if data.len() as u64 != self.size {
            return Err(Failure::CutShort(format!(
                "whole-file answer has {} of {} bytes",
                data.len(),
                self.size
            )));
        }
        Ok(vec![Part {
            range: ByteRange::new(0, self.size),
            total: Some(self.size),
            data,
        }])
    }
}

/// By hand: a kept whole file must not be printed.
impl std::fmt::Debug for HttpSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSource")
            .field("url", &self.url)
            .field("target", &redact(self.target.as_str()))
            .field("size", &self.size)
            .field("whole_file_kept", &self.whole_file.is_some())
            .field(
                "multirange_works",
                &self.multirange_works.load(Ordering::Relaxed),
            )
            .field("options", &self.options)
            .finish()
    }
}

#[async_trait]
impl ByteSource for HttpSource {
    fn name(&self) -> &str {
        &self.url
    }

    fn size(&self) -> u64 {
        self.size
    }

    async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        for r in ranges {
            if !matches!(r.offset.checked_add(r.len), Some(end) if end <= self.size) {
                return Err(Error::io(
                    &self.url,
                    format!(
                        "range {}..{} is past the end of the file ({} bytes)",
                        r.offset,
                        r.offset.saturating_add(r.len),
                        self.size
                    ),
                ));
            }
        }
        let wanted: Vec<ByteRange> = ranges.iter().copied().filter(|r| r.len > 0).collect();
        if wanted.is_empty() {
            return Ok(vec![Bytes::new(); ranges.len()]);
        }
        let (fetched, buffers) = match &self.whole_file {
            Some(file) => (vec![ByteRange::new(0, self.size)], vec![file.clone()]),
            None => {
                let fetched = coalesce_ranges(&wanted, MERGE_GAP);
                let buffers = self.fetch(&fetched).await?;
                (fetched, buffers)
            }
        };
        let mut sliced = slice_from_fetched(&wanted, &fetched, &buffers)
            .ok_or_else(|| {
                self.error(
                    &wanted,
                    "internal error: fetched ranges do not cover the asked ones",
                )
            })?
            .into_iter();
        Ok(ranges
            .iter()
            .map(|r| {
                if r.len == 0 {
                    Bytes::new()
                } else {
                    sliced.next().unwrap_or_default()
                }
            })
            .collect())
    }

    fn limits(&self) -> SourceLimits {
        SourceLimits {
            max_ranges_per_request: self.options.max_ranges_per_request,
            max_range_len: u64::MAX,
            max_request_bytes: u64::MAX,
        }
    }

    fn report(&self) -> SourceReport {
        self.streams.report(self.tally.counters())
    }
}

/// Open `extra` more connections to the file's server (HEAD requests, sent with the first one):
/// the first parallel reads then find them in the pool instead of each opening its own (a TCP
/// and, over HTTPS with HTTP/1.1, a TLS handshake: one or two round trips). Failures are left to
/// the reads.
fn warm_up(
    client: &reqwest::Client,
    auth: &HttpAuth,
    target: &Url,
    extra: usize,
) -> impl Future<Output = ()> {
    let requests: Vec<_> = (0..extra)
        .filter_map(|_| {
            auth.apply(client.request(Method::HEAD, target.clone()))
                .ok()
        })
        .map(|request| tokio::spawn(request.send()))
        .collect();
    async move {
        for request in requests {
            let _ = request.await;
        }
    }
}

/// Merge ranges closer than `SINGLE_RANGE_MERGE_GAP` while the result stays within
/// `SINGLE_RANGE_MERGE_MAX` bytes (longer ranges stay whole). Returns disjoint ranges in order.
fn merge_for_single_requests(ranges: &[ByteRange]) -> Vec<ByteRange> {
    let mut merged: Vec<ByteRange> = Vec::new();
    for r in coalesce_ranges(ranges, 0) {
        match merged.last_mut() {
            Some(last)
                if r.offset - last.end() <= SINGLE_RANGE_MERGE_GAP
                    && r.end() - last.offset <= SINGLE_RANGE_MERGE_MAX =>
            {
                last.len = r.end() - last.offset;
            }
            _ => merged.push(r),
        }
    }
    merged
}

/// Serve each asked range from a part that covers it; also returns the indices nobody covered.
fn serve_from_parts(asked: &[ByteRange], mut parts: Vec<Part>) -> (Vec<Option<Bytes>>, Vec<usize>) {
    parts.sort_unstable_by_key(|p| p.range.offset);
    let mut missing = Vec::new();
    let served = asked
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let starts_before = parts.partition_point(|p| p.range.offset <= r.offset);
            let covering = parts[..starts_before]
                .iter()
                .rev()
                .find(|p| p.range.contains(r));
            let bytes = covering.map(|p| {
                let start = (r.offset - p.range.offset) as usize;
                p.data.slice(start..start + r.len as usize)
            });
            if bytes.is_none() {
                missing.push(i);
            }
            bytes
        })
        .collect();
    (served, missing)
}

/// The HTTP client of the files opened with these settings (redirects, connect timeout, idle
/// connections kept per server, TLS), made once: making one read and parsed every CA certificate
/// of the system (5 ms of CPU a file, a third of a 1000-file merge's CPU), and a shared one keeps
/// its connections for the next file from the same server.
fn shared_client(options: &HttpOptions) -> Result<reqwest::Client> {
    type Settings = (usize, std::time::Duration, usize, TlsOptions);
    static CLIENTS: MadeForTls<Settings, reqwest::Client> = MadeForTls::new();
    let settings = (
        options.max_redirects,
        options.policy.timeout,
        options.connections.max(options.max_connections),
        options.tls.clone(),
    );
    CLIENTS.get(settings, |(redirects, timeout, idle, tls)| {
        let builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::limited(*redirects))
            .connect_timeout(*timeout)
            .pool_max_idle_per_host(*idle)
            .tcp_nodelay(true);
        trusting(builder, tls)?.build().map_err(|e| {
            Error::InvalidArgument(format!("cannot set up an HTTP client: {}", error_chain(&e)))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(offset: u64, data: &[u8]) -> Part {
        Part {
            range: ByteRange::new(offset, data.len() as u64),
            total: Some(1000),
            data: Bytes::copy_from_slice(data),
        }
    }

    #[test]
    fn ranges_are_served_from_any_covering_part_in_any_order() {
        let parts = vec![part(50, b"vwxyz"), part(0, b"0123456789"), part(3, b"ab")];
        let asked = [
            ByteRange::new(51, 2),
            ByteRange::new(2, 3),
            ByteRange::new(3, 2),
            ByteRange::new(20, 1),
        ];
        let (served, missing) = serve_from_parts(&asked, parts);
        assert_eq!(served[0].as_deref(), Some(&b"wx"[..]));
        assert_eq!(served[1].as_deref(), Some(&b"234"[..]));
        assert_eq!(served[2].as_ref().map(|b| b.len()), Some(2));
        assert_eq!(served[3], None);
        assert_eq!(missing, vec![3]);
    }

    #[test]
    fn single_requests_merge_close_ranges_up_to_a_size() {
        let mb = 1 << 20;
        let ranges: Vec<ByteRange> = (0..40).map(|i| ByteRange::new(i * mb, mb - 100)).collect();
        let merged = merge_for_single_requests(&ranges);
        assert!(merged.iter().all(|r| r.len <= SINGLE_RANGE_MERGE_MAX));
        assert_eq!(merged.len(), 5);
        assert!(
            slice_from_fetched(&ranges, &merged, &vec![Bytes::from(vec![0u8; 8 << 20]); 5])
                .is_some()
        );
        let far = [
            ByteRange::new(0, 10),
            ByteRange::new(SINGLE_RANGE_MERGE_GAP + 11, 10),
        ];
        assert_eq!(merge_for_single_requests(&far).len(), 2);
        let huge = [ByteRange::new(0, 3 * SINGLE_RANGE_MERGE_MAX)];
        assert_eq!(merge_for_single_requests(&huge), huge.to_vec());
    }
}
