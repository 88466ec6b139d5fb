//! Checksums computed here as servers compute theirs, to verify a copy against the server's:
//! XRootD answers `kXR_query` checksum with `<algorithm> <hex value>` (`adler32`, WLCG's usual
//! one, and zlib's CRC-32, `zcrc32`; XRootD's `crc32` is the POSIX `cksum`, another algorithm).

/// A running checksum of one of the algorithms computed here.
pub enum Running {
    Adler32(adler2::Adler32),
    Zcrc32(crc32fast::Hasher),
}

impl Running {
    /// A checksum of `algorithm` as the server names it, when it is computed here.
    pub fn of(algorithm: &str) -> Option<Running> {
        match algorithm.to_ascii_lowercase().as_str() {
            "adler32" => Some(Running::Adler32(adler2::Adler32::new())),
            "zcrc32" => Some(Running::Zcrc32(crc32fast::Hasher::new())),
            _ => None,
        }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Running::Adler32(a) => a.write_slice(bytes),
            Running::Zcrc32(c) => c.update(bytes),
        }
    }

    pub fn value(&self) -> u32 {
        match self {
            Running::Adler32(a) => a.checksum(),
            Running::Zcrc32(c) => c.clone().finalize(),
        }
    }
}

/// A server's checksum (`<algorithm> <value>`) as the algorithm and its value; `None` when the
/// value is not a 32-bit hexadecimal number.
pub fn parse(server: &str) -> Option<(String, u32)> {
    let (algorithm, value) = server.trim().split_once(char::is_whitespace)?;
    let value = u32::from_str_radix(value.trim().trim_start_matches("0x"), 16).ok()?;
    Some((algorithm.to_string(), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // Adler-32 of "Wikipedia" is 0x11E60398 (RFC 1950's example, as Wikipedia gives it).
        let mut a = Running::of("adler32").unwrap();
        a.update(b"Wiki");
        a.update(b"pedia");
        assert_eq!(a.value(), 0x11E6_0398);
        // CRC-32 (zlib) of "123456789" is the check value 0xCBF43926.
        let mut c = Running::of("ZCRC32").unwrap();
        c.update(b"123456789");
        assert_eq!(c.value(), 0xCBF4_3926);
        assert!(Running::of("md5").is_none());
        assert_eq!(
            parse("adler32 11e60398"),
            Some(("adler32".into(), 0x11E6_0398))
        );
        assert_eq!(parse("adler32 nothex"), None);
    }
}
