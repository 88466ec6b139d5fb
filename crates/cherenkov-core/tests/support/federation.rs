//! An XRootD federation on one machine: a redirector (`xrootd` + `cmsd`, `all.role manager`) and
//! data servers (`xrootd` + `cmsd` each, `all.role server`) serving one directory, on free ports.
//! Everything is killed when dropped.
//!
//! The redirector names each data server by the address its cmsd logged in from and the port its
//! xrootd listens on; neither can be configured apart. So:
//! - plain data servers log in over 127.0.0.1 and are named `127.0.0.1:PORT`;
//! - proxied ones (`proxied: true`) sit behind their own toxiproxy proxy, and the redirector names
//!   the proxy: each xrootd listens on 127.0.0.1:PORT only (`-I v4`), its proxy on [::1]:PORT (the
//!   same port on the other loopback address) and its cmsd logs in over [::1], so the redirector
//!   names `[::1]:PORT`. Tests then slow, throttle or cut one data server while clients find it
//!   through the redirector. Clients reach this redirector over [::1] too: a redirector names
//!   only servers of the address family the client came in on (cherenkov's login does not claim
//!   both, `kXR_hasipv64`).
//!
//! cmsd matches `tried=` hosts by IP address, and excludes only the first data server with that
//! address: here all have the same one, and the first is the one that registered first, so the
//! data servers are started one after the other, server 0 first.

use super::toxiproxy::Toxiproxy;
use super::xrootd::{running_as_root, xrootd_binary};
use super::{find_binary, free_port, wait_for_port, TempDir};
use cherenkov_core::source::xrootd::{locate, XrootdOptions};
use cherenkov_core::source::RequestPolicy;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long each daemon gets to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the data servers get to register with the redirector.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(40);

/// One `xrootd` or `cmsd` process.
struct Daemon {
    child: Option<Child>,
}

impl Daemon {
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn signal(&self, signal: &str) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .args([signal, &child.id().to_string()])
                .status();
        }
    }

    fn has_exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_none_or(|c| matches!(c.try_wait(), Ok(Some(_))))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

pub struct DataServer {
    /// The port its xrootd listens on (and, when proxied, its proxy too, on [::1]).
    pub port: u16,
    /// Its toxiproxy proxy's name, when proxied.
    pub proxy: Option<String>,
    xrootd: Daemon,
    cmsd: Daemon,
}

impl DataServer {
    /// `host:port` the redirector names this server by.
    pub fn address(&self) -> String {
        match self.proxy {
            None => format!("127.0.0.1:{}", self.port),
            Some(_) => format!("[::1]:{}", self.port),
        }
    }

    /// The file at `path` on this server, as the redirector names it.
    pub fn url(&self, path: &str) -> String {
        format!(
            "root://{}//{}",
            self.address(),
            path.trim_start_matches('/')
        )
    }
}

pub struct Federation {
    pub servers: Vec<DataServer>,
    /// The proxies' toxiproxy, when some data server is proxied.
    pub toxiproxy: Option<Toxiproxy>,
    manager_port: u16,
    /// The redirector's cmsd port, which data servers log in to.
    cms_port: u16,
    /// The served directory.
    data: PathBuf,
    cmsd: PathBuf,
    xrootd: PathBuf,
    /// `127.0.0.1`, or `[::1]` when proxied.
    loopback: &'static str,
    manager: Vec<Daemon>,
    /// The files of the served directory, located to see which servers have registered.
    probes: Vec<String>,
    /// Configurations and logs.
    dir: TempDir,
}

fn ipv6_loopback() -> bool {
    TcpListener::bind("[::1]:0").is_ok()
}

/// A port free on 127.0.0.1 whose [::1] twin the proxy `name` (to 127.0.0.1:PORT) now holds.
/// The proxy is made before its server starts: a port only checked free on [::1] can be taken
/// (by an outgoing connection's ephemeral port, say) before toxiproxy binds it.
fn port_behind_new_proxy(toxiproxy: &Toxiproxy, name: &str) -> u16 {
    let mut refusals = Vec::new();
    while refusals.len() < 20 {
        let port = free_port();
        match toxiproxy.try_proxy_at(name, &format!("[::1]:{port}"), &format!("127.0.0.1:{port}")) {
            Ok(()) => return port,
            Err(e) => refusals.push(e),
        }
    }
    panic!("toxiproxy refused 20 ports for {name}: {refusals:?}");
}

