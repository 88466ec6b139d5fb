//! The HTTP source against a real nginx on 127.0.0.1 (and, for a slow or faulty network, through a
//! real toxiproxy). Every read is compared byte for byte with the file on disk; every test is
//! bounded in time. Run: `cargo test -p cherenkov-core --test http_source -- --nocapture` to see
//! the measured requests and round trips.

mod support;

use cherenkov_core::engine::file::ROOT_OPENING;
use cherenkov_core::source::http::{HttpOptions, HttpSource};
use cherenkov_core::source::RequestPolicy;
use cherenkov_core::source::{ByteRange, ByteSource, SourceCounters};
use cherenkov_core::IoKind;
use std::time::{Duration, Instant};
use support::nginx::Nginx;
use support::toxiproxy::Toxiproxy;
use support::{bounded, shared_testdata, Random, TempDir};

/// Write `len` deterministic random bytes to `name` in `dir`; returns them.
fn write_random(dir: &TempDir, name: &str, len: usize, seed: u64) -> Vec<u8> {
    let bytes = Random::new(seed).bytes(len);
    dir.write(name, &bytes);
    bytes
}

/// Ranges of every shape: tiny, large, overlapping, repeated, empty, touching the end.
fn random_ranges(size: u64, count: usize, seed: u64) -> Vec<ByteRange> {
    let mut random = Random::new(seed);
    let mut ranges: Vec<ByteRange> = (0..count)
        .map(|_| {
            let len = match random.below(4) {
                0 => random.below(16),
                1 => random.below(4096),
                2 => random.below(65536),
                _ => random.below(size / 8),
            }
            .min(size);
            let offset = random.below(size - len + 1);
            ByteRange::new(offset, len)
        })
        .collect();
    ranges.push(ranges[0]);
    ranges.push(ByteRange::new(size - 1, 1));
    ranges.push(ByteRange::new(size, 0));
    ranges.push(ByteRange::new(0, size.min(10)));
    ranges
}

/// `count` basket-like ranges spread over the file with gaps between them, in file order.
fn basket_ranges(size: u64, count: u64, seed: u64) -> Vec<ByteRange> {
    let mut random = Random::new(seed);
    let slot = size / count;
    (0..count)
        .map(|i| {
            ByteRange::new(
                i * slot + random.below(slot / 4),
                slot / 4 + random.below(slot / 4),
            )
        })
        .collect()
}

async fn assert_reads_match(source: &HttpSource, file: &[u8], ranges: &[ByteRange]) {
    let got = source
        .read_ranges(ranges)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.len(), ranges.len());
    for (r, bytes) in ranges.iter().zip(&got) {
        let want = &file[r.offset as usize..r.end() as usize];
        assert!(
            bytes[..] == *want,
            "wrong bytes for {r:?} from {}",
            source.name()
        );
    }
}

fn delta(after: SourceCounters, before: SourceCounters) -> SourceCounters {
    SourceCounters {
        requests: after.requests - before.requests,
        round_trips: after.round_trips - before.round_trips,
        ranges: after.ranges - before.ranges,
        bytes: after.bytes - before.bytes,
        ..SourceCounters::default()
    }
}

/// Options with short waits, so that failures show up quickly, and a plain one-range probe at
/// open: these tests are about reads, which a small file kept whole at open would never make.
fn quick_options() -> HttpOptions {
    HttpOptions {
        policy: RequestPolicy::with_timeout(Duration::from_secs(2)).with_retries(2),
        ..HttpOptions::default()
    }
}

