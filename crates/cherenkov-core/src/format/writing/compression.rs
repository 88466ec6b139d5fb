//! Compression as ROOT writes it: blocks of at most 0xFFFFFF input bytes, each with its 9-byte
//! header (algorithm letters, method byte, compressed and uncompressed sizes as 3-byte
//! little-endian numbers), LZ4 blocks led by the xxhash64 of their compressed bytes. Settings
//! are spelled as ROOT spells them: algorithm × 100 + level (101 zlib 1, 207 lzma 7, 404 lz4 4,
//! 505 zstd 5; level 0 stores without compression). ROOT hands zstd twice its level (505 is
//! zstd's level 10, core/zstd's R__zipZSTD), and so does this writer: the same setting makes
//! the same sizes as ROOT's.

use crate::error::{Error, Result};
use crate::format::compression::Algorithm;
use std::io::Write;

/// The most input bytes one block holds (ROOT's kMAXZIPBUF).
pub const MAX_BLOCK: usize = 0xFF_FFFF;
const HEADER_LEN: usize = 9;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compression {
    pub algorithm: Algorithm,
    pub level: u32,
}

impl Compression {
    pub const NONE: Compression = Compression {
        algorithm: Algorithm::Uncompressed,
        level: 0,
    };

    /// From ROOT's spelling (`505`): algorithm 1 zlib, 2 lzma, 4 lz4, 5 zstd, 0 ROOT's global
    /// default (zlib); level 0 means none.
    pub fn from_setting(setting: i32) -> Result<Self> {
        let (algorithm, level) = (setting / 100, setting % 100);
        let refuse = |why: &str| {
            Err(Error::InvalidArgument(format!(
                "compression {setting}: {why} (ROOT spells it algorithm × 100 + level: 101 zlib 1, 207 lzma 7, 404 lz4 4, 505 zstd 5, 0 none)"
            )))
        };
        if !(0..10_000).contains(&setting) {
            return refuse("not a ROOT compression setting");
        }
        if level == 0 {
            return Ok(Self::NONE);
        }
        let algorithm = match algorithm {
            0 | 1 => Algorithm::Zlib,
            2 => Algorithm::Lzma,
            3 => return refuse("ROOT's old deflate (algorithm 3) is read, not written"),
            4 => Algorithm::Lz4,
            5 => Algorithm::Zstd,
            _ => return refuse("no such algorithm"),
        };
        Ok(Self {
            algorithm,
            level: level as u32,
        })
    }

    /// ROOT's spelling of this setting.
    pub fn setting(&self) -> i32 {
        let algorithm = match self.algorithm {
            Algorithm::Uncompressed => return 0,
            Algorithm::Zlib => 1,
            Algorithm::Lzma => 2,
            Algorithm::OldDeflate => 3,
            Algorithm::Lz4 => 4,
            Algorithm::Zstd => 5,
        };
        algorithm * 100 + self.level as i32
    }

    /// `data` compressed in ROOT's blocks, or `None` when it is to be stored as it is: no
    /// compression asked for, or a block that does not shrink (ROOT then stores the whole object
    /// uncompressed, which is how readers tell: stored bytes equal to the object's length).
    pub fn compress(&self, data: &[u8]) -> Option<Vec<u8>> {
        if self.algorithm == Algorithm::Uncompressed || data.is_empty() {
            return None;
        }
        let mut out = Vec::with_capacity(data.len() / 2 + HEADER_LEN);
        for block in data.chunks(MAX_BLOCK) {
            let start = out.len();
            out.extend_from_slice(&[0; HEADER_LEN]);
            self.compress_block(block, &mut out).ok()?;
            let compressed = out.len() - start - HEADER_LEN;
            if compressed + HEADER_LEN >= block.len() || compressed > MAX_BLOCK {
                return None;
            }
            let (magic, method) = self.magic();
            out[start..start + 2].copy_from_slice(magic);
            out[start + 2] = method;
            out[start + 3..start + 6].copy_from_slice(&(compressed as u32).to_le_bytes()[..3]);
            out[start + 6..start + 9].copy_from_slice(&(block.len() as u32).to_le_bytes()[..3]);
        }
        Some(out)
    }

    /// The header's letters and method byte, as ROOT writes them.
    fn magic(&self) -> (&'static [u8; 2], u8) {
        match self.algorithm {
            Algorithm::Zlib => (b"ZL", 8), // Z_DEFLATED
            Algorithm::Lzma => (b"XZ", 0),
            Algorithm::Lz4 => (b"L4", 1), // LZ4's major version
            Algorithm::Zstd => (b"ZS", 1),
            Algorithm::OldDeflate | Algorithm::Uncompressed => unreachable!("never written"),
        }
    }

