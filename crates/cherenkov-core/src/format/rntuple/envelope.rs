//! Envelopes, frames and locators: the containers of RNTuple metadata (spec sections "Envelopes",
//! "Frames", "Locators and Envelope Links"). Frames are always left by their size, so fields that a
//! later minor version appends to a record are skipped rather than misread.

use crate::error::Result;
use crate::format::cursor::Cursor;

/// Envelopes end with the XXH3-64 of everything before it.
pub const CHECKSUM_LEN: usize = 8;
const PREAMBLE_LEN: usize = 8;
/// A record frame's size; a list frame adds its item count.
const RECORD_FRAME_HEADER: usize = 8;
const LIST_FRAME_HEADER: usize = 12;
/// The locator type of a large (64-bit size) file locator.
const LARGE_LOCATOR: i32 = 0x01;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnvelopeKind {
    Header = 1,
    Footer = 2,
    PageList = 3,
}

impl EnvelopeKind {
    fn name(self) -> &'static str {
        match self {
            EnvelopeKind::Header => "header",
            EnvelopeKind::Footer => "footer",
            EnvelopeKind::PageList => "page list",
        }
    }
}

/// The XXH3-64 of `data`, as RNTuple computes its checksums.
pub fn xxh3(data: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(data)
}

/// Check an (uncompressed) envelope's type, length and checksum. Returns a cursor over its payload,
/// between the preamble and the checksum, and the checksum (the header's is repeated in the footer
/// and the page lists, tying them together).
pub fn open_envelope<'a>(
    data: &'a [u8],
    kind: EnvelopeKind,
    origin: &'a str,
) -> Result<(Cursor<'a>, u64)> {
    let mut c = Cursor::new(data, origin, 0);
    let preamble = c.u64_le("the envelope preamble")?;
    let found = preamble & 0xFFFF;
    if found != kind as u64 {
        return Err(c.error_at(
            0,
            format!(
                "a {} envelope (type {}), found type {found}",
                kind.name(),
                kind as u64
            ),
        ));
    }
    let length = preamble >> 16;
    if length > data.len() as u64 || (length as usize) < PREAMBLE_LEN + CHECKSUM_LEN {
        return Err(c.error_at(
            0,
            format!(
                "an envelope length of at least {} bytes within the {} bytes read, found {length}",
                PREAMBLE_LEN + CHECKSUM_LEN,
                data.len()
            ),
        ));
    }
    let end = length as usize - CHECKSUM_LEN;
    let stored = u64::from_le_bytes(data[end..end + CHECKSUM_LEN].try_into().unwrap());
    let computed = xxh3(&data[..end]);
    if stored != computed {
        return Err(c.error_at(
            end,
            format!(
                "the {} envelope's XXH3-64 checksum {stored:#018x}, computed {computed:#018x}",
                kind.name()
            ),
        ));
    }
    let payload = c.take(end - PREAMBLE_LEN, "the envelope payload")?;
    Ok((payload, stored))
}

/// A record frame: the cursor returned covers its payload; `c` moves past the whole frame.
pub fn record_frame<'a>(c: &mut Cursor<'a>, what: &str) -> Result<Cursor<'a>> {
    let at = c.pos();
    let size = c.i64_le(what)?;
    if size < 0 {
        return Err(c.error_at(at, format!("{what} as a record frame, found a list frame")));
    }
    frame_payload(c, at, size as u64, RECORD_FRAME_HEADER, what)
}

/// A list frame: its item count and a cursor over the items; `c` moves past the whole frame. The
/// count is checked against the bytes present (`min_item_bytes` each), so a corrupt count cannot
/// make a caller allocate more than the frame could hold.
pub fn list_frame<'a>(
    c: &mut Cursor<'a>,
    what: &str,
    min_item_bytes: usize,
) -> Result<(usize, Cursor<'a>)> {
    let at = c.pos();
    let size = c.i64_le(what)?;
    if size >= 0 {
        return Err(c.error_at(at, format!("{what} as a list frame, found a record frame")));
    }
    let count_at = c.pos();
    let count = c.u32_le(what)?;
    let payload = frame_payload(c, at, size.unsigned_abs(), LIST_FRAME_HEADER, what)?;
    if count as u64 * min_item_bytes.max(1) as u64 > payload.len() as u64 {
        return Err(c.error_at(
            count_at,
            format!(
                "{what}: a count of items fitting the frame's {} bytes, found {count}",
                payload.len()
            ),
        ));
    }
    Ok((count as usize, payload))
}

