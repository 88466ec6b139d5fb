//! cherenkov core: the ROOT file format (`format`), where bytes come from (`source`), the read
//! engine that plans, fetches and decompresses baskets (`engine`), and the copy of whole files
//! to a local directory (`stage`).

pub mod engine;
pub mod error;
pub mod format;
pub mod source;
pub mod stage;

pub use error::{Error, Result};
