//! Sending a request and reading its answer: bounded in time (silence) and in size, checked
//! against what was announced.

use super::failure::{error_chain, is_tls_failure, Failure};
use super::range_header::{parse_content_range, ContentRange};
use crate::source::min_rate::Progress;
use bytes::{Bytes, BytesMut};
use reqwest::header::{CONTENT_ENCODING, CONTENT_RANGE, ETAG, LAST_MODIFIED};
use reqwest::Response;
use std::time::Duration;

pub async fn send(
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<Response, Failure> {
    match tokio::time::timeout(timeout, request.send()).await {
        Err(_) => Err(Failure::TimedOut(format!(
            "no answer from the server within {timeout:?}"
        ))),
        // The URL is in every error already: drop reqwest's copy of it.
        Ok(Err(e)) if e.is_redirect() => Err(Failure::Fatal(error_chain(&e.without_url()))),
        Ok(Err(e)) if e.is_builder() => Err(Failure::Fatal(error_chain(&e.without_url()))),
        Ok(Err(e)) if is_tls_failure(&e) => Err(Failure::Fatal(tls_refused(e))),
        Ok(Err(e)) if e.is_timeout() => Err(Failure::TimedOut(error_chain(&e.without_url()))),
        Ok(Err(e)) => Err(Failure::Unreachable(error_chain(&e.without_url()))),
        Ok(Ok(response)) => Ok(response),
    }
}

/// A failed TLS handshake: which host, why (rustls says: `UnknownIssuer`, `NotValidForName`,
/// `Expired`, ...), and what the certificate was checked against.
fn tls_refused(e: reqwest::Error) -> String {
    let host = e
        .url()
        .and_then(|u| {
            u.host_str()
                .map(|h| format!("{h}:{}", u.port_or_known_default().unwrap_or(443)))
        })
        .unwrap_or_else(|| "the server".into());
    format!(
        "TLS with {host} failed, its certificate was not accepted: {} (checked against the \
         system's CAs, $X509_CERT_DIR and $SSL_CERT_FILE, or only ca= when given)",
        error_chain(&e.without_url())
    )
}

/// Read a body of at most `limit` bytes; a longer one is not read any further. The bytes are
/// counted in `progress` as they come: the caller watches the rate (see `source::min_rate`),
/// which bounds silence too.
pub async fn read_body(
    mut response: Response,
    limit: u64,
    progress: &Progress,
) -> Result<Bytes, Failure> {
    let too_long = |len: u64| {
        Failure::Unusable(format!(
            "answer of {len} bytes or more, {limit} expected at most"
        ))
    };
    let announced = response.content_length();
    if let Some(len) = announced.filter(|&len| len > limit) {
        return Err(too_long(len));
    }
    // Capacity comes from a length already checked against what was asked.
    let mut body = BytesMut::with_capacity(announced.unwrap_or(0) as usize);
    loop {
        match response.chunk().await {
            Err(e) => {
                return Err(Failure::CutShort(format!(
                    "answer cut short after {} bytes: {}",
                    body.len(),
                    error_chain(&e.without_url())
                )))
            }
            Ok(None) => break,
            Ok(Some(chunk)) => {
                let len = (body.len() + chunk.len()) as u64;
                if len > limit {
                    return Err(too_long(len));
                }
                progress.add(chunk.len() as u64);
                body.extend_from_slice(&chunk);
            }
        }
    }
    if let Some(len) = announced.filter(|&len| len != body.len() as u64) {
        return Err(Failure::CutShort(format!(
            "answer has {} of its {len} bytes",
            body.len()
        )));
    }
    Ok(body.freeze())
}

/// Compressed answers hold other bytes than the file's: refuse them.
pub fn reject_encoded(response: &Response) -> Result<(), Failure> {
    match header_str(response, CONTENT_ENCODING) {
        Some(enc) if !enc.trim().eq_ignore_ascii_case("identity") => Err(Failure::Fatal(format!(
            "server sent the answer encoded ({enc}); byte ranges need the raw file"
        ))),
        _ => Ok(()),
    }
}

pub fn header_str(response: &Response, name: reqwest::header::HeaderName) -> Option<String> {
    response
        .headers()
        .get(name)?
        .to_str()
        .ok()
        .map(str::to_string)
}

pub fn content_range(response: &Response) -> Option<ContentRange> {
    parse_content_range(&header_str(response, CONTENT_RANGE)?)
}

/// Which version of a file an answer comes from: its `ETag` and `Last-Modified` headers, as the
/// first answer gave them. A file replaced on the server (even by one of the same size) gets new
/// ones, and its bytes must not be mixed with the old version's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Version {
    etag: Option<String>,
    last_modified: Option<String>,
}

impl Version {
    pub fn of(response: &Response) -> Version {
        Version {
            etag: header_str(response, ETAG),
            last_modified: header_str(response, LAST_MODIFIED),
        }
    }

    /// The version as one text, when the server gave one (for the disk cache's keys).
    pub fn tag(&self) -> Option<String> {
        match (&self.etag, &self.last_modified) {
            (None, None) => None,
            (etag, modified) => Some(format!("etag {etag:?}, last-modified {modified:?}")),
        }
    }

    /// An answer of another version than this one is refused; a header the server did not send
    /// (at open or now) proves nothing either way.
    pub fn check(&self, response: &Response) -> Result<(), Failure> {
        let now = Version::of(response);
        let differ = |then: &Option<String>, now: &Option<String>| match (then, now) {
            (Some(a), Some(b)) if a != b => Some((a.clone(), b.clone())),
            _ => None,
        };
        let changed = differ(&self.etag, &now.etag)
            .map(|(a, b)| format!("ETag {a} when opened, {b} now"))
            .or_else(|| {
                differ(&self.last_modified, &now.last_modified)
                    .map(|(a, b)| format!("Last-Modified {a} when opened, {b} now"))
            });
        match changed {
            Some(what) => Err(Failure::Changed(format!(
                "the file changed on the server since it was opened ({what}); its new bytes \
                 cannot be mixed with those read before: open it again"
            ))),
            None => Ok(()),
        }
    }
}
