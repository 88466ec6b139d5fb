//! `Ntuple`: an RNTuple's metadata (its fields); its reads are those of every `Table`.

use crate::errors::to_py;
use crate::table::{Readable, Table};
use cherenkov_core::engine::ntuple::Ntuple as CoreNtuple;
use cherenkov_core::engine::runtime;
use cherenkov_core::format::rntuple::fields::Node;
use pyo3::prelude::*;
use std::sync::Arc;

/// An RNTuple's metadata; reads of its fields come from its `Table` base.
#[pyclass(module = "cherenkov._core", extends = Table, frozen)]
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

#[pymethods]
impl Ntuple {
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

    /// Bytes its pages take in the file, over all clusters.
    fn stored_bytes(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| runtime().block_on(self.inner.stored_bytes()))
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
}

impl Ntuple {
    /// An RNTuple, readable through its `Table` base.
    pub fn new(ntuple: CoreNtuple) -> PyClassInitializer<Ntuple> {
        let inner = Arc::new(ntuple);
        PyClassInitializer::from(Table {
            readable: Readable::Ntuple(inner.clone()),
        })
        .add_subclass(Ntuple { inner })
    }
}
