//! Python bindings: hand core results to numpy without copies, release the GIL for all I/O and
//! decompression, and turn core errors into Python exceptions. One file per family of classes:
//! `file.rs` (RootFile), `metadata.rs` (FileMetadata: what opening learned), `tree.rs` (Tree), `ntuple.rs` (Ntuple), `iterate.rs`, `lazy.rs`,
//! `options.rs` (open's keywords, read once for every
//! caller), `table.rs` (Table: what Tree and Ntuple share), `raw.rs` (byte ranges for uproot and fsspec),
//! `cache.rs` (the disk cache's housekeeping), `writer.rs` (files written: `WritableFile`),
//! `stage.rs` (copying datasets to a local directory), `xrdcl.rs` (servers asking for gsi or krb5, read
//! through XrdCl), with `convert.rs` for arrays and `errors.rs` for
//! exceptions.

mod cache;
mod convert;
mod errors;
mod file;
mod iterate;
mod lazy;
mod metadata;
mod ntuple;
mod options;
mod raw;
mod stage;
mod table;
mod tree;
mod writer;
mod xrdcl;

use errors::{CherenkovError, FormatError, NotFoundError, UnsupportedBranch};
use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    xrdcl::register();
    m.add_function(wrap_pyfunction!(file::locate, m)?)?;
    m.add_function(wrap_pyfunction!(file::list_directory, m)?)?;
    m.add_function(wrap_pyfunction!(cache::cache_summary, m)?)?;
    m.add_function(wrap_pyfunction!(cache::cache_clear, m)?)?;
    m.add_function(wrap_pyfunction!(cache::cache_prune, m)?)?;
    m.add_function(wrap_pyfunction!(cache::cache_flush, m)?)?;
    m.add_function(wrap_pyfunction!(cache::cache_note_get, m)?)?;
    m.add_function(wrap_pyfunction!(cache::cache_note_put, m)?)?;
    m.add_function(wrap_pyfunction!(cache::cache_note_remove, m)?)?;
    m.add_function(wrap_pyfunction!(file::redact, m)?)?;
    m.add_function(wrap_pyfunction!(stage::stage, m)?)?;
    m.add_function(wrap_pyfunction!(file::forget_layouts, m)?)?;
    m.add("OPEN_OPTIONS", options::described())?;
    m.add_class::<file::RootFile>()?;
    m.add_class::<metadata::FileMetadata>()?;
    m.add_class::<table::Table>()?;
    m.add_class::<tree::Tree>()?;
    m.add_class::<raw::ByteBuffer>()?;
    m.add_class::<raw::RawSource>()?;
    m.add_class::<stage::StageJob>()?;
    m.add_class::<stage::StagedFile>()?;
    m.add_class::<ntuple::Ntuple>()?;
    m.add_class::<writer::WritableFile>()?;
    m.add_class::<ntuple::FieldInfo>()?;
    m.add_class::<iterate::StepIterator>()?;
    m.add_class::<lazy::AccessProfile>()?;
    m.add_class::<lazy::LazyChunks>()?;
    m.add_class::<tree::BranchInfo>()?;
    m.add_class::<cherenkov_core::engine::stats::StatsSnapshot>()?;
    m.add_class::<cherenkov_core::engine::output::ReadStats>()?;
    m.add_class::<cherenkov_core::engine::lazy::LazyStats>()?;
    m.add_class::<cherenkov_core::source::SourceCounters>()?;
    m.add_class::<cherenkov_core::source::multi::ReplicaReport>()?;
    m.add_class::<cherenkov_core::source::adaptive::StreamStep>()?;
    m.add_class::<cherenkov_core::source::multi::Quality>()?;
    let py = m.py();
    m.add("CherenkovError", py.get_type::<CherenkovError>())?;
    m.add("FormatError", py.get_type::<FormatError>())?;
    m.add("UnsupportedBranch", py.get_type::<UnsupportedBranch>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    errors::add_source_errors(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
