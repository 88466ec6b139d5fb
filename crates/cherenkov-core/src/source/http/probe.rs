//! The first request of a file: learn its size and, in the same round trip, read its head and
//! tail, where ROOT keeps what opening needs.

use super::auth::{is_refusal, HttpAuth};
use super::failure::{status_failure, too_slow, Failure};
use super::multipart::{boundary_from_content_type, parse_byteranges, Part, PART_OVERHEAD};
use super::options::HttpOptions;
use super::range_header::ContentRange;
use super::response::{content_range, header_str, read_body, reject_encoded, send, Version};
use crate::source::min_rate::{self, Progress};
use crate::source::ByteRange;
use bytes::Bytes;
use reqwest::header::{CONTENT_TYPE, RANGE};
use reqwest::{Response, StatusCode, Url};

/// What the first request of [`HttpSource::open`] learned.
pub struct Probe {
    pub target: Url,
    pub size: u64,
    pub whole_file: Option<Bytes>,
    /// Bytes of the file it brought (head and tail), for [`ByteSource::opening_reads`].
    pub opening: Vec<(ByteRange, Bytes)>,
    pub multirange_works: bool,
    /// The version of the file the answer came from (see `Version`).
    pub version: Version,
}

impl Probe {
    /// A server that answers ranges: the size, and what the answer brought of the file.
    fn ranged(target: Url, size: u64, opening: Vec<(ByteRange, Bytes)>) -> Probe {
        Probe {
            target,
            size,
            whole_file: None,
            opening,
            multirange_works: true,
            version: Version::default(),
        }
    }

    /// The probe, with the version of the file its answer came from.
    fn of_version(self, version: Version) -> Probe {
        Probe { version, ..self }
    }

    /// The whole file came (it is small, or the server ignores ranges): kept, reads need no request.
    fn whole(target: Url, data: Bytes) -> Probe {
        let size = data.len() as u64;
        Probe {
            target,
            size,
            whole_file: Some(data.clone()),
            opening: vec![(ByteRange::new(0, size), data)],
            multirange_works: true,
            version: Version::default(),
        }
    }
}

/// The first request asks for the file's head and tail (`Range: bytes=0-H,-T`), where most file
/// formats keep their metadata (ROOT: header, keys, streamer infos, trees): its answer gives the
/// size (`Content-Range: bytes a-b/SIZE`) and the bytes to open the file, in one round trip.
/// Servers answering otherwise get a plain single-range probe (see `probe_head`).
pub async fn probe(
    client: &reqwest::Client,
    auth: &HttpAuth,
    url: &Url,
    options: &HttpOptions,
) -> Result<Probe, Failure> {
    let progress = Progress::default();
    tokio::select! {
        probe = probe_unwatched(client, auth, url, options, &progress) => probe,
        slow = min_rate::too_slow(options.policy.rate_rule(), &progress) => Err(too_slow(slow)),
    }
}

async fn probe_unwatched(
    client: &reqwest::Client,
    auth: &HttpAuth,
    url: &Url,
    options: &HttpOptions,
    progress: &Progress,
) -> Result<Probe, Failure> {
    let (head, tail) = (options.opening.head.max(1), options.opening.tail);
    if tail == 0 {
        return probe_head(client, auth, url, options, head, progress).await;
    }
    let (response, target) = send_probe(
        client,
        auth,
        url,
        options,
        format!("bytes=0-{},-{tail}", head - 1),
    )
    .await?;
    let limit = head + tail + 3 * PART_OVERHEAD;
    let version = Version::of(&response);
    let probe = match response.status() {
        StatusCode::PARTIAL_CONTENT => {
            let content_type = header_str(&response, CONTENT_TYPE).unwrap_or_default();
            let parts = match boundary_from_content_type(&content_type) {
                Some(boundary) => {
                    let body = read_body(response, limit, progress).await?;
                    parse_byteranges(&body, &boundary, 2).map_err(|e| {
                        Failure::Unusable(format!(
                            "malformed multipart answer to the first request: {e:?}"
                        ))
                    })?
                }
                None => {
                    let Some(ContentRange::Bytes { range, total }) = content_range(&response)
                    else {
                        return Err(Failure::Unusable(
                            "206 answer without a valid Content-Range".into(),
                        ));
                    };
                    if range.len > head + tail {
                        return Err(Failure::Unusable(format!(
                            "server sent {} bytes, more than the {} asked",
                            range.len,
                            head + tail
                        )));
                    }
                    let data = read_body(response, range.len, progress).await?;
                    if data.len() as u64 != range.len {
                        return Err(Failure::CutShort(format!(
                            "answer has {} bytes, its Content-Range announces {}",
                            data.len(),
                            range.len
                        )));
                    }
                    vec![Part { range, total, data }]
                }
            };
            let size = match parts
                .iter()
                .map(|p| p.total)
                .collect::<Option<Vec<u64>>>()
                .as_deref()
            {
                Some([first, rest @ ..]) if rest.iter().all(|t| t == first) => *first,
                _ => {
                    return Err(Failure::Unusable(
                        "206 answer without one file size in its Content-Range headers".into(),
                    ))
                }
            };
            let opening = parts.into_iter().map(|p| (p.range, p.data)).collect();
            Ok(Probe::ranged(target, size, opening))
        }
        // A file smaller than what was asked comes whole (nginx does so): keep it.
        StatusCode::OK
            if response
                .content_length()
                .is_some_and(|len| len <= head + tail) =>
        {
            let announced = response.content_length().unwrap_or_default();
            let data = read_body(response, announced, progress).await?;
            if data.len() as u64 != announced {
                return Err(Failure::CutShort(format!(
                    "whole-file answer has {} of {announced} bytes",
                    data.len()
                )));
            }
            Ok(Probe::whole(target, data))
        }
        StatusCode::RANGE_NOT_SATISFIABLE
            if matches!(
                content_range(&response),
                Some(ContentRange::Unsatisfied { total: 0 })
            ) =>
        {
            Ok(Probe::ranged(target, 0, Vec::new()))
        }
        status if is_refusal(status) => Err(auth.refused(status)),
        StatusCode::NOT_FOUND | StatusCode::GONE => Err(status_failure(response.status(), 1)),
        // A whole large file (ranges ignored, or not several at once), a 416 or 400 to the suffix
        // range: drop it and ask as plainly as possible.
        _ => {
            drop(response);
            let mut probe = probe_head(client, auth, url, options, head, progress).await?;
            probe.multirange_works = false;
            Ok(probe)
        }
    };
    probe.map(|p| p.of_version(version))
}

