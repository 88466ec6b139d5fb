//! `Table`: what a TTree (`Tree`) and an RNTuple (`Ntuple`) share, defined once: their name and
//! entries, whole reads, and the step and lazy readers over them. `Tree` and `Ntuple` extend it
//! with their own metadata (branches, fields).

use crate::convert::{arrays_to_py, ItemToPy};
use crate::errors::to_py;
use crate::iterate::{StepIterator, Steps};
use crate::lazy::{AccessProfile, Lazy, LazyChunks};
use cherenkov_core::engine::lazy::{LazyOptions, LazyReader};
use cherenkov_core::engine::ntuple::Ntuple as CoreNtuple;
use cherenkov_core::engine::prefetch::{ReadAhead, StepReader};
use cherenkov_core::engine::runtime;
use cherenkov_core::engine::table::{read, Held, Table as CoreTable};
use cherenkov_core::engine::tree::TreeTable;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::{Arc, Mutex};

/// The engine's table behind a `Table`.
pub enum Readable {
    Tree(Arc<TreeTable>),
    Ntuple(Arc<CoreNtuple>),
}

/// `$body` with `$t` bound to the engine table, whichever it is (the generic readers below take
/// either).
macro_rules! on_table {
    ($readable:expr, $t:ident => $body:expr) => {
        match $readable {
            Readable::Tree($t) => $body,
            Readable::Ntuple($t) => $body,
        }
    };
}

/// A TTree or an RNTuple of an open file, and reads of its items (branches, fields).
#[pyclass(module = "cherenkov._core", subclass, frozen)]
pub struct Table {
    pub readable: Readable,
}

#[pymethods]
impl Table {
    #[getter]
    fn name(&self) -> String {
        match &self.readable {
            Readable::Tree(t) => t.tree.name.clone(),
            Readable::Ntuple(n) => n.name().to_string(),
        }
    }

    #[getter]
    fn num_entries(&self) -> u64 {
        on_table!(&self.readable, t => t.entries())
    }

    /// Entry boundaries of the clusters: [0, ..., num_entries] (an RNTuple's reads every page
    /// list).
    fn cluster_boundaries(&self, py: Python<'_>) -> PyResult<Vec<u64>> {
        match &self.readable {
            Readable::Tree(t) => Ok(t.tree.cluster_boundaries()),
            Readable::Ntuple(n) => py
                .detach(|| runtime().block_on(n.cluster_boundaries()))
                .map_err(to_py),
        }
    }

    /// Read items (by index) over [start, stop). Returns (arrays, stats): one dict per item
    /// with its columns' buffers as numpy arrays.
    fn read<'py>(
        &self,
        py: Python<'py>,
        indices: Vec<usize>,
        start: u64,
        stop: u64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        on_table!(&self.readable, t => read_items(py, t, indices, start, stop))
    }

    /// The byte ranges (offset, length) where items (by index) over [start, stop) are stored:
    /// their baskets or pages, in the order a read fetches them (for benchmarks that measure
    /// the decompression floor of a selection).
    fn stored_ranges(
        &self,
        py: Python<'_>,
        indices: Vec<usize>,
        start: u64,
        stop: u64,
    ) -> PyResult<Vec<(u64, u64)>> {
        on_table!(&self.readable, t => stored_ranges_of(py, &**t, indices, start, stop))
    }

    /// Read items over consecutive entry ranges with the next ones read ahead while the
    /// current one is used (`steps_ahead` to start with; None: 3, or 7 on a far link, see
    /// `ReadAhead::deeper_when_far`). Yields (start, stop, arrays, stats).
    #[pyo3(signature = (indices, steps, memory_budget=256 << 20, steps_ahead=None))]
    fn iterate(
        &self,
        py: Python<'_>,
        indices: Vec<usize>,
        steps: Vec<(u64, u64)>,
        memory_budget: u64,
        steps_ahead: Option<usize>,
    ) -> PyResult<StepIterator> {
        on_table!(&self.readable, t => iterate_items(
            py,
            t.clone(),
            indices,
            steps,
            memory_budget,
            steps_ahead,
        ))
    }

    /// Lazy chunks over `steps` that learn what is used (see `engine::lazy`).
    #[pyo3(signature = (steps, profile, learning=true, memory_budget=256 << 20, steps_ahead=3, startup_bytes=64 << 20))]
    fn chunks(
        &self,
        steps: Vec<(u64, u64)>,
        profile: &AccessProfile,
        learning: bool,
        memory_budget: u64,
        steps_ahead: usize,
        startup_bytes: u64,
    ) -> LazyChunks {
        let read_ahead = ReadAhead {
            memory_budget,
            steps: steps_ahead,
            ..ReadAhead::default()
        };
        on_table!(&self.readable, t => lazy_chunks(
            t.clone(),
            steps,
            profile,
            learning,
            read_ahead,
            startup_bytes,
        ))
    }
}

