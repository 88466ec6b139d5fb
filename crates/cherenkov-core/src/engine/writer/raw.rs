//! Rewrite mode's fast path: entries moved as they are serialized. An input tree whose branches
//! store their entries as this writer stores them (copy mode's test, `TreeWriter::stored_alike`) has its
//! baskets read and decompressed, and the bytes of their entries (with their entry offsets,
//! re-based) appended to the baskets being filled: the layout policy re-clusters them and the
//! closed clusters compress on every core as entries given as arrays do, without decoding the
//! entries into arrays and serializing them back (hadd -O moves ROOT's objects alike). Baskets
//! are read in steps of whole baskets of every branch, the next steps on their way while one is
//! moved (`ReadAhead`), so memory holds `READ_AHEAD_BYTES`, a step and the cluster being filled.

use super::branches::{Branch, Storage};
use super::file::FileWriter;
use super::fill::{BasketBuffer, MAX_BASKET};
use super::tree::{Serialize, TreeWriter};
use crate::engine::file::RootFile;
use crate::engine::runtime;
use crate::error::{Error, Result};
use crate::format::basket::decode_basket;
use crate::format::tree::TreeMeta;
use crate::source::ByteRange;
use bytes::Bytes;
use rayon::prelude::*;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use tokio::task::JoinHandle;

/// Compressed bytes of baskets read and decoded at once (a step is larger when the input has
/// no entry where every branch starts a basket within it).
const STEP_BYTES: u64 = if cfg!(test) { 4 << 10 } else { 16 << 20 };

/// Compressed bytes read ahead of the step being moved or copied: over a link of long round
/// trips the steps of many small inputs then arrive together, not one round trip each. Tests
/// take a few steps: both ends of the window are then met.
const READ_AHEAD_BYTES: u64 = if cfg!(test) { 8 << 10 } else { 32 << 20 };

/// The reads of consecutive steps (a file and its ranges each), issued in order ahead of their
/// use while `READ_AHEAD_BYTES` or less are in flight (at least the next step always is). Ranges
/// that opening the file read already (a small file's baskets lie in its speculative tail) are
/// not read again.
pub(super) struct ReadAhead<'a> {
    steps: Vec<(&'a Arc<RootFile>, &'a [ByteRange])>,
    issued: VecDeque<(u64, JoinHandle<Result<Vec<Bytes>>>)>,
    next: usize,
    in_flight: u64,
}

/// The bytes of `ranges` of `file`: the parts opening read already taken from what it holds,
/// the others read in one request.
async fn read_unheld(file: &RootFile, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
    let mut parts: Vec<Vec<(ByteRange, Option<Bytes>)>> =
        ranges.iter().map(|r| file.held_parts(r)).collect();
    let missing: Vec<ByteRange> = parts
        .iter()
        .flatten()
        .filter(|(_, held)| held.is_none())
        .map(|(r, _)| *r)
        .collect();
    if !missing.is_empty() {
        let mut read = file.source.read_ranges(&missing).await?.into_iter();
        for (_, slot) in parts.iter_mut().flatten().filter(|(_, h)| h.is_none()) {
            *slot = read.next();
        }
    }
    parts
        .into_iter()
        .map(|parts| {
            let mut bytes = parts.into_iter().map(|(_, b)| {
                b.ok_or_else(|| Error::io(file.name(), "a range read was not returned"))
            });
            match bytes.len() {
                1 => bytes.next().expect("one part"),
                _ => Ok(Bytes::from(bytes.collect::<Result<Vec<Bytes>>>()?.concat())),
            }
        })
        .collect()
}

impl<'a> ReadAhead<'a> {
    pub(super) fn new(steps: Vec<(&'a Arc<RootFile>, &'a [ByteRange])>) -> Self {
        let mut ahead = Self {
            steps,
            issued: VecDeque::new(),
            next: 0,
            in_flight: 0,
        };
        ahead.issue();
        ahead
    }

    fn issue(&mut self) {
        while let Some(&(file, ranges)) = self.steps.get(self.next) {
            if !self.issued.is_empty() && self.in_flight >= READ_AHEAD_BYTES {
                break;
            }
            let bytes = ranges.iter().map(|r| r.len).sum();
            let (file, ranges) = (file.clone(), ranges.to_vec());
            let reading = runtime().spawn(async move { read_unheld(&file, &ranges).await });
            self.issued.push_back((bytes, reading));
            self.in_flight += bytes;
            self.next += 1;
        }
    }

    /// The bytes of the next step's ranges (`what` names the reads in an error).
    pub(super) fn next_step(&mut self, what: &str) -> Result<Vec<Bytes>> {
        let (bytes, reading) = self.issued.pop_front().expect("one read per step");
        self.in_flight -= bytes;
        self.issue();
        runtime()
            .block_on(reading)
            .map_err(|e| Error::Cancelled(format!("{what}: {e}")))?
    }
}

