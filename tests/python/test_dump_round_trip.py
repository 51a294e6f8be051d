"""Issue #15: a Ladle database dumped with mariadb-dump as a user runs it,
restored into MariaDB with the mariadb client, dumped there, restored into a
fresh Ladle database and dumped again comes back identical.

The schema is a small application's: INT and BIGINT UNSIGNED AUTO_INCREMENT
keys (one row with id 0, one id past 2^63), a composite primary key, UNIQUE
and secondary keys (some with prefix lengths, one on TEXT), FOREIGN KEYs
(one from a table that sorts before its parent), generated columns, a
CHECK constraint, utf8mb4 text with emoji, quotes and backslashes, TEXT, BLOB and
VARBINARY holding every byte value, DECIMAL, DOUBLE, DATE, DATETIME(6),
TIME, TIMESTAMP, ENUM, JSON, NULLs, defaults, table and column comments, a view.

Checked, for each set of mariadb-dump options:
- every dump and every restore succeeds without a message on stderr;
- the three dumps are the same bytes (rows, CREATE TABLE statements,
  AUTO_INCREMENT counters), apart from the header lines that name the server
  and the database and the completion time, and the view's definition,
  which each server prints in its own normal form (see `_normalised`);
- the rows read back through a client are equal on all three databases
  (and the bytes and text are the ones inserted);
- the restored AUTO_INCREMENT counters and foreign keys work.

Needs MariaDB (LADLE_TEST_MARIADB_URL) and mariadb-dump / mariadb (CI
installs them with scripts/deps.sh); skipped without them."""

import dataclasses
import datetime
import json
import re
import shutil
import subprocess
import uuid
from decimal import Decimal

import pytest

