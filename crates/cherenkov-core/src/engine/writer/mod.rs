//! The writer: what goes where in a file being written. `file.rs` places records (keys,
//! directories, streamer infos, free segments); table writers fill it with entries through one
//! small trait, `TableWriter`, so TTrees and RNTuples are written alike by the bindings: columns
//! described by `ColumnType` (awkward's vocabulary, no format's), extended with arrays of
//! `format::array`, finished into the file.

mod branches;
pub mod copy;
pub mod file;
mod fill;
pub mod layout;
pub mod ntuple;
pub mod ntuple_copy;
#[cfg(test)]
mod ntuple_tests;
pub mod raw;
pub mod tree;

use crate::error::{Error, Result};
use crate::format::array::{Array, DType, Layout};
use crate::format::writing::compression::Compression;
use file::FileWriter;
use rayon::prelude::*;
use std::fmt;
use std::sync::{Mutex, OnceLock, PoisonError};

/// What a column holds, whatever format stores it.
#[derive(Clone, Debug, PartialEq)]
pub enum ColumnType {
    /// One number per entry (bool included).
    Number(DType),
    /// `size` items per entry (fixed-size arrays; nested for more dimensions).
    Fixed { items: Box<ColumnType>, size: usize },
    /// Any number of items per entry. `counter` names the column holding the lengths, as
    /// NanoAOD's `nMuon` holds those of `Muon_pt` (lists naming the same counter share their
    /// lengths; a TTree writer makes the counter if no column has its name, and checks it if
    /// one does); `None` makes the list a collection of its own (a `std::vector`). Formats
    /// without counted lists (RNTuple) write every list as a collection, a counter column given
    /// as any other column.
    List {
        items: Box<ColumnType>,
        counter: Option<String>,
    },
    /// Text per entry (a `std::string`).
    String,
    /// Named fields side by side.
    Record(Vec<(String, ColumnType)>),
}

/// A column of a table: its name, its title ("" for the format's default) and its type.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub name: String,
    pub title: String,
    pub kind: ColumnType,
}

/// How a table is laid out, for every table writer.
#[derive(Clone, Debug, PartialEq)]
pub struct TableOptions {
    pub title: String,
    /// How the data is compressed (by default the file's setting).
    pub compression: Compression,
    /// Bytes of uncompressed data after which a cluster closes; `None` for the format's
    /// default (ROOT's).
    pub cluster_bytes: Option<u64>,
    /// The most bytes the writer holds: the cluster being filled and the one compressing.
    pub memory_budget: u64,
}

/// A table being written (a TTree, an RNTuple): extended with entries, then finished into the
/// file that holds it. Writers keep what they buffer within their memory budget, writing full
/// clusters to the file as they go.
pub trait TableWriter: Send {
    /// The table's name in its directory.
    fn name(&self) -> &str;

    /// The columns `extend` takes, in order.
    fn columns(&self) -> &[Column];

    /// Entries written so far.
    fn entries(&self) -> u64;

    /// Append entries: one array per column, in `columns()` order, all of one length (check them
    /// with `check_arrays`).
    fn extend(&mut self, file: &mut FileWriter, arrays: Vec<Array>) -> Result<()>;

    /// The TTree writer behind this table, if it is one (for copy mode, `copy::copy_trees`).
    fn as_tree(&mut self) -> Option<&mut tree::TreeWriter> {
        None
    }

    /// The RNTuple writer behind this table, if it is one (for copy mode,
    /// `ntuple_copy::copy_ntuples`).
    fn as_ntuple(&mut self) -> Option<&mut ntuple::NtupleWriter> {
        None
    }

    /// Write what is buffered and the table's metadata: the table is then complete in `file`.
    fn finish(self: Box<Self>, file: &mut FileWriter) -> Result<()>;
}

/// Run `job` (a closed cluster's compression) on the compressing threads, one per core: a pool of
/// their own, because rayon's workers take a new job only once theirs are done, so filling the
/// next cluster (and decoding, in a read-select-write loop) on the global pool would wait for a
/// whole cluster's compression instead of sharing the cores with it. Where no thread can be
/// made for that pool, the global pool compresses.
pub(crate) fn spawn_compression(job: impl FnOnce() + Send + 'static) {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    let pool = POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("cherenkov-zip-{i}"))
            .build()
            .ok()
    });
    match pool {
        Some(pool) => pool.spawn(job),
        None => rayon::spawn(job),
    }
}

