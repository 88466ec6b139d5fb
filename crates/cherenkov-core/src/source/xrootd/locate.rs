//! Replicas through an XRootD redirector (a `cmsd` manager, which holds no data itself).
//!
//! - [`open_discovering`]: `root://redirector//file` opens on the data server the redirector picks;
//!   the `kXR_locate` that traveled with the open names the other data servers holding the file,
//!   and each is opened directly and read as a replica of one [`MultiSource`]. A URL of a data
//!   server opens plainly, with no request more than without discovery.
//! - [`locate`]: `kXR_locate` on a connection of its own, for when the early answer was a
//!   `kXR_wait` (the redirector had not looked the file up yet) and for tools and tests.
//! - [`open_excluding`] and [`RedirectorFinder`]: the open sent again through the redirector with
//!   `tried=host,...`, so that it picks a data server other than those in use (as XrdCl does after
//!   a failure). cmsd matches `tried` hosts by IP address, not port.

use super::connection::{Connection, Reply, SMALL_BODY_MAX};
use super::protocol as proto;
use super::url::{parse_url, split_host_port};
use super::{follow_redirect, wait_as_asked, Failure, XrootdOptions, XrootdSource};
use crate::error::{Error, Result};
use crate::source::multi::{MultiOptions, MultiSource, ReplicaFinder};
use crate::source::{ByteSource, SharedSource};
use async_trait::async_trait;
use futures_util::future::join_all;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Most data servers read as replicas of one file (the first included); more would only cost
/// connections: two share the reads, the others are probed now and then.
pub const MAX_REPLICAS: usize = 4;

/// How long data servers get to answer a redirector that looks a file up for the first time,
/// after the first one has (measured on one machine: a few milliseconds).
const LATE_ANSWERS: Duration = Duration::from_millis(50);

/// Longest wait for a host name to resolve when comparing servers.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The data servers (`host:port`) that `url`'s server names for its file (`kXR_locate`): a
/// redirector names its data servers, a data server itself. `kXR_wait` (a redirector still looking)
/// and redirects are followed within `options.request_timeout` and `options.max_redirects`; the
/// answer is bounded in size and in entries (see `protocol::parse_locate`).
pub async fn locate(url: &str, options: &XrootdOptions) -> Result<Vec<String>> {
    let mut endpoint = parse_url(url).map_err(|m| Error::InvalidArgument(format!("{url}: {m}")))?;
    let failed = |what: String| Error::io(url, format!("kXR_locate failed: {what}"));
    let mut redirects = 0;
    let mut waited = Duration::ZERO;
    'server: loop {
        let request = proto::locate_request(&endpoint.path);
        let (conn, early) = Connection::connect(
            &endpoint.address(),
            options.request_timeout,
            std::slice::from_ref(&request),
        )
        .await
        .map_err(|e| failed(e.to_string()))?;
        let mut reply = match early.and_then(|mut waiting| waiting.pop()) {
            Some(waiting) => conn.wait(waiting).await,
            None => conn.send(&request, SMALL_BODY_MAX).await,
        };
        loop {
            match reply.map_err(|e| failed(e.to_string()))? {
                Reply::Ok(body) => return Ok(proto::parse_locate(&body)),
                Reply::Error { code, message } => {
                    return Err(failed(Failure::Server { code, message }.to_string()))
                }
                Reply::Wait { seconds, message } => {
                    wait_as_asked(&mut waited, seconds, &message, options.request_timeout)
                        .await
                        .map_err(|f| failed(f.to_string()))?;
                    reply = conn.send(&request, SMALL_BODY_MAX).await;
                }
                Reply::Redirect(r) => {
                    redirects += 1;
                    endpoint = follow_redirect(&endpoint, &r, redirects, options.max_redirects)
                        .map_err(|f| failed(f.to_string()))?;
                    continue 'server;
                }
            }
        }
    }
}

