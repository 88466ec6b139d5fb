//! `StepIterator`: the steps of `Tree.iterate` and `RNTuple.iterate`, read ahead by the engine.

use crate::convert::{arrays_to_py, ItemToPy};
use crate::errors::to_py;
use cherenkov_core::engine::ntuple::Ntuple;
use cherenkov_core::engine::prefetch::{StepReader, StepResult};
use cherenkov_core::engine::runtime;
use cherenkov_core::engine::table::Table;
use cherenkov_core::engine::tree::TreeTable;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// A step reader of a TTree or an RNTuple.
pub enum Steps {
    Tree(StepReader<TreeTable>),
    Ntuple(StepReader<Ntuple>),
}

impl From<StepReader<TreeTable>> for Steps {
    fn from(reader: StepReader<TreeTable>) -> Self {
        Steps::Tree(reader)
    }
}

impl From<StepReader<Ntuple>> for Steps {
    fn from(reader: StepReader<Ntuple>) -> Self {
        Steps::Ntuple(reader)
    }
}

/// A step as it came, converted once the GIL is held again.
enum Step {
    Tree(StepResult<<TreeTable as Table>::Item>),
    Ntuple(StepResult<<Ntuple as Table>::Item>),
}

/// The steps of an `iterate`; dropping it cancels the reads in flight.
#[pyclass(module = "cherenkov._core", frozen)]
pub struct StepIterator {
    pub reader: std::sync::Mutex<Option<Steps>>,
}

fn step_to_py<I: ItemToPy>(py: Python<'_>, step: StepResult<I>) -> PyResult<Bound<'_, PyTuple>> {
    let arrays = arrays_to_py(py, step.arrays)?;
    PyTuple::new(
        py,
        [
            step.start.into_pyobject(py)?.into_any(),
            step.stop.into_pyobject(py)?.into_any(),
            arrays.into_any(),
            step.stats.into_pyobject(py)?.into_any(),
        ],
    )
}

#[pymethods]
impl StepIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let next = py.detach(|| {
            let mut guard = self.reader.lock().unwrap();
            let out = match guard.as_mut()? {
                Steps::Tree(r) => runtime().block_on(r.next()).map(|s| s.map(Step::Tree)),
                Steps::Ntuple(r) => runtime().block_on(r.next()).map(|s| s.map(Step::Ntuple)),
            };
            if out.is_none() {
                *guard = None;
            }
            out
        });
        let Some(step) = next else { return Ok(None) };
        match step.map_err(to_py)? {
            Step::Tree(s) => step_to_py(py, s).map(Some),
            Step::Ntuple(s) => step_to_py(py, s).map(Some),
        }
    }

    /// Stop and cancel what is in flight.
    fn close(&self) {
        self.reader.lock().unwrap().take();
    }
}
