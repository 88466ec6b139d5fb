//! Everything written read back by the parsers and the assembly readers use: fields of every
//! type cut into columns over several clusters, pages packed, compressed and checksummed,
//! envelopes written, then parsed and assembled into arrays equal to those written.

use super::super::assemble::{assemble, Columns, Decoded};
use super::super::descriptor::Descriptor;
use super::super::envelope::{EnvelopeLink, Locator};
use super::super::fields::{item, Slot};
use super::super::footer::{ClusterGroup, Footer};
use super::super::header::Header;
use super::super::page::{envelope_bytes, packed_page};
use super::super::page_list::{ClusterSummary, ColumnPages, PageList};
use super::super::{anchor::Anchor, schema::Schema};
use super::column::pack;
use super::envelopes::{footer, header, page_list};
use super::model::{FieldType, Model};
use super::page::seal;
use super::shred::{shred, ColumnData};
use crate::error::Result;
use crate::format::array::{AlignedBytes, Array, DType};
use crate::format::writing::compression::Compression;
use std::sync::Arc;

/// An RNTuple in memory: its pages in `file`, its metadata parsed back.
struct Written {
    file: Vec<u8>,
    desc: Descriptor,
    list: PageList,
}

/// Write `arrays` (one per field of `model`, all of one length) in clusters of `cluster`
/// entries and pages of at most `page` elements.
fn write(model: &Model, arrays: &[Array], cluster: usize, page: usize, code: i32) -> Written {
    let settings = Compression::from_setting(code).unwrap();
    let compress = |data: &[u8]| settings.compress(data).unwrap_or_else(|| data.to_vec());
    let codings = model.codings();
    let entries = arrays.first().map_or(0, Array::len);
    let mut file = vec![0u8; 100];
    let mut list = PageList {
        clusters: vec![],
        columns: vec![],
    };
    let mut first_element = vec![0u64; codings.len()];
    for start in (0..entries).step_by(cluster.max(1)) {
        let stop = (start + cluster).min(entries);
        let mut columns = vec![ColumnData::default(); codings.len()];
        for ((range, (_, ty)), array) in model.columns.iter().zip(&model.fields).zip(arrays) {
            shred(ty, array, start, stop, &mut columns[range.clone()]).unwrap();
        }
        let mut cluster_pages = Vec::new();
        for (c, data) in columns.iter().enumerate() {
            let size = codings[c].kind.element().unwrap().size();
            let mut pages = Vec::new();
            for chunk in data.bytes.chunks(page * size) {
                let n = chunk.len() / size;
                let mut packed = Vec::new();
                pack(&codings[c], chunk, n, &mut packed);
                let mut sealed = seal(&packed, n as u32, settings, true);
                sealed.info.locator.offset = file.len() as u64;
                file.extend_from_slice(&sealed.bytes);
                pages.push(sealed.info);
            }
            cluster_pages.push(ColumnPages::Stored {
                pages,
                first_element: first_element[c],
                compression: settings.setting() as u32,
            });
            first_element[c] += data.elements;
        }
        list.clusters.push(ClusterSummary {
            first_entry: start as u64,
            entries: (stop - start) as u64,
        });
        list.columns.push(cluster_pages);
    }
    let (head, checksum) = header("t", "", "test", &model.schema);
    let pl = page_list(checksum, &list);
    let stored = compress(&pl);
    let link = EnvelopeLink {
        length: pl.len() as u64,
        locator: Locator {
            offset: file.len() as u64,
            size: stored.len() as u64,
        },
    };
    let groups = if list.clusters.is_empty() {
        vec![]
    } else {
        vec![ClusterGroup {
            min_entry: 0,
            entry_span: entries as u64,
            clusters: list.clusters.len() as u64,
            page_list: link,
        }]
    };
    let foot = footer(
        checksum,
        &Footer {
            extension: Schema::default(),
            groups,
        },
    );
    // Read back the way a reader does: envelopes as stored, decompressed, parsed.
    let head = envelope_bytes(&compress(&head), head.len() as u64, "h").unwrap();
    let header = Header::parse(&head, "h").unwrap();
    let footer = Footer::parse(&foot, header.checksum, "f").unwrap();
    let pl = envelope_bytes(&stored, pl.len() as u64, "pl").unwrap();
    let list = PageList::parse(&pl, header.checksum, "pl").unwrap();
    file.extend_from_slice(&stored);
    let desc = Descriptor::new(&Anchor::default(), header, footer, "t").unwrap();
    Written { file, desc, list }
}

