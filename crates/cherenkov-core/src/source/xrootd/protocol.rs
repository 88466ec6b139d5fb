//! The XRootD wire format (XProtocol.hh, protocol 5): request codes, response statuses, and plain
//! functions that encode requests and decode response bodies. Everything is big-endian. No I/O here,
//! and no decoder trusts a length read off the wire: each checks it against the bytes it was given
//! or the ranges that were asked for.

use crate::error::IoKind;
use crate::source::{join, ByteRange};
use bytes::Bytes;

/// Every request starts with a 24-byte header: stream id, request code, 16 parameter bytes, body
/// length.
pub const REQUEST_HEADER_LEN: usize = 24;
/// Every response starts with an 8-byte header: stream id, status, body length.
pub const RESPONSE_HEADER_LEN: usize = 8;

/// The client's first 20 bytes: zeros, then 4 and 2012 ("ROOTD_PQ"), which the server answers with
/// its protocol version.
pub const CLIENT_HANDSHAKE: [u8; 20] = [
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0x07, 0xdc,
];
/// The protocol version this client speaks (5.2.0): readv, retstat, asynchronous responses.
pub const CLIENT_PROTOCOL_VERSION: u32 = 0x0000_0520;

// Request codes.
pub const KXR_AUTH: u16 = 3000;
pub const KXR_QUERY: u16 = 3001;
pub const KXR_CLOSE: u16 = 3003;
pub const KXR_DIRLIST: u16 = 3004;
pub const KXR_PROTOCOL: u16 = 3006;
pub const KXR_LOGIN: u16 = 3007;
pub const KXR_OPEN: u16 = 3010;
pub const KXR_READ: u16 = 3013;
pub const KXR_STAT: u16 = 3017;
pub const KXR_READV: u16 = 3025;
pub const KXR_LOCATE: u16 = 3027;

// Response statuses.
pub const KXR_OK: u16 = 0;
pub const KXR_OKSOFAR: u16 = 4000;
pub const KXR_ATTN: u16 = 4001;
pub const KXR_AUTHMORE: u16 = 4002;
pub const KXR_ERROR: u16 = 4003;
pub const KXR_REDIRECT: u16 = 4004;
pub const KXR_WAIT: u16 = 4005;
pub const KXR_WAITRESP: u16 = 4006;

/// `kXR_attn` action: the body carries the delayed response to an earlier request.
pub const KXR_ASYNRESP: u32 = 5008;

// kXR_open options.
const KXR_OPEN_READ: u16 = 0x0010;
const KXR_RETSTAT: u16 = 0x0400;
/// `kXR_dirlist` option: each entry's stat information follows its name.
pub const KXR_DSTAT: u8 = 0x02;
// kXR_protocol: "the next request is a login".
const KXR_EXP_LOGIN: u8 = 0x03;
// kXR_protocol request flags: the client can do TLS, and wants it now.
const KXR_ABLE_TLS: u8 = 0x02;
const KXR_WANT_TLS: u8 = 0x04;
// kXR_protocol response flags: the server insists on TLS.
pub const KXR_GOTO_TLS: u32 = 0x4000_0000;
pub const KXR_TLS_LOGIN: u32 = 0x0400_0000;
// kXR_login capabilities: asynchronous responses, 2019 (TLS-era) client.
const KXR_ASYNCAP: u8 = 0x80;
const KXR_VER005: u8 = 0x05;
// kXR_login ability: the client accepts redirects for reads.
const KXR_READRDOK: u8 = 0x04;
const KXR_QCONFIG: u16 = 7;
/// `kXR_query` infotype: the checksum of a file, by path.
const KXR_QCKSUM: u16 = 3;

