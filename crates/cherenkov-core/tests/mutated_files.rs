//! Bad input never panics, hangs, allocates without bound or returns inconsistent arrays: a few
//! thousand damaged copies of the small files in ../shared/testdata (bit flips, overwritten bytes,
//! truncation, insertions and deletions, garbage behind a valid magic, and hostile sizes, counts
//! and seeks written into the header, the top directory, key headers, compression headers and
//! basket headers, and in RNTuples the anchor, the envelopes' preambles and every count-like word
//! of uncompressed header, footer and page list envelopes) are opened, listed and read
//! completely, TTrees and RNTuples alike (the seeds include the ROOT-written RNTuples of
//! tests/data and the TTrees cherenkov's writer wrote there). Each outcome must be Ok with
//! consistent arrays, or an error naming the file and what was expected.
//!
//! Guards: every case runs under `catch_unwind` (a panic names the case); a case that takes more
//! than 2 s of CPU fails (CPU, not wall time: a loaded machine stretches the latter); a watchdog
//! thread aborts with the case's name if one case runs too long or the process grows past 2 GiB;
//! a counting allocator reports the largest single allocation each case asked for.

mod support;

use cherenkov_core::engine::file::RootFile;
use cherenkov_core::engine::ntuple::{Ntuple, ANCHOR_CLASS};
use cherenkov_core::engine::runtime;
use cherenkov_core::engine::table::{read, Held, Table};
use cherenkov_core::engine::tree::{read_branches, TreeTable};
use cherenkov_core::format::array::Array;
use cherenkov_core::format::cursor::Cursor;
use cherenkov_core::format::directory::{DirectoryRecord, FileHeader};
use cherenkov_core::Error;
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{shared_testdata as testdata, Random, TempDir};

/// Cases per run; set CHERENKOV_MUTANTS to run more (or fewer).
const CASES: usize = 4000;
/// Seeds larger than this would make the run slow without finding more, except uncompressed
/// files: only in those can a mutation reach the counts inside the TTree and streamer objects.
const MAX_SEED_BYTES: u64 = 100 << 10;
/// No case may ask for more than this in one allocation: the seeds are under 1 MiB, so anything
/// near this size was sized by a corrupt field.
const MAX_SINGLE_ALLOCATION: usize = 64 << 20;
/// Beyond this the allocator aborts at once, naming the case (the allocation would fail anyway).
const ABORT_ALLOCATION: usize = 4 << 30;
const MAX_RSS: u64 = 2 << 30;
const MAX_CASE_TIME: Duration = Duration::from_secs(30);

// ---- guards: counting allocator and watchdog ----

struct CountingAllocator;

static LARGEST_ALLOCATION: AtomicUsize = AtomicUsize::new(0);
/// The case being run, for messages written when the process must abort.
static CURRENT_CASE: Mutex<String> = Mutex::new(String::new());

fn note_allocation(size: usize) {
    LARGEST_ALLOCATION.fetch_max(size, Ordering::Relaxed);
    if size > ABORT_ALLOCATION {
        abort_naming_case("asked for more than 4 GiB in one allocation");
    }
}

