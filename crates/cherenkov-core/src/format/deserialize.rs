//! Reading objects entry by entry with a `Model` into the awkward layouts uproot's `AsObjects`
//! gives: sequences as list-offset arrays (sets marked `set`), maps as lists of (key, value)
//! tuples marked `sorted_map`, strings as strings, classes as records named by `__record__`,
//! fixed arrays as regular arrays.

use super::array::{AlignedBytes, Array, DType};
use super::cursor::Cursor;
use super::interpretation::convert_big_endian;
use super::model::{Member, Model};
use super::objects::{read_tobject, read_version, IS_REFERENCED};
use crate::error::{Error, Result};

/// Version bit saying a collection was written member by member (kStreamedMemberWise).
const MEMBERWISE: i16 = 0x4000;

/// Values read so far, shaped like the model.
#[derive(Debug)]
pub enum Builder {
    Numbers {
        dtype: DType,
        bytes: Vec<u8>,
    },
    Fixed {
        dims: Vec<usize>,
        content: Box<Builder>,
        length: usize,
    },
    Strings {
        offsets: Vec<i64>,
        chars: Vec<u8>,
    },
    List {
        offsets: Vec<i64>,
        content: Box<Builder>,
        set: bool,
    },
    Map {
        offsets: Vec<i64>,
        keys: Box<Builder>,
        values: Box<Builder>,
    },
    Record {
        name: String,
        names: Vec<String>,
        fields: Vec<Builder>,
        length: usize,
    },
}

impl Builder {
    pub fn new(model: &Model) -> Builder {
        match model {
            Model::Number(dtype) | Model::Packed(_, dtype) => Builder::Numbers {
                dtype: *dtype,
                bytes: Vec::new(),
            },
            Model::Bits => Builder::Numbers {
                dtype: DType::U32,
                bytes: Vec::new(),
            },
            Model::FixedArray(items, dims) => Builder::Fixed {
                dims: dims.clone(),
                content: Box::new(Builder::new(items)),
                length: 0,
            },
            Model::String { .. } => Builder::Strings {
                offsets: vec![0],
                chars: Vec::new(),
            },
            Model::Sequence { items, set, .. } => Builder::List {
                offsets: vec![0],
                content: Box::new(Builder::new(items)),
                set: *set,
            },
            Model::Members { items, .. } => Builder::List {
                offsets: vec![0],
                content: Box::new(Builder::new(items)),
                set: false,
            },
            Model::Map { keys, values, .. } => Builder::Map {
                offsets: vec![0],
                keys: Box::new(Builder::new(keys)),
                values: Box::new(Builder::new(values)),
            },
            Model::Class { name, .. } => {
                let mut names = Vec::new();
                let mut fields = Vec::new();
                collect_fields(model, &mut names, &mut fields);
                Builder::Record {
                    name: name.clone(),
                    names,
                    fields,
                    length: 0,
                }
            }
        }
    }

    /// The array of everything read.
    pub fn finish(self) -> Array {
        match self {
            Builder::Numbers { dtype, bytes } => {
                let mut native = AlignedBytes::zeroed(bytes.len());
                native.as_bytes_mut().copy_from_slice(&bytes);
                Array::numpy(dtype, vec![], native)
            }
            Builder::Fixed {
                dims,
                content,
                length,
            } => {
                let mut array = content.finish();
                let mut outer = length * dims.iter().product::<usize>();
                for &d in dims.iter().rev() {
                    outer /= d.max(1);
                    array = Array::regular(d, outer, array);
                }
                array
            }
            Builder::Strings { offsets, chars } => {
                Array::strings(offsets, AlignedBytes::from_slice(&chars))
            }
            Builder::List {
                offsets,
                content,
                set,
            } => {
                let list = Array::list(offsets, content.finish());
                if set {
                    list.with_parameter("__array__", "set")
                } else {
                    list
                }
            }
            Builder::Map {
                offsets,
                keys,
                values,
            } => {
                let (keys, values) = (keys.finish(), values.finish());
                let n = keys.len();
                let pairs =
                    Array::tuple(vec![keys, values], n).with_parameter("__array__", "sorted_map");
                Array::list(offsets, pairs)
            }
            Builder::Record {
                name,
                names,
                fields,
                length,
            } => Array::record(
                names,
                fields.into_iter().map(Builder::finish).collect(),
                length,
            )
            .with_parameter("__record__", &name),
        }
    }
}

