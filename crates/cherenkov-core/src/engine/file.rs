//! An open ROOT file: header, directories, streamer infos and trees, read through a byte source.

use crate::error::{Error, Result};
use crate::format::compression::decompress;
use crate::format::cursor::Cursor;
use crate::format::directory::{
    check_inside, parse_keys_list, DirectoryRecord, FileHeader, Key, DIRECTORY_RECORD_LEN,
    FILE_HEADER_LEN,
};
use crate::format::streamers::{parse_streamer_infos, StreamerInfo};
use crate::format::tree::{parse_tree, TreeMeta};
use crate::source::{ByteRange, OpeningHint, SharedSource, SourceOptions};
use bytes::Bytes;
use std::sync::Mutex;

/// Where ROOT keeps what opening needs: the header and top directory record in the first bytes;
/// the keys list, the streamer infos and the trees last written usually at the end. Sources that
/// can read these while learning the size (HTTP) are asked for them; the others get one vectored
/// read of head and tail once the size is known, whose tail grows with the file (tree metadata
/// grows with the number of baskets): a 32nd of it, within a quarter and four times this tail.
/// What the guess misses costs one more request.
pub const ROOT_OPENING: OpeningHint = OpeningHint {
    head: 64 << 10,
    tail: 1 << 20,
};
const TAIL_FRACTION: u64 = 32;

#[derive(Debug)]
pub struct RootFile {
    pub source: SharedSource,
    pub size: u64,
    pub header: FileHeader,
    pub keys: Vec<Key>,
    /// The streamer infos, read when first needed: only members of split objects need them, and
    /// ROOT often writes them far from the end (with the first cycle of a tree), where the
    /// speculative read misses them. An unreadable record counts as none (the branches that
    /// need it are then refused by name); the reason is kept in `streamer_error`.
    streamers: tokio::sync::OnceCell<Vec<StreamerInfo>>,
    pub streamer_error: std::sync::OnceLock<Error>,
    /// What reads of this file did.
    pub stats: super::stats::EngineStats,
    /// Whether and how far lazy reads of this file fetch ahead what they have not asked for yet.
    pub speculation: super::speculation::Speculation,
    /// Requests the source had made before opening (an HTTP size probe, for example).
    pub requests_before_open: u64,
    /// Metadata regions already read (the speculative head and tail, keys lists, objects).
    metadata: Mutex<Vec<(ByteRange, Bytes)>>,
    /// Its place in the order read-ahead steps decode (a dataset begins its files in order).
    pub order: std::sync::Arc<super::cpu_turns::FileOrder>,
}

impl RootFile {
    /// Open a path or URL (see `source::open`).
    pub async fn open_url(url: &str, options: &SourceOptions) -> Result<RootFile> {
        Self::open(crate::source::open(url, &with_root_opening(options)).await?).await
    }

    /// Open replicas of one file as one (see `source::multi`).
    pub async fn open_replicas(urls: &[String], options: &SourceOptions) -> Result<RootFile> {
        let options = with_root_opening(options);
        Self::open(crate::source::open_replicas(urls, &options).await?).await
    }

    pub async fn open(source: SharedSource) -> Result<RootFile> {
        let name = source.name().to_string();
        Self::open_inner(source).await.map_err(|e| e.in_file(&name))
    }

    async fn open_inner(source: SharedSource) -> Result<RootFile> {
        let requests_before_open = source.counters().requests;
        let size = source.size().await?;
        if size < FILE_HEADER_LEN as u64 {
            return Err(Error::format(
                "file offset 0",
                format!("a ROOT file of at least {FILE_HEADER_LEN} bytes, found {size} bytes"),
            ));
        }
        // Sources that read the head and tail while opening (HTTP) spare the speculative read.
        let opening = source.opening_reads();
        let head = ByteRange::new(0, size.min(ROOT_OPENING.head));
        let tail_len = (size / TAIL_FRACTION)
            .clamp(ROOT_OPENING.tail / 4, ROOT_OPENING.tail * 4)
            .min(size - head.len);
        let mut speculative = vec![head];
        if tail_len > 0 && opening.is_empty() {
            speculative.push(ByteRange::new(size - tail_len, tail_len));
        }
        let mut file = RootFile {
            source,
            size,
            header: FileHeader::default(),
            keys: Vec::new(),
            streamers: Default::default(),
            streamer_error: Default::default(),
            requests_before_open,
            stats: Default::default(),
            speculation: Default::default(),
            metadata: Mutex::new(opening),
            order: Default::default(),
        };
        let got = file.read_metadata(&speculative).await?;
        let header = FileHeader::parse(&got[0])?;
        // As ROOT checks: a file shorter than its header's fEND was cut short.
        if header.end > size {
            return Err(Error::format(
                "file byte 12",
                format!(
                    "a file of {} bytes as fEND says, found {size} bytes (a truncated file)",
                    header.end
                ),
            ));
        }
        file.header = header;
        let top = file.header.top_directory_offset();
        let record_len = (DIRECTORY_RECORD_LEN as u64).min(size.saturating_sub(top));
        check_inside(top, record_len, size, "the top directory record")?;
        let record_bytes = file
            .read_metadata(&[ByteRange::new(top, record_len)])
            .await?
            .remove(0);
        let record = DirectoryRecord::parse(&mut Cursor::new(&record_bytes, "file", top))?;
        check_inside(
            record.seek_keys,
            record.keys_bytes as u64,
            size,
            "the top directory's keys list",
        )?;
        // Streamer infos are read when needed, but a header pointing them past the end is corrupt.
        if file.header.seek_info > 0 {
            check_inside(
                file.header.seek_info,
                file.header.info_bytes as u64,
                size,
                "the streamer infos",
            )?;
        }
        let keys_range = ByteRange::new(record.seek_keys, record.keys_bytes as u64);
        let raw_keys = file.read_metadata(&[keys_range]).await?.remove(0);
        file.keys = parse_keys_list(&raw_keys, record.seek_keys)?;
        Ok(file)
    }

