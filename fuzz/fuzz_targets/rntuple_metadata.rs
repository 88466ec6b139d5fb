//! RNTuple metadata: the anchor object, and the header, footer and page list envelopes (as
//! stored uncompressed). Input: one byte choosing the parser (0 anchor, 1 header, 2 footer,
//! 3 page list), for footer and page list the header checksum they must name (8 bytes,
//! little-endian), then the bytes. Seeds: each RNTuple of the test files.
#![no_main]

use cherenkov_core::format::rntuple::anchor::Anchor;
use cherenkov_core::format::rntuple::footer::Footer;
use cherenkov_core::format::rntuple::header::Header;
use cherenkov_core::format::rntuple::page_list::PageList;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => {
            let _ = Anchor::parse(rest, "fuzz");
        }
        1 => {
            let _ = Header::parse(rest, "fuzz");
        }
        kind => {
            let Some((checksum, envelope)) = rest.split_first_chunk::<8>() else {
                return;
            };
            let checksum = u64::from_le_bytes(*checksum);
            if kind == 2 {
                let _ = Footer::parse(envelope, checksum, "fuzz");
            } else if let Ok(list) = PageList::parse(envelope, checksum, "fuzz") {
                assert_eq!(list.clusters.len(), list.columns.len());
            }
        }
    }
});
