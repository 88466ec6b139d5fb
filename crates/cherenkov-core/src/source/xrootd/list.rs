//! Directory listings: every entry's name, size and modification time in one `kXR_dirlist`
//! (with `kXR_dstat`), where opening each file for its size would cost the server an open and a
//! close per file. A dataset's glob over `root://` is expanded from it, and a merge learns its
//! inputs' sizes and versions from it before it opens them.

use super::options::XrootdOptions;
use super::protocol::{self as proto, DirEntry};
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
    proto::parse_dirlist(&body.await?).ok_or_else(|| {
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
