//! A file on an XRootD server (`XrootdSource`): its connections (slots), the requests spread
//! over them, and reads split by the server's limits.

use super::dispatch::Dispatch;
use super::options::XrootdOptions;
use super::pool;
use super::protocol::{self as proto, FileHandle};
use super::reply::Failure;
use super::reply::{Reply, SMALL_BODY_MAX};
use super::session::{
    ask_for_body, follow_redirect, open_session, open_with_retries, stat_open_file, wait_as_asked,
    Session,
};
use super::url::{parse_url, Endpoint};
use crate::error::{Error, Result};
use crate::source::adaptive::Streams;
use crate::source::retry::Retries;
use crate::source::{
    describe_ranges, join_split_pieces, split_for_limits, ByteRange, ByteSource, Opened,
    SourceLimits, SourceReport, Tally,
};
use async_trait::async_trait;
use bytes::Bytes;
use futures_util::future::join_all;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::task::JoinSet;

/// A file on an XRootD server.
///
/// ```no_run
/// # async fn example() -> cherenkov_core::Result<()> {
/// use cherenkov_core::source::xrootd::{XrootdOptions, XrootdSource};
/// use cherenkov_core::source::{ByteRange, ByteSource};
/// let file = XrootdSource::open("root://eos.example.org//store/a.root", XrootdOptions::default()).await?;
/// let buffers = file.read_ranges(&[ByteRange::new(0, 100), ByteRange::new(5000, 300)]).await?;
/// # Ok(()) }
/// ```
///
/// Its counters count reads only (opening costs a fixed two round trips, three over TLS, more
/// after redirects): `requests` counts every `kXR_read`/`kXR_readv` sent, resends included;
/// `round_trips` counts one per `read_ranges` call (its requests all go out at once) plus one per
/// resend.
pub struct XrootdSource {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for XrootdSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XrootdSource")
            .field("url", &self.inner.url)
            .field("size", &self.inner.size)
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}

struct Inner {
    url: String,
    origin: Endpoint,
    options: XrootdOptions,
    size: u64,
    /// The modification time the open gave (seconds), see `ByteSource::version`.
    modified: Option<u64>,
    limits: SourceLimits,
    /// One per connection this file may use (`max_connections` with `adaptive`); the first
    /// `streams.current()` ready ones take the requests.
    slots: Vec<Slot>,
    /// Hands the requests to those slots (see `dispatch`).
    dispatch: Arc<Dispatch>,
    streams: Streams,
    /// Other data servers holding the file, as `root://` URLs (see `XrootdOptions::discover`).
    other_replicas: Vec<String>,
    /// The server the file was opened on, after the redirects of the open.
    server: Endpoint,
    /// Every data server (`host:port`) the first server's kXR_locate answer named.
    located: Vec<String>,
    tally: Tally,
}

/// One connection's place: its session (replaced when the connection fails) and its load.
struct Slot {
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    /// Logged in with the file open (or was, and is opened again on use): may take requests.
    ready: AtomicBool,
    /// A connection for it is being opened in the background.
    opening: AtomicBool,
}

impl Slot {
    fn new(session: Option<Arc<Session>>) -> Slot {
        Slot {
            ready: AtomicBool::new(session.is_some()),
            session: tokio::sync::Mutex::new(session),
            opening: AtomicBool::new(false),
        }
    }
}

impl XrootdSource {
    /// The server the URL names (before any redirect).
    pub(super) fn origin(&self) -> &Endpoint {
        &self.inner.origin
    }

    /// The server the file was opened on, after the open's redirects.
    pub(super) fn server(&self) -> &Endpoint {
        &self.inner.server
    }

    /// Every data server (`host:port`) the first server's kXR_locate answer named.
    pub(super) fn located(&self) -> &[String] {
        &self.inner.located
    }

    /// The source with the version of the file it opened: the modification time of the open's
    /// stat answer (seconds: a file replaced by one of the same size within the same second is
    /// not told apart).
    pub fn into_opened(self) -> Opened {
        let version = self.inner.modified.map(super::list::version_of);
        Opened {
            version,
            ..Opened::plain(Arc::new(self))
        }
    }