/// One input basket and where its entries go.
struct Piece {
    /// The output branch it belongs to.
    branch: usize,
    /// Its first entry, counted from its step's first.
    entry_start: u64,
    entries: u64,
    range: ByteRange,
}

/// Consecutive entries of an input whose baskets (of every branch) are read and decoded
/// together: no basket holds entries of two steps.
#[derive(Default)]
struct Step {
    entries: u64,
    /// In file order.
    pieces: Vec<Piece>,
    /// The ranges that cover them (neighbours read as one range).
    ranges: Vec<ByteRange>,
}

/// How one input tree's entries are moved: see `TreeWriter::raw_plan`.
pub struct RawPlan {
    steps: Vec<Step>,
}

impl TreeWriter {
    /// How the entries of `input` (a tree of another file) are moved into this tree, or why
    /// they cannot be: every branch of this tree must be in `input`, stored as this writer
    /// stores it, with its baskets on disk, entry offsets in them, one after the other from
    /// entry 0 to the tree's last.
    pub fn raw_plan(&self, input: &TreeMeta) -> std::result::Result<RawPlan, String> {
        if self.branches.is_empty() {
            return Err("the output has no branches".into());
        }
        let found = self.stored_alike(input)?;
        let mut pieces = Vec::new();
        // How many branches start a basket at each entry: steps end where all do.
        let mut starts: BTreeMap<u64, usize> = BTreeMap::new();
        for ((i, out), j) in self.branches.iter().enumerate().zip(found) {
            let b = &input.branches[j];
            let why = |why: String| format!("branch '{}': {why}", out.name);
            if out.varies() && b.offsets_from_counts {
                return Err(why("its baskets leave out their entry offsets".into()));
            }
            let mut next = 0;
            for basket in &b.baskets {
                if basket.entry_start != next || basket.entry_stop < next {
                    return Err(why(format!(
                        "a basket of entries {}..{} after entry {next}",
                        basket.entry_start, basket.entry_stop
                    )));
                }
                next = basket.entry_stop;
                if basket.entry_stop > basket.entry_start {
                    *starts.entry(basket.entry_start).or_default() += 1;
                    pieces.push(Piece {
                        branch: i,
                        entry_start: basket.entry_start,
                        entries: basket.entry_stop - basket.entry_start,
                        range: ByteRange::new(basket.seek, basket.bytes as u64),
                    });
                }
            }
            if next != input.entries {
                return Err(why(format!(
                    "its baskets hold {next} of the tree's {} entries",
                    input.entries
                )));
            }
        }
        let n = self.branches.len();
        let bounds: Vec<u64> = starts
            .iter()
            .filter(|&(_, &count)| count == n)
            .map(|(&entry, _)| entry)
            .chain([input.entries])
            .collect();
        Ok(RawPlan {
            steps: steps(pieces, &bounds),
        })
    }

    /// Decode the baskets of `step` of file `input` (`read`, as read for `step.ranges`) on
    /// every core, into the entries of each branch.
    fn decode(&mut self, input: &str, step: &Step, read: &[Bytes]) -> Result<Decoded> {
        let raws = pieces_in(step, read).map_err(|why| {
            Error::InvalidArgument(format!("{input}: tree '{}': {why}", self.name))
        })?;
        let (branches, sizes, name) = (&self.branches, &self.sizes, &self.name);
        let mut decoded: Vec<(usize, Entries)> = step
            .pieces
            .par_iter()
            .zip(raws)
            .map(|(piece, raw)| {
                let branch = &branches[piece.branch];
                // Named only in an error: a step of small inputs holds a basket per branch.
                let origin = || {
                    format!(
                        "{input}: tree '{name}', basket of branch '{}' at offset {}",
                        branch.name, piece.range.offset
                    )
                };
                let entries = Entries::decode(branch, sizes[piece.branch], piece, raw, origin)?;
                Ok((piece.branch, entries))
            })
            .collect::<Result<_>>()?;
        // Pieces are in file order; a branch's entries in entry order.
        decoded.sort_by_key(|(i, e)| (*i, e.first));
        let mut columns: Vec<Option<Entries>> = (0..branches.len()).map(|_| None).collect();
        for (i, entries) in decoded {
            match &mut columns[i] {
                Some(column) => column.push(entries)?,
                slot => *slot = Some(entries),
            }
        }
        let columns: Vec<Entries> = columns.into_iter().map(|c| c.unwrap_or_default()).collect();
        self.check_counted(input, &columns)?;
        Ok(Decoded(columns))
    }