/// Open `url` (a redirector's) so that it picks a data server other than `in_use` (`host:port`
/// each): the open carries `tried=` naming their hosts. The file is then opened on that data
/// server directly, like every replica (see [`open_discovering`]).
pub async fn open_excluding(
    url: &str,
    in_use: &[String],
    options: XrootdOptions,
) -> Result<XrootdSource> {
    let one = XrootdOptions {
        connections: 1,
        discover: false,
        ..options.clone()
    };
    let picked = XrootdSource::open(&with_tried(url, in_use), one).await?;
    if !picked.was_redirected() {
        return XrootdSource::open(url, options).await;
    }
    let direct = direct_url(&picked);
    drop(picked);
    XrootdSource::open(&direct, options).await
}

/// `url` with `tried=host1,host2` for the servers `in_use` (`host:port`), replacing any `tried=`
/// it had: hosts only, IPv6 addresses in brackets, as cmsd reads them.
pub fn with_tried(url: &str, in_use: &[String]) -> String {
    let mut hosts: Vec<String> = Vec::new();
    for address in in_use {
        let Ok((host, _)) = split_host_port(address) else {
            continue;
        };
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    if hosts.is_empty() {
        return url.to_string();
    }
    let (base, cgi) = url.split_once('?').unwrap_or((url, ""));
    let mut pairs: Vec<&str> = cgi
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("tried="))
        .collect();
    let tried = format!("tried={}", hosts.join(","));
    pairs.push(&tried);
    format!("{base}?{}", pairs.join("&"))
}

/// Open a `root://` URL; when it names a redirector (the open was redirected) and discovery is on,
/// the data servers holding the file (at most [`MAX_REPLICAS`], the redirector's pick first) are
/// opened directly and read as replicas of one source, which asks the redirector for another
/// (`tried=`) when all of them fail. A data server that does not open, or holds a file of another
/// size, is left out; with a single data server the source is the one opened through the
/// redirector, a plain [`XrootdSource`]. Opening a redirector's file so costs the redirected open,
/// then one more open (two round trips, the replicas' in parallel).
pub async fn open_discovering(url: &str, options: XrootdOptions) -> Result<SharedSource> {
    let first = XrootdSource::open(url, options.clone()).await?;
    if !options.discover || !first.was_redirected() {
        return Ok(Arc::new(first));
    }
    // Data servers are opened without discovery: their kXR_locate would name only themselves.
    let plain = XrootdOptions {
        discover: false,
        ..options
    };
    let mut located = first.inner.located.clone();
    if located.is_empty() {
        // The redirector answered the kXR_locate sent with the open with kXR_wait: it had not
        // looked the file up yet. The open made it look, so asked again it answers at once, but
        // maybe before every data server has: a second answer a moment later may name more.
        located = locate(url, &plain).await.unwrap_or_default();
        if located.len() < 2 {
            tokio::time::sleep(LATE_ANSWERS).await;
            located = locate(url, &plain).await.unwrap_or(located);
        }
    }
    // The server the redirector picked comes first: it knows its servers' load.
    let in_use = first.server_address();
    let mut servers = vec![in_use.clone()];
    servers.extend(distinct_servers(&in_use, &located, MAX_REPLICAS - 1).await);
    if servers.len() == 1 {
        return Ok(Arc::new(first));
    }
    // Every replica is opened on its data server directly: each connection of a source opened
    // through the redirector may have been sent to another server, and a replica must be one.
    let path = &first.inner.origin.path;
    let mut urls = vec![direct_url(&first)];
    urls.extend(
        servers[1..]
            .iter()
            .map(|address| format!("root://{address}/{path}")),
    );
    let opened = join_all(urls.iter().map(|u| XrootdSource::open(u, plain.clone()))).await;
    eprintln!(
        "DEBUG early={:?} located={located:?} urls={urls:?} errors={:?}",
        first.inner.located,
        opened
            .iter()
            .filter_map(|o| o.as_ref().err())
            .collect::<Vec<_>>()
    );
    let mut servers = Vec::new();
    let mut sources: Vec<SharedSource> = Vec::new();
    for source in opened.into_iter().flatten() {
        if source.inner.size == first.inner.size {
            servers.push(source.server_address());
            sources.push(Arc::new(source));
        }
    }
    if sources.len() < 2 {
        return Ok(Arc::new(first));
    }
    let finder = RedirectorFinder::new(url, plain, servers);
    Ok(Arc::new(
        MultiSource::new(sources, MultiOptions::default())
            .await?
            .with_finder(Arc::new(finder)),
    ))
}