/// Fields of a class record: its bases' fields (flattened), then its own.
fn collect_fields(model: &Model, names: &mut Vec<String>, fields: &mut Vec<Builder>) {
    let Model::Class { members, .. } = model else {
        return;
    };
    for m in members {
        match m {
            Member::Field(name, model) => {
                names.push(name.clone());
                fields.push(Builder::new(model));
            }
            Member::Base(base) => collect_fields(base, names, fields),
            Member::TObject => {}
        }
    }
}

/// Read one value of `model` at the cursor into `out` (made by `Builder::new(model)`).
pub fn read_value(cur: &mut Cursor, model: &Model, out: &mut Builder) -> Result<()> {
    match (model, out) {
        (Model::Number(dtype), Builder::Numbers { bytes, .. }) => {
            let raw = cur.bytes(dtype.size(), "a number")?;
            let at = bytes.len();
            bytes.resize(at + raw.len(), 0);
            convert_big_endian(*dtype, raw, &mut bytes[at..]);
        }
        (Model::Bits, Builder::Numbers { bytes, .. }) => {
            let b = cur.u32("TObject fBits")?;
            if b & IS_REFERENCED != 0 {
                cur.skip(2)?;
            }
            bytes.extend_from_slice(&b.to_ne_bytes());
        }
        (Model::Packed(packing, dtype), Builder::Numbers { bytes, .. }) => {
            let raw = cur.bytes(packing.stored_size(), "a packed number")?;
            packing.decode(*dtype, raw, bytes);
        }
        (
            Model::FixedArray(items, dims),
            Builder::Fixed {
                content, length, ..
            },
        ) => {
            for _ in 0..dims.iter().product::<usize>() {
                read_value(cur, items, content)?;
            }
            *length += 1;
        }
        (Model::String { header }, Builder::Strings { offsets, chars }) => {
            let end = read_header(cur, *header, "std::string")?;
            let n = match cur.u8("string length")? {
                255 => cur.u32("long string length")? as usize,
                n => n as usize,
            };
            chars.extend_from_slice(cur.bytes(n, "string characters")?);
            offsets.push(chars.len() as i64);
            check_end(cur, end, "std::string")?;
        }
        (
            Model::Members { header, items },
            Builder::List {
                offsets, content, ..
            },
        ) => {
            let end = read_header(cur, *header, "a collection's member")?;
            let stop = end.unwrap_or(cur.len());
            let mut n = 0i64;
            while cur.pos() < stop {
                let at = cur.pos();
                read_value(cur, items, content)?;
                if cur.pos() == at {
                    return Err(cur.error("collection members that take bytes"));
                }
                n += 1;
            }
            offsets.push(offsets.last().unwrap() + n);
            check_end(cur, end, "a collection's member")?;
        }
        (
            Model::Sequence { header, items, .. },
            Builder::List {
                offsets, content, ..
            },
        ) => {
            let end = read_header(cur, *header, "an STL collection")?;
            let n = cur.count("collection size", min_size(items))?;
            for _ in 0..n {
                read_value(cur, items, content)?;
            }
            offsets.push(offsets.last().unwrap() + n as i64);
            check_end(cur, end, "an STL collection")?;
        }
        (
            Model::Map {
                header,
                keys,
                values,
                column_headers,
            },
            Builder::Map {
                offsets,
                keys: kb,
                values: vb,
            },
        ) => {
            let n = read_map(cur, *header, [keys, values], *column_headers, [kb, vb])?;
            offsets.push(offsets.last().unwrap() + n as i64);
        }
        (Model::Class { .. }, Builder::Record { fields, length, .. }) => {
            let mut next = 0;
            read_class(cur, model, fields, &mut next)?;
            *length += 1;
        }
        (model, _) => unreachable!("a builder made for {model:?}"),
    }
    Ok(())
}

/// Read one map into the key and value builders; returns its size. ROOT writes a map's pairs
/// member by member when its version has kStreamedMemberWise: the pair's version and checksum,
/// the size, then all keys and all values, each column of strings or collections under one
/// byte count and version of its own.
fn read_map(
    cur: &mut Cursor,
    header: bool,
    models: [&Model; 2],
    column_headers: [bool; 2],
    builders: [&mut Builder; 2],
) -> Result<usize> {
    let (end, memberwise) = match header {
        true => {
            let v = read_version(cur, "std::map")?;
            (v.end, v.version & MEMBERWISE != 0)
        }
        false => (None, false),
    };
    if memberwise {
        cur.skip(6)?;
    }
    let n = cur.count("map size", min_size(models[0]) + min_size(models[1]))?;
    let [kb, vb] = builders;
    if memberwise {
        for (column, (model, out)) in models.into_iter().zip([kb, vb]).enumerate() {
            let column_end = match column_headers[column] && n > 0 {
                true => read_header(cur, true, "a map's column")?,
                false => None,
            };
            for _ in 0..n {
                read_value(cur, model, out)?;
            }
            check_end(cur, column_end, "a map's column")?;
        }
    } else {
        // Pair by pair (uproot reads these the same way): each string or collection with its
        // own header.
        for _ in 0..n {
            for (column, (model, out)) in models.iter().zip([&mut *kb, &mut *vb]).enumerate() {
                let item_end = read_header(cur, column_headers[column], "a map's item")?;
                read_value(cur, model, out)?;
                check_end(cur, item_end, "a map's item")?;
            }
        }
    }
    check_end(cur, end, "std::map")?;
    Ok(n)
}

