//! Tests of the interpretation of branches (interpretation.rs).

use super::*;
use crate::format::streamers::StreamerElement;

fn one_leaf_tree(class: &str, title: &str) -> TreeMeta {
    TreeMeta {
        branches: vec![BranchMeta {
            leaves: vec![0],
            ..Default::default()
        }],
        leaves: vec![LeafMeta {
            class: class.into(),
            name: "x".into(),
            title: title.into(),
            branch: Some(0),
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn dimensions_come_from_the_leaf_title() {
    let tree = one_leaf_tree("TLeafD", "x[3][4]");
    assert_eq!(
        interpret(&tree, 0, &[], MemberDims::Uproot),
        Ok(Interpretation::Fixed {
            dtype: DType::F64,
            inner_shape: vec![3, 4],
            packing: None,
        })
    );
}

#[test]
fn packed_leaf_arrays_take_uproot_s_dimensions_from_the_leaf_title() {
    let read_as = |tree: &TreeMeta, dims| match interpret(tree, 0, &[], dims) {
        Ok(Interpretation::Fixed {
            inner_shape,
            packing,
            ..
        }) => (inner_shape, packing),
        other => panic!("{other:?}"),
    };
    let shape = |tree: &TreeMeta, dims| read_as(tree, dims).0;
    // ROOT titles the leaf like its branch: the dimensions come first, the range after the
    // slash (not a 4-byte float: the third bracket holds it).
    let mut tree = one_leaf_tree("TLeafD32", "x[2][3]/d[0,1,10]");
    tree.branches[0].title = "x[2][3]/d[0,1,10]".into();
    tree.leaves[0].len = 6;
    assert_eq!(shape(&tree, MemberDims::Uproot), [2, 3]);
    assert_eq!(shape(&tree, MemberDims::Declared), [2, 3]);
    assert_eq!(
        read_as(&tree, MemberDims::Uproot).1,
        Some(Packing::Scaled {
            factor: 1024.0,
            min: 0.0
        })
    );
    // go-hep titles it with the type and range only: uproot reads fLen items.
    let mut tree = one_leaf_tree("TLeafF16", "f[0,0,16]");
    tree.branches[0].title = "x[2][3][4][5]/f[0,0,16]".into();
    tree.leaves[0].len = 120;
    assert_eq!(shape(&tree, MemberDims::Uproot), [120]);
    assert_eq!(shape(&tree, MemberDims::Declared), [2, 3, 4, 5]);
}

#[test]
fn branches_shorter_or_longer_than_their_tree_are_refused() {
    let mut tree = one_leaf_tree("TLeafD", "x");
    tree.entries = 98;
    let refused = interpret(&tree, 0, &[], MemberDims::Uproot).unwrap_err();
    assert!(refused.reason.contains("holds 0 entries"), "{refused:?}");
}

#[test]
fn split_objects_are_groups_of_their_members_unless_one_is_refused() {
    let mut tree = one_leaf_tree("TLeafD", "x");
    tree.branches[0].name = "x".into();
    tree.branches.push(BranchMeta {
        children: vec![0],
        ..Default::default()
    });
    assert_eq!(
        interpret(&tree, 1, &[], MemberDims::Uproot),
        Ok(Interpretation::Group { children: vec![0] })
    );
    tree.leaves[0].class = "TLeafX".into();
    let refused = interpret(&tree, 1, &[], MemberDims::Uproot).unwrap_err();
    assert!(refused.reason.contains("member 'x'"), "{refused:?}");
}

#[test]
fn tstring_members_of_collection_objects_are_lists_of_strings() {
    let mut tree = one_leaf_tree("TLeafElement", "label");
    let infos = [StreamerInfo {
        class_name: "Hit".into(),
        class_version: 1,
        checksum: 0,
        elements: vec![StreamerElement {
            class: "TStreamerString".into(),
            name: "label".into(),
            type_code: K_TSTRING,
            type_name: "TString".into(),
            title: String::new(),
            size: 24,
            array_length: 0,
            array_dims: vec![],
            max_index: [0; 5],
            tail: Default::default(),
        }],
    }];
    for kind in [CLONES_MEMBER, STL_MEMBER] {
        tree.branches[0].element = Some(ElementMeta {
            class_name: "Hit".into(),
            class_version: 1,
            id: 0,
            kind,
            streamer_type: K_TSTRING,
            ..Default::default()
        });
        assert_eq!(
            interpret(&tree, 0, &infos, MemberDims::Uproot),
            Ok(Interpretation::Objects {
                model: Model::Members {
                    header: false,
                    items: Box::new(Model::String { header: false }),
                },
                typename: "TString[]".into(),
            })
        );
    }
}

#[test]
fn absurd_dimensions_are_refused_not_overflowed() {
    let tree = one_leaf_tree("TLeafD", "x[4294967296][4294967296]");
    let refused = interpret(&tree, 0, &[], MemberDims::Uproot).unwrap_err();
    assert!(refused.reason.contains("larger than"), "{refused:?}");
}

#[test]
fn large_conversions_swap_alike_at_every_alignment() {
    // Large enough for streamed stores; outputs starting at each multiple of the numbers' size
    // within 32 bytes, and lengths that leave a tail.
    let src: Vec<u8> = (0..(crate::format::array::STREAMED_OUTPUT_BYTES + 77) as u32)
        .map(|i| (i * 29 + i / 251) as u8)
        .collect();
    for (dtype, width) in [(DType::I16, 2), (DType::F32, 4), (DType::F64, 8)] {
        for shift in (0..32).step_by(width) {
            let len = (src.len() - shift) / width * width;
            let mut words = vec![0u64; (len + shift).div_ceil(8) + 4];
            // SAFETY: the words' memory as bytes, written as bytes only.
            let all = unsafe {
                std::slice::from_raw_parts_mut(
                    words.as_mut_ptr().cast::<std::mem::MaybeUninit<u8>>(),
                    words.len() * 8,
                )
            };
            let dst = &mut all[shift..shift + len];
            convert_big_endian_into(dtype, &src[..len], dst);
            // SAFETY: every byte was written by the conversion.
            let got: Vec<u8> = dst.iter().map(|b| unsafe { b.assume_init() }).collect();
            let want: Vec<u8> = src[..len]
                .chunks_exact(width)
                .flat_map(|c| c.iter().rev().copied())
                .collect();
            assert_eq!(got, want, "{dtype:?} at offset {shift}");
        }
    }
}
