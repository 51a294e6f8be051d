"""mariadb-dump --single-transaction of a small database, restored with the
mariadb client into another database of the same server: the dump runs
without an error (REPEATABLE READ with a consistent snapshot, executable
comments, SQL_NO_CACHE, information_schema.FILES, @@unique_checks) and the
restored tables equal the originals (rows, DDL, AUTO_INCREMENT, keys)."""

import shutil
import subprocess

import pytest

SETUP = [
    "CREATE TABLE cust (id INT PRIMARY KEY AUTO_INCREMENT, name VARCHAR(20) NOT NULL,"
    " born DATE, bal DECIMAL(10,2), UNIQUE KEY (name))",
    "CREATE TABLE ord (id INT PRIMARY KEY, cust_id INT NOT NULL, note TEXT, amount DOUBLE,"
    " FOREIGN KEY (cust_id) REFERENCES cust(id))",
    "INSERT INTO cust (name, born, bal) VALUES ('ann', '1990-01-02', 10.5),"
    " ('bo''b', NULL, -3), ('c\\\\d', '2000-12-31', 0)",
    "INSERT INTO ord VALUES (1, 1, 'x', 1.5), (2, 1, NULL, 2.25), (3, 2, 'y\\nz', 0)",
]

CHECKS = [
    "SELECT id, name, born, bal FROM cust ORDER BY id",
    "SELECT id, cust_id, note, amount FROM ord ORDER BY id",
    "SHOW CREATE TABLE ord",
]


def _tool(name):
    exe = shutil.which(name)
    if exe is None:
        pytest.skip(f"no {name} installed")
    return exe


def _args(target):
    return ["--no-defaults", "-h", target.host, "-P", str(target.port), "-u", target.user]


def test_dump_single_transaction_and_restore(target):
    dump, client = _tool("mariadb-dump"), _tool("mariadb")
    conn = target.connect_pymysql(autocommit=True)
    with conn.cursor() as c:
        for sql in SETUP:
            c.execute(sql)
    out = subprocess.run([dump, *_args(target), "--single-transaction", target.db],
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    restored = target.db + "_r"
    with conn.cursor() as c:
        c.execute(f"DROP DATABASE IF EXISTS `{restored}`")
        c.execute(f"CREATE DATABASE `{restored}`")
    try:
        load = subprocess.run([client, *_args(target), "-D", restored], input=out.stdout,
                              capture_output=True, text=True, timeout=60)
        assert load.returncode == 0, load.stderr
        with conn.cursor() as c:
            for sql in CHECKS:
                c.execute(f"USE `{target.db}`")
                c.execute(sql)
                before = c.fetchall()
                c.execute(f"USE `{restored}`")
                c.execute(sql)
                assert c.fetchall() == before, sql
            # The restored AUTO_INCREMENT counter and keys work.
            c.execute("INSERT INTO cust (name) VALUES ('dee')")
            assert c.lastrowid == 4
            with pytest.raises(Exception) as err:
                c.execute("INSERT INTO ord VALUES (9, 99, NULL, NULL)")
            assert err.value.args[0] == 1452
    finally:
        with conn.cursor() as c:
            c.execute(f"DROP DATABASE IF EXISTS `{restored}`")
        conn.close()
