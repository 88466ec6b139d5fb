//! ROOT compression blocks. Each block has a 9-byte header: two letters naming the algorithm,
//! one method byte, then the compressed and uncompressed sizes as 3-byte little-endian numbers.
//! Objects larger than 0xFFFFFF bytes are split into several blocks.

use crate::error::{Error, Result};
use std::io::Read;

const HEADER_LEN: usize = 9;
/// LZ4 blocks start with an 8-byte xxhash64 checksum of the compressed bytes.
const LZ4_CHECKSUM_LEN: usize = 8;
/// Memory the lzma decoder may take. ROOT compresses with presets up to 9 (a 64 MiB dictionary,
/// decoded in about 65 MiB); a block header can ask for a 4 GiB dictionary, allocated up front.
const LZMA_MEMORY_LIMIT: u64 = 128 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    Zlib,
    Lzma,
    Lz4,
    Zstd,
    /// ROOT's original deflate implementation ("CS"), a raw deflate stream.
    OldDeflate,
    Uncompressed,
}

impl Algorithm {
    pub fn name(&self) -> &'static str {
        match self {
            Algorithm::Zlib => "zlib",
            Algorithm::Lzma => "lzma",
            Algorithm::Lz4 => "lz4",
            Algorithm::Zstd => "zstd",
            Algorithm::OldDeflate => "old-deflate",
            Algorithm::Uncompressed => "none",
        }
    }

    fn from_magic(magic: &[u8]) -> Option<Self> {
        Some(match magic {
            b"ZL" => Algorithm::Zlib,
            b"XZ" => Algorithm::Lzma,
            b"L4" => Algorithm::Lz4,
            b"ZS" => Algorithm::Zstd,
            b"CS" => Algorithm::OldDeflate,
            _ => return None,
        })
    }
}

/// The algorithm of the first block of a compressed payload (for summaries).
pub fn algorithm_of(compressed: &[u8]) -> Option<Algorithm> {
    compressed.get(..2).and_then(Algorithm::from_magic)
}

fn u24_le(b: &[u8]) -> usize {
    b[0] as usize | (b[1] as usize) << 8 | (b[2] as usize) << 16
}

/// Decompress a key payload of `compressed.len()` bytes into exactly `uncompressed_len` bytes.
/// `origin` names the object for errors ("basket 3 of branch 'pt' at file offset 1234").
/// The output buffer grows block by block, so a lying size field cannot allocate more than the
/// blocks actually present declare (each at most 16 MiB).
pub fn decompress(compressed: &[u8], uncompressed_len: usize, origin: &str) -> Result<Vec<u8>> {
    let err = |pos: usize, expected: String| {
        Error::format(format!("{origin} compressed byte {pos}"), expected)
    };
    let mut out: Vec<u8> = Vec::with_capacity(
        uncompressed_len
            .min(compressed.len().saturating_mul(16))
            .min(1 << 28),
    );
    let mut pos = 0usize;
    while out.len() < uncompressed_len {
        let header = compressed
            .get(pos..pos + HEADER_LEN)
            .ok_or_else(|| err(pos, format!("a 9-byte compression header ({} of {uncompressed_len} bytes decompressed so far)", out.len())))?;
        let algorithm = Algorithm::from_magic(&header[..2]).ok_or_else(|| {
            err(
                pos,
                format!(
                    "a compression header starting with ZL, XZ, L4, ZS or CS, found {:?}",
                    String::from_utf8_lossy(&header[..2])
                ),
            )
        })?;
        let block_len = u24_le(&header[3..6]);
        let block_out = u24_le(&header[6..9]);
        let start = pos + HEADER_LEN;
        let block = compressed.get(start..start + block_len).ok_or_else(|| {
            err(
                pos,
                format!(
                    "a {} block of {block_len} bytes, but only {} bytes remain",
                    algorithm.name(),
                    compressed.len() - start.min(compressed.len())
                ),
            )
        })?;
        if out.len() + block_out > uncompressed_len {
            return Err(err(
                pos,
                format!(
                    "blocks adding up to {uncompressed_len} bytes, but this one would reach {}",
                    out.len() + block_out
                ),
            ));
        }
        let before = out.len();
        out.resize(before + block_out, 0);
        decompress_block(algorithm, block, &mut out[before..]).map_err(|m| err(pos, m))?;
        pos = start + block_len;
    }
    Ok(out)
}

