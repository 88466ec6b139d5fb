//! A streamed TTree, and what the engine derives from it before reading (cluster boundaries,
//! branch paths, interpretations, basket boundaries). Input: the key length (2 bytes,
//! big-endian) and then the uncompressed object. Seeds: each TTree of the test files.
#![no_main]

use cherenkov_core::format::interpretation::interpret;
use cherenkov_core::format::tree::parse_tree;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((key_len, object)) = data.split_first_chunk::<2>() else {
        return;
    };
    let key_len = u16::from_be_bytes(*key_len) as usize;
    let Ok(tree) = parse_tree(object, key_len, "TTree", "fuzz", &[]) else {
        return;
    };
    let bounds = tree.cluster_boundaries();
    assert_eq!(bounds.first(), Some(&0));
    assert_eq!(bounds.last(), Some(&tree.entries));
    for (b, branch) in tree.branches.iter().enumerate() {
        let _ = tree.branch_path(b);
        let _ = branch.basket_boundaries();
        let _ = (branch.compressed_bytes(), branch.uncompressed_bytes());
        if let Ok(interp) = interpret(&tree, b, &[], Default::default()) {
            let _ = (interp.typename(), interp.fixed_entry_bytes());
        }
    }
});
