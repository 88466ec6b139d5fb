//! `StepIterator`: the steps of `Tree.iterate`, read ahead by the engine.

use crate::convert::arrays_to_py;
use crate::errors::to_py;
use cherenkov_core::engine::prefetch::StepReader;
use cherenkov_core::engine::read::TreeTable;
use cherenkov_core::engine::runtime;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// The steps of `Tree.iterate`; dropping it cancels the reads in flight.
#[pyclass(module = "cherenkov._core", frozen)]
pub struct StepIterator {
    pub reader: std::sync::Mutex<Option<StepReader<TreeTable>>>,
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
        let arrays = arrays_to_py(py, step.arrays)?;
        Ok(Some(PyTuple::new(
            py,
            [
                step.start.into_pyobject(py)?.into_any(),
                step.stop.into_pyobject(py)?.into_any(),
                arrays.into_any(),
                step.stats.into_pyobject(py)?.into_any(),
            ],
        )?))
    }

    /// Stop and cancel what is in flight.
    fn close(&self) {
        self.reader.lock().unwrap().take();
    }
}