fn frame_payload<'a>(
    c: &mut Cursor<'a>,
    at: usize,
    size: u64,
    header: usize,
    what: &str,
) -> Result<Cursor<'a>> {
    let available = c.len() - at;
    if size < header as u64 || size > available as u64 {
        return Err(c.error_at(
            at,
            format!("{what}: a frame of {header} to {available} bytes, found {size}"),
        ));
    }
    c.take(size as usize - header, what)
}

/// A string: a 32-bit length, then UTF-8 bytes.
pub fn string(c: &mut Cursor, what: &str) -> Result<String> {
    let at = c.pos();
    let n = c.u32_le(what)?;
    let n = c.check_count(at, n as i64, what, 1)?;
    Ok(String::from_utf8_lossy(c.bytes(n, what)?).into_owned())
}

/// Where a page or an envelope is in the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Locator {
    pub offset: u64,
    /// Bytes stored (compressed), not counting a page's checksum.
    pub size: u64,
}

pub fn locator(c: &mut Cursor, what: &str) -> Result<Locator> {
    let at = c.pos();
    let head = c.i32_le(what)?;
    if head >= 0 {
        let offset = c.u64_le(what)?;
        return Ok(Locator {
            offset,
            size: head as u64,
        });
    }
    // A non-standard locator: negated, its type in bits 24..31 and its own size in bits 0..15.
    let head = head.unsigned_abs();
    let kind = (head >> 24) as i32;
    let own_size = (head & 0xFFFF) as usize;
    let mut payload = c.take(own_size.saturating_sub(4), what)?;
    if kind != LARGE_LOCATOR || own_size < 20 {
        return Err(c.error_at(
            at,
            format!("{what}: a file locator (standard, or large of 20 bytes), found type {kind} of {own_size} bytes"),
        ));
    }
    let size = payload.u64_le(what)?;
    let offset = payload.u64_le(what)?;
    Ok(Locator { offset, size })
}

/// An envelope's location and uncompressed length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EnvelopeLink {
    pub length: u64,
    pub locator: Locator,
}

pub fn envelope_link(c: &mut Cursor, what: &str) -> Result<EnvelopeLink> {
    let length = c.u64_le(what)?;
    Ok(EnvelopeLink {
        length,
        locator: locator(c, what)?,
    })
}

/// Feature flags: 64-bit words, continued while the top bit is set. Readers must refuse bits they
/// do not know; format 1.0 defines none.
pub fn feature_flags(c: &mut Cursor, what: &str) -> Result<()> {
    let mut word = 0;
    loop {
        let at = c.pos();
        let flags = c.u64_le(what)?;
        let bits = flags & !(1 << 63);
        if bits != 0 {
            let bit = word * 64 + bits.trailing_zeros();
            return Err(c.error_at(
                at,
                format!("{what} this reader knows (none), found feature {bit}"),
            ));
        }
        if flags >> 63 == 0 {
            return Ok(());
        }
        word += 1;
    }
}

