//! Python bindings: hand core results to numpy without copies, release the GIL for all I/O and
//! decompression, and turn core errors into Python exceptions.

use cherenkov_core::engine::file::RootFile as CoreFile;
use cherenkov_core::engine::lazy::{AccessProfile as CoreProfile, LazyOptions, LazyReader};
use cherenkov_core::engine::output::{BranchArray, ReadStats};
use cherenkov_core::engine::prefetch::{PrefetchOptions, StepReader};
use cherenkov_core::engine::read::read_branches;
use cherenkov_core::engine::runtime;
use cherenkov_core::format::interpretation::{interpret, Interpretation};
use cherenkov_core::format::tree::TreeMeta;
use cherenkov_core::source::SourceOptions;
use cherenkov_core::Error;
use numpy::IntoPyArray;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::Arc;

create_exception!(
    _core,
    CherenkovError,
    PyException,
    "Base of all cherenkov errors."
);
create_exception!(
    _core,
    FormatError,
    CherenkovError,
    "The file is not valid ROOT where it was read."
);
create_exception!(
    _core,
    SourceError,
    CherenkovError,
    "The bytes could not be read (file, server, network)."
);
create_exception!(
    _core,
    UnsupportedBranch,
    CherenkovError,
    "The branch's type cannot be interpreted."
);
create_exception!(
    _core,
    NotFoundError,
    CherenkovError,
    "No such object, tree or branch."
);

fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::Format { .. } => FormatError::new_err(msg),
        Error::Io { .. } => SourceError::new_err(msg),
        Error::UnsupportedBranch { .. } => UnsupportedBranch::new_err(msg),
        Error::NotFound { .. } => NotFoundError::new_err(msg),
        Error::InvalidArgument(_) => pyo3::exceptions::PyValueError::new_err(msg),
    }
}

/// An open ROOT file.
#[pyclass(module = "cherenkov._core", frozen)]
struct RootFile {
    inner: Arc<CoreFile>,
}