impl Federation {
    /// Start a redirector and `servers` data servers, all serving `data` as `/`, each data server
    /// behind its own proxy if `proxied`; return once the redirector knows them all. `None` (with
    /// a message saying why the test is skipped) when xrootd, cmsd or, for proxies, toxiproxy or
    /// the IPv6 loopback is missing.
    pub async fn start(data: &Path, servers: usize, proxied: bool) -> Option<Federation> {
        xrootd_binary()?;
        let Some(cmsd) = find_binary(&["cmsd"]) else {
            eprintln!("SKIPPED: cmsd is not installed (Debian package xrootd-server; scripts/setup.sh installs it)");
            return None;
        };
        let xrootd = find_binary(&["xrootd"])?;
        if proxied && !ipv6_loopback() {
            eprintln!("SKIPPED: no IPv6 loopback (::1), which proxied data servers need");
            return None;
        }
        let toxiproxy = if proxied {
            Some(Toxiproxy::start()?)
        } else {
            None
        };
        let mut files: Vec<String> = std::fs::read_dir(data)
            .expect("read the served directory")
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "a federation serves at least one file");
        let dir = TempDir::new("federation");
        let cms_port = free_port();
        let manager_port = free_port();
        let mut federation = Federation {
            servers: Vec::new(),
            toxiproxy,
            manager_port,
            cms_port,
            data: data.to_path_buf(),
            cmsd,
            xrootd,
            loopback: if proxied { "[::1]" } else { "127.0.0.1" },
            manager: Vec::new(),
            probes: files,
            dir,
        };
        // The manager serves no data. Its kXR_wait answers last a second (not 5 to 90): at
        // startup, while it looks a file up, and while it has no data server.
        let manager_config = format!(
            "all.role manager\nall.manager 127.0.0.1:{cms_port}\nxrd.port {manager_port} if exec xrootd\n\
             cms.delay startup 1 lookup 1 service 1 suspend 1\nall.export /\n"
        );
        let cmsd_daemon = federation.spawn(
            &federation.cmsd,
            "manager",
            &manager_config,
            &[],
            Some(cms_port),
        );
        federation.manager.push(cmsd_daemon);
        let xrootd_daemon = federation.spawn(
            &federation.xrootd,
            "manager",
            &manager_config,
            &[],
            Some(manager_port),
        );
        federation.manager.push(xrootd_daemon);

