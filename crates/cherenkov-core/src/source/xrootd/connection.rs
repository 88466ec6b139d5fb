//! One TCP connection to an XRootD server, logged in, carrying many requests at once.
//!
//! Each request gets its own stream id. A writer task sends requests whole, in order (so a caller
//! that gives up halfway never leaves half a request on the wire), and a reader task reads
//! responses as they come and hands each to the request waiting for it (partial `kXR_oksofar` bodies are gathered first, and a response that
//! the server delays with `kXR_waitresp` is picked out of the later `kXR_attn`). A request that gets
//! no answer in time closes the connection: its stream is in an unknown state, and every request
//! still waiting on it fails at once so it can be sent again elsewhere.

use super::protocol::{self as proto, Redirect, Request, ResponseHeader, RESPONSE_HEADER_LEN};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Largest body accepted for answers that carry no file data (errors, redirects, logins, ...).
pub const SMALL_BODY_MAX: usize = 64 * 1024;
/// Bytes buffered from the socket: many small answers are read with one system call.
const READ_BUFFER: usize = 256 * 1024;
/// Requests queued together are written with one system call, up to this many bytes.
const WRITE_BUFFER: usize = 64 * 1024;

/// The final answer to a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// `kXR_ok`, with every `kXR_oksofar` body before it joined in front.
    Ok(Vec<u8>),
    /// `kXR_error`.
    Error { code: u32, message: String },
    /// `kXR_redirect`: send the request to another server.
    Redirect(Redirect),
    /// `kXR_wait`: send the request again after this many seconds.
    Wait { seconds: u32, message: String },
}

/// Why a request got no answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnError {
    /// The connection failed or closed; the request may be sent again on a new connection.
    Lost(String),
    /// No answer in time; the connection was closed.
    Timeout(String),
    /// The server's answer broke the protocol.
    Protocol(String),
    /// The server would not let us in (TLS or authentication we do not support, login refused).
    Refused(String),
}

impl std::fmt::Display for ConnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnError::Lost(m)
            | ConnError::Timeout(m)
            | ConnError::Protocol(m)
            | ConnError::Refused(m) => f.write_str(m),
        }
    }
}

/// Who we say we are at login.
fn user_name() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| {
            !u.is_empty()
                && u.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
        .unwrap_or_else(|| "cherenkov".to_string())
}

pub struct Connection {
    address: String,
    timeout: Duration,
    shared: Arc<Shared>,
    /// Encoded requests for the writer task.
    outgoing: mpsc::UnboundedSender<Vec<u8>>,
    writer: JoinHandle<()>,
    reader: JoinHandle<()>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
    }
}

impl Connection {
    /// Connect to `address` (`host:port`), shake hands, log in and authenticate, all within
    /// `timeout`. Then a request fails after `timeout` with no answer and no byte received on the
    /// connection (a large answer arriving slowly, or one queued behind others, is not cut short).
    ///
    /// `early` requests (an open, for example) go out in the same write as the login, saving a
    /// round trip; their answers are awaited with [`Connection::wait`]. `None` instead of them
    /// when the server wanted authentication first: send them again then.
    pub async fn connect(
        address: &str,
        timeout: Duration,
        early: &[Request],
    ) -> Result<(Connection, Option<Vec<Waiting>>), ConnError> {
        match tokio::time::timeout(timeout, Self::connect_and_login(address, timeout, early)).await
        {
            Ok(result) => result,
            Err(_) => Err(ConnError::Timeout(format!(
                "no answer from {address} within {} while connecting and logging in",
                seconds(timeout)
            ))),
        }
    }

