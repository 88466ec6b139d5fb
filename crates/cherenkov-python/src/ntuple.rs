//! `Ntuple`: an RNTuple's metadata, whole reads, and the step and lazy readers over it.

use crate::errors::to_py;
use crate::iterate::StepIterator;
use crate::lazy::{AccessProfile, LazyChunks};
use crate::reading::{iterate_items, lazy_chunks, read_items};
use cherenkov_core::engine::ntuple::Ntuple as CoreNtuple;
use cherenkov_core::engine::prefetch::ReadAhead;
use cherenkov_core::engine::runtime;
use cherenkov_core::engine::table::Table;
use cherenkov_core::format::rntuple::fields::Node;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::Arc;

/// An RNTuple of an open file.
#[pyclass(module = "cherenkov._core", frozen)]
pub struct Ntuple {
    pub inner: Arc<CoreNtuple>,
}

/// What a field holds and what it costs on disk.
#[pyclass(module = "cherenkov._core", get_all, frozen)]
pub struct FieldInfo {
    index: usize,
    /// Its path ("jets.pt"), as `keys()` lists it.
    path: String,
    name: String,
    typename: String,
    type_alias: String,
    description: String,
    /// The top of its array: numpy, list, option, regular, record, union, string.
    kind: String,
    /// Why the field cannot be read, when it cannot.
    unsupported: Option<String>,
    /// Whether it has subfields of its own with paths.
    has_children: bool,
    compressed_bytes: u64,
    uncompressed_bytes: u64,
    num_pages: u64,
    compression: u32,
}

#[pymethods]
impl FieldInfo {
    #[getter]
    fn readable(&self) -> bool {
        self.unsupported.is_none()
    }

    /// "zstd:5", "none" (of its first stored column; "none" too when it has no pages).
    #[getter]
    fn compression_name(&self) -> String {
        crate::tree::compression_name(i32::try_from(self.compression).unwrap_or(i32::MAX))
    }

    fn __repr__(&self) -> String {
        format!("<FieldInfo {:?} {}>", self.path, self.typename)
    }
}

fn kind(node: &Node) -> &'static str {
    match node {
        Node::Numpy { .. } | Node::Cardinality { .. } => "numpy",
        Node::Strings { .. } => "string",
        Node::Regular { .. } => "regular",
        Node::List { .. } => "list",
        Node::Optional { .. } => "option",
        Node::Record { .. } => "record",
        Node::Variant { .. } => "union",
        Node::Unmasked(_) => "option",
    }
}

impl Ntuple {}

#[pymethods]
impl Ntuple {
    #[getter]
    fn name(&self) -> String {
        self.inner.name().to_string()
    }
    #[getter]
    fn description(&self) -> String {
        self.inner.desc.description.clone()
    }
    /// The library or program that wrote it.
    #[getter]
    fn writer(&self) -> String {
        self.inner.desc.writer.clone()
    }
    /// The format version its anchor states ("1.0.0.1").
    #[getter]
    fn format_version(&self) -> String {
        self.inner.anchor.version_string()
    }
    #[getter]
    fn num_entries(&self) -> u64 {
        self.inner.entries()
    }

    /// Entry boundaries of the clusters: [0, ..., num_entries] (reads every page list).
    fn cluster_boundaries(&self, py: Python<'_>) -> PyResult<Vec<u64>> {
        py.detach(|| runtime().block_on(self.inner.cluster_boundaries()))
            .map_err(to_py)
    }

    /// Every field with a path (depth first, as uproot's `keys()`), with its type and sizes.
    fn fields(&self, py: Python<'_>) -> PyResult<Vec<FieldInfo>> {
        let sizes = py
            .detach(|| runtime().block_on(self.inner.item_sizes()))
            .map_err(to_py)?;
        let desc = &self.inner.desc;
        Ok(self
            .inner
            .items()
            .iter()
            .zip(sizes)
            .enumerate()
            .map(|(index, ((path, field, node), sizes))| {
                let rec = desc.field(*field);
                FieldInfo {
                    index,
                    path: path.clone(),
                    name: desc.display_name(*field).to_string(),
                    typename: rec.type_name.clone(),
                    type_alias: rec.type_alias.clone(),
                    description: rec.description.clone(),
                    kind: node.as_ref().map_or("unsupported", kind).to_string(),
                    unsupported: node.as_ref().err().map(|u| u.reason.clone()),
                    has_children: !desc.visible_children(*field).is_empty(),
                    compressed_bytes: sizes.compressed_bytes,
                    uncompressed_bytes: sizes.uncompressed_bytes,
                    num_pages: sizes.pages,
                    compression: sizes.compression,
                }
            })
            .collect())
    }

    /// Read fields (by index) over [start, stop). Returns (arrays, stats): one dict per item
    /// with its columns' buffers as numpy arrays.
    fn read<'py>(
        &self,
        py: Python<'py>,
        indices: Vec<usize>,
        start: u64,
        stop: u64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        read_items(py, &*self.inner, indices, start, stop)
    }

    /// Read fields over consecutive entry ranges with the next ones read ahead while the
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
            self.inner.clone(),
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
            self.inner.clone(),
            steps,
            profile,
            learning,
            read_ahead,
            startup_bytes,
        )
    }
}