const MB: usize = 1 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_and_random_ranges_match_the_local_file() {
    let data = TempDir::new("http-data");
    let file = write_random(&data, "random.bin", 3 * MB + 17, 1);
    let Some(server) = Nginx::start(data.path(), "max_ranges 4096;") else {
        return;
    };
    bounded(async {
        let source = HttpSource::open(&server.url("random.bin"), HttpOptions::default())
            .await
            .unwrap();
        assert_eq!(source.size(), file.len() as u64);
        assert_eq!(source.name(), server.url("random.bin"));
        for seed in 0..5 {
            assert_reads_match(&source, &file, &random_ranges(file.len() as u64, 300, seed)).await;
        }
        assert_reads_match(&source, &file, &[]).await;
        assert_reads_match(&source, &file, &[ByteRange::new(0, file.len() as u64)]).await;
        println!("random ranges: {:?}", source.report().counters);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_root_files_read_the_same_as_on_disk() {
    let Some(testdata) = shared_testdata() else {
        return;
    };
    let Some(server) = Nginx::start(&testdata, "max_ranges 4096;") else {
        return;
    };
    bounded(async {
        for name in [
            "nanolike-root6.40-zstd-4clusters.root",
            "uproot-HZZ-zstd.root",
            "uproot-empty.root",
        ] {
            let file = std::fs::read(testdata.join(name)).unwrap();
            let source = HttpSource::open(&server.url(name), HttpOptions::default())
                .await
                .unwrap();
            assert_eq!(source.size(), file.len() as u64, "{name}");
            // The ROOT header and the end of the file (keys list, streamers), then scattered ranges.
            let size = file.len() as u64;
            let opening = [
                ByteRange::new(0, 512.min(size)),
                ByteRange::new(size - 1000.min(size), 1000.min(size)),
            ];
            assert_reads_match(&source, &file, &opening).await;
            assert_reads_match(&source, &file, &random_ranges(size, 500, 7)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_file_has_size_zero() {
    let data = TempDir::new("http-data");
    write_random(&data, "empty.bin", 0, 0);
    let Some(server) = Nginx::start(data.path(), "") else {
        return;
    };
    bounded(async {
        let source = HttpSource::open(&server.url("empty.bin"), HttpOptions::default())
            .await
            .unwrap();
        assert_eq!(source.size(), 0);
        assert_eq!(
            source.read_ranges(&[ByteRange::new(0, 0)]).await.unwrap()[0].len(),
            0
        );
        assert!(source.read_ranges(&[ByteRange::new(0, 1)]).await.is_err());
    })
    .await;
}

/// The request that learns the size brings the file's head and tail along; a file smaller than
/// both comes whole and needs no further request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opening_reads_the_head_and_tail_with_the_size() {
    let data = TempDir::new("http-data");
    let large = write_random(&data, "large.bin", 4 * MB, 31);
    let small = write_random(&data, "small.bin", 300_000, 32);
    let Some(server) = Nginx::start(data.path(), "") else {
        return;
    };
    bounded(async {
        let options = HttpOptions {
            opening: ROOT_OPENING,
            ..HttpOptions::default()
        };
        let opened = HttpSource::open(&server.url("large.bin"), options.clone())
            .await
            .unwrap()
            .into_opened();
        let (head, tail) = (ROOT_OPENING.head, ROOT_OPENING.tail);
        let size = large.len() as u64;
        let (source, opening) = (opened.source, opened.reads);
        let ranges: Vec<ByteRange> = opening.iter().map(|(r, _)| *r).collect();
        assert_eq!(
            ranges,
            [ByteRange::new(0, head), ByteRange::new(size - tail, tail)]
        );
        for (r, bytes) in &opening {
            assert_eq!(&bytes[..], &large[r.offset as usize..r.end() as usize]);
        }
        assert_eq!(source.report().counters.requests, 1);

        let source = HttpSource::open(&server.url("small.bin"), options)
            .await
            .unwrap();
        assert_eq!(source.size(), small.len() as u64);
        assert_reads_match(&source, &small, &random_ranges(small.len() as u64, 50, 33)).await;
        assert_eq!(
            source.report().counters.requests,
            1,
            "served from the answer to the first request"
        );
    })
    .await;
}

/// 2000 basket-sized ranges: one request and one round trip when the server takes a long header,
/// a few requests sent together (two round trips) with the default header budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_baskets_take_one_or_two_round_trips() {
    let data = TempDir::new("http-data");
    let file = write_random(&data, "baskets.bin", 24 * MB, 2);
    let tuned = "max_ranges 4096; large_client_header_buffers 4 64k;";
    let Some(server) = Nginx::start(data.path(), tuned) else {
        return;
    };
    let ranges = basket_ranges(file.len() as u64, 2000, 3);
    bounded(async {
        let long_headers = HttpOptions {
            max_ranges_per_request: 4096,
            max_header_bytes: 60_000,
            ..HttpOptions::default()
        };
        for (label, options) in [
            ("long Range header", long_headers),
            ("default options", HttpOptions::default()),
        ] {
            let source = HttpSource::open(&server.url("baskets.bin"), options)
                .await
                .unwrap();
            let before = source.report().counters;
            let start = Instant::now();
            assert_reads_match(&source, &file, &ranges).await;
            let used = delta(source.report().counters, before);
            println!(
                "2000 baskets, nginx max_ranges 4096, {label}: {used:?} in {:?}",
                start.elapsed()
            );
            assert!(used.round_trips <= 2, "{label}: {used:?}");
            assert_eq!(used.ranges, 2000);
        }
    })
    .await;
}

/// A default nginx rejects a Range header past its 8 KB buffer: the source learns a smaller
/// budget, still returns the right bytes, and later reads go straight to accepted requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_nginx_gets_more_smaller_requests() {
    let data = TempDir::new("http-data");
    let file = write_random(&data, "baskets.bin", 24 * MB, 4);
    let Some(server) = Nginx::start(data.path(), "") else {
        return;
    };
    let ranges = basket_ranges(file.len() as u64, 2000, 5);
    bounded(async {
        let source = HttpSource::open(&server.url("baskets.bin"), HttpOptions::default()).await.unwrap();
        let before = source.report().counters;
        assert_reads_match(&source, &file, &ranges).await;
        let used = delta(source.report().counters, before);
        println!("2000 baskets, default nginx, default options: {used:?}");
        assert!(used.requests >= 10 && used.round_trips <= 2, "{used:?}");

        let too_long = HttpOptions {
            max_ranges_per_request: 4096,
            max_header_bytes: 60_000,
            ..HttpOptions::default()
        };
        let source = HttpSource::open(&server.url("baskets.bin"), too_long).await.unwrap();
        let before = source.report().counters;
        assert_reads_match(&source, &file, &ranges).await;
        let first = delta(source.report().counters, before);
        let before = source.report().counters;
        assert_reads_match(&source, &file, &ranges).await;
        let second = delta(source.report().counters, before);
        println!("2000 baskets, default nginx, 60 KB header budget: first read {first:?}, second {second:?}");
        assert!(second.requests > 1 && second.round_trips <= 2, "{second:?}");
    })
    .await;
}

/// nginx with `max_ranges 1` answers a multi-range request with the whole file (200).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_without_multi_range_still_gives_the_right_bytes() {
    let data = TempDir::new("http-data");
    let file = write_random(&data, "file.bin", 4 * MB, 6);
    let Some(server) = Nginx::start(data.path(), "max_ranges 1;") else {
        return;
    };
    let ranges = basket_ranges(file.len() as u64, 300, 7);
    bounded(async {
        // A small file: the whole-file answer is used, then ranges are asked one by one.
        let source = HttpSource::open(&server.url("file.bin"), HttpOptions::default())
            .await
            .unwrap();
        assert_reads_match(&source, &file, &ranges).await;
        assert_reads_match(&source, &file, &random_ranges(file.len() as u64, 100, 8)).await;
        println!(
            "nginx max_ranges 1, whole file allowed: {:?}",
            source.report().counters
        );

        // A whole file larger than allowed: dropped, ranges asked one by one at once.
        let options = HttpOptions {
            max_full_body_bytes: MB as u64,
            ..HttpOptions::default()
        };
        let source = HttpSource::open(&server.url("file.bin"), options)
            .await
            .unwrap();
        let before = source.report().counters;
        assert_reads_match(&source, &file, &ranges).await;
        let used = delta(source.report().counters, before);
        println!("nginx max_ranges 1, whole file refused: {used:?}");
        assert!(
            used.bytes < file.len() as u64,
            "the whole file was not read: {used:?}"
        );
    })
    .await;
}

/// nginx with `max_ranges 0` ignores every Range header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_ignoring_ranges_is_used_only_for_small_files() {
    let data = TempDir::new("http-data");
    let file = write_random(&data, "file.bin", 2 * MB, 9);
    let Some(server) = Nginx::start(data.path(), "max_ranges 0;") else {
        return;
    };
    bounded(async {
        let source = HttpSource::open(&server.url("file.bin"), HttpOptions::default())
            .await
            .unwrap();
        assert_eq!(source.size(), file.len() as u64);
        let before = source.report().counters;
        assert_reads_match(&source, &file, &random_ranges(file.len() as u64, 200, 10)).await;
        assert_eq!(
            delta(source.report().counters, before).requests,
            0,
            "served from the file read at open"
        );

        let options = HttpOptions {
            max_full_body_bytes: MB as u64,
            ..HttpOptions::default()
        };
        let err = HttpSource::open(&server.url("file.bin"), options)
            .await
            .unwrap_err()
            .to_string();
        println!("{err}");
        assert!(
            err.contains(&server.url("file.bin")) && err.contains("ignores Range"),
            "{err}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_past_the_end_are_clear_errors() {
    let data = TempDir::new("http-data");
    let file = write_random(&data, "shrinks.bin", MB, 11);
    let Some(server) = Nginx::start(data.path(), "max_ranges 4096;") else {
        return;
    };
    let url = server.url("shrinks.bin");
    bounded(async {
        let source = HttpSource::open(&url, quick_options()).await.unwrap();
        let err = source
            .read_ranges(&[ByteRange::new(MB as u64 - 10, 20)])
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&url) && err.contains("1048566..1048586") && err.contains("past the end"),
            "{err}"
        );

        // The file shrinks on the server after opening: nginx answers 416.
        std::fs::write(data.path().join("shrinks.bin"), &file[..1000]).unwrap();
        let err = source
            .read_ranges(&[ByteRange::new(5000, 100)])
            .await
            .unwrap_err()
            .to_string();
        println!("{err}");
        assert!(
            err.contains(&url) && err.contains("5000..5100") && err.contains("416"),
            "{err}"
        );
        let two = [ByteRange::new(5000, 100), ByteRange::new(9000, 100)];
        let err = source.read_ranges(&two).await.unwrap_err().to_string();
        assert!(err.contains(&url) && err.contains("416"), "{err}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_files_and_redirects() {
    let data = TempDir::new("http-data");
    let file = write_random(&data, "target.bin", 100_000, 12);
    let directives = "location /old/ { rewrite ^/old/(.*)$ /$1 redirect; }
    location = /loop { return 302 /loop; }";
    let Some(server) = Nginx::start(data.path(), directives) else {
        return;
    };
    bounded(async {
        let missing = HttpSource::open(&server.url("absent.bin"), quick_options())
            .await
            .unwrap_err();
        assert_eq!(missing.io_kind(), IoKind::NotFound, "{missing}");
        let err = missing.to_string();
        assert!(
            err.contains(&server.url("absent.bin")) && err.contains("404"),
            "{err}"
        );

        let source = HttpSource::open(&server.url("old/target.bin"), quick_options())
            .await
            .unwrap();
        assert_eq!(source.effective_url(), server.url("target.bin"));
        assert_eq!(source.name(), server.url("old/target.bin"));
        assert_reads_match(&source, &file, &random_ranges(file.len() as u64, 50, 13)).await;

        let options = HttpOptions {
            max_redirects: 3,
            ..quick_options()
        };
        let err = HttpSource::open(&server.url("loop"), options)
            .await
            .unwrap_err()
            .to_string();
        println!("{err}");
        assert!(
            err.contains(&server.url("loop")) && err.contains("redirect"),
            "{err}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_listening_is_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/file.root");
    bounded(async {
        let start = Instant::now();
        let err = HttpSource::open(&url, quick_options())
            .await
            .unwrap_err()
            .to_string();
        println!("{err} ({:?})", start.elapsed());
        assert!(err.contains(&url) && err.contains("3 attempts"), "{err}");
        let err = HttpSource::open("ftp://127.0.0.1/x", quick_options())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("not an http"), "{err}");
    })
    .await;
}

/// TLS is verified: a self-signed certificate is refused, with an error that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_an_untrusted_certificate_is_refused() {
    let data = TempDir::new("http-data");
    write_random(&data, "file.bin", 1000, 26);
    let Some(server) = Nginx::start_tls(data.path(), "") else {
        return;
    };
    let url = server.url("file.bin");
    assert!(url.starts_with("https://"));
    bounded(async {
        let err = HttpSource::open(&url, quick_options())
            .await
            .unwrap_err()
            .to_string();
        println!("{err}");
        assert!(err.contains(&url) && err.contains("certificate"), "{err}");
    })
    .await;
}

/// nginx behind a toxiproxy: the file's bytes, the servers (dropped last) and the proxied URL.
struct Proxied {
    file: Vec<u8>,
    url: String,
    toxiproxy: Toxiproxy,
    _nginx: Nginx,
    _data: TempDir,
}

const PROXY: &str = "web";

fn proxied_nginx(len: usize, seed: u64) -> Option<Proxied> {
    let data = TempDir::new("http-data");
    let file = write_random(&data, "file.bin", len, seed);
    let nginx = Nginx::start(data.path(), "max_ranges 4096;")?;
    let toxiproxy = Toxiproxy::start()?;
    let listen = format!("127.0.0.1:{}", toxiproxy.proxy(PROXY, nginx.port()));
    let url = format!("http://{listen}/file.bin");
    Some(Proxied {
        file,
        url,
        toxiproxy,
        _nginx: nginx,
        _data: data,
    })
}

/// 200 basket-sized ranges at 50 ms round-trip time cost one round trip, not 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_two_hundred_ranges_cost_one_round_trip() {
    let Some(setup) = proxied_nginx(8 * MB, 20) else {
        return;
    };
    const ONE_WAY_MS: u64 = 25;
    for (name, stream) in [("up", "upstream"), ("down", "downstream")] {
        let attributes = format!(r#"{{"latency":{ONE_WAY_MS}}}"#);
        setup
            .toxiproxy
            .add_toxic(PROXY, name, "latency", stream, &attributes);
    }
    let ranges = basket_ranges(setup.file.len() as u64, 200, 21);
    bounded(async {
        let start = Instant::now();
        let source = HttpSource::open(&setup.url, HttpOptions::default())
            .await
            .unwrap();
        let opened = start.elapsed();

        let before = source.report().counters;
        let start = Instant::now();
        assert_reads_match(&source, &setup.file, &ranges).await;
        let vectored = start.elapsed();
        let used = delta(source.report().counters, before);

        // For scale: ten of the same ranges read one after the other.
        let start = Instant::now();
        for r in &ranges[..10] {
            assert_reads_match(&source, &setup.file, &[*r]).await;
        }
        let one_by_one = start.elapsed() / 10;
        println!(
            "50 ms RTT: open {opened:?}; 200 ranges in one read {vectored:?} ({used:?}); \
             one range per read {one_by_one:?} each"
        );
        assert_eq!((used.requests, used.round_trips), (1, 1), "{used:?}");
        // Not a benchmark: only tells one round trip (about 0.05 s) from 200 (about 10 s).
        assert!(vectored < Duration::from_millis(50 * 20), "{vectored:?}");

        // 2000 smaller baskets with the default options: ten requests over eight connections.
        let many = basket_ranges(setup.file.len() as u64, 2000, 27);
        let before = source.report().counters;
        let start = Instant::now();
        assert_reads_match(&source, &setup.file, &many).await;
        let used = delta(source.report().counters, before);
        println!(
            "50 ms RTT: 2000 ranges in one read {:?} ({used:?})",
            start.elapsed()
        );
        assert!(used.round_trips <= 2, "{used:?}");
    })
    .await;
}

/// The proxy closes connections after 64 KB: a large multipart answer is cut short and the ranges
/// are asked one by one (retried on fresh connections); a range larger than the limit can never
/// arrive and ends in a clear error. Bytes are never wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_cut_short_are_retried_or_clear_errors() {
    let Some(setup) = proxied_nginx(2 * MB, 22) else {
        return;
    };
    bounded(async {
        let source = HttpSource::open(&setup.url, quick_options()).await.unwrap();
        setup.toxiproxy.add_toxic(
            PROXY,
            "cut",
            "limit_data",
            "downstream",
            r#"{"bytes":65536}"#,
        );

        let small: Vec<ByteRange> = (0..20)
            .map(|i| ByteRange::new(i * 100_000, 16_000))
            .collect();
        let before = source.report().counters;
        match source.read_ranges(&small).await {
            Ok(got) => {
                for (r, bytes) in small.iter().zip(&got) {
                    assert!(
                        bytes[..] == setup.file[r.offset as usize..r.end() as usize],
                        "{r:?}"
                    );
                }
                println!(
                    "64 KB per connection, 20 x 16 KB: right bytes with {:?}",
                    delta(source.report().counters, before)
                );
            }
            Err(e) => {
                let e = e.to_string();
                println!("64 KB per connection, 20 x 16 KB: {e}");
                assert!(e.contains(&setup.url) && e.contains("cut short"), "{e}");
            }
        }

        let start = Instant::now();
        let err = source
            .read_ranges(&[ByteRange::new(1000, 200_000)])
            .await
            .unwrap_err()
            .to_string();
        println!(
            "64 KB per connection, one 200 KB range: {err} ({:?})",
            start.elapsed()
        );
        assert!(
            err.contains(&setup.url) && err.contains("range 1000..201000"),
            "{err}"
        );
        assert!(
            err.contains("cut short") && err.contains("3 attempts"),
            "{err}"
        );
    })
    .await;
}

/// The server stops answering: a timeout error within the bounded time, naming URL and range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_is_a_timeout_error() {
    let Some(setup) = proxied_nginx(MB, 23) else {
        return;
    };
    bounded(async {
        let options = HttpOptions {
            policy: RequestPolicy::with_timeout(Duration::from_secs(1)).with_retries(1),
            ..quick_options()
        };
        let source = HttpSource::open(&setup.url, options).await.unwrap();
        setup.toxiproxy.add_toxic(
            PROXY,
            "silence",
            "timeout",
            "downstream",
            r#"{"timeout":0}"#,
        );
        let ranges = [ByteRange::new(0, 100), ByteRange::new(500_000, 100)];
        let start = Instant::now();
        let silent = source.read_ranges(&ranges).await.unwrap_err();
        let waited = start.elapsed();
        assert_eq!(silent.io_kind(), IoKind::TimedOut, "{silent}");
        let err = silent.to_string();
        println!("silent server: {err} after {waited:?}");
        assert!(err.contains(&setup.url) && err.contains("0..100"), "{err}");
        assert!(
            err.contains("no answer") || err.contains("stopped sending"),
            "{err}"
        );
        // Two attempts of 1 s and one wait between them: well under 10 s.
        assert!(waited < Duration::from_secs(10), "{waited:?}");

        setup.toxiproxy.remove_toxic(PROXY, "silence");
        assert_reads_match(&source, &setup.file, &ranges).await;
    })
    .await;
}

/// Connections reset by the peer: a clear error once retries are spent; the source recovers
/// when the network does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_resets_are_clear_errors_and_the_source_recovers() {
    let Some(setup) = proxied_nginx(MB, 24) else {
        return;
    };
    bounded(async {
        let source = HttpSource::open(&setup.url, quick_options()).await.unwrap();
        setup
            .toxiproxy
            .add_toxic(PROXY, "reset", "reset_peer", "upstream", r#"{"timeout":0}"#);
        let ranges = random_ranges(setup.file.len() as u64, 50, 25);
        let start = Instant::now();
        let err = source.read_ranges(&ranges).await.unwrap_err().to_string();
        println!("reset_peer: {err} after {:?}", start.elapsed());
        assert!(
            err.contains(&setup.url) && err.contains("3 attempts"),
            "{err}"
        );

        setup.toxiproxy.remove_toxic(PROXY, "reset");
        assert_reads_match(&source, &setup.file, &ranges).await;
    })
    .await;
}