impl Columns for Written {
    fn get(&self, slot: &Slot, k: usize) -> Result<Arc<Decoded>> {
        let column = slot.candidates[0];
        let record = &self.desc.schema.columns[column];
        let coding = super::super::column::Coding {
            kind: record.kind,
            bits: record.bits,
            range: record.range,
        };
        let ColumnPages::Stored { pages, .. } = &self.list.columns[k][column] else {
            panic!("stored")
        };
        let size = record.kind.element().unwrap().size();
        let elements: u64 = pages.iter().map(|p| p.elements as u64).sum();
        let mut data = AlignedBytes::zeroed(elements as usize * size);
        let mut at = 0;
        for p in pages {
            let from = p.locator.offset as usize;
            let stored = &self.file[from..from + super::super::page::stored_len(p) as usize];
            let packed = packed_page(&coding, p, stored, "page")?;
            let n = p.elements as usize;
            coding.decode(&packed, n, &mut data.as_bytes_mut()[at..at + n * size]);
            at += n * size;
        }
        Ok(Arc::new(Decoded {
            kind: record.kind,
            elements,
            data,
            ends: None,
        }))
    }
}

/// Each top-level field read back whole.
fn read(w: &Written) -> Vec<Array> {
    let counts: Vec<u64> = w.list.clusters.iter().map(|c| c.entries).collect();
    w.desc
        .top_level()
        .iter()
        .map(|&f| assemble(&item(&w.desc, f).unwrap(), &counts, w, "t").unwrap())
        .collect()
}

fn numbers<T: Copy>(dtype: DType, values: &[T], to_ne: fn(T) -> Vec<u8>) -> Array {
    let bytes: Vec<u8> = values.iter().flat_map(|&v| to_ne(v)).collect();
    Array::numpy(dtype, vec![], AlignedBytes::from_slice(&bytes))
}

fn floats(values: &[f32]) -> Array {
    numbers(DType::F32, values, |v| v.to_ne_bytes().to_vec())
}

fn strings(values: &[&str]) -> Array {
    let mut offsets = vec![0i64];
    for s in values {
        offsets.push(offsets.last().unwrap() + s.len() as i64);
    }
    Array::strings(
        offsets,
        AlignedBytes::from_slice(values.concat().as_bytes()),
    )
}

fn list(sizes: &[i64], content: Array) -> Array {
    let mut offsets = vec![0i64];
    for n in sizes {
        offsets.push(offsets.last().unwrap() + n);
    }
    Array::list(offsets, content)
}

/// Seven entries of every type the writer takes, empty lists and strings, NaN and extremes.
pub(crate) fn sample() -> (Vec<(String, FieldType)>, Vec<Array>) {
    use FieldType::{Number, Record, Vector};
    let n = 7;
    let mut fields = Vec::new();
    let mut arrays = Vec::new();
    let ints = [0i64, -1, 1, i64::MIN, i64::MAX, 300, -70000];
    for d in [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
    ] {
        let bytes: Vec<u8> = ints
            .iter()
            .flat_map(|&v| match d {
                DType::Bool => vec![(v & 1) as u8],
                _ => v.to_ne_bytes()[..d.size()].to_vec(),
            })
            .collect();
        fields.push((format!("n_{}", d.name()), Number(d)));
        arrays.push(Array::numpy(d, vec![], AlignedBytes::from_slice(&bytes)));
    }
    let specials = [
        f64::NAN,
        f64::INFINITY,
        -0.0,
        f64::MIN,
        f64::MAX,
        1e-310,
        2.5,
    ];
    fields.push(("f64".into(), Number(DType::F64)));
    arrays.push(numbers(DType::F64, &specials, |v| v.to_ne_bytes().to_vec()));
    fields.push(("f32".into(), Number(DType::F32)));
    arrays.push(floats(&[
        f32::NAN,
        f32::NEG_INFINITY,
        0.0,
        f32::MAX,
        1.0,
        -1.0,
        3.5,
    ]));
    fields.push(("s".into(), FieldType::String));
    arrays.push(strings(&["", "a", "héllo", "", "x y", "zzzzzzzz", ""]));
    fields.push(("jet_pt".into(), Vector(Box::new(Number(DType::F32)))));
    arrays.push(list(
        &[0, 3, 1, 0, 0, 2, 1],
        floats(&[1., 2., 3., 4., 5., 6., 7.]),
    ));
    fields.push((
        "nested".into(),
        Vector(Box::new(Vector(Box::new(Number(DType::F32))))),
    ));
    let inner = list(&[2, 0, 1, 3, 1], floats(&[1., 2., 3., 4., 5., 6., 7.]));
    arrays.push(list(&[1, 0, 2, 0, 1, 1, 0], inner));
    fields.push(("names".into(), Vector(Box::new(FieldType::String))));
    arrays.push(list(
        &[2, 0, 0, 1, 0, 0, 1],
        strings(&["ab", "", "cde", "f"]),
    ));
    fields.push((
        "p3".into(),
        FieldType::Array(Box::new(Number(DType::F32)), 3),
    ));
    let values: Vec<f32> = (0..3 * n).map(|i| i as f32 / 2.0).collect();
    arrays.push(Array::regular(3, n, floats(&values)));
    let muon = Record(vec![
        ("pt".into(), Number(DType::F32)),
        ("tags".into(), Vector(Box::new(FieldType::String))),
    ]);
    fields.push(("muons".into(), Vector(Box::new(muon.clone()))));
    let tags = list(&[1, 0, 2, 0], strings(&["t", "u", "v"]));
    let muons = Array::record(
        vec!["pt".into(), "tags".into()],
        vec![floats(&[10., 20., 30., 40.]), tags],
        4,
    );
    arrays.push(list(&[0, 2, 0, 1, 0, 0, 1], muons));
    fields.push((
        "event".into(),
        Record(vec![
            ("run".into(), Number(DType::U32)),
            ("lead".into(), muon),
        ]),
    ));
    let lead = Array::record(
        vec!["pt".into(), "tags".into()],
        vec![
            floats(&[1., 2., 3., 4., 5., 6., 7.]),
            list(&[0, 1, 0, 0, 0, 0, 0], strings(&["w"])),
        ],
        n,
    );
    let runs = numbers(DType::U32, &[1u32, 1, 1, 2, 2, 3, u32::MAX], |v| {
        v.to_ne_bytes().to_vec()
    });
    arrays.push(Array::record(
        vec!["run".into(), "lead".into()],
        vec![runs, lead],
        n,
    ));
    (fields, arrays)
}

