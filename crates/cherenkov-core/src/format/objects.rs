//! ROOT object streaming: version headers with byte counts, TObject/TNamed, and pointers
//! (`ReadObjectAny`) with the class and object reference map of TBufferFile.

use super::cursor::Cursor;
use crate::error::{Error, Result};
use rustc_hash::FxHashMap;
use std::rc::Rc;

pub(crate) const BYTE_COUNT_MASK: u32 = 0x4000_0000;
const BYTE_COUNT_VERSION_MASK: u16 = 0x4000;
pub(crate) const NEW_CLASS_TAG: u32 = 0xFFFF_FFFF;
pub(crate) const CLASS_MASK: u32 = 0x8000_0000;
/// Reference tags count from the key start plus this offset (TBufferFile's kMapOffset).
pub(crate) const MAP_OFFSET: u64 = 2;
/// TObject's fBits flag for objects referenced by a TRef: a 2-byte process id follows fBits.
pub const IS_REFERENCED: u32 = 1 << 4;
/// Objects nest this deep at most (real files: a few levels per level of class splitting). Each
/// level recurses, so without a limit a hostile object would overflow the stack.
pub const MAX_NESTING: usize = 64;

/// A version header: the class version and, when a byte count was written, where the object ends.
#[derive(Clone, Copy, Debug)]
pub struct Version {
    pub version: i16,
    pub end: Option<usize>,
}

impl Version {
    /// Move to the end of the object (skipping members not read); needs a byte count.
    pub fn skip_to_end(&self, cur: &mut Cursor, class: &str) -> Result<()> {
        match self.end {
            Some(end) => cur.seek(end),
            None => Err(cur.error(format!("a byte count for {class} to skip over it"))),
        }
    }
}

pub fn read_version(cur: &mut Cursor, class: &str) -> Result<Version> {
    let start = cur.pos();
    enough(cur, 4, class, "byte count")?;
    let first = cur.u32("byte count")?;
    if first & BYTE_COUNT_MASK != 0 {
        let count = (first & !BYTE_COUNT_MASK) as usize;
        let end = start + 4 + count;
        if end > cur.len() || count < 2 {
            return Err(cur.error_at(
                start,
                format!("a byte count for {class} inside the object, found {count}"),
            ));
        }
        enough(cur, 2, class, "version")?;
        let version = cur.i16("version")?;
        Ok(Version {
            version,
            end: Some(end),
        })
    } else {
        cur.seek(start)?;
        enough(cur, 2, class, "version")?;
        let version = cur.i16("version")?;
        Ok(Version { version, end: None })
    }
}

