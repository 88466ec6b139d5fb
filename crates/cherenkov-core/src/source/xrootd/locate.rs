//! Replicas through an XRootD redirector (a `cmsd` manager, which holds no data itself).
//!
//! - [`open_discovering`]: `root://redirector//file` opens on the data server the redirector picks;
//!   the `kXR_locate` that traveled with the open names the other data servers holding the file,
//!   and each is opened directly and read as a replica of one [`MultiSource`], which grows when
//!   the redirector names more later. A URL of a data server opens plainly, with no request more
//!   than without discovery.
//! - [`locate`]: `kXR_locate` on a connection of its own: a second look, once the redirector has
//!   heard from all its data servers, and for tools and tests.
//! - [`open_excluding`] and [`RedirectorFinder`]: the open sent again through the redirector with
//!   `tried=host,...`, so that it picks a data server other than those in use (as XrdCl does after
//!   a failure). cmsd matches `tried` hosts by IP address, not port.

use super::file::XrootdSource;
use super::options::XrootdOptions;
use super::protocol as proto;
use super::reply::SMALL_BODY_MAX;
use super::session::ask_about_path;
use super::url::{parse_url, split_host_port};
use crate::error::{Error, Result};
use crate::source::multi::{MultiOptions, MultiSource, ReplicaFinder};
use crate::source::redact::redact;
use crate::source::{ByteSource, Opened, SharedSource};
use async_trait::async_trait;
use futures_util::future::join_all;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Most data servers read as replicas of one file (the first included); more would only cost
/// connections: two share the reads, the others are probed now and then.
pub const MAX_REPLICAS: usize = 4;

