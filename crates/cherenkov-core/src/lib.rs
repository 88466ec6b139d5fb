//! cherenkov core: the ROOT file format (`format`, parsing and writing), where bytes come from
//! (`source`) and where written bytes go (`sink`), and the engine that reads (plans, fetches and
//! decompresses baskets) and writes (`engine/writer`: clusters, baskets, metadata).

pub mod engine;
pub mod error;
pub mod format;
pub mod sink;
pub mod source;

pub use error::{Error, IoKind, Result};
