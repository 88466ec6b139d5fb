//! `Tree`: a TTree's metadata (its branches); its reads are those of every `Table`.

use crate::table::{Readable, Table};
use cherenkov_core::engine::file::RootFile as CoreFile;
use cherenkov_core::engine::tree::TreeTable;
use cherenkov_core::engine::writer::copy::same_branches;
use cherenkov_core::format::interpretation::interpret;
use cherenkov_core::format::tree::TreeMeta;
use pyo3::prelude::*;
use std::sync::Arc;

/// A TTree's metadata; reads of its branches come from its `Table` base.
#[pyclass(module = "cherenkov._core", extends = Table, frozen)]
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

#[pymethods]
impl Tree {
    #[getter]
    fn title(&self) -> String {
        self.meta.title.clone()
    }

    /// Every branch (depth first), with its type and sizes.
    fn branches(&self) -> Vec<BranchInfo> {
        let meta = &self.meta;
        meta.branches
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let (typename, kind, unsupported) =
                    match interpret(meta, i, self.file.streamers_read(), self.file.member_dims) {
                        Ok(interp) => (interp.typename(), interp.kind().to_string(), None),
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

    /// Whether this tree's branches are `other`'s in all that makes their columns (see
    /// `engine::writer::copy::same_branches`): a merge then describes it as `other`.
    fn same_branches(&self, py: Python<'_>, other: &Tree) -> bool {
        py.detach(|| same_branches(&self.meta, &other.meta))
    }

    /// What a merge compares between inputs, without a `BranchInfo` per branch:
    /// `(entries, [(name, typename)] of the readable top-level branches, compressed bytes of
    /// every basket, clusters)`.
    fn summary(&self) -> (u64, Vec<(String, String)>, u64, usize) {
        let meta = &self.meta;
        let columns = (0..meta.branches.len())
            .filter(|&i| meta.branches[i].parent.is_none())
            .filter_map(|i| {
                interpret(meta, i, self.file.streamers_read(), self.file.member_dims)
                    .ok()
                    .map(|interp| (meta.branches[i].name.clone(), interp.typename()))
            })
            .collect();
        let compressed = meta.branches.iter().map(|b| b.compressed_bytes()).sum();
        let clusters = meta.cluster_boundaries().len().saturating_sub(1);
        (meta.entries, columns, compressed, clusters)
    }
}

impl Tree {
    /// A TTree of `file`, readable through its `Table` base.
    pub fn new(file: Arc<CoreFile>, meta: TreeMeta) -> PyClassInitializer<Tree> {
        let meta = Arc::new(meta);
        let table = TreeTable::new(file.clone(), meta.clone());
        PyClassInitializer::from(Table {
            readable: Readable::Tree(Arc::new(table)),
        })
        .add_subclass(Tree { file, meta })
    }
}
