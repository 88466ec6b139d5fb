//! Core results to Python: arrays as nested dicts of numpy buffers (no copies of the data),
//! in awkward's layout vocabulary (counters and reports cross as the core's own typed classes).

use cherenkov_core::engine::output::{BranchArray, FieldArray};
use cherenkov_core::format::array::{AlignedBytes, Array, Layout, SharedBytes};
use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::collections::HashMap;
use std::sync::Arc;

/// What a read hands out per branch or field, as a dict: its name (`branch`), `kind`,
/// `entries` and `array`.
pub trait ItemToPy: Sized {
    fn to_py(self, py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        self.to_py_sharing(py, &mut Shared::default())
    }

    /// As `to_py`, buffers shared between items (see `Shared`) crossing once.
    fn to_py_sharing<'py>(
        self,
        py: Python<'py>,
        shared: &mut Shared<'py>,
    ) -> PyResult<Bound<'py, PyDict>>;
}

/// The numpy arrays made so far of buffers several lists share (an RNTuple collection's
/// offsets, shared by its fields): each crosses once, as one read-only array the lists share.
/// The buffers are held while the map lives, so that no address is reused meanwhile.
#[derive(Default)]
pub struct Shared<'py> {
    offsets: HashMap<*const Vec<i64>, SharedOffsets<'py>>,
}

/// Offsets several lists hold, and the numpy array made of them.
type SharedOffsets<'py> = (Arc<Vec<i64>>, Bound<'py, PyAny>);

impl ItemToPy for BranchArray {
    fn to_py_sharing<'py>(
        self,
        py: Python<'py>,
        shared: &mut Shared<'py>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("branch", &self.branch)?;
        d.set_item("kind", self.interpretation.kind())?;
        d.set_item("entries", self.entries)?;
        d.set_item("array", array_to_py(py, self.array, shared)?)?;
        Ok(d)
    }
}

impl ItemToPy for FieldArray {
    fn to_py_sharing<'py>(
        self,
        py: Python<'py>,
        shared: &mut Shared<'py>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("branch", &self.field)?;
        d.set_item("kind", "field")?;
        d.set_item("entries", self.entries)?;
        d.set_item("array", array_to_py(py, self.array, shared)?)?;
        Ok(d)
    }
}

pub fn arrays_to_py<I: ItemToPy>(py: Python<'_>, arrays: Vec<I>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    let mut shared = Shared::default();
    for a in arrays {
        out.append(a.to_py_sharing(py, &mut shared)?)?;
    }
    Ok(out)
}

/// Offsets as numpy, a view of their buffer (no copy) whose base keeps it alive and gives it
/// back to the engine's pool when the last array viewing it dies (`engine::recycle`): writable
/// when this list holds them alone, else made once per read for every list sharing them
/// (read-only: one list's change must not show in the others).
fn offsets_to_py<'py>(
    py: Python<'py>,
    offsets: Arc<Vec<i64>>,
    shared: &mut Shared<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    let key = Arc::as_ptr(&offsets);
    if let Some((_, array)) = shared.offsets.get(&key) {
        return Ok(array.clone());
    }
    let alone = Arc::strong_count(&offsets) == 1;
    let view = numpy::ndarray::ArrayView1::from(offsets.as_slice());
    let owner = Bound::new(py, OffsetsOwner(Some(offsets.clone())))?.into_any();
    // SAFETY: `owner`, the array's base, holds the offsets for as long as the array lives;
    // shared ones are never changed (read-only below), nor moved.
    let array = unsafe { PyArray1::borrow_from_array(&view, owner) };
    if alone {
        return Ok(array.into_any());
    }
    array.call_method1("setflags", (false,))?;
    let array = array.into_any();
    shared.offsets.insert(key, (offsets, array.clone()));
    Ok(array)
}

/// What keeps offsets alive under the numpy arrays that view them.
#[pyclass(frozen)]
struct OffsetsOwner(Option<Arc<Vec<i64>>>);

