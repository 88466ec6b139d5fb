//! Lazy chunks that learn what an analysis uses, and the profile that carries it across files.

use crate::convert::branch_to_py;
use crate::errors::to_py;
use cherenkov_core::engine::lazy::{AccessProfile as CoreProfile, LazyReader, LazyStats};
use cherenkov_core::engine::read::TreeTable;
use cherenkov_core::engine::runtime;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;

/// Which branches an analysis uses; pass the same profile to the chunks of every file of a dataset.
#[pyclass(module = "cherenkov._core", frozen)]
pub struct AccessProfile {
    pub inner: Arc<CoreProfile>,
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
pub struct LazyChunks {
    pub reader: std::sync::Mutex<LazyReader<TreeTable>>,
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

    /// The caches' counters so far.
    fn stats(&self) -> LazyStats {
        self.reader.lock().unwrap().stats
    }
}
