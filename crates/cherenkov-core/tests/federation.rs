//! Replicas found through a real XRootD redirector: a federation of `cmsd`+`xrootd` (manager and
//! data servers, see `support/federation.rs`) on one machine, serving the shared test data. Every
//! read is compared byte for byte with the file on disk; every test is bounded in time and skips
//! with a message when a server or the test data is missing.
//!
//! Run: `cargo test -p cherenkov-core --release --test federation -- --nocapture` to see the
//! replica reports.

mod support;

use bytes::Bytes;
use cherenkov_core::source::multi::{MultiOptions, MultiSource};
use cherenkov_core::source::xrootd::{
    open_excluding, RedirectorFinder, XrootdOptions, XrootdSource,
};
use cherenkov_core::source::{self, ByteRange, SharedSource, SourceOptions};
use cherenkov_core::source::{RequestOverrides, RequestPolicy};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use support::federation::Federation;
use support::xrootd::XrootdServer;
use support::{bounded, shared_testdata, Random};

const FILE: &str = "nanolike-root6.40-zstd-4clusters.root";

/// Short timeouts, no retries: a dead or frozen server shows within seconds.
fn quick() -> SourceOptions {
    SourceOptions {
        request: RequestOverrides {
            timeout: Some(Duration::from_secs(3)),
            retries: Some(0),
            ..RequestOverrides::default()
        },
        ..SourceOptions::default()
    }
}

fn quick_xrootd() -> XrootdOptions {
    XrootdOptions {
        policy: RequestPolicy::with_timeout(Duration::from_secs(3)).with_retries(0),
        discover: false,
        ..XrootdOptions::default()
    }
}

/// The test data directory and the bytes of `FILE`, or `None` (skipped).
fn testdata() -> Option<(PathBuf, Vec<u8>)> {
    let dir = shared_testdata()?;
    let bytes = std::fs::read(dir.join(FILE)).expect("read the test file");
    Some((dir, bytes))
}

