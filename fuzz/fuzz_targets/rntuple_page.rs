//! One RNTuple page decoded as a column of the chosen type. Input: the column type's code
//! (2 bytes, little-endian), the element count (2 bytes), a byte choosing the width of
//! Real32Trunc and Real32Quant columns, then the packed page. Every column type of the spec,
//! every encoding (split, zigzag, delta).
#![no_main]

use cherenkov_core::format::rntuple::column::{Coding, ColumnType};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((head, page)) = data.split_first_chunk::<4>() else {
        return;
    };
    let kind = ColumnType::from_code(u16::from_le_bytes([head[0], head[1]]));
    let n = u16::from_le_bytes([head[2], head[3]]) as usize;
    let (Some((low, high)), Some(element)) = (kind.valid_bits(), kind.element()) else {
        return;
    };
    // Truncated and quantized columns take any width in their range; the page picks one.
    let bits = low + page.first().map_or(0, |&b| b as u16) % (high - low + 1);
    let coding = Coding {
        kind,
        bits,
        range: Some((-1.5, 2.5)),
    };
    let page = page.get(1..).unwrap_or_default();
    if page.len() as u64 != coding.packed_len(n as u64) {
        return;
    }
    let mut out = vec![0u8; n * element.size()];
    coding.decode(page, n, &mut out);
});
