//! RNTuples of an open file: the anchor, header and footer read at opening (from the bytes the
//! file's opening read already holds where it can), page lists loaded per cluster group (all of
//! them at opening while they are small, else when a read first needs them), and the fields as
//! the items the engine reads (`read.rs`).

mod read;

use super::file::RootFile;
use crate::error::{Error, Result};
use crate::format::directory::check_inside;
use crate::format::rntuple::anchor::Anchor;
use crate::format::rntuple::blob;
use crate::format::rntuple::clusters::{column_range, Cluster, PageSource};
use crate::format::rntuple::descriptor::Descriptor;
use crate::format::rntuple::fields::{item, Node, Unsupported};
use crate::format::rntuple::footer::Footer;
use crate::format::rntuple::header::Header;
use crate::format::rntuple::page::envelope_bytes;
use crate::format::rntuple::page_list::{ColumnPages, PageList};
use crate::source::ByteRange;
use std::sync::{Arc, OnceLock};

/// The class name of RNTuple anchors in a file's keys.
pub const ANCHOR_CLASS: &str = "ROOT::RNTuple";

/// How far before an anchor's key the header is looked for when the key must be read: uproot
/// writes the header just before the key (ROOT near the file's start, in the opening's head
/// read), so reading up to this much before the key with it spares the header's own round trip.
const HEADER_BEFORE_ANCHOR: u64 = 1 << 20;

/// Page lists read at opening, in the request of the first one, while their stored sizes add up
/// to no more than this; later ones are read when a read needs their clusters.
const EAGER_PAGE_LISTS: u64 = 4 << 20;

/// An RNTuple: its metadata, and its fields as items (`keys()` order, as uproot lists them).
pub struct Ntuple {
    pub file: Arc<RootFile>,
    pub anchor: Anchor,
    pub desc: Descriptor,
    /// Per cluster group, its page list once read.
    page_lists: Vec<OnceLock<Arc<PageList>>>,
    /// Per group, the index of its first cluster among all clusters.
    first_cluster: Vec<usize>,
    /// The fields with a path (uproot's keys), and what each reads as, or why it cannot be read.
    items: Vec<(String, usize, std::result::Result<Node, Unsupported>)>,
    /// Names this RNTuple in errors ("RNTuple 'Events'").
    origin: String,
}

impl Ntuple {
    /// Open the RNTuple whose anchor is at `path` (as `RootFile::find_key` takes it). Reads the
    /// anchor, header and footer, and the first cluster groups' page lists (`EAGER_PAGE_LISTS`).
    pub async fn open(file: Arc<RootFile>, path: &str) -> Result<Ntuple> {
        let name = file.name().to_string();
        Self::open_inner(file, path)
            .await
            .map_err(|e| e.in_file(&name))
    }

    async fn open_inner(file: Arc<RootFile>, path: &str) -> Result<Ntuple> {
        let key = file.find_key(path).await?;
        if key.class_name != ANCHOR_CLASS {
            return Err(Error::not_found(
                file.name(),
                format!("'{path}' is a {}, not an RNTuple", key.class_name),
            ));
        }
        let origin = format!("RNTuple '{}'", key.name);
        let anchor_key = ByteRange::new(key.seek_key, key.nbytes as u64);
        if !file.holds(&anchor_key) {
            check_inside(
                anchor_key.offset,
                anchor_key.len,
                file.size,
                &key.describe(),
            )?;
            // From before the head's end too: held regions serve only ranges they contain whole.
            let from = key.seek_key.saturating_sub(HEADER_BEFORE_ANCHOR);
            file.fetch_regions(&[ByteRange::new(from, anchor_key.end() - from)])
                .await?;
        }
        let object = file.read_object(&key).await?;
        let anchor = Anchor::parse(&object, &format!("{origin} anchor"))?;
        let stored = read_payloads(
            &file,
            &anchor,
            &[
                (anchor.seek_header, anchor.nbytes_header, "header"),
                (anchor.seek_footer, anchor.nbytes_footer, "footer"),
            ],
        )
        .await?;
        let what = format!("{origin} header");
        let header = Header::parse(
            &envelope_bytes(&stored[0], anchor.len_header, &what)?,
            &what,
        )?;
        let what = format!("{origin} footer");
        let footer = Footer::parse(
            &envelope_bytes(&stored[1], anchor.len_footer, &what)?,
            header.checksum,
            &what,
        )?;
        let desc = Descriptor::new(&anchor, header, footer, &origin)?;
        let mut first_cluster = Vec::with_capacity(desc.groups.len());
        let mut clusters = 0usize;
        for g in &desc.groups {
            first_cluster.push(clusters);
            clusters = usize::try_from(g.clusters)
                .ok()
                .and_then(|n| clusters.checked_add(n))
                .ok_or_else(|| Error::format(origin.clone(), "a sane number of clusters"))?;
        }
        let items = desc
            .keys()
            .into_iter()
            .map(|(path, f)| (path, f, item(&desc, f)))
            .collect();
        let ntuple = Ntuple {
            page_lists: desc.groups.iter().map(|_| OnceLock::new()).collect(),
            first_cluster,
            file,
            anchor,
            desc,
            items,
            origin,
        };
        let mut eager = Vec::new();
        let mut bytes = 0u64;
        for (g, group) in ntuple.desc.groups.iter().enumerate() {
            bytes = bytes.saturating_add(group.page_list.locator.size);
            if g > 0 && bytes > EAGER_PAGE_LISTS {
                break;
            }
            eager.push(g);
        }
        ntuple.load_groups(&eager).await?;
        Ok(ntuple)
    }

