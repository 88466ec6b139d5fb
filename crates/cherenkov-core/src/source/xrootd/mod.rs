//! XRootD files (`root://`, `roots://` over TLS), spoken natively: no XRootD client library.
//!
//! Opening costs two round trips: TCP connect; then handshake, protocol, login, `kXR_open` (with
//! `kXR_retstat`, so the size comes back with it) and a `kXR_query` for the server's vector-read
//! limits, sent together. A file opened on a connection an earlier file of the process left costs
//! one (see `pool`). `roots://` adds TLS's own round trip and nothing more (see `tls`), a
//! `ztn` token none (it goes with the login, see `auth`). Several connections are opened at once.
//!
//! A read of many ranges becomes `kXR_readv` requests that respect the server's limits
//! (`readv_iov_max` ranges, `readv_ior_max` bytes each, under 2^31 - 1 bytes in all), all sent at
//! once over the connections; a read of N ranges within the limits is one request and one round
//! trip. Each answer is checked element by element against what was asked.
//!
//! Failures: `kXR_wait` is honoured (for at most the request timeout in all), `kXR_redirect` is
//! followed (at most `max_redirects` times, logging in and opening the file again there), a lost or
//! silent connection is replaced and the read sent again (on the schedule of `source::retry`), and a
//! `kXR_error` becomes an error naming the URL, the ranges and the server's message.
//!
//! A server asking only for security protocols spoken elsewhere (`gsi`, `krb5`) is read through
//! the client registered in `external` (XrdCl, by the Python bindings), if any.

mod auth;
mod connection;
mod dispatch;
pub mod external;
mod file;
mod keytab;
mod list;
mod locate;
mod options;
mod pool;
mod protocol;
mod reply;
mod session;
mod sss;
mod streams;
mod tls;
mod url;

pub use self::file::XrootdSource;
pub use self::list::{list_directory, version_of, DirEntry};
pub use self::locate::{locate, open_discovering, open_excluding, RedirectorFinder};
pub use self::options::XrootdOptions;
pub use self::protocol::error_kind;
