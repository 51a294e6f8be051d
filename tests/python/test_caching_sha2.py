"""caching_sha2_password with PyMySQL (MySQL 8's default plugin, Ladle
only: MariaDB has no server side for it). An account created IDENTIFIED
WITH caching_sha2_password logs in with MySQL 8's exchange: the first login
after start-up is a full one (over plaintext PyMySQL asks for the server's
RSA public key and sends the password RSA-OAEP encrypted, which needs the
`cryptography` package; over TLS it sends it in clear), later ones are fast.
A server of its own, with TLS, so the TLS path is exercised too."""

import datetime
import ipaddress
import os
import shutil
import ssl
import subprocess
import tempfile
from pathlib import Path

import pymysql
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from conftest import _free_port, _wait_ready, ladle_binary, ladle_logins


def _self_signed(directory):
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ladle-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = Path(directory, "cert.pem"), Path(directory, "key.pem")
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture(scope="module")
def tls_ladle():
    """A ladle offering TLS: (port, CA file, data directory)."""
    tmp = tempfile.mkdtemp(prefix="ladle-sha2-")
    cert, key = _self_signed(tmp)
    data = os.path.join(tmp, "data")
    port, metrics = _free_port(), _free_port()
    log = open(os.path.join(tmp, "ladle.log"), "wb")
    proc = subprocess.Popen(
        [str(ladle_binary()), "--listen", f"127.0.0.1:{port}", "--data-dir", data,
         "--metrics-listen", f"127.0.0.1:{metrics}", "--durability", "memory",
         "--tls-cert", str(cert), "--tls-key", str(key)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_ready(port, proc, log.name)
        root = pymysql.connect(host="127.0.0.1", port=port, user="root", password="")
        with root.cursor() as c:
            for user, pw in [("plain8", "pw-plain"), ("tls8", "pw-tls"), ("known8", "pw-known")]:
                c.execute(f"CREATE USER '{user}'@'%' IDENTIFIED WITH caching_sha2_password BY '{pw}'")
        root.close()
        yield port, str(cert), data, metrics
    finally:
        proc.kill()
        proc.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _current_user(conn):
    with conn.cursor() as c:
        c.execute("SELECT CURRENT_USER()")
        return c.fetchone()[0]


def test_rsa_full_authentication_then_fast(tls_ladle):
    port, _, _, metrics = tls_ladle
    # PyMySQL keeps the public key it asked for: only a full login over
    # plaintext asks; the next one is fast and needs none. (PyMySQL
    # prefers TLS when the server offers it: plaintext is asked for.)
    for attempt, asked, method in (("full", True, "sha2_full_rsa"), ("fast", False, "sha2_fast")):
        before = ladle_logins(metrics)
        conn = pymysql.connect(host="127.0.0.1", port=port, user="plain8", password="pw-plain",
                               ssl_disabled=True)
        assert _current_user(conn) == "plain8@%", attempt
        key = conn.server_public_key or b""
        assert key.startswith(b"-----BEGIN PUBLIC KEY-----") == asked, (attempt, key)
        conn.close()
        after = ladle_logins(metrics)
        assert after[method] == before[method] + 1, (attempt, before, after)
    with pytest.raises(pymysql.err.OperationalError) as refused:
        pymysql.connect(host="127.0.0.1", port=port, user="plain8", password="wrong",
                        ssl_disabled=True)
    assert refused.value.args[0] == 1045


def test_tls_full_authentication_sends_the_password_in_clear(tls_ladle):
    port, ca, _, metrics = tls_ladle
    before = ladle_logins(metrics)
    conn = pymysql.connect(host="127.0.0.1", port=port, user="tls8", password="pw-tls",
                           ssl={"ca": ca})
    assert _current_user(conn) == "tls8@%"
    # A full authentication (nothing cached yet), over TLS: no key asked for.
    assert isinstance(conn._sock, ssl.SSLSocket)
    assert conn.server_public_key is None
    conn.close()
    after = ladle_logins(metrics)
    assert after["sha2_full_tls"] == before["sha2_full_tls"] + 1, (before, after)


def test_server_public_key_from_status_and_variables(tls_ladle):
    """A client given the public key beforehand (PyMySQL's
    server_public_key) encrypts without asking for it; the key is what
    SHOW STATUS shows and what the data directory holds."""
    port, _, data, _ = tls_ladle
    root = pymysql.connect(host="127.0.0.1", port=port, user="root", password="")
    with root.cursor() as c:
        c.execute("SHOW STATUS LIKE 'Caching_sha2_password_rsa_public_key'")
        name, pem = c.fetchone()
        c.execute("SELECT @@caching_sha2_password_public_key_path, "
                  "@@caching_sha2_password_private_key_path")
        public_path, private_path = c.fetchone()
    root.close()
    assert name == "Caching_sha2_password_rsa_public_key"
    assert pem.startswith("-----BEGIN PUBLIC KEY-----")
    assert Path(public_path).read_text() == pem
    assert Path(private_path).parent == Path(public_path).parent == Path(data).resolve()
    conn = pymysql.connect(host="127.0.0.1", port=port, user="known8", password="pw-known",
                           server_public_key=pem.encode(), ssl_disabled=True)
    assert _current_user(conn) == "known8@%"
    conn.close()