    /// Open `url` (`root://host[:port]//path`) for reading: connect, log in and open the file on
    /// `options.connections` connections at once.
    pub async fn open(url: &str, options: XrootdOptions) -> Result<XrootdSource> {
        // The name shown everywhere; `url` itself (its `authz=` included) goes to the server only.
        let name = crate::source::redact::redact(url);
        let origin = parse_url(url).map_err(|m| Error::InvalidArgument(format!("{name}: {m}")))?;
        if options.connections == 0 {
            return Err(Error::InvalidArgument(format!(
                "{name}: XrootdOptions::connections must be at least 1"
            )));
        }
        let opened =
            join_all((0..options.connections).map(|_| open_with_retries(&origin, &options))).await;
        let first = opened.iter().find_map(|s| s.as_ref().ok()).cloned();
        let Some(first) = first else {
            let failure = opened.into_iter().find_map(|s| s.err());
            let failure = failure.unwrap_or_else(|| Failure::Fatal("no connection".into()));
            return Err(failure.error(&name, format!("cannot open: {failure}")));
        };
        let (iov_max, ior_max) = first.readv_limits;
        let iov_max = iov_max
            .min(options.readv_iov_max.unwrap_or(usize::MAX))
            .max(1);
        let ior_max = ior_max
            .min(options.readv_ior_max.unwrap_or(u64::MAX))
            .clamp(1, proto::READV_TOTAL_MAX / 2);
        let limits = SourceLimits {
            max_ranges_per_request: iov_max,
            max_range_len: ior_max,
            // The server counts the request list too: 16 bytes per element.
            max_request_bytes: proto::READV_TOTAL_MAX
                .saturating_sub((iov_max as u64).saturating_mul(proto::READV_ELEMENT_LEN as u64))
                .max(ior_max),
        };
        let streams = Streams::new(
            options.connections,
            options.max_connections,
            options.adaptive,
        )
        .with_queue();
        let mut slots: Vec<Slot> = opened
            .into_iter()
            .map(|s| {
                // A connection that failed to open, or saw another size, is opened again on use.
                let slot = Slot::new(s.ok().filter(|s| s.size == first.size));
                slot.ready.store(true, Ordering::Relaxed);
                slot
            })
            .collect();
        slots.extend((options.connections..streams.max()).map(|_| Slot::new(None)));
        let dispatch = Dispatch::new(slots.len(), (0..options.connections).collect());
        let in_use = first.endpoint.address();
        // A server that opened the file itself is a data server: its kXR_locate answer names
        // itself (by address, so `root://localhost` would list `127.0.0.1` as another replica).
        let redirected = in_use != origin.address();
        let other_replicas = first
            .located
            .iter()
            .filter(|address| redirected && **address != in_use)
            .map(|address| origin.url_on(address))
            .collect();
        let source = XrootdSource {
            inner: Arc::new(Inner {
                url: name,
                origin,
                options,
                size: first.size,
                modified: first.modified,
                limits,
                slots,
                dispatch,
                streams,
                other_replicas,
                server: first.endpoint.clone(),
                located: first.located.clone(),
                tally: Tally::default(),
            }),
        };
        // The next count's connections log in while reading starts: ready when a step asks.
        source.inner.open_ahead();
        source.inner.note_ready();
        Ok(source)
    }

    /// Data servers other than this source's that hold the file, as `root://` URLs: what a
    /// redirector answered to `kXR_locate` (empty for a plain data server).
    pub fn other_replicas(&self) -> &[String] {
        &self.inner.other_replicas
    }

    /// `host:port` of the server the file was opened on: the data server a redirector sent the
    /// open to, or the URL's own server.
    pub fn server_address(&self) -> String {
        self.inner.server.address()
    }

    /// True when the URL's server sent the open elsewhere: it is a redirector.
    pub fn was_redirected(&self) -> bool {
        self.inner.server.address() != self.inner.origin.address()
    }

    /// The file's size as the server sees it now (`kXR_stat` on the open file).
    pub async fn stat_size(&self) -> Result<u64> {
        self.ask("stat", |session| async move {
            stat_open_file(&session.conn, session.handle).await
        })
        .await
    }

