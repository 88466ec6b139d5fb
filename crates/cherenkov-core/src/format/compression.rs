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
/// The output is allocated only once the block headers present declare `uncompressed_len`
/// bytes, so a lying size field cannot allocate more than the blocks declare (each at most
/// 16 MiB).
pub fn decompress(compressed: &[u8], uncompressed_len: usize, origin: &str) -> Result<Vec<u8>> {
    let blocks = blocks(compressed, uncompressed_len, origin)?;
    let mut out = vec![0u8; uncompressed_len];
    decompress_blocks(&blocks, &mut out, origin)?;
    Ok(out)
}

/// Decompress a key payload into `dest`, which it must fill exactly: a buffer the caller
/// reuses, or the final place of the bytes (see `decompress`).
pub fn decompress_into(compressed: &[u8], dest: &mut [u8], origin: &str) -> Result<()> {
    let blocks = blocks(compressed, dest.len(), origin)?;
    decompress_blocks(&blocks, dest, origin)
}

/// Whether a payload's block headers declare exactly `uncompressed_len` bytes, each block's bytes
/// present: then a buffer of that size is what the blocks themselves say (see `decompress`).
pub fn check_declared(compressed: &[u8], uncompressed_len: usize, origin: &str) -> Result<()> {
    blocks(compressed, uncompressed_len, origin).map(|_| ())
}

/// One compression block: its algorithm, where it starts in the payload, its bytes, and the
/// bytes it declares decompressed.
type Block<'a> = (Algorithm, usize, &'a [u8], usize);

/// A payload's compression blocks (algorithm, where the block starts, its bytes, the bytes it
/// declares decompressed), checked to declare exactly `uncompressed_len` bytes in all.
fn blocks<'a>(
    compressed: &'a [u8],
    uncompressed_len: usize,
    origin: &str,
) -> Result<Vec<Block<'a>>> {
    let err = |pos: usize, expected: String| {
        Error::format(format!("{origin} compressed byte {pos}"), expected)
    };
    let mut out = Vec::with_capacity(1);
    let mut declared = 0usize;
    let mut pos = 0usize;
    while declared < uncompressed_len {
        let header = compressed
            .get(pos..pos + HEADER_LEN)
            .ok_or_else(|| err(pos, format!("a 9-byte compression header ({declared} of {uncompressed_len} bytes decompressed so far)")))?;
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
        if declared + block_out > uncompressed_len {
            return Err(err(
                pos,
                format!(
                    "blocks adding up to {uncompressed_len} bytes, but this one would reach {}",
                    declared + block_out
                ),
            ));
        }
        out.push((algorithm, pos, block, block_out));
        declared += block_out;
        pos = start + block_len;
    }
    Ok(out)
}

fn decompress_blocks(blocks: &[Block], dest: &mut [u8], origin: &str) -> Result<()> {
    let mut at = 0usize;
    for &(algorithm, pos, block, block_out) in blocks {
        decompress_block(algorithm, block, &mut dest[at..at + block_out])
            .map_err(|m| Error::format(format!("{origin} compressed byte {pos}"), m))?;
        at += block_out;
    }
    Ok(())
}

/// Decompress one block into `dest`, which must be filled exactly.
fn decompress_block(
    algorithm: Algorithm,
    block: &[u8],
    dest: &mut [u8],
) -> std::result::Result<(), String> {
    let want = dest.len();
    let filled = match algorithm {
        Algorithm::Zlib => read_fully(flate2::read::ZlibDecoder::new(block), dest, true),
        // ROOT's own inflater (R__unzip) keeps the declared size when a CS stream holds more:
        // old writers could understate it ("a few more bytes are required").
        Algorithm::OldDeflate => read_fully(flate2::read::DeflateDecoder::new(block), dest, false),
        Algorithm::Lzma => xz2::stream::Stream::new_stream_decoder(LZMA_MEMORY_LIMIT, 0)
            .map_err(|e| e.to_string())
            .and_then(|stream| {
                read_fully(xz2::read::XzDecoder::new_stream(block, stream), dest, true)
            }),
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

/// Fill `dest` from `reader`; with `whole`, the stream must also end there (zlib and xz check
/// their checksums at the end).
fn read_fully(
    mut reader: impl Read,
    dest: &mut [u8],
    whole: bool,
) -> std::result::Result<usize, String> {
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
    if whole && filled == dest.len() && reader.read(&mut [0u8]).map_err(|e| e.to_string())? > 0 {
        return Err(format!("a stream ending after {filled} bytes, found more"));
    }
    Ok(filled)
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
    fn cs_blocks_keep_their_declared_size_as_root_does() {
        // A CS (raw deflate) stream holding more than its header declares: R__unzip keeps the
        // declared bytes; a zlib block's stream must end where it says.
        let raw = sample();
        let mut cs = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        cs.write_all(&raw).unwrap();
        let data = block(b"CS", &cs.finish().unwrap(), raw.len() - 10);
        assert_eq!(
            decompress(&data, raw.len() - 10, "t").unwrap(),
            raw[..raw.len() - 10]
        );
        let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zl.write_all(&raw).unwrap();
        let data = block(b"ZL", &zl.finish().unwrap(), raw.len() - 10);
        assert!(decompress(&data, raw.len() - 10, "t").is_err());
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
}
