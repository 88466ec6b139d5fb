//! TTrees as the engine reads them (`TreeTable`): branches stored in baskets. Planning is in
//! `plan.rs`, assembly in `assemble.rs`; the reading itself is `table::read`.

pub mod assemble;
mod ends;
mod one_pass;
pub mod plan;

use super::file::RootFile;
use super::output::{BranchArray, ReadStats};
use super::table::{read, Decoding, Held, Table};
use crate::error::{Error, Result};
use crate::format::array::Array;
use crate::format::basket::{decode_basket, Basket};
use crate::format::interpretation::Interpretation;
use crate::format::tree::TreeMeta;
use crate::source::ByteRange;
use assemble::assemble_all;
use async_trait::async_trait;
use bytes::Bytes;
use plan::{interpretations, plan_baskets, BasketSource, Planned};
use std::collections::HashMap;
use std::sync::Arc;

/// A TTree of an open file.
#[derive(Clone)]
pub struct TreeTable {
    pub file: Arc<RootFile>,
    pub tree: Arc<TreeMeta>,
}

impl TreeTable {
    pub fn new(file: Arc<RootFile>, tree: Arc<TreeMeta>) -> Self {
        Self { file, tree }
    }
}

impl Drop for TreeTable {
    /// A tree's metadata is thousands of allocations (NanoAOD's 947 branches: about 9 000), and
    /// freeing them took a seventh of a copy merge's writing thread: the last holder of it
    /// frees it on the pool, off the thread that reads or writes.
    fn drop(&mut self) {
        if Arc::strong_count(&self.tree) == 1 {
            let tree = std::mem::take(&mut self.tree);
            rayon::spawn(move || drop(tree));
        }
    }
}

/// Read `branches` (indices into `tree.branches`) over entries `[start, stop)`.
pub async fn read_branches(
    table: &TreeTable,
    branches: &[usize],
    start: u64,
    stop: u64,
) -> Result<(Vec<BranchArray>, ReadStats)> {
    read(
        &Arc::new(table.clone()),
        branches,
        start,
        stop,
        &Held::new(),
    )
    .await
}

#[async_trait]
impl Table for TreeTable {
    type Unit = Planned;
    type Decoded = Basket;
    type Item = BranchArray;

    fn file(&self) -> &RootFile {
        &self.file
    }

    fn entries(&self) -> u64 {
        self.tree.entries
    }

    fn item_count(&self) -> usize {
        self.tree.branches.len()
    }

    fn path(&self, item: usize) -> String {
        self.tree.branch_path(item)
    }

    fn check(&self, items: &[usize]) -> Result<()> {
        interpretations(&self.file, &self.tree, items).map(|_| ())
    }

    async fn plan(&self, items: &[usize], start: u64, stop: u64) -> Result<Vec<Planned>> {
        let (stored, _) = stored_branches(&self.file, &self.tree, items)?;
        plan_baskets(&self.file, &self.tree, &stored, start, stop)
    }

    fn ranges(&self, unit: &Planned) -> Vec<ByteRange> {
        match unit.source {
            BasketSource::Disk(loc) => vec![ByteRange::new(loc.seek, loc.bytes as u64)],
            BasketSource::Embedded(_) => Vec::new(),
        }
    }

    fn decoded_estimate(&self, unit: &Planned) -> u64 {
        let b = &self.tree.branches[unit.branch];
        let ratio = if b.zip_bytes > 0 {
            (b.tot_bytes as f64 / b.zip_bytes as f64).clamp(1.0, 100.0)
        } else {
            3.0
        };
        (unit.stored_bytes() as f64 * ratio) as u64
    }

    fn decode(&self, unit: &Planned, stored: &[Bytes]) -> Result<Basket> {
        decode_planned(&self.file, &self.tree, unit, stored.first().map(|b| &b[..]))
    }

    fn decoded_len(&self, basket: &Basket) -> u64 {
        basket.content.len() as u64
    }

    async fn assemble(
        &self,
        items: &[usize],
        start: u64,
        stop: u64,
        units: Vec<(Planned, Arc<Basket>)>,
    ) -> Result<Vec<BranchArray>> {
        let (stored, uses) = stored_branches(&self.file, &self.tree, items)?;
        let interps = interpretations(&self.file, &self.tree, &stored)?;
        let pairs: Vec<(&Planned, &Basket)> = units.iter().map(|(p, b)| (p, b.as_ref())).collect();
        let arrays = assemble_all(
            &self.file, &self.tree, &stored, interps, &pairs, start, stop,
        )
        .await?;
        let by_branch: HashMap<usize, BranchArray> = stored.into_iter().zip(arrays).collect();
        self.finish(items, by_branch, uses, stop - start)
    }

    async fn decode_and_assemble(
        &self,
        items: &[usize],
        start: u64,
        stop: u64,
        units: &[Planned],
        stored: Vec<Vec<Bytes>>,
    ) -> Result<(Vec<BranchArray>, Decoding)> {
        one_pass::decode_and_assemble(self, items, start, stop, units, stored).await
    }