    /// `ask(session)` on the first connection, trying again on a new one after transport
    /// failures; `what` names it in the error.
    async fn ask<T, F, Fut>(&self, what: &str, ask: F) -> Result<T>
    where
        F: Fn(Arc<Session>) -> Fut,
        Fut: std::future::Future<Output = Result<T, Failure>>,
    {
        let inner = &self.inner;
        let mut retries = Retries::new(inner.options.policy.retry);
        loop {
            let attempt = async { ask(inner.session(0).await?).await };
            match attempt.await {
                Ok(value) => return Ok(value),
                Err(f) if f.is_transient() => match retries.after_failure() {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => {
                        let message =
                            format!("{what} failed: {f} (gave up after {})", retries.describe());
                        return Err(f.error(&inner.url, message));
                    }
                },
                Err(f) => return Err(f.error(&inner.url, format!("{what} failed: {f}"))),
            }
        }
    }

    /// Close the file on every connection (`kXR_close`) and drop the connections. Dropping the
    /// source without closing is fine too: the server closes files of closed connections.
    pub async fn close(&self) {
        for slot in &self.inner.slots {
            let session = slot.session.lock().await.take();
            if let Some(s) = session {
                let _ = s
                    .conn
                    .send(&proto::close_request(s.handle), SMALL_BODY_MAX)
                    .await;
                s.conn.close("closed by the client");
            }
        }
    }
}

impl Drop for Inner {
    /// The file is done with: its connections may serve the process' next files (see `pool`).
    fn drop(&mut self) {
        for slot in &mut self.slots {
            if let Some(session) = slot.session.get_mut().take().and_then(Arc::into_inner) {
                pool::keep(session);
            }
        }
    }
}

impl Inner {
    /// The slot's session, opened again if its connection is gone.
    async fn session(&self, slot: usize) -> Result<Arc<Session>, Failure> {
        let mut current = self.slots[slot].session.lock().await;
        if let Some(s) = current.as_ref().filter(|s| s.conn.is_alive()) {
            return Ok(s.clone());
        }
        *current = None;
        let session = open_session(self.origin.clone(), &self.options).await?;
        self.check_size(&session)?;
        let session = Arc::new(session);
        *current = Some(session.clone());
        Ok(session)
    }

