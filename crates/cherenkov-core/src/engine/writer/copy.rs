//! Copy mode (hadd's fast mode): an input tree whose branches are stored as this writer stores
//! them has its compressed baskets copied without decompression. Each basket gets a new key (its
//! seek, directory and cycle) before the TBasket fields and payload it had; the key keeps its
//! length, so the entry offsets inside the payload (counted from the key's start) stay right.
//! The tree's basket tables (fBasketSeek, fBasketEntry, fBasketBytes) and its cluster ranges are
//! the inputs', shifted by the entries written before them. Baskets are read in batches in file
//! order, the next batches on their way while one is written (`raw::ReadAhead`).

use super::branches::{Branch, Storage};
use super::file::FileWriter;
use super::raw::ReadAhead;
use super::tree::TreeWriter;
use crate::engine::file::RootFile;
use crate::error::{Error, Result};
use crate::format::basket::{decode_basket, BasketHeader};
use crate::format::cursor::Cursor;
use crate::format::directory::Key;
use crate::format::tree::TreeMeta;
use crate::format::writing::tree::{cpp_type, leaf_type, BasketRecord};
use crate::source::ByteRange;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;

/// Bytes of baskets read at once (two batches are held: one written, the next on its way).
const BATCH_BYTES: u64 = 32 << 20;

/// One input basket and where its entries go.
struct Piece {
    /// The output branch it belongs to.
    branch: usize,
    /// Its first entry in the input.
    entry_start: u64,
    range: ByteRange,
}

/// Baskets read together: the ranges that cover them (neighbours read as one range).
#[derive(Default)]
struct Batch {
    pieces: Vec<Piece>,
    ranges: Vec<ByteRange>,
}

/// How one input tree's baskets are copied: see `TreeWriter::copy_plan`.
pub struct CopyPlan {
    entries: u64,
    /// Entries of each of the input's clusters.
    clusters: Vec<u64>,
    /// Its baskets in batches of about `BATCH_BYTES`, in file order.
    batches: Vec<Batch>,
}

impl CopyPlan {
    /// Compressed bytes the copy writes.
    pub fn bytes(&self) -> u64 {
        self.batches
            .iter()
            .flat_map(|b| &b.pieces)
            .map(|p| p.range.len)
            .sum()
    }
}

impl TreeWriter {
    /// How the baskets of `input` (a tree of another file) are copied into this tree, or why
    /// they cannot be: every branch of this tree must be in `input`, stored as this writer
    /// stores it (same leaf or collection class, same counter, entry offsets alike), with all
    /// its baskets on disk.
    pub fn copy_plan(&self, input: &TreeMeta) -> std::result::Result<CopyPlan, String> {
        let mut pieces = Vec::new();
        for (i, j) in self.stored_alike(input)?.into_iter().enumerate() {
            for b in &input.branches[j].baskets {
                pieces.push(Piece {
                    branch: i,
                    entry_start: b.entry_start,
                    range: ByteRange::new(b.seek, b.bytes as u64),
                });
            }
        }
        pieces.sort_by_key(|p| p.range.offset);
        let mut batches: Vec<Batch> = Vec::new();
        let mut size = BATCH_BYTES;
        for p in pieces {
            if size + p.range.len > BATCH_BYTES {
                batches.push(Batch::default());
                size = 0;
            }
            size += p.range.len;
            let batch = batches.last_mut().expect("pushed");
            match batch.ranges.last_mut() {
                Some(r) if r.end() == p.range.offset => r.len += p.range.len,
                _ => batch.ranges.push(p.range),
            }
            batch.pieces.push(p);
        }
        let bounds = input.cluster_boundaries();
        Ok(CopyPlan {
            entries: input.entries,
            clusters: bounds.windows(2).map(|w| w[1] - w[0]).collect(),
            batches,
        })
    }

    /// The input branch of each branch of this tree, checked to store its entries as this writer
    /// stores them (`compatible`), or why one is missing or stored otherwise.
    pub(super) fn stored_alike(&self, input: &TreeMeta) -> std::result::Result<Vec<usize>, String> {
        let tops: Vec<usize> = (0..input.branches.len())
            .filter(|&j| input.branches[j].parent.is_none())
            .collect();
        // Inputs usually hold the output's branches in its order: found in place, else by name.
        let mut by_name: Option<HashMap<&str, usize>> = None;
        let mut found = Vec::with_capacity(self.branches.len());
        for (i, out) in self.branches.iter().enumerate() {
            let counter = out.counter.map(|c| self.branches[c].name.as_str());
            let j = match tops.get(i) {
                Some(&j) if input.branches[j].name == out.name => j,
                _ => *by_name
                    .get_or_insert_with(|| {
                        let mut names = HashMap::new();
                        for &j in &tops {
                            names.entry(input.branches[j].name.as_str()).or_insert(j);
                        }
                        names
                    })
                    .get(out.name.as_str())
                    .ok_or_else(|| format!("it has no top-level branch '{}'", out.name))?,
            };
            compatible(out, counter, input, j)
                .map_err(|why| format!("branch '{}': {why}", out.name))?;
            found.push(j);
        }
        Ok(found)
    }