/// An error naming `class`'s `what` unless `n` bytes remain: the name is formatted only on
/// error (formatting it on every read took a tenth of parsing a 947-branch TTree).
#[inline]
fn enough(cur: &Cursor, n: usize, class: &str, what: &str) -> Result<()> {
    if cur.remaining() < n {
        return Err(too_few(cur, n, class, what));
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn too_few(cur: &Cursor, n: usize, class: &str, what: &str) -> Error {
    cur.error(format!(
        "{class} {what} ({n} bytes), but only {} bytes remain",
        cur.remaining()
    ))
}

pub fn read_tobject(cur: &mut Cursor) -> Result<()> {
    let version = cur.u16("TObject version")?;
    if version & BYTE_COUNT_VERSION_MASK != 0 {
        cur.skip(4)?;
    }
    let _unique_id = cur.u32("TObject fUniqueID")?;
    let bits = cur.u32("TObject fBits")?;
    if bits & IS_REFERENCED != 0 {
        cur.skip(2)?;
    }
    Ok(())
}

/// TNamed: returns (name, title).
pub fn read_tnamed(cur: &mut Cursor) -> Result<(String, String)> {
    let v = read_version(cur, "TNamed")?;
    read_tobject(cur)?;
    let name = cur.string("TNamed fName")?;
    let title = cur.string("TNamed fTitle")?;
    if let Some(end) = v.end {
        cur.seek(end)?;
    }
    Ok((name, title))
}

/// Skip a member object that has a byte count (TAttLine, TAttFill, ...).
pub fn skip_object(cur: &mut Cursor, class: &str) -> Result<()> {
    read_version(cur, class)?.skip_to_end(cur, class)
}

/// What a pointer resolved to. `Object(id)` ids are chosen by the caller's reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pointer<T> {
    Null,
    Object(T),
}

/// Reads the body of a new object: given the class name and, when known, where the object ends
/// (the cursor must be left there); returns its id.
pub type ReadBody<'a, T> =
    dyn FnMut(&mut PointerReader<T>, &mut Cursor, &str, Option<usize>) -> Result<T> + 'a;

/// Reads pointers (`ReadObjectAny`) and remembers classes and objects by their tag, so later
/// references to them resolve. `key_len` is the length of the key header before the object data:
/// tags count from the start of the key.
pub struct PointerReader<T: Clone> {
    key_len: u64,
    // Keyed by offsets: a fast hash (SipHash took a tenth of parsing a NanoAOD tree's metadata).
    /// Shared: every object of a class names it (a NanoAOD tree streams 1 900 branches and
    /// leaves of a few classes), so a reference costs no copy of the name.
    classes: FxHashMap<u64, Rc<str>>,
    objects: FxHashMap<u64, T>,
    /// Objects being read inside one another.
    depth: usize,
}

impl<T: Clone> PointerReader<T> {
    pub fn new(key_len: usize) -> Self {
        Self::with_capacity(key_len, 0)
    }

    /// A reader with room for `objects` objects (growing the map rehashes every object).
    pub fn with_capacity(key_len: usize, objects: usize) -> Self {
        Self {
            key_len: key_len as u64,
            classes: FxHashMap::default(),
            objects: FxHashMap::with_capacity_and_hasher(objects, Default::default()),
            depth: 0,
        }
    }

    /// Read one pointer. For a new object, `read_body(cur, class_name, end)` reads it (it must
    /// leave the cursor at `end` when that is known) and returns its id.
    pub fn read(&mut self, cur: &mut Cursor, read_body: &mut ReadBody<T>) -> Result<Pointer<T>> {
        let begin = cur.pos();
        let first = cur.u32("object pointer byte count or tag")?;
        let (tag, end, class_pos) = if first & BYTE_COUNT_MASK == 0 || first == NEW_CLASS_TAG {
            (first, None, None)
        } else {
            let count = (first & !BYTE_COUNT_MASK) as usize;
            let end = begin + 4 + count;
            if end > cur.len() {
                return Err(cur.error_at(
                    begin,
                    format!("an object byte count inside the buffer, found {count}"),
                ));
            }
            let class_pos = cur.pos();
            (cur.u32("object class tag")?, Some(end), Some(class_pos))
        };
        if tag & CLASS_MASK == 0 {
            // A reference to an object read before (or null).
            if tag == 0 {
                return Ok(Pointer::Null);
            }
            return match self.objects.get(&(tag as u64)) {
                Some(obj) => Ok(Pointer::Object(obj.clone())),
                // An object we skipped (unknown class): ignore, as ROOT would give a null.
                None => Ok(Pointer::Null),
            };
        }
        let class = if tag == NEW_CLASS_TAG {
            let name = cur.cstring("class name after a new-class tag")?;
            if name.is_empty() || name.len() > 1024 {
                return Err(cur.error("a class name of 1 to 1024 characters"));
            }
            let name: Rc<str> = name.into();
            if let Some(pos) = class_pos {
                self.classes
                    .insert(self.key_len + pos as u64 + MAP_OFFSET, name.clone());
            }
            name
        } else {
            let reference = (tag & !CLASS_MASK) as u64;
            self.classes.get(&reference).cloned().ok_or_else(|| {
                cur.error_at(
                    begin,
                    format!("a class reference {reference} to a class read before"),
                )
            })?
        };
        if self.depth >= MAX_NESTING {
            return Err(cur.error_at(begin, format!("objects nested at most {MAX_NESTING} deep")));
        }
        self.depth += 1;
        let obj = read_body(self, cur, &class, end);
        self.depth -= 1;
        let obj = obj?;
        if let Some(end) = end {
            cur.seek(end)?;
        }
        self.objects
            .insert(self.key_len + begin as u64 + MAP_OFFSET, obj.clone());
        Ok(Pointer::Object(obj))
    }
}

/// TObjArray (or TList without options): read its header, then each element with `read_item`.
pub fn read_obj_array<T: Clone>(
    cur: &mut Cursor,
    pointers: &mut PointerReader<T>,
    read_body: &mut ReadBody<T>,
) -> Result<Vec<T>> {
    let v = read_version(cur, "TObjArray")?;
    if v.version > 2 {
        read_tobject(cur)?;
    }
    if v.version > 1 {
        cur.skip_string("TObjArray fName")?;
    }
    let n = cur.count("TObjArray size", 4)?;
    let _lower_bound = cur.i32("TObjArray fLowerBound")?;
    // Not `n`: a branch's fBaskets holds fMaxBaskets slots, nearly all null.
    let mut out = Vec::new();
    for _ in 0..n {
        if let Pointer::Object(obj) = pointers.read(cur, read_body)? {
            out.push(obj);
        }
    }
    if let Some(end) = v.end {
        cur.seek(end)?;
    }
    Ok(out)
}

/// TList: like TObjArray but each element is followed by an option string.
pub fn read_list<T: Clone>(
    cur: &mut Cursor,
    pointers: &mut PointerReader<T>,
    read_body: &mut ReadBody<T>,
) -> Result<Vec<T>> {
    let v = read_version(cur, "TList")?;
    if v.version > 3 {
        read_tobject(cur)?;
        cur.skip_string("TList fName")?;
    }
    let n = cur.count("TList size", 5)?;
    // Not `n`: a branch's fBaskets holds fMaxBaskets slots, nearly all null.
    let mut out = Vec::new();
    for _ in 0..n {
        if let Pointer::Object(obj) = pointers.read(cur, read_body)? {
            out.push(obj);
        }
        let option_len = cur.u8("TList option length")? as usize;
        cur.skip(option_len)?;
    }
    if let Some(end) = v.end {
        cur.seek(end)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::MAX_NESTING;
    use crate::format::streamers::parse_streamer_infos;

    /// A TList holding a TObjArray holding a TObjArray ... `depth` deep, each a new object
    /// with its byte count (so every level parses) and no other content.
    fn nested_arrays(depth: usize) -> Vec<u8> {
        const POINTER: usize = 4 + 4 + 10; // byte count, new-class tag, "TObjArray\0"
        const ARRAY: usize = 4 + 2 + 10 + 1 + 4 + 4; // header, TObject, fName, size, lower bound
        let mut out = Vec::new();
        let byte_count = |n: usize| (0x4000_0000 | n as u32).to_be_bytes();
        // The TList: version 5, TObject, empty name, one element.
        let list_len = 2 + 10 + 1 + 4 + depth * (POINTER + ARRAY) + 1;
        out.extend(byte_count(list_len));
        out.extend([0, 5, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.extend(1i32.to_be_bytes());
        for level in 0..depth {
            let below = (depth - level - 1) * (POINTER + ARRAY);
            out.extend(byte_count(POINTER - 4 + ARRAY + below));
            out.extend(0xFFFF_FFFFu32.to_be_bytes());
            out.extend(b"TObjArray\0");
            out.extend(byte_count(ARRAY - 4 + below));
            out.extend([0, 3, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            out.extend(i32::from(level + 1 < depth).to_be_bytes());
            out.extend(0i32.to_be_bytes());
        }
        out.push(0); // the TList element's option string
        out
    }

    #[test]
    fn nesting_is_parsed_to_a_sane_depth() {
        assert!(parse_streamer_infos(&nested_arrays(MAX_NESTING), 0, "test").is_ok());
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let e = parse_streamer_infos(&nested_arrays(100_000), 0, "test").unwrap_err();
        assert!(e.to_string().contains("expected"), "{e}");
    }
}