#[pymethods]
impl RootFile {
    #[staticmethod]
    #[pyo3(signature = (urls, connections=None, timeout=None, retries=None, trace=false, discover=true, verify_checksums=false))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn open(
        py: Python<'_>,
        urls: Vec<String>,
        connections: Option<usize>,
        timeout: Option<f64>,
        retries: Option<u32>,
        trace: bool,
        discover: bool,
        verify_checksums: bool,
    ) -> PyResult<Self> {
        let timeout = match timeout {
            Some(t) if !(t.is_finite() && t > 0.0) => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "timeout must be a positive number of seconds",
                ))
            }
            t => t.map(std::time::Duration::from_secs_f64),
        };
        if connections == Some(0) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "connections must be at least 1",
            ));
        }
        let options = SourceOptions {
            connections,
            timeout,
            retries,
            trace,
            discover: Some(discover),
            verify_checksums,
        };
        let inner = py
            .detach(|| runtime().block_on(CoreFile::open_replicas(&urls, &options)))
            .map_err(to_py)?;
        Ok(Self {
            inner: Arc::new(inner),
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

    /// The engine's accumulated counters and the source's, as one dict (times in seconds).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let e = self.inner.stats.snapshot();
        let c = self.inner.source.counters();
        let d = PyDict::new(py);
        d.set_item("source", self.inner.name())?;
        d.set_item("read_calls", e.read_calls)?;
        d.set_item("baskets", e.baskets)?;
        d.set_item("compressed_bytes", e.compressed_bytes)?;
        d.set_item("uncompressed_bytes", e.uncompressed_bytes)?;
        d.set_item("fetch_seconds", e.fetch_time.as_secs_f64())?;
        d.set_item("decompress_wall_seconds", e.decompress_wall.as_secs_f64())?;
        d.set_item("decompress_cpu_seconds", e.decompress_cpu.as_secs_f64())?;
        d.set_item("blocked_seconds", e.blocked_time.as_secs_f64())?;
        d.set_item("prefetched_steps", e.prefetched_steps)?;
        d.set_item("cache_hits", e.cache_hits)?;
        d.set_item("cache_misses", e.cache_misses)?;
        d.set_item("miss_fetches", e.miss_fetches)?;
        d.set_item("startup_fetches", e.startup_fetches)?;
        d.set_item("learned_fetches", e.learned_fetches)?;
        d.set_item("unused_bytes", e.unused_bytes)?;
        d.set_item("requests", c.requests)?;
        d.set_item("round_trips", c.round_trips)?;
        d.set_item("ranges", c.ranges)?;
        d.set_item("bytes_read", c.bytes)?;
        Ok(d)
    }

    /// The recorded requests (when opened with trace=True): columns of a table, one row per range.
    fn trace<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(events) = self.inner.source.trace() else {
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
    fn replicas<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        let Some(reports) = self.inner.source.replicas() else {
            return Ok(None);
        };
        let out = PyList::empty(py);
        for r in reports {
            let d = PyDict::new(py);
            d.set_item("name", r.name)?;
            d.set_item("requests", r.requests)?;
            d.set_item("bytes", r.bytes)?;
            d.set_item("errors", r.errors)?;
            d.set_item("hedges_won", r.hedges_won)?;
            d.set_item("probes", r.probes)?;
            d.set_item("latency_seconds", r.quality.latency)?;
            d.set_item("throughput_bytes_per_second", r.quality.throughput)?;
            d.set_item("samples", r.quality.samples)?;
            d.set_item("disabled", r.disabled)?;
            d.set_item("last_error", r.last_error)?;
            out.append(d)?;
        }
        Ok(Some(out))
    }

    /// The checksum the server keeps for the file (`adler32 0a1b2c3d`; for replicas checked with
    /// `verify_checksums`, the one they agree on), or None where the protocol cannot tell.
    fn checksum(&self, py: Python<'_>) -> PyResult<Option<String>> {
        py.detach(|| runtime().block_on(self.inner.source.checksum()))
            .map_err(to_py)
    }

    /// Requests, round trips, ranges and bytes the file's source has served so far.
    fn source_counters(&self) -> (u64, u64, u64, u64) {
        let c = self.inner.source.counters();
        (c.requests, c.round_trips, c.ranges, c.bytes)
    }

    #[getter]
    fn format_version(&self) -> i32 {
        self.inner.header.version
    }
    #[getter]
    fn compression(&self) -> i32 {
        self.inner.header.compress
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

    fn tree(&self, py: Python<'_>, path: String) -> PyResult<Tree> {
        let meta = py
            .detach(|| runtime().block_on(self.inner.tree(&path)))
            .map_err(to_py)?;
        Ok(Tree {
            file: self.inner.clone(),
            meta: Arc::new(meta),
        })
    }
}

/// A TTree's metadata, and reads of its branches.
#[pyclass(module = "cherenkov._core", frozen)]
struct Tree {
    file: Arc<CoreFile>,
    meta: Arc<TreeMeta>,
}

fn kind(i: &Interpretation) -> &'static str {
    match i {
        Interpretation::Fixed { .. } => "fixed",
        Interpretation::Jagged { .. } => "jagged",
        Interpretation::Strings { .. } => "strings",
        Interpretation::Record { .. } => "record",
    }
}

#[pymethods]
impl Tree {
    #[getter]
    fn name(&self) -> String {
        self.meta.name.clone()
    }
    #[getter]
    fn title(&self) -> String {
        self.meta.title.clone()
    }
    #[getter]
    fn num_entries(&self) -> u64 {
        self.meta.entries
    }

    /// Entry boundaries of the clusters: [0, ..., num_entries].
    fn cluster_boundaries(&self) -> Vec<u64> {
        self.meta.cluster_boundaries()
    }

