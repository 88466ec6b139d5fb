//! One TCP connection to an XRootD server, logged in, carrying many requests at once.
//!
//! Each request gets its own stream id. A writer task sends requests whole, in order (so a caller
//! that gives up halfway never leaves half a request on the wire), and a reader task reads
//! responses as they come and hands each to the request waiting for it (both in `streams.rs`). A
//! request that gets no answer in time closes the connection: its stream is in an unknown state, and every request
//! still waiting on it fails at once so it can be sent again elsewhere.

use super::auth::{known_protocols, remember_protocols, Security};
use super::keytab::Keytab;
use super::protocol::{self as proto, Request, ResponseHeader, RESPONSE_HEADER_LEN};
use super::reply::{ConnError, Reply, SMALL_BODY_MAX};
use super::sss;
use super::streams::{read_responses, watch_rate, write_requests, Heard, Shared};
use super::tls::{tls_failure, Negotiating, PlainAnswers};
use crate::source::min_rate::MinRate;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// Bytes buffered from the socket: many small answers are read with one system call.
const READ_BUFFER: usize = 256 * 1024;
/// Requests queued together are written with one system call, up to this many bytes.
const WRITE_BUFFER: usize = 64 * 1024;

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
    shared: Arc<Shared>,
    /// Encoded requests for the writer task.
    outgoing: mpsc::UnboundedSender<Vec<u8>>,
    writer: JoinHandle<()>,
    reader: JoinHandle<()>,
    watch: JoinHandle<()>,
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
        self.watch.abort();
    }
}

