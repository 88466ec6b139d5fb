//! Raw byte ranges for readers that decode ROOT themselves (uproot's source, fsspec; see
//! `engine::raw`): each range crosses into Python as a read-only numpy array over the engine's
//! own buffer, without a copy.

use crate::errors::to_py;
use crate::options::open_options;
use bytes::Bytes;
use cherenkov_core::engine::raw::RawFile;
use cherenkov_core::engine::runtime;
use cherenkov_core::engine::stats::StatsSnapshot;
use cherenkov_core::source::{open_replicas, ByteRange, SourceCounters};
use numpy::ndarray::ArrayView1;
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// Owns the bytes a numpy array points into; the array keeps it alive as its base.
#[pyclass(module = "cherenkov._core", frozen)]
pub struct ByteBuffer {
    data: Bytes,
}

#[pymethods]
impl ByteBuffer {
    fn __len__(&self) -> usize {
        self.data.len()
    }
}

/// One read-only uint8 numpy array per buffer, each viewing the buffer's memory.
pub fn buffers_to_py(py: Python<'_>, buffers: Vec<Bytes>) -> PyResult<Bound<'_, PyList>> {
    let arrays = buffers
        .into_iter()
        .map(|data| {
            let owner = Bound::new(py, ByteBuffer { data })?;
            let view = ArrayView1::from(&owner.get().data[..]);
            // SAFETY: `owner` becomes the array's base, so the bytes live as long as the array;
            // `Bytes` never moves or reallocates its memory. The array is made read-only below,
            // since other readers (the metadata cache) may share the same memory.
            let array =
                unsafe { PyArray1::<u8>::borrow_from_array(&view, owner.clone().into_any()) };
            array.getattr("flags")?.setattr("writeable", false)?;
            Ok(array)
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, arrays)
}

/// Any file's bytes (not only ROOT's) through a byte source: for fsspec. A ROOT file is read as
/// `RootFile.read_ranges` reads it (learned baskets); other reads that are sequential or strided
/// are read ahead (see `engine::raw`; both off with `speculate=False`).
#[pyclass(module = "cherenkov._core", frozen)]
pub struct RawSource {
    inner: RawFile,
    size: u64,
    version: Option<String>,
}

#[pymethods]
impl RawSource {
    /// Open a path or URL, or replicas of one file (as `RootFile.open`, without ROOT's opening).
    #[staticmethod]
    #[pyo3(signature = (urls, **options))]
    fn open(
        py: Python<'_>,
        urls: Vec<String>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let options = open_options(options)?;
        let opened = py
            .detach(|| runtime().block_on(open_replicas(&urls, &options.source)))
            .map_err(to_py)?;
        let (size, version) = (opened.source.size(), opened.version.clone());
        Ok(Self {
            inner: RawFile::new(opened, options),
            size,
            version,
        })
    }

    #[getter]
    fn name(&self) -> String {
        self.inner.plain().source().name().to_string()
    }
    #[getter]
    fn size(&self) -> u64 {
        self.size
    }
    /// The file's version as its source saw it when opening (as `RootFile.version`).
    #[getter]
    fn version(&self) -> Option<String> {
        self.version.clone()
    }

    /// Read byte ranges `[(start, stop), ...]` as one vectored request; arrays as `RootFile`'s.
    fn read_ranges<'py>(
        &self,
        py: Python<'py>,
        ranges: Vec<(u64, u64)>,
    ) -> PyResult<Bound<'py, PyList>> {
        let ranges = checked_ranges(self.inner.plain().source().name(), &ranges, self.size)?;
        let buffers = py
            .detach(|| runtime().block_on(self.inner.read_ranges(&ranges)))
            .map_err(to_py)?;
        buffers_to_py(py, buffers)
    }

    fn source_counters(&self) -> SourceCounters {
        self.inner.plain().source().report().counters
    }

    /// The read-ahead's counters: `speculative_bytes`, `speculative_used_bytes`,
    /// `speculative_wasted_bytes`, `cache_hits` (ranges or baskets served from read-ahead) and
    /// `cache_misses` (read on demand); for a ROOT file also its learning's fetches.
    fn engine_counters(&self) -> StatsSnapshot {
        let root = self.inner.root().map(|r| r.file().stats.snapshot());
        self.inner.plain().stats.snapshot() + root.unwrap_or_default()
    }
}

/// `(start, stop)` pairs as byte ranges, refused when one ends before it starts or past `size`.
pub fn checked_ranges(name: &str, ranges: &[(u64, u64)], size: u64) -> PyResult<Vec<ByteRange>> {
    ranges
        .iter()
        .map(|&(start, stop)| {
            if start > stop || stop > size {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "{name}: range ({start}, {stop}) is not inside the file of {size} bytes"
                )));
            }
            Ok(ByteRange::new(start, stop - start))
        })
        .collect()
}
