//! Logged-in connections kept for the next file on the same server. A dataset's files mostly live
//! on a few servers: a file opened on a connection its previous file left costs one round trip
//! (`kXR_open` with the query of the server's limits, and the `kXR_close` of the file the
//! connection had open, sent together), where a new connection costs two (TCP's, then the login
//! with the open), and the server sees one login per connection instead of one per file.
//!
//! Only plain `root://` connections to servers that asked for no authentication are kept: they
//! carry no identity but the user's name, so any file of the process may use them. A connection
//! waits at most [`IDLE_FOR`]; at most [`PER_SERVER`] wait per server.

use super::auth::known_protocols;
use super::connection::Connection;
use super::protocol::FileHandle;
use super::session::Session;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a connection waits for a next file (servers keep idle connections far longer).
const IDLE_FOR: Duration = Duration::from_secs(60);
/// Connections kept per server: as many as a merge opens files at once (`merging/schema.py`'s
/// 256), so that its next wave finds them all. Each waits with a socket and one open file.
const PER_SERVER: usize = 256;

struct Idle {
    conn: Connection,
    /// The file still open on it, closed when the connection is taken.
    open: FileHandle,
    since: Instant,
}

static IDLE: LazyLock<Mutex<HashMap<String, Vec<Idle>>>> = LazyLock::new(Mutex::default);

fn idle() -> MutexGuard<'static, HashMap<String, Vec<Idle>>> {
    IDLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keep the connection of a session whose file is done with, if it may serve another file.
pub(super) fn keep(session: Session) {
    let address = session.endpoint.address();
    let anonymous = known_protocols(&address).is_some_and(|offered| offered.is_empty());
    if session.endpoint.tls || !anonymous || !session.conn.is_alive() {
        return;
    }
    let mut idle = idle();
    let waiting = idle.entry(address).or_default();
    if waiting.len() < PER_SERVER {
        waiting.push(Idle {
            conn: session.conn,
            open: session.handle,
            since: Instant::now(),
        });
    }
}

/// A live connection to `address` kept by [`keep`], with the handle of the file still open on
/// it; connections waiting too long are dropped (closing them).
pub(super) fn take(address: &str) -> Option<(Connection, FileHandle)> {
    let mut idle = idle();
    let waiting = idle.get_mut(address)?;
    waiting.retain(|c| c.since.elapsed() < IDLE_FOR && c.conn.is_alive());
    let newest = waiting.pop()?;
    Some((newest.conn, newest.open))
}
