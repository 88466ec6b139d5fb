//! The `ROOT::RNTuple` anchor: the key object that says where an RNTuple's header and footer are.
//! Streamed like a classic object (big-endian, byte count and class version first), followed by
//! the XXH3-64 of its fields. Later class versions may only append fields before the checksum.

use super::envelope::xxh3;
use crate::error::Result;
use crate::format::cursor::Cursor;

/// The anchor's size in class version 2 (the first release), checksum included.
const MIN_ANCHOR_LEN: usize = 78;
/// The byte count and the class version are not checksummed.
const UNCHECKED_PREFIX: usize = 6;
/// The only epoch of the released format.
const EPOCH: u16 = 1;
/// The anchor's class version since the first release (`ClassDef(RNTuple, 2)`).
pub const CLASS_VERSION: u16 = 2;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Anchor {
    /// Epoch, major, minor, patch.
    pub version: [u16; 4],
    pub seek_header: u64,
    pub nbytes_header: u64,
    pub len_header: u64,
    pub seek_footer: u64,
    pub nbytes_footer: u64,
    pub len_footer: u64,
    /// Payloads larger than this are split over several keys (see `blob.rs`).
    pub max_key_size: u64,
}

impl Anchor {
    /// Parse the anchor from its key's (uncompressed) object bytes.
    pub fn parse(object: &[u8], origin: &str) -> Result<Anchor> {
        let mut c = Cursor::new(object, origin, 0);
        if object.len() < MIN_ANCHOR_LEN {
            return Err(c.error(format!(
                "an RNTuple anchor of at least {MIN_ANCHOR_LEN} bytes, found {}",
                object.len()
            )));
        }
        let checked = &object[UNCHECKED_PREFIX..object.len() - 8];
        let stored = u64::from_be_bytes(object[object.len() - 8..].try_into().unwrap());
        let computed = xxh3(checked);
        if stored != computed {
            return Err(c.error_at(
                object.len() - 8,
                format!("the anchor's XXH3-64 checksum {stored:#018x}, computed {computed:#018x}"),
            ));
        }
        c.skip(UNCHECKED_PREFIX)?;
        let mut version = [0u16; 4];
        for v in &mut version {
            *v = c.u16("the format version")?;
        }
        if version[0] != EPOCH {
            return Err(c.error_at(
                UNCHECKED_PREFIX,
                format!(
                    "RNTuple format epoch {EPOCH} (1.x.x.x), found version {}.{}.{}.{}",
                    version[0], version[1], version[2], version[3]
                ),
            ));
        }
        let mut field = |what: &str| c.i64(what).map(|v| v as u64);
        Ok(Anchor {
            version,
            seek_header: field("fSeekHeader")?,
            nbytes_header: field("fNBytesHeader")?,
            len_header: field("fLenHeader")?,
            seek_footer: field("fSeekFooter")?,
            nbytes_footer: field("fNBytesFooter")?,
            len_footer: field("fLenFooter")?,
            max_key_size: field("fMaxKeySize")?,
        })
    }

    pub fn version_string(&self) -> String {
        let [a, b, c, d] = self.version;
        format!("{a}.{b}.{c}.{d}")
    }
}

#[cfg(test)]
mod tests {
    use super::super::writing::anchor::anchor_object;
    use super::*;

    fn sample() -> Anchor {
        Anchor {
            version: [1, 0, 0, 1],
            seek_header: 302,
            nbytes_header: 167,
            len_header: 263,
            seek_footer: 762,
            nbytes_footer: 82,
            len_footer: 148,
            max_key_size: 1 << 30,
        }
    }

    #[test]
    fn round_trips_and_checks_its_checksum() {
        let bytes = anchor_object(&sample());
        assert_eq!(bytes.len(), MIN_ANCHOR_LEN);
        // ROOT's byte count covers the version and the fields, not the checksum.
        assert_eq!(bytes[..6], [0x40, 0, 0, 66, 0, 2]);
        assert_eq!(Anchor::parse(&bytes, "t").unwrap(), sample());
        for i in UNCHECKED_PREFIX..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            assert!(Anchor::parse(&bad, "t").is_err(), "byte {i}");
        }
        assert!(Anchor::parse(&bytes[..60], "t").is_err());
    }

    #[test]
    fn other_epochs_are_refused() {
        let mut a = sample();
        a.version = [0, 2, 0, 0];
        let e = Anchor::parse(&anchor_object(&a), "t").unwrap_err();
        assert!(e.to_string().contains("0.2.0.0"), "{e}");
    }
}
