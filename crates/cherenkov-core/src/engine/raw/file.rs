//! Raw reads of any file (fsspec's `cherenkov://`: parquet, JSON corrections, ROOT files read by
//! uproot over fsspec): a file whose first read starts at its first byte gets the opening's head
//! and tail in the same request, and if those are a ROOT file's, it is read as one from then on
//! (`RawReads`: metadata from memory, baskets learned); otherwise, and for files first read
//! elsewhere, sequential and strided reads are read ahead (`ahead.rs`).

use super::ahead::RawReader;
use super::RawReads;
use crate::engine::file::{opening_reads, RootFile};
use crate::engine::options::OpenOptions;
use crate::error::Result;
use crate::source::{ByteRange, Opened};
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

pub struct RawFile {
    opened: Opened,
    options: OpenOptions,
    plain: RawReader,
    /// Whether the first read asked for the head (then the file was tried as ROOT).
    tried: AtomicBool,
    root: OnceLock<RawReads>,
}

impl RawFile {
    pub fn new(opened: Opened, options: OpenOptions) -> Self {
        let size = opened.source.size();
        Self {
            plain: RawReader::new(opened.source.clone(), size, options.speculation),
            opened,
            options,
            tried: AtomicBool::new(false),
            root: OnceLock::new(),
        }
    }

    /// The plain reader (its source and read-ahead counters).
    pub fn plain(&self) -> &RawReader {
        &self.plain
    }

    /// The file read as ROOT, once its first bytes said it is one.
    pub fn root(&self) -> Option<&RawReads> {
        self.root.get()
    }

    pub async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        if let Some(root) = self.root.get() {
            return root.read_ranges(ranges).await;
        }
        let first = ranges.iter().any(|r| r.offset == 0 && r.len >= 4);
        if !(first && self.options.speculation.enabled) || self.tried.swap(true, Ordering::SeqCst) {
            return self.plain.read_ranges(ranges).await;
        }
        let source = &self.opened.source;
        let opening = opening_reads(source.size());
        let mut wanted = ranges.to_vec();
        wanted.extend(&opening);
        let mut got = source.read_ranges(&wanted).await?;
        // Read on demand as any other miss: the counters see every range asked for.
        self.plain
            .stats
            .record_cache(0, ranges.len() as u64, 0, 0, 0);
        let reads: Vec<(ByteRange, Bytes)> = opening
            .into_iter()
            .zip(got.split_off(ranges.len()))
            .collect();
        if reads[0].1.starts_with(b"root") {
            let opened = Opened {
                reads,
                ..self.opened.clone()
            };
            if let Ok(file) = RootFile::open(opened, &self.options).await {
                let _ = self.root.set(RawReads::new(std::sync::Arc::new(file)));
            }
        }
        Ok(got)
    }
}
