//! Core results to Python: arrays as nested dicts of numpy buffers (no copies of the data),
//! in awkward's layout vocabulary (counters and reports cross as the core's own typed classes).

use cherenkov_core::engine::output::{BranchArray, FieldArray};
use cherenkov_core::format::array::{Array, Layout};
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

/// What a read hands out per branch or field, as a dict: its name (`branch`), `kind`,
/// `entries` and `array`.
pub trait ItemToPy {
    fn to_py(self, py: Python<'_>) -> PyResult<Bound<'_, PyDict>>;
}

impl ItemToPy for BranchArray {
    fn to_py(self, py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("branch", &self.branch)?;
        d.set_item("kind", self.interpretation.kind())?;
        d.set_item("entries", self.entries)?;
        d.set_item("array", array_to_py(py, self.array)?)?;
        Ok(d)
    }
}

impl ItemToPy for FieldArray {
    fn to_py(self, py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("branch", &self.field)?;
        d.set_item("kind", "field")?;
        d.set_item("entries", self.entries)?;
        d.set_item("array", array_to_py(py, self.array)?)?;
        Ok(d)
    }
}

pub fn arrays_to_py<I: ItemToPy>(py: Python<'_>, arrays: Vec<I>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for a in arrays {
        out.append(a.to_py(py)?)?;
    }
    Ok(out)
}

/// One layout node as a dict: `class` (awkward's class name), its buffers as numpy arrays (the
/// data as 8-byte words, viewed by `cherenkov.arrays`), `parameters`, and its children.
pub fn array_to_py(py: Python<'_>, a: Array) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    let parameters = PyDict::new(py);
    for (k, v) in a.parameters {
        parameters.set_item(k, v)?;
    }
    d.set_item("parameters", parameters)?;
    let children = |contents: Vec<Array>| -> PyResult<Bound<'_, PyList>> {
        let list = PyList::empty(py);
        for c in contents {
            list.append(array_to_py(py, c)?)?;
        }
        Ok(list)
    };
    match a.layout {
        Layout::Empty => d.set_item("class", "EmptyArray")?,
        Layout::Numpy {
            dtype,
            inner_shape,
            data,
        } => {
            d.set_item("class", "NumpyArray")?;
            d.set_item("dtype", dtype.name())?;
            d.set_item("inner_shape", PyTuple::new(py, inner_shape)?)?;
            d.set_item("nbytes", data.len)?;
            d.set_item("words", data.into_words().into_pyarray(py))?;
        }
        Layout::ListOffset {
            offsets,
            content,
            index_type,
        } => {
            d.set_item("class", "ListOffsetArray")?;
            d.set_item("index_type", index_type.name())?;
            d.set_item("offsets", offsets.into_pyarray(py))?;
            d.set_item("content", array_to_py(py, *content)?)?;
        }
        Layout::Regular {
            size,
            length,
            content,
        } => {
            d.set_item("class", "RegularArray")?;
            d.set_item("size", size)?;
            d.set_item("length", length)?;
            d.set_item("content", array_to_py(py, *content)?)?;
        }
        Layout::Record {
            names,
            contents,
            length,
        } => {
            d.set_item("class", "RecordArray")?;
            d.set_item("fields", names)?;
            d.set_item("length", length)?;
            d.set_item("contents", children(contents)?)?;
        }
        Layout::IndexedOption {
            index,
            content,
            index_type,
        } => {
            d.set_item("class", "IndexedOptionArray")?;
            d.set_item("index_type", index_type.name())?;
            d.set_item("index", index.into_pyarray(py))?;
            d.set_item("content", array_to_py(py, *content)?)?;
        }
        Layout::Unmasked { content } => {
            d.set_item("class", "UnmaskedArray")?;
            d.set_item("content", array_to_py(py, *content)?)?;
        }
        Layout::Union {
            tags,
            index,
            contents,
        } => {
            d.set_item("class", "UnionArray")?;
            d.set_item("tags", tags.into_pyarray(py))?;
            d.set_item("index", index.into_pyarray(py))?;
            d.set_item("contents", children(contents)?)?;
        }
    }
    Ok(d)
}
