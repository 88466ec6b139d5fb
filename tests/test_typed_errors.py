"""The failures a caller handles apart are Python's own exceptions too, over every protocol and
through the uproot handler: a missing file is a `FileNotFoundError`, a file the server will not
give (refused or missing credentials, no permission) a `PermissionError`, a silent server a
`TimeoutError`; each is also a `cherenkov.SourceError` (an `OSError`) naming the file and the
cause. Real servers: xrootd and nginx on 127.0.0.1 serving a file readable by its owner only (they
run as nobody), and a port that accepts connections and never answers. Refused tokens and keys
are in test_auth.py, test_xrootd_auth.py and test_xrootd_gsi.py (XrdCl)."""

import os
import shutil
import subprocess
import sys

import cherenkov
import pytest
import uproot
from cherenkov_lab import NginxServer, XrootdServer
from conftest import bounded

FILE = "uproot-HZZ.root"
PRIVATE = "private.root"
PROTOCOLS = ["local", "http", "root"]
BUILTIN = {"missing": FileNotFoundError, "refused": PermissionError, "silent": TimeoutError}
TYPED = {"missing": cherenkov.SourceNotFoundError, "refused": cherenkov.SourcePermissionError, "silent": cherenkov.SourceTimeoutError}

pytestmark = pytest.mark.skipif(
    not (shutil.which("xrootd") and shutil.which("nginx")), reason="xrootd and nginx are not installed: run `make setup`"
)


@pytest.fixture(scope="module")
def servers(testdata, folder):
    """A folder with a readable ROOT file and one its owner (root, or the test's user) alone may
    read, served by xrootd and nginx, which run as nobody."""
    shutil.copy(testdata / FILE, folder / FILE)
    os.chmod(folder / FILE, 0o644)
    shutil.copy(testdata / FILE, folder / PRIVATE)
    os.chmod(folder / PRIVATE, 0o600)
    with XrootdServer(folder) as xrootd, NginxServer(folder) as nginx:
        yield {"local": folder, "root": xrootd, "http": nginx}


def url(servers, protocol: str, name: str) -> str:
    if protocol == "local":
        return str(servers["local"] / name)
    return servers[protocol].url(name)


def silent_url(protocol: str, port: int) -> str:
    return f"root://127.0.0.1:{port}//{FILE}" if protocol == "root" else f"http://127.0.0.1:{port}/{FILE}"


def assert_typed(error, fault: str, named: str):
    assert isinstance(error, BUILTIN[fault]) and isinstance(error, TYPED[fault]), type(error).__mro__
    assert isinstance(error, cherenkov.SourceError) and isinstance(error, OSError)
    assert named in str(error), str(error)
    print(f"{fault}: {error}")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_missing_file_is_a_file_not_found_error(servers, protocol):
    missing = url(servers, protocol, "no-such-file.root")
    with pytest.raises(FileNotFoundError) as raised:
        bounded(lambda: cherenkov.open(missing, timeout=5), 60, "the open")
    assert_typed(raised.value, "missing", missing)


@pytest.mark.parametrize("protocol", ["http", "root"])
def test_a_file_the_server_will_not_give_is_a_permission_error(servers, protocol):
    private = url(servers, protocol, PRIVATE)
    with pytest.raises(PermissionError) as raised:
        bounded(lambda: cherenkov.open(private, timeout=5), 60, "the open")
    assert_typed(raised.value, "refused", private)
    # Refusals are never retried: asking again would be refused again.
    assert "gave up after" not in str(raised.value)


LOCAL_PERMISSION = """
import sys, cherenkov
try:
    cherenkov.open(sys.argv[1])
except PermissionError as e:
    print(type(e).__name__, isinstance(e, cherenkov.SourceError), e)
"""


def test_a_local_file_without_permission_is_a_permission_error(servers):
    """The permission is the operating system's. A file of another user, readable by its owner
    only, read in a child process; root reads every file, so as root the child runs without the
    capabilities that let it (setpriv)."""
    private = servers["local"] / "local-private.root"
    shutil.copy(servers["local"] / FILE, private)
    command = [sys.executable, "-c", LOCAL_PERMISSION, str(private)]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root, and setpriv (util-linux) is not there to drop the capabilities")
        os.chown(private, 65534, 65534)
        dropped = "-dac_override,-dac_read_search"
        command = ["setpriv", f"--bounding-set={dropped}", f"--inh-caps={dropped}", *command]
    os.chmod(private, 0o600 if os.geteuid() == 0 else 0o000)
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"SourcePermissionError True {private}: cannot open"), done.stdout


@pytest.mark.parametrize("protocol", ["http", "root"])
def test_a_silent_server_is_a_timeout_error(silent_port, protocol):
    silent = silent_url(protocol, silent_port)
    with pytest.raises(TimeoutError) as raised:
        bounded(lambda: cherenkov.open(silent, timeout=1, retries=1), 60, "the open")
    assert_typed(raised.value, "silent", silent)


def test_replicas_failing_alike_fail_as_that_kind(servers):
    urls = [url(servers, p, "no-such-file.root") for p in ("http", "root")]
    with pytest.raises(FileNotFoundError, match="no replica could be opened") as raised:
        bounded(lambda: cherenkov.open(urls, timeout=5), 60, "the open")
    assert all(u in str(raised.value) for u in urls)


@pytest.mark.parametrize("fault", ["missing", "refused", "silent"])
@pytest.mark.parametrize("protocol", ["http", "root"])
def test_the_uproot_handler_raises_them_too(servers, silent_port, protocol, fault):
    target = {
        "missing": url(servers, protocol, "no-such-file.root"),
        "refused": url(servers, protocol, PRIVATE),
        "silent": silent_url(protocol, silent_port),
    }[fault]
    with pytest.raises(BUILTIN[fault]) as raised:
        bounded(lambda: uproot.open(target, handler=cherenkov.uproot.Source, timeout=1, retries=1), 60, "the open")
    # uproot's builtin type itself (reports name it: "FileNotFoundError"), caused by the typed one
    assert type(raised.value) is BUILTIN[fault] and target in str(raised.value), raised.value
    assert_typed(raised.value.__cause__, fault, target)
