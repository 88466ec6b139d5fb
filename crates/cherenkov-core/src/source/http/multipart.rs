//! Parsing a `206 multipart/byteranges` answer (RFC 9110, section 14.6).
//!
//! Each part's data is skipped by the length its own `Content-Range` gives, never by searching for
//! the boundary: file bytes may contain the boundary string by chance.

use super::range_header::{parse_content_range, ContentRange};
use crate::source::ByteRange;
use bytes::Bytes;
use memchr::memmem;

/// Room allowed per part for multipart headers and boundaries when bounding an answer's size.
pub const PART_OVERHEAD: u64 = 512;
/// One part of the answer: which bytes of the file it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub range: ByteRange,
    /// The file size the part announced (`None` for `*`).
    pub total: Option<u64>,
    pub data: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MultipartError {
    /// The body ends before the closing boundary: the answer was cut short.
    Truncated(String),
    /// The body is not a well-formed `multipart/byteranges`.
    Malformed(String),
}

/// Most headers one part may carry (servers send two or three).
const MAX_PART_HEADERS: usize = 16;
/// Longest header block of one part that is worth waiting for.
const MAX_PART_HEADER_BYTES: usize = 8192;
/// Boundaries are at most 70 characters (RFC 2046); allow some slack for odd servers.
const MAX_BOUNDARY_LEN: usize = 200;

/// The boundary of a `multipart/byteranges` content type, or `None` for any other type.
pub fn boundary_from_content_type(content_type: &str) -> Option<String> {
    let mut params = content_type.split(';');
    let mime = params.next()?.trim();
    if !mime.eq_ignore_ascii_case("multipart/byteranges") {
        return None;
    }
    for param in params {
        let Some((key, value)) = param.split_once('=') else {
            continue;
        };
        if key.trim().eq_ignore_ascii_case("boundary") {
            let value = value.trim();
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(value);
            if value.is_empty() || value.len() > MAX_BOUNDARY_LEN {
                return None;
            }
            return Some(value.to_string());
        }
    }
    None
}

/// Split `body` into its parts. At most `max_parts` parts are accepted.
pub fn parse_byteranges(
    body: &Bytes,
    boundary: &str,
    max_parts: usize,
) -> Result<Vec<Part>, MultipartError> {
    let delimiter = format!("--{boundary}").into_bytes();
    let mut pos = first_delimiter_end(body, &delimiter)?;
    let mut parts = Vec::new();
    loop {
        let rest = &body[pos..];
        if rest.starts_with(b"--") {
            return Ok(parts); // closing delimiter; anything after it is an epilogue
        }
        if rest.len() < 2 {
            return Err(truncated(parts.len()));
        }
        // Transport padding (spaces, tabs) may follow a delimiter, then the line ends.
        let padding = rest
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        pos += padding
            + line_break_len(&body[pos + padding..]).ok_or_else(|| {
                if pos + padding >= body.len() {
                    truncated(parts.len())
                } else {
                    malformed(format!(
                        "no line break after boundary of part {}",
                        parts.len() + 1
                    ))
                }
            })?;

        if parts.len() >= max_parts {
            return Err(malformed(format!(
                "more than the {max_parts} parts asked for"
            )));
        }
        let (header_len, content_range) = parse_part_headers(&body[pos..], parts.len() + 1)?;
        pos += header_len;
        let (range, total) = match content_range {
            Some(ContentRange::Bytes { range, total }) => (range, total),
            _ => {
                return Err(malformed(format!(
                    "part {} has no valid Content-Range header",
                    parts.len() + 1
                )))
            }
        };
        let len = usize::try_from(range.len).unwrap_or(usize::MAX);
        if body.len() - pos < len {
            return Err(truncated(parts.len()));
        }
        parts.push(Part {
            range,
            total,
            data: body.slice(pos..pos + len),
        });
        pos += len;

        // The data must be followed by a line break and the next delimiter.
        let rest = &body[pos..];
        let Some(eol) = line_break_len(rest) else {
            return Err(if rest.len() < 2 {
                truncated(parts.len())
            } else {
                malformed(format!(
                    "part {} is longer than its Content-Range says",
                    parts.len()
                ))
            });
        };
        let after = &rest[eol..];
        if after.len() < delimiter.len() && delimiter.starts_with(after) {
            return Err(truncated(parts.len()));
        }
        if !after.starts_with(&delimiter) {
            return Err(malformed(format!(
                "part {} is longer than its Content-Range says",
                parts.len()
            )));
        }
        pos += eol + delimiter.len();
    }
}

/// Where the first delimiter line ends. The preamble holds no file data, so searching is safe.
fn first_delimiter_end(body: &[u8], delimiter: &[u8]) -> Result<usize, MultipartError> {
    let mut from = 0;
    while let Some(found) = memmem::find(&body[from..], delimiter) {
        let at = from + found;
        if at == 0 || body[at - 1] == b'\n' {
            return Ok(at + delimiter.len());
        }
        from = at + 1;
    }
    Err(if body.len() < delimiter.len() + 2 {
        MultipartError::Truncated("the body ends before the first boundary".into())
    } else {
        malformed("the boundary announced in Content-Type does not occur".into())
    })
}

fn line_break_len(bytes: &[u8]) -> Option<usize> {
    if bytes.starts_with(b"\r\n") {
        Some(2)
    } else if bytes.starts_with(b"\n") {
        Some(1)
    } else {
        None
    }
}

