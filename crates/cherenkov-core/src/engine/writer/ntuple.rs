//! RNTuples written (`TableWriter`), as ROOT's `RNTupleWriter` lays them out with its default
//! `RNTupleWriteOptions`: pages of at most 1 MiB of elements, clusters closed when their
//! uncompressed size reaches what the compression so far says makes about 128 MiB on disk
//! (`layout.rs`: within a third of the memory budget), every page with its XXH3-64. Entries are
//! split into their columns on every core; pages are packed, compressed and checksummed on the
//! compressing threads as soon as they are full; a closed cluster's pages are written column
//! after column in RBlob keys. (Compressing a closed cluster while the next one fills held two
//! clusters and their compressed copies: 839 MiB peak against 612 in `bench/write_memory.py`.)
//! Page lists, header and footer go at the end with the anchor, so a reader's opening tail read
//! finds every cluster.

use super::file::{DirectoryId, FileWriter};
use super::layout::{ClusterPolicy, RNTUPLE_CLUSTER_BYTES};
use super::{check_arrays, spawn_compression, Column, ColumnType, TableOptions, TableWriter};
use crate::error::{Error, Result};
use crate::format::array::Array;
use crate::format::rntuple::anchor::Anchor;
use crate::format::rntuple::column::Coding;
use crate::format::rntuple::envelope::{EnvelopeLink, Locator};
use crate::format::rntuple::footer::{ClusterGroup, Footer};
use crate::format::rntuple::page_list::{ClusterSummary, ColumnPages, PageList};
use crate::format::rntuple::writing::anchor::anchor_object;
use crate::format::rntuple::writing::column::pack;
use crate::format::rntuple::writing::envelopes::{footer, header, page_list};
use crate::format::rntuple::writing::model::{FieldType, Model};
use crate::format::rntuple::writing::page::{seal, SealedPage};
use crate::format::rntuple::writing::shred::{shred, ColumnData};
use crate::format::writing::classes::class;
use crate::format::writing::compression::Compression;
use rayon::prelude::*;
use std::sync::mpsc;

/// The class of an RNTuple's anchor key, and of the keys holding its pages and envelopes.
pub const ANCHOR_CLASS: &str = "ROOT::RNTuple";
const BLOB_CLASS: &str = "RBlob";
/// The format version written (the released format, as ROOT 6.34 to 6.40 write it).
const VERSION: [u16; 4] = [1, 0, 0, 1];
/// Payloads larger than this would be split over several keys (ROOT's `kDefaultMaxKeySize`);
/// pages and envelopes never are, and a cluster's pages take as many keys as they need.
const MAX_KEY_SIZE: u64 = 1 << 30;

/// What an RNTuple's layout takes beyond `TableOptions`: ROOT's `RNTupleWriteOptions` for pages,
/// with its defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NtupleLayout {
    /// Elements of a page in memory (`MaxUnzippedPageSize`).
    pub page_bytes: u64,
    /// An XXH3-64 after every page (`EnablePageChecksums`).
    pub checksums: bool,
}

impl Default for NtupleLayout {
    fn default() -> Self {
        NtupleLayout {
            page_bytes: 1 << 20,
            checksums: true,
        }
    }
}

/// Pages cut off the columns together (one `extend` batch, or a cluster's last pages), being
/// packed, compressed and checksummed on the pool: (column, page) in order.
type InFlight = mpsc::Receiver<Vec<(usize, SealedPage)>>;

/// A closed cluster: its pages on the pool, its first entry, entries and uncompressed bytes.
struct Closed {
    in_flight: Vec<InFlight>,
    first_entry: u64,
    entries: u64,
    bytes: u64,
}

pub struct NtupleWriter {
    name: String,
    title: String,
    dir: DirectoryId,
    columns: Vec<Column>,
    pub(super) model: Model,
    pub(super) codings: Vec<Coding>,
    /// The file whose layout this RNTuple took (`take_layout_of`): it takes copied clusters only.
    pub(super) copies_only: Option<String>,
    compression: Compression,
    layout: NtupleLayout,
    policy: ClusterPolicy,
    pub(super) entries: u64,
    /// The cluster being filled: its columns' elements not yet cut into pages, its entries and
    /// uncompressed bytes, and its pages on the pool.
    pub(super) filling: Vec<ColumnData>,
    filling_entries: u64,
    filling_bytes: u64,
    in_flight: Vec<InFlight>,
    /// Clusters written so far, and each column's elements in them.
    written: PageList,
    pub(super) first_element: Vec<u64>,
}

