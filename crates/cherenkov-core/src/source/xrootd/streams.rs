//! The three tasks behind a connection and the table between them: requests in flight by stream
//! id.
//!
//! The writer task sends encoded requests whole, several per system call when they queue up. The
//! reader task reads responses as they come and hands each to the request waiting for it:
//! `kXR_oksofar` bodies are gathered until the final answer, a `kXR_waitresp` answer is picked out
//! of the later `kXR_attn`, and late answers to requests that gave up are read and dropped. The
//! watch task fails every request waiting on a connection that is silent, or slower than the
//! slowest transfer accepted, for a window (see `source::min_rate`): they are sent again on a new
//! connection. The connection is watched, not each request: it answers its requests one after
//! another, so one queued behind others receives nothing while the connection works.

use super::protocol::{self as proto, ResponseHeader, RESPONSE_HEADER_LEN};
use super::reply::{ConnError, Reply, SMALL_BODY_MAX};
use crate::source::min_rate::{self, MinRate, Progress, RateWindow};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Requests waiting for an answer, by stream id.
#[derive(Default)]
pub(super) struct Shared {
    state: Mutex<State>,
    /// Bytes received on the connection (counted as they arrive, without the lock).
    received: Progress,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) pending: HashMap<u16, Pending>,
    pub(super) next_id: u16,
    /// Why the connection closed, once it has.
    pub(super) closed: Option<String>,
    /// Since when requests wait on the connection without a pause, and the bytes received by
    /// then: where the watch's window starts.
    busy_since: Option<(Instant, u64)>,
}

pub(super) struct Pending {
    reply: oneshot::Sender<Result<Reply, ConnError>>,
    /// `kXR_oksofar` bodies so far.
    body: Vec<u8>,
    /// Most body bytes this request may receive: what it asked for.
    max_len: usize,
}

/// Where the reader puts the next data body.
pub(super) enum Destination {
    /// Append to this request's body (taken out of the map while reading).
    Body(Vec<u8>),
    /// Nobody waits for it (a late answer to a failed request): read and drop.
    Discard,
}

impl Shared {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves plain data behind; keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn register(
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
        if state.pending.is_empty() {
            state.busy_since = Some((Instant::now(), self.received.get()));
        }
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

    pub(super) fn close(&self, reason: &str) {
        self.fail(ConnError::Lost(reason.to_string()));
    }

    /// Close the connection: every request waiting on it fails with `error`.
    pub(super) fn fail(&self, error: ConnError) {
        let mut state = self.lock();
        if state.closed.is_none() {
            state.closed = Some(error.to_string());
        }
        state.busy_since = None;
        for (_, p) in state.pending.drain() {
            let _ = p.reply.send(Err(error.clone()));
        }
    }

    pub(super) fn finish(&self, stream_id: u16, result: Result<Reply, ConnError>) {
        let mut state = self.lock();
        if let Some(p) = state.pending.remove(&stream_id) {
            let _ = p.reply.send(result);
        }
        if state.pending.is_empty() {
            state.busy_since = None;
        }
    }

    /// The body buffer for `len` more data bytes to `stream_id`, if that fits what was asked.
    pub(super) fn take_body(&self, stream_id: u16, len: usize) -> Destination {
        let mut state = self.lock();
        let Some(p) = state.pending.get_mut(&stream_id) else {
            return Destination::Discard;
        };
        if p.body.len().saturating_add(len) > p.max_len {
            let max_len = p.max_len;
            drop(state);
            self.finish(
                stream_id,
                Err(ConnError::Protocol(format!(
                    "the server sent more than the {max_len} bytes the request asked for"
                ))),
            );
            return Destination::Discard;
        }
        if p.body.capacity() == 0 && len > 0 {
            // What the request asked for bounds the answer: one allocation instead of regrowing.
            p.body.reserve_exact(p.max_len);
        }
        Destination::Body(std::mem::take(&mut p.body))
    }

    pub(super) fn put_body(&self, stream_id: u16, body: Vec<u8>, last: bool) {
        if last {
            self.finish(stream_id, Ok(Reply::Ok(body)));
        } else if let Some(p) = self.lock().pending.get_mut(&stream_id) {
            p.body = body;
        }
    }
}

/// The socket's read side, counting the bytes that arrive: the watch's measure of the
/// connection's rate, a large answer still incomplete included.
pub(super) struct Heard<R> {
    pub(super) inner: R,
    pub(super) shared: Arc<Shared>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Heard<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        let got = buf.filled().len() - before;
        if got > 0 {
            self.shared.received.add(got as u64);
        }
        polled
    }
}

/// The writer task: send queued requests whole, several per system call when they queue up.
pub(super) async fn write_requests<W: AsyncWrite + Unpin>(
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

/// The watch task: while requests wait on the connection, it must keep `rule` (see
/// `source::min_rate`); silent or too slow for a window, every request waiting fails with a
/// timeout (and is sent again on a new connection) and the connection closes. Ends with it.
pub(super) async fn watch_rate(shared: Weak<Shared>, rule: MinRate, address: String) {
    let mut ticks = tokio::time::interval(min_rate::sampling(rule));
    // The window of the busy stretch that began at the instant it is keyed by.
    let mut window: Option<(Instant, RateWindow)> = None;
    loop {
        let now = ticks.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let busy_since = {
            let state = shared.lock();
            if state.closed.is_some() {
                return;
            }
            state.busy_since
        };
        let Some((since, received_then)) = busy_since else {
            window = None;
            continue;
        };
        if window.as_ref().is_none_or(|(started, _)| *started != since) {
            window = Some((since, RateWindow::new(rule, since, received_then)));
        }
        let Some((_, current)) = window.as_mut() else {
            continue;
        };
        if let Some(slow) = current.sample(now, shared.received.get()) {
            shared.fail(ConnError::Timeout(format!("{address}: {slow}")));
            return;
        }
    }
}

/// The reader task: hand out responses until the connection fails, then fail everything waiting.
pub(super) async fn read_responses<R: AsyncRead + Unpin>(
    mut reader: R,
    shared: Arc<Shared>,
    address: String,
) {
    let reason = loop {
        if let Err(reason) = read_response(&mut reader, &shared).await {
            break reason;
        }
    };
    shared.close(&format!("connection to {address} lost: {reason}"));
}

pub(super) async fn read_response<R: AsyncRead + Unpin>(
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
pub(super) async fn read_attention<R: AsyncRead + Unpin>(
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

pub(super) async fn dispatch<R: AsyncRead + Unpin>(
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

pub(super) async fn discard<R: AsyncRead + Unpin>(reader: &mut R, len: u64) -> Result<(), String> {
    let copied = tokio::io::copy(&mut reader.take(len), &mut tokio::io::sink())
        .await
        .map_err(|e| e.to_string())?;
    if copied < len {
        return Err("the server closed the connection".to_string());
    }
    Ok(())
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
