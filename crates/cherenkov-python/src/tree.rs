//! `Tree`: a TTree's metadata, whole reads, and the step and lazy readers over it.

use crate::iterate::StepIterator;
use crate::lazy::{AccessProfile, LazyChunks};
use crate::reading::{iterate_items, lazy_chunks, read_items};
use cherenkov_core::engine::file::RootFile as CoreFile;
use cherenkov_core::engine::prefetch::ReadAhead;
use cherenkov_core::engine::tree::TreeTable;
use cherenkov_core::format::interpretation::{interpret, Interpretation};
use cherenkov_core::format::tree::TreeMeta;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::Arc;

/// A TTree's metadata, and reads of its branches.
#[pyclass(module = "cherenkov._core", frozen)]
pub struct Tree {
    pub file: Arc<CoreFile>,
    pub meta: Arc<TreeMeta>,
}

/// What a branch holds and what it costs on disk.
#[pyclass(module = "cherenkov._core", get_all, frozen)]
pub struct BranchInfo {
    index: usize,
    name: String,
    path: String,
    parent: Option<usize>,
    /// TBranch, TBranchElement, ...
    class_name: String,
    title: String,
    typename: String,
    /// fixed, jagged, strings, record, or unsupported.
    kind: String,
    /// Why the branch cannot be read, when it cannot.
    unsupported: Option<String>,
    has_children: bool,
    entries: u64,
    compressed_bytes: u64,
    uncompressed_bytes: u64,
    num_baskets: usize,
    compression: i32,
    basket_entry_starts: Vec<u64>,
    basket_seeks: Vec<u64>,
    /// Bytes of each basket's key on disk (header and compressed data).
    basket_bytes: Vec<u32>,
}

#[pymethods]
impl BranchInfo {
    #[getter]
    fn readable(&self) -> bool {
        self.unsupported.is_none()
    }

    /// "zstd:5", "none", "inherit" (ROOT's algorithm * 100 + level).
    #[getter]
    fn compression_name(&self) -> String {
        compression_name(self.compression)
    }

    fn __repr__(&self) -> String {
        format!("<BranchInfo {:?} {}>", self.path, self.typename)
    }
}

/// ROOT's compression settings (algorithm * 100 + level) by name: "zstd:5", "none", "inherit".
pub fn compression_name(settings: i32) -> String {
    const NAMES: [&str; 6] = ["inherit", "zlib", "lzma", "old", "lz4", "zstd"];
    let (algorithm, level) = (settings / 100, settings % 100);
    match settings {
        c if c < 0 => "inherit".to_string(),
        0 => "none".to_string(),
        _ => match NAMES.get(algorithm as usize) {
            Some(name) => format!("{name}:{level}"),
            None => format!("algorithm {algorithm}:{level}"),
        },
    }
}

pub fn kind(i: &Interpretation) -> &'static str {
    match i {
        Interpretation::Fixed { .. } => "fixed",
        Interpretation::Jagged { .. } => "jagged",
        Interpretation::Strings { .. } => "strings",
        Interpretation::Record { .. } => "record",
        Interpretation::Objects { .. } => "objects",
        Interpretation::Group { .. } => "group",
    }
}

impl Tree {
    fn table(&self) -> TreeTable {
        TreeTable::new(self.file.clone(), self.meta.clone())
    }
}

#[pymethods]
impl Tree {
    #[getter]
    fn name(&self) -> String {
        self.meta.name.clone()
    }
    #[getter]
    fn title(&self) -> String {
        self.meta.title.clone()
    }
    #[getter]
    fn num_entries(&self) -> u64 {
        self.meta.entries
    }

    /// Entry boundaries of the clusters: [0, ..., num_entries].
    fn cluster_boundaries(&self) -> Vec<u64> {
        self.meta.cluster_boundaries()
    }

    /// Every branch (depth first), with its type and sizes.
    fn branches(&self) -> Vec<BranchInfo> {
        let meta = &self.meta;
        meta.branches
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let (typename, kind, unsupported) =
                    match interpret(meta, i, self.file.streamers_read()) {
                        Ok(interp) => (interp.typename(), kind(&interp).to_string(), None),
                        Err(u) => (u.typename, "unsupported".to_string(), Some(u.reason)),
                    };
                BranchInfo {
                    index: i,
                    name: b.name.clone(),
                    path: meta.branch_path(i),
                    parent: b.parent,
                    class_name: b.class.clone(),
                    title: b.title.clone(),
                    typename,
                    kind,
                    unsupported,
                    has_children: !b.children.is_empty(),
                    entries: b.entries,
                    compressed_bytes: b.compressed_bytes(),
                    uncompressed_bytes: b.uncompressed_bytes(),
                    num_baskets: b.num_baskets(),
                    compression: b.compress,
                    basket_entry_starts: b.baskets.iter().map(|l| l.entry_start).collect(),
                    basket_seeks: b.baskets.iter().map(|l| l.seek).collect(),
                    basket_bytes: b.baskets.iter().map(|l| l.bytes).collect(),
                }
            })
            .collect()
    }

    /// Read branches (by index) over [start, stop). Returns (arrays, stats): one dict per item
    /// with its columns' buffers as numpy arrays.
    fn read<'py>(
        &self,
        py: Python<'py>,
        indices: Vec<usize>,
        start: u64,
        stop: u64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        read_items(py, &self.table(), indices, start, stop)
    }

    /// Read branches over consecutive entry ranges with the next ones read ahead while the
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
        iterate_items(
            py,
            Arc::new(self.table()),
            indices,
            steps,
            memory_budget,
            steps_ahead,
        )
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
        lazy_chunks(
            Arc::new(self.table()),
            steps,
            profile,
            learning,
            read_ahead,
            startup_bytes,
        )
    }
}