    /// One dict per branch (depth first), with its type and sizes.
    fn branches<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for (i, b) in self.meta.branches.iter().enumerate() {
            let d = PyDict::new(py);
            d.set_item("index", i)?;
            d.set_item("name", &b.name)?;
            d.set_item("path", self.meta.branch_path(i))?;
            d.set_item("parent", b.parent)?;
            d.set_item("class", &b.class)?;
            d.set_item("title", &b.title)?;
            d.set_item("entries", b.entries)?;
            d.set_item("compressed_bytes", b.compressed_bytes())?;
            d.set_item("uncompressed_bytes", b.uncompressed_bytes())?;
            d.set_item("num_baskets", b.num_baskets())?;
            d.set_item("compression", b.compress)?;
            d.set_item(
                "basket_entry_starts",
                b.baskets.iter().map(|l| l.entry_start).collect::<Vec<_>>(),
            )?;
            d.set_item(
                "basket_seeks",
                b.baskets.iter().map(|l| l.seek).collect::<Vec<_>>(),
            )?;
            match interpret(&self.meta, i, self.file.streamers_read()) {
                Ok(interp) => {
                    d.set_item("typename", interp.typename())?;
                    d.set_item("kind", kind(&interp))?;
                    d.set_item("unsupported", py.None())?;
                }
                Err(u) => {
                    d.set_item("typename", u.typename)?;
                    d.set_item("kind", "unsupported")?;
                    d.set_item("unsupported", u.reason)?;
                }
            }
            list.append(d)?;
        }
        Ok(list)
    }

    /// Read branches (by index) over [start, stop). Returns (arrays, stats): one dict per branch
    /// with its columns' buffers as numpy arrays.
    fn read<'py>(
        &self,
        py: Python<'py>,
        indices: Vec<usize>,
        start: u64,
        stop: u64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        if let Some(&bad) = indices.iter().find(|&&i| i >= self.meta.branches.len()) {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "no branch number {bad}"
            )));
        }
        let (arrays, stats) = py
            .detach(|| {
                runtime().block_on(read_branches(&self.file, &self.meta, &indices, start, stop))
            })
            .map_err(to_py)?;
        PyTuple::new(
            py,
            [
                arrays_to_py(py, arrays)?.into_any(),
                stats_to_py(py, &stats)?.into_any(),
            ],
        )
    }

    /// Read branches over consecutive entry ranges with the next ones prefetched and decompressed
    /// while the current one is used. Yields (start, stop, arrays, stats).
    #[pyo3(signature = (indices, steps, memory_budget=256 << 20, max_steps_ahead=4))]
    fn iterate(
        &self,
        indices: Vec<usize>,
        steps: Vec<(u64, u64)>,
        memory_budget: u64,
        max_steps_ahead: usize,
    ) -> PyResult<StepIterator> {
        if let Some(&bad) = indices.iter().find(|&&i| i >= self.meta.branches.len()) {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "no branch number {bad}"
            )));
        }
        let _in_runtime = runtime().enter();
        let options = PrefetchOptions {
            memory_budget,
            max_steps_ahead,
        };
        let reader = StepReader::start(
            self.file.clone(),
            self.meta.clone(),
            indices,
            steps,
            options,
        )
        .map_err(to_py)?;
        Ok(StepIterator {
            reader: std::sync::Mutex::new(Some(reader)),
        })
    }

    /// Lazy chunks over `steps` that learn what is used (see `engine::lazy`).
    #[pyo3(signature = (steps, profile, prefetch=true, learning=true, memory_budget=256 << 20, max_steps_ahead=4, startup_bytes=64 << 20))]
    #[allow(clippy::too_many_arguments)]
    fn chunks(
        &self,
        steps: Vec<(u64, u64)>,
        profile: &AccessProfile,
        prefetch: bool,
        learning: bool,
        memory_budget: u64,
        max_steps_ahead: usize,
        startup_bytes: u64,
    ) -> LazyChunks {
        let options = LazyOptions {
            prefetch: PrefetchOptions {
                memory_budget,
                max_steps_ahead,
            },
            prefetch_enabled: prefetch,
            learning,
            startup_bytes,
        };
        let reader = LazyReader::new(
            self.file.clone(),
            self.meta.clone(),
            steps,
            profile.inner.clone(),
            options,
        );
        LazyChunks {
            reader: std::sync::Mutex::new(reader),
        }
    }
}

/// Which branches an analysis uses; pass the same profile to the chunks of every file of a dataset.
#[pyclass(module = "cherenkov._core", frozen)]
struct AccessProfile {
    inner: Arc<CoreProfile>,
}

#[pymethods]
impl AccessProfile {
    #[new]
    fn new() -> Self {
        Self {
            inner: Arc::new(CoreProfile::default()),
        }
    }
    #[getter]
    fn trained(&self) -> bool {
        self.inner.snapshot().trained
    }
    #[getter]
    fn learned(&self) -> Vec<String> {
        self.inner.snapshot().learned.into_iter().collect()
    }
    #[getter]
    fn missed(&self) -> Vec<String> {
        self.inner.snapshot().missed.into_iter().collect()
    }
}

/// Lazy chunks: `advance()` to the next chunk, `get(index)` a branch of it.
#[pyclass(module = "cherenkov._core", frozen)]
struct LazyChunks {
    reader: std::sync::Mutex<LazyReader>,
}

#[pymethods]
impl LazyChunks {
    fn advance(&self, py: Python<'_>) -> PyResult<Option<(u64, u64)>> {
        py.detach(|| runtime().block_on(self.reader.lock().unwrap().advance()))
            .map_err(to_py)
    }

    fn get<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Bound<'py, PyDict>> {
        let array = py
            .detach(|| runtime().block_on(self.reader.lock().unwrap().get(index)))
            .map_err(to_py)?;
        branch_to_py(py, array)
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.reader.lock().unwrap().stats;
        let d = PyDict::new(py);
        d.set_item("hits", s.hits)?;
        d.set_item("misses", s.misses)?;
        d.set_item("miss_fetches", s.miss_fetches)?;
        d.set_item("startup_fetches", s.startup_fetches)?;
        d.set_item("learned_fetches", s.learned_fetches)?;
        Ok(d)
    }
}