/// Size of one `kXR_readv` list element and of each element header in its response.
pub const READV_ELEMENT_LEN: usize = 16;
/// Readv limits a server reports when asked nothing (XRootD 4 and 5 defaults).
pub const DEFAULT_READV_IOV_MAX: usize = 1024;
pub const DEFAULT_READV_IOR_MAX: u64 = 2_097_136;
/// The server refuses a readv whose list plus payload exceeds 2^31 - 1 bytes.
pub const READV_TOTAL_MAX: u64 = 0x7fff_ffff;

/// A file handle returned by `kXR_open`.
pub type FileHandle = [u8; 4];

/// One request without its stream id, which the connection assigns when sending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub code: u16,
    pub params: [u8; 16],
    pub body: Vec<u8>,
}

impl Request {
    fn new(code: u16, params: [u8; 16], body: Vec<u8>) -> Self {
        Self { code, params, body }
    }

    /// The bytes on the wire for stream id `stream_id`.
    pub fn encode(&self, stream_id: u16) -> Vec<u8> {
        let mut out = Vec::with_capacity(REQUEST_HEADER_LEN + self.body.len());
        out.extend_from_slice(&stream_id.to_be_bytes());
        out.extend_from_slice(&self.code.to_be_bytes());
        out.extend_from_slice(&self.params);
        out.extend_from_slice(&(self.body.len() as u32).to_be_bytes());
        out.extend_from_slice(&self.body);
        out
    }
}

/// Writes big-endian fields into the 16 parameter bytes of a request header.
struct Params {
    bytes: [u8; 16],
    at: usize,
}

impl Params {
    fn new() -> Self {
        Self {
            bytes: [0; 16],
            at: 0,
        }
    }
    fn put(mut self, field: &[u8]) -> Self {
        self.bytes[self.at..self.at + field.len()].copy_from_slice(field);
        self.at += field.len();
        self
    }
    fn skip(mut self, n: usize) -> Self {
        self.at += n;
        self
    }
    fn done(self) -> [u8; 16] {
        self.bytes
    }
}

/// `kXR_protocol`, a login following: with `tls`, the client can and wants to switch to TLS
/// (`roots://`); without, it does not offer TLS (its login is already on the wire behind).
pub fn protocol_request(tls: bool) -> Request {
    let flags = if tls { KXR_ABLE_TLS | KXR_WANT_TLS } else { 0 };
    let params = Params::new()
        .put(&CLIENT_PROTOCOL_VERSION.to_be_bytes())
        .put(&[flags, KXR_EXP_LOGIN])
        .done();
    Request::new(KXR_PROTOCOL, params, Vec::new())
}

/// `kXR_login` as `user` (at most 8 bytes are sent) from process `pid`.
pub fn login_request(pid: u32, user: &str) -> Request {
    let mut name = [0u8; 8];
    for (dst, src) in name
        .iter_mut()
        .zip(user.bytes().filter(|b| b.is_ascii_graphic()))
    {
        *dst = src;
    }
    let params = Params::new()
        .put(&pid.to_be_bytes())
        .put(&name)
        .put(&[0, KXR_READRDOK, KXR_ASYNCAP | KXR_VER005, 0])
        .done();
    Request::new(KXR_LOGIN, params, Vec::new())
}

/// `kXR_auth` with the `unix` protocol: the server trusts the user and group names it is told.
pub fn unix_auth_request(user: &str, group: &str) -> Request {
    let mut creds = b"unix\0".to_vec();
    creds.extend_from_slice(user.as_bytes());
    creds.push(b' ');
    creds.extend_from_slice(group.as_bytes());
    creds.push(0);
    let params = Params::new().skip(12).put(b"unix").done();
    Request::new(KXR_AUTH, params, creds)
}

