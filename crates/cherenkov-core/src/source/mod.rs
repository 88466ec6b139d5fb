//! Byte sources: where the bytes of a file come from.
//!
//! One small async trait, [`ByteSource`] (`byte_source.rs`): read a list of byte ranges, report the
//! source's limits. The engine above never knows the protocol. Range arithmetic is plain functions
//! (`ranges.rs`: [`coalesce_ranges`] and friends), so every backend and the engine plan requests
//! the same way; `open.rs` opens what a path or URL names, with the options of `options.rs`.

pub mod adaptive;
mod byte_source;
pub mod cache;
pub mod credentials;
pub mod direct;
pub mod external_credentials;
mod file_changed;
pub mod http;
pub mod local;
pub mod memory;
pub mod min_rate;
pub mod multi;
mod open;
mod options;
mod ranges;
pub mod redact;
pub mod retry;
pub mod trace;
pub mod xrootd;

pub use byte_source::{
    ByteRange, ByteSource, Opened, SharedSource, SourceCounters, SourceLimits, SourceReport, Tally,
};
pub use file_changed::{file_changed, is_file_changed, FileChanged};
pub use open::{list_directory, open, open_replicas};
pub use options::{OpeningHint, RequestOverrides, RequestPolicy, SourceOptions, DEFAULT_MIN_RATE};
pub use ranges::{
    coalesce_ranges, describe_ranges, join, join_split_pieces, slice_from_fetched,
    split_for_limits, DEFAULT_COALESCE_GAP,
};
