//! Seed inputs for the fuzz targets, cut out of real ROOT files:
//! `cargo run --example make_corpus -- <folder of .root files> <corpus folder>`
//! writes `<corpus>/<target>/<file>-<what>` in each target's input format (see fuzz_targets/).

use cherenkov_core::engine::file::RootFile;
use cherenkov_core::engine::runtime;
use cherenkov_core::format::cursor::Cursor;
use cherenkov_core::format::directory::{DirectoryRecord, FileHeader, Key, DIRECTORY_RECORD_LEN};
use std::path::{Path, PathBuf};

/// Larger seeds slow every fuzzing iteration that starts from them.
const MAX_SEED_BYTES: usize = 256 << 10;
/// Baskets taken per tree: enough to cover the leaf types and compression algorithms.
const BASKETS_PER_TREE: usize = 12;

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
    Ok(seeds.written)
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

    /// The compression target's input: the uncompressed length, then the stored blocks.
    fn compressed(&mut self, what: &str, raw: &[u8], key: &Key) {
        if key.is_compressed() {
            let mut input = key.objlen.to_be_bytes().to_vec();
            input.extend_from_slice(&raw[key.keylen as usize..]);
            self.write("compression", what, &input);
        }
    }
}