    fn item_len(&self, item: &BranchArray) -> u64 {
        item.array.nbytes() as u64
    }

    /// The counter of a jagged branch (its branches share their offsets: `ends.rs`).
    fn shares_with(&self, item: usize) -> Option<usize> {
        match interpretations(&self.file, &self.tree, &[item])
            .ok()?
            .pop()?
        {
            Interpretation::Jagged { count_branch, .. } => count_branch,
            _ => None,
        }
    }
}

impl TreeTable {
    /// The arrays of `items` from those of the branches holding their data (`by_branch`, of
    /// `stored_branches`): groups become records of their sub-branches.
    fn finish(
        &self,
        items: &[usize],
        mut by_branch: HashMap<usize, BranchArray>,
        mut uses: HashMap<usize, usize>,
        entries: u64,
    ) -> Result<Vec<BranchArray>> {
        items
            .iter()
            .map(|&b| {
                group_array(
                    &self.file,
                    &self.tree,
                    b,
                    &mut by_branch,
                    &mut uses,
                    entries,
                )
            })
            .collect()
    }
}

/// The branches whose baskets `items` need, each listed once (groups stand for their
/// sub-branches, recursively), and how many times each is asked for (directly and in groups).
fn stored_branches(
    file: &RootFile,
    tree: &TreeMeta,
    items: &[usize],
) -> Result<(Vec<usize>, HashMap<usize, usize>)> {
    let mut out = Vec::new();
    let mut uses: HashMap<usize, usize> = HashMap::new();
    let mut pending: Vec<usize> = items.iter().rev().copied().collect();
    while let Some(b) = pending.pop() {
        match group_children(file, tree, b)? {
            Some(children) => pending.extend(children.into_iter().rev()),
            None => {
                let n = uses.entry(b).or_insert(0);
                if *n == 0 {
                    out.push(b);
                }
                *n += 1;
            }
        }
    }
    Ok((out, uses))
}

/// The sub-branches of `branch` when it is read as a group (a split object read whole). Only a
/// branch with sub-branches can be one, so the others (most) need no interpretation here.
fn group_children(file: &RootFile, tree: &TreeMeta, branch: usize) -> Result<Option<Vec<usize>>> {
    if tree.branches[branch].children.is_empty() {
        return Ok(None);
    }
    Ok(match interpretations(file, tree, &[branch])?.remove(0) {
        Interpretation::Group { children } => Some(children),
        _ => None,
    })
}

/// The array of `branch`: its own, or for a group a record of its sub-branches' arrays named
/// by their branch names (as uproot's AsGroup).
fn group_array(
    file: &RootFile,
    tree: &TreeMeta,
    branch: usize,
    arrays: &mut HashMap<usize, BranchArray>,
    uses: &mut HashMap<usize, usize>,
    entries: u64,
) -> Result<BranchArray> {
    let Some(children) = group_children(file, tree, branch)? else {
        // The last use takes the array; a branch asked for more than once (directly and in a
        // group) is cloned for the uses before.
        let missing = || Error::format(tree.branch_path(branch), "an array assembled for it");
        let left = uses.get_mut(&branch).ok_or_else(missing)?;
        *left = left.saturating_sub(1);
        return if *left == 0 {
            arrays.remove(&branch).ok_or_else(missing)
        } else {
            arrays.get(&branch).cloned().ok_or_else(missing)
        };
    };
    let mut names = Vec::new();
    let mut contents = Vec::new();
    for &c in &children {
        names.push(tree.branches[c].name.clone());
        contents.push(group_array(file, tree, c, arrays, uses, entries)?.array);
    }
    Ok(BranchArray {
        branch: tree.branch_path(branch),
        interpretation: Interpretation::Group { children },
        entries,
        array: Array::record(names, contents, entries as usize),
    })
}

/// Decode one planned basket from its stored bytes (none for baskets in the metadata).
fn decode_planned(
    file: &RootFile,
    tree: &TreeMeta,
    p: &Planned,
    raw: Option<&[u8]>,
) -> Result<Basket> {
    let meta = &tree.branches[p.branch];
    match (&p.source, raw) {
        (BasketSource::Disk(loc), Some(raw)) => {
            let origin = format!(
                "basket at file offset {} of branch '{}'",
                loc.seek,
                tree.branch_path(p.branch)
            );
            let basket = decode_basket(raw, &origin).map_err(|e| e.in_file(file.name()))?;
            let expected = loc.entry_stop - loc.entry_start;
            if basket.entries as u64 != expected {
                return Err(Error::format(
                    origin,
                    format!(
                        "{expected} entries as the branch says, found {}",
                        basket.entries
                    ),
                )
                .in_file(file.name()));
            }
            Ok(basket)
        }
        (BasketSource::Embedded(i), _) => {
            let e = &meta.embedded[*i];
            Ok(Basket {
                entries: e.entries,
                content: e.content.clone(),
                offsets: e.offsets.clone(),
            })
        }
        _ => unreachable!("every disk basket was fetched"),
    }
}