/// `FILE` through the redirector, once its replica set has `count` replicas in use: the redirector
/// may answer the first time before every data server has told it, and is asked again a second
/// later; a replica found joins once its head and tail agree with the file's (on a loaded machine,
/// after some reads).
async fn open_replicas(fed: &Federation, count: usize) -> SharedSource {
    let file = source::open(&fed.url(FILE), &quick())
        .await
        .expect("open")
        .source;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let in_use = |file: &SharedSource| {
        let reports = file.report().replicas.expect("a replica set");
        reports.iter().filter(|r| r.state == "in use").count()
    };
    while in_use(&file) < count {
        assert!(
            std::time::Instant::now() < deadline,
            "{:#?}",
            file.report().replicas
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    file
}

/// Read `rounds` requests of 40 random ranges and check every byte against `data`.
async fn read_and_check(source: &SharedSource, data: &[u8], rng: &mut Random, rounds: usize) {
    for _ in 0..rounds {
        let ranges: Vec<ByteRange> = (0..40)
            .map(|_| {
                let len = 1 + rng.below(60_000);
                ByteRange::new(rng.below(data.len() as u64 - len), len)
            })
            .collect();
        let got: Vec<Bytes> = source.read_ranges(&ranges).await.expect("read");
        for (r, g) in ranges.iter().zip(&got) {
            assert!(
                g[..] == data[r.offset as usize..r.end() as usize],
                "wrong bytes for {}..{}",
                r.offset,
                r.end()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_open_through_the_redirector_finds_every_data_server() {
    let Some((dir, data)) = testdata() else {
        return;
    };
    let Some(fed) = Federation::start(&dir, 3, false).await else {
        return;
    };
    bounded(async {
        // The redirector has most likely not looked this file up yet: the kXR_locate sent with
        // the open gets kXR_wait or names the servers that have answered so far; the replica set
        // grows when the redirector is asked again a second later.
        let file = open_replicas(&fed, 3).await;
        let mut names: Vec<String> = file
            .report()
            .replicas
            .unwrap()
            .into_iter()
            .map(|r| r.name)
            .collect();
        println!("replicas: {names:?}");
        // Each data server once, opened directly.
        let mut servers: Vec<String> = fed.servers.iter().map(|s| s.url(FILE)).collect();
        names.sort();
        servers.sort();
        assert_eq!(names, servers);
        read_and_check(&file, &data, &mut Random::new(1), 20).await;
        let reports = file.report().replicas.unwrap();
        assert!(
            reports.iter().all(|r| r.requests > 0),
            "every replica served or was probed: {reports:#?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_can_be_switched_off() {
    let Some((dir, data)) = testdata() else {
        return;
    };
    let Some(fed) = Federation::start(&dir, 2, false).await else {
        return;
    };
    bounded(async {
        let options = SourceOptions {
            discover: Some(false),
            ..quick()
        };
        let file = source::open(&fed.url(FILE), &options)
            .await
            .expect("open")
            .source;
        assert!(file.report().replicas.is_none());
        read_and_check(&file, &data, &mut Random::new(2), 3).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_server_named_by_host_name_is_not_its_own_replica() {
    let Some((dir, data)) = testdata() else {
        return;
    };
    let Some(server) = XrootdServer::start(&dir, "") else {
        return;
    };
    bounded(async {
        // Its kXR_locate answer names it by address (127.0.0.1): the same server.
        let url = format!("root://localhost:{}//{FILE}", server.port());
        let file = source::open(&url, &quick()).await.expect("open").source;
        assert!(
            file.report().replicas.is_none(),
            "{:?}",
            file.report().replicas
        );
        read_and_check(&file, &data, &mut Random::new(3), 2).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_server_killed_mid_read_costs_no_failed_read() {
    let Some((dir, data)) = testdata() else {
        return;
    };
    let Some(mut fed) = Federation::start(&dir, 2, false).await else {
        return;
    };
    bounded(async {
        let file = open_replicas(&fed, 2).await;
        let mut rng = Random::new(4);
        read_and_check(&file, &data, &mut rng, 5).await;
        // Kill the server of the replica that served the most (the one the reader prefers, so the
        // next reads surely ask it); replicas are named by their server's address.
        let reports = file.report().replicas.unwrap();
        let victim = reports.iter().max_by_key(|r| r.bytes).unwrap().name.clone();
        let index = fed
            .servers
            .iter()
            .position(|s| s.url(FILE) == victim)
            .expect("a data server's URL");
        fed.kill(index);
        read_and_check(&file, &data, &mut rng, 10).await;
        let reports = file.report().replicas.unwrap();
        println!("after the kill: {reports:#?}");
        let killed = reports.iter().find(|r| r.name == victim).unwrap();
        assert!(killed.errors >= 1 && killed.disabled, "{reports:#?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxied_data_servers_are_found_and_read_through_their_proxies() {
    let Some((dir, data)) = testdata() else {
        return;
    };
    let Some(fed) = Federation::start(&dir, 2, true).await else {
        return;
    };
    bounded(async {
        let file = open_replicas(&fed, 2).await;
        let reports = file.report().replicas.unwrap();
        // The redirector names the proxies ([::1]:PORT), where the data servers do not listen.
        assert!(reports[1].name.starts_with("root://[::1]:"), "{reports:#?}");
        let mut rng = Random::new(5);
        read_and_check(&file, &data, &mut rng, 5).await;
        // Cut the link of the replica that served the most (the one the reader prefers): the
        // reads all go on through the other proxy.
        let toxiproxy = fed.toxiproxy.as_ref().unwrap();
        let reports = file.report().replicas.unwrap();
        let cut = reports.iter().max_by_key(|r| r.bytes).unwrap().name.clone();
        let victim = fed
            .servers
            .iter()
            .find(|s| s.url(FILE) == cut)
            .expect("a data server's URL");
        toxiproxy.set_enabled(victim.proxy.as_deref().unwrap(), false);
        read_and_check(&file, &data, &mut rng, 10).await;
        let reports = file.report().replicas.unwrap();
        println!("after the cut: {reports:#?}");
        let cut = reports.iter().find(|r| r.name == cut).unwrap();
        assert!(cut.errors >= 1, "the cut link failed reads: {reports:#?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tried_sends_the_open_to_a_server_not_in_use() {
    let Some((dir, data)) = testdata() else {
        return;
    };
    let Some(fed) = Federation::start(&dir, 2, false).await else {
        return;
    };
    bounded(async {
        // cmsd excludes the first data server with a `tried` address; all are on 127.0.0.1 here,
        // and server 0 registered first.
        let in_use = fed.servers[0].address();
        // A frozen server stays registered: without `tried` the redirector would send about half
        // of the opens there, and they would hang.
        fed.freeze(0);
        for _ in 0..4 {
            let other = open_excluding(
                &fed.url(FILE),
                std::slice::from_ref(&in_use),
                quick_xrootd(),
            )
            .await
            .expect("open excluding the server in use");
            assert_eq!(other.server_address(), fed.servers[1].address());
            let source: SharedSource = Arc::new(other);
            read_and_check(&source, &data, &mut Random::new(6), 1).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_replica_fails_the_redirector_finds_another() {
    let Some((dir, data)) = testdata() else {
        return;
    };
    let Some(fed) = Federation::start(&dir, 2, false).await else {
        return;
    };
    bounded(async {
        // A replica set that knows one data server only, and may ask the redirector for more.
        let known = XrootdSource::open(&fed.servers[0].url(FILE), quick_xrootd())
            .await
            .expect("open the first data server");
        let finder =
            RedirectorFinder::new(&fed.url(FILE), quick_xrootd(), vec![known.server_address()]);
        let file: SharedSource = Arc::new(
            MultiSource::new(vec![Arc::new(known)], MultiOptions::default())
                .await
                .unwrap()
                .with_finder(Arc::new(finder)),
        );
        let mut rng = Random::new(7);
        read_and_check(&file, &data, &mut rng, 2).await;
        fed.freeze(0);
        read_and_check(&file, &data, &mut rng, 5).await;
        let reports = file.report().replicas.unwrap();
        println!("after the freeze: {reports:#?}");
        assert_eq!(reports.len(), 2, "one replica found: {reports:#?}");
        assert!(reports[0].errors >= 1 && reports[1].bytes > 0);
        // The redirector's kXR_locate named the other server.
        assert_eq!(reports[1].name, fed.servers[1].url(FILE));
    })
    .await;
}
