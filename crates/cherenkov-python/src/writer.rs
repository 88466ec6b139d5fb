//! Writing ROOT files from Python: `WritableFile` holds a core `FileWriter` and the tables being
//! written in it. Arrays arrive as nested dicts in awkward's layout vocabulary (the shape
//! `convert.rs` hands out, numbers as `data` bytes or as read, `words` and `nbytes`), their numpy
//! buffers borrowed where they are (no copy); column types
//! as nested tuples. The GIL is released while entries are serialized, compressed and written.

use crate::errors::to_py;
use crate::ntuple::Ntuple;
use crate::tree::Tree;
use cherenkov_core::engine::file::RootFile;
use cherenkov_core::engine::writer::copy::copy_trees;
use cherenkov_core::engine::writer::file::{DirectoryId, FileWriter};
use cherenkov_core::engine::writer::ntuple::{NtupleLayout, NtupleWriter};
use cherenkov_core::engine::writer::ntuple_copy::copy_ntuples;
use cherenkov_core::engine::writer::raw::rewrite_trees;
use cherenkov_core::engine::writer::tree::TreeWriter;
use cherenkov_core::engine::writer::{Column, ColumnType, TableOptions, TableWriter};
use cherenkov_core::format::array::{AlignedBytes, Array, DType, SharedBytes};
use cherenkov_core::format::tree::TreeMeta;
use cherenkov_core::format::writing::compression::Compression;
use numpy::{PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::{Arc, Mutex};

/// A file being written, and its tables (a table's id is its index; `None` once finished).
#[pyclass(module = "cherenkov._core", frozen)]
pub struct WritableFile {
    name: String,
    state: Mutex<Option<State>>,
}

struct State {
    file: FileWriter,
    tables: Vec<Option<Box<dyn TableWriter>>>,
}

#[pymethods]
impl WritableFile {
    /// A new file at `path` (written under a temporary name until `close`), compressing with
    /// ROOT's setting `compression` (505: zstd level 5).
    #[staticmethod]
    fn create(py: Python<'_>, path: &str, title: &str, compression: i32) -> PyResult<Self> {
        let compression = Compression::from_setting(compression).map_err(to_py)?;
        let file = py
            .detach(|| {
                let sink = cherenkov_core::sink::create(path)?;
                FileWriter::create(sink, title, compression)
            })
            .map_err(write_error)?;
        Ok(Self::new(path, file))
    }

    /// The existing file at `path`, to add trees and directories to in place.
    #[staticmethod]
    fn update(py: Python<'_>, path: &str) -> PyResult<Self> {
        let file = py
            .detach(|| FileWriter::update(path))
            .map_err(write_error)?;
        Ok(Self::new(path, file))
    }

    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The directory at `path` ("a/b"), made where missing.
    fn mkdir(&self, path: &str) -> PyResult<()> {
        self.with(|s| s.file.mkdirs(path).map(|_| ()))
    }

    /// Bytes of the key header an object `class`/`name`/`title` gets if written now (the merger
    /// copies a streamed object only when its key header keeps the same length: the object's
    /// internal references count from its key's start).
    fn key_len(&self, class: &str, name: &str, title: &str) -> PyResult<usize> {
        self.with(|s| {
            Ok(cherenkov_core::format::directory::Key::header_len(
                class,
                name,
                title,
                s.file.big_keys(),
            ))
        })
    }

    /// Write an object's stored bytes (as a key of another file holds them, compressed or
    /// not; `objlen` their streamed length) as the next cycle of `name` in `directory`.
    #[allow(clippy::too_many_arguments)]
    fn write_stored(
        &self,
        py: Python<'_>,
        directory: &str,
        class: &str,
        name: &str,
        title: &str,
        stored: &[u8],
        objlen: usize,
    ) -> PyResult<()> {
        py.detach(|| {
            self.with(|s| {
                let dir = directory_id(&mut s.file, directory)?;
                let cycle = s.file.next_cycle(dir, name);
                let key =
                    s.file
                        .write_stored_key(dir, class, name, title, cycle, &[stored], objlen)?;
                s.file.list_key(dir, key);
                Ok(())
            })
        })
    }

    /// A new table `name` in directory `directory` ("" for the top) with `columns`
    /// (`[(name, title, type)]`, types as `column_type` reads them); returns its id.
    #[pyo3(signature = (directory, name, columns, format, title, compression, cluster_bytes, memory_budget, aliases))]
    #[allow(clippy::too_many_arguments)]
    fn mktree(
        &self,
        directory: &str,
        name: &str,
        columns: &Bound<'_, PyList>,
        format: &str,
        title: &str,
        compression: Option<i32>,
        cluster_bytes: Option<u64>,
        memory_budget: u64,
        aliases: Vec<(String, String)>,
    ) -> PyResult<usize> {
        let columns = columns
            .iter()
            .map(|c| {
                let (name, title, kind): (String, String, Bound<'_, PyAny>) = c.extract()?;
                let kind = column_type(&kind)
                    .map_err(|why| PyValueError::new_err(format!("column '{name}': {why}")))?;
                Ok(Column { name, title, kind })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let mut guard = self.state.lock().unwrap();
        let state = guard.as_mut().ok_or_else(|| closed(&self.name))?;
        let compression = match compression {
            Some(c) => Compression::from_setting(c).map_err(to_py)?,
            None => state.file.compression(),
        };
        let options = TableOptions {
            title: title.to_string(),
            compression,
            cluster_bytes,
            memory_budget,
        };
        let dir = directory_id(&mut state.file, directory).map_err(write_error)?;
        let table: Box<dyn TableWriter> = match format {
            "ttree" => Box::new(
                TreeWriter::new(&state.file, dir, name, columns, options, aliases)
                    .map_err(to_py)?,
            ),
            "rntuple" => Box::new(
                NtupleWriter::new(
                    &state.file,
                    dir,
                    name,
                    columns,
                    &options,
                    NtupleLayout::default(),
                )
                .map_err(to_py)?,
            ),
            other => {
                return Err(PyValueError::new_err(format!(
                    "format={other:?}: \"ttree\" or \"rntuple\""
                )))
            }
        };
        state.tables.push(Some(table));
        Ok(state.tables.len() - 1)
    }

    /// Append entries to table `table`: one layout dict per column, all of one length.
    fn extend(&self, py: Python<'_>, table: usize, arrays: &Bound<'_, PyList>) -> PyResult<()> {
        let arrays = arrays
            .iter()
            .map(|a| array_from_py(a.cast::<PyDict>()?))
            .collect::<PyResult<Vec<_>>>()?;
        self.with_table(table, |writer, file| {
            py.detach(|| writer.extend(file, arrays))
                .map_err(write_error)
        })
    }

    /// Append the entries of `trees` (of other files, in order) to TTree `table` by copying their
    /// compressed baskets (see `engine::writer::copy`), up to the first that cannot be copied:
    /// returns how many were copied and, when one stopped the copy, why it cannot be copied.
    fn copy_trees(
        &self,
        py: Python<'_>,
        table: usize,
        trees: Vec<PyRef<'_, Tree>>,
    ) -> PyResult<(usize, Option<String>)> {
        self.move_trees(py, table, trees, TreeWriter::copy_plan, copy_trees)
    }

    /// Append the entries of `trees` (of other files, in order) to TTree `table` by moving their
    /// serialized entries into its baskets (rewrite mode's fast path, see
    /// `engine::writer::raw`), up to the first whose branches are stored otherwise: returns how
    /// many were moved and, when one stopped them, why its entries cannot be moved.
    fn rewrite_trees(
        &self,
        py: Python<'_>,
        table: usize,
        trees: Vec<PyRef<'_, Tree>>,
    ) -> PyResult<(usize, Option<String>)> {
        self.move_trees(py, table, trees, TreeWriter::raw_plan, rewrite_trees)
    }

    /// Append the entries of `ntuples` (RNTuples of other files, in order) to RNTuple `table` by
    /// copying their pages (see `engine::writer::ntuple_copy`), up to the first that cannot be
    /// copied: returns how many were copied and, when one stopped the copy, why it cannot be.
    fn copy_ntuples(
        &self,
        py: Python<'_>,
        table: usize,
        ntuples: Vec<PyRef<'_, Ntuple>>,
    ) -> PyResult<(usize, Option<String>)> {
        let inputs: Vec<_> = ntuples.iter().map(|n| n.inner.clone()).collect();
        self.with_table(table, |writer, file| {
            let writer = writer
                .as_ntuple()
                .ok_or_else(|| PyValueError::new_err(format!("table {table} is not an RNTuple")))?;
            py.detach(|| {
                let (plans, refusal) = plan_until_refused(&inputs, |input| writer.copy_plan(input));
                let copied = plans.len();
                copy_ntuples(writer, file, plans).map_err(write_error)?;
                Ok((copied, refusal))
            })
        })
    }

    /// Lay RNTuple `table` out as `ntuple` where cherenkov's own layout differs (see
    /// `NtupleWriter::take_layout_of`): it then takes copied clusters only. Whether it did.
    fn take_layout_of(&self, table: usize, ntuple: PyRef<'_, Ntuple>) -> PyResult<bool> {
        self.with_table(table, |writer, _| {
            let writer = writer
                .as_ntuple()
                .ok_or_else(|| PyValueError::new_err(format!("table {table} is not an RNTuple")))?;
            writer.take_layout_of(&ntuple.inner).map_err(|why| {
                PyValueError::new_err(format!(
                    "RNTuple '{}' cannot be laid out as in {}: {why}",
                    ntuple.inner.name(),
                    ntuple.inner.file.name()
                ))
            })
        })
    }

    /// Entries written to table `table` so far.
    fn entries(&self, table: usize) -> PyResult<u64> {
        let guard = self.state.lock().unwrap();
        let state = guard.as_ref().ok_or_else(|| closed(&self.name))?;
        Ok(state
            .tables
            .get(table)
            .and_then(Option::as_ref)
            .map_or(0, |t| t.entries()))
    }

    /// Write what table `table` buffers and its metadata.
    fn finish_table(&self, py: Python<'_>, table: usize) -> PyResult<()> {
        let mut guard = self.state.lock().unwrap();
        let state = guard.as_mut().ok_or_else(|| closed(&self.name))?;
        if let Some(writer) = state.tables.get_mut(table).and_then(Option::take) {
            let file = &mut state.file;
            py.detach(|| writer.finish(file)).map_err(write_error)?;
        }
        Ok(())
    }

    /// Finish every table, write the file's metadata and make it visible under its name.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Some(mut state) = self.state.lock().unwrap().take() else {
            return Ok(());
        };
        py.detach(move || {
            for writer in state.tables.iter_mut().filter_map(Option::take) {
                writer.finish(&mut state.file)?;
            }
            state.file.close()
        })
        .map_err(write_error)
    }

    /// Leave the file unwritten: nothing appears under its name.
    fn abandon(&self) {
        self.state.lock().unwrap().take();
    }

    #[getter]
    fn closed(&self) -> bool {
        self.state.lock().unwrap().is_none()
    }
}

impl WritableFile {
    fn new(path: &str, file: FileWriter) -> Self {
        Self {
            name: path.to_string(),
            state: Mutex::new(Some(State {
                file,
                tables: Vec::new(),
            })),
        }
    }

    /// `f` with table `table`'s writer (not finished) and the file.
    fn with_table<T>(
        &self,
        table: usize,
        f: impl FnOnce(&mut Box<dyn TableWriter>, &mut FileWriter) -> PyResult<T>,
    ) -> PyResult<T> {
        let mut guard = self.state.lock().unwrap();
        let state = guard.as_mut().ok_or_else(|| closed(&self.name))?;
        let State { file, tables } = state;
        let writer = tables
            .get_mut(table)
            .and_then(Option::as_mut)
            .ok_or_else(|| PyValueError::new_err(format!("table {table} is finished")))?;
        f(writer, file)
    }

    /// Plan each of `trees` with `plan` up to the first refused, then `run` the plans (GIL
    /// released): how many trees were appended, and why the next one was refused.
    fn move_trees<P: Send>(
        &self,
        py: Python<'_>,
        table: usize,
        trees: Vec<PyRef<'_, Tree>>,
        plan: impl Fn(&TreeWriter, &TreeMeta) -> Result<P, String>,
        run: impl FnOnce(
                &mut TreeWriter,
                &mut FileWriter,
                Vec<(Arc<RootFile>, P)>,
            ) -> cherenkov_core::Result<()>
            + Send,
    ) -> PyResult<(usize, Option<String>)> {
        let inputs: Vec<_> = trees
            .iter()
            .map(|t| (t.file.clone(), t.meta.clone()))
            .collect();
        self.with_tree(table, |writer, file| {
            let (plans, refusal) = plan_until_refused(&inputs, |(source, meta)| {
                plan(writer, meta).map(|p| (source.clone(), p))
            });
            let moved = plans.len();
            if moved > 0 {
                py.detach(|| run(writer, file, plans))?;
            }
            Ok((moved, refusal))
        })
    }

    /// `f` with table `table`'s TTree writer and the file.
    fn with_tree<T>(
        &self,
        table: usize,
        f: impl FnOnce(&mut TreeWriter, &mut FileWriter) -> cherenkov_core::Result<T>,
    ) -> PyResult<T> {
        self.with_table(table, |writer, file| {
            let tree = writer
                .as_tree()
                .ok_or_else(|| PyValueError::new_err(format!("table {table} is not a TTree")))?;
            f(tree, file).map_err(write_error)
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> cherenkov_core::Result<T>) -> PyResult<T> {
        let mut guard = self.state.lock().unwrap();
        let state = guard.as_mut().ok_or_else(|| closed(&self.name))?;
        f(state).map_err(write_error)
    }
}

/// A failed write: an operating system's refusal (a full disk) as the `OSError` it is, with its
/// errno and the file, tree and branch being written; other errors as everywhere.
fn write_error(e: cherenkov_core::Error) -> PyErr {
    if let cherenkov_core::Error::Io {
        cause: Some(cause), ..
    } = &e
    {
        if let Some(os) = cause.downcast_ref::<std::io::Error>() {
            let message = cherenkov_core::source::redact::redact(&e.to_string());
            return PyOSError::new_err((os.raw_os_error().unwrap_or(0), message));
        }
    }
    to_py(e)
}

fn closed(name: &str) -> PyErr {
    PyValueError::new_err(format!("{name} is closed"))
}

fn directory_id(file: &mut FileWriter, path: &str) -> cherenkov_core::Result<DirectoryId> {
    if path.trim_matches('/').is_empty() {
        Ok(file.root())
    } else {
        file.mkdirs(path)
    }
}

/// A column type from its tuple: `("number", "float32")`, `("fixed", 3, inner)`,
/// `("list", inner, counter or None)`, `("string",)`, `("record", [(name, inner), ...])`.
fn column_type(t: &Bound<'_, PyAny>) -> Result<ColumnType, String> {
    let t = t
        .cast::<PyTuple>()
        .map_err(|_| format!("a type tuple, found {t}"))?;
    let kind: String = t
        .get_item(0)
        .and_then(|k| k.extract())
        .map_err(|e| e.to_string())?;
    let item = |i: usize| t.get_item(i).map_err(|e| e.to_string());
    Ok(match kind.as_str() {
        "number" => {
            let name: String = item(1)?.extract().map_err(|e: PyErr| e.to_string())?;
            ColumnType::Number(dtype(&name)?)
        }
        "fixed" => ColumnType::Fixed {
            size: item(1)?.extract().map_err(|e: PyErr| e.to_string())?,
            items: Box::new(column_type(&item(2)?)?),
        },
        "list" => ColumnType::List {
            items: Box::new(column_type(&item(1)?)?),
            counter: item(2)?.extract().map_err(|e: PyErr| e.to_string())?,
        },
        "string" => ColumnType::String,
        "record" => {
            let fields: Vec<(String, Bound<'_, PyAny>)> =
                item(1)?.extract().map_err(|e: PyErr| e.to_string())?;
            ColumnType::Record(
                fields
                    .into_iter()
                    .map(|(n, t)| Ok((n, column_type(&t)?)))
                    .collect::<Result<_, String>>()?,
            )
        }
        other => return Err(format!("unknown type kind {other:?}")),
    })
}

fn dtype(name: &str) -> Result<DType, String> {
    Ok(match name {
        "bool" => DType::Bool,
        "int8" => DType::I8,
        "int16" => DType::I16,
        "int32" => DType::I32,
        "int64" => DType::I64,
        "uint8" => DType::U8,
        "uint16" => DType::U16,
        "uint32" => DType::U32,
        "uint64" => DType::U64,
        "float16" => DType::F16,
        "float32" => DType::F32,
        "float64" => DType::F64,
        other => return Err(format!("no ROOT type for numpy's {other}")),
    })
}

/// A numpy array's bytes, read in place: the array is kept alive (and so unchanged in size)
/// for as long as the bytes are held.
struct NumpyBytes {
    _owner: Py<PyArray1<u8>>,
    ptr: *const u8,
    len: usize,
}

// SAFETY: the pointer is into the owner's buffer, which lives as long as `_owner` and is only
// read; numpy frees it only when the last reference goes.
unsafe impl Send for NumpyBytes {}
unsafe impl Sync for NumpyBytes {}

impl SharedBytes for NumpyBytes {
    fn bytes(&self) -> &[u8] {
        // SAFETY: see above; `len` is the array's length in bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// The bytes of a contiguous uint8 numpy array (a view of the column's data), not copied.
fn borrowed(array: &Bound<'_, PyAny>) -> PyResult<AlignedBytes> {
    let array = array.cast::<PyArray1<u8>>()?;
    if !array.is_c_contiguous() {
        return Err(PyValueError::new_err("array data must be contiguous"));
    }
    let (ptr, len) = {
        let slice = unsafe { array.as_slice()? };
        (slice.as_ptr(), slice.len())
    };
    Ok(AlignedBytes::shared(Arc::new(NumpyBytes {
        _owner: array.clone().unbind(),
        ptr,
        len,
    })))
}

/// An array from its layout dict (see `cherenkov.writing`).
fn array_from_py(d: &Bound<'_, PyDict>) -> PyResult<Array> {
    let get = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        d.get_item(key)?
            .ok_or_else(|| PyValueError::new_err(format!("layout without '{key}'")))
    };
    let class: String = get("class")?.extract()?;
    let mut array = match class.as_str() {
        "NumpyArray" => {
            let name: String = get("dtype")?.extract()?;
            let dtype = dtype(&name).map_err(PyValueError::new_err)?;
            let inner_shape: Vec<usize> = get("inner_shape")?.extract()?;
            let data = get("data")?;
            // A layout as a read hands it out (`convert.rs`) holds an array of its dtype: its
            // bytes are written back as read (the merger) without a copy.
            let data = match data.cast::<PyArray1<u8>>() {
                Ok(_) => data,
                Err(_) => data.call_method1("view", ("uint8",))?,
            };
            Array::numpy(dtype, inner_shape, borrowed(&data)?)
        }
        "ListOffsetArray" => {
            let offsets = get("offsets")?;
            let offsets = offsets.cast::<PyArray1<i64>>()?.readonly();
            let offsets = offsets.as_slice()?.to_vec();
            Array::list(offsets, array_from_py(get("content")?.cast::<PyDict>()?)?)
        }
        "RegularArray" => Array::regular(
            get("size")?.extract()?,
            get("length")?.extract()?,
            array_from_py(get("content")?.cast::<PyDict>()?)?,
        ),
        "RecordArray" => {
            let contents = get("contents")?
                .cast::<PyList>()?
                .iter()
                .map(|c| array_from_py(c.cast::<PyDict>()?))
                .collect::<PyResult<Vec<_>>>()?;
            Array::record(
                get("fields")?.extract()?,
                contents,
                get("length")?.extract()?,
            )
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "layout class {other} cannot be written"
            )))
        }
    };
    if let Some(p) = d.get_item("parameters")? {
        for (k, v) in p.cast::<PyDict>()?.iter() {
            if let Ok(v) = v.extract::<String>() {
                array = array.with_parameter(&k.extract::<String>()?, &v);
            }
        }
    }
    Ok(array)
}

/// Plan each of `inputs` in order up to the first refused: the plans, and why that one was.
fn plan_until_refused<I, P>(
    inputs: &[I],
    mut plan: impl FnMut(&I) -> Result<P, String>,
) -> (Vec<P>, Option<String>) {
    let mut plans = Vec::with_capacity(inputs.len());
    for input in inputs {
        match plan(input) {
            Ok(p) => plans.push(p),
            Err(why) => return (plans, Some(why)),
        }
    }
    (plans, None)
}