    /// Counted leaves must hold as many items as their counter says, entry by entry; the
    /// largest count is kept for the counter's leaf.
    fn check_counted(&mut self, input: &str, columns: &[Entries]) -> Result<()> {
        // Each counter's counts read once: NanoAOD counts hundreds of leaves with a few counters.
        let mut counted: Vec<Option<Vec<i64>>> = vec![None; columns.len()];
        for (i, branch) in self.branches.iter().enumerate() {
            let (Some(c), Storage::Counted { dims, .. }) = (branch.counter, &branch.storage) else {
                continue;
            };
            let item = (self.sizes[i] * dims.iter().product::<usize>()) as u64;
            let counts =
                counted[c].get_or_insert_with(|| columns[c].counts(self.sizes[c]).collect());
            let starts = columns[i].starts.as_deref().unwrap_or_default();
            let lengths = starts.windows(2).map(|w| (w[1] - w[0]) as u64);
            if let Some(entry) = counts
                .iter()
                .zip(lengths)
                .position(|(&n, len)| n as u64 * item != len)
            {
                return Err(Error::InvalidArgument(format!(
                    "{input}: tree '{}': branch '{}' has another number of items than its counter '{}' in entry {} of the output",
                    self.name,
                    branch.name,
                    self.branches[c].name,
                    self.entries + entry as u64
                )));
            }
        }
        for (i, branch) in self.branches.iter().enumerate() {
            if branch.is_counter {
                let max = match &counted[i] {
                    Some(counts) => counts.iter().copied().max(),
                    None => columns[i].counts(self.sizes[i]).max(),
                }
                .unwrap_or(0);
                let w = &mut self.written[i];
                w.maximum = w.maximum.max(max);
            }
        }
        Ok(())
    }
}

/// The steps of an input whose baskets are `pieces`, ending at entries of `bounds` (where every
/// branch starts a basket; the last is the tree's entries), of about `STEP_BYTES` each.
fn steps(mut pieces: Vec<Piece>, bounds: &[u64]) -> Vec<Step> {
    let segment = |entry: u64| bounds.partition_point(|&b| b <= entry) - 1;
    let mut bytes = vec![0u64; bounds.len().saturating_sub(1)];
    for p in &pieces {
        bytes[segment(p.entry_start)] += p.range.len;
    }
    let mut steps: Vec<Step> = Vec::new();
    // For each segment between bounds: its step, and that step's first entry.
    let mut step_of = Vec::with_capacity(bytes.len());
    let mut size = 0;
    for (k, &b) in bytes.iter().enumerate() {
        if steps.is_empty() || size + b > STEP_BYTES {
            steps.push(Step::default());
            size = 0;
        }
        size += b;
        let first = match step_of.last() {
            Some(&(s, first)) if s == steps.len() - 1 => first,
            _ => bounds[k],
        };
        steps.last_mut().expect("pushed").entries += bounds[k + 1] - bounds[k];
        step_of.push((steps.len() - 1, first));
    }
    pieces.sort_by_key(|p| p.range.offset);
    for mut p in pieces {
        let (s, first) = step_of[segment(p.entry_start)];
        p.entry_start -= first;
        let step = &mut steps[s];
        match step.ranges.last_mut() {
            Some(r) if r.end() == p.range.offset => r.len += p.range.len,
            _ => step.ranges.push(p.range),
        }
        step.pieces.push(p);
    }
    steps
}

/// The stored bytes of each piece of `step`, cut from what was read for its ranges.
fn pieces_in<'a>(step: &Step, read: &'a [Bytes]) -> std::result::Result<Vec<&'a [u8]>, String> {
    let mut spans = step.ranges.iter().zip(read).peekable();
    step.pieces
        .iter()
        .map(|piece| {
            while spans
                .peek()
                .is_some_and(|(r, _)| r.end() < piece.range.end())
            {
                spans.next();
            }
            let &(r, bytes) = spans.peek().ok_or_else(|| {
                format!(
                    "a basket at offset {} outside the ranges read",
                    piece.range.offset
                )
            })?;
            let at = (piece.range.offset - r.offset) as usize;
            bytes.get(at..at + piece.range.len as usize).ok_or_else(|| {
                format!(
                    "the file ends inside the basket at offset {}",
                    piece.range.offset
                )
            })
        })
        .collect()
}

/// Serialized entries of one branch: their bytes and, when they vary in size, where each
/// starts (`entries + 1` offsets into `data`).
#[derive(Default)]
struct Entries {
    /// The first entry, counted from the step's first.
    first: u64,
    entries: u64,
    data: Vec<u8>,
    starts: Option<Vec<u32>>,
}