    /// The streamer infos, read on first call (an empty list if the file has none or they cannot
    /// be read; see `streamer_error`).
    pub async fn streamers(&self) -> &[StreamerInfo] {
        self.streamers
            .get_or_init(|| async {
                match self.read_streamers().await {
                    Ok(infos) => infos,
                    Err(e) => {
                        let _ = self.streamer_error.set(e.in_file(self.name()));
                        Vec::new()
                    }
                }
            })
            .await
    }

    /// The streamer infos if they were read already (see `streamers`), else none.
    pub fn streamers_read(&self) -> &[StreamerInfo] {
        self.streamers.get().map_or(&[], Vec::as_slice)
    }

    async fn read_streamers(&self) -> Result<Vec<StreamerInfo>> {
        if self.header.seek_info == 0 {
            return Ok(Vec::new());
        }
        let range = ByteRange::new(self.header.seek_info, self.header.info_bytes as u64);
        let raw = self.read_metadata(&[range]).await?.remove(0);
        let key = Key::parse(&mut Cursor::new(&raw, "file", range.offset))?;
        let data = object_bytes(&raw, &key)?;
        parse_streamer_infos(&data, key.keylen as usize, &key.describe())
    }

    /// Whether an earlier metadata read holds `range` (then reading it costs no request).
    pub(crate) fn holds(&self, range: &ByteRange) -> bool {
        let regions = self.metadata.lock().unwrap();
        regions.iter().any(|(have, _)| have.contains(range))
    }

    /// The bytes of `r` when an earlier metadata read holds them.
    fn held(&self, r: &ByteRange) -> Option<Bytes> {
        if r.len == 0 {
            return Some(Bytes::new());
        }
        let regions = self.metadata.lock().unwrap();
        regions
            .iter()
            .find(|(have, _)| have.contains(r))
            .map(|(have, bytes)| {
                let start = (r.offset - have.offset) as usize;
                bytes.slice(start..start + r.len as usize)
            })
    }

    /// Read metadata ranges, serving what earlier reads hold and fetching the rest in one request.
    pub(crate) async fn read_metadata(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        let missing: Vec<ByteRange> = ranges
            .iter()
            .filter(|r| self.held(r).is_none())
            .copied()
            .collect();
        if !missing.is_empty() {
            let got = self.source.read_ranges(&missing).await?;
            self.metadata
                .lock()
                .unwrap()
                .extend(missing.into_iter().zip(got));
        }
        ranges
            .iter()
            .map(|r| {
                self.held(r).ok_or_else(|| {
                    Error::io(
                        self.name(),
                        format!("range {}..{} was not returned", r.offset, r.end()),
                    )
                })
            })
            .collect()
    }

    /// Read byte ranges for a reader of raw bytes (uproot's source, fsspec): what opening already
    /// read (the speculative head and tail, keys lists) is served from memory, the rest in one
    /// request; the answer is not kept. Ranges must lie inside the file.
    pub async fn read_raw(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        if let Some(r) = ranges.iter().find(|r| {
            r.offset
                .checked_add(r.len)
                .is_none_or(|end| end > self.size)
        }) {
            return Err(Error::InvalidArgument(format!(
                "{}: bytes {}..{} asked for, past the end of the file ({} bytes)",
                self.name(),
                r.offset,
                r.offset.saturating_add(r.len),
                self.size
            )));
        }
        let mut out: Vec<Option<Bytes>> = ranges.iter().map(|r| self.held(r)).collect();
        let missing: Vec<ByteRange> = ranges
            .iter()
            .zip(&out)
            .filter(|(_, got)| got.is_none())
            .map(|(r, _)| *r)
            .collect();
        if !missing.is_empty() {
            let mut got = self.source.read_ranges(&missing).await?.into_iter();
            for slot in out.iter_mut().filter(|s| s.is_none()) {
                *slot = got.next();
            }
        }
        out.into_iter()
            .zip(ranges)
            .map(|(b, r)| {
                b.filter(|b| b.len() as u64 == r.len).ok_or_else(|| {
                    Error::io(
                        self.name(),
                        format!("range {}..{} was not returned whole", r.offset, r.end()),
                    )
                })
            })
            .collect()
    }