    async fn connect_and_login(
        address: &str,
        timeout: Duration,
        early: &[Request],
    ) -> Result<(Connection, Option<Vec<Waiting>>), ConnError> {
        let lost =
            |e: std::io::Error| ConnError::Lost(format!("connection to {address} failed: {e}"));
        let mut stream = TcpStream::connect(address).await.map_err(lost)?;
        stream.set_nodelay(true).map_err(lost)?;

        // Handshake, kXR_protocol, kXR_login and the early requests in one write: one round trip.
        // Servers known to want authentication get no early requests (they would be refused).
        let early = if asks_for_authentication(address) {
            &[]
        } else {
            early
        };
        let user = user_name();
        let shared = Arc::new(Shared::default());
        shared.lock().next_id = AUTH_STREAM;
        let mut hello = proto::CLIENT_HANDSHAKE.to_vec();
        hello.extend(proto::protocol_request().encode(1));
        hello.extend(proto::login_request(std::process::id(), &user).encode(2));
        let mut waiting = Vec::with_capacity(early.len());
        for request in early {
            let (reply, answer) = oneshot::channel();
            let stream_id = shared.register(reply, SMALL_BODY_MAX)?;
            hello.extend(request.encode(stream_id));
            waiting.push(Waiting {
                stream_id,
                answer,
                name: request.name(),
            });
        }
        stream.write_all(&hello).await.map_err(lost)?;

        let (head, body) = read_small_frame(&mut stream, address).await?;
        if head.stream_id != 0 || head.status != proto::KXR_OK || body.len() != 8 {
            return Err(ConnError::Protocol(format!(
                "{address} is not an XRootD server (unexpected answer to the handshake)"
            )));
        }
        let body = expect_ok(
            read_small_frame(&mut stream, address).await?,
            1,
            "kXR_protocol",
            address,
        )?;
        let (_version, flags) = proto::parse_protocol(&body).ok_or_else(|| {
            ConnError::Protocol(format!("{address} sent a malformed kXR_protocol answer"))
        })?;
        if flags & (proto::KXR_GOTO_TLS | proto::KXR_TLS_LOGIN) != 0 {
            return Err(ConnError::Refused(format!(
                "{address} requires TLS (roots://), which cherenkov's XRootD client does not support yet"
            )));
        }
        let body = expect_ok(
            read_small_frame(&mut stream, address).await?,
            2,
            "kXR_login",
            address,
        )?;
        let protocols = proto::parse_login(&body).ok_or_else(|| {
            ConnError::Protocol(format!("{address} sent a malformed kXR_login answer"))
        })?;
        let mut early_answers = Some(waiting);
        if !protocols.is_empty() {
            if !protocols.iter().any(|p| p == "unix") {
                return Err(ConnError::Refused(format!(
                    "{address} asks for authentication with {}; cherenkov supports only 'unix' so far",
                    protocols.join(" or ")
                )));
            }
            remember_authentication(address);
            stream
                .write_all(&proto::unix_auth_request(&user, &user).encode(AUTH_STREAM))
                .await
                .map_err(lost)?;
            // The early requests' answers (refusals: they came before authentication) come first.
            let mut frame = read_small_frame(&mut stream, address).await?;
            for _ in 0..MAX_FRAMES_BEFORE_AUTH {
                if frame.0.stream_id == AUTH_STREAM {
                    break;
                }
                frame = read_small_frame(&mut stream, address).await?;
            }
            expect_ok(frame, AUTH_STREAM, "kXR_auth (unix)", address)?;
            for w in early_answers.take().unwrap_or_default() {
                shared.lock().pending.remove(&w.stream_id);
            }
        }

        let (read_half, write_half) = stream.into_split();
        let heard = Heard {
            inner: read_half,
            shared: shared.clone(),
        };
        let reader = tokio::spawn(read_responses(
            BufReader::with_capacity(READ_BUFFER, heard),
            shared.clone(),
            address.to_string(),
        ));
        let (outgoing, queue) = mpsc::unbounded_channel();
        let writer = tokio::spawn(write_requests(
            BufWriter::with_capacity(WRITE_BUFFER, write_half),
            queue,
            shared.clone(),
            address.to_string(),
        ));
        let conn = Connection {
            address: address.to_string(),
            timeout,
            shared,
            outgoing,
            writer,
            reader,
        };
        Ok((conn, early_answers))
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    /// False once the connection failed or was closed; requests then fail at once.
    pub fn is_alive(&self) -> bool {
        self.shared.lock().closed.is_none()
    }

    /// Close the connection: every request waiting on it fails with `reason`.
    pub fn close(&self, reason: &str) {
        self.shared.close(reason);
        self.reader.abort();
        self.writer.abort();
    }

    /// Send `request` and wait for its final answer, whose body may be at most `max_len` bytes.
    ///
    /// If the caller gives up waiting, the stream id stays reserved until the server answers it:
    /// a late answer is then dropped, never taken for the answer to a later request.
    pub async fn send(&self, request: &Request, max_len: usize) -> Result<Reply, ConnError> {
        let (reply, answer) = oneshot::channel();
        let stream_id = self.shared.register(reply, max_len)?;
        if self.outgoing.send(request.encode(stream_id)).is_err() {
            let reason = format!("connection to {} closed", self.address);
            self.shared
                .finish(stream_id, Err(ConnError::Lost(reason.clone())));
            return Err(ConnError::Lost(reason));
        }
        self.wait(Waiting {
            stream_id,
            answer,
            name: request.name(),
        })
        .await
    }

    /// The answer to a request already sent; a timeout after `timeout` without a byte from the
    /// server.
    pub async fn wait(&self, waiting: Waiting) -> Result<Reply, ConnError> {
        let answer = async {
            waiting.answer.await.unwrap_or_else(|_| {
                Err(ConnError::Lost(format!(
                    "connection to {} closed",
                    self.address
                )))
            })
        };
        let mut answer = std::pin::pin!(answer);
        let sent = Instant::now();
        loop {
            let quiet_since = self
                .shared
                .last_heard()
                .map_or(sent, |heard| heard.max(sent));
            match tokio::time::timeout_at(quiet_since + self.timeout, &mut answer).await {
                Ok(result) => return result,
                Err(_)
                    if self
                        .shared
                        .last_heard()
                        .is_some_and(|heard| heard > quiet_since) =>
                {
                    continue
                }
                Err(_) => {
                    let reason = format!(
                        "no answer from {} to {} within {}",
                        self.address,
                        waiting.name,
                        seconds(self.timeout)
                    );
                    self.close(&reason);
                    return Err(ConnError::Timeout(reason));
                }
            }
        }
    }
}

/// A request sent, its answer still to come.
pub struct Waiting {
    stream_id: u16,
    answer: oneshot::Receiver<Result<Reply, ConnError>>,
    name: &'static str,
}

/// Stream id of `kXR_auth` during login (1 and 2 are `kXR_protocol` and `kXR_login`); early
/// requests take the ids after it.
const AUTH_STREAM: u16 = 3;
/// Answers to early requests read (and dropped) before the authentication answer, at most.
const MAX_FRAMES_BEFORE_AUTH: usize = 16;

/// Servers (`host:port`) that asked for authentication: they get no early requests.
static AUTHENTICATING: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn asks_for_authentication(address: &str) -> bool {
    AUTHENTICATING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|a| a == address)
}

