//! What opening a file learned, in a form that travels between processes and is kept on disk:
//! the file's size and version, and the bytes of the metadata regions its parsing used (the
//! header, the top directory record, keys lists, and the objects read: trees, streamer infos,
//! RNTuple anchors, envelopes and page lists). Not the speculative head and tail a first open
//! reads around them: a NanoAOD-like file's snapshot is its tree metadata and a few hundred bytes.
//!
//! Given one, `RootFile::open_known` opens the file without reading any of it again: only the
//! protocol's own opening remains (XRootD's login and open, HTTP's size probe), and a file that
//! has another size or version on its server than the snapshot says is refused as changed.
//!
//! Encoding (little-endian): `chkmeta1`, size u64, version length u32 (`u32::MAX`: none) and its
//! bytes, region count u32, per region (offset u64, length u64), the regions' bytes in that order
//! (a byte saying how: 0 as they are, 1 one zstd frame, which trees whose metadata ROOT left
//! uncompressed shrink to a seventh), their stored length u64 and them, then the XXH3-64 of
//! everything before it.

use super::RootFile;
use crate::error::{Error, Result};
use crate::source::ByteRange;
use bytes::Bytes;
use twox_hash::XxHash3_64;

const MAGIC: &[u8; 8] = b"chkmeta1";
const NO_VERSION: u32 = u32::MAX;
const WHAT: &str = "a metadata snapshot";
const RAW: u8 = 0;
const ZSTD: u8 = 1;
/// Fast, and as small as slower levels on tree metadata.
const ZSTD_LEVEL: i32 = 3;
/// Region bytes a snapshot may hold at most, whatever its header claims.
const MAX_REGION_BYTES: u64 = 1 << 30;

/// What opening a file learned (see the module's help).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataSnapshot {
    pub size: u64,
    /// The version of the file its source saw (a modification time, an ETag), where it knows one.
    pub version: Option<String>,
    /// Metadata regions and their bytes, in offset order, none inside another.
    pub regions: Vec<(ByteRange, Bytes)>,
}

