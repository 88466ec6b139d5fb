//! The file header, and the top directory record it points to when the input holds it.
//! Seeds: the first bytes of each test file, up to the end of its top directory record.
#![no_main]

use cherenkov_core::format::cursor::Cursor;
use cherenkov_core::format::directory::{DirectoryRecord, FileHeader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(header) = FileHeader::parse(data) else {
        return;
    };
    let top = header.top_directory_offset();
    if let Some(record) = usize::try_from(top).ok().and_then(|t| data.get(t..)) {
        let _ = DirectoryRecord::parse(&mut Cursor::new(record, "file", top));
    }
});
