//! The file header, keys and directories: how a ROOT file says where its objects are.

use super::compression::decompress;
use super::cursor::Cursor;
use crate::error::{Error, Result};

/// Bytes enough for the file header of small and large files.
pub const FILE_HEADER_LEN: usize = 100;
/// Bytes enough for a key header (long names need more; `Key::parse` says so).
pub const KEY_HEADER_MAX: usize = 512;

/// ROOT's threshold for 64-bit seeks: a file, key or directory whose seeks pass it is written in
/// the large form (TFile::kStartBigFile).
pub const START_BIG_FILE: u64 = 2_000_000_000;

/// A TUUID: its class version, then 16 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Uuid {
    pub version: u16,
    pub bytes: [u8; 16],
}

impl Uuid {
    /// Read one where enough bytes remain (very old files end their header and directory
    /// records before it).
    fn parse_if_present(c: &mut Cursor) -> Result<Uuid> {
        if c.remaining() < 18 {
            return Ok(Uuid::default());
        }
        let version = c.u16("TUUID version")?;
        let bytes = c.bytes(16, "TUUID")?.try_into().expect("16 bytes");
        Ok(Uuid { version, bytes })
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct FileHeader {
    /// The ROOT version that wrote the file, plus 1000000 in a large file (64-bit seeks).
    pub version: i32,
    pub begin: u64,
    pub end: u64,
    /// The free segments' record (see `parse_free_segments`).
    pub seek_free: u64,
    pub free_bytes: u32,
    pub n_free: u32,
    pub name_bytes: u32,
    /// Bytes of a seek: 4, or 8 in a large file.
    pub units: u8,
    pub compress: i32,
    pub seek_info: u64,
    pub info_bytes: u32,
    pub uuid: Uuid,
}

impl FileHeader {
    pub fn parse(data: &[u8]) -> Result<Self> {
        let mut c = Cursor::new(data, "file", 0);
        let magic = c.bytes(4, "the magic bytes 'root'")?;
        if magic != b"root" {
            return Err(c.error_at(
                0,
                format!(
                    "the magic bytes 'root', found {:?}",
                    String::from_utf8_lossy(magic)
                ),
            ));
        }
        let version = c.i32("the format version")?;
        let begin = c.i32("fBEGIN")?;
        let large = version >= 1_000_000;
        let seek = |c: &mut Cursor, what: &str| -> Result<i64> {
            if large {
                c.i64(what)
            } else {
                c.i32(what).map(i64::from)
            }
        };
        let end = seek(&mut c, "fEND")?;
        let seek_free = seek(&mut c, "fSeekFree")?;
        let free_bytes = c.i32("fNbytesFree")?;
        let n_free = c.i32("nfree")?;
        let name_bytes = c.i32("fNbytesName")?;
        let units = c.u8("fUnits")?;
        let compress = c.i32("fCompress")?;
        let seek_info = seek(&mut c, "fSeekInfo")?;
        let info_bytes = c.i32("fNbytesInfo")?;
        let uuid = Uuid::parse_if_present(&mut c)?;
        if begin < 4 || end < begin as i64 || name_bytes < 0 || seek_info < 0 || info_bytes < 0 {
            return Err(c.error_at(8, format!(
                "a consistent header (fBEGIN {begin}, fEND {end}, fNbytesName {name_bytes}, fSeekInfo {seek_info}, fNbytesInfo {info_bytes})"
            )));
        }
        Ok(Self {
            version,
            begin: begin as u64,
            end: end as u64,
            // The free list is only read to update a file: a corrupt one is refused there.
            seek_free: seek_free.max(0) as u64,
            free_bytes: free_bytes.max(0) as u32,
            n_free: n_free.max(0) as u32,
            name_bytes: name_bytes as u32,
            units,
            compress,
            seek_info: seek_info as u64,
            info_bytes: info_bytes as u32,
            uuid,
        })
    }

    /// Where the top directory's record starts.
    pub fn top_directory_offset(&self) -> u64 {
        self.begin + self.name_bytes as u64
    }
}

/// A TKey header: what an object is, where it is and how big.
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    pub nbytes: u32,
    pub version: i16,
    pub objlen: u32,
    /// When the object was written (TDatime's packed form).
    pub datime: u32,
    pub keylen: u16,
    pub cycle: i16,
    pub seek_key: u64,
    pub seek_pdir: u64,
    pub class_name: String,
    pub name: String,
    pub title: String,
}

impl Key {
    pub fn parse(c: &mut Cursor) -> Result<Self> {
        Self::read(c, true)
    }

