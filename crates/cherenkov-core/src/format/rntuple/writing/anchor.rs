//! The `ROOT::RNTuple` anchor object written (spec: "Anchor schema"), as ROOT's
//! `RNTuple::Streamer` writes it: the classic byte count and class version, the fields
//! (big-endian), then the XXH3-64 of the fields, outside the byte count.

use super::super::anchor::{Anchor, CLASS_VERSION};
use super::super::envelope::xxh3;

/// ROOT's flag on a byte count (`kByteCountMask`).
const BYTE_COUNT: u32 = 0x4000_0000;

/// The anchor key's object bytes (uncompressed; ROOT never compresses them).
pub fn anchor_object(a: &Anchor) -> Vec<u8> {
    let mut fields = Vec::with_capacity(64);
    for v in a.version {
        fields.extend_from_slice(&v.to_be_bytes());
    }
    for v in [
        a.seek_header,
        a.nbytes_header,
        a.len_header,
        a.seek_footer,
        a.nbytes_footer,
        a.len_footer,
        a.max_key_size,
    ] {
        fields.extend_from_slice(&v.to_be_bytes());
    }
    let count = (2 + fields.len()) as u32;
    let mut out = (BYTE_COUNT | count).to_be_bytes().to_vec();
    out.extend_from_slice(&CLASS_VERSION.to_be_bytes());
    out.extend_from_slice(&fields);
    out.extend_from_slice(&xxh3(&fields).to_be_bytes());
    out
}
