//! `RootFile`: opening a file (or replicas of one) and what its source and engine counted.

use crate::errors::to_py;
use crate::metadata::FileMetadata;
use crate::ntuple::Ntuple;
use crate::options::open_options;
use crate::raw::{buffers_to_py, checked_ranges};
use crate::tree::Tree;
use cherenkov_core::engine::file::RootFile as CoreFile;
use cherenkov_core::engine::raw::RawReads;
use cherenkov_core::engine::runtime;
use cherenkov_core::engine::stats::StatsSnapshot;
use cherenkov_core::source::multi::ReplicaReport;
use cherenkov_core::source::SourceCounters;
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::{Arc, OnceLock};

/// An open ROOT file.
#[pyclass(module = "cherenkov._core", frozen)]
pub struct RootFile {
    inner: Arc<CoreFile>,
    /// Its raw reads, made on the first (see `read_ranges`).
    raw: OnceLock<RawReads>,
}

#[pymethods]
impl RootFile {
    /// Open a path or URL, or replicas of one file, with `cherenkov.open`'s options; with the
    /// `metadata` an earlier open learned, without reading it again.
    #[staticmethod]
    #[pyo3(signature = (urls, metadata=None, **options))]
    fn open(
        py: Python<'_>,
        urls: Vec<String>,
        metadata: Option<&FileMetadata>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let options = open_options(options)?;
        let known = metadata.map(|m| (*m.inner).clone());
        let inner = py
            .detach(|| {
                runtime().block_on(async {
                    match known {
                        Some(known) => CoreFile::open_known(&urls, &options, known).await,
                        None => CoreFile::open_replicas(&urls, &options).await,
                    }
                })
            })
            .map_err(to_py)?;
        Ok(Self {
            inner: Arc::new(inner),
            raw: OnceLock::new(),
        })
    }

    #[getter]
    fn name(&self) -> String {
        self.inner.name().to_string()
    }
    #[getter]
    fn size(&self) -> u64 {
        self.inner.size
    }
    /// Requests made since opening began (the connection's own requests excluded).
    #[getter]
    fn requests_since_open(&self) -> u64 {
        self.inner.requests()
    }

    /// Read byte ranges `[(start, stop), ...]` for a reader that decodes ROOT itself (uproot), in
    /// at most one request through the file's source (replicas, retries and counters included):
    /// metadata the engine read is served from memory, and baskets are learned and read ahead
    /// as `engine::raw` says (unless opened with `speculate=False`). One read-only uint8 numpy
    /// array per range, over the engine's buffer (no copy).
    fn read_ranges<'py>(
        &self,
        py: Python<'py>,
        ranges: Vec<(u64, u64)>,
    ) -> PyResult<Bound<'py, pyo3::types::PyList>> {
        let ranges = checked_ranges(self.inner.name(), &ranges, self.inner.size)?;
        let raw = self.raw.get_or_init(|| RawReads::new(self.inner.clone()));
        let buffers = py
            .detach(|| runtime().block_on(raw.read_ranges(&ranges)))
            .map_err(to_py)?;
        buffers_to_py(py, buffers)
    }

    /// The reader of raw bytes closed the file: baskets held for it are dropped.
    fn close_raw(&self) {
        if let Some(raw) = self.raw.get() {
            raw.close();
        }
    }

    /// What raw reads of this file's trees taught, per tree name: the learned set of its
    /// layout's profile (shared by every file of the process whose tree is laid out alike).
    fn learned(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        self.raw.get().map(RawReads::learned).unwrap_or_default()
    }

    /// What opening this file and finding its trees and RNTuples so far read, for opening it
    /// again elsewhere without those reads (`open(urls, metadata=...)`).
    fn metadata(&self) -> FileMetadata {
        FileMetadata {
            inner: std::sync::Arc::new(self.inner.snapshot()),
        }
    }

    /// The engine's counters since opening (times in seconds).
    fn engine_counters(&self) -> StatsSnapshot {
        self.inner.stats.snapshot()
    }

    /// A dataset begins reading this file: its read-ahead steps decode after those of the files
    /// it began before, and before those of files it only reads ahead.
    fn begin_reading(&self) {
        self.inner.order.begin();
    }

    /// Requests, round trips, ranges and bytes the file's source has served so far.
    fn source_counters(&self) -> SourceCounters {
        self.inner.source.report().counters
    }

    /// The recorded requests (when opened with trace=True): columns of a table, one row per range.
    fn trace<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(events) = self.inner.trace.as_ref().map(|t| t.events()) else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item(
            "request",
            events
                .iter()
                .map(|e| e.request)
                .collect::<Vec<_>>()
                .into_pyarray(py),
        )?;
        d.set_item(
            "offset",
            events
                .iter()
                .map(|e| e.offset)
                .collect::<Vec<_>>()
                .into_pyarray(py),
        )?;
        d.set_item(
            "length",
            events
                .iter()
                .map(|e| e.len)
                .collect::<Vec<_>>()
                .into_pyarray(py),
        )?;
        d.set_item(
            "sent",
            events
                .iter()
                .map(|e| e.sent.as_secs_f64())
                .collect::<Vec<_>>()
                .into_pyarray(py),
        )?;
        d.set_item(
            "answered",
            events
                .iter()
                .map(|e| e.answered.as_secs_f64())
                .collect::<Vec<_>>()
                .into_pyarray(py),
        )?;
        d.set_item(
            "ok",
            events
                .iter()
                .map(|e| e.ok)
                .collect::<Vec<_>>()
                .into_pyarray(py),
        )?;
        Ok(Some(d))
    }

    /// Per-replica reports when the file was opened from several replicas, else None.
    fn replicas(&self) -> Option<Vec<ReplicaReport>> {
        self.inner.source.report().replicas
    }

    /// The throughput steps that set the number of connections (requests in flight over HTTP):
    /// `StreamStep(streams, bytes, seconds, throughput, decision)`; empty with
    /// `adaptive_streams=False` or before enough bytes were read to measure.
    fn stream_steps(&self) -> Vec<cherenkov_core::source::adaptive::StreamStep> {
        self.inner.source.report().stream_steps
    }

    /// The checksum the server keeps for the file (`adler32 0a1b2c3d`; for replicas checked with
    /// `verify_checksums`, the one they agree on), or None where the protocol cannot tell.
    fn checksum(&self, py: Python<'_>) -> PyResult<Option<String>> {
        py.detach(|| runtime().block_on(self.inner.source.checksum()))
            .map_err(to_py)
    }

    #[getter]
    fn format_version(&self) -> i32 {
        self.inner.header.version
    }
    #[getter]
    fn compression(&self) -> i32 {
        self.inner.header.compress
    }
    /// The version of the file its source saw when opening it (a modification time, an ETag or
    /// Last-Modified), if the source tells one.
    #[getter]
    fn version(&self) -> Option<String> {
        self.inner.version.clone()
    }
    #[getter]
    fn streamer_classes(&self, py: Python<'_>) -> Vec<(String, i32)> {
        py.detach(|| runtime().block_on(self.inner.streamers()))
            .iter()
            .map(|s| (s.class_name.clone(), s.class_version))
            .collect()
    }

    /// All keys: (path, cycle, class name, title), subdirectories included.
    fn keys(&self, py: Python<'_>) -> PyResult<Vec<(String, i16, String, String)>> {
        let keys = py
            .detach(|| runtime().block_on(self.inner.all_keys()))
            .map_err(to_py)?;
        Ok(keys
            .into_iter()
            .map(|(p, k)| (p, k.cycle, k.class_name, k.title))
            .collect())
    }

    /// Where each key and its object lie: (path, cycle, class name, seek, bytes), and the
    /// streamer infos as ("StreamerInfo", seek, bytes): for `cherenkov layout`.
    fn key_locations(&self, py: Python<'_>) -> PyResult<Vec<KeyLocation>> {
        let keys = py
            .detach(|| runtime().block_on(self.inner.all_keys()))
            .map_err(to_py)?;
        let header = &self.inner.header;
        let info = (
            "StreamerInfo".to_string(),
            1,
            "TList".to_string(),
            header.seek_info,
            header.info_bytes,
        );
        Ok(keys
            .into_iter()
            .map(|(p, k)| (p, k.cycle, k.class_name, k.seek_key, k.nbytes))
            .chain(std::iter::once(info))
            .collect())
    }

    fn ntuple(&self, py: Python<'_>, path: String) -> PyResult<Py<Ntuple>> {
        let file = self.inner.clone();
        let ntuple = py
            .detach(|| {
                runtime().block_on(cherenkov_core::engine::ntuple::Ntuple::open(file, &path))
            })
            .map_err(to_py)?;
        Py::new(py, Ntuple::new(ntuple))
    }

    fn tree(&self, py: Python<'_>, path: String) -> PyResult<Py<Tree>> {
        let meta = py
            .detach(|| runtime().block_on(self.inner.tree(&path)))
            .map_err(to_py)?;
        Py::new(py, Tree::new(self.inner.clone(), meta))
    }
}