    /// Requests sent since opening began (opening a file takes at most two).
    pub fn requests(&self) -> u64 {
        self.source.counters().requests - self.requests_before_open
    }

    pub fn name(&self) -> &str {
        self.source.name()
    }

    /// The uncompressed bytes of a key's object.
    pub async fn read_object(&self, key: &Key) -> Result<Vec<u8>> {
        check_inside(key.seek_key, key.nbytes as u64, self.size, &key.describe())
            .map_err(|e| e.in_file(self.name()))?;
        let raw = self
            .read_metadata(&[ByteRange::new(key.seek_key, key.nbytes as u64)])
            .await?
            .remove(0);
        object_bytes(&raw, key).map_err(|e| e.in_file(self.name()))
    }

    /// Keys of a directory given by its key (None: the top directory).
    pub async fn directory_keys(&self, dir: Option<&Key>) -> Result<Vec<Key>> {
        let Some(dir) = dir else {
            return Ok(self.keys.clone());
        };
        let data = self.read_object(dir).await?;
        let origin = dir.describe();
        let record = DirectoryRecord::parse(&mut Cursor::new(&data, &origin, 0))
            .map_err(|e| e.in_file(self.name()))?;
        check_inside(
            record.seek_keys,
            record.keys_bytes as u64,
            self.size,
            &format!("the keys list of {origin}"),
        )
        .map_err(|e| e.in_file(self.name()))?;
        let raw = self
            .read_metadata(&[ByteRange::new(record.seek_keys, record.keys_bytes as u64)])
            .await?
            .remove(0);
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
                if key.is_directory() && seen_dirs.insert(key.seek_key) && seen_dirs.len() < 10_000
                {
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
            Some((p, c)) => (
                p,
                Some(
                    c.parse::<i16>()
                        .map_err(|_| Error::InvalidArgument(format!("bad cycle in '{path}'")))?,
                ),
            ),
            None => (path, None),
        };
        let parts: Vec<&str> = path
            .trim_matches('/')
            .split('/')
            .filter(|p| !p.is_empty())
            .collect();
        let mut keys = self.keys.clone();
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            let found = keys
                .iter()
                .filter(|k| k.name == *part && (!last || cycle.is_none_or(|c| k.cycle == c)))
                .max_by_key(|k| k.cycle)
                .cloned()
                .ok_or_else(|| {
                    Error::not_found(
                        self.name(),
                        format!("no object named '{path}' (missing '{part}')"),
                    )
                })?;
            if last {
                return Ok(found);
            }
            if !found.is_directory() {
                return Err(Error::not_found(
                    self.name(),
                    format!(
                        "'{part}' in '{path}' is a {}, not a directory",
                        found.class_name
                    ),
                ));
            }
            keys = self.directory_keys(Some(&found)).await?;
        }
        Err(Error::not_found(self.name(), "an empty object path"))
    }

    pub async fn tree(&self, path: &str) -> Result<TreeMeta> {
        let key = self.find_key(path).await?;
        if !matches!(key.class_name.as_str(), "TTree" | "TNtuple" | "TNtupleD") {
            return Err(Error::not_found(
                self.name(),
                format!("'{path}' is a {}, not a TTree", key.class_name),
            ));
        }
        let data = self.read_object(&key).await?;
        let tree = parse_tree(&data, key.keylen as usize, &key.class_name, &key.describe())
            .map_err(|e| e.in_file(self.name()))?;
        if tree.needs_streamers() {
            self.streamers().await;
        }
        Ok(tree)
    }
}

/// `options`, asking sources to read where ROOT keeps what opening needs.
fn with_root_opening(options: &SourceOptions) -> SourceOptions {
    SourceOptions {
        opening: ROOT_OPENING,
        ..options.clone()
    }
}

/// The object data of a key, given the key's stored bytes (header included).
fn object_bytes(raw: &[u8], key: &Key) -> Result<Vec<u8>> {
    let stored = raw
        .get(key.keylen as usize..key.nbytes as usize)
        .ok_or_else(|| {
            Error::format(
                format!("file offset {}", key.seek_key),
                format!("{} of {} bytes", key.describe(), key.nbytes),
            )
        })?;
    if key.is_compressed() {
        decompress(stored, key.objlen as usize, &key.describe())
    } else {
        Ok(stored[..(key.objlen as usize).min(stored.len())].to_vec())
    }
}
