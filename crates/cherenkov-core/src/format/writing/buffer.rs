//! Big-endian serialization, the inverse of `Cursor`: numbers, ROOT strings, version headers
//! with byte counts, and pointers (`WriteObjectAny`) with TBufferFile's map of classes and
//! objects, so that a class named once is referred to afterwards and an object written once can
//! be pointed to again (a leaf's counter, the tree's list of leaves).

use crate::format::objects::{BYTE_COUNT_MASK, CLASS_MASK, MAP_OFFSET, NEW_CLASS_TAG};
use std::collections::HashMap;

/// Where a version header's byte count goes, to be filled in when the object ends.
#[must_use = "an object begun must be ended"]
pub struct Mark(usize);

/// A pointer tag that refers to an object written before in the same buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectRef(u32);

#[derive(Default)]
pub struct Buffer {
    data: Vec<u8>,
    /// Bytes before the buffer in its key (the key header): pointer tags count from the key's
    /// start, as TBufferFile's buffer begins with the key.
    origin: u32,
    classes: HashMap<String, u32>,
}

impl Buffer {
    /// A buffer for an object stored after a key header of `key_len` bytes.
    pub fn new(key_len: u32) -> Self {
        Self {
            origin: key_len,
            ..Default::default()
        }
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.data
    }
    pub fn into_bytes(self) -> Vec<u8> {
        self.data
    }

    pub fn u8(&mut self, v: u8) {
        self.data.push(v);
    }
    pub fn bool(&mut self, v: bool) {
        self.data.push(v as u8);
    }
    pub fn i16(&mut self, v: i16) {
        self.data.extend_from_slice(&v.to_be_bytes());
    }
    pub fn u16(&mut self, v: u16) {
        self.data.extend_from_slice(&v.to_be_bytes());
    }
    pub fn i32(&mut self, v: i32) {
        self.data.extend_from_slice(&v.to_be_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.data.extend_from_slice(&v.to_be_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.data.extend_from_slice(&v.to_be_bytes());
    }
    pub fn f32(&mut self, v: f32) {
        self.data.extend_from_slice(&v.to_be_bytes());
    }
    pub fn f64(&mut self, v: f64) {
        self.data.extend_from_slice(&v.to_be_bytes());
    }
    pub fn bytes(&mut self, v: &[u8]) {
        self.data.extend_from_slice(v);
    }

    /// A ROOT string: one length byte, or 255 and a 4-byte length, then the characters.
    pub fn string(&mut self, s: &str) {
        write_string(&mut self.data, s.as_bytes());
    }

    /// A version header with a byte count, filled in by `end`.
    pub fn begin(&mut self, version: i16) -> Mark {
        let at = self.data.len();
        self.u32(0);
        self.i16(version);
        Mark(at)
    }

    /// End the object begun at `mark`: its byte count covers what follows the count.
    pub fn end(&mut self, mark: Mark) {
        let count = (self.data.len() - mark.0 - 4) as u32;
        self.patch_u32(mark.0, count | BYTE_COUNT_MASK);
    }

    fn patch_u32(&mut self, at: usize, v: u32) {
        self.data[at..at + 4].copy_from_slice(&v.to_be_bytes());
    }

    /// TObject: version 1 without a byte count, fUniqueID 0, then `bits`.
    pub fn tobject(&mut self, bits: u32) {
        self.i16(1);
        self.u32(0);
        self.u32(bits);
    }

    /// TNamed (version 1): TObject, name and title.
    pub fn tnamed(&mut self, name: &str, title: &str, bits: u32) {
        let m = self.begin(1);
        self.tobject(bits);
        self.string(name);
        self.string(title);
        self.end(m);
    }

    /// A pointer to a new object of `class`: byte count, the class (its name the first time,
    /// then a reference to it), then what `body` writes. Returns the tag later pointers to the
    /// same object use.
    pub fn object(&mut self, class: &str, body: impl FnOnce(&mut Self)) -> ObjectRef {
        let start = self.data.len();
        self.u32(0);
        match self.classes.get(class) {
            Some(&tag) => self.u32(tag | CLASS_MASK),
            None => {
                let tag = self.tag_at(self.data.len());
                self.classes.insert(class.to_string(), tag);
                self.u32(NEW_CLASS_TAG);
                self.data.extend_from_slice(class.as_bytes());
                self.u8(0);
            }
        }
        body(self);
        let count = (self.data.len() - start - 4) as u32;
        self.patch_u32(start, count | BYTE_COUNT_MASK);
        ObjectRef(self.tag_at(start))
    }

    /// A pointer to an object written before.
    pub fn reference(&mut self, object: ObjectRef) {
        self.u32(object.0);
    }

    /// A null pointer.
    pub fn null(&mut self) {
        self.u32(0);
    }

    fn tag_at(&self, pos: usize) -> u32 {
        (self.origin as u64 + pos as u64 + MAP_OFFSET) as u32
    }
}

/// A ROOT string appended to `out`: one length byte, or 255 and a 4-byte length, then the bytes.
pub fn write_string(out: &mut Vec<u8>, b: &[u8]) {
    if b.len() < 255 {
        out.push(b.len() as u8);
    } else {
        out.push(255);
        out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    }
    out.extend_from_slice(b);
}

/// Bytes a ROOT string of `s` takes.
pub fn string_len(s: &str) -> usize {
    s.len() + if s.len() < 255 { 1 } else { 5 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::cursor::Cursor;
    use crate::format::objects::{read_tnamed, Pointer, PointerReader};

    #[test]
    fn strings_short_and_long_read_back() {
        for s in ["", "Muon_pt", &"x".repeat(254), &"y".repeat(300)] {
            let mut b = Buffer::new(0);
            b.string(s);
            assert_eq!(b.len(), string_len(s));
            let mut c = Cursor::new(b.as_bytes(), "t", 0);
            assert_eq!(c.string("s").unwrap(), s);
        }
    }

    #[test]
    fn named_objects_read_back() {
        let mut b = Buffer::new(0);
        b.tnamed("Events", "the events", 0);
        let mut c = Cursor::new(b.as_bytes(), "t", 0);
        assert_eq!(
            read_tnamed(&mut c).unwrap(),
            ("Events".into(), "the events".into())
        );
        assert_eq!(c.remaining(), 0);
    }

    #[test]
    fn pointers_name_a_class_once_and_refer_to_objects_written_before() {
        let key_len = 60;
        let mut b = Buffer::new(key_len);
        let first = b.object("TNamed", |b| b.tnamed("a", "", 0));
        b.object("TNamed", |b| b.tnamed("b", "", 0));
        b.reference(first);
        b.null();
        let mut c = Cursor::new(b.as_bytes(), "t", 0);
        let mut ptrs = PointerReader::<String>::new(key_len as usize);
        let mut names = Vec::new();
        for _ in 0..4 {
            let p = ptrs
                .read(&mut c, &mut |_, c, class, _| {
                    assert_eq!(class, "TNamed");
                    Ok(read_tnamed(c)?.0)
                })
                .unwrap();
            names.push(p);
        }
        assert_eq!(
            names,
            [
                Pointer::Object("a".to_string()),
                Pointer::Object("b".to_string()),
                Pointer::Object("a".to_string()),
                Pointer::Null
            ]
        );
        assert_eq!(c.remaining(), 0);
    }
}
