//! A ROOT file being written: where each record goes (space allocation, 64-bit seeks once the
//! file passes 2 GB), its directories and their keys, the streamer infos of the classes written,
//! the free segments, and closing. Table writers (`TableWriter`) put their data and metadata
//! here; `close` writes the streamer infos, the keys lists, the free segments and the header last,
//! so a reader's speculative read of the file's tail (`engine::file::ROOT_OPENING`) finds them
//! with the tables' metadata written just before.

use crate::engine::file::RootFile;
use crate::engine::runtime;
use crate::error::{Error, Result};
use crate::format::cursor::Cursor;
use crate::format::directory::{
    parse_free_segments, DirectoryRecord, FileHeader, FreeSegment, Key, Uuid, START_BIG_FILE,
};
use crate::format::streamers::StreamerInfo;
use crate::format::writing::buffer::string_len;
use crate::format::writing::compression::Compression;
use crate::format::writing::directory::{
    datime_now, free_segments_data_len, keys_list_data_len, write_free_segments, write_keys_list,
    BEGIN, BIG_KEY_VERSION, DIRECTORY_RECORD_WRITTEN, KEY_VERSION,
};
use crate::format::writing::streamers::{
    write_streamer_infos, STREAMER_INFO_CLASS, STREAMER_INFO_NAME, STREAMER_INFO_TITLE,
};
use crate::sink::Sink;
use crate::source::ByteRange;
use rayon::prelude::*;

/// The ROOT version the files are written as (6.40/00): the structures and class versions are
/// those of ROOT 6.40.
pub const ROOT_VERSION: i32 = 64000;
/// Objects past this size are compressed in blocks of this size on every core, at their
/// algorithm's first level (a merged TTree's metadata lists every basket: megabytes, compressed
/// at close, when nothing else runs; its basket tables of 12.5 MB took 0.23 s at 505 and 0.03 s
/// at 501, for 1.61 MB against 1.94 MB).
const PARALLEL_BLOCK: usize = 1 << 20;

/// `data` compressed as `compression.compress` does, in blocks of `PARALLEL_BLOCK` compressed at
/// once and at level 1 when there are several (ROOT's readers take any number of blocks per key,
/// and any level).
fn compress_on_every_core(compression: Compression, data: &[u8]) -> Option<Vec<u8>> {
    if data.len() <= PARALLEL_BLOCK {
        return compression.compress(data);
    }
    let fastest = Compression {
        level: compression.level.min(1),
        ..compression
    };
    let blocks: Option<Vec<Vec<u8>>> = data
        .par_chunks(PARALLEL_BLOCK)
        .map(|block| fastest.compress(block))
        .collect();
    Some(blocks?.concat())
}

/// ROOT compresses an object only past this size (TKey's threshold).
const MIN_COMPRESS: usize = 256;
/// Where the last free segment ends: "infinity", `START_BIG_FILE` (2e9) in a small file, and as
/// ROOT extends it, a whole number of billions past the end of a large one.
const FREE_STEP: u64 = 1_000_000_000;

/// A directory of the file being written (`FileWriter::root()` is the top one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirectoryId(usize);

struct Directory {
    name: String,
    parent: Option<usize>,
    record: DirectoryRecord,
    /// Where the record's bytes are (rewritten at close with the keys list's place).
    record_offset: u64,
    title: String,
    keys: Vec<Key>,
}

pub struct FileWriter {
    sink: Option<Box<dyn Sink>>,
    name: String,
    title: String,
    compression: Compression,
    end: u64,
    /// Space inside the file free to reuse.
    gaps: Vec<FreeSegment>,
    /// Records an update replaces (old keys lists, streamer infos, free list): free once the
    /// new ones are written, so listed in the free segments but not reused before.
    freed: Vec<FreeSegment>,
    dirs: Vec<Directory>,
    streamers: Vec<StreamerInfo>,
    uuid: Uuid,
    /// Bytes of the TFile key and its strings (the header's fNbytesName).
    name_bytes: u32,
}