/// Decompress one block into `dest`, which must be filled exactly.
fn decompress_block(
    algorithm: Algorithm,
    block: &[u8],
    dest: &mut [u8],
) -> std::result::Result<(), String> {
    let want = dest.len();
    let filled = match algorithm {
        Algorithm::Zlib => read_fully(flate2::read::ZlibDecoder::new(block), dest),
        Algorithm::OldDeflate => read_fully(flate2::read::DeflateDecoder::new(block), dest),
        Algorithm::Lzma => xz2::stream::Stream::new_stream_decoder(LZMA_MEMORY_LIMIT, 0)
            .map_err(|e| e.to_string())
            .and_then(|stream| read_fully(xz2::read::XzDecoder::new_stream(block, stream), dest)),
        Algorithm::Zstd => ZSTD.with(|cell| {
            // A decompression context costs an allocation and set-up: keep one per thread.
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                *slot = Some(zstd::bulk::Decompressor::new().map_err(|e| e.to_string())?);
            }
            slot.as_mut()
                .unwrap()
                .decompress_to_buffer(block, dest)
                .map_err(|e| e.to_string())
        }),
        Algorithm::Lz4 => {
            if block.len() < LZ4_CHECKSUM_LEN {
                return Err("an lz4 block with its 8-byte checksum".into());
            }
            let (checksum, payload) = block.split_at(LZ4_CHECKSUM_LEN);
            let expected = u64::from_be_bytes(checksum.try_into().unwrap());
            let actual = twox_hash::XxHash64::oneshot(0, payload);
            if expected != actual {
                return Err(format!(
                    "lz4 xxhash64 checksum {expected:#018x}, computed {actual:#018x}"
                ));
            }
            lz4_flex::block::decompress_into(payload, dest).map_err(|e| e.to_string())
        }
        Algorithm::Uncompressed => unreachable!("never named in a block header"),
    }
    .map_err(|e| format!("a valid {} block: {e}", algorithm.name()))?;
    if filled != want {
        return Err(format!(
            "a {} block decompressing to {want} bytes, got {filled}",
            algorithm.name()
        ));
    }
    Ok(())
}

thread_local! {
    static ZSTD: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { std::cell::RefCell::new(None) };
}

fn read_fully(mut reader: impl Read, dest: &mut [u8]) -> std::result::Result<usize, String> {
    let mut filled = 0;
    while filled < dest.len() {
        match reader
            .read(&mut dest[filled..])
            .map_err(|e| e.to_string())?
        {
            0 => break,
            n => filled += n,
        }
    }
    // Read on to the end of the stream: that is when zlib and xz verify their checksums, so a
    // corrupt block is an error instead of wrong values.
    if filled == dest.len() && reader.read(&mut [0u8]).map_err(|e| e.to_string())? > 0 {
        return Err(format!("a stream ending after {filled} bytes, found more"));
    }
    Ok(filled)
}

/// Bytes one block holds at most, compressed or not (the header's 3-byte sizes).
const MAX_BLOCK: usize = 0xFF_FFFF;

/// ROOT's compression settings, `algorithm * 100 + level` (505: zstd at level 5; 0: none), as
/// `TFile::SetCompressionSettings` and `RNTupleWriteOptions::SetCompression` take them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    pub algorithm: Algorithm,
    /// 1 to 9 (ROOT's scale, mapped onto each library's own); 0 means uncompressed.
    pub level: u32,
}

impl Settings {
    pub const NONE: Settings = Settings {
        algorithm: Algorithm::Uncompressed,
        level: 0,
    };