    fn compress_block(&self, block: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        match self.algorithm {
            Algorithm::Zlib => {
                let level = flate2::Compression::new(self.level.min(9));
                let mut z = flate2::write::ZlibEncoder::new(out, level);
                z.write_all(block)?;
                z.finish()?;
            }
            Algorithm::Lzma => {
                // As ROOT: an xz stream with a CRC32 check.
                let stream = xz2::stream::Stream::new_easy_encoder(
                    self.level.min(9),
                    xz2::stream::Check::Crc32,
                )?;
                let mut x = xz2::write::XzEncoder::new_stream(out, stream);
                x.write_all(block)?;
                x.finish()?;
            }
            Algorithm::Lz4 => {
                // lz4_flex has LZ4's fast mode only: the level does not change the output.
                let compressed = lz4_flex::block::compress(block);
                out.extend_from_slice(&twox_hash::XxHash64::oneshot(0, &compressed).to_be_bytes());
                out.extend_from_slice(&compressed);
            }
            Algorithm::Zstd => ZSTD.with(|cell| -> std::io::Result<()> {
                // A compression context costs an allocation and set-up: one per thread and level.
                let mut slot = cell.borrow_mut();
                if slot.as_ref().is_none_or(|(level, _)| *level != self.level) {
                    let c = zstd::bulk::Compressor::new(zstd_level(self.level))?;
                    *slot = Some((self.level, c));
                }
                let (_, c) = slot.as_mut().expect("set above");
                let bound = zstd::zstd_safe::compress_bound(block.len());
                let at = out.len();
                out.resize(at + bound, 0);
                let n = c.compress_to_buffer(block, &mut out[at..])?;
                out.truncate(at + n);
                Ok(())
            })?,
            Algorithm::OldDeflate | Algorithm::Uncompressed => unreachable!("never written"),
        }
        Ok(())
    }
}

/// zstd's own level for ROOT's level (ROOT doubles it).
fn zstd_level(root_level: u32) -> i32 {
    (2 * root_level).min(22) as i32
}

thread_local! {
    static ZSTD: std::cell::RefCell<Option<(u32, zstd::bulk::Compressor<'static>)>> =
        const { std::cell::RefCell::new(None) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::compression::decompress;

    fn sample(n: usize) -> Vec<u8> {
        (0..n as u32)
            .flat_map(|i| (i % 251 + i / 1000).to_be_bytes())
            .collect()
    }

    #[test]
    fn every_algorithm_round_trips_through_the_reader() {
        let raw = sample(50_000);
        for setting in [101, 109, 207, 404, 505, 509] {
            let c = Compression::from_setting(setting).unwrap();
            assert_eq!(c.setting(), setting);
            let packed = c.compress(&raw).expect("compressible");
            assert!(packed.len() < raw.len());
            assert_eq!(
                decompress(&packed, raw.len(), "t").unwrap(),
                raw,
                "{setting}"
            );
        }
    }

    #[test]
    fn objects_past_one_block_are_split_at_0xffffff() {
        let raw = sample(5_000_000); // 20 MB: two blocks
        let packed = Compression::from_setting(501)
            .unwrap()
            .compress(&raw)
            .unwrap();
        let first_in = u32::from_le_bytes([packed[6], packed[7], packed[8], 0]) as usize;
        assert_eq!(first_in, MAX_BLOCK);
        assert_eq!(decompress(&packed, raw.len(), "t").unwrap(), raw);
    }

    #[test]
    fn what_does_not_shrink_is_stored_as_it_is() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                // xorshift64: bytes with nothing to compress.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 32) as u8
            })
            .collect();
        assert_eq!(
            Compression::from_setting(505).unwrap().compress(&noise),
            None
        );
        assert_eq!(
            Compression::from_setting(0).unwrap().compress(&sample(100)),
            None
        );
    }

    #[test]
    fn settings_root_cannot_spell_are_refused() {
        for bad in [-1, 301, 705, 10_000] {
            let e = Compression::from_setting(bad).unwrap_err().to_string();
            assert!(e.contains(&bad.to_string()), "{e}");
        }
        assert_eq!(
            Compression::from_setting(1).unwrap().algorithm,
            Algorithm::Zlib
        );
    }
}