impl FileWriter {
    /// A new, empty file in `sink`, compressing objects with `compression`.
    pub fn create(sink: Box<dyn Sink>, title: &str, compression: Compression) -> Result<Self> {
        let name = std::path::Path::new(sink.name()).file_name().map_or_else(
            || sink.name().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let strings = string_len(&name) + string_len(title);
        let keylen = Key::header_len("TFile", &name, title, false);
        let now = datime_now();
        let uuid = new_uuid();
        let name_bytes = (keylen + strings) as u32;
        let objlen = (strings + DIRECTORY_RECORD_WRITTEN) as u32;
        let key = Key {
            nbytes: keylen as u32 + objlen,
            version: KEY_VERSION,
            objlen,
            datime: now,
            keylen: keylen as u16,
            cycle: 1,
            seek_key: BEGIN,
            seek_pdir: 0,
            class_name: "TFile".into(),
            name: name.clone(),
            title: title.to_string(),
        };
        let record = DirectoryRecord {
            version: DirectoryRecord::version_for([BEGIN, 0, 0]),
            created: now,
            modified: now,
            keys_bytes: 0,
            name_bytes,
            seek_dir: BEGIN,
            seek_parent: 0,
            seek_keys: 0,
            uuid,
        };
        let mut w = FileWriter {
            sink: Some(sink),
            name: name.clone(),
            title: title.to_string(),
            compression,
            end: BEGIN + key.nbytes as u64,
            gaps: Vec::new(),
            freed: Vec::new(),
            dirs: vec![Directory {
                name,
                parent: None,
                record,
                record_offset: BEGIN + name_bytes as u64,
                title: title.to_string(),
                keys: Vec::new(),
            }],
            streamers: Vec::new(),
            uuid,
            name_bytes,
        };
        // The header as it would be for an empty file, rewritten at close.
        let mut head = Vec::with_capacity(w.end as usize);
        w.header(0, 0, 0, 0, 0).write(&mut head);
        head.resize(BEGIN as usize, 0);
        key.write(&mut head);
        crate::format::writing::buffer::write_string(&mut head, key.name.as_bytes());
        crate::format::writing::buffer::write_string(&mut head, key.title.as_bytes());
        record.write(&mut head);
        w.write_at(0, &head)?;
        Ok(w)
    }

    /// The existing ROOT file at `path`, to add to in place: new records go after its end (or
    /// into its free gaps), and `close` writes new keys lists, streamer infos, free segments and
    /// header; until then the file reads as it was.
    pub fn update(path: &str) -> Result<Self> {
        let existing = runtime().block_on(RootFile::open_url(path, &Default::default()))?;
        let h = existing.header.clone();
        let in_file = |e: Error| e.in_file(path);
        let read = |offset: u64, len: u64| -> Result<Vec<u8>> {
            let r = ByteRange::new(offset, len);
            existing.check_raw(&[r])?;
            Ok(runtime()
                .block_on(existing.read_metadata(&[r]))?
                .remove(0)
                .to_vec())
        };
        let head = read(
            h.begin,
            h.name_bytes as u64 + DIRECTORY_RECORD_WRITTEN as u64,
        )?;
        let key = Key::parse(&mut Cursor::new(&head, "file", h.begin)).map_err(in_file)?;
        let at = h.name_bytes as usize;
        let record =
            DirectoryRecord::parse(&mut Cursor::new(&head[at..], "file", h.begin + at as u64))
                .map_err(in_file)?;
        let streamers = runtime().block_on(existing.streamers()).to_vec();
        if let Some(e) = existing.streamer_error.get() {
            return Err(Error::InvalidArgument(format!(
                "{path}: cannot update a file whose streamer infos cannot be rewritten: {e}"
            )));
        }
        let mut gaps = Vec::new();
        if h.seek_free > 0 && h.n_free > 0 {
            let raw = read(h.seek_free, h.free_bytes as u64)?;
            gaps = parse_free_segments(&raw, h.seek_free, h.n_free as usize).map_err(in_file)?;
            gaps.retain(|g| g.last < h.end);
        }
        let mut freed = vec![
            segment(h.seek_info, h.info_bytes as u64),
            segment(h.seek_free, h.free_bytes as u64),
            segment(record.seek_keys, record.keys_bytes as u64),
        ];
        let mut dirs = vec![Directory {
            name: key.name.clone(),
            parent: None,
            record,
            record_offset: h.begin + h.name_bytes as u64,
            title: key.title.clone(),
            keys: existing.keys.clone(),
        }];
        let mut i = 0;
        while i < dirs.len() {
            for k in dirs[i].keys.clone().iter().filter(|k| k.is_directory()) {
                let object = runtime().block_on(existing.read_object(k))?;
                let record = DirectoryRecord::parse(&mut Cursor::new(&object, "file", k.seek_key))
                    .map_err(in_file)?;
                freed.push(segment(record.seek_keys, record.keys_bytes as u64));
                let keys = runtime().block_on(existing.directory_keys(Some(k)))?;
                dirs.push(Directory {
                    name: k.name.clone(),
                    parent: Some(i),
                    record,
                    record_offset: k.seek_key + k.keylen as u64,
                    title: k.title.clone(),
                    keys,
                });
            }
            i += 1;
        }
        freed.retain(|s| s.first > 0 && s.last >= s.first);
        let compression = Compression::from_setting(h.compress).unwrap_or(Compression::NONE);
        Ok(FileWriter {
            sink: Some(Box::new(crate::sink::local::LocalSink::update(path)?)),
            name: key.name,
            title: key.title,
            compression,
            end: h.end,
            gaps,
            freed,
            dirs,
            streamers,
            uuid: h.uuid,
            name_bytes: h.name_bytes,
        })
    }

    /// The file's name (as its sink names it), for error messages.
    pub fn name(&self) -> &str {
        self.sink.as_ref().map_or(&self.name, |s| s.name())
    }

    /// How objects (and, by default, tables' data) are compressed.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    pub fn root(&self) -> DirectoryId {
        DirectoryId(0)
    }