impl Connection {
    /// Connect to `address` (`host:port`), shake hands, log in and authenticate, all within
    /// `timeout`. Then the requests waiting on the connection fail (and close it) when it
    /// receives fewer than `min_rate × timeout` bytes over `timeout` (none: it is silent), see
    /// `source::min_rate`; a large answer arriving steadily, or a request queued behind others
    /// while the connection works, is not cut short.
    ///
    /// `early` requests (an open, for example) go out in the same write as the login, saving a
    /// round trip, or right behind the `kXR_auth` a server asks for; their answers are awaited
    /// with [`Connection::wait`]. A server seen for the first time that wants authentication
    /// closes the connection after refusing them: it is made again at once, knowing what the
    /// server wants (`sss` with a keytab the user named goes with the first login).
    pub async fn connect(
        address: &str,
        timeout: Duration,
        min_rate: u64,
        early: &[Request],
        security: &Security,
    ) -> Result<(Connection, Option<Vec<Waiting>>), ConnError> {
        let connecting = async {
            // A server that wanted authentication before the requests sent with the login closes
            // the connection: the second login knows what it wants (bounded, should it change).
            for _ in 0..3 {
                let logged_in =
                    Self::connect_and_login(address, timeout, min_rate, early, security).await?;
                if let Some(done) = logged_in {
                    return Ok(done);
                }
            }
            Err(ConnError::Protocol(format!(
                "{address} kept asking for authentication before requests"
            )))
        };
        match tokio::time::timeout(timeout, connecting).await {
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
        min_rate: u64,
        early: &[Request],
        security: &Security,
    ) -> Result<Option<(Connection, Option<Vec<Waiting>>)>, ConnError> {
        let lost =
            |e: std::io::Error| ConnError::Lost(format!("connection to {address} failed: {e}"));
        let mut tcp = TcpStream::connect(address).await.map_err(lost)?;
        tcp.set_nodelay(true).map_err(lost)?;

        // kXR_login, a ztn or sss kXR_auth when we hold what a server that may want it takes, and
        // the early requests go in one write. Servers known to want an authentication that cannot
        // go ahead get no early requests (they would be refused): they follow the kXR_auth.
        let known = known_protocols(address);
        let ztn = security.ztn_token_ahead(known.as_deref())?;
        let sss = match ztn {
            None => security.sss_keytab_ahead(known.as_deref()),
            Some(_) => None,
        };
        let local = tcp.local_addr().map_err(lost)?;
        // A server known to accept `unix` (when nothing above goes) gets it with the login too.
        let unix = ztn.is_none()
            && sss.is_none()
            && known
                .as_ref()
                .is_some_and(|offered| offered.iter().any(|p| p == "unix"));
        let sent_early = match &known {
            Some(offered) if !offered.is_empty() && ztn.is_none() && sss.is_none() && !unix => &[],
            _ => early,
        };
        let user = user_name();
        let shared = Arc::new(Shared::default());
        shared.lock().next_id = FIRST_EARLY_STREAM;
        let mut login = proto::login_request(std::process::id(), &user).encode(LOGIN_STREAM);
        if let Some(token) = &ztn {
            login.extend(proto::ztn_auth_request(token.expose()).encode(AUTH_AHEAD_STREAM));
        }
        if let Some(keytab) = &sss {
            let credential = sss::credential(keytab, true, local, unix_time());
            login.extend(proto::sss_auth_request(credential).encode(AUTH_AHEAD_STREAM));
        }
        if unix {
            login.extend(proto::unix_auth_request(&user, &user).encode(AUTH_AHEAD_STREAM));
        }
        let waiting = queue_early(&shared, sent_early, &mut login)?;
        let mut hello = proto::CLIENT_HANDSHAKE.to_vec();
        hello.extend(proto::protocol_request(security.tls.is_some()).encode(PROTOCOL_STREAM));
        let step = Login {
            address,
            user: &user,
            ahead: match (&ztn, sss) {
                (Some(_), _) => Ahead::Ztn,
                (None, Some(keytab)) => Ahead::Sss(keytab),
                (None, None) if unix => Ahead::Unix,
                (None, None) => Ahead::Nothing,
            },
            security,
            early,
            local,
        };
        match &security.tls {
            None => {
                // Handshake, kXR_protocol, the login and the early requests: one round trip.
                hello.extend(login);
                tcp.write_all(&hello).await.map_err(lost)?;
                let (head, body) = read_small_frame(&mut tcp, address).await?;
                if head.stream_id != 0 || head.status != proto::KXR_OK || body.len() != 8 {
                    return Err(ConnError::Protocol(format!(
                        "{address} is not an XRootD server (unexpected answer to the handshake)"
                    )));
                }
                let frame = read_small_frame(&mut tcp, address).await?;
                let body = expect_ok(frame, PROTOCOL_STREAM, "kXR_protocol", address)?;
                let (_version, flags) = proto::parse_protocol(&body).ok_or_else(|| {
                    ConnError::Protocol(format!("{address} sent a malformed kXR_protocol answer"))
                })?;
                if flags & (proto::KXR_GOTO_TLS | proto::KXR_TLS_LOGIN) != 0 {
                    return Err(ConnError::TlsRequired(format!(
                        "{address} requires TLS for logging in (roots://)"
                    )));
                }
                let Some(early_answers) = step.finish(&mut tcp, waiting, &shared).await? else {
                    return Ok(None);
                };
                let (read_half, write_half) = tcp.into_split();
                let conn =
                    Connection::start(address, timeout, min_rate, shared, read_half, write_half);
                Ok(Some((conn, Some(early_answers))))
            }
            Some((config, name)) => {
                // Handshake and kXR_protocol go with TLS's ClientHello (see `tls`); the login and
                // the early requests follow TLS's last message: TLS costs its own round trip.
                let answers = PlainAnswers::default();
                let negotiating = Negotiating::new(tcp, address, hello, answers.clone());
                let connector = tokio_rustls::TlsConnector::from(config.clone());
                let mut stream = connector
                    .connect(name.clone(), negotiating)
                    .await
                    .map_err(|e| tls_failure(address, e, &answers))?;
                stream.write_all(&login).await.map_err(lost)?;
                stream.flush().await.map_err(lost)?;
                let Some(early_answers) = step.finish(&mut stream, waiting, &shared).await? else {
                    return Ok(None);
                };
                let (read_half, write_half) = tokio::io::split(stream);
                let conn =
                    Connection::start(address, timeout, min_rate, shared, read_half, write_half);
                Ok(Some((conn, Some(early_answers))))
            }
        }
    }

    /// The connection's reader, writer and watch tasks on the two halves of a logged-in stream.
    fn start<R, W>(
        address: &str,
        timeout: Duration,
        min_rate: u64,
        shared: Arc<Shared>,
        read_half: R,
        write_half: W,
    ) -> Connection
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
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
        let watch = tokio::spawn(watch_rate(
            Arc::downgrade(&shared),
            MinRate::over_timeout(min_rate, timeout),
            address.to_string(),
        ));
        Connection {
            address: address.to_string(),
            shared,
            outgoing,
            writer,
            reader,
            watch,
        }
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
        self.watch.abort();
    }

    /// Send `request` and wait for its final answer, whose body may be at most `max_len` bytes.
    ///
    /// If the caller gives up waiting, the stream id stays reserved until the server answers it:
    /// a late answer is then dropped, never taken for the answer to a later request.
    pub async fn send(&self, request: &Request, max_len: usize) -> Result<Reply, ConnError> {
        let waiting = self.post(request, max_len)?;
        self.wait(waiting).await
    }

