"""Go's database/sql (go-sql-driver/mysql, Debian's package) against each
target: tests/go/clients.go prepares and closes a statement for every
parameterized query over a pool of connections, as Go programs do, and
checks the values come back typed and byte-exact."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

GO_SOURCE = Path(__file__).resolve().parents[1] / "go" / "clients.go"
GOPATH = "/usr/share/gocode"  # Debian's golang-github-go-sql-driver-mysql-dev


@pytest.fixture(scope="session")
def go_client():
    go = shutil.which("go")
    if go is None or not Path(GOPATH, "src/github.com/go-sql-driver/mysql").is_dir():
        pytest.skip("go and golang-github-go-sql-driver-mysql-dev not installed (scripts/deps.sh installs them)")
    out = Path(tempfile.mkdtemp(prefix="ladle-go-")) / "clients"
    env = dict(os.environ, GOPATH=GOPATH, GO111MODULE="off", GOFLAGS="",
               GOCACHE=os.environ.get("GOCACHE", str(Path.home() / ".cache" / "go-build")))
    subprocess.run([go, "build", "-o", str(out), str(GO_SOURCE)], check=True, env=env,
                   stdin=subprocess.DEVNULL)
    yield out
    shutil.rmtree(out.parent, ignore_errors=True)


def test_go_database_sql(target, go_client):
    dsn = f"{target.user}:{target.password}@tcp({target.host}:{target.port})/"
    run = subprocess.run([str(go_client), dsn], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout + run.stderr


def test_go_caching_sha2_password_account(ladle_server, go_client):
    """go-sql-driver/mysql as an account IDENTIFIED WITH
    caching_sha2_password (Ladle only: MariaDB has no server side for it):
    switched to that plugin, its first login is a full authentication over
    plaintext (it asks for the server's RSA public key and sends the
    password encrypted), the pool's later connections are fast."""
    import pymysql

    from conftest import ladle_logins

    root = pymysql.connect(host=ladle_server.host, port=ladle_server.port, user="root",
                           password="", connect_timeout=10)
    with root.cursor() as c:
        c.execute("CREATE USER 'go8'@'%' IDENTIFIED WITH caching_sha2_password BY 'go-pw'")
        c.execute("GRANT ALL ON *.* TO 'go8'@'%'")
    root.close()
    dsn = f"go8:go-pw@tcp({ladle_server.host}:{ladle_server.port})/"
    before = ladle_logins(ladle_server.metrics_port)
    run = subprocess.run([str(go_client), dsn], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout + run.stderr
    after = ladle_logins(ladle_server.metrics_port)
    # Not switched to the native plugin: RSA full authentication first
    # (more than one if the pool dialled at once), then fast.
    assert after["sha2_full_rsa"] > before["sha2_full_rsa"], (before, after)
    assert after["native"] == before["native"], (before, after)
    wrong = subprocess.run([str(go_client), dsn.replace("go-pw", "nope")], capture_output=True,
                           text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert wrong.returncode != 0 and "1045" in wrong.stdout + wrong.stderr, wrong.stdout + wrong.stderr
