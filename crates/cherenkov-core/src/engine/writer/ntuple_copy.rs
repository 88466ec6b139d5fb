//! Copy mode for RNTuples (hadd's fast merge of RNTuples): an input whose fields and columns are
//! laid out as the writer's has its clusters appended page by page, each page's stored bytes
//! (compressed, with their checksum) copied without decompression. Collection indices count from
//! the start of their cluster (spec: "Offset columns"), so a cluster's pages stay valid wherever
//! it lands: only the clusters' first entries and the columns' first elements in the page list
//! change, and each column keeps the compression setting its pages were written with. A cluster
//! is read (its neighbouring pages as one range) while the previous one is written.

use super::file::FileWriter;
use super::ntuple::NtupleWriter;
use crate::engine::ntuple::Ntuple;
use crate::engine::runtime;
use crate::error::{Error, Result};
use crate::format::rntuple::page_list::{ColumnPages, PageInfo};
use crate::format::rntuple::schema::Schema;
use crate::format::rntuple::writing::page::SealedPage;
use crate::source::{ByteRange, SharedSource};
use std::collections::HashMap;

/// One input cluster to copy: its entries, its uncompressed bytes and, per output column, the
/// input's pages and their compression setting.
struct CopiedCluster {
    entries: u64,
    bytes: u64,
    columns: Vec<(Vec<PageInfo>, u32)>,
}

/// How one input RNTuple's clusters are copied: see `NtupleWriter::copy_plan`.
pub struct NtupleCopyPlan {
    source: SharedSource,
    file: String,
    clusters: Vec<CopiedCluster>,
}

impl NtupleCopyPlan {
    /// Compressed bytes the copy writes (pages and their checksums).
    pub fn bytes(&self) -> u64 {
        self.clusters
            .iter()
            .flat_map(|c| &c.columns)
            .flat_map(|(pages, _)| pages)
            .map(stored_len)
            .sum()
    }
}

/// Bytes a page takes in the file: its stored bytes and its checksum.
fn stored_len(page: &PageInfo) -> u64 {
    page.locator.size + if page.checksum { 8 } else { 0 }
}

impl NtupleWriter {
    /// How the clusters of `input` (an RNTuple of another file, its page lists read) are copied
    /// into this RNTuple, or why they cannot be: every field and column of this RNTuple must be
    /// in `input`, laid out alike (`matching_columns`), with no other, and stored in every
    /// cluster.
    pub fn copy_plan(&self, input: &Ntuple) -> std::result::Result<NtupleCopyPlan, String> {
        let matching = matching_columns(&self.model.schema, &input.desc.schema)?;
        let clusters = runtime()
            .block_on(input.clusters(0, input.desc.entries()))
            .map_err(|e| e.to_string())?;
        let mut copied = Vec::with_capacity(clusters.len());
        for cluster in clusters {
            let mut columns = Vec::with_capacity(matching.len());
            let mut bytes = 0;
            for (c, &j) in matching.iter().enumerate() {
                match cluster.columns.get(j) {
                    Some(ColumnPages::Stored {
                        pages, compression, ..
                    }) => {
                        let elements: u64 = pages.iter().map(|p| p.elements as u64).sum();
                        bytes += self.codings[c].packed_len(elements);
                        columns.push((pages.clone(), *compression));
                    }
                    _ => {
                        return Err(format!(
                            "column {j} has no pages in cluster {} (suppressed or added late)",
                            cluster.index
                        ))
                    }
                }
            }
            copied.push(CopiedCluster {
                entries: cluster.summary.entries,
                bytes,
                columns,
            });
        }
        Ok(NtupleCopyPlan {
            source: input.file.source.clone(),
            file: input.file.name().to_string(),
            clusters: copied,
        })
    }
}

