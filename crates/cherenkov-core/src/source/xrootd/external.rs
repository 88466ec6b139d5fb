//! Servers that ask only for security protocols cherenkov does not speak (`gsi`, `krb5`, `pwd`):
//! their files are read through another XRootD client, registered here by whoever has one (the
//! Python bindings register XrdCl, from the `xrootd` package). The core never depends on it.
//!
//! The decision rests on what the URL's server asked for at its last login (`auth`'s memory of
//! it): after a native open fails there, or at once for a server already known to ask only for
//! such protocols (no native attempt: it would cost a connection and a login for nothing). A
//! redirector that lets us in with `unix` and sends the open to data servers asking for `gsi` is
//! not recognised (sites ask the same of both).

use super::auth::{known_protocols, Security};
use super::options::XrootdOptions;
use super::url::parse_url;
use crate::error::{Error, IoKind, Result};
use crate::source::redact::redact;
use crate::source::{Opened, SharedSource};
use futures_util::future::BoxFuture;
use std::sync::{Arc, RwLock};

/// Opens `url` through another client. Given the URL (secrets included: they are the server's),
/// the options, and the protocols the server asked for; answers the opened source or why not (a
/// message with no secret in it). The source's `name()` must say which client reads it.
pub type ExternalOpener = Arc<
    dyn Fn(
            &str,
            &XrootdOptions,
            &[String],
        ) -> BoxFuture<'static, Result<SharedSource, ExternalFailure>>
        + Send
        + Sync,
>;

/// Why another client failed: what it said, and the kind callers may handle apart (from its
/// status codes, not its text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalFailure {
    pub kind: IoKind,
    pub message: String,
}

impl From<String> for ExternalFailure {
    fn from(message: String) -> Self {
        ExternalFailure {
            kind: IoKind::Other,
            message,
        }
    }
}

/// The security protocols whose servers cherenkov opens itself.
const SPOKEN_NATIVELY: &[&str] = &["unix", "sss", "ztn"];

static OPENER: RwLock<Option<ExternalOpener>> = RwLock::new(None);

/// Register the client that opens files on servers asking for protocols cherenkov does not speak
/// (replacing any registered before).
pub fn set_external_opener(opener: ExternalOpener) {
    *OPENER.write().unwrap_or_else(|e| e.into_inner()) = Some(opener);
}

fn registered() -> Option<ExternalOpener> {
    OPENER.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// What the server of `url` asked for at its last login, when that leaves cherenkov nothing it
/// speaks: no `unix`, and some protocol another client may speak.
fn unspoken_protocols(url: &str) -> Option<Vec<String>> {
    let offered = known_protocols(&parse_url(url).ok()?.address())?;
    let others = offered
        .iter()
        .any(|p| !SPOKEN_NATIVELY.contains(&p.as_str()));
    (others && !offered.iter().any(|p| p == "unix")).then_some(offered)
}

/// Open `url` natively (see `open_discovering`), or through the registered external client when
/// its server asks only for protocols cherenkov does not speak. When that fails too, the error
/// says what the server offered (the native error) and what the other client answered.
pub async fn open(url: &str, options: XrootdOptions) -> Result<Opened> {
    let opener = registered();
    // A server also offering sss is tried natively first: a keytab may be found for it.
    let at_once = unspoken_protocols(url).filter(|offered| !offered.iter().any(|p| p == "sss"));
    if let (Some(opener), Some(offered)) = (&opener, at_once) {
        let address = parse_url(url).map(|e| e.address()).unwrap_or_default();
        let refusal = Security::default().cannot_authenticate(&address, &offered);
        let native = Error::io_of(
            IoKind::Forbidden,
            &redact(url),
            format!("cannot open: {refusal}"),
        );
        return through(opener, url, &options, &offered, native).await;
    }
    let native = match super::locate::open_discovering(url, options.clone()).await {
        Ok(source) => return Ok(source),
        Err(e) => e,
    };
    match (opener, unspoken_protocols(url)) {
        (Some(opener), Some(offered)) => through(&opener, url, &options, &offered, native).await,
        (None, Some(_)) => Err(adding(
            native,
            "other protocols are read through XrdCl, which is not available here (install the \
             Python package `xrootd` and open the file with cherenkov's Python module)",
        )),
        _ => Err(native),
    }
}

async fn through(
    opener: &ExternalOpener,
    url: &str,
    options: &XrootdOptions,
    offered: &[String],
    native: Error,
) -> Result<Opened> {
    match opener(url, options, offered).await {
        Ok(source) => Ok(Opened::plain(source)),
        // XrdCl tried last: its kind, when it told one, is the caller's.
        Err(said) => {
            let kind = match said.kind {
                IoKind::Other => native.io_kind(),
                told => told,
            };
            Err(adding(native, &format!("through XrdCl: {}", said.message)).of_kind(kind))
        }
    }
}

/// `error` with `more` said after its message.
fn adding(error: Error, more: &str) -> Error {
    error.map_io_message(|message| format!("{message}; {more}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::xrootd::auth::remember_protocols;

    #[test]
    fn only_servers_leaving_nothing_spoken_go_elsewhere() {
        let offering = |port: u16, offered: &[&str]| {
            let offered: Vec<String> = offered.iter().map(|p| p.to_string()).collect();
            remember_protocols(&format!("10.0.0.1:{port}"), &offered);
            unspoken_protocols(&format!("root://10.0.0.1:{port}//f.root"))
        };
        assert_eq!(
            offering(1, &["gsi", "krb5"]),
            Some(vec!["gsi".into(), "krb5".into()])
        );
        assert_eq!(
            offering(2, &["ztn", "gsi"]),
            Some(vec!["ztn".into(), "gsi".into()])
        );
        assert_eq!(offering(3, &["gsi", "unix"]), None);
        assert_eq!(offering(4, &["ztn"]), None);
        assert_eq!(
            unspoken_protocols("root://10.0.0.1:5//never-seen.root"),
            None
        );
    }

    #[test]
    fn more_is_said_after_the_native_message() {
        let e = adding(
            Error::io("root://h//f", "cannot open: h asks for gsi"),
            "through XrdCl: no",
        );
        assert_eq!(
            e.to_string(),
            "root://h//f: cannot open: h asks for gsi; through XrdCl: no"
        );
    }
}