fn remember_authentication(address: &str) {
    let mut known = AUTHENTICATING.lock().unwrap_or_else(|e| e.into_inner());
    if known.len() < 1024 && !known.iter().any(|a| a == address) {
        known.push(address.to_string());
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// Requests waiting for an answer, by stream id.
#[derive(Default)]
struct Shared {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    pending: HashMap<u16, Pending>,
    next_id: u16,
    /// Why the connection closed, once it has.
    closed: Option<String>,
    /// When the last bytes came from the server.
    last_heard: Option<Instant>,
}

struct Pending {
    reply: oneshot::Sender<Result<Reply, ConnError>>,
    /// `kXR_oksofar` bodies so far.
    body: Vec<u8>,
    /// Most body bytes this request may receive: what it asked for.
    max_len: usize,
}

/// Where the reader puts the next data body.
enum Destination {
    /// Append to this request's body (taken out of the map while reading).
    Body(Vec<u8>),
    /// Nobody waits for it (a late answer to a failed request): read and drop.
    Discard,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves plain data behind; keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn heard(&self) {
        self.lock().last_heard = Some(Instant::now());
    }

    fn last_heard(&self) -> Option<Instant> {
        self.lock().last_heard
    }

    fn register(
        &self,
        reply: oneshot::Sender<Result<Reply, ConnError>>,
        max_len: usize,
    ) -> Result<u16, ConnError> {
        let mut state = self.lock();
        if let Some(reason) = &state.closed {
            return Err(ConnError::Lost(reason.clone()));
        }
        if state.pending.len() >= usize::from(u16::MAX) - 1 {
            return Err(ConnError::Lost(
                "too many requests in flight on one connection".into(),
            ));
        }
        // Stream id 0 is the server's (handshake, unsolicited messages); skip ids still in use.
        let mut id = state.next_id;
        loop {
            id = id.wrapping_add(1);
            if id != 0 && !state.pending.contains_key(&id) {
                break;
            }
        }
        state.next_id = id;
        state.pending.insert(
            id,
            Pending {
                reply,
                body: Vec::new(),
                max_len,
            },
        );
        Ok(id)
    }

    fn close(&self, reason: &str) {
        let mut state = self.lock();
        if state.closed.is_none() {
            state.closed = Some(reason.to_string());
        }
        for (_, p) in state.pending.drain() {
            let _ = p.reply.send(Err(ConnError::Lost(reason.to_string())));
        }
    }

    fn finish(&self, stream_id: u16, result: Result<Reply, ConnError>) {
        if let Some(p) = self.lock().pending.remove(&stream_id) {
            let _ = p.reply.send(result);
        }
    }

    /// The body buffer for `len` more data bytes to `stream_id`, if that fits what was asked.
    fn take_body(&self, stream_id: u16, len: usize) -> Destination {
        let mut state = self.lock();
        let Some(p) = state.pending.get_mut(&stream_id) else {
            return Destination::Discard;
        };
        if p.body.len().saturating_add(len) > p.max_len {
            let max_len = p.max_len;
            if let Some(p) = state.pending.remove(&stream_id) {
                let _ = p.reply.send(Err(ConnError::Protocol(format!(
                    "the server sent more than the {max_len} bytes the request asked for"
                ))));
            }
            return Destination::Discard;
        }
        if p.body.capacity() == 0 && len > 0 {
            // What the request asked for bounds the answer: one allocation instead of regrowing.
            p.body.reserve_exact(p.max_len);
        }
        Destination::Body(std::mem::take(&mut p.body))
    }

    fn put_body(&self, stream_id: u16, body: Vec<u8>, last: bool) {
        if last {
            self.finish(stream_id, Ok(Reply::Ok(body)));
        } else if let Some(p) = self.lock().pending.get_mut(&stream_id) {
            p.body = body;
        }
    }
}

/// The socket's read side, noting when bytes arrive: proof that the server is alive even while a
/// large answer is still incomplete.
struct Heard<R> {
    inner: R,
    shared: Arc<Shared>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Heard<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.shared.heard();
        }
        polled
    }
}