/// `kXR_auth` with the `ztn` protocol (XrdSecztn): a bearer token, allowed over TLS only. The
/// credential is "ztn\0", version 0, 'T' (a token follows), two reserved bytes, the token's length
/// with its closing zero (16 bits), the token and a zero.
pub fn ztn_auth_request(token: &str) -> Request {
    let mut creds = b"ztn\0".to_vec();
    creds.extend_from_slice(&[0, b'T', 0, 0]);
    creds.extend_from_slice(&((token.len() + 1) as u16).to_be_bytes());
    creds.extend_from_slice(token.as_bytes());
    creds.push(0);
    let params = Params::new().skip(12).put(b"ztn\0").done();
    Request::new(KXR_AUTH, params, creds)
}

/// `kXR_auth` with the `sss` protocol: the credential `sss::credential` made (it starts with
/// "sss\0" itself).
pub fn sss_auth_request(credential: Vec<u8>) -> Request {
    let params = Params::new().skip(12).put(b"sss\0").done();
    Request::new(KXR_AUTH, params, credential)
}

/// `kXR_open` read-only, asking for the file's stat information in the same answer.
pub fn open_request(path: &str) -> Request {
    let params = Params::new()
        .put(&0u16.to_be_bytes())
        .put(&(KXR_OPEN_READ | KXR_RETSTAT).to_be_bytes())
        .done();
    Request::new(KXR_OPEN, params, path.as_bytes().to_vec())
}

/// `kXR_locate`: which servers hold `path` (a redirector answers for its data servers).
pub fn locate_request(path: &str) -> Request {
    Request::new(KXR_LOCATE, Params::new().done(), path.as_bytes().to_vec())
}

/// `kXR_dirlist` of the directory `path`, each entry with its stat information.
pub fn dirlist_request(path: &str) -> Request {
    let params = Params::new().skip(15).put(&[KXR_DSTAT]).done();
    Request::new(KXR_DIRLIST, params, path.as_bytes().to_vec())
}

/// Most locations taken from one `kXR_locate` answer.
pub const MAX_LOCATIONS: usize = 64;

/// The data servers (`host:port`) of a `kXR_locate` answer: space-separated entries such as
/// `Sr[::127.0.0.1]:1094`, a node type (`S` server, `s` server still checking; `M`/`m` managers,
/// left out: they would redirect again) and an access mode (`r`, `w`) before the address.
/// IPv4 addresses that come as `[::a.b.c.d]` or `[::ffff:a.b.c.d]` lose their IPv6 dress.
pub fn parse_locate(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    text.split(|c: char| c.is_ascii_whitespace() || c == '\0')
        .filter_map(|entry| {
            let mut chars = entry.chars();
            let (kind, access) = (chars.next()?, chars.next()?);
            let address = chars.as_str();
            let plausible = matches!(kind, 'S' | 's')
                && matches!(access, 'r' | 'w')
                && address.rsplit_once(':').is_some_and(|(host, port)| {
                    !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
                });
            plausible.then(|| {
                let (host, port) = address.rsplit_once(':').unwrap_or_default();
                let host = host
                    .strip_prefix("[::ffff:")
                    .or_else(|| host.strip_prefix("[::"))
                    .and_then(|h| h.strip_suffix(']'))
                    .filter(|h| h.parse::<std::net::Ipv4Addr>().is_ok())
                    .unwrap_or(host);
                format!("{host}:{port}")
            })
        })
        .take(MAX_LOCATIONS)
        .collect()
}

/// `kXR_stat` of an open file.
pub fn stat_request(handle: FileHandle) -> Request {
    let params = Params::new().skip(12).put(&handle).done();
    Request::new(KXR_STAT, params, Vec::new())
}

/// `kXR_read` of one range.
pub fn read_request(handle: FileHandle, range: ByteRange) -> Request {
    let params = Params::new()
        .put(&handle)
        .put(&range.offset.to_be_bytes())
        .put(&(range.len as u32).to_be_bytes())
        .done();
    Request::new(KXR_READ, params, Vec::new())
}

