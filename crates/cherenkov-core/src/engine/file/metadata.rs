//! The file's metadata regions read so far (the opening's head and tail, keys lists, objects):
//! later reads of them cost no request, and raw readers (uproot's source, fsspec) are served
//! from them too.

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
    pub(super) fn held(&self, r: &ByteRange) -> Option<Bytes> {
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

    /// Read byte ranges for a reader of raw bytes (uproot's source, fsspec): what opening already
    /// read (the speculative head and tail, keys lists) is served from memory, the rest in one
    /// request; the answer is not kept. Ranges must lie inside the file.
    pub async fn read_raw(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        if let Some(r) = ranges.iter().find(|r| {
            r.offset
                .checked_add(r.len)
                .is_none_or(|end| end > self.size)
        }) {
            return Err(Error::InvalidArgument(format!(
                "{}: bytes {}..{} asked for, past the end of the file ({} bytes)",
                self.name(),
                r.offset,
                r.offset.saturating_add(r.len),
                self.size
            )));
        }
        let mut out: Vec<Option<Bytes>> = ranges.iter().map(|r| self.held(r)).collect();
        let missing: Vec<ByteRange> = ranges
            .iter()
            .zip(&out)
            .filter(|(_, got)| got.is_none())
            .map(|(r, _)| *r)
            .collect();
        if !missing.is_empty() {
            let mut got = self.source.read_ranges(&missing).await?.into_iter();
            for slot in out.iter_mut().filter(|s| s.is_none()) {
                *slot = got.next();
            }
        }
        out.into_iter()
            .zip(ranges)
            .map(|(b, r)| {
                b.filter(|b| b.len() as u64 == r.len).ok_or_else(|| {
                    Error::io(
                        self.name(),
                        format!("range {}..{} was not returned whole", r.offset, r.end()),
                    )
                })
            })
            .collect()
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
