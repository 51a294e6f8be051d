"""Fixtures for the client tests: a spawned ladle server and, when
LADLE_TEST_MARIADB_URL is set, MariaDB. Every test runs once per target
("ladle", "mariadb") in a fresh database and asserts the same expected values,
so the two are compared through the expectations."""

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pymysql
import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Target:
    name: str
    host: str
    port: int
    user: str = "root"
    password: str = ""
    db: str = ""
    # Ladle's /metrics and /health port (0 for MariaDB).
    metrics_port: int = 0

    def connect_pymysql(self, **kw):
        return pymysql.connect(host=self.host, port=self.port, user=self.user,
                               password=self.password, database=self.db or None,
                               connect_timeout=10, read_timeout=30, write_timeout=30, **kw)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ladle_binary():
    """$LADLE_BIN, else <target>/debug/ladle for $CARGO_TARGET_DIR (or the
    workspace's target/), built with `cargo build -p ladle-server` if missing."""
    env = os.environ.get("LADLE_BIN", "").strip()
    if env:
        return Path(env)
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    binary = target / "debug" / "ladle"
    if not binary.is_file():
        subprocess.run(["cargo", "build", "-p", "ladle-server", "--bin", "ladle"],
                       cwd=ROOT, check=True, stdin=subprocess.DEVNULL)
    return binary


def ladle_logins(metrics_port):
    """ladle_logins_total by method, from a ladle's /metrics."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read()
    pattern = r'^ladle_logins_total\{method="([a-z0-9_]+)"\} (\d+)$'
    return {m[0]: int(m[1]) for m in re.findall(pattern, body.decode(), re.M)}


def _wait_ready(port, proc, log_path, timeout=60):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"ladle exited with {proc.returncode}: {Path(log_path).read_text()[-4000:]}")
        try:
            pymysql.connect(host="127.0.0.1", port=port, user="root", password="",
                            connect_timeout=2).close()
            return
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last = e
            time.sleep(0.1)
    raise RuntimeError(f"server on port {port} not ready after {timeout}s: {last}")


@pytest.fixture(scope="session")
def ladle_server():
    binary = ladle_binary()
    if not binary.is_file():
        pytest.fail(f"ladle binary not found at {binary}")
    tmp = tempfile.mkdtemp(prefix="ladle-pytest-")
    log_path = os.path.join(tmp, "ladle.log")
    # Ports are picked free and released before ladle binds them, so another
    # process can take one in between: start again on new ports.
    for attempt in range(5):
        port, metrics = _free_port(), _free_port()
        log = open(log_path, "wb")
        proc = subprocess.Popen(
            [str(binary), "--listen", f"127.0.0.1:{port}", "--data-dir", os.path.join(tmp, "data"),
             "--metrics-listen", f"127.0.0.1:{metrics}",
             "--durability", os.environ.get("LADLE_TEST_DURABILITY", "memory")],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_ready(port, proc, log_path)
            break
        except RuntimeError:
            proc.kill()
            proc.wait()
            log.close()
            if attempt == 4 or "Address already in use" not in Path(log_path).read_text():
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    try:
        yield Target("ladle", "127.0.0.1", port, metrics_port=metrics)
    finally:
        proc.kill()
        proc.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _mariadb_target():
    url = os.environ.get("LADLE_TEST_MARIADB_URL", "").strip()
    if not url:
        return None
    u = urlparse(url)
    return Target("mariadb", u.hostname or "127.0.0.1", u.port or 3306,
                  u.username or "root", u.password or "")


@pytest.fixture(scope="session")
def mariadb_server():
    """MariaDB at LADLE_TEST_MARIADB_URL, for tests that need both servers
    (the test is skipped without it)."""
    target = _mariadb_target()
    if target is None:
        pytest.skip("LADLE_TEST_MARIADB_URL not set")
    return target


def pytest_generate_tests(metafunc):
    if "target" in metafunc.fixturenames:
        metafunc.parametrize("target", ["ladle", "mariadb"], indirect=True)


@pytest.fixture
def target(request):
    """A Target with a fresh database selected (dropped afterwards)."""
    if request.param == "ladle":
        base = request.getfixturevalue("ladle_server")
    else:
        base = _mariadb_target()
        if base is None:
            pytest.skip("LADLE_TEST_MARIADB_URL not set")
    db = "py_" + re.sub(r"[^a-z0-9]", "_", request.node.originalname.lower())[:40] + "_" + uuid.uuid4().hex[:6]
    admin = pymysql.connect(host=base.host, port=base.port, user=base.user, password=base.password,
                            connect_timeout=10, read_timeout=30)
    with admin.cursor() as c:
        c.execute(f"CREATE DATABASE `{db}`")
    admin.close()
    t = Target(base.name, base.host, base.port, base.user, base.password, db)
    yield t
    try:
        admin = pymysql.connect(host=base.host, port=base.port, user=base.user,
                                password=base.password, connect_timeout=10, read_timeout=30)
        with admin.cursor() as c:
            c.execute(f"DROP DATABASE IF EXISTS `{db}`")
        admin.close()
    except Exception:  # noqa: BLE001 - best-effort clean-up
        pass


KNOWN_FAILURES = Path(__file__).with_name("ladle-known-failures.txt")


def _known_failures():
    """test name -> reason, from ladle-known-failures.txt (`name  # reason`)."""
    out = {}
    if KNOWN_FAILURES.is_file():
        for line in KNOWN_FAILURES.read_text().splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition("#")
            out[name.strip()] = reason.strip() or "known failure"
    return out


def pytest_collection_modifyitems(config, items):
    """Ladle's known failures run as non-strict xfail: they are reported, do not
    fail the run, and show up as XPASS once Ladle passes them."""
    known = _known_failures()
    for item in items:
        if item.name.endswith("[ladle]") and item.originalname in known:
            item.add_marker(pytest.mark.xfail(reason=f"ladle known failure: {known[item.originalname]}",
                                              strict=False))