/// `kXR_readv` of many ranges of one file; the caller keeps each within the server's limits.
pub fn readv_request(handle: FileHandle, ranges: &[ByteRange]) -> Request {
    let mut body = Vec::with_capacity(ranges.len() * READV_ELEMENT_LEN);
    for r in ranges {
        body.extend_from_slice(&handle);
        body.extend_from_slice(&(r.len as u32).to_be_bytes());
        body.extend_from_slice(&r.offset.to_be_bytes());
    }
    Request::new(KXR_READV, [0; 16], body)
}

/// `kXR_close` of an open file.
pub fn close_request(handle: FileHandle) -> Request {
    let params = Params::new().put(&handle).done();
    Request::new(KXR_CLOSE, params, Vec::new())
}

/// `kXR_query` config for the named settings (answered one value per line, in order).
pub fn query_config_request(keys: &[&str]) -> Request {
    let params = Params::new().put(&KXR_QCONFIG.to_be_bytes()).done();
    Request::new(KXR_QUERY, params, keys.join(" ").into_bytes())
}

/// `kXR_query` of the checksum the server keeps (or computes) for the file at `path`.
pub fn query_checksum_request(path: &str) -> Request {
    let params = Params::new().put(&KXR_QCKSUM.to_be_bytes()).done();
    Request::new(KXR_QUERY, params, path.as_bytes().to_vec())
}

/// A checksum answer, `<algorithm> <value>` (`adler32 0a1b2c3d`): trimmed of the trailing NUL.
pub fn parse_checksum(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let text = text.trim_end_matches('\0').trim();
    let (algorithm, value) = text.split_once(' ')?;
    let plain = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
    (plain(algorithm) && plain(value.trim())).then(|| format!("{algorithm} {}", value.trim()))
}

/// The header of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHeader {
    pub stream_id: u16,
    pub status: u16,
    pub dlen: u32,
}

impl ResponseHeader {
    pub fn decode(b: &[u8; RESPONSE_HEADER_LEN]) -> Self {
        Self {
            stream_id: u16::from_be_bytes([b[0], b[1]]),
            status: u16::from_be_bytes([b[2], b[3]]),
            dlen: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        }
    }
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Text sent by the server: up to the first NUL, invalid UTF-8 replaced.
pub fn text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).trim().to_string()
}

/// A `kXR_error` body: error code and message.
pub fn parse_error(body: &[u8]) -> (u32, String) {
    (
        be_u32(body, 0).unwrap_or(0),
        text(body.get(4..).unwrap_or(&[])),
    )
}

/// `kXR_TLSRequired`: the server wants TLS before this request.
pub const KXR_TLS_REQUIRED: u32 = 3028;

/// The name of an XRootD error code, for messages.
pub fn error_name(code: u32) -> &'static str {
    const NAMES: [&str; 36] = [
        "kXR_ArgInvalid",
        "kXR_ArgMissing",
        "kXR_ArgTooLong",
        "kXR_FileLocked",
        "kXR_FileNotOpen",
        "kXR_FSError",
        "kXR_InvalidRequest",
        "kXR_IOError",
        "kXR_NoMemory",
        "kXR_NoSpace",
        "kXR_NotAuthorized",
        "kXR_NotFound",
        "kXR_ServerError",
        "kXR_Unsupported",
        "kXR_noserver",
        "kXR_NotFile",
        "kXR_isDirectory",
        "kXR_Cancelled",
        "kXR_ItExists",
        "kXR_ChkSumErr",
        "kXR_inProgress",
        "kXR_overQuota",
        "kXR_SigVerErr",
        "kXR_DecryptErr",
        "kXR_Overloaded",
        "kXR_fsReadOnly",
        "kXR_BadPayload",
        "kXR_AttrNotFound",
        "kXR_TLSRequired",
        "kXR_noReplicas",
        "kXR_AuthFailed",
        "kXR_Impossible",
        "kXR_Conflict",
        "kXR_TooManyErrs",
        "kXR_ReqTimedOut",
        "kXR_TimerExpired",
    ];
    code.checked_sub(3000)
        .and_then(|i| NAMES.get(i as usize))
        .copied()
        .unwrap_or("unknown error")
}