/// The writer task: send queued requests whole, several per system call when they queue up.
async fn write_requests<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut queue: mpsc::UnboundedReceiver<Vec<u8>>,
    shared: Arc<Shared>,
    address: String,
) {
    while let Some(request) = queue.recv().await {
        let mut written = writer.write_all(&request).await;
        while let (Ok(()), Ok(more)) = (&written, queue.try_recv()) {
            written = writer.write_all(&more).await;
        }
        if let Err(e) = written.and(writer.flush().await) {
            shared.close(&format!("sending to {address} failed: {e}"));
            return;
        }
    }
}

/// The reader task: hand out responses until the connection fails, then fail everything waiting.
async fn read_responses<R: AsyncRead + Unpin>(mut reader: R, shared: Arc<Shared>, address: String) {
    let reason = loop {
        if let Err(reason) = read_response(&mut reader, &shared).await {
            break reason;
        }
    };
    shared.close(&format!("connection to {address} lost: {reason}"));
}

async fn read_response<R: AsyncRead + Unpin>(
    reader: &mut R,
    shared: &Shared,
) -> Result<(), String> {
    let mut head = [0u8; RESPONSE_HEADER_LEN];
    reader
        .read_exact(&mut head)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => "the server closed the connection".to_string(),
            _ => e.to_string(),
        })?;
    let head = ResponseHeader::decode(&head);
    if head.status == proto::KXR_ATTN {
        return read_attention(reader, shared, head.dlen).await;
    }
    dispatch(reader, shared, head).await
}

/// `kXR_attn`: a delayed answer (`kXR_asynresp`) is dispatched like any other; other messages are
/// dropped.
async fn read_attention<R: AsyncRead + Unpin>(
    reader: &mut R,
    shared: &Shared,
    dlen: u32,
) -> Result<(), String> {
    if dlen < 16 {
        return discard(reader, u64::from(dlen)).await;
    }
    let mut prefix = [0u8; 16];
    reader
        .read_exact(&mut prefix)
        .await
        .map_err(|e| e.to_string())?;
    match proto::parse_asynresp_prefix(&prefix) {
        Some(inner)
            if inner.status != proto::KXR_ATTN && u64::from(inner.dlen) == u64::from(dlen) - 16 =>
        {
            dispatch(reader, shared, inner).await
        }
        Some(_) => Err("malformed asynchronous response (kXR_attn)".to_string()),
        None => discard(reader, u64::from(dlen) - 16).await,
    }
}