/// Read a class (byte count and version, then members) into `fields` from index `*next`.
fn read_class(
    cur: &mut Cursor,
    model: &Model,
    fields: &mut [Builder],
    next: &mut usize,
) -> Result<()> {
    let Model::Class {
        name,
        version,
        header,
        members,
    } = model
    else {
        unreachable!("read_class is given classes")
    };
    if !header {
        return read_members(cur, members, fields, next);
    }
    let at = cur.pos();
    let v = read_version(cur, name)?;
    if v.end.is_none() && v.version as i32 != *version {
        // Without a byte count the two bytes are not a version: not this class's layout.
        return Err(cur.error_at(at, format!("a byte count and version of class {name}")));
    }
    if v.version & MEMBERWISE != 0 {
        return Err(memberwise(name));
    }
    // Classes without ClassDef ("foreign": ATLAS' ElementLink, plain structs) of version 1
    // write version 0 and their checksum (TBufferFile::WriteVersion); the file's streamer info
    // of the class describes them, and the byte count checks it.
    if v.version == 0 {
        cur.u32(&format!("{name} checksum"))?;
    } else if v.version as i32 != *version {
        return Err(cur.error_at(
            at,
            format!(
                "class {name} of version {version} as in the streamer infos, found version {}",
                v.version
            ),
        ));
    }
    read_members(cur, members, fields, next)?;
    check_end(cur, v.end, name)
}

fn read_members(
    cur: &mut Cursor,
    members: &[Member],
    fields: &mut [Builder],
    next: &mut usize,
) -> Result<()> {
    for m in members {
        match m {
            Member::Field(_, model) => {
                read_value(cur, model, &mut fields[*next])?;
                *next += 1;
            }
            Member::Base(base) => read_class(cur, base, fields, next)?,
            Member::TObject => read_tobject(cur)?,
        }
    }
    Ok(())
}

/// Whether a whole top-level object's entry starts with its own byte count and version.
/// Unsplit branches of classes without ClassDef (xAOD's TrigConfKeys, plain structs) hold the
/// members alone, written by the class's streamer info with no header (uproot reads them as
/// AsStridedObjects); an entry holding a header starts with a byte count spanning the entry
/// (`entry_len`, when the basket has entry offsets).
fn has_own_header(entry: &[u8], entry_len: Option<usize>) -> bool {
    const BYTE_COUNT: u32 = 0x4000_0000;
    let Some(first) = entry.get(..4) else {
        return false;
    };
    let first = u32::from_be_bytes(first.try_into().unwrap());
    first & BYTE_COUNT != 0 && entry_len.is_none_or(|n| (first & !BYTE_COUNT) as usize + 4 == n)
}

/// Members of the objects of a split collection: ROOT 5 wrote nothing at all, not even the
/// header, for an entry whose collection was empty. Pushes that entry's empty list.
fn empty_entries_are_empty_lists(model: &Model, out: &mut Builder) -> bool {
    match (model, out) {
        (Model::Members { header: true, .. }, Builder::List { offsets, .. }) => {
            offsets.push(*offsets.last().unwrap());
            true
        }
        _ => false,
    }
}

/// Read one top-level entry of `model`: classes with or without their own header.
fn read_entry(cur: &mut Cursor, model: &Model, out: &mut Builder, header: bool) -> Result<()> {
    match (model, out) {
        (Model::Class { members, .. }, Builder::Record { fields, length, .. }) if !header => {
            read_members(cur, members, fields, &mut 0)?;
            *length += 1;
            Ok(())
        }
        (model, out) => read_value(cur, model, out),
    }
}

