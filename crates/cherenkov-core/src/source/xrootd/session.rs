//! Logging in and opening the file on one connection: the session a slot reads through. The
//! open travels with the login (and the query of the server's readv limits, and `kXR_locate`),
//! `kXR_wait` is honoured and `kXR_redirect` followed, within the options' bounds. Requests about
//! a path rather than an open file (`kXR_locate`, `kXR_dirlist`) go the same way
//! (`ask_about_path`).

use super::auth::{self, Security};
use super::connection::{Connection, Waiting};
use super::options::XrootdOptions;
use super::pool;
use super::protocol::{self as proto, FileHandle, Redirect};
use super::reply::{ConnError, Failure, Reply, SMALL_BODY_MAX};
use super::url::{split_host_port, Endpoint, DEFAULT_PORT};
use crate::source::retry::Retries;
use futures_util::future::join_all;
use std::sync::Arc;
use std::time::Duration;

/// A logged-in connection with the file open on it.
pub(super) struct Session {
    pub(super) conn: Connection,
    pub(super) handle: FileHandle,
    pub(super) size: u64,
    /// The modification time the kXR_open answer gave (seconds), for the disk cache's key.
    pub(super) modified: Option<u64>,
    /// The server and path where the file was opened (after any redirects).
    pub(super) endpoint: Endpoint,
    /// What the server said about readv: (`readv_iov_max`, `readv_ior_max`).
    pub(super) readv_limits: (usize, u64),
    /// Data servers (`host:port`) the first server located the file on.
    pub(super) located: Vec<String>,
}

pub(super) const CONFIG_KEYS: [&str; 2] = ["readv_iov_max", "readv_ior_max"];

/// Open a session from `origin`, trying again after transport failures.
pub(super) async fn open_with_retries(
    origin: &Endpoint,
    options: &XrootdOptions,
) -> Result<Arc<Session>, Failure> {
    let mut retries = Retries::new(options.policy.retry);
    loop {
        match open_session(origin.clone(), options).await {
            Err(f) if f.is_transient() => match retries.after_failure() {
                Some(wait) => tokio::time::sleep(wait).await,
                None => {
                    let m = format!("{f} (gave up after {})", retries.describe());
                    return Err(match f {
                        Failure::TimedOut(_) => Failure::TimedOut(m),
                        _ => Failure::Transport(m),
                    });
                }
            },
            other => return other.map(Arc::new),
        }
    }
}

/// Connect, log in and open the file, following redirects from `start`.
pub(super) async fn open_session(
    start: Endpoint,
    options: &XrootdOptions,
) -> Result<Session, Failure> {
    let mut endpoint = start;
    let mut redirects = 0;
    let mut waited = Duration::ZERO;
    let mut located = Vec::new();
    let mut reuse = true;
    'connect: loop {
        // The open and the query of the server's limits (needed before the first read anyway)
        // travel with the login: connecting and opening take one round trip after TCP's own
        // (none, on a connection an earlier file left: see `pool`). So does the first server's
        // kXR_locate: a redirector answers it with its data servers.
        let mut requests = vec![
            proto::open_request(&endpoint.path),
            proto::query_config_request(&CONFIG_KEYS),
        ];
        if options.discover && redirects == 0 {
            requests.push(proto::locate_request(&endpoint.path));
        }
        let kept = if reuse && !endpoint.tls {
            pool::take(&endpoint.address())
        } else {
            None
        };
        let reused = kept.is_some();
        let (conn, mut early) = match kept {
            Some((conn, previous)) => {
                // The previous file's close goes with the open; its answer is not waited for.
                let posted = conn
                    .post(&proto::close_request(previous), SMALL_BODY_MAX)
                    .and_then(|_closing| {
                        requests
                            .iter()
                            .map(|r| conn.post(r, SMALL_BODY_MAX))
                            .collect::<Result<Vec<_>, _>>()
                    });
                match posted {
                    Ok(waiting) => (conn, Some(waiting)),
                    Err(_) => {
                        reuse = false;
                        continue 'connect;
                    }
                }
            }
            None => connect(&mut endpoint, options, &requests).await?,
        };
        loop {
            let answers = match early.take() {
                Some(waiting) => join_all(waiting.into_iter().map(|w| conn.wait(w))).await,
                None => join_all(requests.iter().map(|r| conn.send(r, SMALL_BODY_MAX))).await,
            };
            let mut answers = answers.into_iter();
            let mut next = || {
                answers
                    .next()
                    .unwrap_or_else(|| Err(ConnError::Lost("no answer".into())))
            };
            let (open, config, locate) = (next(), next(), next());
            if reused && matches!(open, Err(ConnError::Lost(_))) {
                // The kept connection died while it waited: make a new one.
                reuse = false;
                continue 'connect;
            }
            match open? {
                Reply::Ok(body) => {
                    let (handle, size) = proto::parse_open(&body).ok_or_else(|| {
                        Failure::Fatal(format!(
                            "{} sent a malformed kXR_open answer",
                            conn.address()
                        ))
                    })?;
                    let modified = body.get(12..).and_then(proto::parse_stat_mtime);
                    let size = match size {
                        Some(size) => size,
                        None => stat_open_file(&conn, handle).await?,
                    };
                    let values = match config {
                        Ok(Reply::Ok(body)) => proto::parse_query_config(&body, &CONFIG_KEYS),
                        _ => vec![None, None],
                    };
                    // Zero would be nonsense: take the protocol's defaults then.
                    let iov_max = values[0]
                        .filter(|&v| v > 0)
                        .map_or(proto::DEFAULT_READV_IOV_MAX, |v| v as usize);
                    let ior_max = values[1]
                        .filter(|&v| v > 0)
                        .unwrap_or(proto::DEFAULT_READV_IOR_MAX);
                    return Ok(Session {
                        conn,
                        handle,
                        size,
                        modified,
                        endpoint,
                        readv_limits: (iov_max, ior_max),
                        located,
                    });
                }
                Reply::Redirect(r) => {
                    // Only a redirector's locations are other replicas: a data server that
                    // opens the file itself names its own address, which may bypass a proxy.
                    if let Ok(Reply::Ok(body)) = locate {
                        located = proto::parse_locate(&body);
                    }
                    redirects += 1;
                    endpoint = follow_redirect(&endpoint, &r, redirects, options.max_redirects)?;
                    continue 'connect;
                }
                Reply::Wait { seconds, message } => {
                    wait_as_asked(&mut waited, seconds, &message, options.policy.timeout).await?;
                }
                Reply::Error { code, message } => return Err(Failure::Server { code, message }),
            }
        }
    }
}