/// What callers may handle apart in an XRootD error code (see `IoKind`).
pub fn error_kind(code: u32) -> IoKind {
    match code {
        3011 => IoKind::NotFound,         // kXR_NotFound
        3010 | 3030 => IoKind::Forbidden, // kXR_NotAuthorized, kXR_AuthFailed
        3034 | 3035 => IoKind::TimedOut,  // kXR_ReqTimedOut, kXR_TimerExpired
        _ => IoKind::Other,
    }
}

/// A `kXR_wait` body: seconds to wait before sending the request again, and why.
pub fn parse_wait(body: &[u8]) -> (u32, String) {
    (
        be_u32(body, 0).unwrap_or(1),
        text(body.get(4..).unwrap_or(&[])),
    )
}

/// Where a `kXR_redirect` sends the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// `host`, `host:port`-less; or a whole `root://` URL when the server sent one.
    pub host: String,
    pub port: i32,
    /// CGI (`a=b&c=d`) to append to the path when opening there.
    pub opaque: Option<String>,
}

/// A `kXR_redirect` body: port, then `host[?opaque]` (or a URL; then the port is -1).
pub fn parse_redirect(body: &[u8]) -> Option<Redirect> {
    let port = be_u32(body, 0)? as i32;
    let target = text(&body[4..]);
    let (host, opaque) = match target.split_once('?') {
        Some((h, o)) => (h.to_string(), Some(o.to_string()).filter(|o| !o.is_empty())),
        None => (target, None),
    };
    if host.is_empty() {
        return None;
    }
    Some(Redirect { host, port, opaque })
}

/// The `kXR_login` answer: a session id, then the authentication protocols the server wants
/// (`&P=unix&P=gsi,v:...`), none if it asks for none.
pub fn parse_login(body: &[u8]) -> Option<Vec<String>> {
    if body.len() < 16 {
        return None;
    }
    let security = text(&body[16..]);
    Some(
        security
            .split("&P=")
            .skip(1)
            .map(|p| p.split([',', '&']).next().unwrap_or("").to_string())
            .filter(|p| !p.is_empty())
            .collect(),
    )
}

/// The `kXR_protocol` answer: server protocol version and flags.
pub fn parse_protocol(body: &[u8]) -> Option<(u32, u32)> {
    Some((be_u32(body, 0)?, be_u32(body, 4)?))
}

/// The `kXR_open` answer: the file handle, and the size when stat information came with it.
pub fn parse_open(body: &[u8]) -> Option<(FileHandle, Option<u64>)> {
    let handle: FileHandle = body.get(0..4)?.try_into().ok()?;
    let size = body.get(12..).and_then(parse_stat);
    Some((handle, size))
}

/// A stat answer, `"<id> <size> <flags> <mtime>"`: the size.
pub fn parse_stat(body: &[u8]) -> Option<u64> {
    text(body).split_whitespace().nth(1)?.parse().ok()
}

/// A stat answer's modification time (seconds since the epoch).
pub fn parse_stat_mtime(body: &[u8]) -> Option<u64> {
    text(body).split_whitespace().nth(3)?.parse().ok()
}

/// A `kXR_query` config answer: one line per key asked; a line equal to the key means "unknown".
pub fn parse_query_config(body: &[u8], keys: &[&str]) -> Vec<Option<u64>> {
    let text = text(body);
    let mut lines = text.lines();
    keys.iter()
        .map(|key| {
            let line = lines.next()?.trim();
            if line == *key {
                return None;
            }
            line.parse().ok()
        })
        .collect()
}