    /// Bytes written so far (the file's end).
    pub fn end(&self) -> u64 {
        self.end
    }

    /// A subdirectory of `parent`. Its record is written now and completed at close: made
    /// before the data written into it, it lies in the file's head, where readers look first.
    pub fn mkdir(&mut self, parent: DirectoryId, name: &str, title: &str) -> Result<DirectoryId> {
        if let Some(found) = self.find(parent, name) {
            return Ok(found);
        }
        if name.is_empty() || name.contains('/') {
            return Err(Error::InvalidArgument(format!(
                "{}: '{name}' cannot name a directory",
                self.name()
            )));
        }
        let now = datime_now();
        let big = self.big_keys();
        let keylen = Key::header_len("TDirectory", name, title, big);
        let nbytes = (keylen + DIRECTORY_RECORD_WRITTEN) as u64;
        let seek = self.allocate(nbytes);
        let seek_parent = self.dirs[parent.0].record.seek_dir;
        let key = Key {
            nbytes: nbytes as u32,
            version: if big { BIG_KEY_VERSION } else { KEY_VERSION },
            objlen: DIRECTORY_RECORD_WRITTEN as u32,
            datime: now,
            keylen: keylen as u16,
            cycle: 1,
            seek_key: seek,
            seek_pdir: seek_parent,
            class_name: "TDirectory".into(),
            name: name.to_string(),
            title: title.to_string(),
        };
        let record = DirectoryRecord {
            version: DirectoryRecord::version_for([seek, seek_parent, 0]),
            created: now,
            modified: now,
            keys_bytes: 0,
            name_bytes: keylen as u32,
            seek_dir: seek,
            seek_parent,
            seek_keys: 0,
            uuid: new_uuid(),
        };
        let mut bytes = Vec::with_capacity(nbytes as usize);
        key.write(&mut bytes);
        record.write(&mut bytes);
        self.write_at(seek, &bytes)?;
        self.list_key(parent, key);
        self.dirs.push(Directory {
            name: name.to_string(),
            parent: Some(parent.0),
            record,
            record_offset: seek + keylen as u64,
            title: title.to_string(),
            keys: Vec::new(),
        });
        Ok(DirectoryId(self.dirs.len() - 1))
    }

