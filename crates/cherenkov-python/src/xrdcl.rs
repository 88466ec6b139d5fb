//! XRootD files on servers that ask for security protocols cherenkov does not speak (`gsi`,
//! `krb5`, `pwd`), read through XrdCl from the `xrootd` Python package (registered with the core
//! at import, see `source::xrootd::external`). Only the bytes come through XrdCl: the engine above
//! still plans the reads, coalesces them into vector reads and prefetches.
//!
//! XrdCl's synchronous calls release the GIL while they wait, so each vector read runs on a
//! blocking thread of its own and several are in flight at once (XrdCl sends them together on its
//! connection): a read of many ranges costs one round trip, as natively. Within one request,
//! recovery is XrdCl's (its `XRD_*` settings); each call is given the request timeout. XrdCl finds
//! its credentials and CAs in its own environment (`X509_USER_PROXY`, `X509_CERT_DIR`,
//! `KRB5CCNAME`, ...), not in `ca=` or `token=`.

use bytes::{Bytes, BytesMut};
use cherenkov_core::source::external_credentials;
use cherenkov_core::source::redact::redact;
use cherenkov_core::source::xrootd::external::{
    set_external_opener, ExternalFailure, ExternalOpener,
};
use cherenkov_core::source::xrootd::{error_kind, XrootdOptions};
use cherenkov_core::source::{
    describe_ranges, split_for_limits, ByteRange, ByteSource, SharedSource, SourceLimits,
    SourceReport, Tally,
};
use cherenkov_core::{Error, IoKind, Result};
use futures_util::future::join_all;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What one vector read may carry when the server does not say: XRootD servers' defaults
/// (`readv_iov_max` 1024, `readv_ior_max` 2 MiB - 16). XrdCl sends a vector read as it is given.
const DEFAULT_LIMITS: SourceLimits = SourceLimits {
    max_ranges_per_request: 1024,
    max_range_len: 2_097_136,
    max_request_bytes: 1024 * 2_097_136,
};

/// Make the core read servers asking for `gsi`, `krb5`, ... through XrdCl.
pub fn register() {
    let opener: ExternalOpener = Arc::new(|url, options, offered| {
        let (url, options, offered) = (url.to_string(), options.clone(), offered.to_vec());
        Box::pin(async move {
            let source = XrdclSource::open(url, &options, &offered.join(", "))
                .await
                .map_err(|said| with_reason(said, &offered))?;
            Ok(Arc::new(source) as SharedSource)
        })
    });
    set_external_opener(opener);
}

/// XrdCl's refusal, with the reason when it is a missing or expired credential (XrdCl says only
/// "Auth failed").
fn with_reason(said: ExternalFailure, offered: &[String]) -> ExternalFailure {
    match external_credentials::problem(offered).filter(|_| said.kind == IoKind::Forbidden) {
        Some(problem) => ExternalFailure {
            message: format!("{} ({problem})", said.message),
            ..said
        },
        None => said,
    }
}

/// A file read through XrdCl's `XRootD.client.File`.
pub struct XrdclSource {
    /// The URL without secrets, and that XrdCl reads it: shown in errors and `stats()`.
    name: String,
    file: Arc<Py<PyAny>>,
    size: u64,
    limits: SourceLimits,
    /// XrdCl's per-request timeout, in seconds.
    timeout: u16,
    tally: Tally,
}

impl std::fmt::Debug for XrdclSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XrdclSource")
            .field("name", &self.name)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl XrdclSource {
    /// Open `url` through XrdCl, and ask its server for its vector-read limits at the same time
    /// (XrdCl sends both on its one connection: no round trip more). `offered` is what the
    /// server asked cherenkov for, said in the source's name.
    async fn open(
        url: String,
        options: &XrootdOptions,
        offered: &str,
    ) -> Result<Self, ExternalFailure> {
        let timeout = options.policy.timeout.as_secs().clamp(1, u16::MAX as u64) as u16;
        let opening = {
            let url = url.clone();
            blocking(move |py| open_file(py, &url, timeout))
        };
        let asking = {
            let url = url.clone();
            blocking(move |py| readv_limits(py, &url, timeout))
        };
        let (opened, limits) = futures_util::future::join(opening, asking).await;
        let (file, size) = opened?;
        let limits = limits.unwrap_or(DEFAULT_LIMITS);
        let limits = SourceLimits {
            max_ranges_per_request: limits
                .max_ranges_per_request
                .min(options.readv_iov_max.unwrap_or(usize::MAX)),
            max_range_len: limits
                .max_range_len
                .min(options.readv_ior_max.unwrap_or(u64::MAX)),
            ..limits
        };
        Ok(XrdclSource {
            name: format!(
                "{} (through XrdCl: the server asks for {offered})",
                redact(&url)
            ),
            file: Arc::new(file),
            size,
            limits,
            timeout,
            tally: Tally::default(),
        })
    }
}