impl NtupleWriter {
    /// Lay this RNTuple out as `input` (its fields and columns, projections and aliases
    /// included) where cherenkov's own layout of the same columns differs (ROOT's importer
    /// makes NanoAOD's collections records with projected fields, say): it then takes copied
    /// clusters only, entries given as arrays are refused. Returns whether it did; refuses an
    /// input whose columns were added late, or a writer that has entries.
    pub fn take_layout_of(&mut self, input: &Ntuple) -> std::result::Result<bool, String> {
        if matching_columns(&self.model.schema, &input.desc.schema).is_ok() {
            return Ok(false);
        }
        if self.entries > 0 {
            return Err("entries were written already".into());
        }
        let schema = &input.desc.schema;
        if schema.columns.iter().any(|c| c.first_element.is_some()) {
            return Err("some of its columns were added late (a schema extension)".into());
        }
        self.model.schema = schema.clone();
        self.codings = schema.columns.iter().map(|c| c.coding()).collect();
        self.filling = vec![Default::default(); self.codings.len()];
        self.first_element = vec![0; self.codings.len()];
        self.copies_only = Some(input.file.name().to_string());
        Ok(true)
    }
}

/// Append the clusters of the inputs (each read from its source, as its plan says) to `writer`,
/// copying their pages, in order; the next cluster is read while one is written.
pub fn copy_ntuples(
    writer: &mut NtupleWriter,
    file: &mut FileWriter,
    inputs: Vec<NtupleCopyPlan>,
) -> Result<()> {
    writer.close_cluster(file)?;
    // Per cluster: its input, the cluster, the ranges holding its pages and where each page is.
    let steps: Vec<_> = inputs
        .iter()
        .flat_map(|plan| plan.clusters.iter().map(move |c| (plan, c, layout(c))))
        .collect();
    let read = |(plan, _, (ranges, _)): &(&NtupleCopyPlan, &CopiedCluster, Layout)| {
        let (source, ranges) = (plan.source.clone(), ranges.clone());
        runtime().spawn(async move { source.read_ranges(&ranges).await })
    };
    let mut next = steps.first().map(read);
    for (s, (plan, cluster, (_, at))) in steps.iter().enumerate() {
        let reading = next.take().expect("one read per step");
        next = steps.get(s + 1).map(read);
        let raw = runtime()
            .block_on(reading)
            .map_err(|e| Error::Cancelled(format!("reading pages to copy: {e}")))?
            .map_err(|e| e.in_file(&plan.file))?;
        let mut at = at.iter().copied();
        let pages = cluster
            .columns
            .iter()
            .map(|(pages, compression)| {
                let sealed = pages
                    .iter()
                    .map(|info| {
                        let (range, start) = at.next().expect("one place per page");
                        SealedPage {
                            bytes: raw[range].slice(start..start + stored_len(info) as usize),
                            info: *info,
                        }
                    })
                    .collect();
                (sealed, *compression)
            })
            .collect();
        let first_entry = writer.entries;
        writer.entries += cluster.entries;
        writer.write_cluster(file, pages, first_entry, cluster.entries, cluster.bytes)?;
    }
    Ok(())
}

/// The ranges that hold a cluster's pages, and where each page is in them (range, offset).
type Layout = (Vec<ByteRange>, Vec<(usize, usize)>);

/// The ranges that hold a cluster's pages (neighbours as one range), and where each page is in
/// them (range, offset), in the cluster's column and page order.
fn layout(cluster: &CopiedCluster) -> Layout {
    let mut pages: Vec<(usize, ByteRange)> = cluster
        .columns
        .iter()
        .flat_map(|(pages, _)| pages)
        .map(|p| ByteRange::new(p.locator.offset, stored_len(p)))
        .enumerate()
        .collect();
    pages.sort_by_key(|(_, r)| r.offset);
    let mut ranges: Vec<ByteRange> = Vec::new();
    let mut at = vec![(0, 0); pages.len()];
    for (i, r) in pages {
        match ranges.last_mut() {
            Some(last) if last.end() >= r.offset => {
                let start = (r.offset - last.offset) as usize;
                last.len = last.len.max(r.end() - last.offset);
                at[i] = (ranges.len() - 1, start);
            }
            _ => {
                at[i] = (ranges.len(), 0);
                ranges.push(r);
            }
        }
    }
    (ranges, at)
}