    /// Parse ROOT's number. Algorithm 0 is ROOT's "global default", zlib; ROOT's old deflate (3)
    /// is refused, as no current reader wants it written.
    pub fn from_root(code: u32) -> std::result::Result<Settings, String> {
        let level = (code % 100).min(9);
        let algorithm = match code / 100 {
            _ if level == 0 => return Ok(Settings::NONE),
            0 | 1 => Algorithm::Zlib,
            2 => Algorithm::Lzma,
            4 => Algorithm::Lz4,
            5 => Algorithm::Zstd,
            other => {
                return Err(format!(
                "compression settings algorithm * 100 + level with algorithm 1 (zlib), 2 (lzma), \
                     4 (lz4) or 5 (zstd), found {code} (algorithm {other})"
            ))
            }
        };
        Ok(Settings { algorithm, level })
    }

    /// ROOT's number for these settings (0 when uncompressed).
    pub fn root_code(&self) -> u32 {
        let algorithm = match self.algorithm {
            Algorithm::Uncompressed => return 0,
            Algorithm::Zlib => 1,
            Algorithm::Lzma => 2,
            Algorithm::OldDeflate => 3,
            Algorithm::Lz4 => 4,
            Algorithm::Zstd => 5,
        };
        algorithm * 100 + self.level
    }
}

/// Compress `data` into ROOT compression blocks of at most 16 MiB each, as ROOT's
/// `R__zipMultipleAlgorithm` does; `data` itself when compression would not make it smaller
/// (readers take a payload whose stored size equals its uncompressed size as raw). Levels map as
/// in ROOT: zstd runs at twice the level (505 is zstd level 10), lz4 in its fast mode at every
/// level (ROOT switches to LZ4 HC from level 4; the blocks decode alike), zlib and lzma at the level.
pub fn compress(data: &[u8], settings: Settings) -> Vec<u8> {
    if settings.algorithm == Algorithm::Uncompressed || settings.level == 0 || data.is_empty() {
        return data.to_vec();
    }
    let mut out = Vec::with_capacity(data.len() / 2 + HEADER_LEN);
    for chunk in data.chunks(MAX_BLOCK) {
        let start = out.len();
        out.extend_from_slice(&[0; HEADER_LEN]);
        let (magic, method): (&[u8; 2], u8) = match settings.algorithm {
            Algorithm::Zlib => (b"ZL", 8),
            Algorithm::Lzma => (b"XZ", 0),
            Algorithm::Lz4 => (b"L4", 1),
            Algorithm::Zstd => (b"ZS", 1),
            Algorithm::OldDeflate | Algorithm::Uncompressed => {
                unreachable!("never chosen by Settings::from_root")
            }
        };
        compress_block(settings, chunk, &mut out);
        let block_len = out.len() - start - HEADER_LEN;
        if block_len > MAX_BLOCK || out.len() >= data.len() {
            return data.to_vec();
        }
        let header = &mut out[start..start + HEADER_LEN];
        header[..2].copy_from_slice(magic);
        header[2] = method;
        header[3..6].copy_from_slice(&(block_len as u32).to_le_bytes()[..3]);
        header[6..9].copy_from_slice(&(chunk.len() as u32).to_le_bytes()[..3]);
    }
    out
}