/// Byte count and version of a collection or string written with a header; the end they give.
fn read_header(cur: &mut Cursor, header: bool, what: &str) -> Result<Option<usize>> {
    if !header {
        return Ok(None);
    }
    let v = read_version(cur, what)?;
    if v.version & MEMBERWISE != 0 {
        return Err(memberwise(what));
    }
    Ok(v.end)
}

/// Collections written member by member are refused (uproot refuses them too); the branch
/// and file are filled in by the caller.
fn memberwise(what: &str) -> Error {
    Error::UnsupportedBranch {
        file: String::new(),
        branch: String::new(),
        typename: what.to_string(),
        reason: "it holds collections written member by member (uproot refuses them too)".into(),
    }
}

fn check_end(cur: &Cursor, end: Option<usize>, what: &str) -> Result<()> {
    match end {
        Some(end) if end != cur.pos() => Err(cur.error(format!(
            "{what} to end where its byte count says (byte {end})"
        ))),
        _ => Ok(()),
    }
}

/// The fewest bytes one value of `model` takes (bounds counts read off the data).
fn min_size(model: &Model) -> usize {
    match model {
        Model::Number(d) => d.size(),
        Model::Bits => 4,
        Model::Packed(p, _) => p.stored_size(),
        Model::FixedArray(items, dims) => dims
            .iter()
            .fold(min_size(items), |n, &d| n.saturating_mul(d)),
        Model::String { .. }
        | Model::Sequence { .. }
        | Model::Members { .. }
        | Model::Map { .. }
        | Model::Class { .. } => 1,
    }
}

/// Read entries `first..last` of a basket's `content` into `out`: each at its entry offset when
/// the basket has them, else one after another from the start. Every entry must be read whole.
pub fn read_entries(
    model: &Model,
    content: &[u8],
    offsets: Option<&[u32]>,
    (first, last): (usize, usize),
    origin: &str,
    out: &mut Builder,
) -> Result<()> {
    match offsets {
        Some(offs) => {
            for e in first..last {
                let (lo, hi) = (offs[e] as usize, offs[e + 1] as usize);
                let entry = content.get(lo..hi).unwrap_or_default();
                let mut cur = Cursor::new(entry, origin, lo as u64);
                if entry.is_empty() && empty_entries_are_empty_lists(model, out) {
                    continue;
                }
                read_entry(
                    &mut cur,
                    model,
                    out,
                    has_own_header(entry, Some(entry.len())),
                )?;
                if cur.remaining() != 0 {
                    return Err(
                        cur.error(format!("entry {e} to end after its {} bytes", cur.pos()))
                    );
                }
            }
        }
        None if matches!(model, Model::Members { header: false, .. }) => {
            // Objects up to the end of the entry: only entry offsets say where that is.
            return Err(Error::format(
                origin,
                "entry offsets in a basket of a collection's object members",
            ));
        }
        None => {
            let mut cur = Cursor::new(content, origin, 0);
            let mut skipped = Builder::new(model);
            let header = has_own_header(content, None);
            for e in 0..last {
                let target = if e < first { &mut skipped } else { &mut *out };
                read_entry(&mut cur, model, target, header)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One entry's `std::vector<int>` member of each object: byte count, version, then each
    /// object's vector (size, items).
    fn member_entry(vectors: &[&[i32]]) -> Vec<u8> {
        let mut body = 9i16.to_be_bytes().to_vec();
        for v in vectors {
            body.extend((v.len() as i32).to_be_bytes());
            v.iter().for_each(|x| body.extend(x.to_be_bytes()));
        }
        let mut out = (0x4000_0000u32 | body.len() as u32).to_be_bytes().to_vec();
        out.extend(body);
        out
    }

    #[test]
    fn members_of_empty_collections_may_take_no_bytes() {
        // ROOT 5 wrote nothing for an entry whose collection was empty; ROOT 6 writes the header.
        let model = Model::Members {
            header: true,
            items: Box::new(Model::Sequence {
                header: false,
                items: Box::new(Model::Number(DType::I32)),
                set: false,
            }),
        };
        let entries = [member_entry(&[&[1, 2], &[]]), vec![], member_entry(&[])];
        let content: Vec<u8> = entries.concat();
        let mut offsets = vec![0u32];
        for e in &entries {
            offsets.push(offsets.last().unwrap() + e.len() as u32);
        }
        let mut out = Builder::new(&model);
        read_entries(&model, &content, Some(&offsets), (0, 3), "test", &mut out).unwrap();
        let Builder::List { offsets, .. } = out else {
            panic!("a list builder")
        };
        assert_eq!(offsets, vec![0, 2, 2, 2]);
    }
}