    pub fn name(&self) -> &str {
        &self.desc.name
    }

    pub fn items(&self) -> &[(String, usize, std::result::Result<Node, Unsupported>)] {
        &self.items
    }

    /// Read the page lists of `groups` not read yet, in one request.
    async fn load_groups(&self, groups: &[usize]) -> Result<()> {
        let missing: Vec<usize> = groups
            .iter()
            .copied()
            .filter(|&g| self.page_lists[g].get().is_none())
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let links: Vec<_> = missing
            .iter()
            .map(|&g| {
                let l = self.desc.groups[g].page_list.locator;
                (l.offset, l.size, "page list")
            })
            .collect();
        let stored = read_payloads(&self.file, &self.anchor, &links).await?;
        for (&g, stored) in missing.iter().zip(stored) {
            let what = format!("{} page list of cluster group {g}", self.origin);
            let group = &self.desc.groups[g];
            let bytes = envelope_bytes(&stored, group.page_list.length, &what)?;
            let list = PageList::parse(&bytes, self.desc.header_checksum, &what)?;
            if list.clusters.len() as u64 != group.clusters {
                return Err(Error::format(
                    what,
                    format!(
                        "{} clusters as the footer says, found {}",
                        group.clusters,
                        list.clusters.len()
                    ),
                ));
            }
            let _ = self.page_lists[g].set(Arc::new(list));
        }
        Ok(())
    }

    /// The clusters holding entries `[start, stop)`, their page lists read (all clusters when
    /// `start == stop == 0` is not asked: an empty range has none).
    pub async fn clusters(&self, start: u64, stop: u64) -> Result<Vec<Cluster<'_>>> {
        let mut groups = Vec::new();
        let mut first = 0u64;
        for (g, group) in self.desc.groups.iter().enumerate() {
            let end = first + group.entry_span;
            if first < stop && end > start {
                groups.push(g);
            }
            first = end;
        }
        self.load_groups(&groups).await?;
        let mut out = Vec::new();
        for g in groups {
            let list = self.page_lists[g].get().expect("loaded above");
            for (i, (summary, columns)) in list.clusters.iter().zip(&list.columns).enumerate() {
                let end = summary.first_entry.saturating_add(summary.entries);
                if summary.first_entry < stop && end > start {
                    out.push(Cluster {
                        index: self.first_cluster[g] + i,
                        summary: *summary,
                        columns,
                    });
                }
            }
        }
        out.sort_by_key(|c| c.summary.first_entry);
        Ok(out)
    }

    /// A cluster already loaded by `clusters`, by its index among all clusters.
    fn cluster(&self, index: usize) -> Option<Cluster<'_>> {
        let g = self
            .first_cluster
            .partition_point(|&f| f <= index)
            .checked_sub(1)?;
        let list = self.page_lists[g].get()?;
        let i = index - self.first_cluster[g];
        Some(Cluster {
            index,
            summary: *list.clusters.get(i)?,
            columns: list.columns.get(i)?,
        })
    }

    /// Bytes its pages take in the file, checksums included, over all clusters (reads every page
    /// list).
    pub async fn stored_bytes(&self) -> Result<u64> {
        let clusters = self.clusters(0, self.desc.entries()).await?;
        Ok(clusters
            .iter()
            .flat_map(|c| c.columns)
            .flat_map(|column| match column {
                ColumnPages::Stored { pages, .. } => pages.as_slice(),
                ColumnPages::Suppressed => &[],
            })
            .map(|p| p.locator.size + if p.checksum { 8 } else { 0 })
            .sum())
    }

    /// Entry boundaries of all clusters: `[0, ..., entries]` (reads every page list).
    pub async fn cluster_boundaries(&self) -> Result<Vec<u64>> {
        let clusters = self.clusters(0, self.desc.entries()).await?;
        let mut out = vec![0];
        let mut next = 0;
        for c in clusters {
            if c.summary.first_entry != next {
                return Err(Error::format(
                    format!("{} cluster {}", self.origin, c.index),
                    format!(
                        "a cluster starting at entry {next}, found {}",
                        c.summary.first_entry
                    ),
                )
                .in_file(self.file.name()));
            }
            next = c.summary.first_entry + c.summary.entries;
            out.push(next);
        }
        if next != self.desc.entries() {
            return Err(Error::format(
                self.origin.clone(),
                format!(
                    "clusters holding the {} entries of the cluster groups, found {next}",
                    self.desc.entries()
                ),
            )
            .in_file(self.file.name()));
        }
        Ok(out)
    }
}

