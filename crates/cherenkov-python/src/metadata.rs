//! `FileMetadata`: what opening a file learned (`engine::file::MetadataSnapshot`), as bytes that
//! pickle, for `RootFile.open(urls, metadata=...)` in another process.

use crate::errors::to_py;
use cherenkov_core::engine::file::MetadataSnapshot;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::sync::Arc;

/// What opening a file learned: its size and version, and the metadata regions parsed (header,
/// keys, trees, streamer infos, RNTuple envelopes). `cherenkov.open(url, metadata=m)` opens the
/// file again without reading any of them.
#[pyclass(module = "cherenkov._core", frozen)]
pub struct FileMetadata {
    pub inner: Arc<MetadataSnapshot>,
}

#[pymethods]
impl FileMetadata {
    /// The metadata from `bytes(m)`; damaged bytes raise `FormatError`.
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<FileMetadata> {
        let inner = MetadataSnapshot::from_bytes(data).map_err(to_py)?;
        Ok(FileMetadata {
            inner: Arc::new(inner),
        })
    }

    fn __bytes__<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// Pickled as its bytes.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let make = py.get_type::<FileMetadata>().getattr("from_bytes")?;
        let bytes = slf.get().__bytes__(py);
        PyTuple::new(py, [make.into_any(), PyTuple::new(py, [bytes])?.into_any()])
    }

    /// The file's size in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.inner.size
    }

    /// The version of the file its source saw (a modification time, an ETag), if known.
    #[getter]
    fn version(&self) -> Option<String> {
        self.inner.version.clone()
    }

    /// Bytes of metadata held (what a worker is spared reading).
    #[getter]
    fn nbytes(&self) -> u64 {
        self.inner.region_bytes()
    }

    fn __repr__(&self) -> String {
        format!(
            "<FileMetadata of a {} byte file: {} regions, {} bytes>",
            self.inner.size,
            self.inner.regions.len(),
            self.inner.region_bytes()
        )
    }
}