/// Footer and page lists repeat the header's checksum: they must belong to the header read.
pub fn check_header_checksum(c: &mut Cursor, header_checksum: u64) -> Result<()> {
    let at = c.pos();
    let found = c.u64_le("the header checksum")?;
    if found != header_checksum {
        return Err(c.error_at(
            at,
            format!("the header's checksum {header_checksum:#018x} (an envelope of this RNTuple), found {found:#018x}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::writing::{self, frames::Out};
    use super::*;

    /// Test builders on the writer's frames.
    fn record(payload: &[u8]) -> Vec<u8> {
        let mut o = Out::default();
        o.record(|o| o.bytes.extend_from_slice(payload));
        o.bytes
    }

    fn list(items: &[Vec<u8>]) -> Vec<u8> {
        let mut o = Out::default();
        o.list(items.len(), |o| o.bytes.extend(items.concat()));
        o.bytes
    }

    fn envelope(kind: EnvelopeKind, payload: &[u8]) -> Vec<u8> {
        writing::frames::envelope(kind, |o| o.bytes.extend_from_slice(payload)).0
    }

    #[test]
    fn envelopes_check_type_length_and_checksum() {
        let env = envelope(EnvelopeKind::Footer, b"payload!");
        let (mut c, _) = open_envelope(&env, EnvelopeKind::Footer, "t").unwrap();
        assert_eq!(c.bytes(8, "p").unwrap(), b"payload!");
        assert!(open_envelope(&env, EnvelopeKind::Header, "t").is_err());
        for i in 0..env.len() {
            let mut bad = env.clone();
            bad[i] ^= 0x10;
            assert!(
                open_envelope(&bad, EnvelopeKind::Footer, "t").is_err(),
                "byte {i}"
            );
        }
        assert!(open_envelope(&env[..env.len() - 1], EnvelopeKind::Footer, "t").is_err());
    }

    #[test]
    fn frames_are_left_by_their_size() {
        // A record frame with a field this reader does not know, followed by more data.
        let mut data = record(&[1, 0, 0, 0, 9, 9, 9]);
        data.extend_from_slice(&7u32.to_le_bytes());
        let mut c = Cursor::new(&data, "t", 0);
        let mut inner = record_frame(&mut c, "r").unwrap();
        assert_eq!(inner.u32_le("x").unwrap(), 1);
        assert_eq!(c.u32_le("after").unwrap(), 7);

        let data = list(&[record(&[1]), record(&[2])]);
        let mut c = Cursor::new(&data, "t", 0);
        let (n, mut items) = list_frame(&mut c, "l", 8).unwrap();
        assert_eq!(n, 2);
        assert_eq!(record_frame(&mut items, "i").unwrap().u8("v").unwrap(), 1);
        assert_eq!(c.remaining(), 0);
    }

    #[test]
    fn hostile_frame_sizes_and_counts_are_errors() {
        let mut data = list(&[record(&[1])]);
        data[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(list_frame(&mut Cursor::new(&data, "t", 0), "l", 8).is_err());
        let mut data = record(&[1, 2]);
        data[..8].copy_from_slice(&(1i64 << 40).to_le_bytes());
        assert!(record_frame(&mut Cursor::new(&data, "t", 0), "r").is_err());
        data[..8].copy_from_slice(&3i64.to_le_bytes());
        assert!(record_frame(&mut Cursor::new(&data, "t", 0), "r").is_err());
        let data = list(&[]);
        assert!(record_frame(&mut Cursor::new(&data, "t", 0), "r").is_err());
    }

    #[test]
    fn standard_and_large_locators() {
        let mut data = 100i32.to_le_bytes().to_vec();
        data.extend_from_slice(&5000u64.to_le_bytes());
        let head = -(20i32 | (LARGE_LOCATOR << 24));
        data.extend_from_slice(&head.to_le_bytes());
        data.extend_from_slice(&(5u64 << 32).to_le_bytes());
        data.extend_from_slice(&77u64.to_le_bytes());
        let mut c = Cursor::new(&data, "t", 0);
        assert_eq!(
            locator(&mut c, "a").unwrap(),
            Locator {
                offset: 5000,
                size: 100
            }
        );
        assert_eq!(
            locator(&mut c, "b").unwrap(),
            Locator {
                offset: 77,
                size: 5 << 32
            }
        );
        let object = -(12i32 | (2 << 24));
        let data = [object.to_le_bytes().to_vec(), vec![0; 8]].concat();
        assert!(locator(&mut Cursor::new(&data, "t", 0), "c").is_err());
    }

    #[test]
    fn unknown_feature_flags_are_refused_by_number() {
        let data = [(1u64 << 63).to_le_bytes(), 4u64.to_le_bytes()].concat();
        let e = feature_flags(&mut Cursor::new(&data, "t", 0), "flags").unwrap_err();
        assert!(e.to_string().contains("feature 66"), "{e}");
        assert!(feature_flags(&mut Cursor::new(&0u64.to_le_bytes(), "t", 0), "f").is_ok());
    }
}
