//! The `Range:` request header and the `Content-Range:` answer header (RFC 9110, section 14).

use crate::source::ByteRange;
use std::fmt::Write;

/// `bytes=a-b,c-d` for non-empty ranges (HTTP range ends are inclusive).
pub fn range_header_value(ranges: &[ByteRange]) -> String {
    let mut value = String::with_capacity(6 + ranges.len() * 20);
    value.push_str("bytes=");
    for (i, r) in ranges.iter().enumerate() {
        if i > 0 {
            value.push(',');
        }
        let _ = write!(value, "{}-{}", r.offset, r.end() - 1);
    }
    value
}

/// Length that one range adds to the header value, separator included.
fn range_spec_len(r: &ByteRange) -> usize {
    decimal_len(r.offset) + 1 + decimal_len(r.end() - 1) + 1
}

fn decimal_len(mut n: u64) -> usize {
    let mut len = 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

/// Group non-empty ranges into requests so that each `Range:` value holds at most `max_ranges`
/// ranges and `max_header_bytes` bytes (a single range always fits: it is one request of its own).
pub fn plan_requests(
    ranges: &[ByteRange],
    max_ranges: usize,
    max_header_bytes: usize,
) -> Vec<Vec<ByteRange>> {
    let max_ranges = max_ranges.max(1);
    let mut requests = Vec::new();
    let mut current: Vec<ByteRange> = Vec::new();
    let mut current_len = "bytes=".len();
    for r in ranges {
        let add = range_spec_len(r);
        if !current.is_empty()
            && (current.len() >= max_ranges || current_len + add > max_header_bytes + 1)
        {
            requests.push(std::mem::take(&mut current));
            current_len = "bytes=".len();
        }
        // The last range of a value carries no separator: hence the `+ 1` above.
        current_len += add;
        current.push(*r);
    }
    if !current.is_empty() {
        requests.push(current);
    }
    requests
}

/// A parsed `Content-Range` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentRange {
    /// `bytes a-b/total` (`total` is `None` for `*`).
    Bytes {
        range: ByteRange,
        total: Option<u64>,
    },
    /// `bytes */total`, sent with 416.
    Unsatisfied { total: u64 },
}

/// Parse `bytes a-b/N`, `bytes a-b/*` or `bytes */N`; `None` for anything else.
pub fn parse_content_range(value: &str) -> Option<ContentRange> {
    let rest = value.trim().strip_prefix("bytes")?;
    let rest = rest.trim_start_matches([' ', '\t']);
    let (span, total) = rest.split_once('/')?;
    let total = match total.trim() {
        "*" => None,
        t => Some(parse_decimal(t)?),
    };
    if span.trim() == "*" {
        return total.map(|total| ContentRange::Unsatisfied { total });
    }
    let (first, last) = span.trim().split_once('-')?;
    let (first, last) = (parse_decimal(first)?, parse_decimal(last)?);
    if last < first || total.is_some_and(|t| last >= t) {
        return None;
    }
    let range = ByteRange::new(first, (last - first).checked_add(1)?);
    Some(ContentRange::Bytes { range, total })
}

fn parse_decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_uses_inclusive_ends() {
        let v = range_header_value(&[ByteRange::new(0, 1), ByteRange::new(100, 50)]);
        assert_eq!(v, "bytes=0-0,100-149");
    }

    #[test]
    fn plan_respects_range_count_and_header_length() {
        let ranges: Vec<ByteRange> = (0..1000)
            .map(|i| ByteRange::new(i * 1_000_000, 500))
            .collect();
        for (max_ranges, max_bytes) in [(7, 100_000), (10_000, 300), (50, 1000), (1, 10)] {
            let plan = plan_requests(&ranges, max_ranges, max_bytes);
            assert_eq!(plan.concat(), ranges, "every range once, in order");
            for req in &plan {
                assert!(req.len() <= max_ranges);
                let len = range_header_value(req).len();
                assert!(req.len() == 1 || len <= max_bytes, "{len} > {max_bytes}");
            }
        }
        // The budget is used: a request is only cut when the next range would not fit.
        let plan = plan_requests(&ranges, 10_000, 300);
        for pair in plan.windows(2) {
            let joined: Vec<ByteRange> = [&pair[0][..], &pair[1][..1]].concat();
            assert!(range_header_value(&joined).len() > 300);
        }
    }

    #[test]
    fn content_range_forms() {
        assert_eq!(
            parse_content_range("bytes 0-0/1234"),
            Some(ContentRange::Bytes {
                range: ByteRange::new(0, 1),
                total: Some(1234)
            })
        );
        assert_eq!(
            parse_content_range("bytes 10-19/*"),
            Some(ContentRange::Bytes {
                range: ByteRange::new(10, 10),
                total: None
            })
        );
        assert_eq!(
            parse_content_range("bytes */99"),
            Some(ContentRange::Unsatisfied { total: 99 })
        );
        for bad in [
            "",
            "bytes",
            "bytes 5-4/10",
            "bytes 0-10/10",
            "bytes -1-5/10",
            "items 0-1/10",
            "bytes 0-1",
            "bytes 0-99999999999999999999/1",
            "bytes */*",
            "bytes +1-2/10",
        ] {
            assert_eq!(parse_content_range(bad), None, "{bad:?}");
        }
    }
}