/// For each column of `ours`, the column of `theirs` holding the same data the same way: its
/// field has the same path, type and structure, and the column the same type, bits, value range
/// and representation, not added late; or why `theirs` is laid out otherwise. `theirs` may not
/// hold fields or columns `ours` lacks (projected fields, which hold no data, aside): a copy
/// would drop them.
pub fn matching_columns(ours: &Schema, theirs: &Schema) -> std::result::Result<Vec<usize>, String> {
    let stored = |s: &Schema| s.fields.iter().filter(|f| f.source.is_none()).count();
    if stored(theirs) != stored(ours) || theirs.columns.len() != ours.columns.len() {
        return Err(format!(
            "{} fields and {} columns, where the output has {} and {}",
            stored(theirs),
            theirs.columns.len(),
            stored(ours),
            ours.columns.len()
        ));
    }
    let their_paths = paths(theirs);
    let by_path: HashMap<&str, usize> = their_paths
        .iter()
        .enumerate()
        .filter(|&(g, _)| theirs.fields[g].source.is_none())
        .map(|(g, p)| (p.as_str(), g))
        .collect();
    let our_paths = paths(ours);
    let mut field_of = Vec::with_capacity(ours.fields.len());
    for (f, path) in our_paths.iter().enumerate() {
        let (a, g) = (&ours.fields[f], by_path.get(path.as_str()).copied());
        if a.source.is_some() {
            field_of.push(usize::MAX); // projected: no columns of its own
            continue;
        }
        let Some(g) = g else {
            return Err(format!("no field '{path}'"));
        };
        let b = &theirs.fields[g];
        if (&a.type_name, a.role, a.repetition) != (&b.type_name, b.role, b.repetition) {
            return Err(format!(
                "field '{path}' is a {} (role {:?}), a {} (role {:?}) in the output",
                b.type_name, b.role, a.type_name, a.role
            ));
        }
        field_of.push(g);
    }
    // The k-th column of a field's representation matches the k-th of its twin's.
    let mut taken: HashMap<(usize, u16), usize> = HashMap::new();
    let mut their_columns: HashMap<(usize, u16), Vec<usize>> = HashMap::new();
    for (j, c) in theirs.columns.iter().enumerate() {
        their_columns
            .entry((c.field, c.representation))
            .or_default()
            .push(j);
    }
    let mut out = Vec::with_capacity(ours.columns.len());
    for c in &ours.columns {
        let key = (field_of[c.field], c.representation);
        let k = taken.entry(key).or_insert(0);
        let j = their_columns.get(&key).and_then(|js| js.get(*k)).copied();
        *k += 1;
        let path = &our_paths[c.field];
        let Some(j) = j else {
            return Err(format!("field '{path}' has fewer columns"));
        };
        let t = &theirs.columns[j];
        let late = t.first_element.is_some_and(|e| e != 0);
        if (t.kind, t.bits, t.range) != (c.kind, c.bits, c.range) || late {
            return Err(format!(
                "field '{path}' is stored as {} of {} bits{}, as {} of {} bits in the output",
                t.kind.name(),
                t.bits,
                if late { ", added late" } else { "" },
                c.kind.name(),
                c.bits
            ));
        }
        out.push(j);
    }
    Ok(out)
}

/// Each field's path: the names from its top-level field down, anonymous ones included.
fn paths(schema: &Schema) -> Vec<String> {
    (0..schema.fields.len())
        .map(|f| {
            let mut names = vec![schema.fields[f].name.as_str()];
            let mut at = f;
            // A top-level field is its own parent; a bad parent chain ends after every field.
            for _ in 0..schema.fields.len() {
                let parent = schema.fields[at].parent;
                if parent == at || parent >= schema.fields.len() {
                    break;
                }
                names.push(schema.fields[parent].name.as_str());
                at = parent;
            }
            names.reverse();
            names.join(".")
        })
        .collect()
}
