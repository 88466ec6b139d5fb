//! Directory listings: every entry's name, size and modification time in one `kXR_dirlist`
//! (with `kXR_dstat`), where opening each file for its size would cost the server an open and a
//! close per file. A dataset's glob over `root://` is expanded from it, and a merge learns its
//! inputs' sizes and versions from it before it opens them.

use super::options::XrootdOptions;
use super::protocol as proto;
use super::session::ask_about_path;
use super::url::parse_directory_url;
use crate::error::{Error, Result};

/// Largest listing accepted: about 200 000 entries of a dataset's file names. (The connection
/// reserves this much address space for the answer; pages are touched only as it arrives.)
const LISTING_MAX: usize = 16 << 20;

/// The entries of the directory `url` names (`root://host//dir`, or the server's top
/// `root://host//`), `.` and `..` left out, in the server's order.
pub async fn list_directory(url: &str, options: &XrootdOptions) -> Result<Vec<DirEntry>> {
    let body = ask_about_path(
        url,
        parse_directory_url,
        options,
        proto::dirlist_request,
        LISTING_MAX,
        "kXR_dirlist",
    );
    parse_dirlist(&body.await?).ok_or_else(|| {
        Error::io(
            &crate::source::redact::redact(url),
            "the server's kXR_dirlist answer carries no stat information (kXR_dstat) or is malformed",
        )
    })
}

/// The version a file's modification time makes, as an open of it reports (see
/// `XrootdSource::into_opened`): a listing and an open tell the same file apart the same way.
pub fn version_of(modified: u64) -> String {
    format!("mtime {modified}")
}

/// A stat answer's flag for a directory.
const KXR_ISDIR: u64 = 0x02;

/// One entry of a directory listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub size: u64,
    /// Modification time, seconds since the epoch (as the `kXR_open` answer's).
    pub modified: u64,
    pub is_dir: bool,
}

/// A `kXR_dirlist` answer with stat information: `".\n0 0 0 0\n"` (the server's sign that it
/// honoured `kXR_dstat`), then per entry its name and `"<id> <size> <flags> <mtime>"` on two
/// lines, the last ended by a null byte. None when the sign is missing (a server too old to send
/// stat information) or an entry is malformed.
fn parse_dirlist(body: &[u8]) -> Option<Vec<DirEntry>> {
    let text = std::str::from_utf8(body).ok()?.trim_end_matches('\0');
    let rest = match text.strip_prefix(".\n0 0 0 0") {
        Some(rest) if rest.is_empty() || rest.starts_with('\n') => rest,
        _ => return None,
    };
    let mut lines = rest.split('\n').filter(|line| !line.is_empty());
    let mut entries = Vec::new();
    while let Some(name) = lines.next() {
        let mut stat = lines.next()?.split_ascii_whitespace().skip(1);
        let mut number = || stat.next()?.parse::<u64>().ok();
        let (size, flags, modified) = (number()?, number()?, number()?);
        entries.push(DirEntry {
            name: name.to_string(),
            size,
            modified,
            is_dir: flags & KXR_ISDIR != 0,
        });
    }
    Some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirlist_answers_give_names_sizes_and_times() {
        let body = b".\n0 0 0 0\na.root\n4611 5000 16 1700000000\nsub\n4612 4096 18 1700000001\0";
        let entries = parse_dirlist(body).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(
            entries[0],
            DirEntry {
                name: "a.root".into(),
                size: 5000,
                modified: 1_700_000_000,
                is_dir: false
            }
        );
        assert!(entries[1].is_dir);
        assert_eq!(parse_dirlist(b".\n0 0 0 0\0"), Some(vec![]));
        // No stat information (an old server), a name without its stat line, a bad number.
        assert_eq!(parse_dirlist(b"a.root\nb.root\0"), None);
        assert_eq!(parse_dirlist(b".\n0 0 0 0\na.root\0"), None);
        assert_eq!(parse_dirlist(b".\n0 0 0 0\na.root\n1 x 16 3\0"), None);
        let request = proto::dirlist_request("/data");
        assert_eq!(
            (request.code, request.params[15]),
            (proto::KXR_DIRLIST, proto::KXR_DSTAT)
        );
    }
}
