//! Key headers and keys lists. Seeds: the keys lists of the test files (a key header, the number
//! of keys, then each key header).
#![no_main]

use cherenkov_core::format::cursor::Cursor;
use cherenkov_core::format::directory::{parse_keys_list, Key};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(keys) = parse_keys_list(data, 0) {
        for key in &keys {
            let _ = (key.stored_len(), key.is_compressed(), key.describe());
        }
    }
    // Key headers one after another, as far as they parse.
    let mut cur = Cursor::new(data, "file", 0);
    while Key::parse(&mut cur).is_ok() {}
});