/// The answer of a `kXR_attn`/`kXR_asynresp`: the header of the delayed response that follows.
/// `prefix` holds the first 16 body bytes: action, 4 reserved bytes, then that header.
pub fn parse_asynresp_prefix(prefix: &[u8; 16]) -> Option<ResponseHeader> {
    if be_u32(prefix, 0)? != KXR_ASYNRESP {
        return None;
    }
    let inner: [u8; RESPONSE_HEADER_LEN] = prefix[8..16].try_into().ok()?;
    Some(ResponseHeader::decode(&inner))
}

/// Largest answer a readv of `ranges` may have: an element header and the data for each range.
pub fn readv_response_len(ranges: &[ByteRange]) -> u64 {
    ranges
        .iter()
        .map(|r| r.len + READV_ELEMENT_LEN as u64)
        .sum()
}

/// Split a `kXR_readv` answer into one buffer per asked range, checking every element header: the
/// file handle, and that offsets and lengths follow the request in order. (A server may cut an
/// element into consecutive pieces; they are joined.)
pub fn parse_readv(
    body: Bytes,
    handle: FileHandle,
    ranges: &[ByteRange],
) -> Result<Vec<Bytes>, String> {
    let mut out = Vec::with_capacity(ranges.len());
    let mut at = 0usize;
    for (i, want) in ranges.iter().enumerate() {
        let mut pieces: Vec<Bytes> = Vec::new();
        let mut filled = 0u64;
        while filled < want.len {
            let head = body.get(at..at + READV_ELEMENT_LEN).ok_or_else(|| {
                format!(
                    "readv answer ends after {at} bytes, before element {i} ({}..{}) is complete",
                    want.offset,
                    want.end()
                )
            })?;
            let (len, offset) = (
                be_u32(head, 4).unwrap_or(0) as u64,
                be_u64(head, 8).unwrap_or(0),
            );
            let expected = want.offset + filled;
            if head[0..4] != handle || offset != expected || len == 0 || len > want.len - filled {
                return Err(format!(
                    "readv answer element {i} is {len} bytes at offset {offset}, but {} bytes at offset {expected} were asked",
                    want.len - filled
                ));
            }
            let start = at + READV_ELEMENT_LEN;
            let end = start + len as usize;
            if end > body.len() {
                return Err(format!(
                    "readv answer element {i} claims {len} bytes but only {} remain",
                    body.len() - start
                ));
            }
            pieces.push(body.slice(start..end));
            filled += len;
            at = end;
        }
        out.push(join(pieces));
    }
    if at != body.len() {
        return Err(format!(
            "readv answer has {} unexpected bytes at its end",
            body.len() - at
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_answers_give_data_servers_only() {
        let body = b"Sr[::127.0.0.1]:31101 Sw[::ffff:10.0.0.2]:1094 Mr[::127.0.0.1]:1213 sr[2001:db8::1]:1095 Srnoport Sx1.2.3.4:5 Sr:7\0";
        assert_eq!(
            parse_locate(body),
            ["127.0.0.1:31101", "10.0.0.2:1094", "[2001:db8::1]:1095"]
        );
        assert!(parse_locate(&[0xff; 300]).is_empty());
        let many = "Srh:1 ".repeat(1000);
        assert_eq!(parse_locate(many.as_bytes()).len(), MAX_LOCATIONS);
    }

    fn element(handle: FileHandle, offset: u64, data: &[u8]) -> Vec<u8> {
        let mut v = handle.to_vec();
        v.extend_from_slice(&(data.len() as u32).to_be_bytes());
        v.extend_from_slice(&offset.to_be_bytes());
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn requests_have_the_documented_layout() {
        let r = read_request([1, 2, 3, 4], ByteRange::new(0x0102_0304_0506, 4096)).encode(0x0a0b);
        assert_eq!(r.len(), 24);
        assert_eq!(&r[0..2], &[0x0a, 0x0b]);
        assert_eq!(u16::from_be_bytes([r[2], r[3]]), KXR_READ);
        assert_eq!(&r[4..8], &[1, 2, 3, 4]);
        assert_eq!(&r[8..16], &0x0102_0304_0506u64.to_be_bytes());
        assert_eq!(&r[16..20], &4096u32.to_be_bytes());
        assert_eq!(&r[20..24], &[0, 0, 0, 0]);

        let open = open_request("/a/b.root").encode(1);
        assert_eq!(u16::from_be_bytes([open[6], open[7]]), 0x0410);
        assert_eq!(
            u32::from_be_bytes([open[20], open[21], open[22], open[23]]),
            9
        );
        assert_eq!(&open[24..], b"/a/b.root");

        let login = login_request(77, "averylongname").encode(2);
        assert_eq!(&login[4..8], &77u32.to_be_bytes());
        assert_eq!(&login[8..16], b"averylon");
        assert_eq!(login[18], 0x85);

        let proto = protocol_request(false).encode(1);
        assert_eq!(&proto[4..8], &CLIENT_PROTOCOL_VERSION.to_be_bytes());
        assert_eq!((proto[8], proto[9]), (0, 3));
        let tls = protocol_request(true).encode(1);
        assert_eq!((tls[8], tls[9]), (KXR_ABLE_TLS | KXR_WANT_TLS, 3));

        let ztn = ztn_auth_request("abc").encode(3);
        assert_eq!(&ztn[16..20], b"ztn\0");
        assert_eq!(&ztn[24..], b"ztn\0\0T\0\0\0\x04abc\0");

        let auth = unix_auth_request("me", "us").encode(3);
        assert_eq!(&auth[16..20], b"unix");
        assert_eq!(&auth[24..], b"unix\0me us\0");
    }

    #[test]
    fn readv_request_lists_every_range() {
        let ranges = [ByteRange::new(10, 5), ByteRange::new(1 << 40, 7)];
        let req = readv_request([9, 9, 9, 9], &ranges).encode(5);
        assert_eq!(req.len(), 24 + 32);
        assert_eq!(u32::from_be_bytes([req[20], req[21], req[22], req[23]]), 32);
        assert_eq!(&req[24..28], &[9, 9, 9, 9]);
        assert_eq!(&req[28..32], &5u32.to_be_bytes());
        assert_eq!(&req[32..40], &10u64.to_be_bytes());
        assert_eq!(&req[48..56], &(1u64 << 40).to_be_bytes());
        assert_eq!(readv_response_len(&ranges), 12 + 32);
    }

    #[test]
    fn readv_answer_is_checked_and_split() {
        let h = [1, 0, 0, 0];
        let ranges = [ByteRange::new(100, 3), ByteRange::new(0, 4)];
        let mut body = element(h, 100, b"abc");
        body.extend(element(h, 0, b"wx"));
        body.extend(element(h, 2, b"yz")); // the second range cut in two pieces
        let out = parse_readv(Bytes::from(body.clone()), h, &ranges).unwrap();
        assert_eq!(&out[0][..], b"abc");
        assert_eq!(&out[1][..], b"wxyz");

        // wrong offset, wrong handle, too long, cut short, trailing garbage
        let bad_offset = [element(h, 101, b"abc"), element(h, 0, b"wxyz")].concat();
        assert!(parse_readv(Bytes::from(bad_offset), h, &ranges)
            .unwrap_err()
            .contains("offset 100"));
        let bad_handle = [element([2, 0, 0, 0], 100, b"abc"), element(h, 0, b"wxyz")].concat();
        assert!(parse_readv(Bytes::from(bad_handle), h, &ranges).is_err());
        let too_long = [element(h, 100, b"abcd"), element(h, 0, b"wxy")].concat();
        assert!(parse_readv(Bytes::from(too_long), h, &ranges).is_err());
        assert!(parse_readv(Bytes::from(body[..body.len() - 1].to_vec()), h, &ranges).is_err());
        let mut trailing = body.clone();
        trailing.push(0);
        assert!(parse_readv(Bytes::from(trailing), h, &ranges)
            .unwrap_err()
            .contains("unexpected"));
        // a header claiming more data than the body holds
        let mut lying = element(h, 100, b"abc");
        lying[4..8].copy_from_slice(&3u32.to_be_bytes());
        lying.truncate(18);
        assert!(parse_readv(Bytes::from(lying), h, &ranges[..1]).is_err());
    }

    #[test]
    fn bodies_decode() {
        assert_eq!(
            ResponseHeader::decode(&[0, 7, 0x0f, 0xa3, 0, 0, 1, 0]),
            ResponseHeader {
                stream_id: 7,
                status: KXR_ERROR,
                dlen: 256
            }
        );
        let mut err = 3011u32.to_be_bytes().to_vec();
        err.extend_from_slice(b"no such file\0");
        assert_eq!(parse_error(&err), (3011, "no such file".to_string()));
        assert_eq!(error_name(3011), "kXR_NotFound");
        assert_eq!(error_kind(3011), IoKind::NotFound);
        assert_eq!(error_kind(3010), IoKind::Forbidden);
        assert_eq!(error_name(3030), "kXR_AuthFailed");
        assert_eq!(error_name(3034), "kXR_ReqTimedOut");
        assert_eq!(error_name(12), "unknown error");
        assert_eq!(parse_error(&[1]), (0, String::new()));

        let mut open = vec![5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0];
        open.extend_from_slice(b"123 5000000 16 1700000000\0");
        assert_eq!(parse_open(&open), Some(([5, 6, 7, 8], Some(5_000_000))));
        assert_eq!(parse_open(&open[..4]), Some(([5, 6, 7, 8], None)));
        assert_eq!(parse_open(&open[..3]), None);

        let mut redirect = 2094u32.to_be_bytes().to_vec();
        redirect.extend_from_slice(b"data.example.org?tried=a&x=1");
        assert_eq!(
            parse_redirect(&redirect),
            Some(Redirect {
                host: "data.example.org".into(),
                port: 2094,
                opaque: Some("tried=a&x=1".into())
            })
        );
        assert_eq!(parse_redirect(&2094u32.to_be_bytes()), None);

        let mut login = vec![0u8; 16];
        assert_eq!(parse_login(&login), Some(vec![]));
        login.extend_from_slice(b"&P=gsi,v:10400,c:ssl&P=unix\0");
        assert_eq!(
            parse_login(&login),
            Some(vec!["gsi".to_string(), "unix".to_string()])
        );
        assert_eq!(parse_login(&login[..10]), None);

        let keys = ["readv_iov_max", "readv_ior_max", "nonsense"];
        assert_eq!(
            parse_query_config(b"1024\n2097136\nnonsense\n", &keys),
            vec![Some(1024), Some(2_097_136), None]
        );
        assert_eq!(parse_query_config(b"", &keys), vec![None, None, None]);
    }

    #[test]
    fn checksum_answers_are_algorithm_and_value() {
        assert_eq!(
            parse_checksum(b"adler32 0a1b2c3d\0").as_deref(),
            Some("adler32 0a1b2c3d")
        );
        assert_eq!(parse_checksum(b"adler32"), None);
        assert_eq!(parse_checksum(b"adler32 \n"), None);
        assert_eq!(parse_checksum(b"\xff\xfe 12"), None);

        let mut attn = [0u8; 16];
        attn[0..4].copy_from_slice(&KXR_ASYNRESP.to_be_bytes());
        attn[8..16].copy_from_slice(&[0, 3, 0, 0, 0, 0, 0, 9]);
        assert_eq!(
            parse_asynresp_prefix(&attn),
            Some(ResponseHeader {
                stream_id: 3,
                status: KXR_OK,
                dlen: 9
            })
        );
        attn[3] = 0;
        assert_eq!(parse_asynresp_prefix(&attn), None);
    }
}
