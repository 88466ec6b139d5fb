//! Reading branches over an entry range: plan the baskets (`plan.rs`), fetch them in one
//! vectored request and decompress them in parallel (`fetch.rs`), and assemble native-endian
//! arrays (`assemble.rs`).

use super::assemble::assemble_all;
use super::fetch::{fetch_and_decode, HeldBaskets};
use super::file::RootFile;
use super::output::{BranchArray, ReadStats};
use super::plan::{check_entry_range, interpretations, plan_baskets, Planned};
use crate::error::Result;
use crate::format::basket::Basket;
use crate::format::tree::TreeMeta;
use std::time::Instant;

/// Read `branches` (indices into `tree.branches`) over entries `[start, stop)`.
pub async fn read_branches(
    file: &RootFile,
    tree: &TreeMeta,
    branches: &[usize],
    start: u64,
    stop: u64,
) -> Result<(Vec<BranchArray>, ReadStats)> {
    read_branches_with(file, tree, branches, start, stop, &HeldBaskets::new()).await
}

/// As `read_branches`, taking the baskets found in `held` from there.
pub async fn read_branches_with(
    file: &RootFile,
    tree: &TreeMeta,
    branches: &[usize],
    start: u64,
    stop: u64,
    held: &HeldBaskets,
) -> Result<(Vec<BranchArray>, ReadStats)> {
    check_entry_range(tree, start, stop)?;
    let interps = interpretations(file, tree, branches)?;
    file.stats.record_read_call();
    let plan = plan_baskets(tree, branches, start, stop);
    let (decoded, mut stats) = fetch_and_decode(file, tree, &plan, held).await?;
    let t = Instant::now();
    let pairs: Vec<(&Planned, &Basket)> = plan.iter().zip(&decoded).collect();
    let arrays = assemble_all(file, tree, branches, interps, &pairs, start, stop).await?;
    stats.decode_seconds += t.elapsed().as_secs_f64();
    Ok((arrays, stats))
}
