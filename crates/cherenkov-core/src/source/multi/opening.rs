//! Opening replicas in parallel, read as the first listed one that opens: a replica that cannot
//! be opened (refused, 404, stalled) or holds another file is reported and left out, never the
//! cause of a failed open, and never the one whose values are read because it answered first.
//!
//! The set is made once the first listed replica that opens has answered, and every replica
//! listed before it has failed, whatever order they answer in: its bytes are the file. Replicas
//! listed after it join if they hold the same file, at once for those that answered already
//! (they serve reads, the opening's included, only from then on), the others as they answer; one
//! that differs is never read. A redirector's replicas are listed in its order (see
//! `xrootd::open_discovering`).
//!
//! "The same file" is checked on what is cheap: the size, and the bytes of the file's head and tail
//! that opening reads anyway ([`MultiOptions::compare`]; for ROOT the header with the file's UUID,
//! the keys list and the trees' metadata). HTTP brings them with the answer that gives the size;
//! other protocols read them once per replica. The first replica's copy is then what the
//! engine opens the file from (`ByteSource::opening_reads`): it costs the first no extra request.

use super::checksum::agreed_checksum;
use super::replica::{Replica, DROPPED, OPENING};
use super::{MultiOptions, MultiSource, Opening, ReplicaReport};
use crate::error::{Error, IoKind, Result};
use crate::source::{slice_from_fetched, ByteRange, Opened, OpeningHint, SharedSource};
use bytes::Bytes;
use std::sync::Arc;

/// An opened replica with the head and tail it is compared on.
type Compared = (SharedSource, Vec<(ByteRange, Bytes)>);

impl MultiSource {
    /// Open `openings`, listed in order of preference, at once; the set is the first listed one
    /// that opens (and whose head and tail can be read), made as soon as that is known, and the
    /// others join it if they hold the same file. Fails only when none opens, with an error
    /// naming what each one answered.
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
                    Ok(opened) => compared_regions(&opened, options.compare)
                        .await
                        .map(|regions| (opened.source, regions)),
                    Err(e) => Err(e),
                };
                let _ = tx.send((i, opened));
            });
        }
        drop(tx);
        let mut answers: Vec<Option<Result<Compared>>> = names.iter().map(|_| None).collect();
        let chosen = loop {
            if let Some(chosen) = first_opened(&answers) {
                break chosen;
            }
            let Some((i, opened)) = rx.recv().await else {
                return Err(none_opened(name, &names, answers));
            };
            answers[i] = Some(opened);
        };
        let Some(Ok((source, regions))) = answers[chosen].take() else {
            unreachable!("first_opened names an opened replica");
        };
        let mut multi = MultiSource::new(vec![source], options).await?;
        multi.name = name.to_string();
        multi.opening = regions;
        multi.order = names.clone();
        let mut answered = Vec::new();
        for (i, answer) in answers
            .into_iter()
            .enumerate()
            .filter(|(i, _)| *i != chosen)
        {
            let error = match &answer {
                Some(Err(e)) => Some(e.to_string()),
                _ => None,
            };
            multi.unjoined.lock().unwrap().push(ReplicaReport {
                state: if error.is_some() { DROPPED } else { OPENING }.to_string(),
                last_error: error,
                disabled: true,
                ..ReplicaReport::new(&names[i])
            });
            if let Some(Ok(opened)) = answer {
                answered.push((i, opened));
            }
        }
        // Those that answered before the first listed one: compared now, before any read.
        for (i, (source, regions)) in answered {
            let outcome = multi.join(source, &regions).await;
            multi.joined(&names[i], outcome.err());
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

    /// Add one more replica (a finder's, a redirector's late answer), which must hold the same
    /// file: compared on its head and tail too when the set compares them; returns its index.
    pub async fn add_replica(&self, source: SharedSource) -> Result<usize> {
        let regions = match self.opening.is_empty() {
            true => Vec::new(),
            false => compared_regions(&Opened::plain(source.clone()), self.options.compare).await?,
        };
        self.join(source, &regions).await
    }

    /// Add a replica if it holds the same file: the same size, the same bytes in the regions
    /// compared, the same checksum when verified; returns its index.
    async fn join(&self, source: SharedSource, regions: &[(ByteRange, Bytes)]) -> Result<usize> {
        let size = source.size();
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
        if let Some(expected) = &self.checksum {
            let got = agreed_checksum(source.name(), std::slice::from_ref(&source)).await?;
            if &got != expected {
                return Err(Error::io(
                    source.name(),
                    format!("this replica has checksum {got}, the others {expected}"),
                ));
            }
        }
        let mut replicas = self.replicas.write().unwrap();
        replicas.push(Arc::new(Replica::new(source)));
        Ok(replicas.len() - 1)
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
async fn compared_regions(opened: &Opened, hint: OpeningHint) -> Result<Vec<(ByteRange, Bytes)>> {
    let source = &opened.source;
    let size = source.size();
    let head = ByteRange::new(0, hint.head.min(size));
    let tail_start = size.saturating_sub(hint.tail).max(head.end());
    let tail = ByteRange::new(tail_start, size - tail_start);
    let wanted: Vec<ByteRange> = [head, tail].into_iter().filter(|r| r.len > 0).collect();
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let mut held: Vec<(ByteRange, Bytes)> = opened.reads.clone();
    held.sort_by_key(|(r, _)| r.offset);
    let (fetched, buffers): (Vec<ByteRange>, Vec<Bytes>) = held.into_iter().unzip();
    let buffers = match slice_from_fetched(&wanted, &fetched, &buffers) {
        Some(buffers) => buffers,
        None => source.read_ranges(&wanted).await?,
    };
    Ok(wanted.into_iter().zip(buffers).collect())
}

/// The first listed replica that opened, once every one listed before it has failed.
fn first_opened<T>(answers: &[Option<Result<T>>]) -> Option<usize> {
    for (i, answer) in answers.iter().enumerate() {
        match answer {
            Some(Ok(_)) => return Some(i),
            Some(Err(_)) => continue,
            None => return None,
        }
    }
    None
}

/// The error when no replica opened, naming what each one answered, in their order; missing (or
/// refused, or silent) everywhere is that, for the caller.
fn none_opened(name: &str, names: &[String], answers: Vec<Option<Result<Compared>>>) -> Error {
    let failed: Vec<(usize, Error)> = answers
        .into_iter()
        .enumerate()
        .filter_map(|(i, answer)| answer.and_then(Result::err).map(|e| (i, e)))
        .collect();
    let listing = failed
        .iter()
        .map(|(i, e)| format!("{}: {e}", names[*i]))
        .collect::<Vec<_>>()
        .join("; ");
    let kind = IoKind::common(failed.iter().map(|(_, e)| e.io_kind()));
    Error::io_of(kind, name, format!("no replica could be opened: {listing}"))
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
    fn the_set_waits_for_every_replica_listed_before_the_first_that_opened() {
        let ok = || Some(Ok(()));
        let failed = || Some(Err(Error::io("r", "refused")));
        assert_eq!(first_opened::<()>(&[None, ok()]), None);
        assert_eq!(first_opened(&[failed(), None, ok()]), None);
        assert_eq!(first_opened(&[failed(), ok(), None]), Some(1));
        assert_eq!(first_opened(&[ok(), failed()]), Some(0));
        assert_eq!(first_opened::<()>(&[failed(), failed()]), None);
    }

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
