//! One file staged: its bytes read in order with several reads in flight, written in order under
//! a temporary name beside the final one, checked (size, and the server's checksum where it keeps
//! one), then renamed into place. The temporary file only ever holds a prefix of the file, so a
//! copy interrupted at any point resumes from its length; its name carries the source's identity
//! (URL, size and version), so a file changed on the server starts over instead.

use super::checksum::{self, Running};
use super::{Progress, StageOptions, Staged, Verified};
use crate::error::{Error, Result};
use crate::source::{self, ByteRange, SharedSource};
use bytes::Bytes;
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::hash::Hasher;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tokio::task::JoinHandle;

/// Where a copy in progress is kept: `.NAME.IDENTITY.cherenkov-stage` beside `dest`.
fn partial_path(dest: &Path, identity: u64) -> PathBuf {
    let name = dest.file_name().unwrap_or_default().to_string_lossy();
    dest.with_file_name(format!(".{name}.{identity:016x}{PARTIAL_SUFFIX}"))
}

const PARTIAL_SUFFIX: &str = ".cherenkov-stage";

/// Copies of `dest` in progress from other versions of its source: they can never complete.
fn remove_stale_partials(dest: &Path, keep: &Path) {
    let (Some(dir), Some(name)) = (dest.parent(), dest.file_name()) else {
        return;
    };
    let prefix = format!(".{}.", name.to_string_lossy());
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let file_name = entry.file_name().to_string_lossy().to_string();
        let stale = file_name.starts_with(&prefix)
            && file_name.ends_with(PARTIAL_SUFFIX)
            && entry.path() != keep;
        if stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A read of the file, running on its own while the ones before it are written.
struct PendingRead {
    offset: u64,
    task: JoinHandle<Result<Vec<Bytes>>>,
}

/// Reads still running are cancelled with the copy.
struct InFlight(VecDeque<PendingRead>);

impl Drop for InFlight {
    fn drop(&mut self) {
        for read in &self.0 {
            read.task.abort();
        }
    }
}

/// Stage the file whose replicas are `urls` to `dest`.
pub async fn copy(
    urls: &[String],
    dest: &Path,
    options: &StageOptions,
    progress: &Progress,
) -> Result<Staged> {
    let began = Instant::now();
    let name = urls.join(" | ");
    let done = |copied, resumed_from, bytes, verified| Staged {
        source: source::redact::redact(&name),
        path: dest.to_path_buf(),
        bytes,
        copied,
        resumed_from,
        verified,
        seconds: began.elapsed().as_secs_f64(),
    };
    if let Ok(meta) = std::fs::metadata(dest) {
        // Only a complete, checked copy is ever given the final name.
        progress.add_total(meta.len());
        progress.add_done(meta.len());
        return Ok(done(0, 0, meta.len(), Verified::Earlier));
    }
    let opened = source::open_replicas(urls, &options.source).await?;
    let source = opened.source.clone();
    let size = source.size();
    let mut identity = twox_hash::XxHash3_64::default();
    for part in [
        source::redact::redact(source.name()).as_bytes(),
        &size.to_le_bytes(),
        opened.version.as_deref().unwrap_or_default().as_bytes(),
    ] {
        identity.write(&(part.len() as u64).to_le_bytes());
        identity.write(part);
    }
    let partial = partial_path(dest, identity.finish());
    remove_stale_partials(dest, &partial);
    let io = |what: &str, e: std::io::Error| Error::io_caused(&partial.to_string_lossy(), what, e);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&partial)
        .map_err(|e| io("cannot create", e))?;
    let resumed_from = file
        .metadata()
        .map_err(|e| io("cannot stat", e))?
        .len()
        .min(size);
    file.set_len(resumed_from)
        .map_err(|e| io("cannot truncate", e))?;
    progress.add_total(size);
    progress.add_done(resumed_from);

    // The server's checksum is asked for beside the first reads; the copy's is computed as it is
    // written (from the start: what an earlier run wrote is read back), in each algorithm the
    // server may name.
    let server_checksum = options.verify.then(|| {
        let source = source.clone();
        tokio::spawn(async move { source.checksum().await })
    });
    let mut hashers: Vec<Running> = match options.verify {
        true => ["adler32", "zcrc32"]
            .iter()
            .filter_map(|a| Running::of(a))
            .collect(),
        false => Vec::new(),
    };
    if !hashers.is_empty() && resumed_from > 0 {
        blocking(|| hash_prefix(&file, resumed_from, &mut hashers))
            .map_err(|e| io("cannot read back", e))?;
    }

    let chunk = options.chunk_bytes.max(1);
    let mut next = resumed_from;
    let mut in_flight = InFlight(VecDeque::new());
    let start_read = |offset: u64| {
        let len = chunk.min(size - offset);
        let source: SharedSource = source.clone();
        PendingRead {
            offset,
            task: tokio::spawn(
                async move { source.read_ranges(&[ByteRange::new(offset, len)]).await },
            ),
        }
    };
    while next < size && in_flight.0.len() < options.reads_in_flight.max(1) {
        in_flight.0.push_back(start_read(next));
        next += chunk.min(size - next);
    }
    while let Some(read) = in_flight.0.pop_front() {
        let bytes = read
            .task
            .await
            .map_err(|e| Error::io_caused(&name, "read task failed", e))??;
        let bytes = source::join(bytes);
        if next < size {
            in_flight.0.push_back(start_read(next));
            next += chunk.min(size - next);
        }
        for h in &mut hashers {
            h.update(&bytes);
        }
        // Written before the next await: a cancelled copy never leaves a write half done, so its
        // temporary file always ends at a read's end.
        let (offset, len) = (read.offset, bytes.len() as u64);
        blocking(|| file.write_all_at(&bytes, offset))
            .map_err(|e| io(&format!("writing {len} bytes at offset {offset}"), e))?;
        progress.add_done(len);
    }

    blocking(|| file.sync_data()).map_err(|e| io("cannot store", e))?;
    let written = file.metadata().map_err(|e| io("cannot stat", e))?.len();
    if written != size {
        return Err(Error::io(
            &name,
            format!(
                "copied {written} bytes of {size} into {}",
                partial.display()
            ),
        ));
    }
    let verified = match server_checksum {
        None => Verified::Size,
        Some(asked) => {
            let answer = match asked
                .await
                .map_err(|e| Error::io_caused(&name, "checksum task failed", e))?
            {
                Ok(answer) => answer,
                // Asked again once, now that the copy is done: a server still computing the
                // checksum for an earlier client (a stage killed and run again) refuses
                // meanwhile (XRootD: kXR_ServerError "Program failed").
                Err(_) => source.checksum().await?,
            };
            verify(&name, answer.as_deref(), &hashers, &partial)?
        }
    };
    if options.direct_io {
        crate::source::direct::drop_cached(&file);
    }
    drop(file);
    std::fs::rename(&partial, dest)
        .map_err(|e| io(&format!("cannot rename to {}", dest.display()), e))?;
    progress.file_done();
    Ok(done(size - resumed_from, resumed_from, size, verified))
}