    /// Send `request` without waiting: its answer comes with [`Connection::wait`]. Dropping the
    /// `Waiting` instead is fine (see `send`).
    pub fn post(&self, request: &Request, max_len: usize) -> Result<Waiting, ConnError> {
        let (reply, answer) = oneshot::channel();
        let stream_id = self.shared.register(reply, max_len)?;
        if self.outgoing.send(request.encode(stream_id)).is_err() {
            let reason = format!("connection to {} closed", self.address);
            self.shared
                .finish(stream_id, Err(ConnError::Lost(reason.clone())));
            return Err(ConnError::Lost(reason));
        }
        Ok(Waiting { stream_id, answer })
    }

    /// The answer to a request already sent. The watch task (see `streams::watch_rate`) fails
    /// it when the connection is silent or too slow for the request timeout.
    pub async fn wait(&self, waiting: Waiting) -> Result<Reply, ConnError> {
        waiting.answer.await.unwrap_or_else(|_| {
            Err(ConnError::Lost(format!(
                "connection to {} closed",
                self.address
            )))
        })
    }
}

/// A request sent, its answer still to come.
pub struct Waiting {
    stream_id: u16,
    answer: oneshot::Receiver<Result<Reply, ConnError>>,
}

// Stream ids during login: early requests take the ids after these.
const PROTOCOL_STREAM: u16 = 1;
const LOGIN_STREAM: u16 = 2;
/// The `ztn` or `sss` `kXR_auth` sent with the login.
const AUTH_AHEAD_STREAM: u16 = 3;
/// The `kXR_auth` sent after the login's answer asked for it.
const AUTH_STREAM: u16 = 4;
const FIRST_EARLY_STREAM: u16 = 5;
/// Answers to early requests read (and dropped) before the authentication answer, at most.
const MAX_FRAMES_BEFORE_AUTH: usize = 16;

/// The authentication sent with the login, before the server said what it wants.
enum Ahead {
    Nothing,
    Ztn,
    Sss(Keytab),
    Unix,
}

/// The login sent (with a `kXR_auth` or not): what is left is reading its answers and
/// authenticating as the server asks.
struct Login<'a> {
    address: &'a str,
    user: &'a str,
    ahead: Ahead,
    security: &'a Security,
    /// The early requests, sent again behind a `kXR_auth` the login's answer asked for.
    early: &'a [Request],
    /// This end of the connection (`sss` binds its credential to it).
    local: std::net::SocketAddr,
}