    /// Slots ready among those in use: what a throughput step measures, and where requests go.
    fn note_ready(&self) {
        let usable: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].ready.load(Ordering::Relaxed))
            .take(self.streams.current())
            .collect();
        self.streams.set_ready(usable.len());
        let usable = match usable.is_empty() {
            // The first slot is opened again on use.
            true => vec![0],
            false => usable,
        };
        self.dispatch.set_usable(usable, self.streams.window());
    }

    /// With `adaptive`: open, in the background, the connections up to twice the count in use,
    /// so that growing finds them logged in. A connection refused is the server pushing back.
    fn open_ahead(self: &Arc<Self>) {
        if !self.streams.adaptive() {
            return;
        }
        let wanted = self.streams.ahead().min(self.slots.len());
        for index in 0..wanted {
            let slot = &self.slots[index];
            if slot.ready.load(Ordering::Relaxed) || slot.opening.swap(true, Ordering::Relaxed) {
                continue;
            }
            let inner: Weak<Inner> = Arc::downgrade(self);
            let (origin, options) = (self.origin.clone(), self.options.clone());
            tokio::spawn(async move {
                let opened = open_session(origin, &options).await;
                let Some(inner) = inner.upgrade() else { return };
                let slot = &inner.slots[index];
                match opened {
                    Ok(session) if inner.check_size(&session).is_ok() => {
                        *slot.session.lock().await = Some(Arc::new(session));
                        slot.ready.store(true, Ordering::Relaxed);
                        inner.note_ready();
                    }
                    _ => {
                        inner.streams.pushback();
                    }
                }
                slot.opening.store(false, Ordering::Relaxed);
            });
        }
    }

    fn check_size(&self, session: &Session) -> Result<(), Failure> {
        if session.size != self.size {
            return Err(Failure::Fatal(format!(
                "the file changed on the server: it had {} bytes when opened, {} now",
                self.size, session.size
            )));
        }
        Ok(())
    }

    /// Read `pieces` (one request's worth) on `slot`, trying again after transport failures.
    async fn read_request(
        self: &Arc<Self>,
        slot: usize,
        pieces: &[ByteRange],
    ) -> Result<Vec<Bytes>> {
        let mut retries = Retries::new(self.options.policy.retry);
        let mut first_failure: Option<Failure> = None;
        let mut redirects = 0;
        let mut waited = Duration::ZERO;
        let reading = describe_ranges(pieces);
        loop {
            let failure = match self
                .try_read(slot, pieces, &mut redirects, &mut waited)
                .await
            {
                Ok(buffers) => return Ok(buffers),
                Err(failure) => failure,
            };
            if !failure.is_transient() {
                let message = format!("reading {reading} failed: {failure}");
                return Err(failure.error(&self.url, message));
            }
            if let Some(wait) = retries.after_failure() {
                first_failure.get_or_insert(failure);
                tokio::time::sleep(wait).await;
                self.tally.round_trips.fetch_add(1, Ordering::Relaxed);
                self.tally.retries.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            // The first failure says what went wrong (and its kind); the last, why trying
            // again did not help.
            let tried = retries.describe();
            let (first, message) = match first_failure {
                Some(first) if first.to_string() != failure.to_string() => {
                    let message = format!("{first} (gave up after {tried}; the last: {failure})");
                    (first, message)
                }
                _ => {
                    let message = format!("{failure} (gave up after {tried})");
                    (failure, message)
                }
            };
            let message = format!("reading {reading} failed: {message}");
            return Err(first.error(&self.url, message));
        }
    }

    /// One attempt: send the read, and follow waits and redirects.
    async fn try_read(
        self: &Arc<Self>,
        slot: usize,
        pieces: &[ByteRange],
        redirects: &mut usize,
        waited: &mut Duration,
    ) -> Result<Vec<Bytes>, Failure> {
        loop {
            let session = self.session(slot).await?;
            let (request, max_len) = match pieces {
                [one] => (proto::read_request(session.handle, *one), one.len),
                _ => (
                    proto::readv_request(session.handle, pieces),
                    proto::readv_response_len(pieces),
                ),
            };
            self.tally.requests.fetch_add(1, Ordering::Relaxed);
            self.streams.started();
            let sent = std::time::Instant::now();
            let reply = session.conn.send(&request, max_len as usize).await;
            let received = match &reply {
                Ok(Reply::Ok(body)) => body.len() as u64,
                _ => 0,
            };
            if self.dispatch.waiting() > 0 {
                self.streams.backlog();
            }
            if self.streams.finished(sent, received).is_some() {
                self.open_ahead();
            }
            // The count, or the window it allows each connection, may have moved.
            self.note_ready();
            match reply? {
                Reply::Ok(body) => {
                    let buffers = decode_read(body, session.handle, pieces).inspect_err(|_| {
                        // Whatever confused the answer may confuse the next one too.
                        session
                            .conn
                            .close("a read answer did not match its request");
                    })?;
                    self.tally
                        .bytes
                        .fetch_add(pieces.iter().map(|r| r.len).sum(), Ordering::Relaxed);
                    return Ok(buffers);
                }
                Reply::Error { code, message } => return Err(Failure::Server { code, message }),
                Reply::Wait { seconds, message } => {
                    self.streams.pushback();
                    wait_as_asked(waited, seconds, &message, self.options.policy.timeout).await?;
                }
                Reply::Redirect(r) => {
                    *redirects += 1;
                    let target = follow_redirect(
                        &session.endpoint,
                        &r,
                        *redirects,
                        self.options.max_redirects,
                    )?;
                    let moved = open_session(target, &self.options).await?;
                    self.check_size(&moved)?;
                    let mut current = self.slots[slot].session.lock().await;
                    *current = Some(Arc::new(moved));
                }
            }
            self.tally.round_trips.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The buffers of a `kXR_read` (one piece) or `kXR_readv` answer, checked against the request.
fn decode_read(
    body: Vec<u8>,
    handle: FileHandle,
    pieces: &[ByteRange],
) -> Result<Vec<Bytes>, Failure> {
    match pieces {
        [one] => {
            if body.len() as u64 != one.len {
                return Err(Failure::Fatal(format!(
                    "kXR_read answered {} bytes where {} were asked (was the file cut short on the server?)",
                    body.len(),
                    one.len
                )));
            }
            Ok(vec![Bytes::from(body)])
        }
        _ => proto::parse_readv(Bytes::from(body), handle, pieces).map_err(Failure::Fatal),
    }
}

#[async_trait]
impl ByteSource for XrootdSource {
    fn name(&self) -> &str {
        &self.inner.url
    }

    fn size(&self) -> u64 {
        self.inner.size
    }

    /// `kXR_query` checksum of the file on the server it was opened on.
    async fn checksum(&self) -> Result<Option<String>> {
        self.ask("checksum query", |session| async move {
            let request = proto::query_checksum_request(&session.endpoint.path);
            let body = ask_for_body(&session.conn, &request, "the checksum query").await?;
            proto::parse_checksum(&body).map(Some).ok_or_else(|| {
                Failure::Fatal(format!(
                    "a checksum answer is `<algorithm> <value>`, got {:?}",
                    String::from_utf8_lossy(&body)
                ))
            })
        })
        .await
    }

    async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        let inner = &self.inner;
        for r in ranges {
            // Written so that no sum can overflow.
            if r.len > inner.size || r.offset > inner.size - r.len {
                return Err(Error::io(
                    &inner.url,
                    format!(
                        "range {}..{} is past the end of the file ({} bytes)",
                        r.offset,
                        r.offset.saturating_add(r.len),
                        inner.size
                    ),
                ));
            }
        }
        let mut requests = split_for_limits(ranges, &inner.limits);
        let total = ranges.iter().map(|r| r.len).sum();
        if let Some(each) = inner.streams.pieces(total, requests.len()) {
            // Too few requests for the streams: cut the read so that every stream carries a part.
            let limits = SourceLimits {
                max_range_len: inner.limits.max_range_len.min(each),
                max_request_bytes: inner.limits.max_request_bytes.min(each),
                ..inner.limits
            };
            requests = split_for_limits(ranges, &limits);
        }
        if requests.is_empty() {
            return Ok(vec![Bytes::new(); ranges.len()]);
        }
        let pieces: usize = requests.iter().map(|r| r.len()).sum();
        inner
            .tally
            .ranges
            .fetch_add(pieces as u64, Ordering::Relaxed);
        // Every request goes out now, whatever the connection: together they wait one round trip.
        inner.tally.round_trips.fetch_add(1, Ordering::Relaxed);
        let mut tasks = JoinSet::new();
        for (index, request) in requests.into_iter().enumerate() {
            // In line now, in order: a slot of the first `streams.current()` ready ones, the
            // least loaded with room, once there is one (see `dispatch`).
            let ticket = inner.dispatch.assign(request.iter().map(|r| r.len).sum());
            let inner = inner.clone();
            tasks.spawn(async move {
                let Some(assigned) = ticket.connection().await else {
                    return (index, Err(Error::io(&inner.url, "the source was closed")));
                };
                let answer = inner.read_request(assigned.slot, &request).await;
                (index, answer)
            });
        }
        let mut answers: Vec<Vec<Bytes>> = vec![Vec::new(); tasks.len()];
        while let Some(joined) = tasks.join_next().await {
            let (index, answer) =
                joined.map_err(|e| Error::io_caused(&inner.url, "read task failed", e))?;
            answers[index] = answer?;
        }
        join_split_pieces(ranges, answers.into_iter().flatten())
            .ok_or_else(|| Error::io(&inner.url, "internal error: fewer pieces than asked"))
    }

    fn limits(&self) -> SourceLimits {
        self.inner.limits
    }

    fn report(&self) -> SourceReport {
        self.inner.streams.report(self.inner.tally.counters())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_read_answer_is_refused() {
        let piece = [ByteRange::new(0, 4)];
        assert!(decode_read(vec![1, 2, 3], [0; 4], &piece).is_err());
        assert_eq!(
            decode_read(vec![1, 2, 3, 4], [0; 4], &piece).unwrap()[0].len(),
            4
        );
    }
}