/// Parse one part's header block; returns its length (blank line included) and its Content-Range.
fn parse_part_headers(
    bytes: &[u8],
    part_number: usize,
) -> Result<(usize, Option<ContentRange>), MultipartError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_PART_HEADERS];
    match httparse::parse_headers(bytes, &mut headers) {
        Ok(httparse::Status::Complete((len, headers))) => {
            let content_range = headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-range"))
                .and_then(|h| std::str::from_utf8(h.value).ok())
                .and_then(parse_content_range);
            Ok((len, content_range))
        }
        Ok(httparse::Status::Partial) if bytes.len() < MAX_PART_HEADER_BYTES => {
            Err(MultipartError::Truncated(format!(
                "the body ends inside the headers of part {part_number}"
            )))
        }
        Ok(httparse::Status::Partial) => Err(malformed(format!(
            "the headers of part {part_number} never end"
        ))),
        Err(e) => Err(malformed(format!("bad headers in part {part_number}: {e}"))),
    }
}

fn truncated(complete_parts: usize) -> MultipartError {
    MultipartError::Truncated(format!(
        "the body ends after {complete_parts} complete parts"
    ))
}

fn malformed(message: String) -> MultipartError {
    MultipartError::Malformed(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body the way nginx writes it.
    fn body(boundary: &str, parts: &[(u64, &[u8])], total: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for (offset, data) in parts {
            out.extend_from_slice(format!("\r\n--{boundary}\r\n").as_bytes());
            out.extend_from_slice(b"Content-Type: application/octet-stream\r\n");
            let last = offset + data.len() as u64 - 1;
            out.extend_from_slice(
                format!("Content-Range: bytes {offset}-{last}/{total}\r\n\r\n").as_bytes(),
            );
            out.extend_from_slice(data);
        }
        out.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        out
    }

    #[test]
    fn boundary_is_read_from_content_type() {
        assert_eq!(
            boundary_from_content_type("multipart/byteranges; boundary=00000000001").as_deref(),
            Some("00000000001")
        );
        assert_eq!(
            boundary_from_content_type("Multipart/ByteRanges;charset=x; Boundary=\"a b\"")
                .as_deref(),
            Some("a b")
        );
        assert_eq!(
            boundary_from_content_type("multipart/mixed; boundary=x"),
            None
        );
        assert_eq!(boundary_from_content_type("multipart/byteranges"), None);
        assert_eq!(boundary_from_content_type("application/octet-stream"), None);
    }

    #[test]
    fn parts_are_read_by_length_even_if_data_holds_the_boundary() {
        let tricky: &[u8] = b"xx\r\n--BOUND\r\nContent-Range: bytes 0-1/9\r\n\r\n";
        let raw = Bytes::from(body(
            "BOUND",
            &[(5, b"hello"), (100, tricky), (20, b"!")],
            1000,
        ));
        let parts = parse_byteranges(&raw, "BOUND", 10).unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0].range, ByteRange::new(5, 5));
        assert_eq!(&parts[0].data[..], b"hello");
        assert_eq!(&parts[1].data[..], tricky);
        assert_eq!(parts[2].range, ByteRange::new(20, 1));
        assert_eq!(parts[2].total, Some(1000));
    }

    #[test]
    fn preamble_padding_and_bare_newlines_are_accepted() {
        let raw = b"preamble\n--B  \nContent-Range: bytes 3-5/10\n\nabc\n--B--".to_vec();
        let parts = parse_byteranges(&Bytes::from(raw), "B", 10).unwrap();
        assert_eq!(parts.len(), 1);
        assert_eq!(&parts[0].data[..], b"abc");
    }

    #[test]
    fn every_cut_of_the_body_is_truncated_never_wrong() {
        let full = body("XYZ", &[(0, b"0123456789"), (50, b"abcdef")], 100);
        for cut in 0..full.len() - 2 {
            let raw = Bytes::copy_from_slice(&full[..cut]);
            match parse_byteranges(&raw, "XYZ", 10) {
                Err(MultipartError::Truncated(_)) => {}
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
    }

    #[test]
    fn inconsistent_bodies_are_malformed() {
        let ok = String::from_utf8(body("B", &[(0, b"abcd")], 10)).unwrap();
        let cases = [
            ok.replace("bytes 0-3", "bytes 0-2"), // data longer than announced
            ok.replace("Content-Range", "X-Range"), // no Content-Range
            ok.replace("bytes 0-3/10", "bytes 0-3/2"), // range past the announced size
            ok.replace("--B", "--C"),             // another boundary
        ];
        for case in cases {
            let raw = Bytes::from(case.clone());
            assert!(
                matches!(
                    parse_byteranges(&raw, "B", 10),
                    Err(MultipartError::Malformed(_))
                ),
                "{case:?}"
            );
        }
        let two = Bytes::from(body("B", &[(0, b"a"), (5, b"b")], 10));
        assert!(matches!(
            parse_byteranges(&two, "B", 1),
            Err(MultipartError::Malformed(_))
        ));
    }

    #[test]
    fn huge_announced_lengths_do_not_allocate() {
        let raw = Bytes::from(
            "--B\r\nContent-Range: bytes 0-18446744073709551613/18446744073709551615\r\n\r\nab"
                .to_string(),
        );
        assert!(matches!(
            parse_byteranges(&raw, "B", 10),
            Err(MultipartError::Truncated(_))
        ));
    }
}