/// Item numbers come from the Python layer's name resolution; a wrong one is an IndexError.
fn check_items<T: CoreTable>(table: &T, items: &[usize]) -> PyResult<()> {
    match items.iter().find(|&&i| i >= table.item_count()) {
        Some(bad) => Err(pyo3::exceptions::PyIndexError::new_err(format!(
            "no item number {bad}: there are {}",
            table.item_count()
        ))),
        None => Ok(()),
    }
}

/// Where `items` over [start, stop) are stored: the byte ranges of their units, in plan order.
fn stored_ranges_of<T: CoreTable>(
    py: Python<'_>,
    table: &T,
    items: Vec<usize>,
    start: u64,
    stop: u64,
) -> PyResult<Vec<(u64, u64)>> {
    check_items(table, &items)?;
    let units = py
        .detach(|| runtime().block_on(table.plan(&items, start, stop)))
        .map_err(to_py)?;
    Ok(units
        .iter()
        .flat_map(|u| table.ranges(u))
        .map(|r| (r.offset, r.len))
        .collect())
}

/// Read `items` over [start, stop): (arrays, stats).
fn read_items<'py, T: CoreTable>(
    py: Python<'py>,
    table: &Arc<T>,
    items: Vec<usize>,
    start: u64,
    stop: u64,
) -> PyResult<Bound<'py, PyTuple>>
where
    T::Item: ItemToPy,
{
    check_items(&**table, &items)?;
    let (arrays, stats) = py
        .detach(|| runtime().block_on(read(table, &items, start, stop, &Held::new())))
        .map_err(to_py)?;
    PyTuple::new(
        py,
        [
            arrays_to_py(py, arrays)?.into_any(),
            stats.into_pyobject(py)?.into_any(),
        ],
    )
}

/// Read `items` over `steps`, the next steps read ahead while one is used.
fn iterate_items<T: CoreTable>(
    py: Python<'_>,
    table: Arc<T>,
    items: Vec<usize>,
    steps: Vec<(u64, u64)>,
    memory_budget: u64,
    steps_ahead: Option<usize>,
) -> PyResult<StepIterator>
where
    Steps: From<StepReader<T>>,
{
    check_items(&*table, &items)?;
    let read_ahead = ReadAhead {
        memory_budget,
        steps: steps_ahead.unwrap_or(ReadAhead::default().steps),
        deeper_when_far: steps_ahead.is_none(),
    };
    let reader = py
        .detach(|| runtime().block_on(StepReader::start(table, items, steps, read_ahead)))
        .map_err(to_py)?;
    Ok(StepIterator {
        reader: Mutex::new(Some(reader.into())),
    })
}

/// Lazy chunks over `steps` that learn what is used (see `engine::lazy`).
fn lazy_chunks<T: CoreTable>(
    table: Arc<T>,
    steps: Vec<(u64, u64)>,
    profile: &AccessProfile,
    learning: bool,
    read_ahead: ReadAhead,
    startup_bytes: u64,
) -> LazyChunks
where
    Lazy: From<LazyReader<T>>,
{
    let options = LazyOptions {
        read_ahead,
        learning,
        startup_bytes,
    };
    let reader = LazyReader::new(table, steps, profile.inner.clone(), options);
    LazyChunks {
        reader: Mutex::new(reader.into()),
    }
}
