//! The file header, keys, directory records, keys lists and free segments, written as
//! `format::directory` parses them.

use super::buffer::{string_len, write_string};
use crate::format::directory::{
    DirectoryRecord, FileHeader, FreeSegment, Key, Uuid, START_BIG_FILE,
};

/// Bytes of a directory record as written (both forms: the small one pads its 32-bit seeks).
pub const DIRECTORY_RECORD_WRITTEN: usize = 60;
/// A file's header region: the first key starts here (TFile's kBEGIN).
pub const BEGIN: u64 = 100;
/// Key class versions: TKey 4, plus 1000 with 64-bit seeks.
pub const KEY_VERSION: i16 = 4;
pub const BIG_KEY_VERSION: i16 = 1004;
/// TDirectoryFile's class version.
pub const DIRECTORY_VERSION: i16 = 5;

impl FileHeader {
    /// The header as ROOT writes it at the start of the file (the rest of `begin` bytes is zero).
    pub fn write(&self, out: &mut Vec<u8>) {
        let large = self.version >= 1_000_000;
        let seek = |out: &mut Vec<u8>, v: u64| {
            if large {
                out.extend_from_slice(&(v as i64).to_be_bytes());
            } else {
                out.extend_from_slice(&(v as i32).to_be_bytes());
            }
        };
        out.extend_from_slice(b"root");
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&(self.begin as i32).to_be_bytes());
        seek(out, self.end);
        seek(out, self.seek_free);
        out.extend_from_slice(&(self.free_bytes as i32).to_be_bytes());
        out.extend_from_slice(&(self.n_free as i32).to_be_bytes());
        out.extend_from_slice(&(self.name_bytes as i32).to_be_bytes());
        out.push(self.units);
        out.extend_from_slice(&self.compress.to_be_bytes());
        seek(out, self.seek_info);
        out.extend_from_slice(&(self.info_bytes as i32).to_be_bytes());
        self.uuid.write(out);
    }
}

impl Uuid {
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&self.bytes);
    }
}

impl Key {
    /// The key header (`keylen` bytes unless a caller appends its own header, as TBasket does).
    pub fn write(&self, out: &mut Vec<u8>) {
        self.write_as(out, &self.class_name, &self.name, &self.title);
    }

    /// The key header with these strings in place of its own: a copied basket is re-keyed
    /// under its output branch without copying strings for it (see `engine::writer::copy`).
    pub fn write_as(&self, out: &mut Vec<u8>, class_name: &str, name: &str, title: &str) {
        out.extend_from_slice(&(self.nbytes as i32).to_be_bytes());
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&(self.objlen as i32).to_be_bytes());
        out.extend_from_slice(&self.datime.to_be_bytes());
        out.extend_from_slice(&(self.keylen as i16).to_be_bytes());
        out.extend_from_slice(&self.cycle.to_be_bytes());
        if self.version > 1000 {
            out.extend_from_slice(&(self.seek_key as i64).to_be_bytes());
            out.extend_from_slice(&(self.seek_pdir as i64).to_be_bytes());
        } else {
            out.extend_from_slice(&(self.seek_key as i32).to_be_bytes());
            out.extend_from_slice(&(self.seek_pdir as i32).to_be_bytes());
        }
        write_string(out, class_name.as_bytes());
        write_string(out, name.as_bytes());
        write_string(out, title.as_bytes());
    }

    /// Bytes of a key header for these strings, with 64-bit seeks when `big`.
    pub fn header_len(class_name: &str, name: &str, title: &str, big: bool) -> usize {
        let seeks = if big { 16 } else { 8 };
        18 + seeks + string_len(class_name) + string_len(name) + string_len(title)
    }
}

impl DirectoryRecord {
    /// The record (`DIRECTORY_RECORD_WRITTEN` bytes): 64-bit seeks when the version says so,
    /// else 32-bit ones followed by the 12 bytes ROOT reserves to grow them in place.
    pub fn write(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&self.created.to_be_bytes());
        out.extend_from_slice(&self.modified.to_be_bytes());
        out.extend_from_slice(&(self.keys_bytes as i32).to_be_bytes());
        out.extend_from_slice(&(self.name_bytes as i32).to_be_bytes());
        let large = self.version > 1000;
        for seek in [self.seek_dir, self.seek_parent, self.seek_keys] {
            if large {
                out.extend_from_slice(&(seek as i64).to_be_bytes());
            } else {
                out.extend_from_slice(&(seek as i32).to_be_bytes());
            }
        }
        self.uuid.write(out);
        out.resize(start + DIRECTORY_RECORD_WRITTEN, 0);
    }

    /// The version for these seeks: 64-bit ones when any passes `START_BIG_FILE`.
    pub fn version_for(seeks: [u64; 3]) -> i16 {
        if seeks.iter().any(|&s| s > START_BIG_FILE) {
            DIRECTORY_VERSION + 1000
        } else {
            DIRECTORY_VERSION
        }
    }
}

/// A keys list: its own key header, the number of keys, then each key's header.
pub fn write_keys_list(header: &Key, keys: &[Key]) -> Vec<u8> {
    let mut out = Vec::with_capacity(header.nbytes as usize);
    header.write(&mut out);
    out.extend_from_slice(&(keys.len() as i32).to_be_bytes());
    for k in keys {
        k.write(&mut out);
    }
    out
}

/// Bytes of a keys list's data (after its key header).
pub fn keys_list_data_len(keys: &[Key]) -> usize {
    4 + keys
        .iter()
        .map(|k| Key::header_len(&k.class_name, &k.name, &k.title, k.version > 1000))
        .sum::<usize>()
}

