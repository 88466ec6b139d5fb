//! An open ROOT file: header, directories, streamer infos and trees, read through a byte source.
//! Opening is here; directories and keys in `keys.rs`, the metadata already read (and raw reads
//! served from it) in `metadata.rs`, streamer infos in `streamers.rs`, and what opening learned
//! in a form that travels (to open the file again without reading it) in `snapshot.rs`.

mod keys;
mod metadata;
mod recover;
mod snapshot;
mod streamers;

pub use snapshot::MetadataSnapshot;

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
use crate::source::{file_changed, ByteRange, Opened, OpeningHint, SharedSource, SourceOptions};
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
/// Streamer infos read with a keys list that costs a request, at most (larger ones when needed).
const STREAMERS_WITH_KEYS: u64 = 1 << 20;

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
    /// The metadata ranges parsed (inside those regions): what a snapshot keeps.
    used: Mutex<Vec<ByteRange>>,
    /// The whole file, when opening's reads covered it (a file no larger than the head and tail
    /// they read): its baskets then cost no request.
    whole: Option<Bytes>,
    /// The version of the file its source opened (see `Opened::version`).
    pub version: Option<String>,
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

    /// Open a file (or replicas of one) whose metadata an earlier open learned (`snapshot`): no
    /// read beyond the protocol's own opening. A file whose size or version on its server is
    /// not the snapshot's is refused as changed (`source::is_file_changed`).
    pub async fn open_known(
        urls: &[String],
        options: &OpenOptions,
        known: MetadataSnapshot,
    ) -> Result<RootFile> {
        // Replicas still compare their head and tail with each other while opening.
        let source_options = match urls {
            [_] => SourceOptions {
                opening: OpeningHint::default(),
                ..options.source.clone()
            },
            _ => with_root_opening(&options.source),
        };
        let opened = crate::source::open_replicas(urls, &source_options).await?;
        Self::open_as_known(opened, options, known).await
    }

    /// Open the ROOT file an opened source holds, with the metadata an earlier open learned
    /// (see `open_known`).
    pub async fn open_as_known(
        opened: Opened,
        options: &OpenOptions,
        known: MetadataSnapshot,
    ) -> Result<RootFile> {
        let name = opened.source.name().to_string();
        let (size, version) = (opened.source.size(), opened.version.as_deref());
        let other_version = matches!((version, &known.version), (Some(v), Some(k)) if v != k);
        if size != known.size || other_version {
            let was = describe_version(known.size, known.version.as_deref());
            let now = describe_version(size, version);
            return Err(file_changed(
                &name,
                format!("{was} when its metadata was learned, {now} now"),
            ));
        }
        Self::open_inner(opened, options, Some(known))
            .await
            .map_err(|e| e.in_file(&name))
    }

    /// Open the ROOT file an opened source holds.
    pub async fn open(opened: Opened, options: &OpenOptions) -> Result<RootFile> {
        let name = opened.source.name().to_string();
        Self::open_inner(opened, options, None)
            .await
            .map_err(|e| e.in_file(&name))
    }

    async fn open_inner(
        opened: Opened,
        options: &OpenOptions,
        known: Option<MetadataSnapshot>,
    ) -> Result<RootFile> {
        let Opened {
            source,
            reads: mut opening,
            trace,
            version,
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
        let mut speculative = opening_reads(size);
        if !opening.is_empty() {
            speculative.truncate(1);
        }
        if let Some(known) = known {
            opening.extend(known.regions);
            speculative.clear();
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
            used: Mutex::default(),
            whole: None,
            version,
            order: Default::default(),
        };
        file.fetch_regions(&speculative).await?;
        file.whole = file.joined_regions();
        let got = file
            .read_metadata(&[ByteRange::new(0, size.min(FILE_HEADER_LEN as u64))])
            .await?;
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
            // uproot reads a keys list with 8 bytes past its end: read as it does, its read is
            // served from what opening read.
            let padded = ByteRange::new(
                keys_range.offset,
                (keys_range.len + 8).min(size - keys_range.offset),
            );
            let mut reads = vec![padded];
            // When the keys list costs a request, the streamer infos come with it (split objects
            // need them, and uproot reads them at once): they cost no round trip of their own.
            let info = ByteRange::new(file.header.seek_info, file.header.info_bytes as u64);
            if !file.holds(&padded)
                && info.offset > 0
                && info.end() <= size
                && info.len <= STREAMERS_WITH_KEYS
                && !file.holds(&info)
            {
                reads.push(info);
            }
            // The streamer infos are only brought along: a snapshot keeps them if they are used.
            file.fetch_regions(&reads).await?;
            let raw_keys = file
                .read_metadata(&[padded])
                .await?
                .remove(0)
                .slice(..keys_range.len as usize);
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

/// What opening reads of a file of `size` bytes: its head, and its tail (if any is left).
pub fn opening_reads(size: u64) -> Vec<ByteRange> {
    let head = ByteRange::new(0, size.min(ROOT_OPENING.head));
    let tail_len = (size / TAIL_FRACTION)
        .clamp(ROOT_OPENING.tail / 4, ROOT_OPENING.tail * 4)
        .min(size - head.len);
    let mut reads = vec![head];
    if tail_len > 0 {
        reads.push(ByteRange::new(size - tail_len, tail_len));
    }
    reads
}

/// "1234 bytes, version mtime 1700000000" (or "version unknown").
fn describe_version(size: u64, version: Option<&str>) -> String {
    format!("{size} bytes, version {}", version.unwrap_or("unknown"))
}

/// `options`, asking sources to read where ROOT keeps what opening needs.
fn with_root_opening(options: &SourceOptions) -> SourceOptions {
    SourceOptions {
        opening: ROOT_OPENING,
        ..options.clone()
    }
}