/// The RNTuple field type of a column type: lists are `std::vector`s (a counter named by a list
/// is a TTree's need: an RNTuple collection holds its own sizes).
fn field_type(kind: &ColumnType) -> FieldType {
    match kind {
        ColumnType::Number(d) => FieldType::Number(*d),
        ColumnType::Fixed { items, size } => FieldType::Array(Box::new(field_type(items)), *size),
        ColumnType::List { items, .. } => FieldType::Vector(Box::new(field_type(items))),
        ColumnType::String => FieldType::String,
        ColumnType::Record(fields) => FieldType::Record(
            fields
                .iter()
                .map(|(n, t)| (n.clone(), field_type(t)))
                .collect(),
        ),
    }
}

impl NtupleWriter {
    /// An RNTuple `name` in `dir` with `columns` (top-level fields; titles become their
    /// descriptions; the table's title its description).
    pub fn new(
        file: &FileWriter,
        dir: DirectoryId,
        name: &str,
        columns: Vec<Column>,
        options: &TableOptions,
        layout: NtupleLayout,
    ) -> Result<NtupleWriter> {
        let compression = options.compression;
        let bad = |why: String| {
            Error::InvalidArgument(format!("{}: RNTuple '{name}': {why}", file.name()))
        };
        if name.is_empty()
            || name.contains(['.', '/', ' ', '\\'])
            || name.chars().any(char::is_control)
        {
            return Err(bad("a name without '.', '/', '\\', spaces or control characters (RNTuple's naming rules)".into()));
        }
        let fields = columns
            .iter()
            .map(|c| (c.name.clone(), field_type(&c.kind)))
            .collect();
        let mut model = Model::new(fields, compression != Compression::NONE).map_err(bad)?;
        for (c, &f) in columns.iter().zip(&model.roots.clone()) {
            model.schema.fields[f].description = c.title.clone();
        }
        let codings = model.codings();
        Ok(NtupleWriter {
            name: name.to_string(),
            title: options.title.clone(),
            policy: ClusterPolicy::aiming_at(RNTUPLE_CLUSTER_BYTES, options),
            dir,
            filling: vec![ColumnData::default(); codings.len()],
            first_element: vec![0; codings.len()],
            columns,
            model,
            codings,
            copies_only: None,
            compression,
            layout,
            entries: 0,
            filling_entries: 0,
            filling_bytes: 0,
            in_flight: Vec::new(),
            written: PageList {
                clusters: Vec::new(),
                columns: Vec::new(),
            },
        })
    }

    /// Send the pages of the cluster being filled to the pool: every full page, or with `all`
    /// the last ones too. The columns keep what remains.
    fn send_pages(&mut self, all: bool) {
        let mut work = Vec::new();
        for (c, data) in self.filling.iter_mut().enumerate() {
            let size = self.codings[c].kind.element().map_or(1, |e| e.size());
            let page = (self.layout.page_bytes as usize / size).max(1) * size;
            let cut = if all {
                data.bytes.len()
            } else {
                data.bytes.len() / page * page
            };
            if cut == 0 {
                continue;
            }
            let rest = data.bytes[cut..].to_vec();
            let mut full = std::mem::replace(&mut data.bytes, rest);
            full.truncate(cut);
            work.push((c, full, page));
        }
        if work.is_empty() {
            return;
        }
        let (send, pages) = mpsc::channel();
        let (codings, compression, checksums) = (
            self.codings.clone(),
            self.compression,
            self.layout.checksums,
        );
        spawn_compression(move || {
            let pieces: Vec<(usize, &[u8])> = work
                .iter()
                .flat_map(|(c, bytes, page)| bytes.chunks(*page).map(move |p| (*c, p)))
                .collect();
            let sealed = pieces
                .into_par_iter()
                .map(|(c, bytes)| {
                    let n = bytes.len() / codings[c].kind.element().map_or(1, |e| e.size());
                    let mut packed = Vec::with_capacity(bytes.len());
                    pack(&codings[c], bytes, n, &mut packed);
                    (c, seal(&packed, n as u32, compression, checksums))
                })
                .collect();
            let _ = send.send(sealed);
        });
        self.in_flight.push(pages);
    }