/// Run `work` with the GIL on a blocking thread (XrdCl waits there, the GIL released).
async fn blocking<T, F>(work: F) -> Result<T, ExternalFailure>
where
    F: FnOnce(Python<'_>) -> Result<T, ExternalFailure> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(move || Python::attach(work))
        .await
        .map_err(|e| format!("the XrdCl call failed: {e}"))?
}

/// A Python exception as one line.
fn said(e: PyErr) -> String {
    e.to_string()
}

/// XrdCl's status (`XRootDStatus`): `Err` with its message and kind unless it is OK.
fn check(status: &Bound<'_, PyAny>) -> Result<(), ExternalFailure> {
    if status
        .getattr("ok")
        .map_err(said)?
        .is_truthy()
        .map_err(said)?
    {
        return Ok(());
    }
    let message: String = status
        .getattr("message")
        .and_then(|m| m.extract())
        .map_err(said)?;
    let number = |name: &str| status.getattr(name).and_then(|v| v.extract::<u32>()).ok();
    Err(ExternalFailure {
        kind: status_kind(number("code"), number("errno")),
        message: message.trim().to_string(),
    })
}

/// The kind of an XrdCl status: from its code (`XrdClStatus.hh`) and, for an error the server
/// answered (`errErrorResponse`), the server's XRootD error number.
fn status_kind(code: Option<u32>, errno: Option<u32>) -> IoKind {
    const ERR_SOCKET_TIMEOUT: u32 = 103;
    const ERR_LOGIN_FAILED: u32 = 203;
    const ERR_AUTH_FAILED: u32 = 204;
    const ERR_OPERATION_EXPIRED: u32 = 206;
    const ERR_NOT_FOUND: u32 = 304;
    const ERR_ERROR_RESPONSE: u32 = 400;
    match code {
        Some(ERR_NOT_FOUND) => IoKind::NotFound,
        Some(ERR_LOGIN_FAILED | ERR_AUTH_FAILED) => IoKind::Forbidden,
        Some(ERR_SOCKET_TIMEOUT | ERR_OPERATION_EXPIRED) => IoKind::TimedOut,
        Some(ERR_ERROR_RESPONSE) => errno.map_or(IoKind::Other, error_kind),
        _ => IoKind::Other,
    }
}

/// Call XrdCl's `method` (which answers `(status, value)`): its value when the status is OK.
fn xrdcl_call<'py>(
    object: &Bound<'py, PyAny>,
    method: &str,
    args: impl pyo3::call::PyCallArgs<'py>,
    kwargs: &Bound<'py, PyDict>,
) -> Result<Bound<'py, PyAny>, ExternalFailure> {
    let (status, value): (Bound<PyAny>, Bound<PyAny>) = object
        .call_method(method, args, Some(kwargs))
        .and_then(|answer| answer.extract())
        .map_err(said)?;
    check(&status)?;
    Ok(value)
}