async fn dispatch<R: AsyncRead + Unpin>(
    reader: &mut R,
    shared: &Shared,
    head: ResponseHeader,
) -> Result<(), String> {
    let len = head.dlen as usize;
    let id = head.stream_id;
    if head.status == proto::KXR_OK || head.status == proto::KXR_OKSOFAR {
        return match shared.take_body(id, len) {
            Destination::Discard => discard(reader, u64::from(head.dlen)).await,
            Destination::Body(mut body) => {
                let start = body.len();
                body.resize(start + len, 0);
                reader
                    .read_exact(&mut body[start..])
                    .await
                    .map_err(|e| e.to_string())?;
                shared.put_body(id, body, head.status == proto::KXR_OK);
                Ok(())
            }
        };
    }
    if len > SMALL_BODY_MAX {
        return Err(format!(
            "answer status {} with an implausible {len}-byte body",
            head.status
        ));
    }
    let mut body = vec![0u8; len];
    reader
        .read_exact(&mut body)
        .await
        .map_err(|e| e.to_string())?;
    let reply = match head.status {
        proto::KXR_ERROR => {
            let (code, message) = proto::parse_error(&body);
            Ok(Reply::Error { code, message })
        }
        proto::KXR_REDIRECT => proto::parse_redirect(&body)
            .map(Reply::Redirect)
            .ok_or_else(|| ConnError::Protocol("malformed kXR_redirect answer".into())),
        proto::KXR_WAIT => {
            let (seconds, message) = proto::parse_wait(&body);
            Ok(Reply::Wait { seconds, message })
        }
        // The real answer comes later inside a kXR_attn; the request keeps waiting (and its
        // timeout keeps running).
        proto::KXR_WAITRESP => return Ok(()),
        other => Err(ConnError::Protocol(format!(
            "unexpected answer status {other}"
        ))),
    };
    shared.finish(id, reply);
    Ok(())
}

async fn discard<R: AsyncRead + Unpin>(reader: &mut R, len: u64) -> Result<(), String> {
    let copied = tokio::io::copy(&mut reader.take(len), &mut tokio::io::sink())
        .await
        .map_err(|e| e.to_string())?;
    if copied < len {
        return Err("the server closed the connection".to_string());
    }
    Ok(())
}

/// One whole response during login, before the reader task runs.
async fn read_small_frame(
    stream: &mut TcpStream,
    address: &str,
) -> Result<(ResponseHeader, Vec<u8>), ConnError> {
    let lost = |e: std::io::Error| {
        ConnError::Lost(format!("connection to {address} failed during login: {e}"))
    };
    let mut head = [0u8; RESPONSE_HEADER_LEN];
    stream.read_exact(&mut head).await.map_err(lost)?;
    let head = ResponseHeader::decode(&head);
    if head.dlen as usize > SMALL_BODY_MAX {
        return Err(ConnError::Protocol(format!(
            "{address} sent an implausible {}-byte answer during login",
            head.dlen
        )));
    }
    let mut body = vec![0u8; head.dlen as usize];
    stream.read_exact(&mut body).await.map_err(lost)?;
    Ok((head, body))
}