impl Entries {
    fn decode(
        branch: &Branch,
        size: usize,
        piece: &Piece,
        raw: &[u8],
        origin: impl Fn() -> String,
    ) -> Result<Self> {
        // Decoding again names the basket in the error (it fails alike).
        let basket = decode_basket(raw, "").or_else(|_| decode_basket(raw, &origin()))?;
        let bad = |why: String| Error::InvalidArgument(format!("{}: {why}", origin()));
        if basket.entries as u64 != piece.entries {
            return Err(bad(format!(
                "{} entries, where the branch's basket table says {}",
                basket.entries, piece.entries
            )));
        }
        let starts = if branch.varies() {
            let starts = basket.offsets.ok_or_else(|| {
                bad("no entry offsets in a basket of entries of varying size".into())
            })?;
            Some(starts)
        } else {
            let Storage::Numbers { dims, .. } = &branch.storage else {
                unreachable!("only numbers are of fixed size")
            };
            let want = piece.entries as usize * size * dims.iter().product::<usize>();
            if basket.content.len() != want {
                return Err(bad(format!(
                    "{} bytes of entries, {want} expected for {} entries",
                    basket.content.len(),
                    piece.entries
                )));
            }
            None
        };
        Ok(Self {
            first: piece.entry_start,
            entries: piece.entries,
            data: basket.content,
            starts,
        })
    }

    /// Append the next basket's entries of the same branch.
    fn push(&mut self, next: Entries) -> Result<()> {
        let base = u32::try_from(self.data.len() + next.data.len())
            .map(|_| self.data.len() as u32)
            .map_err(|_| {
                Error::InvalidArgument(
                    "more than 4 GiB of one branch's entries between two cluster boundaries".into(),
                )
            })?;
        if let (Some(starts), Some(more)) = (&mut self.starts, next.starts) {
            starts.pop();
            starts.extend(more.iter().map(|s| s + base));
        }
        self.data.extend_from_slice(&next.data);
        self.entries += next.entries;
        Ok(())
    }

    /// Bytes of entries `a..b`.
    fn span(&self, a: usize, b: usize) -> (usize, usize) {
        match &self.starts {
            Some(s) => (s[a] as usize, s[b] as usize),
            None => {
                let width = self.data.len() / self.entries.max(1) as usize;
                (a * width, b * width)
            }
        }
    }

    /// The entries as counts (a counter's big-endian integers of `size` bytes).
    fn counts(&self, size: usize) -> impl Iterator<Item = i64> + '_ {
        self.data
            .chunks_exact(size)
            .map(|c| c.iter().fold(0i64, |n, &b| n << 8 | b as i64))
    }
}

/// The entries of a step, branch by branch.
struct Decoded(Vec<Entries>);

impl Serialize for Decoded {
    fn bytes(&self, i: usize, branch: &Branch, _: usize, a: usize, b: usize) -> usize {
        let (from, to) = self.0[i].span(a, b);
        let table = if branch.varies() { 4 * (b - a) } else { 0 };
        to - from + table
    }

    fn fill(
        &self,
        i: usize,
        branch: &Branch,
        _: usize,
        a: usize,
        b: usize,
        out: &mut BasketBuffer,
    ) -> Result<()> {
        let column = &self.0[i];
        let (from, to) = column.span(a, b);
        let base = out.data.len();
        if base + (to - from) >= MAX_BASKET as usize {
            return Err(Error::InvalidArgument(format!(
                "branch '{}': a basket would pass 2 GiB, more than a TBasket holds (give the tree a smaller cluster_bytes)",
                branch.name
            )));
        }
        if let Some(starts) = &column.starts {
            out.starts.extend(
                starts[a..b]
                    .iter()
                    .map(|&s| (base + s as usize - from) as u32),
            );
        }
        out.data.extend_from_slice(&column.data[from..to]);
        out.entries += (b - a) as u64;
        Ok(())
    }
}

/// Append the entries of the input trees (each read from its source, as its plan says) to
/// `writer` by moving their serialized entries, in order; the next steps are read while one is
/// moved (`ReadAhead`).
pub fn rewrite_trees(
    writer: &mut TreeWriter,
    file: &mut FileWriter,
    inputs: Vec<(Arc<RootFile>, RawPlan)>,
) -> Result<()> {
    let steps: Vec<(&Arc<RootFile>, &Step)> = inputs
        .iter()
        .flat_map(|(source, plan)| plan.steps.iter().map(move |s| (source, s)))
        .collect();
    let mut reads = ReadAhead::new(
        steps
            .iter()
            .map(|&(source, step)| (source, &step.ranges[..]))
            .collect(),
    );
    for &(source, step) in &steps {
        let raw = reads.next_step("reading baskets to rewrite")?;
        let decoded = writer
            .decode(source.name(), step, &raw)
            .map_err(|e| e.in_file(source.name()))?;
        writer.append(file, step.entries as usize, &decoded)?;
        // Freed on the pool, off the thread that fills the baskets: a small input's step is a
        // vector per branch (947 for NanoAOD), and its frees were a quarter of that thread's time.
        rayon::spawn(move || drop(decoded));
    }
    Ok(())
}

#[cfg(test)]
#[path = "raw_tests.rs"]
mod tests;