        for i in 0..servers {
            let name = format!("server{i}");
            let port = match &federation.toxiproxy {
                Some(toxiproxy) => port_behind_new_proxy(toxiproxy, &name),
                None => free_port(),
            };
            let server = federation.start_data_server(i, port);
            federation.servers.push(server);
            if !federation.wait_until_registered(REGISTER_TIMEOUT / 2).await {
                // Seen once in CI: both daemons up and logged in, yet the redirector never named
                // the server in 40 s of lookups. Start that server afresh, once.
                eprintln!(
                    "{name} not named by the redirector after {:?}: restarted",
                    REGISTER_TIMEOUT / 2
                );
                federation.kill(i);
                federation.servers[i] = federation.start_data_server(i, port);
                if !federation.wait_until_registered(REGISTER_TIMEOUT / 2).await {
                    panic!(
                        "the redirector did not name all {} data servers, {name} restarted once; \
                         the logs:\n{}",
                        federation.servers.len(),
                        federation.logs()
                    );
                }
            }
        }
        Some(federation)
    }

    /// Start data server `i`'s cmsd and xrootd (xrootd on `port`, 127.0.0.1 only when proxied).
    fn start_data_server(&self, i: usize, port: u16) -> DataServer {
        let name = format!("server{i}");
        let proxied = self.toxiproxy.is_some();
        let cms_port = self.cms_port;
        // xrootd itself (IPv4 only when proxied) reads the manager's address too.
        let config = format!(
            "all.role server\nif exec cmsd\nall.manager {via}:{cms_port}\nelse\n\
             all.manager 127.0.0.1:{cms_port}\nfi\nxrd.port {port} if exec xrootd\n\
             all.export /\noss.localroot {data}\n",
            via = self.loopback,
            data = self.data.display()
        );
        // cmsd first: xrootd logs in to it at start, and tries again only ten seconds later.
        let cmsd = self.spawn(&self.cmsd, &name, &config, &[], None);
        self.wait_for_admin_socket(&name);
        let ipv4_only: &[&str] = if proxied { &["-I", "v4"] } else { &[] };
        let xrootd = self.spawn(&self.xrootd, &name, &config, ipv4_only, Some(port));
        DataServer {
            port,
            proxy: proxied.then_some(name),
            xrootd,
            cmsd,
        }
    }

    /// Start `program` as `name` with `config`; wait until it listens on `port`, if given.
    fn spawn(
        &self,
        program: &Path,
        name: &str,
        config: &str,
        args: &[&str],
        port: Option<u16>,
    ) -> Daemon {
        let admin = self.dir.path().join(name);
        std::fs::create_dir_all(&admin).expect("create an admin directory");
        let _ =
            std::fs::set_permissions(&admin, std::os::unix::fs::PermissionsExt::from_mode(0o777));
        let config_path = self.dir.path().join(format!("{name}.cfg"));
        let config = format!(
            "{config}all.adminpath {admin}\nall.pidpath {admin}\n",
            admin = admin.display()
        );
        std::fs::write(&config_path, config).expect("write a configuration");
        let program_name = program.file_name().unwrap_or_default().to_string_lossy();
        let mut command = Command::new(program);
        command.args(args);
        if running_as_root() {
            command.args(["-R", "nobody"]);
        }
        let child = command
            .arg("-c")
            .arg(&config_path)
            .arg("-l")
            .arg(admin.join(format!("{program_name}.log")))
            .args(["-n", name])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // What it says before its log is open (a bad option, a port taken) shows in logs().
            .stderr(
                std::fs::File::create(admin.join(format!("{program_name}-{name}.stderr.log")))
                    .map_or_else(|_| Stdio::null(), Stdio::from),
            )
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program_name}: {e}"));
        let mut daemon = Daemon { child: Some(child) };
        if let Some(port) = port {
            let deadline = Instant::now() + START_TIMEOUT;
            while !wait_for_port(port, Duration::from_millis(100)) {
                let exited = daemon.has_exited();
                if exited || Instant::now() > deadline {
                    let why = if exited { "exited" } else { "timed out" };
                    panic!(
                        "{program_name} {name} did not listen on port {port} ({why}); the logs:\n{}",
                        self.logs()
                    );
                }
            }
        }
        daemon
    }

    fn wait_for_admin_socket(&self, name: &str) {
        let socket = self
            .dir
            .path()
            .join(name)
            .join(name)
            .join(".olb/olbd.admin");
        let deadline = Instant::now() + START_TIMEOUT;
        while !socket.exists() {
            if Instant::now() > deadline {
                panic!("cmsd {name} did not start; the logs:\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Poll `kXR_locate` until the redirector names every data server started so far (a second
    /// or so); false if it has not within `timeout`.
    async fn wait_until_registered(&self, timeout: Duration) -> bool {
        // A locate sent before the first data server registered is told to wait on and on (for
        // some ten seconds) even once it has: give up early and ask anew.
        let options = XrootdOptions {
            policy: RequestPolicy::with_timeout(Duration::from_secs(2)),
            ..XrootdOptions::default()
        };
        let deadline = Instant::now() + timeout;
        // Another file each time: the redirector keeps what it found for a file, and a server
        // that registers later may be missing from it for a while.
        for probe in self.probes.iter().cycle() {
            let answer = locate(&self.url(probe), &options).await;
            if answer
                .as_ref()
                .is_ok_and(|found| found.len() >= self.servers.len())
            {
                return true;
            }
            if Instant::now() > deadline {
                eprintln!("the redirector's last answer: {answer:?}");
                return false;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        unreachable!("the probes are not empty")
    }

    /// The file at `path` through the redirector.
    pub fn url(&self, path: &str) -> String {
        format!(
            "root://{}:{}//{}",
            self.loopback,
            self.manager_port,
            path.trim_start_matches('/')
        )
    }

    /// Index of the data server the redirector names `address` (`host:port`).
    pub fn index_of(&self, address: &str) -> Option<usize> {
        self.servers.iter().position(|s| s.address() == address)
    }

    /// Kill data server `i` (xrootd and cmsd, SIGKILL): connections drop, the redirector forgets
    /// it.
    pub fn kill(&mut self, i: usize) {
        self.servers[i].xrootd.kill();
        self.servers[i].cmsd.kill();
    }

    /// Freeze data server `i`'s xrootd (SIGSTOP): connections stay open but nothing answers, and
    /// its cmsd keeps it registered, so the redirector still sends clients there.
    pub fn freeze(&self, i: usize) {
        self.servers[i].xrootd.signal("-STOP");
    }

    pub fn thaw(&self, i: usize) {
        self.servers[i].xrootd.signal("-CONT");
    }

    /// Every daemon's log (for failure messages).
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for entry in walk(self.dir.path()) {
            if entry.extension().is_some_and(|e| e == "log") {
                out.push_str(&format!("--- {}\n", entry.display()));
                let text = std::fs::read_to_string(&entry).unwrap_or_default();
                // The last lines only: CI shows a part of a long failure message.
                let tail: Vec<&str> = text.lines().rev().take(20).collect();
                for line in tail.into_iter().rev() {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        out
    }
}

impl Drop for Federation {
    fn drop(&mut self) {
        for i in 0..self.servers.len() {
            // A frozen process dies of SIGKILL too; thawing first lets it go without a trace.
            self.thaw(i);
        }
    }
}

/// Files under `dir`, two levels deep (logs are in `NAME/NAME/`); the admin directories hold
/// sockets and links into /proc, which are skipped.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() && depth < 2 && !path.ends_with(".olb") {
                stack.push((path, depth + 1));
            } else if kind.is_file() {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}
