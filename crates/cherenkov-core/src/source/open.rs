//! Opening a path or URL: the source its scheme names, with what the options put around it (a
//! trace, the disk cache), and replicas of one file opened as one.

use super::{cache, http, local, multi, redact, trace, xrootd, Opened, SourceOptions};
use crate::error::Result;
use std::sync::Arc;

/// Open the source a path or URL names: `root://`, `http://`, `https://`, `davs://`,
/// `file://` or a path. Errors never show the URL's secrets (see `redact`).
pub async fn open(url: &str, options: &SourceOptions) -> Result<Opened> {
    let opened = open_untraced(url, options).await?;
    wrapped(opened, options).await
}

/// What the options put around an opened source: the trace records what reaches the source,
/// and the disk cache sits above it (its hits are no requests).
async fn wrapped(mut opened: Opened, options: &SourceOptions) -> Result<Opened> {
    if options.trace {
        let (traced, log) = trace::TracingSource::new(opened.source);
        opened.source = Arc::new(traced);
        opened.trace = Some(log);
    }
    if let Some(cache) = &options.cache {
        opened.source = cache::wrap(&opened, cache).await?;
    }
    Ok(opened)
}

/// The path of a `file://` URL: `file:///abs/path` and `file://localhost/abs/path` name
/// `/abs/path` (RFC 8089); another host cannot be read as a local file.
fn file_url_path(url: &str) -> Result<&str> {
    let rest = &url["file://".len()..];
    let (host, path) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest, ""),
    };
    match host {
        "" | "localhost" if !path.is_empty() => Ok(path),
        "" | "localhost" => Err(crate::Error::InvalidArgument(format!(
            "{url}: a file:// URL needs an absolute path (file:///path/to/file.root)"
        ))),
        _ => Err(crate::Error::InvalidArgument(format!(
            "{url}: file:// URLs name local files (file:///path or file://localhost/path), not \
             files on host '{host}'"
        ))),
    }
}

/// Open several URLs as replicas of one file (see `multi::MultiSource`), all at once: the first
/// that opens makes the set, the others join as they open, and those that cannot be opened or
/// hold another file are reported (`ByteSource::replicas`), not fatal. With `verify_checksums`
/// every replica must open and agree, or the open fails. One URL opens plainly.
pub async fn open_replicas(urls: &[String], options: &SourceOptions) -> Result<Opened> {
    if let [url] = urls {
        return open(url, options).await;
    }
    let plain = SourceOptions {
        trace: false,
        cache: None,
        discover: Some(false),
        ..options.clone()
    };
    if options.verify_checksums {
        // Verifying is strict: every replica must open and its server's checksum agree.
        let opened = futures_util::future::join_all(urls.iter().map(|u| open_untraced(u, &plain)));
        let sources = opened.await.into_iter().map(|o| o.map(|o| o.source));
        let sources = sources.collect::<Result<Vec<_>>>()?;
        let multi = multi::MultiSource::new(sources, multi::MultiOptions::verifying(true)).await?;
        return wrapped(Opened::plain(Arc::new(multi)), options).await;
    }
    let openings: Vec<multi::Opening> = urls
        .iter()
        .map(|url| {
            let (name, plain) = (url.clone(), plain.clone());
            let opening = async move { open_untraced(&name, &plain).await };
            (url.clone(), Box::pin(opening) as _)
        })
        .collect();
    let multi_options = multi::MultiOptions {
        compare: options.opening,
        ..multi::MultiOptions::default()
    };
    let multi = multi::MultiSource::open_first(&urls.join(" | "), openings, multi_options).await?;
    let opened = Opened {
        reads: multi.opening_reads(),
        ..Opened::plain(multi)
    };
    wrapped(opened, options).await
}

async fn open_untraced(url: &str, options: &SourceOptions) -> Result<Opened> {
    open_by_scheme(url, options)
        .await
        .map_err(redact::redact_error)
}

async fn open_by_scheme(url: &str, options: &SourceOptions) -> Result<Opened> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        None => Ok(local::LocalSource::open(url, options.direct_io)?.into_opened()),
        Some("file") => {
            let path = file_url_path(url)?;
            Ok(local::LocalSource::open(path, options.direct_io)?.into_opened())
        }
        Some("http" | "https" | "dav" | "davs") => {
            let defaults = http::HttpOptions::default();
            let http_options = http::HttpOptions {
                connections: options.connections.unwrap_or(defaults.connections),
                policy: defaults.policy.overridden_by(&options.request),
                adaptive: options.adaptive_streams.unwrap_or(defaults.adaptive),
                opening: options.opening,
                token: options.token.clone(),
                tls: options.tls.clone(),
                ..defaults
            };
            Ok(http::HttpSource::open(url, http_options).await?.into_opened())
        }
        Some("root" | "xroot" | "roots" | "xroots") => {
            // A server asking for gsi or krb5 is read through XrdCl when it is available.
            xrootd::external::open(url, xrootd_options(options)).await
        }
        Some(other) => Err(crate::Error::InvalidArgument(format!(
            "{url}: unsupported URL scheme '{other}' (use root://, roots://, http://, https://, davs://, file:// or a path)"
        ))),
    }
}

fn xrootd_options(options: &SourceOptions) -> xrootd::XrootdOptions {
    let defaults = xrootd::XrootdOptions::default();
    xrootd::XrootdOptions {
        connections: options.connections.unwrap_or(defaults.connections),
        policy: defaults.policy.overridden_by(&options.request),
        discover: options.discover.unwrap_or(defaults.discover),
        opening: options.opening,
        adaptive: options.adaptive_streams.unwrap_or(defaults.adaptive),
        verify_checksums: options.verify_checksums,
        token: options.token.clone(),
        sss_keytab: options.sss_keytab.clone(),
        tls: options.tls.clone(),
        ..defaults
    }
}

/// The entries of the directory a `root://` URL names (see `xrootd::list_directory`), asked
/// with the options a file of it would be opened with.
pub async fn list_directory(url: &str, options: &SourceOptions) -> Result<Vec<xrootd::DirEntry>> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("root" | "xroot" | "roots" | "xroots") => {
            xrootd::list_directory(url, &xrootd_options(options)).await
        }
        _ => Err(crate::Error::InvalidArgument(format!(
            "{}: only root:// directories are listed (a local directory is globbed)",
            redact::redact(url)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_urls_name_absolute_local_paths() {
        assert_eq!(
            file_url_path("file:///data/a.root").unwrap(),
            "/data/a.root"
        );
        assert_eq!(
            file_url_path("file://localhost/data/a.root").unwrap(),
            "/data/a.root"
        );
        assert!(file_url_path("file://elsewhere/data/a.root").is_err());
        assert!(file_url_path("file://localhost").is_err());
    }
}
