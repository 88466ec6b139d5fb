//! Stored pages and envelopes: checksums verified, compression blocks (the same as TTree's)
//! undone, elements decoded. A payload stored with its uncompressed size is stored raw.

use super::column::Coding;
use super::envelope::{xxh3, CHECKSUM_LEN};
use super::page_list::PageInfo;
use crate::error::{Error, Result};
use crate::format::compression::{check_declared, decompress, decompress_into};
use std::borrow::Cow;

/// Bytes to read for a page: the stored page and its checksum, if it has one.
pub fn stored_len(page: &PageInfo) -> u64 {
    page.locator.size
        + if page.checksum {
            CHECKSUM_LEN as u64
        } else {
            0
        }
}

/// The packed elements of one page read as `stored_len` bytes: its checksum verified, its
/// compression undone (a page stored with its packed size is stored raw). `origin` names the page.
pub fn packed_page<'a>(
    coding: &Coding,
    page: &PageInfo,
    stored: &'a [u8],
    origin: &str,
) -> Result<Cow<'a, [u8]>> {
    let mut buffer = Vec::new();
    match packed_page_into(coding, page, stored, &mut buffer, origin)? {
        Packed::Stored(body) => Ok(Cow::Borrowed(body)),
        Packed::Decompressed(n) => {
            buffer.truncate(n);
            Ok(Cow::Owned(buffer))
        }
    }
}

/// Where `packed_page_into` left a page's packed elements.
pub enum Packed<'a> {
    /// In the stored bytes (a page stored raw).
    Stored(&'a [u8]),
    /// In the buffer's first bytes, this many.
    Decompressed(usize),
}

/// `packed_page`, decompressing into `buffer` (grown as needed, never shrunk: a buffer a thread
/// reuses page after page).
pub fn packed_page_into<'a>(
    coding: &Coding,
    page: &PageInfo,
    stored: &'a [u8],
    buffer: &mut Vec<u8>,
    origin: &str,
) -> Result<Packed<'a>> {
    let (body, packed) = check_page(coding, page, stored, origin)?;
    if page.checksum {
        let checksum = &stored[body.len()..];
        let expected = u64::from_le_bytes(checksum.try_into().unwrap());
        let computed = xxh3(body);
        if expected != computed {
            return Err(Error::format(
                origin.to_string(),
                format!("the page's XXH3-64 checksum {expected:#018x}, computed {computed:#018x}"),
            ));
        }
    }
    if body.len() == packed {
        return Ok(Packed::Stored(body));
    }
    // The buffer grows only to what the blocks present declare (checked by `check_page`).
    if buffer.len() < packed {
        buffer.resize(packed, 0);
    }
    decompress_into(body, &mut buffer[..packed], origin)?;
    Ok(Packed::Decompressed(packed))
}

/// A page's stored body and its packed size, once its length is right and its bytes stored
/// raw or in compression blocks declaring that size: then buffers may be sized from the page's
/// element count. Nothing is decompressed, no checksum computed.
pub fn check_page<'a>(
    coding: &Coding,
    page: &PageInfo,
    stored: &'a [u8],
    origin: &str,
) -> Result<(&'a [u8], usize)> {
    let bad = |what: String| Error::format(origin.to_string(), what);
    if stored.len() as u64 != stored_len(page) {
        return Err(bad(format!(
            "a page of {} bytes, found {}",
            stored_len(page),
            stored.len()
        )));
    }
    let body = &stored[..page.locator.size as usize];
    let packed = coding.packed_len(page.elements as u64);
    let packed = usize::try_from(packed).map_err(|_| bad("a page that fits memory".into()))?;
    if body.len() != packed {
        check_declared(body, packed, origin)?;
    }
    Ok((body, packed))
}

/// The uncompressed bytes of an envelope stored as `stored` (`length` bytes uncompressed).
pub fn envelope_bytes(stored: &[u8], length: u64, origin: &str) -> Result<Vec<u8>> {
    if stored.len() as u64 == length {
        return Ok(stored.to_vec());
    }
    let length = usize::try_from(length)
        .map_err(|_| Error::format(origin.to_string(), "an envelope that fits memory"))?;
    decompress(stored, length, origin)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::rntuple::column::ColumnType;
    use crate::format::rntuple::envelope::Locator;

    fn coding() -> Coding {
        Coding {
            kind: ColumnType::Int32,
            bits: 32,
            range: None,
        }
    }

    fn info(size: u64, elements: u32, checksum: bool) -> PageInfo {
        PageInfo {
            elements,
            locator: Locator { offset: 0, size },
            checksum,
        }
    }

    #[test]
    fn raw_and_compressed_pages_with_checksums() {
        let values: Vec<u8> = (0..1000i32).flat_map(|v| v.to_le_bytes()).collect();
        let mut stored = values.clone();
        stored.extend_from_slice(&xxh3(&values).to_le_bytes());
        let page = info(4000, 1000, true);
        assert_eq!(
            packed_page(&coding(), &page, &stored, "p").unwrap(),
            &values[..]
        );
        stored[7] ^= 1;
        let e = packed_page(&coding(), &page, &stored, "p").unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");

        let zs = zstd::bulk::compress(&values, 1).unwrap();
        let mut block = b"ZS\x01".to_vec();
        for n in [zs.len(), values.len()] {
            block.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        block.extend_from_slice(&zs);
        let page = info(block.len() as u64, 1000, false);
        assert_eq!(
            packed_page(&coding(), &page, &block, "p").unwrap(),
            &values[..]
        );
        // A page claiming more elements than its blocks hold is an error.
        let page = info(block.len() as u64, 1100, false);
        assert!(packed_page(&coding(), &page, &block, "p").is_err());
    }
}