/// Send a first request with this `Range:`; the answer and the URL it came from (after redirects).
async fn send_probe(
    client: &reqwest::Client,
    auth: &HttpAuth,
    url: &Url,
    options: &HttpOptions,
    range: String,
) -> Result<(Response, Url), Failure> {
    let request = auth.apply(client.get(url.clone()).header(RANGE, range))?;
    let response = send(request, options.policy.timeout).await?;
    reject_encoded(&response)?;
    let target = response.url().clone();
    Ok((response, target))
}

/// A single-range probe: `Range: bytes=0-(head-1)`, answered by `Content-Range: bytes
/// 0-N/SIZE` (or a 200 with the whole file from servers without range support, or 416 for an
/// empty file).
async fn probe_head(
    client: &reqwest::Client,
    auth: &HttpAuth,
    url: &Url,
    options: &HttpOptions,
    head: u64,
    progress: &Progress,
) -> Result<Probe, Failure> {
    let (response, target) =
        send_probe(client, auth, url, options, format!("bytes=0-{}", head - 1)).await?;
    let version = Version::of(&response);
    let probe = match response.status() {
        status if is_refusal(status) => Err(auth.refused(status)),
        StatusCode::PARTIAL_CONTENT => match content_range(&response) {
            Some(ContentRange::Bytes {
                range,
                total: Some(size),
            }) if range.offset == 0 && range.len <= head => {
                let data = read_body(response, range.len, progress).await?;
                let opening = if data.len() as u64 == range.len {
                    vec![(range, data)]
                } else {
                    Vec::new()
                };
                Ok(Probe::ranged(target, size, opening))
            }
            _ => Err(Failure::Fatal(
                "206 answer without the file size in Content-Range".into(),
            )),
        },
        StatusCode::OK => {
            let Some(size) = response.content_length() else {
                return Err(Failure::Fatal(
                    "server ignores Range requests and sends no Content-Length".into(),
                ));
            };
            if size > options.max_full_body_bytes {
                return Err(Failure::Fatal(format!(
                    "server ignores Range requests and the file ({size} bytes) is larger than the {} bytes \
                     allowed for a whole-file answer",
                    options.max_full_body_bytes
                )));
            }
            let data = read_body(response, size, progress).await?;
            if data.len() as u64 != size {
                return Err(Failure::CutShort(format!(
                    "whole-file answer has {} of {size} bytes",
                    data.len()
                )));
            }
            Ok(Probe::whole(target, data))
        }
        StatusCode::RANGE_NOT_SATISFIABLE => match content_range(&response) {
            Some(ContentRange::Unsatisfied { total: 0 }) => {
                Ok(Probe::ranged(target, 0, Vec::new()))
            }
            _ => Err(Failure::Fatal(
                "server answered 416 Range Not Satisfiable to bytes=0-0".into(),
            )),
        },
        status => Err(status_failure(status, 1)),
    };
    probe.map(|p| p.of_version(version))
}