    /// A key's sizes and seeks, its class name, name and title skipped (left empty): a basket's
    /// key, read for every basket, whose names are not used.
    pub fn parse_sizes(c: &mut Cursor) -> Result<Self> {
        Self::read(c, false)
    }

    fn read(c: &mut Cursor, names: bool) -> Result<Self> {
        let text = |c: &mut Cursor, what: &str| match names {
            true => c.string(what),
            false => c.skip_string(what).map(|()| String::new()),
        };
        let start = c.pos();
        let nbytes = c.i32("key fNbytes")?;
        let version = c.i16("key version")?;
        let objlen = c.i32("key fObjlen")?;
        let datime = c.u32("key fDatime")?;
        let keylen = c.i16("key fKeylen")?;
        let cycle = c.i16("key fCycle")?;
        let (seek_key, seek_pdir) = if version > 1000 {
            (c.i64("key fSeekKey")?, c.i64("key fSeekPdir")?)
        } else {
            (
                c.i32("key fSeekKey")? as i64,
                c.i32("key fSeekPdir")? as i64,
            )
        };
        let class_name = text(c, "key class name")?;
        let name = text(c, "key name")?;
        let title = text(c, "key title")?;
        if nbytes < 0
            || objlen < 0
            || keylen < 0
            || seek_key < 0
            || seek_pdir < 0
            || (keylen as i64) > (nbytes as i64).max(keylen as i64)
        {
            return Err(c.error_at(start, format!(
                "a key with non-negative sizes and seeks (fNbytes {nbytes}, fObjlen {objlen}, fKeylen {keylen}, fSeekKey {seek_key})"
            )));
        }
        Ok(Self {
            nbytes: nbytes as u32,
            version,
            objlen: objlen as u32,
            datime,
            keylen: keylen as u16,
            cycle,
            seek_key: seek_key as u64,
            seek_pdir: seek_pdir as u64,
            class_name,
            name,
            title,
        })
    }

    /// Bytes of the object data as stored (compressed or not).
    pub fn stored_len(&self) -> usize {
        (self.nbytes as usize).saturating_sub(self.keylen as usize)
    }

    /// The object's data, given the key's stored bytes (`raw`, header included): decompressed
    /// when the key says it is compressed.
    pub fn object_data(&self, raw: &[u8]) -> Result<Vec<u8>> {
        let stored = raw
            .get(self.keylen as usize..self.nbytes as usize)
            .ok_or_else(|| {
                Error::format(
                    format!("file offset {}", self.seek_key),
                    format!("{} of {} bytes", self.describe(), self.nbytes),
                )
            })?;
        if self.is_compressed() {
            decompress(stored, self.objlen as usize, &self.describe())
        } else {
            Ok(stored[..(self.objlen as usize).min(stored.len())].to_vec())
        }
    }

    pub fn is_compressed(&self) -> bool {
        self.objlen as usize > self.stored_len()
    }

    pub fn is_directory(&self) -> bool {
        matches!(self.class_name.as_str(), "TDirectory" | "TDirectoryFile")
    }

    /// For error messages: "object 'Events;1' (TTree, key at 1234)".
    pub fn describe(&self) -> String {
        format!(
            "object '{};{}' ({}, key at file offset {})",
            self.name, self.cycle, self.class_name, self.seek_key
        )
    }
}

/// A directory record (TDirectoryFile): where its keys list is, where it and its parent are.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DirectoryRecord {
    /// The class version, plus 1000 when its seeks are 64-bit.
    pub version: i16,
    pub created: u32,
    pub modified: u32,
    pub keys_bytes: u32,
    /// Bytes of the directory's key and name (the top directory: the TFile key and its strings).
    pub name_bytes: u32,
    /// Where the directory's own key is.
    pub seek_dir: u64,
    pub seek_parent: u64,
    pub seek_keys: u64,
    pub uuid: Uuid,
}

