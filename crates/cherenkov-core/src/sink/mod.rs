//! Where written bytes go: the writing side's counterpart of `source/`. A sink takes byte ranges
//! to write and makes the file visible, complete, only when it is finished: until then the bytes
//! live under a temporary name, so a failed or abandoned write never leaves a file that looks
//! complete (dropping a sink unfinished removes them).
//!
//! The file writer (`engine/writer/file.rs`) writes in a pattern remote sinks can follow: the
//! records of the file one after another at increasing offsets (appends), then at close a few
//! records rewritten in place (the header and the directories' records, allocated when the file
//! and its directories were made); only updating an existing file writes elsewhere. That shape
//! admits the uploads to come without changing the trait:
//! - XRootD: `kXR_open` of the temporary name with `kXR_new|kXR_mkpath`, `write_at` as
//!   `kXR_write` (pipelined on the connection, acknowledged by `flush`), `finish` as
//!   `kXR_sync`, `kXR_close` and `kXR_mv` to the final name.
//! - HTTP: a PUT carries bytes in order, so an HTTP sink would hold the head (up to the first
//!   directory records) in memory, send the rest as the parts of a multipart upload as they fill,
//!   and the head as the first part at `finish` (S3-style uploads assemble parts by number, not
//!   by arrival), then complete the upload: the object appears whole or not at all.
//!
//! Sinks are synchronous: the writer calls them from its own thread while the next cluster
//! compresses; a network sink would hand each write to a task on the I/O runtime and wait for
//! the acknowledgments in `flush` and `finish`.

pub mod local;

use crate::error::Result;

pub trait Sink: Send {
    /// The file's name, for error messages.
    fn name(&self) -> &str;

    /// Write `bytes` at `offset`.
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> Result<()>;

    /// Everything written so far is stored (a full disk shows here at the latest).
    fn flush(&mut self) -> Result<()>;

    /// Store the rest and make the file visible under its name, complete.
    fn finish(self: Box<Self>) -> Result<()>;
}

/// A sink for a local path, written under a temporary name beside it (see `local`).
pub fn create(path: &str) -> Result<Box<dyn Sink>> {
    Ok(Box::new(local::LocalSink::create(path)?))
}
