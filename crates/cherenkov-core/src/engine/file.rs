//! An open ROOT file: header, directories, streamer infos and trees, read through a byte source.

use crate::error::{Error, Result};
use crate::format::compression::decompress;
use crate::format::cursor::Cursor;
use crate::format::directory::{check_inside, parse_keys_list, DirectoryRecord, FileHeader, Key, DIRECTORY_RECORD_LEN, FILE_HEADER_LEN};
use crate::format::streamers::{parse_streamer_infos, StreamerInfo};
use crate::format::tree::{parse_tree, TreeMeta};
use crate::source::local::LocalSource;
use crate::source::{ByteRange, SharedSource};
use bytes::Bytes;
use std::sync::Arc;

/// How much of the file start to read first: the header and, in files written by ROOT, the top
/// directory record that follows the file's own key.
const FIRST_READ: u64 = 4096;

#[derive(Debug)]
pub struct RootFile {
    pub source: SharedSource,
    pub size: u64,
    pub header: FileHeader,
    pub keys: Vec<Key>,
    pub streamers: Vec<StreamerInfo>,
    /// Why the streamer infos could not be read, if they could not: only some branches need them.
    pub streamer_error: Option<Error>,
}

/// Open a path or URL with the byte source its scheme names.
pub fn open_source(url: &str) -> Result<SharedSource> {
    if let Some(path) = url.strip_prefix("file://") {
        return Ok(Arc::new(LocalSource::open(path)?));
    }
    if url.contains("://") {
        let scheme = url.split("://").next().unwrap_or_default();
        return Err(Error::InvalidArgument(format!("{url}: unsupported URL scheme '{scheme}'")));
    }
    Ok(Arc::new(LocalSource::open(url)?))
}

impl RootFile {
    pub async fn open(source: SharedSource) -> Result<RootFile> {
        let name = source.name().to_string();
        Self::open_inner(source).await.map_err(|e| e.in_file(&name))
    }

    async fn open_inner(source: SharedSource) -> Result<RootFile> {
        let size = source.size().await?;
        if size < FILE_HEADER_LEN as u64 {
            if size < 4 {
                return Err(Error::format("file offset 0", format!("a ROOT file of at least {FILE_HEADER_LEN} bytes, found {size} bytes")));
            }
        }
        let first = source.read_ranges(&[ByteRange::new(0, size.min(FIRST_READ))]).await?.remove(0);
        let header = FileHeader::parse(&first)?;
        let top = header.top_directory_offset();
        let record_bytes = fetch_within(&source, &first, ByteRange::new(top, DIRECTORY_RECORD_LEN as u64), size).await?;
        let record = DirectoryRecord::parse(&mut Cursor::new(&record_bytes, "file", top))?;
        check_inside(record.seek_keys, record.keys_bytes as u64, size, "the top directory's keys list")?;
        let keys_range = ByteRange::new(record.seek_keys, record.keys_bytes as u64);
        let info_range = ByteRange::new(header.seek_info, header.info_bytes as u64);
        let (keys, streamers, streamer_error) = if header.seek_info > 0 && check_inside(info_range.offset, info_range.len, size, "the streamer infos").is_ok() {
            let mut got = source.read_ranges(&[keys_range, info_range]).await?;
            let info = got.pop().unwrap();
            let keys = parse_keys_list(&got[0], record.seek_keys)?;
            match read_streamers(&info, header.seek_info) {
                Ok(s) => (keys, s, None),
                Err(e) => (keys, Vec::new(), Some(e.in_file(source.name()))),
            }
        } else {
            let got = source.read_ranges(&[keys_range]).await?;
            (parse_keys_list(&got[0], record.seek_keys)?, Vec::new(), None)
        };
        Ok(RootFile { source, size, header, keys, streamers, streamer_error })
    }

    pub fn name(&self) -> &str {
        self.source.name()
    }

    /// The uncompressed bytes of a key's object.
    pub async fn read_object(&self, key: &Key) -> Result<Vec<u8>> {
        check_inside(key.seek_key, key.nbytes as u64, self.size, &key.describe())?;
        let raw = self.source.read_ranges(&[ByteRange::new(key.seek_key, key.nbytes as u64)]).await?.remove(0);
        object_bytes(&raw, key).map_err(|e| e.in_file(self.name()))
    }