impl MetadataSnapshot {
    /// Bytes of the regions held.
    pub fn region_bytes(&self) -> u64 {
        self.regions.iter().map(|(r, _)| r.len).sum()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let version = self.version.as_deref().map(str::as_bytes);
        let mut out = Vec::with_capacity(
            40 + version.map_or(0, <[u8]>::len)
                + 16 * self.regions.len()
                + self.region_bytes() as usize,
        );
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.size.to_le_bytes());
        match version {
            Some(v) => {
                out.extend_from_slice(&(v.len() as u32).to_le_bytes());
                out.extend_from_slice(v);
            }
            None => out.extend_from_slice(&NO_VERSION.to_le_bytes()),
        }
        out.extend_from_slice(&(self.regions.len() as u32).to_le_bytes());
        for (r, _) in &self.regions {
            out.extend_from_slice(&r.offset.to_le_bytes());
            out.extend_from_slice(&r.len.to_le_bytes());
        }
        let raw: Vec<u8> = self
            .regions
            .iter()
            .flat_map(|(_, b)| b.iter().copied())
            .collect();
        let packed = zstd::bulk::compress(&raw, ZSTD_LEVEL)
            .ok()
            .filter(|z| z.len() < raw.len());
        let (how, data) = match &packed {
            Some(z) => (ZSTD, z.as_slice()),
            None => (RAW, raw.as_slice()),
        };
        out.push(how);
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        out.extend_from_slice(data);
        let sum = XxHash3_64::oneshot(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    /// A snapshot from `to_bytes`; damaged or foreign bytes are an error, never a panic.
    pub fn from_bytes(data: &[u8]) -> Result<MetadataSnapshot> {
        let bad = |at: usize, expected: &str| Error::format(format!("{WHAT}, byte {at}"), expected);
        if data.len() < MAGIC.len() + 8 || &data[..MAGIC.len()] != MAGIC {
            return Err(bad(
                0,
                "the magic bytes 'chkmeta1' (made by File.metadata())",
            ));
        }
        let (body, sum) = data.split_at(data.len() - 8);
        if XxHash3_64::oneshot(body).to_le_bytes() != sum {
            return Err(bad(body.len(), "the checksum of the bytes before it"));
        }
        let mut c = Reader {
            data: body,
            at: MAGIC.len(),
        };
        let size = c.u64()?;
        let version = match c.u32()? {
            NO_VERSION => None,
            n => {
                let at = c.at;
                let text = std::str::from_utf8(c.take(n as u64)?);
                Some(text.map_err(|_| bad(at, "a UTF-8 version"))?.to_string())
            }
        };
        let count = c.u32()? as u64;
        if count.saturating_mul(16) > (body.len() - c.at) as u64 {
            return Err(bad(c.at, &format!("room for {count} regions")));
        }
        let mut ranges = Vec::with_capacity(count as usize);
        let mut end = 0u64;
        for _ in 0..count {
            let at = c.at;
            let r = ByteRange::new(c.u64()?, c.u64()?);
            if r.offset < end || r.offset.checked_add(r.len).is_none_or(|e| e > size) {
                return Err(bad(at, "regions in order, apart and inside the file"));
            }
            end = r.end();
            ranges.push(r);
        }
        // Regions lie apart inside the file: together no larger than it.
        let total: u64 = ranges.iter().map(|r| r.len).sum();
        let at = c.at;
        let how = c.take(1)?[0];
        let stored = c.u64()?;
        let data = c.take(stored)?;
        if c.at != body.len() {
            return Err(bad(c.at, "the end of the snapshot after its regions"));
        }
        if total > MAX_REGION_BYTES {
            return Err(bad(
                at,
                &format!("regions of a sane size, not {total} bytes"),
            ));
        }
        let data = match how {
            RAW => Bytes::copy_from_slice(data),
            ZSTD => unpack(data, total)
                .map(Bytes::from)
                .map_err(|e| bad(at, &format!("a zstd frame of the regions ({e})")))?,
            other => {
                return Err(bad(
                    at,
                    &format!("a known encoding of the regions, not {other}"),
                ))
            }
        };
        if data.len() as u64 != total {
            let found = format!("{total} bytes of regions, found {}", data.len());
            return Err(bad(at, &found));
        }
        let mut from = 0usize;
        let regions = ranges
            .into_iter()
            .map(|r| {
                let bytes = data.slice(from..from + r.len as usize);
                from += r.len as usize;
                (r, bytes)
            })
            .collect();
        Ok(MetadataSnapshot {
            size,
            version,
            regions,
        })
    }
}

/// The zstd frame `data`, expected to hold `total` bytes: memory grows with what it really holds,
/// never past one byte more than expected (which the caller then refuses).
fn unpack(data: &[u8], total: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    zstd::stream::read::Decoder::new(data)?
        .take(total + 1)
        .read_to_end(&mut out)?;
    Ok(out)
}

/// Reads the encoding's fields, each checked against the end of the data.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: u64) -> Result<&'a [u8]> {
        let left = (self.data.len() - self.at) as u64;
        if n > left {
            return Err(Error::format(
                format!("{WHAT}, byte {}", self.at),
                format!("{n} more bytes, found {left}"),
            ));
        }
        let data: &'a [u8] = self.data;
        let out = &data[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(out)
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
}

impl RootFile {
    /// What opening this file (and finding the trees and RNTuples asked for so far) read and
    /// parsed: enough for `open_known` to open it again without reading its metadata.
    pub fn snapshot(&self) -> MetadataSnapshot {
        let mut used = self.used.lock().unwrap().clone();
        used.sort();
        let mut kept: Vec<ByteRange> = Vec::with_capacity(used.len());
        for r in used {
            let Some(&last) = kept.last() else {
                kept.push(r);
                continue;
            };
            if last.contains(&r) {
                continue;
            }
            if r.offset >= last.end() {
                kept.push(r);
                continue;
            }
            // Overlapping ranges become one when one region holds both, else the rest of `r`.
            let joined = ByteRange::new(last.offset, r.end() - last.offset);
            if self.holds(&joined) {
                *kept.last_mut().unwrap() = joined;
            } else {
                kept.push(ByteRange::new(last.end(), r.end() - last.end()));
            }
        }
        let regions = kept
            .into_iter()
            .filter_map(|r| self.held(&r).map(|bytes| (r, bytes)))
            .collect();
        MetadataSnapshot {
            size: self.size,
            version: self.version.clone(),
            regions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> MetadataSnapshot {
        MetadataSnapshot {
            size: 10_000,
            version: Some("mtime 1700000000".into()),
            regions: vec![
                (ByteRange::new(0, 4), Bytes::from_static(b"root")),
                (ByteRange::new(9000, 3), Bytes::from_static(b"abc")),
            ],
        }
    }

    #[test]
    fn a_snapshot_reads_back_as_written() {
        for snapshot in [
            example(),
            MetadataSnapshot {
                version: None,
                regions: Vec::new(),
                ..example()
            },
        ] {
            let bytes = snapshot.to_bytes();
            assert_eq!(MetadataSnapshot::from_bytes(&bytes).unwrap(), snapshot);
        }
    }

    #[test]
    fn every_damaged_or_cut_snapshot_is_an_error() {
        let bytes = example().to_bytes();
        for cut in 0..bytes.len() {
            assert!(
                MetadataSnapshot::from_bytes(&bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            assert!(MetadataSnapshot::from_bytes(&damaged).is_err(), "byte {at}");
        }
    }

    #[test]
    fn regions_that_compress_are_stored_compressed() {
        // Like a tree's basket tables: a few sizes over and over.
        let table: Bytes = (0..40_000u32)
            .flat_map(|i| (32_000 + (i % 7) * 8).to_be_bytes())
            .collect::<Vec<u8>>()
            .into();
        let snapshot = MetadataSnapshot {
            size: 1 << 20,
            version: None,
            regions: vec![(ByteRange::new(1000, table.len() as u64), table)],
        };
        let bytes = snapshot.to_bytes();
        assert!(bytes.len() < 160_000 / 4, "{}", bytes.len());
        assert_eq!(MetadataSnapshot::from_bytes(&bytes).unwrap(), snapshot);
    }

    #[test]
    fn regions_must_lie_in_order_inside_the_file() {
        // Re-encoded with a valid checksum, so that only the layout is wrong.
        for regions in [
            vec![(ByteRange::new(9999, 3), Bytes::from_static(b"abc"))],
            vec![
                (ByteRange::new(10, 3), Bytes::from_static(b"abc")),
                (ByteRange::new(11, 3), Bytes::from_static(b"def")),
            ],
        ] {
            let bad = MetadataSnapshot {
                regions,
                ..example()
            };
            let e = MetadataSnapshot::from_bytes(&bad.to_bytes()).unwrap_err();
            assert!(e.to_string().contains("inside the file"), "{e}");
        }
    }
}
