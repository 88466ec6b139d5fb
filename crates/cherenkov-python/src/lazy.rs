//! Lazy chunks that learn what an analysis uses, and the profile that carries it across files.

use crate::convert::ItemToPy;
use crate::errors::to_py;
use cherenkov_core::engine::lazy::{
    AccessProfile as CoreProfile, LazyReader, LazyStats, ProfileState,
};
use cherenkov_core::engine::ntuple::Ntuple;
use cherenkov_core::engine::runtime;
use cherenkov_core::engine::tree::TreeTable;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Which branches an analysis uses; pass the same profile to the chunks of every file of a dataset.
#[pyclass(module = "cherenkov._core", frozen)]
pub struct AccessProfile {
    pub inner: Arc<CoreProfile>,
}

#[pymethods]
impl AccessProfile {
    /// A new profile, or one that knows what `state` (from `state()` of another) says.
    #[new]
    #[pyo3(signature = (state=None))]
    fn new(state: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let Some(d) = state else {
            return Ok(Self {
                inner: Arc::new(CoreProfile::default()),
            });
        };
        let get = |key: &str| -> PyResult<Bound<'_, PyAny>> {
            d.get_item(key)?.ok_or_else(|| {
                pyo3::exceptions::PyKeyError::new_err(format!("profile state lacks '{key}'"))
            })
        };
        let names = |key: &str| -> PyResult<BTreeSet<String>> {
            get(key)?.try_iter()?.map(|n| n?.extract()).collect()
        };
        let state = ProfileState {
            trained: get("trained")?.extract()?,
            learned: names("learned")?,
            missed: names("missed")?,
            rates: get("rates")?.extract()?,
            speculated: names("speculated")?,
            stopped: names("stopped")?,
            depth: get("depth")?.extract()?,
            first_window: get("first_window")?.extract()?,
        };
        Ok(Self {
            inner: Arc::new(CoreProfile::from_state(state)),
        })
    }

    /// What the profile knows, as a dict of plain values (names in sorted lists):
    /// `AccessProfile(state)` makes another (in another process) that knows the same.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.snapshot();
        let d = PyDict::new(py);
        let list = |names: BTreeSet<String>| names.into_iter().collect::<Vec<_>>();
        d.set_item("trained", s.trained)?;
        d.set_item("learned", list(s.learned))?;
        d.set_item("missed", list(s.missed))?;
        d.set_item("rates", s.rates)?;
        d.set_item("speculated", list(s.speculated))?;
        d.set_item("stopped", list(s.stopped))?;
        d.set_item("depth", s.depth)?;
        d.set_item("first_window", s.first_window)?;
        Ok(d)
    }

    /// Pickled as its state.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let state = slf.get().state(py)?;
        PyTuple::new(
            py,
            [
                py.get_type::<AccessProfile>().into_any(),
                PyTuple::new(py, [state])?.into_any(),
            ],
        )
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
    /// Branches of the miss set fetched with the learned set, ahead of use (see `speculate`).
    #[getter]
    fn speculated(&self) -> Vec<String> {
        self.inner.snapshot().speculated.into_iter().collect()
    }
    /// Branches no longer speculated: their unused bytes went over the budget.
    #[getter]
    fn stopped(&self) -> Vec<String> {
        self.inner.snapshot().stopped.into_iter().collect()
    }
    /// Chunks ahead of use the learned set's read-ahead reached (it deepens while the reader
    /// waits for it): the next file's starts there.
    #[getter]
    fn depth(&self) -> usize {
        self.inner.depth()
    }
    /// Per branch of the miss set: the fraction of recent chunks that used it (a moving rate).
    #[getter]
    fn rates(&self) -> std::collections::BTreeMap<String, f64> {
        self.inner.snapshot().rates
    }
}

/// A lazy reader of a TTree or an RNTuple.
pub enum Lazy {
    Tree(LazyReader<TreeTable>),
    Ntuple(LazyReader<Ntuple>),
}

impl From<LazyReader<TreeTable>> for Lazy {
    fn from(reader: LazyReader<TreeTable>) -> Self {
        Lazy::Tree(reader)
    }
}

impl From<LazyReader<Ntuple>> for Lazy {
    fn from(reader: LazyReader<Ntuple>) -> Self {
        Lazy::Ntuple(reader)
    }
}

/// Lazy chunks: `advance()` to the next chunk, `get(index)` a branch (or field) of it.
#[pyclass(module = "cherenkov._core", frozen)]
pub struct LazyChunks {
    pub reader: std::sync::Mutex<Lazy>,
}

#[pymethods]
impl LazyChunks {
    fn advance(&self, py: Python<'_>) -> PyResult<Option<(u64, u64)>> {
        py.detach(|| match &mut *self.reader.lock().unwrap() {
            Lazy::Tree(r) => runtime().block_on(r.advance()),
            Lazy::Ntuple(r) => runtime().block_on(r.advance()),
        })
        .map_err(to_py)
    }

    /// End the training chunk: the profile learns its set now, before `advance` waits for the
    /// next chunk (a dataset's files opened ahead start meanwhile).
    fn end_training(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| match &mut *self.reader.lock().unwrap() {
            Lazy::Tree(r) => runtime().block_on(r.end_training()),
            Lazy::Ntuple(r) => runtime().block_on(r.end_training()),
        })
        .map_err(to_py)
    }

    /// Read ahead what the profile speculates now and this reader's read-ahead lacks.
    fn follow_profile(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| match &mut *self.reader.lock().unwrap() {
            Lazy::Tree(r) => runtime().block_on(r.follow_profile()),
            Lazy::Ntuple(r) => runtime().block_on(r.follow_profile()),
        })
        .map_err(to_py)
    }

    /// The analysis is about to read these branches (or fields) of the current chunk.
    fn will_use(&self, py: Python<'_>, indices: Vec<usize>) -> PyResult<()> {
        py.detach(|| match &mut *self.reader.lock().unwrap() {
            Lazy::Tree(r) => runtime().block_on(r.will_use(&indices)),
            Lazy::Ntuple(r) => runtime().block_on(r.will_use(&indices)),
        })
        .map_err(to_py)
    }

    fn get<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Bound<'py, PyDict>> {
        enum Got {
            Tree(<TreeTable as cherenkov_core::engine::table::Table>::Item),
            Ntuple(<Ntuple as cherenkov_core::engine::table::Table>::Item),
        }
        let got = py
            .detach(|| match &mut *self.reader.lock().unwrap() {
                Lazy::Tree(r) => runtime().block_on(r.get(index)).map(Got::Tree),
                Lazy::Ntuple(r) => runtime().block_on(r.get(index)).map(Got::Ntuple),
            })
            .map_err(to_py)?;
        match got {
            Got::Tree(a) => a.to_py(py),
            Got::Ntuple(a) => a.to_py(py),
        }
    }

    /// The caches' counters so far.
    fn stats(&self) -> LazyStats {
        match &*self.reader.lock().unwrap() {
            Lazy::Tree(r) => r.stats,
            Lazy::Ntuple(r) => r.stats,
        }
    }
}