    /// Keys of a directory given by its key (None: the top directory).
    pub async fn directory_keys(&self, dir: Option<&Key>) -> Result<Vec<Key>> {
        let Some(dir) = dir else { return Ok(self.keys.clone()) };
        let data = self.read_object(dir).await?;
        let origin = dir.describe();
        let record = DirectoryRecord::parse(&mut Cursor::new(&data, &origin, 0)).map_err(|e| e.in_file(self.name()))?;
        check_inside(record.seek_keys, record.keys_bytes as u64, self.size, &format!("the keys list of {origin}")).map_err(|e| e.in_file(self.name()))?;
        let raw = self.source.read_ranges(&[ByteRange::new(record.seek_keys, record.keys_bytes as u64)]).await?.remove(0);
        parse_keys_list(&raw, record.seek_keys).map_err(|e| e.in_file(self.name()))
    }

    /// All keys, with their paths ("dir/sub/name"), depth first; highest cycle first per name.
    pub async fn all_keys(&self) -> Result<Vec<(String, Key)>> {
        let mut out = Vec::new();
        let mut stack: Vec<(String, Vec<Key>)> = vec![(String::new(), self.keys.clone())];
        let mut seen_dirs = std::collections::HashSet::new();
        while let Some((prefix, keys)) = stack.pop() {
            for key in keys {
                let path = format!("{prefix}{}", key.name);
                if key.is_directory() && seen_dirs.insert(key.seek_key) && seen_dirs.len() < 10_000 {
                    stack.push((format!("{path}/"), self.directory_keys(Some(&key)).await?));
                }
                out.push((path, key));
            }
        }
        Ok(out)
    }

    /// Find "dir/name" or "dir/name;cycle" (the highest cycle when none is given).
    pub async fn find_key(&self, path: &str) -> Result<Key> {
        let (path, cycle) = match path.rsplit_once(';') {
            Some((p, c)) => (p, Some(c.parse::<i16>().map_err(|_| Error::InvalidArgument(format!("bad cycle in '{path}'")))?)),
            None => (path, None),
        };
        let parts: Vec<&str> = path.trim_matches('/').split('/').filter(|p| !p.is_empty()).collect();
        let mut keys = self.keys.clone();
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            let found = keys
                .iter()
                .filter(|k| k.name == *part && (!last || cycle.is_none_or(|c| k.cycle == c)))
                .max_by_key(|k| k.cycle)
                .cloned()
                .ok_or_else(|| Error::not_found(self.name(), format!("no object named '{path}' (missing '{part}')")))?;
            if last {
                return Ok(found);
            }
            if !found.is_directory() {
                return Err(Error::not_found(self.name(), format!("'{part}' in '{path}' is a {}, not a directory", found.class_name)));
            }
            keys = self.directory_keys(Some(&found)).await?;
        }
        Err(Error::not_found(self.name(), "an empty object path"))
    }

    pub async fn tree(&self, path: &str) -> Result<TreeMeta> {
        let key = self.find_key(path).await?;
        if key.class_name != "TTree" && key.class_name != "TNtuple" {
            return Err(Error::not_found(self.name(), format!("'{path}' is a {}, not a TTree", key.class_name)));
        }
        let data = self.read_object(&key).await?;
        parse_tree(&data, key.keylen as usize, &key.describe()).map_err(|e| e.in_file(self.name()))
    }
}

/// Serve a range from bytes already read from the file start, or fetch it.
async fn fetch_within(source: &SharedSource, first: &Bytes, want: ByteRange, size: u64) -> Result<Bytes> {
    let want = ByteRange::new(want.offset, want.len.min(size.saturating_sub(want.offset)));
    if want.end() <= first.len() as u64 {
        return Ok(first.slice(want.offset as usize..want.end() as usize));
    }
    check_inside(want.offset, want.len, size, "the top directory record")?;
    Ok(source.read_ranges(&[want]).await?.remove(0))
}

fn read_streamers(raw: &[u8], seek: u64) -> Result<Vec<StreamerInfo>> {
    let key = Key::parse(&mut Cursor::new(raw, "file", seek))?;
    let data = object_bytes(raw, &key)?;
    parse_streamer_infos(&data, key.keylen as usize, &key.describe())
}

/// The object data of a key, given the key's stored bytes (header included).
fn object_bytes(raw: &[u8], key: &Key) -> Result<Vec<u8>> {
    let stored = raw.get(key.keylen as usize..key.nbytes as usize).ok_or_else(|| {
        Error::format(format!("file offset {}", key.seek_key), format!("{} of {} bytes", key.describe(), key.nbytes))
    })?;
    if key.is_compressed() {
        decompress(stored, key.objlen as usize, &key.describe())
    } else {
        Ok(stored[..(key.objlen as usize).min(stored.len())].to_vec())
    }
}