/// Write without allocating (this runs inside the allocator) and abort.
fn abort_naming_case(why: &str) -> ! {
    let mut err = std::io::stderr();
    let _ = err.write_all(b"\nmutated_files: ");
    if let Ok(case) = CURRENT_CASE.try_lock() {
        let _ = err.write_all(case.as_bytes());
    }
    let _ = err.write_all(b": ");
    let _ = err.write_all(why.as_bytes());
    let _ = err.write_all(b"\n");
    std::process::abort();
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation(new_size);
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// CPU time of the whole process (every thread): a case that loops burns it, while a loaded
/// machine stretches only its wall time.
fn process_cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Aborts (naming the case) when a case hangs or the process balloons: neither can be caught.
struct Watchdog {
    done: &'static AtomicBool,
    case_started_ms: &'static AtomicU64,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn start(t0: Instant) -> Self {
        static DONE: AtomicBool = AtomicBool::new(false);
        static CASE_STARTED_MS: AtomicU64 = AtomicU64::new(0);
        DONE.store(false, Ordering::SeqCst);
        let thread = std::thread::spawn(move || {
            while !DONE.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(100));
                let running =
                    t0.elapsed().as_millis() as u64 - CASE_STARTED_MS.load(Ordering::SeqCst);
                if running > MAX_CASE_TIME.as_millis() as u64 {
                    abort_naming_case("ran for more than 30 s (a hang)");
                }
                if resident_bytes() > MAX_RSS {
                    abort_naming_case("made the process grow past 2 GiB");
                }
            }
        });
        Self {
            done: &DONE,
            case_started_ms: &CASE_STARTED_MS,
            thread: Some(thread),
        }
    }

    fn case_started(&self, t0: Instant) {
        self.case_started_ms
            .store(t0.elapsed().as_millis() as u64, Ordering::SeqCst);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

// ---- deterministic mutations ----

/// A pristine file and the offsets of its 4-byte size, count and seek fields.
struct Seed {
    name: String,
    bytes: Vec<u8>,
    fields: Vec<usize>,
}

/// Values that make sizes, counts and seeks absurd (negative, huge, just past the end).
fn hostile_values(file_len: usize) -> [u32; 8] {
    [
        0x7FFF_FFFF,
        0xFFFF_FFFF,
        0x8000_0000,
        0x4000_0000 | 0x3FFF_FFFF, // a byte count with the flag bit and a huge count
        0,
        1,
        file_len as u32,
        file_len as u32 + 1,
    ]
}

/// Apply mutation number `case` to `seed`; returns the bytes and a description to reproduce it.
fn mutate(seed: &Seed, case: usize) -> (Vec<u8>, String) {
    let mut rng = Random::new(case as u64 ^ 0x5EED_0000);
    let mut data = seed.bytes.clone();
    let len = data.len();
    let at = |rng: &mut Random, len: usize| rng.index(len.max(1));
    let what = match rng.index(100) {
        0..=19 => {
            let n = 1 + rng.index(8);
            for _ in 0..n {
                let pos = at(&mut rng, len);
                data[pos] ^= 1 << rng.index(8);
            }
            format!("{n} bit flips")
        }
        20..=34 => {
            let pos = at(&mut rng, len);
            let n = (1 + rng.index(16)).min(len - pos);
            let random = rng.next() as u8;
            let value = rng.pick(&[0x00, 0xFF, 0x7F, random]);
            data[pos..pos + n].fill(value);
            format!("{n} bytes at {pos} set to {value:#04x}")
        }
        35..=44 => {
            let cut = at(&mut rng, len);
            data.truncate(cut);
            format!("truncated to {cut} bytes")
        }
        45..=51 => {
            let pos = at(&mut rng, len);
            let n = 1 + rng.index(16);
            let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            data.splice(pos..pos, junk);
            format!("{n} bytes inserted at {pos}")
        }
        52..=58 => {
            let pos = at(&mut rng, len);
            let n = (1 + rng.index(16)).min(len - pos);
            data.drain(pos..pos + n);
            format!("{n} bytes deleted at {pos}")
        }
        59..=88 => {
            let pos = rng.pick(&seed.fields);
            let value = rng.pick(&hostile_values(len));
            write_u32(&mut data, pos, value);
            format!("hostile field at {pos} set to {value:#010x}")
        }
        89..=95 => {
            let pos = at(&mut rng, len) & !3;
            let value = rng.pick(&hostile_values(len));
            write_u32(&mut data, pos, value);
            format!("word at {pos} set to {value:#010x}")
        }
        96..=97 => {
            let n = rng.index(4096);
            data = b"root".to_vec();
            data.extend((0..n).map(|_| rng.next() as u8));
            format!("'root' and {n} random bytes")
        }
        _ => {
            data.clear();
            "zero length".to_string()
        }
    };
    (data, format!("case {case}: {} with {what}", seed.name))
}

fn write_u32(data: &mut [u8], pos: usize, value: u32) {
    for (i, b) in value.to_be_bytes().into_iter().enumerate() {
        if let Some(slot) = data.get_mut(pos + i) {
            *slot = b;
        }
    }
}

fn read_u16(data: &[u8], pos: usize) -> Option<usize> {
    Some(u16::from_be_bytes(data.get(pos..pos + 2)?.try_into().ok()?) as usize)
}

/// Offsets of the fields worth making hostile, found by reading the pristine file.
fn field_offsets(path: &Path, bytes: &[u8]) -> Vec<usize> {
    let mut fields = Vec::new();
    let Ok(header) = FileHeader::parse(bytes) else {
        return fields;
    };
    // fBEGIN, fEND, fSeekFree, fNbytesFree, nfree, fNbytesName, fCompress, fSeekInfo, fNbytesInfo
    // (8-byte seeks in large files: both halves).
    if header.version >= 1_000_000 {
        fields.extend([8, 12, 16, 20, 24, 28, 32, 36, 41, 45, 49, 53]);
    } else {
        fields.extend([8, 12, 16, 20, 24, 28, 33, 37, 41]);
    }
    let top = header.top_directory_offset() as usize;
    // fNbytesKeys, fNbytesName, fSeekDir, fSeekParent, fSeekKeys (and high halves).
    fields.extend([10, 14, 18, 22, 26, 30, 34, 38].map(|f| top + f));
    let mut keys = vec![header.seek_info as usize];
    if let Some(record) = bytes
        .get(top..)
        .and_then(|b| DirectoryRecord::parse(&mut Cursor::new(b, "file", top as u64)).ok())
    {
        keys.push(record.seek_keys as usize);
    }
    let file = std::sync::Arc::new(
        runtime()
            .block_on(RootFile::open_url(
                path.to_str().unwrap(),
                &Default::default(),
            ))
            .expect("the pristine seed opens"),
    );
    let listed = runtime().block_on(file.all_keys()).unwrap_or_default();
    for (key_path, key) in &listed {
        keys.push(key.seek_key as usize);
        if key.class_name != "TTree" {
            continue;
        }
        let Ok(tree) = runtime().block_on(file.tree(&format!("{key_path};{}", key.cycle))) else {
            continue;
        };
        for branch in &tree.branches {
            for basket in &branch.baskets {
                let seek = basket.seek as usize;
                keys.push(seek);
                // fNevBufSize, fNevBuf, fLast: the last fields of a basket's key header.
                if let Some(keylen) = read_u16(bytes, seek + 14) {
                    fields.extend([13, 9, 5].map(|back| (seek + keylen).saturating_sub(back)));
                }
            }
        }
    }
    for (key_path, key) in listed.iter().filter(|(_, k)| k.class_name == ANCHOR_CLASS) {
        let path = format!("{key_path};{}", key.cycle);
        let Ok(ntuple) = runtime().block_on(Ntuple::open(file.clone(), &path)) else {
            continue;
        };
        // The anchor object: versions, seeks, sizes, lengths, max key size, checksum.
        let object = key.seek_key as usize + key.keylen as usize;
        fields.extend((object..object + key.objlen as usize).step_by(2));
        let a = &ntuple.anchor;
        let mut envelopes = vec![
            (a.seek_header, a.nbytes_header, a.len_header),
            (a.seek_footer, a.nbytes_footer, a.len_footer),
        ];
        for g in &ntuple.desc.groups {
            let link = &g.page_list;
            envelopes.push((link.locator.offset, link.locator.size, link.length));
        }
        for (seek, stored, len) in envelopes {
            let (seek, end) = (seek as usize, (seek + stored) as usize);
            // The preamble (type and length) and, in uncompressed envelopes, every little-endian
            // word that looks like a count, size or frame length.
            fields.extend([0, 2, 4].map(|f| seek + f));
            if stored == len {
                for pos in seek..end.min(bytes.len()).saturating_sub(4) {
                    let word = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap());
                    if word > 0 && word < 1_000_000 || word > 0xFFFF_0000 {
                        fields.push(pos);
                    }
                }
            }
        }
    }
    for seek in keys {
        // fNbytes, fObjlen, fKeylen and fCycle, fSeekKey, fSeekPdir.
        fields.extend([0, 6, 14, 18, 22].map(|f| seek + f));
        // The compressed and uncompressed sizes of the first compression block.
        if let Some(keylen) = read_u16(bytes, seek + 14) {
            fields.extend([3, 6].map(|f| seek + keylen + f));
        }
    }
    // Inside uncompressed metadata objects (TTree, streamer infos, keys lists), every word that
    // looks like a count, size, version or byte count is a field worth making hostile.
    for (_, key) in listed.iter().filter(|(_, k)| !k.is_compressed()) {
        let start = key.seek_key as usize + key.keylen as usize;
        let end = (key.seek_key as usize + key.nbytes as usize).min(bytes.len());
        for pos in start..end.saturating_sub(4) {
            let word = u32::from_be_bytes(bytes[pos..pos + 4].try_into().unwrap());
            if word < 1_000_000 && word > 0 || word & 0xFF00_0000 == 0x4000_0000 {
                fields.push(pos);
            }
        }
    }
    fields.retain(|&f| f + 4 <= bytes.len());
    fields.sort_unstable();
    fields.dedup();
    fields
}

