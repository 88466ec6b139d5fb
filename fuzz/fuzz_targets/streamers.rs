//! The streamer-info list. Input: the key length (2 bytes, big-endian: pointer tags count from
//! the key start) and then the uncompressed object. Seeds: each test file's "StreamerInfo".
#![no_main]

use cherenkov_core::format::streamers::{find_element, parse_streamer_infos};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((key_len, object)) = data.split_first_chunk::<2>() else {
        return;
    };
    let key_len = u16::from_be_bytes(*key_len) as usize;
    if let Ok(infos) = parse_streamer_infos(object, key_len, "fuzz") {
        for info in &infos {
            let _ = find_element(&infos, &info.class_name, info.class_version, 0);
        }
    }
});
