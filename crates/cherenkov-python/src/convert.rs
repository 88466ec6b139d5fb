//! Core results to Python: arrays as nested dicts of numpy buffers (no copies of the data),
//! in awkward's layout vocabulary (counters and reports cross as the core's own typed classes).

use cherenkov_core::engine::output::{BranchArray, FieldArray};
use cherenkov_core::format::array::{AlignedBytes, Array, DType, Layout, SharedBytes};
use numpy::npyffi::{npy_intp, NpyTypes, NPY_ARRAY_WRITEABLE, PY_ARRAY_API};
use numpy::{IntoPyArray, PyArray1, PyArrayDescrMethods};
use pyo3::intern;
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
        d.set_item(intern!(py, "branch"), &self.branch)?;
        d.set_item(intern!(py, "kind"), self.interpretation.kind())?;
        d.set_item(intern!(py, "entries"), self.entries)?;
        d.set_item(intern!(py, "array"), array_to_py(py, self.array, shared)?)?;
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
        d.set_item(intern!(py, "branch"), &self.field)?;
        d.set_item(intern!(py, "kind"), intern!(py, "field"))?;
        d.set_item(intern!(py, "entries"), self.entries)?;
        d.set_item(intern!(py, "array"), array_to_py(py, self.array, shared)?)?;
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

/// A numbers buffer as a flat numpy array of its dtype, a view of its memory (no copy): a
/// read's output kept for reuse goes back to the pool when the array dies (`engine::recycle`).
fn data_to_py<'py>(
    py: Python<'py>,
    dtype: DType,
    data: AlignedBytes,
) -> PyResult<Bound<'py, PyAny>> {
    let elements = data.len / dtype.size();
    let (ptr, base) = match data.into_sole_owner() {
        Ok(owner) => {
            let ptr = owner.words().unwrap_or_default().as_ptr();
            (ptr, Bound::new(py, BytesOwner(owner))?.into_any())
        }
        Err(data) => {
            let words = data.into_words();
            (
                words.as_ptr(),
                Bound::new(py, WordsOwner(words))?.into_any(),
            )
        }
    };
    let descr = match dtype {
        DType::Bool => numpy::dtype::<bool>(py),
        DType::I8 => numpy::dtype::<i8>(py),
        DType::I16 => numpy::dtype::<i16>(py),
        DType::I32 => numpy::dtype::<i32>(py),
        DType::I64 => numpy::dtype::<i64>(py),
        DType::U8 => numpy::dtype::<u8>(py),
        DType::U16 => numpy::dtype::<u16>(py),
        DType::U32 => numpy::dtype::<u32>(py),
        DType::U64 => numpy::dtype::<u64>(py),
        DType::F16 => numpy::PyArrayDescr::new(py, dtype.name())?, // (no Rust type is numpy's half)
        DType::F32 => numpy::dtype::<f32>(py),
        DType::F64 => numpy::dtype::<f64>(py),
    };
    let mut dims = [elements as npy_intp];
    // SAFETY: `ptr` points to `elements` values of `dtype` (8-byte aligned words holding the
    // bytes) that `base` owns and keeps in place for as long as the array lives; no other array
    // views them (`into_sole_owner`, or words of our own), so writes show nowhere else. numpy
    // takes the descriptor's reference and, once set, the base's.
    unsafe {
        let array = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            PY_ARRAY_API.get_type_object(py, NpyTypes::PyArray_Type),
            descr.into_dtype_ptr(),
            1,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            ptr as *mut std::ffi::c_void,
            NPY_ARRAY_WRITEABLE,
            std::ptr::null_mut(),
        );
        let array = Bound::from_owned_ptr_or_err(py, array)?;
        if PY_ARRAY_API.PyArray_SetBaseObject(py, array.as_ptr().cast(), base.into_ptr()) < 0 {
            return Err(PyErr::fetch(py));
        }
        Ok(array)
    }
}

/// What keeps a read's output alive under the numpy array that views it.
#[pyclass(frozen)]
struct BytesOwner(#[allow(dead_code)] Arc<dyn SharedBytes>);

/// Words of a buffer not kept for reuse, under the numpy array that views them.
#[pyclass(frozen)]
struct WordsOwner(#[allow(dead_code)] Vec<u64>);

/// One layout node as a dict: `class` (awkward's class name), its buffers as numpy arrays (the
/// numbers as one flat array of their dtype, `data`), `parameters`, and its children.
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
    d.set_item(intern!(py, "parameters"), parameters)?;
    let children =
        |contents: Vec<Array>, shared: &mut Shared<'py>| -> PyResult<Bound<'py, PyList>> {
            let list = PyList::empty(py);
            for c in contents {
                list.append(array_to_py(py, c, shared)?)?;
            }
            Ok(list)
        };
    match a.layout {
        Layout::Empty => d.set_item(intern!(py, "class"), intern!(py, "EmptyArray"))?,
        Layout::Numpy {
            dtype,
            inner_shape,
            data,
        } => {
            d.set_item(intern!(py, "class"), intern!(py, "NumpyArray"))?;
            d.set_item(intern!(py, "dtype"), dtype.name())?;
            d.set_item(intern!(py, "inner_shape"), PyTuple::new(py, inner_shape)?)?;
            d.set_item(intern!(py, "data"), data_to_py(py, dtype, data)?)?;
        }
        Layout::ListOffset {
            offsets,
            content,
            index_type,
        } => {
            d.set_item(intern!(py, "class"), intern!(py, "ListOffsetArray"))?;
            d.set_item(intern!(py, "index_type"), index_type.name())?;
            d.set_item(intern!(py, "offsets"), offsets_to_py(py, offsets, shared)?)?;
            d.set_item(intern!(py, "content"), array_to_py(py, *content, shared)?)?;
        }
        Layout::Regular {
            size,
            length,
            content,
        } => {
            d.set_item(intern!(py, "class"), intern!(py, "RegularArray"))?;
            d.set_item(intern!(py, "size"), size)?;
            d.set_item(intern!(py, "length"), length)?;
            d.set_item(intern!(py, "content"), array_to_py(py, *content, shared)?)?;
        }
        Layout::Record {
            names,
            contents,
            length,
        } => {
            d.set_item(intern!(py, "class"), intern!(py, "RecordArray"))?;
            d.set_item(intern!(py, "fields"), names)?;
            d.set_item(intern!(py, "length"), length)?;
            d.set_item(intern!(py, "contents"), children(contents, shared)?)?;
        }
        Layout::IndexedOption {
            index,
            content,
            index_type,
        } => {
            d.set_item(intern!(py, "class"), intern!(py, "IndexedOptionArray"))?;
            d.set_item(intern!(py, "index_type"), index_type.name())?;
            d.set_item(intern!(py, "index"), index.into_pyarray(py))?;
            d.set_item(intern!(py, "content"), array_to_py(py, *content, shared)?)?;
        }
        Layout::Unmasked { content } => {
            d.set_item(intern!(py, "class"), intern!(py, "UnmaskedArray"))?;
            d.set_item(intern!(py, "content"), array_to_py(py, *content, shared)?)?;
        }
        Layout::Union {
            tags,
            index,
            contents,
        } => {
            d.set_item(intern!(py, "class"), intern!(py, "UnionArray"))?;
            d.set_item(intern!(py, "tags"), tags.into_pyarray(py))?;
            d.set_item(intern!(py, "index"), index.into_pyarray(py))?;
            d.set_item(intern!(py, "contents"), children(contents, shared)?)?;
        }
    }
    Ok(d)
}
