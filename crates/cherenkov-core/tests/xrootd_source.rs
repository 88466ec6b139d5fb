//! The native XRootD source against a real `xrootd` on 127.0.0.1 (and, for a slow or faulty
//! network, through a real toxiproxy). Every read is compared byte for byte with the file on disk;
//! every test is bounded in time and skips with a message when a server is not installed.
//!
//! Run: `cargo test -p cherenkov-core --test xrootd_source -- --nocapture` to see the measured
//! requests, round trips and times.

mod support;

use cherenkov_core::source::xrootd::{list_directory, version_of, XrootdOptions, XrootdSource};
use cherenkov_core::source::RequestPolicy;
use cherenkov_core::source::{ByteRange, ByteSource};
use cherenkov_core::{Error, IoKind};
use std::time::{Duration, Instant};
use support::reads::{assert_same, io_message, random_file, random_ranges};
use support::xrootd::{test_options, XrootdServer};
use support::{bounded, shared_testdata, Random, TempDir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_reports_size_name_and_limits() {
    let (dir, data) = random_file("sub/file.bin", 3_000_000, 1);
    let Some(server) = XrootdServer::start(dir.path(), "") else {
        return;
    };
    bounded(async {
        let canonical = server.url("sub/file.bin");
        let single_slash = format!("root://127.0.0.1:{}/sub/file.bin", server.port());
        for url in [canonical, single_slash] {
            let source = XrootdSource::open(&url, test_options())
                .await
                .expect("open");
            assert_eq!(source.name(), url);
            assert_eq!(source.size(), data.len() as u64);
            assert_eq!(source.stat_size().await.unwrap(), data.len() as u64);
            let limits = source.limits();
            assert_eq!(
                limits.max_ranges_per_request, 1024,
                "readv_iov_max of xrootd 5"
            );
            assert_eq!(limits.max_range_len, 2_097_136, "readv_ior_max of xrootd 5");
            assert!(limits.max_request_bytes < (1 << 31) - 1);
            assert_eq!(source.report().counters.requests, 0);
            source.close().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_errors_are_clear() {
    let (dir, _) = random_file("a.bin", 10, 2);
    let Some(server) = XrootdServer::start(dir.path(), "") else {
        return;
    };
    bounded(async {
        let url = server.url("no/such/file.root");
        let e = XrootdSource::open(&url, test_options()).await.unwrap_err();
        let message = io_message(&e, &url);
        assert!(message.contains("kXR_NotFound"), "{message}");
        assert_eq!(e.io_kind(), IoKind::NotFound);
        println!("missing file: {e}");

        let e = XrootdSource::open("http://127.0.0.1/a", test_options())
            .await
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");

        // Nothing listens there: refused at once, tried again a bounded number of times.
        let url = format!("root://127.0.0.1:{}//a.bin", support::free_port());
        let options = XrootdOptions {
            policy: test_options().policy.with_retries(2),
            ..test_options()
        };
        let start = Instant::now();
        let e = XrootdSource::open(&url, options).await.unwrap_err();
        assert!(
            io_message(&e, &url).contains("connection to 127.0.0.1"),
            "{e}"
        );
        println!("refused: {e} after {:?}", start.elapsed());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_ranges_match_the_local_bytes() {
    let (dir, data) = random_file("file.bin", 12_000_000, 3);
    let Some(server) = XrootdServer::start(dir.path(), "") else {
        return;
    };
    bounded(async {
        let url = server.url("file.bin");
        let source = XrootdSource::open(&url, test_options())
            .await
            .expect("open");
        let size = data.len() as u64;
        let mut rng = Random::new(4);

        // Many ranges, overlapping ones included: one readv, one round trip.
        let ranges = random_ranges(&mut rng, size, 300, 64 * 1024);
        let got = source.read_ranges(&ranges).await.expect("readv");
        assert_same(&data, &ranges, &got);
        let c = source.report().counters;
        assert_eq!((c.requests, c.round_trips, c.ranges), (1, 1, 300));
        assert_eq!(c.bytes, ranges.iter().map(|r| r.len).sum::<u64>());

        // Single ranges (kXR_read), including the first and last bytes and an empty range.
        let mut singles = random_ranges(&mut rng, size, 20, 300_000);
        singles.extend([
            ByteRange::new(0, 1),
            ByteRange::new(size - 1, 1),
            ByteRange::new(size - 5000, 5000),
        ]);
        for r in &singles {
            let got = source
                .read_ranges(std::slice::from_ref(r))
                .await
                .expect("read");
            assert_same(&data, std::slice::from_ref(r), &got);
        }
        let mixed = [
            ByteRange::new(5, 0),
            ByteRange::new(100, 10),
            ByteRange::new(size, 0),
        ];
        let got = source
            .read_ranges(&mixed)
            .await
            .expect("read with empty ranges");
        assert_same(&data, &mixed, &got);
        assert!(source.read_ranges(&[]).await.unwrap().is_empty());

        let past = [ByteRange::new(size - 10, 11)];
        let e = source.read_ranges(&past).await.unwrap_err();
        assert!(io_message(&e, &url).contains("past the end"), "{e}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_ranges_and_many_ranges_are_split_by_the_server_limits() {
    let (dir, data) = random_file("big.bin", 24_000_000, 5);
    let Some(server) = XrootdServer::start(dir.path(), "") else {
        return;
    };
    bounded(async {
        let source = XrootdSource::open(&server.url("big.bin"), test_options())
            .await
            .expect("open");
        let mut rng = Random::new(6);
        // 3 ranges longer than readv_ior_max (3 pieces each) and more ranges than readv_iov_max.
        let mut ranges = vec![
            ByteRange::new(1, 5_000_000),
            ByteRange::new(10_000_000, 6_291_408),
            ByteRange::new(2_000_000, 4_500_000),
        ];
        ranges.extend(random_ranges(&mut rng, data.len() as u64, 2500, 4000));
        let start = Instant::now();
        let got = source.read_ranges(&ranges).await.expect("read");
        assert_same(&data, &ranges, &got);
        let c = source.report().counters;
        println!(
            "2503 ranges, 3 of them long: {c:?} in {:?}",
            start.elapsed()
        );
        assert_eq!(c.ranges, 2509, "the long ranges are cut in 3 pieces each");
        assert_eq!(c.requests, 3, "1024 + 1024 + 461 pieces");
        assert_eq!(c.round_trips, 1, "all requests are sent together");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_limits_split_requests_too() {
    let (dir, data) = random_file("f.bin", 1_000_000, 7);
    let Some(server) = XrootdServer::start(dir.path(), "") else {
        return;
    };
    bounded(async {
        let options = XrootdOptions {
            readv_iov_max: Some(7),
            readv_ior_max: Some(1000),
            ..test_options()
        };
        let source = XrootdSource::open(&server.url("f.bin"), options)
            .await
            .expect("open");
        assert_eq!(source.limits().max_ranges_per_request, 7);
        assert_eq!(source.limits().max_range_len, 1000);
        let ranges: Vec<ByteRange> = (0..50)
            .map(|i| ByteRange::new(i * 17_000 + 3, 2500))
            .collect();
        let got = source.read_ranges(&ranges).await.expect("read");
        assert_same(&data, &ranges, &got);
        let c = source.report().counters;
        assert_eq!(c.ranges, 150);
        assert_eq!(c.requests, 22, "150 pieces, 7 per readv");
        assert_eq!(c.round_trips, 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_root_file_in_2000_basket_sized_ranges_takes_one_round_trip() {
    let Some(testdata) = shared_testdata() else {
        return;
    };
    let Some(server) = XrootdServer::start(&testdata, "") else {
        return;
    };
    bounded(async {
        for name in [
            "nanolike-root6.40-zstd-4clusters.root",
            "nanoAOD_2015_CMS_Open_Data_ttbar.root",
        ] {
            let local = std::fs::read(testdata.join(name)).expect("read the local file");
            let source = XrootdSource::open(&server.url(name), XrootdOptions::default())
                .await
                .expect("open");
            assert_eq!(source.size(), local.len() as u64);
            let header = source.read_ranges(&[ByteRange::new(0, 4)]).await.unwrap();
            assert_eq!(&header[0][..], b"root");

            let mut rng = Random::new(8);
            let ranges = random_ranges(&mut rng, local.len() as u64, 2000, 8000);
            let before = source.report().counters;
            let start = Instant::now();
            let got = source.read_ranges(&ranges).await.expect("readv");
            let elapsed = start.elapsed();
            assert_same(&local, &ranges, &got);
            let c = source.report().counters;
            println!(
                "{name}: 2000 ranges, {} requests, {} round trip(s), {} bytes in {elapsed:?}",
                c.requests - before.requests,
                c.round_trips - before.round_trips,
                c.bytes - before.bytes
            );
            assert_eq!(c.round_trips - before.round_trips, 1);
            assert_eq!(c.requests - before.requests, 2, "1024 + 976 ranges");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_cut_short_on_the_server_gives_errors_not_wrong_bytes() {
    let (dir, data) = random_file("f.bin", 1_000_000, 22);
    let Some(server) = XrootdServer::start(dir.path(), "") else {
        return;
    };
    bounded(async {
        let url = server.url("f.bin");
        let source = XrootdSource::open(&url, test_options())
            .await
            .expect("open");
        // Someone truncates the file after it was opened.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("f.bin"))
            .unwrap();
        file.set_len(100_000).unwrap();

        let inside = [ByteRange::new(10, 1000), ByteRange::new(50_000, 10)];
        assert_same(
            &data,
            &inside,
            &source
                .read_ranges(&inside)
                .await
                .expect("read before the cut"),
        );

        let beyond = [ByteRange::new(10, 1000), ByteRange::new(500_000, 10)];
        let e = source.read_ranges(&beyond).await.unwrap_err();
        let message = io_message(&e, &url);
        println!("readv past the new end: {e}");
        assert!(
            message.contains("reading 2 ranges in 10..500010"),
            "{message}"
        );
        assert!(message.contains("server error"), "{message}");

        let e = source
            .read_ranges(&[ByteRange::new(900_000, 5)])
            .await
            .unwrap_err();
        println!("read past the new end: {e}");
        assert!(io_message(&e, &url).contains("range 900000..900005"), "{e}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reads_share_the_connections() {
    let (dir, data) = random_file("f.bin", 4_000_000, 9);
    let Some(server) = XrootdServer::start(dir.path(), "") else {
        return;
    };
    bounded(async {
        let options = XrootdOptions {
            connections: 3,
            ..test_options()
        };
        let source = std::sync::Arc::new(
            XrootdSource::open(&server.url("f.bin"), options)
                .await
                .expect("open"),
        );
        let data = std::sync::Arc::new(data);
        let mut tasks = tokio::task::JoinSet::new();
        for seed in 0..16 {
            let (source, data) = (source.clone(), data.clone());
            tasks.spawn(async move {
                let mut rng = Random::new(100 + seed);
                let n = if seed % 2 == 0 { 1 } else { 200 };
                let ranges = random_ranges(&mut rng, data.len() as u64, n, 50_000);
                let got = source.read_ranges(&ranges).await.expect("read");
                assert_same(&data, &ranges, &got);
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.expect("a reader panicked");
        }
        assert_eq!(source.report().counters.requests, 16);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_followed_and_bounded() {
    let (dir, data) = random_file("redir/f.bin", 500_000, 10);
    let Some(data_server) = XrootdServer::start(dir.path(), "") else {
        return;
    };
    let empty = TempDir::new("xrootd-empty");
    let redirect = format!(
        "xrootd.redirect 127.0.0.1:{} /redir\nxrootd.redirect 127.0.0.1:{{port}} /loop",
        data_server.port()
    );
    let Some(redirector) = XrootdServer::start(empty.path(), &redirect) else {
        return;
    };
    bounded(async {
        let source = XrootdSource::open(&redirector.url("redir/f.bin"), test_options())
            .await
            .expect("open");
        assert_eq!(source.size(), data.len() as u64);
        let ranges = random_ranges(&mut Random::new(11), data.len() as u64, 50, 10_000);
        assert_same(
            &data,
            &ranges,
            &source.read_ranges(&ranges).await.expect("read"),
        );

        let url = redirector.url("loop/f.bin");
        let options = XrootdOptions {
            max_redirects: 3,
            ..test_options()
        };
        let e = XrootdSource::open(&url, options).await.unwrap_err();
        assert!(
            io_message(&e, &url).contains("more than 3 redirects"),
            "{e}"
        );
        println!("redirect loop: {e}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_authentication_is_answered() {
    let (dir, data) = random_file("f.bin", 100_000, 12);
    let Some(server) =
        XrootdServer::start(dir.path(), "xrootd.seclib libXrdSec.so\nsec.protocol unix")
    else {
        return;
    };
    bounded(async {
        let source = XrootdSource::open(&server.url("f.bin"), test_options())
            .await
            .expect("open with unix auth");
        let ranges = [ByteRange::new(10, 1000), ByteRange::new(50_000, 20)];
        assert_same(
            &data,
            &ranges,
            &source.read_ranges(&ranges).await.expect("read"),
        );
    })
    .await;
    // With this configuration the server's login answer asks for `&P=unix` (XRootD's own client
    // reports "Authentication is required: &P=unix"); the open above went through it.
    assert!(
        server.log().contains("Plugin loaded secunix"),
        "the server was set up for unix authentication"
    );
}

/// A server whose files under /stage are "on tape": opening one runs a stage command that takes
/// 2 s to copy it to disk. `stagecmd_mode` "" stages synchronously (meanwhile the server answers
/// kXR_wait, 60 s); "async" makes the server answer kXR_waitresp (and, with no staging daemon to
/// tell it, never send the promised answer).
struct Tape {
    data: Vec<u8>,
    server: XrootdServer,
    /// The tape directory and the server's disk.
    dirs: (TempDir, TempDir),
}

impl Tape {
    /// Wait for a stage command that outlives the test's reads, so that it does not write into
    /// the disk directory after it was removed.
    fn wait_until_staged(&self, name: &str) {
        let staged = self.dirs.1.path().join("stage").join(name);
        let start = Instant::now();
        while !staged.exists() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn tape_server(stagecmd_mode: &str) -> Option<Tape> {
    let tape = TempDir::new("xrootd-tape");
    let data = Random::new(19).bytes(300_000);
    tape.write("f.bin", &data);
    let script = tape.write(
        "stage.sh",
        format!(
            "#!/bin/sh\nsleep 2\nmkdir -p \"$(dirname \"$2\")\"\ncp {}/$(basename \"$1\") \"$2\"\n",
            tape.path().display()
        )
        .as_bytes(),
    );
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let disk = TempDir::new("xrootd-disk");
    let config = format!(
        "all.export /stage stage\noss.stagecmd {stagecmd_mode} {}",
        script.display()
    );
    let server = XrootdServer::start(disk.path(), &config)?;
    Some(Tape {
        data,
        server,
        dirs: (tape, disk),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_longer_than_the_request_timeout_is_a_clear_error() {
    let Some(tape) = tape_server("") else { return };
    bounded(async {
        let url = tape.server.url("stage/f.bin");
        let start = Instant::now();
        let e = XrootdSource::open(&url, test_options()).await.unwrap_err();
        assert!(
            io_message(&e, &url).contains("keeps asking to wait (60 s more"),
            "{e}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no wait beyond the request timeout"
        );
        println!("kXR_wait over the limit: {e}");
    })
    .await;
    tape.wait_until_staged("f.bin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "waits 60 s, as the server asks; run with --ignored"]
async fn a_wait_is_honoured_then_the_open_is_sent_again() {
    let Some(tape) = tape_server("") else { return };
    bounded(async {
        let options = XrootdOptions {
            policy: RequestPolicy {
                timeout: Duration::from_secs(90),
                ..test_options().policy
            },
            ..test_options()
        };
        let start = Instant::now();
        let source = XrootdSource::open(&tape.server.url("stage/f.bin"), options)
            .await
            .expect("open after waiting");
        println!(
            "open of a staged file after kXR_wait: {:?}",
            start.elapsed()
        );
        assert!(
            start.elapsed() >= Duration::from_secs(60),
            "the client waited as asked"
        );
        let ranges = [ByteRange::new(0, 300_000), ByteRange::new(7, 7)];
        assert_same(
            &tape.data,
            &ranges,
            &source.read_ranges(&ranges).await.expect("read"),
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promised_answer_that_never_comes_times_out_and_the_retry_succeeds() {
    let Some(tape) = tape_server("async") else {
        return;
    };
    bounded(async {
        // kXR_waitresp: the request keeps waiting for the answer, at most the request timeout;
        // then it is sent again on a new connection, and by then the file is on disk.
        let options = XrootdOptions {
            policy: RequestPolicy {
                timeout: Duration::from_secs(3),
                ..test_options().policy
            },
            ..test_options()
        };
        let start = Instant::now();
        let source = XrootdSource::open(&tape.server.url("stage/f.bin"), options)
            .await
            .expect("open");
        let elapsed = start.elapsed();
        println!("open after an unanswered kXR_waitresp: {elapsed:?}");
        assert!(
            elapsed >= Duration::from_secs(3),
            "the first attempt waited for the answer"
        );
        let ranges = [ByteRange::new(0, 300_000), ByteRange::new(299_990, 10)];
        assert_same(
            &tape.data,
            &ranges,
            &source.read_ranges(&ranges).await.expect("read"),
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_files_reuse_the_connections_earlier_files_left() {
    let (dir, first) = random_file("a.bin", 1_000_000, 21);
    let second = Random::new(22).bytes(700_000);
    dir.write("b.bin", &second);
    let Some(mut server) = XrootdServer::start(dir.path(), "") else {
        return;
    };
    bounded(async {
        let options = || XrootdOptions {
            adaptive: false,
            ..test_options()
        };
        // xrootd logs each login ("XrootdXeq: user.pid:fd@host ... login").
        let logins = || server.log().matches(" login").count();
        let mut rng = Random::new(23);
        let mut seen = Vec::new();
        for (name, data) in [("a.bin", &first), ("b.bin", &second), ("a.bin", &first)] {
            let source = XrootdSource::open(&server.url(name), options())
                .await
                .expect("open");
            assert_eq!(source.size(), data.len() as u64, "{name}");
            let ranges = random_ranges(&mut rng, data.len() as u64, 50, 20_000);
            assert_same(data, &ranges, &source.read_ranges(&ranges).await.unwrap());
            drop(source);
            seen.push(logins());
        }
        // The first file logged its two connections in; the next files opened on them.
        assert_eq!(seen, [2, 2, 2], "logins after each file");
        // A server restarted since has closed the kept connections: the next open makes new ones.
        server.restart();
        let source = XrootdSource::open(&server.url("b.bin"), options())
            .await
            .expect("open after a restart");
        let ranges = random_ranges(&mut rng, second.len() as u64, 50, 20_000);
        assert_same(
            &second,
            &ranges,
            &source.read_ranges(&ranges).await.unwrap(),
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_lists_sizes_and_versions_as_opens_report_them() {
    // 2 000 entries: the answer comes in many kXR_oksofar parts and is larger than the answers
    // sent with the login.
    let (dir, data) = random_file("data/a.bin", 300_000, 31);
    let names: Vec<String> = (0..2_000)
        .map(|i| format!("small_file_{i:05}.root"))
        .collect();
    for (i, name) in names.iter().enumerate() {
        dir.write(&format!("data/{name}"), &vec![7u8; i % 50]);
    }
    dir.write("data/sub/inner.bin", b"x");
    let Some(server) = XrootdServer::start(dir.path(), "") else {
        return;
    };
    bounded(async {
        let listed = list_directory(&server.url("data"), &test_options())
            .await
            .expect("listing");
        assert_eq!(listed.len(), names.len() + 2);
        let by_name: std::collections::HashMap<_, _> =
            listed.iter().map(|e| (e.name.as_str(), e)).collect();
        assert!(by_name["sub"].is_dir);
        for (i, name) in names.iter().enumerate() {
            let entry = by_name[name.as_str()];
            assert_eq!(
                (entry.size, entry.is_dir),
                ((i % 50) as u64, false),
                "{name}"
            );
        }
        let opened = XrootdSource::open(&server.url("data/a.bin"), test_options())
            .await
            .expect("open")
            .into_opened();
        let entry = by_name["a.bin"];
        assert_eq!(entry.size, data.len() as u64);
        assert_eq!(Some(version_of(entry.modified)), opened.version);

        let top = list_directory(&server.url(""), &test_options())
            .await
            .expect("listing the server's top");
        assert!(top.iter().any(|e| e.name == "data" && e.is_dir), "{top:?}");

        let missing = server.url("no/such/dir");
        let e = list_directory(&missing, &test_options()).await.unwrap_err();
        assert_eq!(e.io_kind(), IoKind::NotFound, "{e}");
        assert!(io_message(&e, &missing).contains("kXR_dirlist"), "{e}");
    })
    .await;
}
