//! Compression blocks. Input: the uncompressed length the key announces (4 bytes, big-endian),
//! then the blocks. Seeds: compressed objects and baskets of the test files.
#![no_main]

use cherenkov_core::format::compression::decompress;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((len, blocks)) = data.split_first_chunk::<4>() else {
        return;
    };
    let len = u32::from_be_bytes(*len) as usize;
    if let Ok(out) = decompress(blocks, len, "fuzz") {
        assert_eq!(out.len(), len);
    }
});