    /// Close the cluster being filled: its last pages compressed, all of them written.
    pub(super) fn close_cluster(&mut self, file: &mut FileWriter) -> Result<()> {
        if self.filling_entries == 0 {
            return Ok(());
        }
        self.send_pages(true);
        let closed = Closed {
            in_flight: std::mem::take(&mut self.in_flight),
            first_entry: self.entries - self.filling_entries,
            entries: self.filling_entries,
            bytes: self.filling_bytes,
        };
        self.filling = vec![ColumnData::default(); self.codings.len()];
        self.filling_entries = 0;
        self.filling_bytes = 0;
        self.write_closed(file, closed)
    }

    /// Wait for the closed cluster's pages, write them column after column in RBlob keys, and
    /// list them.
    fn write_closed(&mut self, file: &mut FileWriter, closed: Closed) -> Result<()> {
        let mut pages: Vec<Vec<SealedPage>> = vec![Vec::new(); self.codings.len()];
        for batch in closed.in_flight {
            let batch = batch.recv().map_err(|_| {
                Error::InvalidArgument(format!(
                    "{}: RNTuple '{}': compressing a cluster's pages failed",
                    file.name(),
                    self.name
                ))
            })?;
            for (c, page) in batch {
                pages[c].push(page);
            }
        }
        let setting = self.compression.setting() as u32;
        let pages = pages.into_iter().map(|p| (p, setting)).collect();
        self.write_cluster(
            file,
            pages,
            closed.first_entry,
            closed.entries,
            closed.bytes,
        )
    }

    /// Write a cluster's sealed pages (per column: its pages in order and their compression
    /// setting) column after column in RBlob keys, and list them: the cluster holds `entries`
    /// from `first_entry`, `bytes` uncompressed.
    pub(super) fn write_cluster(
        &mut self,
        file: &mut FileWriter,
        mut pages: Vec<(Vec<SealedPage>, u32)>,
        first_entry: u64,
        entries: u64,
        bytes: u64,
    ) -> Result<()> {
        // Whole pages, column after column, in keys of at most MAX_KEY_SIZE.
        let mut zipped = 0u64;
        let mut all: Vec<&mut SealedPage> = pages.iter_mut().flat_map(|(p, _)| p).collect();
        let mut at = 0;
        while at < all.len() {
            let mut end = at;
            let mut len = 0u64;
            while end < all.len()
                && (end == at || len + all[end].bytes.len() as u64 <= MAX_KEY_SIZE)
            {
                len += all[end].bytes.len() as u64;
                end += 1;
            }
            let parts: Vec<&[u8]> = all[at..end].iter().map(|p| &p.bytes[..]).collect();
            let mut offset = self.write_blob(file, &parts, len as usize)?;
            for p in &mut all[at..end] {
                p.info.locator.offset = offset;
                offset += p.bytes.len() as u64;
            }
            zipped += len;
            at = end;
        }
        drop(all);
        let listed = pages
            .into_iter()
            .enumerate()
            .map(|(c, (column, compression))| {
                let first_element = self.first_element[c];
                self.first_element[c] += column.iter().map(|p| p.info.elements as u64).sum::<u64>();
                ColumnPages::Stored {
                    pages: column.into_iter().map(|p| p.info).collect(),
                    first_element,
                    compression,
                }
            })
            .collect();
        self.written.clusters.push(ClusterSummary {
            first_entry,
            entries,
        });
        self.written.columns.push(listed);
        self.policy.observe(bytes, zipped);
        Ok(())
    }

    /// Write the payload made of `parts` as an RBlob key (`objlen` its uncompressed length);
    /// where it starts.
    fn write_blob(&self, file: &mut FileWriter, parts: &[&[u8]], objlen: usize) -> Result<u64> {
        let key = file.write_stored_key(self.dir, BLOB_CLASS, "", "", 0, parts, objlen)?;
        Ok(key.seek_key + key.keylen as u64)
    }

    /// Write an envelope, compressed; its link.
    fn write_envelope(&self, file: &mut FileWriter, envelope: &[u8]) -> Result<EnvelopeLink> {
        let stored = self.compression.compress(envelope);
        let stored = stored.as_deref().unwrap_or(envelope);
        let offset = self.write_blob(file, &[stored], envelope.len())?;
        Ok(EnvelopeLink {
            length: envelope.len() as u64,
            locator: Locator {
                offset,
                size: stored.len() as u64,
            },
        })
    }
}