/// A key's path, cycle, class name, seek and bytes.
type KeyLocation = (String, i16, String, u64, u32);

/// The data servers (`host:port`) that a `root://` URL's server names for its file
/// (`kXR_locate`): a redirector names its data servers, a data server itself.
#[pyfunction]
#[pyo3(signature = (url, timeout=None))]
pub fn locate(py: Python<'_>, url: String, timeout: Option<f64>) -> PyResult<Vec<String>> {
    let mut options = cherenkov_core::source::xrootd::XrootdOptions::default();
    if let Some(t) = timeout {
        let mut given = cherenkov_core::engine::options::OpenOptions::default();
        let seconds = cherenkov_core::engine::options::OptionValue::Number(t);
        given
            .set("timeout", seconds)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        options.policy = options.policy.overridden_by(&given.source.request);
    }
    py.detach(|| runtime().block_on(cherenkov_core::source::xrootd::locate(&url, &options)))
        .map_err(to_py)
}

/// The entries of the directory a `root://` URL names, from one `kXR_dirlist`, with `open`'s
/// options: (name, size, version, is_dir), the version as an open of the file reports it
/// (`RawSource.version`).
#[pyfunction]
#[pyo3(signature = (url, **options))]
pub fn list_directory(
    py: Python<'_>,
    url: String,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Vec<(String, u64, String, bool)>> {
    let options = open_options(options)?;
    let listing = cherenkov_core::source::list_directory(&url, &options.source);
    let entries = py.detach(|| runtime().block_on(listing)).map_err(to_py)?;
    let version = cherenkov_core::source::xrootd::version_of;
    Ok(entries
        .into_iter()
        .map(|e| (e.name, e.size, version(e.modified), e.is_dir))
        .collect())
}

/// `text` with the secrets of any URL in it (passwords, tokens, `authz=`) replaced by `***`:
/// what `File.path`, messages and reports show.
#[pyfunction]
pub fn redact(text: &str) -> String {
    cherenkov_core::source::redact::redact(text)
}

/// Forget what raw reads learned per tree layout in this process: the next files are read as if
/// they were the first (a new analysis in the same process).
#[pyfunction]
pub fn forget_layouts() {
    cherenkov_core::engine::raw::layouts::forget();
}