/// Connect to `endpoint` and log in, sending `requests` with the login. A `root://` server that
/// wants TLS for logging in is connected to again with TLS, as XrdCl does (`endpoint` then says
/// so, and redirects from there keep it).
pub(super) async fn connect(
    endpoint: &mut Endpoint,
    options: &XrootdOptions,
    requests: &[proto::Request],
) -> Result<(Connection, Option<Vec<Waiting>>), ConnError> {
    endpoint.tls |= auth::wants_tls(&endpoint.address());
    loop {
        let security = Security::for_endpoint(endpoint, options)?;
        let connected = Connection::connect(
            &endpoint.address(),
            options.policy.timeout,
            options.policy.min_rate,
            requests,
            &security,
        )
        .await;
        match connected {
            Err(ConnError::TlsRequired(_)) if !endpoint.tls => {
                auth::remember_wants_tls(&endpoint.address());
                endpoint.tls = true;
            }
            other => return other,
        }
    }
}

/// The answer to a request about a path in `url` (not an open file; `parse` reads the URL as a
/// file's or a directory's), on a connection of its own: `request` is made for the path at each
/// server (a redirect may name another) and sent with the login when its answer is small (early
/// requests are registered for small answers only); the answer may be `max_len` bytes at most.
/// `kXR_wait` is honoured and redirects followed as an open's are; errors name `url` (redacted)
/// and `what` was asked.
pub(super) async fn ask_about_path(
    url: &str,
    parse: fn(&str) -> Result<Endpoint, String>,
    options: &XrootdOptions,
    request: impl Fn(&str) -> proto::Request,
    max_len: usize,
    what: &str,
) -> crate::error::Result<Vec<u8>> {
    let name = crate::source::redact::redact(url);
    let mut endpoint =
        parse(url).map_err(|m| crate::error::Error::InvalidArgument(format!("{name}: {m}")))?;
    let failed = |f: Failure| f.error(&name, format!("{what} failed: {f}"));
    let mut redirects = 0;
    let mut waited = Duration::ZERO;
    'server: loop {
        let request = request(&endpoint.path);
        let early = if max_len <= SMALL_BODY_MAX {
            std::slice::from_ref(&request)
        } else {
            &[]
        };
        let (conn, early) = connect(&mut endpoint, options, early)
            .await
            .map_err(|e| failed(e.into()))?;
        let mut reply = match early.and_then(|mut waiting| waiting.pop()) {
            Some(waiting) => conn.wait(waiting).await,
            None => conn.send(&request, max_len).await,
        };
        loop {
            match reply.map_err(|e| failed(e.into()))? {
                Reply::Ok(body) => return Ok(body),
                Reply::Error { code, message } => {
                    return Err(failed(Failure::Server { code, message }))
                }
                Reply::Wait { seconds, message } => {
                    wait_as_asked(&mut waited, seconds, &message, options.policy.timeout)
                        .await
                        .map_err(failed)?;
                    reply = conn.send(&request, max_len).await;
                }
                Reply::Redirect(r) => {
                    redirects += 1;
                    endpoint = follow_redirect(&endpoint, &r, redirects, options.max_redirects)
                        .map_err(failed)?;
                    continue 'server;
                }
            }
        }
    }
}

