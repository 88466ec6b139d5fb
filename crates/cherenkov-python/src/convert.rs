//! Core results to Python: arrays as numpy buffers without copies, read costs as dicts.

use crate::tree::kind;
use cherenkov_core::engine::output::{BranchArray, ReadStats};
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

pub fn arrays_to_py(py: Python<'_>, arrays: Vec<BranchArray>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for a in arrays {
        out.append(branch_to_py(py, a)?)?;
    }
    Ok(out)
}

pub fn stats_to_py<'py>(py: Python<'py>, stats: &ReadStats) -> PyResult<Bound<'py, PyDict>> {
    let s = PyDict::new(py);
    s.set_item("baskets", stats.baskets)?;
    s.set_item("compressed_bytes", stats.compressed_bytes)?;
    s.set_item("uncompressed_bytes", stats.uncompressed_bytes)?;
    s.set_item("fetch_seconds", stats.fetch_time.as_secs_f64())?;
    s.set_item("decode_seconds", stats.decode_time.as_secs_f64())?;
    Ok(s)
}

pub fn branch_to_py(py: Python<'_>, a: BranchArray) -> PyResult<Bound<'_, PyDict>> {
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
