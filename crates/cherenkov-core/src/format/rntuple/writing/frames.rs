//! The containers of RNTuple metadata written (spec: "Envelopes", "Frames", "Locators and
//! Envelope Links"), the inverse of `envelope.rs`: little-endian numbers, strings, record and
//! list frames whose sizes are filled in when they close, envelopes with their preamble and
//! XXH3-64 trailer.

use super::super::envelope::{xxh3, EnvelopeKind, EnvelopeLink, Locator, CHECKSUM_LEN};

/// The locator type of a large (64-bit size) file locator, and that locator's own size.
const LARGE_LOCATOR: u32 = 0x01;
const LARGE_LOCATOR_LEN: u32 = 20;

/// Bytes of an envelope being written.
#[derive(Default)]
pub struct Out {
    pub bytes: Vec<u8>,
}

impl Out {
    pub fn u16(&mut self, v: u16) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i32(&mut self, v: i32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub fn f64(&mut self, v: f64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    /// A 32-bit length, then the UTF-8 bytes.
    pub fn string(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.bytes.extend_from_slice(s.as_bytes());
    }

    /// Feature flags: format 1.0 defines none, so one zero word.
    pub fn feature_flags(&mut self) {
        self.u64(0);
    }

    /// A record frame around what `body` writes.
    pub fn record(&mut self, body: impl FnOnce(&mut Out)) {
        let at = self.bytes.len();
        self.i64(0);
        body(self);
        let size = (self.bytes.len() - at) as i64;
        self.bytes[at..at + 8].copy_from_slice(&size.to_le_bytes());
    }

    /// A list frame of `count` items, which `body` writes (with whatever follows the items
    /// inside the frame, as a page list's element offset).
    pub fn list(&mut self, count: usize, body: impl FnOnce(&mut Out)) {
        let at = self.bytes.len();
        self.i64(0);
        self.u32(count as u32);
        body(self);
        let size = -((self.bytes.len() - at) as i64);
        self.bytes[at..at + 8].copy_from_slice(&size.to_le_bytes());
    }

    /// A list frame with one record frame per item.
    pub fn records<T>(&mut self, items: &[T], mut each: impl FnMut(&mut Out, &T)) {
        self.list(items.len(), |o| {
            for item in items {
                o.record(|o| each(o, item));
            }
        });
    }

    /// A file locator: standard while its size fits 31 bits, else large (64-bit size).
    pub fn locator(&mut self, l: &Locator) {
        match i32::try_from(l.size) {
            Ok(size) => {
                self.i32(size);
                self.u64(l.offset);
            }
            Err(_) => {
                self.i32(-((LARGE_LOCATOR << 24 | LARGE_LOCATOR_LEN) as i32));
                self.u64(l.size);
                self.u64(l.offset);
            }
        }
    }

    pub fn envelope_link(&mut self, l: &EnvelopeLink) {
        self.u64(l.length);
        self.locator(&l.locator);
    }
}

/// An envelope of `kind` around what `body` writes: the preamble (type and length), the payload
/// and the XXH3-64 of both. Returns the bytes and that checksum (the header's is repeated in the
/// footer and the page lists).
pub fn envelope(kind: EnvelopeKind, body: impl FnOnce(&mut Out)) -> (Vec<u8>, u64) {
    let mut o = Out::default();
    o.u64(0);
    body(&mut o);
    let length = (o.bytes.len() + CHECKSUM_LEN) as u64;
    o.bytes[..8].copy_from_slice(&(length << 16 | kind as u64).to_le_bytes());
    let checksum = xxh3(&o.bytes);
    o.u64(checksum);
    (o.bytes, checksum)
}

#[cfg(test)]
mod tests {
    use super::super::super::envelope::{list_frame, locator, open_envelope, record_frame, string};
    use super::*;
    use crate::format::cursor::Cursor;

    #[test]
    fn frames_strings_and_envelopes_parse_back() {
        let (bytes, sum) = envelope(EnvelopeKind::Footer, |o| {
            o.record(|o| o.string("päge"));
            o.list(2, |o| {
                o.record(|o| o.u32(7));
                o.record(|o| o.u16(9));
                o.i64(-5);
            });
        });
        let (mut c, stored) = open_envelope(&bytes, EnvelopeKind::Footer, "t").unwrap();
        assert_eq!(stored, sum);
        let mut r = record_frame(&mut c, "r").unwrap();
        assert_eq!(string(&mut r, "s").unwrap(), "päge");
        let (n, mut items) = list_frame(&mut c, "l", 8).unwrap();
        assert_eq!(n, 2);
        assert_eq!(
            record_frame(&mut items, "a").unwrap().u32_le("").unwrap(),
            7
        );
        assert_eq!(
            record_frame(&mut items, "b").unwrap().u16_le("").unwrap(),
            9
        );
        assert_eq!(items.i64_le("").unwrap(), -5);
        assert_eq!(c.remaining(), 0);
    }

    #[test]
    fn locators_grow_large_past_31_bits() {
        let small = Locator {
            offset: 1 << 40,
            size: i32::MAX as u64,
        };
        let large = Locator {
            offset: 77,
            size: 1 << 31,
        };
        let mut o = Out::default();
        o.locator(&small);
        o.locator(&large);
        assert_eq!(o.bytes.len(), 12 + 20);
        let mut c = Cursor::new(&o.bytes, "t", 0);
        assert_eq!(locator(&mut c, "a").unwrap(), small);
        assert_eq!(locator(&mut c, "b").unwrap(), large);
    }
}