/// `work` over `items` on every thread of the current pool, the largest items first (greedy
/// longest-first scheduling), results in the items' order. A cluster's compression then ends with
/// its smallest baskets on both cores, where rayon's split ranges could leave one core alone
/// with a large basket that came last (a NanoAOD cluster's largest basket is a seventh of it).
pub(crate) fn map_largest_first<T: Send, R: Send>(
    items: Vec<T>,
    size: impl Fn(&T) -> usize,
    work: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    let mut order: Vec<(usize, T)> = items.into_iter().enumerate().collect();
    order.sort_by_key(|(_, item)| std::cmp::Reverse(size(item)));
    let queue = Mutex::new(order.into_iter());
    let next = || queue.lock().unwrap_or_else(PoisonError::into_inner).next();
    let mut done: Vec<(usize, R)> = (0..rayon::current_num_threads())
        .into_par_iter()
        .flat_map_iter(|_| std::iter::from_fn(|| next().map(|(i, item)| (i, work(item)))))
        .collect();
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

impl fmt::Display for ColumnType {
    /// awkward's spelling of the type ("var * float32", "3 * int32", "{pt: float32}").
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnType::Number(d) => f.write_str(d.name()),
            ColumnType::Fixed { items, size } => write!(f, "{size} * {items}"),
            ColumnType::List { items, .. } => write!(f, "var * {items}"),
            ColumnType::String => f.write_str("string"),
            ColumnType::Record(fields) => {
                f.write_str("{")?;
                for (i, (name, t)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{name}: {t}")?;
                }
                f.write_str("}")
            }
        }
    }
}

/// Check that `arrays` fit `columns` of table `table`: one per column, each of its column's type
/// with offsets inside their content, all of one length (returned). Errors name the column.
pub fn check_arrays(table: &str, columns: &[Column], arrays: &[Array]) -> Result<usize> {
    if arrays.len() != columns.len() {
        let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
        return Err(Error::InvalidArgument(format!(
            "'{table}': {} arrays given for its {} columns ({})",
            arrays.len(),
            columns.len(),
            names.join(", ")
        )));
    }
    let mut entries = None;
    for (column, array) in columns.iter().zip(arrays) {
        if let Err(why) = fits(&column.kind, array) {
            return Err(Error::InvalidArgument(format!(
                "'{table}' column '{}' of type {}: {why}",
                column.name, column.kind
            )));
        }
        let (n, first) = entries.get_or_insert((array.len(), &column.name));
        if *n != array.len() {
            return Err(Error::InvalidArgument(format!(
                "'{table}': column '{}' has {} entries, but '{first}' has {n}",
                column.name,
                array.len()
            )));
        }
    }
    Ok(entries.map_or(0, |(n, _)| n))
}

/// Why `array` is not of type `kind` (or holds offsets past its content).
fn fits(kind: &ColumnType, array: &Array) -> std::result::Result<(), String> {
    let found = || format!("found an array of {}", describe(array));
    match (kind, &array.layout) {
        (
            ColumnType::Number(want),
            Layout::Numpy {
                dtype,
                inner_shape,
                data,
            },
        ) => {
            if dtype != want || !inner_shape.is_empty() {
                return Err(found());
            }
            if data.len % dtype.size() != 0 {
                return Err(format!("{} bytes of {}", data.len, dtype.name()));
            }
            Ok(())
        }
        (
            ColumnType::Fixed { .. },
            Layout::Numpy {
                dtype,
                inner_shape,
                data,
            },
        ) => {
            // numpy's extra dimensions, as awkward hands them over.
            if !fixed_fits(kind, *dtype, inner_shape) {
                return Err(found());
            }
            let item = dtype.size() * inner_shape.iter().product::<usize>();
            if item == 0 || data.len % item != 0 {
                return Err(format!("{} bytes of {}", data.len, describe(array)));
            }
            Ok(())
        }
        (
            ColumnType::Fixed { items, size },
            Layout::Regular {
                size: s,
                length,
                content,
            },
        ) => {
            if s != size {
                return Err(found());
            }
            if size.checked_mul(*length).is_none_or(|n| n > content.len()) {
                return Err(format!(
                    "{length} entries of {size} items but {} items",
                    content.len()
                ));
            }
            fits(items, content)
        }
        (
            ColumnType::String,
            Layout::ListOffset {
                offsets, content, ..
            },
        ) if array.parameter("__array__") == Some("string") => {
            check_offsets(offsets, content)?;
            match &content.layout {
                Layout::Numpy {
                    dtype: DType::U8,
                    inner_shape,
                    ..
                } if inner_shape.is_empty() => Ok(()),
                _ => Err(found()),
            }
        }
        (
            ColumnType::List { items, .. },
            Layout::ListOffset {
                offsets, content, ..
            },
        ) if array.parameter("__array__") != Some("string") => {
            check_offsets(offsets, content)?;
            fits(items, content)
        }
        (
            ColumnType::Record(fields),
            Layout::Record {
                names: Some(names),
                contents,
                length,
            },
        ) => {
            let want: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
            if want != names.iter().map(String::as_str).collect::<Vec<_>>() {
                return Err(found());
            }
            for ((name, t), c) in fields.iter().zip(contents) {
                if c.len() < *length {
                    return Err(format!(
                        "field '{name}' has {} entries of {length}",
                        c.len()
                    ));
                }
                fits(t, c).map_err(|why| format!("field '{name}': {why}"))?;
            }
            Ok(())
        }
        _ => Err(found()),
    }
}