/// The steps of `Tree.iterate`; dropping it cancels the reads in flight.
#[pyclass(module = "cherenkov._core", frozen)]
struct StepIterator {
    reader: std::sync::Mutex<Option<StepReader>>,
}

#[pymethods]
impl StepIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let next = py.detach(|| {
            let mut guard = self.reader.lock().unwrap();
            let reader = guard.as_mut()?;
            let out = runtime().block_on(reader.next());
            if out.is_none() {
                *guard = None;
            }
            out
        });
        let Some(step) = next else { return Ok(None) };
        let step = step.map_err(to_py)?;
        let stats = stats_to_py(py, &step.stats)?;
        let blocked = self
            .reader
            .lock()
            .unwrap()
            .as_ref()
            .map_or(0.0, |r| r.blocked.as_secs_f64());
        stats.set_item("blocked_seconds_total", blocked)?;
        let arrays = arrays_to_py(py, step.arrays)?;
        Ok(Some(PyTuple::new(
            py,
            [
                step.start.into_pyobject(py)?.into_any(),
                step.stop.into_pyobject(py)?.into_any(),
                arrays.into_any(),
                stats.into_any(),
            ],
        )?))
    }

    /// Stop and cancel what is in flight.
    fn close(&self) {
        self.reader.lock().unwrap().take();
    }
}

fn arrays_to_py(py: Python<'_>, arrays: Vec<BranchArray>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for a in arrays {
        out.append(branch_to_py(py, a)?)?;
    }
    Ok(out)
}

fn stats_to_py<'py>(py: Python<'py>, stats: &ReadStats) -> PyResult<Bound<'py, PyDict>> {
    let s = PyDict::new(py);
    s.set_item("baskets", stats.baskets)?;
    s.set_item("compressed_bytes", stats.compressed_bytes)?;
    s.set_item("uncompressed_bytes", stats.uncompressed_bytes)?;
    s.set_item("fetch_seconds", stats.fetch_time.as_secs_f64())?;
    s.set_item("decode_seconds", stats.decode_time.as_secs_f64())?;
    Ok(s)
}

fn branch_to_py(py: Python<'_>, a: BranchArray) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("branch", &a.branch)?;
    d.set_item("kind", kind(&a.interpretation))?;
    d.set_item("entries", a.entries)?;
    let cols = PyList::empty(py);
    for c in a.columns {
        let cd = PyDict::new(py);
        cd.set_item("name", c.name)?;
        cd.set_item("dtype", c.dtype.name())?;
        cd.set_item("inner_shape", PyTuple::new(py, c.inner_shape)?)?;
        cd.set_item("nbytes", c.content.len)?;
        cd.set_item("words", c.content.words.into_pyarray(py))?;
        cd.set_item("offsets", c.offsets.map(|o| o.into_pyarray(py)))?;
        cd.set_item("is_string", c.is_string)?;
        cols.append(cd)?;
    }
    d.set_item("columns", cols)?;
    Ok(d)
}

/// The data servers (`host:port`) that a `root://` URL's server names for its file
/// (`kXR_locate`): a redirector names its data servers, a data server itself.
#[pyfunction]
#[pyo3(signature = (url, timeout=None))]
fn locate(py: Python<'_>, url: String, timeout: Option<f64>) -> PyResult<Vec<String>> {
    let mut options = cherenkov_core::source::xrootd::XrootdOptions::default();
    match timeout {
        Some(t) if !(t.is_finite() && t > 0.0) => {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "timeout must be a positive number of seconds",
            ))
        }
        Some(t) => options.request_timeout = std::time::Duration::from_secs_f64(t),
        None => {}
    }
    py.detach(|| runtime().block_on(cherenkov_core::source::xrootd::locate(&url, &options)))
        .map_err(to_py)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(locate, m)?)?;
    m.add_class::<RootFile>()?;
    m.add_class::<Tree>()?;
    m.add_class::<StepIterator>()?;
    m.add_class::<AccessProfile>()?;
    m.add_class::<LazyChunks>()?;
    let py = m.py();
    m.add("CherenkovError", py.get_type::<CherenkovError>())?;
    m.add("FormatError", py.get_type::<FormatError>())?;
    m.add("SourceError", py.get_type::<SourceError>())?;
    m.add("UnsupportedBranch", py.get_type::<UnsupportedBranch>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