impl TableWriter for NtupleWriter {
    fn name(&self) -> &str {
        &self.name
    }

    fn columns(&self) -> &[Column] {
        &self.columns
    }

    fn entries(&self) -> u64 {
        self.entries
    }

    fn as_ntuple(&mut self) -> Option<&mut NtupleWriter> {
        Some(self)
    }

    fn extend(&mut self, file: &mut FileWriter, arrays: Vec<Array>) -> Result<()> {
        if let Some(origin) = &self.copies_only {
            return Err(Error::InvalidArgument(format!(
                "RNTuple '{}' is laid out as in {origin}, which cherenkov's writer does not make: it takes copied clusters only (mode='rewrite' lays every input out anew)",
                self.name
            )));
        }
        let n = check_arrays(&self.name, &self.columns, &arrays)?;
        let bytes: usize = arrays.iter().map(Array::nbytes).sum();
        let per_entry = (bytes / n.max(1)).max(1) as u64;
        let mut start = 0;
        while start < n {
            let room = self.policy.threshold().saturating_sub(self.filling_bytes) / per_entry;
            let stop = n.min(start + room.max(1) as usize);
            let (model, columns, name) = (&self.model, &self.columns, &self.name);
            per_field(&mut self.filling, &model.columns)
                .into_par_iter()
                .zip(&arrays)
                .enumerate()
                .try_for_each(|(i, (data, array))| {
                    shred(&model.fields[i].1, array, start, stop, data).map_err(|why| {
                        Error::InvalidArgument(format!(
                            "'{name}' column '{}' of type {}: {why}",
                            columns[i].name, columns[i].kind
                        ))
                    })
                })?;
            self.filling_entries += (stop - start) as u64;
            self.entries += (stop - start) as u64;
            self.filling_bytes = (self.filling.iter().zip(&self.codings))
                .map(|(d, c)| d.elements * c.kind.element().map_or(1, |e| e.size()) as u64)
                .sum();
            if self.filling_bytes >= self.policy.threshold() {
                self.close_cluster(file)?;
            } else {
                self.send_pages(false);
            }
            start = stop;
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>, file: &mut FileWriter) -> Result<()> {
        self.close_cluster(file)?;
        let (head, checksum) = header(&self.name, &self.title, WRITER, &self.model.schema);
        let groups = if self.written.clusters.is_empty() {
            Vec::new()
        } else {
            let link = self.write_envelope(file, &page_list(checksum, &self.written))?;
            vec![ClusterGroup {
                min_entry: 0,
                entry_span: self.entries,
                clusters: self.written.clusters.len() as u64,
                page_list: link,
            }]
        };
        let foot = footer(
            checksum,
            &Footer {
                extension: Default::default(),
                groups,
            },
        );
        let head = self.write_envelope(file, &head)?;
        let foot = self.write_envelope(file, &foot)?;
        let anchor = Anchor {
            version: VERSION,
            seek_header: head.locator.offset,
            nbytes_header: head.locator.size,
            len_header: head.length,
            seek_footer: foot.locator.offset,
            nbytes_footer: foot.locator.size,
            len_footer: foot.length,
            max_key_size: MAX_KEY_SIZE,
        };
        file.write_object(self.dir, ANCHOR_CLASS, &self.name, "", |_| {
            anchor_object(&anchor)
        })?;
        file.add_streamers(class(ANCHOR_CLASS).map(|c| c.info()));
        Ok(())
    }
}

/// The cluster's columns, a slice per top-level field (`ranges`, which follow one another).
fn per_field<'a>(
    mut columns: &'a mut [ColumnData],
    ranges: &[std::ops::Range<usize>],
) -> Vec<&'a mut [ColumnData]> {
    ranges
        .iter()
        .map(|range| {
            let (field, rest) = std::mem::take(&mut columns).split_at_mut(range.len());
            columns = rest;
            field
        })
        .collect()
}

/// The writer's name in the header, as ROOT writes "ROOT v6.40.00".
const WRITER: &str = concat!("cherenkov v", env!("CARGO_PKG_VERSION"));
