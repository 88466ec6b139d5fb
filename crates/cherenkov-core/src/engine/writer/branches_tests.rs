use super::*;

fn column(name: &str, kind: ColumnType) -> Column {
    Column {
        name: name.into(),
        title: String::new(),
        kind,
    }
}

fn number(d: DType) -> ColumnType {
    ColumnType::Number(d)
}

fn list(items: ColumnType, counter: Option<&str>) -> ColumnType {
    ColumnType::List {
        items: Box::new(items),
        counter: counter.map(str::to_string),
    }
}

fn names(branches: &[Branch]) -> Vec<(&str, &str)> {
    branches
        .iter()
        .map(|b| (b.name.as_str(), b.title.as_str()))
        .collect()
}

#[test]
fn records_split_into_prefixed_branches_with_one_counter_first() {
    let muon = ColumnType::Record(vec![
        ("pt".into(), number(DType::F32)),
        ("charge".into(), number(DType::I32)),
    ]);
    let columns = [
        column("run", number(DType::U32)),
        column("Muon", list(muon, Some("nMuon"))),
        column(
            "MET",
            ColumnType::Record(vec![("pt".into(), number(DType::F64))]),
        ),
    ];
    let b = plan("Events", &columns).unwrap();
    assert_eq!(
        names(&b),
        [
            ("run", "run/i"),
            ("nMuon", "nMuon/I"),
            ("Muon_pt", "Muon_pt[nMuon]/F"),
            ("Muon_charge", "Muon_charge[nMuon]/I"),
            ("MET_pt", "MET_pt/D"),
        ]
    );
    assert_eq!(b[1].source, Source::Lengths(1));
    assert!(b[1].is_counter && b[2].counter == Some(1) && b[3].counter == Some(1));
}

#[test]
fn a_counter_given_as_a_column_moves_before_its_lists() {
    let columns = [
        column("Jet_pt", list(number(DType::F32), Some("nJet"))),
        column("nJet", number(DType::U32)),
        column("Jet_eta", list(number(DType::F32), Some("nJet"))),
    ];
    let b = plan("Events", &columns).unwrap();
    assert_eq!(
        names(&b),
        [
            ("nJet", "nJet/i"),
            ("Jet_pt", "Jet_pt[nJet]/F"),
            ("Jet_eta", "Jet_eta[nJet]/F")
        ]
    );
    assert_eq!(b[0].source, Source::Array(1));
}

#[test]
fn collections_and_strings_are_branch_elements() {
    let columns = [
        column("v", list(number(DType::F64), None)),
        column("vv", list(list(number(DType::I16), None), None)),
        column("s", ColumnType::String),
        column("vs", list(ColumnType::String, None)),
        column(
            "a",
            ColumnType::Fixed {
                items: Box::new(ColumnType::Fixed {
                    items: Box::new(number(DType::F32)),
                    size: 3,
                }),
                size: 2,
            },
        ),
    ];
    let b = plan("t", &columns).unwrap();
    let storages: Vec<&Storage> = b.iter().map(|b| &b.storage).collect();
    assert_eq!(
        storages,
        [
            &Storage::Vector(DType::F64),
            &Storage::VectorVector(DType::I16),
            &Storage::String,
            &Storage::VectorString,
            &Storage::Numbers {
                dtype: DType::F32,
                dims: vec![2, 3]
            },
        ]
    );
    assert_eq!(b[4].title, "a[2][3]/F");
}

#[test]
fn types_a_ttree_cannot_hold_are_refused_naming_the_branch() {
    for (kind, why) in [
        (number(DType::F16), "no leaf type for float16"),
        (
            list(list(list(number(DType::F32), None), None), None),
            "at most lists of lists",
        ),
        (
            list(
                ColumnType::Fixed {
                    items: Box::new(number(DType::F32)),
                    size: 3,
                },
                None,
            ),
            "give it a counter",
        ),
    ] {
        let e = plan("t", &[column("x", kind)]).unwrap_err().to_string();
        assert!(e.contains("branch 't/x'") && e.contains(why), "{e}");
    }
    let columns = [
        column("n", number(DType::F32)),
        column("x", list(number(DType::F32), Some("n"))),
    ];
    let e = plan("t", &columns).unwrap_err().to_string();
    assert!(e.contains("counter 'n'") && e.contains("float32"), "{e}");
    let columns = [
        column("a_b", number(DType::F32)),
        column(
            "a",
            ColumnType::Record(vec![("b".into(), number(DType::F32))]),
        ),
    ];
    let e = plan("t", &columns).unwrap_err().to_string();
    assert!(e.contains("two columns make a branch of this name"), "{e}");
}