/// Append the compressed bytes of one block (without its header) to `out`.
fn compress_block(settings: Settings, chunk: &[u8], out: &mut Vec<u8>) {
    let level = settings.level;
    match settings.algorithm {
        Algorithm::Zstd => ZSTD_OUT.with(|cell| {
            let level = 2 * level as i32;
            let mut slot = cell.borrow_mut();
            if slot.as_ref().is_none_or(|(l, _)| *l != level) {
                let c = zstd::bulk::Compressor::new(level).expect("a zstd context");
                *slot = Some((level, c));
            }
            let compressor = &mut slot.as_mut().unwrap().1;
            let at = out.len();
            out.resize(at + zstd::zstd_safe::compress_bound(chunk.len()), 0);
            let n = compressor
                .compress_to_buffer(chunk, &mut out[at..])
                .expect("a buffer of zstd's bound");
            out.truncate(at + n);
        }),
        Algorithm::Lz4 => {
            let at = out.len();
            out.resize(
                at + LZ4_CHECKSUM_LEN + lz4_flex::block::get_maximum_output_size(chunk.len()),
                0,
            );
            let n = lz4_flex::block::compress_into(chunk, &mut out[at + LZ4_CHECKSUM_LEN..])
                .expect("a buffer of lz4's bound");
            out.truncate(at + LZ4_CHECKSUM_LEN + n);
            let sum = twox_hash::XxHash64::oneshot(0, &out[at + LZ4_CHECKSUM_LEN..]);
            out[at..at + LZ4_CHECKSUM_LEN].copy_from_slice(&sum.to_be_bytes());
        }
        Algorithm::Zlib => {
            let mut e = flate2::write::ZlibEncoder::new(out, flate2::Compression::new(level));
            std::io::Write::write_all(&mut e, chunk).expect("writing to memory");
            e.finish().expect("writing to memory");
        }
        Algorithm::Lzma => {
            let stream = xz2::stream::Stream::new_easy_encoder(level, xz2::stream::Check::Crc32)
                .expect("an lzma preset of 1 to 9");
            let mut e = xz2::write::XzEncoder::new_stream(out, stream);
            std::io::Write::write_all(&mut e, chunk).expect("writing to memory");
            e.finish().expect("writing to memory");
        }
        Algorithm::OldDeflate | Algorithm::Uncompressed => unreachable!(),
    }
}