SCHEMA = [
    """CREATE TABLE author (
      id INT UNSIGNED NOT NULL AUTO_INCREMENT,
      handle VARCHAR(64) NOT NULL,
      display_name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL
        COMMENT 'shown on posts',
      karma INT NOT NULL DEFAULT 0,
      created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
      PRIMARY KEY (id),
      UNIQUE KEY author_handle (handle),
      KEY author_karma (karma, id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='people who write'""",
    """CREATE TABLE post (
      id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
      author_id INT UNSIGNED NOT NULL,
      title VARCHAR(200) NOT NULL DEFAULT '',
      body TEXT,
      state ENUM('draft','live','gone') NOT NULL DEFAULT 'draft',
      score DECIMAL(12,4) DEFAULT NULL,
      ratio DOUBLE DEFAULT NULL,
      published DATE DEFAULT NULL,
      edited DATETIME(6) DEFAULT NULL,
      read_time TIME DEFAULT NULL,
      flags TINYINT(1) NOT NULL DEFAULT 0,
      meta JSON DEFAULT NULL,
      PRIMARY KEY (id),
      KEY post_author (author_id, published),
      CONSTRAINT post_author_fk FOREIGN KEY (author_id) REFERENCES author (id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    # Sorts before `post`, which it references: the dump creates it first.
    """CREATE TABLE bookmark (
      author_id INT UNSIGNED NOT NULL,
      post_id BIGINT UNSIGNED NOT NULL,
      note VARCHAR(100) DEFAULT 'n/a',
      PRIMARY KEY (author_id, post_id),
      KEY bookmark_post (post_id),
      CONSTRAINT bookmark_author FOREIGN KEY (author_id) REFERENCES author (id) ON DELETE CASCADE,
      CONSTRAINT bookmark_post FOREIGN KEY (post_id) REFERENCES post (id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE blob_store (
      k VARBINARY(16) NOT NULL,
      part SMALLINT NOT NULL,
      data BLOB,
      small VARBINARY(300) DEFAULT NULL,
      big BIGINT UNSIGNED NOT NULL DEFAULT 18446744073709551615,
      PRIMARY KEY (k, part)
    ) ENGINE=InnoDB""",
    # A TEXT key and a UNIQUE key with prefix lengths, generated columns
    # and a CHECK constraint. (Their expressions are written as MariaDB
    # prints them, with quoted names: Ladle keeps an expression as it was
    # written, MariaDB prints its own normal form.)
    """CREATE TABLE note (
      id INT NOT NULL AUTO_INCREMENT,
      body TEXT NOT NULL,
      title VARCHAR(300) NOT NULL,
      karma INT NOT NULL DEFAULT 0,
      positive INT AS (`karma` > 0) VIRTUAL,
      doubled BIGINT AS (`karma` * 2) STORED,
      PRIMARY KEY (id),
      KEY note_body (body(32)),
      UNIQUE KEY note_title (title(191), karma),
      CONSTRAINT karma_floor CHECK (`karma` > -1000)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    """CREATE VIEW live_posts AS
      SELECT p.id, p.title, a.handle FROM post p JOIN author a ON a.id = p.author_id
      WHERE p.state = 'live'""",
]

EVERY_BYTE = bytes(range(256))
EMOJI_NAME = "Ann O'Brien \U0001F600"
BACKSLASHES = 'Bob "the" \\ Builder\n\ttab'

# (statement, parameters): values go in as parameters, so the text is
# exactly the Python value.
DATA = [
    # sql_mode as a dump sets it: the row with id 0 keeps it.
    ("SET sql_mode = 'NO_AUTO_VALUE_ON_ZERO'", None),
    ("INSERT INTO author (id, handle, display_name, created_at) VALUES (0, 'anonymous', NULL,"
     " '2000-01-01 00:00:00')", None),
    ("SET sql_mode = DEFAULT", None),
    ("INSERT INTO author (handle, display_name, karma, created_at) VALUES (%s, %s, %s, %s)",
     ("ann", EMOJI_NAME, 10, "2020-01-02 03:04:05")),
    ("INSERT INTO author (handle, display_name, karma, created_at) VALUES (%s, %s, %s, %s)",
     ("bob\\", BACKSLASHES, -5, "2021-06-30 23:59:59")),
    ("INSERT INTO author (handle, display_name, karma, created_at) VALUES (%s, %s, %s, %s)",
     ("cat", None, 0, "1999-12-31 00:00:00")),
    ("INSERT INTO author (handle, display_name, karma, created_at) VALUES (%s, %s, %s, %s)",
     ("dee", "\u00dcn\u00efc\u00f6d\u00e9 \u00f1 \u65e5\u672c\u8a9e \U0001D11E", 2147483647,
      "2038-01-19 03:14:07")),
    ("INSERT INTO post (author_id, title, body, state, score, ratio, published, edited, read_time,"
     " flags) VALUES"
     " (1, 'Hello', 'first\\r\\npost; with ''quotes'' and `ticks`', 'live', 12345678.1234, 0.1,"
     "  '2020-01-03', '2020-01-03 10:11:12.123456', '00:05:00', 1),"
     " (1, 'Drafty', NULL, 'draft', -0.0001, -1.5e300, NULL, NULL, '-838:59:59', 0),"
     " (2, '', '', 'gone', 0, 0, '1000-01-01', '9999-12-31 23:59:59.999999', '838:59:59', 0),"
     " (4, 'Emoji \U0001F389\U0001F389', REPEAT('long text ', 200), 'live', NULL, NULL,"
     "  '2024-02-29', '2024-02-29 00:00:00.000001', '12:34:56', 1)", None),
    ("INSERT INTO post (id, author_id, title) VALUES (18446744073709551000, 0, 'big id')", None),
    ("UPDATE post SET meta = %s WHERE id = 1", ('{"tags": ["a", "\\u00e9"], "n": 1.5, "q": "\\"x\\""}',)),
    ("INSERT INTO bookmark VALUES (1, 1, DEFAULT), (2, 1, 'x'), (4, 18446744073709551000, NULL)",
     None),
    ("INSERT INTO blob_store (k, part, data, small, big) VALUES (%s, %s, %s, %s, %s)",
     (b"\x00", 0, EVERY_BYTE, b"\xff\xfe\xfd\xfc\x00'\\\"", 0)),
    ("INSERT INTO blob_store (k, part, data, small, big) VALUES (%s, %s, %s, %s, %s)",
     (b"\x00", 1, None, None, 18446744073709551615)),
    ("INSERT INTO blob_store (k, part, data, small, big) VALUES (%s, %s, %s, %s, %s)",
     (b"\xff'", 0, b"", b"", 42)),
    ("INSERT INTO blob_store (k, part, data, small, big) VALUES (%s, %s, %s, %s, %s)",
     (b"\\\x00", 7, b"\r\n\x1a", EVERY_BYTE[::-1][:200], 1)),
    ("INSERT INTO note (body, title, karma) VALUES ('b1', 't1', 5), ('b2', 't2', -5)", None),
]

READS = {
    "author": "SELECT * FROM author ORDER BY id",
    "post": "SELECT * FROM post ORDER BY id",
    "bookmark": "SELECT * FROM bookmark ORDER BY author_id, post_id",
    "blob_store": "SELECT * FROM blob_store ORDER BY k, part",
    "note": "SELECT * FROM note ORDER BY id",
    "live_posts": "SELECT * FROM live_posts ORDER BY id",
}

OPTION_SETS = {
    "default": [],
    "single-transaction": ["--single-transaction"],
    "skip-extended-insert": ["--skip-extended-insert"],
    "hex-blob": ["--hex-blob"],
    "routines-triggers-events": ["--routines", "--triggers", "--events"],
    "complete-insert": ["--complete-insert"],
}


def _tool(name):
    exe = shutil.which(name)
    if exe is None:
        pytest.skip(f"no {name} installed (scripts/deps.sh installs mariadb-client)")
    return exe


def _args(server):
    args = ["--no-defaults", "-h", server.host, "-P", str(server.port), "-u", server.user]
    return args + ([f"-p{server.password}"] if server.password else [])


def _dump(server, options, db):
    out = subprocess.run([_tool("mariadb-dump"), *_args(server), *options, db],
                         capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert out.stderr == b"", out.stderr.decode(errors="replace")
    return out.stdout


def _restore(server, dump, db):
    """`mariadb db < dump`, into a database created empty first."""
    _admin(server, f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`")
    out = subprocess.run([_tool("mariadb"), *_args(server), db], input=dump,
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert out.stderr == b"", out.stderr.decode(errors="replace")


def _admin(server, *sqls):
    conn = server.connect_pymysql(autocommit=True)
    try:
        with conn.cursor() as c:
            for sql in sqls:
                c.execute(sql)
    finally:
        conn.close()


def _normalised(dump, db):
    """The dump without what must differ between servers and runs:
    - the database's name (in `-- Host: ... Database: x` and the comments
      above routines and events): each copy is in a database of its own;
    - `-- Server version ...`: Ladle announces 8.0.34-ladle, MariaDB 10.11;
    - `-- Dump completed on <time>`;
    - a view's definition: each server stores a view's SELECT in its own
      normal form (MariaDB's `select `p`.`id` AS `id` ... from (`post` `p`
      join ...)`, with its ALGORITHM/DEFINER/SQL SECURITY and character set
      lines; Ladle's own rendering), so only the view's name is compared
      here and its rows are compared below."""
    text = dump.replace(f"`{db}`".encode(), b"`(database)`")
    text = text.replace(f"'{db}'".encode(), b"'(database)'")
    text = re.sub(rb"(?m)^(-- Host: .*Database: )" + re.escape(db.encode()) + rb"$",
                  rb"\1(database)", text)
    text = re.sub(rb"(?m)^-- Server version\t.*$", b"-- Server version (normalised)", text)
    text = re.sub(rb"(?m)^-- Dump completed on .*$", b"-- Dump completed (normalised)", text)
    final_view = re.compile(
        rb"(?ms)^(-- Final view structure for view `(?P<name>[^`]+)`\n--\n\n)(?P<body>.*?)(?=\n\n|\n/\*!40103 SET TIME_ZONE|\Z)")
    return final_view.sub(lambda m: m.group(1) + b"(view " + m.group("name") + b")", text)


def _rows(server, db):
    conn = server.connect_pymysql(autocommit=True)
    try:
        with conn.cursor() as c:
            # TIMESTAMPs read in UTC on both servers, as the dump writes them.
            c.execute("SET time_zone = '+00:00'")
            c.execute(f"USE `{db}`")
            out = {}
            for table, sql in READS.items():
                c.execute(sql)
                out[table] = c.fetchall()
            return out
    finally:
        conn.close()


def _first_lines_differing(a, b):
    for i, (x, y) in enumerate(zip(a.split(b"\n"), b.split(b"\n"))):
        if x != y:
            return f"line {i + 1}:\n  {x[:300]!r}\n  {y[:300]!r}"
    return f"lengths {len(a)} and {len(b)}"


@pytest.mark.parametrize("options", list(OPTION_SETS), ids=list(OPTION_SETS))
def test_dump_round_trip_through_mariadb(ladle_server, mariadb_server, options):
    opts = OPTION_SETS[options]
    base = "rt_" + options.replace("-", "_")[:20] + "_" + uuid.uuid4().hex[:6]
    origin, in_mariadb, back = base, base + "_m", base + "_l"
    _admin(ladle_server, f"CREATE DATABASE `{origin}`")
    try:
        conn = ladle_server.connect_pymysql(autocommit=True)
        with conn.cursor() as c:
            c.execute(f"USE `{origin}`")
            for sql in SCHEMA:
                c.execute(sql)
            for sql, params in DATA:
                c.execute(sql, params)
        conn.close()

        first = _dump(ladle_server, opts, origin)
        _restore(mariadb_server, first, in_mariadb)
        second = _dump(mariadb_server, opts, in_mariadb)
        _restore(ladle_server, second, back)
        third = _dump(ladle_server, opts, back)

        # Ladle's dump is what MariaDB dumps of the same data, and the copy
        # that went through MariaDB dumps as the original did.
        first, second, third = (_normalised(first, origin), _normalised(second, in_mariadb),
                                _normalised(third, back))
        assert first == second, _first_lines_differing(first, second)
        assert first == third, _first_lines_differing(first, third)

        rows = _rows(ladle_server, origin)
        assert _rows(mariadb_server, in_mariadb) == rows
        assert _rows(ladle_server, back) == rows
        authors = {r[1]: r for r in rows["author"]}
        assert authors["anonymous"][0] == 0
        assert authors["ann"][2] == EMOJI_NAME
        assert authors["bob\\"][2] == BACKSLASHES
        assert authors["dee"][4] == datetime.datetime(2038, 1, 19, 3, 14, 7)
        blobs = {(r[0], r[1]): r for r in rows["blob_store"]}
        assert blobs[(b"\x00", 0)][2] == EVERY_BYTE
        assert blobs[(b"\x00", 1)][4] == 18446744073709551615
        posts = {r[0]: r for r in rows["post"]}
        assert posts[1][5] == Decimal("12345678.1234")
        assert posts[3][9] == datetime.timedelta(hours=838, minutes=59, seconds=59)
        assert posts[18446744073709551000][1] == 0
        assert [r[0] for r in rows["live_posts"]] == [1, 4]
        assert json.loads(posts[1][11]) == {"tags": ["a", "\u00e9"], "n": 1.5, "q": '"x"'}

        # The restored counters continue where the original's were, the
        # keys hold and the JSON column still takes only JSON, on both
        # servers.
        for server, db in ((mariadb_server, in_mariadb), (ladle_server, back)):
            conn = dataclasses.replace(server, db=db).connect_pymysql(autocommit=True)
            with conn.cursor() as c:
                c.execute("INSERT INTO author (handle) VALUES ('eve')")
                assert c.lastrowid == 5, server.name
                with pytest.raises(Exception) as err:
                    c.execute("INSERT INTO bookmark VALUES (99, 1, NULL)")
                assert err.value.args[0] == 1452, server.name
                with pytest.raises(Exception) as err:
                    c.execute("UPDATE post SET meta = 'not json' WHERE id = 1")
                assert err.value.args[0] == 4025, server.name
            conn.close()
    finally:
        _admin(ladle_server, *(f"DROP DATABASE IF EXISTS `{d}`" for d in (origin, back)))
        _admin(mariadb_server, f"DROP DATABASE IF EXISTS `{in_mariadb}`")


def _load(server, dump):
    """`mariadb < dump` (the dump names its database)."""
    out = subprocess.run([_tool("mariadb"), *_args(server)], input=dump,
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert out.stderr == b"", out.stderr.decode(errors="replace")


@pytest.mark.parametrize("drop", [False, True], ids=["databases", "add-drop-database"])
def test_dump_databases_round_trip_through_mariadb(ladle_server, mariadb_server, drop):
    """`mariadb-dump --databases x`: the dump creates its database (CREATE
    DATABASE as SHOW CREATE DATABASE IF NOT EXISTS writes it) and USEs it,
    so the database keeps its name on every server; restored over an
    existing copy (with --add-drop-database, after dropping it)."""
    db = "rtdb_" + uuid.uuid4().hex[:8]
    opts = ["--databases", *(["--add-drop-database"] if drop else [])]
    _admin(ladle_server, f"CREATE DATABASE `{db}`")
    _admin(mariadb_server, f"CREATE DATABASE `{db}`")
    try:
        conn = ladle_server.connect_pymysql(autocommit=True)
        with conn.cursor() as c:
            c.execute(f"USE `{db}`")
            for sql in SCHEMA:
                c.execute(sql)
            for sql, params in DATA:
                c.execute(sql, params)
        conn.close()
        rows = _rows(ladle_server, db)
        first = _dump(ladle_server, opts, db)
        _load(mariadb_server, first)
        second = _dump(mariadb_server, opts, db)
        # Over the original, whose tables the dump drops and creates again.
        _load(ladle_server, second)
        third = _dump(ladle_server, opts, db)
        first, second, third = (_normalised(d, db) for d in (first, second, third))
        assert first == second, _first_lines_differing(first, second)
        assert first == third, _first_lines_differing(first, third)
        assert _rows(mariadb_server, db) == rows
        assert _rows(ladle_server, db) == rows
    finally:
        _admin(ladle_server, f"DROP DATABASE IF EXISTS `{db}`")
        _admin(mariadb_server, f"DROP DATABASE IF EXISTS `{db}`")


def test_dump_flush_logs(ladle_server):
    """`mariadb-dump --flush-logs --single-transaction` (a common backup
    recipe) sends COM_REFRESH, which Ladle refused with 1047: now it is
    FLUSH LOGS (RELOAD privilege; nothing to flush)."""
    db = "rtflush_" + uuid.uuid4().hex[:8]
    _admin(ladle_server, f"CREATE DATABASE `{db}`",
           f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY)", f"INSERT INTO `{db}`.t VALUES (1)")
    try:
        dump = _dump(ladle_server, ["--flush-logs", "--single-transaction"], db)
        assert b"INSERT INTO `t` VALUES\n(1);" in dump
    finally:
        _admin(ladle_server, f"DROP DATABASE IF EXISTS `{db}`")