/// The files committed with the tests: ROOT-written RNTuples (types uproot's writer cannot
/// write) and TTrees and an RNTuple written by cherenkov's writer (tests/data/make_written.py).
fn committed_seeds() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.to_string_lossy();
            name.contains("rntuple") || name.contains("written")
        })
        .collect()
}

fn seeds(dir: &Path) -> Vec<Seed> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .chain(committed_seeds())
        .filter(|p| p.extension().is_some_and(|e| e == "root"))
        .filter(|p| {
            p.metadata().unwrap().len() <= MAX_SEED_BYTES
                || p.to_string_lossy().contains("uncompressed")
        })
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            Seed {
                name: p.to_string_lossy().into_owned(),
                fields: field_offsets(&p, &bytes),
                bytes,
            }
        })
        .collect()
}

// ---- reading a mutant and judging the outcome ----

#[derive(Default)]
struct Tally {
    opened: usize,
    trees: usize,
    branches_read: usize,
    ntuples: usize,
    fields_read: usize,
    errors: usize,
}

/// Open, list, and read every branch of every tree; returns what went wrong (empty: all fine).
fn exercise(path: &str, tally: &mut Tally) -> Vec<String> {
    let mut problems = Vec::new();
    let judge = |e: &Error, tally: &mut Tally, problems: &mut Vec<String>| {
        tally.errors += 1;
        problems.extend(judge_error(e, path));
    };
    let file = match runtime().block_on(RootFile::open_url(path, &Default::default())) {
        Ok(f) => std::sync::Arc::new(f),
        Err(e) => {
            judge(&e, tally, &mut problems);
            return problems;
        }
    };
    tally.opened += 1;
    let keys = match runtime().block_on(file.all_keys()) {
        Ok(k) => k,
        Err(e) => {
            judge(&e, tally, &mut problems);
            return problems;
        }
    };
    for (key_path, key) in keys.iter().filter(|(_, k)| k.class_name == "TTree") {
        let tree = match runtime().block_on(file.tree(&format!("{key_path};{}", key.cycle))) {
            Ok(t) => t,
            Err(e) => {
                judge(&e, tally, &mut problems);
                continue;
            }
        };
        tally.trees += 1;
        let bounds = tree.cluster_boundaries();
        if bounds.first() != Some(&0) || bounds.last() != Some(&tree.entries) {
            problems.push(format!("cluster boundaries not 0..{}", tree.entries));
        }
        let table = TreeTable::new(file.clone(), std::sync::Arc::new(tree.clone()));
        for b in 0..tree.branches.len() {
            match runtime().block_on(read_branches(&table, &[b], 0, tree.entries)) {
                Ok((arrays, _)) => {
                    tally.branches_read += 1;
                    if let Some(p) = inconsistency(arrays.iter().map(|a| &a.array), tree.entries) {
                        problems.push(format!("branch {}: {p}", tree.branch_path(b)));
                    }
                }
                Err(e) => judge(&e, tally, &mut problems),
            }
        }
    }
    for (key_path, key) in keys.iter().filter(|(_, k)| k.class_name == ANCHOR_CLASS) {
        let path = format!("{key_path};{}", key.cycle);
        let ntuple = match runtime().block_on(Ntuple::open(file.clone(), &path)) {
            Ok(n) => Arc::new(n),
            Err(e) => {
                judge(&e, tally, &mut problems);
                continue;
            }
        };
        tally.ntuples += 1;
        let entries = ntuple.entries();
        match runtime().block_on(ntuple.cluster_boundaries()) {
            Ok(bounds) if bounds.first() != Some(&0) || bounds.last() != Some(&entries) => {
                problems.push(format!("RNTuple cluster boundaries not 0..{entries}"));
            }
            Ok(_) => {}
            Err(e) => judge(&e, tally, &mut problems),
        }
        for i in 0..ntuple.item_count() {
            match runtime().block_on(read(&ntuple, &[i], 0, entries, &Held::new())) {
                Ok((arrays, _)) => {
                    tally.fields_read += 1;
                    if let Some(p) = inconsistency(arrays.iter().map(|a| &a.array), entries) {
                        problems.push(format!("field {}: {p}", ntuple.path(i)));
                    }
                }
                Err(Error::UnsupportedBranch { .. }) => {}
                Err(e) => judge(&e, tally, &mut problems),
            }
        }
    }
    problems
}

