//! Opening replicas in parallel: the first that opens makes the set, the others join as they
//! open, if they hold the same file; a replica that cannot be opened (refused, 404, stalled) or
//! holds another file is reported and left out, never the cause of a failed open.
//!
//! "The same file" is checked on what is cheap: the size, and the bytes of the file's head and tail
//! that opening reads anyway ([`MultiOptions::compare`]; for ROOT the header with the file's UUID,
//! the keys list and the trees' metadata). HTTP brings them with the answer that gives the size;
//! other protocols read them once per replica. The first replica's copy is then what the
//! engine opens the file from (`ByteSource::opening_reads`): it costs the first no extra request.

use super::replica::{DROPPED, OPENING};
use super::{MultiOptions, MultiSource, Opening, ReplicaReport};
use crate::error::{Error, IoKind, Result};
use crate::source::{slice_from_fetched, ByteRange, OpeningHint, SharedSource};
use bytes::Bytes;
use std::sync::Arc;

impl MultiSource {
    /// Open `openings` at once; the first that opens (and whose head and tail can be read) makes
    /// the set, returned at once; the others join it as they open. Fails only when none opens,
    /// with an error naming what each one answered.
    pub async fn open_first(
        name: &str,
        openings: Vec<Opening>,
        options: MultiOptions,
    ) -> Result<Arc<MultiSource>> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let names: Vec<String> = openings.iter().map(|(n, _)| n.clone()).collect();
        for (i, (_, opening)) in openings.into_iter().enumerate() {
            let tx = tx.clone();
            tokio::spawn(async move {
                let opened = match opening.await {
                    Ok(source) => compared_regions(&source, options.compare)
                        .await
                        .map(|regions| (source, regions)),
                    Err(e) => Err(e),
                };
                let _ = tx.send((i, opened));
            });
        }
        drop(tx);
        let mut failed: Vec<(usize, Error)> = Vec::new();
        let (first, (source, regions)) = loop {
            match rx.recv().await {
                Some((i, Ok(opened))) => break (i, opened),
                Some((i, Err(e))) => failed.push((i, e)),
                None => {
                    let listing = failed
                        .iter()
                        .map(|(i, e)| format!("{}: {e}", names[*i]))
                        .collect::<Vec<_>>()
                        .join("; ");
                    // Missing (or refused, or silent) everywhere is that, for the caller.
                    let kind = IoKind::common(failed.iter().map(|(_, e)| e.io_kind()));
                    return Err(Error::io_of(
                        kind,
                        name,
                        format!("no replica could be opened: {listing}"),
                    ));
                }
            }
        };
        let mut multi = MultiSource::new(vec![source], options).await?;
        multi.name = name.to_string();
        multi.opening = regions;
        multi.order = names.clone();
        for (i, n) in names.iter().enumerate().filter(|(i, _)| *i != first) {
            let error = failed.iter().find(|(f, _)| *f == i).map(|(_, e)| e);
            multi.unjoined.lock().unwrap().push(ReplicaReport {
                state: if error.is_some() { DROPPED } else { OPENING }.to_string(),
                last_error: error.map(|e| e.to_string()),
                disabled: true,
                ..ReplicaReport::new(n)
            });
        }
        let multi = Arc::new(multi);
        let joining = Arc::downgrade(&multi);
        tokio::spawn(async move {
            while let Some((i, opened)) = rx.recv().await {
                let Some(multi) = joining.upgrade() else {
                    return;
                };
                let outcome = match opened {
                    Ok((source, regions)) => multi.join(source, &regions).await,
                    Err(e) => Err(e),
                };
                multi.joined(&names[i], outcome.err());
            }
        });
        Ok(multi)
    }

    /// Add a replica opened after the set was made, if it holds the same file.
    async fn join(&self, source: SharedSource, regions: &[(ByteRange, Bytes)]) -> Result<()> {
        let size = source.size().await?;
        if size != self.size {
            return Err(Error::io(
                source.name(),
                format!("this replica has {size} bytes, the others {}", self.size),
            ));
        }
        if let Some(offset) = first_difference(&self.opening, regions) {
            let reference = self.replica(0).source.name().to_string();
            return Err(Error::io(
                source.name(),
                format!(
                    "not the same file as {reference}: they differ at byte {offset}, in the \
                     file's head or tail (where its identity and index are), though both have \
                     {} bytes",
                    self.size
                ),
            ));
        }
        self.add_replica(source).await.map(|_| ())
    }

    /// Move `name` out of the replicas still opening: in use, or dropped for `error`.
    fn joined(&self, name: &str, error: Option<Error>) {
        let mut unjoined = self.unjoined.lock().unwrap();
        let Some(at) = unjoined
            .iter()
            .position(|r| r.name == name && r.state == OPENING)
        else {
            return;
        };
        match error {
            None => {
                unjoined.remove(at);
            }
            Some(e) => {
                unjoined[at].state = DROPPED.to_string();
                unjoined[at].last_error = Some(e.to_string());
            }
        }
    }
}

/// The regions of `hint` (head and tail) of `source`'s file: from what opening read when it holds
/// them, else read now.
async fn compared_regions(
    source: &SharedSource,
    hint: OpeningHint,
) -> Result<Vec<(ByteRange, Bytes)>> {
    let size = source.size().await?;
    let head = ByteRange::new(0, hint.head.min(size));
    let tail_start = size.saturating_sub(hint.tail).max(head.end());
    let tail = ByteRange::new(tail_start, size - tail_start);
    let wanted: Vec<ByteRange> = [head, tail].into_iter().filter(|r| r.len > 0).collect();
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let mut held: Vec<(ByteRange, Bytes)> = source.opening_reads();
    held.sort_by_key(|(r, _)| r.offset);
    let (fetched, buffers): (Vec<ByteRange>, Vec<Bytes>) = held.into_iter().unzip();
    let buffers = match slice_from_fetched(&wanted, &fetched, &buffers) {
        Some(buffers) => buffers,
        None => source.read_ranges(&wanted).await?,
    };
    Ok(wanted.into_iter().zip(buffers).collect())
}

/// The first file offset where two replicas' regions (same ranges) hold different bytes.
fn first_difference(a: &[(ByteRange, Bytes)], b: &[(ByteRange, Bytes)]) -> Option<u64> {
    for ((range, x), (other, y)) in a.iter().zip(b) {
        if range != other {
            return Some(range.offset.min(other.offset));
        }
        if let Some(k) = x.iter().zip(y.iter()).position(|(p, q)| p != q) {
            return Some(range.offset + k as u64);
        }
        if x.len() != y.len() {
            return Some(range.offset + x.len().min(y.len()) as u64);
        }
    }
    (a.len() != b.len()).then_some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_differing_byte_is_named() {
        let r = |offset, data: &'static [u8]| {
            (
                ByteRange::new(offset, data.len() as u64),
                Bytes::from_static(data),
            )
        };
        let a = [r(0, b"root"), r(100, b"keys")];
        assert_eq!(first_difference(&a, &a), None);
        assert_eq!(
            first_difference(&a, &[r(0, b"root"), r(100, b"kexs")]),
            Some(102)
        );
        assert_eq!(first_difference(&a, &[r(0, b"root")]), Some(0));
    }
}
