use super::*;
use crate::engine::file::RootFile;
use crate::engine::runtime;
use crate::format::directory::parse_free_segments;
use crate::format::writing::buffer::Buffer;
use crate::format::writing::classes::class;

fn scratch(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("cherenkov-writer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name).to_string_lossy().into_owned()
}

fn create(path: &str, compression: i32) -> FileWriter {
    let sink = crate::sink::create(path).unwrap();
    FileWriter::create(
        sink,
        "a title",
        Compression::from_setting(compression).unwrap(),
    )
    .unwrap()
}

/// A TNamed holding `text` as its title (large texts compress).
fn named(w: &mut FileWriter, dir: DirectoryId, name: &str, text: &str) -> Key {
    w.write_object(dir, "TNamed", name, "", |keylen| {
        let mut b = Buffer::new(keylen);
        b.tnamed(name, text, 0);
        b.into_bytes()
    })
    .unwrap()
}

fn open(path: &str) -> RootFile {
    runtime()
        .block_on(RootFile::open_url(path, &Default::default()))
        .unwrap()
}

fn title_of(file: &RootFile, path: &str) -> String {
    let key = runtime().block_on(file.find_key(path)).unwrap();
    let data = runtime().block_on(file.read_object(&key)).unwrap();
    let mut c = crate::format::cursor::Cursor::new(&data, "t", 0);
    crate::format::objects::read_tnamed(&mut c).unwrap().1
}

#[test]
fn objects_directories_and_cycles_read_back() {
    let path = scratch("objects.root");
    let mut w = create(&path, 505);
    let sub = w.mkdirs("a/b").unwrap();
    named(&mut w, DirectoryId(0), "small", "hello");
    let big = "x".repeat(10_000);
    let key = named(&mut w, sub, "large", &big);
    assert!(key.objlen > key.nbytes - key.keylen as u32, "compressed");
    named(&mut w, DirectoryId(0), "small", "again");
    w.add_streamers([class("TNamed").unwrap().info()]);
    w.close().unwrap();

    let f = open(&path);
    let names: Vec<(String, i16)> = f.keys.iter().map(|k| (k.name.clone(), k.cycle)).collect();
    assert_eq!(
        names,
        [("a".into(), 1), ("small".into(), 2), ("small".into(), 1)]
    );
    assert_eq!(title_of(&f, "small"), "again");
    assert_eq!(title_of(&f, "small;1"), "hello");
    assert_eq!(title_of(&f, "a/b/large"), big);
    let all: Vec<String> = runtime()
        .block_on(f.all_keys())
        .unwrap()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert!(all.contains(&"a/b/large".to_string()), "{all:?}");
    let infos = runtime().block_on(f.streamers());
    assert_eq!(infos, [class("TNamed").unwrap().info()]);
    assert_eq!(f.header.compress, 505);
    assert_eq!(f.header.end, f.size);
    assert_eq!(f.requests(), 1, "one read of head and tail opens it");
}

#[test]
fn the_free_segments_run_from_the_end() {
    let path = scratch("free.root");
    let w = create(&path, 0);
    w.close().unwrap();
    let f = open(&path);
    let raw = std::fs::read(&path).unwrap();
    let h = &f.header;
    let record = &raw[h.seek_free as usize..(h.seek_free + h.free_bytes as u64) as usize];
    let segments = parse_free_segments(record, h.seek_free, h.n_free as usize).unwrap();
    assert_eq!(
        segments,
        [FreeSegment {
            first: h.end,
            last: START_BIG_FILE
        }]
    );
}

#[test]
fn files_past_4_gb_take_64_bit_seeks() {
    // A sparse file: a 5 GB hole, then records past it.
    let path = scratch("large.root");
    let mut w = create(&path, 101);
    let dir = w.mkdir(w.root(), "early", "").unwrap();
    w.allocate(5_000_000_000);
    assert!(w.big_keys());
    let late = w.mkdir(w.root(), "late", "").unwrap();
    let key = named(&mut w, dir, "far", "beyond 4 GB");
    assert_eq!(key.version, BIG_KEY_VERSION);
    named(&mut w, late, "farther", "in a directory past 4 GB");
    w.close().unwrap();

    let f = open(&path);
    assert!(f.header.version > 1_000_000 && f.header.units == 8);
    assert!(f.header.end > 5_000_000_000);
    assert_eq!(title_of(&f, "early/far"), "beyond 4 GB");
    assert_eq!(title_of(&f, "late/farther"), "in a directory past 4 GB");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_file_not_closed_leaves_nothing() {
    let path = scratch("unclosed.root");
    let mut w = create(&path, 505);
    named(&mut w, DirectoryId(0), "x", "y");
    drop(w);
    assert!(!std::path::Path::new(&path).exists());
}

#[test]
fn an_update_adds_to_a_file_and_lists_what_it_replaced_as_free() {
    let path = scratch("update.root");
    let mut w = create(&path, 505);
    let sub = w.mkdir(DirectoryId(0), "sub", "").unwrap();
    named(&mut w, sub, "first", "one");
    w.close().unwrap();
    let before = open(&path);

    let mut w = FileWriter::update(&path).unwrap();
    assert_eq!(w.end(), before.header.end);
    let sub = w.mkdirs("sub").unwrap();
    named(&mut w, sub, "second", "two");
    named(&mut w, DirectoryId(0), "top", "three");
    named(&mut w, sub, "first", "one, again");
    w.close().unwrap();

    let f = open(&path);
    assert_eq!(title_of(&f, "sub/first;1"), "one");
    assert_eq!(title_of(&f, "sub/first"), "one, again");
    assert_eq!(title_of(&f, "sub/second"), "two");
    assert_eq!(title_of(&f, "top"), "three");
    assert_eq!(f.header.uuid, before.header.uuid);
    let raw = std::fs::read(&path).unwrap();
    let h = &f.header;
    let record = &raw[h.seek_free as usize..(h.seek_free + h.free_bytes as u64) as usize];
    let segments = parse_free_segments(record, h.seek_free, h.n_free as usize).unwrap();
    let old_keys = FreeSegment {
        first: before.header.seek_info,
        last: before.header.seek_info + before.header.info_bytes as u64 - 1,
    };
    assert!(segments.contains(&old_keys), "{segments:?}");
    assert_eq!(segments.last().unwrap().first, h.end);
}

#[test]
fn objects_of_several_megabytes_are_compressed_in_blocks_and_read_back() {
    let path = scratch("blocks.root");
    let mut w = create(&path, 505);
    let text: String = (0..400_000).map(|i| format!("{i:x},")).collect();
    assert!(text.len() > 2 * PARALLEL_BLOCK);
    let key = named(&mut w, DirectoryId(0), "big", &text);
    w.close().unwrap();
    let file = open(&path);
    assert_eq!(title_of(&file, "big"), text);
    // One ROOT block (9-byte header, 3-byte little-endian lengths) per PARALLEL_BLOCK of object.
    let bytes = std::fs::read(&path).unwrap();
    let stored = &bytes[(key.seek_key + key.keylen as u64) as usize..]
        [..(key.nbytes - key.keylen as u32) as usize];
    let mut blocks = 0;
    let mut at = 0;
    while at < stored.len() {
        assert_eq!(&stored[at..at + 2], b"ZS");
        at += 9 + u32::from_le_bytes([stored[at + 3], stored[at + 4], stored[at + 5], 0]) as usize;
        blocks += 1;
    }
    assert_eq!(blocks, (key.objlen as usize).div_ceil(PARALLEL_BLOCK));
}
