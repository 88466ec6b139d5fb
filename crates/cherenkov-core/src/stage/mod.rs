//! Staging: a dataset's files copied to a local directory at the link's speed (`cherenkov stage`,
//! `cherenkov.stage`). Several files at once, each read in order with several reads in flight
//! through the same sources reads use (adaptive streams, replicas, redirectors, retries), written
//! under a temporary name, checked against the server's checksum where it keeps one (else by
//! size), then given its name (`copy.rs`). An interrupted stage resumes: files with their final
//! name are complete and skipped, a file in progress continues from what it holds.
//!
//! Plain files are written here: the writer's `sink/` layer (a local sink that drops its
//! temporary file when abandoned) does not fit a copy that must survive an interruption to
//! resume.

pub mod checksum;
mod copy;

use crate::error::Result;
use crate::source::SourceOptions;
use futures_util::stream::{self, StreamExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How a dataset is staged.
#[derive(Clone, Debug)]
pub struct StageOptions {
    /// Files copied at once.
    pub files_at_once: usize,
    /// Bytes of one read.
    pub chunk_bytes: u64,
    /// Reads in flight per file: `reads_in_flight * chunk_bytes` is what one file keeps in
    /// flight (and in memory), which must cover the link's bandwidth-delay product.
    pub reads_in_flight: usize,
    /// Check each copy against its server's checksum, where the server keeps one.
    pub verify: bool,
    /// Drop each copy from the page cache once written (see `source::direct`).
    pub direct_io: bool,
    /// How the files are opened (connections, replicas, credentials, ...).
    pub source: SourceOptions,
}

impl Default for StageOptions {
    fn default() -> Self {
        Self {
            files_at_once: 4,
            chunk_bytes: 8 << 20,
            reads_in_flight: 8,
            verify: true,
            direct_io: false,
            source: SourceOptions::default(),
        }
    }
}

/// One file to stage: its replicas (one URL, or several), and where it goes.
#[derive(Clone, Debug)]
pub struct StageFile {
    pub urls: Vec<String>,
    pub dest: PathBuf,
}

/// How a staged copy was checked.
#[derive(Clone, Debug, PartialEq)]
pub enum Verified {
    /// Against the server's checksum of this algorithm.
    Checksum(String),
    /// By its size: the source has no checksum to ask for (HTTP, local files) or verifying was
    /// off.
    Size,
    /// By its size: the server's checksum could not be compared (why).
    SizeOnly(String),
    /// Already in place from an earlier stage (checked then).
    Earlier,
}

impl Verified {
    /// How it reads in reports ("adler32", "size", "size (md5 is not computed here)", "earlier").
    pub fn describe(&self) -> String {
        match self {
            Verified::Checksum(algorithm) => algorithm.clone(),
            Verified::Size => "size".into(),
            Verified::SizeOnly(why) => format!("size ({why})"),
            Verified::Earlier => "earlier".into(),
        }
    }
}

/// A file staged.
#[derive(Clone, Debug)]
pub struct Staged {
    /// Its source, secrets redacted.
    pub source: String,
    pub path: PathBuf,
    pub bytes: u64,
    /// Bytes this stage copied (the file's size, less what an earlier one had).
    pub copied: u64,
    /// Bytes an interrupted earlier stage had copied, continued from.
    pub resumed_from: u64,
    pub verified: Verified,
    pub seconds: f64,
}

/// What a stage has done so far, for progress bars (read while it runs).
#[derive(Debug, Default)]
pub struct Progress {
    /// Bytes of the files started, and of those in place (copied now or before).
    bytes_total: AtomicU64,
    bytes_done: AtomicU64,
    files_done: AtomicU64,
}

impl Progress {
    fn add_total(&self, bytes: u64) {
        self.bytes_total.fetch_add(bytes, Ordering::Relaxed);
    }
    fn add_done(&self, bytes: u64) {
        self.bytes_done.fetch_add(bytes, Ordering::Relaxed);
    }
    fn file_done(&self) {
        self.files_done.fetch_add(1, Ordering::Relaxed);
    }

    /// (bytes in place, bytes of the files started, files done).
    pub fn snapshot(&self) -> (u64, u64, u64) {
        (
            self.bytes_done.load(Ordering::Relaxed),
            self.bytes_total.load(Ordering::Relaxed),
            self.files_done.load(Ordering::Relaxed),
        )
    }
}

/// Stage `files`, `options.files_at_once` at a time; each file's outcome, in order (one failing
/// does not stop the others).
pub async fn stage(
    files: Vec<StageFile>,
    options: Arc<StageOptions>,
    progress: Arc<Progress>,
) -> Vec<Result<Staged>> {
    let at_once = options.files_at_once.max(1);
    // Unordered: a slow file does not hold back the start of the next ones.
    let mut done: Vec<(usize, Result<Staged>)> = stream::iter(files.into_iter().enumerate())
        .map(move |(i, f)| {
            let (options, progress) = (options.clone(), progress.clone());
            async move { (i, copy::copy(&f.urls, &f.dest, &options, &progress).await) }
        })
        .buffer_unordered(at_once)
        .collect()
        .await;
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, staged)| staged).collect()
}
