//! cherenkov core: the ROOT file format (`format`), where bytes come from (`source`) and the read
//! engine that plans, fetches and decompresses baskets (`engine`).

pub mod engine;
pub mod error;
pub mod format;
pub mod source;

pub use error::{Error, IoKind, Result};
