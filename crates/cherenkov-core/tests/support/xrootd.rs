//! A real XRootD data server (`xrootd`, Debian package `xrootd-server`) on a free port, serving a
//! directory read-only; killed when dropped.
//!
//! It runs in the foreground as a child of the test. xrootd refuses to run as root, so as root it
//! is started with `-R nobody`: the data directory must be readable by every user.

use super::{find_binary, free_port, wait_for_port, TempDir};
use cherenkov_core::source::xrootd::XrootdOptions;
use cherenkov_core::source::RequestPolicy;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How long xrootd gets to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(15);

pub struct XrootdServer {
    child: Option<Child>,
    port: u16,
    data: PathBuf,
    extra_config: String,
    /// Config, admin directory and log.
    dir: TempDir,
}

/// The xrootd binary, or `None` with a message saying why tests are skipped.
pub fn xrootd_binary() -> Option<PathBuf> {
    let found = find_binary(&["xrootd"]);
    if found.is_none() {
        eprintln!("SKIPPED: xrootd is not installed (Debian package xrootd-server; scripts/setup.sh installs it)");
    }
    found
}

pub fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

impl XrootdServer {
    /// Serve `data` (as `/`), with `extra_config` lines added to the configuration (`{port}` in
    /// them becomes the server's own port); `None` if xrootd is not installed.
    pub fn start(data: &Path, extra_config: &str) -> Option<XrootdServer> {
        xrootd_binary()?;
        let mut server = XrootdServer {
            child: None,
            port: 0,
            data: data.to_path_buf(),
            extra_config: extra_config.to_string(),
            dir: TempDir::new("xrootd"),
        };
        // A port taken between choosing it and xrootd binding it: try again with another.
        for _ in 0..5 {
            if server.start_on(free_port()) {
                return Some(server);
            }
        }
        panic!("xrootd did not start; its log:\n{}", server.log());
    }

    /// Start the server again on the same port after [`XrootdServer::kill`].
    pub fn restart(&mut self) {
        self.kill();
        for _ in 0..20 {
            if self.start_on(self.port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!(
            "xrootd did not restart on port {}; its log:\n{}",
            self.port,
            self.log()
        );
    }

    fn start_on(&mut self, port: u16) -> bool {
        let Some(binary) = find_binary(&["xrootd"]) else {
            return false;
        };
        let admin = self.dir.path().join("admin");
        std::fs::create_dir_all(&admin).expect("create the xrootd admin directory");
        let _ =
            std::fs::set_permissions(&admin, std::os::unix::fs::PermissionsExt::from_mode(0o777));
        let config = format!(
            "xrd.port {port}\nall.export /\noss.localroot {data}\nall.adminpath {admin}\nall.pidpath {admin}\n{extra}\n",
            data = self.data.display(),
            admin = admin.display(),
            extra = self.extra_config.replace("{port}", &port.to_string()),
        );
        let config_path = self.dir.path().join("xrootd.cfg");
        std::fs::write(&config_path, config).expect("write xrootd.cfg");
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "cherenkov-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let mut command = Command::new(binary);
        if running_as_root() {
            command.args(["-R", "nobody"]);
        }
        let child = command
            .arg("-c")
            .arg(&config_path)
            .arg("-l")
            .arg(self.dir.path().join("xrootd.log"))
            .args(["-n", &name])
            // A pid file (-s) puts its `xrootd.NAME.env` file next to it, not in /tmp.
            .arg("-s")
            .arg(self.dir.path().join("xrootd.pid"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start xrootd");
        self.child = Some(child);
        self.port = port;
        let deadline = std::time::Instant::now() + START_TIMEOUT;
        while std::time::Instant::now() < deadline {
            if wait_for_port(port, Duration::from_millis(100)) {
                return true;
            }
            let exited = self
                .child
                .as_mut()
                .map(|c| matches!(c.try_wait(), Ok(Some(_))));
            if exited == Some(true) {
                break;
            }
        }
        self.kill();
        false
    }

    /// Stop the server at once (SIGKILL): connections drop, nothing answers on the port.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `root://127.0.0.1:PORT//path` for `path` relative to the served directory.
    pub fn url(&self, path: &str) -> String {
        format!(
            "root://127.0.0.1:{}//{}",
            self.port,
            path.trim_start_matches('/')
        )
    }

    /// Everything xrootd logged: it writes `NAME/xrootd.log` next to the path given with `-l`.
    /// (Only that level is searched: the admin directory holds symlinks into /proc.)
    pub fn log(&self) -> String {
        let mut out = String::new();
        for entry in std::fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let log = entry.path().join("xrootd.log");
            if entry.file_name() != "admin" && log.is_file() {
                out.push_str(&std::fs::read_to_string(&log).unwrap_or_default());
            }
        }
        out
    }
}

impl Drop for XrootdServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Options for tests: short timeouts so that faults show quickly.
/// Three retries, within a window they cannot outlast: error messages count 4 attempts.
pub fn test_options() -> XrootdOptions {
    XrootdOptions {
        policy: RequestPolicy::with_timeout(Duration::from_secs(5))
            .with_retries(3)
            .with_retry_window(Duration::from_secs(60)),
        ..XrootdOptions::default()
    }
}
