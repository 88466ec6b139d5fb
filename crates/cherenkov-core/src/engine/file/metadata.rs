//! The file's metadata regions read so far (the opening's head and tail, keys lists, objects):
//! later reads of them cost no request, and raw readers (uproot's source, fsspec: see
//! `engine::raw`) are served from them too.

use super::RootFile;
use crate::error::{Error, Result};
use crate::format::directory::{check_inside, Key};
use crate::source::ByteRange;
use bytes::Bytes;

impl RootFile {
    /// Whether an earlier metadata read holds `range` (then reading it costs no request).
    pub(crate) fn holds(&self, range: &ByteRange) -> bool {
        let regions = self.metadata.lock().unwrap();
        regions.iter().any(|(have, _)| have.contains(range))
    }

    /// The bytes of `r` when an earlier metadata read holds them.
    pub(crate) fn held(&self, r: &ByteRange) -> Option<Bytes> {
        if r.len == 0 {
            return Some(Bytes::new());
        }
        let regions = self.metadata.lock().unwrap();
        regions
            .iter()
            .find(|(have, _)| have.contains(r))
            .map(|(have, bytes)| {
                let start = (r.offset - have.offset) as usize;
                bytes.slice(start..start + r.len as usize)
            })
    }

    /// The whole file, when the metadata reads made while opening covered it.
    pub(crate) fn whole(&self) -> Option<&Bytes> {
        self.whole.as_ref()
    }

    /// The metadata regions joined into the whole file, when they cover it (the opening's head
    /// and tail of a small file).
    pub(super) fn joined_regions(&self) -> Option<Bytes> {
        let parts = self.held_parts(&ByteRange::new(0, self.size));
        let mut joined = Vec::with_capacity(self.size as usize);
        for (_, bytes) in parts {
            joined.extend_from_slice(&bytes?);
        }
        Some(Bytes::from(joined))
    }

    /// `r` cut into the parts earlier metadata reads hold, with their bytes, and the parts they
    /// do not (None), in order: a range across the opening's head and tail is held in two parts.
    pub(crate) fn held_parts(&self, r: &ByteRange) -> Vec<(ByteRange, Option<Bytes>)> {
        let regions = self.metadata.lock().unwrap();
        let mut parts = Vec::new();
        let mut at = r.offset;
        while at < r.end() {
            let holding = regions
                .iter()
                .filter(|(have, bytes)| {
                    have.offset <= at && at < have.end() && bytes.len() as u64 == have.len
                })
                .max_by_key(|(have, _)| have.end());
            let end = match holding {
                Some((have, bytes)) => {
                    let end = have.end().min(r.end());
                    let start = (at - have.offset) as usize;
                    let part = bytes.slice(start..start + (end - at) as usize);
                    parts.push((ByteRange::new(at, end - at), Some(part)));
                    end
                }
                None => {
                    let next = regions
                        .iter()
                        .map(|(have, _)| have.offset)
                        .filter(|&o| o > at && o < r.end())
                        .min()
                        .unwrap_or(r.end());
                    parts.push((ByteRange::new(at, next - at), None));
                    next
                }
            };
            at = end;
        }
        parts
    }

    /// Bring metadata regions into memory (in one request, those not held yet) without parsing
    /// them: a guess at where the metadata is, which a snapshot does not keep.
    pub(crate) async fn fetch_regions(&self, ranges: &[ByteRange]) -> Result<()> {
        let missing: Vec<ByteRange> = ranges
            .iter()
            .filter(|r| self.held(r).is_none())
            .copied()
            .collect();
        if !missing.is_empty() {
            let got = self.source.read_ranges(&missing).await?;
            self.metadata
                .lock()
                .unwrap()
                .extend(missing.into_iter().zip(got));
        }
        Ok(())
    }

    /// Read metadata ranges to parse them, serving what earlier reads hold and fetching the rest
    /// in one request; the ranges are kept for the file's snapshot.
    pub(crate) async fn read_metadata(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        self.fetch_regions(ranges).await?;
        self.used.lock().unwrap().extend_from_slice(ranges);
        ranges
            .iter()
            .map(|r| {
                self.held(r).ok_or_else(|| {
                    Error::io(
                        self.name(),
                        format!("range {}..{} was not returned", r.offset, r.end()),
                    )
                })
            })
            .collect()
    }

    /// Refuse ranges that do not lie inside the file (a raw reader's request).
    pub(crate) fn check_raw(&self, ranges: &[ByteRange]) -> Result<()> {
        match ranges.iter().find(|r| {
            r.offset
                .checked_add(r.len)
                .is_none_or(|end| end > self.size)
        }) {
            Some(r) => Err(Error::InvalidArgument(format!(
                "{}: bytes {}..{} asked for, past the end of the file ({} bytes)",
                self.name(),
                r.offset,
                r.offset.saturating_add(r.len),
                self.size
            ))),
            None => Ok(()),
        }
    }

    /// Keep a small region a raw reader read that is no basket (a directory, a keys list, an
    /// object): the engine's own reads of it (finding a tree in a directory) then cost no request.
    /// At most `KEPT_RAW_REGIONS` such regions of at most `KEPT_RAW_BYTES` each are kept.
    pub(crate) fn remember(&self, range: ByteRange, bytes: &Bytes) {
        const KEPT_RAW_REGIONS: usize = 256;
        const KEPT_RAW_BYTES: u64 = 1 << 20;
        let mut regions = self.metadata.lock().unwrap();
        if range.len <= KEPT_RAW_BYTES
            && regions.len() < KEPT_RAW_REGIONS
            && bytes.len() as u64 == range.len
        {
            regions.push((range, bytes.clone()));
        }
    }

    /// The uncompressed bytes of a key's object.
    pub async fn read_object(&self, key: &Key) -> Result<Vec<u8>> {
        check_inside(key.seek_key, key.nbytes as u64, self.size, &key.describe())
            .map_err(|e| e.in_file(self.name()))?;
        let raw = self
            .read_metadata(&[ByteRange::new(key.seek_key, key.nbytes as u64)])
            .await?
            .remove(0);
        key.object_data(&raw).map_err(|e| e.in_file(self.name()))
    }
}