thread_local! {
    static ZSTD_OUT: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> = const { std::cell::RefCell::new(None) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn block(magic: &[u8; 2], payload: &[u8], raw_len: usize) -> Vec<u8> {
        let mut out = magic.to_vec();
        out.push(8);
        for n in [payload.len(), raw_len] {
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        out.extend_from_slice(payload);
        out
    }

    fn sample() -> Vec<u8> {
        (0..50_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect()
    }

    #[test]
    fn every_algorithm_round_trips() {
        let raw = sample();
        let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zl.write_all(&raw).unwrap();
        let mut cs = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        cs.write_all(&raw).unwrap();
        let mut xz = xz2::write::XzEncoder::new(Vec::new(), 6);
        xz.write_all(&raw).unwrap();
        let zs = zstd::bulk::compress(&raw, 3).unwrap();
        let l4 = lz4_flex::block::compress(&raw);
        let mut l4_with_sum = twox_hash::XxHash64::oneshot(0, &l4).to_be_bytes().to_vec();
        l4_with_sum.extend_from_slice(&l4);
        for (magic, payload) in [
            (b"ZL", zl.finish().unwrap()),
            (b"CS", cs.finish().unwrap()),
            (b"XZ", xz.finish().unwrap()),
            (b"ZS", zs),
            (b"L4", l4_with_sum),
        ] {
            let data = block(magic, &payload, raw.len());
            assert_eq!(
                decompress(&data, raw.len(), "test").unwrap(),
                raw,
                "{magic:?}"
            );
        }
    }

    #[test]
    fn several_blocks_concatenate() {
        let raw = sample();
        let (a, b) = raw.split_at(70_000);
        let mut data = block(b"ZS", &zstd::bulk::compress(a, 1).unwrap(), a.len());
        data.extend(block(b"ZS", &zstd::bulk::compress(b, 1).unwrap(), b.len()));
        assert_eq!(decompress(&data, raw.len(), "test").unwrap(), raw);
    }

    #[test]
    fn lz4_checksum_is_verified() {
        let raw = sample();
        let l4 = lz4_flex::block::compress(&raw);
        let mut payload = (twox_hash::XxHash64::oneshot(0, &l4) ^ 1)
            .to_be_bytes()
            .to_vec();
        payload.extend_from_slice(&l4);
        let e = decompress(&block(b"L4", &payload, raw.len()), raw.len(), "test").unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
    }

    #[test]
    fn no_bit_flip_in_a_zlib_block_gives_wrong_bytes() {
        // A small basket's worth: the whole stream, checksum included, fits one read.
        let raw: Vec<u8> = (0..30i32).flat_map(|i| (i * i).to_be_bytes()).collect();
        let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zl.write_all(&raw).unwrap();
        let payload = zl.finish().unwrap();
        for bit in 0..payload.len() * 8 {
            let mut flipped = payload.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let data = block(b"ZL", &flipped, raw.len());
            if let Ok(out) = decompress(&data, raw.len(), "t") {
                assert_eq!(out, raw, "bit {bit} flipped went unnoticed");
            }
        }
    }

    #[test]
    fn lzma_dictionary_size_is_bounded() {
        let raw = sample();
        let mut xz = xz2::write::XzEncoder::new(Vec::new(), 6);
        xz.write_all(&raw).unwrap();
        let mut stream = xz.finish().unwrap();
        // The block header follows the 12-byte stream header: size, flags, filter id 0x21
        // (LZMA2), one property byte (the dictionary size), padding, then its CRC32.
        assert_eq!(stream[12..16], [0x02, 0x00, 0x21, 0x01]);
        stream[16] = 40; // a 4 GiB dictionary
        let mut crc = flate2::Crc::new();
        crc.update(&stream[12..20]);
        stream[20..24].copy_from_slice(&crc.sum().to_le_bytes());
        let e = decompress(&block(b"XZ", &stream, raw.len()), raw.len(), "t").unwrap_err();
        assert!(e.to_string().contains("lzma"), "{e}");
    }

    #[test]
    fn lies_and_truncation_are_errors() {
        let raw = sample();
        let zs = zstd::bulk::compress(&raw, 1).unwrap();
        let data = block(b"ZS", &zs, raw.len());
        assert!(decompress(&data[..data.len() - 5], raw.len(), "t").is_err());
        assert!(decompress(&data, raw.len() + 10, "t").is_err());
        assert!(decompress(&data, raw.len() - 10, "t").is_err());
        assert!(decompress(b"QQ\x08\x01\x00\x00\x01\x00\x00x", 1, "t").is_err());
    }

    #[test]
    fn compress_round_trips_every_algorithm_and_keeps_incompressible_data_raw() {
        let raw = sample();
        for code in [101, 209, 404, 505, 1, 109] {
            let s = Settings::from_root(code).unwrap();
            assert_eq!(s.root_code(), if code < 100 { code + 100 } else { code });
            let packed = compress(&raw, s);
            assert!(packed.len() < raw.len() / 2, "{code}");
            assert_eq!(algorithm_of(&packed), Some(s.algorithm), "{code}");
            assert_eq!(decompress(&packed, raw.len(), "t").unwrap(), raw, "{code}");
        }
        // xorshift: bytes no algorithm can shrink.
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let noise: Vec<u8> = (0..5000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect();
        assert!(compress(&noise, Settings::from_root(505).unwrap()) == noise);
        assert!(compress(&raw, Settings::from_root(500).unwrap()) == raw);
        assert!(Settings::from_root(305).is_err() && Settings::from_root(905).is_err());
    }

    #[test]
    fn payloads_over_16_mib_take_several_blocks() {
        let raw: Vec<u8> = (0..(MAX_BLOCK + 1000) as u32)
            .map(|i| (i % 7) as u8)
            .collect();
        let packed = compress(&raw, Settings::from_root(505).unwrap());
        let first = u24_le(&packed[3..6]);
        assert_eq!(u24_le(&packed[6..9]), MAX_BLOCK);
        assert_eq!(&packed[HEADER_LEN + first..HEADER_LEN + first + 2], b"ZS");
        assert_eq!(decompress(&packed, raw.len(), "t").unwrap(), raw);
    }
}