/// Disk work from the copy's task: other tasks move to another thread meanwhile.
fn blocking<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// Feed the first `len` bytes of `file` to the hashers.
fn hash_prefix(file: &File, len: u64, hashers: &mut [Running]) -> std::io::Result<()> {
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file.take(len));
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        match reader.read(&mut buffer)? {
            0 => return Ok(()),
            n => hashers.iter_mut().for_each(|h| h.update(&buffer[..n])),
        }
    }
}

/// The copy against the server's checksum; a mismatch removes the copy (its bytes are wrong
/// somewhere, so resuming it would keep them).
fn verify(
    name: &str,
    server: Option<&str>,
    hashers: &[Running],
    partial: &Path,
) -> Result<Verified> {
    let Some(server) = server else {
        return Ok(Verified::Size);
    };
    let Some((algorithm, expected)) = checksum::parse(server) else {
        return Ok(Verified::SizeOnly(format!(
            "the server's checksum '{server}' is not read here"
        )));
    };
    let Some(ours) = Running::of(&algorithm).and_then(|kind| {
        hashers
            .iter()
            .find(|h| std::mem::discriminant(*h) == std::mem::discriminant(&kind))
    }) else {
        return Ok(Verified::SizeOnly(format!(
            "{algorithm} is not computed here"
        )));
    };
    let got = ours.value();
    if got != expected {
        let _ = std::fs::remove_file(partial);
        return Err(Error::io(
            name,
            format!("the copy's {algorithm} is {got:08x}, the server's {expected:08x}: removed"),
        ));
    }
    Ok(Verified::Checksum(algorithm))
}