/// NaN is not equal to itself: compare arrays by their debug text, which shows NaN bits alike.
fn same(a: &[Array], b: &[Array]) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

#[test]
fn every_type_reads_back_over_clusters_pages_and_compressions() {
    let (fields, arrays) = sample();
    for (code, split) in [
        (505, true),
        (0, false),
        (101, true),
        (207, true),
        (404, true),
    ] {
        let model = Model::new(fields.clone(), split).unwrap();
        for (cluster, page) in [(7, 1000), (3, 2), (1, 1), (100, 3)] {
            let w = write(&model, &arrays, cluster, page, code);
            assert_eq!(w.desc.entries(), 7);
            assert!(same(&read(&w), &arrays), "{code} {cluster} {page}");
        }
    }
}

#[test]
fn zero_entries_write_a_readable_empty_ntuple() {
    let (fields, arrays) = sample();
    let model = Model::new(fields, true).unwrap();
    let empty: Vec<Array> = arrays.into_iter().map(|a| a.slice(0, 0)).collect();
    let w = write(&model, &empty, 10, 10, 505);
    assert_eq!(w.desc.entries(), 0);
    assert_eq!(w.desc.top_level().len(), model.fields.len());
}

#[test]
fn numpy_inner_shapes_are_fixed_size_arrays() {
    let ty = FieldType::Array(
        Box::new(FieldType::Array(Box::new(FieldType::Number(DType::I16)), 2)),
        3,
    );
    let values: Vec<u8> = (0..4 * 6i16).flat_map(|v| (v - 10).to_ne_bytes()).collect();
    let flat = Array::numpy(DType::I16, vec![3, 2], AlignedBytes::from_slice(&values));
    let nested = Array::regular(
        3,
        4,
        Array::regular(
            2,
            12,
            Array::numpy(DType::I16, vec![], AlignedBytes::from_slice(&values)),
        ),
    );
    let model = Model::new(vec![("m".into(), ty)], true).unwrap();
    let w = write(&model, &[flat], 3, 5, 505);
    assert!(same(&read(&w), &[nested]));
}

#[test]
fn arrays_that_do_not_fit_their_type_are_errors_naming_why() {
    let mut columns = vec![ColumnData::default(); 3];
    let ty = FieldType::Vector(Box::new(FieldType::Number(DType::F64)));
    let e = shred(&ty, &floats(&[1.0]), 0, 1, &mut columns).unwrap_err();
    assert!(e.contains("variable-length lists, found float32"), "{e}");
    let e = shred(&ty, &list(&[1], floats(&[1.0])), 0, 1, &mut columns).unwrap_err();
    assert!(e.contains("float64 values, found float32"), "{e}");
    let rec = FieldType::Record(vec![("x".into(), FieldType::Number(DType::F32))]);
    let r = Array::record(vec!["y".into()], vec![floats(&[1.0])], 1);
    let e = shred(&rec, &r, 0, 1, &mut columns).unwrap_err();
    assert!(e.contains("member 'x'"), "{e}");
    let bad = Array::list(vec![0, 5], floats(&[1.0]));
    assert!(shred(&ty, &bad, 0, 1, &mut columns).is_err());
    let array_of_records = FieldType::Array(Box::new(rec), 2);
    let e = Model::new(vec![("a".into(), array_of_records)], true).unwrap_err();
    assert!(e.contains("field 'a'") && e.contains("untyped"), "{e}");
}