/// The body of a login-phase answer that must be `kXR_ok` for stream `stream_id`.
fn expect_ok(
    (head, body): (ResponseHeader, Vec<u8>),
    stream_id: u16,
    what: &str,
    address: &str,
) -> Result<Vec<u8>, ConnError> {
    if head.stream_id != stream_id {
        return Err(ConnError::Protocol(format!(
            "{address} answered stream {} while {what} (stream {stream_id}) was expected",
            head.stream_id
        )));
    }
    match head.status {
        proto::KXR_OK => Ok(body),
        proto::KXR_ERROR => {
            let (code, message) = proto::parse_error(&body);
            Err(ConnError::Refused(format!(
                "{address} refused {what}: {message} ({} {code})",
                proto::error_name(code)
            )))
        }
        proto::KXR_AUTHMORE => Err(ConnError::Refused(format!(
            "{address} wants more authentication steps for {what} than cherenkov supports"
        ))),
        other => Err(ConnError::Protocol(format!(
            "{address} answered {what} with status {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(stream_id: u16, status: u16, body: &[u8]) -> Vec<u8> {
        let mut v = stream_id.to_be_bytes().to_vec();
        v.extend_from_slice(&status.to_be_bytes());
        v.extend_from_slice(&(body.len() as u32).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    fn waiting(
        shared: &Shared,
        max_len: usize,
    ) -> (u16, oneshot::Receiver<Result<Reply, ConnError>>) {
        let (tx, rx) = oneshot::channel();
        (shared.register(tx, max_len).unwrap(), rx)
    }

    /// Decoding of a byte stream as the reader task sees it (no sockets, no server: pure decoding).
    #[tokio::test]
    async fn responses_reach_their_requests() {
        let shared = Arc::new(Shared::default());
        let (a, mut rx_a) = waiting(&shared, 10);
        let (b, mut rx_b) = waiting(&shared, 100);
        let (c, mut rx_c) = waiting(&shared, 100);
        let (d, mut rx_d) = waiting(&shared, 4);
        let mut wire = frame(a, proto::KXR_OKSOFAR, b"hello ");
        wire.extend(frame(b, proto::KXR_WAITRESP, &5u32.to_be_bytes()));
        wire.extend(frame(999, proto::KXR_OK, b"nobody waits for this"));
        wire.extend(frame(a, proto::KXR_OK, b"you"));
        let mut err = 3011u32.to_be_bytes().to_vec();
        err.extend_from_slice(b"gone\0");
        wire.extend(frame(c, proto::KXR_ERROR, &err));
        wire.extend(frame(d, proto::KXR_OK, b"too long"));
        // b's delayed answer arrives inside a kXR_attn/kXR_asynresp
        let mut attn = proto::KXR_ASYNRESP.to_be_bytes().to_vec();
        attn.extend_from_slice(&[0; 4]);
        attn.extend(frame(b, proto::KXR_OK, b"later"));
        wire.extend(frame(0, proto::KXR_ATTN, &attn));

        read_responses(&wire[..], shared.clone(), "test".into()).await;
        assert_eq!(
            rx_a.try_recv().unwrap(),
            Ok(Reply::Ok(b"hello you".to_vec()))
        );
        assert_eq!(rx_b.try_recv().unwrap(), Ok(Reply::Ok(b"later".to_vec())));
        assert_eq!(
            rx_c.try_recv().unwrap(),
            Ok(Reply::Error {
                code: 3011,
                message: "gone".into()
            })
        );
        assert!(matches!(
            rx_d.try_recv().unwrap(),
            Err(ConnError::Protocol(_))
        ));
        // the end of the stream closed the connection for later requests
        let (tx, _rx) = oneshot::channel();
        assert!(
            matches!(shared.register(tx, 1), Err(ConnError::Lost(m)) if m.contains("closed the connection"))
        );
    }

    #[tokio::test]
    async fn a_broken_stream_fails_every_waiting_request() {
        let shared = Arc::new(Shared::default());
        let (a, mut rx_a) = waiting(&shared, 1000);
        let mut wire = frame(a, proto::KXR_OK, &[7u8; 100]);
        wire.truncate(50); // cut in the middle of the body
        read_responses(&wire[..], shared.clone(), "test".into()).await;
        assert!(matches!(rx_a.try_recv().unwrap(), Err(ConnError::Lost(_))));

        // an error answer with an absurd length is not allocated
        let shared = Arc::new(Shared::default());
        let (a, mut rx_a) = waiting(&shared, 10);
        let mut wire = frame(a, proto::KXR_ERROR, b"");
        wire[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        read_responses(&wire[..], shared.clone(), "test".into()).await;
        assert!(
            matches!(rx_a.try_recv().unwrap(), Err(ConnError::Lost(m)) if m.contains("implausible"))
        );
    }

    #[tokio::test]
    async fn queued_requests_are_written_whole_and_in_order() {
        let (tx, rx) = mpsc::unbounded_channel();
        for id in 1..=3u16 {
            tx.send(proto::stat_request([0; 4]).encode(id)).unwrap();
        }
        drop(tx);
        let mut wire = Vec::new();
        write_requests(&mut wire, rx, Arc::new(Shared::default()), "test".into()).await;
        assert_eq!(wire.len(), 3 * proto::REQUEST_HEADER_LEN);
        assert_eq!(&wire[48..50], &[0, 3]);
    }

    #[test]
    fn stream_ids_skip_zero_and_ids_in_use() {
        let shared = Shared::default();
        shared.lock().next_id = u16::MAX - 1;
        let (first, _a) = waiting(&shared, 1);
        let (second, _b) = waiting(&shared, 1);
        assert_eq!((first, second), (u16::MAX, 1));
    }
}
