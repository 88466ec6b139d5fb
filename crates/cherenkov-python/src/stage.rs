//! `stage()`: copying a dataset's files to a local directory (see the core's `stage`), run on the
//! engine's runtime while Python watches its progress (`StageJob`), and cancelled with it.

use crate::errors::to_py;
use crate::options::open_options;
use cherenkov_core::engine::runtime;
use cherenkov_core::stage::{self as core_stage, Progress, StageFile, StageOptions, Staged};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// A file staged: where from (`source`, secrets redacted), where to (`path`), its size
/// (`bytes`), what this stage copied of it (`copied`; 0 when it was already there), what an
/// interrupted stage had left to continue from (`resumed_from`), how it was checked
/// (`verified`: a checksum algorithm such as "adler32", "size", or "earlier") and how long it
/// took (`seconds`).
#[pyclass(module = "cherenkov._core", get_all, frozen)]
pub struct StagedFile {
    source: String,
    path: String,
    bytes: u64,
    copied: u64,
    resumed_from: u64,
    verified: String,
    seconds: f64,
}

#[pymethods]
impl StagedFile {
    fn __repr__(&self) -> String {
        format!(
            "<StagedFile {} ({} bytes, {} copied, verified by {})>",
            self.path, self.bytes, self.copied, self.verified
        )
    }
}

impl From<Staged> for StagedFile {
    fn from(s: Staged) -> Self {
        StagedFile {
            source: s.source,
            path: s.path.to_string_lossy().into_owned(),
            bytes: s.bytes,
            copied: s.copied,
            resumed_from: s.resumed_from,
            verified: s.verified.describe(),
            seconds: s.seconds,
        }
    }
}

type Outcomes = Vec<cherenkov_core::Result<Staged>>;

/// A stage running in the background.
#[pyclass(module = "cherenkov._core")]
pub struct StageJob {
    progress: Arc<Progress>,
    task: Mutex<Option<JoinHandle<Outcomes>>>,
}

#[pymethods]
impl StageJob {
    /// (bytes in place, bytes of the files started so far, files done).
    fn progress(&self) -> (u64, u64, u64) {
        self.progress.snapshot()
    }

    /// Wait up to `seconds` for the stage to end; whether it has.
    fn wait(&self, py: Python<'_>, seconds: f64) -> bool {
        let task = self.task.lock().unwrap();
        let Some(handle) = task.as_ref() else {
            return true;
        };
        let until = std::time::Instant::now() + Duration::from_secs_f64(seconds.max(0.0));
        py.detach(|| {
            while !handle.is_finished() && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            handle.is_finished()
        })
    }

    /// Each file's outcome, in order: a `StagedFile`, or the exception that stopped its copy.
    /// Waits for the stage to end.
    fn results(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        let handle = self.task.lock().unwrap().take().ok_or_else(|| {
            pyo3::exceptions::PyRuntimeError::new_err("the results were taken already")
        })?;
        let outcomes =
            py.detach(|| runtime().block_on(handle))
                .map_err(|e| match e.is_cancelled() {
                    true => pyo3::exceptions::PyRuntimeError::new_err("the stage was cancelled"),
                    false => {
                        pyo3::exceptions::PyRuntimeError::new_err(format!("the stage failed: {e}"))
                    }
                })?;
        outcomes
            .into_iter()
            .map(|outcome| match outcome {
                Ok(staged) => Ok(Py::new(py, StagedFile::from(staged))?.into_any()),
                Err(e) => Ok(to_py(e).into_value(py).into_any()),
            })
            .collect()
    }

    /// Stop: reads in flight are cancelled, copies in progress stay for a later stage to resume
    /// (`wait` tells when it has stopped).
    fn cancel(&self) {
        if let Some(handle) = self.task.lock().unwrap().as_ref() {
            handle.abort();
        }
    }
}

impl Drop for StageJob {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// Start staging `files` (each its replicas' URLs and its destination path) with the open
/// options in `options`; see `cherenkov.stage`.
#[pyfunction]
#[pyo3(signature = (files, files_at_once=4, chunk_bytes=8 << 20, reads_in_flight=8, verify=true, options=None))]
pub fn stage(
    files: Vec<(Vec<String>, String)>,
    files_at_once: usize,
    chunk_bytes: u64,
    reads_in_flight: usize,
    verify: bool,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<StageJob> {
    let opened = open_options(options)?;
    let options = StageOptions {
        files_at_once,
        chunk_bytes,
        reads_in_flight,
        verify,
        direct_io: opened.source.direct_io,
        source: opened.source,
    };
    let files = files
        .into_iter()
        .map(|(urls, dest)| StageFile {
            urls,
            dest: dest.into(),
        })
        .collect();
    let progress = Arc::new(Progress::default());
    let task = runtime().spawn(core_stage::stage(
        files,
        Arc::new(options),
        progress.clone(),
    ));
    Ok(StageJob {
        progress,
        task: Mutex::new(Some(task)),
    })
}
