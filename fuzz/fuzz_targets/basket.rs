//! A basket as stored: key header, basket header, (compressed) entries and the entry offsets.
//! Seeds: baskets of the test files, every compression algorithm.
#![no_main]

use cherenkov_core::format::basket::decode_basket;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(basket) = decode_basket(data, "fuzz") {
        if let Some(offsets) = &basket.offsets {
            assert_eq!(offsets.len(), basket.entries as usize + 1);
            assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
            assert_eq!(*offsets.last().unwrap() as usize, basket.content.len());
        }
    }
});