fn client(py: Python<'_>) -> Result<Bound<'_, PyModule>, ExternalFailure> {
    // Processes forked after XrdCl started (multiprocessing, Dask) need its fork handler, read
    // when XrdCl starts (uproot sets it too); a value the user chose is kept.
    let environ = py.import("os").and_then(|os| os.getattr("environ"));
    environ
        .and_then(|env| env.call_method1("setdefault", ("XRD_RUNFORKHANDLER", "1")))
        .map_err(said)?;
    py.import("XRootD.client").map_err(|e| {
        ExternalFailure::from(format!(
            "XrdCl's Python bindings cannot be imported ({e}); install them with `pip install \
             xrootd`"
        ))
    })
}

/// The opened `XRootD.client.File` and the file's size.
fn open_file(py: Python<'_>, url: &str, timeout: u16) -> Result<(Py<PyAny>, u64), ExternalFailure> {
    let client = client(py)?;
    let read = client
        .getattr("flags")
        .and_then(|f| f.getattr("OpenFlags"))
        .and_then(|f| f.getattr("READ"))
        .map_err(said)?;
    let file = client
        .getattr("File")
        .and_then(|f| f.call0())
        .map_err(said)?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("timeout", timeout).map_err(said)?;
    xrdcl_call(&file, "open", (url, read), &kwargs)?;
    // The open asked for the file's status: XrdCl answers this from what it kept.
    let info = xrdcl_call(&file, "stat", (), &kwargs)?;
    let size: u64 = info
        .getattr("size")
        .and_then(|s| s.extract())
        .map_err(said)?;
    Ok((file.unbind(), size))
}

/// The server's `readv_iov_max` and `readv_ior_max` (`kXR_query` of its configuration).
fn readv_limits(py: Python<'_>, url: &str, timeout: u16) -> Result<SourceLimits, ExternalFailure> {
    let client = client(py)?;
    let config = client
        .getattr("flags")
        .and_then(|f| f.getattr("QueryCode"))
        .and_then(|f| f.getattr("CONFIG"))
        .map_err(said)?;
    let fs = client
        .getattr("FileSystem")
        .and_then(|f| f.call1((url,)))
        .map_err(said)?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("timeout", timeout).map_err(said)?;
    let answer = xrdcl_call(
        &fs,
        "query",
        (config, "readv_iov_max readv_ior_max"),
        &kwargs,
    )?;
    let answer: Vec<u8> = answer.extract().map_err(said)?;
    let text = String::from_utf8_lossy(&answer);
    let mut values = text.lines().map(|l| l.trim().parse::<u64>().ok());
    let (Some(Some(iov)), Some(Some(ior))) = (values.next(), values.next()) else {
        return Err(format!("unexpected readv limits: {text:?}").into());
    };
    let (iov, ior) = (iov.max(1), ior.max(1));
    Ok(SourceLimits {
        max_ranges_per_request: iov as usize,
        max_range_len: ior,
        // One answer's length must fit the protocol's 32-bit signed field.
        max_request_bytes: iov.saturating_mul(ior).min(i32::MAX as u64),
    })
}

/// One vector read: the buffers of `pieces`, in order, checked against what was asked.
fn vector_read(
    py: Python<'_>,
    file: &Py<PyAny>,
    pieces: &[ByteRange],
    timeout: u16,
) -> Result<Vec<Bytes>, ExternalFailure> {
    let chunks = PyList::new(py, pieces.iter().map(|p| (p.offset, p.len))).map_err(said)?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("chunks", chunks).map_err(said)?;
    kwargs.set_item("timeout", timeout).map_err(said)?;
    let info = xrdcl_call(file.bind(py), "vector_read", (), &kwargs)?;
    let chunks = info.getattr("chunks").map_err(said)?;
    let chunks = chunks
        .cast::<PyList>()
        .map_err(|e| ExternalFailure::from(e.to_string()))?;
    if chunks.len() != pieces.len() {
        return Err(format!(
            "XrdCl answered {} chunks for {} asked",
            chunks.len(),
            pieces.len()
        )
        .into());
    }
    chunks
        .iter()
        .zip(pieces)
        .map(|(chunk, piece)| {
            let offset: u64 = chunk
                .getattr("offset")
                .and_then(|o| o.extract())
                .map_err(said)?;
            let buffer = chunk.getattr("buffer").map_err(said)?;
            let buffer = buffer
                .cast::<PyBytes>()
                .map_err(|e| ExternalFailure::from(e.to_string()))?;
            let data = buffer.as_bytes();
            if offset != piece.offset || data.len() as u64 != piece.len {
                return Err(format!(
                    "XrdCl answered {} bytes at {offset} for range {}..{}",
                    data.len(),
                    piece.offset,
                    piece.end()
                )
                .into());
            }
            Ok(Bytes::copy_from_slice(data))
        })
        .collect()
}

#[async_trait::async_trait]
impl ByteSource for XrdclSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn size(&self) -> u64 {
        self.size
    }

    async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        let asked: Vec<ByteRange> = ranges.iter().copied().filter(|r| r.len > 0).collect();
        if let Some(r) = asked.iter().find(|r| r.end() > self.size) {
            return Err(Error::io(
                &self.name,
                format!(
                    "range {}..{} is past the end of the file ({} bytes)",
                    r.offset,
                    r.end(),
                    self.size
                ),
            ));
        }
        let requests = split_for_limits(&asked, &self.limits);
        let reads = requests.iter().map(|pieces| {
            let (file, pieces, timeout) = (self.file.clone(), pieces.clone(), self.timeout);
            blocking(move |py| vector_read(py, &file, &pieces, timeout))
        });
        let tally = &self.tally;
        tally
            .requests
            .fetch_add(requests.len() as u64, Ordering::Relaxed);
        tally.round_trips.fetch_add(1, Ordering::Relaxed);
        let answers = join_all(reads).await;
        let mut buffers = Vec::new();
        for (answer, pieces) in answers.into_iter().zip(&requests) {
            let read = answer.map_err(|failed| {
                Error::io_of(
                    failed.kind,
                    &self.name,
                    format!(
                        "vector read of {} failed: {}",
                        describe_ranges(pieces),
                        failed.message
                    ),
                )
            })?;
            tally
                .ranges
                .fetch_add(pieces.len() as u64, Ordering::Relaxed);
            let bytes: u64 = pieces.iter().map(|p| p.len).sum();
            tally.bytes.fetch_add(bytes, Ordering::Relaxed);
            buffers.extend(read);
        }
        // Ranges longer than a vector-read element came back in pieces, one after another.
        let mut pieces = buffers.into_iter();
        let max = self.limits.max_range_len.max(1);
        Ok(ranges
            .iter()
            .map(|r| match r.len.div_ceil(max) {
                0 => Bytes::new(),
                1 => pieces.next().unwrap_or_default(),
                n => {
                    let mut joined = BytesMut::with_capacity(r.len as usize);
                    pieces
                        .by_ref()
                        .take(n as usize)
                        .for_each(|p| joined.extend_from_slice(&p));
                    joined.freeze()
                }
            })
            .collect())
    }

    fn limits(&self) -> SourceLimits {
        self.limits
    }

    fn report(&self) -> SourceReport {
        SourceReport {
            counters: self.tally.counters(),
            ..SourceReport::default()
        }
    }
}