/// The file on the data server `source` was opened on, as a `root://` URL that bypasses the
/// redirector; its path keeps what the redirector added to it (opaque CGI some servers need).
fn direct_url(source: &XrootdSource) -> String {
    let server = &source.inner.server;
    format!("root://{}/{}", server.address(), server.path)
}

/// Finds one more replica through the redirector: the open is sent again with `tried=` naming
/// every server in use (see [`open_excluding`]), and a server already in use is refused.
#[derive(Debug)]
pub struct RedirectorFinder {
    url: String,
    options: XrootdOptions,
    /// `host:port` of the servers in use, found ones included.
    servers: Mutex<Vec<String>>,
}

impl RedirectorFinder {
    /// For the redirector URL `url`, with replicas on `servers` (`host:port`) already.
    pub fn new(url: &str, options: XrootdOptions, servers: Vec<String>) -> RedirectorFinder {
        RedirectorFinder {
            url: url.to_string(),
            options,
            servers: Mutex::new(servers),
        }
    }
}

#[async_trait]
impl ReplicaFinder for RedirectorFinder {
    async fn find(&self) -> Result<SharedSource> {
        let in_use = self.servers.lock().unwrap().clone();
        let source = open_excluding(&self.url, &in_use, self.options.clone()).await?;
        let server = source.server_address();
        // Whatever `in_use` still has once `server` is taken out: all of it if `server` is new.
        if distinct_servers(&server, &in_use, in_use.len()).await.len() < in_use.len() {
            return Err(Error::io(
                source.name(),
                format!("the redirector sent the open to {server}, a server already in use"),
            ));
        }
        self.servers.lock().unwrap().push(server);
        Ok(Arc::new(source))
    }
}

/// The servers of `candidates` (`host:port`) other than `in_use` and other than one another, once
/// names are resolved (a redirect may name a server by host name, `kXR_locate` by address); at most
/// `limit`, in their order.
async fn distinct_servers(in_use: &str, candidates: &[String], limit: usize) -> Vec<String> {
    let mut seen = resolve(in_use).await;
    let mut names = vec![in_use.to_string()];
    let mut out = Vec::new();
    for candidate in candidates {
        if out.len() >= limit {
            break;
        }
        let addresses = resolve(candidate).await;
        if names.contains(candidate) || addresses.iter().any(|a| seen.contains(a)) {
            continue;
        }
        seen.extend(addresses);
        names.push(candidate.clone());
        out.push(candidate.clone());
    }
    out
}

/// The socket addresses `host:port` stands for (IPv4-mapped IPv6 ones as IPv4); none if it does
/// not resolve in time.
async fn resolve(address: &str) -> Vec<SocketAddr> {
    match tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host(address)).await {
        Ok(Ok(found)) => found
            .map(|a| SocketAddr::new(a.ip().to_canonical(), a.port()))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tried_names_hosts_once_and_replaces_an_older_list() {
        let in_use = [
            "127.0.0.1:1094".to_string(),
            "[::1]:1095".to_string(),
            "127.0.0.1:1096".to_string(),
        ];
        assert_eq!(
            with_tried("root://r:1//f.root", &in_use),
            "root://r:1//f.root?tried=127.0.0.1,[::1]"
        );
        assert_eq!(
            with_tried("root://r:1//f.root?a=1&tried=x&b=2", &in_use[..1]),
            "root://r:1//f.root?a=1&b=2&tried=127.0.0.1"
        );
        assert_eq!(with_tried("root://r//f", &[]), "root://r//f");
    }

    #[tokio::test]
    async fn the_same_server_under_two_names_counts_once() {
        let located = [
            "127.0.0.1:2000".to_string(),
            "localhost:2001".to_string(),
            "127.0.0.1:2001".to_string(),
            "127.0.0.1:2002".to_string(),
        ];
        assert_eq!(
            distinct_servers("localhost:2000", &located, 9).await,
            ["localhost:2001", "127.0.0.1:2002"]
        );
        assert_eq!(
            distinct_servers("192.0.2.9:1", &located, 1).await,
            ["127.0.0.1:2000"]
        );
    }
}
