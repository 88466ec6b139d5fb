//! What `Tree` and `Ntuple` share: reading, stepping and lazy chunks over any engine `Table`.
//! Each class's methods hold only its Python signature and call these.

use crate::convert::{arrays_to_py, ItemToPy};
use crate::errors::to_py;
use crate::iterate::{StepIterator, Steps};
use crate::lazy::{AccessProfile, Lazy, LazyChunks};
use cherenkov_core::engine::lazy::{LazyOptions, LazyReader};
use cherenkov_core::engine::prefetch::{ReadAhead, StepReader};
use cherenkov_core::engine::runtime;
use cherenkov_core::engine::table::{read, Held, Table};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::{Arc, Mutex};

/// Item numbers come from the Python layer's name resolution; a wrong one is an IndexError.
fn check_items<T: Table>(table: &T, items: &[usize]) -> PyResult<()> {
    match items.iter().find(|&&i| i >= table.item_count()) {
        Some(bad) => Err(pyo3::exceptions::PyIndexError::new_err(format!(
            "no item number {bad}: there are {}",
            table.item_count()
        ))),
        None => Ok(()),
    }
}

/// Read `items` over [start, stop): (arrays, stats).
pub fn read_items<'py, T: Table>(
    py: Python<'py>,
    table: &T,
    items: Vec<usize>,
    start: u64,
    stop: u64,
) -> PyResult<Bound<'py, PyTuple>>
where
    T::Item: ItemToPy,
{
    check_items(table, &items)?;
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
pub fn iterate_items<T: Table>(
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
pub fn lazy_chunks<T: Table>(
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