/// An error is acceptable when it names the file and says what was expected (or why not).
fn judge_error(e: &Error, path: &str) -> Option<String> {
    let msg = e.to_string();
    let bad = match e {
        _ if !msg.contains(path) => "does not name the file",
        Error::Format { .. } if !msg.contains("expected") => "does not say what was expected",
        Error::Io { .. } if msg.contains("panicked") || msg.contains("task failed") => {
            "hides a panic"
        }
        Error::InvalidArgument(_) => "blames the caller for the file's contents",
        _ => return None,
    };
    Some(format!("error {bad}: {msg}"))
}

/// Arrays that were read must hold exactly the entries asked for, with every offset and index
/// inside its content.
fn inconsistency<'a>(arrays: impl IntoIterator<Item = &'a Array>, entries: u64) -> Option<String> {
    for a in arrays {
        if a.len() as u64 != entries {
            return Some(format!("{} entries, {entries} asked for", a.len()));
        }
        if !a.is_valid() {
            return Some("offsets or indices outside their content".into());
        }
    }
    None
}

#[test]
fn mutated_files_give_errors_not_panics() {
    let Some(dir) = testdata() else { return };
    let t0 = Instant::now();
    let seeds = seeds(&dir);
    assert!(seeds.len() >= 10, "only {} small seed files", seeds.len());
    let work = TempDir::new("mutants");

    // The pristine seeds themselves read consistently.
    for seed in &seeds {
        let path = dir.join(&seed.name);
        let problems = exercise(path.to_str().unwrap(), &mut Tally::default());
        assert!(problems.is_empty(), "{}: {problems:?}", seed.name);
    }

    let cases = std::env::var("CHERENKOV_MUTANTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CASES);
    let watchdog = Watchdog::start(t0);
    let mut tally = Tally::default();
    let mut failures = Vec::new();
    let mut largest = (0usize, String::new());
    for case in 0..cases {
        let seed = &seeds[case % seeds.len()];
        let (bytes, what) = mutate(seed, case);
        let path = work.path().join(format!("case-{case:05}.root"));
        std::fs::write(&path, &bytes).unwrap();
        let path = path.to_str().unwrap().to_string();
        *CURRENT_CASE.lock().unwrap() = what.clone();
        LARGEST_ALLOCATION.store(0, Ordering::Relaxed);
        watchdog.case_started(t0);
        let started = process_cpu_time();
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| exercise(&path, &mut tally)));
        let took = process_cpu_time() - started;
        match outcome {
            Ok(problems) => failures.extend(problems.into_iter().map(|p| format!("{what}: {p}"))),
            Err(_) => failures.push(format!("{what}: PANICKED (message above)")),
        }
        let allocated = LARGEST_ALLOCATION.load(Ordering::Relaxed);
        if allocated > largest.0 {
            largest = (allocated, what.clone());
        }
        if allocated > MAX_SINGLE_ALLOCATION {
            failures.push(format!("{what}: allocated {allocated} bytes at once"));
        }
        if took > Duration::from_secs(2) {
            failures.push(format!("{what}: took {took:?} of CPU"));
        }
        let _ = std::fs::remove_file(&path);
    }
    drop(watchdog);
    eprintln!(
        "{cases} mutants of {} seeds in {:.1?}: {} opened, {} trees, {} branches read, \
         {} RNTuples, {} fields read, {} errors; largest allocation {} bytes ({}), resident {} MiB",
        seeds.len(),
        t0.elapsed(),
        tally.opened,
        tally.trees,
        tally.branches_read,
        tally.ntuples,
        tally.fields_read,
        tally.errors,
        largest.0,
        largest.1,
        resident_bytes() >> 20
    );
    assert!(
        failures.is_empty(),
        "{} failures, first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(30)].join("\n")
    );
    // The mutations must exercise the reader, not only its first check.
    assert!(tally.opened > cases / 3 && tally.branches_read > cases);
    assert!(tally.ntuples > cases / 20 && tally.fields_read > cases / 2);
}
