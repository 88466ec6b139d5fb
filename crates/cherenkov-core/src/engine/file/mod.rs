//! An open ROOT file: header, directories, streamer infos and trees, read through a byte source.
//! Opening is here; directories and keys in `keys.rs`, the metadata already read (and raw reads
//! served from it) in `metadata.rs`, streamer infos in `streamers.rs`.

mod keys;
mod metadata;
mod recover;
mod streamers;

use super::options::OpenOptions;
use crate::error::{Error, Result};
use crate::format::cursor::Cursor;
use crate::format::directory::{
    check_inside, parse_keys_list, DirectoryRecord, FileHeader, Key, DIRECTORY_RECORD_LEN,
    FILE_HEADER_LEN,
};
use crate::format::interpretation::MemberDims;
use crate::format::streamers::StreamerInfo;
use crate::format::tree::{parse_tree, tree_needs_streamer_infos, tree_version, TreeMeta};
use crate::source::trace::TraceLog;
use crate::source::{ByteRange, Opened, OpeningHint, SharedSource, SourceOptions};
use bytes::Bytes;
use std::sync::Arc;
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
    /// The shape of fixed-size array members of split collections (uproot's, or as declared).
    pub member_dims: MemberDims,
    /// Requests the source had made before opening (an HTTP size probe, for example).
    pub requests_before_open: u64,
    /// Every request made through the source, when opened with `trace`.
    pub trace: Option<Arc<TraceLog>>,
    /// Metadata regions already read (the speculative head and tail, keys lists, objects).
    metadata: Mutex<Vec<(ByteRange, Bytes)>>,
    /// Its place in the order read-ahead steps decode (a dataset begins its files in order).
    pub order: std::sync::Arc<super::cpu_turns::FileOrder>,
}

impl RootFile {
    /// Open a path or URL (see `source::open`).
    pub async fn open_url(url: &str, options: &OpenOptions) -> Result<RootFile> {
        let opened = crate::source::open(url, &with_root_opening(&options.source)).await?;
        Self::open(opened, options).await
    }

    /// Open replicas of one file as one (see `source::multi`).
    pub async fn open_replicas(urls: &[String], options: &OpenOptions) -> Result<RootFile> {
        let source_options = with_root_opening(&options.source);
        let opened = crate::source::open_replicas(urls, &source_options).await?;
        Self::open(opened, options).await
    }

    /// Open the ROOT file an opened source holds.
    pub async fn open(opened: Opened, options: &OpenOptions) -> Result<RootFile> {
        let name = opened.source.name().to_string();
        Self::open_inner(opened, options)
            .await
            .map_err(|e| e.in_file(&name))
    }

    async fn open_inner(opened: Opened, options: &OpenOptions) -> Result<RootFile> {
        let Opened {
            source,
            reads: opening,
            trace,
            ..
        } = opened;
        let requests_before_open = source.report().counters.requests;
        let size = source.size();
        if size < FILE_HEADER_LEN as u64 {
            return Err(Error::format(
                "file offset 0",
                format!("a ROOT file of at least {FILE_HEADER_LEN} bytes, found {size} bytes"),
            ));
        }
        // Sources that read the head and tail while opening (HTTP) spare the speculative read.
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
            trace,
            stats: Default::default(),
            speculation: options.speculation,
            member_dims: options.member_dims,
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
        if record.has_keys_list() {
            check_inside(
                record.seek_keys,
                record.keys_bytes as u64,
                size,
                "the top directory's keys list",
            )?;
            let keys_range = ByteRange::new(record.seek_keys, record.keys_bytes as u64);
            let raw_keys = file.read_metadata(&[keys_range]).await?.remove(0);
            file.keys = parse_keys_list(&raw_keys, record.seek_keys)?;
        } else {
            // Never closed: its objects are found by walking the records, as ROOT recovers them.
            let recovered = file.recover_keys().await?;
            file.keys = recovered.keys;
            if let Some((seek, bytes)) = recovered.streamer_infos {
                (file.header.seek_info, file.header.info_bytes) = (seek, bytes);
            }
        }
        // Streamer infos are read when needed, but a header pointing them past the end is corrupt.
        if file.header.seek_info > 0 {
            check_inside(
                file.header.seek_info,
                file.header.info_bytes as u64,
                size,
                "the streamer infos",
            )?;
        }
        Ok(file)
    }

    /// Requests sent since opening began (opening a file takes at most two).
    pub fn requests(&self) -> u64 {
        self.source.report().counters.requests - self.requests_before_open
    }

    pub fn name(&self) -> &str {
        self.source.name()
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
        let origin = key.describe();
        let version =
            tree_version(&data, &key.class_name, &origin).map_err(|e| e.in_file(self.name()))?;
        let infos = if tree_needs_streamer_infos(version) {
            self.streamers().await
        } else {
            &[]
        };
        let tree = parse_tree(&data, key.keylen as usize, &key.class_name, &origin, infos)
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
