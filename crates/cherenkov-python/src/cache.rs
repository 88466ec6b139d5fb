//! The disk cache's housekeeping, for `cherenkov cache info|clear|prune`, and its notes (named
//! records the processing layer keeps there).

use cherenkov_core::source::cache::{self, notes};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::path::Path;

fn io_error(dir: &str, e: std::io::Error) -> PyErr {
    pyo3::exceptions::PyOSError::new_err(format!("cache {dir}: {e}"))
}

/// (files, entries, bytes) the cache at `dir` holds.
#[pyfunction]
pub fn cache_summary(dir: &str) -> (u64, u64, u64) {
    let s = cache::summary(Path::new(dir));
    (s.files, s.entries, s.bytes)
}

/// Remove everything the cache at `dir` holds; returns the bytes removed.
#[pyfunction]
pub fn cache_clear(dir: &str) -> PyResult<u64> {
    cache::clear(Path::new(dir)).map_err(|e| io_error(dir, e))
}

/// Remove least recently used entries until at most `max_bytes` remain; returns the bytes removed.
#[pyfunction]
pub fn cache_prune(dir: &str, max_bytes: u64) -> PyResult<u64> {
    cache::prune(Path::new(dir), max_bytes).map_err(|e| io_error(dir, e))
}

/// Wait (at most 30 s) until every entry queued for the disk cache is written: at exit, so that
/// the next process finds them.
#[pyfunction]
pub fn cache_flush(py: Python<'_>) {
    py.detach(cache::flush)
}

/// The note `name` kept in the cache at `dir`, or None (never written, damaged, or pruned).
#[pyfunction]
pub fn cache_note_get<'py>(py: Python<'py>, dir: &str, name: &str) -> Option<Bound<'py, PyBytes>> {
    let payload = py.detach(|| notes::get(Path::new(dir), name))?;
    Some(PyBytes::new(py, &payload))
}

/// Keep `payload` as the note `name` in the cache at `dir`.
#[pyfunction]
pub fn cache_note_put(py: Python<'_>, dir: &str, name: &str, payload: &[u8]) -> PyResult<()> {
    py.detach(|| notes::put(Path::new(dir), name, payload))
        .map_err(|e| io_error(dir, e))
}

/// Forget the note `name` in the cache at `dir`.
#[pyfunction]
pub fn cache_note_remove(dir: &str, name: &str) -> PyResult<()> {
    notes::remove(Path::new(dir), name).map_err(|e| io_error(dir, e))
}
