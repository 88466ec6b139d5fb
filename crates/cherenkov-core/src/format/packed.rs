//! `Double32_t` and `Float16_t`: numbers ROOT stores in fewer bytes than they are read in, as the
//! range and bit count in the member's comment (`//[xmin,xmax,nbits]`) say. Mirrors
//! TStreamerElement::GetRange and TBufferFile::ReadDouble32/ReadFloat16.

use super::array::DType;

/// How one packed number is stored.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Packing {
    /// A 4-byte float (Double32_t without a range), widened to double.
    Float,
    /// A 4-byte unsigned integer scaled into the range: `raw / factor + min`.
    Scaled { factor: f64, min: f64 },
    /// An exponent byte and a 16-bit mantissa of which `bits` are kept (the sign above them).
    Truncated { bits: u32 },
}

// Streamer type codes of the packed types.
pub const K_DOUBLE32: i32 = 9;
pub const K_FLOAT16: i32 = 19;

impl Packing {
    /// The packing of streamer type `code` (without array offsets) whose element has `title`,
    /// and the type it is read as; `None` for other types.
    pub fn of(code: i32, title: &str) -> Option<(Packing, DType)> {
        let (factor, min) = range(title);
        let packing = if factor != 0.0 {
            Packing::Scaled { factor, min }
        } else {
            // Without a range, ROOT keeps the bit count in xmin (0 when none was given).
            match (code, min as u32) {
                (K_DOUBLE32, 0) => Packing::Float,
                (K_FLOAT16, 0) => Packing::Truncated { bits: 12 },
                (_, bits) => Packing::Truncated { bits },
            }
        };
        match code {
            K_DOUBLE32 => Some((packing, DType::F64)),
            K_FLOAT16 => Some((packing, DType::F32)),
            _ => None,
        }
    }

    /// Bytes of one stored number.
    pub fn stored_size(self) -> usize {
        match self {
            Packing::Float | Packing::Scaled { .. } => 4,
            Packing::Truncated { .. } => 3,
        }
    }

    /// Decode big-endian stored numbers into native-endian `dtype` (F32 or F64) values appended
    /// to `out`; a trailing partial number is ignored (callers check sizes).
    pub fn decode(self, dtype: DType, src: &[u8], out: &mut Vec<u8>) {
        let push = |out: &mut Vec<u8>, v: f64| match dtype {
            DType::F32 => out.extend_from_slice(&(v as f32).to_ne_bytes()),
            _ => out.extend_from_slice(&v.to_ne_bytes()),
        };
        for item in src.chunks_exact(self.stored_size()) {
            let v = match self {
                Packing::Float => f32::from_be_bytes(item.try_into().unwrap()) as f64,
                // ROOT divides by the factor (TBufferFile::ReadWithFactor); multiplying by its
                // inverse, as uproot does, differs in the last bit.
                Packing::Scaled { factor, min } => {
                    u32::from_be_bytes(item.try_into().unwrap()) as f64 / factor + min
                }
                Packing::Truncated { bits } => {
                    let exponent = item[0] as u32;
                    let mantissa = u16::from_be_bytes([item[1], item[2]]) as u32;
                    let bits = bits.min(22);
                    let mut word = exponent << 23;
                    word |= (mantissa & ((1 << (bits + 1)) - 1)) << (23 - bits);
                    let mut f = f32::from_bits(word);
                    if (1 << (bits + 1)) & mantissa != 0 {
                        f = -f;
                    }
                    f as f64
                }
            };
            push(out, v);
        }
    }
}

/// (factor, xmin) from a comment holding `[xmin,xmax]` or `[xmin,xmax,nbits]` (a first bracket
/// without a comma is an array dimension); when there is no range but fewer than 15 bits, xmin
/// carries the bit count (ROOT's convention) and the factor is 0.
fn range(title: &str) -> (f64, f64) {
    let Some(inside) = bracket_with_comma(title) else {
        return (0.0, 0.0);
    };
    let parts: Vec<&str> = inside.split(',').collect();
    let mut bits = 32u32;
    if let Some(b) = parts.get(2) {
        bits = b.trim().parse().unwrap_or(32);
        if !(2..=32).contains(&bits) {
            bits = 32;
        }
    }
    let (xmin, xmax) = (bound(parts[0]), bound(parts[1]));
    let big = if bits < 32 {
        (1u64 << bits) as f64
    } else {
        u32::MAX as f64
    };
    if xmin < xmax {
        (big / (xmax - xmin), xmin)
    } else if bits < 15 {
        (0.0, bits as f64 + 0.1)
    } else {
        (0.0, xmin)
    }
}

/// The contents of the first `[...]` with a comma in it, looking at most at two brackets.
fn bracket_with_comma(title: &str) -> Option<&str> {
    let mut rest = title;
    for _ in 0..2 {
        let open = rest.find('[')?;
        let close = open + rest[open..].find(']')?;
        let inside = &rest[open + 1..close];
        if inside.contains(',') {
            return Some(inside);
        }
        rest = &rest[close + 1..];
    }
    None
}

/// A range bound: a number, or a multiple of pi as ROOT spells them.
fn bound(text: &str) -> f64 {
    let t = text.trim().to_ascii_lowercase().replace(' ', "");
    if !t.contains("pi") {
        return t.parse().unwrap_or(0.0);
    }
    let pi = std::f64::consts::PI;
    let v = if t.contains("2pi") || t.contains("2*pi") || t.contains("twopi") {
        2.0 * pi
    } else if t.contains("pi/2") {
        pi / 2.0
    } else if t.contains("pi/4") {
        pi / 4.0
    } else {
        pi
    };
    if t.contains('-') {
        -v
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_give_root_s_ranges() {
        assert_eq!(
            Packing::of(K_DOUBLE32, "no range"),
            Some((Packing::Float, DType::F64))
        );
        assert_eq!(
            Packing::of(K_FLOAT16, "x"),
            Some((Packing::Truncated { bits: 12 }, DType::F32))
        );
        assert_eq!(
            Packing::of(K_DOUBLE32, "[0,0,10]"),
            Some((Packing::Truncated { bits: 10 }, DType::F64))
        );
        let (Packing::Scaled { factor, min }, _) =
            Packing::of(K_DOUBLE32, "[3] [-pi, pi, 16]").unwrap()
        else {
            panic!("a range")
        };
        assert_eq!(min, -std::f64::consts::PI);
        assert_eq!(factor, 65536.0 / (2.0 * std::f64::consts::PI));
    }

    #[test]
    fn scaled_numbers_decode_into_their_range() {
        let mut out = Vec::new();
        Packing::Scaled {
            factor: 2.0,
            min: 1.0,
        }
        .decode(DType::F64, &[0, 0, 0, 4, 0, 0], &mut out);
        assert_eq!(out, 3.0f64.to_ne_bytes());
    }
}