/// The free segments' record: its key header, then each TFree (version 1, or 1001 with 64-bit
/// bounds when the last byte passes `START_BIG_FILE`).
pub fn write_free_segments(header: &Key, segments: &[FreeSegment]) -> Vec<u8> {
    let mut out = Vec::new();
    header.write(&mut out);
    for s in segments {
        if s.last > START_BIG_FILE {
            out.extend_from_slice(&1001i16.to_be_bytes());
            out.extend_from_slice(&(s.first as i64).to_be_bytes());
            out.extend_from_slice(&(s.last as i64).to_be_bytes());
        } else {
            out.extend_from_slice(&1i16.to_be_bytes());
            out.extend_from_slice(&(s.first as i32).to_be_bytes());
            out.extend_from_slice(&(s.last as i32).to_be_bytes());
        }
    }
    out
}

/// Bytes of the free segments' data.
pub fn free_segments_data_len(segments: &[FreeSegment]) -> usize {
    segments
        .iter()
        .map(|s| if s.last > START_BIG_FILE { 18 } else { 10 })
        .sum()
}

/// A time as TDatime packs it: years since 1995, month, day, hour, minute and second in 6, 4, 5,
/// 5, 6 and 6 bits (ROOT writes local time; this writes UTC).
pub fn datime(unix_seconds: u64) -> u32 {
    let days = (unix_seconds / 86_400) as i64;
    let secs = unix_seconds % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as u32;
    let (hour, minute, second) = (
        (secs / 3600) as u32,
        (secs / 60 % 60) as u32,
        (secs % 60) as u32,
    );
    (year.saturating_sub(1995) & 0x3f) << 26
        | month << 22
        | day << 17
        | hour << 12
        | minute << 6
        | second
}

/// Now, as TDatime packs it.
pub fn datime_now() -> u32 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    datime(secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::cursor::Cursor;
    use crate::format::directory::{parse_free_segments, parse_keys_list};

    fn key(name: &str, seek_key: u64, big: bool) -> Key {
        let keylen = Key::header_len("TTree", name, "a title", big) as u16;
        Key {
            nbytes: keylen as u32 + 1000,
            version: if big { BIG_KEY_VERSION } else { KEY_VERSION },
            objlen: 3000,
            datime: datime(1_700_000_000),
            keylen,
            cycle: 2,
            seek_key,
            seek_pdir: 100,
            class_name: "TTree".into(),
            name: name.into(),
            title: "a title".into(),
        }
    }

    fn uuid() -> Uuid {
        Uuid {
            version: 1,
            bytes: *b"0123456789abcdef",
        }
    }

    #[test]
    fn headers_small_and_large_round_trip() {
        for (version, end) in [(64000, 12_345), (1_064_000, 5_000_000_000)] {
            let h = FileHeader {
                version,
                begin: BEGIN,
                end,
                seek_free: end - 52,
                free_bytes: 52,
                n_free: 1,
                name_bytes: 52,
                units: if version > 1_000_000 { 8 } else { 4 },
                compress: 505,
                seek_info: end - 4000,
                info_bytes: 3000,
                uuid: uuid(),
            };
            let mut out = Vec::new();
            h.write(&mut out);
            out.resize(BEGIN as usize, 0);
            assert_eq!(FileHeader::parse(&out).unwrap(), h);
        }
    }

    #[test]
    fn keys_and_keys_lists_round_trip() {
        let keys = vec![key("Events", 1234, false), key("Runs", 5_000_000_000, true)];
        for k in &keys {
            let mut out = Vec::new();
            k.write(&mut out);
            assert_eq!(out.len(), k.keylen as usize);
            assert_eq!(Key::parse(&mut Cursor::new(&out, "t", 0)).unwrap(), *k);
        }
        let header = key("f.root", 9999, false);
        let raw = write_keys_list(&header, &keys);
        assert_eq!(
            raw.len(),
            header.keylen as usize + keys_list_data_len(&keys)
        );
        assert_eq!(parse_keys_list(&raw, 9999).unwrap(), keys);
    }

    #[test]
    fn directory_records_small_and_large_round_trip() {
        for seeks in [[100, 0, 40_000], [100, 0, 3_000_000_000]] {
            let r = DirectoryRecord {
                version: DirectoryRecord::version_for(seeks),
                created: datime(1_600_000_000),
                modified: datime(1_700_000_000),
                keys_bytes: 86,
                name_bytes: 52,
                seek_dir: seeks[0],
                seek_parent: seeks[1],
                seek_keys: seeks[2],
                uuid: uuid(),
            };
            let mut out = Vec::new();
            r.write(&mut out);
            assert_eq!(out.len(), DIRECTORY_RECORD_WRITTEN);
            assert_eq!(
                DirectoryRecord::parse(&mut Cursor::new(&out, "t", 0)).unwrap(),
                r
            );
        }
    }

    #[test]
    fn free_segments_round_trip() {
        let segments = [
            FreeSegment {
                first: 500,
                last: 999,
            },
            FreeSegment {
                first: 3_000_000_000,
                last: 4_000_000_000,
            },
        ];
        let header = key("f.root", 7000, false);
        let raw = write_free_segments(&header, &segments);
        assert_eq!(
            raw.len(),
            header.keylen as usize + free_segments_data_len(&segments)
        );
        assert_eq!(parse_free_segments(&raw, 7000, 2).unwrap(), segments);
    }

    #[test]
    fn datimes_pack_as_root_does() {
        // 2024-11-27 00:09:14 UTC.
        let d = datime(1_732_666_154);
        assert_eq!(d >> 26, 2024 - 1995);
        assert_eq!((d >> 22) & 0xf, 11);
        assert_eq!((d >> 17) & 0x1f, 27);
        assert_eq!(((d >> 12) & 0x1f, (d >> 6) & 0x3f, d & 0x3f), (0, 9, 14));
    }
}