/// Whether numbers of `dtype` with these extra dimensions are of fixed-size type `kind`.
fn fixed_fits(kind: &ColumnType, dtype: DType, shape: &[usize]) -> bool {
    match (kind, shape.split_first()) {
        (ColumnType::Number(d), None) => *d == dtype,
        (ColumnType::Fixed { items, size }, Some((first, rest))) => {
            first == size && fixed_fits(items, dtype, rest)
        }
        _ => false,
    }
}

fn check_offsets(offsets: &[i64], content: &Array) -> std::result::Result<(), String> {
    let ordered =
        offsets.first().is_some_and(|&o| o >= 0) && offsets.windows(2).all(|w| w[0] <= w[1]);
    if !ordered || *offsets.last().unwrap_or(&0) as usize > content.len() {
        return Err(format!(
            "offsets that do not increase from 0 within the {} items of the content",
            content.len()
        ));
    }
    Ok(())
}

/// A short description of an array's type, for errors.
fn describe(array: &Array) -> String {
    match &array.layout {
        Layout::Numpy {
            dtype, inner_shape, ..
        } => {
            let dims: String = inner_shape.iter().map(|d| format!("{d} * ")).collect();
            format!("{dims}{}", dtype.name())
        }
        Layout::ListOffset { content, .. } if array.parameter("__array__") == Some("string") => {
            let _ = content;
            "string".into()
        }
        Layout::ListOffset { content, .. } => format!("var * {}", describe(content)),
        Layout::Regular { size, content, .. } => format!("{size} * {}", describe(content)),
        Layout::Record {
            names, contents, ..
        } => {
            let fields: Vec<String> = match names {
                Some(names) => names
                    .iter()
                    .zip(contents)
                    .map(|(n, c)| format!("{n}: {}", describe(c)))
                    .collect(),
                None => contents.iter().map(describe).collect(),
            };
            format!("{{{}}}", fields.join(", "))
        }
        Layout::IndexedOption { content, .. } | Layout::Unmasked { content } => {
            format!("?{}", describe(content))
        }
        Layout::Union { .. } => "union".into(),
        Layout::Empty => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::array::AlignedBytes;

    fn floats(v: &[f32]) -> Array {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
        Array::numpy(DType::F32, vec![], AlignedBytes::from_slice(&bytes))
    }

    fn column(name: &str, kind: ColumnType) -> Column {
        Column {
            name: name.into(),
            title: String::new(),
            kind,
        }
    }

    #[test]
    fn arrays_of_their_columns_types_pass_and_give_the_entries() {
        let jagged = ColumnType::List {
            items: Box::new(ColumnType::Number(DType::F32)),
            counter: Some("nX".into()),
        };
        let columns = [
            column("x", ColumnType::Number(DType::F32)),
            column("X", jagged),
        ];
        let arrays = [
            floats(&[1.0, 2.0]),
            Array::list(vec![0, 1, 3], floats(&[1.0, 2.0, 3.0])),
        ];
        assert_eq!(check_arrays("t", &columns, &arrays).unwrap(), 2);
        assert_eq!(columns[1].kind.to_string(), "var * float32");
    }

    #[test]
    fn a_wrong_type_or_length_names_the_column() {
        let columns = [
            column("x", ColumnType::Number(DType::F32)),
            column("y", ColumnType::Number(DType::F64)),
        ];
        let e = check_arrays("t", &columns, &[floats(&[1.0]), floats(&[1.0])]).unwrap_err();
        assert!(
            e.to_string()
                .contains("column 'y' of type float64: found an array of float32"),
            "{e}"
        );
        let columns = [
            column("x", ColumnType::Number(DType::F32)),
            column("y", ColumnType::Number(DType::F32)),
        ];
        let e = check_arrays("t", &columns, &[floats(&[1.0]), floats(&[1.0, 2.0])]).unwrap_err();
        assert!(
            e.to_string().contains("'y' has 2 entries, but 'x' has 1"),
            "{e}"
        );
    }

    #[test]
    fn offsets_past_the_content_are_refused() {
        let kind = ColumnType::List {
            items: Box::new(ColumnType::Number(DType::F32)),
            counter: None,
        };
        let bad = Array::list(vec![0, 5], floats(&[1.0]));
        let e = check_arrays("t", &[column("v", kind)], &[bad]).unwrap_err();
        assert!(e.to_string().contains("offsets"), "{e}");
    }

    #[test]
    fn largest_first_keeps_the_items_order_in_its_results() {
        let items: Vec<usize> = (0..1000).map(|i| (i * 7919) % 1000).collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let doubled = pool.install(|| map_largest_first(items.clone(), |&x| x, |x| 2 * x));
        assert_eq!(doubled, items.iter().map(|x| 2 * x).collect::<Vec<_>>());
        assert!(map_largest_first(Vec::<u8>::new(), |_| 0, |x| x).is_empty());
    }
}