/// What an item's columns take on disk, over all clusters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ItemSizes {
    pub compressed_bytes: u64,
    pub uncompressed_bytes: u64,
    pub pages: u64,
    /// ROOT's compression settings of its first stored column (algorithm * 100 + level).
    pub compression: u32,
}

impl Ntuple {
    /// Each item's sizes on disk (reads every page list). Items that cannot be read have none.
    pub async fn item_sizes(&self) -> Result<Vec<ItemSizes>> {
        let clusters = self.clusters(0, self.desc.entries()).await?;
        let mut out = Vec::with_capacity(self.items.len());
        for (_, _, node) in &self.items {
            let mut sizes = ItemSizes::default();
            if let Ok(node) = node {
                for slot in crate::format::rntuple::fields::slots(node) {
                    for c in &clusters {
                        let range = column_range(&self.desc, &slot.candidates, c, &self.origin)
                            .map_err(|e| e.in_file(self.file.name()))?;
                        let col = &self.desc.schema.columns[range.column];
                        let packed = |n: u64| (n * col.bits as u64).div_ceil(8);
                        for p in &range.pages {
                            if let PageSource::Stored(page) = p {
                                sizes.compressed_bytes += page.locator.size;
                                sizes.uncompressed_bytes += packed(page.elements as u64);
                                sizes.pages += 1;
                            }
                        }
                        if sizes.compression == 0 {
                            sizes.compression = range.compression;
                        }
                    }
                }
            }
            out.push(sizes);
        }
        Ok(out)
    }
}

/// Read metadata payloads `(offset, stored bytes, what)` in one request (their bytes may already
/// be held from opening); a payload split over several keys costs a second request.
async fn read_payloads(
    file: &RootFile,
    anchor: &Anchor,
    payloads: &[(u64, u64, &str)],
) -> Result<Vec<Vec<u8>>> {
    let max = anchor.max_key_size;
    let mut first = Vec::with_capacity(payloads.len());
    for &(offset, len, what) in payloads {
        let head = if blob::is_split(len, max) { max } else { len };
        check_inside(offset, head, file.size, &format!("the RNTuple {what}"))?;
        first.push(ByteRange::new(offset, head));
    }
    let got = file.read_metadata(&first).await?;
    let mut out = Vec::with_capacity(payloads.len());
    for (&(_, len, what), head) in payloads.iter().zip(got) {
        if !blob::is_split(len, max) {
            out.push(head.to_vec());
            continue;
        }
        let chunks = blob::other_chunks(&head, len, max, &format!("the RNTuple {what}"))?;
        let ranges: Vec<ByteRange> = chunks.iter().map(|&(o, l)| ByteRange::new(o, l)).collect();
        for r in &ranges {
            check_inside(
                r.offset,
                r.len,
                file.size,
                &format!("a chunk of the RNTuple {what}"),
            )?;
        }
        let rest = file.read_metadata(&ranges).await?;
        let rest: Vec<&[u8]> = rest.iter().map(|b| &b[..]).collect();
        out.push(blob::join(&head, &rest, len, max));
    }
    Ok(out)
}
