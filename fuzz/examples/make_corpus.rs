//! Seed inputs for the fuzz targets, cut out of real ROOT files:
//! `cargo run --example make_corpus -- <folder of .root files> <corpus folder>`
//! writes `<corpus>/<target>/<file>-<what>` in each target's input format (see fuzz_targets/).

use cherenkov_core::engine::file::RootFile;
use cherenkov_core::engine::runtime;
use cherenkov_core::format::compression::decompress;
use cherenkov_core::format::cursor::Cursor;
use cherenkov_core::format::directory::{DirectoryRecord, FileHeader, Key, DIRECTORY_RECORD_LEN};
use cherenkov_core::format::rntuple::anchor::Anchor;
use cherenkov_core::format::rntuple::column::{Coding, ColumnType};
use cherenkov_core::format::rntuple::envelope::Locator;
use cherenkov_core::format::rntuple::footer::Footer;
use cherenkov_core::format::rntuple::header::Header;
use cherenkov_core::format::rntuple::page_list::{ColumnPages, PageList};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Larger seeds slow every fuzzing iteration that starts from them.
const MAX_SEED_BYTES: usize = 256 << 10;
/// Baskets taken per tree: enough to cover the leaf types and compression algorithms.
const BASKETS_PER_TREE: usize = 12;
/// Page lists and pages taken per RNTuple (pages: the first of each column type and width).
const PAGE_LISTS_PER_NTUPLE: usize = 4;
const PAGES_PER_NTUPLE: usize = 24;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, testdata, corpus] = args.as_slice() else {
        eprintln!("usage: make_corpus <folder of .root files> <corpus folder>");
        std::process::exit(2);
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(testdata)
        .expect("the test-data folder")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "root"))
        .collect();
    files.sort();
    let mut written = 0;
    for path in &files {
        match seeds_of(path, Path::new(corpus)) {
            Ok(n) => written += n,
            Err(e) => eprintln!("{}: skipped: {e}", path.display()),
        }
    }
    println!("{written} seeds from {} files in {corpus}", files.len());
}

fn seeds_of(path: &Path, corpus: &Path) -> Result<usize, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
    let mut seeds = Seeds {
        corpus,
        stem: &stem,
        written: 0,
    };
    let header = FileHeader::parse(&bytes).map_err(|e| e.to_string())?;
    let top = header.top_directory_offset() as usize;
    seeds.write(
        "file_header",
        "head",
        &bytes[..(top + DIRECTORY_RECORD_LEN).min(bytes.len())],
    );
    let record = DirectoryRecord::parse(&mut Cursor::new(&bytes[top..], "file", top as u64))
        .map_err(|e| e.to_string())?;
    let keys_list = range(&bytes, record.seek_keys, record.keys_bytes as u64)?;
    seeds.write("key", "keys", keys_list);

    let file = runtime()
        .block_on(RootFile::open_url(
            path.to_str().unwrap(),
            &Default::default(),
        ))
        .map_err(|e| e.to_string())?;
    let info_key = Key::parse(&mut Cursor::new(
        range(&bytes, header.seek_info, header.info_bytes as u64)?,
        "file",
        header.seek_info,
    ))
    .map_err(|e| e.to_string())?;
    seeds.object("streamers", "streamers", &file, &bytes, &info_key)?;

    let keys = runtime()
        .block_on(file.all_keys())
        .map_err(|e| e.to_string())?;
    for (key_path, key) in keys.iter().filter(|(_, k)| k.class_name == "TTree") {
        let what = key_path.replace('/', "_");
        seeds.object("tree", &what, &file, &bytes, key)?;
        let tree = runtime()
            .block_on(file.tree(&format!("{key_path};{}", key.cycle)))
            .map_err(|e| e.to_string())?;
        let baskets = tree
            .branches
            .iter()
            .enumerate()
            .filter_map(|(b, branch)| branch.baskets.first().map(|loc| (b, *loc)));
        for (b, loc) in baskets.take(BASKETS_PER_TREE) {
            let raw = range(&bytes, loc.seek, loc.bytes as u64)?;
            seeds.write("basket", &format!("{what}-branch{b}"), raw);
            let basket_key =
                Key::parse(&mut Cursor::new(raw, "basket", 0)).map_err(|e| e.to_string())?;
            seeds.compressed(&format!("{what}-branch{b}"), raw, &basket_key);
        }
    }
    for (key_path, key) in keys.iter().filter(|(_, k)| k.class_name == "ROOT::RNTuple") {
        let what = key_path.replace('/', "_");
        let anchor = runtime()
            .block_on(file.read_object(key))
            .map_err(|e| e.to_string())?;
        seeds.ntuple(&what, &bytes, &anchor)?;
    }
    Ok(seeds.written)
}

/// An envelope or page as stored, uncompressed (`len` bytes) when it is compressed.
fn uncompressed(bytes: &[u8], at: Locator, len: u64, what: &str) -> Result<Vec<u8>, String> {
    let stored = range(bytes, at.offset, at.size)?;
    if at.size == len {
        return Ok(stored.to_vec());
    }
    decompress(stored, len as usize, what).map_err(|e| e.to_string())
}

