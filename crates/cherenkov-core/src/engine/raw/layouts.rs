//! What the files of one process learned, by tree layout: the files of a dataset have trees alike
//! (same branches, same types), and an analysis reads them alike, so the second file of a run
//! starts with what the first taught (its used set fetched as soon as its tree is known), however
//! the files are opened: one `uproot.open` after another, coffea's tasks, fsspec.

use crate::engine::lazy::AccessProfile;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Layouts remembered at most; past it the registry starts over (a process reading that many
/// kinds of trees learns each again).
const MAX_LAYOUTS: usize = 4096;

fn registry() -> &'static Mutex<HashMap<u64, Arc<AccessProfile>>> {
    static PROFILES: OnceLock<Mutex<HashMap<u64, Arc<AccessProfile>>>> = OnceLock::new();
    PROFILES.get_or_init(Default::default)
}

/// The profile shared by the trees of `layout` in this process.
pub fn profile_of(layout: u64) -> Arc<AccessProfile> {
    let mut profiles = registry().lock().unwrap();
    if profiles.len() >= MAX_LAYOUTS && !profiles.contains_key(&layout) {
        profiles.clear();
    }
    profiles.entry(layout).or_default().clone()
}

/// Forget every layout's profile: the next files are read as if first (a new analysis).
pub fn forget() {
    registry().lock().unwrap().clear();
}