    /// Write one batch of copied baskets (`read`, as read for `batch.ranges`) side by side,
    /// their entries starting at `first_entry` of this tree.
    fn write_copied(
        &mut self,
        file: &mut FileWriter,
        batch: &Batch,
        read: Vec<Bytes>,
        first_entry: u64,
    ) -> Result<()> {
        let seek_pdir = file.directory_seek(self.dir);
        let total: u64 = batch.pieces.iter().map(|p| p.range.len).sum();
        let start = file.allocate(total);
        let mut out = Vec::with_capacity(total as usize);
        let mut spans = batch.ranges.iter().zip(read);
        let mut span = spans.next();
        for piece in &batch.pieces {
            while let Some((r, _)) = &span {
                if r.end() >= piece.range.end() {
                    break;
                }
                span = spans.next();
            }
            let Some((r, bytes)) = &span else {
                return Err(Error::InvalidArgument(format!(
                    "tree '{}': a basket at offset {} outside the ranges read",
                    self.name, piece.range.offset
                )));
            };
            let at = (piece.range.offset - r.offset) as usize;
            let raw = bytes
                .get(at..at + piece.range.len as usize)
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "tree '{}': the file ends inside the basket at offset {}",
                        self.name, piece.range.offset
                    ))
                })?;
            let seek = start + out.len() as u64;
            self.rekey(piece, raw, seek, seek_pdir, first_entry, &mut out)?;
        }
        file.write_at(start, &out)
    }

    /// Append basket `raw` (of `piece`) to `out` with a new key for `seek`, and record it.
    fn rekey(
        &mut self,
        piece: &Piece,
        raw: &[u8],
        seek: u64,
        seek_pdir: u64,
        first_entry: u64,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let i = piece.branch;
        let origin = || {
            format!(
                "tree '{}', basket of branch '{}' at offset {}",
                self.name, self.branches[i].name, piece.range.offset
            )
        };
        let mut cur = Cursor::new(raw, "a basket to copy", piece.range.offset);
        // Its strings are skipped, not read: the new key names the output's branch and tree.
        let key = Key::parse_sizes(&mut cur).map_err(|e| e.in_file(&origin()))?;
        let header_end = cur.pos();
        BasketHeader::parse(&mut cur).map_err(|e| e.in_file(&origin()))?;
        let keylen = key.keylen as usize;
        let bad = |why: String| Error::InvalidArgument(format!("{}: {why}", origin()));
        if key.nbytes as usize != raw.len() || keylen < cur.pos() || keylen > raw.len() {
            return Err(bad(format!(
                "a key of {} bytes (fNbytes {}, fKeylen {keylen})",
                raw.len(),
                key.nbytes
            )));
        }
        if key.version <= 1000 && seek > i32::MAX as u64 {
            return Err(bad(
                "its key has 32-bit seeks and the output is past 2 GB: merge with mode='rewrite'"
                    .into(),
            ));
        }
        let w = &mut self.written[i];
        let new = Key {
            seek_key: seek,
            seek_pdir,
            cycle: w.baskets.len() as i16,
            ..key.clone()
        };
        let before = out.len();
        new.write_as(out, "TBasket", &self.branches[i].name, &self.name);
        let header_len = out.len() - before;
        if header_len != header_end {
            return Err(bad(format!(
                "its key header takes {header_end} bytes, {header_len} once re-keyed (the entry offsets count from the key's start)"
            )));
        }
        out.extend_from_slice(&raw[header_end..]);
        if self.branches[i].is_counter {
            let basket = decode_basket(raw, &origin())?;
            let max = basket
                .content
                .chunks_exact(self.sizes[i])
                .map(|c| c.iter().fold(0i64, |n, &b| n << 8 | b as i64))
                .max();
            w.maximum = w.maximum.max(max.unwrap_or(0));
        }
        w.baskets.push(BasketRecord {
            seek,
            bytes: raw.len() as u32,
            entry_start: first_entry + piece.entry_start,
        });
        w.tot_bytes += (keylen + key.objlen as usize) as i64;
        w.zip_bytes += raw.len() as i64;
        w.basket_size = w.basket_size.max(key.objlen as usize);
        Ok(())
    }
}