fn range(bytes: &[u8], offset: u64, len: u64) -> Result<&[u8], String> {
    bytes
        .get(offset as usize..(offset + len) as usize)
        .ok_or_else(|| format!("range {offset}+{len} is outside the file"))
}

struct Seeds<'a> {
    corpus: &'a Path,
    stem: &'a str,
    written: usize,
}

impl Seeds<'_> {
    fn write(&mut self, target: &str, what: &str, data: &[u8]) {
        if data.len() > MAX_SEED_BYTES {
            return;
        }
        let dir = self.corpus.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{}-{what}", self.stem)), data).unwrap();
        self.written += 1;
    }

    /// An object as the streamers and tree targets take it: key length, then the uncompressed
    /// object; and its compressed form for the compression target.
    fn object(
        &mut self,
        target: &str,
        what: &str,
        file: &RootFile,
        bytes: &[u8],
        key: &Key,
    ) -> Result<(), String> {
        let object = runtime()
            .block_on(file.read_object(key))
            .map_err(|e| e.to_string())?;
        let mut input = key.keylen.to_be_bytes().to_vec();
        input.extend_from_slice(&object);
        self.write(target, what, &input);
        let raw = range(bytes, key.seek_key, key.nbytes as u64)?;
        self.compressed(what, raw, key);
        Ok(())
    }

    /// The RNTuple targets' inputs: the anchor, header, footer and first page lists
    /// (`rntuple_metadata`), and the first page of each column type and width (`rntuple_page`).
    fn ntuple(&mut self, what: &str, bytes: &[u8], anchor_object: &[u8]) -> Result<(), String> {
        let metadata = |parser: u8, checksum: Option<u64>, data: &[u8]| {
            let mut input = vec![parser];
            input.extend(checksum.map(u64::to_le_bytes).unwrap_or_default());
            input.extend_from_slice(data);
            input
        };
        self.write(
            "rntuple_metadata",
            &format!("{what}-anchor"),
            &metadata(0, None, anchor_object),
        );
        let anchor = Anchor::parse(anchor_object, what).map_err(|e| e.to_string())?;
        let at = |offset, size| Locator { offset, size };
        let header_bytes = uncompressed(
            bytes,
            at(anchor.seek_header, anchor.nbytes_header),
            anchor.len_header,
            what,
        )?;
        self.write(
            "rntuple_metadata",
            &format!("{what}-header"),
            &metadata(1, None, &header_bytes),
        );
        let header = Header::parse(&header_bytes, what).map_err(|e| e.to_string())?;
        let checksum = Some(header.checksum);
        let footer_bytes = uncompressed(
            bytes,
            at(anchor.seek_footer, anchor.nbytes_footer),
            anchor.len_footer,
            what,
        )?;
        self.write(
            "rntuple_metadata",
            &format!("{what}-footer"),
            &metadata(2, checksum, &footer_bytes),
        );
        let footer =
            Footer::parse(&footer_bytes, header.checksum, what).map_err(|e| e.to_string())?;
        let mut schema = header.schema;
        schema.extend(footer.extension);
        let mut seen = HashSet::new();
        for (g, group) in footer.groups.iter().take(PAGE_LISTS_PER_NTUPLE).enumerate() {
            let link = group.page_list;
            let list_bytes = uncompressed(bytes, link.locator, link.length, what)?;
            self.write(
                "rntuple_metadata",
                &format!("{what}-pagelist{g}"),
                &metadata(3, checksum, &list_bytes),
            );
            let list =
                PageList::parse(&list_bytes, header.checksum, what).map_err(|e| e.to_string())?;
            for cluster in &list.columns {
                for (c, pages) in cluster.iter().enumerate() {
                    let (ColumnPages::Stored { pages, .. }, Some(column)) =
                        (pages, schema.columns.get(c))
                    else {
                        continue;
                    };
                    let (Some(page), Some((low, _))) = (pages.first(), column.kind.valid_bits())
                    else {
                        continue;
                    };
                    if seen.len() >= PAGES_PER_NTUPLE
                        || page.elements > u16::MAX as u32
                        || !seen.insert((column.kind, column.bits))
                    {
                        continue;
                    }
                    let coding = Coding {
                        kind: column.kind,
                        bits: column.bits,
                        range: column.range,
                    };
                    let len = coding.packed_len(page.elements as u64);
                    let data = uncompressed(bytes, page.locator, len, what)?;
                    let code = (0..u16::MAX)
                        .find(|&code| ColumnType::from_code(code) == column.kind)
                        .unwrap_or(u16::MAX);
                    let mut input = code.to_le_bytes().to_vec();
                    input.extend((page.elements as u16).to_le_bytes());
                    input.push((column.bits - low) as u8);
                    input.extend_from_slice(&data);
                    self.write("rntuple_page", &format!("{what}-column{c}"), &input);
                }
            }
        }
        Ok(())
    }

    /// The compression target's input: the uncompressed length, then the stored blocks.
    fn compressed(&mut self, what: &str, raw: &[u8], key: &Key) {
        if key.is_compressed() {
            let mut input = key.objlen.to_be_bytes().to_vec();
            input.extend_from_slice(&raw[key.keylen as usize..]);
            self.write("compression", what, &input);
        }
    }
}