/// The size of an open file (`kXR_stat` on its handle).
pub(super) async fn stat_open_file(conn: &Connection, handle: FileHandle) -> Result<u64, Failure> {
    let body = ask_for_body(conn, &proto::stat_request(handle), "kXR_stat").await?;
    proto::parse_stat(&body).ok_or_else(|| Failure::Fatal("malformed kXR_stat answer".into()))
}

/// The body of a small answer to `request` (named `what` in errors); a server error is its own.
pub(super) async fn ask_for_body(
    conn: &Connection,
    request: &proto::Request,
    what: &str,
) -> Result<Vec<u8>, Failure> {
    match conn.send(request, SMALL_BODY_MAX).await? {
        Reply::Ok(body) => Ok(body),
        Reply::Error { code, message } => Err(Failure::Server { code, message }),
        other => Err(Failure::Fatal(format!(
            "unexpected answer to {what}: {other:?}"
        ))),
    }
}

/// Where a redirect sends us, if we may still go.
pub(super) fn follow_redirect(
    from: &Endpoint,
    r: &Redirect,
    count: usize,
    max: usize,
) -> Result<Endpoint, Failure> {
    if count > max {
        return Err(Failure::Fatal(format!(
            "more than {max} redirects (the last from {} to {}:{})",
            from.address(),
            r.host,
            r.port
        )));
    }
    // The server may send a whole URL (then the port field is -1).
    if let Some((_, rest)) = r.host.split_once("://") {
        let authority = rest.split('/').next().unwrap_or_default();
        let (host, port) = split_host_port(authority)
            .map_err(|m| Failure::Fatal(format!("bad redirect '{}': {m}", r.host)))?;
        let mut to = from.redirected(&host, port, r.opaque.as_deref());
        // TLS is kept (never dropped by a redirect) and taken when the redirect asks for it.
        let scheme = r.host.split("://").next().unwrap_or_default();
        to.tls |= scheme.eq_ignore_ascii_case("roots") || scheme.eq_ignore_ascii_case("xroots");
        return Ok(to);
    }
    let port = u16::try_from(r.port)
        .ok()
        .filter(|&p| p != 0)
        .unwrap_or(DEFAULT_PORT);
    Ok(from.redirected(&r.host, port, r.opaque.as_deref()))
}

/// Sleep as a `kXR_wait` asks, unless the waits would add up to more than `limit`.
pub(super) async fn wait_as_asked(
    waited: &mut Duration,
    seconds: u32,
    message: &str,
    limit: Duration,
) -> Result<(), Failure> {
    let pause = Duration::from_secs(u64::from(seconds.max(1)));
    if *waited + pause > limit {
        return Err(Failure::Fatal(format!(
            "the server keeps asking to wait ({seconds} s more: '{message}'); gave up after {} s",
            waited.as_secs()
        )));
    }
    tokio::time::sleep(pause).await;
    *waited += pause;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_are_bounded_and_resolved() {
        let from = Endpoint {
            host: "a".into(),
            port: 1,
            path: "/f".into(),
            tls: false,
        };
        let r = Redirect {
            host: "b".into(),
            port: 2,
            opaque: Some("x=1".into()),
        };
        let to = follow_redirect(&from, &r, 1, 1).unwrap();
        assert_eq!(
            (to.host.as_str(), to.port, to.path.as_str()),
            ("b", 2, "/f?x=1")
        );
        assert!(follow_redirect(&from, &r, 2, 1)
            .unwrap_err()
            .to_string()
            .contains("more than 1 redirects"));
        let url = Redirect {
            host: "root://c:3//other".into(),
            port: -1,
            opaque: None,
        };
        let to = follow_redirect(&from, &url, 1, 1).unwrap();
        assert_eq!((to.host.as_str(), to.port, to.tls), ("c", 3, false));
        // A redirect may ask for TLS; one from a TLS server never drops it.
        let secure = Redirect {
            host: "roots://c:3//other".into(),
            port: -1,
            opaque: None,
        };
        let to = follow_redirect(&from, &secure, 1, 1).unwrap();
        assert!(to.tls);
        assert!(follow_redirect(&to, &url, 1, 1).unwrap().tls);
        let no_port = Redirect {
            host: "d".into(),
            port: 0,
            opaque: None,
        };
        assert_eq!(
            follow_redirect(&from, &no_port, 1, 1).unwrap().port,
            DEFAULT_PORT
        );
    }
}
