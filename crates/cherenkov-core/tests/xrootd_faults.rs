//! The native XRootD source through a real toxiproxy in front of a real `xrootd` on 127.0.0.1:
//! latency, slow and dripping answers, resets, answers cut short, servers that stop answering or
//! are killed. Every read is compared byte for byte with the file; every test is bounded in time
//! and skips with a message when a server or toxiproxy is not installed.

mod support;

use cherenkov_core::source::xrootd::{XrootdOptions, XrootdSource};
use cherenkov_core::source::RequestPolicy;
use cherenkov_core::source::{ByteRange, ByteSource};
use cherenkov_core::IoKind;
use std::time::{Duration, Instant};
use support::reads::{assert_same, io_message, random_file, random_ranges};
use support::toxiproxy::Toxiproxy;
use support::xrootd::{test_options, XrootdServer};
use support::{bounded, Random, TempDir};

/// A data server with one random file behind a toxiproxy proxy named "xrd".
struct Faulty {
    data: Vec<u8>,
    url: String,
    proxy: Toxiproxy,
    server: XrootdServer,
    _dir: TempDir,
}

fn faulty_server(len: usize, seed: u64) -> Option<Faulty> {
    let (dir, data) = random_file("f.bin", len, seed);
    let server = XrootdServer::start(dir.path(), "")?;
    let proxy = Toxiproxy::start()?;
    let port = proxy.proxy("xrd", server.port());
    let url = format!("root://127.0.0.1:{port}//f.bin");
    Some(Faulty {
        data,
        url,
        proxy,
        server,
        _dir: dir,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_is_paid_once_per_vectored_read() {
    let Some(f) = faulty_server(2_000_000, 13) else {
        return;
    };
    bounded(async {
        // 25 ms each way: a 50 ms round trip.
        f.proxy
            .add_toxic("xrd", "up", "latency", "upstream", r#"{"latency":25}"#);
        f.proxy
            .add_toxic("xrd", "down", "latency", "downstream", r#"{"latency":25}"#);
        let start = Instant::now();
        let source = XrootdSource::open(&f.url, test_options())
            .await
            .expect("open");
        println!("open at 50 ms RTT: {:?}", start.elapsed());
        let ranges = random_ranges(&mut Random::new(14), f.data.len() as u64, 20, 20_000);

        let start = Instant::now();
        let got = source.read_ranges(&ranges).await.expect("vectored read");
        let vectored = start.elapsed();
        assert_same(&f.data, &ranges, &got);
        assert_eq!(source.report().counters.round_trips, 1);

        let start = Instant::now();
        for r in &ranges {
            let got = source
                .read_ranges(std::slice::from_ref(r))
                .await
                .expect("single read");
            assert_same(&f.data, std::slice::from_ref(r), &got);
        }
        let one_by_one = start.elapsed();
        assert_eq!(source.report().counters.round_trips, 21);
        println!("20 ranges at 50 ms RTT: vectored {vectored:?}, one by one {one_by_one:?}");
        assert!(
            one_by_one >= Duration::from_millis(20 * 50),
            "each read waited a round trip"
        );
        assert!(
            vectored * 2 < one_by_one,
            "the vectored read waited about one round trip"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_answer_is_not_cut_short_by_the_timeout() {
    let Some(f) = faulty_server(3_000_000, 20) else {
        return;
    };
    bounded(async {
        // 3 MB at 1 MB/s takes about 3 s, three times the request timeout; bytes keep coming.
        let options = XrootdOptions {
            policy: RequestPolicy {
                timeout: Duration::from_secs(1),
                ..test_options().policy
            },
            ..test_options()
        };
        let source = XrootdSource::open(&f.url, options).await.expect("open");
        f.proxy
            .add_toxic("xrd", "slow", "bandwidth", "downstream", r#"{"rate":1000}"#);
        let ranges = [
            ByteRange::new(0, 2_000_000),
            ByteRange::new(2_000_000, 1_000_000),
        ];
        let start = Instant::now();
        let got = source.read_ranges(&ranges).await.expect("slow read");
        assert_same(&f.data, &ranges, &got);
        let c = source.report().counters;
        println!(
            "3 MB at 1 MB/s with a 1 s timeout: {:?}, {c:?}",
            start.elapsed()
        );
        assert_eq!(
            (c.requests, c.round_trips),
            (1, 1),
            "no timeout, no second attempt"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_reset_mid_read_is_retried() {
    let Some(f) = faulty_server(4_000_000, 15) else {
        return;
    };
    bounded(async {
        let source = XrootdSource::open(&f.url, test_options())
            .await
            .expect("open");
        // About 2 s for the whole file at 2 MB/s: the reset lands in the middle.
        f.proxy
            .add_toxic("xrd", "slow", "bandwidth", "downstream", r#"{"rate":2000}"#);
        let ranges: Vec<ByteRange> = (0..8)
            .map(|i| ByteRange::new(i * 500_000, 500_000))
            .collect();
        let start = Instant::now();
        let (got, ()) = tokio::join!(source.read_ranges(&ranges), async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            f.proxy.add_toxic(
                "xrd",
                "reset",
                "reset_peer",
                "downstream",
                r#"{"timeout":0}"#,
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
            f.proxy.remove_toxic("xrd", "reset");
        });
        let got = got.expect("the read is sent again on a new connection");
        assert_same(&f.data, &ranges, &got);
        let c = source.report().counters;
        println!("reset mid-read: recovered in {:?}, {c:?}", start.elapsed());
        assert!(
            c.round_trips >= 2 && c.requests >= 2,
            "the read was sent again: {c:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_that_persist_give_a_clear_error() {
    let Some(f) = faulty_server(1_000_000, 16) else {
        return;
    };
    bounded(async {
        let source = XrootdSource::open(&f.url, test_options())
            .await
            .expect("open");
        f.proxy
            .add_toxic("xrd", "reset", "reset_peer", "upstream", r#"{"timeout":0}"#);
        let start = Instant::now();
        let e = source
            .read_ranges(&[ByteRange::new(1000, 2000), ByteRange::new(9000, 10)])
            .await
            .unwrap_err();
        let message = io_message(&e, &f.url);
        println!("persistent reset after {:?}: {e}", start.elapsed());
        assert!(message.contains("2 ranges in 1000..9010"), "{message}");
        assert!(message.contains("gave up after 4 attempts"), "{message}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_cut_short_are_never_returned() {
    let Some(f) = faulty_server(3_000_000, 21) else {
        return;
    };
    bounded(async {
        let source = XrootdSource::open(&f.url, test_options())
            .await
            .expect("open");
        // Every connection is closed after 1 MB of answers: no attempt can complete.
        f.proxy.add_toxic(
            "xrd",
            "cut",
            "limit_data",
            "downstream",
            r#"{"bytes":1000000}"#,
        );
        let ranges: Vec<ByteRange> = (0..3)
            .map(|i| ByteRange::new(i * 1_000_000, 1_000_000))
            .collect();
        let Err(e) = source.read_ranges(&ranges).await else {
            panic!("a read answered through a link cut after 1 MB")
        };
        let message = io_message(&e, &f.url);
        println!("answers cut short: {e}");
        assert!(
            message.contains("reading 3 ranges in 0..3000000"),
            "{message}"
        );
        assert!(message.contains("gave up after 4 attempts"), "{message}");

        f.proxy.remove_toxic("xrd", "cut");
        let got = source
            .read_ranges(&ranges)
            .await
            .expect("read on a sound link");
        assert_same(&f.data, &ranges, &got);
    })
    .await;
}

/// The server drips its answers at a byte a second (toxiproxy's slicer): the connection's rate
/// stays under `min_rate` for the timeout, so each attempt is abandoned after it, whatever the
/// request's size (a 2 MB read was allowed `timeout + 2 MB / min_rate`, a minute, before), and the
/// read fails as a timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dripping_server_is_abandoned_after_the_timeout_whatever_the_size() {
    let Some(f) = faulty_server(3_000_000, 19) else {
        return;
    };
    bounded(async {
        let options = XrootdOptions {
            policy: RequestPolicy::with_timeout(Duration::from_secs(1)).with_retries(1),
            adaptive: false,
            ..XrootdOptions::default()
        };
        let source = XrootdSource::open(&f.url, options).await.expect("open");
        f.proxy.add_toxic(
            "xrd",
            "drip",
            "slicer",
            "downstream",
            r#"{"average_size":1,"size_variation":0,"delay":1000000}"#,
        );
        let start = Instant::now();
        let e = source
            .read_ranges(&[ByteRange::new(0, 2_000_000)])
            .await
            .unwrap_err();
        let elapsed = start.elapsed();
        println!("dripping server: {e} after {elapsed:?}");
        assert_eq!(e.io_kind(), IoKind::TimedOut, "{e}");
        let message = io_message(&e, &f.url);
        assert!(message.contains("came too slowly"), "{message}");
        // Two attempts of about 1 s each, a pause, and a reconnection (through the drip).
        assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
        f.proxy.remove_toxic("xrd", "drip");
        let got = source.read_ranges(&[ByteRange::new(0, 2_000_000)]).await;
        assert_same(
            &f.data,
            &[ByteRange::new(0, 2_000_000)],
            &got.expect("read"),
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_answering_times_out() {
    let Some(f) = faulty_server(1_000_000, 17) else {
        return;
    };
    bounded(async {
        let options = XrootdOptions {
            policy: RequestPolicy::with_timeout(Duration::from_secs(1)).with_retries(1),
            ..XrootdOptions::default()
        };
        let source = XrootdSource::open(&f.url, options).await.expect("open");
        // Data stops flowing both ways; the connections stay open.
        f.proxy.add_toxic(
            "xrd",
            "silence",
            "timeout",
            "downstream",
            r#"{"timeout":0}"#,
        );
        let start = Instant::now();
        let e = source
            .read_ranges(&[ByteRange::new(123, 456)])
            .await
            .unwrap_err();
        let elapsed = start.elapsed();
        let message = io_message(&e, &f.url);
        println!("silent server: {e} after {elapsed:?}");
        assert!(message.contains("range 123..579"), "{message}");
        assert!(message.contains("no answer"), "{message}");
        assert_eq!(e.io_kind(), IoKind::TimedOut, "{e}");
        // Two attempts of at most 1 s each, a pause, and a reconnection of at most 1 s.
        assert!(
            elapsed < Duration::from_secs(10),
            "bounded by the timeout and retries"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_read_fails_clearly_then_recovers() {
    let Some(mut f) = faulty_server(4_000_000, 18) else {
        return;
    };
    bounded(async {
        let options = XrootdOptions {
            policy: test_options().policy.with_retries(2),
            ..test_options()
        };
        let source = XrootdSource::open(&f.url, options).await.expect("open");
        // The request takes 500 ms to reach the server, which dies after 200 ms: the read is in
        // flight when its connection drops, and nothing answers the attempts that follow.
        f.proxy
            .add_toxic("xrd", "slow", "latency", "upstream", r#"{"latency":500}"#);
        let ranges: Vec<ByteRange> = (0..4)
            .map(|i| ByteRange::new(i * 1_000_000, 1_000_000))
            .collect();
        let start = Instant::now();
        let (result, ()) = tokio::join!(source.read_ranges(&ranges), async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            f.server.kill();
        });
        let Err(e) = result else {
            panic!("a read answered by a server killed before it got the request")
        };
        let message = io_message(&e, &f.url);
        println!("server killed mid-read: {e} after {:?}", start.elapsed());
        assert!(
            message.contains("reading 4 ranges in 0..4000000"),
            "{message}"
        );
        assert!(message.contains("gave up after 3 attempts"), "{message}");

        // The server comes back on the same port: the same source reconnects by itself.
        f.proxy.remove_toxic("xrd", "slow");
        f.server.restart();
        let got = source
            .read_ranges(&ranges)
            .await
            .expect("read after the restart");
        assert_same(&f.data, &ranges, &got);
    })
    .await;
}