impl DirectoryRecord {
    /// Whether a keys list was written. ROOT writes a directory's record when the directory is
    /// made, with fSeekKeys 0, and its keys list only when something was written into it: a
    /// directory made and left empty keeps fSeekKeys 0, and so does the top directory of a
    /// file that was never closed (ROOT reads keys only where fSeekKeys > 0, as uproot does).
    pub fn has_keys_list(&self) -> bool {
        self.seek_keys > 0
    }
}

/// Bytes enough for a directory record.
pub const DIRECTORY_RECORD_LEN: usize = 64;

impl DirectoryRecord {
    pub fn parse(c: &mut Cursor) -> Result<Self> {
        let version = c.i16("TDirectory version")?;
        let created = c.u32("TDirectory fDatimeC")?;
        let modified = c.u32("TDirectory fDatimeM")?;
        let keys_bytes = c.i32("TDirectory fNbytesKeys")?;
        let name_bytes = c.i32("TDirectory fNbytesName")?;
        let seek = |c: &mut Cursor, what: &str| -> Result<i64> {
            if version > 1000 {
                c.i64(what)
            } else {
                c.i32(what).map(i64::from)
            }
        };
        let seek_dir = seek(c, "TDirectory fSeekDir")?;
        let seek_parent = seek(c, "TDirectory fSeekParent")?;
        let seek_keys = seek(c, "TDirectory fSeekKeys")?;
        let uuid = Uuid::parse_if_present(c)?;
        if keys_bytes < 0 || seek_keys < 0 {
            return Err(c.error(format!("a directory with a valid keys list (fSeekKeys {seek_keys}, fNbytesKeys {keys_bytes})")));
        }
        Ok(Self {
            version,
            created,
            modified,
            keys_bytes: keys_bytes as u32,
            name_bytes: name_bytes.max(0) as u32,
            seek_dir: seek_dir.max(0) as u64,
            seek_parent: seek_parent.max(0) as u64,
            seek_keys: seek_keys as u64,
            uuid,
        })
    }
}

/// The keys list of a directory: a key header, the number of keys, then each key header.
pub fn parse_keys_list(data: &[u8], seek_keys: u64) -> Result<Vec<Key>> {
    let mut c = Cursor::new(data, "file", seek_keys);
    let _self_key = Key::parse(&mut c)?;
    let n = c.count("the number of keys", 30)?;
    (0..n).map(|_| Key::parse(&mut c)).collect()
}

/// A free segment: bytes `first..=last` of the file hold nothing (the last segment of a file
/// runs from its end to "infinity").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FreeSegment {
    pub first: u64,
    pub last: u64,
}

/// The free segments' record (a key, then `n` TFree: version, then first and last, 64-bit when
/// the version is above 1000).
pub fn parse_free_segments(data: &[u8], seek_free: u64, n: usize) -> Result<Vec<FreeSegment>> {
    let mut c = Cursor::new(data, "file", seek_free);
    let key = Key::parse(&mut c)?;
    c.seek(key.keylen as usize)?;
    let n = c.check_count(c.pos(), n as i64, "the number of free segments", 10)?;
    (0..n)
        .map(|_| {
            let at = c.pos();
            let version = c.i16("TFree version")?;
            let (first, last) = if version > 1000 {
                (c.i64("TFree fFirst")?, c.i64("TFree fLast")?)
            } else {
                (c.i32("TFree fFirst")? as i64, c.i32("TFree fLast")? as i64)
            };
            if first < 0 || last < first {
                return Err(c.error_at(
                    at,
                    format!("a free segment with 0 <= fFirst <= fLast, found {first}..{last}"),
                ));
            }
            Ok(FreeSegment {
                first: first as u64,
                last: last as u64,
            })
        })
        .collect()
}

/// Check that `[offset, offset + len)` lies inside a file of `size` bytes.
pub fn check_inside(offset: u64, len: u64, size: u64, what: &str) -> Result<()> {
    if offset.checked_add(len).is_none_or(|end| end > size) {
        return Err(Error::format(
            format!("file offset {offset}"),
            format!("{what} ({len} bytes) inside the file of {size} bytes"),
        ));
    }
    Ok(())
}
