//! Pages and envelopes as stored (spec: "Compression Block", "Page Locations"): compressed in
//! ROOT's blocks, or raw where compression would not make them smaller, and a page followed by
//! the XXH3-64 of its stored bytes, which its locator's size does not count.

use super::super::envelope::{xxh3, Locator};
use super::super::page_list::PageInfo;
use crate::format::writing::compression::Compression;
use bytes::Bytes;

/// A page ready for the file: `bytes` (stored page, then its checksum if any) go at
/// `info.locator.offset`, which the caller sets when it places them.
#[derive(Clone, Debug, PartialEq)]
pub struct SealedPage {
    /// Shared, so that a copied page is the bytes read, not a copy of them.
    pub bytes: Bytes,
    pub info: PageInfo,
}

/// Compress the packed bytes of a page of `elements` elements and append their checksum.
pub fn seal(packed: &[u8], elements: u32, compression: Compression, checksum: bool) -> SealedPage {
    let mut bytes = compression
        .compress(packed)
        .unwrap_or_else(|| packed.to_vec());
    let size = bytes.len() as u64;
    if checksum {
        let sum = xxh3(&bytes);
        bytes.extend_from_slice(&sum.to_le_bytes());
    }
    SealedPage {
        bytes: bytes.into(),
        info: PageInfo {
            elements,
            locator: Locator { offset: 0, size },
            checksum,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::column::{Coding, ColumnType};
    use super::super::super::page::packed_page;
    use super::*;

    #[test]
    fn sealed_pages_read_back_in_every_compression() {
        let coding = Coding {
            kind: ColumnType::Int32,
            bits: 32,
            range: None,
        };
        let packed: Vec<u8> = (0..5000i32).flat_map(|v| (v / 7).to_le_bytes()).collect();
        for code in [0, 101, 207, 404, 505] {
            for checksum in [true, false] {
                let page = seal(
                    &packed,
                    5000,
                    Compression::from_setting(code).unwrap(),
                    checksum,
                );
                let back = packed_page(&coding, &page.info, &page.bytes, "p").unwrap();
                assert_eq!(back, &packed[..], "{code} {checksum}");
                assert_eq!(code == 0, page.info.locator.size == packed.len() as u64);
            }
        }
        let mut page = seal(&packed, 5000, Compression::from_setting(505).unwrap(), true);
        let mut flipped = page.bytes.to_vec();
        flipped[3] ^= 1;
        page.bytes = flipped.into();
        assert!(packed_page(&coding, &page.info, &page.bytes, "p").is_err());
    }
}