impl Drop for OffsetsOwner {
    fn drop(&mut self) {
        if let Some(Ok(offsets)) = self.0.take().map(Arc::try_unwrap) {
            cherenkov_core::engine::recycle::give_back_offsets(offsets);
        }
    }
}

/// A numbers buffer as numpy 8-byte words: a view of a read's output kept for reuse (see
/// `engine::recycle`; it goes back to the pool when the numpy array dies), else moved.
fn words_to_py<'py>(py: Python<'py>, data: AlignedBytes) -> PyResult<Bound<'py, PyAny>> {
    match data.into_sole_owner() {
        Ok(owner) => {
            let view = numpy::ndarray::ArrayView1::from(owner.words().unwrap_or_default());
            let base = Bound::new(py, BytesOwner(owner.clone()))?.into_any();
            // SAFETY: `base`, the array's base, holds the words for as long as the array
            // lives; no other array holds them (`into_sole_owner`), so writes show nowhere else.
            Ok(unsafe { PyArray1::borrow_from_array(&view, base) }.into_any())
        }
        Err(data) => Ok(data.into_words().into_pyarray(py).into_any()),
    }
}

/// What keeps a read's output alive under the numpy array that views it.
#[pyclass(frozen)]
struct BytesOwner(#[allow(dead_code)] Arc<dyn SharedBytes>);

/// One layout node as a dict: `class` (awkward's class name), its buffers as numpy arrays (the
/// data as 8-byte words, viewed by `cherenkov.arrays`), `parameters`, and its children.
pub fn array_to_py<'py>(
    py: Python<'py>,
    a: Array,
    shared: &mut Shared<'py>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let parameters = PyDict::new(py);
    for (k, v) in a.parameters {
        parameters.set_item(k, v)?;
    }
    d.set_item("parameters", parameters)?;
    let children =
        |contents: Vec<Array>, shared: &mut Shared<'py>| -> PyResult<Bound<'py, PyList>> {
            let list = PyList::empty(py);
            for c in contents {
                list.append(array_to_py(py, c, shared)?)?;
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
            d.set_item("words", words_to_py(py, data)?)?;
        }
        Layout::ListOffset {
            offsets,
            content,
            index_type,
        } => {
            d.set_item("class", "ListOffsetArray")?;
            d.set_item("index_type", index_type.name())?;
            d.set_item("offsets", offsets_to_py(py, offsets, shared)?)?;
            d.set_item("content", array_to_py(py, *content, shared)?)?;
        }
        Layout::Regular {
            size,
            length,
            content,
        } => {
            d.set_item("class", "RegularArray")?;
            d.set_item("size", size)?;
            d.set_item("length", length)?;
            d.set_item("content", array_to_py(py, *content, shared)?)?;
        }
        Layout::Record {
            names,
            contents,
            length,
        } => {
            d.set_item("class", "RecordArray")?;
            d.set_item("fields", names)?;
            d.set_item("length", length)?;
            d.set_item("contents", children(contents, shared)?)?;
        }
        Layout::IndexedOption {
            index,
            content,
            index_type,
        } => {
            d.set_item("class", "IndexedOptionArray")?;
            d.set_item("index_type", index_type.name())?;
            d.set_item("index", index.into_pyarray(py))?;
            d.set_item("content", array_to_py(py, *content, shared)?)?;
        }
        Layout::Unmasked { content } => {
            d.set_item("class", "UnmaskedArray")?;
            d.set_item("content", array_to_py(py, *content, shared)?)?;
        }
        Layout::Union {
            tags,
            index,
            contents,
        } => {
            d.set_item("class", "UnionArray")?;
            d.set_item("tags", tags.into_pyarray(py))?;
            d.set_item("index", index.into_pyarray(py))?;
            d.set_item("contents", children(contents, shared)?)?;
        }
    }
    Ok(d)
}
