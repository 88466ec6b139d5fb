//! cherenkov core: the ROOT file format (`format`, parsing and writing), where bytes come from
//! (`source`) and where written bytes go (`sink`), the engine that reads (plans, fetches and
//! decompresses baskets) and writes (`engine/writer`: clusters, baskets, metadata), and the copy
//! of whole files to a local directory (`stage`).

pub mod engine;
pub mod error;
pub mod format;
pub mod sink;
pub mod source;
pub mod stage;

pub use error::{Error, IoKind, Result};