/// Append the entries of the input trees (each read from its source, as its plan says) to
/// `writer` by copying their baskets, in order; the next batch is read while one is written.
pub fn copy_trees(
    writer: &mut TreeWriter,
    file: &mut FileWriter,
    inputs: Vec<(Arc<RootFile>, CopyPlan)>,
) -> Result<()> {
    if writer.filling_entries > 0 {
        writer.close_cluster(file)?;
    }
    writer.write_pending(file)?;
    let steps: Vec<(usize, usize)> = inputs
        .iter()
        .enumerate()
        .flat_map(|(k, (_, plan))| (0..plan.batches.len()).map(move |b| (k, b)))
        .collect();
    let mut reads = ReadAhead::new(
        steps
            .iter()
            .map(|&(k, b)| (&inputs[k].0, &inputs[k].1.batches[b].ranges[..]))
            .collect(),
    );
    let mut first_entry = writer.entries;
    let mut done = 0;
    let before: Vec<usize> = writer.written.iter().map(|w| w.baskets.len()).collect();
    for &(k, b) in &steps {
        // Inputs with no baskets (no entries) are passed over by the steps.
        finish_inputs(writer, &inputs[done..k], &mut first_entry);
        done = done.max(k);
        let raw = reads.next_step("reading baskets to copy")?;
        writer.write_copied(file, &inputs[k].1.batches[b], raw, first_entry)?;
    }
    finish_inputs(writer, &inputs[done..], &mut first_entry);
    // Batches are written in file order, not entry order; the baskets before these inputs'
    // (whose entries come first) are in order already.
    for (w, &from) in writer.written.iter_mut().zip(&before) {
        w.baskets[from..].sort_by_key(|b| b.entry_start);
    }
    Ok(())
}

/// Count the entries and clusters of inputs whose baskets are all written.
fn finish_inputs(writer: &mut TreeWriter, inputs: &[(Arc<RootFile>, CopyPlan)], first: &mut u64) {
    for (_, plan) in inputs {
        writer.entries += plan.entries;
        writer.clusters.extend(&plan.clusters);
        *first += plan.entries;
    }
}

/// Whether two trees' branches are alike in all that makes their columns (names, classes, the
/// branch hierarchy, leaves with their types, titles and counters, element classes and
/// versions): a merge then takes the first one's description for the other, unread.
pub fn same_branches(a: &TreeMeta, b: &TreeMeta) -> bool {
    a.branches.len() == b.branches.len()
        && a.leaves.len() == b.leaves.len()
        && a.branches.iter().zip(&b.branches).all(|(x, y)| {
            x.name == y.name
                && x.class == y.class
                && x.parent == y.parent
                && x.children == y.children
                && x.leaves == y.leaves
                && x.element == y.element
        })
        && a.leaves.iter().zip(&b.leaves).all(|(x, y)| {
            x.name == y.name
                && x.class == y.class
                && x.title == y.title
                && x.len == y.len
                && x.is_unsigned == y.is_unsigned
                && x.count == y.count
                && x.element_type == y.element_type
        })
}

/// Whether input branch `j` stores its entries as the writer stores `out` (counted by
/// `counter`): then its baskets can be read as the output's.
fn compatible(
    out: &Branch,
    counter: Option<&str>,
    input: &TreeMeta,
    j: usize,
) -> std::result::Result<(), String> {
    let b = &input.branches[j];
    if !b.children.is_empty() {
        return Err("it has sub-branches".into());
    }
    if !b.embedded.is_empty() {
        return Err("its last basket is kept inside the TTree's metadata".into());
    }
    if (b.entry_offset_len > 0) != out.varies() {
        return Err(format!("fEntryOffsetLen is {}", b.entry_offset_len));
    }
    match &out.storage {
        Storage::Numbers { dtype, dims } | Storage::Counted { dtype, dims } => {
            let [leaf] = b.leaves[..] else {
                return Err(format!("it has {} leaves", b.leaves.len()));
            };
            let leaf = &input.leaves[leaf];
            let (class, letter) = leaf_type(*dtype).expect("checked by plan");
            if b.class != "TBranch" || leaf.class != class {
                return Err(format!(
                    "a {} of {}, not a TBranch of {class}",
                    b.class, leaf.class
                ));
            }
            if leaf.is_unsigned != letter.is_ascii_lowercase() {
                return Err("another signedness".into());
            }
            if leaf.len != dims.iter().product::<usize>() as i32 {
                return Err(format!("{} numbers per item", leaf.len));
            }
            let theirs = leaf.count.map(|c| input.leaves[c].name.as_str());
            if theirs != counter {
                return Err(format!("its counter is {theirs:?}"));
            }
        }
        other => {
            let ours = match other {
                Storage::Vector(d) => format!("vector<{}>", cpp_type(*d).expect("checked")),
                Storage::VectorVector(d) => {
                    format!("vector<vector<{}>>", cpp_type(*d).expect("checked"))
                }
                Storage::VectorString => "vector<string>".into(),
                _ => "string".into(),
            };
            let theirs = b.element.as_ref().map(|e| e.class_name.as_str());
            let normal = |s: &str| s.replace("std::", "").replace(' ', "");
            if b.class != "TBranchElement" || theirs.map(normal) != Some(normal(&ours)) {
                return Err(format!("a {} of {theirs:?}, not of {ours}", b.class));
            }
        }
    }
    Ok(())
}
