//! What the source tests share: files of random bytes, random ranges in them, and checks that
//! what a source read is what the file holds.

use super::{Random, TempDir};
use bytes::Bytes;
use cherenkov_core::source::ByteRange;
use cherenkov_core::Error;

/// A directory with one file of `len` random bytes; returns the directory and the bytes.
pub fn random_file(name: &str, len: usize, seed: u64) -> (TempDir, Vec<u8>) {
    let dir = TempDir::new("xrootd-data");
    let data = Random::new(seed).bytes(len);
    dir.write(name, &data);
    (dir, data)
}

/// `count` ranges of 1 to `max_len` bytes within `size`.
pub fn random_ranges(rng: &mut Random, size: u64, count: usize, max_len: u64) -> Vec<ByteRange> {
    (0..count)
        .map(|_| {
            let len = 1 + rng.below(max_len);
            ByteRange::new(rng.below(size - len), len)
        })
        .collect()
}

/// Every range read equals the file's bytes there.
pub fn assert_same(data: &[u8], ranges: &[ByteRange], got: &[Bytes]) {
    assert_eq!(got.len(), ranges.len());
    for (r, g) in ranges.iter().zip(got) {
        assert!(
            g[..] == data[r.offset as usize..r.end() as usize],
            "wrong bytes for range {}..{}",
            r.offset,
            r.end()
        );
    }
}

/// The message of an I/O error, checking that it names `url`.
pub fn io_message(e: &Error, url: &str) -> String {
    match e {
        Error::Io { file, message, .. } => {
            assert_eq!(file, url, "the error names the URL");
            message.clone()
        }
        other => panic!("expected an I/O error, got {other:?}"),
    }
}