    /// The directory at `path` ("a/b") below the top, made where missing.
    pub fn mkdirs(&mut self, path: &str) -> Result<DirectoryId> {
        let mut at = self.root();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at = self.mkdir(at, part, "")?;
        }
        Ok(at)
    }

    fn find(&self, parent: DirectoryId, name: &str) -> Option<DirectoryId> {
        (0..self.dirs.len())
            .find(|&i| self.dirs[i].parent == Some(parent.0) && self.dirs[i].name == name)
            .map(DirectoryId)
    }

    /// Where `dir`'s own key is: the fSeekPdir of keys in it.
    pub fn directory_seek(&self, dir: DirectoryId) -> u64 {
        self.dirs[dir.0].record.seek_dir
    }

    /// The path of `dir` below the top ("" for the top), for messages.
    pub fn directory_path(&self, dir: DirectoryId) -> String {
        let mut parts = Vec::new();
        let mut at = Some(dir.0);
        while let Some(i) = at.filter(|&i| i > 0) {
            parts.push(self.dirs[i].name.as_str());
            at = self.dirs[i].parent;
        }
        parts.reverse();
        parts.join("/")
    }

    /// Whether a key written now takes 64-bit seeks (the file has passed `START_BIG_FILE`).
    pub fn big_keys(&self) -> bool {
        self.end > START_BIG_FILE
    }

    /// The cycle the next key named `name` in `dir` takes.
    pub fn next_cycle(&self, dir: DirectoryId, name: &str) -> i16 {
        self.dirs[dir.0]
            .keys
            .iter()
            .filter(|k| k.name == name)
            .map(|k| k.cycle)
            .max()
            .unwrap_or(0)
            + 1
    }

    /// Names of the keys in `dir` (to refuse a table name already used, for example).
    pub fn key_names(&self, dir: DirectoryId) -> impl Iterator<Item = &str> {
        self.dirs[dir.0].keys.iter().map(|k| k.name.as_str())
    }

    /// Reserve `len` bytes: in a free gap large enough, else at the end of the file.
    pub fn allocate(&mut self, len: u64) -> u64 {
        if let Some(i) = self.gaps.iter().position(|g| g.last - g.first + 1 >= len) {
            let at = self.gaps[i].first;
            if self.gaps[i].last - at + 1 == len {
                self.gaps.remove(i);
            } else {
                self.gaps[i].first += len;
            }
            return at;
        }
        let at = self.end;
        self.end += len;
        at
    }

    /// Write bytes at `offset`, inside space allocated before.
    pub fn write_at(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        let sink = self
            .sink
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument(format!("{} is closed", self.name)))?;
        sink.write_at(offset, bytes)
    }

    /// Write an object as a key listed in `dir` (its next cycle). `body(keylen)` streams the
    /// object, given the key header's length (pointer tags count from the key's start); the
    /// object is compressed with the file's setting when that shrinks it.
    pub fn write_object(
        &mut self,
        dir: DirectoryId,
        class: &str,
        name: &str,
        title: &str,
        body: impl FnOnce(u32) -> Vec<u8>,
    ) -> Result<Key> {
        let cycle = self.next_cycle(dir, name);
        let key = self.write_key(dir, class, name, title, cycle, body)?;
        self.list_key(dir, key.clone());
        Ok(key)
    }

    /// Write an object as a key no directory lists (the streamer infos, or a record only the
    /// caller points to).
    pub fn write_key(
        &mut self,
        dir: DirectoryId,
        class: &str,
        name: &str,
        title: &str,
        cycle: i16,
        body: impl FnOnce(u32) -> Vec<u8>,
    ) -> Result<Key> {
        let big = self.big_keys();
        let keylen = Key::header_len(class, name, title, big);
        let object = body(keylen as u32);
        let compressed = if object.len() > MIN_COMPRESS {
            compress_on_every_core(self.compression, &object)
        } else {
            None
        };
        let stored = compressed.as_deref().unwrap_or(&object);
        self.write_stored_key(dir, class, name, title, cycle, &[stored], object.len())
    }

    /// Write bytes stored as they are (compressed by the caller or not), given as `parts` one
    /// after the other, as a key no directory lists, `objlen` their uncompressed length: the RBlob
    /// keys of RNTuple pages and envelopes. Each part is written where it lands (a cluster's
    /// pages are not copied into one buffer first).
    #[allow(clippy::too_many_arguments)]
    pub fn write_stored_key(
        &mut self,
        dir: DirectoryId,
        class: &str,
        name: &str,
        title: &str,
        cycle: i16,
        parts: &[&[u8]],
        objlen: usize,
    ) -> Result<Key> {
        let big = self.big_keys();
        let keylen = Key::header_len(class, name, title, big);
        let nbytes = keylen + parts.iter().map(|p| p.len()).sum::<usize>();
        let seek = self.allocate(nbytes as u64);
        let key = Key {
            nbytes: checked_u32(nbytes, name, self.name())?,
            version: if big { BIG_KEY_VERSION } else { KEY_VERSION },
            objlen: checked_u32(objlen, name, self.name())?,
            datime: datime_now(),
            keylen: keylen as u16,
            cycle,
            seek_key: seek,
            seek_pdir: self.directory_seek(dir),
            class_name: class.to_string(),
            name: name.to_string(),
            title: title.to_string(),
        };
        let mut header = Vec::with_capacity(keylen);
        key.write(&mut header);
        self.write_at(seek, &header)?;
        let mut at = seek + keylen as u64;
        for part in parts {
            self.write_at(at, part)?;
            at += part.len() as u64;
        }
        Ok(key)
    }

    /// List in `dir` a key the caller placed with `allocate` and `write_at`: in the order
    /// written, a new cycle just before the older ones of its name (ROOT takes the first of a
    /// name as the current cycle).
    pub fn list_key(&mut self, dir: DirectoryId, key: Key) {
        let keys = &mut self.dirs[dir.0].keys;
        let at = keys
            .iter()
            .position(|k| k.name == key.name)
            .unwrap_or(keys.len());
        keys.insert(at, key);
    }

    /// Describe classes in the file's streamer infos (each class and version once).
    pub fn add_streamers(&mut self, infos: impl IntoIterator<Item = StreamerInfo>) {
        for info in infos {
            let known = self
                .streamers
                .iter()
                .any(|s| s.class_name == info.class_name && s.class_version == info.class_version);
            if !known {
                self.streamers.push(info);
            }
        }
    }

    /// Write the streamer infos, the keys lists, the free segments and the header, and make the
    /// file visible (see `Sink::finish`).
    pub fn close(mut self) -> Result<()> {
        let root = self.root();
        let streamers = std::mem::take(&mut self.streamers);
        let info = self.write_key(
            root,
            STREAMER_INFO_CLASS,
            STREAMER_INFO_NAME,
            STREAMER_INFO_TITLE,
            1,
            |keylen| write_streamer_infos(&streamers, keylen),
        )?;
        // Subdirectories first: the top's keys list then ends the data, before the free list.
        for i in (0..self.dirs.len()).rev() {
            self.write_keys_list(i)?;
        }
        let (seek_free, free_bytes, n_free) = self.write_free_segments()?;
        let mut head = Vec::with_capacity(BEGIN as usize);
        self.header(seek_free, free_bytes, n_free, info.seek_key, info.nbytes)
            .write(&mut head);
        self.write_at(0, &head)?;
        self.sink.take().expect("open until closed").finish()
    }

    fn write_keys_list(&mut self, i: usize) -> Result<()> {
        let dir = &self.dirs[i];
        let class = if i == 0 { "TFile" } else { "TDirectory" };
        let big = self.big_keys();
        let keylen = Key::header_len(class, &dir.name, &dir.title, big);
        let nbytes = keylen + keys_list_data_len(&dir.keys);
        let header = Key {
            nbytes: checked_u32(nbytes, &dir.name, self.name())?,
            version: if big { BIG_KEY_VERSION } else { KEY_VERSION },
            objlen: (nbytes - keylen) as u32,
            datime: datime_now(),
            keylen: keylen as u16,
            cycle: 1,
            seek_key: 0,
            seek_pdir: dir.record.seek_dir,
            class_name: class.into(),
            name: dir.name.clone(),
            title: dir.title.clone(),
        };
        let seek = self.allocate(nbytes as u64);
        let header = Key {
            seek_key: seek,
            ..header
        };
        let bytes = write_keys_list(&header, &self.dirs[i].keys);
        self.write_at(seek, &bytes)?;
        let dir = &mut self.dirs[i];
        dir.record.seek_keys = seek;
        dir.record.keys_bytes = nbytes as u32;
        dir.record.modified = datime_now();
        dir.record.version =
            DirectoryRecord::version_for([dir.record.seek_dir, dir.record.seek_parent, seek]);
        let mut record = Vec::with_capacity(DIRECTORY_RECORD_WRITTEN);
        dir.record.write(&mut record);
        let at = dir.record_offset;
        self.write_at(at, &record)
    }

    /// The free segments' record, at the end: the gaps left, and the file's end to "infinity".
    fn write_free_segments(&mut self) -> Result<(u64, u32, u32)> {
        let big = self.big_keys();
        let keylen = Key::header_len("TFile", &self.name, &self.title, big);
        let seek = self.end;
        let mut segments = self.gaps.clone();
        segments.extend(self.freed.iter().copied());
        segments.sort_by_key(|s| s.first);
        segments.push(FreeSegment {
            first: seek,
            last: START_BIG_FILE,
        });
        // The last segment starts past this record, whose size depends on whether that
        // segment's bounds are 64-bit: settle both.
        let nbytes = loop {
            let nbytes = keylen + free_segments_data_len(&segments);
            let first = seek + nbytes as u64;
            let last = first.max(START_BIG_FILE).div_ceil(FREE_STEP) * FREE_STEP;
            let tail = segments.last_mut().expect("pushed");
            if (tail.first, tail.last) == (first, last) {
                break nbytes;
            }
            *tail = FreeSegment { first, last };
        };
        self.end += nbytes as u64;
        let header = Key {
            nbytes: nbytes as u32,
            version: if big { BIG_KEY_VERSION } else { KEY_VERSION },
            objlen: (nbytes - keylen) as u32,
            datime: datime_now(),
            keylen: keylen as u16,
            cycle: 1,
            seek_key: seek,
            seek_pdir: BEGIN,
            class_name: "TFile".into(),
            name: self.name.clone(),
            title: self.title.clone(),
        };
        self.write_at(seek, &write_free_segments(&header, &segments))?;
        Ok((seek, nbytes as u32, segments.len() as u32))
    }

    fn header(
        &self,
        seek_free: u64,
        free_bytes: u32,
        n_free: u32,
        seek_info: u64,
        info_bytes: u32,
    ) -> FileHeader {
        let large = self.end > START_BIG_FILE;
        FileHeader {
            version: ROOT_VERSION + if large { 1_000_000 } else { 0 },
            begin: BEGIN,
            end: self.end,
            seek_free,
            free_bytes,
            n_free,
            name_bytes: self.name_bytes,
            units: if large { 8 } else { 4 },
            compress: self.compression.setting(),
            seek_info,
            info_bytes,
            uuid: self.uuid,
        }
    }
}

/// The segment of `len` bytes at `offset` (empty when `len` is 0).
fn segment(offset: u64, len: u64) -> FreeSegment {
    FreeSegment {
        first: offset,
        last: (offset + len).saturating_sub(1),
    }
}

/// A key's sizes are 32-bit: an object of 2 GiB or more cannot be one.
fn checked_u32(n: usize, what: &str, file: &str) -> Result<u32> {
    i32::try_from(n).map(|n| n as u32).map_err(|_| {
        Error::InvalidArgument(format!(
            "{file}: '{what}' would take {n} bytes, more than a ROOT key holds (2 GiB)"
        ))
    })
}

/// A random (version 4) UUID, in TUUID's form.
fn new_uuid() -> Uuid {
    let mut bytes = [0u8; 16];
    let _ = getrandom::getrandom(&mut bytes);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Uuid { version: 1, bytes }
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