/// Longest wait for a host name to resolve when comparing servers.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The data servers (`host:port`) that `url`'s server names for its file (`kXR_locate`): a
/// redirector names its data servers, a data server itself. `kXR_wait` (a redirector still looking)
/// and redirects are followed within `options.policy.timeout` and `options.max_redirects`; the
/// answer is bounded in size and in entries (see `protocol::parse_locate`).
pub async fn locate(url: &str, options: &XrootdOptions) -> Result<Vec<String>> {
    let body = ask_about_path(
        url,
        parse_url,
        options,
        proto::locate_request,
        SMALL_BODY_MAX,
        "kXR_locate",
    );
    Ok(proto::parse_locate(&body.await?))
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

/// Open a `root://` URL. When it names a redirector (the open was redirected) and discovery is on,
/// the file is read as a replica set ([`MultiSource`]) that grows:
/// - the data servers the `kXR_locate` sent with the open names (the redirector's pick first, at
///   most `MAX_REPLICAS` (4)) are opened directly, in parallel: one open more than a plain open
///   through the redirector. (Each connection of a source opened through the redirector may have
///   been sent to another server, and a replica must be one server);
/// - a redirector that looks a file up for the first time answers that `kXR_locate` before every
///   data server has told it (or not at all: `kXR_wait`), so it is asked again
///   `TOP_UP_AFTER` (1 s) later, in the background, and the new data servers are added;
/// - when every replica fails a read, the redirector is asked for one more: first by
///   `kXR_locate`, then by an open with `tried=` naming the servers in use.
///
/// A data server that does not open, or holds a file of another size, is left out. With
/// `verify_checksums`, the first replicas' checksums must agree (else the open fails, naming each
/// one's), and one found later with another checksum is left out. A URL of a data server opens
/// plainly, with no request more than without discovery.
pub async fn open_discovering(url: &str, options: XrootdOptions) -> Result<Opened> {
    let first = XrootdSource::open(url, options.clone()).await?;
    if !options.discover || !first.was_redirected() {
        return Ok(first.into_opened());
    }
    // Data servers are opened without discovery: their kXR_locate would name only themselves.
    let plain = XrootdOptions {
        discover: false,
        ..options
    };
    let in_use = first.server_address();
    let mut servers = vec![in_use.clone()];
    servers.extend(distinct_servers(&servers, first.located(), MAX_REPLICAS - 1).await);
    let mut urls = vec![direct_url(&first)];
    let origin = first.origin();
    urls.extend(servers[1..].iter().map(|a| origin.url_on(a)));
    let finder = Arc::new(RedirectorFinder::new(url, plain.clone(), servers.clone()));
    let replicas = if options.verify_checksums {
        // Verifying is strict: every replica must open and its server's checksum agree.
        let opened = join_all(urls.iter().map(|u| XrootdSource::open(u, plain.clone()))).await;
        let sources: Vec<SharedSource> = opened
            .into_iter()
            .flatten()
            .filter(|source| source.size() == first.size())
            .map(|source| Arc::new(source) as SharedSource)
            .collect();
        if sources.is_empty() {
            return Ok(first.into_opened());
        }
        Arc::new(MultiSource::new(sources, MultiOptions::verifying(true)).await?)
    } else {
        // The redirector's pick is listed first, then the servers in the order it named them:
        // the file is the first of them that opens (see `multi::opening`).
        let openings = urls
            .iter()
            .map(|u| {
                let (url, plain) = (u.clone(), plain.clone());
                let opening =
                    async move { Ok(XrootdSource::open(&url, plain).await?.into_opened()) };
                (redact(u), Box::pin(opening) as _)
            })
            .collect();
        let compare = MultiOptions {
            compare: options.opening,
            ..MultiOptions::default()
        };
        let name = redact(&urls.join(" | "));
        match MultiSource::open_first(&name, openings, compare).await {
            Ok(replicas) => replicas,
            // The data servers do not let us in without the redirector: read through it.
            Err(_) => return Ok(first.into_opened()),
        }
    };
    replicas.set_finder(finder.clone());
    tokio::spawn(top_up(Arc::downgrade(&replicas), finder));
    let reads = replicas.opening_reads();
    Ok(Opened {
        reads,
        ..Opened::plain(replicas)
    })
}

/// How long after the open the redirector is asked again for the file's data servers: it has
/// heard from them all by then (they answer its query within milliseconds; it waits 5 s at most).
pub const TOP_UP_AFTER: Duration = Duration::from_secs(1);

/// Add the data servers the redirector names [`TOP_UP_AFTER`] the open and did not name then.
async fn top_up(replicas: Weak<MultiSource>, finder: Arc<RedirectorFinder>) {
    tokio::time::sleep(TOP_UP_AFTER).await;
    let Some(count) = replicas.upgrade().map(|r| r.replica_count()) else {
        return;
    };
    for source in finder
        .open_located(MAX_REPLICAS.saturating_sub(count))
        .await
    {
        let Some(replicas) = replicas.upgrade() else {
            return;
        };
        let _ = replicas.add_replica(Arc::new(source)).await;
    }
}

/// The file on the data server `source` was opened on, as a `root://` URL that bypasses the
/// redirector; its path keeps what the redirector added to it (opaque CGI some servers need).
fn direct_url(source: &XrootdSource) -> String {
    let server = source.server();
    server.url_on(&server.address())
}

/// Finds more replicas through the redirector: the data servers its `kXR_locate` names that no
/// replica uses yet; failing that, the server it picks for an open with `tried=` naming those in
/// use (see [`open_excluding`]). A server already in use is refused.
#[derive(Debug)]
pub struct RedirectorFinder {
    url: String,
    options: XrootdOptions,
    /// `host:port` of the servers in use, found ones included.
    servers: Mutex<Vec<String>>,
    /// Held while looking: two looks at once could both pick the same new server.
    looking: tokio::sync::Mutex<()>,
}

impl RedirectorFinder {
    /// For the redirector URL `url`, with replicas on `servers` (`host:port`) already.
    pub fn new(url: &str, options: XrootdOptions, servers: Vec<String>) -> RedirectorFinder {
        RedirectorFinder {
            url: url.to_string(),
            options,
            servers: Mutex::new(servers),
            looking: tokio::sync::Mutex::new(()),
        }
    }

    fn in_use(&self) -> Vec<String> {
        self.servers.lock().unwrap().clone()
    }

    /// The data servers the redirector names now and no replica uses, opened directly (at most
    /// `limit`); they count as in use from then on.
    pub async fn open_located(&self, limit: usize) -> Vec<XrootdSource> {
        let _one_look_at_a_time = self.looking.lock().await;
        self.open_located_now(limit).await
    }

    async fn open_located_now(&self, limit: usize) -> Vec<XrootdSource> {
        let Ok(located) = locate(&self.url, &self.options).await else {
            return Vec::new();
        };
        let Ok(endpoint) = parse_url(&self.url) else {
            return Vec::new();
        };
        let new = distinct_servers(&self.in_use(), &located, limit).await;
        let urls: Vec<String> = new.iter().map(|a| endpoint.url_on(a)).collect();
        let opened = join_all(
            urls.iter()
                .map(|u| XrootdSource::open(u, self.options.clone())),
        );
        let opened: Vec<XrootdSource> = opened.await.into_iter().flatten().collect();
        let mut servers = self.servers.lock().unwrap();
        servers.extend(opened.iter().map(|s| s.server_address()));
        opened
    }
}

#[async_trait]
impl ReplicaFinder for RedirectorFinder {
    async fn find(&self) -> Result<SharedSource> {
        let _one_look_at_a_time = self.looking.lock().await;
        if let Some(source) = self.open_located_now(1).await.pop() {
            return Ok(Arc::new(source));
        }
        let in_use = self.in_use();
        let source = open_excluding(&self.url, &in_use, self.options.clone()).await?;
        let server = source.server_address();
        if distinct_servers(&in_use, std::slice::from_ref(&server), 1)
            .await
            .is_empty()
        {
            return Err(Error::io(
                source.name(),
                format!("the redirector sent the open to {server}, a server already in use"),
            ));
        }
        self.servers.lock().unwrap().push(server);
        Ok(Arc::new(source))
    }
}

/// The servers of `candidates` (`host:port`) other than those `in_use` and other than one
/// another, once names are resolved (a redirect may name a server by host name, `kXR_locate` by
/// address); at most `limit`, in their order.
async fn distinct_servers(in_use: &[String], candidates: &[String], limit: usize) -> Vec<String> {
    let mut names = in_use.to_vec();
    let mut seen = Vec::new();
    for name in in_use {
        seen.extend(resolve(name).await);
    }
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
        let in_use = ["localhost:2000".to_string()];
        assert_eq!(
            distinct_servers(&in_use, &located, 9).await,
            ["localhost:2001", "127.0.0.1:2002"]
        );
        let elsewhere = ["192.0.2.9:1".to_string()];
        assert_eq!(
            distinct_servers(&elsewhere, &located, 1).await,
            ["127.0.0.1:2000"]
        );
    }
}