impl Login<'_> {
    /// Read the login's answer and authenticate. The early requests' answers to wait for: those
    /// sent with the login, or, when the server wanted an authentication that had to wait for
    /// its answer, those sent right behind that `kXR_auth` (no round trip more than the
    /// authentication's own). `None` when requests went with the login to a server wanting
    /// authentication first: it closes the connection, which must be made again.
    async fn finish<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        stream: &mut S,
        waiting: Vec<Waiting>,
        shared: &Shared,
    ) -> Result<Option<Vec<Waiting>>, ConnError> {
        let address = self.address;
        let frame = read_small_frame(stream, address).await?;
        let body = expect_ok(frame, LOGIN_STREAM, "kXR_login", address)?;
        let offered = proto::parse_login(&body).ok_or_else(|| {
            ConnError::Protocol(format!("{address} sent a malformed kXR_login answer"))
        })?;
        remember_protocols(address, &offered);
        let protocol = match &self.ahead {
            Ahead::Nothing => None,
            Ahead::Ztn => Some("ztn"),
            Ahead::Sss(_) => Some("sss"),
            Ahead::Unix => Some("unix"),
        };
        if let Some(protocol) = protocol {
            // Its answer comes right after the login's; it only counts if the server asked.
            let (head, body) = read_small_frame(stream, address).await?;
            if head.stream_id != AUTH_AHEAD_STREAM {
                return Err(ConnError::Protocol(format!(
                    "{address} answered stream {} while kXR_auth (stream {AUTH_AHEAD_STREAM}) \
                     was expected",
                    head.stream_id
                )));
            }
            if offered.iter().any(|p| p == protocol) {
                return match head.status {
                    proto::KXR_OK => Ok(Some(waiting)),
                    proto::KXR_ERROR => {
                        let (_, message) = proto::parse_error(&body);
                        Err(match &self.ahead {
                            Ahead::Sss(keytab) => Security::sss_refused(address, keytab, &message),
                            Ahead::Unix => ConnError::Refused(format!(
                                "{address} refused kXR_auth (unix): {message}"
                            )),
                            _ => self.security.token_refused(address, &message),
                        })
                    }
                    other => Err(ConnError::Protocol(format!(
                        "{address} answered kXR_auth ({protocol}) with status {other}"
                    ))),
                };
            }
        }
        if offered.is_empty() {
            return Ok(Some(waiting));
        }
        let security_text = proto::text(&body[16..]);
        let (auth, keytab) = self.choose(&offered, &security_text)?;
        if !waiting.is_empty() {
            // XRootD answers the first request sent before authentication with an error and
            // closes the connection: log in again, now knowing what the server wants (a server
            // asking for nothing we can answer got its error above, without a second login).
            return Ok(None);
        }
        let mut out = auth.encode(AUTH_STREAM);
        for w in &waiting {
            shared.lock().pending.remove(&w.stream_id);
        }
        let again = queue_early(shared, self.early, &mut out)?;
        let lost =
            |e: std::io::Error| ConnError::Lost(format!("connection to {address} failed: {e}"));
        stream.write_all(&out).await.map_err(lost)?;
        stream.flush().await.map_err(lost)?;
        // The answers to the requests sent with the login (refusals: they came before
        // authentication) come first.
        let mut frame = read_small_frame(stream, address).await?;
        for _ in 0..MAX_FRAMES_BEFORE_AUTH {
            if frame.0.stream_id == AUTH_STREAM {
                break;
            }
            frame = read_small_frame(stream, address).await?;
        }
        match keytab {
            Some(keytab)
                if frame.0.status == proto::KXR_ERROR && frame.0.stream_id == AUTH_STREAM =>
            {
                let (_, message) = proto::parse_error(&frame.1);
                Err(Security::sss_refused(address, &keytab, &message))
            }
            Some(_) => {
                expect_ok(frame, AUTH_STREAM, "kXR_auth (sss)", address).map(|_| Some(again))
            }
            None => expect_ok(frame, AUTH_STREAM, "kXR_auth (unix)", address).map(|_| Some(again)),
        }
    }

    /// The `kXR_auth` answering the server's list, in its order of preference: `sss` when a
    /// keytab is found, else `unix`.
    fn choose(
        &self,
        offered: &[String],
        security_text: &str,
    ) -> Result<(Request, Option<Keytab>), ConnError> {
        let address = self.address;
        for protocol in offered {
            match protocol.as_str() {
                "sss" => {
                    let refused = |why: String| {
                        ConnError::Refused(format!(
                            "{address} asks for sss, which cannot be used: {why}"
                        ))
                    };
                    let Some(parameters) = sss::parameters(security_text).map_err(refused)? else {
                        continue;
                    };
                    let found = self
                        .security
                        .sss_keytab(parameters.keytab_hint.as_deref())
                        .map_err(refused)?;
                    if let Some(keytab) = found {
                        let credential =
                            sss::credential(&keytab, parameters.v2, self.local, unix_time());
                        return Ok((proto::sss_auth_request(credential), Some(keytab)));
                    }
                }
                "unix" => return Ok((proto::unix_auth_request(self.user, self.user), None)),
                _ => {}
            }
        }
        if offered.iter().any(|p| p == "sss") && !offered.iter().any(|p| p == "ztn") {
            return Err(Security::no_sss_keytab(address, offered));
        }
        Err(self.security.cannot_authenticate(address, offered))
    }
}

/// Register `early` requests on `shared` and append them to `out`: their answers to wait for.
fn queue_early(
    shared: &Shared,
    early: &[Request],
    out: &mut Vec<u8>,
) -> Result<Vec<Waiting>, ConnError> {
    let mut waiting = Vec::with_capacity(early.len());
    for request in early {
        let (reply, answer) = oneshot::channel();
        let stream_id = shared.register(reply, SMALL_BODY_MAX)?;
        out.extend(request.encode(stream_id));
        waiting.push(Waiting { stream_id, answer });
    }
    Ok(waiting)
}

fn unix_time() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// One whole response during login, before the reader task runs.
async fn read_small_frame<S: AsyncRead + Unpin>(
    stream: &mut S,
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
            if code == proto::KXR_TLS_REQUIRED {
                return Err(ConnError::TlsRequired(format!(
                    "{address} requires TLS for {what}: {message} (roots://)"
                )));
            }
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
